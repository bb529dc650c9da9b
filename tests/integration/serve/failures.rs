//! `tether serve` when things go wrong: SIGTERM during a slow pass, a failing source
//! (its age, the last revision kept, recovery), a stalled app retried by a manual sync,
//! and a broken kustomize overlay.

use super::*;
use crate::support::condition;

/// Issue #12: Kubernetes sends SIGKILL 30 s after SIGTERM, so a pass stuck on a slow
/// API server must not hold the stop: passes in flight get what `shutdownTimeout`
/// leaves after the reserve for notifications and the Lease, then are aborted, and
/// the process exits 0 within the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_slow_pass_stops_within_the_shutdown_budget() {
    const BUDGET: Duration = Duration::from_secs(4);
    const LATENCY: Duration = Duration::from_secs(2);
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("slow").await;
    let files: Vec<(String, String)> = (0..3)
        .map(|i| {
            (
                format!("slow/cm-{i}.yaml"),
                configmap(&format!("cm-{i}"), "slow", "1"),
            )
        })
        .collect();
    let origin = origin(&sandbox, &borrowed(&files));
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}  shutdownTimeout: 4s\napps:\n- name: slow\n  source: {{repo: \"{}\", ref: main, path: slow, interval: {POLL}}}\n  destination: {{namespace: slow}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let mut serve = Serve::start(&sandbox, "slow", &config, &[]).await;
    serve.wait_synced("slow").await;

    // Every answer now takes LATENCY: the next pass (an inventory read, three dry
    // runs, three applies, an inventory write) needs several times the budget.
    sandbox.sandbox.set_latency(LATENCY);
    for i in 0..3 {
        origin.repo.write(
            &format!("slow/cm-{i}.yaml"),
            &configmap(&format!("cm-{i}"), "slow", "2"),
        );
    }
    origin.repo.commit("slow 2");
    sandbox.sandbox.reset_requests();
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);
    eventually("the pass sends its first dry run", || async {
        (sandbox.sandbox.requests().verb("dryrun:patch") > 0).then_some(())
    })
    .await;

    let sent = std::time::Instant::now();
    serve.signal("TERM");
    let status = tokio::time::timeout(BUDGET + Duration::from_secs(10), serve.child.wait())
        .await
        .expect("tether serve stops after SIGTERM")
        .expect("wait");
    let took = sent.elapsed();
    let log = serve.log();
    assert_eq!(status.code(), Some(0), "{log}");
    // The budget, plus the second the stop may overrun it, plus process exit.
    assert!(
        took < BUDGET + Duration::from_millis(1500),
        "stopped after {took:?}, budget {BUDGET:?}:\n{log}"
    );
    assert!(
        log.contains("pass did not finish in time; stopping it"),
        "a pass was in flight and was cut off:\n{log}"
    );
    // Cut off before it could apply everything.
    sandbox.sandbox.set_latency(Duration::ZERO);
    let mut applied = 0;
    for i in 0..3 {
        if data_key(&sandbox, &format!("cm-{i}"), "slow")
            .await
            .as_deref()
            == Some("2")
        {
            applied += 1;
        }
    }
    assert!(applied < 3, "the whole pass ran: {log}");
}

/// Issue #12: a source that stops answering keeps the app at its last good revision,
/// and says so: `source.failingSince` (also SourceReady's lastTransitionTime and, as
/// `since …`, its message), STALE in `tether status`, and one `sourceStale`
/// notification once it has failed for `staleAfter`. When the Git host is back, the
/// app follows the commit it missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_source_shows_its_age_keeps_the_last_revision_and_recovers() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("stale").await;
    let root = sandbox.dir.path().join("srv");
    let repo = GitRepo::init(root.join("apps.git"));
    repo.write("stale/cm.yaml", &configmap("web", "stale", "1"));
    let first = repo.commit("first");
    let mut daemon = GitDaemon::start(&root);
    let url = daemon.url("apps.git");
    let hooks = Recorder::start().await;
    let server = server_section(sandbox.dir.path());
    // Polled every 100 ms (below the minimum interval, lowered for the test), so
    // failures (and the recovery, within the failures' backoff) are seen without webhooks.
    let config = format!(
        "sources: {{minInterval: 100ms}}\n{server}apps:\n- name: web\n  source: {{repo: \"{url}\", ref: main, path: stale, interval: 100ms, staleAfter: 2s}}\n  destination: {{namespace: stale}}\n  sync: {{automated: true}}\n  notifications:\n  - {{type: webhook, url: \"{}/hook\", events: [sourceStale], minInterval: 0s}}\n",
        hooks.base
    );
    let serve = Serve::start(&sandbox, "stale", &config, &[]).await;
    let synced = serve
        .wait_status("web", "web is Synced", |s| {
            s["sync"] == "Synced" && s["source"]["ready"] == true
        })
        .await;
    assert!(synced["source"]["lastSuccess"].is_string(), "{synced}");
    assert!(synced["source"].get("failingSince").is_none(), "{synced}");

    daemon.stop();
    let failing = serve.wait_source_failed("web").await;
    let source = &failing["source"];
    let since = source["failingSince"]
        .as_str()
        .unwrap_or_else(|| panic!("no failingSince: {failing}"))
        .to_string();
    assert!(source["reason"].is_string(), "{failing}");
    assert!(source["message"].is_string(), "{failing}");
    assert!(source["lastSuccess"].is_string(), "{failing}");
    let condition = condition(&failing, "SourceReady");
    assert_eq!(condition["status"], "False", "{condition}");
    assert_eq!(condition["reason"], source["reason"], "{failing}");
    let since_time = chrono::DateTime::parse_from_rfc3339(&since).expect("an RFC 3339 time");
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(
            condition["lastTransitionTime"].as_str().unwrap_or("")
        )
        .ok(),
        Some(since_time),
        "{condition}"
    );
    let shown = since_time
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert!(
        condition["message"]
            .as_str()
            .is_some_and(|m| m.ends_with(&format!("(since {shown})"))),
        "{condition}"
    );
    // The last good revision is still the one synced.
    assert_eq!(failing["revision"]["sha"], first.as_str(), "{failing}");
    assert_eq!(failing["sync"], "Synced", "{failing}");
    assert_eq!(
        data_key(&sandbox, "web", "stale").await.as_deref(),
        Some("1")
    );

    // Past staleAfter: stale, in the API, in `tether status`, and announced once.
    let stale = serve
        .wait_status("web", "the source is stale", |s| {
            s["source"]["stale"] == true
        })
        .await;
    assert_eq!(stale["source"]["failingSince"], since.as_str(), "{stale}");
    let out = serve.tether_status(&[]).await;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|row| row.contains(" STALE ")),
        "{table}"
    );
    let announced = eventually("the sourceStale notification", || async {
        hooks
            .seen()
            .into_iter()
            .find(|r| r.json()["event"] == "sourceStale")
    })
    .await;
    let body = announced.json();
    assert_eq!(body["app"], "web", "{body}");
    assert_eq!(body["revision"]["sha"], first.as_str(), "{body}");
    assert_eq!(body["reason"], source["reason"], "{body}");
    // Two more failed polls, each followed by a pass, send nothing more.
    let finished = |s: &Value| s["lastPass"]["finishedAt"].as_str().map(str::to_string);
    let mut last = finished(&serve.status("web").await);
    for _ in 0..2 {
        let passed = serve
            .wait_status("web", "another pass while failing", |s| {
                finished(s) != last && s["source"]["ready"] == false
            })
            .await;
        last = finished(&passed);
    }
    assert_eq!(hooks.seen().len(), 1, "{:?}", hooks.seen());

    // The Git host comes back, with a commit made meanwhile.
    repo.write("stale/cm.yaml", &configmap("web", "stale", "2"));
    let second = repo.commit("second");
    daemon.restart();
    let recovered = serve
        .wait_status("web", "the app follows the missed commit", |s| {
            s["source"]["ready"] == true
                && s["revision"]["sha"] == second.as_str()
                && s["sync"] == "Synced"
        })
        .await;
    assert!(
        recovered["source"].get("failingSince").is_none(),
        "{recovered}"
    );
    assert_eq!(recovered["source"]["stale"], false, "{recovered}");
    assert!(
        recovered["conditions"].as_array().is_some_and(|all| all
            .iter()
            .any(|c| c["type"] == "SourceReady" && c["status"] == "True")),
        "{recovered}"
    );
    assert_eq!(
        data_key(&sandbox, "web", "stale").await.as_deref(),
        Some("2")
    );
    assert_eq!(serve.stop().await, Some(0));
}

/// Issue #12: an app stalled on a refusal a retry cannot fix (its namespace is missing)
/// is not retried by passes, but a manual sync retries it: once the cause is fixed in
/// the cluster (no new commit), `POST /api/v1/apps/{name}/sync` brings it to Synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_app_is_retried_by_a_manual_sync_after_the_cluster_is_fixed() {
    let sandbox = TestSandbox::start().await;
    let origin = origin(
        &sandbox,
        &[("later/cm.yaml", &configmap("web", "later", "1"))],
    );
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: web\n  source: {{repo: \"{}\", ref: main, path: later, interval: {POLL}}}\n  destination: {{namespace: later}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "stall", &config, &[]).await;
    let stalled = serve
        .wait_status("web", "web stalls", |s| {
            s["lastPass"]["result"] == "Stalled"
        })
        .await;
    let ready = condition(&stalled, "Ready");
    let stall = condition(&stalled, "Stalled");
    assert_eq!(ready["status"], "False", "{stalled}");
    assert_eq!(ready["reason"], "ValidationFailed", "{stalled}");
    assert_eq!(stall["status"], "True", "{stalled}");
    assert_eq!(stall["reason"], "ValidationFailed", "{stalled}");
    assert!(
        stall["message"]
            .as_str()
            .is_some_and(|m| m.contains("namespace \"later\" neither exists")),
        "{stalled}"
    );
    assert!(stalled.get("nextAttempt").is_none(), "{stalled}");

    // Fixed in the cluster; the revision is the same, so the stall holds until asked.
    sandbox.namespace("later").await;
    assert_eq!(data_key(&sandbox, "web", "later").await, None);
    manual_sync(&serve.url, "web").await;
    let synced = serve
        .wait_status("web", "web leaves Stalled and syncs", |s| {
            s["sync"] == "Synced" && s["lastPass"]["result"] == "Succeeded"
        })
        .await;
    assert_eq!(condition(&synced, "Ready")["status"], "True", "{synced}");
    assert_eq!(condition(&synced, "Stalled")["status"], "False", "{synced}");
    assert_eq!(
        data_key(&sandbox, "web", "later").await.as_deref(),
        Some("1")
    );
    assert_eq!(serve.stop().await, Some(0));
}

/// Issue #14: a Kustomize overlay from Git is served to Synced, rendered once for its
/// commit (a pass with no new commit runs no renderer), and a broken overlay stalls
/// with `ManifestInvalid` naming the path and kustomize's error, applying nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kustomize_overlay_is_served_rendered_once_per_commit_and_a_broken_one_stalls() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("shop").await;
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/apps/kustomize");
    let read = |rel: &str| std::fs::read_to_string(example.join(rel)).expect("example file");
    let files = [
        ("base/kustomization.yaml", read("base/kustomization.yaml")),
        ("base/deployment.yaml", read("base/deployment.yaml")),
        ("base/service.yaml", read("base/service.yaml")),
        (
            "overlays/production/kustomization.yaml",
            read("overlays/production/kustomization.yaml"),
        ),
        (
            "overlays/broken/kustomization.yaml",
            "resources:\n  - ../../base\n  - unnamed.yaml\n".to_string(),
        ),
        // An object without a name: kustomize itself refuses it.
        (
            "overlays/broken/unnamed.yaml",
            "apiVersion: v1\nkind: ConfigMap\n".to_string(),
        ),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let origin = origin(&sandbox, &files);
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: shop\n  source: {{repo: \"{url}\", ref: main, path: overlays/production, interval: {POLL}}}\n  destination: {{namespace: shop}}\n  sync: {{automated: true}}\n- name: broken\n  source: {{repo: \"{url}\", ref: main, path: overlays/broken, interval: {POLL}}}\n  destination: {{namespace: shop}}\n  sync: {{automated: true}}\n",
        url = origin.url
    );
    let serve = Serve::start(&sandbox, "kustomize", &config, &[]).await;
    let synced = serve.wait_synced("shop").await;
    let first_pass = synced["lastPass"]["finishedAt"].clone();
    let rendered = |log: &str| {
        log.lines()
            .filter(|l| l.contains("rendered") && l.contains("overlays/production"))
            .count()
    };
    assert_eq!(rendered(&serve.log()), 1, "{}", serve.log());

    // Another pass at the same commit reads the parsed objects it kept.
    manual_sync(&serve.url, "shop").await;
    serve
        .wait_status("shop", "a second pass ran", |s| {
            s["lastPass"]["finishedAt"] != first_pass && s["lastPass"]["result"] == "Succeeded"
        })
        .await;
    assert_eq!(rendered(&serve.log()), 1, "{}", serve.log());

    let stalled = serve
        .wait_status("broken", "broken stalls", |s| {
            s["lastPass"]["result"] == "Stalled"
        })
        .await;
    let stall = condition(&stalled, "Stalled");
    assert_eq!(stall["reason"], "ManifestInvalid", "{stalled}");
    assert!(
        stall["message"]
            .as_str()
            .is_some_and(|m| m.contains("overlays/broken: kustomize build failed: ")),
        "{stalled}"
    );
    assert_eq!(stalled["sync"], "Unknown", "{stalled}");
    assert_eq!(serve.stop().await, Some(0));
}
