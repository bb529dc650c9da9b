//! Monorepo figures (issue #28): N apps from one repository's directories (1,000; 100
//! with `--quick`), file apps of one configuration, synced by `tether serve` against
//! the in-process sandbox. Then a commit touching one app's directory, announced by a
//! signed webhook:
//!
//! 1. renders (`tether_renders_total`, all apps): 1 expected;
//! 2. API requests naming another app's objects (the sandbox's audit, from the webhook
//!    until a settle window after the app is applied): 0 expected; all requests shown;
//! 3. the time from the webhook to the touched app's object applied with the new
//!    value (target < 1 s), watched through the sandbox's own store by polling the
//!    object every few milliseconds.
//!
//! `cargo bench --bench monorepo` writes `target/bench-results/monorepo.json`;
//! `-- --quick` writes `monorepo-quick.json`. A figure off its target prints FAIL and
//! the bench exits 1.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use sha2::Sha256;
use tether_sandbox::{Sandbox, SandboxOptions};
use tether_testkit::figures::verdict;
use tether_testkit::git::git;

const APPS: usize = 1_000;
const QUICK_APPS: usize = 100;
/// The sandbox serves `default` from the start, as kube-apiserver does.
const NAMESPACE: &str = "default";
/// The touched app: one in the middle.
const TOUCHED: usize = 42;
const APPLIED_TARGET: Duration = Duration::from_secs(1);
/// Every app synced from empty, on a loaded two-core machine.
const SYNC_TIMEOUT: Duration = Duration::from_secs(900);
/// After the touched app is applied: what else the commit might still cause.
const SETTLE: Duration = Duration::from_secs(3);
const SECRET: &str = "bench-webhook-secret";

fn cm(app: usize, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-{app}\n  namespace: {NAMESPACE}\ndata:\n  key: \"{value}\"\n"
    )
}

/// `apps/<i>/cm.yaml`, one ConfigMap each, committed once.
fn repository(dir: &Path, apps: usize) -> String {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..apps {
        let path = dir.join(format!("apps/{i}"));
        std::fs::create_dir_all(&path).expect("mkdir");
        std::fs::write(path.join("cm.yaml"), cm(i, "one")).expect("write manifest");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "fleet"]);
    format!("file://{}", dir.display())
}

fn config(url: &str, port: u16, secret_file: &Path, apps: usize) -> String {
    let mut out = format!(
        "server:\n  listen: \"127.0.0.1:{port}\"\n  webhooks:\n    generic: {{secretFile: {}}}\nresyncInterval: 1h\napps:\n",
        secret_file.display()
    );
    for i in 0..apps {
        out.push_str(&format!(
            "- name: app-{i}\n  source: {{repo: \"{url}\", ref: main, path: apps/{i}, interval: 1h}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true}}\n"
        ));
    }
    out
}

/// The sum of a counter's series over every app.
async fn total(client: &reqwest::Client, port: u16, counter: &str) -> u64 {
    let text = client
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let prefix = format!("tether_{counter}_total{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn push(client: &reqwest::Client, port: u16, url: &str) {
    let body = json!({"repository": url, "ref": "refs/heads/main"}).to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("key");
    mac.update(body.as_bytes());
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    let answer = client
        .post(format!("http://127.0.0.1:{port}/webhooks/generic"))
        .header("x-signature", signature)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("webhook delivered");
    assert!(answer.status().is_success(), "webhook: {}", answer.status());
}

/// Waits until every app is Synced at its first commit.
async fn all_synced(client: &reqwest::Client, port: u16, apps: usize) {
    let deadline = Instant::now() + SYNC_TIMEOUT;
    loop {
        if let Ok(answer) = client
            .get(format!("http://127.0.0.1:{port}/api/v1/apps"))
            .send()
            .await
            && let Ok(body) = answer.json::<Value>().await
        {
            let listed = body["apps"].as_array().cloned().unwrap_or_default();
            if listed.len() == apps && listed.iter().all(|a| a["sync"] == "Synced") {
                return;
            }
        }
        assert!(Instant::now() < deadline, "the apps did not sync in time");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The app whose object (or inventory) a request's path names: `app-<i>` in its last
/// segment.
fn named_app(path: &str) -> Option<usize> {
    let last = path.split('?').next()?.rsplit('/').next()?;
    let (_, after) = last.split_once("app-")?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::args().any(|a| a == "--quick");
    let apps = if quick { QUICK_APPS } else { APPS };
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("mono.git");
    let url = repository(&repo, apps);
    let sandbox = Sandbox::start(SandboxOptions::default())
        .await
        .expect("sandbox starts");
    let kubeconfig = dir.path().join("kubeconfig");
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let secret_file = dir.path().join("webhook-secret");
    std::fs::write(&secret_file, SECRET).expect("secret");
    let port = tether_testkit::free_port();
    let config_path: PathBuf = dir.path().join("monorepo.yaml");
    std::fs::write(&config_path, config(&url, port, &secret_file, apps)).expect("config");
    let mut child = tether_testkit::serve::command(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tether")),
        &config_path,
        &kubeconfig,
        &dir.path().join("cache"),
        &dir.path().join("serve.log"),
    )
    .spawn()
    .expect("tether serve starts");
    let client = reqwest::Client::new();
    let started = Instant::now();
    all_synced(&client, port, apps).await;
    let synced_in = started.elapsed();

    let renders = total(&client, port, "renders").await;
    let kube = sandbox.client().await.expect("client");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("", "v1", "ConfigMap"),
        "configmaps",
    );
    let configmaps: Api<DynamicObject> = Api::namespaced_with(kube, NAMESPACE, &resource);
    std::fs::write(
        repo.join(format!("apps/{TOUCHED}/cm.yaml")),
        cm(TOUCHED, "two"),
    )
    .expect("write");
    git(&repo, &["commit", "-q", "-am", "touch one app"]);
    sandbox.reset_requests();
    let pushed = Instant::now();
    push(&client, port, &url).await;
    let name = format!("app-{TOUCHED}");
    let applied = loop {
        let live = configmaps
            .get(&name)
            .await
            .expect("the touched app's object");
        if live.data["data"]["key"] == "two" {
            break pushed.elapsed();
        }
        assert!(
            pushed.elapsed() < SYNC_TIMEOUT,
            "the commit was not applied"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    tokio::time::sleep(SETTLE).await;
    let rendered = total(&client, port, "renders").await - renders;
    let audit = sandbox.audit();
    let others = audit
        .iter()
        .filter(|r| named_app(&r.path).is_some_and(|i| i != TOUCHED))
        .count();
    let requests = audit.len();
    let _ = child.start_kill();

    let (renders_ok, others_ok, applied_ok) =
        (rendered == 1, others == 0, applied < APPLIED_TARGET);
    println!(
        "monorepo: {apps} apps of one repository, a commit touching one (debug or release: see the cargo profile)"
    );
    println!(
        "{:<52} {:>12} {:>10} {:>8}",
        "figure", "value", "target", "verdict"
    );
    println!(
        "{:<52} {:>12} {:>10} {:>8}",
        "renders after the commit",
        rendered,
        1,
        verdict(renders_ok)
    );
    println!(
        "{:<52} {:>12} {:>10} {:>8}",
        "requests naming another app's objects",
        others,
        0,
        verdict(others_ok)
    );
    println!(
        "{:<52} {:>10.1}ms {:>8}ms {:>8}",
        "webhook to the app's object applied",
        applied.as_secs_f64() * 1000.0,
        APPLIED_TARGET.as_millis(),
        verdict(applied_ok)
    );
    println!(
        "  all requests to the sandbox from the webhook to {SETTLE:?} after: {requests} (this bench's own polls included)"
    );
    println!(
        "  all {apps} apps Synced from empty in {:.1}s",
        synced_in.as_secs_f64()
    );
    let results = json!({
        "apps": apps,
        "renders": {"value": rendered, "target": 1, "pass": renders_ok},
        "requests_for_other_apps": {"value": others, "target": 0, "pass": others_ok},
        "webhook_to_applied_ms": {"value": applied.as_secs_f64() * 1000.0, "target": APPLIED_TARGET.as_millis(), "pass": applied_ok},
        "requests_total": requests,
        "synced_from_empty_s": synced_in.as_secs_f64(),
    });
    let file = if quick {
        "monorepo-quick.json"
    } else {
        "monorepo.json"
    };
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), file, &results);
    if !(renders_ok && others_ok && applied_ok) {
        std::process::exit(1);
    }
}
