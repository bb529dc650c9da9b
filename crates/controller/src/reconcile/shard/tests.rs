//! The shard choices as pure functions: the hash and its stability, the capped
//! rendezvous assignment and its balance, the handover rule, orphans and liveness.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::*;

fn members(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn counts(assigned: &[Option<String>]) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    for owner in assigned.iter().flatten() {
        *counts.entry(owner.clone()).or_default() += 1;
    }
    counts
}

#[test]
fn fnv1a64_matches_the_reference_vectors() {
    // From the FNV reference test suite (fnv_test.c, FNV-1a 64).
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn an_apps_shard_is_the_same_on_every_build() {
    // Fixed expectations: a change here moves apps between replicas of different
    // versions during a rolling upgrade, and must be deliberate.
    let fixed: Vec<u32> = ["web", "api", "db", "team-a.frontend", "team-b.backend"]
        .iter()
        .map(|app| shard_of(app, 8))
        .collect();
    assert_eq!(fixed, SHARDS_OF_FIXED_NAMES);
    assert_eq!(shard_of("anything", 1), 0);
    // Zero shards is not a configuration; it is read as one rather than dividing by 0.
    assert_eq!(shard_of("anything", 0), 0);
}

/// `shard_of` of web, api, db, team-a.frontend, team-b.backend among 8 shards.
const SHARDS_OF_FIXED_NAMES: [u32; 5] = [1, 7, 3, 4, 5];

#[test]
fn apps_spread_over_the_shards() {
    let mut per_shard = [0u32; 4];
    for i in 0..400 {
        per_shard[shard_of(&format!("app-{i}"), 4) as usize] += 1;
    }
    assert!(
        per_shard.iter().all(|n| (70..=130).contains(n)),
        "{per_shard:?}"
    );
}

#[test]
fn fair_shares_add_up_and_differ_by_at_most_one() {
    for (shards, count) in [(12, 3), (3, 3), (3, 2), (4, 3), (2, 5), (256, 7)] {
        let names: Vec<String> = (0..count).map(|i| format!("replica-{i}_x")).collect();
        let shares = fair_shares(shards, &names);
        assert_eq!(shares.values().sum::<u32>(), shards, "{shards}/{count}");
        let (min, max) = (shares.values().min(), shares.values().max());
        assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{shares:?}");
    }
    // The same members in another order have the same shares.
    let a = fair_shares(5, &members(&["b", "a", "c"]));
    let b = fair_shares(5, &members(&["c", "b", "a"]));
    assert_eq!(a, b);
}

#[test]
fn every_shard_goes_to_exactly_one_member_with_its_fair_share() {
    for (shards, count) in [(12, 3), (3, 3), (3, 2), (4, 3), (2, 5), (1, 2), (64, 5)] {
        let names: Vec<String> = (0..count).map(|i| format!("tether-{i}_5e1f")).collect();
        let assigned = assign(shards, &names);
        assert_eq!(assigned.len(), shards as usize);
        assert!(assigned.iter().all(Option::is_some), "{assigned:?}");
        let got = counts(&assigned);
        let shares = fair_shares(shards, &names);
        for (member, share) in shares {
            assert_eq!(got.get(&member).copied().unwrap_or(0), share, "{member}");
        }
    }
    assert_eq!(assign(3, &[]), vec![None, None, None]);
}

#[test]
fn every_replica_computes_the_same_assignment() {
    let one = assign(12, &members(&["a_1", "b_2", "c_3"]));
    let two = assign(12, &members(&["c_3", "a_1", "b_2"]));
    assert_eq!(one, two);
}

#[test]
fn a_member_joining_or_leaving_moves_few_shards_besides_its_own() {
    let before = assign(30, &members(&["a_1", "b_2"]));
    let after = assign(30, &members(&["a_1", "b_2", "c_3"]));
    let moved_between_old = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a && a.as_deref() != Some("c_3"))
        .count();
    // c takes its ten; a and b keep most of what they keep at all.
    assert_eq!(counts(&after).get("c_3"), Some(&10));
    assert!(
        moved_between_old <= 4,
        "{moved_between_old} shards moved between a and b"
    );
    // Back to two: c's shards go, the others mostly stay.
    let again = assign(30, &members(&["a_1", "b_2"]));
    assert_eq!(before, again);
}

#[test]
fn the_first_replica_takes_everything_then_hands_the_newcomers_share_over() {
    let alone = assign(6, &members(&["a_1"]));
    assert!(alone.iter().all(|o| o.as_deref() == Some("a_1")));
    let together = assign(6, &members(&["a_1", "b_2"]));
    let to_b: Vec<u32> = (0u32..)
        .zip(&together)
        .filter(|(_, o)| o.as_deref() == Some("b_2"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(to_b.len(), 3);
    // What a does with each shard it holds: keep its own, release b's.
    for (shard, owner) in (0u32..).zip(&together) {
        let here = owner.as_deref() == Some("a_1");
        let expected = if here { Step::Keep } else { Step::Release };
        assert_eq!(step(true, here, false), expected, "shard {shard}");
        // And b, holding nothing yet, acquires exactly its own.
        let b_step = step(false, !here, false);
        assert_eq!(b_step == Step::Acquire, !here, "shard {shard}");
    }
}

#[test]
fn the_handover_rule() {
    assert_eq!(step(true, true, false), Step::Keep);
    assert_eq!(step(true, true, true), Step::Keep);
    assert_eq!(step(true, false, false), Step::Release);
    // An orphan this replica took is still handed to its assignee once it is live.
    assert_eq!(step(true, false, true), Step::Release);
    assert_eq!(step(false, true, false), Step::Acquire);
    assert_eq!(step(false, false, true), Step::Acquire);
    assert_eq!(step(false, false, false), Step::Wait);
}

fn observed(holder: Option<&str>, seconds: Option<i64>, since: Instant) -> Observation {
    Observation {
        record: LeaseRecord {
            holder: holder.map(str::to_string),
            lease_duration_seconds: seconds,
            ..LeaseRecord::default()
        },
        since,
    }
}

#[test]
fn an_orphan_is_a_lease_left_alone_a_full_lease_duration_past_its_expiry() {
    let start = Instant::now();
    let lease = Duration::from_secs(2);
    let at = |ms: u64| start + Duration::from_millis(ms);
    // Unheld (released, or never created): after one lease duration.
    let free = observed(None, Some(1), start);
    assert!(!orphaned(&free, lease, at(1_999)));
    assert!(orphaned(&free, lease, at(2_000)));
    // Held and no longer renewed: its own duration (3 s), then one more lease duration.
    let held = observed(Some("dead_1"), Some(3), start);
    assert!(!orphaned(&held, lease, at(4_999)));
    assert!(orphaned(&held, lease, at(5_000)));
    // Without a valid duration in the record, the configured one stands in.
    let odd = observed(Some("dead_1"), Some(0), start);
    assert!(!orphaned(&odd, lease, at(3_999)));
    assert!(orphaned(&odd, lease, at(4_000)));
}

#[test]
fn a_member_is_live_while_its_lease_keeps_changing() {
    let start = Instant::now();
    let lease = Duration::from_secs(2);
    let member = observed(Some("b_2"), Some(2), start);
    assert!(is_live(
        &member,
        lease,
        start + Duration::from_millis(1_999)
    ));
    assert!(!is_live(&member, lease, start + Duration::from_secs(2)));
    // A renewal restarts the clock: `observe` keeps `since` only for an equal record.
    let renewed = LeaseRecord {
        renew_time: Some("2026-11-24T06:00:01.000000Z".into()),
        ..member.record.clone()
    };
    let later = start + Duration::from_millis(1_500);
    let again = observe(Some(&member), renewed, later);
    assert!(is_live(&again, lease, start + Duration::from_millis(3_000)));
    // A deleted member's record has no holder: not live.
    let left = observed(None, None, start);
    assert!(!is_live(&left, lease, start));
}

#[test]
fn lease_names_are_dns_subdomains() {
    assert_eq!(shard_lease_name(7), "tether-shard-7");
    assert_eq!(
        member_lease_name("tether-0_9f3a1c2b"),
        "tether-member-tether-0-9f3a1c2b"
    );
    assert_eq!(
        member_lease_name("Node.Example_A"),
        "tether-member-node.example-a"
    );
    let long = member_lease_name(&"x".repeat(400));
    assert_eq!(long.len(), 253);
    assert_eq!(member_lease_name("ends_"), "tether-member-ends");
}

#[test]
fn without_shards_every_app_is_fenced_by_the_one_leadership() {
    let ownership = Ownership::whole(Leadership::always());
    assert!(ownership.for_app("web").is_leader());
    assert_eq!(ownership.shards(), 1);
    assert!(ownership.owner("web").is_none());
    assert!(ownership.is_known());
}

#[test]
fn a_seat_without_an_elector_never_leads_and_shows_the_holder() {
    let seat = Seat::new();
    let leadership = seat.leadership();
    assert!(leadership.is_known() && !leadership.is_leader());
    seat.observe_holder(Some("b_2".into()));
    assert_eq!(leadership.holder().as_deref(), Some("b_2"));
    assert!(!leadership.is_leader());
    seat.step_down("a test");
    assert_eq!(leadership.holder(), None);
    assert!(!leadership.is_leader());
}
