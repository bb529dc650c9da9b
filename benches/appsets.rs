//! AppSet figures (issue #28): one AppSet whose Git-directories generator reads a
//! repository of 1,000 directories (`apps/<i>/`, one ConfigMap each), applied to the
//! in-process sandbox while `tether serve` runs with `apps: []`:
//!
//! 1. the time from the AppSet created until all 1,000 Apps exist;
//! 2. the time until every App's `Ready` condition is True (all Synced).
//!
//! `cargo bench --bench appsets` prints a table and writes
//! `target/bench-results/appsets.json`.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tether_sandbox::{Sandbox, SandboxOptions};
use tether_testkit::bench::ready_count;
use tether_testkit::git::{HttpGit, git};

const APPS: usize = 1_000;
/// Every App polls hourly: nothing but the AppSet moves it during the run.
const POLL: &str = "1h";
const TIMEOUT: Duration = Duration::from_secs(900);
const NAMESPACE: &str = "fleet";
const OBJECTS_NAMESPACE: &str = "fleet-objects";
/// The ServiceAccount every App acts as, allowed everything (a single-team install's).
const DEPLOYER: &str = "fleet-deployer";

/// The repository: `apps/<i>/cm.yaml`.
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "main"]);
    for app in 0..APPS {
        let path = dir.join(format!("apps/{app}"));
        std::fs::create_dir_all(&path).expect("mkdir");
        std::fs::write(
            path.join("cm.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a{app}\n  namespace: {OBJECTS_NAMESPACE}\ndata:\n  key: v\n"),
        )
        .expect("write manifest");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "fleet"]);
}

fn api(
    client: &kube::Client,
    gvk: (&str, &str, &str),
    plural: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(gvk.0, gvk.1, gvk.2), plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn create(api: &Api<DynamicObject>, object: Value) {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).expect("an object"),
    )
    .await
    .expect("create");
}

/// Namespaces, both CRDs and the deployer's RBAC.
async fn prepare(client: &kube::Client) {
    let namespaces = api(client, ("", "v1", "Namespace"), "namespaces", None);
    for name in [NAMESPACE, OBJECTS_NAMESPACE] {
        create(
            &namespaces,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await;
    }
    let crds = api(
        client,
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
        None,
    );
    for text in [
        tether_controller::config::APP_CRD_YAML,
        tether_controller::reconcile::appset::APPSET_CRD_YAML,
    ] {
        create(&crds, serde_saphyr::from_str(text).expect("CRD")).await;
    }
    let rbac = "rbac.authorization.k8s.io";
    create(
        &api(client, ("", "v1", "ServiceAccount"), "serviceaccounts", Some(NAMESPACE)),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEPLOYER, "namespace": NAMESPACE}}),
    )
    .await;
    create(
        &api(client, (rbac, "v1", "ClusterRole"), "clusterroles", None),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": DEPLOYER},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
    )
    .await;
    create(
        &api(client, (rbac, "v1", "ClusterRoleBinding"), "clusterrolebindings", None),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": DEPLOYER},
               "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": DEPLOYER},
               "subjects": [{"kind": "ServiceAccount", "name": DEPLOYER, "namespace": NAMESPACE}]}),
    )
    .await;
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    repository(&dir.path().join("fleet.git"));
    let http = HttpGit::start_with(dir.path(), &[], false);
    let url = http.url("fleet.git");
    let sandbox = Sandbox::start(SandboxOptions::default())
        .await
        .expect("sandbox starts");
    let kubeconfig = dir.path().join("kubeconfig");
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = sandbox.client().await.expect("client");
    prepare(&client).await;
    let config = dir.path().join("tether.yaml");
    std::fs::write(&config, "server:\n  listen: 127.0.0.1:0\napps: []\n").expect("write config");
    let log = dir.path().join("serve.log");
    let mut serve = tether_testkit::serve::command(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tether")),
        &config,
        &kubeconfig,
        &dir.path().join("cache"),
        &log,
    )
    .spawn()
    .expect("tether serve starts");

    let appsets = api(
        &client,
        ("tether.dev", "v1alpha1", "AppSet"),
        "appsets",
        Some(NAMESPACE),
    );
    let apps = api(
        &client,
        ("tether.dev", "v1alpha1", "App"),
        "apps",
        Some(NAMESPACE),
    );
    let started = Instant::now();
    create(
        &appsets,
        json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "AppSet",
            "metadata": {"name": "fleet", "namespace": NAMESPACE},
            "spec": {
                "generators": [{"git": {"repo": url, "revision": "main", "directories": [{"path": "apps/*"}]}}],
                "template": {
                    "metadata": {"name": "app-{{path.basename}}"},
                    "spec": {
                        "serviceAccountName": DEPLOYER,
                        "source": {"repo": url, "ref": "main", "path": "{{path}}", "interval": POLL},
                        "destination": {"namespace": OBJECTS_NAMESPACE},
                        "sync": {"automated": true, "prune": true},
                    },
                },
            },
        }),
    )
    .await;
    let mut all_created = None;
    let all_ready = loop {
        let listed = apps.list(&ListParams::default()).await.expect("list Apps");
        if listed.items.len() == APPS && all_created.is_none() {
            all_created = Some(started.elapsed());
        }
        let count = ready_count(&listed.items);
        if count == APPS {
            break started.elapsed();
        }
        if started.elapsed() > TIMEOUT || serve.try_wait().ok().flatten().is_some() {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("{} Apps, {count} Ready:\n{log}", listed.items.len());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let all_created = all_created.unwrap_or(all_ready);
    let _ = serve.kill().await;
    sandbox.stop().await;

    let rows = [
        ("AppSet to all 1,000 Apps created", all_created),
        ("AppSet to all 1,000 Apps Ready (Synced)", all_ready),
    ];
    println!("\n{:<42} {:>10}", "figure", "value");
    for (name, value) in rows {
        println!("{name:<42} {:>8.1} s", value.as_secs_f64());
    }
    let results = json!({
        "apps": APPS,
        "profile": if cfg!(debug_assertions) { "dev" } else { "release" },
        "createdSeconds": all_created.as_secs_f64(),
        "allReadySeconds": all_ready.as_secs_f64(),
    });
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), "appsets.json", &results);
}
