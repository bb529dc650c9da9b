//! Issue #24: an App never acts with tether's identity. The sandbox evaluates
//! impersonation and RBAC and keeps an audit of who made each request (refusals
//! included), so each test says which identity acted: an App without
//! `serviceAccountName` is refused before anything is read for it (the issue's
//! reproduction: a ClusterRoleBinding to cluster-admin and a ConfigMap in
//! `kube-system`); every path of an App goes as its ServiceAccount; a deleted App
//! whose identity is gone leaves its objects; Git cannot write an inventory as tether.

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use tether_sandbox::{SandboxOptions, UserRequest};

use crate::app_crd::{app, apply_app, exists, install_crd, wait_app};
use crate::serve::{Serve, configmap, origin_http, server_section};
use crate::support::{TestSandbox, eventually, find_condition};

/// Long enough that only webhooks and spec changes move an app during a test.
const POLL: &str = "1h";
const TOKEN: &str = "tenant-identity-api-token";
/// The identity every request for team-a's Apps must run as.
const DEPLOYER: &str = "system:serviceaccount:team-a:deployer";
/// tether's own identity, told apart from the test's `kubectl` in the audit.
const TETHER: &str = "tether-controller";

/// The ServiceAccount `team-a/deployer` and a Role over what its Git names, in
/// `team-a` only: what a platform team grants a tenant (README, Tenancy).
const DEPLOYER_RBAC: &str = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: team-a\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: deployer\n  namespace: team-a\n\
rules:\n- apiGroups: ['', apps, batch]\n  resources: [configmaps, pods, deployments, replicasets, jobs]\n\
\x20 verbs: [get, list, watch, create, update, patch, delete]\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: deployer\n  namespace: team-a\n\
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}\n\
subjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: team-a\n";

/// What the issue's attacker committed: every ServiceAccount of team-a made
/// cluster-admin.
const ESCALATION: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
metadata:\n  name: team-a-admin\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n\
subjects:\n- kind: Group\n  name: system:serviceaccounts:team-a\n  apiGroup: rbac.authorization.k8s.io\n";

/// Waits until the App's Stalled condition has `reason`; returns the App.
async fn stalled(sandbox: &TestSandbox, name: &str, reason: &str) -> Value {
    eventually(&format!("App {name} stalled with {reason}"), || async {
        let object = app(sandbox, name, "team-a").await;
        let stalled = find_condition(&object["status"], "Stalled");
        (stalled["status"] == "True" && stalled["reason"] == reason).then_some(object)
    })
    .await
}

async fn wait_ready(sandbox: &TestSandbox, name: &str) {
    let out = wait_app(sandbox, "Ready", name, "team-a", "30s").await;
    assert_eq!(out.code, 0, "{name} not Ready: {}", out.stderr);
}

/// The audit's requests on `team-a`'s objects (its Apps, Secrets and the Events tether
/// records people's actions on the Apps with aside: those are tether's own to read and
/// write, as a controller writes its Events as itself).
fn tenant_requests(audit: &[UserRequest]) -> Vec<&UserRequest> {
    audit
        .iter()
        .filter(|r| r.path.contains("/namespaces/team-a/"))
        .filter(|r| {
            !r.path.contains("/tether.dev/")
                && !r.path.contains("/secrets")
                && !r.path.starts_with("/apis/events.k8s.io/")
        })
        .collect()
}

/// The issue's reproduction: a user who may only create Apps in team-a commits a
/// ClusterRoleBinding to cluster-admin and a ConfigMap in kube-system. Without a
/// ServiceAccount the App is refused before anything is read for it; with one, RBAC
/// refuses both as that ServiceAccount. Nothing of it ever exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_without_a_service_account_takes_nothing_of_the_cluster() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("team-a").await;
    sandbox
        .kubectl_apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-system\n")
        .await;
    install_crd(&sandbox).await;
    sandbox.kubectl_apply(DEPLOYER_RBAC).await;
    let origin = origin_http(
        &sandbox,
        &[
            ("escalate/admin.yaml", ESCALATION),
            (
                "escalate/planted.yaml",
                &configmap("planted", "kube-system", "x"),
            ),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "takeover", &format!("{server}apps: []\n"), &[]).await;
    sandbox.sandbox.reset_requests();
    let spec = |account: &str| {
        format!(
            "{account}  source: {{repo: \"{}\", ref: main, path: escalate, interval: {POLL}}}\n  \
             destination: {{namespace: team-a}}\n  sync: {{automated: true}}\n",
            origin.url
        )
    };
    apply_app(&sandbox, "escalate", "team-a", &spec("")).await;
    let object = stalled(&sandbox, "escalate", "ServiceAccountNameRequired").await;
    let message = find_condition(&object["status"], "Ready")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.starts_with("App team-a/escalate: spec.serviceAccountName is required"),
        "{message}"
    );
    assert_eq!(
        find_condition(&object["status"], "Ready")["status"],
        "False"
    );
    // No worker ran: nothing of its Git was read from or written to the cluster.
    let audit = sandbox.sandbox.audit();
    let touched: Vec<&UserRequest> = audit
        .iter()
        .filter(|r| r.path.contains("clusterrolebindings") || r.path.contains("kube-system"))
        .collect();
    assert!(touched.is_empty(), "{touched:#?}");

    // Named, it acts as its ServiceAccount: RBAC refuses both objects.
    sandbox.sandbox.reset_requests();
    apply_app(
        &sandbox,
        "escalate",
        "team-a",
        &spec("  serviceAccountName: deployer\n"),
    )
    .await;
    let object = stalled(&sandbox, "escalate", "Forbidden").await;
    let message = find_condition(&object["status"], "Stalled")["message"].to_string();
    assert!(message.contains(DEPLOYER), "{message}");
    let audit = sandbox.sandbox.audit();
    let attempts: Vec<&UserRequest> = audit
        .iter()
        .filter(|r| r.path.contains("team-a-admin") || r.path.contains("/kube-system/"))
        .collect();
    assert!(!attempts.is_empty(), "the pass read its objects");
    for attempt in &attempts {
        assert_eq!(attempt.user, DEPLOYER, "{attempt:?}");
        assert!(!attempt.allowed, "{attempt:?}");
    }
    for (kind, name, namespace) in [
        ("clusterrolebinding", "team-a-admin", None),
        ("configmap", "planted", Some("kube-system")),
    ] {
        let mut args = vec!["get", kind, name];
        args.extend(namespace.iter().flat_map(|ns| ["-n", *ns]));
        assert_ne!(sandbox.kubectl(&args).await.code, 0, "{kind} {name} exists");
    }
    assert_eq!(serve.stop().await, Some(0));
}

/// Every path of an App goes as its ServiceAccount: the dry run, the apply, a PreSync
/// hook, health, prune, the dashboard's tree, suspend and resume, and the deletion
/// finalizer. The audit shows no request on team-a's objects made as anyone else,
/// and each path's own request made as the ServiceAccount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_path_of_an_app_acts_as_its_service_account() {
    let sandbox = TestSandbox::start_with(SandboxOptions {
        simulate_controllers: Some(Duration::from_millis(50)),
        ..SandboxOptions::default()
    })
    .await;
    sandbox.namespace("team-a").await;
    install_crd(&sandbox).await;
    sandbox.kubectl_apply(DEPLOYER_RBAC).await;
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: team-a\n\
        spec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n\
        \x20   spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n";
    let hook = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: team-a\n\
        \x20 annotations: {tether.dev/hook: PreSync}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n\
        \x20     restartPolicy: Never\n      containers: [{name: run, image: migrate:1}]\n";
    let origin = origin_http(
        &sandbox,
        &[
            ("app/settings.yaml", &configmap("settings", "team-a", "v1")),
            ("app/gone.yaml", &configmap("gone", "team-a", "v1")),
            ("app/web.yaml", deployment),
            ("app/migrate.yaml", hook),
        ],
    );
    let token_file = sandbox.dir.path().join("api-token");
    std::fs::write(&token_file, TOKEN).expect("write the token");
    let config = format!(
        "{}  apiToken: {{secretFile: {}}}\napps: []\n",
        server_section(sandbox.dir.path()),
        token_file.display()
    );
    let serve = Serve::start_as(&sandbox, "paths", &config, TETHER).await;
    sandbox.sandbox.reset_requests();
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: app, interval: {POLL}}}\n  \
         destination: {{namespace: team-a}}\n  sync: {{automated: true, prune: true}}\n  deletionPolicy: Prune\n",
        origin.url
    );
    apply_app(&sandbox, "web", "team-a", &spec).await;
    wait_ready(&sandbox, "web").await;

    // Prune: a file removed from Git.
    origin.repo.remove("app/gone.yaml");
    origin.repo.commit("gone");
    assert!(serve.push(&origin.url).await.is_success());
    eventually("gone is pruned", || async {
        (!exists(&sandbox, "cm", "gone", "team-a").await).then_some(())
    })
    .await;

    // The dashboard's tree, then Suspend and Resume, through the API.
    let api = |method: reqwest::Method, path: &str| {
        reqwest::Client::new()
            .request(
                method,
                format!("{}/api/v1/apps/team-a.web{path}", serve.url),
            )
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
    };
    let tree: Value = api(reqwest::Method::GET, "/tree")
        .send()
        .await
        .expect("the tree answers")
        .json()
        .await
        .expect("JSON");
    assert!(tree.to_string().contains("ReplicaSet"), "{tree}");
    for (action, suspended) in [("/suspend", true), ("/resume", false)] {
        let answer = api(reqwest::Method::POST, action)
            .body("{}")
            .send()
            .await
            .expect("the API answers");
        assert!(
            answer.status().is_success(),
            "{action}: {}",
            answer.status()
        );
        eventually("spec.suspend follows", || async {
            let object = app(&sandbox, "web", "team-a").await;
            (object["spec"]["suspend"].as_bool().unwrap_or(false) == suspended).then_some(())
        })
        .await;
    }

    // The deletion finalizer prunes the rest.
    sandbox
        .kubectl(&["delete", "tapp", "web", "-n", "team-a", "--timeout=30s"])
        .await
        .ok();
    assert!(!exists(&sandbox, "cm", "settings", "team-a").await);
    assert!(!exists(&sandbox, "deploy", "web", "team-a").await);

    let audit = sandbox.sandbox.audit();
    let requests = tenant_requests(&audit);
    let as_tether: Vec<&&UserRequest> = requests.iter().filter(|r| r.user == TETHER).collect();
    assert!(as_tether.is_empty(), "made as tether: {as_tether:#?}");
    // tether did act (the App's finalizer and status, its inventory): as itself.
    assert!(audit.iter().any(|r| r.user == TETHER && r.is_write()));
    let seen = |what: &str, check: &dyn Fn(&UserRequest) -> bool| {
        assert!(
            requests.iter().any(|r| r.allowed && check(r)),
            "no {what} as the ServiceAccount: {requests:#?}"
        );
    };
    let on = |r: &UserRequest, verb: &str, object: &str| r.verb == verb && r.path.ends_with(object);
    seen("dry run", &|r| {
        r.dry_run && r.path.ends_with("/configmaps/settings")
    });
    seen("apply", &|r| {
        r.is_write() && on(r, "patch", "/configmaps/settings")
    });
    seen("hook", &|r| r.is_write() && r.path.contains("/jobs"));
    seen("health read", &|r| on(r, "get", "/deployments/web"));
    seen("prune", &|r| {
        r.is_write() && on(r, "delete", "/configmaps/gone")
    });
    seen("tree", &|r| on(r, "list", "/namespaces/team-a/replicasets"));
    seen("finalizer prune", &|r| {
        r.is_write() && on(r, "delete", "/configmaps/settings")
    });
    assert_eq!(serve.stop().await, Some(0));
}

/// Suspected in issue #24 and held: deleting an App whose spec no longer parses, or
/// whose kubeconfig Secret is gone, pruned its objects with tether's own connection.
/// Without the App's identity they are left in place, and the log says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_app_without_its_identity_leaves_its_objects() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("team-a").await;
    install_crd(&sandbox).await;
    sandbox.kubectl_apply(DEPLOYER_RBAC).await;
    // A kubeconfig Secret reaching this same cluster: tether's own connection and
    // the Secret's reach the same objects.
    let kubeconfig = base64::engine::general_purpose::STANDARD.encode(sandbox.sandbox.kubeconfig());
    sandbox.kubectl_apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: home\n  namespace: team-a\ndata:\n  value: {kubeconfig}\n"
        ),
    )
    .await;
    let origin = origin_http(
        &sandbox,
        &[
            ("broken/cm.yaml", &configmap("kept-broken", "team-a", "b")),
            ("remote/cm.yaml", &configmap("kept-remote", "team-a", "r")),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "orphaned", &format!("{server}apps: []\n"), &[]).await;
    let spec = |path: &str, interval: &str, destination: &str| {
        format!(
            "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: {path}, interval: {interval}}}\n  \
             destination: {{namespace: team-a{destination}}}\n  sync: {{automated: true}}\n  deletionPolicy: Prune\n",
            origin.url
        )
    };
    let remote = ", kubeConfig: {secretRef: {name: home}}";
    apply_app(&sandbox, "broken", "team-a", &spec("broken", POLL, "")).await;
    apply_app(&sandbox, "remote", "team-a", &spec("remote", POLL, remote)).await;
    wait_ready(&sandbox, "broken").await;
    wait_ready(&sandbox, "remote").await;

    // A spec that no longer parses, and a kubeconfig Secret gone.
    apply_app(&sandbox, "broken", "team-a", &spec("broken", "soon", "")).await;
    stalled(&sandbox, "broken", "SpecInvalid").await;
    sandbox
        .kubectl(&["delete", "secret", "home", "-n", "team-a"])
        .await
        .ok();
    sandbox.sandbox.reset_requests();
    for name in ["broken", "remote"] {
        sandbox
            .kubectl(&["delete", "tapp", name, "-n", "team-a", "--timeout=30s"])
            .await
            .ok();
    }
    for name in ["kept-broken", "kept-remote"] {
        assert!(
            exists(&sandbox, "cm", name, "team-a").await,
            "{name} was pruned:\n{}",
            serve.log()
        );
    }
    let deletes: Vec<UserRequest> = sandbox
        .sandbox
        .audit()
        .into_iter()
        .filter(|r| r.verb == "delete" && r.path.contains("/configmaps/"))
        .collect();
    assert!(deletes.is_empty(), "{deletes:#?}");
    let log = serve.log();
    for (name, why) in [
        ("team-a.broken", "spec.source.interval"),
        ("team-a.remote", "Secret team-a/home: not found"),
    ] {
        let line = log
            .lines()
            .find(|l| l.contains("left in place") && l.contains(name))
            .unwrap_or_else(|| panic!("no word of {name}:\n{log}"));
        assert!(line.contains(why), "{line}");
    }
    assert_eq!(serve.stop().await, Some(0));
}

/// Suspected in issue #24 and held: the inventory exemption let a tenant's Git write
/// its own inventory ConfigMap as tether. A manifest naming tether's records is
/// refused before anything is applied, naming its file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_cannot_write_tethers_inventory() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("team-a").await;
    sandbox.namespace("tether-system").await;
    install_crd(&sandbox).await;
    sandbox.kubectl_apply(DEPLOYER_RBAC).await;
    let forged = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tether-inventory-team-a.web\n  namespace: tether-system\n\
        data:\n  objects: '{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"kube-system\",\"name\":\"coredns\"}'\n";
    let origin = origin_http(
        &sandbox,
        &[
            ("app/settings.yaml", &configmap("settings", "team-a", "v1")),
            ("app/inventory.yaml", forged),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "forged", &format!("{server}apps: []\n"), &[]).await;
    sandbox.sandbox.reset_requests();
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: app, interval: {POLL}}}\n  \
         destination: {{namespace: team-a}}\n  sync: {{automated: true, prune: true}}\n",
        origin.url
    );
    apply_app(&sandbox, "web", "team-a", &spec).await;
    let object = stalled(&sandbox, "web", "ManifestInvalid").await;
    let message = find_condition(&object["status"], "Stalled")["message"].to_string();
    assert!(
        message.contains("app/inventory.yaml, document 1")
            && message.contains("tether-system/tether-inventory-team-a.web is tether's own record"),
        "{message}"
    );
    assert!(
        !exists(&sandbox, "cm", "settings", "team-a").await,
        "nothing applied"
    );
    let writes: Vec<UserRequest> = sandbox
        .sandbox
        .audit()
        .into_iter()
        .filter(|r| r.path.contains("tether-inventory-team-a.web") && r.verb != "get")
        .collect();
    assert!(writes.is_empty(), "{writes:#?}");
    assert_eq!(serve.stop().await, Some(0));
}
