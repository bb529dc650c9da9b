//! Object metadata: names per kind, generateName, namespace, labels, annotations.

use serde_json::Value;

use super::names::{
    dns1035_errors, label_errors, label_value_errors, path_segment_errors, qualified_name_errors,
    subdomain_errors,
};
use super::{ANNOTATIONS_MAX_BYTES, FieldError, invalid_each, sorted, str_at, strings};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NameRule {
    Subdomain,
    Label,
    Dns1035Label,
    PathSegment,
}

pub(super) fn name_rule(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace") => NameRule::Label,
        ("", "Service") => NameRule::Dns1035Label,
        ("", "PersistentVolume") | ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

pub(super) fn name_errors(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    // A generateName prefix may end in a dash: mask it as `maskTrailingDash` does.
    let masked;
    let name = if prefix && name.len() > 1 && name.ends_with('-') {
        masked = format!("{}a", &name[..name.len() - 2]);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::Subdomain => subdomain_errors(name),
        NameRule::Label => label_errors(name),
        NameRule::Dns1035Label => dns1035_errors(name),
        NameRule::PathSegment => path_segment_errors(name, prefix),
    }
}

pub(super) fn validate_object_meta(
    meta: &Value,
    namespaced: bool,
    rule: NameRule,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let generate_name = str_at(meta, "generateName");
    if !generate_name.is_empty() {
        invalid_each(
            &format!("{path}.generateName"),
            generate_name,
            name_errors(rule, generate_name, true),
            errs,
        );
    }
    let name = str_at(meta, "name");
    if name.is_empty() {
        errs.push(FieldError::required(
            &format!("{path}.name"),
            "name or generateName is required",
        ));
    } else {
        invalid_each(
            &format!("{path}.name"),
            name,
            name_errors(rule, name, false),
            errs,
        );
    }
    let namespace = str_at(meta, "namespace");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(&format!("{path}.namespace"), ""));
        } else {
            invalid_each(
                &format!("{path}.namespace"),
                namespace,
                label_errors(namespace),
                errs,
            );
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            &format!("{path}.namespace"),
            "not allowed on this type",
        ));
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(
            &format!("{path}.generation"),
            &g.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    validate_labels(meta.get("labels"), &format!("{path}.labels"), errs);
    validate_annotations(
        meta.get("annotations"),
        &format!("{path}.annotations"),
        errs,
    );
    for f in strings(meta.get("finalizers")) {
        invalid_each(
            &format!("{path}.finalizers"),
            &f,
            qualified_name_errors(&f),
            errs,
        );
    }
}

pub(super) fn validate_labels(labels: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(labels) = labels.and_then(Value::as_object) else {
        return;
    };
    for (key, value) in sorted(labels) {
        invalid_each(path, key, qualified_name_errors(key), errs);
        let value = value.as_str().unwrap_or("");
        invalid_each(path, value, label_value_errors(value), errs);
    }
}

pub(super) fn validate_annotations(
    annotations: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(annotations) = annotations.and_then(Value::as_object) else {
        return;
    };
    let mut total = 0;
    for (key, value) in sorted(annotations) {
        // Annotation keys are qualified names whose case does not matter.
        invalid_each(path, key, qualified_name_errors(&key.to_lowercase()), errs);
        total += key.len() + value.as_str().map_or(0, str::len);
    }
    if total > ANNOTATIONS_MAX_BYTES {
        errs.push(FieldError::too_long(path, ANNOTATIONS_MAX_BYTES));
    }
}
