//! Events: events.k8s.io/v1 Events are core/v1 Events under renamed fields
//! (`pkg/apis/events/v1/conversion.go`).

use serde_json::{Value, json};

/// core/v1 Event → events.k8s.io/v1 Event.
pub(crate) fn event_to_events(core: Value) -> Value {
    let text = |key: &str| {
        core.get(key)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            .cloned()
    };
    let or = |key: &str, zero: Value| core.get(key).cloned().unwrap_or(zero);
    fields_keeping_nulls(vec![
        ("kind", Some(json!("Event"))),
        ("apiVersion", Some(json!("events.k8s.io/v1"))),
        ("metadata", Some(or("metadata", json!({})))),
        ("eventTime", Some(or("eventTime", Value::Null))),
        (
            "series",
            core.get("series").filter(|s| s.is_object()).cloned(),
        ),
        ("reportingController", text("reportingComponent")),
        ("reportingInstance", text("reportingInstance")),
        ("action", text("action")),
        ("reason", text("reason")),
        ("regarding", Some(or("involvedObject", json!({})))),
        (
            "related",
            core.get("related").filter(|s| s.is_object()).cloned(),
        ),
        ("note", text("message")),
        ("type", text("type")),
        ("deprecatedSource", Some(or("source", json!({})))),
        (
            "deprecatedFirstTimestamp",
            Some(or("firstTimestamp", Value::Null)),
        ),
        (
            "deprecatedLastTimestamp",
            Some(or("lastTimestamp", Value::Null)),
        ),
        (
            "deprecatedCount",
            core.get("count")
                .filter(|c| c.as_i64().is_some_and(|c| c != 0))
                .cloned(),
        ),
    ])
}

/// events.k8s.io/v1 Event → core/v1 Event.
pub(crate) fn event_to_core(event: Value) -> Value {
    let text = |key: &str| {
        event
            .get(key)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            .cloned()
    };
    let or = |key: &str, zero: Value| event.get(key).cloned().unwrap_or(zero);
    fields_keeping_nulls(vec![
        ("kind", Some(json!("Event"))),
        ("apiVersion", Some(json!("v1"))),
        ("metadata", Some(or("metadata", json!({})))),
        ("involvedObject", Some(or("regarding", json!({})))),
        ("reason", text("reason")),
        ("message", text("note")),
        ("source", Some(or("deprecatedSource", json!({})))),
        (
            "firstTimestamp",
            Some(or("deprecatedFirstTimestamp", Value::Null)),
        ),
        (
            "lastTimestamp",
            Some(or("deprecatedLastTimestamp", Value::Null)),
        ),
        (
            "count",
            event
                .get("deprecatedCount")
                .filter(|c| c.as_i64().is_some_and(|c| c != 0))
                .cloned(),
        ),
        ("type", text("type")),
        ("eventTime", Some(or("eventTime", Value::Null))),
        (
            "series",
            event.get("series").filter(|s| s.is_object()).cloned(),
        ),
        ("action", text("action")),
        (
            "related",
            event.get("related").filter(|s| s.is_object()).cloned(),
        ),
        (
            "reportingComponent",
            Some(text("reportingController").unwrap_or_else(|| json!(""))),
        ),
        (
            "reportingInstance",
            Some(text("reportingInstance").unwrap_or_else(|| json!(""))),
        ),
    ])
}

/// Like `fields`, but a present `null` stays: Go writes zero times as `null`.
fn fields_keeping_nulls(pairs: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect(),
    )
}
