//! Shards (`shards: N`) on the sandbox, with replicas of `tether serve` in this process,
//! each on a Tokio runtime of its own (so that killing one drops every task it has, as a
//! crash would) and impersonating a user of its own (so that the sandbox's write record
//! tells who wrote what): the apps split by the replicas' fair shares, each app written
//! by its shard's holder only, the status API of any replica answering for every app,
//! a killed replica's apps healed by another after takeover, and a replica joining
//! while apps drift taking its share without any app written by two replicas at once.
//! Then the binary itself: two processes exporting the shards they hold
//! (`tether_shard_owned`) and handing them over on SIGTERM.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use tether_controller::reconcile::shard::{
    MEMBER_GC_LEASES, fair_shares, member_lease_name, shard_of,
};
use tether_controller::server::service::{ServeError, ServeOptions, serve};
use tether_testkit::free_port;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::serve::{
    borrowed, configmap, get_json, manual_sync, origin, origin_http, try_get_json, try_get_text,
};
use crate::support::{GitDaemon, GitRepo, POLL_TIMEOUT, TestSandbox, eventually};

mod cache;
mod serving;
mod sources;

/// The timings the issue asks for: lease 2 s, renew 1.5 s, retry 0.3 s.
const LEASE_DURATION: Duration = Duration::from_secs(2);
const RETRY_PERIOD: Duration = Duration::from_millis(300);

/// Scheduling slack on a shared two-core machine, for bounds that are not safety
/// properties.
const SLACK: Duration = Duration::from_millis(1_500);

const SHARDS: u32 = 6;
const APPS: usize = 12;
const NAMESPACE: &str = "sharded";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/tether-system/leases";

fn app_name(i: usize) -> String {
    format!("app-{i}")
}

/// One replica: its runtime, its stop signal and where its status API listens.
struct Replica {
    user: String,
    url: String,
    stop: CancellationToken,
    runtime: Option<tokio::runtime::Runtime>,
    served: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
}

impl Replica {
    /// Kills it: every task of its runtime is dropped where it stands, the Leases left
    /// to expire.
    fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    /// Stops it as SIGTERM would: shards released, member Lease deleted.
    async fn stop(&mut self) {
        self.stop.cancel();
        if let Some(served) = self.served.take() {
            let _ = tokio::time::timeout(POLL_TIMEOUT, served).await;
        }
        self.kill();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The replicas' shared peer token (`server.peerToken`, required with shards): one
/// file for every test, written once.
fn peer_token_file() -> &'static str {
    static FILE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join(format!("shard-peer-token-{}", std::process::id()));
        std::fs::write(&path, "shard-tests-peer-token").expect("write the peer token");
        path.display().to_string()
    })
}

/// The replicas' configuration: the file's apps when `repo` is given, none otherwise
/// (App objects only).
fn config(repo: Option<&str>, port: u16) -> String {
    let peer = peer_token_file();
    let mut text = format!(
        "server:\n  listen: 127.0.0.1:{port}\n  peerToken: {{secretFile: {peer}}}\nshards: {SHARDS}\nleaderElection: {{leaseDuration: 2s, renewDeadline: 1500ms, retryPeriod: 300ms}}\napps:\n"
    );
    let Some(repo) = repo else {
        return text.replace("apps:\n", "apps: []\n");
    };
    for i in 0..APPS {
        let name = app_name(i);
        text.push_str(&format!(
            "- name: {name}\n  source: {{repo: \"{repo}\", ref: main, path: apps/{name}, interval: 1h}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true, selfHeal: true}}\n"
        ));
    }
    text
}

async fn start_replica(sandbox: &TestSandbox, repo: &str, user: &str) -> Replica {
    start_replica_with(sandbox, Some(repo), user).await
}

async fn start_replica_with(sandbox: &TestSandbox, repo: Option<&str>, user: &str) -> Replica {
    start_replica_configured(sandbox, user, |port| config(repo, port)).await
}

/// A replica whose configuration is `config(port)`, given the port it listens on.
async fn start_replica_configured(
    sandbox: &TestSandbox,
    user: &str,
    config: impl FnOnce(u16) -> String,
) -> Replica {
    let port = free_port();
    let dir = sandbox.dir.path();
    let path = dir.join(format!("{user}.yaml"));
    std::fs::write(&path, config(port)).expect("write the configuration");
    let options = ServeOptions {
        config: path,
        kubeconfig: Some(sandbox.kubeconfig_as(user)),
        context: None,
        cache_dir: Some(dir.join(format!("{user}-cache"))),
        leader_elect: false,
        default_service_account: None,
    };
    // Two threads, as a pod with a CPU or more has: on one, a long first pass (schemas
    // parsed in a debug build) can starve the electors past their renew deadline.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime for the replica");
    let stop = CancellationToken::new();
    let served = runtime.spawn(serve(options, stop.clone()));
    let url = format!("http://127.0.0.1:{port}");
    let replica = Replica {
        user: user.to_string(),
        url: url.clone(),
        stop,
        runtime: Some(runtime),
        served: Some(served),
    };
    eventually("the replica answers /healthz", || async {
        reqwest::get(format!("{url}/healthz"))
            .await
            .ok()
            .filter(|r| r.status().is_success())
    })
    .await;
    replica
}

/// Each shard's holder, as the replica's user, from the Leases: a member Lease names
/// the status URL of its holder, which names the replica.
async fn holders(sandbox: &TestSandbox, replicas: &[&Replica]) -> Vec<Option<String>> {
    let leases = sandbox.get(LEASES).await.json();
    let items = leases["items"].as_array().cloned().unwrap_or_default();
    let mut by_identity = BTreeMap::new();
    for lease in &items {
        let url = lease["metadata"]["annotations"]["tether.dev/status-url"].as_str();
        let identity = lease["spec"]["holderIdentity"].as_str();
        if let (Some(url), Some(identity)) = (url, identity)
            && let Some(replica) = replicas.iter().find(|r| r.url == url)
        {
            by_identity.insert(identity.to_string(), replica.user.clone());
        }
    }
    (0..SHARDS)
        .map(|shard| {
            let name = format!("tether-shard-{shard}");
            let lease = items
                .iter()
                .find(|l| l["metadata"]["name"] == name.as_str())?;
            let identity = lease["spec"]["holderIdentity"].as_str()?;
            by_identity.get(identity).cloned()
        })
        .collect()
}

/// The identity a replica holds Leases as (from its member Lease's status URL).
async fn identity_of(sandbox: &TestSandbox, replica: &Replica) -> String {
    let leases = sandbox.get(LEASES).await.json();
    leases["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| l["metadata"]["annotations"]["tether.dev/status-url"] == replica.url.as_str())
        .and_then(|l| l["spec"]["holderIdentity"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{} has no member Lease", replica.user))
}

/// The apps among `apps` whose shard `user` holds (`held`: the holder of each shard).
fn held_by(apps: &[String], held: &[String], user: &str) -> Vec<String> {
    apps.iter()
        .filter(|app| held[shard_of(app, SHARDS) as usize] == user)
        .cloned()
        .collect()
}

/// Waits until the shards are held by exactly `replicas`, each with its fair share.
async fn wait_for_split(sandbox: &TestSandbox, replicas: &[&Replica]) -> Vec<String> {
    let users: Vec<String> = replicas.iter().map(|r| r.user.clone()).collect();
    let shares: BTreeSet<u32> = fair_shares(SHARDS, &users).into_values().collect();
    let deadline = Instant::now() + POLL_TIMEOUT * 2;
    loop {
        let held = holders(sandbox, replicas).await;
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        for holder in held.iter().flatten() {
            *counts.entry(holder.clone()).or_default() += 1;
        }
        let all_held = held.iter().all(Option::is_some);
        let fair = counts.len() == replicas.len() && counts.values().all(|n| shares.contains(n));
        if all_held && fair {
            return held.into_iter().flatten().collect();
        }
        assert!(
            Instant::now() < deadline,
            "the shards did not split fairly over {users:?}: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn configmap_path(app: &str) -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/configmaps/{app}")
}

async fn value_of(sandbox: &TestSandbox, app: &str) -> Option<String> {
    let answer = sandbox.get(&configmap_path(app)).await;
    if !answer.status.is_success() {
        return None;
    }
    answer.json()["data"]["key"].as_str().map(str::to_string)
}

async fn drift(sandbox: &TestSandbox, app: &str) {
    let answer = sandbox
        .patch(
            &configmap_path(app),
            "application/merge-patch+json",
            r#"{"data":{"key":"drifted"}}"#,
        )
        .await;
    assert!(answer.status.is_success(), "{}", answer.text());
}

async fn wait_healed(sandbox: &TestSandbox, apps: &[String]) -> Instant {
    let deadline = Instant::now() + POLL_TIMEOUT * 2;
    loop {
        let mut healed = true;
        for app in apps {
            healed &= value_of(sandbox, app).await.as_deref() == Some("v1");
        }
        if healed {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{apps:?} not healed in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The app a write was for: its ConfigMap or its inventory.
fn app_of(path: &str) -> Option<String> {
    let last = path.rsplit('/').next()?;
    let name = last.strip_prefix("tether-inventory-").unwrap_or(last);
    (0..APPS).map(app_name).find(|app| app == name)
}

/// Each app's writers (replicas only), in order, since the last reset.
fn writers(sandbox: &TestSandbox) -> BTreeMap<String, Vec<String>> {
    let mut by_app: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for write in sandbox.sandbox.writes() {
        if !write.user.starts_with("replica-") {
            continue;
        }
        if let Some(app) = app_of(&write.path) {
            by_app.entry(app).or_default().push(write.user);
        }
    }
    by_app
}

async fn setup() -> (TestSandbox, crate::serve::Origin) {
    setup_with(origin).await
}

/// [`setup`], served over smart HTTP: what App objects may name.
async fn setup_http() -> (TestSandbox, crate::serve::Origin) {
    setup_with(origin_http).await
}

async fn setup_with(
    serve_origin: fn(&TestSandbox, &[(&str, &str)]) -> crate::serve::Origin,
) -> (TestSandbox, crate::serve::Origin) {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace(NAMESPACE).await;
    let files: Vec<(String, String)> = (0..APPS)
        .map(|i| {
            let name = app_name(i);
            (
                format!("apps/{name}/cm.yaml"),
                configmap(&name, NAMESPACE, "v1"),
            )
        })
        .collect();
    let origin = serve_origin(&sandbox, &borrowed(&files));
    (sandbox, origin)
}

/// Every replica's status API answers for every app, Synced, naming its shard and owner.
async fn check_status_from_every_replica(replicas: &[&Replica]) {
    for replica in replicas {
        let body: Value = eventually("every app Synced from this replica", || async {
            let body: Value = try_get_json(format!("{}/api/v1/apps", replica.url)).await?;
            let apps = body["apps"].as_array()?;
            (apps.len() == APPS && apps.iter().all(|a| a["sync"] == "Synced")).then_some(body)
        })
        .await;
        let mut owners = BTreeSet::new();
        for app in body["apps"].as_array().into_iter().flatten() {
            let name = app["name"].as_str().expect("a name");
            let shard = shard_of(name, SHARDS);
            assert_eq!(app["shard"], shard, "{app}");
            owners.insert(app["owner"].as_str().expect("an owner").to_string());
        }
        assert_eq!(owners.len(), replicas.len(), "owners {owners:?}");
        // One app, asked of a replica that does not hold it, as its holder says it.
        let one: Value = get_json(format!("{}/api/v1/apps/app-0", replica.url)).await;
        assert_eq!(one["sync"], "Synced", "{one}");
        assert_eq!(one["shard"], shard_of("app-0", SHARDS));
        assert_eq!(one["automation"]["acting"], true, "{one}");
        // A manual sync asked of any replica reaches the holder's worker.
        let accepted = manual_sync(&replica.url, "app-0").await;
        let body: Value = accepted.json().await.expect("JSON");
        assert_eq!(body["status"], "accepted", "{body}");
    }
}

async fn split_heal_and_takeover(count: usize) {
    let (sandbox, origin) = setup().await;
    let mut replicas = Vec::new();
    for i in 0..count {
        let user = format!("replica-{}", (b'a' + i as u8) as char);
        replicas.push(start_replica(&sandbox, &origin.url, &user).await);
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    wait_for_split(&sandbox, &all).await;
    let apps: Vec<String> = (0..APPS).map(app_name).collect();
    wait_healed(&sandbox, &apps).await;
    check_status_from_every_replica(&all).await;

    // Each app healed by exactly its shard's holder.
    sandbox.sandbox.reset_requests();
    for app in &apps {
        drift(&sandbox, app).await;
    }
    wait_healed(&sandbox, &apps).await;
    let held = wait_for_split(&sandbox, &all).await;
    let written = writers(&sandbox);
    for app in &apps {
        let by: BTreeSet<&String> = written.get(app).into_iter().flatten().collect();
        let holder = &held[shard_of(app, SHARDS) as usize];
        assert_eq!(by, BTreeSet::from([holder]), "{app} written by {by:?}");
    }

    // Kill the first replica: its shards move, its apps (drifted at once) are healed.
    let victim = replicas[0].user.clone();
    let orphaned = held_by(&apps, &held, &victim);
    assert!(!orphaned.is_empty(), "{victim} held no app");
    let victim_identity = identity_of(&sandbox, &replicas[0]).await;
    sandbox.sandbox.reset_requests();
    let killed = Instant::now();
    replicas[0].kill();
    for app in &orphaned {
        drift(&sandbox, app).await;
    }
    // Until its Leases expire the dead replica still holds its shards: a survivor says
    // so, and that it could not ask it; an action on its apps is refused the same way.
    // (On a machine slow enough to get here after the takeover, the new holder answers.)
    let asked = format!("{}/api/v1/apps/{}", replicas[1].url, orphaned[0]);
    let status: Value = reqwest::get(&asked)
        .await
        .expect("the survivor answers")
        .json()
        .await
        .expect("JSON");
    let action = reqwest::Client::new()
        .post(format!("{asked}/sync"))
        .send()
        .await
        .expect("the survivor answers");
    let action_code = action.status();
    let action_body: Value = action.json().await.expect("JSON");
    if status["owner"] == victim_identity.as_str() {
        assert_eq!(status["sync"], "Unknown", "{status}");
        let message = status["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&victim_identity) && message.contains("could not be read"),
            "{status}"
        );
    } else {
        assert_ne!(status["sync"], "Unknown", "{status}");
    }
    if action_code == reqwest::StatusCode::BAD_GATEWAY {
        let error = action_body["error"].as_str().unwrap_or_default();
        assert!(error.contains(&victim_identity), "{action_body}");
    } else {
        assert_eq!(action_code, reqwest::StatusCode::ACCEPTED, "{action_body}");
        // The last renewal was seen at most a retry period before the kill.
        let expired = LEASE_DURATION - RETRY_PERIOD;
        assert!(killed.elapsed() > expired, "accepted for a dead holder");
    }
    let survivors: Vec<&Replica> = replicas[1..].iter().collect();
    let moved = wait_for_split(&sandbox, &survivors).await;
    let taken_over = killed.elapsed();
    let healed = wait_healed(&sandbox, &orphaned).await - killed;
    println!(
        "shard takeover with {count} replicas: shards held again {taken_over:?} after the kill, \
         {} drifted apps healed after {healed:?} (lease {LEASE_DURATION:?}, retry {RETRY_PERIOD:?})",
        orphaned.len()
    );
    let bound = LEASE_DURATION + RETRY_PERIOD * 2 + SLACK;
    assert!(
        taken_over <= bound,
        "takeover took {taken_over:?}, over {bound:?}"
    );
    assert!(healed <= bound + SLACK, "healing took {healed:?}");
    let written = writers(&sandbox);
    for app in &orphaned {
        let by: BTreeSet<&String> = written.get(app).into_iter().flatten().collect();
        let holder = &moved[shard_of(app, SHARDS) as usize];
        assert_eq!(by, BTreeSet::from([holder]), "{app} written by {by:?}");
    }
    check_status_from_every_replica(&survivors).await;
    if count == 2 {
        // The dead member's Lease is collected by the survivor after four lease durations.
        let member = format!("{LEASES}/{}", member_lease_name(&victim_identity));
        let deadline = killed + LEASE_DURATION * (MEMBER_GC_LEASES + 1) + SLACK;
        while sandbox.get(&member).await.status.is_success() {
            assert!(Instant::now() < deadline, "{member} was never collected");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        println!(
            "a dead member's Lease collected {:?} after the kill",
            killed.elapsed()
        );
        assert!(killed.elapsed() >= LEASE_DURATION * MEMBER_GC_LEASES);
    }
    for replica in &mut replicas[1..] {
        replica.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_split_the_apps_and_one_heals_the_others_after_a_kill() {
    split_heal_and_takeover(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_split_the_apps_and_the_others_heal_a_killed_ones() {
    split_heal_and_takeover(3).await;
}

/// Whether a sequence of writers ever returns to one it had left: with one holder at a
/// time and one handover per shard, each app's writers come in one run each.
fn interleaved(writers: &[String]) -> bool {
    let mut runs: Vec<&String> = Vec::new();
    for writer in writers {
        if runs.last() != Some(&writer) {
            runs.push(writer);
        }
    }
    let distinct: BTreeSet<&&String> = runs.iter().collect();
    distinct.len() != runs.len()
}

#[test]
fn a_writer_returning_after_another_is_interleaving() {
    let seq = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert!(!interleaved(&seq(&["a", "a", "b", "b"])));
    assert!(!interleaved(&seq(&["a"])));
    assert!(interleaved(&seq(&["a", "b", "a"])));
    assert!(interleaved(&seq(&["a", "b", "c", "b"])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_replica_takes_its_share_while_apps_drift_without_two_writers() {
    let (sandbox, origin) = setup().await;
    let mut replicas = vec![
        start_replica(&sandbox, &origin.url, "replica-a").await,
        start_replica(&sandbox, &origin.url, "replica-b").await,
    ];
    let before = wait_for_split(&sandbox, &replicas.iter().collect::<Vec<_>>()).await;
    let apps: Vec<String> = (0..APPS).map(app_name).collect();
    wait_healed(&sandbox, &apps).await;

    // Every app drifts over and over while the third replica joins and shards move.
    sandbox.sandbox.reset_requests();
    let drifting = CancellationToken::new();
    let drifter = {
        let (drifting, apps) = (drifting.clone(), apps.clone());
        let client = sandbox.http.clone();
        let (url, token) = (
            sandbox.url().to_string(),
            sandbox.sandbox.token().to_string(),
        );
        tokio::spawn(async move {
            let mut rounds = 0;
            while !drifting.is_cancelled() {
                for app in &apps {
                    let _ = client
                        .patch(format!("{url}{}", configmap_path(app)))
                        .bearer_auth(&token)
                        .header("content-type", "application/merge-patch+json")
                        .body(format!(r#"{{"data":{{"key":"drift-{rounds}"}}}}"#))
                        .send()
                        .await;
                }
                rounds += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            rounds
        })
    };
    let joined = Instant::now();
    replicas.push(start_replica(&sandbox, &origin.url, "replica-c").await);
    let after = wait_for_split(&sandbox, &replicas.iter().collect::<Vec<_>>()).await;
    let handed_over = joined.elapsed();
    // A little longer, so the new holders heal under fire too.
    tokio::time::sleep(RETRY_PERIOD * 3).await;
    drifting.cancel();
    let rounds = drifter.await.expect("the drifter ends");
    wait_healed(&sandbox, &apps).await;
    println!(
        "shard handover to a joining replica: fair split {handed_over:?} after it started, \
         {rounds} rounds of drift on {APPS} apps meanwhile"
    );

    let written = writers(&sandbox);
    let mut moved = 0;
    for app in &apps {
        let shard = shard_of(app, SHARDS) as usize;
        let by = written.get(app).cloned().unwrap_or_default();
        assert!(
            !interleaved(&by),
            "{app} written by two replicas in turn: {by:?}"
        );
        assert_eq!(by.last(), Some(&after[shard]), "{app}: {by:?}");
        assert!(
            by.iter().all(|w| *w == before[shard] || *w == after[shard]),
            "{app} written by a replica that never held it: {by:?}"
        );
        if before[shard] != after[shard] {
            moved += 1;
        }
    }
    assert!(moved > 0, "no app changed hands");
    check_status_from_every_replica(&replicas.iter().collect::<Vec<_>>()).await;

    // Stopped as by SIGTERM, a replica hands its shards over and leaves: the others
    // hold them again well before its Leases could have expired.
    let leaving = identity_of(&sandbox, &replicas[2]).await;
    let stopping = Instant::now();
    replicas[2].stop().await;
    wait_for_split(&sandbox, &[&replicas[0], &replicas[1]]).await;
    let handed = stopping.elapsed();
    println!("a stopped replica's shards held again {handed:?} after its stop began");
    assert!(
        handed < LEASE_DURATION,
        "took {handed:?}: released shards expired instead"
    );
    let member = sandbox
        .get(&format!("{LEASES}/{}", member_lease_name(&leaving)))
        .await;
    assert_eq!(
        member.status,
        reqwest::StatusCode::NOT_FOUND,
        "its member Lease stays"
    );
    for replica in &mut replicas[..2] {
        replica.stop().await;
    }
}

/// Which shards a `tether serve` process says it holds, from its `/metrics`.
async fn owned_shards(url: &str) -> Option<BTreeSet<u32>> {
    let text = try_get_text(format!("{url}/metrics")).await?;
    let mut owned = BTreeSet::new();
    let mut seen = 0;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("tether_shard_owned{shard=\"") else {
            continue;
        };
        let (shard, value) = rest.split_once("\"} ")?;
        seen += 1;
        if value.trim() == "1" {
            owned.insert(shard.parse().ok()?);
        }
    }
    (seen == SHARDS).then_some(owned)
}

/// The binary, as the chart runs it: two processes split the shards (each says so in
/// `tether_shard_owned`), and SIGTERM on one hands all of them to the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_export_the_shards_they_hold_and_hand_them_over_on_sigterm() {
    let (sandbox, origin) = setup().await;
    let config = config(Some(&origin.url), 0);
    let first = crate::serve::Serve::start(&sandbox, "first", &config, &[]).await;
    let second = crate::serve::Serve::start(&sandbox, "second", &config, &[]).await;
    let all: BTreeSet<u32> = (0..SHARDS).collect();
    let (a, b) = eventually("the two processes split the shards", || async {
        let a = owned_shards(&first.url).await?;
        let b = owned_shards(&second.url).await?;
        let split = a.len() == b.len() && a.is_disjoint(&b) && a.union(&b).eq(all.iter());
        split.then_some((a, b))
    })
    .await;
    assert_eq!(a.len() + b.len(), SHARDS as usize, "{a:?} {b:?}");
    let ready = reqwest::get(format!("{}/readyz", first.url))
        .await
        .expect("readyz answers");
    assert!(ready.status().is_success());

    let stopping = Instant::now();
    assert_eq!(second.stop().await, Some(0));
    eventually("the first process holds every shard", || async {
        (owned_shards(&first.url).await? == all).then_some(())
    })
    .await;
    let took = stopping.elapsed();
    println!("SIGTERM to every shard held by the other process: {took:?}");
    assert!(
        took < LEASE_DURATION + SLACK,
        "{took:?}: released shards expired instead"
    );
    assert_eq!(first.stop().await, Some(0));
}
