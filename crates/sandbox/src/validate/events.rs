//! The checks an Event written at events.k8s.io/v1 passes and a core/v1 one does not:
//! kube-apiserver validates Events by the version they were written in
//! (`ValidateEventCreate`), strictly for events.k8s.io and leniently for core/v1,
//! whose old clients leave the newer fields empty.

use serde_json::Value;

use super::FieldError;

/// Upstream's limit on `reportingInstance`, `action` and `reason`.
const LENGTH_LIMIT: usize = 128;

/// The errors of an events.k8s.io/v1 Event (in that version's field names) on create.
pub(crate) fn validate_create(event: &Value) -> Vec<FieldError> {
    let text = |field: &str| event.get(field).and_then(Value::as_str).unwrap_or_default();
    let set = |field: &str| event.get(field).is_some_and(|v| !v.is_null());
    let mut errors = Vec::new();
    // What legacy validation asks of any Event that has an eventTime.
    if set("eventTime") {
        if text("reportingController").is_empty() {
            errors.push(FieldError::required("reportingController", ""));
        }
        for field in ["reportingInstance", "action", "reason"] {
            let value = text(field);
            if value.is_empty() {
                errors.push(FieldError::required(field, ""));
            } else if value.len() > LENGTH_LIMIT {
                errors.push(FieldError::invalid_str(
                    field,
                    "",
                    &format!("can have at most {LENGTH_LIMIT} characters"),
                ));
            }
        }
    } else {
        errors.push(FieldError::required("eventTime", ""));
    }
    let kind = text("type");
    if kind != "Normal" && kind != "Warning" {
        errors.push(FieldError::invalid_str(
            "type",
            "",
            &format!("has invalid value: {kind}"),
        ));
    }
    for field in ["deprecatedFirstTimestamp", "deprecatedLastTimestamp"] {
        if set(field) {
            errors.push(FieldError::invalid_str(field, "", "needs to be unset"));
        }
    }
    if event["deprecatedCount"].as_i64().is_some_and(|c| c != 0) {
        errors.push(FieldError::invalid_str(
            "deprecatedCount",
            "",
            "needs to be unset",
        ));
    }
    let source = &event["deprecatedSource"];
    if ["component", "host"]
        .iter()
        .any(|f| source[*f].as_str().is_some_and(|s| !s.is_empty()))
    {
        errors.push(FieldError::invalid_str(
            "deprecatedSource",
            "",
            "needs to be unset",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_complete_event_passes() {
        let event = json!({"eventTime": "2026-11-24T09:00:00.000000Z", "reportingController": "example.com/ctl",
            "reportingInstance": "ctl-0", "action": "Sync", "reason": "Synced", "type": "Normal"});
        assert_eq!(validate_create(&event), []);
    }

    #[test]
    fn missing_and_deprecated_fields_are_refused_as_upstream_words_them() {
        let errors = validate_create(
            &json!({"type": "Info", "deprecatedCount": 2, "deprecatedSource": {"component": "x"}}),
        );
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "eventTime: Required value",
                "type: Invalid value: \"\": has invalid value: Info",
                "deprecatedCount: Invalid value: \"\": needs to be unset",
                "deprecatedSource: Invalid value: \"\": needs to be unset",
            ]
        );
        let errors = validate_create(
            &json!({"eventTime": "2026-11-24T09:00:00.000000Z", "type": "Normal", "reason": "x".repeat(129)}),
        );
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "reportingController",
                "reportingInstance",
                "action",
                "reason"
            ]
        );
    }
}
