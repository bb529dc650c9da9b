//! Real Git: repositories on disk, `git daemon` (`git://`) and git's smart HTTP
//! (`git http-backend` behind `tests/fixtures/git-http-host.py`), each killed by PID
//! when dropped.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::free_port;

/// How long a server may take to say it listens.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs real `git` in `dir` with a fixed identity and no user or system config;
/// returns its trimmed stdout and fails the test if git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Git repository on disk to commit manifests into (branch `main`).
pub struct GitRepo {
    pub dir: PathBuf,
}

impl GitRepo {
    pub fn init(dir: PathBuf) -> GitRepo {
        std::fs::create_dir_all(&dir).expect("mkdir");
        git(&dir, &["init", "-q", "-b", "main"]);
        GitRepo { dir }
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, content).expect("write");
    }

    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.dir.join(rel)).expect("remove");
    }

    /// Commits everything; returns the commit SHA.
    pub fn commit(&self, subject: &str) -> String {
        git(&self.dir, &["add", "-A"]);
        git(&self.dir, &["commit", "-q", "--allow-empty", "-m", subject]);
        git(&self.dir, &["rev-parse", "HEAD"])
    }
}

fn git_daemon_binary() -> PathBuf {
    let out = Command::new("git")
        .arg("--exec-path")
        .output()
        .expect("git --exec-path");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("git-daemon")
}

/// Ports `git daemon` is tried on before the test gives up; each miss means another
/// process took the free port between the probe and the daemon's bind.
const PORT_TRIES: usize = 5;

/// A real `git daemon` serving `root`, killed by PID on drop.
pub struct GitDaemon {
    child: Child,
    port: u16,
    root: PathBuf,
}

impl GitDaemon {
    pub fn start(root: &Path) -> Self {
        for _ in 0..PORT_TRIES {
            let port = free_port();
            if let Some(child) = listen(root, port) {
                return GitDaemon {
                    child,
                    port,
                    root: root.to_path_buf(),
                };
            }
        }
        panic!("git daemon found no free port in {PORT_TRIES} tries");
    }

    /// Serves again, on the port it had, after [`stop`](Self::stop): a Git host back
    /// from an outage, at the same URL. Fails the test if another process took the port
    /// meanwhile.
    pub fn restart(&mut self) {
        self.stop();
        self.child = listen(&self.root, self.port)
            .unwrap_or_else(|| panic!("git daemon cannot listen on {} again", self.port));
    }

    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}", self.port)
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A `git daemon` listening on `port`, or None when it could not bind it.
fn listen(root: &Path, port: u16) -> Option<Child> {
    // `git daemon` would run git-daemon as a child and leave it behind when
    // killed: start the daemon itself so its PID is the one we kill.
    let mut child = Command::new(git_daemon_binary())
        .args([
            "--verbose",
            "--reuseaddr",
            "--export-all",
            "--listen=127.0.0.1",
            &format!("--port={port}"),
            &format!("--base-path={}", root.display()),
            &root.display().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start git daemon");
    if ready_to_rumble(&mut child) {
        return Some(child);
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Whether the daemon says `Ready to rumble`, which it logs (with `--verbose`) once
/// every socket listens; a port someone else holds makes it exit instead, so a
/// listener on the port is then this daemon, not another process. Its log is drained
/// for as long as it runs, so it never blocks on a full pipe.
fn ready_to_rumble(daemon: &mut Child) -> bool {
    let stderr = daemon.stderr.take().expect("the daemon's stderr");
    let (ready, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut ready = Some(ready);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("Ready to rumble")
                && let Some(ready) = ready.take()
            {
                let _ = ready.send(());
            }
        }
    });
    // An exit closes the log, which drops the sender: no need to wait out the timeout.
    listening.recv_timeout(READY_TIMEOUT).is_ok()
}

/// git's smart-HTTP server (`git http-backend`) behind a small python CGI host
/// (`tests/fixtures/git-http-host.py`), killed by PID on drop. With a log, every
/// request it answers is a line of [`HttpGit::requests`].
pub struct HttpGit {
    child: Child,
    pub port: u16,
    log: Option<tempfile::NamedTempFile>,
}

impl HttpGit {
    /// Serves `root`, requiring `auth` (`user:password`) when given.
    pub fn start(root: &Path, auth: Option<&str>) -> Self {
        let env: Vec<(&str, &str)> = auth.map(|a| ("GIT_HOST_AUTH", a)).into_iter().collect();
        Self::start_with(root, &env, false)
    }

    /// Serves `root` with the host's environment options (`GIT_HOST_AUTH`,
    /// `GIT_HOST_STATUS`, `GIT_HOST_REDIRECT`), logging requests when `logged`.
    pub fn start_with(root: &Path, env: &[(&str, &str)], logged: bool) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/git-http-host.py");
        let log = logged.then(|| tempfile::NamedTempFile::new().expect("log file"));
        let mut cmd = Command::new("python3");
        cmd.arg(script)
            .arg(root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for key in [
            "GIT_HOST_AUTH",
            "GIT_HOST_STATUS",
            "GIT_HOST_REDIRECT",
            "GIT_HOST_LOG",
        ] {
            cmd.env_remove(key);
        }
        for (key, value) in env {
            cmd.env(key, value);
        }
        if let Some(log) = &log {
            cmd.env("GIT_HOST_LOG", log.path());
        }
        let mut child = cmd.spawn().expect("start python3 CGI host");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("port line");
        // The host prints its port once it listens on it.
        let port: u16 = line.trim().parse().expect("port");
        HttpGit { child, port, log }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// The requests answered so far, one line each:
    /// `METHOD PATH auth=none|user:NAME|refused:NAME status=N`.
    pub fn requests(&self) -> Vec<String> {
        let log = self.log.as_ref().expect("started with a log");
        std::fs::read_to_string(log.path())
            .expect("read the log")
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for HttpGit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Appends commits to `refs/heads/main` of `repo` with `git fast-import`: thousands of
/// files or commits in one process, for benchmarks.
pub fn fast_import(repo: &Path, stream: &[u8]) {
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(repo)
        .stdin(Stdio::piped())
        .spawn()
        .expect("fast-import");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stream)
        .expect("feed fast-import");
    assert!(child.wait().expect("wait").success());
}
