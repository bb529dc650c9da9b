//! Unit tests of leader election: the lease's rules on paused time, no cluster.

use super::runner::with_record;
use super::*;

const ME: &str = "tether-0_abcd1234";
const OTHER: &str = "tether-1_ef567890";
const DURATION: Duration = Duration::from_secs(15);

fn record(holder: Option<&str>, seconds: i64, renew: &str) -> LeaseRecord {
    LeaseRecord {
        holder: holder.map(str::to_string),
        lease_duration_seconds: Some(seconds),
        acquire_time: Some("2026-11-22T01:00:00.000000Z".into()),
        renew_time: Some(renew.into()),
        transitions: 3,
    }
}

fn seen(record: LeaseRecord, since: Instant) -> Observation {
    Observation { record, since }
}

fn leading(leader: bool) -> (watch::Sender<State>, Leadership) {
    let (sender, state) = watch::channel(State {
        known: true,
        leader,
        holder: None,
    });
    (sender, Leadership { state })
}

#[tokio::test(start_paused = true)]
async fn work_is_dropped_when_leadership_is_lost_midway() {
    let (sender, leadership) = leading(true);
    let started = Instant::now();
    let stepped_down = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        sender.send_modify(|s| s.leader = false);
    };
    let work = tokio::time::sleep(Duration::from_secs(60));
    let (outcome, ()) = tokio::join!(leadership.while_leading(work), stepped_down);
    assert_eq!(outcome, None);
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn work_finishes_while_leading_and_never_starts_otherwise() {
    let (sender, leadership) = leading(true);
    // A change of holder that keeps this replica leading does not stop the work.
    let renewed = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        sender.send_modify(|s| s.holder = Some(ME.into()));
    };
    let work = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        7
    };
    let (outcome, ()) = tokio::join!(leadership.while_leading(work), renewed);
    assert_eq!(outcome, Some(7));

    let (_sender, follower) = leading(false);
    assert_eq!(follower.while_leading(async { 7 }).await, None);
    assert_eq!(
        Leadership::always().while_leading(async { 7 }).await,
        Some(7)
    );
}

#[test]
fn a_missing_lease_is_created() {
    assert_eq!(decide(None, ME, DURATION, Instant::now()), Decision::Create);
}

#[test]
fn a_lease_held_by_nobody_is_acquired_at_once() {
    let t0 = Instant::now();
    let observed = seen(record(None, 15, "2026-11-22T01:00:00.000000Z"), t0);
    assert_eq!(decide(Some(&observed), ME, DURATION, t0), Decision::Acquire);
}

#[test]
fn an_empty_holder_identity_is_nobody() {
    let lease = json!({"spec": {"holderIdentity": "", "leaseDurationSeconds": 1}});
    let observed = seen(LeaseRecord::from_lease(&lease), Instant::now());
    assert_eq!(
        decide(Some(&observed), ME, DURATION, observed.since),
        Decision::Acquire
    );
}

#[test]
fn our_own_lease_is_renewed_even_when_it_looks_expired() {
    let t0 = Instant::now();
    let observed = seen(record(Some(ME), 15, "2026-11-22T01:00:00.000000Z"), t0);
    assert_eq!(
        decide(Some(&observed), ME, DURATION, t0 + Duration::from_secs(60)),
        Decision::Renew
    );
}

#[test]
fn another_holder_is_followed_until_the_lease_expires_on_our_clock() {
    let t0 = Instant::now();
    let observed = seen(record(Some(OTHER), 10, "2026-11-22T01:00:00.000000Z"), t0);
    let follow = Decision::Follow {
        holder: OTHER.into(),
        expires: t0 + Duration::from_secs(10),
    };
    assert_eq!(decide(Some(&observed), ME, DURATION, t0), follow);
    assert_eq!(
        decide(
            Some(&observed),
            ME,
            DURATION,
            t0 + Duration::from_millis(9_999)
        ),
        follow
    );
    // The record's own (shorter) duration wins over ours, and expiry is inclusive.
    assert_eq!(
        decide(Some(&observed), ME, DURATION, t0 + Duration::from_secs(10)),
        Decision::Acquire
    );
}

#[test]
fn a_record_asking_for_longer_than_ours_is_held_for_ours() {
    // Issue #24: anyone who may write the Lease must not stop the replicas for an hour.
    let t0 = Instant::now();
    let forged = seen(
        record(Some(OTHER), 3_600, "2026-11-22T01:00:00.000000Z"),
        t0,
    );
    assert!(matches!(
        decide(
            Some(&forged),
            ME,
            DURATION,
            t0 + DURATION - Duration::from_millis(1)
        ),
        Decision::Follow { .. }
    ));
    assert_eq!(
        decide(Some(&forged), ME, DURATION, t0 + DURATION),
        Decision::Acquire
    );
}

#[test]
fn a_record_without_a_valid_duration_uses_ours() {
    let t0 = Instant::now();
    let mut bad = record(Some(OTHER), 0, "2026-11-22T01:00:00.000000Z");
    let observed = seen(bad.clone(), t0);
    assert!(matches!(
        decide(Some(&observed), ME, DURATION, t0 + Duration::from_secs(14)),
        Decision::Follow { .. }
    ));
    bad.lease_duration_seconds = None;
    let observed = seen(bad, t0);
    assert_eq!(
        decide(Some(&observed), ME, DURATION, t0 + DURATION),
        Decision::Acquire
    );
}

#[test]
fn expiry_counts_from_when_the_record_last_changed_not_its_timestamps() {
    let t0 = Instant::now();
    // The remote's renewTime is far in the past (clock skew): irrelevant.
    let first = observe(
        None,
        record(Some(OTHER), 10, "1999-01-01T00:00:00.000000Z"),
        t0,
    );
    assert_eq!(first.since, t0);
    // Read again unchanged 8 s later: the clock keeps running from t0.
    let same = observe(
        Some(&first),
        first.record.clone(),
        t0 + Duration::from_secs(8),
    );
    assert_eq!(same.since, t0);
    assert_eq!(
        decide(Some(&same), ME, DURATION, t0 + Duration::from_secs(10)),
        Decision::Acquire
    );
    // A renew (a changed record) restarts it.
    let renewed = observe(
        Some(&first),
        record(Some(OTHER), 10, "1999-01-01T00:00:02.000000Z"),
        t0 + Duration::from_secs(8),
    );
    assert_eq!(renewed.since, t0 + Duration::from_secs(8));
    assert!(matches!(
        decide(Some(&renewed), ME, DURATION, t0 + Duration::from_secs(10)),
        Decision::Follow { .. }
    ));
}

#[test]
fn creating_starts_at_zero_transitions_with_both_times_now() {
    let now = "2026-11-22T01:02:03.456789Z"
        .parse::<DateTime<Utc>>()
        .expect("a time");
    let created =
        next_record(&Decision::Create, None, ME, Duration::from_secs(15), now).expect("a record");
    assert_eq!(
        created,
        LeaseRecord {
            holder: Some(ME.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some("2026-11-22T01:02:03.456789Z".into()),
            renew_time: Some("2026-11-22T01:02:03.456789Z".into()),
            transitions: 0,
        }
    );
}

#[test]
fn acquiring_counts_a_transition_and_renewing_does_not() {
    let now = "2026-11-22T01:02:03.000001Z"
        .parse::<DateTime<Utc>>()
        .expect("a time");
    let previous = record(Some(OTHER), 15, "2026-11-22T01:00:00.000000Z");
    let acquired =
        next_record(&Decision::Acquire, Some(&previous), ME, DURATION, now).expect("a record");
    assert_eq!(acquired.transitions, 4);
    assert_eq!(acquired.holder.as_deref(), Some(ME));
    assert_eq!(
        acquired.acquire_time.as_deref(),
        Some("2026-11-22T01:02:03.000001Z")
    );

    let ours = record(Some(ME), 15, "2026-11-22T01:00:00.000000Z");
    let renewed = next_record(&Decision::Renew, Some(&ours), ME, DURATION, now).expect("a record");
    assert_eq!(renewed.transitions, 3);
    assert_eq!(
        renewed.acquire_time.as_deref(),
        Some("2026-11-22T01:00:00.000000Z")
    );
    assert_eq!(
        renewed.renew_time.as_deref(),
        Some("2026-11-22T01:02:03.000001Z")
    );

    let follow = Decision::Follow {
        holder: OTHER.into(),
        expires: Instant::now(),
    };
    assert_eq!(
        next_record(&follow, Some(&previous), ME, DURATION, now),
        None
    );
}

#[test]
fn releasing_clears_the_holder_keeps_the_count_and_shortens_the_lease() {
    let now = "2026-11-22T01:02:03Z"
        .parse::<DateTime<Utc>>()
        .expect("a time");
    let released = released_record(&record(Some(ME), 15, "x"), now);
    assert_eq!(released.holder, None);
    assert_eq!(released.transitions, 3);
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(
        released.renew_time.as_deref(),
        Some("2026-11-22T01:02:03.000000Z")
    );
    // Written out, the holder field disappears and other spec fields stay.
    let lease = json!({"metadata": {"resourceVersion": "7"},
        "spec": {"holderIdentity": ME, "strategy": "OldestEmulationVersion"}});
    let written = with_record(&lease, &released);
    assert_eq!(written["spec"].get("holderIdentity"), None);
    assert_eq!(written["spec"]["strategy"], "OldestEmulationVersion");
    assert_eq!(written["metadata"]["resourceVersion"], "7");
    assert_eq!(written["spec"]["leaseTransitions"], 3);
}

#[test]
fn durations_round_up_to_whole_seconds() {
    assert_eq!(lease_duration_seconds(Duration::from_secs(15)), 15);
    assert_eq!(lease_duration_seconds(Duration::from_millis(1_500)), 2);
    assert_eq!(lease_duration_seconds(Duration::from_millis(1)), 1);
    assert_eq!(lease_duration_seconds(Duration::ZERO), 1);
}

#[test]
fn micro_time_has_six_fractional_digits() {
    let at = "2026-11-22T01:02:03.4Z"
        .parse::<DateTime<Utc>>()
        .expect("a time");
    assert_eq!(micro_time(at), "2026-11-22T01:02:03.400000Z");
}

#[test]
fn identities_are_unique_per_process_start() {
    let a = default_identity();
    let b = default_identity();
    assert_ne!(a, b);
    let (base, suffix) = a.rsplit_once('_').expect("a suffix");
    assert!(!base.is_empty());
    assert_eq!(suffix.len(), 8);
}

#[tokio::test]
async fn always_leads_and_never_changes() {
    let mut leadership = Leadership::always();
    assert!(leadership.is_leader());
    assert!(leadership.is_known());
    let changed = tokio::time::timeout(Duration::from_millis(50), leadership.changed()).await;
    assert!(
        changed.is_err(),
        "changed() resolved for a fixed leadership"
    );
}
