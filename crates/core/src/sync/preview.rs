//! Observe desired, twice: what merging a change does to each app's desired state.
//! `tether diff --base REF` renders every app of a repository at the base and the
//! head commit with the same render stage as every pass ([`render_files`]) and
//! compares the two object sets with the diff stage, so a reviewer sees the objects
//! and fields a pull request adds, removes and changes.
//!
//! An app is rendered only when something its render reads changed: the Git object
//! ids of its path, of the Kustomize bases, components and files it uses and of a
//! chart's values files are compared between the commits first ([`render_inputs`]),
//! and an app whose inputs are all equal is reported unchanged without a render.
//! One app's render failure is that app's outcome; the others are still compared.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::desired::{DesiredError, files_to_render, render_files};
use super::inputs::{InputIds, render_reads};
use crate::source::{LocalRepo, Revision, SourceError, SourceFile};
use tether_diff::diff::{
    DiffOptions, ExtraPolicy, MaskKey, Mode, ObjectDiff, OpenApiSchemas, diff_sets,
    fold_string_data, is_secret,
};
use tether_diff::manifest::{
    FileTree, ManifestSet, ObjectId, Renderers, Sealed, needs_repository, render_inputs,
};

/// Labels that change with every chart release and say nothing about what the
/// objects do (Helm's chart label carries the chart version, which Renovate bumps).
pub const DEFAULT_NOISE_LABELS: &[&str] = &["helm.sh/chart"];

/// Annotations charts set to roll pods when a ConfigMap or Secret changes
/// (`checksum/config`, Helm's documented idiom): the change itself is shown on the
/// ConfigMap or Secret, the checksum only repeats it.
pub const DEFAULT_NOISE_ANNOTATIONS: &[&str] = &["checksum/*"];

/// Where pod metadata sits in the workload kinds, besides the object's own.
const METADATA_POINTERS: &[&str] = &[
    "/metadata",
    "/spec/template/metadata",
    "/spec/jobTemplate/spec/template/metadata",
];

/// Labels and annotations left out of the comparison: a key ending in `*` is a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoiseFilter {
    pub labels: Vec<String>,
    pub annotations: Vec<String>,
}

impl Default for NoiseFilter {
    fn default() -> Self {
        let owned = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect();
        NoiseFilter {
            labels: owned(DEFAULT_NOISE_LABELS),
            annotations: owned(DEFAULT_NOISE_ANNOTATIONS),
        }
    }
}

fn matches_key(patterns: &[String], key: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix),
        None => p == key,
    })
}

impl NoiseFilter {
    /// Removes the filtered labels and annotations from `object`; returns them,
    /// keyed by where they were, so the two revisions' can be compared.
    fn strip(&self, object: &mut Value) -> BTreeMap<String, Value> {
        let mut removed = BTreeMap::new();
        for pointer in METADATA_POINTERS {
            let Some(metadata) = object.pointer_mut(pointer) else {
                continue;
            };
            for (field, patterns) in [("labels", &self.labels), ("annotations", &self.annotations)]
            {
                let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) else {
                    continue;
                };
                let keys: Vec<String> = map
                    .keys()
                    .filter(|k| matches_key(patterns, k))
                    .cloned()
                    .collect();
                for key in keys {
                    if let Some(value) = map.shift_remove(&key) {
                        removed.insert(format!("{pointer}/{field}/{key}"), value);
                    }
                }
            }
        }
        removed
    }
}

/// The characters Kustomize encodes a generated name's hash suffix in (hex, with
/// `0 1 3 a e` replaced so that no word is spelled: kustomize's `encodeHash`).
const HASH_ALPHABET: &str = "bcdfghkmt2456789";

/// The length of that suffix (kustomize's `hash.Hash` takes the first ten characters).
const HASH_LEN: usize = 10;

/// The name without a Kustomize generator's hash suffix, for a ConfigMap or Secret.
fn generated_base(id: &ObjectId) -> Option<&str> {
    if !id.group.is_empty() || !matches!(id.kind.as_str(), "ConfigMap" | "Secret") {
        return None;
    }
    let (base, suffix) = id.name.rsplit_once('-')?;
    (suffix.len() == HASH_LEN && suffix.chars().all(|c| HASH_ALPHABET.contains(c))).then_some(base)
}

/// Gives each base object that only a hash suffix separates from one head object
/// that head object's name, so the two are compared as one changed object (the name
/// change shows among its fields) instead of a removal and an addition.
fn match_generated(base: &mut [(ObjectId, Value)], head: &[(ObjectId, Value)]) {
    let keys =
        |set: &[(ObjectId, Value)]| -> BTreeSet<_> { set.iter().map(|(id, _)| id.key()).collect() };
    let (base_keys, head_keys) = (keys(base), keys(head));
    let by_base = |set: &[(ObjectId, Value)], others: &BTreeSet<_>| {
        let mut found: HashMap<(String, Option<String>, String), Vec<String>> = HashMap::new();
        for (id, _) in set.iter().filter(|(id, _)| !others.contains(&id.key())) {
            if let Some(stem) = generated_base(id) {
                found
                    .entry((id.kind.clone(), id.namespace.clone(), stem.to_string()))
                    .or_default()
                    .push(id.name.clone());
            }
        }
        found
    };
    let heads = by_base(head, &base_keys);
    let bases = by_base(base, &head_keys);
    for (id, _) in base.iter_mut() {
        let Some(stem) = generated_base(id) else {
            continue;
        };
        let key = (id.kind.clone(), id.namespace.clone(), stem.to_string());
        if let (Some([_]), Some([new])) = (
            bases.get(&key).map(Vec::as_slice),
            heads.get(&key).map(Vec::as_slice),
        ) && !head_keys.contains(&id.key())
        {
            id.name = new.clone();
        }
    }
}

/// Two revisions of one app compared: objects matched by kind, namespace and name
/// (generated ConfigMaps and Secrets by their name without the hash suffix). In each
/// [`ObjectDiff`] "desired" is the head and "live" the base: `Missing` is an object
/// the change adds, `Extra` one it removes. Secret values are masked.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub objects: Vec<ObjectDiff>,
    /// Filtered labels and annotations that differed between the revisions.
    pub filtered: usize,
    /// SOPS documents read without keys that the change adds, edits or removes: they
    /// are changed, but not compared (issue #27).
    pub not_compared: Vec<Sealed>,
}

/// Compares an app's objects at the base and at the head. Pure.
pub fn compare_revisions(
    base: &ManifestSet,
    head: &ManifestSet,
    noise: &NoiseFilter,
) -> Comparison {
    let strip = |set: &ManifestSet| -> Vec<(ObjectId, Value, BTreeMap<String, Value>)> {
        set.objects
            .iter()
            .map(|m| {
                // Both sides as the API server stores them, so a value moved between
                // `stringData` and `data` is no change.
                let mut object = if is_secret(&m.id) {
                    fold_string_data(&m.object)
                } else {
                    m.object.clone()
                };
                let removed = noise.strip(&mut object);
                (m.id.clone(), object, removed)
            })
            .collect()
    };
    let (base_sealed, head_sealed) = (&base.sealed, &head.sealed);
    let (base, head) = (strip(base), strip(head));
    let noise_at: HashMap<_, _> = base.iter().map(|(id, _, r)| (id.key(), r)).collect();
    let mut filtered = 0;
    for (id, _, removed) in &head {
        if let Some(before) = noise_at.get(&id.key()) {
            let keys: BTreeSet<&String> = before.keys().chain(removed.keys()).collect();
            filtered += keys
                .into_iter()
                .filter(|k| before.get(*k) != removed.get(*k))
                .count();
        }
    }
    let mut base: Vec<(ObjectId, Value)> = base.into_iter().map(|(id, v, _)| (id, v)).collect();
    let head: Vec<(ObjectId, Value)> = head.into_iter().map(|(id, v, _)| (id, v)).collect();
    match_generated(&mut base, &head);
    let all = || base.iter().chain(head.iter());
    let crds = all()
        .filter(|(id, _)| {
            id.group == "apiextensions.k8s.io" && id.kind == "CustomResourceDefinition"
        })
        .map(|(_, v)| v);
    let schema = OpenApiSchemas::new(all().map(|(id, _)| id), crds);
    let mask = MaskKey::random();
    // Both sides are rendered manifests and neither has server defaults, so every
    // difference counts, as online.
    let options = DiffOptions {
        mode: Mode::Online,
        rules: &[],
        schema: &schema,
        mask: &mask,
    };
    let objects = diff_sets(
        head.iter().map(|(id, v)| (id, v)),
        base.iter().map(|(id, v)| (id, v)),
        ExtraPolicy::All,
        &options,
    );
    Comparison {
        objects,
        filtered,
        not_compared: changed_sealed(base_sealed, head_sealed),
    }
}

/// The sealed documents that differ between the revisions, by title and text: the
/// head's new or edited ones, then the base's the head no longer has.
fn changed_sealed(base: &[Sealed], head: &[Sealed]) -> Vec<Sealed> {
    let same = |a: &Sealed, b: &Sealed| a.title() == b.title() && a.fingerprint == b.fingerprint;
    let added_or_edited = head.iter().filter(|h| !base.iter().any(|b| same(b, h)));
    let removed = base
        .iter()
        .filter(|b| !head.iter().any(|h| h.title() == b.title()));
    added_or_edited.chain(removed).cloned().collect()
}

/// One app of the repository: where it is and how it renders.
#[derive(Debug, Clone)]
pub struct PreviewApp {
    pub name: String,
    pub path: String,
    pub default_namespace: String,
    pub renderers: Renderers,
}

/// Which revision a render failed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Base,
    Head,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Base => "base",
            Side::Head => "head",
        }
    }
}

/// What the change does to one app.
#[derive(Debug, Clone, PartialEq)]
pub enum AppOutcome {
    /// Nothing its render reads differs between the revisions: not rendered.
    Unchanged,
    /// Rendered at both revisions (the comparison may still find no difference).
    Compared(Comparison),
    /// The render failed at one revision; the message names the file and document.
    Failed { side: Side, error: String },
}

/// One app's line in a preview.
#[derive(Debug, Clone, PartialEq)]
pub struct AppPreview {
    pub name: String,
    pub outcome: AppOutcome,
    /// The head's objects, kept for a head-vs-live comparison when asked
    /// ([`preview`]'s `keep_heads`) and the app was rendered at both revisions.
    pub head: Option<ManifestSet>,
    /// The head against the cluster (or a snapshot of it): what merging does live.
    /// Filled by the caller that compared it; `None` when not compared.
    pub live: Option<Vec<ObjectDiff>>,
    /// Charts of the head that call `lookup` (issue #26): rendered without a
    /// cluster, their lookups answered nothing, as `helm template`'s do.
    pub empty_lookups: Vec<String>,
}

/// Every app of a repository between two commits.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    pub base: Revision,
    pub head: Revision,
    pub apps: Vec<AppPreview>,
    /// Renders performed: two per compared app at most, none for an unchanged one.
    pub renders: usize,
}

/// Why a preview could not be made at all (an app's render failure is no such).
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The repository or one of the commits could not be read: a changed checkout,
    /// not a retry, helps.
    #[error("{0}")]
    Source(#[from] SourceError),
    /// A task of the preview failed (a panic): a bug, never the input's fault.
    #[error("internal error: {0}")]
    Internal(String),
}

/// A revision's whole tree, read once and only if an app's render needs it.
struct WholeTree<'a> {
    repo: &'a LocalRepo,
    revision: &'a Revision,
    tree: Option<FileTree>,
}

impl WholeTree<'_> {
    fn tree(&mut self) -> Result<&FileTree, SourceError> {
        if self.tree.is_none() {
            let files = pairs(self.repo.read_path(self.revision, "")?);
            self.tree = Some(FileTree::new(files));
        }
        Ok(self.tree.get_or_insert_default())
    }

    /// What rendering `app` reads at this revision.
    fn inputs(&mut self, app: &PreviewApp) -> Result<BTreeSet<String>, SourceError> {
        if self.repo.object_id(self.revision, &app.path)?.is_none() {
            return Ok(BTreeSet::from([app.path.clone()]));
        }
        let at_path = pairs(self.repo.read_path(self.revision, &app.path)?);
        if needs_repository(&at_path, &app.path, &app.renderers) {
            return Ok(render_inputs(self.tree()?, &app.path, &app.renderers));
        }
        Ok(render_reads(at_path, &app.path, &app.renderers))
    }
}

fn pairs(files: Vec<SourceFile>) -> Vec<(String, Vec<u8>)> {
    files.into_iter().map(|f| (f.path, f.bytes)).collect()
}

/// Compares every app between `base` and `head` of `repo`. Blocking (renders run
/// here): call it from `spawn_blocking` in async code.
pub fn preview(
    repo: &LocalRepo,
    base: &Revision,
    head: &Revision,
    apps: &[PreviewApp],
    noise: &NoiseFilter,
    keep_heads: bool,
) -> Result<Preview, PreviewError> {
    let mut trees = [base, head].map(|revision| WholeTree {
        repo,
        revision,
        tree: None,
    });
    let mut outcomes: Vec<Option<Compared>> = Vec::with_capacity(apps.len());
    let mut changed = Vec::new();
    for (i, app) in apps.iter().enumerate() {
        if unchanged(repo, &mut trees, app)? {
            outcomes.push(Some((AppOutcome::Unchanged, None, Vec::new())));
        } else {
            outcomes.push(None);
            changed.push(i);
        }
    }
    let renders = compare_changed(
        repo,
        [base, head],
        apps,
        &changed,
        noise,
        keep_heads,
        &mut outcomes,
    )?;
    let apps = apps
        .iter()
        .zip(outcomes)
        .map(|(app, outcome)| {
            let (outcome, head, empty_lookups) =
                outcome.unwrap_or((AppOutcome::Unchanged, None, Vec::new()));
            AppPreview {
                name: app.name.clone(),
                outcome,
                head,
                live: None,
                empty_lookups,
            }
        })
        .collect();
    Ok(Preview {
        base: base.clone(),
        head: head.clone(),
        apps,
        renders,
    })
}

/// Changed apps rendered at once, at most: one per core, as
/// `std::thread::available_parallelism` counts them. A render is CPU-bound (the
/// in-process reader, or a Kustomize or Helm process waited on), so more would
/// only queue; each worker holds one app's two object sets at a time.
fn render_workers(changed: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(changed)
        .max(1)
}

/// An app's outcome, with the head's objects when it was rendered at both revisions
/// and kept, and the head's charts whose lookups answered nothing.
type Compared = (AppOutcome, Option<ManifestSet>, Vec<String>);

/// Renders and compares the `changed` apps (indexes into `apps`), several at once,
/// each worker with its own handle on the repository; their outcomes are written
/// into `outcomes`. Returns the renders performed.
fn compare_changed(
    repo: &LocalRepo,
    sides: [&Revision; 2],
    apps: &[PreviewApp],
    changed: &[usize],
    noise: &NoiseFilter,
    keep_heads: bool,
    outcomes: &mut [Option<Compared>],
) -> Result<usize, PreviewError> {
    let workers = render_workers(changed.len());
    let mut renders = 0;
    if workers == 1 {
        for &i in changed {
            let (outcome, n) = compare_app(repo, sides, &apps[i], noise, keep_heads);
            outcomes[i] = Some(outcome);
            renders += n;
        }
        return Ok(renders);
    }
    let handles = (0..workers)
        .map(|_| repo.reopen())
        .collect::<Result<Vec<_>, _>>()?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let finished = std::thread::scope(|scope| {
        let threads: Vec<_> = handles
            .into_iter()
            .map(|repo| {
                let next = &next;
                scope.spawn(move || {
                    let mut done = Vec::new();
                    while let Some(&i) =
                        changed.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                    {
                        done.push((i, compare_app(&repo, sides, &apps[i], noise, keep_heads)));
                    }
                    done
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join()).collect::<Vec<_>>()
    });
    for worker in finished {
        let done = worker.map_err(|_| PreviewError::Internal("a render worker panicked".into()))?;
        for (i, (outcome, n)) in done {
            outcomes[i] = Some(outcome);
            renders += n;
        }
    }
    Ok(renders)
}

/// One changed app rendered at both revisions and compared, with the head's
/// objects; and the renders performed (an app's path absent at a revision has
/// nothing to render there).
fn compare_app(
    repo: &LocalRepo,
    [base, head]: [&Revision; 2],
    app: &PreviewApp,
    noise: &NoiseFilter,
    keep_head: bool,
) -> (Compared, usize) {
    let mut renders = 0;
    let mut render = |revision: &Revision, side: Side| -> Result<ManifestSet, AppOutcome> {
        if repo
            .object_id(revision, &app.path)
            .map_err(|e| failed(side, e.into()))?
            .is_none()
        {
            // The app's path is new (or gone): it has no objects there.
            return Ok(ManifestSet::default());
        }
        renders += 1;
        let files = files_to_render(
            |path| repo.read_path(revision, path),
            &app.path,
            &app.renderers,
        )
        .map_err(|e| failed(side, e))?;
        render_files(
            &files,
            &app.path,
            &app.default_namespace,
            None,
            &app.renderers,
        )
        .map_err(|e| failed(side, e))
    };
    let outcome = match render(base, Side::Base).and_then(|b| Ok((b, render(head, Side::Head)?))) {
        Ok((b, h)) => {
            let compared = AppOutcome::Compared(compare_revisions(&b, &h, noise));
            let empty_lookups = h.empty_lookups.clone();
            (compared, keep_head.then_some(h), empty_lookups)
        }
        Err(failure) => (failure, None, Vec::new()),
    };
    (outcome, renders)
}

fn failed(side: Side, error: DesiredError) -> AppOutcome {
    AppOutcome::Failed {
        side,
        error: error.to_string(),
    }
}

/// Whether every path the app's render reads, at either revision, has the same Git
/// object id at both.
fn unchanged(
    repo: &LocalRepo,
    trees: &mut [WholeTree<'_>; 2],
    app: &PreviewApp,
) -> Result<bool, SourceError> {
    let [base, head] = trees;
    // Most apps a change touches are changed under their own path: no more to read.
    if repo.object_id(base.revision, &app.path)? != repo.object_id(head.revision, &app.path)? {
        return Ok(false);
    }
    let mut inputs = base.inputs(app)?;
    inputs.extend(head.inputs(app)?);
    let ids = |at: &Revision| InputIds::read(&inputs, |path| repo.object_id(at, path));
    Ok(ids(base.revision)? == ids(head.revision)?)
}

/// The Secret keys a comparison shows as changed, added or removed (names only).
pub fn secret_keys(o: &ObjectDiff) -> Vec<String> {
    if !is_secret(&o.id) {
        return Vec::new();
    }
    let keys = |v: Option<&Value>| -> BTreeSet<String> {
        v.and_then(|v| v.get("data"))
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    let mut changed: BTreeSet<String> = o
        .drift
        .changes()
        .iter()
        .filter_map(|c| match c.path.segments() {
            [
                tether_diff::diff::Segment::Field(f),
                tether_diff::diff::Segment::Field(k),
                ..,
            ] if f == "data" || f == "stringData" => Some(k.clone()),
            _ => None,
        })
        .collect();
    if o.desired.is_none() || o.live.is_none() || changed.is_empty() {
        changed.extend(keys(o.desired.as_ref()));
        changed.extend(keys(o.live.as_ref()));
    }
    changed.into_iter().collect()
}
