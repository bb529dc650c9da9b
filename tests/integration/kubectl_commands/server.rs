//! Commands answered by the server's machinery rather than an object's fields:
//! cascading deletion, discovery and `explain`, access reviews, server-side dry run.

use super::*;
use tether_testkit::assert_contains;

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
    assert_contains(&out.stdout, "FIELD: spec <DeploymentSpec>");
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
    assert_contains(&whoami.stdout, "kubernetes-admin");
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
