//! The loop's view of a monorepo (issue #28): a new commit that changes nothing an
//! app's render reads is taken without a pass. The worker asks for the app's inputs
//! identity at a commit ([`tether_core::sync::inputs`]: the Git object ids of every
//! path its render reads, and the renderer settings); equal to the identity of what
//! it last applied in full, the app reports the new revision and neither renders nor
//! reads the cluster. A webhook's list of changed files is not used: the ids decide.

use tether_core::source::{Revision, Source, SourceCache};
use tether_core::sync::inputs::{self, Identity};
use tether_diff::manifest::Renderers;

/// The inputs identity of `source`'s app at `revision`, from the clone, starting from
/// the identity at an earlier commit. `None` when it cannot be known (a chart source,
/// whose revision names its chart already; or a read that failed, which the pass's
/// render then reads and reports itself): the commit alone identifies the render.
pub async fn identify(
    app: &str,
    sources: &SourceCache,
    source: Source,
    revision: &Revision,
    renderers: Renderers,
    previous: Option<Identity>,
) -> Option<Identity> {
    let (sources, at) = (sources.clone(), revision.clone());
    let found = tokio::task::spawn_blocking(move || {
        inputs::identify(&sources, &source, &at, &renderers, previous.as_ref())
    })
    .await;
    match found {
        Ok(Ok(identity)) => identity,
        Ok(Err(err)) => {
            tracing::debug!(app, error = %err, "inputs identity unknown: the commit identifies the render");
            None
        }
        Err(err) => {
            tracing::warn!(app, error = %err, "inputs identity task failed");
            None
        }
    }
}
