//! Who an app acts as in `tether serve` (issue #24): an App object only as a
//! ServiceAccount of its namespace, never as tether; what stops a worker from
//! starting without one, and what a deleted App without one leaves behind.

use tether_core::cluster::{Cluster, ClusterError};

/// Why an app's worker cannot start: who it would act as, or how to reach its cluster.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    /// An App object names no ServiceAccount and the server has none by default: it
    /// would act as tether itself (issue #24). Needs a change of the App (or of the
    /// server's setting); retrying cannot help.
    #[error(
        "App {0}: spec.serviceAccountName is required: an App acts only as a ServiceAccount \
         of its own namespace, never as tether (or the operator sets \
         server.defaultServiceAccount)"
    )]
    NoServiceAccount(String),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

impl StartError {
    /// The condition reason the app's status shows.
    pub(super) fn reason(&self) -> &'static str {
        match self {
            StartError::NoServiceAccount(_) => "ServiceAccountNameRequired",
            StartError::Cluster(_) => "ClusterFailed",
        }
    }

    pub(super) fn is_retryable(&self) -> bool {
        match self {
            StartError::NoServiceAccount(_) => false,
            StartError::Cluster(err) => err.is_retryable(),
        }
    }
}

/// Says that a deleted App's objects stay, because there is no identity to prune
/// them as but tether's own (a spec that no longer parses, no ServiceAccount, its
/// kubeconfig Secret gone): no connection to prune with.
pub(super) fn left_in_place(app: &str, why: &str) -> Option<std::sync::Arc<Cluster>> {
    tracing::warn!(
        app = %app,
        reason = %why,
        "App deleted with deletionPolicy Prune, but its objects are left in place: \
         they are pruned only as the App's own ServiceAccount"
    );
    None
}
