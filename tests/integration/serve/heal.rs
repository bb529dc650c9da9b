//! Heals under `tether serve`: a storm of live changes heals a bounded number of apps
//! at once, a scaled Deployment is healed with one apply and no dry run, a refused heal
//! writes nothing, a heal does not wait behind another app's slow pass, and a resync
//! that finds nothing makes no request.

use super::*;

/// The Deployment `web` (2 replicas) in `namespace`, as the heal tests keep it in Git.
/// Heals skip the pass queue, but not without bound: an emptied namespace wakes every
/// app at once, and at most `concurrency × 4` heals (here 4) write at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_live_changes_heals_a_bounded_number_of_apps_at_once() {
    const APPS: usize = 12;
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("storm").await;
    let files: Vec<(String, String)> = (0..APPS)
        .map(|i| {
            let name = format!("storm-{i}");
            (format!("{name}/cm.yaml"), configmap(&name, "storm", "1"))
        })
        .collect();
    let origin = origin(&sandbox, &borrowed(&files));
    let server = server_section(sandbox.dir.path());
    let apps: String = (0..APPS)
        .map(|i| {
            format!(
                "- name: storm-{i}\n  source: {{repo: \"{}\", ref: main, path: storm-{i}, interval: {POLL}}}\n  destination: {{namespace: storm}}\n  sync: {{automated: true, selfHeal: true}}\n",
                origin.url
            )
        })
        .collect();
    let config = format!("{server}concurrency: 1\napps:\n{apps}");
    let serve = Serve::start(&sandbox, "storm", &config, &[]).await;
    for i in 0..APPS {
        let app = format!("storm-{i}");
        serve.wait_synced(&app).await;
    }

    // Every write takes 200 ms, so unbounded heals would all be in flight together.
    sandbox.sandbox.set_latency(Duration::from_millis(200));
    sandbox.sandbox.reset_requests();
    let emptied = sandbox
        .delete("/api/v1/namespaces/storm/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dtether")
        .await;
    assert!(emptied.status.is_success(), "{:?}", emptied.status);
    // The deletecollection's watch events wake the heals a moment before its own answer
    // leaves, so the peak starts again once it has; the heals are all still in their
    // 200 ms. Counted in-process, so this test's own reads do not add to the peak.
    sandbox.sandbox.reset_peak_in_flight();
    eventually("every app has written its heal", || async {
        let heals = sandbox
            .sandbox
            .writes()
            .iter()
            .filter(|w| w.verb == "patch" && w.path.contains("/configmaps/storm-"))
            .count();
        (heals == APPS).then_some(())
    })
    .await;
    let requests = sandbox.sandbox.requests();
    let log = serve.log();
    assert_eq!(
        requests.verb("dryrun:patch"),
        0,
        "healed, not passed: {requests:?}\n{log}"
    );
    let peak = sandbox.sandbox.peak_in_flight();
    assert!(peak <= 4, "{peak} requests at once: {requests:?}\n{log}");
    assert!(
        peak >= 2,
        "the heals ran one by one ({peak}): {requests:?}\n{log}"
    );
    sandbox.sandbox.set_latency(Duration::ZERO);
    for i in 0..APPS {
        let name = format!("storm-{i}");
        assert_eq!(
            data_key(&sandbox, &name, "storm").await.as_deref(),
            Some("1"),
            "{name}"
        );
    }
    sandbox.sandbox.set_latency(Duration::ZERO);
    assert_eq!(serve.stop().await, Some(0));
}

fn web_deployment(namespace: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {namespace}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n"
    )
}

/// Issue #18: a heal of a revision already applied in full costs one request, the
/// apply: the server validated that manifest when the revision was applied, so no dry
/// run precedes it, and the pass the heal's own write wakes writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaled_deployment_is_healed_with_one_apply_and_no_dry_run() {
    let (sandbox, origin) =
        with_origin("heal", &[("heal/web.yaml", &web_deployment("heal"))]).await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: heal\n  source: {{repo: \"{}\", ref: main, path: heal, interval: {POLL}}}\n  destination: {{namespace: heal}}\n  sync: {{automated: true, selfHeal: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "heal", &config, &[]).await;
    serve.wait_synced("heal").await;
    let replicas = || async {
        let out = sandbox
            .kubectl(&[
                "get",
                "deployment",
                "web",
                "-n",
                "heal",
                "-o",
                "jsonpath={.spec.replicas}",
            ])
            .await;
        out.stdout.trim().to_string()
    };
    // The pass the first apply woke has run: nothing is pending.
    tokio::time::sleep(Duration::from_millis(500)).await;

    sandbox.sandbox.reset_requests();
    let scaled = sandbox
        .kubectl(&["scale", "deployment", "web", "-n", "heal", "--replicas=5"])
        .await;
    assert_eq!(scaled.code, 0, "{}", scaled.stderr);
    eventually("the scale is healed", || async {
        (replicas().await == "2").then_some(())
    })
    .await;
    // The pass the heal's own write wakes finds the app in sync.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requests = sandbox.sandbox.requests();
    let log = serve.log();
    assert_eq!(requests.verb("dryrun:patch"), 0, "{requests:?}\n{log}");
    // kubectl's scale, and the heal's apply; plus one apply for each the Deployment
    // controller's status write made conflict (the pass reads again and applies again).
    let conflicts = log.matches("the object has been modified").count() as u64;
    assert_eq!(
        requests.writes(),
        2 + conflicts,
        "one apply heals: {requests:?}\n{log}"
    );
    assert!(
        requests.get("patch", "apps/deployments") >= 1,
        "{requests:?}"
    );
    let status = serve.wait_synced("heal").await;
    assert_eq!(status["lastPass"]["result"], "Succeeded", "{status}");

    // A deleted one is recreated the same way: one apply, no dry run.
    let uid = || async {
        sandbox
            .kubectl(&[
                "get",
                "deployment",
                "web",
                "-n",
                "heal",
                "-o",
                "jsonpath={.metadata.uid}",
            ])
            .await
            .stdout
            .trim()
            .to_string()
    };
    let deleted = uid().await;
    sandbox.sandbox.reset_requests();
    let gone = sandbox
        .kubectl(&["delete", "deployment", "web", "-n", "heal", "--wait=false"])
        .await;
    assert_eq!(gone.code, 0, "{}", gone.stderr);
    eventually("the deleted Deployment is back", || async {
        let now = uid().await;
        (!now.is_empty() && now != deleted).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requests = sandbox.sandbox.requests();
    let log = serve.log();
    assert_eq!(requests.verb("dryrun:patch"), 0, "{requests:?}\n{log}");
    // kubectl's delete, and the heal's apply.
    assert_eq!(requests.writes(), 2, "{requests:?}\n{log}");
    assert_eq!(
        requests.get("delete", "apps/deployments"),
        1,
        "{requests:?}"
    );
}

/// Issue #18, the failure path of a heal without a dry run: without `force`, a field
/// another manager took (a `kubectl scale`) makes the apply a conflict. The heal is
/// reported failed and retried, and nothing is written meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heal_refused_as_a_conflict_is_reported_failed_and_writes_nothing() {
    let (sandbox, origin) =
        with_origin("held", &[("held/web.yaml", &web_deployment("held"))]).await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: held\n  source: {{repo: \"{}\", ref: main, path: held, interval: {POLL}}}\n  destination: {{namespace: held}}\n  sync: {{automated: true, selfHeal: true, force: false}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "held", &config, &[]).await;
    serve.wait_synced("held").await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    sandbox.sandbox.reset_requests();
    let scaled = sandbox
        .kubectl(&["scale", "deployment", "web", "-n", "held", "--replicas=5"])
        .await;
    assert_eq!(scaled.code, 0, "{}", scaled.stderr);
    let status = serve
        .wait_status("held", "the heal fails", |s| {
            s["lastPass"]["result"] == "Failed"
        })
        .await;
    let error = status["lastPass"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("conflict"), "{status}");
    let replicas = sandbox
        .kubectl(&[
            "get",
            "deployment",
            "web",
            "-n",
            "held",
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .await;
    assert_eq!(replicas.stdout.trim(), "5");
    let requests = sandbox.sandbox.requests();
    // kubectl's scale only; the refused apply changed nothing.
    assert_eq!(requests.verb("dryrun:patch"), 0, "{requests:?}");
    assert!(
        requests.get("patch", "apps/deployments") <= 2,
        "{requests:?}"
    );
}

/// Issue #18: a heal starts on the watch event, without waiting behind other apps'
/// passes. With one pass at a time (`concurrency: 1`), another app's pass is stuck
/// in a slow render (a `kubectl` on PATH that sleeps before `kubectl kustomize`);
/// an edit of this app's ConfigMap is healed while that pass still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heal_does_not_wait_behind_a_slow_pass_of_another_app() {
    const RENDER_DELAY: Duration = Duration::from_secs(5);
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("quick").await;
    sandbox.namespace("slow").await;
    let dir = sandbox.dir.path();
    let origin = origin(
        &sandbox,
        &[("quick/cm.yaml", &configmap("cm", "quick", "git"))],
    );
    // The slow app has a repository of its own: its new commit moves it alone.
    let slow = GitRepo::init(dir.join("srv/slow.git"));
    slow.write("app/kustomization.yaml", "resources:\n  - cm.yaml\n");
    slow.write("app/cm.yaml", &configmap("cm", "slow", "1"));
    slow.commit("first");
    let slow_url = origin.url.replace("apps.git", "slow.git");

    let real = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl on PATH");
    let bin = dir.join("slow-bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let (marker, rendering) = (dir.join("render-slowly"), dir.join("rendering"));
    let script = bin.join("kubectl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = kustomize ] && [ -e '{marker}' ]; then\n  touch '{rendering}'\n  sleep {delay}\n  rm -f '{rendering}'\nfi\nexec '{real}' \"$@\"\n",
            marker = marker.display(),
            rendering = rendering.display(),
            delay = RENDER_DELAY.as_secs(),
            real = real.display(),
        ),
    )
    .expect("write the kubectl wrapper");
    let mut mode = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&script, mode).expect("chmod");
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");

    let server = server_section(dir);
    let config = format!(
        "{server}concurrency: 1\napps:\n- name: quick\n  source: {{repo: \"{}\", ref: main, path: quick, interval: {POLL}}}\n  destination: {{namespace: quick}}\n  sync: {{automated: true, selfHeal: true}}\n- name: slow\n  source: {{repo: \"{slow_url}\", ref: main, path: app, interval: {POLL}}}\n  destination: {{namespace: slow}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let path = path.to_string_lossy().into_owned();
    let serve = Serve::start_with_env(&sandbox, "wait", &config, &[], &[("PATH", path)]).await;
    for app in ["quick", "slow"] {
        serve.wait_synced(app).await;
    }

    // The slow app's next commit renders slowly, holding the only pass permit.
    std::fs::write(&marker, "").expect("marker");
    slow.write("app/cm.yaml", &configmap("cm", "slow", "2"));
    slow.commit("second");
    assert_eq!(serve.push(&slow_url).await, reqwest::StatusCode::ACCEPTED);
    eventually("the slow app's pass is rendering", || async {
        rendering.exists().then_some(())
    })
    .await;

    let began = std::time::Instant::now();
    sandbox
        .kubectl_merge_patch("configmap", "cm", "quick", r#"{"data":{"key":"edited"}}"#)
        .await;
    eventually("the edit is healed", || async {
        (data_key(&sandbox, "cm", "quick").await.as_deref() == Some("git")).then_some(())
    })
    .await;
    let took = began.elapsed();
    let log = serve.log();
    assert!(
        rendering.exists(),
        "healed in {took:?}, but only after the slow pass ended:\n{log}"
    );
    assert!(took < RENDER_DELAY / 2, "healed in {took:?}:\n{log}");

    // The slow pass itself completes, as it would have.
    std::fs::remove_file(&marker).expect("remove marker");
    eventually("the slow app's second commit is applied", || async {
        (data_key(&sandbox, "cm", "slow").await.as_deref() == Some("2")).then_some(())
    })
    .await;
    let status = serve.status("quick").await;
    assert_eq!(status["sync"], "Synced", "{status}");
}

/// Issue #18: a resync (a full pass with nothing changed) reads everything it needs
/// from the watch cache, the inventory as last written and the manifests kept for
/// the commit: over several resync intervals the app passes again and again, and
/// the API server sees no request but the open watches, and no write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_makes_no_request_and_no_write() {
    let (sandbox, origin) = with_origin(
        "still",
        &[
            ("still/cm.yaml", &configmap("cm", "still", "git")),
            ("still/web.yaml", &web_deployment("still")),
        ],
    )
    .await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}resyncInterval: 1s\napps:\n- name: still\n  source: {{repo: \"{}\", ref: main, path: still, interval: {POLL}}}\n  destination: {{namespace: still}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "still", &config, &[]).await;
    serve.wait_healthy("still").await;
    // The Deployment controller's status writes settle.
    tokio::time::sleep(Duration::from_secs(1)).await;

    sandbox.sandbox.reset_requests();
    let before = serve.status("still").await["history"]
        .as_array()
        .map_or(0, Vec::len);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let status = serve.status("still").await;
    let after = status["history"].as_array().map_or(0, Vec::len);
    let requests = sandbox.sandbox.requests();
    let log = serve.log();
    assert!(
        after >= before + 2,
        "resyncs ran: {before} → {after}\n{log}"
    );
    assert_eq!(status["sync"], "Synced", "{status}");
    assert_eq!(status["lastPass"]["result"], "Succeeded", "{status}");
    assert_eq!(requests.writes(), 0, "{requests:?}\n{log}");
    assert_eq!(
        requests.total(),
        requests.verb("watch"),
        "only watches: {requests:?}\n{log}"
    );
}
