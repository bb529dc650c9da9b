//! Sync figures (issue "Sync"): a cold sync of 1,000 objects of mixed kinds by `tether
//! sync`, against `kubectl apply --server-side -f` of the same files, each into a
//! fresh sandbox; then re-syncs of the unchanged 1,000: their wall time and their
//! write requests (sandbox counters), as a process and as a library call.
//!
//! `cargo bench --bench sync` prints a table and writes
//! `target/bench-results/sync.json`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use tether::cluster::Cluster;
use tether::sandbox::{Sandbox, SandboxOptions};
use tether::sync::desired::{DesiredInput, ReadOptions, read_desired};
use tether::sync::{SyncOptions, sync};

const NAMESPACES: usize = 2;
/// Per namespace: 100 each of ConfigMaps, Secrets, Services and Deployments, 50
/// ServiceAccounts and 49 Roles; with the two Namespaces, 1,000 objects.
const PER_KIND: usize = 100;
const COLD_RUNS: usize = 3;
const RESYNC_RUNS: usize = 10;

fn write_manifests(dir: &Path) -> usize {
    let mut count = 0;
    for n in 0..NAMESPACES {
        let ns = format!("bench-{n}");
        let mut docs = vec![format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"
        )];
        for i in 0..PER_KIND {
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
        for i in 0..PER_KIND / 2 {
            docs.push(format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa-{i}\n  namespace: {ns}\n"
            ));
        }
        for i in 0..PER_KIND / 2 - 1 {
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
        .args(["apply", "--server-side", "-f"])
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

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    let objects = write_manifests(&manifests);

    let mut kubectl_cold = Vec::new();
    let mut tether_cold = Vec::new();
    for run in 0..COLD_RUNS {
        let k = fresh(dir.path(), &format!("kubectl-{run}")).await;
        kubectl_cold.push(timed(&mut kubectl_apply(&k.kubeconfig, &manifests)).await);
        k.sandbox.stop().await;
        let t = fresh(dir.path(), &format!("tether-{run}")).await;
        tether_cold.push(timed(&mut tether_sync(&t.kubeconfig, &manifests)).await);
        t.sandbox.stop().await;
    }

    let target = fresh(dir.path(), "resync").await;
    timed(&mut tether_sync(&target.kubeconfig, &manifests)).await;
    let mut resync_process = Vec::new();
    let mut process_writes = 0;
    for _ in 0..RESYNC_RUNS {
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
        renderers: &tether::manifest::Renderers::default(),
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
    for _ in 0..RESYNC_RUNS {
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

    let kubectl_ms = ms(median(kubectl_cold.clone()));
    let tether_ms = ms(median(tether_cold.clone()));
    let process_ms = ms(median(resync_process.clone()));
    let call_ms = ms(median(resync_call.clone()));
    println!(
        "sync of {objects} objects (medians; cold runs: {COLD_RUNS}, re-syncs: {RESYNC_RUNS})"
    );
    println!("{:<44} {:>12}", "figure", "value");
    println!(
        "{:<44} {:>10.0}ms",
        "kubectl apply --server-side, cold", kubectl_ms
    );
    println!("{:<44} {:>10.0}ms", "tether sync, cold", tether_ms);
    println!(
        "{:<44} {:>11.2}x",
        "tether / kubectl (target <= 0.5)",
        tether_ms / kubectl_ms
    );
    println!(
        "{:<44} {:>10.0}ms",
        "re-sync, tether sync process", process_ms
    );
    println!(
        "{:<44} {:>10.0}ms",
        "re-sync, library call (target < 200)", call_ms
    );
    println!(
        "{:<44} {:>12}",
        "writes in all re-syncs (target 0)",
        process_writes + call_writes
    );
    println!(
        "{:<44} {:>12}",
        "requests per library re-sync",
        call_requests / RESYNC_RUNS as u64
    );

    let results = json!({
        "objects": objects,
        "kubectl_apply_cold_ms": kubectl_ms,
        "tether_sync_cold_ms": tether_ms,
        "cold_ratio": tether_ms / kubectl_ms,
        "resync_process_ms": process_ms,
        "resync_call_ms": call_ms,
        "resync_writes": process_writes + call_writes,
        "resync_requests_per_call": call_requests / RESYNC_RUNS as u64,
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
    std::fs::write(
        out.join("sync.json"),
        serde_json::to_string_pretty(&results).expect("JSON"),
    )
    .expect("write results");
    target.sandbox.stop().await;
}
