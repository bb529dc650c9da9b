//! Why a pass failed, named after the stage of the loop that failed. Each failure
//! says whether a retry can help (the pass is retried with backoff) or needs a change
//! to Git or configuration (the app stalls until the source moves or a person asks for
//! a sync), and names the condition reason reported for it, here and nowhere else.

use tether_core::cluster::ClusterError;
use tether_core::sync::desired::DesiredError;
use tether_core::sync::{SyncError, SyncFailure};

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The source has no revision to offer (never fetched, or it failed).
    #[error("source: {0}")]
    Source(String),
    /// The revision's manifests do not read or validate.
    #[error("{0}")]
    Manifest(#[source] DesiredError),
    /// The API server did not validate objects; nothing was applied.
    #[error("validation failed: {message}")]
    Validate { message: String, retryable: bool },
    #[error("apply failed: {0}")]
    Apply(String),
    #[error("prune failed: {message}")]
    Prune { message: String, refused: bool },
    #[error("health check failed: {0}")]
    Health(String),
    /// A hook (PreSync, Sync, PostSync) failed.
    #[error("hook failed: {0}")]
    Hook(String),
    /// The app's inventory could not be read or written.
    #[error("inventory: {0}")]
    Inventory(String),
    /// Objects are labelled for another app and were left alone.
    #[error("owned by another app: {0}")]
    Conflict(String),
    /// The API server could not be asked (or refused the pass's reads).
    #[error("cluster: {0}")]
    Cluster(#[source] ClusterError),
    /// The sync waves annotations do not parse.
    #[error("{0}")]
    Waves(String),
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
            PassError::Manifest(_) | PassError::Waves(_) => "ManifestInvalid",
            PassError::Validate { .. } => "ValidationFailed",
            PassError::Apply(_) => "ApplyFailed",
            PassError::Prune { .. } => "PruneFailed",
            PassError::Health(_) => "HealthCheckFailed",
            PassError::Hook(_) => "HookFailed",
            PassError::Inventory(_) => "InventoryFailed",
            PassError::Conflict(_) => "OwnershipConflict",
            // Refused by RBAC (a tenant's ServiceAccount): a change of rights is needed.
            PassError::Cluster(ClusterError::Api { code: 403, .. }) => "Forbidden",
            PassError::Cluster(_) => "ClusterFailed",
            PassError::LeadershipLost => "LeadershipLost",
            PassError::RevisionMoved => "RevisionMoved",
            PassError::TimedOut(_) => "PassTimedOut",
            PassError::Variables(_) => "VariablesFailed",
            PassError::Decryption(_) => "DecryptionFailed",
            PassError::Values(_) => "ValuesFailed",
            PassError::Unverified { .. } => "VerificationFailed",
        }
    }

    /// Whether trying again unchanged can succeed; otherwise the app stalls.
    pub fn is_retryable(&self) -> bool {
        match self {
            PassError::Source(_) => true,
            PassError::Manifest(err) => err.is_retryable(),
            PassError::Waves(_) | PassError::Inventory(_) => false,
            PassError::Validate { retryable, .. } => *retryable,
            // A guard's refusal needs a person; a failed delete may pass next time.
            PassError::Prune { refused, .. } => !refused,
            // Another app may let go; a workload may still become healthy.
            // A hook Job may pass next time (its next run is a new instance).
            PassError::Apply(_)
            | PassError::Health(_)
            | PassError::Hook(_)
            | PassError::Conflict(_) => true,
            PassError::Cluster(err) => err.is_retryable(),
            PassError::LeadershipLost | PassError::RevisionMoved | PassError::TimedOut(_) => true,
            // A ConfigMap or Secret may be created or fixed, which moves no source.
            PassError::Variables(_) => true,
            // Likewise the key Secret or a key file, and a values ConfigMap or Secret.
            PassError::Decryption(_) | PassError::Values(_) => true,
            // Unsigned needs a new commit; unreadable keys may be fixed in place.
            PassError::Unverified { retryable, .. } => *retryable,
        }
    }
}

impl From<SyncError> for PassError {
    fn from(err: SyncError) -> Self {
        match err {
            // Bad hook annotations and tether's own records are bad manifests, like bad waves.
            SyncError::Waves(_) | SyncError::Hooks(_) | SyncError::Bookkeeping(_) => {
                PassError::Waves(err.to_string())
            }
            SyncError::Cluster(err) => PassError::Cluster(err),
            SyncError::Inventory(err) => PassError::Inventory(err.to_string()),
            SyncError::Refused(lines) => PassError::Validate {
                message: lines.join("; "),
                retryable: false,
            },
        }
    }
}

impl From<SyncFailure> for PassError {
    fn from(failure: SyncFailure) -> Self {
        match failure {
            SyncFailure::Validate { message, retryable } => {
                PassError::Validate { message, retryable }
            }
            SyncFailure::Apply(m) => PassError::Apply(m),
            SyncFailure::Prune { message, refused } => PassError::Prune { message, refused },
            SyncFailure::Health(m) => PassError::Health(m),
            SyncFailure::Hook(m) => PassError::Hook(m),
            SyncFailure::Conflict(m) => PassError::Conflict(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_core::source::SourceError;
    use tether_diff::manifest::ManifestErrors;

    #[test]
    fn every_stage_has_its_own_reason_and_retry_policy() {
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
            (PassError::Waves("x".into()), "ManifestInvalid", false),
            (
                PassError::Validate {
                    message: "x".into(),
                    retryable: false,
                },
                "ValidationFailed",
                false,
            ),
            (
                PassError::Validate {
                    message: "503".into(),
                    retryable: true,
                },
                "ValidationFailed",
                true,
            ),
            (PassError::Apply("x".into()), "ApplyFailed", true),
            (
                PassError::Prune {
                    message: "mass".into(),
                    refused: true,
                },
                "PruneFailed",
                false,
            ),
            (
                PassError::Prune {
                    message: "500".into(),
                    refused: false,
                },
                "PruneFailed",
                true,
            ),
            (PassError::Health("x".into()), "HealthCheckFailed", true),
            (PassError::Inventory("x".into()), "InventoryFailed", false),
            (PassError::Conflict("x".into()), "OwnershipConflict", true),
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
    fn a_sync_failure_keeps_its_stage() {
        let refused = PassError::from(SyncFailure::Prune {
            message: "refusing to prune".into(),
            refused: true,
        });
        assert_eq!(refused.reason(), "PruneFailed");
        assert!(!refused.is_retryable());
        let refused_dry_run = PassError::from(SyncError::Refused(vec!["a: bad".into()]));
        assert_eq!(refused_dry_run.reason(), "ValidationFailed");
    }
}
