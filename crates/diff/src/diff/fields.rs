//! What another field manager owns, read from `managedFields[].fieldsV1` (through
//! [`FieldSet`], the same reader server-side apply uses), so that rules can ignore
//! the fields an HPA or a controller owns (an HPA's `spec.replicas`).

use serde_json::Value;

use tether_schema::{FieldSet, PathElement};

/// The paths a FieldsV1 set owns down to the leaves: a list item owned together with
/// some of its fields yields those fields, not the whole item.
pub fn owned_leaves(fields: &Value) -> Vec<Vec<PathElement>> {
    let Ok(set) = FieldSet::from_fields_v1(fields) else {
        return Vec::new();
    };
    let paths = set.paths();
    paths
        .iter()
        .filter(|p| !paths.iter().any(|q| q.len() > p.len() && q.starts_with(p)))
        .cloned()
        .collect()
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

/// Where one step of a path leads inside a value: a map key or a list position.
enum Slot<'p> {
    Key(&'p str),
    Index(usize),
}

fn slot<'p>(step: &'p PathElement, value: &Value) -> Option<Slot<'p>> {
    // A key field an item leaves out is one the server defaults (a port's
    // protocol): the item matches on the key fields it names, as the comparison does.
    let matches = |keys: &[(String, Value)], item: &Value| {
        keys.iter().any(|(k, _)| item.get(k).is_some())
            && keys
                .iter()
                .all(|(k, v)| item.get(k).is_none_or(|iv| key_value_eq(iv, v)))
    };
    match (step, value) {
        (PathElement::Field(f), Value::Object(m)) => m.contains_key(f).then_some(Slot::Key(f)),
        (PathElement::Key(keys), Value::Array(items)) => items
            .iter()
            .position(|item| matches(keys, item))
            .map(Slot::Index),
        (PathElement::Index(i), Value::Array(items)) => {
            (*i < items.len()).then_some(Slot::Index(*i))
        }
        (PathElement::Value(v), Value::Array(items)) => {
            items.iter().position(|i| i == v).map(Slot::Index)
        }
        _ => None,
    }
}

/// The value at `path` inside `value`, if the path exists there.
pub fn lookup<'v>(value: &'v Value, path: &[PathElement]) -> Option<&'v Value> {
    path.iter()
        .try_fold(value, |cur, step| match slot(step, cur)? {
            Slot::Key(k) => cur.get(k),
            Slot::Index(i) => cur.get(i),
        })
}

/// Removes the field at `path` from `value`, if present. Key fields of a list item are
/// kept: removing them would make the item unmatchable.
pub fn remove_owned(value: &mut Value, path: &[PathElement]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if let (PathElement::Field(name), Some(PathElement::Key(keys))) = (last, parents.last())
        && keys.iter().any(|(k, _)| k == name)
    {
        return;
    }
    let mut cur = value;
    for step in parents {
        let next = match slot(step, cur) {
            Some(Slot::Key(k)) => cur.get_mut(k),
            Some(Slot::Index(i)) => cur.get_mut(i),
            None => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match (slot(last, cur), cur) {
        (Some(Slot::Key(k)), Value::Object(m)) => {
            m.shift_remove(k);
        }
        (Some(Slot::Index(i)), Value::Array(items)) => {
            items.remove(i);
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
            PathElement::Field("spec".into()),
            PathElement::Field("replicas".into())
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
