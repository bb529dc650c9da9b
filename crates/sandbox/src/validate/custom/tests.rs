use serde_json::{Value, json};

use super::validate;
use crate::validate::{FieldError, FieldErrorReason};

/// A CRD version's schema with one of each rule kube-apiserver enforces.
fn schema() -> Value {
    json!({"type": "object", "required": ["spec"], "properties": {
        "spec": {"type": "object", "required": ["source"], "properties": {
            "source": {"type": "string", "minLength": 3, "maxLength": 20, "pattern": "^[a-z][a-z0-9-]*$"},
            "schedule": {"type": "string", "enum": ["hourly", "daily"]},
            "level": {"type": "integer", "enum": [1, 2]},
            "retain": {"type": "integer", "minimum": 1, "maximum": 30},
            "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true,
                      "maximum": 1, "exclusiveMaximum": true},
            "step": {"type": "integer", "multipleOf": 5},
            "startDate": {"type": "string", "format": "date"},
            "port": {"x-kubernetes-int-or-string": true},
            "targets": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
            "labels": {"type": "object", "minProperties": 1, "maxProperties": 2,
                       "additionalProperties": {"type": "string"}},
            "note": {"type": "string", "nullable": true},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}
    }})
}

fn errors_of(spec: Value) -> Vec<FieldError> {
    let mut object = json!({"apiVersion": "x.example.com/v1", "kind": "Backup",
        "metadata": {"name": "b"}, "spec": {"source": "db-main"}});
    if let (Some(base), Value::Object(extra)) = (object["spec"].as_object_mut(), spec) {
        for (k, v) in extra {
            if v.is_null() {
                base.remove(&k);
            } else {
                base.insert(k, v);
            }
        }
    }
    let mut errs = Vec::new();
    validate(&schema(), &object, &mut errs);
    errs
}

#[track_caller]
fn one(spec: Value, field: &str, reason: FieldErrorReason, message: &str) {
    let errs = errors_of(spec);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        (
            errs[0].field.as_str(),
            errs[0].reason,
            errs[0].message.as_str()
        ),
        (field, reason, message)
    );
}

#[test]
fn a_valid_object_passes_every_rule() {
    let errs = errors_of(
        json!({"schedule": "daily", "level": 2, "retain": 30, "ratio": 0.5,
        "step": 10, "startDate": "2026-11-27", "port": "http", "targets": ["a", "b"],
        "labels": {"a": "b"}, "extra": {"anything": [1, {"x": null}]}}),
    );
    assert!(errs.is_empty(), "{errs:?}");
    assert!(errors_of(json!({"port": 8080})).is_empty());
    assert!(
        errors_of(json!({"retain": 2.0})).is_empty(),
        "2.0 is an integer"
    );
}

#[test]
fn required_fields_are_required_where_their_object_is() {
    one(
        json!({"source": null}),
        "spec.source",
        FieldErrorReason::Required,
        "Required value",
    );
    let mut errs = Vec::new();
    validate(&schema(), &json!({"metadata": {"name": "b"}}), &mut errs);
    assert_eq!(errs[0].field, "spec");
    assert_eq!(errs[0].message, "Required value");
}

#[test]
fn strings_follow_length_pattern_enum_and_format() {
    use FieldErrorReason::*;
    one(
        json!({"source": "db"}),
        "spec.source",
        Invalid,
        "Invalid value: \"db\": spec.source in body should be at least 3 chars long",
    );
    one(
        json!({"source": "a-very-long-source-name"}),
        "spec.source",
        TooLong,
        "Too long: may not be more than 20 bytes",
    );
    one(
        json!({"source": "Main"}),
        "spec.source",
        Invalid,
        "Invalid value: \"Main\": spec.source in body should match '^[a-z][a-z0-9-]*$'",
    );
    one(
        json!({"schedule": "weekly"}),
        "spec.schedule",
        NotSupported,
        "Unsupported value: \"weekly\": supported values: \"hourly\", \"daily\"",
    );
    one(
        json!({"level": 3}),
        "spec.level",
        NotSupported,
        "Unsupported value: 3: supported values: \"1\", \"2\"",
    );
    one(
        json!({"startDate": "tomorrow"}),
        "spec.startDate",
        TypeInvalid,
        "Invalid value: \"tomorrow\": spec.startDate in body must be of type date: \"tomorrow\"",
    );
}

#[test]
fn numbers_follow_their_bounds() {
    use FieldErrorReason::*;
    one(
        json!({"retain": 0}),
        "spec.retain",
        Invalid,
        "Invalid value: 0: spec.retain in body should be greater than or equal to 1",
    );
    one(
        json!({"retain": 31}),
        "spec.retain",
        Invalid,
        "Invalid value: 31: spec.retain in body should be less than or equal to 30",
    );
    one(
        json!({"ratio": 0}),
        "spec.ratio",
        Invalid,
        "Invalid value: 0: spec.ratio in body should be greater than 0",
    );
    one(
        json!({"ratio": 1}),
        "spec.ratio",
        Invalid,
        "Invalid value: 1: spec.ratio in body should be less than 1",
    );
    one(
        json!({"step": 7}),
        "spec.step",
        Invalid,
        "Invalid value: 7: spec.step in body should be a multiple of 5",
    );
}

#[test]
fn lists_and_maps_follow_their_sizes() {
    use FieldErrorReason::*;
    one(
        json!({"targets": []}),
        "spec.targets",
        Invalid,
        "Invalid value: 0: spec.targets in body should have at least 1 items",
    );
    one(
        json!({"targets": ["a", "b", "c"]}),
        "spec.targets",
        TooMany,
        "Too many: 3: must have at most 2 items",
    );
    one(
        json!({"labels": {}}),
        "spec.labels",
        Invalid,
        "Invalid value: 0: spec.labels in body should have at least 1 properties",
    );
    one(
        json!({"labels": {"a": "1", "b": "2", "c": "3"}}),
        "spec.labels",
        TooMany,
        "Too many: 3: must have at most 2 items",
    );
    one(
        json!({"targets": ["a", 1]}),
        "spec.targets[1]",
        TypeInvalid,
        "Invalid value: \"integer\": spec.targets[1] in body must be of type string: \"integer\"",
    );
}

#[test]
fn types_nullable_and_int_or_string_as_kube_apiserver_words_them() {
    use FieldErrorReason::*;
    one(
        json!({"retain": "5"}),
        "spec.retain",
        TypeInvalid,
        "Invalid value: \"string\": spec.retain in body must be of type integer: \"string\"",
    );
    one(
        json!({"port": true}),
        "spec.port",
        TypeInvalid,
        "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
    );
    one(
        json!({"targets": ["a", null]}),
        "spec.targets[1]",
        TypeInvalid,
        "Invalid value: \"null\": spec.targets[1] in body must be of type string: \"null\"",
    );
    let mut object =
        json!({"metadata": {"name": "b"}, "spec": {"source": "db-main", "note": null}});
    let mut errs = Vec::new();
    validate(&schema(), &object, &mut errs);
    assert!(errs.is_empty(), "a nullable field may be null: {errs:?}");
    // A type error and the enum it fails are both reported, as kube-apiserver does.
    object["spec"]["schedule"] = json!(true);
    validate(&schema(), &object, &mut errs);
    let messages: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "Invalid value: \"boolean\": spec.schedule in body must be of type string: \"boolean\"",
            "Unsupported value: true: supported values: \"hourly\", \"daily\"",
        ]
    );
}
