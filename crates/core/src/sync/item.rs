//! One desired object on its way through a pass: its kind as served, what was read of
//! it, what the pass plans for it (`decide`), and what the pass did (`apply`). The
//! stages of a sync hand these along; this module holds their shapes and how one
//! object's live state is read.

use std::time::Duration;

use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::cluster::{Cluster, ClusterError, LiveObjects, Resolved};
use tether_diff::diff::ObjectDiff;
use tether_diff::manifest::{Manifest, ObjectId, ObjectKey};

use super::SyncOptions;
use super::annotations::Options;
use super::health::{Assessment, Judge};
use super::report::{Action, Lineage};
use super::stage::ObjectFailure;

/// One desired object as observed, and what the sync will do with it.
pub(super) struct Item<'m> {
    pub manifest: &'m Manifest,
    /// What its annotations ask of the sync (Argo CD's and Flux's included).
    pub options: Options,
    pub kind: Option<Resolved>,
    pub live: Option<Value>,
    pub plan: Plan,
    /// The verdict against Git, with the views reports render (drifted objects only).
    pub diff: Option<ObjectDiff>,
    /// The object as the server last returned it, when that is not `live` (one copy
    /// of each object, not two: `tether diff` holds every item at once). Read it
    /// through [`Item::latest`].
    pub latest: Latest,
    /// What the sync did, once it acted.
    pub result: Option<(Action, String)>,
    /// Planned without a dry run (the heal of a validated revision): the verdict is
    /// the apply's answer against the live copy.
    pub undecided: bool,
    /// How long writing it took, as tether timed it: the write request's round trip,
    /// the server's time and tether's client's own work on it (for a replace, the
    /// delete and the wait for it too). A heal of one object cannot take less.
    pub written_in: Option<Duration>,
}

/// The object as the server last returned it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Latest {
    /// The live copy read ([`Item::live`]).
    AsRead,
    /// An answer since: the apply's, or a read after it.
    Fresh(Value),
    /// Gone since (deleted, or not found by a read after the apply).
    Gone,
    /// Judged when its verdict was made, and dropped: the pass writes nothing of it,
    /// so the report needs only its health and lineage ([`Item::settle`]). One live
    /// copy per object held to the end of the pass was most of `tether diff`'s
    /// memory (issue #31: 10,000 objects under 150 MiB).
    Judged(Box<Judged>),
}

/// What the report keeps of a live copy the pass dropped.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Judged {
    pub health: Assessment,
    pub lineage: Lineage,
}

impl Item<'_> {
    /// The object as the server last returned it (an apply's answer or the live copy);
    /// `None` too once it was judged and dropped ([`Item::settle`]), since it will
    /// not be written.
    pub fn latest(&self) -> Option<&Value> {
        match &self.latest {
            Latest::AsRead => self.live.as_ref(),
            Latest::Fresh(object) => Some(object),
            Latest::Gone | Latest::Judged(_) => None,
        }
    }

    /// The object's health and lineage as the report gives them: from the copy the
    /// server last returned, or as judged when that copy was dropped.
    pub fn judgement(&self, judge: &Judge<'_>) -> (Assessment, Lineage) {
        if let Latest::Judged(judged) = &self.latest {
            return (judged.health.clone(), judged.lineage.clone());
        }
        match self.latest() {
            Some(live) => (judge.assess(&self.manifest.id, live), Lineage::of(live)),
            None => (Assessment::missing(), Lineage::default()),
        }
    }

    /// Once its verdict is made, drops the live copy of an object the pass will not
    /// write (or a dry run's), keeping what the report needs of it. An object to be
    /// written keeps it: a replace deletes by its uid, a `Replace=true` update sends
    /// its resourceVersion, and the report judges the apply's answer instead.
    pub fn settle(&mut self, options: &SyncOptions<'_>) {
        let writes = matches!(
            self.plan,
            Plan::Create | Plan::Configure(_) | Plan::Replace(_) | Plan::Deferred(_)
        );
        if (writes && !options.dry_run) || self.undecided || self.latest != Latest::AsRead {
            return;
        }
        if let Some(live) = self.live.take() {
            self.latest = Latest::Judged(Box::new(Judged {
                health: options.health.assess(&self.manifest.id, &live),
                lineage: Lineage::of(&live),
            }));
        }
    }
}

/// What a sync will do with a desired object.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Plan {
    Unchanged,
    Create,
    /// What changes, for a person (the paths).
    Configure(String),
    Replace(String),
    /// Cannot be dry-run until its CRD or Namespace exists; that one is in this sync.
    Deferred(Need),
    /// Labelled for another app, named here: this app leaves it alone.
    Conflict(String),
    /// Left alone as its annotations ask (why, for a person): not written.
    Skip(String),
    /// The server refused it: a change to Git is needed.
    Failed(String),
    /// The server could not answer (unavailable, throttling, a conflict): a retry
    /// may pass.
    Unavailable(String),
}

/// What a deferred object waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Need {
    /// Its kind, defined by a CRD in this sync.
    pub kind: Option<GroupVersionKind>,
    /// Its namespace, created by this sync.
    pub namespace: Option<String>,
}

/// The live object named by `id` as `kind` addresses it: from the view when it
/// knows, else from the server.
pub(super) async fn read_live(
    cluster: &Cluster,
    view: &dyn LiveObjects,
    kind: &Resolved,
    id: &ObjectId,
) -> Result<Option<Value>, ClusterError> {
    let namespace = namespace_of(kind, id);
    let key = ObjectKey {
        group: id.group.clone(),
        kind: id.kind.clone(),
        namespace: namespace.map(str::to_string),
        name: id.name.clone(),
    };
    if let Some(known) = view.lookup(&key) {
        return Ok(known);
    }
    cluster.get(kind, namespace, &id.name).await
}

pub(super) fn gvk_of(id: &ObjectId) -> GroupVersionKind {
    GroupVersionKind::gvk(&id.group, &id.version, &id.kind)
}

pub(super) fn namespace_of<'i>(kind: &Resolved, id: &'i ObjectId) -> Option<&'i str> {
    if kind.namespaced {
        id.namespace.as_deref()
    } else {
        None
    }
}

pub(super) fn is_namespace(id: &ObjectId) -> bool {
    id.group.is_empty() && id.kind == "Namespace"
}

pub(super) fn is_crd(id: &ObjectId) -> bool {
    id.group == "apiextensions.k8s.io" && id.kind == "CustomResourceDefinition"
}

/// The objects the server did not validate (refused, or could not be asked), with
/// its causes.
pub(super) fn not_validated(items: &[Item<'_>]) -> Vec<ObjectFailure> {
    items
        .iter()
        .filter_map(|i| match &i.plan {
            Plan::Failed(cause) | Plan::Unavailable(cause) => Some(ObjectFailure {
                id: i.manifest.id.clone(),
                cause: cause.clone(),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tether_diff::manifest::Origin;

    use super::super::health::{Health, Judge};
    use super::*;

    fn deployment() -> Manifest {
        let object = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": 2},
        });
        Manifest {
            id: ObjectId::of(&object).expect("an object's identity"),
            object,
            origin: Origin {
                file: "web.yaml".into(),
                document: 1,
                line: 1,
                item: None,
            },
        }
    }

    /// Rolling out, owned by another object: health and lineage both say something.
    fn live() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "shop", "uid": "u-1", "generation": 2,
                "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Shop", "name": "shop", "uid": "u-0", "controller": true}],
            },
            "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1},
        })
    }

    fn item(manifest: &Manifest, plan: Plan) -> Item<'_> {
        Item {
            manifest,
            options: Options::of(&manifest.object),
            kind: None,
            live: Some(live()),
            plan,
            diff: None,
            latest: Latest::AsRead,
            result: None,
            undecided: false,
            written_in: None,
        }
    }

    #[test]
    fn an_object_settled_unwritten_reports_the_health_and_lineage_of_its_dropped_copy() {
        let manifest = deployment();
        let options = SyncOptions::new("shop");
        let judge = Judge::default();
        for plan in [
            Plan::Unchanged,
            Plan::Conflict("other".into()),
            Plan::Skip("annotated".into()),
            Plan::Failed("refused".into()),
        ] {
            let mut item = item(&manifest, plan.clone());
            let before = item.judgement(&judge);
            assert_eq!(before.0.health, Health::Progressing, "{before:?}");
            assert_eq!(before.1.owners.len(), 1);
            item.settle(&options);
            assert_eq!(item.live, None, "{plan:?}: the live copy is dropped");
            assert_eq!(item.judgement(&judge), before, "{plan:?}");
        }
    }

    #[test]
    fn an_object_to_be_written_keeps_its_live_copy_unless_the_pass_is_a_dry_run() {
        let manifest = deployment();
        let judge = Judge::default();
        let mut options = SyncOptions::new("shop");
        for plan in [
            Plan::Create,
            Plan::Configure("spec.replicas".into()),
            Plan::Replace("immutable".into()),
        ] {
            let mut item = item(&manifest, plan.clone());
            item.settle(&options);
            assert_eq!(item.live, Some(live()), "{plan:?}: a replace needs its uid");
            assert_eq!(item.latest, Latest::AsRead);
        }
        // A heal planned without a dry run compares the apply's answer with it.
        let mut undecided = item(&manifest, Plan::Unchanged);
        undecided.undecided = true;
        undecided.settle(&options);
        assert!(undecided.live.is_some());
        options.dry_run = true;
        let mut item = item(&manifest, Plan::Configure("spec.replicas".into()));
        let before = item.judgement(&judge);
        item.settle(&options);
        assert_eq!(item.live, None, "a dry run writes nothing");
        assert_eq!(item.judgement(&judge), before);
    }
}
