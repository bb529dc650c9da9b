//! What prune may delete: what the inventory holds and the desired set no longer has,
//! guarded against the accidents Argo CD and Flux users fear most (an empty render
//! deleting everything, a bad revision deleting most of an app, a Namespace deleted
//! with another app's objects in it). The verdicts and guards here are pure; `run`
//! carries them out.

mod run;

pub(super) use run::run;

use std::collections::HashSet;

use serde_json::Value;

use tether_diff::manifest::{ObjectId, ObjectKey};
use tether_schema::ownership::{app_of, owned_by};

use super::annotations::prune_protection;
use super::inventory::Inventory;

/// The inventory's objects the desired set no longer has, in inventory order.
pub fn candidates(inventory: &Inventory, desired: &HashSet<ObjectKey>) -> Vec<ObjectId> {
    inventory
        .objects
        .iter()
        .filter(|e| !desired.contains(&e.key()))
        .map(|e| e.id())
        .collect()
}

/// Why prune refuses to run at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "refusing to prune {candidates} objects: the desired state is empty (a path that rendered nothing?); allow it with --allow-mass-prune (sync.allowMassPrune in the service) if this is intended"
    )]
    EmptyDesired { candidates: usize },
    #[error(
        "refusing to prune {candidates} of the app's {owned} objects (more than half); allow it with --allow-mass-prune (sync.allowMassPrune in the service) if this is intended"
    )]
    MassPrune { candidates: usize, owned: usize },
}

/// Checks the guards: no prune from an empty desired set, none of more than half of
/// what the app owns, unless the caller allows mass prune.
pub fn guard(
    candidates: usize,
    owned: usize,
    desired: usize,
    allow_mass_prune: bool,
) -> Result<(), Refusal> {
    if candidates == 0 || allow_mass_prune {
        return Ok(());
    }
    if desired == 0 {
        return Err(Refusal::EmptyDesired { candidates });
    }
    if candidates * 2 > owned {
        return Err(Refusal::MassPrune { candidates, owned });
    }
    Ok(())
}

/// What to do with one candidate, given the live object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Delete,
    /// Already gone: drop it from the inventory.
    Gone,
    /// Not labelled for this app (relabelled by someone, or a tampered inventory):
    /// never deleted, and dropped from the inventory since the app does not own it.
    NotOwned,
    /// Protected by the annotation named (`tether.dev/prune: disabled`, or Argo CD's
    /// or Flux's equivalent): kept, and kept in the inventory.
    Protected(&'static str),
}

pub fn verdict(app: &str, live: Option<&Value>) -> Verdict {
    let Some(live) = live else {
        return Verdict::Gone;
    };
    // Not labelled for the app, or managed by a controller (a ReplicaSet that copied
    // labels from its Deployment's template): its owner decides when it goes.
    if !owned_by(live, app) || has_controller(live) {
        return Verdict::NotOwned;
    }
    match prune_protection(live) {
        Some(annotation) => Verdict::Protected(annotation),
        None => Verdict::Delete,
    }
}

fn has_controller(live: &Value) -> bool {
    live.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
}

/// What deleting a Namespace would take with it, from the objects it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceUse {
    /// Objects that go with it and are no one else's: the app's own, those owned by
    /// another object (deleted with their owner), and what Kubernetes puts in every
    /// namespace.
    pub cascades: usize,
    /// Objects another app or nobody claims (`Kind/name (why)`): their presence
    /// refuses the delete.
    pub foreign: Vec<String>,
}

/// Classifies the objects a Namespace holds for a prune of it by `app`.
pub fn namespace_use<'v>(app: &str, objects: impl IntoIterator<Item = &'v Value>) -> NamespaceUse {
    let mut usage = NamespaceUse::default();
    for object in objects {
        let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (kind, name) = (text("/kind"), text("/metadata/name"));
        let dependent = object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| !refs.is_empty());
        if owned_by(object, app) || dependent || is_namespace_furniture(kind, name) {
            usage.cascades += 1;
            continue;
        }
        let why = match app_of(object) {
            Some(other) => format!("app {other:?}'s"),
            None => "no app's".to_string(),
        };
        usage.foreign.push(format!("{kind}/{name} ({why})"));
    }
    usage
}

/// What the API server and controllers create in every namespace on their own.
fn is_namespace_furniture(kind: &str, name: &str) -> bool {
    matches!(
        (kind, name),
        ("ServiceAccount", "default") | ("ConfigMap", "kube-root-ca.crt")
    ) || matches!(kind, "Event" | "Endpoints" | "EndpointSlice" | "Lease")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::inventory::Entry;
    use serde_json::json;
    use tether_schema::ownership::{APP_LABEL, PRUNE_ANNOTATION, PRUNE_DISABLED};

    #[test]
    fn candidates_are_owned_objects_no_longer_desired() {
        let entry = |name: &str| Entry {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        };
        let inventory = Inventory {
            revision: None,
            objects: [entry("kept"), entry("gone")].into(),
        };
        let desired: HashSet<ObjectKey> = [entry("kept").key(), entry("new").key()].into();
        let found = candidates(&inventory, &desired);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "gone");
    }

    #[test]
    fn the_guards_refuse_empty_and_mass_prunes_unless_allowed() {
        assert_eq!(guard(0, 10, 0, false), Ok(()));
        assert_eq!(
            guard(3, 3, 0, false),
            Err(Refusal::EmptyDesired { candidates: 3 })
        );
        assert_eq!(
            guard(3, 4, 1, false),
            Err(Refusal::MassPrune {
                candidates: 3,
                owned: 4
            })
        );
        // Exactly half is allowed: an app replacing half of itself is normal.
        assert_eq!(guard(2, 4, 2, false), Ok(()));
        assert_eq!(guard(3, 3, 0, true), Ok(()));
        assert!(
            guard(3, 4, 1, false)
                .unwrap_err()
                .to_string()
                .contains("--allow-mass-prune")
        );
    }

    #[test]
    fn only_objects_labelled_for_the_app_and_unprotected_are_deleted() {
        let labelled = |app: &str, annotations: Value| json!({"metadata": {"labels": {APP_LABEL: app}, "annotations": annotations}});
        assert_eq!(verdict("web", None), Verdict::Gone);
        assert_eq!(
            verdict("web", Some(&labelled("web", json!({})))),
            Verdict::Delete
        );
        assert_eq!(
            verdict("web", Some(&labelled("api", json!({})))),
            Verdict::NotOwned
        );
        assert_eq!(
            verdict("web", Some(&json!({"metadata": {}}))),
            Verdict::NotOwned
        );
        let protected = labelled("web", json!({PRUNE_ANNOTATION: PRUNE_DISABLED}));
        assert_eq!(
            verdict("web", Some(&protected)),
            Verdict::Protected("tether.dev/prune: disabled")
        );
        let argo = labelled(
            "web",
            json!({"argocd.argoproj.io/sync-options": "Prune=false"}),
        );
        assert_eq!(
            verdict("web", Some(&argo)),
            Verdict::Protected("argocd.argoproj.io/sync-options: Prune=false")
        );
    }

    #[test]
    fn an_object_a_controller_owns_is_left_to_its_owner() {
        let replica_set = json!({"metadata": {
            "labels": {APP_LABEL: "shop"},
            "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": true}],
        }});
        assert_eq!(verdict("shop", Some(&replica_set)), Verdict::NotOwned);
        let referenced = json!({"metadata": {
            "labels": {APP_LABEL: "shop"},
            "ownerReferences": [{"kind": "ConfigMap", "name": "x"}],
        }});
        assert_eq!(verdict("shop", Some(&referenced)), Verdict::Delete);
    }

    #[test]
    fn a_namespace_holding_another_apps_or_unowned_objects_is_refused() {
        let object = |kind: &str, name: &str, labels: Value, owners: Value| json!({"kind": kind, "metadata": {"name": name, "labels": labels, "ownerReferences": owners}});
        let none = json!({});
        let objects = [
            object("Deployment", "web", json!({APP_LABEL: "shop"}), json!([])),
            object(
                "ReplicaSet",
                "web-1",
                none.clone(),
                json!([{"kind": "Deployment"}]),
            ),
            object("ServiceAccount", "default", none.clone(), json!([])),
            object("ConfigMap", "kube-root-ca.crt", none.clone(), json!([])),
            object(
                "ConfigMap",
                "settings",
                json!({APP_LABEL: "billing"}),
                json!([]),
            ),
            object("Secret", "handmade", none.clone(), json!([])),
        ];
        let usage = namespace_use("shop", &objects);
        assert_eq!(usage.cascades, 4);
        assert_eq!(
            usage.foreign,
            vec![
                "ConfigMap/settings (app \"billing\"'s)".to_string(),
                "Secret/handmade (no app's)".to_string()
            ]
        );
        let own_only = namespace_use("shop", &objects[..4]);
        assert!(own_only.foreign.is_empty());
    }
}
