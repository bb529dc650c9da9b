//! A small reader of `managedFields[].fieldsV1` (the structured-merge-diff "FieldsV1"
//! encoding): `f:<name>` a field, `k:<json>` a list item by key, `v:<json>` a set item,
//! `i:<n>` an item by position, `.` the node itself. Used to ignore the fields another
//! manager owns (an HPA's `spec.replicas`).

use serde_json::{Map, Value};

/// One step of an owned path, as FieldsV1 spells it.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedStep {
    Field(String),
    Key(Map<String, Value>),
    SetValue(Value),
    Index(usize),
}

/// The leaf paths a FieldsV1 set names: every node with no children but `.`.
pub fn owned_leaves(fields: &Value) -> Vec<Vec<OwnedStep>> {
    let mut out = Vec::new();
    let mut path = Vec::new();
    walk(fields, &mut path, &mut out);
    out
}

fn walk(node: &Value, path: &mut Vec<OwnedStep>, out: &mut Vec<Vec<OwnedStep>>) {
    let Some(map) = node.as_object() else {
        return;
    };
    let mut has_children = false;
    for (name, child) in map {
        let step = if let Some(f) = name.strip_prefix("f:") {
            OwnedStep::Field(f.to_string())
        } else if let Some(k) = name.strip_prefix("k:") {
            match serde_json::from_str::<Map<String, Value>>(k) {
                Ok(m) => OwnedStep::Key(m),
                Err(_) => continue,
            }
        } else if let Some(v) = name.strip_prefix("v:") {
            match serde_json::from_str::<Value>(v) {
                Ok(v) => OwnedStep::SetValue(v),
                Err(_) => continue,
            }
        } else if let Some(i) = name.strip_prefix("i:") {
            match i.parse() {
                Ok(i) => OwnedStep::Index(i),
                Err(_) => continue,
            }
        } else {
            continue; // "." marks the node itself
        };
        has_children = true;
        path.push(step);
        walk(child, path, out);
        path.pop();
    }
    if !has_children && !path.is_empty() {
        out.push(path.clone());
    }
}

/// The FieldsV1 sets of the named managers in an object's `metadata.managedFields`.
pub fn managed_by<'a>(object: &'a Value, managers: &[String]) -> Vec<&'a Value> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter(|e| {
                    e.get("manager")
                        .and_then(Value::as_str)
                        .is_some_and(|m| managers.iter().any(|w| w == m))
                })
                .filter_map(|e| e.get("fieldsV1"))
                .collect()
        })
        .unwrap_or_default()
}

/// Loose scalar equality for key matching: `8080` and `8080.0` are one port.
pub(crate) fn key_value_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Removes the field at `path` from `value`, if present. Key fields of a list item are
/// kept: removing them would make the item unmatchable.
pub fn remove_owned(value: &mut Value, path: &[OwnedStep]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if let (OwnedStep::Field(name), Some(OwnedStep::Key(keys))) = (last, parents.last())
        && keys.contains_key(name)
    {
        return;
    }
    let mut cur = value;
    for step in parents {
        let next = match (step, cur) {
            (OwnedStep::Field(f), Value::Object(m)) => m.get_mut(f),
            (OwnedStep::Key(keys), Value::Array(items)) => items.iter_mut().find(|item| {
                keys.iter()
                    .all(|(k, v)| item.get(k).is_some_and(|iv| key_value_eq(iv, v)))
            }),
            (OwnedStep::Index(i), Value::Array(items)) => items.get_mut(*i),
            (OwnedStep::SetValue(v), Value::Array(items)) => items.iter_mut().find(|i| *i == v),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match (last, cur) {
        (OwnedStep::Field(f), Value::Object(m)) => {
            m.shift_remove(f);
        }
        (OwnedStep::Key(keys), Value::Array(items)) => items.retain(|item| {
            !keys
                .iter()
                .all(|(k, v)| item.get(k).is_some_and(|iv| key_value_eq(iv, v)))
        }),
        (OwnedStep::SetValue(v), Value::Array(items)) => items.retain(|i| i != v),
        (OwnedStep::Index(i), Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_leaves_of_fields_v1() {
        let f = json!({
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}
            }}}},
            "f:metadata": {"f:finalizers": {"v:\"a\"": {}}}
        });
        let leaves = owned_leaves(&f);
        assert!(leaves.contains(&vec![
            OwnedStep::Field("spec".into()),
            OwnedStep::Field("replicas".into())
        ]));
        assert_eq!(leaves.len(), 4);
        let mut obj = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "web", "image": "a"}, {"name": "side", "image": "b"}]}}}});
        for l in &leaves {
            remove_owned(&mut obj, l);
        }
        assert_eq!(
            obj,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "web"}, {"name": "side", "image": "b"}]}}}})
        );
    }
}
