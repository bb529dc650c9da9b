//! The tether processes: started, their CPU time and memory read from /proc, and one
//! fleet served by them.

use super::*;

/// One `tether serve` process and where it answers.
pub(super) struct Replica {
    pub(super) child: tokio::process::Child,
    pub(super) pid: u32,
    pub(super) url: String,
    pub(super) log: PathBuf,
}

pub(super) fn start_replica(
    dir: &Path,
    index: usize,
    kubeconfig: &Path,
    config: &dyn Fn(u16) -> String,
) -> Replica {
    let port = free_port();
    let config_path = dir.join(format!("tether-{index}.yaml"));
    std::fs::write(&config_path, config(port)).expect("write config");
    let log = dir.join(format!("serve-{index}.log"));
    let child = tether_testkit::serve::command(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tether")),
        &config_path,
        kubeconfig,
        &dir.join(format!("git-cache-{index}")),
        &log,
    )
    .env(PEER_TOKEN_ENV, "scale-bench-peer-token")
    .spawn()
    .expect("tether serve starts");
    let pid = child.id().expect("tether serve runs");
    Replica {
        child,
        pid,
        url: format!("http://127.0.0.1:{port}"),
        log,
    }
}

impl Replica {
    pub(super) fn exited(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_some()
    }

    pub(super) async fn stop(mut self) {
        // SAFETY: kill sends a signal to a process this bench started; no memory is shared.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
        let _ = self.child.wait().await;
    }
}

/// The memory of one process, in MiB, with what it is made of.
#[derive(Debug, Clone, Copy)]
pub(super) struct Memory {
    pub(super) rss: f64,
    pub(super) hwm: f64,
    /// The heap, thread stacks and other anonymous memory.
    pub(super) anon: f64,
    /// Mapped files: the binary and its libraries, Git packs.
    pub(super) file: f64,
    /// Of those, the pages of `tether` itself (code, read-only data): what a build's
    /// size and profile decide.
    pub(super) binary: f64,
    pub(super) threads: f64,
}

pub(super) fn memory(pid: u32) -> Memory {
    let mib = |field| proc_status(pid, field) / 1024.0;
    Memory {
        rss: mib("VmRSS"),
        hwm: mib("VmHWM"),
        anon: mib("RssAnon"),
        file: mib("RssFile"),
        binary: binary_rss_kib(pid) / 1024.0,
        threads: proc_status(pid, "Threads"),
    }
}

/// Resident KiB of the file pages of the process's own executable, from
/// `/proc/<pid>/smaps`; 0 where it cannot be read.
pub(super) fn binary_rss_kib(pid: u32) -> f64 {
    let (Ok(exe), Ok(smaps)) = (
        std::fs::read_link(format!("/proc/{pid}/exe")),
        std::fs::read_to_string(format!("/proc/{pid}/smaps")),
    ) else {
        return 0.0;
    };
    let exe = exe.display().to_string();
    let mut in_binary = false;
    let mut kib = 0.0;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: range, permissions, offset, device, inode, path.
            in_binary = fields.nth(4) == Some(exe.as_str());
        } else if in_binary && (first == "Rss:" || first == "Anonymous:") {
            // Relocated data the process wrote is anonymous, counted there.
            let value: f64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
            kib += if first == "Rss:" { value } else { -value };
        }
    }
    kib
}

impl Memory {
    pub(super) fn to_json(self) -> Value {
        json!({
            "rss_mib": self.rss, "high_water_mark_mib": self.hwm,
            "anon_mib": self.anon, "file_mib": self.file, "binary_mib": self.binary,
            "threads": self.threads,
        })
    }
}

pub(super) struct Fleet {
    pub(super) apps: usize,
    pub(super) objects_per_app: usize,
    pub(super) replicas: usize,
}

/// A fleet being served: the sandbox, the Git daemon and the replicas.
pub(super) struct Served {
    pub(super) sandbox: Sandbox,
    pub(super) client: kube::Client,
    pub(super) replicas: Vec<Replica>,
    pub(super) _daemon: GitDaemon,
    pub(super) _dir: tempfile::TempDir,
    pub(super) first_sync: Duration,
}

pub(super) async fn serve(fleet: &Fleet) -> Served {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sandbox, kubeconfig, client) = sandbox(dir.path(), fleet.apps).await;
    let srv = dir.path().join("srv");
    write_fleet(&srv, fleet.apps, fleet.objects_per_app);
    let daemon = GitDaemon::start(&srv);
    let url = daemon.url("fleet.git");
    let http = reqwest::Client::new();
    let started = Instant::now();
    let (apps, replicas) = (fleet.apps, fleet.replicas);
    let mut running: Vec<Replica> = (0..replicas)
        .map(|i| {
            start_replica(dir.path(), i, &kubeconfig, &|port| {
                config(port, &url, apps, replicas)
            })
        })
        .collect();
    // Each replica answers before any app is Synced (the status API starts first).
    for replica in &running {
        let deadline = Instant::now() + Duration::from_secs(60);
        while http
            .get(format!("{}/healthz", replica.url))
            .send()
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "a replica never listened");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    until_synced(&http, &mut running, fleet.apps, started).await;
    Served {
        sandbox,
        client,
        replicas: running,
        _daemon: daemon,
        _dir: dir,
        first_sync: started.elapsed(),
    }
}

impl Served {
    pub(super) async fn stop(self) {
        for replica in self.replicas {
            replica.stop().await;
        }
        self.sandbox.stop().await;
    }
}
