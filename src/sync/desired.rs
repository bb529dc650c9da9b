//! Observe desired: the manifests an app wants, from a directory or one revision of a
//! Git source, validated as a whole (a revision with one bad document yields an error
//! naming every bad file and document, and nothing else) and labelled for the app.
//! Offline, a snapshot of live objects on disk stands in for the cluster.

use std::path::Path;

use serde_json::Value;

use crate::diff::{
    DiffOptions, ExtraPolicy, IgnoreRule, MaskKey, Mode, ObjectDiff, OpenApiSchemas, diff_sets,
};
use crate::manifest::{
    GroupKind, Manifest, ManifestErrors, ManifestSet, ObjectId, Origin, ParseOptions, Renderers,
    Scope, needs_repository, read_dir, render_dir, render_tree,
};
use crate::ownership::{APP_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use crate::source::{Revision, Source, SourceCache, SourceError};

/// Kinds' scopes as discovery reports them.
pub type Scopes = std::collections::HashMap<GroupKind, Scope>;

/// Where desired state is read from.
pub enum DesiredInput<'a> {
    /// Manifests in a local directory, rendered in place.
    Dir(&'a Path),
    /// The files under a Git source's path, at the revision its ref resolves to.
    Git {
        cache: &'a SourceCache,
        source: &'a Source,
    },
}

/// How desired state is read.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions<'a> {
    /// The app the objects belong to: its ownership labels become part of the desired
    /// state. Without an app, manifests are compared as written.
    pub app: Option<&'a str>,
    /// Namespace for namespaced objects that name none.
    pub default_namespace: &'a str,
    /// The kinds' scopes as the cluster serves them; without them, the built-in table
    /// and the CRDs in the set decide, and an unknown kind is namespaced.
    pub scopes: Option<&'a Scopes>,
    /// The renderers the render stage may run (Kustomize's binary, remote bases).
    pub renderers: &'a Renderers,
}

/// Desired state at one revision.
#[derive(Debug)]
pub struct Desired {
    pub revision: Option<Revision>,
    pub manifests: ManifestSet,
}

/// Why desired (or, offline, live) state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DesiredError {
    #[error("source: {0}")]
    Source(#[from] SourceError),
    #[error("desired state: {0}")]
    Invalid(#[source] ManifestErrors),
    #[error("live objects: {0}")]
    Live(#[source] ManifestErrors),
    /// A task of the read failed (a panic): a bug, never the input's fault.
    #[error("internal error: {0}")]
    Internal(String),
}

impl DesiredError {
    /// Whether trying again later can help without a change to Git or configuration.
    pub fn is_retryable(&self) -> bool {
        match self {
            DesiredError::Source(err) => err.is_retryable(),
            DesiredError::Invalid(_) | DesiredError::Live(_) => false,
            DesiredError::Internal(_) => true,
        }
    }
}

/// Reads and validates the desired state.
pub async fn read_desired(
    input: DesiredInput<'_>,
    options: &ReadOptions<'_>,
) -> Result<Desired, DesiredError> {
    let default_namespace = options.default_namespace.to_string();
    let (revision, mut manifests) = match input {
        DesiredInput::Dir(path) => {
            let path = path.to_path_buf();
            let scopes = options.scopes.cloned();
            let renderers = options.renderers.clone();
            let manifests = tokio::task::spawn_blocking(move || {
                let lookup = |gk: &GroupKind| scopes.as_ref()?.get(gk).copied();
                let options = ParseOptions {
                    default_namespace: &default_namespace,
                    scope: Some(&lookup),
                    ..ParseOptions::default()
                };
                render_dir(&path, &renderers, &options)
            })
            .await
            .map_err(|e| DesiredError::Internal(e.to_string()))?
            .map_err(DesiredError::Invalid)?;
            (None, manifests)
        }
        DesiredInput::Git { cache, source } => {
            let revision = cache.sync(source).await?;
            let manifests = read_revision(
                cache,
                source,
                &revision,
                &default_namespace,
                options.scopes,
                options.renderers,
            )
            .await?;
            (Some(revision), manifests)
        }
    };
    if let Some(app) = options.app {
        label_for_app(&mut manifests, app);
    }
    Ok(Desired {
        revision,
        manifests,
    })
}

/// The manifests of a source at a revision already fetched (no network), rendered by
/// the same stage as a directory on disk. A kustomization may use any directory of
/// the repository, so then the whole commit's tree is read (symlinks leaving the
/// repository are refused there, as everywhere).
pub async fn read_revision(
    cache: &SourceCache,
    source: &Source,
    revision: &Revision,
    default_namespace: &str,
    scopes: Option<&Scopes>,
    renderers: &Renderers,
) -> Result<ManifestSet, DesiredError> {
    let (cache, source, at) = (cache.clone(), source.clone(), revision.clone());
    let default_namespace = default_namespace.to_string();
    let scopes = scopes.cloned();
    let renderers = renderers.clone();
    tokio::task::spawn_blocking(move || {
        let pairs = |files: Vec<crate::source::SourceFile>| -> Vec<(String, Vec<u8>)> {
            files.into_iter().map(|f| (f.path, f.bytes)).collect()
        };
        let mut files = pairs(
            cache
                .read_files(&source, &at)
                .map_err(DesiredError::Source)?,
        );
        if needs_repository(&files, &source.path, &renderers) {
            files = pairs(
                cache
                    .read_path(&source, &at, "")
                    .map_err(DesiredError::Source)?,
            );
        }
        let lookup = |gk: &GroupKind| scopes.as_ref()?.get(gk).copied();
        let options = ParseOptions {
            default_namespace: &default_namespace,
            scope: Some(&lookup),
            ..ParseOptions::default()
        };
        render_tree(&files, &source.path, &renderers, &options).map_err(DesiredError::Invalid)
    })
    .await
    .map_err(|e| DesiredError::Internal(e.to_string()))?
}

/// The render stage between passes: the manifests of the last revision rendered,
/// kept as compact JSON (a parsed object costs about twice its text in small
/// allocations, and parsing JSON back takes microseconds per object; YAML, with
/// validation, takes a thousand times longer). A pass with no new commit reads no Git
/// and runs no renderer. An app's path and renderers are fixed for its worker, so the
/// commit alone keys it.
#[derive(Debug, Default)]
pub struct RenderCache {
    kept: Option<(String, Vec<Kept>)>,
}

/// One kept object: its identity, where it came from, and its JSON.
type Kept = (ObjectId, Origin, Box<[u8]>);

impl RenderCache {
    /// The commit whose manifests are kept.
    pub fn revision(&self) -> Option<&String> {
        self.kept.as_ref().map(|(sha, _)| sha)
    }

    /// Some of the manifests kept for commit `sha` (those `wanted` picks), parsed
    /// alone; `None` when `sha` is not the commit kept.
    pub fn select(&self, sha: &str, wanted: impl Fn(&ObjectId) -> bool) -> Option<ManifestSet> {
        let (kept, manifests) = self.kept.as_ref()?;
        (kept == sha).then(|| ManifestSet {
            objects: manifests
                .iter()
                .filter(|(id, _, _)| wanted(id))
                .filter_map(|(id, origin, json)| {
                    Some(Manifest {
                        id: id.clone(),
                        object: serde_json::from_slice(json).ok()?,
                        origin: origin.clone(),
                    })
                })
                .collect(),
        })
    }

    /// The manifests at commit `sha`: the kept ones when it is the last rendered,
    /// else what `render` reads (then kept; an error keeps nothing new).
    pub async fn manifests<F, Fut, E>(&mut self, sha: &str, render: F) -> Result<ManifestSet, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ManifestSet, E>>,
    {
        if let Some(set) = self.select(sha, |_| true) {
            return Ok(set);
        }
        let set = render().await?;
        let manifests = set
            .objects
            .iter()
            .filter_map(|m| {
                let json = serde_json::to_vec(&m.object).ok()?.into_boxed_slice();
                Some((m.id.clone(), m.origin.clone(), json))
            })
            .collect();
        self.kept = Some((sha.to_string(), manifests));
        Ok(set)
    }
}

/// Adds the ownership labels an applied object carries, so they are part of what is
/// compared.
pub fn label_for_app(set: &mut ManifestSet, app: &str) {
    for manifest in &mut set.objects {
        let Some(metadata) = manifest
            .object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
            labels.insert(APP_LABEL.into(), app.into());
        }
    }
}

/// A set's objects without its hooks.
fn app_objects(set: &ManifestSet) -> impl Iterator<Item = (&ObjectId, &Value)> {
    set.objects
        .iter()
        .filter(|m| !crate::ownership::is_hook(&m.object))
        .map(|m| (&m.id, &m.object))
}

/// Reads live objects as `kubectl get -o yaml` prints them (a `kind: List` or single
/// objects), from a file or a directory.
pub fn read_snapshot(path: &Path, default_namespace: &str) -> Result<ManifestSet, DesiredError> {
    let options = ParseOptions {
        default_namespace,
        ..ParseOptions::default()
    };
    read_dir(path, &options).map_err(DesiredError::Live)
}

/// Compares desired state with a snapshot of live objects, offline: fields only the
/// live object has are taken as server defaults, and equal quantities compare equal.
/// With an app, live objects labelled for it but no longer desired are Extra.
pub fn compare_offline(
    desired: &ManifestSet,
    live: &ManifestSet,
    app: Option<&str>,
    rules: &[IgnoreRule],
) -> Vec<ObjectDiff> {
    let all = || desired.objects.iter().chain(live.objects.iter());
    let crds = all()
        .filter(|m| m.id.group == "apiextensions.k8s.io" && m.id.kind == "CustomResourceDefinition")
        .map(|m| &m.object);
    let schema = OpenApiSchemas::new(all().map(|m| &m.id), crds);
    let mask = MaskKey::random();
    let options = DiffOptions {
        mode: Mode::Offline,
        rules,
        schema: &schema,
        mask: &mask,
    };
    let extra = app.map(ExtraPolicy::OwnedBy).unwrap_or(ExtraPolicy::Ignore);
    // Hooks are not app objects: neither desired nor Extra.
    diff_sets(app_objects(desired), app_objects(live), extra, &options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmap(name: &str) -> Manifest {
        Manifest {
            id: ObjectId {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("web".into()),
                name: name.into(),
            },
            object: serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "web"},
            }),
            origin: Origin {
                file: format!("{name}.yaml"),
                document: 1,
                line: 1,
                item: None,
            },
        }
    }

    /// A heal reads back only the kept objects it heals, and only at the commit kept.
    #[tokio::test]
    async fn kept_manifests_are_selected_by_identity_at_their_commit_only() {
        let mut cache = RenderCache::default();
        let rendered = ManifestSet {
            objects: vec![configmap("a"), configmap("b"), configmap("c")],
        };
        let first = cache
            .manifests("abc", || async { Ok::<_, ()>(rendered.clone()) })
            .await;
        assert_eq!(first, Ok(rendered.clone()));
        // The same commit again is read back, not rendered.
        let again = cache
            .manifests("abc", || async { Err::<ManifestSet, _>(()) })
            .await;
        assert_eq!(again, Ok(rendered.clone()));

        let picked = cache.select("abc", |id| id.name == "b");
        assert_eq!(
            picked,
            Some(ManifestSet {
                objects: vec![configmap("b")]
            })
        );
        assert_eq!(cache.select("abc", |_| false), Some(ManifestSet::default()));
        assert_eq!(cache.select("def", |_| true), None);
    }
}
