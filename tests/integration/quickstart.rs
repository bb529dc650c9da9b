//! The README's first command, `examples/quickstart/quickstart.sh` (issue #6), run as a
//! person runs it: the app synced, a live change shown (issue #31: the field, both
//! values, who changed it, the dashboard) and then healed, every process it started
//! stopped and its temporary directory removed, after `--exit` and after Ctrl-C. The
//! pause on the drift is skipped (`QUICKSTART_PAUSE=0`).

use std::io::{BufRead as _, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Far more than a run takes (about two seconds): it only bounds a hung script.
const RUN_LIMIT: Duration = Duration::from_secs(50);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart/quickstart.sh")
}

fn quickstart(tmp: &Path) -> Command {
    let mut command = Command::new("bash");
    command
        .arg(script())
        .env("TETHER", env!("CARGO_BIN_EXE_tether"))
        .env("TMPDIR", tmp)
        .env("QUICKSTART_PAUSE", "0")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null());
    command
}

/// The `host:port` after `prefix` on the line that starts with `label`.
fn address(output: &str, label: &str, prefix: &str) -> String {
    let line = output
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no line starting {label:?} in:\n{output}"));
    let rest = line
        .split_whitespace()
        .find_map(|word| word.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix} URL on {line:?}"));
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// Both servers the script started are gone: nothing accepts on their ports.
fn assert_stopped(output: &str) {
    for (label, prefix) in [("Status API:", "http://"), ("Sandbox:", "https://")] {
        let addr = address(output, label, prefix);
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(&addr).is_ok() {
            assert!(
                Instant::now() < deadline,
                "{label} {addr} still accepts connections after the script ended"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn assert_dir_removed(tmp: &Path) {
    let left: Vec<_> = std::fs::read_dir(tmp)
        .expect("read TMPDIR")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "the script left {left:?} in TMPDIR");
}

/// The demo's story, line by line as the script prints it.
fn assert_synced_and_healed(stdout: &str) {
    let lines: Vec<&str> = stdout.lines().collect();
    let at = |wanted: &str| {
        lines
            .iter()
            .position(|l| *l == wanted)
            .unwrap_or_else(|| panic!("no line {wanted:?} in:\n{stdout}"))
    };
    let synced = at("synced: hello is Synced and Healthy");
    let drift = at("drift: kubectl set deployment/hello-web replicas to 5 (Git says 2)");
    let healed = at("healed: tether set deployment/hello-web replicas back to 2");
    assert!(synced < drift && drift < healed, "out of order:\n{stdout}");
    // Issue #31: between the drift and the heal, the demo stays on the drift: the
    // field, who changed it, both values, the app OutOfSync and where the dashboard
    // shows it.
    let between = |wanted: &dyn Fn(&str) -> bool, what: &str| {
        let found = lines[drift..healed].iter().any(|l| wanted(l));
        assert!(found, "no {what} between the drift and the heal:\n{stdout}");
    };
    between(
        &|l| l.starts_with("  ~ spec.replicas (changed by kubectl-patch (Update)"),
        "drifted field with who changed it",
    );
    between(&|l| l == "-  replicas: 5", "live value");
    between(&|l| l == "+  replicas: 2", "desired value");
    between(
        &|l| l.starts_with("hello") && l.split_whitespace().nth(1) == Some("OutOfSync"),
        "OutOfSync status row",
    );
    between(
        &|l| l.starts_with("dashboard: http://127.0.0.1:") && l.contains("/#/apps/hello"),
        "dashboard link",
    );
    // `tether status` tables, before the drift and after the heal.
    let tables: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() >= 3 && cols[0] == "hello" && cols[1] == "Synced" && cols[2] == "Healthy"
        })
        .map(|(i, _)| i)
        .collect();
    assert!(
        tables.iter().any(|&i| i < synced) && tables.iter().any(|&i| i > healed),
        "expected a Synced/Healthy status row before the drift and after the heal:\n{stdout}"
    );
}

#[test]
fn quickstart_syncs_heals_and_cleans_up_with_exit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let out = quickstart(tmp.path())
        .arg("--exit")
        .output()
        .expect("bash runs the quickstart");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        started.elapsed() < RUN_LIMIT,
        "took {:?}",
        started.elapsed()
    );
    assert_synced_and_healed(&stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("kubectl:     export KUBECONFIG=")),
        "{stdout}"
    );
    // Issue #17: the tour points at the dashboard.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("Dashboard:   http://127.0.0.1:") && l.contains("/  (open it")),
        "{stdout}"
    );
    assert_stopped(&stdout);
    assert_dir_removed(tmp.path());
}

/// A running quickstart. Dropped early (a failed assertion), it gets SIGTERM first, so
/// its trap still stops what it started, and SIGKILL only if that does not work.
struct Running(std::process::Child);

impl Running {
    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.0.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal}");
    }

    fn wait_for_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.0.try_wait().expect("wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            if self.wait_for_exit(Duration::from_secs(25)).is_none() {
                let _ = self.0.kill();
            }
        }
    }
}

/// Runs the quickstart without `--exit` until it says it keeps running, sends it
/// `signal`, and checks it stops everything and exits with `code`.
fn keeps_running_until(signal: &str, code: i32) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let stderr_path = logs.path().join("stderr");
    // A test suite started in the background (nohup, `&` in a script, some CI runners)
    // inherits SIGINT ignored, and bash cannot trap a signal ignored on entry; a
    // terminal's Ctrl-C never arrives that way, so give the script SIGINT's default back.
    let mut command = Command::new("env");
    command
        .args(["--default-signal=INT", "bash"])
        .arg(script())
        .env("TETHER", env!("CARGO_BIN_EXE_tether"))
        .env("TMPDIR", tmp.path())
        .env("QUICKSTART_PAUSE", "0")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"));
    let mut running = Running(command.spawn().expect("bash runs the quickstart"));
    let stdout = running.0.stdout.take().expect("stdout");
    // Read on a thread so a script that never gets there fails the test, not hangs it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            seen.push_str(&line);
            seen.push('\n');
            if line == "==> Running until Ctrl-C" {
                let _ = tx.send(seen.clone());
            }
        }
        let _ = tx.send(seen);
    });
    let seen = rx
        .recv_timeout(RUN_LIMIT)
        .expect("the quickstart reaches `Running until Ctrl-C`");
    assert!(
        seen.ends_with("==> Running until Ctrl-C\n"),
        "the quickstart stopped before running on:\n{seen}\nstderr:\n{}",
        std::fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    assert_synced_and_healed(&seen);
    // Both servers are still up while it runs.
    for (label, prefix) in [("Status API:", "http://"), ("Sandbox:", "https://")] {
        let addr = address(&seen, label, prefix);
        assert!(TcpStream::connect(&addr).is_ok(), "{label} {addr} is down");
    }

    running.signal(signal);
    // The script gives each process 10 s to stop before SIGKILL.
    let status = running
        .wait_for_exit(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the quickstart did not stop within 30 s of SIG{signal}"));
    assert_eq!(status.code(), Some(code), "exit status after SIG{signal}");
    assert_stopped(&seen);
    assert_dir_removed(tmp.path());
}

#[test]
fn quickstart_keeps_running_until_ctrl_c_then_stops_everything() {
    // 128 + SIGINT, as a shell reports a command stopped by Ctrl-C.
    keeps_running_until("INT", 130);
}

#[test]
fn quickstart_stops_everything_on_sigterm() {
    keeps_running_until("TERM", 143);
}

/// Regression (issue #31): the build ran `cargo build --quiet`, minutes with no
/// output on a busy machine. The script now lets cargo show its progress.
#[test]
fn quickstart_builds_with_cargos_progress_shown() {
    let script = std::fs::read_to_string(script()).expect("the script");
    let builds: Vec<&str> = script
        .lines()
        .filter(|l| l.contains("cargo build"))
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    assert!(!builds.is_empty(), "the script builds tether");
    assert!(
        builds
            .iter()
            .all(|l| !l.contains("--quiet") && !l.contains(" -q")),
        "{builds:?}"
    );
}

#[test]
fn quickstart_refuses_unknown_arguments() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = quickstart(tmp.path())
        .arg("--bogus")
        .output()
        .expect("bash runs the quickstart");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown argument '--bogus'") && stderr.contains("Usage:"),
        "{stderr}"
    );
    assert_dir_removed(tmp.path());
}
