//! `tether sync` as a user runs it, against the sandbox: a whole revision (a CRD with
//! its custom resource, a Namespace with its objects) in one run; idempotency (a
//! second sync writes nothing); a revision with one invalid object applies nothing;
//! conflicts with and without force; prune with its guards and protections; health
//! with `--wait`; immutable fields; and, as `tether serve` calls it, adopting an
//! unlabelled object its watch cache cannot see.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tether_testkit::assert_contains;

use serde_json::Value;
use tether_sandbox::SandboxOptions;

use crate::support::{
    KubectlOutput, TestSandbox, action_of, app_dir, json as report, sync_app as sync, tether,
    tether_with_env,
};

mod requests;

/// Every recorded manifest but the bare Pod (pods are a controller's business, not
/// an app's) and the Lease (renewed by its holder).
const RECORDED: &[&str] = &[
    "01-namespace.yaml",
    "02-configmap.yaml",
    "03-secret.yaml",
    "04-serviceaccount.yaml",
    "05-service-clusterip.yaml",
    "06-service-nodeport.yaml",
    "07-service-lb.yaml",
    "08-deployment.yaml",
    "09-statefulset.yaml",
    "10-daemonset.yaml",
    "11-job.yaml",
    "12-cronjob.yaml",
    "13-ingress.yaml",
    "14-networkpolicy.yaml",
    "15-rbac.yaml",
    "16-pvc.yaml",
    "17-pdb.yaml",
    "18-hpa.yaml",
    "20-crd.yaml",
    "21-widget.yaml",
];

fn recorded_dir(into: &Path) -> PathBuf {
    let from =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kube-apiserver-v1.36/manifests");
    let dir = into.join("recorded");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for name in RECORDED {
        std::fs::copy(from.join(name), dir.join(name)).expect("copy a manifest");
    }
    dir
}

fn configmap(name: &str, extra_metadata: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n{extra_metadata}data:\n  key: \"{value}\"\n"
    )
}

/// Fails unless the API server says the ConfigMap does not exist (kubectl failing for
/// another reason, such as a refused connection, is not proof of a prune).
#[track_caller]
fn assert_not_found(out: KubectlOutput, name: &str) {
    assert_ne!(out.code, 0, "configmap {name} still exists: {}", out.stdout);
    assert!(
        out.stderr
            .contains(&format!("(NotFound): configmaps \"{name}\" not found")),
        "{}",
        out.stderr
    );
}

/// The names of the ConfigMaps an app's inventory lists, sorted.
async fn inventory_names(sandbox: &TestSandbox, app: &str) -> Vec<String> {
    let out = sandbox
        .kubectl(&[
            "get",
            "cm",
            &format!("tether-inventory-{app}"),
            "-n",
            "tether-system",
            "-o",
            "jsonpath={.data.objects}",
        ])
        .await
        .ok();
    let mut names: Vec<String> = out
        .stdout
        .lines()
        .map(|line| {
            let entry: Value = serde_json::from_str(line).expect("an inventory line is JSON");
            entry["name"].as_str().expect("a name").to_string()
        })
        .collect();
    names.sort();
    names
}

/// `kind/name` → action, from a JSON report.
fn actions(report: &Value) -> Vec<(String, String)> {
    let mut actions: Vec<(String, String)> = report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["kind"].as_str().unwrap_or_default(),
                    r["name"].as_str().unwrap_or_default()
                ),
                r["action"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    actions.sort();
    actions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_revision_syncs_in_one_run_and_a_second_sync_writes_nothing() {
    let sandbox = TestSandbox::start().await;
    let dir = recorded_dir(sandbox.dir.path());

    let first = sync(&sandbox, &dir, "fixtures", &[]).await;
    assert_eq!(first.code, Some(0), "{}{}", first.stdout, first.stderr);
    let first = report(&first);
    assert_eq!(first["summary"]["failed"], 0, "{first}");
    // The CRD and its Widget, the Namespace and everything in it: all created at once.
    assert_eq!(action_of(&first, "Widget/w1"), "created");
    assert_eq!(action_of(&first, "Namespace/fixtures"), "created");
    assert_eq!(first["summary"]["created"], 23, "{first}");
    let widget = sandbox
        .kubectl(&["get", "widgets", "w1", "-n", "fixtures", "-o", "json"])
        .await
        .ok();
    let widget: Value = serde_json::from_str(&widget.stdout).expect("JSON");
    assert_eq!(widget["metadata"]["labels"]["tether.dev/app"], "fixtures");
    assert_eq!(
        widget["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "tether"
    );
    // The inventory records every object and lives in tether-system.
    let inventory = sandbox
        .kubectl(&[
            "get",
            "configmap",
            "tether-inventory-fixtures",
            "-n",
            "tether-system",
            "-o",
            "jsonpath={.data.objects}",
        ])
        .await
        .ok();
    assert_eq!(inventory.stdout.lines().count(), 23, "{}", inventory.stdout);

    sandbox.sandbox.reset_requests();
    let second = sync(&sandbox, &dir, "fixtures", &[]).await;
    assert_eq!(second.code, Some(0), "{}{}", second.stdout, second.stderr);
    let second = report(&second);
    assert_eq!(second["summary"]["unchanged"], 23, "{second}");
    assert_eq!(
        sandbox.sandbox.requests().writes(),
        0,
        "an in-sync app is written to: {:?}",
        sandbox.sandbox.requests()
    );
    // Known unchanged without asking the server: not even a dry run; and read with
    // one list per kind and namespace, not one request per object.
    let requests = sandbox.sandbox.requests();
    assert_eq!(requests.verb("dryrun:patch"), 0, "{requests:?}");
    let gets = requests.verb("get") - requests.get("get", "discovery");
    assert_eq!(gets, 1, "only the inventory is read alone: {requests:?}");
    assert!(requests.verb("list") < 23, "{requests:?}");
    assert!(
        requests.get("get", "discovery") <= 2,
        "aggregated discovery: {requests:?}"
    );

    let diff = tether(
        &sandbox,
        "diff",
        &["--path", dir.to_str().expect("utf-8"), "--app", "fixtures"],
    )
    .await;
    assert_eq!(diff.code, Some(0), "{}{}", diff.stdout, diff.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_with_one_invalid_object_applies_nothing() {
    let sandbox = TestSandbox::start().await;
    let invalid = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: bad\n  namespace: default\nspec:\n  replicas: -1\n  selector: {matchLabels: {app: bad}}\n  template:\n    metadata: {labels: {app: bad}}\n    spec:\n      containers: [{name: app, image: nginx}]\n";
    let dir = app_dir(
        &sandbox,
        "invalid",
        &[
            ("a.yaml", configmap("first", "", "a").as_str()),
            ("b.yaml", invalid),
            ("c.yaml", configmap("last", "", "c").as_str()),
            (
                "d.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lost, namespace: nowhere}\n",
            ),
        ],
    );
    sandbox.sandbox.reset_requests();
    let run = sync(&sandbox, &dir, "broken", &[]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let report = report(&run);
    assert_eq!(action_of(&report, "Deployment/bad"), "failed");
    assert_eq!(action_of(&report, "ConfigMap/lost"), "failed");
    assert_eq!(action_of(&report, "ConfigMap/first"), "skipped");
    let bad = report["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == "bad")
        .expect("bad is reported");
    assert!(
        bad["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.replicas")),
        "{bad}"
    );
    let lost = report["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == "lost")
        .expect("lost is reported");
    assert_eq!(
        lost["message"],
        "namespace \"nowhere\" neither exists nor is in this revision"
    );
    assert_eq!(
        sandbox.sandbox.requests().writes(),
        0,
        "{:?}",
        sandbox.sandbox.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_is_reported_without_force_and_taken_with_it() {
    let sandbox = TestSandbox::start().await;
    let theirs = sandbox.write_file("theirs.yaml", &configmap("shared", "", "theirs"));
    sandbox
        .kubectl(&[
            "apply",
            "--server-side",
            "--field-manager",
            "someone-else",
            "-f",
            &theirs,
        ])
        .await
        .ok();
    let dir = app_dir(
        &sandbox,
        "conflict",
        &[("cm.yaml", &configmap("shared", "", "ours"))],
    );

    let refused = sync(&sandbox, &dir, "conflict", &["--no-force"]).await;
    assert_eq!(
        refused.code,
        Some(1),
        "{}{}",
        refused.stdout,
        refused.stderr
    );
    let refused = report(&refused);
    assert_eq!(action_of(&refused, "ConfigMap/shared"), "failed");
    let message = refused["resources"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("conflict") && message.contains("someone-else"),
        "{message}"
    );
    let value = || sandbox.kubectl(&["get", "cm", "shared", "-o", "jsonpath={.data.key}"]);
    assert_eq!(value().await.ok().stdout, "theirs");

    let forced = sync(&sandbox, &dir, "conflict", &[]).await;
    assert_eq!(forced.code, Some(0), "{}{}", forced.stdout, forced.stderr);
    let forced = report(&forced);
    assert_eq!(action_of(&forced, "ConfigMap/shared"), "configured");
    assert_eq!(
        forced["resources"][0]["changes"][1],
        serde_json::json!({"path": "data.key", "desired": "ours", "live": "theirs"}),
        "{forced}"
    );
    assert_eq!(value().await.ok().stdout, "ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_only_what_the_app_owns_within_its_guards() {
    let sandbox = TestSandbox::start().await;
    let protected = "  annotations:\n    tether.dev/prune: disabled\n";
    let all = [
        ("a.yaml", configmap("a", "", "1")),
        ("b.yaml", configmap("b", "", "1")),
        ("c.yaml", configmap("c", "", "1")),
        ("d.yaml", configmap("d", protected, "1")),
        ("e.yaml", configmap("e", "", "1")),
    ];
    let files = |names: &[&str]| -> Vec<(&str, &str)> {
        all.iter()
            .filter(|(f, _)| names.contains(f))
            .map(|(f, c)| (*f, c.as_str()))
            .collect()
    };
    let dir = app_dir(
        &sandbox,
        "prune",
        &files(&["a.yaml", "b.yaml", "c.yaml", "d.yaml"]),
    );
    let run = sync(&sandbox, &dir, "pruner", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);

    // Without --prune, what left Git is reported, not deleted.
    let dir = app_dir(&sandbox, "prune", &files(&["a.yaml", "b.yaml", "c.yaml"]));
    let kept = report(&sync(&sandbox, &dir, "pruner", &[]).await);
    assert_eq!(action_of(&kept, "ConfigMap/d"), "skipped");
    // With it, the protected object stays.
    let run = sync(&sandbox, &dir, "pruner", &["--prune"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(action_of(&report(&run), "ConfigMap/d"), "skipped");
    sandbox.kubectl(&["get", "cm", "d"]).await.ok();

    // A tampered inventory lists an object the app does not own: never deleted.
    let stranger = sandbox.write_file("stranger.yaml", &configmap("stranger", "", "x"));
    sandbox.kubectl(&["apply", "-f", &stranger]).await.ok();
    let inventory = sandbox
        .kubectl(&[
            "get",
            "cm",
            "tether-inventory-pruner",
            "-n",
            "tether-system",
            "-o",
            "jsonpath={.data.objects}",
        ])
        .await
        .ok()
        .stdout;
    let tampered = format!(
        "{inventory}\n{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"default\",\"name\":\"stranger\"}}"
    );
    let patch = serde_json::json!({"data": {"objects": tampered}}).to_string();
    sandbox
        .kubectl(&[
            "patch",
            "cm",
            "tether-inventory-pruner",
            "-n",
            "tether-system",
            "--type",
            "merge",
            "-p",
            &patch,
        ])
        .await
        .ok();

    // Dropping c (one of four owned) prunes it, not the stranger.
    let dir = app_dir(&sandbox, "prune", &files(&["a.yaml", "b.yaml"]));
    let run = sync(&sandbox, &dir, "pruner", &["--prune"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let pruned = report(&run);
    assert_eq!(action_of(&pruned, "ConfigMap/c"), "pruned");
    assert_eq!(action_of(&pruned, "ConfigMap/stranger"), "skipped");
    sandbox.kubectl(&["get", "cm", "stranger"]).await.ok();
    assert_not_found(sandbox.kubectl(&["get", "cm", "c"]).await, "c");

    // An empty desired state never prunes, unless told to.
    let empty = app_dir(&sandbox, "prune", &[] as &[(&str, &str)]);
    let refused = sync(&sandbox, &empty, "pruner", &["--prune"]).await;
    assert_eq!(
        refused.code,
        Some(1),
        "{}{}",
        refused.stdout,
        refused.stderr
    );
    let refused = report(&refused);
    assert!(
        refused["pruneRefused"]
            .as_str()
            .is_some_and(|r| r.contains("empty") && r.contains("--allow-mass-prune")),
        "{refused}"
    );
    sandbox.kubectl(&["get", "cm", "a"]).await.ok();

    // Neither does dropping more than half of what the app owns: three of five.
    let one = app_dir(&sandbox, "prune", &files(&["a.yaml"]));
    let dir_two = app_dir(
        &sandbox,
        "prune2",
        &files(&["a.yaml", "b.yaml", "c.yaml", "e.yaml"]),
    );
    assert_eq!(sync(&sandbox, &dir_two, "pruner", &[]).await.code, Some(0));
    let refused = sync(&sandbox, &one, "pruner", &["--prune"]).await;
    assert_eq!(
        refused.code,
        Some(1),
        "{}{}",
        refused.stdout,
        refused.stderr
    );
    let refused = report(&refused);
    assert!(
        refused["pruneRefused"]
            .as_str()
            .is_some_and(|r| r.contains("more than half")),
        "{refused}"
    );
    sandbox.kubectl(&["get", "cm", "b"]).await.ok();
    let allowed = sync(&sandbox, &one, "pruner", &["--prune", "--allow-mass-prune"]).await;
    assert_eq!(
        allowed.code,
        Some(0),
        "{}{}",
        allowed.stdout,
        allowed.stderr
    );
    assert_not_found(sandbox.kubectl(&["get", "cm", "b"]).await, "b");
    sandbox.kubectl(&["get", "cm", "d"]).await.ok();

    // Exactly half is not more than half: two of four (a, b, c and the protected d)
    // are pruned without --allow-mass-prune.
    let three = app_dir(&sandbox, "prune2", &files(&["a.yaml", "b.yaml", "c.yaml"]));
    assert_eq!(sync(&sandbox, &three, "pruner", &[]).await.code, Some(0));
    assert_eq!(
        inventory_names(&sandbox, "pruner").await,
        ["a", "b", "c", "d"]
    );
    let half = sync(&sandbox, &one, "pruner", &["--prune"]).await;
    assert_eq!(half.code, Some(0), "{}{}", half.stdout, half.stderr);
    let half = report(&half);
    assert_eq!(half["pruneRefused"], Value::Null, "{half}");
    assert_eq!(action_of(&half, "ConfigMap/b"), "pruned");
    assert_eq!(action_of(&half, "ConfigMap/c"), "pruned");
    assert_not_found(sandbox.kubectl(&["get", "cm", "c"]).await, "c");

    // Inventory entries whose objects someone else deleted are not deletions: three
    // of five gone would be more than half, yet nothing is refused, and the inventory
    // forgets them.
    let four = app_dir(
        &sandbox,
        "prune2",
        &files(&["a.yaml", "b.yaml", "c.yaml", "e.yaml"]),
    );
    assert_eq!(sync(&sandbox, &four, "pruner", &[]).await.code, Some(0));
    assert_eq!(
        inventory_names(&sandbox, "pruner").await,
        ["a", "b", "c", "d", "e"]
    );
    sandbox.kubectl(&["delete", "cm", "b", "c", "e"]).await.ok();
    let gone = sync(&sandbox, &one, "pruner", &["--prune"]).await;
    assert_eq!(gone.code, Some(0), "{}{}", gone.stdout, gone.stderr);
    let gone = report(&gone);
    assert_eq!(gone["pruneRefused"], Value::Null, "{gone}");
    assert_eq!(inventory_names(&sandbox, "pruner").await, ["a", "d"]);

    // An object tether never applied is not the app's to prune, even when someone
    // gave it the app's label: prune starts from the inventory, never from a label.
    let foreign = sandbox.write_file(
        "foreign.yaml",
        &configmap("foreign", "  labels:\n    tether.dev/app: pruner\n", "x"),
    );
    sandbox.kubectl(&["apply", "-f", &foreign]).await.ok();
    let run = sync(&sandbox, &one, "pruner", &["--prune"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let kept = report(&run);
    assert!(
        actions(&kept).iter().all(|(o, _)| o != "ConfigMap/foreign"),
        "{kept}"
    );
    sandbox.kubectl(&["get", "cm", "foreign"]).await.ok();
    assert_eq!(inventory_names(&sandbox, "pruner").await, ["a", "d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_follows_health_to_healthy_degraded_or_timeout() {
    let sandbox = TestSandbox::start_with(SandboxOptions {
        simulate_controllers: Some(Duration::from_millis(200)),
        ..SandboxOptions::default()
    })
    .await;
    let deployment = |name: &str, image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers: [{{name: app, image: \"{image}\"}}]\n"
        )
    };
    let good = app_dir(
        &sandbox,
        "good",
        &[("d.yaml", &deployment("good", "nginx:1.25"))],
    );
    let run = sync(&sandbox, &good, "good", &["--wait", "--timeout", "30s"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let healthy = report(&run);
    assert_eq!(healthy["health"], "Healthy", "{healthy}");

    let broken = app_dir(
        &sandbox,
        "broken",
        &[("d.yaml", &deployment("broken", "nginx:1.25-broken"))],
    );
    let run = sync(&sandbox, &broken, "broken", &["--wait", "--timeout", "30s"]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let degraded = report(&run);
    assert_eq!(degraded["health"], "Degraded", "{degraded}");
    assert!(
        degraded["waitFailed"]
            .as_str()
            .is_some_and(|w| w.contains("Degraded")),
        "{degraded}"
    );

    // Without controllers nothing ever reports ready: --wait gives up at its timeout.
    let still = TestSandbox::start().await;
    still.sandbox.set_deployment_controller_delay(None);
    let dir = app_dir(
        &still,
        "still",
        &[("d.yaml", &deployment("still", "nginx:1.25"))],
    );
    let run = sync(&still, &dir, "still", &["--wait", "--timeout", "1s"]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let timed_out = report(&run);
    assert!(
        timed_out["waitFailed"]
            .as_str()
            .is_some_and(|w| w.starts_with("timed out")),
        "{timed_out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immutable_change_is_explained_and_replaced_only_when_asked() {
    let sandbox = TestSandbox::start().await;
    let deployment = |selector: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  selector: {{matchLabels: {{app: {selector}}}}}\n  template:\n    metadata: {{labels: {{app: {selector}}}}}\n    spec:\n      containers: [{{name: app, image: nginx}}]\n"
        )
    };
    let dir = app_dir(&sandbox, "imm", &[("d.yaml", &deployment("one"))]);
    assert_eq!(sync(&sandbox, &dir, "imm", &[]).await.code, Some(0));
    let dir = app_dir(&sandbox, "imm", &[("d.yaml", &deployment("two"))]);
    let refused = sync(&sandbox, &dir, "imm", &[]).await;
    assert_eq!(
        refused.code,
        Some(1),
        "{}{}",
        refused.stdout,
        refused.stderr
    );
    let message = report(&refused)["resources"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("immutable") && message.contains("--replace-immutable"),
        "{message}"
    );
    let replaced = sync(&sandbox, &dir, "imm", &["--replace-immutable"]).await;
    assert_eq!(
        replaced.code,
        Some(0),
        "{}{}",
        replaced.stdout,
        replaced.stderr
    );
    assert_eq!(action_of(&report(&replaced), "Deployment/web"), "replaced");
    let selector = sandbox
        .kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.selector.matchLabels.app}",
        ])
        .await
        .ok();
    assert_eq!(selector.stdout, "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_reports_and_writes_nothing_and_bad_input_exits_2() {
    let sandbox = TestSandbox::start().await;
    let dir = recorded_dir(sandbox.dir.path());
    sandbox.sandbox.reset_requests();
    let run = sync(&sandbox, &dir, "fixtures", &["--dry-run"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let planned = report(&run);
    assert_eq!(planned["dryRun"], true);
    assert_eq!(planned["summary"]["created"], 23, "{planned}");
    assert_eq!(sandbox.sandbox.requests().writes(), 0);

    let bad = app_dir(
        &sandbox,
        "bad",
        &[("x.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")],
    );
    let run = sync(&sandbox, &bad, "bad", &[]).await;
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    // The whole error: the file, the document, the line and what is wrong with it.
    assert!(
        run.stderr.contains(
            "error: desired state: 1 manifest error\n  x.yaml, document 1, line 1: missing metadata.name\n"
        ),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_sync_shows_progress_on_a_terminal_only() {
    let sandbox = TestSandbox::start().await;
    let files: Vec<(String, String)> = (0..60)
        .map(|i| {
            (
                format!("cm-{i}.yaml"),
                configmap(&format!("cm-{i}"), "", "v"),
            )
        })
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(f, c)| (f.as_str(), c.as_str()))
        .collect();
    let dir = app_dir(&sandbox, "many", &files);
    // `script` gives the command a terminal, as a person running it would have.
    let command = format!(
        "{} sync --kubeconfig {} --path {} --app many",
        env!("CARGO_BIN_EXE_tether"),
        sandbox.kubeconfig.display(),
        dir.display()
    );
    let on_terminal = tokio::process::Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .output()
        .await
        .expect("script runs");
    let shown = String::from_utf8_lossy(&on_terminal.stdout);
    assert!(on_terminal.status.success(), "{shown}");
    assert_contains(&shown, "applying [##############################] 60/60");
    // In a pipe (CI logs), no bar.
    let piped = sync(&sandbox, &dir, "many", &[]).await;
    assert_eq!(piped.code, Some(0));
    assert!(!piped.stderr.contains("applying ["), "{}", piped.stderr);
}

/// A cluster-scoped custom resource whose CRD is installed elsewhere: its scope comes
/// from discovery, so it gets no namespace (offline it could only be guessed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_scoped_custom_resource_takes_its_scope_from_the_server() {
    let sandbox = TestSandbox::start().await;
    let crd = sandbox.write_file(
        "crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\nspec:\n  group: example.com\n  scope: Cluster\n  names: {plural: gadgets, singular: gadget, kind: Gadget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
    );
    sandbox.kubectl(&["apply", "-f", &crd]).await.ok();
    sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/gadgets.example.com",
        ])
        .await
        .ok();
    let dir = app_dir(
        &sandbox,
        "gadgets",
        &[(
            "g.yaml",
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 3}\n",
        )],
    );
    let run = sync(&sandbox, &dir, "gadgets", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let report = report(&run);
    assert_eq!(report["resources"][0]["namespace"], Value::Null, "{report}");
    let inventory = sandbox
        .kubectl(&[
            "get",
            "cm",
            "tether-inventory-gadgets",
            "-n",
            "tether-system",
            "-o",
            "jsonpath={.data.objects}",
        ])
        .await
        .ok();
    assert_eq!(
        inventory.stdout,
        r#"{"apiVersion":"example.com/v1","kind":"Gadget","name":"g1"}"#
    );
    sandbox.kubectl(&["get", "gadget", "g1"]).await.ok();
}
