//! Tenants and clusters (issue #16): an app acting as its ServiceAccount is held to
//! that ServiceAccount's RBAC by the sandbox (stalled with the server's Forbidden
//! message, nothing written, until a Role grants it), `--default-service-account`
//! makes every app act as one, and a kubeconfig Secret sends apps to a second sandbox
//! through one shared connection and watch cache.

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use tether_core::cluster::{Bookkeeping, Cluster, ClusterError, ServiceAccount};
use tether_sandbox::RequestCounts;

use crate::serve::{Serve, manual_sync, origin, server_section, with_origin};
use crate::support::{TestSandbox, eventually, find_condition};

const POLL: &str = "1h";

fn deployment(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n\
         \x20   metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n\
         \x20     - name: web\n        image: nginx:1.27\n"
    )
}

fn configmap(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: value\n"
    )
}

/// A Role over Deployments in `t1` with `verbs`, bound to the ServiceAccount `deployer`.
fn deployer_role(verbs: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: deployer\n  namespace: t1\n\
         rules:\n- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [{verbs}]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: deployer\n  namespace: t1\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}}\n\
         subjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: t1\n"
    )
}

fn stalled_with(status: &Value, reason: &str) -> bool {
    let stalled = find_condition(status, "Stalled");
    stalled["status"] == "True" && stalled["reason"] == reason
}

/// Writes the sandbox was asked for (dry runs are counted apart, as `dryrun:*`).
fn writes(counts: &RequestCounts) -> u64 {
    ["create", "update", "patch", "delete", "deletecollection"]
        .iter()
        .map(|verb| counts.verb(verb))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_without_rbac_stalls_with_forbidden_and_writes_nothing_until_a_role_grants_it()
 {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("t1").await;
    sandbox.namespace("tether-system").await;
    sandbox
        .kubectl_apply(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: t1\n",
        )
        .await;
    let origin = origin(&sandbox, &[("web/web.yaml", &deployment("web", "t1"))]);
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: web\n  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: web, interval: {POLL}}}\n  destination: {{namespace: t1}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    sandbox.sandbox.reset_requests();
    let serve = Serve::start(&sandbox, "tenant", &config, &[]).await;

    // No rights at all: the read is refused, with the server's own message.
    let status = serve
        .wait_status("web", "web stalls on Forbidden", |s| {
            stalled_with(s, "Forbidden")
        })
        .await;
    let message = find_condition(&status, "Stalled")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains(
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:t1:deployer\" \
             cannot get resource \"deployments\" in API group \"apps\" in the namespace \"t1\""
        ),
        "{status}"
    );
    assert_eq!(
        find_condition(&status, "Ready")["status"],
        "False",
        "{status}"
    );
    let counts = sandbox.sandbox.requests();
    // The labelled list across namespaces was refused and tolerated (observe falls
    // back to reading by name: the refusal above is of that `get`); nothing was
    // written, not even the inventory.
    assert!(counts.get("get", "apps/deployments") >= 1, "{counts:?}");
    assert_eq!(writes(&counts), 0, "{counts:?}");
    assert_eq!(counts.verb("dryrun:patch"), 0, "{counts:?}");

    // Read but not write: the dry run is refused, and it stops the pass before any write.
    sandbox
        .kubectl_apply(&deployer_role("get, list, watch"))
        .await;
    sandbox.sandbox.reset_requests();
    manual_sync(&serve.url, "web").await;
    let status = serve
        .wait_status("web", "web stalls on the refused dry run", |s| {
            find_condition(s, "Stalled")["message"]
                .as_str()
                .is_some_and(|m| m.contains("cannot patch resource \"deployments\""))
        })
        .await;
    assert_eq!(
        find_condition(&status, "Stalled")["status"],
        "True",
        "{status}"
    );
    let counts = sandbox.sandbox.requests();
    assert!(
        counts.get("dryrun:patch", "apps/deployments") >= 1,
        "{counts:?}"
    );
    assert_eq!(writes(&counts), 0, "{counts:?}");
    let missing = sandbox
        .kubectl(&["get", "deployment", "web", "-n", "t1"])
        .await;
    assert_ne!(missing.code, 0, "nothing was created");
    let inventory = sandbox
        .kubectl(&["get", "cm", "tether-inventory-web", "-n", "tether-system"])
        .await;
    assert_ne!(inventory.code, 0, "not even the inventory was written");

    // Granted: the app syncs, as the ServiceAccount; its inventory is tether's.
    sandbox
        .kubectl_apply(&deployer_role("get, list, watch, patch"))
        .await;
    manual_sync(&serve.url, "web").await;
    let status = serve
        .wait_status("web", "web syncs once granted", |s| {
            find_condition(s, "Ready")["status"] == "True"
        })
        .await;
    assert_eq!(status["sync"], "Synced", "{status}");
    let deployment = sandbox.get_with_managers("deployment", "web", "t1").await;
    assert_eq!(
        deployment["metadata"]["managedFields"][0]["manager"], "tether",
        "{deployment}"
    );
    sandbox
        .kubectl(&["get", "cm", "tether-inventory-web", "-n", "tether-system"])
        .await
        .ok();

    // In sync, a pass reads as the tenant and writes nothing: the list across
    // namespaces is refused (the Role is t1's), so the object is read by name.
    let finished = status["lastPass"]["finishedAt"].clone();
    sandbox.sandbox.reset_requests();
    manual_sync(&serve.url, "web").await;
    let status = serve
        .wait_status("web", "another pass", |s| {
            s["lastPass"]["finishedAt"] != finished
        })
        .await;
    assert_eq!(status["sync"], "Synced", "{status}");
    let counts = sandbox.sandbox.requests();
    assert!(counts.get("list", "apps/deployments") >= 1, "{counts:?}");
    assert!(counts.get("get", "apps/deployments") >= 1, "{counts:?}");
    assert_eq!(writes(&counts), 0, "{counts:?}");
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_service_account_makes_an_app_naming_none_act_as_it() {
    let (sandbox, origin) =
        with_origin("t1", &[("app/cm.yaml", &configmap("settings", "t1"))]).await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: plain\n  source: {{repo: \"{}\", ref: main, path: app, interval: {POLL}}}\n  destination: {{namespace: t1}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let serve = Serve::start(
        &sandbox,
        "default-sa",
        &config,
        &["--default-service-account", "tenant"],
    )
    .await;
    let status = serve
        .wait_status("plain", "plain stalls as the default ServiceAccount", |s| {
            stalled_with(s, "Forbidden")
        })
        .await;
    let message = find_condition(&status, "Stalled")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains(
            "User \"system:serviceaccount:t1:tenant\" cannot get resource \"configmaps\""
        ),
        "{status}"
    );
    // tether made its own namespace for the tenant's inventory, as itself.
    sandbox
        .kubectl(&["get", "namespace", "tether-system"])
        .await
        .ok();
    assert_ne!(
        sandbox
            .kubectl(&["get", "cm", "settings", "-n", "t1"])
            .await
            .code,
        0
    );
    assert!(serve.log().contains("acting as a ServiceAccount"));
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impersonating_connection_keeps_the_inventory_as_tether() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("t1").await;
    sandbox.namespace("tether-system").await;
    sandbox
        .kubectl_apply(&configmap("tether-inventory-web", "tether-system"))
        .await;
    sandbox
        .kubectl_apply(&configmap("tether-inventory-other", "tether-system"))
        .await;
    sandbox.kubectl_apply(&configmap("settings", "t1")).await;
    let tether = Cluster::connect(Some(&sandbox.kubeconfig), None)
        .await
        .expect("connects");
    let account = ServiceAccount {
        namespace: "t1".into(),
        name: "deployer".into(),
    };
    let tenant = tether
        .impersonating(
            &account,
            Some(Bookkeeping {
                namespace: "tether-system".into(),
                name: "tether-inventory-web".into(),
            }),
        )
        .expect("impersonates");
    let kind = tenant
        .resolve(&kube::core::GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .await
        .expect("discovery answers")
        .expect("ConfigMaps are served");
    let own = tenant
        .for_bookkeeping("tether-system", "tether-inventory-web")
        .get(&kind, Some("tether-system"), "tether-inventory-web")
        .await
        .expect("the app's own inventory is read as tether");
    assert!(own.is_some());
    // Only tether's bookkeeping asks for it: the same ConfigMap named by anything
    // else (an object from Git, issue #24), or another app's, goes as the tenant.
    let another = tenant.for_bookkeeping("tether-system", "tether-inventory-other");
    for (cluster, namespace, name) in [
        (&tenant, "tether-system", "tether-inventory-web"),
        (another, "tether-system", "tether-inventory-other"),
        (&tenant, "t1", "settings"),
    ] {
        match cluster.get(&kind, Some(namespace), name).await {
            Err(ClusterError::Api {
                code: 403, message, ..
            }) => assert_eq!(
                message,
                format!(
                    "configmaps \"{name}\" is forbidden: User \"system:serviceaccount:t1:deployer\" \
                     cannot get resource \"configmaps\" in API group \"\" in the namespace \"{namespace}\""
                )
            ),
            other => panic!("expected a 403 for {namespace}/{name}, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_secret_deploys_into_a_second_sandbox_through_one_shared_connection() {
    let home = TestSandbox::start().await;
    let remote = TestSandbox::start().await;
    home.namespace("tether-system").await;
    remote.namespace("edge").await;
    // Two Secrets with the same kubeconfig: the same cluster, as the same user.
    let kubeconfig = base64::engine::general_purpose::STANDARD.encode(remote.sandbox.kubeconfig());
    for name in ["edge-a", "edge-b"] {
        home.kubectl_apply(&format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: tether-system\ndata:\n  value: {kubeconfig}\n"
            ),
        )
        .await;
    }
    let origin = origin(
        &home,
        &[
            ("a/cm.yaml", &configmap("a", "edge")),
            ("b/cm.yaml", &configmap("b", "edge")),
        ],
    );
    let server = server_section(home.dir.path());
    let app = |name: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{}\", ref: main, path: {name}, interval: {POLL}}}\n  destination:\n    namespace: edge\n    kubeConfig: {{secretRef: {{name: edge-{name}}}}}\n  sync: {{automated: true}}\n",
            origin.url
        )
    };
    let config = format!("{server}apps:\n{}{}", app("a"), app("b"));
    remote.sandbox.reset_requests();
    let serve = Serve::start(&home, "remote", &config, &[]).await;
    for name in ["a", "b"] {
        let status = serve.wait_synced(name).await;
        assert_eq!(
            find_condition(&status, "Ready")["status"],
            "True",
            "{status}"
        );
    }
    for name in ["a", "b"] {
        remote
            .kubectl(&["get", "cm", name, "-n", "edge"])
            .await
            .ok();
        remote
            .kubectl(&[
                "get",
                "cm",
                &format!("tether-inventory-{name}"),
                "-n",
                "tether-system",
            ])
            .await
            .ok();
        assert_ne!(
            home.kubectl(&["get", "cm", name, "-n", "edge"]).await.code,
            0,
            "nothing lands on the home cluster"
        );
    }
    // One connection and one cache: each kind is watched once on the second sandbox.
    let counts = eventually("the remote cache watches ConfigMaps", || async {
        let counts = remote.sandbox.requests();
        (counts.get("watch", "configmaps") >= 1).then_some(counts)
    })
    .await;
    // Both apps have passed by now (both Synced): a second cache would have watched too.
    drop(counts);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counts = remote.sandbox.requests();
    assert_eq!(counts.get("watch", "configmaps"), 1, "{counts:?}");
    assert_eq!(counts.get("watch", "namespaces"), 1, "{counts:?}");
    let log = serve.log();
    assert_eq!(
        log.matches("connected to another cluster").count(),
        1,
        "{log}"
    );
    assert!(
        !log.contains(remote.sandbox.token()),
        "the kubeconfig never reaches the log"
    );

    // Without the apps that use it, the connection closes (on reload).
    std::fs::write(
        home.dir.path().join("remote.yaml"),
        format!("{server}apps: []\n"),
    )
    .expect("rewrite the configuration");
    serve.signal("HUP");
    eventually("the second cluster is let go", || async {
        serve
            .log()
            .contains("no app uses the cluster any more")
            .then_some(())
    })
    .await;
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_whose_kubeconfig_secret_is_missing_is_stalled_and_the_others_run() {
    let (sandbox, origin) = with_origin("live", &[("ok/cm.yaml", &configmap("ok", "live"))]).await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n\
         - name: lost\n  source: {{repo: \"{url}\", ref: main, path: ok, interval: {POLL}}}\n  destination:\n    namespace: live\n    kubeConfig: {{secretRef: {{name: nowhere}}}}\n\
         - name: ok\n  source: {{repo: \"{url}\", ref: main, path: ok, interval: {POLL}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true}}\n",
        url = origin.url
    );
    let serve = Serve::start(&sandbox, "lost", &config, &[]).await;
    serve.wait_synced("ok").await;
    let status = serve
        .wait_status("lost", "lost is stalled", |s| {
            stalled_with(s, "ClusterFailed")
        })
        .await;
    let message = find_condition(&status, "Stalled")["message"].to_string();
    assert!(message.contains("nowhere"), "{status}");
    assert_eq!(serve.stop().await, Some(0));
}

/// kubectl, a client no one here wrote, impersonating through the sandbox: its
/// requests meet RBAC, and it prints the refusal as it prints a real server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_as_a_service_account_meets_rbac() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("t1").await;
    let as_deployer = "--as=system:serviceaccount:t1:deployer";
    let refused = sandbox
        .kubectl(&["get", "deployments", "-n", "t1", as_deployer])
        .await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains(
            "Error from server (Forbidden): deployments.apps is forbidden: User \
             \"system:serviceaccount:t1:deployer\" cannot list resource \"deployments\" in API \
             group \"apps\" in the namespace \"t1\""
        ),
        "{}",
        refused.stderr
    );
    sandbox
        .kubectl_apply(&deployer_role("get, list, watch, patch"))
        .await;
    sandbox
        .kubectl(&["get", "deployments", "-n", "t1", as_deployer])
        .await
        .ok();
    // The Role is t1's: other namespaces and the cluster scope stay refused.
    let elsewhere = sandbox
        .kubectl(&["get", "deployments", "-n", "default", as_deployer])
        .await;
    assert!(
        elsewhere
            .stderr
            .contains("cannot list resource \"deployments\" in API group \"apps\" in the namespace \"default\""),
        "{}",
        elsewhere.stderr
    );
    let cluster = sandbox.kubectl(&["get", "namespaces", as_deployer]).await;
    assert!(
        cluster
            .stderr
            .contains("cannot list resource \"namespaces\" in API group \"\" at the cluster scope"),
        "{}",
        cluster.stderr
    );
    // Server-side apply of a Deployment needs only patch, as on a real server.
    sandbox
        .kubectl_with_stdin(
            &["apply", "--server-side", "-f", "-", as_deployer],
            Some(&deployment("web", "t1")),
        )
        .await
        .ok();
}
