//! Commit statuses and notifications against recording HTTP servers on 127.0.0.1:
//! what each provider receives (URL, headers, body), the only-on-change rule, retries
//! after 500 and 429, giving up, a slow provider that never holds up the caller, the
//! rate limit, and that no Secret value reaches any request body.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::Sha256;
use tether_core::report::commit_status::{
    CommitState, CommitStatusConfig, CommitStatusReporter, StatusReport,
};
use tether_core::report::delivery::DeliveryOptions;
use tether_core::report::drift::DriftReport;
use tether_core::report::notify::{
    Event, EventKind, NotificationConfig, Notifier, resolve_channels,
};
use tether_core::source::Revision;
use tether_diff::diff::{Change, Drift, FieldPath, ObjectDiff, Segment};
use tether_diff::manifest::ObjectId;

use crate::support;

mod channels;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const SHA2: &str = "89abcdef0123456789abcdef0123456789abcdef";
const TOKEN: &str = "tok-abc123";
/// The value of the Secret in the drift report: must appear in no request.
const SECRET_VALUE: &str = "hunter2-s3cr3t-value";

/// One request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Seen {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("no header {name} in {:?}", self.headers))
    }
}

/// How the server answers one request.
#[derive(Debug, Clone)]
struct Reply {
    status: StatusCode,
    retry_after: Option<&'static str>,
    delay: Duration,
}

impl Reply {
    fn status(status: u16) -> Reply {
        Reply {
            status: StatusCode::from_u16(status).expect("a status code"),
            retry_after: None,
            delay: Duration::ZERO,
        }
    }
}

#[derive(Default)]
struct Script {
    seen: Vec<Seen>,
    /// Answers in order; when empty, `fallback`.
    replies: VecDeque<Reply>,
    fallback: Option<Reply>,
}

/// A loopback HTTP server that records every request and answers as scripted.
#[derive(Clone)]
pub struct Recorder {
    pub base: String,
    script: Arc<Mutex<Script>>,
}

async fn record(
    State(script): State<Arc<Mutex<Script>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut s = script.lock();
        s.seen.push(Seen {
            method,
            path: uri.path().to_string(),
            headers,
            body,
            at: Instant::now(),
        });
        let fallback = s.fallback.clone().unwrap_or(Reply::status(201));
        s.replies.pop_front().unwrap_or(fallback)
    };
    tokio::time::sleep(reply.delay).await;
    let mut response = (reply.status, "{\"message\":\"scripted\"}").into_response();
    if let Some(after) = reply.retry_after {
        response
            .headers_mut()
            .insert("retry-after", after.parse().unwrap());
    }
    response
}

impl Recorder {
    pub async fn start() -> Recorder {
        support::init();
        let script = Arc::new(Mutex::new(Script::default()));
        let app = Router::new().fallback(record).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Recorder { base, script }
    }

    fn reply(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().replies.extend(replies);
    }

    fn fallback(&self, reply: Reply) {
        self.script.lock().fallback = Some(reply);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.script.lock().seen.clone()
    }
}

/// Options with short waits, so retry tests take milliseconds.
pub(crate) fn fast() -> DeliveryOptions {
    DeliveryOptions {
        attempts: 3,
        attempt_timeout: Duration::from_secs(5),
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        ..DeliveryOptions::default()
    }
}

/// A file holding `value` (with the trailing newline a mounted Secret often has).
fn secret_file(dir: &tempfile::TempDir, name: &str, value: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, format!("{value}\n")).unwrap();
    path
}

fn status_config(yaml: &str) -> CommitStatusConfig {
    serde_saphyr::from_str(yaml).unwrap()
}

fn report(
    target: &Arc<tether_core::report::commit_status::CommitStatusTarget>,
    sha: &str,
    state: CommitState,
) -> StatusReport {
    StatusReport {
        target: target.clone(),
        sha: sha.to_string(),
        state,
        description: format!("{state:?}"),
    }
}

#[tokio::test]
async fn github_statuses_carry_the_documented_request_and_are_posted_only_on_change() {
    let server = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = secret_file(&dir, "token", TOKEN);
    let config = status_config(&format!(
        "provider: github\napiUrl: {}/\ntokenFile: {}\ntargetUrl: https://tether.local/apps/shop\n",
        server.base,
        token.display()
    ));
    let target = Arc::new(
        config
            .resolve("shop", "git@github.com:acme/shop.git")
            .unwrap(),
    );
    let reporter = CommitStatusReporter::start(fast()).unwrap();

    reporter.report(report(&target, SHA, CommitState::Pending));
    reporter.flush().await;
    reporter.report(report(&target, SHA, CommitState::Success));
    reporter.flush().await;
    // The same result again, twice: nothing to post.
    reporter.report(report(&target, SHA, CommitState::Success));
    reporter.report(report(&target, SHA, CommitState::Success));
    reporter.flush().await;
    // A new commit with the same state is a change.
    reporter.report(report(&target, SHA2, CommitState::Success));
    reporter.flush().await;

    let seen = server.seen();
    let states: Vec<(String, String)> = seen
        .iter()
        .map(|s| {
            (
                s.path.clone(),
                s.json()["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            (
                format!("/repos/acme/shop/statuses/{SHA}"),
                "pending".to_string()
            ),
            (
                format!("/repos/acme/shop/statuses/{SHA}"),
                "success".to_string()
            ),
            (
                format!("/repos/acme/shop/statuses/{SHA2}"),
                "success".to_string()
            ),
        ]
    );
    let first = &seen[0];
    assert_eq!(first.method, Method::POST);
    assert_eq!(first.header("authorization"), format!("Bearer {TOKEN}"));
    assert_eq!(first.header("accept"), "application/vnd.github+json");
    assert_eq!(first.header("x-github-api-version"), "2022-11-28");
    assert_eq!(first.header("content-type"), "application/json");
    assert!(first.header("user-agent").starts_with("tether/"));
    assert_eq!(
        first.json(),
        json!({
            "state": "pending",
            "description": "Pending",
            "context": "tether/shop",
            "target_url": "https://tether.local/apps/shop",
        })
    );
    let stats = reporter.stats();
    assert_eq!(stats.delivered, 3);
    assert_eq!(
        (stats.skipped, stats.dropped),
        (1, 1),
        "of the two equal reports one replaced the other in the queue, then was skipped: {stats:?}"
    );
    reporter.shutdown().await;
}

#[tokio::test]
async fn gitlab_gitea_and_bitbucket_get_their_own_urls_headers_and_states() {
    let server = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = secret_file(&dir, "token", TOKEN);
    let reporter = CommitStatusReporter::start(fast()).unwrap();
    let cases = [
        (
            "gitlab",
            "/api/v4",
            "https://gitlab.local/acme/platform/shop.git",
            CommitState::Pending,
            format!("/api/v4/projects/acme%2Fplatform%2Fshop/statuses/{SHA}"),
            ("private-token", TOKEN.to_string()),
            json!({"state": "running", "name": "tether/shop", "description": "Pending"}),
        ),
        (
            "gitea",
            "/api/v1",
            "ssh://git@gitea.local:2222/acme/shop.git",
            CommitState::Failure,
            format!("/api/v1/repos/acme/shop/statuses/{SHA}"),
            ("authorization", format!("token {TOKEN}")),
            json!({"state": "failure", "description": "Failure", "context": "tether/shop"}),
        ),
        (
            "bitbucket",
            "/2.0",
            "https://bitbucket.org/acme/shop.git",
            CommitState::Success,
            format!("/2.0/repositories/acme/shop/commit/{SHA}/statuses/build"),
            ("authorization", format!("Bearer {TOKEN}")),
            json!({
                "key": "tether/shop",
                "state": "SUCCESSFUL",
                "name": "tether/shop",
                "description": "Success",
                "url": format!("https://bitbucket.org/acme/shop/commits/{SHA}"),
            }),
        ),
    ];
    for (provider, prefix, repo_url, state, path, (header, value), body) in cases {
        let config = status_config(&format!(
            "provider: {provider}\napiUrl: {}{prefix}\ntokenFile: {}\n",
            server.base,
            token.display()
        ));
        let target = Arc::new(config.resolve("shop", repo_url).unwrap());
        reporter.report(report(&target, SHA, state));
        reporter.flush().await;
        let seen = server.seen();
        let last = seen.last().unwrap();
        assert_eq!(last.path, path, "{provider}");
        assert_eq!(last.header(header), value, "{provider}");
        assert_eq!(last.json(), body, "{provider}");
        // The same app under another provider is another target: forget the last.
        reporter.forget("shop");
    }
    assert_eq!(server.seen().len(), 3);
    reporter.shutdown().await;
}

#[tokio::test]
async fn a_500_and_a_429_are_retried_honouring_retry_after() {
    let server = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = secret_file(&dir, "token", TOKEN);
    server.reply([
        Reply::status(500),
        Reply {
            retry_after: Some("1"),
            ..Reply::status(429)
        },
        Reply::status(201),
    ]);
    let config = status_config(&format!(
        "provider: github\napiUrl: {}\ntokenFile: {}\n",
        server.base,
        token.display()
    ));
    let target = Arc::new(
        config
            .resolve("shop", "https://github.com/acme/shop")
            .unwrap(),
    );
    let reporter = CommitStatusReporter::start(fast()).unwrap();
    reporter.report(report(&target, SHA, CommitState::Success));
    reporter.flush().await;

    let seen = server.seen();
    assert_eq!(seen.len(), 3, "two failures, then success");
    assert!(
        seen.iter().all(|s| s.body == seen[0].body),
        "the same request each time"
    );
    let backoff = seen[1].at - seen[0].at;
    assert!(
        backoff < Duration::from_millis(900),
        "backoff, not Retry-After: {backoff:?}"
    );
    let waited = seen[2].at - seen[1].at;
    assert!(
        waited >= Duration::from_millis(950),
        "Retry-After: 1 honoured: {waited:?}"
    );
    let stats = reporter.stats();
    assert_eq!((stats.delivered, stats.failed, stats.requests), (1, 0, 3));

    // Posted: the same result is not posted again.
    reporter.report(report(&target, SHA, CommitState::Success));
    reporter.flush().await;
    assert_eq!(server.seen().len(), 3);
    reporter.shutdown().await;
}

#[tokio::test]
async fn the_retry_budget_runs_out_and_an_unposted_result_is_tried_again_later() {
    let server = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = secret_file(&dir, "token", TOKEN);
    server.fallback(Reply::status(503));
    let config = status_config(&format!(
        "provider: gitea\napiUrl: {}\ntokenFile: {}\n",
        server.base,
        token.display()
    ));
    let target = Arc::new(
        config
            .resolve("shop", "https://gitea.local/acme/shop")
            .unwrap(),
    );
    let reporter = CommitStatusReporter::start(fast()).unwrap();
    reporter.report(report(&target, SHA, CommitState::Failure));
    reporter.flush().await;
    assert_eq!(server.seen().len(), 3, "attempts: 3");
    assert_eq!(reporter.stats().failed, 1);

    // Nothing was posted, so the next pass's equal result is posted.
    server.fallback(Reply::status(201));
    reporter.report(report(&target, SHA, CommitState::Failure));
    reporter.flush().await;
    assert_eq!(server.seen().len(), 4);
    assert_eq!(reporter.stats().delivered, 1);

    // A refusal a retry cannot fix (bad token, unknown repo) is not retried.
    server.reply([Reply::status(401)]);
    reporter.report(report(&target, SHA, CommitState::Success));
    reporter.flush().await;
    assert_eq!(server.seen().len(), 5, "401 is tried once");
    assert_eq!(reporter.stats().failed, 2);
    reporter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_provider_never_holds_up_the_caller_and_queued_results_coalesce() {
    let server = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = secret_file(&dir, "token", TOKEN);
    server.fallback(Reply {
        delay: Duration::from_secs(3),
        ..Reply::status(201)
    });
    let options = DeliveryOptions {
        attempts: 2,
        attempt_timeout: Duration::from_millis(300),
        ..fast()
    };
    let reporter = CommitStatusReporter::start(options).unwrap();
    let targets: Vec<_> = (0..5)
        .map(|i| {
            let config = status_config(&format!(
                "provider: github\napiUrl: {}\ntokenFile: {}\n",
                server.base,
                token.display()
            ));
            Arc::new(
                config
                    .resolve(&format!("app{i}"), "https://github.com/acme/shop")
                    .unwrap(),
            )
        })
        .collect();

    // One status in flight against the slow server…
    reporter.report(report(&targets[0], SHA, CommitState::Failure));
    support::eventually("the first status is being posted", || async {
        (server.seen().len() == 1).then_some(())
    })
    .await;

    // …while the loop goes on reporting.
    let started = Instant::now();
    for round in 0..5 {
        for target in &targets {
            let state = if round % 2 == 0 {
                CommitState::Pending
            } else {
                CommitState::Failure
            };
            assert!(reporter.report(report(target, SHA, state)));
        }
    }
    // The property: reporting never waits for delivery. A report that waited would
    // wait out at least the rest of the attempt in flight (300 ms: the server answers
    // after 3 s), and 25 of them seconds; 200 ms leaves a loaded machine room.
    let caller = started.elapsed();
    assert!(
        caller < Duration::from_millis(200),
        "25 reports took {caller:?}"
    );

    // Waiting for delivery is bounded by the attempt timeout, not the server's 3 s.
    let waiting = Instant::now();
    reporter.flush().await;
    assert!(
        waiting.elapsed() < Duration::from_secs(10),
        "{:?}",
        waiting.elapsed()
    );
    let stats = reporter.stats();
    assert_eq!(
        stats.failed, 6,
        "the one in flight, then one per app: {stats:?}"
    );
    assert_eq!(
        stats.dropped, 20,
        "each app's queued reports coalesced: {stats:?}"
    );
    assert_eq!(stats.requests, 12, "each tried twice: {stats:?}");
    let states: Vec<String> = server
        .seen()
        .iter()
        .map(|s| s.json()["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(states[..2], ["failure", "failure"], "{states:?}");
    assert!(
        states[2..].iter().all(|s| s == "pending"),
        "only each app's newest result (round 4: pending) was posted: {states:?}"
    );
    reporter.shutdown().await;
}
