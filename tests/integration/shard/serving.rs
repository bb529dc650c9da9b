//! What a sharded replica serves and writes: an idle replica that gave its failing
//! apps away, App objects written and reported by their shard's holder only, and the
//! dashboard of any replica showing every app live.

use super::*;
use crate::app_crd::wait_app;

/// The CPU time `pid` has used so far, in seconds (utime + stime of /proc/<pid>/stat).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // The fields after the command's closing parenthesis: state is the first, utime
    // and stime the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // SAFETY: sysconf reads a constant of the system; no memory is shared.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks as f64 / per_second as f64
}

/// Regression: a replica that lost the shard of an app whose last pass failed spun on
/// it, a pass that returned at once (the app is held elsewhere) against a retry
/// deadline it never moved, a core busy with no request made (seen in the scale
/// bench's steady window as 34–190 % of a core on a replica that gave shards away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_gave_away_failing_apps_stays_idle() {
    // Each app's ConfigMap is another app's already: every pass fails, and is retried
    // (that app may let go).
    let (sandbox, origin) = setup().await;
    for i in 0..APPS {
        let name = app_name(i);
        let taken = sandbox
            .post(
                &format!("/api/v1/namespaces/{NAMESPACE}/configmaps"),
                &serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": name,
                        "labels": {
                            "app.kubernetes.io/managed-by": "tether",
                            "tether.dev/app": "someone-else",
                        },
                    },
                }),
            )
            .await;
        assert_eq!(
            taken.status,
            reqwest::StatusCode::CREATED,
            "{}",
            taken.text()
        );
    }
    let config = config(Some(&origin.url), 0);
    let first = crate::serve::Serve::start(&sandbox, "first", &config, &[]).await;
    for i in 0..APPS {
        let failing = first
            .wait_status(&app_name(i), "the pass fails and is retried", |s| {
                s["lastPass"]["result"] == "Failed"
            })
            .await;
        assert!(failing["nextAttempt"].is_string(), "{failing}");
    }
    let second = crate::serve::Serve::start(&sandbox, "second", &config, &[]).await;
    let all: BTreeSet<u32> = (0..SHARDS).collect();
    eventually("the two processes split the shards", || async {
        let a = owned_shards(&first.url).await?;
        let b = owned_shards(&second.url).await?;
        (!b.is_empty() && a.is_disjoint(&b) && a.union(&b).eq(all.iter())).then_some(())
    })
    .await;
    // The retries scheduled before the split come due (1 s doubling: a few seconds at
    // most by now), then the first process is watched while nothing happens.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let window = Duration::from_secs(2);
    let before = cpu_seconds(first.pid());
    tokio::time::sleep(window).await;
    let busy = 100.0 * (cpu_seconds(first.pid()) - before) / window.as_secs_f64();
    println!("the first process after the split: {busy:.1} % of a core");
    assert!(
        busy < 25.0,
        "{busy:.1} % of a core with nothing to do:\n{}",
        first.log()
    );
    assert_eq!(second.stop().await, Some(0));
    assert_eq!(first.stop().await, Some(0));
}

/// App objects are sharded by `<namespace>.<name>`: each App's objects, finalizer and
/// status are written by its shard's holder only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_objects_are_written_and_reported_by_their_shards_holder_only() {
    let (sandbox, origin) = setup_http().await;
    sandbox.namespace("team-a").await;
    sandbox
        .kubectl_apply(tether_controller::config::APP_CRD_YAML)
        .await;
    // An App acts as a ServiceAccount (issue #24): each replica's default is its own,
    // so the App's objects tell which replica wrote them too.
    let mut replicas = Vec::new();
    for user in ["replica-a", "replica-b"] {
        sandbox.trusted_service_account("team-a", user).await;
        let configured = |port| {
            config(None, port).replacen(
                "server:\n",
                &format!("server:\n  defaultServiceAccount: {user}\n"),
                1,
            )
        };
        replicas.push(start_replica_configured(&sandbox, user, configured).await);
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    let held = wait_for_split(&sandbox, &all).await;
    sandbox.sandbox.reset_requests();
    let apps: Vec<String> = (0..APPS / 2).map(app_name).collect();
    for app in &apps {
        let object = format!(
            "apiVersion: tether.dev/v1alpha1\nkind: App\nmetadata:\n  name: {app}\n  namespace: team-a\nspec:\n  source: {{repo: \"{}\", ref: main, path: apps/{app}, interval: 1h}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true}}\n",
            origin.url
        );
        sandbox.kubectl_apply(&object).await;
    }
    for app in &apps {
        wait_app(&sandbox, "Ready", app, "team-a", "20s").await.ok();
    }
    wait_healed(&sandbox, &apps).await;
    // Writes settle: the status of the last pass is written within a status period.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut by_app: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for mut write in sandbox.sandbox.writes() {
        // Its objects as the replica's ServiceAccount, the rest as the replica.
        if let Some(replica) = write.user.strip_prefix("system:serviceaccount:team-a:") {
            write.user = replica.to_string();
        }
        if !write.user.starts_with("replica-") {
            continue;
        }
        // The App itself (finalizer), its status, its ConfigMap and its inventory.
        let app = apps.iter().find(|app| {
            write.path.ends_with(&format!("/apps/{app}"))
                || write.path.ends_with(&format!("/apps/{app}/status"))
                || app_of(&write.path).as_deref() == Some(app.as_str())
                || write
                    .path
                    .ends_with(&format!("/tether-inventory-team-a.{app}"))
        });
        if let Some(app) = app {
            by_app.entry(app.clone()).or_default().insert(write.user);
        }
    }
    for app in &apps {
        let identity = format!("team-a.{app}");
        let holder = &held[shard_of(&identity, SHARDS) as usize];
        let by = by_app.get(app).cloned().unwrap_or_default();
        assert_eq!(
            by,
            BTreeSet::from([holder.clone()]),
            "{identity} written by {by:?}"
        );
        let object: Value = serde_json::from_str(
            &sandbox
                .kubectl(&["get", "tapp", app, "-n", "team-a", "-o", "json"])
                .await
                .ok()
                .stdout,
        )
        .expect("JSON");
        assert_eq!(object["status"]["sync"], "Synced", "{object}");
    }
    // Both replicas hold some of them: the six identities fall in four shards (0, 1, 4
    // and 5), and each replica holds three.
    let writers: BTreeSet<&String> = by_app.values().flatten().collect();
    assert_eq!(writers.len(), 2, "{by_app:?}");
}

/// The next event of a server-sent event stream (comments skipped), within `within`:
/// its type and its data.
async fn next_sse(
    stream: &mut reqwest::Response,
    buffer: &mut String,
    within: Duration,
) -> (String, String) {
    let deadline = Instant::now() + within;
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut kind = String::from("message");
            let mut data = String::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event:") {
                    kind = name.trim().to_string();
                } else if let Some(part) = line.strip_prefix("data:") {
                    data.push_str(part.trim_start());
                }
            }
            if !data.is_empty() {
                return (kind, data);
            }
        }
        let chunk = tokio::time::timeout_at(deadline, stream.chunk())
            .await
            .expect("an event in time")
            .expect("the stream reads")
            .expect("the stream stays open");
        buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
    }
}

/// Reads `stream` until an `app` event for `app`: its data, and when it came.
async fn app_event(
    stream: &mut reqwest::Response,
    buffer: &mut String,
    app: &str,
) -> (Value, Instant) {
    loop {
        let (kind, data) = next_sse(stream, buffer, POLL_TIMEOUT).await;
        if kind != "app" {
            continue;
        }
        let event: Value = serde_json::from_str(&data).expect("JSON");
        if event["name"] == app {
            return (event, Instant::now());
        }
    }
}

/// Issue #18 with the dashboard (#17): the page opened on one replica reads every
/// app's row from the app's holder, and another replica's change reaches its event
/// stream, relayed, within a second of reaching the holder's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_on_any_replica_shows_every_app_live() {
    const TOKEN: &str = "fleet-token";
    let (sandbox, origin) = setup().await;
    let token = sandbox.dir.path().join("api-token");
    std::fs::write(&token, TOKEN).expect("write the token");
    let with_token = |port| {
        config(Some(&origin.url), port).replacen(
            "server:\n",
            &format!("server:\n  apiToken: {{secretFile: {}}}\n", token.display()),
            1,
        )
    };
    let replicas = [
        start_replica_configured(&sandbox, "replica-a", with_token).await,
        start_replica_configured(&sandbox, "replica-b", with_token).await,
    ];
    let all: Vec<&Replica> = replicas.iter().collect();
    let held = wait_for_split(&sandbox, &all).await;
    let apps: Vec<String> = (0..APPS).map(app_name).collect();
    wait_healed(&sandbox, &apps).await;
    let (a, b) = (&replicas[0], &replicas[1]);
    // The page's token goes with every request, and on to the peers.
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().expect("a header"),
    );
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("a client");
    let refused = reqwest::get(format!("{}/api/v1/events", a.url))
        .await
        .expect("the event stream answers");
    assert_eq!(refused.status(), reqwest::StatusCode::UNAUTHORIZED);
    let theirs: Vec<&String> = apps
        .iter()
        .filter(|app| held[shard_of(app, SHARDS) as usize] == b.user)
        .collect();
    assert!(!theirs.is_empty(), "{held:?}");

    // The summary on A: every app, B's as B says (Synced and acting, which A's own
    // idle copy of them is not), and B's summary the same.
    let summary_of = |url: String| {
        let client = client.clone();
        async move {
            eventually("every app Synced and acting in the summary", || async {
                let body: Value = client
                    .get(format!("{url}/api/v1/apps?view=summary"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                let columns: Vec<&str> = body["columns"]
                    .as_array()?
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                let at = |c: &str| columns.iter().position(|x| *x == c);
                let (name, sync, acting) = (at("name")?, at("sync")?, at("acting")?);
                let rows = body["apps"].as_array()?;
                let complete = rows.len() == APPS
                    && rows
                        .iter()
                        .all(|r| r[sync] == "Synced" && r[acting] == true);
                let names: BTreeSet<String> = rows
                    .iter()
                    .filter_map(|r| r[name].as_str().map(str::to_string))
                    .collect();
                complete.then_some(names)
            })
            .await
        }
    };
    let every: BTreeSet<String> = apps.iter().cloned().collect();
    assert_eq!(summary_of(a.url.clone()).await, every);
    assert_eq!(summary_of(b.url.clone()).await, every);

    // A's event stream follows B's: connected (B took the token) once it says
    // `reset` (reload, as what B changed before was not seen).
    let open = |url: String| {
        let client = client.clone();
        async move {
            let stream = client
                .get(format!("{url}/api/v1/events"))
                .send()
                .await
                .expect("the event stream answers");
            assert_eq!(stream.headers()["content-type"], "text/event-stream");
            stream
        }
    };
    let mut on_a = open(a.url.clone()).await;
    let mut on_b = open(b.url.clone()).await;
    let (mut buffer_a, mut buffer_b) = (String::new(), String::new());
    loop {
        let (kind, _) = next_sse(&mut on_a, &mut buffer_a, POLL_TIMEOUT).await;
        if kind == "reset" {
            break;
        }
    }
    let app = theirs[0].as_str();
    let drifted = Instant::now();
    drift(&sandbox, app).await;
    let (at_b, seen_b) = app_event(&mut on_b, &mut buffer_b, app).await;
    let (at_a, seen_a) = app_event(&mut on_a, &mut buffer_a, app).await;
    // What the page shows of the app: the two streams may carry different passes'
    // timings (a pass just before the drift, a heal, a controller's status change
    // in quick succession), but the state A relays is B's.
    let shown = |event: &Value| {
        [
            "name", "sync", "health", "sha", "drifted", "acting", "result",
        ]
        .map(|field| event[field].clone())
    };
    assert_eq!(
        shown(&at_a),
        shown(&at_b),
        "A relays B's state: {at_a} against {at_b}"
    );
    let relayed = seen_a.saturating_duration_since(seen_b);
    println!(
        "a change on B reached B's event stream {:?} and A's {:?} after the drift (relay {relayed:?})",
        seen_b - drifted,
        seen_a - drifted
    );
    assert_eq!(at_a["acting"], true, "{at_a}");
    assert!(
        relayed < Duration::from_secs(1),
        "relayed after {relayed:?}"
    );
    assert!(
        seen_a - drifted < Duration::from_secs(1) + SLACK,
        "A saw it {:?} after the drift",
        seen_a - drifted
    );
}
