//! Why a pass failed, named after the stage of the loop that failed. Each failure
//! says whether a retry can help (the pass is retried with backoff) or needs a change
//! to Git or configuration (the app stalls until the source moves or a person asks for
//! a sync), and names the condition reason reported for it, here and nowhere else.

use tether_core::cluster::ClusterError;
use tether_core::sync::desired::DesiredError;
use tether_core::sync::inventory::InventoryError;
use tether_core::sync::{StageFailure, SyncError};

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The source has no revision to offer (never fetched, or it failed): the
    /// source watcher's message, all that reaches the worker of its failure.
    #[error("source: {0}")]
    Source(String),
    /// The revision's manifests do not read or validate.
    #[error("{0}")]
    Manifest(#[source] DesiredError),
    /// A stage of the sync failed (validate, apply, prune, health, hooks,
    /// ownership), as the stage returned it.
    #[error(transparent)]
    Stage(#[from] StageFailure),
    /// The app's inventory does not read.
    #[error("inventory: {0}")]
    Inventory(#[source] InventoryError),
    /// The API server could not be asked (or refused the pass's reads).
    #[error("cluster: {0}")]
    Cluster(#[source] ClusterError),
    /// The manifests cannot be planned: sync waves or hook annotations do not
    /// parse, or they name tether's own records.
    #[error("{0}")]
    Plan(#[source] SyncError),
    #[error("lost leadership during the pass: stopped writing; the new leader carries on")]
    LeadershipLost,
    #[error("the revision moved during the pass")]
    RevisionMoved,
    #[error("the pass did not finish within {}s", .0.as_secs())]
    TimedOut(std::time::Duration),
    /// The post-build variables could not be read; nothing was rendered.
    #[error("{0}")]
    Variables(#[source] super::variables::VariablesError),
    /// The chart values (`source.helm.valuesFrom`) could not be read; nothing was
    /// rendered.
    #[error("{0}")]
    Values(#[source] super::values::ValuesError),
    /// The value files of other Git sources (`source.helm.valueSources`) could not
    /// be read; nothing was rendered.
    #[error("{0}")]
    RefValues(#[source] super::value_sources::RefValuesError),
    /// The SOPS keys (`decryption`) could not be read; nothing was rendered.
    #[error("{0}")]
    Decryption(#[source] super::decryption::DecryptionError),
    /// The revision is not signed by a trusted key and none before it was (issue #27).
    #[error("source verification: {message}")]
    Unverified { message: String, retryable: bool },
}

impl PassError {
    /// The condition reason for this failure (`Ready=False`, `Stalled=True`).
    pub fn reason(&self) -> &'static str {
        match self {
            PassError::Source(_) => "SourceFailed",
            PassError::Manifest(DesiredError::Source(_) | DesiredError::Chart(_)) => "SourceFailed",
            PassError::Manifest(_) | PassError::Plan(_) => "ManifestInvalid",
            PassError::Stage(failure) => match failure {
                StageFailure::Refused { .. } | StageFailure::Unavailable { .. } => {
                    "ValidationFailed"
                }
                StageFailure::Apply { .. } => "ApplyFailed",
                StageFailure::PruneRefused(_) | StageFailure::Prune { .. } => "PruneFailed",
                StageFailure::Health(_) => "HealthCheckFailed",
                StageFailure::Hook { .. } => "HookFailed",
                StageFailure::Conflict { .. } => "OwnershipConflict",
            },
            PassError::Inventory(_) => "InventoryFailed",
            // Refused by RBAC (a tenant's ServiceAccount): a change of rights is needed.
            PassError::Cluster(ClusterError::Api { code: 403, .. }) => "Forbidden",
            PassError::Cluster(_) => "ClusterFailed",
            PassError::LeadershipLost => "LeadershipLost",
            PassError::RevisionMoved => "RevisionMoved",
            PassError::TimedOut(_) => "PassTimedOut",
            PassError::Variables(_) => "VariablesFailed",
            PassError::Decryption(_) => "DecryptionFailed",
            PassError::Values(_) => "ValuesFailed",
            PassError::RefValues(super::value_sources::RefValuesError::NotFetched { .. }) => {
                "SourceFailed"
            }
            PassError::RefValues(_) => "ValuesFailed",
            PassError::Unverified { .. } => "VerificationFailed",
        }
    }

    /// Whether trying again unchanged can succeed; otherwise the app stalls.
    pub fn is_retryable(&self) -> bool {
        match self {
            PassError::Source(_) => true,
            PassError::Manifest(err) => err.is_retryable(),
            PassError::Plan(_) | PassError::Inventory(_) => false,
            // The stage's variant says (a refusal needs a change; most failures may pass).
            PassError::Stage(failure) => failure.is_retryable(),
            PassError::Cluster(err) => err.is_retryable(),
            PassError::LeadershipLost | PassError::RevisionMoved | PassError::TimedOut(_) => true,
            // A ConfigMap or Secret may be created or fixed, which moves no source.
            PassError::Variables(_) => true,
            // Likewise the key Secret or a key file, and a values ConfigMap or Secret.
            PassError::Decryption(_) | PassError::Values(_) => true,
            PassError::RefValues(err) => err.is_retryable(),
            // Unsigned needs a new commit; unreadable keys may be fixed in place.
            PassError::Unverified { retryable, .. } => *retryable,
        }
    }
}

impl From<SyncError> for PassError {
    fn from(err: SyncError) -> Self {
        match err {
            SyncError::Cluster(err) => PassError::Cluster(err),
            SyncError::Inventory(err) => PassError::Inventory(err),
            SyncError::Refused(objects) => PassError::Stage(StageFailure::Refused { objects }),
            // Bad hook annotations and tether's own records are bad manifests, like bad waves.
            SyncError::Waves(_) | SyncError::Hooks(_) | SyncError::Bookkeeping(_) => {
                PassError::Plan(err)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_core::source::SourceError;
    use tether_core::sync::prune::Refusal;
    use tether_core::sync::stage::ObjectFailure;
    use tether_core::sync::{Phase, WaitFailure};
    use tether_diff::manifest::{ManifestErrors, ObjectId};

    fn refused(cause: &str) -> Vec<ObjectFailure> {
        let id = ObjectId {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: Some("ns".into()),
            name: "web".into(),
        };
        vec![ObjectFailure {
            id,
            cause: cause.into(),
        }]
    }

    #[test]
    fn every_stage_has_its_own_reason_and_retry_policy() {
        let stage = |failure: StageFailure| PassError::Stage(failure);
        let cases: Vec<(PassError, &str, bool)> = vec![
            (
                PassError::Source("unreachable".into()),
                "SourceFailed",
                true,
            ),
            (
                PassError::Manifest(DesiredError::Invalid(ManifestErrors(Vec::new()))),
                "ManifestInvalid",
                false,
            ),
            (
                PassError::Manifest(DesiredError::Source(SourceError::PathMissing {
                    path: "apps".into(),
                    sha: "abc".into(),
                })),
                "SourceFailed",
                false,
            ),
            (
                PassError::from(SyncError::Waves(Vec::new())),
                "ManifestInvalid",
                false,
            ),
            (
                stage(StageFailure::Refused {
                    objects: refused("x"),
                }),
                "ValidationFailed",
                false,
            ),
            (
                stage(StageFailure::Unavailable {
                    objects: refused("503"),
                }),
                "ValidationFailed",
                true,
            ),
            (
                stage(StageFailure::Apply {
                    objects: refused("x"),
                }),
                "ApplyFailed",
                true,
            ),
            (
                stage(StageFailure::PruneRefused(Refusal::MassPrune {
                    candidates: 3,
                    owned: 4,
                })),
                "PruneFailed",
                false,
            ),
            (
                stage(StageFailure::Prune {
                    objects: refused("500"),
                }),
                "PruneFailed",
                true,
            ),
            (
                stage(StageFailure::Health(Box::new(WaitFailure::Degraded {
                    id: refused("x")[0].id.clone(),
                    message: "x".into(),
                }))),
                "HealthCheckFailed",
                true,
            ),
            (
                stage(StageFailure::Hook {
                    phase: Phase::PreSync,
                    hooks: refused("x"),
                }),
                "HookFailed",
                true,
            ),
            (
                PassError::Inventory(InventoryError {
                    namespace: "tether-system".into(),
                    name: "web".into(),
                    reason: "x".into(),
                }),
                "InventoryFailed",
                false,
            ),
            (
                stage(StageFailure::Conflict {
                    objects: refused("x"),
                }),
                "OwnershipConflict",
                true,
            ),
            (
                PassError::Cluster(ClusterError::Timeout(std::time::Duration::from_secs(30))),
                "ClusterFailed",
                true,
            ),
            (
                PassError::Cluster(ClusterError::Api {
                    code: 403,
                    reason: "Forbidden".into(),
                    message: "no".into(),
                }),
                "Forbidden",
                false,
            ),
            (PassError::LeadershipLost, "LeadershipLost", true),
            (PassError::RevisionMoved, "RevisionMoved", true),
            (
                PassError::TimedOut(std::time::Duration::from_secs(600)),
                "PassTimedOut",
                true,
            ),
        ];
        for (err, reason, retryable) in cases {
            assert_eq!(err.reason(), reason, "{err:?}");
            assert_eq!(err.is_retryable(), retryable, "{err:?}");
        }
    }

    #[test]
    fn a_stage_failure_keeps_its_stage_and_its_message() {
        let refused_prune = PassError::from(StageFailure::PruneRefused(Refusal::EmptyDesired {
            candidates: 2,
        }));
        assert_eq!(refused_prune.reason(), "PruneFailed");
        assert!(!refused_prune.is_retryable());
        assert!(
            refused_prune
                .to_string()
                .starts_with("prune failed: refusing to prune 2 objects"),
            "{refused_prune}"
        );
        let refused_dry_run = PassError::from(SyncError::Refused(refused("bad")));
        assert_eq!(refused_dry_run.reason(), "ValidationFailed");
        assert_eq!(
            refused_dry_run.to_string(),
            "validation failed: Deployment.apps ns/web: bad"
        );
        let hook = PassError::from(StageFailure::Hook {
            phase: Phase::PreSync,
            hooks: refused("Job failed"),
        });
        assert_eq!(
            hook.to_string(),
            "hook failed: hook PreSync Deployment.apps ns/web: Job failed"
        );
    }
}
