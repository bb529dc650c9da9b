//! Sync figures (issue "Sync", #18): a cold sync of 1,000 objects of mixed kinds by
//! `tether sync`, against `kubectl apply --server-side --validate=false -f` of the same
//! files (kubectl 1.32 otherwise validates each object on the client against the
//! OpenAPI documents, about 40 ms of CPU per object, which is not what the comparison
//! is about), each into a fresh sandbox, with the requests per object each sends
//! (sandbox counters); then re-syncs of the unchanged 1,000: their wall time and their
//! write requests, as a process and as a library call.
//!
//! `cargo bench --bench sync` prints a table and writes
//! `target/bench-results/sync.json`; a figure off its target prints FAIL and the bench
//! exits 1. `cargo bench --bench sync -- --quick` runs 100 objects, once, in seconds.
//! Each cold run also reports the client's own CPU time (its rusage), the sandbox's own
//! time answering per request (measured inside it) and the most requests in flight:
//! where the time goes. `-- --concurrency N` sets tether's `--concurrency`;
//! `-- --latency-ms N` adds N ms to each answer in the cold runs, as a remote API
//! server's round trip would.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use tether_core::cluster::Cluster;
use tether_core::sync::desired::{DesiredInput, ReadOptions, read_desired};
use tether_core::sync::{DEFAULT_REQUEST_CONCURRENCY, SyncOptions, sync};
use tether_sandbox::{Sandbox, SandboxOptions};
use tether_testkit::figures::{median, ms};
use tether_testkit::proc::{Usage, run_measured};

const NAMESPACES: usize = 2;
/// Per namespace: 100 each of ConfigMaps, Secrets, Services and Deployments, 50
/// ServiceAccounts and 49 Roles; with the two Namespaces, 1,000 objects (`--quick`:
/// a tenth).
const PER_KIND: usize = 100;
const COLD_RUNS: usize = 3;
const RESYNC_RUNS: usize = 10;
/// A cold sync's requests: a dry run and an apply per object, and at most this many for
/// the whole sync (discovery, lists, the inventory and its namespace).
const REQUESTS_PER_SYNC: f64 = 20.0;
/// tether's cold sync against kubectl's, in a release build; `--quick` runs in the
/// dev profile, whose tether is several times slower than its release build while
/// kubectl is the same binary.
const COLD_RATIO: f64 = 1.0;
const COLD_RATIO_QUICK: f64 = 3.0;

/// How much the run does: the full figures, or a cut-down run for CI (seconds).
struct Scale {
    per_kind: usize,
    cold_runs: usize,
    resync_runs: usize,
}

fn write_manifests(dir: &Path, scale: &Scale) -> usize {
    let per_kind = scale.per_kind;
    let mut count = 0;
    for n in 0..NAMESPACES {
        let ns = format!("bench-{n}");
        let mut docs = vec![format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"
        )];
        for i in 0..per_kind {
            docs.push(format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-{i}\n  namespace: {ns}\ndata:\n  index: \"{i}\"\n  mode: production\n"
            ));
            docs.push(format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-{i}\n  namespace: {ns}\ntype: Opaque\nstringData:\n  password: hunter{i}\n"
            ));
            docs.push(format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\n  namespace: {ns}\nspec:\n  selector: {{app: app-{i}}}\n  ports:\n  - {{name: http, port: 80, targetPort: 8080}}\n"
            ));
            docs.push(format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  namespace: {ns}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: app-{i}}}}}\n  template:\n    metadata: {{labels: {{app: app-{i}}}}}\n    spec:\n      containers:\n      - name: app\n        image: nginx:1.25\n        ports: [{{containerPort: 8080}}]\n        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}\n"
            ));
        }
        for i in 0..per_kind / 2 {
            docs.push(format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa-{i}\n  namespace: {ns}\n"
            ));
        }
        for i in 0..per_kind / 2 - 1 {
            docs.push(format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: role-{i}\n  namespace: {ns}\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n"
            ));
        }
        count += docs.len();
        std::fs::write(dir.join(format!("{ns}.yaml")), docs.join("---\n")).expect("write");
    }
    count
}

struct Fresh {
    sandbox: Sandbox,
    kubeconfig: PathBuf,
}

async fn fresh(dir: &Path, name: &str, latency: Duration) -> Fresh {
    let sandbox = Sandbox::start(SandboxOptions {
        latency,
        ..SandboxOptions::default()
    })
    .await
    .expect("sandbox starts");
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    Fresh {
        sandbox,
        kubeconfig,
    }
}

async fn timed(command: &mut tokio::process::Command) -> Duration {
    let started = Instant::now();
    let out = command.output().await.expect("the command runs");
    let elapsed = started.elapsed();
    assert!(
        out.status.success(),
        "{:?} failed:\n{}\n{}",
        command,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

/// One cold run of a client: its own wall and CPU time (the child's rusage), and what
/// the sandbox saw of it.
#[derive(Clone, Copy)]
struct Cold {
    usage: Usage,
    requests: u64,
    /// The sandbox's own time answering, summed over requests (measured inside it).
    serving: Duration,
    /// The most requests it had in flight at once.
    peak_in_flight: u64,
}

/// The medians of a client's cold runs.
struct ColdFigures {
    wall_ms: f64,
    cpu_ms: f64,
    requests_per_object: f64,
    serving_us_per_request: f64,
    peak_in_flight: u64,
}

impl ColdFigures {
    fn of(runs: &[Cold], objects: usize) -> ColdFigures {
        let walls: Vec<Duration> = runs.iter().map(|r| r.usage.wall).collect();
        let cpus: Vec<Duration> = runs.iter().map(|r| r.usage.cpu).collect();
        let requests: u64 = runs.iter().map(|r| r.requests).sum();
        let serving: Duration = runs.iter().map(|r| r.serving).sum();
        ColdFigures {
            wall_ms: ms(median(&walls)),
            cpu_ms: ms(median(&cpus)),
            requests_per_object: requests as f64 / (runs.len() * objects) as f64,
            serving_us_per_request: serving.as_secs_f64() * 1e6 / requests.max(1) as f64,
            peak_in_flight: runs.iter().map(|r| r.peak_in_flight).max().unwrap_or(0),
        }
    }
}

/// Runs `command` (a cold sync into `fresh`'s empty sandbox) and measures it.
async fn cold(fresh: Fresh, mut command: std::process::Command, log: PathBuf) -> Cold {
    fresh.sandbox.reset_requests();
    let stderr = std::fs::File::create(&log).expect("log file");
    command.stdout(std::process::Stdio::null()).stderr(stderr);
    let usage = tokio::task::spawn_blocking(move || run_measured(&mut command))
        .await
        .expect("the measuring thread")
        .expect("the command runs");
    assert_eq!(
        usage.code,
        Some(0),
        "a cold sync failed:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let counts = fresh.sandbox.requests();
    let run = Cold {
        usage,
        requests: counts.total(),
        serving: fresh.sandbox.serving_time(),
        peak_in_flight: fresh.sandbox.peak_in_flight(),
    };
    fresh.sandbox.stop().await;
    run
}

fn kubectl_apply(kubeconfig: &Path, manifests: &Path) -> std::process::Command {
    let mut c = std::process::Command::new("kubectl");
    c.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "--server-side", "--validate=false", "-f"])
        .arg(manifests);
    c
}

fn tether_sync(kubeconfig: &Path, manifests: &Path, concurrency: usize) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_tether"));
    c.arg("sync")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--path")
        .arg(manifests)
        .args(["--app", "bench", "-o", "json"])
        .arg("--concurrency")
        .arg(concurrency.to_string())
        .env("RUST_LOG", "warn");
    c
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{flag} takes a number"))
            })
    };
    let concurrency = value_of("--concurrency").map_or(DEFAULT_REQUEST_CONCURRENCY, |n| n as usize);
    let latency = Duration::from_millis(value_of("--latency-ms").unwrap_or(0));
    let scale = if quick {
        Scale {
            per_kind: PER_KIND / 10,
            cold_runs: 1,
            resync_runs: 3,
        }
    } else {
        Scale {
            per_kind: PER_KIND,
            cold_runs: COLD_RUNS,
            resync_runs: RESYNC_RUNS,
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    let objects = write_manifests(&manifests, &scale);

    let mut kubectl_runs = Vec::new();
    let mut tether_runs = Vec::new();
    for run in 0..scale.cold_runs {
        let name = format!("kubectl-{run}");
        let k = fresh(dir.path(), &name, latency).await;
        let command = kubectl_apply(&k.kubeconfig, &manifests);
        kubectl_runs.push(cold(k, command, dir.path().join(format!("{name}.log"))).await);
        let name = format!("tether-{run}");
        let t = fresh(dir.path(), &name, latency).await;
        let command = tether_sync(&t.kubeconfig, &manifests, concurrency);
        tether_runs.push(cold(t, command, dir.path().join(format!("{name}.log"))).await);
    }
    let kubectl = ColdFigures::of(&kubectl_runs, objects);
    let tether = ColdFigures::of(&tether_runs, objects);
    let requests_target = 2.0 + REQUESTS_PER_SYNC / objects as f64;
    let ratio_target = if quick { COLD_RATIO_QUICK } else { COLD_RATIO };

    let target = fresh(dir.path(), "resync", Duration::ZERO).await;
    let resync =
        || tokio::process::Command::from(tether_sync(&target.kubeconfig, &manifests, concurrency));
    timed(&mut resync()).await;
    let mut resync_process = Vec::new();
    let mut process_writes = 0;
    for _ in 0..scale.resync_runs {
        target.sandbox.reset_requests();
        resync_process.push(timed(&mut resync()).await);
        process_writes += target.sandbox.requests().writes();
    }

    // The library call a running service makes: connection and discovery warm.
    let cluster = Cluster::connect(Some(&target.kubeconfig), None)
        .await
        .expect("connect");
    let read = ReadOptions {
        app: Some("bench"),
        default_namespace: "default",
        scopes: None,
        renderers: &tether_diff::manifest::Renderers::default(),
    };
    let desired = read_desired(DesiredInput::Dir(&manifests), &read)
        .await
        .expect("manifests");
    let options = SyncOptions::new("bench");
    sync(&cluster, &desired.manifests, None, &options)
        .await
        .expect("warm-up sync");
    let mut resync_call = Vec::new();
    let mut call_writes = 0;
    let mut call_requests = 0;
    for _ in 0..scale.resync_runs {
        target.sandbox.reset_requests();
        let started = Instant::now();
        let report = sync(&cluster, &desired.manifests, None, &options)
            .await
            .expect("resync");
        resync_call.push(started.elapsed());
        assert!(!report.changed(), "a re-sync changed something");
        call_writes += target.sandbox.requests().writes();
        call_requests += target.sandbox.requests().total();
    }

    let kubectl_ms = kubectl.wall_ms;
    let tether_ms = tether.wall_ms;
    let process_ms = ms(median(&resync_process));
    let call_ms = ms(median(&resync_call));
    let ratio = tether_ms / kubectl_ms;
    let writes = process_writes + call_writes;
    let requests_per_resync = call_requests / scale.resync_runs as u64;
    let rows: Vec<(String, String, String, bool)> = vec![
        (
            "kubectl apply --server-side --validate=false".into(),
            format!("{kubectl_ms:.0} ms"),
            String::new(),
            true,
        ),
        (
            "tether sync, cold".into(),
            format!("{tether_ms:.0} ms"),
            String::new(),
            true,
        ),
        (
            "tether / kubectl".into(),
            format!("{ratio:.2}x"),
            format!("<= {ratio_target:.1}x"),
            ratio <= ratio_target,
        ),
        (
            "tether objects per second, cold".into(),
            format!("{:.0}", objects as f64 / (tether_ms / 1000.0)),
            String::new(),
            true,
        ),
        (
            "requests per object, kubectl cold".into(),
            format!("{:.2}", kubectl.requests_per_object),
            String::new(),
            true,
        ),
        (
            "requests per object, tether cold".into(),
            format!("{:.2}", tether.requests_per_object),
            format!("<= {requests_target:.2}"),
            tether.requests_per_object <= requests_target,
        ),
        (
            "CPU of the kubectl process, cold".into(),
            format!("{:.0} ms", kubectl.cpu_ms),
            String::new(),
            true,
        ),
        (
            "CPU of the tether process, cold".into(),
            format!("{:.0} ms", tether.cpu_ms),
            String::new(),
            true,
        ),
        (
            "sandbox answering kubectl, per request".into(),
            format!("{:.0} us", kubectl.serving_us_per_request),
            String::new(),
            true,
        ),
        (
            "sandbox answering tether, per request".into(),
            format!("{:.0} us", tether.serving_us_per_request),
            String::new(),
            true,
        ),
        (
            "requests in flight at most, kubectl / tether".into(),
            format!("{} / {}", kubectl.peak_in_flight, tether.peak_in_flight),
            String::new(),
            true,
        ),
        (
            "re-sync, tether sync process".into(),
            format!("{process_ms:.0} ms"),
            String::new(),
            true,
        ),
        (
            "re-sync, library call".into(),
            format!("{call_ms:.0} ms"),
            "< 200 ms".into(),
            call_ms < 200.0,
        ),
        (
            "writes in all re-syncs".into(),
            writes.to_string(),
            "0".into(),
            writes == 0,
        ),
        (
            "requests per library re-sync".into(),
            requests_per_resync.to_string(),
            String::new(),
            true,
        ),
    ];
    println!(
        "sync of {objects} objects (medians; cold runs: {}, re-syncs: {}; tether --concurrency {concurrency}; {} ms added to each answer in the cold runs; {} build)",
        scale.cold_runs,
        scale.resync_runs,
        latency.as_millis(),
        if cfg!(debug_assertions) {
            "dev"
        } else {
            "release"
        }
    );
    println!("{:<46} {:>12} {:>10}  result", "figure", "value", "target");
    for (figure, value, target, pass) in &rows {
        let verdict = if *pass { "pass" } else { "FAIL" };
        println!("{figure:<46} {value:>12} {target:>10}  {verdict}");
    }

    let results = json!({
        "objects": objects,
        "quick": quick,
        "kubectl_apply_cold_ms": kubectl_ms,
        "kubectl_flags": "--server-side --validate=false",
        "tether_sync_cold_ms": tether_ms,
        "cold_ratio": ratio,
        "kubectl_requests_per_object": kubectl.requests_per_object,
        "tether_requests_per_object": tether.requests_per_object,
        "kubectl_cpu_ms": kubectl.cpu_ms,
        "tether_cpu_ms": tether.cpu_ms,
        "sandbox_serving_us_per_request": {
            "kubectl": kubectl.serving_us_per_request,
            "tether": tether.serving_us_per_request,
        },
        "peak_in_flight": { "kubectl": kubectl.peak_in_flight, "tether": tether.peak_in_flight },
        "tether_concurrency": concurrency,
        "latency_ms": latency.as_millis() as u64,
        "resync_process_ms": process_ms,
        "resync_call_ms": call_ms,
        "resync_writes": writes,
        "resync_requests_per_call": requests_per_resync,
        "figures": rows.iter().map(|(figure, value, target, pass)| json!({
            "figure": figure, "value": value, "target": target, "pass": pass,
        })).collect::<Vec<_>>(),
        "samples_ms": {
            "kubectl_cold": kubectl_runs.iter().map(|r| ms(r.usage.wall)).collect::<Vec<_>>(),
            "tether_cold": tether_runs.iter().map(|r| ms(r.usage.wall)).collect::<Vec<_>>(),
            "resync_process": resync_process.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            "resync_call": resync_call.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
        },
    });
    let file = if quick {
        "sync-quick.json"
    } else {
        "sync.json"
    };
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), file, &results);
    target.sandbox.stop().await;
    if rows.iter().any(|(_, _, _, pass)| !pass) {
        std::process::exit(1);
    }
}
