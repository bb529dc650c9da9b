//! App objects (`apps.tether.dev`, issue #16) with the real `kubectl` against the
//! sandbox and a real `git daemon`: the CRD installs from `tether crd`, an applied App
//! syncs and turns Ready, `kubectl get tapp` shows its columns, spec and Git changes
//! move observedGeneration and lastAppliedRevision, a steady state sends nothing, a bad
//! App is refused by the schema and by CEL (or stalls on the checks the parser makes),
//! and deleting an App with `deletionPolicy: Prune` removes its objects first.

use std::time::Duration;

use serde_json::Value;

use crate::serve::{Serve, configmap, origin_http, server_section};
use crate::support::{KubectlOutput, TestSandbox, condition, eventually, find_condition};

/// Long enough that only webhooks and spec changes move an app during a test.
const POLL: &str = "1h";

pub(crate) async fn install_crd(sandbox: &TestSandbox) {
    // `tether crd | kubectl apply -f -`, as the README says for installs without Helm.
    let crd = std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg("crd")
        .output()
        .expect("tether crd runs");
    assert!(crd.status.success());
    let text = String::from_utf8(crd.stdout).expect("UTF-8");
    // The App's CRD, then the AppSet's (issue #28).
    assert_eq!(
        text,
        format!(
            "{}---\n{}",
            tether_controller::config::APP_CRD_YAML,
            tether_controller::reconcile::appset::APPSET_CRD_YAML
        )
    );
    sandbox.kubectl_apply(&text).await;
}

/// A sandbox with the namespaces `namespaces` and the App CRD installed: where a test
/// applies App objects.
pub(crate) async fn app_sandbox(namespaces: &[&str]) -> TestSandbox {
    let sandbox = TestSandbox::start().await;
    sandbox.namespaces(namespaces).await;
    install_crd(&sandbox).await;
    sandbox
}

/// `kubectl apply` of the App `namespace/name` with `spec` (see [`app_yaml`]).
pub(crate) async fn apply_app(sandbox: &TestSandbox, name: &str, namespace: &str, spec: &str) {
    sandbox
        .kubectl_apply(&app_yaml(name, namespace, spec))
        .await;
}

pub(crate) fn app_yaml(name: &str, namespace: &str, spec: &str) -> String {
    format!(
        "apiVersion: tether.dev/v1alpha1\nkind: App\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n{spec}"
    )
}

pub(crate) async fn app(sandbox: &TestSandbox, name: &str, namespace: &str) -> Value {
    sandbox
        .kubectl_json(&["get", "tapp", name, "-n", namespace, "-o", "json"])
        .await
}

pub(crate) async fn exists(sandbox: &TestSandbox, kind: &str, name: &str, namespace: &str) -> bool {
    sandbox
        .kubectl(&["get", kind, name, "-n", namespace])
        .await
        .code
        == 0
}

/// `kubectl wait --for=condition=CONDITION tapp/NAME -n NAMESPACE --timeout=TIMEOUT`,
/// its output for the caller to check.
pub(crate) async fn wait_app(
    sandbox: &TestSandbox,
    condition: &str,
    name: &str,
    namespace: &str,
    timeout: &str,
) -> KubectlOutput {
    sandbox
        .kubectl(&[
            "wait",
            &format!("--for=condition={condition}"),
            &format!("tapp/{name}"),
            "-n",
            namespace,
            &format!("--timeout={timeout}"),
        ])
        .await
}

async fn writes_and_requests(sandbox: &TestSandbox) -> (u64, u64) {
    let counts = sandbox.get("/sandbox/requests").await.json();
    (
        counts["writes"].as_u64().unwrap_or(u64::MAX),
        counts["total"].as_u64().unwrap_or(u64::MAX),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applied_app_syncs_shows_its_columns_follows_spec_and_git_and_prunes_on_delete() {
    let sandbox = app_sandbox(&["live", "team-a", "plain"]).await;
    sandbox.trusted_service_account("team-a", "deployer").await;
    let origin = origin_http(
        &sandbox,
        &[
            ("apps/web/config.yaml", &configmap("web", "live", "v1")),
            ("apps/web2/config.yaml", &configmap("web2", "live", "v1")),
            ("apps/plain/config.yaml", &configmap("plain", "plain", "p")),
        ],
    );
    // A configuration-file app runs next to the Apps.
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: plain\n  source: {{repo: \"{}\", ref: main, path: apps/plain, interval: {POLL}}}\n  destination: {{namespace: plain}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "apps", &config, &[]).await;

    let spec = |path: &str| {
        format!(
            "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: {path}, interval: {POLL}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true, prune: true, allowMassPrune: true}}\n  deletionPolicy: Prune\n",
            origin.url
        )
    };
    apply_app(&sandbox, "web", "team-a", &spec("apps/web")).await;
    wait_app(&sandbox, "Ready", "web", "team-a", "20s")
        .await
        .ok();
    assert!(exists(&sandbox, "cm", "web", "live").await);
    let head = crate::support::git(&origin.repo.dir, &["rev-parse", "HEAD"]);
    let object = app(&sandbox, "web", "team-a").await;
    let status = &object["status"];
    assert_eq!(status["observedGeneration"], 1, "{status}");
    assert_eq!(object["metadata"]["generation"], 1);
    assert_eq!(status["sync"], "Synced", "{status}");
    assert_eq!(status["health"], "Healthy", "{status}");
    assert_eq!(status["lastAppliedRevision"], head.as_str());
    assert_eq!(status["lastAttemptedRevision"], head.as_str());
    assert_eq!(status["objects"], 1);
    assert_eq!(status["drifted"], 0);
    assert_eq!(
        object["metadata"]["finalizers"],
        serde_json::json!(["tether.dev/finalizer"])
    );
    for kind in ["Ready", "SourceReady", "Synced", "Healthy"] {
        let condition = condition(status, kind);
        assert_eq!(condition["status"], "True", "{condition}");
    }
    // The status was written by its own field manager.
    let object = sandbox.get_with_managers("tapp", "web", "team-a").await;
    let managers: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .map(|m| m.iter().filter_map(|f| f["manager"].as_str()).collect())
        .unwrap_or_default();
    assert!(managers.contains(&"tether-status"), "{managers:?}");

    // Side by side: the file's app and the App, each under its own identity.
    eventually("the file's app synced", || async {
        exists(&sandbox, "cm", "plain", "plain").await.then_some(())
    })
    .await;
    assert_eq!(serve.status("plain").await["sync"], "Synced");
    assert_eq!(serve.status("team-a.web").await["sync"], "Synced");

    // kubectl get asks for a Table: the CRD's columns.
    let table = sandbox.kubectl(&["get", "tapp", "-n", "team-a"]).await.ok();
    let lines: Vec<&str> = table.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "SYNC", "HEALTH", "REVISION", "AGE", "MESSAGE"],
        "{}",
        table.stdout
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row[..4],
        ["web", "Synced", "Healthy", head.as_str()],
        "{}",
        table.stdout
    );
    assert!(row[4].ends_with('s'), "an age: {}", table.stdout);

    // A steady state writes no status and sends no request at all.
    sandbox.delete("/sandbox/requests").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        writes_and_requests(&sandbox).await,
        (0, 0),
        "{}",
        serve.log()
    );

    // A changed spec bumps the generation; the status follows it.
    apply_app(&sandbox, "web", "team-a", &spec("apps/web2")).await;
    let object = eventually("observedGeneration follows the spec", || async {
        let object = app(&sandbox, "web", "team-a").await;
        (object["status"]["observedGeneration"] == 2 && object["status"]["sync"] == "Synced")
            .then_some(object)
    })
    .await;
    assert_eq!(object["metadata"]["generation"], 2);
    assert!(exists(&sandbox, "cm", "web2", "live").await);
    assert!(!exists(&sandbox, "cm", "web", "live").await, "pruned");

    // A Git change (announced by webhook) moves lastAppliedRevision.
    origin
        .repo
        .write("apps/web2/config.yaml", &configmap("web2", "live", "v2"));
    let next = origin.repo.commit("v2");
    assert!(serve.push(&origin.url).await.is_success());
    eventually("lastAppliedRevision moves to the new commit", || async {
        let object = app(&sandbox, "web", "team-a").await;
        (object["status"]["lastAppliedRevision"] == next.as_str()).then_some(())
    })
    .await;

    // Deleting it with deletionPolicy Prune removes its objects, then the App.
    sandbox
        .kubectl(&["delete", "tapp", "web", "-n", "team-a", "--timeout=20s"])
        .await
        .ok();
    assert!(!exists(&sandbox, "cm", "web2", "live").await, "pruned");
    assert!(!exists(&sandbox, "tapp", "web", "team-a").await);
    assert!(
        !exists(
            &sandbox,
            "cm",
            "tether-inventory-team-a.web",
            "tether-system"
        )
        .await,
        "its inventory goes too"
    );
    // The file's app is untouched.
    assert!(exists(&sandbox, "cm", "plain", "plain").await);
    eventually("the App leaves the status API", || async {
        let answer = reqwest::get(format!("{}/api/v1/apps/team-a.web", serve.url))
            .await
            .ok()?;
        (answer.status() == reqwest::StatusCode::NOT_FOUND).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphaned_app_leaves_its_objects_and_a_spec_the_parser_refuses_stalls() {
    let sandbox = app_sandbox(&["live", "team-b"]).await;
    sandbox.trusted_service_account("team-b", "deployer").await;
    let origin = origin_http(
        &sandbox,
        &[("apps/kept/config.yaml", &configmap("kept", "live", "k"))],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "orphan", &format!("{server}apps: []\n"), &[]).await;
    let kept = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: apps/kept, interval: {POLL}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    // Schema and CEL let it through; the configuration's own check does not.
    let broken = format!("  source: {{repo: \"{}\", interval: soon}}\n", origin.url);
    let both = format!(
        "{}---\n{}",
        app_yaml("kept", "team-b", &kept),
        app_yaml("broken", "team-b", &broken)
    );
    sandbox.kubectl_apply(&both).await;
    wait_app(&sandbox, "Ready", "kept", "team-b", "20s")
        .await
        .ok();
    wait_app(&sandbox, "Stalled", "broken", "team-b", "20s")
        .await
        .ok();
    let broken = app(&sandbox, "broken", "team-b").await;
    let ready = condition(&broken["status"], "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "SpecInvalid");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("App team-b/broken: spec.source.interval: "),
        "{message}"
    );
    assert_eq!(broken["status"]["observedGeneration"], 1);
    // The MESSAGE column shows why.
    let table = sandbox.kubectl(&["get", "tapp", "broken", "-n", "team-b"]);
    let table = table.await.ok().stdout;
    assert!(table.contains("spec.source.interval"), "{table}");

    // Orphan (the default): the objects stay.
    sandbox
        .kubectl(&["delete", "tapp", "kept", "-n", "team-b", "--timeout=20s"])
        .await
        .ok();
    assert!(!exists(&sandbox, "tapp", "kept", "team-b").await);
    assert!(
        exists(&sandbox, "cm", "kept", "live").await,
        "{}",
        serve.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_app_is_refused_by_the_crd_schema_and_by_its_cel_rules() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("team-c").await;
    install_crd(&sandbox).await;
    let refused = |spec: &str| {
        let yaml = app_yaml("bad", "team-c", spec);
        let sandbox = &sandbox;
        async move {
            let out = sandbox
                .kubectl_with_stdin(&["apply", "-f", "-"], Some(&yaml))
                .await;
            assert_ne!(out.code, 0, "accepted: {yaml}");
            out.stderr
        }
    };
    let wrong_type = refused("  source: {repo: r}\n  suspend: \"yes\"\n").await;
    assert!(
        wrong_type.contains("The App \"bad\" is invalid")
            && wrong_type.contains("spec.suspend")
            && wrong_type.contains("must be of type boolean"),
        "{wrong_type}"
    );
    let not_in_enum = refused("  source: {repo: r}\n  deletionPolicy: Delete\n").await;
    assert!(
        not_in_enum.contains(
            "spec.deletionPolicy: Unsupported value: \"Delete\": supported values: \"Prune\", \"Orphan\""
        ),
        "{not_in_enum}"
    );
    let cel = refused("  source: {repo: r}\n  ignoreDifferences:\n  - kind: Deployment\n").await;
    assert!(
        cel.contains(
            "The App \"bad\" is invalid: spec.ignoreDifferences[0]: Invalid value: \"object\": ignores nothing: set jsonPointers or managedFieldsManagers"
        ),
        "{cel}"
    );
    assert!(!exists(&sandbox, "tapp", "bad", "team-c").await);
    // The same entry with what it lacked is taken.
    apply_app(&sandbox,
            "bad",
            "team-c",
            "  source: {repo: r}\n  ignoreDifferences:\n  - kind: Deployment\n    jsonPointers: [/spec/replicas]\n",
        ).await;
    let object = app(&sandbox, "bad", "team-c").await;
    assert_eq!(object["spec"]["deletionPolicy"], "Orphan", "defaulted");
}

/// Without the CRD, a service watches that one CRD instead of polling discovery: its
/// steady state stays silent, and an App applied once the CRD exists runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_installed_after_serve_starts_is_picked_up_without_polling() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespaces(&["live", "team-d"]).await;
    let origin = origin_http(
        &sandbox,
        &[("apps/late/config.yaml", &configmap("late", "live", "l"))],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "late", &format!("{server}apps: []\n"), &[]).await;
    eventually("the CRD watch is open", || async {
        let counts = sandbox.get("/sandbox/requests").await.json();
        let watches = counts["requests"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter(|c| {
                        c["verb"] == "watch"
                            && c["resource"]
                                .as_str()
                                .is_some_and(|r| r.ends_with("customresourcedefinitions"))
                    })
                    .count()
            })
            .unwrap_or(0);
        (watches > 0).then_some(())
    })
    .await;
    sandbox.delete("/sandbox/requests").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        writes_and_requests(&sandbox).await,
        (0, 0),
        "{}",
        serve.log()
    );

    install_crd(&sandbox).await;
    sandbox.trusted_service_account("team-d", "deployer").await;
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: apps/late, interval: {POLL}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    apply_app(&sandbox, "late", "team-d", &spec).await;
    wait_app(&sandbox, "Ready", "late", "team-d", "8s")
        .await
        .ok();
    assert!(exists(&sandbox, "cm", "late", "live").await);
}

/// The ServiceAccount `t1/deployer`, with no RBAC: what an App acting as it may do is
/// what the test grants.
pub(crate) const SERVICE_ACCOUNT_T1: &str =
    "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: t1\n";

/// An App acts as the ServiceAccount it names, of its own namespace: without RBAC for
/// its Deployment it stalls with the server's Forbidden message, shown on the App.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_acts_as_its_namespaces_service_account_and_stalls_on_forbidden() {
    let sandbox = app_sandbox(&["t1"]).await;
    sandbox.kubectl_apply(SERVICE_ACCOUNT_T1).await;
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: t1\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n";
    let origin = origin_http(&sandbox, &[("web/web.yaml", deployment)]);
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "tenant-app", &format!("{server}apps: []\n"), &[]).await;
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: web, interval: {POLL}}}\n  destination: {{namespace: t1}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    apply_app(&sandbox, "web", "t1", &spec).await;
    let out = wait_app(&sandbox, "Stalled", "web", "t1", "20s").await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, serve.log());
    let object = app(&sandbox, "web", "t1").await;
    let ready = condition(&object["status"], "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "Forbidden", "{ready}");
    assert!(
        ready["message"].as_str().unwrap_or_default().contains(
            "User \"system:serviceaccount:t1:deployer\" cannot get resource \"deployments\""
        ),
        "{ready}"
    );
    assert!(!exists(&sandbox, "deploy", "web", "t1").await);
}

/// The Ready condition's reason and message.
async fn ready(sandbox: &TestSandbox, name: &str, namespace: &str) -> (String, String, String) {
    let object = app(sandbox, name, namespace).await;
    let condition = find_condition(&object["status"], "Ready");
    let text = |key: &str| condition[key].as_str().unwrap_or_default().to_string();
    (text("status"), text("reason"), text("message"))
}

/// Issue #16: an App reaches a private repository with `credentials.secretRef`, a
/// Secret of its namespace read at each fetch; a missing Secret and a wrong password
/// stall it with SourceFailed naming the Secret (never its data), and the next poll
/// after the Secret is fixed syncs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_reads_its_git_credentials_from_a_secret_at_each_poll() {
    const RIGHT: &str = "s3cret-Right-pass";
    const WRONG: &str = "w0ng-Wrong-pass";
    let sandbox = app_sandbox(&["live", "team-s"]).await;
    let _origin = origin_http(
        &sandbox,
        &[(
            "apps/private/config.yaml",
            &configmap("private", "live", "p"),
        )],
    );
    let http = crate::support::HttpGit::start(
        &sandbox.dir.path().join("srv"),
        Some(&format!("tether:{RIGHT}")),
    );
    let server = server_section(sandbox.dir.path());
    // Polled every 100 ms (the minimum interval lowered for the test), so the fixed
    // Secret is used within the failures' backoff.
    let config = format!("sources: {{minInterval: 100ms}}\n{server}apps: []\n");
    let serve = Serve::start(&sandbox, "gitsecret", &config, &[]).await;
    sandbox.trusted_service_account("team-s", "deployer").await;
    let spec = format!(
        "  serviceAccountName: deployer\n  source:\n    repo: \"{}\"\n    ref: main\n    path: apps/private\n    interval: 100ms\n    \
         credentials:\n      secretRef: {{name: git-creds}}\n  destination: {{namespace: live}}\n  \
         sync: {{automated: true}}\n",
        http.url("apps.git")
    );
    apply_app(&sandbox, "private", "team-s", &spec).await;

    // No Secret yet: the source fails, naming the Secret.
    let (_, reason, message) = eventually("SourceFailed for the missing Secret", || async {
        let r = ready(&sandbox, "private", "team-s").await;
        (r.0 == "False" && r.2.contains("Secret team-s/git-creds not found")).then_some(r)
    })
    .await;
    assert_eq!(reason, "SourceFailed", "{message}");
    assert!(!exists(&sandbox, "cm", "private", "live").await);

    // A wrong password: the remote refuses it, and the value shows nowhere.
    let secret = |password: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-creds\n  namespace: team-s\n\
             stringData:\n  username: tether\n  password: {password}\n"
        )
    };
    sandbox.kubectl_apply(&secret(WRONG)).await;
    let (_, reason, message) = eventually("SourceFailed for the wrong password", || async {
        let r = ready(&sandbox, "private", "team-s").await;
        (r.0 == "False" && r.2.contains("refused")).then_some(r)
    })
    .await;
    assert_eq!(reason, "SourceFailed", "{message}");
    assert!(!message.contains(WRONG), "{message}");

    // The right one, at the next poll, without a restart.
    sandbox.kubectl_apply(&secret(RIGHT)).await;
    wait_app(&sandbox, "Ready", "private", "team-s", "20s")
        .await
        .ok();
    assert!(exists(&sandbox, "cm", "private", "live").await);
    let object = app(&sandbox, "private", "team-s").await.to_string();
    let status = serve.status("team-s.private").await.to_string();
    let log = serve.log();
    for (what, shown) in [("App", &object), ("status API", &status), ("log", &log)] {
        for password in [RIGHT, WRONG] {
            assert!(
                !shown.contains(password),
                "{what} shows a password:\n{shown}"
            );
        }
    }
}

/// Waits until the App object `namespace/name` says Synced at a revision `revision`
/// accepts (its `status.lastAppliedRevision`); returns the object.
pub(crate) async fn wait_app_synced(
    sandbox: &TestSandbox,
    name: &str,
    namespace: &str,
    revision: impl Fn(&str) -> bool,
) -> Value {
    let what = format!("the App {namespace}/{name} is Synced");
    eventually(&what, || async {
        let object = app(sandbox, name, namespace).await;
        let status = &object["status"];
        (status["sync"] == "Synced"
            && status["lastAppliedRevision"]
                .as_str()
                .is_some_and(&revision))
        .then_some(object)
    })
    .await
}
