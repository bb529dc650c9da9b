//! The cost curve (issue #18): what `tether serve` costs as the fleet grows, against
//! the in-process sandbox and a real `git daemon`.
//!
//! - Full (default): 1,000 apps of 100 objects (95 ConfigMaps, 5 Deployments), i.e.
//!   100,000 objects, served by `--replicas N` processes (default 1): the time until
//!   every app is Synced, a steady-state window (requests other than watches must be
//!   0; watches are counted apart), CPU and RSS per replica, and self-heal p50/p99
//!   timed from the bench's write to the sandbox's own watch event of the correction.
//! - `--quick`: the same at 20 apps of 50 objects, under a minute in a dev build (the
//!   cut-down `.ci/run` runs, with hard thresholds).
//! - `--curve`: memory only, one fresh sandbox and process per point from no apps to
//!   100 apps / 10,000 objects; RSS at each point, the bytes per object (more
//!   objects, same apps) and per app (more apps, same objects) of anonymous memory.
//!
//! `cargo bench --bench scale` prints a table and writes
//! `target/bench-results/scale{,-quick,-curve}.json`; a figure off its target prints
//! FAIL and the bench exits 1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use tether_sandbox::{
    DEFAULT_CONTROLLER_DELAY, RequestCounts, Sandbox, SandboxOptions, WRITE_VERBS,
};
use tether_testkit::figures::{ms, percentile, verdict};
use tether_testkit::free_port;
use tether_testkit::git::{GitDaemon, git};
use tether_testkit::proc::{clock_ticks_per_second, proc_stat_ticks, proc_status};

/// The full run: issue #18's 1,000 apps / 100,000 objects.
const APPS: usize = 1_000;
const OBJECTS_PER_APP: usize = 100;
/// Of each app's objects, this many are Deployments; the rest are ConfigMaps.
const DEPLOYMENTS: usize = 5;
const HEAL_TRIALS: usize = 50;
const WARM_UP: Duration = Duration::from_secs(20);
const STEADY_WINDOW: Duration = Duration::from_secs(60);
/// The CI cut-down: seconds, in a dev build.
const QUICK_APPS: usize = 20;
const QUICK_OBJECTS_PER_APP: usize = 50;
const QUICK_HEAL_TRIALS: usize = 10;
const QUICK_WARM_UP: Duration = Duration::from_secs(3);
const QUICK_STEADY_WINDOW: Duration = Duration::from_secs(5);
/// The memory curve's points, (apps, objects per app): from a process with no apps to
/// issue #18's 100 apps / 10,000 objects, varying apps and objects apart so that
/// each can be told from the other.
const CURVE: &[(usize, usize)] = &[
    (0, 0),
    (1, 10),
    (10, 100),
    (100, 10),
    (10, 1_000),
    (100, 100),
];
/// How long a curve point settles after all its apps are Synced before its RSS is read.
const CURVE_SETTLE: Duration = Duration::from_secs(5);
/// Every app polls hourly: only the bench's own edits move it during the run.
const POLL: &str = "1h";
const TRIAL_TIMEOUT: Duration = Duration::from_secs(30);
const FIRST_SYNC_TIMEOUT: Duration = Duration::from_secs(3_600);

// Targets of issue #18.
const HEAL_P50_MS: f64 = 50.0;
/// Not a figure of the issue: a bound that catches a heal stuck behind other work.
const HEAL_P99_MS: f64 = 1_000.0;
const STEADY_CPU_PERCENT: f64 = 2.0;
/// RSS per replica at 10,000 objects or fewer (issue #18), for a release build. A dev
/// build maps about 35 MiB of its 400 MB binary, so there only the anonymous part (the
/// heap and stacks) has a hard target: what is left of 64 MiB beside a release binary's
/// mapped pages (about 16 MiB).
const RSS_10K_MIB: f64 = 64.0;
const ANON_10K_MIB: f64 = 48.0;

// ---------------------------------------------------------------------------------
// Git: one repository on disk with every app's directory, and a `git daemon`.

fn namespace(app: usize) -> String {
    format!("fleet-{app}")
}

fn configmap_name(i: usize) -> String {
    format!("cm-{i}")
}

/// The value Git gives ConfigMap `i`'s `key`: what a heal restores.
fn configmap_value(i: usize) -> String {
    format!("v{i}")
}

/// The repository `fleet.git` under `srv`: `apps/<app>/` holds one file per object.
fn write_fleet(srv: &Path, apps: usize, objects_per_app: usize) {
    let repo = srv.join("fleet.git");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    let deployments = DEPLOYMENTS.min(objects_per_app / 10);
    for app in 0..apps {
        let dir = repo.join(format!("apps/{app}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let ns = namespace(app);
        for i in 0..objects_per_app - deployments {
            let name = configmap_name(i);
            let value = configmap_value(i);
            std::fs::write(
                dir.join(format!("{name}.yaml")),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  key: \"{value}\"\n  mode: production\n"
                ),
            )
            .expect("write manifest");
        }
        for i in 0..deployments {
            std::fs::write(
                dir.join(format!("web-{i}.yaml")),
                format!(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-{i}\n  namespace: {ns}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web-{i}}}}}\n  template:\n    metadata: {{labels: {{app: web-{i}}}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n        ports: [{{containerPort: 8080}}]\n        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}\n"
                ),
            )
            .expect("write manifest");
        }
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "fleet"]);
}

/// The configuration every replica reads: the same apps, one listen port each.
fn config(port: u16, url: &str, apps: usize, replicas: usize) -> String {
    let mut config = format!(
        "server:\n  listen: 127.0.0.1:{port}\n  peerToken: {{secretEnv: {PEER_TOKEN_ENV}}}\n"
    );
    config.push_str(&sharding(replicas));
    config.push_str(if apps == 0 { "apps: []\n" } else { "apps:\n" });
    for app in 0..apps {
        config.push_str(&format!(
            "- name: fleet-{app}\n  source: {{repo: \"{url}\", ref: main, path: apps/{app}, interval: {POLL}}}\n  destination: {{namespace: {}}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n",
            namespace(app)
        ));
    }
    config
}

/// How replicas split the apps. One replica needs nothing. Several share them through
/// `shards` (issue #18's sharding: a Lease per shard in the leader election's
/// namespace): this is the one place the bench depends on it; until the configuration
/// knows `shards`, a run with `--replicas 2` or more stops at the first replica's
/// configuration error, with its log.
fn sharding(replicas: usize) -> String {
    if replicas <= 1 {
        return String::new();
    }
    format!("leaderElection:\n  enabled: true\n  namespace: default\nshards: {replicas}\n")
}

/// The variable the replicas read their shared peer token from (`server.peerToken`,
/// required with shards).
const PEER_TOKEN_ENV: &str = "TETHER_BENCH_PEER_TOKEN";

// ---------------------------------------------------------------------------------
// The tether processes: CPU time and memory from /proc.

/// One `tether serve` process and where it answers.
struct Replica {
    child: tokio::process::Child,
    pid: u32,
    url: String,
    log: PathBuf,
}

fn start_replica(
    dir: &Path,
    index: usize,
    kubeconfig: &Path,
    config: &dyn Fn(u16) -> String,
) -> Replica {
    let port = free_port();
    let config_path = dir.join(format!("tether-{index}.yaml"));
    std::fs::write(&config_path, config(port)).expect("write config");
    let log = dir.join(format!("serve-{index}.log"));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg("serve")
        .arg("--config")
        .arg(&config_path)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("TETHER_CACHE_DIR", dir.join(format!("git-cache-{index}")))
        .env("RUST_LOG", "warn")
        .env(PEER_TOKEN_ENV, "scale-bench-peer-token")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .kill_on_drop(true)
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
    fn exited(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_some()
    }

    async fn stop(mut self) {
        // SAFETY: kill sends a signal to a process this bench started; no memory is shared.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
        let _ = self.child.wait().await;
    }
}

/// The memory of one process, in MiB, with what it is made of.
#[derive(Debug, Clone, Copy)]
struct Memory {
    rss: f64,
    hwm: f64,
    /// The heap, thread stacks and other anonymous memory.
    anon: f64,
    /// Mapped files: the binary and its libraries, Git packs.
    file: f64,
    /// Of those, the pages of `tether` itself (code, read-only data): what a build's
    /// size and profile decide.
    binary: f64,
    threads: f64,
}

fn memory(pid: u32) -> Memory {
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
fn binary_rss_kib(pid: u32) -> f64 {
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
    fn to_json(self) -> Value {
        json!({
            "rss_mib": self.rss, "high_water_mark_mib": self.hwm,
            "anon_mib": self.anon, "file_mib": self.file, "binary_mib": self.binary,
            "threads": self.threads,
        })
    }
}

// ---------------------------------------------------------------------------------
// Figures.

/// The RSS rows of one process: the total (a hard target in a release build) and its
/// anonymous part (a hard target in any build), when `at_target`.
fn memory_rows(what: &str, m: &Memory, at_target: bool) -> Vec<(String, String, String, bool)> {
    let release = !cfg!(debug_assertions);
    let target = |applies: bool, mib: f64| {
        if applies {
            format!("< {mib:.0} MiB")
        } else {
            String::new()
        }
    };
    vec![
        (
            format!("RSS, {what}"),
            format!("{:.1} MiB", m.rss),
            target(at_target && release, RSS_10K_MIB),
            !(at_target && release) || m.rss < RSS_10K_MIB,
        ),
        (
            format!("  of which anonymous ({:.0} threads)", m.threads),
            format!("{:.1} MiB", m.anon),
            target(at_target, ANON_10K_MIB),
            !at_target || m.anon < ANON_10K_MIB,
        ),
    ]
}

/// Apps any replica reports Synced: with shards, each replica's status API answers
/// for every app, and a replica that does not own an app may lag its owner.
async fn synced_apps(http: &reqwest::Client, replicas: &[Replica]) -> usize {
    let mut synced = std::collections::HashSet::new();
    for replica in replicas {
        // The dashboard's compact list: the full view serializes every object's state
        // of every app, and a bench polling it would measure its own load.
        let listed = http
            .get(format!("{}/api/v1/apps?view=summary", replica.url))
            .send()
            .await;
        let Ok(answer) = listed else {
            continue;
        };
        let listed: Value = answer.json().await.unwrap_or_default();
        let column = |name: &str| {
            listed["columns"]
                .as_array()
                .and_then(|c| c.iter().position(|c| c == name))
        };
        let (Some(name), Some(sync)) = (column("name"), column("sync")) else {
            continue;
        };
        for row in listed["apps"].as_array().into_iter().flatten() {
            if row[sync] == "Synced"
                && let Some(app) = row[name].as_str()
            {
                synced.insert(app.to_string());
            }
        }
    }
    synced.len()
}

/// Waits until every app is Synced; panics with the replicas' logs if one exits or
/// the wait outlasts `timeout`.
async fn until_synced(
    http: &reqwest::Client,
    replicas: &mut [Replica],
    apps: usize,
    started: Instant,
) {
    loop {
        let synced = synced_apps(http, replicas).await;
        if synced == apps {
            return;
        }
        if started.elapsed() > FIRST_SYNC_TIMEOUT || replicas.iter_mut().any(Replica::exited) {
            let logs: Vec<String> = replicas
                .iter()
                .map(|r| std::fs::read_to_string(&r.log).unwrap_or_default())
                .collect();
            panic!(
                "only {synced} of {apps} apps synced:\n{}",
                logs.join("\n---\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A sandbox with one namespace per app, its kubeconfig and a client.
async fn sandbox(dir: &Path, apps: usize) -> (Sandbox, PathBuf, kube::Client) {
    let sandbox = Sandbox::start(SandboxOptions {
        simulate_controllers: Some(DEFAULT_CONTROLLER_DELAY),
        ..SandboxOptions::default()
    })
    .await
    .expect("sandbox starts");
    let kubeconfig = dir.join("kubeconfig");
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = sandbox.client().await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for app in 0..apps {
        let ns: Namespace = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace(app)}}),
        )
        .expect("namespace");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
    }
    (sandbox, kubeconfig, client)
}

/// Requests by verb, watches apart from the rest.
/// Steady-state requests by verb, and three sums: watches; Lease reads and renewals
/// (the replicas' coordination when sharded: each renews its member Lease and the
/// shards it holds every retry period, as client-go's leader election does); and
/// everything else, which is reconciliation and must be 0 in steady state.
fn by_verb(requests: &RequestCounts) -> (BTreeMap<String, u64>, u64, u64, u64) {
    let mut verbs: BTreeMap<String, u64> = BTreeMap::new();
    let mut leases = 0;
    for ((verb, resource), count) in &requests.0 {
        *verbs.entry(verb.clone()).or_default() += count;
        if is_lease(resource) && verb != "watch" {
            leases += count;
        }
    }
    let watches = verbs.get("watch").copied().unwrap_or(0);
    let others = verbs.values().sum::<u64>() - watches - leases;
    (verbs, watches, leases, others)
}

fn is_lease(resource: &str) -> bool {
    resource == "coordination.k8s.io/leases"
}

/// Writes other than Lease renewals.
fn object_writes(requests: &RequestCounts) -> u64 {
    requests
        .0
        .iter()
        .filter(|((verb, resource), _)| WRITE_VERBS.contains(&verb.as_str()) && !is_lease(resource))
        .map(|(_, count)| count)
        .sum()
}

type Events = futures::stream::BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>>;

/// A watch on one ConfigMap from the version stored now, so the correction's event is
/// seen as the sandbox commits it; and the object's uid. The version is the list's,
/// not the object's: at 100,000 objects an object's own version may lie beyond the
/// watch history the server keeps, and the watch would end at once with 410 Gone.
async fn watch_configmap(api: &Api<ConfigMap>, name: &str) -> (Events, String) {
    let field = format!("metadata.name={name}");
    let listed = api
        .list(&ListParams::default().fields(&field))
        .await
        .expect("the list answers");
    let version = listed
        .metadata
        .resource_version
        .clone()
        .expect("a list has a resourceVersion");
    let uid = listed
        .items
        .first()
        .and_then(|cm| cm.metadata.uid.clone())
        .expect("the object exists, with a uid");
    let events = api
        .watch(&WatchParams::default().fields(&field), &version)
        .await
        .expect("the watch opens")
        .boxed();
    (events, uid)
}

/// Self-heal over `trials`, spread over the apps: even trials edit a ConfigMap, odd
/// ones delete one; each is timed from before the bench's write to the sandbox's watch
/// event that restores Git's value (for a delete, on a new object).
async fn self_heal(
    client: &kube::Client,
    apps: usize,
    configmaps: usize,
    trials: usize,
) -> Vec<f64> {
    let mut samples = Vec::new();
    for trial in 0..trials {
        // A stride prime to the app count visits apps all over the fleet.
        let app = (trial * 37 + 1) % apps;
        let i = 1 + trial % (configmaps - 1);
        let (name, expected) = (configmap_name(i), configmap_value(i));
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace(app));
        let (mut events, old_uid) = watch_configmap(&api, &name).await;
        let delete = trial % 2 == 1;
        let began = Instant::now();
        if delete {
            api.delete(&name, &DeleteParams::default())
                .await
                .expect("delete");
        } else {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"key": "tampered"}})),
            )
            .await
            .expect("edit");
        }
        loop {
            let event = tokio::time::timeout(TRIAL_TIMEOUT, events.try_next())
                .await
                .unwrap_or_else(|_| panic!("timed out healing {name} of app {app}"))
                .expect("the watch delivers")
                .unwrap_or_else(|| panic!("the watch ended before {name} of app {app} healed"));
            if let WatchEvent::Error(err) = &event {
                panic!("the watch on {name} of app {app} failed: {err:?}");
            }
            if let WatchEvent::Added(cm) | WatchEvent::Modified(cm) = &event {
                let value = cm.data.as_ref().and_then(|d| d.get("key"));
                let new = !delete || cm.metadata.uid.as_deref() != Some(old_uid.as_str());
                if new && value == Some(&expected) {
                    break;
                }
            }
        }
        samples.push(ms(began.elapsed()));
        // The pass the correction itself wakes finishes before the next trial.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    samples
}

fn write_results(name: &str, results: &Value) {
    let out: PathBuf = [env!("CARGO_MANIFEST_DIR"), "target", "bench-results"]
        .iter()
        .collect();
    std::fs::create_dir_all(&out).expect("mkdir bench-results");
    std::fs::write(
        out.join(format!("{name}.json")),
        serde_json::to_string_pretty(results).expect("JSON"),
    )
    .expect("write results");
}

/// Prints the table; whether every row passed.
fn print_rows(rows: &[(String, String, String, bool)]) -> bool {
    println!("{:<48} {:>14} {:>12}  result", "figure", "value", "target");
    for (figure, value, target, pass) in rows {
        println!("{figure:<48} {value:>14} {target:>12}  {}", verdict(*pass));
    }
    rows.iter().all(|(_, _, _, pass)| *pass)
}

fn rows_json(rows: &[(String, String, String, bool)]) -> Vec<Value> {
    rows.iter()
        .map(|(figure, value, target, pass)| {
            json!({"figure": figure, "value": value, "target": target, "pass": pass})
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// One fleet, served.

struct Fleet {
    apps: usize,
    objects_per_app: usize,
    replicas: usize,
}

/// A fleet being served: the sandbox, the Git daemon and the replicas.
struct Served {
    sandbox: Sandbox,
    client: kube::Client,
    replicas: Vec<Replica>,
    _daemon: GitDaemon,
    _dir: tempfile::TempDir,
    first_sync: Duration,
}

async fn serve(fleet: &Fleet) -> Served {
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
    async fn stop(self) {
        for replica in self.replicas {
            replica.stop().await;
        }
        self.sandbox.stop().await;
    }
}

// ---------------------------------------------------------------------------------
// The runs.

async fn cost(fleet: Fleet, quick: bool) -> bool {
    let (heal_trials, warm_up, steady_window) = if quick {
        (QUICK_HEAL_TRIALS, QUICK_WARM_UP, QUICK_STEADY_WINDOW)
    } else {
        (HEAL_TRIALS, WARM_UP, STEADY_WINDOW)
    };
    // `--warm-up S`: how long after all Synced the window starts, to tell a fleet
    // still settling from one that never does.
    let warm_up = arg("--warm-up").map_or(warm_up, |s| Duration::from_secs(s as u64));
    let objects = fleet.apps * fleet.objects_per_app;
    eprintln!(
        "scale: {} apps, {objects} objects, {} replica(s)",
        fleet.apps, fleet.replicas
    );
    let served = serve(&fleet).await;
    let cpu_to_synced: Vec<f64> = served
        .replicas
        .iter()
        .map(|r| proc_stat_ticks(r.pid) as f64 / clock_ticks_per_second())
        .collect();
    eprintln!(
        "all {} apps Synced after {:.1}s; warming up",
        fleet.apps,
        served.first_sync.as_secs_f64()
    );
    tokio::time::sleep(warm_up).await;

    // Steady state: every replica's CPU and memory, the sandbox's requests.
    let ticks = clock_ticks_per_second();
    served.sandbox.reset_requests();
    let cpu_before: Vec<u64> = served
        .replicas
        .iter()
        .map(|r| proc_stat_ticks(r.pid))
        .collect();
    let window_started = Instant::now();
    let mut rss_peak = vec![0.0f64; served.replicas.len()];
    while window_started.elapsed() < steady_window {
        tokio::time::sleep(Duration::from_secs(1)).await;
        for (peak, replica) in rss_peak.iter_mut().zip(&served.replicas) {
            *peak = peak.max(memory(replica.pid).rss);
        }
    }
    let window = window_started.elapsed();
    let requests = served.sandbox.requests();
    let cpu_percent: Vec<f64> = served
        .replicas
        .iter()
        .zip(&cpu_before)
        .map(|(r, before)| {
            100.0 * (proc_stat_ticks(r.pid) - before) as f64 / ticks / window.as_secs_f64()
        })
        .collect();
    let memories: Vec<Memory> = served.replicas.iter().map(|r| memory(r.pid)).collect();
    let (verbs, watches, leases, others) = by_verb(&requests);
    let per_hour = 3600.0 / window.as_secs_f64();

    // Self-heal at this scale.
    served.sandbox.reset_requests();
    let configmaps = fleet.objects_per_app - DEPLOYMENTS.min(fleet.objects_per_app / 10);
    let heal = self_heal(&served.client, fleet.apps, configmaps, heal_trials).await;
    let heal_requests = served.sandbox.requests();
    // The bench's own write per trial is not the heal's, nor are Lease renewals.
    let writes_per_heal = object_writes(&heal_requests).saturating_sub(heal_trials as u64) as f64
        / heal_trials as f64;
    let heal_p50 = percentile(&heal, 50.0);
    let heal_p99 = percentile(&heal, 99.0);

    let max_cpu = cpu_percent.iter().copied().fold(0.0, f64::max);
    let max_rss = rss_peak.iter().copied().fold(0.0, f64::max);
    let mut rows: Vec<(String, String, String, bool)> = vec![
        (
            "time to all Synced".into(),
            format!("{:.1} s", served.first_sync.as_secs_f64()),
            String::new(),
            true,
        ),
        (
            "steady: requests other than watches and Leases".into(),
            others.to_string(),
            "0".into(),
            others == 0,
        ),
        (
            "steady: Lease requests (member and shard renewals)".into(),
            format!("{leases} ({:.0} per hour)", leases as f64 * per_hour),
            String::new(),
            true,
        ),
        (
            "steady: watch requests (re-established)".into(),
            watches.to_string(),
            String::new(),
            true,
        ),
        (
            "steady: CPU, % of one core (busiest replica)".into(),
            format!("{max_cpu:.2} %"),
            format!("< {STEADY_CPU_PERCENT:.0} %"),
            max_cpu < STEADY_CPU_PERCENT,
        ),
        (
            format!("self-heal p50 ({} trials)", heal.len()),
            format!("{heal_p50:.0} ms"),
            format!("< {HEAL_P50_MS:.0} ms"),
            heal_p50 < HEAL_P50_MS,
        ),
        (
            "self-heal p99".into(),
            format!("{heal_p99:.0} ms"),
            format!("< {HEAL_P99_MS:.0} ms"),
            heal_p99 < HEAL_P99_MS,
        ),
        (
            "self-heal: writes per heal".into(),
            format!("{writes_per_heal:.2}"),
            "1".into(),
            writes_per_heal <= 1.0,
        ),
    ];
    // RSS has a target at 10,000 objects per replica; above that it is a figure.
    let at_target = objects / fleet.replicas.max(1) <= 10_000;
    for (i, memory) in memories.iter().enumerate() {
        let peak = Memory {
            rss: rss_peak[i],
            ..*memory
        };
        rows.extend(memory_rows(&format!("replica {i}, peak"), &peak, at_target));
    }
    println!(
        "tether serve ×{}: {} apps, {objects} objects",
        fleet.replicas, fleet.apps
    );
    let pass = print_rows(&rows);
    println!(
        "steady window {:.1}s: requests by verb {verbs:?} ({:.0} per hour other than watches and Leases); CPU to Synced {cpu_to_synced:.1?} s",
        window.as_secs_f64(),
        others as f64 * per_hour
    );
    for (i, m) in memories.iter().enumerate() {
        println!(
            "replica {i}: RSS {:.1} MiB (anonymous {:.1}, files {:.1} of which the binary {:.1}), high-water mark {:.1} MiB, {} threads",
            m.rss, m.anon, m.file, m.binary, m.hwm, m.threads
        );
    }
    let results = json!({
        "apps": fleet.apps,
        "objects": objects,
        "replicas": fleet.replicas,
        "first_sync_s": served.first_sync.as_secs_f64(),
        "cpu_seconds_to_synced": cpu_to_synced,
        "figures": rows_json(&rows),
        "steady_state": {
            "warm_up_s": warm_up.as_secs_f64(),
            "window_s": window.as_secs_f64(),
            "requests_by_verb": verbs,
            "watch_requests": watches,
            "lease_requests": leases,
            "lease_requests_per_hour": leases as f64 * per_hour,
            "requests_other_than_watch_and_lease": others,
            "requests_per_hour_other_than_watch_and_lease": others as f64 * per_hour,
            "requests": requests.to_json(),
            "cpu_percent_of_one_core": cpu_percent,
            "rss_peak_mib": rss_peak,
            "memory": memories.iter().map(|m| m.to_json()).collect::<Vec<_>>(),
        },
        "self_heal": {
            "trials": heal.len(),
            "p50_ms": heal_p50,
            "p99_ms": heal_p99,
            "samples_ms": heal,
            "timed_to": "the sandbox's watch event of the correction",
            "writes_per_heal": writes_per_heal,
            "requests": heal_requests.to_json(),
        },
        "max_rss_mib": max_rss,
    });
    write_results(if quick { "scale-quick" } else { "scale" }, &results);
    served.stop().await;
    pass
}

/// Anonymous RSS in bytes at the curve's point (apps, total objects).
fn anon_at(points: &[(usize, usize, f64)], apps: usize, objects: usize) -> f64 {
    points
        .iter()
        .find(|(a, o, _)| (*a, *o) == (apps, objects))
        .map(|(_, _, bytes)| *bytes)
        .expect("a point of the curve")
}

async fn curve() -> bool {
    let mut points = Vec::new();
    let mut rows = Vec::new();
    let mut measured = Vec::new();
    for &(apps, objects_per_app) in CURVE {
        let fleet = Fleet {
            apps,
            objects_per_app,
            replicas: 1,
        };
        let served = serve(&fleet).await;
        tokio::time::sleep(CURVE_SETTLE).await;
        let m = memory(served.replicas[0].pid);
        let objects = apps * objects_per_app;
        eprintln!(
            "{apps} apps, {objects} objects: Synced in {:.1}s, RSS {:.1} MiB (anonymous {:.1}, the binary {:.1})",
            served.first_sync.as_secs_f64(),
            m.rss,
            m.anon,
            m.binary
        );
        // Bytes of anonymous memory: the binary's mapped pages do not grow with load.
        points.push((apps, objects, m.anon * 1024.0 * 1024.0));
        // The point has the target; the others show the shape.
        rows.extend(memory_rows(
            &format!("{apps} apps / {objects} objects"),
            &m,
            (apps, objects) == (100, 10_000),
        ));
        measured.push(json!({
            "apps": apps, "objects": objects,
            "first_sync_s": served.first_sync.as_secs_f64(),
            "memory": m.to_json(),
        }));
        served.stop().await;
    }
    // Each slope between two points that differ in one thing only. Memory follows
    // the largest passes as well as the totals (four apps sync at once, each with its
    // objects parsed), so an app of 1,000 objects costs more than ten of 100.
    let base = anon_at(&points, 0, 0);
    let per_object = (anon_at(&points, 100, 10_000) - anon_at(&points, 100, 1_000)) / 9_000.0;
    let per_app = (anon_at(&points, 100, 1_000) - anon_at(&points, 10, 1_000)) / 90.0;
    let file = measured
        .iter()
        .filter_map(|m| m["memory"]["file_mib"].as_f64())
        .fold(0.0, f64::max);
    rows.push((
        "anonymous, no apps".into(),
        format!("{:.1} MiB", base / 1024.0 / 1024.0),
        String::new(),
        true,
    ));
    rows.push((
        "per app (10 → 100 apps, 1,000 objects)".into(),
        format!("{per_app:.0} B"),
        String::new(),
        true,
    ));
    rows.push((
        "per object (1,000 → 10,000, 100 apps)".into(),
        format!("{per_object:.0} B"),
        String::new(),
        true,
    ));
    rows.push((
        "mapped files at most".into(),
        format!("{file:.1} MiB"),
        String::new(),
        true,
    ));
    println!("tether serve, memory by fleet size (one process per point)");
    let pass = print_rows(&rows);
    write_results(
        "scale-curve",
        &json!({
            "points": measured,
            "slopes_of": "anonymous RSS; per object: 100 apps of 10 and of 100 objects; per app: 10 apps of 100 and 100 apps of 10 objects",
            "base_bytes": base,
            "per_app_bytes": per_app,
            "per_object_bytes": per_object,
            "figures": rows_json(&rows),
        }),
    );
    pass
}

/// The value after `--name` on the command line, if given.
fn arg(name: &str) -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    let value = args.get(at + 1)?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name} takes a number, not {value}")),
    )
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let has = |flag: &str| std::env::args().any(|a| a == flag);
    let pass = if has("--curve") {
        curve().await
    } else {
        let quick = has("--quick");
        let (apps, objects_per_app) = if quick {
            (QUICK_APPS, QUICK_OBJECTS_PER_APP)
        } else {
            (APPS, OBJECTS_PER_APP)
        };
        let fleet = Fleet {
            apps: arg("--apps").unwrap_or(apps),
            objects_per_app: arg("--objects-per-app").unwrap_or(objects_per_app),
            replicas: arg("--replicas").unwrap_or(1).max(1),
        };
        cost(fleet, quick).await
    };
    if !pass {
        std::process::exit(1);
    }
}
