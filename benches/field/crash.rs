//! Crash runs (1): a `tether sync` SIGKILLed at a random moment, Git then dropping part
//! of the set, and `tether sync --prune`: orphans and lost objects counted.

use super::*;

/// Crash runs: three Namespaces and 199 ConfigMaps in each, 600 objects in all.
const CRASH_NAMESPACES: usize = 3;
const CRASH_CONFIGMAPS_PER_NAMESPACE: usize = 199;
/// Added to every sandbox answer during the killed sync: a 600-object sync then
/// writes for a couple of seconds, so a random moment falls inside it.
const CRASH_LATENCY: Duration = Duration::from_millis(20);
/// Git drops one whole Namespace (with probability 1/2) and up to this share of the
/// other ConfigMaps: at most 200 + 80 of 600, below the mass-prune guard (half).
const CRASH_DROP_SHARE: f64 = 0.2;

// 1. Crash runs

struct CrashRun {
    /// From the first write (the inventory) to SIGKILL; None: it finished first.
    killed_after: Option<Duration>,
    labelled_at_kill: usize,
    dropped: usize,
    prune_exit: Option<i32>,
    /// What the pruning sync printed (stdout, then stderr).
    prune_output: String,
    orphans: Vec<Object>,
    lost: Vec<Object>,
}

impl CrashRun {
    fn ok(&self) -> bool {
        self.prune_exit == Some(0) && self.orphans.is_empty() && self.lost.is_empty()
    }
}

pub(super) struct Crash {
    write_span: Duration,
    runs: Vec<CrashRun>,
}

fn crash_set() -> Vec<Object> {
    let mut set = Vec::new();
    for n in 0..CRASH_NAMESPACES {
        let ns = format!("crash-{n}");
        set.push(Object::Namespace(ns.clone()));
        for i in 0..CRASH_CONFIGMAPS_PER_NAMESPACE {
            set.push(Object::ConfigMap(ns.clone(), format!("cm-{i:03}")));
        }
    }
    set
}

/// Starts the slowed sync and waits for its first write; returns it and when.
async fn start_slow_sync(
    sandbox: &Sandbox,
    client: &kube::Client,
    kubeconfig: &Path,
    dir: &Path,
) -> (tokio::process::Child, Instant) {
    sandbox.set_latency(CRASH_LATENCY);
    let mut child = tether("sync", kubeconfig, dir, "crash")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tether sync starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !inventory_written(client, "crash").await {
        assert!(Instant::now() < deadline, "the sync wrote nothing in 120 s");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the sync ended before it wrote its inventory"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (child, Instant::now())
}

/// How long an uninterrupted slowed sync writes: the window kills are drawn from.
async fn crash_write_span(tmp: &Path) -> Duration {
    let (sandbox, kubeconfig, client) = fresh_sandbox(tmp, "crash-calibration").await;
    let dir = tmp.join("crash-calibration");
    write_app(&dir, &crash_set());
    let (mut child, first_write) = start_slow_sync(&sandbox, &client, &kubeconfig, &dir).await;
    let status = child.wait().await.expect("wait");
    let span = first_write.elapsed();
    assert!(status.success(), "the calibration sync failed: {status}");
    sandbox.stop().await;
    span
}

/// What Git keeps of `set` after dropping a random part of it: perhaps a whole
/// Namespace with its ConfigMaps, and a share of the other ConfigMaps.
fn git_drops(set: &[Object], rng: &mut StdRng) -> Vec<Object> {
    let dropped_namespace = rng
        .random_bool(0.5)
        .then(|| format!("crash-{}", rng.random_range(0..CRASH_NAMESPACES)));
    let mut others: Vec<&Object> = set
        .iter()
        .filter(|o| matches!(o, Object::ConfigMap(..)))
        .filter(|o| Some(o.namespace()) != dropped_namespace.as_deref())
        .collect();
    let count = (others.len() as f64 * rng.random_range(0.0..CRASH_DROP_SHARE)) as usize;
    others.shuffle(rng);
    let dropped: BTreeSet<&Object> = others.into_iter().take(count).collect();
    set.iter()
        .filter(|o| Some(o.namespace()) != dropped_namespace.as_deref())
        .filter(|o| !dropped.contains(o))
        .cloned()
        .collect()
}

async fn crash_run(tmp: &Path, index: usize, write_span: Duration, rng: &mut StdRng) -> CrashRun {
    let (sandbox, kubeconfig, client) = fresh_sandbox(tmp, &format!("crash-{index}")).await;
    let dir = tmp.join(format!("crash-{index}"));
    let set = crash_set();
    write_app(&dir, &set);
    let delay = write_span.mul_f64(rng.random_range(0.0..1.0));

    let (mut child, first_write) = start_slow_sync(&sandbox, &client, &kubeconfig, &dir).await;
    let killed_after = tokio::select! {
        _ = tokio::time::sleep_until((first_write + delay).into()) => {
            // start_kill is SIGKILL on Unix: no chance to finish anything.
            child.start_kill().expect("SIGKILL");
            Some(first_write.elapsed())
        }
        _ = child.wait() => None,
    };
    let _ = child.wait().await;
    sandbox.set_latency(Duration::ZERO);
    let labelled_at_kill = labelled(&client, "crash").await.0.len();

    let rest = git_drops(&set, rng);
    write_app(&dir, &rest);

    let prune = run(tether("sync", &kubeconfig, &dir, "crash").arg("--prune")).await;
    let desired: BTreeSet<Object> = rest.into_iter().collect();
    // What is being deleted is not an orphan (the sandbox finishes a Namespace's
    // deletion at once, so nothing stays there long).
    let (live, deleting) = labelled(&client, "crash").await;
    let orphans = live.difference(&desired).cloned().collect();
    let lost = desired
        .iter()
        .filter(|o| !live.contains(o) || deleting.contains(o))
        .cloned()
        .collect();
    sandbox.stop().await;
    CrashRun {
        killed_after,
        labelled_at_kill,
        dropped: set.len() - desired.len(),
        prune_exit: prune.code,
        prune_output: format!("{}{}", prune.stdout, prune.stderr),
        orphans,
        lost,
    }
}

pub(super) async fn crash_runs(tmp: &Path, runs: usize, rng: &mut StdRng) -> Crash {
    if runs == 0 {
        return Crash {
            write_span: Duration::ZERO,
            runs: Vec::new(),
        };
    }
    let write_span = crash_write_span(tmp).await;
    let mut out = Vec::new();
    for index in 0..runs {
        out.push(crash_run(tmp, index, write_span, rng).await);
    }
    Crash {
        write_span,
        runs: out,
    }
}

pub(super) fn print_crash(crash: &Crash) -> bool {
    println!(
        "1. crash runs: {} objects, latency {} ms, writes of an uninterrupted sync span {:.0} ms",
        crash_set().len(),
        CRASH_LATENCY.as_millis(),
        ms(crash.write_span)
    );
    println!(
        "{:>4} {:>12} {:>10} {:>8} {:>11} {:>8} {:>5}  ",
        "run", "killed at", "labelled", "dropped", "prune exit", "orphans", "lost"
    );
    for (i, r) in crash.runs.iter().enumerate() {
        let killed = match r.killed_after {
            Some(d) => format!("{:.0} ms", ms(d)),
            None => "finished".into(),
        };
        let exit = r.prune_exit.map_or("none".into(), |c| c.to_string());
        println!(
            "{:>4} {:>12} {:>10} {:>8} {:>11} {:>8} {:>5}  {}",
            i + 1,
            killed,
            r.labelled_at_kill,
            r.dropped,
            exit,
            r.orphans.len(),
            r.lost.len(),
            verdict(r.ok())
        );
        if !r.ok() {
            for o in r.orphans.iter().take(5) {
                println!("       orphan: {o:?}");
            }
            for o in r.lost.iter().take(5) {
                println!("       lost: {o:?}");
            }
            if r.prune_exit != Some(0) {
                let lines: Vec<&str> = r
                    .prune_output
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .collect();
                for line in &lines[lines.len().saturating_sub(4)..] {
                    println!("       prune said: {line}");
                }
            }
        }
    }
    let orphans: usize = crash.runs.iter().map(|r| r.orphans.len()).sum();
    let lost: usize = crash.runs.iter().map(|r| r.lost.len()).sum();
    let killed = crash
        .runs
        .iter()
        .filter(|r| r.killed_after.is_some())
        .count();
    let ok = crash.runs.iter().all(CrashRun::ok);
    println!(
        "   total: {} runs ({killed} killed mid-sync), {orphans} orphans, {lost} lost (expected 0 and 0)  {}",
        crash.runs.len(),
        verdict(ok)
    );
    ok
}

/// This part's figures in `field.json`.
pub(super) fn json(crash: &Crash) -> Value {
    let objects = |list: &[Object]| list.iter().map(|o| format!("{o:?}")).collect::<Vec<_>>();
    json!({
        "objects": crash_set().len(),
        "latency_ms": CRASH_LATENCY.as_millis() as u64,
        "write_span_ms": ms(crash.write_span),
        "orphans": crash.runs.iter().map(|r| r.orphans.len()).sum::<usize>(),
        "lost": crash.runs.iter().map(|r| r.lost.len()).sum::<usize>(),
        "runs": crash.runs.iter().map(|r| json!({
            "killed_after_ms": r.killed_after.map(ms),
            "labelled_at_kill": r.labelled_at_kill,
            "dropped": r.dropped,
            "prune_exit": r.prune_exit,
            "orphans": objects(&r.orphans),
            "lost": objects(&r.lost),
        })).collect::<Vec<_>>(),
    })
}
