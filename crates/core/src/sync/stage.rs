//! Why a stage of the sync pass failed, returned by the stage that failed (as Flux's
//! kustomize-controller marks each failure with its reason where it happens): which
//! objects, hooks or guard, with the server's causes as data. Whether a retry can help
//! is decided by the variant, here; the condition reason for each is the
//! controller's (`reconcile::pass`).

use std::fmt;

use serde::Serialize;
use tether_diff::manifest::ObjectId;

use super::health::Health;
use super::prune::Refusal;

/// One object (or hook) a stage could not act on, and why: the server's refusal,
/// the hook's failure, the app that claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectFailure {
    pub id: ObjectId,
    pub cause: String,
}

impl fmt::Display for ObjectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.id, self.cause)
    }
}

/// The stage a sync stopped in, with what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageFailure {
    /// The server refused to validate objects (a dry run): nothing was applied, and
    /// the manifests need a change.
    #[error("validation failed: {}", lines(.objects))]
    Refused { objects: Vec<ObjectFailure> },
    /// The server could not be asked to validate objects (unavailable, timed out):
    /// nothing was applied; a retry may pass.
    #[error("validation failed: {}", lines(.objects))]
    Unavailable { objects: Vec<ObjectFailure> },
    /// Writing objects failed part way; later steps were not applied.
    #[error("apply failed: {}", lines(.objects))]
    Apply { objects: Vec<ObjectFailure> },
    /// A prune guard refused to delete (needs a change or `allowMassPrune`).
    #[error("prune failed: {0}")]
    PruneRefused(#[source] Refusal),
    /// Deleting objects the app no longer declares failed.
    #[error("prune failed: {}", lines(.objects))]
    Prune { objects: Vec<ObjectFailure> },
    /// The app did not become healthy in time (`--wait`, or before PostSync hooks).
    /// Boxed: an object's identity makes it the largest failure by far.
    #[error("health check failed: {0}")]
    Health(#[source] Box<WaitFailure>),
    /// Hooks of one phase failed (a PreSync hook's failure applies nothing else).
    #[error("hook failed: {}", hook_lines(*.phase, .hooks))]
    Hook {
        phase: Phase,
        hooks: Vec<ObjectFailure>,
    },
    /// Objects are labelled for another app and were left alone.
    #[error("owned by another app: {}", lines(.objects))]
    Conflict { objects: Vec<ObjectFailure> },
}

impl StageFailure {
    /// Whether trying again unchanged can succeed. A refusal (by the server's
    /// validation or a prune guard) needs a change; the server being unavailable, a
    /// write or delete failing, a workload still starting, a hook Job (its next run
    /// is a new instance) or another app letting go may pass next time.
    pub fn is_retryable(&self) -> bool {
        match self {
            StageFailure::Refused { .. } | StageFailure::PruneRefused(_) => false,
            StageFailure::Unavailable { .. }
            | StageFailure::Apply { .. }
            | StageFailure::Prune { .. }
            | StageFailure::Health(_)
            | StageFailure::Hook { .. }
            | StageFailure::Conflict { .. } => true,
        }
    }

    /// Whether the pass stopped before writing anything (validation).
    pub(crate) fn is_validation(&self) -> bool {
        matches!(
            self,
            StageFailure::Refused { .. } | StageFailure::Unavailable { .. }
        )
    }

    /// What the report says of the desired objects the pass never reached.
    pub(super) fn not_reached(&self) -> String {
        match self {
            StageFailure::Refused { objects } | StageFailure::Unavailable { objects } => {
                format!("not applied: {} objects failed validation", objects.len())
            }
            StageFailure::Hook {
                phase: Phase::PreSync,
                ..
            } => "not applied: a PreSync hook failed".into(),
            StageFailure::Health(_) => "not applied: an earlier wave did not become healthy".into(),
            _ => "not applied: an earlier step failed".into(),
        }
    }
}

/// Why waiting for the app to become healthy ended without it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitFailure {
    #[error("{id} is Degraded: {message}")]
    Degraded { id: ObjectId, message: String },
    #[error("timed out waiting for health: {id} is {health} ({message})")]
    TimedOut {
        id: ObjectId,
        health: Health,
        message: String,
    },
    /// The object could not be read (the cluster's error, as text: a report is kept
    /// and compared, a cluster error is neither).
    #[error("{id}: cannot read its health: {cause}")]
    Unreadable { id: ObjectId, cause: String },
}

fn lines(objects: &[ObjectFailure]) -> String {
    objects
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn hook_lines(phase: Phase, hooks: &[ObjectFailure]) -> String {
    hooks
        .iter()
        .map(|h| format!("hook {} {h}", phase.as_str()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// When in a sync a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Phase {
    PreSync,
    Sync,
    PostSync,
    SyncFail,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::PreSync => "PreSync",
            Phase::Sync => "Sync",
            Phase::PostSync => "PostSync",
            Phase::SyncFail => "SyncFail",
        }
    }
}
