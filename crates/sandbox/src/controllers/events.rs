//! Events, as the simulated controllers record what they do: core `v1` Events written
//! the way client-go's event recorder (`tools/record`) writes them for
//! kube-controller-manager, so that `kubectl get events` and the Events section of
//! `kubectl describe` show what a real cluster shows.
//!
//! The recorder names an Event `<object>.<nanoseconds, hex>`, points `involvedObject`
//! at the object (with the resourceVersion it had), and, as its correlator does, counts
//! a repeat of the same event (same object, type, reason, message and source) on the
//! existing Event instead of writing a new one.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::State;
use crate::registry::ResourceType;
use crate::status::ApiError;

/// An Event's type: `Normal` or `Warning`, as `v1.EventTypeNormal` and `v1.EventTypeWarning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What one controller reports about one object.
pub(crate) struct Record<'a> {
    /// The object the event is about, as stored (kind, apiVersion and metadata are read).
    pub(crate) object: &'a Value,
    pub(crate) event_type: EventType,
    pub(crate) reason: &'a str,
    pub(crate) message: String,
    /// The controller's name in kube-controller-manager (`deployment-controller`).
    pub(crate) component: &'a str,
    /// The field manager the write is recorded under.
    pub(crate) manager: &'a str,
}

/// Writes the Event (or counts a repeat on the existing one). An Event is a report,
/// not part of the work: a controller logs a failure to record one and goes on, as the
/// real recorder does.
pub(crate) fn record(state: &State, record: Record<'_>) {
    if let Err(err) = write(state, &record) {
        tracing::debug!(reason = record.reason, error = %err, "cannot record an event");
    }
}

fn write(state: &State, record: &Record<'_>) -> Result<(), ApiError> {
    let Some(events) = state.registry().find("", "v1", "events") else {
        return Ok(());
    };
    let metadata = &record.object["metadata"];
    let namespace = metadata["namespace"]
        .as_str()
        .filter(|ns| !ns.is_empty())
        .unwrap_or("default")
        .to_string();
    let name = metadata["name"].as_str().unwrap_or_default();
    let involved = json!({
        "kind": record.object["kind"],
        "namespace": metadata["namespace"],
        "name": name,
        "uid": metadata["uid"],
        "apiVersion": record.object["apiVersion"],
        "resourceVersion": metadata["resourceVersion"],
    });
    let now = chrono::Utc::now();
    let timestamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);

    if let Some((key, stored, mut existing)) =
        repeat_of(state, &events, &namespace, &involved, record)
    {
        let count = existing["count"].as_i64().unwrap_or(1) + 1;
        existing["count"] = count.into();
        existing["lastTimestamp"] = timestamp.into();
        state.write_as_controller(&events, &key, Some(stored), existing, record.manager, None)?;
        return Ok(());
    }

    let nanos = now.timestamp_nanos_opt().unwrap_or_default();
    let event_name = format!("{name}.{nanos:x}");
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name, "namespace": namespace},
        "involvedObject": involved,
        "reason": record.reason,
        "message": record.message,
        "source": {"component": record.component},
        "firstTimestamp": timestamp,
        "lastTimestamp": timestamp,
        "count": 1,
        "type": record.event_type.as_str(),
        "eventTime": null,
        "reportingComponent": record.component,
        "reportingInstance": "",
    });
    state.write_as_controller(
        &events,
        &(namespace, event_name),
        None,
        event,
        record.manager,
        None,
    )?;
    Ok(())
}

type Repeat = (crate::store::ObjectKey, Arc<crate::store::Stored>, Value);

/// The Event this one repeats: same object, type, reason, message and source.
fn repeat_of(
    state: &State,
    events: &ResourceType,
    namespace: &str,
    involved: &Value,
    record: &Record<'_>,
) -> Option<Repeat> {
    let (_, items) = state.store.list(&events.key(), Some(namespace));
    items.into_iter().rev().find_map(|(key, stored)| {
        let event = stored.value();
        let same = event["involvedObject"]["uid"] == involved["uid"]
            && event["involvedObject"]["kind"] == involved["kind"]
            && event["type"] == record.event_type.as_str()
            && event["reason"] == record.reason
            && event["message"] == record.message.as_str()
            && event["source"]["component"] == record.component;
        same.then_some((key, stored, event))
    })
}
