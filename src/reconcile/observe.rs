//! One observation of an application: its desired state (a directory, or one revision
//! of a Git source) and its live state (a cluster, or a snapshot of objects on disk),
//! compared. `tether diff` is exactly this; a reconcile pass begins with it.
//!
//! Against a cluster the comparison is *online*: each desired object is compared with
//! the API server's own answer to a server-side apply dry run, so server defaults and
//! admission never look like drift. Against a snapshot it is *offline*: fields only the
//! live object has are taken as server defaults, and equal quantities compare equal.

use std::collections::HashMap;
use std::path::Path;

use futures::{StreamExt as _, TryStreamExt as _};
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::cluster::{Cluster, ClusterError};
use crate::diff::{
    DiffOptions, ExtraPolicy, IgnoreRule, MaskKey, Mode, OpenApiSchemas, diff_sets, is_secret,
};
use crate::manifest::{
    GroupKind, ManifestErrors, ManifestSet, ObjectId, ParseOptions, Scope, parse_files, read_dir,
};
use crate::ownership::{APP_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use crate::report::drift::DriftReport;
use crate::source::{Revision, Source, SourceCache, SourceError};

/// How many objects are dry-run against the API server at once: enough to hide
/// round trips, few enough not to trip API priority and fairness on a real cluster.
const DRY_RUN_CONCURRENCY: usize = 16;

/// Where desired state is read from.
pub enum DesiredInput<'a> {
    /// Manifests in a local directory (a `kustomization.yaml` is rendered).
    Dir(&'a Path),
    /// The files under a Git source's path, at the revision its ref resolves to.
    Git {
        cache: &'a SourceCache,
        source: &'a Source,
    },
}

/// Where live state is read from.
pub enum LiveInput<'a> {
    /// Objects as `kubectl get -o yaml` prints them, read by [`read_snapshot`].
    Snapshot(&'a ManifestSet),
    /// A cluster, asked for server-side apply dry runs.
    Cluster(&'a Cluster),
}

/// What an observation compares, and how.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// The app the objects belong to: ownership labels become part of the desired
    /// state, and (offline) live objects labelled for the app but no longer desired
    /// are reported as Extra. Without an app, manifests are compared as written.
    pub app: Option<&'a str>,
    /// Namespace for namespaced objects that name none.
    pub default_namespace: &'a str,
    pub rules: &'a [IgnoreRule],
    /// Where the app's inventory lives: online, what it lists and Git no longer has
    /// is reported as Extra.
    pub inventory_namespace: &'a str,
    /// The kinds' scopes as the cluster serves them (online); offline, the built-in
    /// table and the CRDs in the set decide, and an unknown kind is namespaced.
    pub scopes: Option<&'a Scopes>,
}

/// Kinds' scopes as discovery reports them.
pub type Scopes = HashMap<GroupKind, Scope>;

/// Desired state at one revision.
#[derive(Debug)]
pub struct Desired {
    pub revision: Option<Revision>,
    pub manifests: ManifestSet,
}

/// Why an observation failed; each variant names its stage.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error("source: {0}")]
    Source(#[from] SourceError),
    #[error("desired state: {0}")]
    Desired(#[source] ManifestErrors),
    #[error("live objects: {0}")]
    Live(#[source] ManifestErrors),
    #[error("cluster: {0}")]
    Cluster(#[from] ClusterError),
    /// A task of the observation failed (a panic): a bug, never the input's fault.
    #[error("internal error: {0}")]
    Internal(String),
    /// The app's inventory could not be read.
    #[error("inventory: {0}")]
    Inventory(String),
    /// The API server refused a dry run of one object (invalid field, conflict, …).
    #[error("{object}: {message}")]
    DryRun {
        object: String,
        message: String,
        retryable: bool,
    },
}

impl ObserveError {
    /// Whether trying again later can help without a change to Git or configuration.
    pub fn is_retryable(&self) -> bool {
        match self {
            ObserveError::Source(err) => err.is_retryable(),
            ObserveError::Desired(_) | ObserveError::Live(_) => false,
            ObserveError::Internal(_) => true,
            ObserveError::Inventory(_) => false,
            ObserveError::Cluster(err) => err.is_retryable(),
            ObserveError::DryRun { retryable, .. } => *retryable,
        }
    }
}

/// Reads and validates the desired state; a revision that does not validate yields
/// an error naming every bad file and document, and nothing else.
pub async fn read_desired(
    input: DesiredInput<'_>,
    observation: &Observation<'_>,
) -> Result<Desired, ObserveError> {
    let default_namespace = observation.default_namespace.to_string();
    let (revision, mut manifests) = match input {
        DesiredInput::Dir(path) => {
            let path = path.to_path_buf();
            let scopes = observation.scopes.cloned();
            let manifests = tokio::task::spawn_blocking(move || {
                let lookup = |gk: &GroupKind| scopes.as_ref()?.get(gk).copied();
                let options = ParseOptions {
                    default_namespace: &default_namespace,
                    scope: Some(&lookup),
                    ..ParseOptions::default()
                };
                read_dir(&path, &options)
            })
            .await
            .map_err(|e| ObserveError::Internal(e.to_string()))?
            .map_err(ObserveError::Desired)?;
            (None, manifests)
        }
        DesiredInput::Git { cache, source } => {
            let revision = cache.sync(source).await?;
            let manifests = read_revision(
                cache,
                source,
                &revision,
                &default_namespace,
                observation.scopes,
            )
            .await?;
            (Some(revision), manifests)
        }
    };
    if let Some(app) = observation.app {
        label_for_app(&mut manifests, app);
    }
    Ok(Desired {
        revision,
        manifests,
    })
}

/// The manifests of a source at a revision already fetched (no network).
pub async fn read_revision(
    cache: &SourceCache,
    source: &Source,
    revision: &Revision,
    default_namespace: &str,
    scopes: Option<&Scopes>,
) -> Result<ManifestSet, ObserveError> {
    let (cache, source, at) = (cache.clone(), source.clone(), revision.clone());
    let default_namespace = default_namespace.to_string();
    let scopes = scopes.cloned();
    tokio::task::spawn_blocking(move || {
        let files = cache
            .read_files(&source, &at)
            .map_err(ObserveError::Source)?;
        let files: Vec<(String, Vec<u8>)> = files.into_iter().map(|f| (f.path, f.bytes)).collect();
        let lookup = |gk: &GroupKind| scopes.as_ref()?.get(gk).copied();
        let options = ParseOptions {
            default_namespace: &default_namespace,
            scope: Some(&lookup),
            ..ParseOptions::default()
        };
        parse_files(&files, &options).map_err(ObserveError::Desired)
    })
    .await
    .map_err(|e| ObserveError::Internal(e.to_string()))?
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

/// Reads live objects as `kubectl get -o yaml` prints them (a `kind: List` or single
/// objects), from a file or a directory.
pub fn read_snapshot(
    path: &Path,
    observation: &Observation<'_>,
) -> Result<ManifestSet, ObserveError> {
    let options = ParseOptions {
        default_namespace: observation.default_namespace,
        ..ParseOptions::default()
    };
    read_dir(path, &options).map_err(ObserveError::Live)
}

/// Compares desired state with live state.
pub async fn observe(
    desired: &Desired,
    live: LiveInput<'_>,
    observation: &Observation<'_>,
) -> Result<DriftReport, ObserveError> {
    let mask = MaskKey::random();
    let objects = match live {
        LiveInput::Snapshot(live) => {
            let schema = schemas_for(&desired.manifests, live);
            let options = DiffOptions {
                mode: Mode::Offline,
                rules: observation.rules,
                schema: &schema,
                mask: &mask,
            };
            let extra = observation
                .app
                .map(ExtraPolicy::OwnedBy)
                .unwrap_or(ExtraPolicy::Ignore);
            diff_sets(
                desired.manifests.objects.iter().map(|m| (&m.id, &m.object)),
                live.objects.iter().map(|m| (&m.id, &m.object)),
                extra,
                &options,
            )
        }
        LiveInput::Cluster(cluster) => {
            let answers = dry_run_all(cluster, &desired.manifests).await?;
            let extra = match observation.app {
                Some(app) => extra_objects(cluster, app, observation, &desired.manifests).await?,
                None => Vec::new(),
            };
            let schema = schemas_for(&desired.manifests, &ManifestSet::default());
            let options = DiffOptions {
                mode: Mode::Online,
                rules: observation.rules,
                schema: &schema,
                mask: &mask,
            };
            // The app's objects Git no longer has: the live set is already exactly
            // what the inventory owns, so all of it is Extra.
            diff_sets(
                answers
                    .iter()
                    .map(|(id, written, dry_run, _)| (*id, dry_run.as_ref().unwrap_or(written))),
                answers
                    .iter()
                    .filter_map(|(id, _, _, live)| Some((*id, live.as_ref()?)))
                    .chain(extra.iter().map(|(id, live)| (id, live))),
                ExtraPolicy::All,
                &options,
            )
        }
    };
    Ok(DriftReport {
        revision: desired.revision.as_ref().map(|r| r.sha.clone()),
        objects,
    })
}

/// The objects the app's inventory lists, the desired set no longer has, and that
/// still exist labelled for the app: what a prune would delete.
async fn extra_objects(
    cluster: &Cluster,
    app: &str,
    observation: &Observation<'_>,
    desired: &ManifestSet,
) -> Result<Vec<(ObjectId, Value)>, ObserveError> {
    let inventory = crate::sync::read_inventory(cluster, app, observation.inventory_namespace)
        .await
        .map_err(|e| ObserveError::Inventory(e.to_string()))?;
    let wanted: std::collections::HashSet<_> = desired.objects.iter().map(|m| m.id.key()).collect();
    let mut extra = Vec::new();
    for id in crate::sync::prune::candidates(&inventory, &wanted) {
        let gvk = GroupVersionKind::gvk(&id.group, &id.version, &id.kind);
        let Some(kind) = cluster.resolve(&gvk).await? else {
            continue;
        };
        let namespace = if kind.namespaced {
            id.namespace.as_deref()
        } else {
            None
        };
        let live = cluster.get(&kind, namespace, &id.name).await?;
        if let Some(live) = live
            && crate::ownership::owned_by(&live, app)
        {
            extra.push((id, live));
        }
    }
    Ok(extra)
}

/// The schemas of every kind in both sets; CRDs in either declare their kinds'.
fn schemas_for(desired: &ManifestSet, live: &ManifestSet) -> OpenApiSchemas {
    let all = || desired.objects.iter().chain(live.objects.iter());
    let crds = all()
        .filter(|m| m.id.group == "apiextensions.k8s.io" && m.id.kind == "CustomResourceDefinition")
        .map(|m| &m.object);
    OpenApiSchemas::new(all().map(|m| &m.id), crds)
}

/// Per desired object: its identity, the object as written, the dry-run answer and
/// the live object (both absent when it is Missing).
type Answer<'m> = (&'m ObjectId, &'m Value, Option<Value>, Option<Value>);

async fn dry_run_all<'m>(
    cluster: &Cluster,
    manifests: &'m ManifestSet,
) -> Result<Vec<Answer<'m>>, ObserveError> {
    futures::stream::iter(manifests.objects.iter())
        .map(|manifest| async move {
            let (dry_run, live) = dry_run_one(cluster, &manifest.id, &manifest.object).await?;
            Ok::<_, ObserveError>((&manifest.id, &manifest.object, dry_run, live))
        })
        .buffered(DRY_RUN_CONCURRENCY)
        .try_collect()
        .await
}

/// The live object and the dry-run answer for one desired object. A kind the server
/// does not serve yet (a CRD in the same revision) or an object that does not exist
/// yet has no live object: it is Missing.
async fn dry_run_one(
    cluster: &Cluster,
    id: &ObjectId,
    object: &Value,
) -> Result<(Option<Value>, Option<Value>), ObserveError> {
    let gvk = GroupVersionKind::gvk(&id.group, &id.version, &id.kind);
    let Some(kind) = cluster.resolve(&gvk).await? else {
        tracing::info!(object = %id, "kind not served yet; reported as Missing");
        return Ok((None, None));
    };
    let namespace = if kind.namespaced {
        id.namespace.as_deref()
    } else {
        None
    };
    let Some(live) = cluster.get(&kind, namespace, &id.name).await? else {
        return Ok((None, None));
    };
    let answer = cluster
        .dry_run_apply(&kind, object, true)
        .await
        .map_err(|err| {
            let retryable = err.is_retryable();
            // The server's message may quote a field's value: never a Secret's.
            let message = if is_secret(id) {
                redacted(&err)
            } else {
                err.to_string()
            };
            ObserveError::DryRun {
                object: id.to_string(),
                message,
                retryable,
            }
        })?;
    Ok((Some(answer), Some(live)))
}

fn redacted(err: &ClusterError) -> String {
    match err {
        ClusterError::Api { code, reason, .. } => {
            format!("{reason} ({code}): the server's message is withheld for a Secret")
        }
        other => other.to_string(),
    }
}
