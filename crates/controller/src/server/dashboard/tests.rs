use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::DateTime;
use futures::StreamExt;
use tower::ServiceExt;

use super::*;
use crate::reconcile::runtime::commit_url_prefix;
use tether_core::report::status::{PassInfo, PassResult, RevisionInfo, SyncStatus};

async fn get(path: &str) -> (StatusCode, axum::http::HeaderMap, String) {
    let response = routes::<()>()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn the_page_and_the_assets_it_names_are_served_with_a_strict_policy() {
    let (status, headers, html) = get("/").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"));
    for asset in ["/assets/dashboard.js", "/assets/dashboard.css"] {
        assert!(html.contains(asset), "the page loads {asset}");
        let (status, headers, body) = get(asset).await;
        assert_eq!(status, StatusCode::OK, "{asset}");
        assert!(!body.is_empty());
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }
    assert_eq!(get("/assets/other.js").await.0, StatusCode::NOT_FOUND);
}

async fn get_with(path: &str, accept: Option<&str>) -> (axum::http::HeaderMap, Vec<u8>) {
    let mut request = Request::get(path);
    if let Some(accept) = accept {
        request = request.header(header::ACCEPT_ENCODING, accept);
    }
    let response = routes::<()>()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (headers, body.to_vec())
}

fn gunzip(bytes: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .expect("gzip");
    text
}

#[tokio::test]
async fn the_assets_are_sent_gzipped_to_a_browser_that_takes_gzip_and_plain_otherwise() {
    for (path, text) in [
        ("/", INDEX_HTML),
        ("/assets/dashboard.js", DASHBOARD_JS),
        ("/assets/dashboard.css", DASHBOARD_CSS),
    ] {
        let (headers, body) = get_with(path, Some("gzip, deflate, br, zstd")).await;
        assert_eq!(headers[header::CONTENT_ENCODING], "gzip", "{path}");
        assert_eq!(headers[header::VARY], "accept-encoding", "{path}");
        assert!(body.len() < text.len() / 2, "{path}: {} bytes", body.len());
        assert_eq!(gunzip(&body), text, "{path}");
        for refused in [
            None,
            Some("identity"),
            Some("gzip;q=0, br"),
            Some("deflate"),
        ] {
            let (headers, body) = get_with(path, refused).await;
            assert!(
                headers.get(header::CONTENT_ENCODING).is_none(),
                "{path} {refused:?}"
            );
            assert_eq!(body, text.as_bytes(), "{path} {refused:?}");
        }
    }
}

#[test]
fn gzip_is_taken_by_name_or_star_with_a_weight_above_zero() {
    let accepts = |value: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, value.parse().unwrap());
        accepts_gzip(&headers)
    };
    for yes in [
        "gzip",
        "GZIP",
        "br, gzip;q=0.5",
        "x-gzip",
        "*",
        "deflate, * ; q=0.1",
    ] {
        assert!(accepts(yes), "{yes}");
    }
    for no in [
        "",
        "identity",
        "br",
        "gzip;q=0",
        "gzip; q=0.0",
        "*;q=0",
        "gzipx",
    ] {
        assert!(!accepts(no), "{no}");
    }
    assert!(!accepts_gzip(&HeaderMap::new()));
}

#[test]
fn the_assets_load_nothing_from_elsewhere_and_stay_small() {
    for (name, text) in [
        ("index.html", INDEX_HTML),
        ("dashboard.js", DASHBOARD_JS),
        ("dashboard.css", DASHBOARD_CSS),
    ] {
        assert!(!text.contains("http://"), "{name} names no other origin");
        assert!(!text.contains("https://"), "{name} names no other origin");
        assert!(!text.contains("@import"), "{name} imports nothing");
    }
    // The page's own weight, so a thousand apps' list fits the 200 KB budget.
    let total = INDEX_HTML.len() + DASHBOARD_JS.len() + DASHBOARD_CSS.len();
    assert!(total < 64 * 1024, "assets are {total} bytes");
}

#[test]
fn commit_pages_are_known_for_github_gitlab_and_bitbucket_only() {
    let cases = [
        (
            "https://github.com/acme/shop.git",
            Some("https://github.com/acme/shop/commit/"),
        ),
        (
            "https://x-access-token:ghp_secret@github.com/acme/shop",
            Some("https://github.com/acme/shop/commit/"),
        ),
        (
            "git@github.com:acme/shop.git",
            Some("https://github.com/acme/shop/commit/"),
        ),
        (
            "ssh://git@gitlab.com:2222/group/sub/shop.git",
            Some("https://gitlab.com/group/sub/shop/-/commit/"),
        ),
        (
            "https://gitlab.example.org/",
            None, // no project path
        ),
        (
            "https://gitlab.acme.io/team/shop/",
            Some("https://gitlab.acme.io/team/shop/-/commit/"),
        ),
        (
            "https://bitbucket.org/acme/shop.git",
            Some("https://bitbucket.org/acme/shop/commits/"),
        ),
        ("git://127.0.0.1:9418/shop.git", None),
        ("/srv/git/shop", None),
        ("https://github.com/acme/sh\"op", None),
    ];
    for (repo, want) in cases {
        assert_eq!(commit_url_prefix(repo).as_deref(), want, "{repo}");
    }
}

fn passed(statuses: &Statuses, name: &str, repo: Option<&str>) {
    statuses.update(name, |s| {
        s.sync = SyncStatus::Synced;
        s.revision = Some(RevisionInfo {
            sha: "0123456789abcdef0123456789abcdef01234567".into(),
            subject: "Bump web to 1.2".into(),
        });
        s.commit_url_prefix = repo.map(str::to_string);
        s.last_pass = Some(PassInfo {
            finished_at: DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            duration_ms: 42,
            result: PassResult::Succeeded,
            error: None,
            changed: 1,
        });
    });
}

#[test]
fn the_summary_shares_repository_prefixes_and_shortens_shas() {
    let statuses = Statuses::default();
    let prefix = "https://github.com/acme/shop/commit/";
    passed(&statuses, "a", Some(prefix));
    passed(&statuses, "b", Some(prefix));
    statuses.update("c", |_| {});
    let summary = summary(&statuses);
    assert_eq!(summary["repos"], json!([prefix]));
    let columns: Vec<&str> = summary["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(columns, SUMMARY_COLUMNS);
    let at = |row: usize, column: &str| {
        let i = SUMMARY_COLUMNS.iter().position(|c| *c == column).unwrap();
        summary["apps"][row][i].clone()
    };
    assert_eq!(at(0, "name"), "a");
    assert_eq!(at(0, "sha"), "0123456789ab");
    assert_eq!(at(1, "repo"), 0);
    assert_eq!(at(0, "finishedAt"), 1_700_000_000_000i64);
    assert_eq!(at(2, "repo"), -1);
    assert_eq!(at(2, "sha"), Value::Null);
    assert_eq!(at(2, "sync"), "Unknown");
}

/// The next event of the stream, comments skipped.
async fn next_event(
    stream: &mut (impl futures::Stream<Item = Result<Bytes, axum::Error>> + Unpin),
) -> String {
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("an event in time")
            .expect("the stream is open")
            .expect("a chunk");
        let text = String::from_utf8(chunk.to_vec()).unwrap();
        if !text.starts_with(':') {
            return text;
        }
    }
}

#[tokio::test]
async fn the_event_stream_sends_each_change_and_each_removal() {
    let statuses = Statuses::default();
    let response = events(
        statuses.clone(),
        |_| -> futures::future::BoxFuture<'static, bool> { Box::pin(async { true }) },
        None,
    );
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut stream = response.into_body().into_data_stream();
    let hello = next_event(&mut stream).await;
    assert!(hello.starts_with("retry: 1000\nevent: hello\n"), "{hello}");

    passed(&statuses, "web", Some("https://gitlab.com/a/b/-/commit/"));
    let event = next_event(&mut stream).await;
    let data = event
        .strip_prefix("event: app\ndata: ")
        .and_then(|e| e.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("an app event: {event}"));
    let app: Value = serde_json::from_str(data).unwrap();
    assert_eq!(app["name"], "web");
    assert_eq!(app["sync"], "Synced");
    assert_eq!(app["repo"], "https://gitlab.com/a/b/-/commit/");
    assert_eq!(app["durationMs"], 42);

    statuses.remove("web");
    assert_eq!(
        next_event(&mut stream).await,
        "event: removed\ndata: \"web\"\n\n"
    );

    // A stopping service ends the stream, so a graceful stop does not wait on it.
    statuses.close_feed();
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the stream ends in time");
    assert!(end.is_none(), "{end:?}");
}

#[tokio::test]
async fn the_event_stream_carries_its_own_apps_and_what_peers_relay() {
    let statuses = Statuses::default();
    let (relay, relayed) = tokio::sync::mpsc::channel(4);
    let response = events(
        statuses.clone(),
        |app| -> futures::future::BoxFuture<'static, bool> {
            let ours = app != "theirs";
            Box::pin(async move { ours })
        },
        Some(relayed),
    );
    let mut stream = response.into_body().into_data_stream();
    next_event(&mut stream).await;
    // Another replica's app as this one sees it: not sent, its holder says.
    statuses.update("theirs", |_| {});
    let from_peer = "event: app\ndata: {\"name\":\"theirs\",\"sync\":\"Synced\"}\n\n";
    relay
        .send(Bytes::from_static(from_peer.as_bytes()))
        .await
        .expect("the stream reads");
    assert_eq!(next_event(&mut stream).await, from_peer);
    passed(&statuses, "ours", None);
    let event = next_event(&mut stream).await;
    assert!(event.starts_with("event: app\ndata: {"), "{event}");
    assert!(event.contains("\"name\":\"ours\""), "{event}");
    // A relay that stops leaves the replica's own events flowing.
    drop(relay);
    statuses.remove("ours");
    assert_eq!(
        next_event(&mut stream).await,
        "event: removed\ndata: \"ours\"\n\n"
    );
}
