//! Leader election over a real `coordination.k8s.io/v1` Lease in the sandbox, each
//! elector with its own client as separate replicas would have: one leader at a time,
//! a prompt hand-over on release, a takeover only after expiry when the leader dies,
//! a leader cut off from the API server stepping down before its lease could expire,
//! and Lease fields as `kubectl` reads them.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tether_controller::reconcile::leader::{Elector, LeaderConfig, Leadership};
use tether_core::cluster::{Cluster, ClusterError};
use tokio::time::Instant;

use crate::support::{POLL_TIMEOUT, TestSandbox};

/// Short timings so a takeover takes seconds, with the proportions of client-go's
/// defaults (15 s / 10 s / 2 s): renew deadline well inside the lease, several retries
/// per renew deadline. Whole seconds for the lease, which is written in seconds.
const LEASE_DURATION: Duration = Duration::from_secs(2);
const RENEW_DEADLINE: Duration = Duration::from_millis(1_200);
const RETRY_PERIOD: Duration = Duration::from_millis(200);

/// Scheduling slack on a shared two-core machine, for the bounds that are not safety
/// properties.
const SLACK: Duration = Duration::from_millis(300);

/// The inventory namespace's default, absent from a fresh sandbox: the elector creates it.
const NAMESPACE: &str = "tether-system";
const LEASE: &str = "tether";

fn config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        namespace: NAMESPACE.to_string(),
        lease_name: LEASE.to_string(),
        identity: identity.to_string(),
        lease_duration: LEASE_DURATION,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY_PERIOD,
    }
}

/// An elector with a client of its own.
async fn elector(sandbox: &TestSandbox, identity: &str) -> (Elector, Leadership) {
    let cluster = Cluster::connect(Some(&sandbox.kubeconfig), None)
        .await
        .expect("a client for the sandbox");
    Elector::spawn(Arc::new(cluster), config(identity))
}

/// Waits until `done` holds for the leadership, returning when it first did.
async fn wait_for(
    leadership: &mut Leadership,
    what: &str,
    done: impl Fn(&Leadership) -> bool,
) -> Instant {
    let deadline = Instant::now() + POLL_TIMEOUT;
    loop {
        if done(leadership) {
            return Instant::now();
        }
        if tokio::time::timeout_at(deadline, leadership.changed())
            .await
            .is_err()
        {
            panic!(
                "not {what} within {POLL_TIMEOUT:?}: leader {}, known {}, holder {:?}",
                leadership.is_leader(),
                leadership.is_known(),
                leadership.holder()
            );
        }
    }
}

async fn lease_spec(sandbox: &TestSandbox) -> Value {
    let lease = sandbox
        .kubectl_json(&["get", "lease", "-n", NAMESPACE, LEASE, "-o", "json"])
        .await;
    lease["spec"].clone()
}

/// `metav1.MicroTime` as the API server writes it: `2026-11-22T01:02:03.456789Z`.
#[track_caller]
fn assert_micro_time(value: &Value) -> DateTime<Utc> {
    let text = value.as_str().expect("a timestamp string");
    let bytes = text.as_bytes();
    assert!(
        text.len() == 27
            && bytes[19] == b'.'
            && bytes[20..26].iter().all(u8::is_ascii_digit)
            && text.ends_with('Z'),
        "not a MicroTime: {text}"
    );
    DateTime::parse_from_rfc3339(text)
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_electors_make_one_leader_and_a_follower_that_knows_it() {
    let sandbox = TestSandbox::start().await;
    let (first, mut a) = elector(&sandbox, "replica-a").await;
    let (second, mut b) = elector(&sandbox, "replica-b").await;
    wait_for(&mut a, "known", Leadership::is_known).await;
    wait_for(&mut b, "known", Leadership::is_known).await;
    // Through several retries, never two leaders at once, and the same one throughout.
    let first_leader = a.is_leader();
    let watching = Instant::now();
    while watching.elapsed() < RETRY_PERIOD * 4 {
        assert!(!(a.is_leader() && b.is_leader()), "two leaders at once");
        assert_eq!(a.is_leader(), first_leader, "leadership changed hands");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    assert!(
        a.is_leader() != b.is_leader(),
        "exactly one leader: a {}, b {}",
        a.is_leader(),
        b.is_leader()
    );
    let (leader, follower, leader_id) = if a.is_leader() {
        (&a, &b, "replica-a")
    } else {
        (&b, &a, "replica-b")
    };
    assert_eq!(leader.holder().as_deref(), Some(leader_id));
    assert_eq!(follower.holder().as_deref(), Some(leader_id));

    // The namespace did not exist: the elector created it, and the Lease in it.
    let namespace = sandbox
        .kubectl_json(&["get", "namespace", NAMESPACE, "-o", "json"])
        .await;
    assert_eq!(
        namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "tether"
    );
    let spec = lease_spec(&sandbox).await;
    assert_eq!(spec["holderIdentity"], leader_id);
    assert_eq!(spec["leaseDurationSeconds"], 2);
    assert_eq!(spec["leaseTransitions"], 0);
    let acquired = assert_micro_time(&spec["acquireTime"]);
    let renewed = assert_micro_time(&spec["renewTime"]);
    assert!(renewed >= acquired);

    // The leader keeps renewing: renewTime moves, acquireTime does not.
    tokio::time::sleep(RETRY_PERIOD * 3).await;
    let later = lease_spec(&sandbox).await;
    assert!(assert_micro_time(&later["renewTime"]) > renewed, "{later}");
    assert_eq!(later["acquireTime"], spec["acquireTime"]);
    assert_eq!(later["leaseTransitions"], 0);

    // Releasing the follower leaves the lease alone.
    let (leader_elector, follower_elector) = if a.is_leader() {
        (first, second)
    } else {
        (second, first)
    };
    follower_elector.release().await;
    let after = lease_spec(&sandbox).await;
    assert_eq!(after["holderIdentity"], leader_id);
    assert_eq!(after["leaseDurationSeconds"], 2);
    leader_elector.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_passes_to_the_follower_at_its_next_retry() {
    let sandbox = TestSandbox::start().await;
    let (first, mut a) = elector(&sandbox, "replica-a").await;
    wait_for(&mut a, "leader", Leadership::is_leader).await;
    let (second, mut b) = elector(&sandbox, "replica-b").await;
    wait_for(&mut b, "following replica-a", |l| {
        l.holder().as_deref() == Some("replica-a")
    })
    .await;
    assert!(!b.is_leader());

    // replica-a's lease runs until its last renewal plus the lease duration (a later
    // renewal only moves that later).
    let renewed = assert_micro_time(&lease_spec(&sandbox).await["renewTime"]);
    let released_at = Instant::now();
    first.release().await;
    // From here on only the follower asks for the lease.
    sandbox.sandbox.reset_requests();
    let release_took = released_at.elapsed();
    assert!(!a.is_leader(), "the released elector still leads");
    assert!(
        release_took < RENEW_DEADLINE,
        "release took {release_took:?}"
    );
    let took_over = wait_for(&mut b, "leader", Leadership::is_leader).await - released_at;
    // The property: the follower takes the lease at its next retry, let in by the
    // release, not by the lease's expiry. Counted, not timed: one read that sees the
    // lease free (and at most one more that was in flight at the release) and one
    // write. The bound on the test's clock only says it did not wait out a whole
    // lease, with room for a loaded machine.
    let requests = sandbox.sandbox.requests();
    let reads = requests.get("get", "coordination.k8s.io/leases");
    assert!(
        (1..=2).contains(&reads),
        "the follower read the lease {reads} times after the release: {requests:?}"
    );
    assert_eq!(
        requests.get("update", "coordination.k8s.io/leases"),
        1,
        "{requests:?}"
    );
    assert!(
        took_over < LEASE_DURATION,
        "the follower took {took_over:?} to take over a released lease"
    );

    let spec = lease_spec(&sandbox).await;
    assert_eq!(spec["holderIdentity"], "replica-b");
    let acquired = assert_micro_time(&spec["acquireTime"]);
    let expiry = renewed + chrono::Duration::from_std(LEASE_DURATION).expect("duration");
    assert!(
        acquired < expiry,
        "replica-b acquired the lease at {acquired}, not before replica-a's expired at {expiry}"
    );
    assert_eq!(spec["leaseTransitions"], 1, "a change of holder is counted");
    assert_eq!(spec["leaseDurationSeconds"], 2);
    second.release().await;

    // The last leader's release clears the holder and shortens the lease.
    let spec = lease_spec(&sandbox).await;
    assert_eq!(spec.get("holderIdentity"), None, "{spec}");
    assert_eq!(spec["leaseDurationSeconds"], 1);
    assert_eq!(spec["leaseTransitions"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_is_replaced_only_once_its_lease_expires() {
    let sandbox = TestSandbox::start().await;
    let (first, mut a) = elector(&sandbox, "replica-a").await;
    wait_for(&mut a, "leader", Leadership::is_leader).await;
    let (second, mut b) = elector(&sandbox, "replica-b").await;
    wait_for(&mut b, "following replica-a", |l| {
        l.holder().as_deref() == Some("replica-a")
    })
    .await;
    // Let the follower watch a few renewals, as it would in a running deployment.
    tokio::time::sleep(RETRY_PERIOD * 3).await;
    assert!(a.is_leader() && !b.is_leader());

    // A crash: the task stops with no release. Its own view stops leading at once.
    // The lease was renewed at `renewed` at the latest reading (or later, which only
    // moves its expiry later): the follower must not lead before that plus the lease.
    let renewed = lease_spec(&sandbox).await["renewTime"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .expect("renewTime is RFC 3339");
    let crashed_at = Instant::now();
    drop(first);
    assert!(!a.is_leader());
    let took_over = wait_for(&mut b, "leader", Leadership::is_leader).await - crashed_at;
    let expires = renewed + chrono::Duration::from_std(LEASE_DURATION).expect("duration");
    let slack = chrono::Duration::from_std(SLACK).expect("duration");
    assert!(
        chrono::Utc::now() >= expires - slack,
        "the follower took over {took_over:?} after the crash, before the lease (renewed {renewed}) expired"
    );
    assert!(
        took_over <= LEASE_DURATION + RETRY_PERIOD * 2 + SLACK * 2,
        "the follower took {took_over:?} to take over an expired lease"
    );

    let spec = lease_spec(&sandbox).await;
    assert_eq!(spec["holderIdentity"], "replica-b");
    assert_eq!(spec["leaseTransitions"], 1);
    second.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_server_steps_down_before_its_lease_can_expire() {
    let sandbox = TestSandbox::start().await;
    let (elector, mut a) = elector(&sandbox, "replica-a").await;
    wait_for(&mut a, "leader", Leadership::is_leader).await;
    tokio::time::sleep(RETRY_PERIOD * 2).await;

    // The last renewal the API server accepted is at or after this one.
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}");
    let answer = sandbox.get(&path).await;
    assert_eq!(answer.status, reqwest::StatusCode::OK, "{}", answer.text());
    let renewed = assert_micro_time(&answer.json()["spec"]["renewTime"]);
    sandbox.sandbox.set_fail_rate(1.0);
    let cut_off = Instant::now();

    let stepped_down = wait_for(&mut a, "stepped down", |l| !l.is_leader()).await;
    let stepped_down_wall = Utc::now();
    let since_renewal = (stepped_down_wall - renewed)
        .to_std()
        .expect("the step-down follows the renewal");
    // The safety property: no one may take over before renewTime + lease duration (and
    // followers count from when they saw the renewal, later still).
    assert!(
        since_renewal < LEASE_DURATION,
        "stepped down {since_renewal:?} after the last renewal, past the {LEASE_DURATION:?} lease"
    );
    // It rode out failures until its renew deadline rather than quitting on the first.
    let waited = stepped_down - cut_off;
    assert!(
        waited >= RENEW_DEADLINE - RETRY_PERIOD * 2 - SLACK,
        "stepped down {waited:?} after the first failure"
    );
    assert!(
        waited <= RENEW_DEADLINE + SLACK,
        "stepped down {waited:?} after the API server went away"
    );

    // When the API server answers again, the lease it still holds is renewed.
    sandbox.sandbox.set_fail_rate(0.0);
    wait_for(&mut a, "leader again", Leadership::is_leader).await;
    elector.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_create_and_replace_are_optimistic() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("leases").await;
    let cluster = Cluster::connect(Some(&sandbox.kubeconfig), None)
        .await
        .expect("a client for the sandbox");
    let kind = cluster
        .resolve(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"))
        .await
        .expect("discovery answers")
        .expect("the sandbox serves Leases");
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "race", "namespace": "leases"},
        "spec": {"holderIdentity": "one", "leaseDurationSeconds": 5},
    });
    let created = cluster.create(&kind, &lease).await.expect("created");
    assert_eq!(created["spec"]["holderIdentity"], "one");
    match cluster.create(&kind, &lease).await {
        Err(ClusterError::Api { code: 409, .. }) => {}
        other => panic!("a second create must be a 409 AlreadyExists: {other:?}"),
    }

    // Two writers read the same version; the first write wins, the second is refused.
    let mut first = created.clone();
    first["spec"]["holderIdentity"] = json!("two");
    let mut second = created.clone();
    second["spec"]["holderIdentity"] = json!("three");
    let replaced = cluster.replace(&kind, &first).await.expect("replaced");
    assert_eq!(replaced["spec"]["holderIdentity"], "two");
    assert_ne!(
        replaced["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    match cluster.replace(&kind, &second).await {
        Err(ClusterError::Api { code: 409, .. }) => {}
        other => panic!("a write with a stale resourceVersion must be a 409: {other:?}"),
    }
    let live = cluster
        .get(&kind, Some("leases"), "race")
        .await
        .expect("read")
        .expect("present");
    assert_eq!(live["spec"]["holderIdentity"], "two");

    // Into a namespace that does not exist: a 404 the elector turns into creating it.
    let mut elsewhere = lease.clone();
    elsewhere["metadata"]["namespace"] = json!("nowhere");
    match cluster.create(&kind, &elsewhere).await {
        Err(err) if err.is_not_found() => {}
        other => panic!("a create in a missing namespace must be a 404: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_is_unknown_until_an_attempt_succeeds() {
    let sandbox = TestSandbox::start().await;
    let cluster = Cluster::connect(Some(&sandbox.kubeconfig), None)
        .await
        .expect("a client for the sandbox");
    sandbox.sandbox.set_fail_rate(1.0);
    let (elector, mut a) = Elector::spawn(Arc::new(cluster), config("replica-a"));
    tokio::time::sleep(RETRY_PERIOD * 4).await;
    assert!(
        !a.is_known(),
        "known without a single answer from the API server"
    );
    assert!(!a.is_leader());
    assert_eq!(a.holder(), None);

    sandbox.sandbox.set_fail_rate(0.0);
    wait_for(&mut a, "leader", Leadership::is_leader).await;
    assert!(a.is_known());
    assert_eq!(a.holder().as_deref(), Some("replica-a"));
    elector.release().await;
}
