//! Every kubectl command a user types after the quickstart (issue #15), run with the
//! real `kubectl` (1.32) against the sandbox: exit code, what kubectl prints where it
//! means something, and the object stored. Commands whose requests kubectl encodes in
//! protobuf (`auth can-i`, `create deployment`, `run`, `expose`) are exercised here
//! through their `-f` equivalents until the sandbox decodes protobuf.

use std::process::Stdio;
use std::time::Duration;
use tether_testkit::assert_contains;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::support::{TestSandbox, eventually};

mod reading;
mod rollout;
mod server;

/// A namespace and a Deployment of two replicas, applied by kubectl.
fn web(namespace: &str, image: &str) -> String {
    format!(
        "apiVersion: v1
kind: Namespace
metadata:
  name: {namespace}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: {namespace}
  labels: {{app: web}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: {image}
"
    )
}

/// A sandbox with `web` applied in `namespace`, rolled out (revision 1).
async fn deployed(namespace: &str) -> (TestSandbox, String) {
    let sandbox = TestSandbox::start().await;
    let file = sandbox.write_file("web.yaml", &web(namespace, "nginx:1.25"));
    let out = sandbox.kubectl(&["apply", "-f", &file]).await.ok();
    assert_contains(&out.stdout, "deployment.apps/web created");
    rolled_out(&sandbox, namespace).await;
    (sandbox, file)
}

/// Waits with `kubectl rollout status` until the Deployment's rollout is complete.
async fn rolled_out(sandbox: &TestSandbox, namespace: &str) {
    let out = sandbox
        .kubectl(&[
            "rollout",
            "status",
            "deployment/web",
            "-n",
            namespace,
            "--timeout=20s",
        ])
        .await
        .ok();
    assert!(
        out.stdout
            .contains("deployment \"web\" successfully rolled out"),
        "{}",
        out.stdout
    );
}

/// `kubectl get -o json`, parsed.
async fn get_json(sandbox: &TestSandbox, args: &[&str]) -> Value {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    let out = sandbox.kubectl(&all).await.ok();
    serde_json::from_str(&out.stdout).expect("kubectl prints JSON")
}

async fn deployment(sandbox: &TestSandbox, namespace: &str) -> Value {
    get_json(sandbox, &["deployment", "web", "-n", namespace]).await
}

fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

/// The ReplicaSets of a namespace, parsed.
async fn replica_sets(sandbox: &TestSandbox, namespace: &str) -> Vec<Value> {
    get_json(sandbox, &["replicasets", "-n", namespace]).await["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The rows kubectl prints (header first), split into columns of 2+ spaces.
fn rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn scale_changes_the_replicas_and_the_controller_follows() {
    let (sandbox, _) = deployed("kc-scale").await;
    let out = sandbox
        .kubectl(&["scale", "deployment/web", "-n", "kc-scale", "--replicas=4"])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "deployment.apps/web scaled");
    rolled_out(&sandbox, "kc-scale").await;
    let stored = deployment(&sandbox, "kc-scale").await;
    assert_eq!(stored["spec"]["replicas"], 4);
    assert_eq!(stored["status"]["readyReplicas"], 4);
    // The precondition kubectl scale offers, refused as kube-apiserver refuses it.
    let stale = sandbox
        .kubectl(&[
            "scale",
            "deployment/web",
            "-n",
            "kc-scale",
            "--replicas=1",
            "--current-replicas=2",
        ])
        .await;
    assert_eq!(stale.code, 1, "{stale:?}");
    assert_contains(&stale.stderr, "Expected replicas to be 2, was 4");
}

#[tokio::test]
async fn set_image_env_and_resources_change_the_pod_template() {
    let (sandbox, _) = deployed("kc-set").await;
    let image = sandbox
        .kubectl(&[
            "set",
            "image",
            "deployment/web",
            "-n",
            "kc-set",
            "web=nginx:1.26",
        ])
        .await
        .ok();
    assert_eq!(image.stdout.trim(), "deployment.apps/web image updated");
    let env = sandbox
        .kubectl(&[
            "set",
            "env",
            "deployment/web",
            "-n",
            "kc-set",
            "LOG_LEVEL=debug",
        ])
        .await
        .ok();
    assert_eq!(env.stdout.trim(), "deployment.apps/web env updated");
    let resources = sandbox
        .kubectl(&[
            "set",
            "resources",
            "deployment/web",
            "-n",
            "kc-set",
            "--limits=cpu=200m,memory=512Mi",
            "--requests=cpu=100m",
        ])
        .await
        .ok();
    assert_eq!(
        resources.stdout.trim(),
        "deployment.apps/web resource requirements updated"
    );
    let stored = deployment(&sandbox, "kc-set").await;
    let web = container(&stored);
    assert_eq!(web["image"], "nginx:1.26");
    assert_eq!(web["env"], json!([{"name": "LOG_LEVEL", "value": "debug"}]));
    assert_eq!(
        web["resources"],
        json!({"limits": {"cpu": "200m", "memory": "512Mi"}, "requests": {"cpu": "100m"}})
    );
    // Each change of the template is a rollout: revision 4, three older ReplicaSets.
    rolled_out(&sandbox, "kc-set").await;
    let stored = deployment(&sandbox, "kc-set").await;
    assert_eq!(
        stored["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "4"
    );
    assert_eq!(replica_sets(&sandbox, "kc-set").await.len(), 4);
    // Removing the variable again.
    sandbox
        .kubectl(&["set", "env", "deployment/web", "-n", "kc-set", "LOG_LEVEL-"])
        .await
        .ok();
    let stored = deployment(&sandbox, "kc-set").await;
    assert!(container(&stored).get("env").is_none(), "{stored}");
}

#[tokio::test]
async fn label_and_annotate_change_the_metadata_only() {
    let (sandbox, _) = deployed("kc-meta").await;
    let label = sandbox
        .kubectl(&[
            "label",
            "deployment",
            "web",
            "-n",
            "kc-meta",
            "tier=frontend",
        ])
        .await
        .ok();
    assert_eq!(label.stdout.trim(), "deployment.apps/web labeled");
    let annotate = sandbox
        .kubectl(&[
            "annotate",
            "deployment",
            "web",
            "-n",
            "kc-meta",
            "team=payments",
        ])
        .await
        .ok();
    assert_eq!(annotate.stdout.trim(), "deployment.apps/web annotated");
    // A label that is already there changes only with --overwrite.
    let clash = sandbox
        .kubectl(&[
            "label",
            "deployment",
            "web",
            "-n",
            "kc-meta",
            "tier=backend",
        ])
        .await;
    assert_eq!(clash.code, 1, "{clash:?}");
    assert!(clash.stderr.contains("already has a value (frontend)"));
    let stored = deployment(&sandbox, "kc-meta").await;
    assert_eq!(stored["metadata"]["labels"]["tier"], "frontend");
    assert_eq!(stored["metadata"]["annotations"]["team"], "payments");
    assert_eq!(stored["metadata"]["generation"], 1, "metadata is not spec");
    sandbox
        .kubectl(&["label", "deployment", "web", "-n", "kc-meta", "tier-"])
        .await
        .ok();
    let stored = deployment(&sandbox, "kc-meta").await;
    assert!(stored["metadata"]["labels"].get("tier").is_none());
}

#[tokio::test]
async fn patch_json_merge_and_strategic_each_change_the_stored_object() {
    let (sandbox, _) = deployed("kc-patch").await;
    let patch = |kind: &'static str, body: &'static str| {
        let sandbox = &sandbox;
        async move {
            sandbox
                .kubectl(&[
                    "patch",
                    "deployment",
                    "web",
                    "-n",
                    "kc-patch",
                    "--type",
                    kind,
                    "-p",
                    body,
                ])
                .await
        }
    };
    let json_patch = patch(
        "json",
        r#"[{"op":"add","path":"/spec/minReadySeconds","value":3}]"#,
    )
    .await
    .ok();
    assert_eq!(json_patch.stdout.trim(), "deployment.apps/web patched");
    let merge = patch("merge", r#"{"spec":{"revisionHistoryLimit":4}}"#)
        .await
        .ok();
    assert_eq!(merge.stdout.trim(), "deployment.apps/web patched");
    // Strategic merge: the container list is merged by name, not replaced.
    let strategic = patch(
        "strategic",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#,
    )
    .await
    .ok();
    assert_eq!(strategic.stdout.trim(), "deployment.apps/web patched");
    let stored = deployment(&sandbox, "kc-patch").await;
    assert_eq!(stored["spec"]["minReadySeconds"], 3);
    assert_eq!(stored["spec"]["revisionHistoryLimit"], 4);
    let names: Vec<&str> = stored["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["web", "sidecar"],
        "the new container goes after the old"
    );
    // Patching with no change changes nothing, and kubectl says so.
    let again = patch("merge", r#"{"spec":{"revisionHistoryLimit":4}}"#)
        .await
        .ok();
    assert_eq!(
        again.stdout.trim(),
        "deployment.apps/web patched (no change)"
    );
    // A JSON patch that replaces a missing field fails, as kube-apiserver fails it.
    let missing = patch(
        "json",
        r#"[{"op":"replace","path":"/spec/paused2","value":true}]"#,
    )
    .await;
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        missing.stderr.starts_with("The request is invalid: "),
        "{}",
        missing.stderr
    );
}

#[tokio::test]
async fn edit_with_an_editor_script_stores_the_edit() {
    let (sandbox, _) = deployed("kc-edit").await;
    let editor = sandbox.write_file(
        "editor.sh",
        "#!/bin/sh\nsed -i 's/image: nginx:1.25/image: nginx:1.27/' \"$1\"\n",
    );
    make_executable(&editor);
    let out = sandbox
        .kubectl_with_env(
            &["edit", "deployment/web", "-n", "kc-edit"],
            None,
            &[("KUBE_EDITOR", editor.as_str())],
        )
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "deployment.apps/web edited");
    let stored = get_json(
        &sandbox,
        &[
            "deployment",
            "web",
            "-n",
            "kc-edit",
            "--show-managed-fields",
        ],
    )
    .await;
    assert_eq!(container(&stored)["image"], "nginx:1.27");
    let manager = stored["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .any(|m| m["manager"] == "kubectl-edit");
    assert!(manager, "kubectl edit writes as kubectl-edit: {stored}");

    // An editor that changes nothing: kubectl cancels and the object stays.
    let noop = sandbox.write_file("noop.sh", "#!/bin/sh\ntrue\n");
    make_executable(&noop);
    let out = sandbox
        .kubectl_with_env(
            &["edit", "deployment/web", "-n", "kc-edit"],
            None,
            &[("KUBE_EDITOR", noop.as_str())],
        )
        .await
        .ok();
    assert!(
        out.stderr.contains("Edit cancelled, no changes made."),
        "{out:?}"
    );
}

fn make_executable(path: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .expect("the script is made executable");
}

#[tokio::test]
async fn replace_from_a_file_replaces_the_object_and_refuses_a_stale_one() {
    let (sandbox, _) = deployed("kc-replace").await;
    let mut live = deployment(&sandbox, "kc-replace").await;
    live["spec"]["replicas"] = json!(3);
    live["metadata"]["labels"] = json!({"app": "web", "replaced": "yes"});
    let file = sandbox.write_file("replace.json", &live.to_string());
    let out = sandbox.kubectl(&["replace", "-f", &file]).await.ok();
    assert_eq!(out.stdout.trim(), "deployment.apps/web replaced");
    let stored = deployment(&sandbox, "kc-replace").await;
    assert_eq!(stored["spec"]["replicas"], 3);
    assert_eq!(stored["metadata"]["labels"]["replaced"], "yes");
    // The same file again names a resourceVersion that is no longer current.
    let stale = sandbox.kubectl(&["replace", "-f", &file]).await;
    assert_eq!(stale.code, 1, "{stale:?}");
    assert_contains(&stale.stderr, "the object has been modified");
}

/// Every manifest of the recording, so that each kind can be described.
const FIXTURE_MANIFESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/kube-apiserver-v1.36/manifests"
);
