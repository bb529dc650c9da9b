//! Fetches that hang: a black-holed git daemon or HTTP host times out at the deadline
//! and releases the lock, a silent connection ends at the socket read timeout, and a
//! failing source says since when.

use super::*;

fn cache_with_deadline(deadline: Duration) -> (tempfile::TempDir, SourceCache) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = SourceCache::open_with(dir.path().join("cache"), GitTimeouts { deadline })
        .expect("open cache");
    (dir, cache)
}

/// A fetch from the black hole at `url` fails at the deadline with a typed, retryable
/// timeout naming the URL; meanwhile another repository syncs, and a retry of the same
/// one is refused within its own deadline instead of queueing behind the stuck fetch.
async fn black_hole_fails_at_the_deadline(url: String) {
    let origin = Origin::new();
    let daemon = GitDaemon::start(&origin.root);
    let deadline = Duration::from_secs(3);
    let (_d, cache) = cache_with_deadline(deadline);
    let stuck = Source::new(url.clone(), "main", "deploy");

    let started = Instant::now();
    let pending = {
        let (cache, stuck) = (cache.clone(), stuck.clone());
        tokio::spawn(async move { cache.sync(&stuck).await })
    };
    let other = Source::new(daemon.url("app"), "main", "deploy");
    let other_started = Instant::now();
    cache
        .sync(&other)
        .await
        .expect("another repository syncs while one is stuck");
    let other_took = other_started.elapsed();

    let err = pending.await.expect("join").expect_err("a black hole");
    let took = started.elapsed();
    eprintln!(
        "{url}: timed out after {took:?} (deadline {deadline:?}); other repo synced in {other_took:?}"
    );
    assert!(
        matches!(
            err,
            SourceError::Timeout {
                timeout: TimeoutKind::Deadline,
                after,
                ..
            } if after == deadline
        ),
        "{err:?}"
    );
    assert!(took < deadline + SLACK, "{took:?}");
    assert!(err.is_retryable());
    assert_eq!(err.reason(), "RemoteTimeout");
    let shown = err.to_string();
    assert!(
        shown.contains(&url) && shown.contains("deadline of 3s"),
        "{shown}"
    );

    // The retry waits for the stuck fetch only as long as its own deadline.
    let retry_started = Instant::now();
    let err = cache.sync(&stuck).await.expect_err("still a black hole");
    let retry_took = retry_started.elapsed();
    eprintln!("{url}: retry refused after {retry_took:?}");
    assert!(matches!(err, SourceError::Timeout { .. }), "{err:?}");
    assert!(retry_took < deadline + SLACK, "{retry_took:?}");

    // The cheap check is bounded the same way.
    let check_started = Instant::now();
    let err = cache.remote_moved(&stuck).await.expect_err("ls-remote");
    assert!(matches!(err, SourceError::Timeout { .. }), "{err:?}");
    assert!(check_started.elapsed() < deadline + SLACK);

    let status = cache.status(&stuck);
    assert!(!status.ready && status.retryable);
    assert_eq!(status.reason, Some("RemoteTimeout"));
    assert!(status.failing_since.is_some() && status.last_success.is_none());
}

#[tokio::test]
async fn a_black_holed_git_daemon_times_out_and_releases_the_lock() {
    let hole = BlackHole::start();
    black_hole_fails_at_the_deadline(format!("git://127.0.0.1:{}/app", hole.port)).await;
    assert!(hole.connections() > 0, "the fetch did reach the black hole");
}

#[tokio::test]
async fn a_black_holed_http_host_times_out_and_releases_the_lock() {
    let hole = BlackHole::start();
    black_hole_fails_at_the_deadline(format!("http://127.0.0.1:{}/app.git", hole.port)).await;
    assert!(hole.connections() > 0, "the fetch did reach the black hole");
}

/// Without a deadline in the way, libgit2's own read timeout ends the silent
/// connection (so a fetch abandoned at its deadline does not linger either).
#[tokio::test]
async fn the_socket_read_timeout_ends_a_silent_connection() {
    let hole = BlackHole::start();
    let (_d, cache) = cache_with_deadline(DEFAULT_READ_TIMEOUT * 3);
    // Two repositories (one would share a lock and run one after the other).
    let git = Source::new(format!("git://127.0.0.1:{}/a", hole.port), "main", "");
    let http = Source::new(format!("http://127.0.0.1:{}/b", hole.port), "main", "");
    let started = Instant::now();
    let (git_err, http_err) = tokio::join!(
        async {
            let e = cache.sync(&git).await.expect_err("git black hole");
            (e, started.elapsed())
        },
        async {
            let e = cache.sync(&http).await.expect_err("http black hole");
            (e, started.elapsed())
        }
    );
    for (err, took) in [git_err, http_err] {
        eprintln!("read timeout after {took:?}: {err}");
        assert!(
            matches!(
                err,
                SourceError::Timeout {
                    timeout: TimeoutKind::Read,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            took >= DEFAULT_READ_TIMEOUT - Duration::from_secs(1),
            "{took:?}"
        );
        assert!(took < DEFAULT_READ_TIMEOUT + SLACK, "{took:?}");
    }
}

/// The value of `tether_source_last_success_timestamp_seconds` for `source`, if set.
fn last_success_metric(source: &Source) -> Option<f64> {
    let text = tether_core::metrics::METRICS.render();
    let labels = format!(
        "{{url=\"{}\",ref=\"{}\",path=\"{}\"}}",
        tether_core::source::redact(&source.url),
        source.reference,
        source.path
    );
    let prefix = format!("tether_source_last_success_timestamp_seconds{labels} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn a_failing_source_reports_since_when_and_its_last_success() {
    let origin = Origin::new();
    let (_d, cache) = cache();
    let source = Source::new(origin.file_url(), "main", "deploy");
    assert_eq!(cache.status(&source).last_success, None);

    let before = chrono::Utc::now();
    let good = cache.sync(&source).await.expect("first sync");
    let status = cache.status(&source);
    let first_success = status.last_success.expect("a success is recorded");
    assert!(first_success >= before && status.failing_since.is_none());
    let metric = last_success_metric(&source).expect("the gauge is set");
    assert!((metric - first_success.timestamp_millis() as f64 / 1000.0).abs() < 0.01);

    let moved = origin.root.join("moved-away");
    std::fs::rename(&origin.repo, &moved).expect("move away");
    cache.sync(&source).await.expect_err("gone");
    let failing = cache.status(&source);
    let since = failing
        .failing_since
        .expect("failing since the first failure");
    assert!(since >= first_success);
    assert_eq!(failing.last_success, Some(first_success));
    assert_eq!(failing.last_good, Some(good.clone()));
    assert_eq!(failing.reason, Some("RemoteUnreachable"));
    assert!(failing.message.is_some());

    // Later failures keep the first one's time; the gauge keeps the last success.
    cache.sync(&source).await.expect_err("still gone");
    assert_eq!(cache.status(&source).failing_since, Some(since));
    assert_eq!(last_success_metric(&source), Some(metric));

    std::fs::rename(&moved, &origin.repo).expect("move back");
    cache.sync(&source).await.expect("back");
    let healed = cache.status(&source);
    assert!(healed.ready && healed.failing_since.is_none());
    let second_success = healed.last_success.expect("recorded");
    assert!(second_success > first_success);
    assert!(last_success_metric(&source).expect("gauge") > metric);
}
