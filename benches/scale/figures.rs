//! Figures: synced apps, requests by verb, self-heal trials, rows and results.

use super::*;

/// The RSS rows of one process: the total (a hard target in a release build) and its
/// anonymous part (a hard target in any build), when `at_target`.
pub(super) fn memory_rows(
    what: &str,
    m: &Memory,
    at_target: bool,
) -> Vec<(String, String, String, bool)> {
    let release = !cfg!(debug_assertions);
    let target = |applies: bool, mib: f64| {
        if applies {
            format!("< {mib:.0} MiB")
        } else {
            String::new()
        }
    };
    vec![
        (
            format!("RSS, {what}"),
            format!("{:.1} MiB", m.rss),
            target(at_target && release, RSS_10K_MIB),
            !(at_target && release) || m.rss < RSS_10K_MIB,
        ),
        (
            format!("  of which anonymous ({:.0} threads)", m.threads),
            format!("{:.1} MiB", m.anon),
            target(at_target, ANON_10K_MIB),
            !at_target || m.anon < ANON_10K_MIB,
        ),
    ]
}

/// Apps any replica reports Synced: with shards, each replica's status API answers
/// for every app, and a replica that does not own an app may lag its owner.
pub(super) async fn synced_apps(http: &reqwest::Client, replicas: &[Replica]) -> usize {
    let mut synced = std::collections::HashSet::new();
    for replica in replicas {
        // The dashboard's compact list: the full view serializes every object's state
        // of every app, and a bench polling it would measure its own load.
        let listed = http
            .get(format!("{}/api/v1/apps?view=summary", replica.url))
            .send()
            .await;
        let Ok(answer) = listed else {
            continue;
        };
        let listed: Value = answer.json().await.unwrap_or_default();
        let column = |name: &str| {
            listed["columns"]
                .as_array()
                .and_then(|c| c.iter().position(|c| c == name))
        };
        let (Some(name), Some(sync)) = (column("name"), column("sync")) else {
            continue;
        };
        for row in listed["apps"].as_array().into_iter().flatten() {
            if row[sync] == "Synced"
                && let Some(app) = row[name].as_str()
            {
                synced.insert(app.to_string());
            }
        }
    }
    synced.len()
}

/// Waits until every app is Synced; panics with the replicas' logs if one exits or
/// the wait outlasts `timeout`.
pub(super) async fn until_synced(
    http: &reqwest::Client,
    replicas: &mut [Replica],
    apps: usize,
    started: Instant,
) {
    loop {
        let synced = synced_apps(http, replicas).await;
        if synced == apps {
            return;
        }
        if started.elapsed() > FIRST_SYNC_TIMEOUT || replicas.iter_mut().any(Replica::exited) {
            let logs: Vec<String> = replicas
                .iter()
                .map(|r| std::fs::read_to_string(&r.log).unwrap_or_default())
                .collect();
            panic!(
                "only {synced} of {apps} apps synced:\n{}",
                logs.join("\n---\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A sandbox with one namespace per app, its kubeconfig and a client.
pub(super) async fn sandbox(dir: &Path, apps: usize) -> (Sandbox, PathBuf, kube::Client) {
    let options = SandboxOptions {
        simulate_controllers: Some(DEFAULT_CONTROLLER_DELAY),
        ..SandboxOptions::default()
    };
    sandbox_with_namespaces(options, dir, (0..apps).map(namespace)).await
}

/// Requests by verb, watches apart from the rest.
/// Steady-state requests by verb, and three sums: watches; Lease reads and renewals
/// (the replicas' coordination when sharded: each renews its member Lease and the
/// shards it holds every retry period, as client-go's leader election does); and
/// everything else, which is reconciliation and must be 0 in steady state.
pub(super) fn by_verb(requests: &RequestCounts) -> (BTreeMap<String, u64>, u64, u64, u64) {
    let mut verbs: BTreeMap<String, u64> = BTreeMap::new();
    let mut leases = 0;
    for ((verb, resource), count) in &requests.0 {
        *verbs.entry(verb.clone()).or_default() += count;
        if is_lease(resource) && verb != "watch" {
            leases += count;
        }
    }
    let watches = verbs.get("watch").copied().unwrap_or(0);
    let others = verbs.values().sum::<u64>() - watches - leases;
    (verbs, watches, leases, others)
}

pub(super) fn is_lease(resource: &str) -> bool {
    resource == "coordination.k8s.io/leases"
}

/// Writes other than Lease renewals.
pub(super) fn object_writes(requests: &RequestCounts) -> u64 {
    requests
        .0
        .iter()
        .filter(|((verb, resource), _)| WRITE_VERBS.contains(&verb.as_str()) && !is_lease(resource))
        .map(|(_, count)| count)
        .sum()
}

pub(super) type Events = futures::stream::BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>>;

/// A watch on one ConfigMap from the version stored now, so the correction's event is
/// seen as the sandbox commits it; and the object's uid. The version is the list's,
/// not the object's: at 100,000 objects an object's own version may lie beyond the
/// watch history the server keeps, and the watch would end at once with 410 Gone.
pub(super) async fn watch_configmap(api: &Api<ConfigMap>, name: &str) -> (Events, String) {
    let field = format!("metadata.name={name}");
    let listed = api
        .list(&ListParams::default().fields(&field))
        .await
        .expect("the list answers");
    let version = listed
        .metadata
        .resource_version
        .clone()
        .expect("a list has a resourceVersion");
    let uid = listed
        .items
        .first()
        .and_then(|cm| cm.metadata.uid.clone())
        .expect("the object exists, with a uid");
    let events = api
        .watch(&WatchParams::default().fields(&field), &version)
        .await
        .expect("the watch opens")
        .boxed();
    (events, uid)
}

/// Self-heal over `trials`, spread over the apps: even trials edit a ConfigMap, odd
/// ones delete one; each is timed from before the bench's write to the sandbox's watch
/// event that restores Git's value (for a delete, on a new object).
pub(super) async fn self_heal(
    client: &kube::Client,
    apps: usize,
    configmaps: usize,
    trials: usize,
) -> Vec<f64> {
    let mut samples = Vec::new();
    for trial in 0..trials {
        // A stride prime to the app count visits apps all over the fleet.
        let app = (trial * 37 + 1) % apps;
        let i = 1 + trial % (configmaps - 1);
        let (name, expected) = (configmap_name(i), configmap_value(i));
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace(app));
        let (mut events, old_uid) = watch_configmap(&api, &name).await;
        let delete = trial % 2 == 1;
        let began = Instant::now();
        if delete {
            api.delete(&name, &DeleteParams::default())
                .await
                .expect("delete");
        } else {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"key": "tampered"}})),
            )
            .await
            .expect("edit");
        }
        loop {
            let event = tokio::time::timeout(TRIAL_TIMEOUT, events.try_next())
                .await
                .unwrap_or_else(|_| panic!("timed out healing {name} of app {app}"))
                .expect("the watch delivers")
                .unwrap_or_else(|| panic!("the watch ended before {name} of app {app} healed"));
            if let WatchEvent::Error(err) = &event {
                panic!("the watch on {name} of app {app} failed: {err:?}");
            }
            if let WatchEvent::Added(cm) | WatchEvent::Modified(cm) = &event {
                let value = cm.data.as_ref().and_then(|d| d.get("key"));
                let new = !delete || cm.metadata.uid.as_deref() != Some(old_uid.as_str());
                if new && value == Some(&expected) {
                    break;
                }
            }
        }
        samples.push(ms(began.elapsed()));
        // The pass the correction itself wakes finishes before the next trial.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    samples
}

pub(super) fn write_results(name: &str, results: &Value) {
    tether_testkit::figures::write_results(
        env!("CARGO_MANIFEST_DIR"),
        &format!("{name}.json"),
        results,
    );
}

/// Prints the table; whether every row passed.
pub(super) fn print_rows(rows: &[(String, String, String, bool)]) -> bool {
    println!("{:<48} {:>14} {:>12}  result", "figure", "value", "target");
    for (figure, value, target, pass) in rows {
        println!("{figure:<48} {value:>14} {target:>12}  {}", verdict(*pass));
    }
    rows.iter().all(|(_, _, _, pass)| *pass)
}

pub(super) fn rows_json(rows: &[(String, String, String, bool)]) -> Vec<Value> {
    rows.iter()
        .map(|(figure, value, target, pass)| {
            json!({"figure": figure, "value": value, "target": target, "pass": pass})
        })
        .collect()
}
