//! The render stage as a `tether serve` pass runs it (`RenderCache::manifests` around
//! `read_revision`), for the benches that time it (included with `#[path]`).

use tether_core::source::{Revision, Source, SourceCache};
use tether_core::sync::desired::{DesiredError, RenderCache, read_revision};
use tether_diff::manifest::{ManifestSet, Renderers};

/// The kept manifests for a commit already rendered, else `read_revision` of the
/// commit. Panics naming the source's path when it does not render.
pub async fn stage(
    cache: &mut RenderCache,
    sources: &SourceCache,
    source: &Source,
    revision: &Revision,
    renderers: &Renderers,
) -> ManifestSet {
    cache
        .manifests(&revision.sha, || async {
            read_revision(sources, source, revision, "default", None, renderers, None).await
        })
        .await
        .unwrap_or_else(|e: DesiredError| panic!("{}: {e}", source.path))
}
