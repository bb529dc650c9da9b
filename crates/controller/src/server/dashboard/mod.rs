//! The web dashboard on `server.listen` (issue #17): one page, its script and its
//! style sheet, compiled into the binary (no CDN, no build step), reading the status
//! API it sits on, the compact app list (`/api/v1/apps?view=summary`) and the live
//! change feed (`/api/v1/events`, server-sent events).
//!
//! The assets are hand-written, dependency-free HTML, JavaScript and CSS: what the
//! browser runs is what is in `assets/`, so there is nothing to rebuild. They are
//! gzipped once, at first use, and sent so to every browser that accepts gzip; the
//! API's answers are compressed as they go (`server::router`).

pub(crate) mod tree;

use std::convert::Infallible;
use std::io::Write;
use std::sync::LazyLock;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use tether_core::report::status::{AppStatus, Statuses};

const INDEX_HTML: &str = include_str!("assets/index.html");
const DASHBOARD_JS: &str = include_str!("assets/dashboard.js");
const DASHBOARD_CSS: &str = include_str!("assets/dashboard.css");

/// One asset, as written and gzipped (once, the first time a browser asks for it).
struct Asset {
    plain: &'static str,
    gzipped: LazyLock<Vec<u8>>,
    content_type: &'static str,
}

impl Asset {
    const fn new(plain: &'static str, content_type: &'static str, gzip: fn() -> Vec<u8>) -> Asset {
        Asset {
            plain,
            gzipped: LazyLock::new(gzip),
            content_type,
        }
    }
}

static INDEX: Asset = Asset::new(INDEX_HTML, "text/html; charset=utf-8", || gzip(INDEX_HTML));
static SCRIPT: Asset = Asset::new(DASHBOARD_JS, "text/javascript; charset=utf-8", || {
    gzip(DASHBOARD_JS)
});
static STYLE: Asset = Asset::new(DASHBOARD_CSS, "text/css; charset=utf-8", || {
    gzip(DASHBOARD_CSS)
});

/// `text` gzipped at the best level: done once per asset, so the slowest level costs
/// nothing that repeats.
fn gzip(text: &str) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail; should it, the plain text is served instead.
    encoder
        .write_all(text.as_bytes())
        .and_then(|()| encoder.finish())
        .unwrap_or_default()
}

/// Whether the request's `Accept-Encoding` takes gzip (RFC 9110 §12.5.3: `gzip`,
/// `x-gzip` or `*`, with a non-zero weight; `identity` alone, or none, does not).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or_default().trim();
            let weight = parts
                .filter_map(|p| {
                    p.trim()
                        .strip_prefix("q=")
                        .or_else(|| p.trim().strip_prefix("Q="))
                })
                .filter_map(|q| q.trim().parse::<f32>().ok())
                .next()
                .unwrap_or(1.0);
            ["gzip", "x-gzip", "*"]
                .iter()
                .any(|g| name.eq_ignore_ascii_case(g))
                && weight > 0.0
        })
}

/// The page loads only its own script and style sheet and talks only to this server:
/// nothing injected through an app's name or a commit subject can load or send
/// anything elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// How often an idle event stream carries a comment, so proxies and the browser keep
/// it open (well under the 60 s idle timeouts of common proxies).
const KEEPALIVE: Duration = Duration::from_secs(15);

/// How long the browser waits before reconnecting a dropped event stream (the SSE
/// `retry` field): short, as the page is stale while it is gone.
const RECONNECT_MS: u64 = 1000;

/// SHA characters the app list carries: enough to be unique in any repository a
/// person reads, and accepted by the providers' commit pages.
const LIST_SHA_LEN: usize = 12;

/// The columns of a row of `/api/v1/apps?view=summary`, in order.
pub const SUMMARY_COLUMNS: [&str; 13] = [
    "name",
    "sync",
    "health",
    "sha",
    "subject",
    "repo",
    "result",
    "finishedAt",
    "durationMs",
    "drifted",
    "acting",
    "reason",
    "objects",
];

/// The page and its assets.
pub(super) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|h: HeaderMap| async move { asset(&INDEX, &h) }))
        .route(
            "/assets/dashboard.js",
            get(|h: HeaderMap| async move { asset(&SCRIPT, &h) }),
        )
        .route(
            "/assets/dashboard.css",
            get(|h: HeaderMap| async move { asset(&STYLE, &h) }),
        )
}

fn asset(asset: &'static Asset, request: &HeaderMap) -> Response {
    let headers = [
        (header::CONTENT_TYPE, asset.content_type),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        // A new binary may bring new assets: revalidate, never trust a stale copy.
        (header::CACHE_CONTROL, "no-cache"),
        (header::VARY, "accept-encoding"),
    ];
    let gzipped: &'static [u8] = asset.gzipped.as_slice();
    if accepts_gzip(request) && !gzipped.is_empty() {
        (headers, [(header::CONTENT_ENCODING, "gzip")], gzipped).into_response()
    } else {
        (headers, asset.plain).into_response()
    }
}

/// One app as the list shows it, in the order of [`SUMMARY_COLUMNS`]; `repo` is the
/// index of its commit page prefix in `repos` (shared by the apps of a repository,
/// so a thousand apps do not repeat it), or -1.
fn summary_row(status: &AppStatus, repos: &mut Vec<String>) -> Value {
    let repo = match &status.commit_url_prefix {
        Some(prefix) => match repos.iter().position(|r| r == prefix) {
            Some(i) => i as i64,
            None => {
                repos.push(prefix.clone());
                repos.len() as i64 - 1
            }
        },
        None => -1,
    };
    let revision = status.revision.as_ref();
    let pass = status.last_pass.as_ref();
    json!([
        status.name,
        status.sync.as_str(),
        status.health.as_str(),
        revision.map(|r| r.sha.chars().take(LIST_SHA_LEN).collect::<String>()),
        revision.map(|r| r.subject.as_str()),
        repo,
        pass.map(|p| p.result.as_str()),
        pass.map(|p| p.finished_at.timestamp_millis()),
        pass.map(|p| p.duration_ms),
        status.drifted.len(),
        status.automation.acting,
        status.automation.reason,
        status.objects,
    ])
}

/// Every app, compact: `{columns, repos, apps: [[…], …]}`.
pub(super) fn summary(statuses: &Statuses) -> Value {
    let mut repos = Vec::new();
    let apps = statuses.map_all(|s| summary_row(s, &mut repos));
    json!({ "columns": SUMMARY_COLUMNS, "repos": repos, "apps": apps })
}

/// One app as an event carries it: the summary row as an object.
fn summary_object(status: &AppStatus) -> Value {
    let mut repos = Vec::new();
    let row = summary_row(status, &mut repos);
    let mut object = serde_json::Map::new();
    if let Value::Array(cells) = row {
        for (column, cell) in SUMMARY_COLUMNS.iter().zip(cells) {
            object.insert((*column).to_string(), cell);
        }
    }
    object.insert("repo".into(), json!(repos.first()));
    Value::Object(object)
}

/// One server-sent event.
fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// `GET /api/v1/events`: a `text/event-stream` of `app` events (an app's summary,
/// sent when its status changes), `removed` (an app's name) and `reset` (the stream
/// fell behind: reload every app). This replica's own events are those of the apps
/// `ours` says it answers for (with shards) and the caller may see, and `relayed` brings the other replicas'
/// (`peers::relay`). It ends when the service stops ([`Statuses::close_feed`]).
pub(super) fn events(
    statuses: Statuses,
    ours: impl Fn(String) -> futures::future::BoxFuture<'static, bool> + Send + 'static,
    relayed: Option<mpsc::Receiver<Bytes>>,
) -> Response {
    let feed = statuses.subscribe();
    let hello = Bytes::from(format!(
        "retry: {RECONNECT_MS}\nevent: hello\ndata: {{}}\n\n"
    ));
    let stream = futures::stream::unfold(
        (Some(hello), feed, statuses, ours, relayed),
        |(first, mut feed, statuses, ours, mut relayed)| async move {
            if let Some(hello) = first {
                return Some((
                    Ok::<_, Infallible>(hello),
                    (None, feed, statuses, ours, relayed),
                ));
            }
            let chunk = loop {
                tokio::select! {
                    _ = tokio::time::sleep(KEEPALIVE) => break Bytes::from_static(b": keepalive\n\n"),
                    Some(theirs) = next_relayed(&mut relayed) => break theirs,
                    got = feed.recv() => match got {
                        Ok(Some(name)) if !ours(name.clone()).await => continue,
                        Ok(Some(name)) => match statuses.with(&name, summary_object) {
                            Some(app) => break event("app", &app),
                            None => break event("removed", &json!(name)),
                        },
                        Err(RecvError::Lagged(_)) => break event("reset", &json!({})),
                        // The service is stopping: the browser reconnects to whoever
                        // serves next.
                        Ok(None) | Err(RecvError::Closed) => return None,
                    },
                }
            };
            Some((Ok(chunk), (None, feed, statuses, ours, relayed)))
        },
    );
    let mut response = Body::from_stream(stream).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The next event relayed from a peer; never, without a relay or once it stopped.
async fn next_relayed(relayed: &mut Option<mpsc::Receiver<Bytes>>) -> Option<Bytes> {
    match relayed {
        Some(receiver) => match receiver.recv().await {
            Some(event) => Some(event),
            None => {
                *relayed = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
