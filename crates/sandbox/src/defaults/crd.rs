//! CustomResourceDefinitions and custom resources: CRD defaults and Established
//! status, structural pruning and schema defaults of custom resources.

use serde_json::{Value, json};

use super::{Obj, child, is_unset, set_ptr, set_str, str_of};

/// The status the apiextensions controllers inside kube-apiserver write to a CRD
/// shortly after it is created, once its names are free: `acceptedNames` copied from
/// the (defaulted) `spec.names`, and the `NamesAccepted` and `Established` conditions
/// at `now` (an RFC 3339 timestamp). The sandbox's simulated controllers apply it; the
/// create answer itself carries the bare status of [`initial_status`].
pub fn crd_established_status(crd: &Value, now: &str) -> Value {
    let mut status = crd.get("status").cloned().unwrap_or_else(|| json!({}));
    let names = crd
        .get("spec")
        .and_then(|s| s.get("names"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(s) = status.as_object_mut() {
        s.insert(
            "conditions".into(),
            json!([
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                },
                {
                    "type": "Established",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                },
            ]),
        );
        s.insert("acceptedNames".into(), names);
    }
    status
}

/// Applies the `default`s of a CRD version's `openAPIV3Schema` to a custom resource, as
/// the real server does on every write and read: a missing property whose schema has
/// a `default` gets it, recursively through properties, `items` and
/// `additionalProperties`. `apiVersion`, `kind` and `metadata` are never touched.
pub fn default_custom_resource(schema: &Value, obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, prop) in props {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        apply_schema_default(o, key, prop);
    }
}

/// Drops the fields of a custom resource its CRD version's `openAPIV3Schema` does not
/// declare, as the real server's structural pruning does on every write: unknown
/// properties go unless the schema says `x-kubernetes-preserve-unknown-fields: true`;
/// `apiVersion`, `kind` and `metadata` stay at the root and in embedded resources.
/// Call it before [`default_custom_resource`], as the server prunes then defaults.
pub fn prune_custom_resource(schema: &Value, obj: &mut Value) {
    prune(obj, schema, true);
}

pub(super) fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

pub(super) fn prune(value: &mut Value, schema: &Value, is_resource: bool) {
    match value {
        Value::Object(o) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|s| s.is_object());
            let keeps_meta = is_resource
                || schema
                    .get("x-kubernetes-embedded-resource")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
            let preserve = preserves_unknown(schema);
            o.retain(|key, _| {
                (keeps_meta && matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
                    || props.is_some_and(|p| p.contains_key(key))
                    || extra.is_some()
                    || preserve
            });
            for (key, child_value) in o.iter_mut() {
                if keeps_meta && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(child_schema) = props.and_then(|p| p.get(key)).or(extra) {
                    prune(child_value, child_schema, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    prune(item, item_schema, false);
                }
            }
        }
        _ => {}
    }
}

pub(super) fn apply_schema_default(parent: &mut Obj, key: &str, schema: &Value) {
    if is_unset(parent.get(key))
        && let Some(default) = schema.get("default")
    {
        parent.insert(key.to_string(), default.clone());
    }
    if let Some(value) = parent.get_mut(key) {
        apply_schema_defaults_within(value, schema);
    }
}

pub(super) fn apply_schema_defaults_within(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(o) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (key, prop) in props {
                    apply_schema_default(o, key, prop);
                }
            }
            if let Some(extra) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for v in o.values_mut() {
                    apply_schema_defaults_within(v, extra);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_schema_defaults_within(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

pub(super) fn default_crd(o: &mut Obj) {
    let storage_version = o
        .get("spec")
        .and_then(|s| s.get("versions"))
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .cloned();
    if let Some(spec) = child(o, "spec") {
        set_str(spec, "scope", "Namespaced");
        if let Some(names) = child(spec, "names") {
            let kind = str_of(names, "kind").to_string();
            set_str(names, "singular", &kind.to_lowercase());
            if !kind.is_empty() {
                set_str(names, "listKind", &format!("{kind}List"));
            }
        }
        set_ptr(spec, "conversion", json!({"strategy": "None"}));
        if let Some(service) = child(spec, "conversion")
            .and_then(|c| child(c, "webhook"))
            .and_then(|w| child(w, "clientConfig"))
            .and_then(|c| child(c, "service"))
        {
            set_ptr(service, "port", json!(443));
        }
    }
    if let Some(version) = storage_version
        && let Some(status) = child(o, "status")
    {
        let stored = status
            .entry("storedVersions")
            .or_insert_with(|| Value::Array(Vec::new()));
        if stored.is_null() {
            *stored = Value::Array(Vec::new());
        }
        if let Some(list) = stored.as_array_mut()
            && list.is_empty()
        {
            list.push(version);
        }
    }
}
