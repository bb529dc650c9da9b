//! When sources fetch: a burst of webhooks coalesces into one sync, polling skips the
//! fetch until the remote moves, concurrent syncs of a repository share a fetch.

use super::*;

async fn wait_until<F: Fn(&tether_core::source::SourceState) -> bool>(
    rx: &mut tokio::sync::watch::Receiver<tether_core::source::SourceState>,
    what: &str,
    f: F,
) -> tether_core::source::SourceState {
    let deadline = Duration::from_secs(20);
    tokio::time::timeout(deadline, rx.wait_for(|s| f(s)))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .expect("watcher alive")
        .clone()
}

#[tokio::test]
async fn a_burst_of_webhooks_coalesces_into_one_sync() {
    let origin = Origin::new();
    let daemon = GitDaemon::start(&origin.root);
    let (_d, cache) = cache();
    let source = Source::new(daemon.url("app"), "main", "deploy");
    let triggers = Triggers::new();
    let trigger = triggers.register(&source);
    let shutdown = CancellationToken::new();
    let config = PollConfig {
        interval: Duration::from_secs(3600),
        jitter: 0.0,
        coalesce: Duration::from_millis(300),
        ..PollConfig::default()
    };
    let (mut rx, handle) = SourceWatcher::spawn(
        cache.clone(),
        source.clone(),
        config,
        trigger,
        shutdown.clone(),
    );
    let first = wait_until(&mut rx, "first sync", |s| s.syncs == 1).await;
    assert!(first.status.ready);

    let sha = origin.commit("merged");
    let router = webhook_router(WebhookState::new(signed_config(), triggers));
    let body = serde_json::to_vec(
        &serde_json::json!({ "repository": daemon.url("app.git"), "ref": "refs/heads/main" }),
    )
    .expect("json");
    for _ in 0..10 {
        let headers = headers_for("/webhooks/generic", "", &body);
        let (status, text) = post(&router, "/webhooks/generic", &headers, body.clone()).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{text}");
    }
    let state = wait_until(&mut rx, "new revision", |s| {
        s.revision.as_ref().is_some_and(|r| r.sha == sha)
    })
    .await;
    assert_eq!(state.syncs, 2, "ten webhooks, one sync");
    // Nothing else is pending.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(rx.borrow().syncs, 2);
    shutdown.cancel();
    handle.await.expect("watcher stops");
}

#[tokio::test]
async fn polling_skips_the_fetch_until_the_remote_moves() {
    let origin = Origin::new();
    let daemon = GitDaemon::start(&origin.root);
    let (_d, cache) = cache();
    let source = Source::new(daemon.url("app"), "main", "deploy");
    let triggers = Triggers::new();
    let shutdown = CancellationToken::new();
    let config = PollConfig {
        interval: Duration::from_millis(100),
        min_interval: Duration::from_millis(100),
        jitter: 0.2,
        coalesce: Duration::ZERO,
    };
    let (mut rx, handle) = SourceWatcher::spawn(
        cache.clone(),
        source.clone(),
        config,
        triggers.register(&source),
        shutdown.clone(),
    );
    wait_until(&mut rx, "first sync", |s| s.syncs == 1).await;
    // Several polls pass; the remote has not moved, so none syncs.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(rx.borrow().syncs, 1, "unchanged remote, no fetch");

    let sha = origin.commit("polled");
    let state = wait_until(&mut rx, "polled revision", |s| {
        s.revision.as_ref().is_some_and(|r| r.sha == sha)
    })
    .await;
    assert_eq!(state.syncs, 2);
    shutdown.cancel();
    handle.await.expect("watcher stops");
}

#[tokio::test]
async fn concurrent_syncs_of_one_repository_share_a_fetch() {
    let origin = Origin::new();
    let daemon = GitDaemon::start(&origin.root);
    let (_d, cache) = cache();
    let a = Source::new(daemon.url("app"), "main", "deploy");
    let b = Source::new(daemon.url("app"), "main", "other");
    let (ra, rb) = tokio::join!(cache.sync(&a), cache.sync(&b));
    let (ra, rb) = (ra.expect("a"), rb.expect("b"));
    assert_eq!(ra.sha, rb.sha);
    let clones = std::fs::read_dir(cache.root())
        .expect("ls")
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(clones, 1);
}
