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

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use tether_core::cluster::Cluster;
use tether_core::sync::desired::{DesiredInput, ReadOptions, read_desired};
use tether_core::sync::{SyncOptions, sync};
use tether_sandbox::{Sandbox, SandboxOptions};
use tether_testkit::figures::{median, ms};

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

async fn fresh(dir: &Path, name: &str) -> Fresh {
    let sandbox = Sandbox::start(SandboxOptions::default())
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

fn kubectl_apply(kubeconfig: &Path, manifests: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("kubectl");
    c.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "--server-side", "--validate=false", "-f"])
        .arg(manifests);
    c
}

fn tether_sync(kubeconfig: &Path, manifests: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"));
    c.arg("sync")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--path")
        .arg(manifests)
        .args(["--app", "bench", "-o", "json"])
        .env("RUST_LOG", "warn");
    c
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::args().any(|a| a == "--quick");
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

    let mut kubectl_cold = Vec::new();
    let mut tether_cold = Vec::new();
    let mut kubectl_requests = 0;
    let mut tether_requests = 0;
    for run in 0..scale.cold_runs {
        let k = fresh(dir.path(), &format!("kubectl-{run}")).await;
        k.sandbox.reset_requests();
        kubectl_cold.push(timed(&mut kubectl_apply(&k.kubeconfig, &manifests)).await);
        kubectl_requests += k.sandbox.requests().total();
        k.sandbox.stop().await;
        let t = fresh(dir.path(), &format!("tether-{run}")).await;
        t.sandbox.reset_requests();
        tether_cold.push(timed(&mut tether_sync(&t.kubeconfig, &manifests)).await);
        tether_requests += t.sandbox.requests().total();
        t.sandbox.stop().await;
    }
    let per_object = |requests: u64| requests as f64 / (scale.cold_runs * objects) as f64;
    let kubectl_per_object = per_object(kubectl_requests);
    let tether_per_object = per_object(tether_requests);
    let requests_target = 2.0 + REQUESTS_PER_SYNC / objects as f64;
    let ratio_target = if quick { COLD_RATIO_QUICK } else { COLD_RATIO };

    let target = fresh(dir.path(), "resync").await;
    timed(&mut tether_sync(&target.kubeconfig, &manifests)).await;
    let mut resync_process = Vec::new();
    let mut process_writes = 0;
    for _ in 0..scale.resync_runs {
        target.sandbox.reset_requests();
        resync_process.push(timed(&mut tether_sync(&target.kubeconfig, &manifests)).await);
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

    let kubectl_ms = ms(median(&kubectl_cold));
    let tether_ms = ms(median(&tether_cold));
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
            format!("{kubectl_per_object:.2}"),
            String::new(),
            true,
        ),
        (
            "requests per object, tether cold".into(),
            format!("{tether_per_object:.2}"),
            format!("<= {requests_target:.2}"),
            tether_per_object <= requests_target,
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
        "sync of {objects} objects (medians; cold runs: {}, re-syncs: {}; {} build)",
        scale.cold_runs,
        scale.resync_runs,
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
        "kubectl_requests_per_object": kubectl_per_object,
        "tether_requests_per_object": tether_per_object,
        "resync_process_ms": process_ms,
        "resync_call_ms": call_ms,
        "resync_writes": writes,
        "resync_requests_per_call": requests_per_resync,
        "figures": rows.iter().map(|(figure, value, target, pass)| json!({
            "figure": figure, "value": value, "target": target, "pass": pass,
        })).collect::<Vec<_>>(),
        "samples_ms": {
            "kubectl_cold": kubectl_cold.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            "tether_cold": tether_cold.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            "resync_process": resync_process.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            "resync_call": resync_call.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
        },
    });
    let out: PathBuf = [env!("CARGO_MANIFEST_DIR"), "target", "bench-results"]
        .iter()
        .collect();
    std::fs::create_dir_all(&out).expect("mkdir bench-results");
    let file = if quick {
        "sync-quick.json"
    } else {
        "sync.json"
    };
    std::fs::write(
        out.join(file),
        serde_json::to_string_pretty(&results).expect("JSON"),
    )
    .expect("write results");
    target.sandbox.stop().await;
    if rows.iter().any(|(_, _, _, pass)| !pass) {
        std::process::exit(1);
    }
}
