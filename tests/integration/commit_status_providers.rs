//! Issue #31: commit statuses for Azure DevOps and Bitbucket Server / Data Center,
//! posted to a loopback server that routes, authenticates and answers as each
//! provider's API does (Azure DevOps "Statuses - Create": 201 with the status; Bitbucket
//! Data Center "Store a build status": 204; Azure DevOps its sign-in page with 203 for
//! a PAT it does not accept, Bitbucket 401 for a token it does not know).
//! Each request is recorded and asserted: method, path, query, headers and body.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tether_core::report::commit_status::{
    CommitState, CommitStatusConfig, CommitStatusError, CommitStatusReporter, CommitStatusTarget,
    StatusReport,
};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const TOKEN: &str = "pat-52h7x0q";

/// One request as the provider's server saw it.
#[derive(Debug, Clone)]
struct Request {
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Value,
}

impl Request {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

type Log = Arc<Mutex<Vec<Request>>>;

fn record(log: &Log, path: String, query: Option<String>, headers: &HeaderMap, body: &Bytes) {
    log.lock().push(Request {
        path,
        query,
        headers: headers.clone(),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    });
}

/// Azure DevOps: the api-version is required (400 without it, as the service answers),
/// a PAT comes as the password of basic authentication.
async fn azure_devops(
    State(log): State<Log>,
    uri: Uri,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    record(&log, uri.path().to_string(), query.clone(), &headers, &body);
    if !query.unwrap_or_default().contains("api-version=") {
        let message = "No api-version was supplied for the POST request.";
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"message": message})),
        )
            .into_response();
    }
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!(":{TOKEN}"))
    );
    match headers.get("authorization").and_then(|v| v.to_str().ok()) {
        Some(given) if given == expected => {}
        // A PAT the service does not accept: its sign-in page, answered 203.
        Some(_) => {
            let page = "<!DOCTYPE html><html><head><title>Azure DevOps Services | Sign In</title></head><body></body></html>";
            return (
                StatusCode::NON_AUTHORITATIVE_INFORMATION,
                [("content-type", "text/html; charset=utf-8")],
                page,
            )
                .into_response();
        }
        None => return StatusCode::UNAUTHORIZED.into_response(),
    }
    let mut status: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    status["id"] = json!(1);
    status["creationDate"] = json!("2026-11-27T09:00:00Z");
    (StatusCode::CREATED, axum::Json(status)).into_response()
}

/// Bitbucket Data Center under the context path `/bitbucket`: an HTTP access token as
/// a bearer token; 204 on success.
async fn bitbucket_server(
    State(log): State<Log>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    record(&log, uri.path().to_string(), None, &headers, &body);
    let bearer = format!("Bearer {TOKEN}");
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(bearer.as_str()) {
        let errors = json!({"errors": [{
            "context": null,
            "message": "Authentication failed. Please check your credentials and try again.",
            "exceptionName": "com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException"
        }]});
        return (StatusCode::UNAUTHORIZED, axum::Json(errors)).into_response();
    }
    StatusCode::NO_CONTENT.into_response()
}

/// The two providers' APIs on one loopback port; anything else is 404.
async fn provider_server() -> (String, Log) {
    crate::support::init();
    let log: Log = Arc::default();
    let app = Router::new()
        .route(
            "/{org}/{project}/_apis/git/repositories/{repo}/commits/{sha}/statuses",
            post(azure_devops),
        )
        .route(
            "/bitbucket/rest/api/latest/projects/{key}/repos/{slug}/commits/{sha}/builds",
            post(bitbucket_server),
        )
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, log)
}

fn target(yaml: &str, repo_url: &str) -> Arc<CommitStatusTarget> {
    let config: CommitStatusConfig = serde_saphyr::from_str(yaml).expect("config");
    Arc::new(config.resolve("shop", repo_url).expect("resolves"))
}

fn report(target: &Arc<CommitStatusTarget>, state: CommitState) -> StatusReport {
    StatusReport {
        target: target.clone(),
        sha: SHA.to_string(),
        state,
        description: "Synced, Healthy".to_string(),
    }
}

#[tokio::test]
async fn azure_devops_gets_the_statuses_api_request_with_a_pat() {
    let (base, log) = provider_server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("write");
    let reporter = CommitStatusReporter::start(crate::notify::fast()).expect("reporter");
    // The repository comes from the app's ssh URL; the API is the test server.
    let yaml = format!(
        "provider: azuredevops\napiUrl: {base}\ntokenFile: {}\ntargetUrl: https://tether.local/apps/shop\n",
        token.display()
    );
    let azure = target(&yaml, "git@ssh.dev.azure.com:v3/fabrikam/Fiber-Web/shop");
    assert_eq!(azure.repository, "fabrikam/Fiber-Web/shop");
    reporter.report(report(&azure, CommitState::Success));
    reporter.flush().await;

    let seen = log.lock().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let request = &seen[0];
    assert_eq!(
        request.path,
        format!("/fabrikam/Fiber-Web/_apis/git/repositories/shop/commits/{SHA}/statuses")
    );
    assert_eq!(request.query.as_deref(), Some("api-version=7.1"));
    assert_eq!(request.header("content-type"), "application/json");
    assert_eq!(
        request.body,
        json!({
            "state": "succeeded",
            "description": "Synced, Healthy",
            "context": {"genre": "tether", "name": "shop"},
            "targetUrl": "https://tether.local/apps/shop",
        })
    );
    assert_eq!(reporter.stats().delivered, 1);

    // A token the service does not know: Azure DevOps answers its sign-in page with
    // 203, which is no success: failed once, not retried, not printed.
    std::fs::write(&token, "revoked").expect("write");
    reporter.report(report(&azure, CommitState::Failure));
    reporter.flush().await;
    assert_eq!(log.lock().len(), 2, "203 is tried once");
    let stats = reporter.stats();
    assert_eq!((stats.delivered, stats.failed), (1, 1), "{stats:?}");
    reporter.shutdown().await;
}

#[tokio::test]
async fn bitbucket_server_gets_the_repository_build_status_with_a_bearer_token() {
    let (base, log) = provider_server().await;
    let reporter = CommitStatusReporter::start(crate::notify::fast()).expect("reporter");
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("write");
    let yaml = format!(
        "provider: bitbucketserver\napiUrl: {base}/bitbucket\ntokenFile: {}\n",
        token.display()
    );
    // An ssh clone URL names the project key in lower case; the API is given upper case.
    let server = target(&yaml, "ssh://git@bitbucket.example.com:7999/proj/shop.git");
    assert_eq!(server.repository, "proj/shop");
    reporter.report(report(&server, CommitState::Pending));
    reporter.flush().await;

    let seen = log.lock().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let request = &seen[0];
    assert_eq!(
        request.path,
        format!("/bitbucket/rest/api/latest/projects/PROJ/repos/shop/commits/{SHA}/builds")
    );
    assert_eq!(request.header("authorization"), format!("Bearer {TOKEN}"));
    assert_eq!(
        request.body,
        json!({
            "key": "tether/shop",
            "state": "INPROGRESS",
            "name": "tether/shop",
            "description": "Synced, Healthy",
            "url": format!("{base}/bitbucket/projects/PROJ/repos/shop/commits/{SHA}"),
        })
    );
    assert_eq!(reporter.stats().delivered, 1);

    // The same from an http clone URL (`/scm/PROJ/slug`), and a failure state.
    let http = target(&yaml, "https://bitbucket.example.com/scm/PROJ/shop.git");
    reporter.forget("shop");
    reporter.report(report(&http, CommitState::Failure));
    reporter.flush().await;
    let seen = log.lock().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].path, seen[0].path);
    assert_eq!(seen[1].body["state"], "FAILED");
    assert_eq!(reporter.stats().delivered, 2);
    reporter.shutdown().await;
}

#[test]
fn bitbucket_server_needs_its_base_url_and_generic_has_no_status_api() {
    let config: CommitStatusConfig =
        serde_saphyr::from_str("provider: bitbucketserver\ntokenEnv: T\n").expect("config");
    assert_eq!(
        config.resolve("shop", "https://bitbucket.example.com/scm/PROJ/shop.git"),
        Err(CommitStatusError::MissingApiUrl {
            provider: "bitbucketserver"
        })
    );
    let config: CommitStatusConfig =
        serde_saphyr::from_str("provider: generic\ntokenEnv: T\napiUrl: https://x.example\n")
            .expect("config");
    assert!(matches!(
        config.resolve("shop", "https://x.example/a/b"),
        Err(CommitStatusError::NoStatusApi { .. })
    ));
    // Azure DevOps defaults to the service's API, and needs organization/project/repo.
    let config: CommitStatusConfig =
        serde_saphyr::from_str("provider: azuredevops\ntokenEnv: T\n").expect("config");
    let resolved = config
        .resolve("shop", "https://dev.azure.com/fabrikam/Fiber/_git/shop")
        .expect("resolves");
    assert_eq!(resolved.api_url, "https://dev.azure.com");
    assert_eq!(resolved.repository, "fabrikam/Fiber/shop");
    assert!(matches!(
        config.resolve("shop", "https://github.com/acme/shop.git"),
        Err(CommitStatusError::Repository { .. })
    ));
}
