//! The sandbox's tokens (issue #30), with the real `kubectl`: `kubectl create token`
//! issues a ServiceAccount token, requests made with it meet RBAC (`kubectl auth
//! can-i`, `get`), and a TokenReview or SubjectAccessReview answers about it as
//! kube-apiserver does.

use reqwest::StatusCode;
use serde_json::{Value, json};
use tether_testkit::assert_contains;

use crate::support::TestSandbox;

/// A ServiceAccount `team-a/viewer` allowed to read ConfigMaps in team-a.
const VIEWER: &str = "apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-config, namespace: team-a}
rules:
- {apiGroups: [''], resources: [configmaps], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-config}
subjects:
- {kind: ServiceAccount, name: viewer, namespace: team-a}
";

async fn viewer(sandbox: &TestSandbox) -> String {
    sandbox
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(VIEWER))
        .await
        .ok();
    let out = sandbox
        .kubectl(&["create", "token", "viewer", "-n", "team-a"])
        .await
        .ok();
    out.stdout.trim().to_string()
}

async fn token_review(sandbox: &TestSandbox, token: &str, audiences: Option<&[&str]>) -> Value {
    let mut spec = json!({"token": token});
    if let Some(audiences) = audiences {
        spec["audiences"] = json!(audiences);
    }
    let review =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec});
    let answer = sandbox
        .post("/apis/authentication.k8s.io/v1/tokenreviews", &review)
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text());
    answer.json()["status"].clone()
}

#[tokio::test]
async fn kubectl_create_token_issues_a_token_that_runs_as_the_service_account() {
    let sandbox = TestSandbox::start().await;
    let token = viewer(&sandbox).await;
    assert!(token.len() >= 32, "a token: {} characters", token.len());
    let as_viewer = format!("--token={token}");
    let can_i = |verb: &'static str, resource: &'static str| {
        let as_viewer = as_viewer.clone();
        let sandbox = &sandbox;
        async move {
            let out = sandbox
                .kubectl(&["auth", "can-i", verb, resource, "-n", "team-a", &as_viewer])
                .await;
            out.stdout.trim().to_string()
        }
    };
    assert_eq!(can_i("list", "configmaps").await, "yes");
    assert_eq!(can_i("delete", "configmaps").await, "no");
    assert_eq!(can_i("list", "secrets").await, "no");

    let whoami = sandbox
        .kubectl(&["auth", "whoami", "-o", "json", &as_viewer])
        .await
        .ok();
    let whoami: Value = serde_json::from_str(&whoami.stdout).expect("JSON");
    assert_eq!(
        whoami["status"]["userInfo"]["username"],
        "system:serviceaccount:team-a:viewer"
    );

    // Requests run as the ServiceAccount, and RBAC refuses what it may not do.
    sandbox
        .kubectl(&["get", "configmaps", "-n", "team-a", &as_viewer])
        .await
        .ok();
    let refused = sandbox
        .kubectl(&["get", "secrets", "-n", "team-a", &as_viewer])
        .await;
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains(
            "User \"system:serviceaccount:team-a:viewer\" cannot list resource \"secrets\""
        ),
        "{}",
        refused.stderr
    );
    // A token nobody issued is not let in at all.
    let unknown = sandbox
        .kubectl(&["get", "configmaps", "-n", "team-a", "--token=not-issued"])
        .await;
    assert_eq!(unknown.code, 1);
    assert_contains(&unknown.stderr, "Unauthorized");
}

#[tokio::test]
async fn a_token_review_names_the_user_of_a_token_for_its_audiences() {
    let sandbox = TestSandbox::start().await;
    let token = viewer(&sandbox).await;
    let status = token_review(&sandbox, &token, None).await;
    assert_eq!(status["authenticated"], true, "{status}");
    let user = &status["user"];
    assert_eq!(user["username"], "system:serviceaccount:team-a:viewer");
    assert_eq!(
        user["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:team-a",
            "system:authenticated"
        ])
    );
    assert!(user["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert_eq!(
        status["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    // kubectl create token --audience: valid for that audience only.
    let out = sandbox
        .kubectl(&[
            "create",
            "token",
            "viewer",
            "-n",
            "team-a",
            "--audience=tether",
            "--duration=15m",
        ])
        .await
        .ok();
    let for_tether = out.stdout.trim();
    let status = token_review(&sandbox, for_tether, Some(&["tether"])).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], json!(["tether"]));
    let status = token_review(&sandbox, for_tether, None).await;
    assert_ne!(status["authenticated"], true, "{status}");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|e| e.contains("invalid bearer token")),
        "{status}"
    );
    // Unknown tokens are not authenticated; the error never repeats the token.
    let status = token_review(&sandbox, "s3cret-nobody-issued", None).await;
    assert_eq!(status["user"], json!({}));
    assert!(!status.to_string().contains("s3cret-nobody-issued"));
    // Once the ServiceAccount is deleted, its tokens are invalid.
    sandbox
        .kubectl(&["delete", "serviceaccount", "viewer", "-n", "team-a"])
        .await
        .ok();
    let status = token_review(&sandbox, &token, None).await;
    assert_ne!(status["authenticated"], true, "{status}");
}

#[tokio::test]
async fn token_requests_are_refused_as_kube_apiserver_refuses_them() {
    let sandbox = TestSandbox::start().await;
    let token = viewer(&sandbox).await;
    let missing = sandbox
        .kubectl(&["create", "token", "nobody", "-n", "team-a"])
        .await;
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("serviceaccounts \"nobody\" not found"),
        "{}",
        missing.stderr
    );
    let short = sandbox
        .kubectl(&["create", "token", "viewer", "-n", "team-a", "--duration=1m"])
        .await;
    assert_eq!(short.code, 1);
    assert!(
        short
            .stderr
            .contains("may not specify a duration less than 10 minutes"),
        "{}",
        short.stderr
    );
    // The viewer may not mint tokens for itself: RBAC's `create serviceaccounts/token`.
    let own = sandbox
        .kubectl(&[
            "create",
            "token",
            "viewer",
            "-n",
            "team-a",
            &format!("--token={token}"),
        ])
        .await;
    assert_eq!(own.code, 1);
    assert!(
        own.stderr
            .contains("cannot create resource \"serviceaccounts/token\""),
        "{}",
        own.stderr
    );
}

#[tokio::test]
async fn a_subject_access_review_answers_for_a_token_user_and_its_groups() {
    let sandbox = TestSandbox::start().await;
    viewer(&sandbox).await;
    let review = |verb: &str, resource: &str| {
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "system:serviceaccount:team-a:viewer",
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {"namespace": "team-a", "verb": verb, "resource": resource},
            },
        })
    };
    let allowed = |body: Value| {
        let sandbox = &sandbox;
        async move {
            let answer = sandbox
                .post("/apis/authorization.k8s.io/v1/subjectaccessreviews", &body)
                .await;
            assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text());
            answer.json()["status"]["allowed"].clone()
        }
    };
    assert_eq!(allowed(review("get", "configmaps")).await, true);
    assert_eq!(allowed(review("patch", "configmaps")).await, false);
    // A static token (kube-apiserver's --token-auth-file) runs as its user and groups.
    sandbox
        .sandbox
        .add_static_token("alice-token", "alice", &["team-a-admins"]);
    let whoami = sandbox
        .kubectl(&["auth", "whoami", "-o", "json", "--token=alice-token"])
        .await
        .ok();
    let whoami: Value = serde_json::from_str(&whoami.stdout).expect("JSON");
    assert_eq!(whoami["status"]["userInfo"]["username"], "alice");
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        json!(["team-a-admins", "system:authenticated"])
    );
    let forbidden = sandbox
        .kubectl(&["get", "--raw", "/sandbox/requests", "--token=alice-token"])
        .await;
    assert_eq!(forbidden.code, 1, "{forbidden:?}");
}
