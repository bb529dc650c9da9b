//! App object figures (issue #16): 1,000 Apps of 10 ConfigMaps each (10,000 objects)
//! applied to the in-process sandbox while `tether serve` runs with `apps: []`, then
//!
//! 1. the time from the first App created until every App's `Ready` condition is True;
//! 2. a steady state of 10 s: the requests tether sends (none expected) and the status
//!    writes (none expected);
//! 3. the resident memory of `tether serve`, next to the same 1,000 apps read from a
//!    configuration file instead (a fresh sandbox and process).
//!
//! `cargo bench --bench apps` prints a table and writes
//! `target/bench-results/apps.json`.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tether_sandbox::SandboxOptions;

#[path = "shared/sandbox.rs"]
mod shared_sandbox;
use shared_sandbox::sandbox_with_namespaces;
use tether_testkit::bench::ready_count;
use tether_testkit::git::{GitRepo, HttpGit};
use tether_testkit::proc::proc_status_mib;

const APPS: usize = 1_000;
const OBJECTS_PER_APP: usize = 10;
/// Every App polls hourly: nothing moves it during the run.
const POLL: &str = "1h";
const READY_TARGET: Duration = Duration::from_secs(60);
const READY_TIMEOUT: Duration = Duration::from_secs(900);
const STEADY_WINDOW: Duration = Duration::from_secs(10);
/// After the last App turns Ready: passes that earlier writes woke finish.
const WARM_UP: Duration = Duration::from_secs(5);
const APPS_NAMESPACE: &str = "fleet";
const OBJECTS_NAMESPACE: &str = "fleet-objects";

/// The repository: `apps/<i>/cm-<j>.yaml`, served from disk (`file://`).
fn repository(dir: &Path) -> String {
    let repo = GitRepo::init(dir.to_path_buf());
    for app in 0..APPS {
        for j in 0..OBJECTS_PER_APP {
            repo.write(
                &format!("apps/{app}/cm-{j}.yaml"),
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a{app}-cm-{j}\n  namespace: {OBJECTS_NAMESPACE}\ndata:\n  key: v{j}\n"
                ),
            );
        }
    }
    repo.commit("fleet");
    format!("file://{}", dir.display())
}

/// The ServiceAccount every App acts as (issue #24: an App never acts as tether),
/// allowed everything: a single-team install's.
const DEPLOYER: &str = "fleet-deployer";

fn spec(url: &str, app: usize) -> Value {
    json!({
        "serviceAccountName": DEPLOYER,
        "source": {"repo": url, "ref": "main", "path": format!("apps/{app}"), "interval": POLL},
        "destination": {"namespace": OBJECTS_NAMESPACE},
        "sync": {"automated": true, "prune": true},
    })
}

/// [`DEPLOYER`] in the Apps' namespace, bound to a ClusterRole of `*` rules.
async fn trust_deployer(client: &kube::Client) {
    let rbac = "rbac.authorization.k8s.io";
    let objects = [
        (
            dynamic(
                client,
                "",
                "v1",
                "ServiceAccount",
                "serviceaccounts",
                Some(APPS_NAMESPACE),
            ),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": DEPLOYER, "namespace": APPS_NAMESPACE}}),
        ),
        (
            dynamic(client, rbac, "v1", "ClusterRole", "clusterroles", None),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": DEPLOYER},
                   "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ),
        (
            dynamic(
                client,
                rbac,
                "v1",
                "ClusterRoleBinding",
                "clusterrolebindings",
                None,
            ),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": DEPLOYER},
                   "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": DEPLOYER},
                   "subjects": [{"kind": "ServiceAccount", "name": DEPLOYER, "namespace": APPS_NAMESPACE}]}),
        ),
    ];
    for (api, object) in objects {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(object).expect("an RBAC object"),
        )
        .await
        .expect("create the deployer's RBAC");
    }
}

fn dynamic(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

fn serve(dir: &Path, name: &str, kubeconfig: &Path, config: &str) -> tokio::process::Child {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, config).expect("write config");
    tether_testkit::serve::command(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tether")),
        &path,
        kubeconfig,
        &dir.join(format!("{name}-cache")),
        &dir.join(format!("{name}.log")),
    )
    .spawn()
    .expect("tether serve starts")
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let url = repository(&dir.path().join("fleet.git"));
    // App objects may name only network repositories (issue #24): the same repository
    // over smart HTTP. The configuration file's apps read it by `file://`.
    let http = HttpGit::start_with(dir.path(), &[], false);
    let app_url = http.url("fleet.git");

    // 1. Apps.
    let namespaces = [APPS_NAMESPACE, OBJECTS_NAMESPACE].map(String::from);
    let (sandbox, kubeconfig, client) =
        sandbox_with_namespaces(SandboxOptions::default(), dir.path(), namespaces).await;
    let crd: Value = serde_saphyr::from_str(tether_controller::config::APP_CRD_YAML).expect("CRD");
    let crds = dynamic(
        &client,
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        None,
    );
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).expect("CRD"),
    )
    .await
    .expect("create the CRD");
    trust_deployer(&client).await;
    let mut crd_serve = serve(
        dir.path(),
        "crd",
        &kubeconfig,
        "server:\n  listen: 127.0.0.1:0\napps: []\n",
    );
    let crd_pid = crd_serve.id().expect("running");
    let apps = dynamic(
        &client,
        "tether.dev",
        "v1alpha1",
        "App",
        "apps",
        Some(APPS_NAMESPACE),
    );
    let started = Instant::now();
    for app in 0..APPS {
        let object = json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "App",
            "metadata": {"name": format!("app-{app}"), "namespace": APPS_NAMESPACE},
            "spec": spec(&app_url, app),
        });
        apps.create(
            &PostParams::default(),
            &serde_json::from_value(object).expect("App"),
        )
        .await
        .expect("create App");
    }
    let created = started.elapsed();
    let all_ready = loop {
        let listed = apps.list(&Default::default()).await.expect("list Apps");
        let count = ready_count(&listed.items);
        if count == APPS {
            break started.elapsed();
        }
        if started.elapsed() > READY_TIMEOUT || crd_serve.try_wait().ok().flatten().is_some() {
            let log = std::fs::read_to_string(dir.path().join("crd.log")).unwrap_or_default();
            panic!("only {count} of {APPS} Apps Ready:\n{log}");
        }
        // Listing 1,000 Apps costs the in-process sandbox (this process) too.
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!(
        "all {APPS} Apps Ready after {:.1}s",
        all_ready.as_secs_f64()
    );
    tokio::time::sleep(WARM_UP).await;

    // 2. Steady state.
    sandbox.reset_requests();
    tokio::time::sleep(STEADY_WINDOW).await;
    let requests = sandbox.requests();
    let steady_total = requests.total();
    let steady_writes = requests.writes();
    let crd_rss = proc_status_mib(crd_pid, "VmRSS");
    let _ = crd_serve.kill().await;
    sandbox.stop().await;

    // 3. The same load from a configuration file.
    let file_dir = dir.path().join("file");
    std::fs::create_dir_all(&file_dir).expect("mkdir");
    let namespaces = [APPS_NAMESPACE, OBJECTS_NAMESPACE].map(String::from);
    let (file_sandbox, file_kubeconfig, _) =
        sandbox_with_namespaces(SandboxOptions::default(), &file_dir, namespaces).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let mut config = format!("server:\n  listen: 127.0.0.1:{port}\napps:\n");
    for app in 0..APPS {
        config.push_str(&format!(
            "- name: app-{app}\n  source: {{repo: \"{url}\", ref: main, path: apps/{app}, interval: {POLL}}}\n  destination: {{namespace: {OBJECTS_NAMESPACE}}}\n  sync: {{automated: true, prune: true}}\n"
        ));
    }
    let mut file_serve = serve(&file_dir, "file", &file_kubeconfig, &config);
    let file_pid = file_serve.id().expect("running");
    let http = reqwest::Client::new();
    let file_started = Instant::now();
    let file_synced = loop {
        let listed: Value = match http
            .get(format!("http://127.0.0.1:{port}/api/v1/apps"))
            .send()
            .await
        {
            Ok(answer) => answer.json().await.unwrap_or_default(),
            Err(_) => Value::Null,
        };
        let synced = listed["apps"]
            .as_array()
            .map(|a| a.iter().filter(|a| a["sync"] == "Synced").count())
            .unwrap_or(0);
        if synced == APPS {
            break file_started.elapsed();
        }
        assert!(
            file_started.elapsed() < READY_TIMEOUT,
            "only {synced} file apps synced"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    tokio::time::sleep(WARM_UP).await;
    let file_rss = proc_status_mib(file_pid, "VmRSS");
    let _ = file_serve.kill().await;
    file_sandbox.stop().await;

    let rows = [
        (
            "Apps created",
            format!("{:.1} s", created.as_secs_f64()),
            String::new(),
        ),
        (
            "all Apps Ready (from the first created)",
            format!("{:.1} s", all_ready.as_secs_f64()),
            format!(
                "< {} s: {}",
                READY_TARGET.as_secs(),
                if all_ready < READY_TARGET {
                    "pass"
                } else {
                    "FAIL"
                }
            ),
        ),
        (
            "steady state: requests in 10 s",
            steady_total.to_string(),
            format!("0: {}", if steady_total == 0 { "pass" } else { "FAIL" }),
        ),
        (
            "steady state: writes in 10 s",
            steady_writes.to_string(),
            format!("0: {}", if steady_writes == 0 { "pass" } else { "FAIL" }),
        ),
        (
            "RSS, 1,000 Apps",
            format!("{crd_rss:.1} MiB"),
            String::new(),
        ),
        (
            "RSS, 1,000 file apps",
            format!("{file_rss:.1} MiB"),
            String::new(),
        ),
        (
            "file apps all Synced",
            format!("{:.1} s", file_synced.as_secs_f64()),
            String::new(),
        ),
    ];
    println!("\n{:<42} {:>12}  target", "figure", "value");
    for (name, value, target) in &rows {
        println!("{name:<42} {value:>12}  {target}");
    }
    let results = json!({
        "apps": APPS,
        "objectsPerApp": OBJECTS_PER_APP,
        "profile": if cfg!(debug_assertions) { "dev" } else { "release" },
        "createdSeconds": created.as_secs_f64(),
        "allReadySeconds": all_ready.as_secs_f64(),
        "steadyRequests": steady_total,
        "steadyWrites": steady_writes,
        "rssAppsMiB": crd_rss,
        "rssFileMiB": file_rss,
        "fileSyncedSeconds": file_synced.as_secs_f64(),
    });
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), "apps.json", &results);
}
