//! The sharded cache and pruning: each replica caches its shards' apps only and says
//! "not known" of the others, a takeover recreates nothing, and a shard handed back
//! and forth prunes each dropped object once.

use super::*;

/// A ConfigMap labelled as tether labels an app's objects (or, with no app, as tether
/// labels objects it attributes to no app).
fn managed_configmap(name: &str, app: Option<&str>) -> Value {
    let mut labels = serde_json::json!({"app.kubernetes.io/managed-by": "tether"});
    if let Some(app) = app {
        labels["tether.dev/app"] = app.into();
    }
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "data": {"key": "v1"},
    })
}

/// Two apps per shard of two: "app-N" names whose shard (of 2) is `shard`.
fn apps_in(shard: u32, count: usize) -> Vec<String> {
    (0..)
        .map(app_name)
        .filter(|app| shard_of(app, 2) == shard)
        .take(count)
        .collect()
}

fn key(name: &str) -> tether_diff::manifest::ObjectKey {
    tether_diff::manifest::ObjectKey {
        group: String::new(),
        kind: "ConfigMap".into(),
        namespace: Some(NAMESPACE.into()),
        name: name.into(),
    }
}

/// #18 (memory per replica): a cache told it holds shard 0 of 2 keeps only shard 0's
/// apps' objects (and objects of no app), and never says "absent" of one it left out:
/// a lookup of it, or a scan of its app, is "not known" (the caller reads the server).
/// A gained shard is not known until its objects are listed, then is; a lost shard's
/// objects are dropped; a left-out object deleted in the cluster is then absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_cache_holds_its_shards_apps_and_says_not_known_of_the_others() {
    use std::sync::Arc;
    use tether_core::cluster::cache::{Cache, ShardMap};
    use tether_core::cluster::{Cluster, LiveObjects as _};

    let sandbox = TestSandbox::start().await;
    sandbox.namespace(NAMESPACE).await;
    let (mine, theirs) = (apps_in(0, 2), apps_in(1, 2));
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    for app in mine.iter().chain(&theirs) {
        let created = sandbox
            .post(&path, &managed_configmap(app, Some(app)))
            .await;
        assert!(created.status.is_success(), "{}", created.text());
    }
    let created = sandbox
        .post(&path, &managed_configmap("no-app", None))
        .await;
    assert!(created.status.is_success(), "{}", created.text());

    let cluster = Arc::new(
        Cluster::connect(Some(&sandbox.kubeconfig), None)
            .await
            .expect("a client for the sandbox"),
    );
    let map = ShardMap { count: 2, shard_of };
    let cache = Cache::sharded(cluster.clone(), CancellationToken::new(), map);
    cache.hold(&BTreeSet::from([0]));
    let kind = cluster
        .resolve(&kube::core::GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .await
        .expect("discovery")
        .expect("ConfigMaps are served");
    assert!(cache.watch("", "ConfigMap", &kind).await, "the cache syncs");

    assert_eq!(
        cache.len(),
        mine.len() + 1,
        "shard 0's apps and the object of no app"
    );
    for app in &mine {
        let live = cache.lookup(&key(app)).expect("known").expect("present");
        assert_eq!(live["metadata"]["name"], app.as_str());
        assert_eq!(cache.owned("", "ConfigMap", app).expect("known").len(), 1);
    }
    assert!(cache.lookup(&key("no-app")).expect("known").is_some());
    for app in &theirs {
        assert_eq!(cache.lookup(&key(app)), None, "{app} left out: not known");
        assert_eq!(
            cache.owned("", "ConfigMap", app),
            None,
            "{app}'s scan: not known"
        );
    }
    assert_eq!(
        cache.lookup(&key("never-made")),
        Some(None),
        "an object no one made is absent"
    );

    // A left-out app's object made now is still not known, and announced to no one.
    let mut events = cache.subscribe();
    let late = format!("{}-late", theirs[0]);
    let created = sandbox
        .post(&path, &managed_configmap(&late, Some(&theirs[0])))
        .await;
    assert!(created.status.is_success(), "{}", created.text());
    let mine_late = format!("{}-late", mine[0]);
    let created = sandbox
        .post(&path, &managed_configmap(&mine_late, Some(&mine[0])))
        .await;
    assert!(created.status.is_success(), "{}", created.text());
    let announced = tokio::time::timeout(POLL_TIMEOUT, events.recv())
        .await
        .expect("an event in time")
        .expect("the event");
    assert_eq!(
        announced.key.name, mine_late,
        "only the held app's object is announced"
    );
    assert_eq!(cache.lookup(&key(&late)), None);

    // Shard 1 arrives: not known until listed, then known with what was made meanwhile.
    // The list is slowed down so that "not yet" is seen, on any machine.
    sandbox.sandbox.set_latency(Duration::from_millis(500));
    cache.hold(&BTreeSet::from([0, 1]));
    assert_eq!(
        cache.owned("", "ConfigMap", &theirs[0]),
        None,
        "not listed yet"
    );
    assert_eq!(cache.lookup(&key(&late)), None, "not listed yet");
    assert!(
        cache.lookup(&key(&mine[0])).expect("known").is_some(),
        "shard 0 still known"
    );
    sandbox.sandbox.set_latency(Duration::ZERO);
    let listed = eventually("shard 1's objects listed", || async {
        cache
            .owned("", "ConfigMap", &theirs[0])
            .filter(|o| o.len() == 2)
    })
    .await;
    let mut names: Vec<&str> = listed
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    names.sort();
    assert_eq!(names, [theirs[0].as_str(), late.as_str()]);
    assert!(cache.lookup(&key(&late)).expect("known").is_some());
    assert_eq!(cache.len(), mine.len() + theirs.len() + 2 + 1);

    // Shard 0 leaves: its objects go, and are not known; shard 1's stay.
    cache.hold(&BTreeSet::from([1]));
    assert_eq!(cache.len(), theirs.len() + 1 + 1);
    assert_eq!(cache.lookup(&key(&mine[0])), None);
    assert_eq!(cache.owned("", "ConfigMap", &mine[0]), None);
    assert!(cache.lookup(&key(&theirs[1])).expect("known").is_some());
    // A left-out object deleted in the cluster is then known to be absent.
    let deleted = sandbox.delete(&format!("{path}/{}", mine[1])).await;
    assert!(deleted.status.is_success(), "{}", deleted.text());
    eventually("the deletion of a left-out object seen", || async {
        (cache.lookup(&key(&mine[1])) == Some(None)).then_some(())
    })
    .await;
    assert_eq!(
        cache.lookup(&key(&mine[0])),
        None,
        "the other stays not known"
    );
}

/// `tether_cache_objects` on a replica's /metrics.
async fn cache_objects(replica: &Replica) -> Option<usize> {
    let text = try_get_text(format!("{}/metrics", replica.url)).await?;
    text.lines()
        .find_map(|l| l.strip_prefix("tether_cache_objects "))
        .and_then(|n| n.trim().parse().ok())
}

/// What each replica should hold, by user: every Namespace and every managed object of
/// no app, and the objects of the apps whose shards it holds (by app or inventory label).
async fn expected_objects(sandbox: &TestSandbox, held: &[String]) -> BTreeMap<String, usize> {
    let namespaces = sandbox.get("/api/v1/namespaces").await.json()["items"]
        .as_array()
        .map_or(0, Vec::len);
    let managed = sandbox
        .get("/api/v1/configmaps?labelSelector=app.kubernetes.io/managed-by%3Dtether")
        .await
        .json();
    let mut expected: BTreeMap<String, usize> =
        held.iter().map(|user| (user.clone(), namespaces)).collect();
    for object in managed["items"].as_array().into_iter().flatten() {
        let labels = &object["metadata"]["labels"];
        let owner = labels["tether.dev/app"]
            .as_str()
            .or_else(|| labels["tether.dev/inventory"].as_str());
        match owner {
            Some(app) => {
                *expected
                    .entry(held[shard_of(app, SHARDS) as usize].clone())
                    .or_default() += 1
            }
            None => expected.values_mut().for_each(|n| *n += 1),
        }
    }
    expected
}

/// Waits until every replica's cache holds exactly its share (see [`expected_objects`]).
async fn wait_for_cache_split(sandbox: &TestSandbox, replicas: &[&Replica]) -> Vec<usize> {
    let deadline = Instant::now() + POLL_TIMEOUT * 2;
    loop {
        let held = wait_for_split(sandbox, replicas).await;
        let expected = expected_objects(sandbox, &held).await;
        let mut counts = Vec::new();
        for replica in replicas {
            counts.push(cache_objects(replica).await);
        }
        let wanted: Vec<Option<usize>> = replicas
            .iter()
            .map(|r| expected.get(&r.user).copied())
            .collect();
        if counts == wanted {
            return counts.into_iter().flatten().collect();
        }
        assert!(
            Instant::now() < deadline,
            "the caches hold {counts:?}, not their shares {wanted:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// #18 (memory per replica): three replicas each cache only their apps' objects (and
/// what every app may need: Namespaces, objects of no app), shown by
/// `tether_cache_objects`. After a kill, the survivors heal the dead replica's drifted
/// apps, whose objects they had left out, by applying them: no object is deleted or
/// created again; then their caches hold the new shares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_replica_caches_its_apps_objects_only_and_a_takeover_recreates_nothing() {
    let (sandbox, origin) = setup().await;
    let mut replicas = Vec::new();
    for user in ["replica-a", "replica-b", "replica-c"] {
        replicas.push(start_replica(&sandbox, &origin.url, user).await);
    }
    let apps: Vec<String> = (0..APPS).map(app_name).collect();
    wait_healed(&sandbox, &apps).await;
    let all: Vec<&Replica> = replicas.iter().collect();
    let counts = wait_for_cache_split(&sandbox, &all).await;
    let held = wait_for_split(&sandbox, &all).await;
    let namespaces = sandbox.get("/api/v1/namespaces").await.json()["items"]
        .as_array()
        .map_or(0, Vec::len);
    // Not vacuous: each replica's apps' objects are there, and only theirs.
    for (replica, count) in replicas.iter().zip(&counts) {
        let mine = apps
            .iter()
            .filter(|app| held[shard_of(app, SHARDS) as usize] == replica.user)
            .count();
        assert!(mine > 0, "{} holds no app", replica.user);
        assert!(
            *count >= namespaces + 2 * mine && *count < namespaces + 2 * APPS,
            "{}: {count} objects for {mine} apps",
            replica.user
        );
    }
    println!("objects cached per replica: {counts:?} ({APPS} apps, {namespaces} namespaces)");

    let victim = replicas[0].user.clone();
    let orphaned = held_by(&apps, &held, &victim);
    let uids = configmap_uids(&sandbox).await;
    sandbox.sandbox.reset_requests();
    replicas[0].kill();
    for app in &orphaned {
        drift(&sandbox, app).await;
    }
    let survivors: Vec<&Replica> = replicas[1..].iter().collect();
    wait_for_split(&sandbox, &survivors).await;
    wait_healed(&sandbox, &orphaned).await;
    // A full pass later (the next leadership change or resync would re-read): give the
    // survivors' re-lists and first passes time to do anything they would.
    wait_for_cache_split(&sandbox, &survivors).await;
    let recreated: Vec<String> = sandbox
        .sandbox
        .writes()
        .into_iter()
        .filter(|w| w.user.starts_with("replica-"))
        .filter(|w| w.path.contains("/configmaps"))
        .filter(|w| w.verb == "delete" || w.verb == "create")
        .map(|w| format!("{} {} by {}", w.verb, w.path, w.user))
        .collect();
    assert!(recreated.is_empty(), "{recreated:?}");
    assert_eq!(configmap_uids(&sandbox).await, uids, "no object made again");
    let written = writers(&sandbox);
    let moved = wait_for_split(&sandbox, &survivors).await;
    for app in &orphaned {
        let by: BTreeSet<&String> = written.get(app).into_iter().flatten().collect();
        let holder = &moved[shard_of(app, SHARDS) as usize];
        assert!(
            by.iter().all(|w| *w == holder) && !by.is_empty(),
            "{app} written by {by:?}"
        );
    }
    for replica in &mut replicas[1..] {
        replica.stop().await;
    }
}

/// Each app's ConfigMaps' uids, by name (in the apps' namespace).
async fn configmap_uids(sandbox: &TestSandbox) -> BTreeMap<String, String> {
    let listed = sandbox
        .get(&format!("/api/v1/namespaces/{NAMESPACE}/configmaps"))
        .await
        .json();
    listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| {
            let name = o["metadata"]["name"].as_str()?;
            let uid = o["metadata"]["uid"].as_str()?;
            Some((name.to_string(), uid.to_string()))
        })
        .collect()
}

/// Deletions by replicas since the last reset, as "path by user".
fn deletions(sandbox: &TestSandbox) -> Vec<(String, String)> {
    sandbox
        .sandbox
        .writes()
        .into_iter()
        .filter(|w| w.user.starts_with("replica-") && w.verb == "delete")
        .map(|w| (w.path, w.user))
        .collect()
}

/// Waits until every app's `-extra` ConfigMap exists (`present`) or is gone.
async fn wait_extras(sandbox: &TestSandbox, apps: &[String], present: bool) {
    let deadline = Instant::now() + POLL_TIMEOUT * 2;
    loop {
        let uids = configmap_uids(sandbox).await;
        if apps
            .iter()
            .all(|app| uids.contains_key(&format!("{app}-extra")) == present)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "extras not {} in time: {uids:?}",
            if present { "made" } else { "pruned" }
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Commits each app's repository with (`with_extra`) or without its `-extra` ConfigMap.
fn commit_extras(repos: &[GitRepo], apps: &[String], with_extra: bool) {
    for (repo, app) in repos.iter().zip(apps) {
        let path = format!("apps/{app}/extra.yaml");
        if with_extra {
            repo.write(&path, &configmap(&format!("{app}-extra"), NAMESPACE, "x"));
        } else {
            repo.remove(&path);
        }
        repo.commit(if with_extra { "extras" } else { "no extras" });
    }
}

/// #18 (memory per replica): shards handed from A to B and back keep prune right. Each
/// object Git drops is deleted exactly once, by its shard's holder at that moment,
/// whether the shard just arrived (its objects not yet in the cache: the server is
/// read) or came back (its objects dropped when it left, listed again); no object Git
/// keeps is deleted or made again (same uid throughout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_handed_back_and_forth_prunes_each_dropped_object_once() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace(NAMESPACE).await;
    let apps: Vec<String> = (0..APPS).map(app_name).collect();
    // A repository per app: a poll of one repository shared by many sources finds
    // it moved only for the first of them (see the report).
    let root = sandbox.dir.path().join("per-app");
    let repos: Vec<GitRepo> = apps
        .iter()
        .map(|app| GitRepo::init(root.join(format!("{app}.git"))))
        .collect();
    for (repo, app) in repos.iter().zip(&apps) {
        repo.write(
            &format!("apps/{app}/cm.yaml"),
            &configmap(app, NAMESPACE, "v1"),
        );
    }
    commit_extras(&repos, &apps, true);
    let daemon = GitDaemon::start(&root);
    let polled = |port| {
        let mut text = config(Some("unused"), port);
        text.truncate(text.find("apps:\n").expect("an apps section") + "apps:\n".len());
        // Polled every second: the minimum interval lowered for the test.
        text.insert_str(0, "sources: {minInterval: 1s}\n");
        for app in &apps {
            let url = daemon.url(&format!("{app}.git"));
            text.push_str(&format!(
                "- name: {app}\n  source: {{repo: \"{url}\", ref: main, path: apps/{app}, interval: 1s}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true, selfHeal: true, prune: true}}\n"
            ));
        }
        text
    };
    let mut a = start_replica_configured(&sandbox, "replica-a", polled).await;
    wait_healed(&sandbox, &apps).await;
    wait_extras(&sandbox, &apps, true).await;
    let uids = configmap_uids(&sandbox).await;
    let kept = |now: &BTreeMap<String, String>| {
        apps.iter()
            .filter(|app| now.get(*app) != uids.get(*app))
            .cloned()
            .collect::<Vec<_>>()
    };

    // B joins: half the shards move to it, then Git drops every extra.
    let mut b = start_replica_configured(&sandbox, "replica-b", polled).await;
    let held = wait_for_split(&sandbox, &[&a, &b]).await;
    sandbox.sandbox.reset_requests();
    commit_extras(&repos, &apps, false);
    wait_extras(&sandbox, &apps, false).await;
    let mut deleted = deletions(&sandbox);
    deleted.sort();
    let mut expected: Vec<(String, String)> = apps
        .iter()
        .map(|app| {
            let path = format!("{}-extra", configmap_path(app));
            (path, held[shard_of(app, SHARDS) as usize].clone())
        })
        .collect();
    expected.sort();
    assert_eq!(deleted, expected, "each extra deleted once, by its holder");
    assert_eq!(kept(&configmap_uids(&sandbox).await), Vec::<String>::new());

    // A's cache drops B's shards' objects (a lost shard's are kept a few lease
    // durations, in case it comes straight back); then B leaves, and they come back to
    // A, which lists them again. The extras come back, then go again.
    wait_for_cache_split(&sandbox, &[&a, &b]).await;
    b.stop().await;
    wait_for_split(&sandbox, &[&a]).await;
    commit_extras(&repos, &apps, true);
    wait_extras(&sandbox, &apps, true).await;
    sandbox.sandbox.reset_requests();
    commit_extras(&repos, &apps, false);
    wait_extras(&sandbox, &apps, false).await;
    let mut deleted = deletions(&sandbox);
    deleted.sort();
    let expected: Vec<(String, String)> = expected
        .into_iter()
        .map(|(path, _)| (path, "replica-a".to_string()))
        .collect();
    assert_eq!(deleted, expected, "each extra deleted once, by A");
    assert_eq!(kept(&configmap_uids(&sandbox).await), Vec::<String>::new());
    wait_healed(&sandbox, &apps).await;
    a.stop().await;
}
