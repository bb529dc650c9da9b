//! Notification channels: a signed webhook with the event and no secret value, no
//! request of any kind carrying one, rate limits for a flapping app, retries, and
//! delivery of what was queued after every handle is dropped.

use super::*;
use tether_testkit::assert_contains;

/// A drift report with a Deployment change and a Secret whose value sits in the
/// change and in the desired and live objects, as a careless caller could pass it.
fn drift_with_secret() -> DriftReport {
    let deployment = ObjectDiff {
        id: ObjectId {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        },
        drift: Drift::Modified(vec![Change {
            path: FieldPath(vec![
                Segment::Field("spec".into()),
                Segment::Field("replicas".into()),
            ]),
            desired: Some(json!(3)),
            live: Some(json!(5)),
            changed_by: None,
        }]),
        desired: Some(json!({"spec": {"replicas": 3}})),
        live: Some(json!({"spec": {"replicas": 5}})),
    };
    let secret = ObjectDiff {
        id: ObjectId {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some("shop".into()),
            name: "db".into(),
        },
        drift: Drift::Modified(vec![
            Change {
                path: FieldPath(vec![
                    Segment::Field("stringData".into()),
                    Segment::Field("password".into()),
                ]),
                desired: Some(json!(SECRET_VALUE)),
                live: Some(json!("old")),
                changed_by: None,
            },
            Change {
                path: FieldPath(vec![
                    Segment::Field("data".into()),
                    Segment::Key(vec![("name".into(), json!(SECRET_VALUE))]),
                ]),
                desired: Some(json!(SECRET_VALUE)),
                live: None,
                changed_by: None,
            },
        ]),
        desired: Some(json!({"stringData": {"password": SECRET_VALUE}})),
        live: Some(json!({"stringData": {"password": "old"}})),
    };
    let missing = ObjectDiff {
        id: ObjectId {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: "settings".into(),
        },
        drift: Drift::Missing,
        desired: Some(json!({"data": {"a": "b"}})),
        live: None,
    };
    DriftReport {
        revision: Some(SHA.into()),
        objects: vec![deployment, secret, missing],
        ..DriftReport::default()
    }
}

fn revision() -> Revision {
    Revision {
        sha: SHA.into(),
        subject: "Scale web to 3".into(),
    }
}

fn channels(yaml: &str) -> Vec<Arc<tether_core::report::notify::Channel>> {
    let configs: Vec<NotificationConfig> = serde_saphyr::from_str(yaml).unwrap();
    resolve_channels(&configs).unwrap()
}

fn hmac_hex(key: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

#[tokio::test]
async fn a_signed_webhook_carries_the_event_and_no_secret_value() {
    let server = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = secret_file(&dir, "hmac", "hmac-key-1");
    let channels = channels(&format!(
        "- type: webhook\n  url: {}/hooks/tether\n  secretFile: {}\n",
        server.base,
        key.display()
    ));
    let notifier = Notifier::start(fast()).unwrap();
    let event = Event::from_drift(
        "shop",
        EventKind::DriftDetected,
        Some(&revision()),
        &drift_with_secret(),
    );
    assert_eq!(notifier.notify(&channels, event), 1);
    notifier.flush().await;

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let hook = &seen[0];
    assert_eq!(hook.path, "/hooks/tether");
    assert_eq!(hook.header("content-type"), "application/json");
    assert_eq!(hook.header("x-tether-event"), "driftDetected");
    assert_eq!(
        hook.header("x-tether-signature-256"),
        format!("sha256={}", hmac_hex("hmac-key-1", &hook.body)),
        "HMAC-SHA256 of the exact body, under the key without its newline"
    );
    let body = hook.json();
    assert_eq!(
        body["deliveryId"].as_str(),
        Some(hook.header("x-tether-delivery"))
    );
    assert_eq!(body["app"], "shop");
    assert_eq!(body["event"], "driftDetected");
    assert_eq!(
        body["revision"],
        json!({"sha": SHA, "subject": "Scale web to 3"})
    );
    assert_eq!(
        body["summary"],
        json!({"InSync": 0, "Modified": 2, "Missing": 1, "Extra": 0, "Conflict": 0})
    );
    assert_eq!(body["suppressed"], 0);
    assert_eq!(
        body["objects"],
        json!([
            {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web",
             "status": "Modified", "paths": ["spec.replicas"]},
            {"apiVersion": "v1", "kind": "Secret", "namespace": "shop", "name": "db",
             "status": "Modified", "paths": ["stringData.password", "data"]},
            {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "settings",
             "status": "Missing"},
        ])
    );
    assert!(body.get("timestamp").is_some());
    notifier.shutdown().await;
}

#[tokio::test]
async fn no_request_of_any_kind_carries_a_secret_value() {
    let server = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let slack_url = secret_file(
        &dir,
        "slack",
        &format!("{}/services/T0/B0/XYZ", server.base),
    );
    let key = secret_file(&dir, "hmac", "k");
    let channels = channels(&format!(
        "- type: slack\n  urlFile: {}\n  minInterval: 0s\n- type: webhook\n  url: {}/hook\n  secretFile: {}\n  minInterval: 0s\n",
        slack_url.display(),
        server.base,
        key.display()
    ));
    let notifier = Notifier::start(fast()).unwrap();
    let mut queued = 0;
    for kind in EventKind::ALL {
        let mut event = Event::from_drift("shop", kind, Some(&revision()), &drift_with_secret());
        event.reason = Some("ApplyFailed".into());
        queued += notifier.notify(&channels, event);
    }
    let sent = 2 * EventKind::ALL.len();
    assert_eq!(queued, sent, "every event kind × 2 channels");
    notifier.flush().await;

    let seen = server.seen();
    assert_eq!(seen.len(), sent);
    for s in &seen {
        let text = String::from_utf8_lossy(&s.body);
        assert!(
            !text.contains(SECRET_VALUE),
            "{} leaks the Secret: {text}",
            s.path
        );
        assert!(
            !text.contains("\"old\""),
            "{} carries a live value: {text}",
            s.path
        );
    }
    let slack: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.path == "/services/T0/B0/XYZ")
        .collect();
    assert_eq!(slack.len(), EventKind::ALL.len());
    let text = slack[0].json()["text"].as_str().unwrap().to_string();
    assert_contains(
        &text,
        "*shop*: sync failed at `0123456789ab` Scale web to 3 (ApplyFailed)",
    );
    assert_contains(&text, "• Deployment shop/web Modified: `spec.replicas`");
    assert!(text.contains("• ConfigMap shop/settings Missing"), "{text}");
    assert!(
        slack[0].headers.get("x-tether-signature-256").is_none(),
        "Slack is not signed"
    );
    notifier.shutdown().await;
}

#[tokio::test]
async fn a_flapping_app_is_rate_limited_per_event_kind_and_the_next_message_counts_the_rest() {
    let server = Recorder::start().await;
    let channels = channels(&format!(
        "- type: webhook\n  url: {}/hook\n  minInterval: 400ms\n  events: [syncFailed, driftDetected]\n",
        server.base
    ));
    let notifier = Notifier::start(fast()).unwrap();
    let event =
        |app: &str, kind| Event::from_drift(app, kind, Some(&revision()), &DriftReport::default());

    assert_eq!(
        notifier.notify(&channels, event("shop", EventKind::SyncFailed)),
        1
    );
    assert_eq!(
        notifier.notify(&channels, event("shop", EventKind::SyncFailed)),
        0
    );
    assert_eq!(
        notifier.notify(&channels, event("shop", EventKind::SyncFailed)),
        0
    );
    // Another kind, another app: their own windows.
    assert_eq!(
        notifier.notify(&channels, event("shop", EventKind::DriftDetected)),
        1
    );
    assert_eq!(
        notifier.notify(&channels, event("cart", EventKind::SyncFailed)),
        1
    );
    // Not subscribed.
    assert_eq!(
        notifier.notify(&channels, event("shop", EventKind::DriftCorrected)),
        0
    );
    notifier.flush().await;
    assert_eq!(server.seen().len(), 3);

    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(
        notifier.notify(&channels, event("shop", EventKind::SyncFailed)),
        1
    );
    notifier.flush().await;
    let seen = server.seen();
    assert_eq!(seen.len(), 4);
    let last = seen[3].json();
    assert_eq!(
        (last["app"].as_str(), last["event"].as_str()),
        (Some("shop"), Some("syncFailed"))
    );
    assert_eq!(last["suppressed"], 2, "the two held back are counted");
    assert!(seen[0..3].iter().all(|s| s.json()["suppressed"] == 0));
    assert_eq!(notifier.stats().skipped, 2);

    // A removed and re-added app starts with a fresh window.
    notifier.forget("shop");
    assert_eq!(
        notifier.notify(&channels, event("shop", EventKind::SyncFailed)),
        1
    );
    notifier.shutdown().await;
}

#[tokio::test]
async fn a_notification_is_retried_and_a_missing_url_secret_fails_without_a_request() {
    let server = Recorder::start().await;
    server.reply([Reply::status(502)]);
    let dir = tempfile::tempdir().unwrap();
    // One app, two channels: a working webhook and a Slack whose URL file is absent.
    let channels = channels(&format!(
        "- type: webhook\n  url: {}/hook\n- type: slack\n  urlFile: {}\n",
        server.base,
        dir.path().join("absent").display()
    ));
    let notifier = Notifier::start(fast()).unwrap();
    let event = Event::from_drift(
        "shop",
        EventKind::DriftCorrected,
        Some(&revision()),
        &DriftReport::default(),
    );
    assert_eq!(notifier.notify(&channels, event), 2);
    notifier.flush().await;
    assert_eq!(server.seen().len(), 2, "502, then delivered");
    let stats = notifier.stats();
    assert_eq!((stats.delivered, stats.failed), (1, 1), "{stats:?}");
    notifier.shutdown().await;
}

#[tokio::test]
async fn dropping_every_handle_still_delivers_what_was_queued() {
    let server = Recorder::start().await;
    let notifier = Notifier::start(fast()).unwrap();
    let channels = channels(&format!("- type: webhook\n  url: {}/hook\n", server.base));
    let event = Event::from_drift("shop", EventKind::SyncFailed, None, &DriftReport::default());
    assert_eq!(notifier.clone().notify(&channels, event), 1);
    drop(notifier);
    let deadline = Instant::now() + support::POLL_TIMEOUT;
    while server.seen().is_empty() {
        assert!(Instant::now() < deadline, "the queued event was never sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(server.seen()[0].json().get("revision").is_none());
}
