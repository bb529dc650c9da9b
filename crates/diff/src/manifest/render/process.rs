//! Running a renderer (kustomize, helm) bounded in time: in a process group of its
//! own, so that when its time is up, or when it has finished, nothing it started (a
//! `git` or `ssh` kustomize spawned, a plugin helm ran) outlives the render and holds
//! the pass slot, a pipe or the network.

use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::super::error::{Location, ManifestError};

/// How long one render may run before its whole process group is killed: the
/// issue's default (#24), between Argo CD's repo server (`ARGOCD_EXEC_TIMEOUT`, 90 s)
/// and Helm's own `--timeout` (5 min); a local build takes well under a second.
pub const DEFAULT_RENDER_TIMEOUT: Duration = Duration::from_secs(120);

/// What a renderer printed and how it ended.
#[derive(Debug)]
pub(super) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a renderer gave no answer.
#[derive(Debug)]
pub(super) enum RunError {
    /// The program is not on PATH.
    Missing,
    /// It could not be started or waited for.
    Io(std::io::Error),
    /// It ran past the timeout; it and every process of its group were killed.
    TimedOut,
}

/// Runs `command` with no input, collecting its output, and kills its process group
/// after `timeout`. The group is killed when the leader ends too: a render leaves
/// no process behind, whatever it started.
pub(super) fn run(command: &mut Command, timeout: Duration) -> Result<Finished, RunError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => RunError::Missing,
            _ => RunError::Io(e),
        })?;
    // The leader's pid is its group's id (`process_group(0)`).
    let group = child.id() as libc::pid_t;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let (exited, ended) = mpsc::channel();
    thread::spawn(move || {
        let _ = exited.send(wait_without_reaping(group));
    });
    let timed_out = matches!(
        ended.recv_timeout(timeout),
        Err(mpsc::RecvTimeoutError::Timeout)
    );
    // The leader is not reaped yet (it is at most a zombie), so the group's id cannot
    // have been given to another process: the signal reaches only this render's.
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is
    // shared with it.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
    let status = child.wait().map_err(RunError::Io)?;
    // The pipes close once every process of the group is gone.
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if timed_out {
        return Err(RunError::TimedOut);
    }
    Ok(Finished {
        status,
        stdout,
        stderr,
    })
}

/// [`run`] for the render stage: `at` names what is rendered in the error.
pub(super) fn render(
    command: &mut Command,
    timeout: Duration,
    at: &Location,
) -> Result<Finished, ManifestError> {
    let program = command.get_program().to_string_lossy().into_owned();
    run(command, timeout).map_err(|e| match e {
        RunError::Missing => ManifestError::RendererMissing {
            at: at.clone(),
            program,
        },
        RunError::Io(source) => ManifestError::Io {
            at: at.clone(),
            source,
        },
        RunError::TimedOut => ManifestError::RenderTimeout {
            at: at.clone(),
            program,
            timeout,
        },
    })
}

/// Reads a pipe to its end on a thread of its own: a renderer blocked on a full
/// pipe would otherwise look like one that hangs.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Blocks until the process `pid` has ended, leaving it to be reaped by
/// `Child::wait` (`WNOWAIT`): until then its pid, and so its group's id, stay taken.
fn wait_without_reaping(pid: libc::pid_t) -> std::io::Result<()> {
    loop {
        // SAFETY: waitid writes only into the siginfo it is given.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `pid` still runs once a SIGKILL sent to it has had time to land
    /// (delivery is asynchronous); a zombie waiting for its reaper has ended.
    fn alive(pid: &str) -> bool {
        let running = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| stat.rsplit_once(") ")?.1.chars().next())
                .is_some_and(|state| state != 'Z' && state != 'X')
        };
        (0..500).all(|_| {
            let still = running();
            if still {
                thread::sleep(Duration::from_millis(10));
            }
            still
        })
    }

    /// Runs a shell that starts `child` in the background, then does `then`; what
    /// `run` answered, and the child's pid.
    fn with_child(
        child: &str,
        then: &str,
        timeout: Duration,
    ) -> (Result<Finished, RunError>, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let pid_file = dir.path().join("child.pid");
        let script = format!("{child} & echo $! > {}; {then}", pid_file.display());
        let got = run(Command::new("sh").args(["-c", &script]), timeout);
        let pid = std::fs::read_to_string(&pid_file).expect("the script started its child");
        (got, pid.trim().to_string())
    }

    #[test]
    fn a_renderer_past_its_time_is_killed_with_the_children_it_started() {
        let (got, child) = with_child("sleep 300", "wait", Duration::from_millis(500));
        assert!(matches!(got, Err(RunError::TimedOut)), "{got:?}");
        assert!(!alive(&child), "the renderer's child outlived it");
    }

    #[test]
    fn a_renderer_that_ends_leaves_no_process_behind_and_its_output_is_kept() {
        // The background child keeps no pipe open: only the group kill ends it.
        let (got, child) = with_child(
            "sleep 300 >/dev/null 2>&1",
            "echo out; echo err >&2; exit 3",
            Duration::from_secs(60),
        );
        let done = got.expect("runs");
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout, b"out\n");
        assert_eq!(done.stderr, b"err\n");
        assert!(!alive(&child), "the renderer's child outlived it");
    }

    #[test]
    fn a_program_not_on_path_is_missing() {
        let got = run(
            &mut Command::new("tether-no-such-renderer"),
            Duration::from_secs(5),
        );
        assert!(matches!(got, Err(RunError::Missing)), "{got:?}");
    }
}
