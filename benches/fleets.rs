//! Fleet figures (issue #28): a chain of 10 apps, each `dependsOn` the one before,
//! synced from empty by `tether serve` against the in-process sandbox. The figure is
//! what the chain costs beyond the apps' own passes: from the first app turning Ready
//! to the last one Ready, minus the durations of the passes of the nine dependents,
//! per link (target < 100 ms: readiness wakes dependents, nothing polls). Times are
//! read from the apps' statuses (`Ready`'s `lastTransitionTime`, each pass's
//! `durationMs`), not from when this bench happened to look.
//!
//! `cargo bench --bench fleets` runs 5 chains (a fresh sandbox and service each) and
//! writes `target/bench-results/fleets.json`; `-- --quick` runs one and writes
//! `fleets-quick.json`. A figure off its target prints FAIL and the bench exits 1.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tether_sandbox::{Sandbox, SandboxOptions};
use tether_testkit::figures::{percentile, verdict};
use tether_testkit::git::git;

const LINKS: usize = 10;
const NAMESPACE: &str = "chain";
const PER_LINK_TARGET_MS: f64 = 100.0;
/// The whole chain from empty, on a loaded two-core machine.
const CHAIN_TIMEOUT: Duration = Duration::from_secs(300);

/// `app-<i>/cm.yaml`, one ConfigMap each, committed once.
fn repository(dir: &Path) -> String {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..LINKS {
        let path = dir.join(format!("app-{i}"));
        std::fs::create_dir_all(&path).expect("mkdir");
        let cm = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: link-{i}\n  namespace: {NAMESPACE}\ndata:\n  key: v{i}\n"
        );
        std::fs::write(path.join("cm.yaml"), cm).expect("write manifest");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "chain"]);
    format!("file://{}", dir.display())
}

fn config(url: &str, port: u16) -> String {
    let mut out = format!("server: {{listen: \"127.0.0.1:{port}\"}}\nresyncInterval: 1h\napps:\n");
    for i in 0..LINKS {
        out.push_str(&format!(
            "- name: app-{i}\n  source: {{repo: \"{url}\", ref: main, path: app-{i}, interval: 1h}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true}}\n"
        ));
        if i > 0 {
            out.push_str(&format!("  dependsOn: [app-{}]\n", i - 1));
        }
    }
    out
}

fn ready_since(status: &Value) -> Option<DateTime<Utc>> {
    let ready = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")?;
    DateTime::parse_from_rfc3339(ready["lastTransitionTime"].as_str()?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// One chain: (first Ready → last Ready, the dependents' own pass time), in ms.
async fn chain(dir: &Path, url: &str, run: usize) -> (f64, f64) {
    let sandbox = Sandbox::start(SandboxOptions::default())
        .await
        .expect("sandbox starts");
    let kubeconfig = dir.join(format!("kubeconfig-{run}"));
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = reqwest::Client::new();
    let port = tether_testkit::free_port();
    let config_path: PathBuf = dir.join(format!("fleets-{run}.yaml"));
    std::fs::write(&config_path, config(url, port)).expect("write config");
    namespace(&sandbox).await;
    let mut child = tether_testkit::serve::command(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tether")),
        &config_path,
        &kubeconfig,
        &dir.join(format!("cache-{run}")),
        &dir.join(format!("fleets-{run}.log")),
    )
    .spawn()
    .expect("tether serve starts");
    let deadline = Instant::now() + CHAIN_TIMEOUT;
    let statuses = loop {
        let listed = client
            .get(format!("http://127.0.0.1:{port}/api/v1/apps"))
            .send()
            .await;
        if let Ok(answer) = listed
            && let Ok(body) = answer.json::<Value>().await
        {
            let apps = body["apps"].as_array().cloned().unwrap_or_default();
            if apps.len() == LINKS && apps.iter().all(|a| ready_since(a).is_some()) {
                break apps;
            }
        }
        assert!(Instant::now() < deadline, "the chain did not sync in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = child.start_kill();
    let by_name = |i: usize| {
        let name = format!("app-{i}");
        statuses
            .iter()
            .find(|s| s["name"] == name.as_str())
            .expect("every app")
    };
    let first = ready_since(by_name(0)).expect("ready");
    let last = ready_since(by_name(LINKS - 1)).expect("ready");
    let own: f64 = (1..LINKS)
        .map(|i| {
            let history = by_name(i)["history"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            // Its first pass: the one the wake started (a waiting app runs none before).
            history
                .last()
                .and_then(|p| p["durationMs"].as_f64())
                .unwrap_or(0.0)
        })
        .sum();
    (
        (last - first).num_microseconds().unwrap_or(0) as f64 / 1000.0,
        own,
    )
}

/// Creates [`NAMESPACE`] in the sandbox.
async fn namespace(sandbox: &Sandbox) {
    let client = sandbox.client().await.expect("client");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("", "v1", "Namespace"),
        "namespaces",
    );
    let namespaces: Api<DynamicObject> = Api::all_with(client, &resource);
    let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(object).expect("a namespace"),
        )
        .await
        .expect("create the namespace");
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 1 } else { 5 };
    let dir = tempfile::tempdir().expect("tempdir");
    let url = repository(&dir.path().join("chain.git"));
    let mut per_link = Vec::new();
    let mut rows = Vec::new();
    for run in 0..runs {
        let (span, own) = chain(dir.path(), &url, run).await;
        let link = (span - own).max(0.0) / (LINKS - 1) as f64;
        per_link.push(link);
        rows.push(json!({"run": run, "first_ready_to_last_ready_ms": span, "dependents_own_passes_ms": own, "per_link_ms": link}));
    }
    let p50 = percentile(&per_link, 50.0);
    let worst = percentile(&per_link, 100.0);
    let pass = worst < PER_LINK_TARGET_MS;
    println!(
        "fleets: a chain of {LINKS} apps, {runs} run(s) (debug or release: see the cargo profile)"
    );
    println!(
        "{:<44} {:>10} {:>10} {:>8}",
        "figure", "p50", "max", "verdict"
    );
    println!(
        "{:<44} {:>8.1}ms {:>8.1}ms {:>8}",
        "wait per link beyond the apps' own passes",
        p50,
        worst,
        verdict(pass)
    );
    for row in &rows {
        println!("  {row}");
    }
    let results = json!({
        "links": LINKS,
        "runs": rows,
        "per_link_ms": {"p50": p50, "max": worst, "target": PER_LINK_TARGET_MS, "pass": pass},
    });
    let name = if quick {
        "fleets-quick.json"
    } else {
        "fleets.json"
    };
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), name, &results);
    if !pass {
        std::process::exit(1);
    }
}
