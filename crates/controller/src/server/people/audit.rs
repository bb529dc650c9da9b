//! The trail people leave (issue #30): each action taken through the API (sync,
//! suspend, resume, roll back, unpin) is a structured log line and, for an App object, a Kubernetes
//! Event on it (`events.k8s.io/v1`, `reportingController: tether`, the user in its
//! note), so `kubectl describe tapp` and `kubectl events` say who did what. An app of
//! the configuration file has no object to hang an Event on: the log line is its
//! trail.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::{Caller, People};
use crate::config::{APP_GROUP, APP_KIND, APP_VERSION};
use tether_core::report::status::Statuses;

/// `reportingController` of tether's Events.
pub const REPORTING_CONTROLLER: &str = "tether";
/// Who the operator is in the trail: the holder of `server.apiToken` (or anyone on an
/// open loopback API).
pub const OPERATOR: &str = "the operator (server.apiToken)";

/// The name the trail gives a caller.
pub fn who(caller: &Caller) -> &str {
    match caller {
        Caller::Operator => OPERATOR,
        Caller::User(user) => &user.name,
    }
}

/// The Event that records `action` (sync, suspend, resume) by `who` on the App
/// `namespace/name`, named as client-go names Events (`<object>.<nanoseconds hex>`).
pub fn event(
    (namespace, name): (&str, &str),
    action: &str,
    who: &str,
    instance: &str,
    now: DateTime<Utc>,
) -> Value {
    let (verb, reason) = match action {
        "sync" => ("Sync", "SyncRequested"),
        "suspend" => ("Suspend", "Suspended"),
        "resume" => ("Resume", "Resumed"),
        "roll back" => ("Rollback", "RolledBack"),
        "unpin" => ("Unpin", "Unpinned"),
        _ => ("Change", "Changed"),
    };
    let nanos = now.timestamp_nanos_opt().unwrap_or_default();
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": namespace},
        "eventTime": now.to_rfc3339_opts(SecondsFormat::Micros, true),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": verb,
        "reason": reason,
        "type": "Normal",
        "note": format!("{action} by {who} through tether's API"),
        "regarding": {
            "apiVersion": format!("{APP_GROUP}/{APP_VERSION}"),
            "kind": APP_KIND,
            "namespace": namespace,
            "name": name,
        },
    })
}

/// Logs the action, keeps it in the app's status (the dashboard's recent actions), and
/// writes its Event in the background (a failure is logged: the action itself already
/// happened).
pub fn record(
    people: Option<&People>,
    statuses: &Statuses,
    caller: &Caller,
    app: &str,
    action: &str,
) {
    let who = who(caller);
    tracing::info!(user = who, app, action, "action taken through the API");
    if statuses.with(app, |_| ()).is_some() {
        statuses.update(app, |s| s.record_action(action, who, Utc::now()));
    }
    let Some(people) = people else { return };
    let Some((namespace, name)) = app.split_once('.') else {
        return;
    };
    let instance = std::env::var("HOSTNAME").unwrap_or_else(|_| REPORTING_CONTROLLER.into());
    let event = event((namespace, name), action, who, &instance, Utc::now());
    let client = people.client.clone();
    let path = format!("/apis/events.k8s.io/v1/namespaces/{namespace}/events");
    let app = app.to_string();
    tokio::spawn(async move {
        let written = async {
            let body = serde_json::to_vec(&event).map_err(|e| e.to_string())?;
            let request = http::Request::post(path)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body)
                .map_err(|e| e.to_string())?;
            client
                .request::<Value>(request)
                .await
                .map_err(|e| e.to_string())
        };
        if let Err(err) = written.await {
            tracing::warn!(app, error = %err, "cannot record an action as an Event");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_becomes_an_event_on_its_app_naming_the_user() {
        let now = DateTime::parse_from_rfc3339("2026-11-27T12:00:00.123456Z")
            .expect("a time")
            .with_timezone(&Utc);
        let event = event(
            ("team-a", "web"),
            "sync",
            "system:serviceaccount:team-a:operator",
            "tether-0",
            now,
        );
        assert_eq!(event["reportingController"], "tether");
        assert_eq!(event["eventTime"], "2026-11-27T12:00:00.123456Z");
        assert_eq!(event["reason"], "SyncRequested");
        assert_eq!(event["action"], "Sync");
        assert_eq!(
            event["note"],
            "sync by system:serviceaccount:team-a:operator through tether's API"
        );
        assert_eq!(event["regarding"]["kind"], "App");
        assert_eq!(event["regarding"]["name"], "web");
        assert_eq!(event["metadata"]["namespace"], "team-a");
        assert!(
            event["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("web."))
        );
    }
}
