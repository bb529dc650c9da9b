//! Observe desired: the manifests an app wants, from a directory or one revision of a
//! Git source, validated as a whole (a revision with one bad document yields an error
//! naming every bad file and document, and nothing else) and labelled for the app.
//! Offline, a snapshot of live objects on disk stands in for the cluster.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::cluster::Cluster;
use crate::cluster::lookup::LookupEndpoint;
use crate::source::charts::{self, ChartError};
use crate::source::{
    Revision, Source, SourceCache, SourceError, Verdicts, Verified, VerifyError, VerifyPolicy,
};
use tether_diff::diff::{
    DiffOptions, ExtraPolicy, IgnoreRule, MaskKey, Mode, ObjectDiff, OpenApiSchemas, diff_sets,
};
use tether_diff::manifest::{
    GroupKind, Manifest, ManifestErrors, ManifestSet, ObjectId, ObjectKey, Origin, ParseOptions,
    Renderers, Scope, needs_repository, read_dir, render_dir, render_tree,
};
use tether_schema::ownership::{APP_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE};

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
        /// Signatures the revision must carry before anything renders it.
        verify: Option<Verification<'a>>,
    },
}

/// A signed-commit check of a Git input ([`SourceCache::verify`]).
#[derive(Debug, Clone, Copy)]
pub struct Verification<'a> {
    pub policy: &'a VerifyPolicy,
    /// The last applied commit, for [`crate::source::VerifyMode::AllSinceLast`].
    pub since: Option<&'a str>,
    pub verdicts: &'a Verdicts,
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
    /// Who signed the revision, when its input asked for a check.
    pub verified: Option<Verified>,
    pub manifests: ManifestSet,
}

/// Why desired (or, offline, live) state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DesiredError {
    #[error("source: {0}")]
    Source(#[from] SourceError),
    /// The revision is not signed by a trusted key: nothing of it is rendered.
    #[error("source verification: {0}")]
    Unverified(#[from] VerifyError),
    #[error("desired state: {0}")]
    Invalid(#[source] ManifestErrors),
    /// A chart's dependencies could not be vendored (issue #26).
    #[error("chart dependencies: {0}")]
    Chart(Box<ChartError>),
    #[error("live objects: {0}")]
    Live(#[source] ManifestErrors),
    /// The endpoint answering a chart's `lookup` could not be served (issue #26).
    #[error(transparent)]
    Lookup(#[from] crate::cluster::lookup::LookupError),
    /// A task of the read failed (a panic): a bug, never the input's fault.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<ChartError> for DesiredError {
    fn from(err: ChartError) -> Self {
        DesiredError::Chart(Box::new(err))
    }
}

impl DesiredError {
    /// Whether trying again later can help without a change to Git or configuration.
    pub fn is_retryable(&self) -> bool {
        match self {
            DesiredError::Source(err) => err.is_retryable(),
            DesiredError::Unverified(err) => err.is_retryable(),
            DesiredError::Invalid(errors) => errors.is_retryable(),
            DesiredError::Chart(err) => err.is_retryable(),
            DesiredError::Live(_) => false,
            DesiredError::Lookup(_) | DesiredError::Internal(_) => true,
        }
    }
}

/// Reads and validates the desired state.
pub async fn read_desired(
    input: DesiredInput<'_>,
    options: &ReadOptions<'_>,
) -> Result<Desired, DesiredError> {
    let default_namespace = options.default_namespace.to_string();
    let mut verified = None;
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
        DesiredInput::Git {
            cache,
            source,
            verify,
        } => {
            let revision = cache.sync(source).await?;
            if let Some(check) = verify {
                verified = Some(verify_revision(cache, source, &revision, check).await?);
            }
            let manifests = read_revision(
                cache,
                source,
                &revision,
                &default_namespace,
                options.scopes,
                options.renderers,
                None,
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
        verified,
        manifests,
    })
}

/// Checks a fetched revision's signatures off the async threads (each is a few
/// hundred microseconds of public-key arithmetic).
pub async fn verify_revision(
    cache: &SourceCache,
    source: &Source,
    revision: &Revision,
    check: Verification<'_>,
) -> Result<Verified, VerifyError> {
    let (cache, source, revision) = (cache.clone(), source.clone(), revision.clone());
    let policy = check.policy.clone();
    let since = check.since.map(str::to_string);
    let verdicts = check.verdicts.clone();
    tokio::task::spawn_blocking(move || {
        cache.verify(&source, &revision, &policy, since.as_deref(), &verdicts)
    })
    .await
    .map_err(|e| {
        VerifyError::Source(SourceError::Git {
            message: format!("verification task failed: {e}"),
        })
    })?
}

/// The manifests of a source at a revision already fetched (no network), rendered by
/// the same stage as a directory on disk. A kustomization may use any directory of
/// the repository, so then the whole commit's tree is read (symlinks leaving the
/// repository are refused there, as everywhere). A chart source's revision is its
/// chart's files ([`charts::ChartStore::chart_files`]), an OCI artifact's its layer's
/// ([`charts::ChartStore::artifact_files`]). A chart's dependencies that are
/// not vendored in its `charts/` are vendored first ([`charts::ChartStore::vendor`]).
/// With `lookups`, a chart's `lookup` calls read that cluster through an endpoint
/// served for this render only ([`LookupEndpoint`]); a directory or a kustomization
/// renders without one.
pub async fn read_revision(
    cache: &SourceCache,
    source: &Source,
    revision: &Revision,
    default_namespace: &str,
    scopes: Option<&Scopes>,
    renderers: &Renderers,
    lookups: Option<&Cluster>,
) -> Result<ManifestSet, DesiredError> {
    let (cache, source, at) = (cache.clone(), source.clone(), revision.clone());
    let default_namespace = default_namespace.to_string();
    let scopes = scopes.cloned();
    let renderers = renderers.clone();
    let lookups = lookups.cloned();
    tokio::task::spawn_blocking(move || {
        // This blocking thread may wait for the runtime's I/O: the fetches are async.
        let runtime = tokio::runtime::Handle::current();
        let (mut files, login) = match &source.chart {
            None if source.artifact => runtime.block_on(async {
                let login = cache.chart_login(&source).await?;
                let files = cache
                    .charts()
                    .artifact_files(&source.url, &at, &login)
                    .await?;
                Ok::<_, DesiredError>((files, Some(login)))
            })?,
            Some(chart) => runtime.block_on(async {
                let login = cache.chart_login(&source).await?;
                let files = cache
                    .charts()
                    .chart_files(&source.url, chart, &at, &login)
                    .await?;
                Ok::<_, DesiredError>((files, Some(login)))
            })?,
            None => (
                files_to_render(
                    |path| cache.read_path(&source, &at, path),
                    &source.path,
                    &renderers,
                )?,
                None,
            ),
        };
        // A chart source's login also serves its dependencies on the same repository;
        // the app's dependencyCredentials those on others.
        runtime.block_on(async {
            let logins = cache.dependency_logins(&source, login).await?;
            cache
                .charts()
                .vendor(&mut files, &source.path, &logins)
                .await?;
            Ok::<_, DesiredError>(())
        })?;
        let endpoint = match &lookups {
            Some(cluster) if charts::is_chart(&files, &source.path) => {
                Some(runtime.block_on(LookupEndpoint::start(cluster))?)
            }
            _ => None,
        };
        let renderers = match &endpoint {
            Some(endpoint) => renderers.with_lookup(endpoint.kubeconfig()),
            None => renderers,
        };
        render_files(
            &files,
            &source.path,
            &default_namespace,
            scopes.as_ref(),
            &renderers,
        )
    })
    .await
    .map_err(|e| DesiredError::Internal(e.to_string()))?
}

/// The files the render of `path` reads at a revision that `read` reads a path of (a
/// clone's, or a local repository's for `tether diff --base`): the files at `path`, or
/// the whole tree when a kustomization, a chart's values or its `file://`
/// dependencies may use any of it. Blocking.
pub fn files_to_render(
    read: impl Fn(&str) -> Result<Vec<crate::source::SourceFile>, SourceError>,
    path: &str,
    renderers: &Renderers,
) -> Result<Vec<(String, Vec<u8>)>, DesiredError> {
    let pairs = |files: Vec<crate::source::SourceFile>| -> Vec<(String, Vec<u8>)> {
        files.into_iter().map(|f| (f.path, f.bytes)).collect()
    };
    let files = pairs(read(path)?);
    if needs_repository(&files, path, renderers) || charts::needs_repository(&files, path) {
        return Ok(pairs(read("")?));
    }
    Ok(files)
}

/// The render stage over the files [`files_to_render`] read. Blocking.
pub fn render_files(
    files: &[(String, Vec<u8>)],
    path: &str,
    default_namespace: &str,
    scopes: Option<&Scopes>,
    renderers: &Renderers,
) -> Result<ManifestSet, DesiredError> {
    let lookup = |gk: &GroupKind| scopes?.get(gk).copied();
    let options = ParseOptions {
        default_namespace,
        scope: Some(&lookup),
        ..ParseOptions::default()
    };
    render_tree(files, path, renderers, &options).map_err(DesiredError::Invalid)
}

/// The render stage between passes: the manifests of the last revision rendered,
/// kept as compact JSON (a parsed object costs about twice its text in small
/// allocations, and parsing JSON back takes microseconds per object; YAML, with
/// validation, takes a thousand times longer). A pass with no new commit reads no Git
/// and runs no renderer. An app's path and renderers are fixed for its worker, so the
/// commit alone keys it.
#[derive(Debug, Default)]
pub struct RenderCache {
    kept: Option<Kept>,
}

/// One revision's objects: every object's JSON in one buffer, deflated, and per
/// object where it came from and where its JSON lies. One allocation for all the
/// text, both exactly sized: a thousand apps keep these for as long as they run, and
/// many small long-lived allocations between a pass's short-lived ones are what
/// fragments the heap. An app's manifests repeat each other, so deflated they take a
/// few times less; inflating them back takes a fraction of parsing them. An object's
/// identity is read back from its JSON; only one that differs from what the JSON
/// declares is kept beside it.
#[derive(Debug)]
struct Kept {
    sha: String,
    deflated: Box<[u8]>,
    /// Bytes of JSON `deflated` holds.
    len: usize,
    objects: Box<[KeptObject]>,
}

/// Deflate's fastest level: manifests of one app repeat each other, and the first
/// level finds that.
const KEPT_LEVEL: u8 = 1;

#[derive(Debug)]
struct KeptObject {
    id: Option<Box<ObjectId>>,
    origin: Origin,
    json: std::ops::Range<usize>,
}

impl Kept {
    fn new(sha: &str, set: &ManifestSet) -> Kept {
        let mut json = Vec::new();
        let mut objects = Vec::with_capacity(set.objects.len());
        for m in &set.objects {
            let start = json.len();
            if serde_json::to_writer(&mut json, &m.object).is_err() {
                // Not kept: the pass that reads it back renders again (unreachable
                // for a Value, whose keys are strings).
                json.truncate(start);
                continue;
            }
            let declared = ObjectId::of(&m.object).is_some_and(|id| id == m.id);
            objects.push(KeptObject {
                id: (!declared).then(|| Box::new(m.id.clone())),
                origin: m.origin.clone(),
                json: start..json.len(),
            });
        }
        Kept {
            sha: sha.to_string(),
            deflated: miniz_oxide::deflate::compress_to_vec(&json, KEPT_LEVEL).into_boxed_slice(),
            len: json.len(),
            objects: objects.into_boxed_slice(),
        }
    }

    /// The kept objects `wanted` picks, parsed back; `None` if the text does not
    /// inflate (this module never writes such). An object whose identity is read from
    /// its JSON is first looked at as text (`maybe`), so a heal of one object does not
    /// parse the revision's every other object to find it.
    fn read(
        &self,
        maybe: impl Fn(&[u8]) -> bool,
        wanted: impl Fn(&ObjectId) -> bool,
    ) -> Option<ManifestSet> {
        let json =
            miniz_oxide::inflate::decompress_to_vec_with_limit(&self.deflated, self.len).ok()?;
        Some(ManifestSet {
            objects: self
                .objects
                .iter()
                .filter_map(|kept| {
                    let text = json.get(kept.json.clone())?;
                    let keep = match &kept.id {
                        Some(id) => wanted(id),
                        None => maybe(text),
                    };
                    if !keep {
                        return None;
                    }
                    let object: Value = serde_json::from_slice(text).ok()?;
                    let id = match &kept.id {
                        Some(id) => ObjectId::clone(id),
                        None => ObjectId::of(&object).filter(|id| wanted(id))?,
                    };
                    Some(Manifest {
                        id,
                        object,
                        origin: kept.origin.clone(),
                    })
                })
                .collect(),
            // A pass that keeps revisions (serve, sync) never reads sealed, and
            // answers lookups from its cluster.
            sealed: Vec::new(),
            empty_lookups: Vec::new(),
        })
    }
}

impl RenderCache {
    /// The commit whose manifests are kept.
    pub fn revision(&self) -> Option<&String> {
        self.kept.as_ref().map(|kept| &kept.sha)
    }

    /// The manifests kept for commit `sha` whose keys are in `keys`, parsed alone;
    /// `None` when `sha` is not the commit kept (or its text does not read back).
    pub fn select(&self, sha: &str, keys: &HashSet<ObjectKey>) -> Option<ManifestSet> {
        let kept = self.kept.as_ref().filter(|kept| kept.sha == sha)?;
        // A wanted object's JSON holds its name as serde_json writes it: an object
        // without one of those strings is not parsed at all.
        let names: Vec<Vec<u8>> = keys
            .iter()
            .filter_map(|key| serde_json::to_vec(&key.name).ok())
            .collect();
        let maybe = |text: &[u8]| {
            names
                .iter()
                .any(|name| text.windows(name.len()).any(|w| w == name.as_slice()))
        };
        kept.read(maybe, |id| keys.contains(&id.key()))
    }

    /// The manifests at commit `sha`: the kept ones when it is the last rendered,
    /// else what `render` reads (then kept; an error keeps nothing new).
    pub async fn manifests<F, Fut, E>(&mut self, sha: &str, render: F) -> Result<ManifestSet, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ManifestSet, E>>,
    {
        if let Some(kept) = &self.kept
            && kept.sha == sha
            && let Some(set) = kept.read(|_| true, |_| true)
        {
            return Ok(set);
        }
        let set = render().await?;
        // The old revision's text goes before the new one's is written.
        self.kept = None;
        self.kept = Some(Kept::new(sha, &set));
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
        .filter(|m| !tether_schema::ownership::is_hook(&m.object))
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

    fn manifest(name: &str, value: Value) -> Manifest {
        Manifest {
            id: ObjectId {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("shop".into()),
                name: name.into(),
            },
            object: serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "shop"},
                "data": {"value": value},
            }),
            origin: Origin {
                file: format!("{name}.yaml"),
                document: 1,
                line: 1,
                item: None,
            },
        }
    }

    fn set(value: &str) -> ManifestSet {
        // A hook named by generateName, and an object whose identity is not what its
        // JSON declares: both are kept as rendered.
        let mut hook = manifest("d", "hook".into());
        hook.object["metadata"] = serde_json::json!({
            "generateName": "migrate-", "namespace": "shop",
            "annotations": {"tether.dev/hook": "PreSync"},
        });
        hook.id.name = "migrate-".into();
        let mut undeclared = manifest("e", "other".into());
        undeclared.id.namespace = Some("elsewhere".into());
        ManifestSet {
            objects: vec![
                manifest("a", value.into()),
                manifest("b", serde_json::json!({"nested": [1, "two", null]})),
                manifest("c", "é \"quoted\"".into()),
                hook,
                undeclared,
            ],
            ..ManifestSet::default()
        }
    }

    #[tokio::test]
    async fn a_kept_revision_reads_back_as_rendered_without_rendering() {
        let mut cache = RenderCache::default();
        let first = cache
            .manifests("sha-1", || async { Ok::<_, ()>(set("one")) })
            .await
            .unwrap();
        assert_eq!(first, set("one"));
        assert_eq!(cache.revision().map(String::as_str), Some("sha-1"));
        // Only the identity its JSON does not declare is kept beside it.
        let kept = cache.kept.as_ref().expect("kept");
        let ids: Vec<_> = kept
            .objects
            .iter()
            .filter_map(|o| o.id.as_deref())
            .collect();
        assert_eq!(ids, [&set("one").objects[4].id]);
        let again = cache
            .manifests("sha-1", || async { Err(()) })
            .await
            .expect("the kept revision, no render");
        assert_eq!(again, set("one"));
    }

    #[tokio::test]
    async fn a_new_revision_renders_and_a_failed_render_keeps_the_old() {
        let mut cache = RenderCache::default();
        cache
            .manifests("sha-1", || async { Ok::<_, ()>(set("one")) })
            .await
            .unwrap();
        let failed = cache.manifests("sha-2", || async { Err("broken") }).await;
        assert_eq!(failed, Err("broken"));
        assert_eq!(cache.revision().map(String::as_str), Some("sha-1"));
        let second = cache
            .manifests("sha-2", || async { Ok::<_, &str>(set("two")) })
            .await
            .unwrap();
        assert_eq!(second, set("two"));
        let kept = cache
            .manifests("sha-2", || async { Err("not called") })
            .await
            .unwrap();
        assert_eq!(kept, set("two"));
    }

    /// A heal reads back only the kept objects it heals, and only at the commit kept:
    /// by the identity kept beside the JSON or read from it, names with escapes too.
    #[tokio::test]
    async fn kept_manifests_are_selected_by_identity_at_their_commit_only() {
        let mut cache = RenderCache::default();
        cache
            .manifests("sha-1", || async { Ok::<_, ()>(set("one")) })
            .await
            .unwrap();
        let objects = set("one").objects;
        let keys = |picked: &[&Manifest]| -> HashSet<ObjectKey> {
            picked.iter().map(|m| m.id.key()).collect()
        };
        let picked = cache.select("sha-1", &keys(&[&objects[1], &objects[4]]));
        assert_eq!(
            picked,
            Some(ManifestSet {
                objects: vec![objects[1].clone(), objects[4].clone()],
                ..ManifestSet::default()
            })
        );
        // The same name in another namespace is not the object kept.
        let mut elsewhere = objects[0].id.key();
        elsewhere.namespace = Some("elsewhere".into());
        assert_eq!(
            cache.select("sha-1", &HashSet::from([elsewhere])),
            Some(ManifestSet::default())
        );
        let mut quoted = objects[2].clone();
        quoted.id.name = "c \"quoted\"".into();
        quoted.object["metadata"]["name"] = quoted.id.name.clone().into();
        cache
            .manifests("sha-2", || async {
                Ok::<_, ()>(ManifestSet {
                    objects: vec![quoted.clone()],
                    ..ManifestSet::default()
                })
            })
            .await
            .unwrap();
        assert_eq!(
            cache.select("sha-2", &keys(&[&quoted])),
            Some(ManifestSet {
                objects: vec![quoted],
                ..ManifestSet::default()
            })
        );
        assert_eq!(cache.select("sha-1", &keys(&[&objects[0]])), None);
    }

    /// Kept text is deflated: an app's manifests repeat each other. Text that does
    /// not inflate is never read as an empty revision: the pass renders again, and a
    /// heal leaves the object to it.
    #[tokio::test]
    async fn a_kept_revision_is_deflated_and_one_that_does_not_inflate_is_rendered_again() {
        let many = ManifestSet {
            objects: (0..200)
                .map(|i| manifest(&format!("cm-{i}"), format!("v{i}").into()))
                .collect(),
            ..ManifestSet::default()
        };
        let mut cache = RenderCache::default();
        cache
            .manifests("sha-1", || async { Ok::<_, ()>(many.clone()) })
            .await
            .unwrap();
        let kept = cache.kept.as_mut().expect("kept");
        assert!(
            kept.deflated.len() * 4 < kept.len,
            "{} bytes kept for {} of JSON",
            kept.deflated.len(),
            kept.len
        );
        kept.deflated = Box::from(&kept.deflated[..kept.deflated.len() / 2]);
        let key = HashSet::from([many.objects[0].id.key()]);
        assert_eq!(cache.select("sha-1", &key), None);
        let again = cache
            .manifests("sha-1", || async { Ok::<_, ()>(set("rendered")) })
            .await
            .unwrap();
        assert_eq!(again, set("rendered"), "rendered again, not read as empty");
        assert_eq!(
            cache
                .manifests("sha-1", || async { Err(()) })
                .await
                .unwrap(),
            set("rendered")
        );
    }
}
