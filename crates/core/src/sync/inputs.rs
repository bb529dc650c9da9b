//! Observe desired, without rendering: what an app's render reads at a commit, named
//! by Git object ids. Every path the render stage reads ([`render_inputs`]: the app's
//! path, the Kustomize bases, components and files its kustomizations use, a chart's
//! values files from elsewhere in the repository) is looked up in the commit's tree,
//! and the ids, with tether's version and the renderer settings, make a digest. Two
//! commits with the same digest render the same objects, so in a monorepo a commit
//! re-renders only the apps it touched (issue #28), and `tether diff --base` compares
//! only those ([`InputIds`] is what both compare).
//!
//! Only the tree ids decide: a webhook's list of changed files is never trusted to
//! skip an app. A new commit costs one id lookup per input path of the previous
//! commit: if they are all equal the inputs are the same paths (which paths a render
//! reads is decided by the content of those same paths), else they are read again.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use super::desired::{DesiredError, files_to_render};
use crate::source::charts;
use crate::source::{Revision, Source, SourceCache, SourceError};
use tether_diff::manifest::{FileTree, Renderers, render_inputs};

/// Names the digest's layout: a change to what it covers makes every digest new, so
/// an upgraded tether renders every app again.
const DIGEST_FORMAT: &str = "tether-inputs/1";

/// Hex digits of the digest kept in an identity: 128 bits, far beyond any collision
/// a repository's commits could meet.
const DIGEST_HEX: usize = 32;

/// Each input path of an app with its Git object id at one commit (`None`: absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputIds(BTreeMap<String, Option<String>>);

impl InputIds {
    /// The ids of `paths`, each looked up by `id_of` (a commit's tree).
    pub fn read<P: AsRef<str>>(
        paths: impl IntoIterator<Item = P>,
        mut id_of: impl FnMut(&str) -> Result<Option<String>, SourceError>,
    ) -> Result<InputIds, SourceError> {
        let mut ids = BTreeMap::new();
        for path in paths {
            let path = path.as_ref();
            ids.insert(path.to_string(), id_of(path)?);
        }
        Ok(InputIds(ids))
    }

    /// The input paths, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// What rendering `path` reads among `files` (what [`files_to_render`] read: the
/// path's files, or the whole tree when the render may use any of it). A chart's
/// `file://` dependencies may lie anywhere in the repository: such an app reads, for
/// all this knows, all of it (`""`).
pub fn render_reads(
    files: Vec<(String, Vec<u8>)>,
    path: &str,
    renderers: &Renderers,
) -> BTreeSet<String> {
    let whole = charts::needs_repository(&files, path);
    let mut reads = render_inputs(&FileTree::new(files), path, renderers);
    if whole {
        reads.insert(String::new());
    }
    reads
}

/// What a render at one commit is made of: the ids of what it reads, and the
/// renderer settings. Pure.
pub fn digest(inputs: &InputIds, renderers: &Renderers) -> String {
    // Variables and SOPS keys have their own identity (the worker adds it), and the
    // timeout changes no output: the rest is what the renderers are told.
    let settings = Renderers {
        substitute: None,
        sops: Default::default(),
        timeout: Default::default(),
        ..renderers.clone()
    };
    let mut hash = Sha256::new();
    for part in [
        DIGEST_FORMAT,
        env!("CARGO_PKG_VERSION"),
        &format!("{settings:?}"),
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    for (path, id) in &inputs.0 {
        hash.update(path.as_bytes());
        hash.update([0]);
        hash.update(id.as_deref().unwrap_or("-").as_bytes());
        hash.update([0]);
    }
    let mut hex = hex::encode(hash.finalize());
    hex.truncate(DIGEST_HEX);
    hex
}

/// An app's inputs identity at a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The commit it was computed at.
    pub sha: String,
    inputs: InputIds,
    digest: String,
}

impl Identity {
    /// The identity as the render cache keys it (`inputs.<digest>`).
    pub fn id(&self) -> String {
        format!("inputs.{}", self.digest)
    }

    /// The paths whose ids make it.
    pub fn inputs(&self) -> &InputIds {
        &self.inputs
    }
}

/// The inputs identity of a Git source's app at `revision`, from the clone (no
/// network). With the identity at an earlier commit, only the ids of its input paths
/// are looked up when they are all unchanged; else what the render reads is read
/// again. `None` for a chart source, whose revision already names the chart's version
/// and digest. Blocking: call it from `spawn_blocking` in async code.
pub fn identify(
    cache: &SourceCache,
    source: &Source,
    revision: &Revision,
    renderers: &Renderers,
    previous: Option<&Identity>,
) -> Result<Option<Identity>, DesiredError> {
    if source.is_registry() {
        return Ok(None);
    }
    let ids_of = |paths: &BTreeSet<String>| -> Result<InputIds, SourceError> {
        let found = cache.object_ids(source, revision, paths.iter().map(String::as_str))?;
        Ok(InputIds(
            found
                .into_iter()
                .map(|(path, id)| (path.to_string(), id))
                .collect(),
        ))
    };
    if let Some(previous) = previous {
        if previous.sha == revision.sha {
            return Ok(Some(previous.clone()));
        }
        let paths = previous.inputs.paths().map(str::to_string).collect();
        let inputs = ids_of(&paths)?;
        if inputs == previous.inputs {
            return Ok(Some(Identity {
                sha: revision.sha.clone(),
                inputs,
                digest: previous.digest.clone(),
            }));
        }
    }
    let files = files_to_render(
        |path| cache.read_path(source, revision, path),
        &source.path,
        renderers,
    )?;
    let inputs = ids_of(&render_reads(files, &source.path, renderers))?;
    Ok(Some(Identity {
        sha: revision.sha.clone(),
        digest: digest(&inputs, renderers),
        inputs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(pairs: &[(&str, Option<&str>)]) -> InputIds {
        InputIds(
            pairs
                .iter()
                .map(|(p, id)| (p.to_string(), id.map(str::to_string)))
                .collect(),
        )
    }

    fn files(pairs: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        pairs
            .iter()
            .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn the_digest_changes_with_an_input_id_a_path_or_a_renderer_setting() {
        let renderers = Renderers::default();
        let base = ids(&[("apps/web", Some("aaa")), ("base", Some("bbb"))]);
        let first = digest(&base, &renderers);
        assert_eq!(first.len(), DIGEST_HEX);
        assert_eq!(digest(&base.clone(), &renderers), first, "deterministic");
        for changed in [
            ids(&[("apps/web", Some("aaa")), ("base", Some("ccc"))]),
            ids(&[("apps/web", Some("aaa")), ("base", None)]),
            ids(&[("apps/web", Some("aaa")), ("other", Some("bbb"))]),
            ids(&[("apps/web", Some("aaa"))]),
        ] {
            assert_ne!(digest(&changed, &renderers), first, "{changed:?}");
        }
        let mut helm = renderers.clone();
        helm.helm.value_files = vec!["../values/prod.yaml".into()];
        assert_ne!(digest(&base, &helm), first, "values files");
        let remote = Renderers {
            allow_remote_bases: true,
            ..renderers.clone()
        };
        assert_ne!(digest(&base, &remote), first, "remote bases");
        let release = Renderers {
            release: "other".into(),
            ..renderers.clone()
        };
        assert_ne!(digest(&base, &release), first, "release name");
    }

    #[test]
    fn the_digest_ignores_the_render_timeout_and_what_has_its_own_identity() {
        let renderers = Renderers::default();
        let base = ids(&[("apps/web", Some("aaa"))]);
        let slower = Renderers {
            timeout: std::time::Duration::from_secs(1),
            ..renderers.clone()
        };
        assert_eq!(digest(&base, &slower), digest(&base, &renderers));
    }

    #[test]
    fn a_plain_directory_reads_itself_and_an_overlay_its_base() {
        let renderers = Renderers::default();
        let plain = render_reads(
            files(&[("apps/web/cm.yaml", "kind: ConfigMap")]),
            "apps/web",
            &renderers,
        );
        assert_eq!(plain, BTreeSet::from(["apps/web".to_string()]));
        let overlay = render_reads(
            files(&[
                (
                    "apps/api/kustomization.yaml",
                    "resources: [../../shared/base]\n",
                ),
                ("shared/base/kustomization.yaml", "resources: [cm.yaml]\n"),
                ("shared/base/cm.yaml", "kind: ConfigMap"),
                ("README.md", "hello"),
            ]),
            "apps/api",
            &renderers,
        );
        assert!(overlay.contains("apps/api"), "{overlay:?}");
        assert!(overlay.contains("shared/base"), "{overlay:?}");
        assert!(!overlay.iter().any(|p| p.is_empty() || p == "README.md"));
    }

    #[test]
    fn a_chart_reads_its_values_files_and_with_local_dependencies_everything() {
        let renderers = Renderers {
            helm: tether_diff::manifest::HelmInputs {
                value_files: vec!["../../values/web.yaml".into()],
                ..Default::default()
            },
            ..Renderers::default()
        };
        let chart = "apiVersion: v2\nname: web\nversion: 1.0.0\n";
        let reads = render_reads(
            files(&[
                ("charts/web/Chart.yaml", chart),
                ("values/web.yaml", "replicas: 2\n"),
            ]),
            "charts/web",
            &renderers,
        );
        assert!(reads.contains("values/web.yaml"), "{reads:?}");
        assert!(!reads.contains(""), "{reads:?}");
        let with_dep = format!(
            "{chart}dependencies:\n- name: lib\n  version: 1.0.0\n  repository: file://../lib\n"
        );
        let reads = render_reads(
            files(&[("charts/web/Chart.yaml", &with_dep)]),
            "charts/web",
            &renderers,
        );
        assert!(reads.contains(""), "the whole repository: {reads:?}");
    }
}
