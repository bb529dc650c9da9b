//! Every kubectl command a user types after the quickstart (issue #15), run with the
//! real `kubectl` (1.32) against the sandbox: exit code, what kubectl prints where it
//! means something, and the object stored. Commands whose requests kubectl encodes in
//! protobuf (`auth can-i`, `create deployment`, `run`, `expose`) are exercised here
//! through their `-f` equivalents until the sandbox decodes protobuf.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::support::{TestSandbox, eventually};

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
    assert!(
        out.stdout.contains("deployment.apps/web created"),
        "{}",
        out.stdout
    );
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
    assert!(
        stale.stderr.contains("Expected replicas to be 2, was 4"),
        "{}",
        stale.stderr
    );
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
    assert!(
        stale.stderr.contains("the object has been modified"),
        "{}",
        stale.stderr
    );
}

#[tokio::test]
async fn rollout_status_history_restart_and_undo() {
    let (sandbox, _) = deployed("kc-rollout").await;
    sandbox
        .kubectl(&[
            "set",
            "image",
            "deployment/web",
            "-n",
            "kc-rollout",
            "web=nginx:1.26",
        ])
        .await
        .ok();
    rolled_out(&sandbox, "kc-rollout").await;
    let history = sandbox
        .kubectl(&["rollout", "history", "deployment/web", "-n", "kc-rollout"])
        .await
        .ok();
    assert_eq!(
        rows(&history.stdout)[1..],
        [
            vec!["REVISION".to_string(), "CHANGE-CAUSE".into()],
            vec!["1".into(), "<none>".into()],
            vec!["2".into(), "<none>".into()],
        ]
    );
    let revision = sandbox
        .kubectl(&[
            "rollout",
            "history",
            "deployment/web",
            "-n",
            "kc-rollout",
            "--revision=1",
        ])
        .await
        .ok();
    assert!(
        revision.stdout.contains("nginx:1.25"),
        "{}",
        revision.stdout
    );

    let restart = sandbox
        .kubectl(&["rollout", "restart", "deployment/web", "-n", "kc-rollout"])
        .await
        .ok();
    assert_eq!(restart.stdout.trim(), "deployment.apps/web restarted");
    rolled_out(&sandbox, "kc-rollout").await;
    let stored = deployment(&sandbox, "kc-rollout").await;
    assert!(
        stored["spec"]["template"]["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/restartedAt")
            .is_some(),
        "{stored}"
    );
    assert_eq!(
        stored["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );

    let undo = sandbox
        .kubectl(&[
            "rollout",
            "undo",
            "deployment/web",
            "-n",
            "kc-rollout",
            "--to-revision=1",
        ])
        .await
        .ok();
    assert_eq!(undo.stdout.trim(), "deployment.apps/web rolled back");
    rolled_out(&sandbox, "kc-rollout").await;
    let stored = deployment(&sandbox, "kc-rollout").await;
    assert_eq!(container(&stored)["image"], "nginx:1.25");
    // Revision 1's ReplicaSet is current again, as revision 4.
    assert_eq!(
        stored["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "4"
    );
    // Why a revision was made, as the ReplicaSet copies it from the Deployment.
    sandbox
        .kubectl(&[
            "annotate",
            "deployment/web",
            "-n",
            "kc-rollout",
            "kubernetes.io/change-cause=rolled back to 1",
        ])
        .await
        .ok();
    let history = eventually("the change cause in the history", || async {
        let out = sandbox
            .kubectl(&["rollout", "history", "deployment/web", "-n", "kc-rollout"])
            .await
            .ok();
        out.stdout
            .contains("rolled back to 1")
            .then_some(out.stdout)
    })
    .await;
    let revisions: Vec<Vec<String>> = rows(&history)[2..].to_vec();
    assert_eq!(
        revisions,
        [
            vec!["2".to_string(), "<none>".into()],
            vec!["3".into(), "<none>".into()],
            vec!["4".into(), "rolled back to 1".into()],
        ]
    );
    let current = replica_sets(&sandbox, "kc-rollout")
        .await
        .into_iter()
        .find(|rs| rs["spec"]["replicas"] == 2)
        .expect("one ReplicaSet has the replicas");
    assert_eq!(
        current["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "4"
    );
    assert_eq!(
        current["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"],
        "1"
    );
    assert_eq!(
        current["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
}

#[tokio::test]
async fn wait_for_a_condition_a_jsonpath_and_a_deletion() {
    let (sandbox, _) = deployed("kc-wait").await;
    let available = sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "-n",
            "kc-wait",
            "--timeout=20s",
        ])
        .await
        .ok();
    assert_eq!(available.stdout.trim(), "deployment.apps/web condition met");
    sandbox
        .kubectl(&["scale", "deployment/web", "-n", "kc-wait", "--replicas=3"])
        .await
        .ok();
    let ready = sandbox
        .kubectl(&[
            "wait",
            "--for=jsonpath={.status.readyReplicas}=3",
            "deployment/web",
            "-n",
            "kc-wait",
            "--timeout=20s",
        ])
        .await
        .ok();
    assert_eq!(ready.stdout.trim(), "deployment.apps/web condition met");
    // A condition that never comes: kubectl gives up with exit code 1.
    let never = sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Paused",
            "deployment/web",
            "-n",
            "kc-wait",
            "--timeout=1s",
        ])
        .await;
    assert_eq!(never.code, 1, "{never:?}");

    sandbox.sandbox.reset_requests();
    let wait = sandbox.kubectl(&[
        "wait",
        "--for=delete",
        "deployment/web",
        "-n",
        "kc-wait",
        "--timeout=20s",
    ]);
    let delete = async {
        eventually("kubectl's watch of the Deployment", || async {
            (sandbox.sandbox.requests().get("watch", "apps/deployments") > 0).then_some(())
        })
        .await;
        sandbox
            .kubectl(&["delete", "deployment", "web", "-n", "kc-wait"])
            .await
            .ok()
    };
    let (waited, deleted) = tokio::join!(wait, delete);
    assert_eq!(deleted.stdout.trim(), "deployment.apps \"web\" deleted");
    let waited = waited.ok();
    assert_eq!(waited.stdout.trim(), "deployment.apps/web condition met");
}

/// Runs `kubectl get -w` and returns the lines it prints until `done` holds, then
/// stops it: a watch never ends by itself.
async fn watch_lines(
    sandbox: &TestSandbox,
    args: &[&str],
    change: impl std::future::Future<Output = ()>,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .args(args)
        .env("HOME", sandbox.dir.path())
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs");
    let mut stdout = BufReader::new(child.stdout.take().expect("kubectl's stdout")).lines();
    let mut lines = Vec::new();
    let read = async {
        while !done(&lines) {
            match stdout.next_line().await.expect("kubectl's stdout reads") {
                Some(line) => lines.push(line),
                None => break,
            }
        }
    };
    let ((), ()) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(read, change)
    })
    .await
    .unwrap_or_else(|_| panic!("kubectl get -w printed only {lines:?}"));
    child.kill().await.expect("kubectl get -w stops");
    lines
}

#[tokio::test]
async fn get_watch_prints_a_row_for_each_change() {
    let (sandbox, _) = deployed("kc-watch").await;
    // `rollout status` watched too; count only the watch of `get -w`.
    sandbox.sandbox.reset_requests();
    let change = async {
        eventually("kubectl's watch of Deployments", || async {
            (sandbox.sandbox.requests().get("watch", "apps/deployments") > 0).then_some(())
        })
        .await;
        sandbox
            .kubectl(&["scale", "deployment/web", "-n", "kc-watch", "--replicas=3"])
            .await
            .ok();
    };
    let lines = watch_lines(
        &sandbox,
        &["get", "deployments", "-n", "kc-watch", "-w"],
        change,
        |lines| {
            lines
                .iter()
                .any(|l| l.starts_with("web") && l.contains("3/3"))
        },
    )
    .await;
    let table = rows(&lines.join("\n"));
    assert_eq!(
        table[0],
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{lines:?}"
    );
    assert_eq!(table[1][..4], ["web", "2/2", "2", "2"], "{lines:?}");
    assert_eq!(
        table.iter().filter(|r| r[0] == "NAME").count(),
        1,
        "one header for the whole watch: {lines:?}"
    );
}

#[tokio::test]
async fn get_prints_the_columns_of_kube_apiservers_printers() {
    let (sandbox, _) = deployed("kc-table").await;
    let out = sandbox
        .kubectl(&[
            "get",
            "deployments,replicasets",
            "-n",
            "kc-table",
            "-o",
            "wide",
        ])
        .await
        .ok();
    let table = rows(&out.stdout);
    assert_eq!(
        table[0],
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(table[1][..4], ["deployment.apps/web", "2/2", "2", "2"]);
    assert_eq!(table[1][5..], ["web", "nginx:1.25", "app=web"]);
    assert_eq!(
        table[2][..5],
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    );
    assert!(table[3][0].starts_with("replicaset.apps/web-"), "{table:?}");
    assert_eq!(table[3][1..4], ["2", "2", "2"]);
    let namespaces = sandbox
        .kubectl(&["get", "namespace", "kc-table"])
        .await
        .ok();
    assert_eq!(rows(&namespaces.stdout)[1][..2], ["kc-table", "Active"]);
    // --sort-by asks for each row's whole object and sorts by a field of it (lists
    // come in name order, so the sort is by data).
    for (name, rank) in [("a", "3"), ("b", "1"), ("c", "2")] {
        let file = sandbox.write_file(
            &format!("{name}.yaml"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: kc-table}}\ndata: {{rank: \"{rank}\"}}\n"),
        );
        sandbox.kubectl(&["apply", "-f", &file]).await.ok();
    }
    let sorted = sandbox
        .kubectl(&[
            "get",
            "configmaps",
            "-n",
            "kc-table",
            "--sort-by=.data.rank",
        ])
        .await
        .ok();
    let names: Vec<String> = rows(&sorted.stdout)[1..]
        .iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(names, ["b", "c", "a"]);
    assert_eq!(rows(&sorted.stdout)[0], ["NAME", "DATA", "AGE"]);
}

#[tokio::test]
async fn get_events_lists_what_the_deployment_controller_did() {
    let (sandbox, _) = deployed("kc-events").await;
    sandbox
        .kubectl(&["scale", "deployment/web", "-n", "kc-events", "--replicas=5"])
        .await
        .ok();
    rolled_out(&sandbox, "kc-events").await;
    let out = sandbox
        .kubectl(&["get", "events", "-n", "kc-events"])
        .await
        .ok();
    let table = rows(&out.stdout);
    assert_eq!(
        table[0],
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    let messages: Vec<&str> = table[1..].iter().map(|r| r[4].as_str()).collect();
    let rs = replica_sets(&sandbox, "kc-events").await;
    let rs_name = rs[0]["metadata"]["name"].as_str().expect("a ReplicaSet");
    assert_eq!(
        messages,
        [
            format!("Scaled up replica set {rs_name} to 2"),
            format!("Scaled up replica set {rs_name} to 5 from 2"),
        ]
    );
    assert!(
        table[1..]
            .iter()
            .all(|r| r[1] == "Normal" && r[2] == "ScalingReplicaSet" && r[3] == "deployment/web")
    );
    // The Events as stored: the recorder's fields, pointing at the Deployment.
    let events = get_json(&sandbox, &["events", "-n", "kc-events"]).await;
    let event = &events["items"][0];
    let stored = deployment(&sandbox, "kc-events").await;
    assert_eq!(event["involvedObject"]["uid"], stored["metadata"]["uid"]);
    assert_eq!(event["source"]["component"], "deployment-controller");
    assert_eq!(event["reportingComponent"], "deployment-controller");
    assert_eq!(event["count"], 1);
    // Selected by the fields kubectl describe selects them by.
    let selected = get_json(
        &sandbox,
        &[
            "events",
            "-n",
            "kc-events",
            "--field-selector",
            "involvedObject.kind=Deployment,involvedObject.name=web,reason=ScalingReplicaSet",
        ],
    )
    .await;
    assert_eq!(selected["items"].as_array().map(Vec::len), Some(2));
    let unknown = sandbox
        .kubectl(&[
            "get",
            "events",
            "-n",
            "kc-events",
            "--field-selector",
            "involvedObject.color=red",
        ])
        .await;
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(unknown.stderr.contains("field label not supported"));
}

/// Every manifest of the recording, so that each kind can be described.
const FIXTURE_MANIFESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/kube-apiserver-v1.36/manifests"
);

#[tokio::test]
async fn describe_shows_each_kind_and_its_events() {
    let sandbox = TestSandbox::start().await;
    for first in ["01-namespace.yaml", "20-crd.yaml"] {
        sandbox
            .kubectl(&[
                "apply",
                "--server-side",
                "-f",
                &format!("{FIXTURE_MANIFESTS}/{first}"),
            ])
            .await
            .ok();
    }
    sandbox
        .kubectl(&["apply", "--server-side", "-f", FIXTURE_MANIFESTS])
        .await
        .ok();
    rolled_out(&sandbox, "fixtures").await;
    let kinds = [
        ("configmap", "app-config"),
        ("secret", "app-secret"),
        ("serviceaccount", "app"),
        ("service", "web"),
        ("deployment", "web"),
        ("statefulset", "db"),
        ("daemonset", "agent"),
        ("job", "migrate"),
        ("cronjob", "backup"),
        ("ingress", "web"),
        ("networkpolicy", "deny-all"),
        ("role", "reader"),
        ("rolebinding", "reader"),
        ("clusterrole", "fixtures-viewer"),
        ("clusterrolebinding", "fixtures-viewer"),
        ("persistentvolumeclaim", "data"),
        ("poddisruptionbudget", "web"),
        ("horizontalpodautoscaler", "web"),
        ("lease", "leader"),
        ("pod", "debug"),
        ("widget", "w1"),
        ("namespace", "fixtures"),
        ("customresourcedefinition", "widgets.example.com"),
    ];
    for (kind, name) in kinds {
        let out = sandbox
            .kubectl(&["describe", kind, name, "-n", "fixtures"])
            .await;
        assert_eq!(out.code, 0, "describe {kind}: {out:?}");
        let first = out.stdout.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("Name:") && first.ends_with(name),
            "describe {kind}: {}",
            out.stdout
        );
    }
    let hpa = sandbox
        .kubectl(&["get", "hpa", "web", "-n", "fixtures"])
        .await
        .ok();
    let table = rows(&hpa.stdout);
    assert_eq!(
        table[0],
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    assert_eq!(
        table[1][..5],
        ["web", "Deployment/web", "cpu: <unknown>/80%", "2", "10"]
    );
    let out = sandbox
        .kubectl(&["describe", "deployment", "web", "-n", "fixtures"])
        .await
        .ok();
    let rs = replica_sets(&sandbox, "fixtures").await;
    let rs_name = rs[0]["metadata"]["name"].as_str().expect("a ReplicaSet");
    assert!(
        out.stdout.contains(&format!(
            "NewReplicaSet:   {rs_name} (1/1 replicas created)"
        )),
        "{}",
        out.stdout
    );
    let events: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Events:"))
        .collect();
    assert!(
        events.iter().any(|l| l.contains("ScalingReplicaSet")
            && l.contains("deployment-controller")
            && l.contains(&format!("Scaled up replica set {rs_name} to 1"))),
        "{}",
        out.stdout
    );
    let out = sandbox
        .kubectl(&["describe", "replicaset", rs_name, "-n", "fixtures"])
        .await
        .ok();
    assert!(
        out.stdout.contains("Controlled By:  Deployment/web"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn delete_cascade_foreground_deletes_dependents_and_orphan_keeps_them() {
    let (sandbox, file) = deployed("kc-cascade").await;
    let owner = deployment(&sandbox, "kc-cascade").await["metadata"]["uid"].clone();

    let orphan = sandbox
        .kubectl(&[
            "delete",
            "deployment",
            "web",
            "-n",
            "kc-cascade",
            "--cascade=orphan",
        ])
        .await
        .ok();
    assert_eq!(orphan.stdout.trim(), "deployment.apps \"web\" deleted");
    let orphans = replica_sets(&sandbox, "kc-cascade").await;
    assert_eq!(orphans.len(), 1, "the ReplicaSet stays");
    assert!(
        orphans[0]["metadata"].get("ownerReferences").is_none(),
        "its reference to the deleted owner {owner} is removed: {}",
        orphans[0]
    );

    // The same Deployment again adopts the orphan instead of making another.
    sandbox.kubectl(&["apply", "-f", &file]).await.ok();
    rolled_out(&sandbox, "kc-cascade").await;
    let uid = deployment(&sandbox, "kc-cascade").await["metadata"]["uid"].clone();
    let adopted = replica_sets(&sandbox, "kc-cascade").await;
    assert_eq!(adopted.len(), 1, "{adopted:?}");
    assert_eq!(adopted[0]["metadata"]["ownerReferences"][0]["uid"], uid);

    // Foreground: the owner is marked with the foregroundDeletion finalizer first, its
    // dependents go, then it does.
    let resource_version = get_json(&sandbox, &["deployments", "-n", "kc-cascade"]).await
        ["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list resourceVersion")
        .to_string();
    let watch_path = format!(
        "/apis/apps/v1/namespaces/kc-cascade/deployments?watch=true&resourceVersion={resource_version}"
    );
    let watch = sandbox.watch_until(&watch_path, Duration::from_secs(20), |events| {
        events.iter().any(|e| e["type"] == "DELETED")
    });
    let delete = sandbox.kubectl(&[
        "delete",
        "deployment",
        "web",
        "-n",
        "kc-cascade",
        "--cascade=foreground",
    ]);
    let (events, deleted) = tokio::join!(watch, delete);
    let deleted = deleted.ok();
    assert_eq!(deleted.stdout.trim(), "deployment.apps \"web\" deleted");
    let marked = events
        .iter()
        .find(|e| {
            e["type"] == "MODIFIED" && e["object"]["metadata"]["deletionTimestamp"].is_string()
        })
        .unwrap_or_else(|| panic!("the Deployment is marked before it goes: {events:?}"));
    assert_eq!(
        marked["object"]["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert!(replica_sets(&sandbox, "kc-cascade").await.is_empty());
}

#[tokio::test]
async fn api_resources_and_explain_read_discovery_and_openapi() {
    let sandbox = TestSandbox::start().await;
    let out = sandbox
        .kubectl(&[
            "api-resources",
            "--api-group=authorization.k8s.io",
            "--no-headers",
        ])
        .await
        .ok();
    let table = rows(&out.stdout);
    assert!(
        table.contains(&vec![
            "selfsubjectaccessreviews".to_string(),
            "authorization.k8s.io/v1".into(),
            "false".into(),
            "SelfSubjectAccessReview".into(),
        ]),
        "{}",
        out.stdout
    );
    let out = sandbox.kubectl(&["explain", "deployment.spec"]).await.ok();
    assert!(out.stdout.contains("GROUP:      apps"), "{}", out.stdout);
    assert!(
        out.stdout.contains("FIELD: spec <DeploymentSpec>"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("replicas\t<integer>"), "{}", out.stdout);
    let missing = sandbox
        .kubectl(&["explain", "deployment.spec.colour"])
        .await;
    assert_eq!(missing.code, 1, "{missing:?}");
}

/// `kubectl auth can-i` sends its SelfSubjectAccessReview in protobuf; until the
/// sandbox decodes protobuf, the same review goes in through `kubectl create -f`.
#[tokio::test]
async fn access_reviews_allow_the_sandbox_user() {
    let sandbox = TestSandbox::start().await;
    // kubectl sends its SelfSubjectAccessReview as protobuf; "yes" exits 0, "no" exits 1.
    let can_i = sandbox
        .kubectl(&[
            "auth",
            "can-i",
            "delete",
            "deployments.apps",
            "-n",
            "default",
        ])
        .await
        .ok();
    assert_eq!(can_i.stdout.trim(), "yes");

    // A ServiceAccount (kubectl --as) is allowed what its RBAC bindings allow.
    let as_app = "--as=system:serviceaccount:default:app";
    let ask = || async {
        let out = sandbox
            .kubectl(&[
                "auth",
                "can-i",
                "delete",
                "deployments.apps",
                "-n",
                "default",
                as_app,
            ])
            .await;
        (out.code, out.stdout.trim().to_string())
    };
    assert_eq!(ask().await, (1, "no".to_string()));
    let role = sandbox.write_file(
        "role.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: deployer, namespace: default}
rules:
- {apiGroups: [apps], resources: [deployments], verbs: [get, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: deployer, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}
subjects:
- {kind: ServiceAccount, name: app, namespace: default}
",
    );
    sandbox.kubectl(&["apply", "-f", &role]).await.ok();
    assert_eq!(ask().await, (0, "yes".to_string()));
    let whoami = sandbox.kubectl(&["auth", "whoami"]).await.ok();
    assert!(
        whoami.stdout.contains("kubernetes-admin"),
        "{}",
        whoami.stdout
    );
    // Its rules: those of its binding, and asking about itself, as system:basic-user.
    let rules = crate::support::read(
        sandbox
            .request(
                reqwest::Method::POST,
                "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            )
            .header("Impersonate-User", "system:serviceaccount:default:app")
            .json(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}})),
    )
    .await;
    assert_eq!(rules.status, 201, "{}", rules.text());
    let held = rules.json()["status"]["resourceRules"].clone();
    assert!(
        held.as_array().is_some_and(|r| r
            .iter()
            .any(|r| r["resources"] == json!(["deployments"])
                && r["verbs"] == json!(["get", "delete"]))),
        "{held}"
    );

    let rules = sandbox
        .post(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}}),
        )
        .await;
    assert_eq!(rules.status, 201, "{}", rules.text());
    assert_eq!(
        rules.json()["status"]["resourceRules"],
        json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}])
    );
    let whoami = sandbox
        .post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        )
        .await;
    assert_eq!(whoami.status, 201, "{}", whoami.text());
    assert_eq!(
        whoami.json()["status"]["userInfo"]["username"],
        "kubernetes-admin"
    );
    // A review asks about something: exactly one of the two attributes.
    let empty = sandbox
        .post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}),
        )
        .await;
    assert_eq!(empty.status, 422, "{}", empty.text());
    // Reviews are answered, never stored: there is nothing to read back.
    let read = sandbox
        .get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .await;
    assert_eq!(read.status, 405, "{}", read.text());
}

#[tokio::test]
async fn create_dry_run_server_stores_nothing() {
    let sandbox = TestSandbox::start().await;
    let file = sandbox.write_file(
        "configmap.yaml",
        "apiVersion: v1
kind: ConfigMap
metadata: {name: dry, namespace: default}
data: {a: b}
",
    );
    let out = sandbox
        .kubectl(&["create", "-f", &file, "--dry-run=server"])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "configmap/dry created (server dry run)");
    let get = sandbox.kubectl(&["get", "configmap", "dry"]).await;
    assert_eq!(get.code, 1, "{get:?}");
    assert!(get.stderr.contains("configmaps \"dry\" not found"));
}

#[tokio::test]
async fn a_job_completes_and_says_so_in_get_describe_and_events() {
    let sandbox = TestSandbox::start_with(tether_sandbox::SandboxOptions {
        simulate_controllers: Some(Duration::from_millis(50)),
        ..Default::default()
    })
    .await;
    sandbox.namespace("kc-job").await;
    let file = sandbox.write_file(
        "job.yaml",
        "apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: kc-job}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: migrate, image: busybox}
",
    );
    sandbox.kubectl(&["apply", "-f", &file]).await.ok();
    let out = sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Complete",
            "job/migrate",
            "-n",
            "kc-job",
            "--timeout=20s",
        ])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "job.batch/migrate condition met");
    let out = sandbox.kubectl(&["get", "jobs", "-n", "kc-job"]).await.ok();
    let table = rows(&out.stdout);
    assert_eq!(
        table[0],
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    );
    assert_eq!(table[1][..3], ["migrate", "Complete", "1/1"]);
    let out = sandbox
        .kubectl(&["describe", "job", "migrate", "-n", "kc-job"])
        .await
        .ok();
    let completed = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Events:"))
        .filter(|l| l.contains("Completed") && l.contains("job-controller"))
        .count();
    assert_eq!(completed, 1, "one Completed event: {}", out.stdout);
    let events = get_json(&sandbox, &["events", "-n", "kc-job"]).await;
    assert_eq!(events["items"][0]["reason"], "Completed");
    assert_eq!(events["items"][0]["involvedObject"]["kind"], "Job");
    assert_eq!(events["items"][0]["count"], 1);
}

#[tokio::test]
async fn rollout_pause_holds_a_template_change_until_resume() {
    let (sandbox, _) = deployed("kc-pause").await;
    let pause = sandbox
        .kubectl(&["rollout", "pause", "deployment/web", "-n", "kc-pause"])
        .await
        .ok();
    assert_eq!(pause.stdout.trim(), "deployment.apps/web paused");
    sandbox
        .kubectl(&[
            "set",
            "image",
            "deployment/web",
            "-n",
            "kc-pause",
            "web=nginx:1.26",
        ])
        .await
        .ok();
    sandbox
        .kubectl(&["scale", "deployment/web", "-n", "kc-pause", "--replicas=3"])
        .await
        .ok();
    // Paused: the one ReplicaSet is scaled, none is made for the new template.
    let paused = eventually("the paused condition and the scaled ReplicaSet", || async {
        let stored = deployment(&sandbox, "kc-pause").await;
        let progressing = stored["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Progressing")?
            .clone();
        (progressing["reason"] == "DeploymentPaused" && stored["status"]["readyReplicas"] == 3)
            .then_some(progressing)
    })
    .await;
    assert_eq!(paused["status"], "Unknown");
    assert_eq!(paused["message"], "Deployment is paused");
    let held = replica_sets(&sandbox, "kc-pause").await;
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        held[0]["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );

    let resume = sandbox
        .kubectl(&["rollout", "resume", "deployment/web", "-n", "kc-pause"])
        .await
        .ok();
    assert_eq!(resume.stdout.trim(), "deployment.apps/web resumed");
    rolled_out(&sandbox, "kc-pause").await;
    let sets = replica_sets(&sandbox, "kc-pause").await;
    let current = sets
        .iter()
        .find(|rs| rs["spec"]["replicas"] == 3)
        .expect("the new ReplicaSet has the replicas");
    assert_eq!(
        current["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.26"
    );
    assert_eq!(sets.len(), 2);
}

/// kubectl 1.32's `autoscale` writes autoscaling/v1 (`targetCPUUtilizationPercentage`);
/// kube-apiserver stores it as autoscaling/v2 and serves it in both versions.
#[tokio::test]
async fn autoscale_creates_an_hpa_served_at_autoscaling_v1_and_v2() {
    let (sandbox, _) = deployed("kc-hpa").await;
    let out = sandbox
        .kubectl(&[
            "autoscale",
            "deployment",
            "web",
            "-n",
            "kc-hpa",
            "--min=1",
            "--max=3",
            "--cpu-percent=50",
            "-v=6",
        ])
        .await
        .ok();
    assert_eq!(
        out.stdout.trim(),
        "horizontalpodautoscaler.autoscaling/web autoscaled"
    );
    assert!(
        out.stderr.contains(
            "POST https://127.0.0.1:"
        ) && out
            .stderr
            .contains("/apis/autoscaling/v1/namespaces/kc-hpa/horizontalpodautoscalers?fieldManager=kubectl-autoscale 201 Created"),
        "kubectl 1.32 creates at autoscaling/v1: {}",
        out.stderr
    );

    // `get hpa` reads the preferred version (v2) and prints kube-apiserver's columns.
    let out = sandbox.kubectl(&["get", "hpa", "-n", "kc-hpa"]).await.ok();
    let table = rows(&out.stdout);
    assert_eq!(
        table[0],
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    assert_eq!(
        table[1][..6],
        ["web", "Deployment/web", "cpu: <unknown>/50%", "1", "3", "0"]
    );
    // The same columns at v1: one printer for the stored object.
    let out = sandbox
        .kubectl(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "-n",
            "kc-hpa",
        ])
        .await
        .ok();
    assert_eq!(rows(&out.stdout)[1][..6], table[1][..6]);

    let out = sandbox
        .kubectl(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
            "-o",
            "yaml",
        ])
        .await
        .ok();
    assert!(
        out.stdout.contains("apiVersion: autoscaling/v1"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  targetCPUUtilizationPercentage: 50"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("metrics"), "{}", out.stdout);
    // The v1 schema is served for `explain`.
    let out = sandbox
        .kubectl(&["explain", "hpa.spec", "--api-version=autoscaling/v1"])
        .await
        .ok();
    assert!(
        out.stdout.contains("targetCPUUtilizationPercentage"),
        "{}",
        out.stdout
    );
    // kubectl expands a short name to its group's preferred version: `hpa.v1.autoscaling`
    // reads v2 (the discovery is the recorded one, so kube-apiserver sees the same).
    let out = sandbox
        .kubectl(&[
            "get",
            "hpa.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
            "-o",
            "yaml",
            "-v=6",
        ])
        .await
        .ok();
    assert!(
        out.stderr
            .contains("/apis/autoscaling/v2/namespaces/kc-hpa/horizontalpodautoscalers/web 200"),
        "{}",
        out.stderr
    );
    let v2 = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ],
    )
    .await;
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert_eq!(v2["spec"]["minReplicas"], 1);
    assert!(v2["metadata"].get("annotations").is_none());
    // Field ownership is recorded in the version kubectl wrote in.
    let shown = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-n",
            "kc-hpa",
            "--show-managed-fields",
        ],
    )
    .await;
    let entry = &shown["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "kubectl-autoscale");
    assert_eq!(entry["apiVersion"], "autoscaling/v1");
    assert_eq!(
        entry["fieldsV1"]["f:spec"]["f:targetCPUUtilizationPercentage"],
        json!({}),
        "{entry}"
    );

    // A v2 HPA with what v1 cannot say: a memory metric and a behavior.
    let file = sandbox.write_file(
        "hpa-v2.yaml",
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
  namespace: kc-hpa
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  - type: Resource
    resource: {name: memory, target: {type: AverageValue, averageValue: 500Mi}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 60}
",
    );
    sandbox.kubectl(&["replace", "-f", &file]).await.ok();
    let v1 = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ],
    )
    .await;
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    let annotations = &v1["metadata"]["annotations"];
    let carried: Value = serde_json::from_str(
        annotations["autoscaling.alpha.kubernetes.io/metrics"]
            .as_str()
            .expect("the memory metric travels in an annotation"),
    )
    .expect("JSON");
    assert_eq!(
        carried,
        json!([{"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "500Mi"}}])
    );
    let behavior: Value = serde_json::from_str(
        annotations["autoscaling.alpha.kubernetes.io/behavior"]
            .as_str()
            .expect("the behavior travels in an annotation"),
    )
    .expect("JSON");
    assert_eq!(behavior["ScaleDown"]["StabilizationWindowSeconds"], 60);

    // A read-modify-write through v1 keeps what v1 cannot say.
    let mut edited = v1.clone();
    edited["spec"]["maxReplicas"] = json!(5);
    let file = sandbox.write_file("hpa-v1.json", &edited.to_string());
    sandbox.kubectl(&["replace", "-f", &file]).await.ok();
    let v2 = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ],
    )
    .await;
    assert_eq!(v2["spec"]["maxReplicas"], 5);
    let metrics: Vec<&str> = v2["spec"]["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .filter_map(|m| m["resource"]["name"].as_str())
        .collect();
    assert_eq!(metrics, ["memory", "cpu"], "the carried metric comes first");
    assert_eq!(
        v2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        60
    );
    assert!(
        v2["metadata"].get("annotations").is_none(),
        "the carrying annotations are not stored: {}",
        v2["metadata"]
    );

    // A v1 merge patch changes the CPU target and leaves the memory metric alone.
    sandbox
        .kubectl(&[
            "patch",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
            "--type=merge",
            "-p",
            r#"{"spec":{"targetCPUUtilizationPercentage":70}}"#,
        ])
        .await
        .ok();
    let v2 = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ],
    )
    .await;
    assert_eq!(
        v2["spec"]["metrics"][1]["resource"],
        json!({"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}})
    );
    assert_eq!(v2["spec"]["metrics"][0]["resource"]["name"], "memory");

    let out = sandbox
        .kubectl(&[
            "delete",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ])
        .await
        .ok();
    assert_eq!(
        out.stdout.trim(),
        "horizontalpodautoscaler.autoscaling \"web\" deleted"
    );
    let gone = sandbox
        .kubectl(&["get", "hpa", "web", "-n", "kc-hpa"])
        .await;
    assert_eq!(gone.code, 1, "{gone:?}");
}

/// core/v1 and events.k8s.io/v1 Events are one storage with renamed fields: an Event
/// written in either version reads back in the other, and kubectl's `get events`,
/// `get events.v1.events.k8s.io` and `describe` see both.
#[tokio::test]
async fn events_written_at_either_version_read_back_at_the_other() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("kc-ev").await;
    let config = sandbox
        .post(
            "/api/v1/namespaces/kc-ev/configmaps",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}),
        )
        .await
        .json();
    let uid = config["metadata"]["uid"].as_str().expect("a uid");
    let regarding = json!({"kind": "ConfigMap", "namespace": "kc-ev", "name": "settings", "uid": uid, "apiVersion": "v1"});

    // events.k8s.io/v1 → core/v1.
    let created = sandbox
        .post(
            "/apis/events.k8s.io/v1/namespaces/kc-ev/events",
            &json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "settings.new"},
                "eventTime": "2026-11-24T09:00:00.123456Z",
                "reportingController": "example.com/syncer",
                "reportingInstance": "syncer-0",
                "action": "Sync",
                "reason": "Synced",
                "regarding": regarding,
                "note": "settings synced from git",
                "type": "Normal"
            }),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let created = created.json();
    assert_eq!(created["apiVersion"], "events.k8s.io/v1");
    assert_eq!(created["note"], "settings synced from git");
    assert_eq!(created["deprecatedSource"], json!({}));
    let core = sandbox
        .get("/api/v1/namespaces/kc-ev/events/settings.new")
        .await
        .json();
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["involvedObject"], regarding);
    assert_eq!(core["message"], "settings synced from git");
    assert_eq!(core["reportingComponent"], "example.com/syncer");
    assert_eq!(core["reportingInstance"], "syncer-0");
    assert_eq!(core["eventTime"], "2026-11-24T09:00:00.123456Z");
    assert_eq!(core["source"], json!({}));
    assert_eq!(core["firstTimestamp"], Value::Null);
    assert!(core.get("note").is_none() && core.get("regarding").is_none());
    // Owned in the version it was written in, with that version's field names.
    let entry = &core["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "events.k8s.io/v1");
    assert!(entry["fieldsV1"].get("f:note").is_some(), "{entry}");
    assert_eq!(
        core["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "one object, not two"
    );

    // core/v1 → events.k8s.io/v1, as a recorder of the old API writes it.
    let written = sandbox
        .post(
            "/api/v1/namespaces/kc-ev/events",
            &json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "settings.old"},
                "involvedObject": regarding,
                "reason": "Drifted",
                "message": "settings changed outside git",
                "source": {"component": "tether", "host": "node-1"},
                "firstTimestamp": "2026-11-24T09:01:00Z",
                "lastTimestamp": "2026-11-24T09:02:00Z",
                "count": 3,
                "type": "Warning"
            }),
        )
        .await;
    assert_eq!(written.status, 201, "{}", written.text());
    let event = sandbox
        .get("/apis/events.k8s.io/v1/namespaces/kc-ev/events/settings.old")
        .await
        .json();
    assert_eq!(event["apiVersion"], "events.k8s.io/v1");
    assert_eq!(event["regarding"], regarding);
    assert_eq!(event["note"], "settings changed outside git");
    assert_eq!(
        event["deprecatedSource"],
        json!({"component": "tether", "host": "node-1"})
    );
    assert_eq!(event["deprecatedFirstTimestamp"], "2026-11-24T09:01:00Z");
    assert_eq!(event["deprecatedLastTimestamp"], "2026-11-24T09:02:00Z");
    assert_eq!(event["deprecatedCount"], 3);
    assert_eq!(event["eventTime"], Value::Null);
    assert!(event.get("message").is_none() && event.get("involvedObject").is_none());
    let listed = sandbox
        .get("/apis/events.k8s.io/v1/namespaces/kc-ev/events")
        .await
        .json();
    assert_eq!(listed["kind"], "EventList");
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(listed["items"][0]["note"], "settings synced from git");

    // events.k8s.io/v1 asks more of a new Event than core/v1 does.
    let refused = sandbox
        .post(
            "/apis/events.k8s.io/v1/namespaces/kc-ev/events",
            &json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "bad"},
                    "regarding": regarding, "note": "no time", "deprecatedCount": 1}),
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    let status = refused.json();
    assert_eq!(
        status["message"],
        "Event.events.k8s.io \"bad\" is invalid: [eventTime: Required value, type: Invalid value: \"\": has invalid value: , deprecatedCount: Invalid value: \"\": needs to be unset]"
    );

    // kubectl: both resources print kube-apiserver's Event columns.
    for resource in ["events", "events.v1.events.k8s.io"] {
        let out = sandbox
            .kubectl(&["get", resource, "-n", "kc-ev"])
            .await
            .ok();
        let table = rows(&out.stdout);
        assert_eq!(
            table[0],
            ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            "{resource}"
        );
        let reasons: Vec<(&str, &str, &str)> = table[1..]
            .iter()
            .map(|r| (r[1].as_str(), r[2].as_str(), r[4].as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("Normal", "Synced", "settings synced from git"),
                ("Warning", "Drifted", "settings changed outside git")
            ],
            "{resource}"
        );
        assert!(table[1..].iter().all(|r| r[3] == "configmap/settings"));
    }
    let yaml = sandbox
        .kubectl(&[
            "get",
            "events.v1.events.k8s.io",
            "settings.old",
            "-n",
            "kc-ev",
            "-o",
            "yaml",
        ])
        .await
        .ok();
    assert!(
        yaml.stdout.contains("apiVersion: events.k8s.io/v1"),
        "{}",
        yaml.stdout
    );
    assert!(
        yaml.stdout.contains("note: settings changed outside git"),
        "{}",
        yaml.stdout
    );

    // `describe` finds both by the core fields it selects on.
    let out = sandbox
        .kubectl(&["describe", "configmap", "settings", "-n", "kc-ev"])
        .await
        .ok();
    let events: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Events:"))
        .collect();
    assert!(
        events.iter().any(|l| l.contains("Synced")
            && l.contains("example.com/syncer")
            && l.contains("settings synced from git")),
        "{}",
        out.stdout
    );
    assert!(
        events
            .iter()
            .any(|l| l.contains("Drifted") && l.contains("(x3 over") && l.contains("tether")),
        "{}",
        out.stdout
    );

    // A delete at either version removes the one object.
    sandbox
        .kubectl(&[
            "delete",
            "events.v1.events.k8s.io",
            "settings.old",
            "-n",
            "kc-ev",
        ])
        .await
        .ok();
    assert_eq!(
        sandbox
            .get("/api/v1/namespaces/kc-ev/events/settings.old")
            .await
            .status,
        404
    );
}
