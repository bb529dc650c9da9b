//! "One invalid object means nothing is written" for objects in a Namespace the same
//! revision creates (issue #31's finding): they cannot be dry-run before their
//! Namespace exists, so the sync creates it, dry-runs them, and on a refusal deletes
//! the Namespace again before anything else is written, with or without PreSync hooks
//! waiting for it. The pass fails validation (not retried until Git changes).

use std::path::Path;

use serde_json::Value;

use crate::hooks::sandbox;
use crate::support::{TestSandbox, action_of, app_dir, json, resource, sync_app};

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: fresh\n";

/// A ConfigMap in `namespace`.
fn configmap(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: value\n"
    )
}

/// A Deployment in `fresh` with `replicas` (the server refuses a negative count).
fn deployment(replicas: i32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: fresh\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: app, image: nginx}}]\n"
    )
}

/// A PreSync hook Job in `fresh`.
const MIGRATE: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: fresh\n  annotations:\n    argocd.argoproj.io/hook: PreSync\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: run, image: \"busybox:1.36\"}]\n";

/// The revision: the Namespace `fresh` with a ConfigMap and an invalid Deployment in
/// it, a ConfigMap in `default`, and `extra` files.
fn revision(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut files = vec![
        ("namespace.yaml".to_string(), NAMESPACE.to_string()),
        ("settings.yaml".to_string(), configmap("settings", "fresh")),
        ("web.yaml".to_string(), deployment(-1)),
        (
            "elsewhere.yaml".to_string(),
            configmap("elsewhere", "default"),
        ),
    ];
    files.extend(extra.iter().map(|(f, c)| (f.to_string(), c.to_string())));
    files
}

/// Syncs `dir` with an invalid Deployment in the new Namespace and checks that the
/// pass failed validation and left nothing of the revision behind.
async fn refused_leaves_nothing(sandbox: &TestSandbox, dir: &Path) -> Value {
    sandbox.sandbox.reset_requests();
    let run = sync_app(sandbox, dir, "fresh", &[]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let report = json(&run);
    let web = resource(&report, "Deployment/web");
    assert_eq!(web["action"], "failed", "{report}");
    assert!(
        web["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.replicas")),
        "{web}"
    );
    let namespace = resource(&report, "Namespace/fresh");
    assert_eq!(namespace["action"], "skipped", "{report}");
    assert!(
        namespace["message"]
            .as_str()
            .is_some_and(|m| m.contains("deleted")),
        "{namespace}"
    );
    assert_eq!(action_of(&report, "ConfigMap/settings"), "skipped");
    assert_eq!(action_of(&report, "ConfigMap/elsewhere"), "skipped");
    // The only writes besides tether's inventory: the Namespace, created and deleted.
    let writes: Vec<String> = sandbox
        .sandbox
        .writes()
        .into_iter()
        .filter(|w| !w.path.starts_with("/api/v1/namespaces/tether-system"))
        .map(|w| format!("{} {}", w.verb, w.path))
        .collect();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(
        writes
            .iter()
            .all(|w| w.ends_with(" /api/v1/namespaces/fresh")),
        "{writes:?}"
    );
    let gone = sandbox.kubectl(&["get", "namespace", "fresh"]).await;
    assert_ne!(
        gone.code, 0,
        "the Namespace is still there: {}",
        gone.stdout
    );
    let elsewhere = sandbox
        .kubectl(&["get", "configmap", "elsewhere", "-n", "default"])
        .await;
    assert_ne!(elsewhere.code, 0, "{}", elsewhere.stdout);
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_object_in_a_namespace_the_revision_creates_leaves_nothing_written() {
    let sandbox = sandbox().await;
    let dir = app_dir(&sandbox, "fresh", &revision(&[]));
    refused_leaves_nothing(&sandbox, &dir).await;

    // Fixed in Git, the next sync creates the Namespace again and everything in it.
    std::fs::write(dir.join("web.yaml"), deployment(1)).expect("fix the Deployment");
    let run = sync_app(&sandbox, &dir, "fresh", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let report = json(&run);
    for object in ["Namespace/fresh", "Deployment/web", "ConfigMap/settings"] {
        assert_eq!(action_of(&report, object), "created", "{report}");
    }
    sandbox
        .kubectl(&["get", "deployment", "web", "-n", "fresh"])
        .await
        .ok();
}

/// With a PreSync hook waiting for the Namespace, the objects in it are dry-run as
/// soon as it exists, before the hook runs: a refusal runs no hook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_in_a_new_namespace_runs_no_pre_sync_hook() {
    let sandbox = sandbox().await;
    let dir = app_dir(&sandbox, "fresh", &revision(&[("migrate.yaml", MIGRATE)]));
    let report = refused_leaves_nothing(&sandbox, &dir).await;
    assert_eq!(report["hooks"], serde_json::json!([]), "{report}");
}
