//! What the benchmarks share: Git repositories and a `git daemon` to fetch them from,
//! the CPU time and memory of a process from `/proc`, and the figures' arithmetic.
//! Each bench is its own crate and uses part of it.
#![allow(dead_code)]

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------
// Git.

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
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

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A `git daemon` serving a directory, killed by PID on drop.
pub struct GitDaemon {
    child: std::process::Child,
    pub port: u16,
}

impl GitDaemon {
    pub fn start(root: &Path) -> GitDaemon {
        let exec = Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("git --exec-path");
        let binary = PathBuf::from(String::from_utf8_lossy(&exec.stdout).trim()).join("git-daemon");
        let port = free_port();
        // The daemon itself, not `git daemon`, so that its PID is the one killed.
        let child = Command::new(binary)
            .args([
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", root.display()),
                &root.display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start git daemon");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "git daemon never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        GitDaemon { child, port }
    }
}

impl GitDaemon {
    /// The `git://` URL of repository `name` under the daemon's root.
    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// git's smart HTTP (`git http-backend` behind `tests/fixtures/git-http-host.py`)
/// serving a directory, killed by PID on drop: what App objects may name (`http://`).
/// `env` sets the host's options (`GIT_HOST_STATUS`, `GIT_HOST_LOG`, …).
pub struct GitHttp {
    child: std::process::Child,
    pub port: u16,
}

impl GitHttp {
    pub fn start(root: &Path, env: &[(&str, &str)]) -> GitHttp {
        use std::io::BufRead;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/git-http-host.py");
        let mut command = Command::new("python3");
        command
            .arg(script)
            .arg(root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("start the python3 git host");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the port line");
        let port = line.trim().parse().expect("a port");
        GitHttp { child, port }
    }

    /// The `http://` URL of repository `name` under the host's root.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------
// A process, from /proc.

pub fn proc_stat_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // Fields after the command name (which may hold spaces) start after ") ".
    let rest = &stat[stat.rfind(')').expect("stat has a command") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line; 12 and 13 after the name.
    let utime: u64 = fields[11].parse().expect("utime");
    let stime: u64 = fields[12].parse().expect("stime");
    utime + stime
}

pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// A figure of `/proc/<pid>/status` (`VmRSS`, `RssAnon`, `Threads`...), as written
/// (kB for memory).
pub fn proc_status(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("the field is present")
}

/// A memory figure (`VmRSS`, `VmHWM`, `RssAnon`) of the process, in MiB.
pub fn proc_status_mib(pid: u32, field: &str) -> f64 {
    proc_status(pid, field) / 1024.0
}

// ---------------------------------------------------------------------------------
// Renderer processes.

/// A wrapper around `real` that logs the nanoseconds each run takes, one line per
/// process, to `log`: every renderer process the render stage starts is counted.
pub fn counting_wrapper(dir: &Path, name: &str, real: &str, log: &Path) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nstart=$(date +%s%N)\n\"{real}\" \"$@\"\nrc=$?\necho $(( $(date +%s%N) - start )) >> \"{}\"\nexit $rc\n",
            log.display()
        ),
    )
    .expect("write wrapper");
    let mut perms = std::fs::metadata(&path).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
    path
}

/// The processes logged so far and their total time.
pub fn processes(log: &Path) -> (usize, Duration) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let ns: Vec<u64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    (ns.len(), Duration::from_nanos(ns.iter().sum()))
}

/// Helm: `TETHER_HELM`, else the one `.ci/install-helm` installs, else `helm` from PATH.
pub fn helm_program() -> String {
    if let Ok(helm) = std::env::var("TETHER_HELM") {
        return helm;
    }
    let installed = concat!(env!("CARGO_MANIFEST_DIR"), "/target/tools/bin/helm");
    if Path::new(installed).is_file() {
        installed.to_string()
    } else {
        "helm".to_string()
    }
}

// ---------------------------------------------------------------------------------
// Figures.

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Nearest-rank percentile of samples in milliseconds.
pub fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

pub fn verdict(pass: bool) -> &'static str {
    if pass { "pass" } else { "FAIL" }
}

/// Append commits to `refs/heads/main` with git fast-import.
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
