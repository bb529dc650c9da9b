//! Who changed a drifted field: the field manager whose `managedFields` entry in the
//! live object owns it (`kubectl-edit`, `kubectl-client-side-apply`, an operator), so
//! a drift report can say "spec.replicas changed by kubectl at 12:04". Pure: it reads
//! the live object the diff stage already has.

use serde::Serialize;
use serde_json::Value;

use super::fields::key_value_eq;
use super::path::{FieldPath, Segment};
use tether_schema::{FieldSet, PathElement};

/// The manager that last wrote a field, as its `managedFields` entry records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedBy {
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: String,
    /// When the manager last wrote the object (RFC 3339, as the server records it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

impl ChangedBy {
    /// `changed by kubectl-edit (Update) at 2026-11-24T12:04:00Z`, as reports print it.
    pub fn phrase(&self) -> String {
        let mut out = format!("changed by {} ({})", self.manager, self.operation);
        if let Some(time) = &self.time {
            out.push_str(" at ");
            out.push_str(time);
        }
        out
    }
}

/// How closely an owned path covers a changed one: the exact field beats a parent
/// owned atomically (a whole list) and a child (part of a map that changed whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cover {
    Related,
    Exact,
}

fn same_step(owned: &PathElement, changed: &Segment) -> bool {
    match (owned, changed) {
        (PathElement::Field(a), Segment::Field(b)) => a == b,
        (PathElement::Index(a), Segment::Index(b)) => a == b,
        // The change names the key fields the item has; the server's key may carry
        // more (a port's protocol), so the named ones must agree.
        (PathElement::Key(owned), Segment::Key(named)) => named.iter().all(|(k, v)| {
            owned
                .iter()
                .find(|(ok, _)| ok == k)
                .is_none_or(|(_, ov)| key_value_eq(ov, v))
        }),
        _ => false,
    }
}

fn cover(owned: &[PathElement], changed: &[Segment]) -> Option<Cover> {
    let common = owned
        .iter()
        .zip(changed)
        .take_while(|(o, c)| same_step(o, c))
        .count();
    if common == owned.len() && common == changed.len() {
        Some(Cover::Exact)
    } else if common == owned.len().min(changed.len()) && common > 0 {
        Some(Cover::Related)
    } else {
        None
    }
}

/// The manager that last wrote the field at `path` of `live`, if its `managedFields`
/// say. Several entries may claim it (shared ownership of an equal value): the most
/// recent write wins, then the closest claim.
pub fn changed_by(live: &Value, path: &FieldPath) -> Option<ChangedBy> {
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)?;
    let changed = path.segments();
    let mut best: Option<(&str, Cover, &Value)> = None;
    for entry in entries {
        let (Some(_), Some(fields)) = (entry.get("manager"), entry.get("fieldsV1")) else {
            continue;
        };
        let Ok(set) = FieldSet::from_fields_v1(fields) else {
            continue;
        };
        let Some(claim) = set.paths().iter().filter_map(|p| cover(p, changed)).max() else {
            continue;
        };
        // RFC 3339 times in UTC as the server writes them compare as strings.
        let time = entry.get("time").and_then(Value::as_str).unwrap_or("");
        if best.is_none_or(|(t, c, _)| (time, claim) >= (t, c)) {
            best = Some((time, claim, entry));
        }
    }
    let (_, _, entry) = best?;
    let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ChangedBy {
        manager: text("manager")?,
        operation: text("operation").unwrap_or_default(),
        time: text("time"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(segments: Vec<Segment>) -> FieldPath {
        FieldPath(segments)
    }

    fn field(name: &str) -> Segment {
        Segment::Field(name.into())
    }

    fn deployment() -> Value {
        json!({
            "metadata": {"name": "web", "managedFields": [
                {"manager": "tether", "operation": "Apply", "time": "2026-11-24T12:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:template": {"f:spec": {"f:containers": {
                        "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}
                    }}}}}},
                {"manager": "kubectl", "operation": "Update", "subresource": "scale",
                 "time": "2026-11-24T12:04:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                {"manager": "kubectl-edit", "operation": "Update",
                 "time": "2026-11-24T12:05:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"web\"}": {"f:env": {}}
                 }}}}}}
            ]},
            "spec": {"replicas": 5}
        })
    }

    #[test]
    fn the_manager_owning_the_exact_field_changed_it() {
        let by = changed_by(&deployment(), &path(vec![field("spec"), field("replicas")]));
        assert_eq!(
            by,
            Some(ChangedBy {
                manager: "kubectl".into(),
                operation: "Update".into(),
                time: Some("2026-11-24T12:04:00Z".into()),
            })
        );
        assert_eq!(
            by.as_ref().unwrap().phrase(),
            "changed by kubectl (Update) at 2026-11-24T12:04:00Z"
        );
        let json = serde_json::to_value(by).unwrap();
        assert_eq!(json["manager"], "kubectl");
        assert_eq!(json["operation"], "Update");
    }

    #[test]
    fn a_list_item_is_matched_by_its_key() {
        let web = Segment::Key(vec![("name".into(), json!("web"))]);
        let containers = |tail: Vec<Segment>| {
            let mut p = vec![
                field("spec"),
                field("template"),
                field("spec"),
                field("containers"),
                web.clone(),
            ];
            p.extend(tail);
            path(p)
        };
        let image = changed_by(&deployment(), &containers(vec![field("image")])).unwrap();
        assert_eq!(image.manager, "tether");
        assert_eq!(image.operation, "Apply");
        // A field added inside the item: the later writer of a field within it.
        let env = changed_by(&deployment(), &containers(vec![field("env")])).unwrap();
        assert_eq!(env.manager, "kubectl-edit");
        let other = Segment::Key(vec![("name".into(), json!("side"))]);
        let side = path(vec![
            field("spec"),
            field("template"),
            field("spec"),
            field("containers"),
            other,
            field("image"),
        ]);
        assert_eq!(changed_by(&deployment(), &side), None);
    }

    #[test]
    fn a_parent_or_child_claim_counts_and_the_latest_write_wins() {
        // A change to the whole labels map: the manager owning one of its keys.
        let labels = changed_by(
            &deployment(),
            &path(vec![field("metadata"), field("labels")]),
        );
        assert_eq!(labels.unwrap().manager, "tether");
        // Two managers sharing the field: the more recent one.
        let mut live = deployment();
        live["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:replicas"] = json!({});
        let replicas = changed_by(&live, &path(vec![field("spec"), field("replicas")]));
        assert_eq!(replicas.unwrap().manager, "kubectl");
    }

    #[test]
    fn nothing_is_claimed_without_managed_fields_or_with_broken_ones() {
        let replicas = path(vec![field("spec"), field("replicas")]);
        assert_eq!(
            changed_by(&json!({"spec": {"replicas": 1}}), &replicas),
            None
        );
        let broken = json!({"metadata": {"managedFields": [
            {"manager": "x", "fieldsV1": {"garbage": 1}},
            {"manager": "y"},
            {"fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]}});
        assert_eq!(changed_by(&broken, &replicas), None);
        assert_eq!(changed_by(&deployment(), &path(vec![field("data")])), None);
    }
}
