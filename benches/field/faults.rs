//! Faults (3): apps synced through injected 500/503/429 answers until they converge,
//! and `tether diff` against a black-holed API server.

use super::*;

const FAULT_RATE: f64 = 0.2;
const FAULT_APPS: usize = 5;
const FAULT_OBJECTS_PER_APP: usize = 20;
const FAULT_MAX_ATTEMPTS: usize = 20;

/// What the black hole may take beyond the request timeout: starting a debug build
/// of the binary and reading its input.
const BLACK_HOLE_GRACE: Duration = Duration::from_secs(5);

// 3. Faults

struct FaultApp {
    /// Attempts until `tether sync` exited 0; None: never within the limit.
    attempts: Option<usize>,
    last_stderr: String,
    /// `tether diff`'s exit code once faults are off.
    diff_exit: Option<i32>,
}

impl FaultApp {
    fn ok(&self) -> bool {
        self.attempts.is_some() && self.diff_exit == Some(0)
    }
}

pub(super) struct BlackHole {
    elapsed: Duration,
    /// None: killed as hung.
    exit: Option<i32>,
}

impl BlackHole {
    fn ok(&self) -> bool {
        self.exit == Some(2) && self.elapsed <= DEFAULT_REQUEST_TIMEOUT + BLACK_HOLE_GRACE
    }
}

fn fault_set(app: usize) -> Vec<Object> {
    let ns = format!("faults-{app}");
    let mut set = vec![Object::Namespace(ns.clone())];
    for i in 1..FAULT_OBJECTS_PER_APP {
        set.push(Object::ConfigMap(ns.clone(), format!("cm-{i:02}")));
    }
    set
}

pub(super) struct Faults {
    /// Requests one cold sync of an app makes when none fails: each is a draw that
    /// must not fail for that attempt to pass.
    requests_per_sync: u64,
    /// The same by verb and resource, as the sandbox counted them.
    requests_by_kind: Value,
    apps: Vec<FaultApp>,
}

/// Each app synced by a retrying caller, all at once, 20% of requests failing.
pub(super) async fn fault_convergence(tmp: &Path) -> Faults {
    let (sandbox, kubeconfig, _client) = fresh_sandbox(tmp, "faults").await;
    let probe = tmp.join("faults-probe");
    write_app(&probe, &fault_set(FAULT_APPS));
    sandbox.reset_requests();
    let clean = run(&mut tether("sync", &kubeconfig, &probe, "faults-probe")).await;
    assert_eq!(
        clean.code,
        Some(0),
        "a sync without faults failed: {}",
        clean.stderr
    );
    let counted = sandbox.requests();
    let requests_per_sync = counted.total();
    let requests_by_kind = counted.to_json()["requests"].clone();
    sandbox.set_fail_rate(FAULT_RATE);
    let kubeconfig = &kubeconfig;
    let apps = (0..FAULT_APPS).map(|app| async move {
        let dir = tmp.join(format!("faults-{app}"));
        write_app(&dir, &fault_set(app));
        let name = format!("faults-{app}");
        let mut last_stderr = String::new();
        for attempt in 1..=FAULT_MAX_ATTEMPTS {
            let done = run(&mut tether("sync", kubeconfig, &dir, &name)).await;
            if done.code == Some(0) {
                return (dir, name, Some(attempt), String::new());
            }
            last_stderr = done.stderr;
        }
        (dir, name, None, last_stderr)
    });
    let synced = futures::future::join_all(apps).await;
    sandbox.set_fail_rate(0.0);
    let mut out = Vec::new();
    for (dir, name, attempts, last_stderr) in synced {
        let diff = run(&mut tether("diff", kubeconfig, &dir, &name)).await;
        out.push(FaultApp {
            attempts,
            last_stderr,
            diff_exit: diff.code,
        });
    }
    sandbox.stop().await;
    Faults {
        requests_per_sync,
        requests_by_kind,
        apps: out,
    }
}

/// `tether diff` against an address that accepts connections and never answers.
pub(super) async fn black_hole(tmp: &Path) -> BlackHole {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let address = listener.local_addr().expect("address");
    let hole = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let kubeconfig = tmp.join("black-hole.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hole\n  cluster:\n    server: https://{address}\n    insecure-skip-tls-verify: true\nusers:\n- name: hole\n  user:\n    token: not-a-secret\ncontexts:\n- name: hole\n  context: {{cluster: hole, user: hole}}\ncurrent-context: hole\n"
        ),
    )
    .expect("kubeconfig");
    let dir = tmp.join("black-hole");
    write_app(&dir, &fault_set(0));
    let mut child = tether("diff", &kubeconfig, &dir, "hole")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tether diff starts");
    let started = Instant::now();
    let exit = match tokio::time::timeout(DEFAULT_REQUEST_TIMEOUT * 3, child.wait()).await {
        Ok(status) => status.expect("wait").code(),
        Err(_) => {
            let _ = child.kill().await;
            None
        }
    };
    let elapsed = started.elapsed();
    hole.abort();
    BlackHole { elapsed, exit }
}

pub(super) fn print_faults(faults: &Faults, hole: Option<&BlackHole>) -> bool {
    println!(
        "3. faults: {FAULT_APPS} apps x {FAULT_OBJECTS_PER_APP} objects, fail rate {FAULT_RATE}, at most {FAULT_MAX_ATTEMPTS} attempts each"
    );
    println!(
        "   requests of one cold sync without faults: {} (all pass at this rate: {:.2}%)",
        faults.requests_per_sync,
        100.0 * (1.0 - FAULT_RATE).powi(faults.requests_per_sync as i32)
    );
    let by_kind: Vec<String> = faults
        .requests_by_kind
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| format!("{} {} {}", r["verb"], r["resource"], r["count"]).replace('"', ""))
        .collect();
    println!("     ({})", by_kind.join(", "));
    let apps = &faults.apps;
    for (i, app) in apps.iter().enumerate() {
        let attempts = app
            .attempts
            .map_or(format!("not in {FAULT_MAX_ATTEMPTS}"), |a| a.to_string());
        let diff = app.diff_exit.map_or("none".into(), |c| c.to_string());
        println!(
            "   faults-{i}: attempts {attempts:>10}, diff exit after {diff}  {}",
            verdict(app.ok())
        );
        if app.attempts.is_none() {
            let tail: Vec<&str> = app.last_stderr.lines().rev().take(3).collect();
            println!("       last stderr: {}", tail.join(" | "));
        }
    }
    let converged = apps.iter().all(FaultApp::ok);
    println!(
        "   all converged: {}  {}",
        if converged { "yes" } else { "no" },
        verdict(converged)
    );
    let hole_ok = match hole {
        Some(h) => {
            let exit = h.exit.map_or("hung (killed)".into(), |c| c.to_string());
            println!(
                "   black hole: tether diff exit {exit} after {:.1} s (expected 2 within {} s + {} s grace)  {}",
                h.elapsed.as_secs_f64(),
                DEFAULT_REQUEST_TIMEOUT.as_secs(),
                BLACK_HOLE_GRACE.as_secs(),
                verdict(h.ok())
            );
            h.ok()
        }
        None => {
            println!("   black hole: skipped (--quick; --black-hole runs it)");
            true
        }
    };
    converged && hole_ok
}

/// This part's figures in `field.json`.
pub(super) fn json(faults: &Faults, hole: Option<&BlackHole>) -> Value {
    let apps = &faults.apps;
    json!({
        "fail_rate": FAULT_RATE,
        "max_attempts": FAULT_MAX_ATTEMPTS,
        "requests_per_clean_sync": faults.requests_per_sync,
        "requests_per_clean_sync_by_kind": faults.requests_by_kind,
        "apps": apps.iter().map(|a| json!({
            "attempts": a.attempts,
            "diff_exit_after": a.diff_exit,
        })).collect::<Vec<_>>(),
        "all_converged": apps.iter().all(FaultApp::ok),
        "black_hole": hole.map(|h| json!({
            "exit": h.exit,
            "elapsed_s": h.elapsed.as_secs_f64(),
            "request_timeout_s": DEFAULT_REQUEST_TIMEOUT.as_secs(),
        })),
    })
}
