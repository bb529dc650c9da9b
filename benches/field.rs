//! Field figures (issue #12): the findings `tests/integration/field.rs` checks once
//! each, repeated often enough to be counted, against the in-process sandbox.
//!
//! 1. **Crash runs**: a `tether sync` process of 600 objects (ConfigMaps in three
//!    Namespaces the app also creates), slowed by the sandbox's injected latency, is
//!    SIGKILLed at a random moment after its first write; Git (a directory) then drops
//!    a random part of the set (below the mass-prune guard) and `tether sync --prune`
//!    runs. Counted after it: orphans (objects labelled for the app that Git does not
//!    have) and lost objects (desired, yet absent or being deleted). Expected 0 and 0.
//! 2. **Race runs**: a library sync gives three Deployments a new image, then at once
//!    `sync::observe` and `Observed::drift` diff them, back to back, until a watch
//!    shows the sandbox's Deployment controller (~5 ms after each change) done writing
//!    the revision annotation and status. Counted: runs with any drift (expected 0),
//!    and how many controller writes landed while a diff ran (the race was run). The
//!    dry runs those diffs made are counted too: a diff dry-runs (and so compares an
//!    answer with a live copy) only an object it cannot call unchanged from the live
//!    object alone, which after a sync is none of them.
//! 3. **Faults**: with 20% of requests answered 500, 503 or 429, five apps of 20
//!    objects each are synced by `tether sync` repeated until it exits 0 (as a
//!    retrying service would, at most 20 attempts each); then, faults off, `tether
//!    diff` must find each in sync. And `tether diff` against a black-holed API server
//!    (a listener that accepts and never answers) must exit 2 within the request
//!    timeout, never hang.
//!
//! `cargo bench --bench field [-- --crash-runs N --race-runs N --quick --black-hole
//! --seed S]` prints a table, writes `target/bench-results/field.json`, and exits 1
//! when it printed a FAIL. `--quick` is 3 crash runs and 10 race runs without the
//! black hole (30 s at worst) unless `--black-hole` asks for it. The seed picks the
//! kill moments and what Git drops; it is printed so a failing run can be repeated.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};
use tether_core::cluster::{Cluster, DEFAULT_REQUEST_TIMEOUT};
use tether_core::sync::desired::label_for_app;
use tether_core::sync::{SyncOptions, observe, sync};
use tether_diff::manifest::{ParseOptions, read_dir};
use tether_sandbox::{Sandbox, SandboxOptions};
use tether_schema::ownership::{APP_LABEL, DEFAULT_INVENTORY_NAMESPACE, inventory_name};
use tether_testkit::figures::{ms, verdict};

/// Crash runs: three Namespaces and 199 ConfigMaps in each, 600 objects in all.
const CRASH_NAMESPACES: usize = 3;
const CRASH_CONFIGMAPS_PER_NAMESPACE: usize = 199;
/// Added to every sandbox answer during the killed sync: a 600-object sync then
/// writes for a couple of seconds, so a random moment falls inside it.
const CRASH_LATENCY: Duration = Duration::from_millis(20);
/// Git drops one whole Namespace (with probability 1/2) and up to this share of the
/// other ConfigMaps: at most 200 + 80 of 600, below the mass-prune guard (half).
const CRASH_DROP_SHARE: f64 = 0.2;

const RACE_DEPLOYMENTS: usize = 3;

const FAULT_RATE: f64 = 0.2;
const FAULT_APPS: usize = 5;
const FAULT_OBJECTS_PER_APP: usize = 20;
const FAULT_MAX_ATTEMPTS: usize = 20;

/// What the black hole may take beyond the request timeout: starting a debug build
/// of the binary and reading its input.
const BLACK_HOLE_GRACE: Duration = Duration::from_secs(5);

struct Args {
    crash_runs: usize,
    race_runs: usize,
    black_hole: bool,
    seed: u64,
}

impl Args {
    fn parse() -> Result<Args, String> {
        let mut crash_runs = None;
        let mut race_runs = None;
        let mut quick = false;
        let mut black_hole = false;
        let mut seed = None;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |name: &str| -> Result<u64, String> {
                args.next()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("{name} needs a number"))
            };
            match arg.as_str() {
                "--crash-runs" => crash_runs = Some(number("--crash-runs")? as usize),
                "--race-runs" => race_runs = Some(number("--race-runs")? as usize),
                "--seed" => seed = Some(number("--seed")?),
                "--quick" => quick = true,
                "--black-hole" => black_hole = true,
                // cargo bench passes --bench to every bench target.
                "--bench" => {}
                other => {
                    return Err(format!(
                        "unknown argument {other:?}; expected --crash-runs N, --race-runs N, --quick, --black-hole, --seed S"
                    ));
                }
            }
        }
        Ok(Args {
            crash_runs: crash_runs.unwrap_or(if quick { 3 } else { 20 }),
            race_runs: race_runs.unwrap_or(if quick { 10 } else { 50 }),
            black_hole: black_hole || !quick,
            seed: seed.unwrap_or_else(|| rand::rng().random()),
        })
    }
}

/// One object of a generated app, by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Object {
    Namespace(String),
    ConfigMap(String, String),
}

impl Object {
    fn manifest(&self) -> String {
        match self {
            Object::Namespace(name) => {
                format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
            }
            Object::ConfigMap(namespace, name) => format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: \"{name}\"\n"
            ),
        }
    }

    fn file_name(&self) -> String {
        match self {
            Object::Namespace(name) => format!("ns-{name}.yaml"),
            Object::ConfigMap(namespace, name) => format!("cm-{namespace}-{name}.yaml"),
        }
    }

    fn namespace(&self) -> &str {
        match self {
            Object::Namespace(name) | Object::ConfigMap(name, _) => name,
        }
    }
}

/// Makes `dir` hold exactly `objects`, one file each, as a commit would.
fn write_app(dir: &Path, objects: &[Object]) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("mkdir");
    for object in objects {
        std::fs::write(dir.join(object.file_name()), object.manifest()).expect("write");
    }
}

fn tether(command: &str, kubeconfig: &Path, dir: &Path, app: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"));
    c.arg(command)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--path")
        .arg(dir)
        .args(["--app", app])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Any tether command that has not ended by then hangs: a FAIL, not a wait.
const RUN_LIMIT: Duration = Duration::from_secs(300);

async fn run(command: &mut tokio::process::Command) -> Finished {
    // kill_on_drop: a command given up on is killed with its future.
    let Ok(out) = tokio::time::timeout(RUN_LIMIT, command.output()).await else {
        return Finished {
            code: None,
            stdout: String::new(),
            stderr: format!("hung: killed after {} s", RUN_LIMIT.as_secs()),
        };
    };
    let out = out.expect("the tether binary runs");
    Finished {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn fresh_sandbox(dir: &Path, name: &str) -> (Sandbox, PathBuf, kube::Client) {
    let sandbox = Sandbox::start(SandboxOptions::default())
        .await
        .expect("sandbox starts");
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = sandbox.client().await.expect("client");
    (sandbox, kubeconfig, client)
}

/// The live objects labelled for `app`, with those being deleted set apart.
async fn labelled(client: &kube::Client, app: &str) -> (BTreeSet<Object>, BTreeSet<Object>) {
    let selector = ListParams::default().labels(&format!("{APP_LABEL}={app}"));
    let mut live = BTreeSet::new();
    let mut deleting = BTreeSet::new();
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&selector)
        .await
        .expect("list namespaces");
    for ns in namespaces {
        let object = Object::Namespace(ns.name_any());
        match ns.metadata.deletion_timestamp {
            Some(_) => deleting.insert(object),
            None => live.insert(object),
        };
    }
    let configmaps = Api::<ConfigMap>::all(client.clone())
        .list(&selector)
        .await
        .expect("list configmaps");
    for cm in configmaps {
        let object = Object::ConfigMap(cm.namespace().unwrap_or_default(), cm.name_any());
        match cm.metadata.deletion_timestamp {
            Some(_) => deleting.insert(object),
            None => live.insert(object),
        };
    }
    (live, deleting)
}

async fn inventory_written(client: &kube::Client, app: &str) -> bool {
    Api::<ConfigMap>::namespaced(client.clone(), DEFAULT_INVENTORY_NAMESPACE)
        .get_opt(&inventory_name(app))
        .await
        .ok()
        .flatten()
        .is_some()
}

// ---------------------------------------------------------------------------
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

struct Crash {
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

async fn crash_runs(tmp: &Path, runs: usize, rng: &mut StdRng) -> Crash {
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

// ---------------------------------------------------------------------------
// 2. Race runs

struct RaceRun {
    /// Every drift any diff of the run reported.
    drifted: Vec<String>,
    /// Diffs made, back to back, from the end of the sync until the controller was
    /// done with every Deployment.
    diffs: usize,
    /// Controller writes the watch saw while one of those diffs ran.
    writes_during_diffs: usize,
    /// Server-side apply dry runs those diffs made: a diff compares a dry-run answer
    /// with a live copy (the race) only for an object it could not call unchanged
    /// from the live object alone.
    dry_runs: u64,
    diff_times: Vec<Duration>,
}

struct Race {
    runs: Vec<RaceRun>,
    final_revision: Option<String>,
}

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: {name}\n        image: {image}\n"
    )
}

const REVISION: &str = "deployment.kubernetes.io/revision";
/// How long a run keeps diffing when the controller never finishes (it always has
/// within tens of milliseconds).
const RACE_WINDOW_LIMIT: Duration = Duration::from_secs(5);

/// A Deployment change the watch saw: when, which, the revision annotation it
/// carried, and whether the controller was done with it (status observed the
/// generation and the replica is available).
struct Change {
    at: Instant,
    name: String,
    revision: Option<String>,
    settled: bool,
}

impl Change {
    fn of(deployment: &Deployment) -> Change {
        let status = deployment.status.as_ref();
        let settled = status.and_then(|s| s.observed_generation) == deployment.metadata.generation
            && status.and_then(|s| s.available_replicas) == Some(1);
        Change {
            at: Instant::now(),
            name: deployment.name_any(),
            revision: deployment.annotations().get(REVISION).cloned(),
            settled,
        }
    }
}

/// Every Deployment change in `default`, as it arrives.
fn watch_changes(client: &kube::Client) -> (Arc<Mutex<Vec<Change>>>, tokio::task::JoinHandle<()>) {
    let changes: Arc<Mutex<Vec<Change>>> = Arc::default();
    let api = Api::<Deployment>::namespaced(client.clone(), "default");
    let task = tokio::spawn({
        let changes = changes.clone();
        async move {
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                if let Ok(watcher::Event::Apply(deployment)) = event {
                    changes
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(Change::of(&deployment));
                }
            }
        }
    });
    (changes, task)
}

async fn race_runs(tmp: &Path, runs: usize) -> Race {
    let (sandbox, kubeconfig, client) = fresh_sandbox(tmp, "race").await;
    let cluster = Cluster::connect(Some(&kubeconfig), None)
        .await
        .expect("cluster");
    let (changes, watch) = watch_changes(&client);
    let dir = tmp.join("race");
    let mut out = Vec::new();
    for round in 0..runs {
        let image = format!("nginx:1.{round}");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        for d in 0..RACE_DEPLOYMENTS {
            let name = format!("web-{d}");
            std::fs::write(dir.join(format!("{name}.yaml")), deployment(&name, &image))
                .expect("write");
        }
        let mut desired = read_dir(&dir, &ParseOptions::default()).expect("manifests");
        label_for_app(&mut desired, "race");
        let options = SyncOptions::new("race");
        let report = sync(&cluster, &desired, None, &options)
            .await
            .expect("sync");
        assert!(
            !report.failed(),
            "round {round}: the sync failed: {report:?}"
        );

        // tether's apply of this round carries the old revision (round), the
        // controller's writes after it the new one (round + 1): that tells them apart.
        let controller_revision = (round + 1).to_string();
        let by_controller = |c: &Change| c.revision.as_ref() == Some(&controller_revision);
        let mut run = RaceRun {
            drifted: Vec::new(),
            diffs: 0,
            writes_during_diffs: 0,
            dry_runs: 0,
            diff_times: Vec::new(),
        };
        sandbox.reset_requests();
        let window = Instant::now();
        loop {
            let started = Instant::now();
            let observed = observe(&cluster, &desired, &report.inventory, &options)
                .await
                .expect("observe");
            let drift = observed.drift().expect("drift");
            let ended = Instant::now();
            run.diffs += 1;
            run.diff_times.push(ended - started);
            run.drifted.extend(
                drift
                    .iter()
                    .filter(|d| d.drift.is_drift())
                    .map(|d| format!("{}: {:?}", d.id, d.drift)),
            );
            let seen = changes.lock().unwrap_or_else(PoisonError::into_inner);
            run.writes_during_diffs += seen
                .iter()
                .filter(|c| by_controller(c) && c.at >= started && c.at <= ended)
                .count();
            let done: BTreeSet<&str> = seen
                .iter()
                .filter(|c| by_controller(c) && c.settled)
                .map(|c| c.name.as_str())
                .collect();
            if done.len() == RACE_DEPLOYMENTS || window.elapsed() > RACE_WINDOW_LIMIT {
                break;
            }
        }
        run.dry_runs = sandbox.requests().verb("dryrun:patch");
        out.push(run);
    }
    // The controller kept up: it gave the last change its revision.
    let final_revision = Api::<Deployment>::namespaced(client.clone(), "default")
        .get("web-0")
        .await
        .ok()
        .and_then(|d| d.annotations().get(REVISION).cloned());
    watch.abort();
    sandbox.stop().await;
    Race {
        runs: out,
        final_revision,
    }
}

// ---------------------------------------------------------------------------
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

struct BlackHole {
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

struct Faults {
    /// Requests one cold sync of an app makes when none fails: each is a draw that
    /// must not fail for that attempt to pass.
    requests_per_sync: u64,
    /// The same by verb and resource, as the sandbox counted them.
    requests_by_kind: Value,
    apps: Vec<FaultApp>,
}

/// Each app synced by a retrying caller, all at once, 20% of requests failing.
async fn fault_convergence(tmp: &Path) -> Faults {
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
async fn black_hole(tmp: &Path) -> BlackHole {
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

// ---------------------------------------------------------------------------

fn print_crash(crash: &Crash) -> bool {
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

fn print_race(race: &Race) -> bool {
    let false_drift = race.runs.iter().filter(|r| !r.drifted.is_empty()).count();
    let raced = race
        .runs
        .iter()
        .filter(|r| r.writes_during_diffs > 0)
        .count();
    let writes: usize = race.runs.iter().map(|r| r.writes_during_diffs).sum();
    let diffs: usize = race.runs.iter().map(|r| r.diffs).sum();
    let dry_runs: u64 = race.runs.iter().map(|r| r.dry_runs).sum();
    let mut times: Vec<Duration> = race
        .runs
        .iter()
        .flat_map(|r| r.diff_times.iter().copied())
        .collect();
    times.sort();
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let revision_ok = race.final_revision.as_deref() == Some(race.runs.len().to_string().as_str())
        || race.runs.is_empty();
    let ok = false_drift == 0 && revision_ok;
    println!(
        "2. race runs: {} runs of {RACE_DEPLOYMENTS} Deployments: sync, then diff back to back until the controller is done",
        race.runs.len()
    );
    println!(
        "   runs with false drift: {false_drift} (expected 0)  {}",
        verdict(false_drift == 0)
    );
    for (i, r) in race.runs.iter().enumerate() {
        if !r.drifted.is_empty() {
            println!("       run {}: {}", i + 1, r.drifted.join("; "));
        }
    }
    println!(
        "   diffs: {diffs} (median {:.1} ms, {dry_runs} dry runs); runs where the controller wrote during a diff: {raced} ({writes} writes)",
        ms(median)
    );
    println!(
        "   revision annotation after the last run: {} (expected {})  {}",
        race.final_revision.as_deref().unwrap_or("none"),
        race.runs.len(),
        verdict(revision_ok)
    );
    ok
}

fn print_faults(faults: &Faults, hole: Option<&BlackHole>) -> bool {
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

fn results_json(
    args: &Args,
    crash: &Crash,
    race: &Race,
    faults: &Faults,
    hole: Option<&BlackHole>,
    ok: bool,
) -> Value {
    let apps = &faults.apps;
    let objects = |list: &[Object]| list.iter().map(|o| format!("{o:?}")).collect::<Vec<_>>();
    json!({
        "seed": args.seed,
        "ok": ok,
        "crash": {
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
        },
        "race": {
            "deployments": RACE_DEPLOYMENTS,
            "false_drift_runs": race.runs.iter().filter(|r| !r.drifted.is_empty()).count(),
            "final_revision": race.final_revision,
            "runs": race.runs.iter().map(|r| json!({
                "drifted": r.drifted,
                "diffs": r.diffs,
                "diff_ms": r.diff_times.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
                "controller_writes_during_diffs": r.writes_during_diffs,
                "dry_runs": r.dry_runs,
            })).collect::<Vec<_>>(),
        },
        "faults": {
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
        },
    })
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = match Args::parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut rng = StdRng::seed_from_u64(args.seed);

    let crash = crash_runs(tmp.path(), args.crash_runs, &mut rng).await;
    let race = race_runs(tmp.path(), args.race_runs).await;
    let faults = fault_convergence(tmp.path()).await;
    let hole = match args.black_hole {
        true => Some(black_hole(tmp.path()).await),
        false => None,
    };

    println!("field figures (issue #12), seed {}", args.seed);
    let crash_ok = print_crash(&crash);
    let race_ok = print_race(&race);
    let faults_ok = print_faults(&faults, hole.as_ref());
    let ok = crash_ok && race_ok && faults_ok;
    println!("{}", if ok { "all ok" } else { "FAIL" });

    let results = results_json(&args, &crash, &race, &faults, hole.as_ref(), ok);
    let out: PathBuf = [env!("CARGO_MANIFEST_DIR"), "target", "bench-results"]
        .iter()
        .collect();
    std::fs::create_dir_all(&out).expect("mkdir bench-results");
    std::fs::write(
        out.join("field.json"),
        serde_json::to_string_pretty(&results).expect("JSON"),
    )
    .expect("write results");
    if !ok {
        std::process::exit(1);
    }
}
