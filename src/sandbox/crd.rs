//! What kube-apiserver's apiextensions part does for custom resources: defaulting from
//! the CRD's structural schema (`default` values, applied where the object has nothing),
//! and the conditions of an established CRD.

use serde_json::{Value, json};

/// Applies the `default`s of a CRD version's `openAPIV3Schema` to an object, as the real
/// server does on every read and write: a property with a default that is absent from
/// an object present in the input gets the default; defaults inside defaults apply too.
pub fn apply_defaults(schema: &Value, object: &mut Value) {
    match object {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if !map.contains_key(name) {
                        if let Some(default) = property.get("default") {
                            map.insert(name.clone(), default.clone());
                        }
                    }
                    if let Some(value) = map.get_mut(name) {
                        apply_defaults(property, value);
                    }
                }
            }
            if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for value in map.values_mut() {
                    apply_defaults(additional, value);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// The conditions the CRD controllers set on a CRD whose names are accepted.
pub fn established_conditions(now: &str) -> Value {
    json!([
        {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now, "reason": "NoConflicts", "message": "no conflicts found"},
        {"type": "Established", "status": "True", "lastTransitionTime": now, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
    ])
}

pub fn is_established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}

/// The accepted names of a CRD: its names, with `listKind` filled in.
pub fn accepted_names(crd: &Value) -> Value {
    let names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut accepted = names.clone();
    if accepted.get("listKind").is_none() {
        accepted["listKind"] = format!("{}List", names["kind"].as_str().unwrap_or_default()).into();
    }
    accepted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_absent_properties_only() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "color": {"type": "string"},
            "size": {"type": "integer", "default": 1},
            "ports": {"type": "array", "items": {"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}}}
        }}}});
        let mut object = json!({"spec": {"color": "blue", "ports": [{}, {"protocol": "UDP"}]}});
        apply_defaults(&schema, &mut object);
        assert_eq!(
            object,
            json!({"spec": {"color": "blue", "size": 1, "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}]}})
        );
        let mut explicit = json!({"spec": {"size": 3}});
        apply_defaults(&schema, &mut explicit);
        assert_eq!(explicit["spec"]["size"], 3);
    }

    #[test]
    fn absent_parents_are_not_created() {
        let schema = json!({"properties": {"spec": {"properties": {"size": {"default": 1}}}}});
        let mut object = json!({"metadata": {}});
        apply_defaults(&schema, &mut object);
        assert_eq!(object, json!({"metadata": {}}));
    }

    #[test]
    fn established_crds_are_recognised() {
        let mut crd = json!({"spec": {"names": {"kind": "Widget", "plural": "widgets"}}});
        assert!(!is_established(&crd));
        crd["status"]["conditions"] = established_conditions("2026-01-01T00:00:00Z");
        assert!(is_established(&crd));
        assert_eq!(accepted_names(&crd)["listKind"], "WidgetList");
    }
}
