//! What the dashboard reads and what it costs: the tree read as the App's service
//! account and shared for a moment, a thousand apps within the page budget, and
//! `tether diff` naming the manager that changed each field.

use super::*;

/// The tree is read as the app's ServiceAccount: what its Role may not list is named
/// in `errors` (the rest is shown), and reads within a moment share one LIST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_is_read_as_the_apps_service_account_and_shared_for_a_moment() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("t1").await;
    sandbox.namespace("tether-system").await;
    // Deployments and ReplicaSets, not Pods.
    let rbac = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: t1\n---\n\
        apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: deployer\n  namespace: t1\n\
        rules:\n- apiGroups: [apps]\n  resources: [deployments, replicasets]\n  verbs: [get, list, watch, patch]\n---\n\
        apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: deployer\n  namespace: t1\n\
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}\n\
        subjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: t1\n";
    sandbox.kubectl_apply(rbac).await;
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: t1\n\
        spec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n\
        \x20   metadata:\n      labels: {app: web}\n    spec:\n      containers:\n\
        \x20     - name: web\n        image: nginx:1.27\n";
    let origin = origin(&sandbox, &[("web/web.yaml", deployment)]);
    let config = format!(
        "{}apps:\n- name: web\n  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: web, interval: 1h}}\n  destination: {{namespace: t1}}\n  sync: {{automated: true}}\n",
        crate::serve::server_section(sandbox.dir.path()),
        origin.url
    );
    let serve = Serve::start(&sandbox, "dashboard-tenant-tree", &config, &[]).await;
    serve.wait_synced("web").await;
    let rs = make_pods(&sandbox, "t1", "web", 1).await;
    let tree = || async {
        reqwest::get(format!("{}/api/v1/apps/web/tree", serve.url))
            .await
            .expect("the tree answers")
            .json::<Value>()
            .await
            .expect("JSON")
    };
    sandbox.sandbox.reset_requests();
    let first = tree().await;
    let root = &first["roots"][0];
    assert_eq!(
        (&root["kind"], &root["managed"], &root["status"]),
        (&json!("Deployment"), &json!(true), &json!("InSync")),
        "{first}"
    );
    let child = &root["children"][0];
    assert_eq!(
        (&child["kind"], &child["name"], &child["managed"]),
        (&json!("ReplicaSet"), &json!(rs), &json!(false)),
        "{first}"
    );
    assert_eq!(
        child["children"],
        json!([]),
        "the Pods are not the tenant's to list"
    );
    let errors = first["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{first}");
    let error = errors[0].as_str().unwrap();
    assert!(
        error.starts_with("cannot list Pod objects in t1: ")
            && error.contains("system:serviceaccount:t1:deployer")
            && error.contains("forbidden"),
        "{error}"
    );
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("list", "apps/replicasets"), 1, "{counts:?}");

    // Within the moment: the same answer, no request.
    sandbox.sandbox.reset_requests();
    assert_eq!(tree().await, first);
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("list", "apps/replicasets"), 0, "{counts:?}");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    tree().await;
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("list", "apps/replicasets"), 1, "{counts:?}");
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_apps_fit_the_page_budget() {
    let statuses = many_app_statuses(1000);
    let router = tether_controller::server::router(
        statuses,
        Arc::new(NoWorkers),
        axum::Router::new(),
        tether_controller::server::guard::Access::default(),
        None,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let browser = Browser::start().await;
    browser.goto(&format!("http://{address}/")).await;
    browser
        .wait_until(
            "the app list",
            "return performance.getEntriesByName('apps-rendered').length > 0",
        )
        .await;
    let figures = browser.run(FIGURES).await;
    browser
        .screenshot(&screenshot_path("dashboard-apps.png"))
        .await;
    println!("dashboard with 1,000 apps: {figures}");
    assert_eq!(figures["rows"], 1000, "{figures}");
    let transferred = figures["transferred"].as_f64().unwrap();
    let decoded = figures["decoded"].as_f64().unwrap();
    assert!(transferred > 0.0 && decoded > 0.0, "{figures}");
    assert!(transferred < BYTES_BUDGET, "{figures}");
    let paint = figures["firstContentfulPaint"]
        .as_f64()
        .or_else(|| figures["firstPaint"].as_f64())
        .expect("a paint entry");
    assert!(paint < PAINT_ALLOWANCE_MS, "{figures}");

    // Search and filter narrow the list.
    browser.type_into("#search", "service-0421").await;
    browser
        .wait_until(
            "one app left",
            "return document.querySelectorAll('#app-rows tr[data-app]').length === 1",
        )
        .await;
    browser
        .run(
            "const s = document.getElementById('search'); s.value = ''; \
             s.dispatchEvent(new Event('input')); \
             const f = document.getElementById('filter'); f.value = 'OutOfSync'; \
             f.dispatchEvent(new Event('change'))",
        )
        .await;
    let shown = browser
        .wait_until("the out-of-sync apps", "const n = document.querySelectorAll('#app-rows tr[data-app]').length; return n < 1000 && n")
        .await;
    assert_eq!(shown, 100);
    let client = reqwest::Client::new();
    let bogus = client
        .get(format!("http://{address}/api/v1/apps?view=bogus"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(bogus.status(), reqwest::StatusCode::BAD_REQUEST);
    for action in ["sync", "suspend", "resume"] {
        let unknown = client
            .post(format!("http://{address}/api/v1/apps/nope/{action}"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(unknown.status(), reqwest::StatusCode::NOT_FOUND, "{action}");
    }
    // Every control has a label a screen reader can name.
    let unlabelled = browser
        .run("return [...document.querySelectorAll('input, select, button')]\
               .filter(e => !(e.labels?.length || e.getAttribute('aria-label') || e.textContent.trim()))\
               .map(e => e.outerHTML)")
        .await;
    assert_eq!(unlabelled, json!([]));
    drop(browser);
    server.abort();
}

/// "Who changed it" outside the dashboard too: `tether diff` in every format names the
/// field manager of a field edited behind Git's back (`kubectl patch` writes as
/// `kubectl-patch`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tether_diff_names_the_manager_that_changed_each_field() {
    use crate::support::{app_dir, json as run_json, sync_app, tether_app};
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("who").await;
    let dir = app_dir(
        &sandbox,
        "who",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: who\ndata:\n  level: info\n",
        )],
    );
    let synced = sync_app(&sandbox, &dir, "who", &[]).await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    let in_sync = tether_app(&sandbox, "diff", &dir, "who", &[]).await;
    assert_eq!(in_sync.code, Some(0), "{in_sync:?}");
    sandbox
        .kubectl_merge_patch(
            "configmap",
            "settings",
            "who",
            r#"{"data":{"level":"debug"}}"#,
        )
        .await;

    let drift = tether_app(&sandbox, "diff", &dir, "who", &[]).await;
    assert_eq!(drift.code, Some(1), "{drift:?}");
    let report = run_json(&drift);
    let change = &report["resources"][0]["changes"][0];
    assert_eq!(change["path"], "data.level", "{report}");
    assert_eq!(change["live"], "debug");
    assert_eq!(change["changedBy"]["manager"], "kubectl-patch", "{report}");
    assert_eq!(change["changedBy"]["operation"], "Update");
    let time = change["changedBy"]["time"].as_str().expect("a time");
    assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{time}");

    let dir_arg = dir.to_str().expect("utf-8");
    for format in ["text", "markdown"] {
        let run = crate::support::tether(
            &sandbox,
            "diff",
            &["--path", dir_arg, "--app", "who", "-o", format],
        )
        .await;
        assert_eq!(run.code, Some(1), "{run:?}");
        assert!(
            run.stdout
                .contains(&format!("changed by kubectl-patch (Update) at {time}")),
            "-o {format}:\n{}",
            run.stdout
        );
    }
}
