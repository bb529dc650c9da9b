//! People and permissions (issue #30) against `tether serve` as a process: users log
//! in to the API with their own ServiceAccount tokens (`kubectl create token`), which
//! tether checks with a TokenReview, and see and change only the Apps Kubernetes RBAC
//! lets them (`get`/`list`, `patch` on `apps.tether.dev`), asked with
//! SubjectAccessReviews. Their actions are Events on the App. The API token stays the
//! operator's.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::app_crd::{apply_app, install_crd};
use crate::serve::{Origin, Serve, configmap, origin_http, server_section_with_token};
use crate::support::{TestSandbox, eventually};

const API_TOKEN: &str = "operator-break-glass";
const POLL: &str = "1h";

/// team-a's two Roles on `apps.tether.dev`: `app-viewer` (get, list) and
/// `app-operator` (get, list, patch), for the tests to bind to their people.
pub(crate) const APP_ROLES: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: app-viewer, namespace: team-a}
rules:
- {apiGroups: [tether.dev], resources: [apps], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: app-operator, namespace: team-a}
rules:
- {apiGroups: [tether.dev], resources: [apps], verbs: [get, list, patch]}
";

/// team-a's viewer may see its Apps, its operator may also change them, and nobody
/// may do anything: three ServiceAccounts of team-a, bound to [`APP_ROLES`].
pub(crate) const RBAC: &str = "apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer, namespace: team-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: operator, namespace: team-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: nobody, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-viewer}
subjects:
- {kind: ServiceAccount, name: viewer, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: operator, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-operator}
subjects:
- {kind: ServiceAccount, name: operator, namespace: team-a}
";

/// Asserts that an answer of the status API (its code and body) refuses with 403
/// Forbidden, saying `error`.
#[track_caller]
pub(crate) fn assert_forbidden((status, refused): (StatusCode, Value), error: &str) {
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"], error);
}

struct Api {
    url: String,
    client: reqwest::Client,
}

impl Api {
    async fn call(&self, method: Method, path: &str, token: &str) -> (StatusCode, Value) {
        let answer = self
            .client
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token)
            .send()
            .await
            .expect("an answer");
        let status = answer.status();
        let text = answer.text().await.expect("a body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// [`Api::call`], again while the app is not found: an App's suspend and resume
    /// write its spec, which restarts its worker, and for that moment the app is not
    /// in the API.
    async fn act(&self, method: Method, path: &str, token: &str) -> (StatusCode, Value) {
        eventually(&format!("{method} {path} finds its app"), || async {
            let (status, body) = self.call(method.clone(), path, token).await;
            (status != StatusCode::NOT_FOUND).then_some((status, body))
        })
        .await
    }

    /// The names of the apps `token` is shown, in the full and the summary list.
    async fn names(&self, token: &str) -> (Vec<String>, Vec<String>) {
        let (status, full) = self.call(Method::GET, "/api/v1/apps", token).await;
        assert_eq!(status, StatusCode::OK, "{full}");
        let (status, summary) = self
            .call(Method::GET, "/api/v1/apps?view=summary", token)
            .await;
        assert_eq!(status, StatusCode::OK, "{summary}");
        let names = |list: &Value, pointer: &str| {
            let mut names: Vec<String> = list["apps"]
                .as_array()
                .expect("apps")
                .iter()
                .filter_map(|app| app.pointer(pointer).and_then(Value::as_str))
                .map(str::to_string)
                .collect();
            names.sort();
            names
        };
        (names(&full, "/name"), names(&summary, "/0"))
    }
}

/// The notes of tether's Events on the App team-a/web, sorted, once there are `count`.
pub(crate) async fn action_notes(sandbox: &TestSandbox, count: usize) -> Vec<String> {
    eventually("the actions are Events on the App", || async {
        let list = sandbox
            .get("/apis/events.k8s.io/v1/namespaces/team-a/events")
            .await
            .json();
        let mut notes: Vec<String> = list["items"]
            .as_array()?
            .iter()
            .filter(|e| e["reportingController"] == "tether" && e["regarding"]["name"] == "web")
            .filter_map(|e| e["note"].as_str().map(str::to_string))
            .collect();
        notes.sort();
        (notes.len() >= count).then_some(notes)
    })
    .await
}

/// Namespaces team-a, team-b (each with a trusted `deployer`) and live, the App CRD,
/// and [`APP_ROLES`] with `people`: who is bound to them ([`RBAC`] for tokens).
pub(crate) async fn teams(sandbox: &TestSandbox, people: &str) {
    sandbox.namespaces(&["team-a", "team-b", "live"]).await;
    install_crd(sandbox).await;
    for namespace in ["team-a", "team-b"] {
        sandbox.trusted_service_account(namespace, "deployer").await;
    }
    sandbox.kubectl_apply(APP_ROLES).await;
    sandbox.kubectl_apply(people).await;
}

/// A Git repository over HTTP with team-a's `apps/web` and team-b's `apps/api` (a
/// ConfigMap each, for live), and the files `more`.
pub(crate) fn team_origin(sandbox: &TestSandbox, more: &[(&str, &str)]) -> Origin {
    let web = configmap("web", "live", "a");
    let api = configmap("api", "live", "b");
    let mut files = vec![
        ("apps/web/config.yaml", web.as_str()),
        ("apps/api/config.yaml", api.as_str()),
    ];
    files.extend_from_slice(more);
    origin_http(sandbox, &files)
}

/// The Apps team-a/web and team-b/api, auto-syncing `apps/web` and `apps/api` of the
/// Git repository at `origin` into live.
pub(crate) async fn team_apps(sandbox: &TestSandbox, origin: &str) {
    for (name, namespace) in [("web", "team-a"), ("api", "team-b")] {
        let spec = format!(
            "  serviceAccountName: deployer\n  source: {{repo: \"{origin}\", ref: main, path: apps/{name}, interval: {POLL}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true}}\n"
        );
        apply_app(sandbox, name, namespace, &spec).await;
    }
}

pub(crate) async fn token(sandbox: &TestSandbox, name: &str) -> String {
    let out = sandbox
        .kubectl(&["create", "token", name, "-n", "team-a"])
        .await
        .ok();
    out.stdout.trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_see_and_change_only_the_apps_rbac_allows_them() {
    let sandbox = TestSandbox::start().await;
    teams(&sandbox, RBAC).await;
    let origin = team_origin(
        &sandbox,
        &[("apps/plain/config.yaml", &configmap("plain", "live", "p"))],
    );
    let server = server_section_with_token(sandbox.dir.path(), API_TOKEN);
    let config = format!(
        "{server}apps:\n- name: plain\n  source: {{repo: \"{}\", ref: main, path: apps/plain, interval: {POLL}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "people", &config, &[]).await;
    team_apps(&sandbox, &origin.url).await;
    let api = Api {
        url: serve.url.clone(),
        client: reqwest::Client::new(),
    };
    let everything = vec![
        "plain".to_string(),
        "team-a.web".to_string(),
        "team-b.api".to_string(),
    ];
    // The operator's API token sees every app, as before (once each has synced, so
    // that no App is restarted under the test).
    eventually("the operator sees every app synced", || async {
        let (full, summary) = api.names(API_TOKEN).await;
        let (_, list) = api.call(Method::GET, "/api/v1/apps", API_TOKEN).await;
        let synced = list["apps"]
            .as_array()?
            .iter()
            .all(|app| app["sync"] == "Synced");
        (full == everything && summary == everything && synced).then_some(())
    })
    .await;

    let viewer = token(&sandbox, "viewer").await;
    let operator = token(&sandbox, "operator").await;
    let nobody = token(&sandbox, "nobody").await;
    let team_a = vec!["team-a.web".to_string()];
    assert_eq!(api.names(&viewer).await, (team_a.clone(), team_a.clone()));
    assert_eq!(api.names(&operator).await, (team_a.clone(), team_a));
    assert_eq!(api.names(&nobody).await, (vec![], vec![]));

    // The viewer sees team-a's app, not team-b's, and may not change it.
    let (status, app) = api
        .act(Method::GET, "/api/v1/apps/team-a.web", &viewer)
        .await;
    assert_eq!(status, StatusCode::OK, "{app}");
    assert_eq!(app["name"], "team-a.web");
    assert_forbidden(
        api.call(Method::GET, "/api/v1/apps/team-b.api", &viewer)
            .await,
        "system:serviceaccount:team-a:viewer may not view app \"team-b.api\": needs get on apps.tether.dev in team-b",
    );
    for action in ["sync", "suspend"] {
        let path = format!("/api/v1/apps/team-a.web/{action}");
        assert_forbidden(
            api.call(Method::POST, &path, &viewer).await,
            &format!(
                "system:serviceaccount:team-a:viewer may view app \"team-a.web\" but not {action} it: needs patch on apps.tether.dev in team-a"
            ),
        );
    }
    // A file app is authorized in the inventory namespace, where nobody here has rights.
    let (status, _) = api.call(Method::GET, "/api/v1/apps/plain", &viewer).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // The operator of team-a syncs, suspends and resumes its app, not team-b's.
    let (status, answer) = api
        .act(Method::POST, "/api/v1/apps/team-a.web/sync", &operator)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let (status, answer) = api
        .act(Method::POST, "/api/v1/apps/team-a.web/suspend", &operator)
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, answer) = api
        .act(Method::POST, "/api/v1/apps/team-a.web/resume", &operator)
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, _) = api
        .call(Method::POST, "/api/v1/apps/team-b.api/sync", &operator)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Each action is an Event on the App naming who took it; refusals leave none.
    let notes = action_notes(&sandbox, 3).await;
    let operator_name = "system:serviceaccount:team-a:operator";
    assert_eq!(
        notes,
        ["resume", "suspend", "sync"]
            .map(|action| format!("{action} by {operator_name} through tether's API"))
    );
    // A token the cluster does not accept is no one; the API token still changes anything.
    let (status, _) = api
        .call(Method::GET, "/api/v1/apps", "not-a-token-anyone-issued")
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = api
        .act(Method::POST, "/api/v1/apps/team-b.api/sync", API_TOKEN)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);

    // No token appears in tether's log.
    let log = serve.log();
    for secret in [&viewer, &operator, &nobody, &API_TOKEN.to_string()] {
        assert!(!log.contains(secret.as_str()), "a token was logged");
    }
}
