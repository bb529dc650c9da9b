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

use super::annotations::Options;
use super::report::Action;
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
}

impl Item<'_> {
    /// The object as the server last returned it (an apply's answer or the live copy).
    pub fn latest(&self) -> Option<&Value> {
        match &self.latest {
            Latest::AsRead => self.live.as_ref(),
            Latest::Fresh(object) => Some(object),
            Latest::Gone => None,
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
