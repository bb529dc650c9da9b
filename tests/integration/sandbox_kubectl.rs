//! The real `kubectl` (1.32) against the sandbox: the commands a person trying tether
//! types, each in its own sandbox and namespace.

use serde_json::Value;
use tether_testkit::assert_contains;

use crate::support::{TestSandbox, eventually};

/// A namespace, a ConfigMap, a Secret, a Deployment and a Service in one file.
fn bundle(namespace: &str, image: &str) -> String {
    format!(
        "apiVersion: v1
kind: Namespace
metadata:
  name: {namespace}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: {namespace}
  labels: {{app: web}}
data:
  log-level: info
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  namespace: {namespace}
data:
  token: dG9rZW4tdmFsdWU=
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: {namespace}
  labels: {{app: web}}
spec:
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: {image}
      - name: sidecar
        image: busybox
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: {namespace}
spec:
  selector: {{app: web}}
  ports:
  - name: http
    port: 80
"
    )
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
";

/// A sandbox with the bundle applied server-side by kubectl.
async fn applied(namespace: &str) -> (TestSandbox, String) {
    let sandbox = TestSandbox::start().await;
    let file = sandbox.write_file("bundle.yaml", &bundle(namespace, "nginx:1.25"));
    let out = sandbox
        .kubectl(&["apply", "--server-side", "-f", &file])
        .await
        .ok();
    for line in [
        format!("namespace/{namespace} serverside-applied"),
        "configmap/app-config serverside-applied".into(),
        "secret/app-secret serverside-applied".into(),
        "deployment.apps/web serverside-applied".into(),
        "service/web serverside-applied".into(),
    ] {
        assert!(out.stdout.contains(&line), "{line} in {}", out.stdout);
    }
    (sandbox, file)
}

/// `kubectl get -o yaml`, parsed.
async fn get_yaml(sandbox: &TestSandbox, args: &[&str]) -> Value {
    let mut all = vec!["get", "-o", "yaml"];
    all.extend_from_slice(args);
    let out = sandbox.kubectl(&all).await.ok();
    serde_saphyr::from_str(&out.stdout).expect("kubectl prints YAML")
}

#[tokio::test]
async fn api_resources_lists_builtin_resources_with_short_names() {
    let sandbox = TestSandbox::start().await;
    sandbox.sandbox.reset_requests();
    let out = sandbox
        .kubectl(&["api-resources", "--no-headers"])
        .await
        .ok();
    let rows: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r.first() == Some(&name))
            .unwrap_or_else(|| panic!("{name} in {}", out.stdout))
            .clone()
    };
    assert_eq!(
        row("deployments"),
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );
    assert_eq!(
        row("configmaps"),
        ["configmaps", "cm", "v1", "true", "ConfigMap"]
    );
    assert_eq!(
        row("namespaces"),
        ["namespaces", "ns", "v1", "false", "Namespace"]
    );
    assert!(out.stdout.contains("customresourcedefinitions"));
    // Aggregated discovery: kubectl reads the API from `GET /api` and `GET /apis`, as
    // from a real server (the fixtures' KUBECTL-REQUESTS.md), not from one request per
    // group version (ten here).
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("get", "discovery"), counts.total(), "{counts:?}");
    assert!((2..=3).contains(&counts.total()), "{counts:?}");
}

/// The server's defaults and kubectl's field ownership, as `kubectl get` shows them.
#[tokio::test]
async fn server_side_apply_stores_defaults_and_kubectl_as_manager() {
    let (sandbox, _) = applied("kx-apply").await;
    let deployment = get_yaml(&sandbox, &["deployment", "web", "-n", "kx-apply"]).await;
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(
        deployment["spec"]["strategy"],
        serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(deployment["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    assert_eq!(deployment["metadata"]["generation"], 1);

    let service = get_yaml(&sandbox, &["service", "web", "-n", "kx-apply"]).await;
    let cluster_ip = service["spec"]["clusterIP"].as_str().unwrap_or_default();
    assert!(
        cluster_ip.parse::<std::net::Ipv4Addr>().is_ok(),
        "a clusterIP is allocated: {cluster_ip:?}"
    );
    assert_eq!(service["spec"]["sessionAffinity"], "None");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert_eq!(service["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 80);

    // managedFields are hidden by default since kubectl 1.21.
    let out = sandbox
        .kubectl(&[
            "get",
            "configmap",
            "app-config",
            "-n",
            "kx-apply",
            "-o",
            "yaml",
            "--show-managed-fields",
        ])
        .await
        .ok();
    let configmap: Value = serde_saphyr::from_str(&out.stdout).expect("YAML");
    let managed = configmap["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields");
    assert_eq!(managed.len(), 1, "{managed:?}");
    assert_eq!(managed[0]["manager"], "kubectl");
    assert_eq!(managed[0]["operation"], "Apply");
    assert_eq!(
        managed[0]["fieldsV1"],
        serde_json::json!({"f:data": {"f:log-level": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );
}

/// The changed lines of a unified diff, without its file headers.
fn changed_lines(diff: &str) -> Vec<String> {
    let mut lines: Vec<String> = diff
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .map(|l| {
            let (marker, rest) = l.split_at(1);
            // A list item's own dash is not part of the change.
            format!("{marker} {}", rest.trim().trim_start_matches("- "))
        })
        .collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn diff_server_side_is_empty_when_in_sync_and_shows_an_edit() {
    let (sandbox, file) = applied("kx-diff").await;
    let out = sandbox
        .kubectl(&["diff", "--server-side", "-f", &file])
        .await;
    assert_eq!(out.code, 0, "no difference: {} {}", out.stdout, out.stderr);
    assert_eq!(out.stdout, "");

    std::fs::write(&file, bundle("kx-diff", "nginx:1.26")).expect("edited");
    let out = sandbox
        .kubectl(&["diff", "--server-side", "-f", &file])
        .await;
    assert_eq!(out.code, 1, "a difference: {}", out.stderr);
    // The edited image, and the generation a spec change bumps (a dry run shows it).
    assert_eq!(
        changed_lines(&out.stdout),
        [
            "+ generation: 2",
            "+ image: nginx:1.26",
            "- generation: 1",
            "- image: nginx:1.25"
        ],
        "{}",
        out.stdout
    );
    // A dry run changes nothing.
    let deployment = get_yaml(&sandbox, &["deployment", "web", "-n", "kx-diff"]).await;
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
}

#[tokio::test]
async fn delete_removes_the_object() {
    let (sandbox, _) = applied("kx-delete").await;
    let out = sandbox
        .kubectl(&["delete", "configmap", "app-config", "-n", "kx-delete"])
        .await
        .ok();
    assert_contains(&out.stdout, "configmap \"app-config\" deleted");
    let out = sandbox
        .kubectl(&["get", "configmap", "app-config", "-n", "kx-delete"])
        .await;
    assert_eq!(out.code, 1);
    assert_contains(&out.stderr, "configmaps \"app-config\" not found");
}

#[tokio::test]
async fn get_watch_receives_a_change_made_while_it_runs() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("kx-watch").await;
    let watch = sandbox.kubectl(&[
        "get",
        "configmaps",
        "-n",
        "kx-watch",
        "--watch-only",
        "--request-timeout=3s",
        "-o",
        "name",
    ]);
    let change = async {
        eventually("kubectl's watch request", || async {
            (sandbox.sandbox.requests().get("watch", "configmaps") > 0).then_some(())
        })
        .await;
        let answer = sandbox
            .post(
                "/api/v1/namespaces/kx-watch/configmaps",
                &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seen"}}),
            )
            .await;
        assert_eq!(answer.status, 201, "{}", answer.text());
    };
    let (out, ()) = tokio::join!(watch, change);
    assert!(
        out.stdout.lines().any(|l| l == "configmap/seen"),
        "stdout: {} stderr: {}",
        out.stdout,
        out.stderr
    );
}

#[tokio::test]
async fn a_crd_then_a_custom_resource_of_it() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("kx-crd").await;
    let crd = sandbox.write_file("crd.yaml", CRD);
    sandbox
        .kubectl(&["apply", "--server-side", "-f", &crd])
        .await
        .ok();
    sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=10s",
        ])
        .await
        .ok();
    // Separately, as kubectl must rediscover the API to learn the new kind.
    let widget = sandbox.write_file(
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: kx-crd\nspec:\n  color: blue\n",
    );
    sandbox
        .kubectl(&["apply", "--server-side", "-f", &widget])
        .await
        .ok();
    let got = get_yaml(&sandbox, &["widget", "w1", "-n", "kx-crd"]).await;
    assert_eq!(got["spec"]["color"], "blue");
    assert_eq!(got["kind"], "Widget");
    let out = sandbox
        .kubectl(&["get", "wd", "-n", "kx-crd", "-o", "name"])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "widget.example.com/w1");
}

/// Conflicts are found from managedFields, and `--force-conflicts` takes the field.
#[tokio::test]
async fn a_conflicting_apply_fails_without_force_conflicts() {
    let (sandbox, _) = applied("kx-conflict").await;
    let other = sandbox.write_file(
        "other.yaml",
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: kx-conflict
spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.27
",
    );
    let out = sandbox
        .kubectl(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            &other,
        ])
        .await;
    assert_ne!(out.code, 0, "the conflict fails the apply: {}", out.stdout);
    assert!(
        out.stderr.contains("conflict with \"kubectl\"")
            && out
                .stderr
                .contains(".spec.template.spec.containers[name=\"web\"].image"),
        "{}",
        out.stderr
    );
    let unchanged = get_yaml(&sandbox, &["deployment", "web", "-n", "kx-conflict"]).await;
    assert_eq!(
        unchanged["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );

    sandbox
        .kubectl(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            &other,
        ])
        .await
        .ok();
    let taken = get_yaml(&sandbox, &["deployment", "web", "-n", "kx-conflict"]).await;
    let containers = &taken["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["image"], "nginx:1.27");
    assert_eq!(
        containers[1]["name"], "sidecar",
        "the other container stays"
    );
}

#[tokio::test]
async fn a_wrong_token_is_refused() {
    let sandbox = TestSandbox::start().await;
    let wrong = sandbox
        .sandbox
        .kubeconfig()
        .replace(sandbox.sandbox.token(), "not-the-token");
    let path = sandbox.write_file("wrong-kubeconfig", &wrong);
    let mut command = tokio::process::Command::new("kubectl");
    let out = command
        .args(["--kubeconfig", &path, "get", "namespaces"])
        .env("HOME", sandbox.dir.path())
        .output()
        .await
        .expect("kubectl runs (it must be on PATH)");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // kubectl's words for a 401.
    assert_contains(&stderr, "You must be logged in to the server");
}

#[tokio::test]
async fn scale_goes_through_the_scale_subresource() {
    let (sandbox, _) = applied("kx-scale").await;
    sandbox.sandbox.reset_requests();
    sandbox
        .kubectl(&[
            "scale",
            "deployment",
            "web",
            "-n",
            "kx-scale",
            "--replicas=3",
        ])
        .await
        .ok();
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("patch", "apps/deployments"), 1, "{counts:?}");
    let scale = sandbox
        .get("/apis/apps/v1/namespaces/kx-scale/deployments/web/scale")
        .await
        .json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 3);
    let deployment = get_yaml(&sandbox, &["deployment", "web", "-n", "kx-scale"]).await;
    assert_eq!(deployment["spec"]["replicas"], 3);
}

#[tokio::test]
async fn label_adds_a_label() {
    let (sandbox, _) = applied("kx-label").await;
    sandbox
        .kubectl(&[
            "label",
            "configmap",
            "app-config",
            "-n",
            "kx-label",
            "tier=backend",
        ])
        .await
        .ok();
    let out = sandbox
        .kubectl(&[
            "get",
            "configmaps",
            "-n",
            "kx-label",
            "-l",
            "tier=backend",
            "-o",
            "name",
        ])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "configmap/app-config");
    let configmap = get_yaml(&sandbox, &["configmap", "app-config", "-n", "kx-label"]).await;
    assert_eq!(
        configmap["metadata"]["labels"],
        serde_json::json!({"app": "web", "tier": "backend"})
    );
}

#[tokio::test]
async fn patch_merge_and_json() {
    let (sandbox, _) = applied("kx-patch").await;
    sandbox
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "-n",
            "kx-patch",
            "--type=merge",
            "-p",
            r#"{"spec":{"minReadySeconds":3}}"#,
        ])
        .await
        .ok();
    sandbox
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "-n",
            "kx-patch",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/spec/replicas","value":2}]"#,
        ])
        .await
        .ok();
    let deployment = get_yaml(&sandbox, &["deployment", "web", "-n", "kx-patch"]).await;
    assert_eq!(deployment["spec"]["minReadySeconds"], 3);
    assert_eq!(deployment["spec"]["replicas"], 2);

    // A failing JSON patch test operation changes nothing and says why.
    let out = sandbox
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "-n",
            "kx-patch",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/spec/replicas","value":9}]"#,
        ])
        .await;
    assert_ne!(out.code, 0);
}

/// Strategic merge patch merges containers by name (their patch merge key).
#[tokio::test]
async fn patch_strategic_merges_containers_by_name() {
    let (sandbox, _) = applied("kx-smp").await;
    sandbox
        .kubectl(&[
            "patch", "deployment", "web", "-n", "kx-smp", "--type=strategic", "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}"#,
        ])
        .await
        .ok();
    let deployment = get_yaml(&sandbox, &["deployment", "web", "-n", "kx-smp"]).await;
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    let images: Vec<(&str, &str)> = containers
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default(),
                c["image"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(images, [("web", "nginx:1.25"), ("sidecar", "busybox:1.36")]);
}

#[tokio::test]
async fn rollout_status_and_history_follow_the_deployment_controller() {
    let (sandbox, _) = applied("kx-rollout").await;
    let status = |namespace: &'static str| {
        let sandbox = &sandbox;
        async move {
            sandbox
                .kubectl(&[
                    "rollout",
                    "status",
                    "deployment/web",
                    "-n",
                    namespace,
                    "--timeout=30s",
                ])
                .await
                .ok()
        }
    };
    let out = status("kx-rollout").await;
    assert!(
        out.stdout
            .contains("deployment \"web\" successfully rolled out"),
        "{}",
        out.stdout
    );

    sandbox
        .kubectl(&[
            "set",
            "image",
            "deployment/web",
            "web=nginx:1.26",
            "-n",
            "kx-rollout",
        ])
        .await
        .ok();
    let out = status("kx-rollout").await;
    assert!(
        out.stdout
            .contains("deployment \"web\" successfully rolled out"),
        "{}",
        out.stdout
    );

    let out = sandbox
        .kubectl(&["rollout", "history", "deployment/web", "-n", "kx-rollout"])
        .await
        .ok();
    let revisions: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|first| first.chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert_eq!(revisions, ["1", "2"], "{}", out.stdout);

    let replica_sets = get_yaml(&sandbox, &["replicasets", "-n", "kx-rollout"]).await;
    let mut replicas: Vec<i64> = replica_sets["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|rs| rs["spec"]["replicas"].as_i64().unwrap_or(-1))
        .collect();
    replicas.sort();
    assert_eq!(replicas, [0, 1], "the old ReplicaSet is scaled to 0");
}

#[tokio::test]
async fn rollout_status_fails_for_a_broken_image() {
    let sandbox = TestSandbox::start().await;
    let file = sandbox.write_file("bundle.yaml", &bundle("kx-broken", "nginx:1.25-broken"));
    sandbox
        .kubectl(&["apply", "--server-side", "-f", &file])
        .await
        .ok();
    let out = sandbox
        .kubectl(&[
            "rollout",
            "status",
            "deployment/web",
            "-n",
            "kx-broken",
            "--timeout=30s",
        ])
        .await;
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert_contains(&out.stderr, "exceeded its progress deadline");
}
