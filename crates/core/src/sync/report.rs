//! What a sync did, object by object: the change set reports, metrics, notifications
//! and the status API are rendered from.

use serde::Serialize;

use tether_diff::diff::{Change, ObjectDiff, Status};
use tether_diff::manifest::ObjectId;

use super::health::{Assessment, Health};
use super::inventory::Inventory;
use super::prune::Refusal;
use super::stage::{Phase, StageFailure, WaitFailure};

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Created,
    Configured,
    /// Deleted and created again (`--replace-immutable`).
    Replaced,
    Unchanged,
    Pruned,
    Skipped,
    /// Labelled for another app: neither applied, adopted nor pruned by this one.
    Conflict,
    Failed,
}

impl Action {
    /// Every action, in the order summaries list them.
    pub const ALL: [Action; 8] = [
        Action::Created,
        Action::Configured,
        Action::Replaced,
        Action::Unchanged,
        Action::Pruned,
        Action::Skipped,
        Action::Conflict,
        Action::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Replaced => "replaced",
            Action::Unchanged => "unchanged",
            Action::Pruned => "pruned",
            Action::Skipped => "skipped",
            Action::Conflict => "conflict",
            Action::Failed => "failed",
        }
    }

    /// Whether the action writes to the cluster (or, in a dry run, would).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Action::Created | Action::Configured | Action::Replaced | Action::Pruned
        )
    }
}

/// One object's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectResult {
    pub id: ObjectId,
    pub action: Action,
    /// How the object differed from Git before the sync acted; `None` for an object
    /// that is not the app's (a prune candidate labelled for someone else).
    pub drift: Option<Status>,
    /// Absent for pruned and skipped objects.
    pub health: Option<Assessment>,
    /// Why, for a person: the server's refusal, what changed, why it was skipped.
    pub message: String,
    /// For a configured object, what differed (Secret values masked).
    pub changes: Vec<Change>,
    /// For a configured object, the masked views compared, for a unified diff.
    pub views: Option<Box<ObjectDiff>>,
    /// The live object's uid and owners, when the pass saw it live.
    pub lineage: Lineage,
}

/// Where a live object stands among others: its uid and `metadata.ownerReferences`,
/// which the dashboard's tree follows (Deployment → ReplicaSet → Pod).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Lineage {
    pub uid: Option<String>,
    pub owners: Vec<OwnerReference>,
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// The managing controller (at most one owner is).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub controller: bool,
}

impl Lineage {
    /// The lineage of a live object; entries without a uid are left out (the API
    /// server refuses them, so only a hand-made object has one).
    pub fn of(live: &serde_json::Value) -> Lineage {
        let meta = &live["metadata"];
        let text =
            |v: &serde_json::Value, key: &str| v[key].as_str().unwrap_or_default().to_string();
        Lineage {
            uid: meta["uid"].as_str().map(str::to_string),
            owners: meta["ownerReferences"]
                .as_array()
                .map(|owners| {
                    owners
                        .iter()
                        .filter(|o| o["uid"].as_str().is_some_and(|u| !u.is_empty()))
                        .map(|o| OwnerReference {
                            api_version: text(o, "apiVersion"),
                            kind: text(o, "kind"),
                            name: text(o, "name"),
                            uid: text(o, "uid"),
                            controller: o["controller"].as_bool().unwrap_or(false),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

impl ObjectResult {
    /// How the object stands, as the status API and notifications name it: its
    /// drift, or `Failed` when the sync could not act on it.
    pub fn standing(&self) -> &'static str {
        match (self.action, self.drift) {
            (Action::Failed, _) => "Failed",
            (_, Some(status)) => status.as_str(),
            (_, None) => "Unknown",
        }
    }
}

/// The outcome of a sync.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncReport {
    pub app: String,
    pub revision: Option<String>,
    pub dry_run: bool,
    pub objects: Vec<ObjectResult>,
    /// The worst health of the desired objects.
    pub health: Health,
    /// The stage the sync stopped in, as that stage returned it.
    pub failure: Option<StageFailure>,
    /// The app's inventory after the sync (as written, or as it would be).
    pub inventory: Inventory,
    /// The hooks the sync ran (or, in a dry run, skipped), in the order it ran them.
    pub hooks: Vec<HookResult>,
}

impl SyncReport {
    /// Whether the sync needs a person: a stage failed (an object failed or is
    /// claimed by another app, prune was refused, the app did not become healthy in
    /// time, a hook failed).
    pub fn failed(&self) -> bool {
        self.failure.is_some()
            || self.hooks.iter().any(|h| h.action == HookAction::Failed)
            || self
                .objects
                .iter()
                .any(|o| matches!(o.action, Action::Failed | Action::Conflict))
    }

    pub fn count(&self, action: Action) -> usize {
        self.objects.iter().filter(|o| o.action == action).count()
    }

    /// Whether the sync wrote (or, in a dry run, would write) anything.
    pub fn changed(&self) -> bool {
        self.objects.iter().any(|o| o.action.writes())
    }

    /// How many objects the sync wrote (or, in a dry run, would write).
    pub fn written(&self) -> usize {
        self.objects.iter().filter(|o| o.action.writes()).count()
    }

    /// The objects that still differ from Git after the sync: all drift for a dry
    /// run; for a sync, what it could not correct (failures, conflicts, prunes it may
    /// not make).
    pub fn remaining_drift(&self) -> impl Iterator<Item = &ObjectResult> {
        self.objects.iter().filter(|o| match o.action {
            Action::Failed | Action::Conflict => true,
            action => {
                let drifted = o.drift.is_some_and(|s| s != Status::InSync);
                drifted && (self.dry_run || !action.writes())
            }
        })
    }

    /// The stage the sync failed in, if it did.
    pub fn failure(&self) -> Option<StageFailure> {
        self.failure.clone()
    }

    /// The guard that refused prune, when one did.
    pub fn prune_refused(&self) -> Option<&Refusal> {
        match &self.failure {
            Some(StageFailure::PruneRefused(refusal)) => Some(refusal),
            _ => None,
        }
    }

    /// Why waiting for health ended without every object Healthy, when it did.
    pub fn wait_failed(&self) -> Option<&WaitFailure> {
        match &self.failure {
            Some(StageFailure::Health(why)) => Some(why.as_ref()),
            _ => None,
        }
    }
}

/// The worst health among objects that have one.
pub(super) fn worst(objects: &[ObjectResult]) -> Health {
    objects
        .iter()
        .filter_map(|o| o.health.as_ref().map(|h| h.health))
        .max()
        .unwrap_or(Health::Healthy)
}

/// What running one hook came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HookAction {
    Succeeded,
    Failed,
    /// Not run: a dry run, or the sync writes nothing (`tether serve`).
    Skipped,
}

impl HookAction {
    pub fn as_str(self) -> &'static str {
        match self {
            HookAction::Succeeded => "succeeded",
            HookAction::Failed => "failed",
            HookAction::Skipped => "skipped",
        }
    }
}

/// One hook run, for the sync report.
#[derive(Debug, Clone, PartialEq)]
pub struct HookResult {
    /// The instance's identity: the name the server gave a `generateName` hook.
    pub id: ObjectId,
    pub phase: Phase,
    pub action: HookAction,
    /// Why it failed, or what was done with the instance.
    pub message: String,
    /// The instance was deleted after it ran, as its delete policy asks.
    pub deleted: bool,
}
