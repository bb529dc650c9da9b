//! The App status as written back: rendered from the app's status, stable in a steady state.

use chrono::TimeZone;

use super::*;
use tether_core::report::status::{
    ConditionStatus, ConditionType, PassInfo, RevisionInfo, SyncStatus, reason,
};
use tether_core::sync::health::Health;

fn entry(generation: i64) -> Entry {
    Entry {
        namespace: "t1".into(),
        name: "web".into(),
        generation,
        invalid: None,
        written: None,
    }
}

fn condition<'v>(status: &'v Value, kind: &str) -> &'v Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind}: {status}"))
}

fn passed(sha: &str, sync: SyncStatus) -> AppStatus {
    let at = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .expect("a time");
    let mut status = AppStatus::new("t1.web");
    status.sync = sync;
    status.health = Health::Healthy;
    status.revision = Some(RevisionInfo {
        sha: sha.into(),
        subject: "s".into(),
    });
    status.last_pass = Some(PassInfo {
        finished_at: at,
        duration_ms: 7,
        result: PassResult::Succeeded,
        error: None,
        changed: 0,
    });
    status.set_condition(
        ConditionType::Ready,
        ConditionStatus::True,
        reason::SUCCEEDED,
        "",
        at,
    );
    status
}

#[test]
fn before_the_first_pass_an_app_is_reconciling_and_keeps_what_it_had() {
    let mut e = entry(2);
    e.written = Some(json!({"observedGeneration": 1, "lastAppliedRevision": "abc"}));
    let status = render_status(&e, Some(&AppStatus::new("t1.web")));
    assert_eq!(condition(&status, "Reconciling")["status"], "True");
    assert_eq!(condition(&status, "Ready")["status"], "Unknown");
    assert_eq!(
        status["observedGeneration"], 1,
        "the old spec's, until a pass ends"
    );
    assert_eq!(status["lastAppliedRevision"], "abc");
}

#[test]
fn a_finished_pass_is_observed_and_a_steady_state_renders_the_same_status() {
    let mut e = entry(3);
    let first = render_status(&e, Some(&passed("abc", SyncStatus::Synced)));
    assert_eq!(first["observedGeneration"], 3);
    assert_eq!(first["lastAppliedRevision"], "abc");
    assert_eq!(
        first["lastPass"],
        json!({"result": "Succeeded", "changed": 0})
    );
    assert_eq!(condition(&first, "Reconciling")["status"], "False");
    e.written = Some(first.clone());
    // Later passes, same outcome: nothing to write, transition times kept.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        render_status(&e, Some(&passed("abc", SyncStatus::Synced))),
        first
    );
    // Out of sync at a new revision: attempted moves, applied stays.
    let drifting = render_status(&e, Some(&passed("def", SyncStatus::OutOfSync)));
    assert_eq!(drifting["lastAttemptedRevision"], "def");
    assert_eq!(drifting["lastAppliedRevision"], "abc");
}

#[test]
fn a_spec_the_parser_refuses_stalls_the_app_with_its_message() {
    let mut e = entry(4);
    e.invalid = Some("App t1/web: spec.source.interval: bad".into());
    let status = render_status(&e, None);
    assert_eq!(status["observedGeneration"], 4);
    let stalled = condition(&status, "Stalled");
    assert_eq!(
        (&stalled["status"], &stalled["reason"]),
        (&json!("True"), &json!("SpecInvalid"))
    );
    assert_eq!(
        condition(&status, "Ready")["message"],
        "App t1/web: spec.source.interval: bad"
    );
}

#[test]
fn an_app_waiting_for_its_dependencies_says_which_before_its_first_pass() {
    let mut status = AppStatus::new("t1.web");
    let message = "waiting for t1/db (not found)";
    status.set_condition(
        ConditionType::Ready,
        ConditionStatus::False,
        DEPENDENCY_NOT_READY,
        message,
        Utc::now(),
    );
    let rendered = render_status(&entry(1), Some(&status));
    let ready = condition(&rendered, "Ready");
    assert_eq!(
        (&ready["reason"], &ready["message"]),
        (&json!(DEPENDENCY_NOT_READY), &json!(message))
    );
    assert_eq!(condition(&rendered, "Reconciling")["status"], "False");
}
