//! The render stage: a revision's files at an app's path → objects, by one set of
//! rules for every source (a directory on disk, a Git commit's tree).
//!
//! The path decides how, as Argo CD and Flux users expect: a path whose root holds a
//! kustomization is built by Kustomize, as one app and only that; a path holding a
//! `Chart.yaml` is a Helm chart, rendered by `helm template`; anything else is a
//! plain directory read recursively, dot-directories and non-manifest files skipped.
//! A kustomization below the root of a plain directory is built as a unit, as Flux's
//! generated kustomization does; one that another of them already builds (a `base/`
//! next to the `overlays/` using it) is refused rather than rendered twice.

mod chart_on_disk;
mod helm;
mod kustomize;
mod lookup;
mod post_render;
mod process;
mod redact;
mod value_refs;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

pub(super) use chart_on_disk::template_on_disk;
pub(crate) use helm::Templated;
pub use helm::{CHART_FILE, HelmInputs, ValuesLayer};
pub use kustomize::KustomizeCommand;
pub use kustomize::resolve;
use kustomize::{TreeView, closure, join, kustomization_file};
pub use process::DEFAULT_RENDER_TIMEOUT;
use redact::KnownSecrets;
pub use value_refs::{REF_PREFIX, is_ref_file};

use super::error::{Location, ManifestError, ManifestErrors};
use super::{Input, ManifestSet, ParseOptions, SopsKeys, is_manifest_file, parse_inputs};

/// The renderers an app's files may need, and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renderers {
    /// Builds kustomizations; `kubectl kustomize` by default.
    pub kustomize: KustomizeCommand,
    /// Whether a kustomization may name remote bases (URLs), which kustomize fetches
    /// itself, outside tether's source cache and its credentials. Off by default.
    pub allow_remote_bases: bool,
    /// How a chart is rendered: the release, its values, the cluster's capabilities.
    pub helm: HelmInputs,
    /// The release name when the app's configuration names none: the app's name.
    pub release: String,
    /// How long one renderer run may take before it and every process it started
    /// are killed ([`DEFAULT_RENDER_TIMEOUT`]).
    pub timeout: Duration,
    /// Post-build substitution of the rendered objects, whatever rendered them.
    pub substitute: Option<super::substitute::Substitution>,
    /// Keys for SOPS-encrypted manifests (none by default: such a file is an error).
    pub sops: SopsKeys,
    /// Kustomizations applied in order to a chart's output (Flux's
    /// `postRenderers[].kustomize`): each a kustomization's `patches`, `images`,
    /// `commonLabels` and `labels`, without `resources` (see [`post_render`]).
    pub post_renderers: Vec<serde_json::Value>,
}

impl Default for Renderers {
    fn default() -> Self {
        Renderers {
            kustomize: KustomizeCommand::default(),
            allow_remote_bases: false,
            helm: HelmInputs::default(),
            release: String::new(),
            timeout: DEFAULT_RENDER_TIMEOUT,
            substitute: None,
            sops: SopsKeys::default(),
            post_renderers: Vec::new(),
        }
    }
}

impl Renderers {
    /// The same renderers for a known destination cluster: charts see its version
    /// and API versions as `.Capabilities`, as Argo CD passes them to `helm template`.
    pub fn for_cluster(mut self, kube_version: String, api_versions: Vec<String>) -> Renderers {
        self.helm.kube_version = Some(kube_version);
        self.helm.api_versions = api_versions;
        self
    }

    /// The same renderers with a pass's values read from ConfigMaps and Secrets
    /// (`valuesFrom`), merged after the value files and before the inline values.
    pub fn with_values_from(mut self, layers: Vec<ValuesLayer>) -> Renderers {
        self.helm.values_from = layers;
        self
    }

    /// The same renderers with the value files of other sources read for this pass
    /// (`$NAME/path` entries of `valueFiles`), by their entry.
    pub fn with_ref_values(mut self, files: BTreeMap<String, ValuesLayer>) -> Renderers {
        self.helm.ref_values = files;
        self
    }

    /// The same renderers answering a chart's `lookup` calls through the read-only
    /// endpoint whose kubeconfig is at `kubeconfig`, served for this render only.
    pub fn with_lookup(mut self, kubeconfig: &Path) -> Renderers {
        self.helm.lookup = Some(kubeconfig.to_path_buf());
        self
    }

    /// `opts` with this render's SOPS keys and post-build substitution, unless `opts`
    /// has its own.
    pub(crate) fn parse_options<'a>(&'a self, opts: &ParseOptions<'a>) -> ParseOptions<'a> {
        ParseOptions {
            sops_keys: opts.sops_keys.or(self.sops.get()),
            sops_sealed: opts.sops_sealed || self.sops.is_sealed(),
            substitute: opts.substitute.or(self.substitute.as_ref()),
            ..*opts
        }
    }
}

/// A Git tree (or any in-memory file set) as kustomize's reference walk sees it.
struct MemTree<'a>(&'a BTreeMap<String, &'a [u8]>);

impl TreeView for MemTree<'_> {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.0.get(path).map(|b| b.to_vec())
    }
    fn is_file(&self, path: &str) -> bool {
        self.0.contains_key(path)
    }
    fn is_dir(&self, path: &str) -> bool {
        let prefix = dir_prefix(path);
        self.0
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
    }
}

/// The machine's file system, paths absolute without the leading `/`: on disk the
/// repository's bounds are unknown, so only remote bases are checked there.
pub(super) struct DiskTree;

impl TreeView for DiskTree {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        let p = PathBuf::from(format!("/{path}"));
        if p.is_file() { fs::read(p).ok() } else { None }
    }
    fn is_file(&self, path: &str) -> bool {
        Path::new(&format!("/{path}")).is_file()
    }
    fn is_dir(&self, path: &str) -> bool {
        Path::new(&format!("/{path}")).is_dir()
    }
}

fn disk_key(dir: &Path) -> String {
    dir.to_string_lossy().trim_start_matches('/').to_string()
}

/// Checks a kustomization on disk (remote bases) and builds it in place, or, when a
/// file it reads is SOPS-encrypted, in a private copy where that file is decrypted.
pub(super) fn build_on_disk(
    dir: &Path,
    at: &Location,
    renderers: &Renderers,
) -> Result<Vec<u8>, ManifestError> {
    let used = closure(&DiskTree, &disk_key(dir), renderers.allow_remote_bases)?;
    if let Some(files) = encrypted_closure(&used) {
        let map: BTreeMap<String, &[u8]> = files
            .iter()
            .map(|(k, b)| (k.clone(), b.as_slice()))
            .collect();
        return build_in_copy(&MemTree(&map), &map, &disk_key(dir), at, renderers);
    }
    renderers
        .kustomize
        .build(dir, renderers.timeout, at)
        .map_err(|e| {
            let dirs = used.dirs.iter().map(|d| PathBuf::from(format!("/{d}")));
            let files = used.files.iter().map(|f| PathBuf::from(format!("/{f}")));
            known_on_disk(dirs, files, &[]).mask_error(e)
        })
}

/// Files read from disk for [`KnownSecrets`], only once a renderer has failed, and
/// of a kustomization's closure to look for SOPS files: at most this many, each
/// within [`super::MAX_FILE_BYTES`].
const MAX_KNOWN_FILES: usize = 10_000;

/// The files under `dirs` (symlinks and dot-folders not followed) whose name `keep`
/// accepts, and `files`, read: at most [`MAX_KNOWN_FILES`], each within
/// [`super::MAX_FILE_BYTES`]. The bool says whether every one was read.
fn read_on_disk(
    dirs: impl Iterator<Item = PathBuf>,
    files: impl Iterator<Item = PathBuf>,
    keep: fn(&str) -> bool,
) -> (Vec<(String, Vec<u8>)>, bool) {
    let mut paths: Vec<PathBuf> = files.collect();
    let mut stack: Vec<PathBuf> = dirs.collect();
    let mut whole = true;
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if paths.len() >= MAX_KNOWN_FILES {
                whole = false;
                break;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue; // `.git` and its packs: no manifest in there
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() && keep(&name) => paths.push(entry.path()),
                _ => {}
            }
        }
    }
    let read: Vec<(String, Vec<u8>)> = paths
        .into_iter()
        .filter(|p| fs::metadata(p).is_ok_and(|m| m.len() <= super::MAX_FILE_BYTES))
        .filter_map(|p| Some((p.to_string_lossy().into_owned(), fs::read(&p).ok()?)))
        .collect();
    (read, whole)
}

/// The secret values of the manifest files under `dirs` and of `files`.
fn known_on_disk(
    dirs: impl Iterator<Item = PathBuf>,
    files: impl Iterator<Item = PathBuf>,
    set: &[String],
) -> KnownSecrets {
    let (read, _) = read_on_disk(dirs, files, is_manifest_file);
    KnownSecrets::from_files(read.iter().map(|(p, b)| (p.as_str(), b.as_slice())), set)
}

/// The files a kustomization on disk reads, by [`DiskTree`] key, when one of them is
/// a SOPS file (and all of them could be read); None when it builds in place.
fn encrypted_closure(used: &kustomize::Closure) -> Option<Vec<(String, Vec<u8>)>> {
    let dirs = used.dirs.iter().map(|d| PathBuf::from(format!("/{d}")));
    let files = used.files.iter().map(|f| PathBuf::from(format!("/{f}")));
    let (read, whole) = read_on_disk(dirs, files, |_| true);
    let encrypted = read.iter().any(|(p, b)| super::sops::is_sops_file(p, b));
    (encrypted && whole).then(|| {
        read.into_iter()
            .map(|(p, b)| (p.trim_start_matches('/').to_string(), b))
            .collect()
    })
}

/// Refuses nested kustomizations of which one builds another (on disk).
pub(super) fn check_nested_on_disk(
    nested: &[(String, PathBuf)],
    renderers: &Renderers,
) -> Vec<ManifestError> {
    let keys: Vec<(String, String)> = nested
        .iter()
        .map(|(rel, abs)| (rel.clone(), disk_key(abs)))
        .collect();
    double_renders(&DiskTree, &keys, renderers)
}

/// `(name in errors, key in tree)` of each nested kustomization.
fn double_renders(
    tree: &dyn TreeView,
    nested: &[(String, String)],
    renderers: &Renderers,
) -> Vec<ManifestError> {
    let mut errors = Vec::new();
    if nested.len() < 2 {
        return errors;
    }
    for (name, key) in nested {
        let Ok(used) = closure(tree, key, renderers.allow_remote_bases) else {
            continue; // the build itself reports it
        };
        for (other_name, other_key) in nested {
            if other_key != key && used.dirs.contains(other_key) {
                errors.push(ManifestError::DoubleRender {
                    at: Location::file(other_name),
                    by: name.clone(),
                });
            }
        }
    }
    errors
}

/// Normalizes an app path: no leading, trailing or doubled `/`, no `.`.
fn norm(path: &str) -> String {
    path.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether rendering `path` needs files outside it: a kustomization at or under the
/// path may reference any directory of the repository (`../../base`), and a chart's
/// values files may lie anywhere in it (`../../values/prod.yaml`).
pub fn needs_repository<P: AsRef<str>>(
    files_at_path: &[(P, Vec<u8>)],
    path: &str,
    renderers: &Renderers,
) -> bool {
    let path = norm(path);
    let chart = join(&path, CHART_FILE);
    if files_at_path.iter().any(|(p, _)| norm(p.as_ref()) == chart)
        && renderers.helm.value_files.iter().any(|f| {
            !is_ref_file(f)
                && resolve(&path, f)
                    .is_none_or(|key| !(path.is_empty() || key.starts_with(&format!("{path}/"))))
        })
    {
        return true;
    }
    files_at_path.iter().any(|(p, _)| {
        let p = p.as_ref();
        let name = p.rsplit('/').next().unwrap_or(p);
        let under = path.is_empty() || p == path || p.starts_with(&format!("{path}/"));
        under && super::KUSTOMIZATION_FILES.contains(&name)
    })
}

/// A revision's files by path from the repository root, for [`render_inputs`]:
/// built once, then asked about every app of the revision.
#[derive(Debug, Default)]
pub struct FileTree(BTreeMap<String, Vec<u8>>);

impl FileTree {
    pub fn new<P: AsRef<str>>(files: Vec<(P, Vec<u8>)>) -> FileTree {
        FileTree(
            files
                .into_iter()
                .map(|(p, b)| (norm(p.as_ref()), b))
                .collect(),
        )
    }

    /// The paths of the files under `dir` (`""`: all of them).
    fn under<'a>(&'a self, dir: &str) -> impl Iterator<Item = &'a String> {
        let prefix = dir_prefix(dir);
        let exact = (!dir.is_empty()).then(|| self.0.get_key_value(dir).map(|(k, _)| k));
        self.0
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(move |k| k.starts_with(&prefix))
            .chain(exact.flatten())
    }
}

impl TreeView for FileTree {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.0.get(path).cloned()
    }
    fn is_file(&self, path: &str) -> bool {
        self.0.contains_key(path)
    }
    fn is_dir(&self, path: &str) -> bool {
        self.under(path).next().is_some_and(|k| k != path)
    }
}

/// The repository paths (directories or files) whose content rendering `path` reads:
/// the path itself, every directory and file the kustomizations at or under it use
/// (bases, components, generator files), and a chart's values files from elsewhere.
/// When [`needs_repository`] says so, `tree` must hold the whole repository. Two
/// revisions with the same content at each of these paths render the same objects,
/// so `tether diff --base` skips such an app. A kustomization whose references do
/// not resolve reads, for all this knows, the whole repository (`""`).
pub fn render_inputs(tree: &FileTree, path: &str, renderers: &Renderers) -> BTreeSet<String> {
    let path = norm(path);
    let mut inputs = BTreeSet::from([path.clone()]);
    if tree.is_file(&join(&path, CHART_FILE)) {
        inputs.extend(
            renderers
                .helm
                .value_files
                .iter()
                .filter(|f| !is_ref_file(f))
                .map(|f| resolve(&path, f).unwrap_or_default()),
        );
        return inputs;
    }
    let kustomizations: Vec<&str> = tree
        .under(&path)
        .filter_map(|key| {
            let (dir, name) = key.rsplit_once('/').unwrap_or(("", key));
            super::KUSTOMIZATION_FILES.contains(&name).then_some(dir)
        })
        .collect();
    for dir in kustomizations {
        match closure(tree, dir, renderers.allow_remote_bases) {
            Ok(used) => inputs.extend(used.dirs.into_iter().chain(used.files)),
            Err(_) => {
                inputs.insert(String::new());
            }
        }
    }
    inputs
}

/// Renders the files of a tree (a Git commit's, keyed by their path from the
/// repository root) at `path`. When [`needs_repository`] says so, `files` must hold
/// the whole repository, since a kustomization may use any of it; Kustomize then runs
/// on a private copy of exactly the files the build reads, removed afterwards.
pub fn render_tree<P: AsRef<str>>(
    files: &[(P, Vec<u8>)],
    path: &str,
    renderers: &Renderers,
    opts: &ParseOptions<'_>,
) -> Result<ManifestSet, ManifestErrors> {
    let opts = &renderers.parse_options(opts);
    let path = norm(path);
    let opts = &renderers.parse_options(opts);
    let map: BTreeMap<String, &[u8]> = files
        .iter()
        .map(|(p, b)| (norm(p.as_ref()), b.as_slice()))
        .collect();
    let tree = MemTree(&map);
    let mut inputs = Vec::new();
    let mut errors = Vec::new();

    if map.contains_key(&join(&path, CHART_FILE)) {
        let mut empty_lookups = false;
        match template_in_copy(&map, &path, renderers) {
            Ok(out) => {
                empty_lookups = out.empty_lookups;
                inputs.push(rendered_as(&path, CHART_FILE, out.bytes));
            }
            Err(e) => errors.push(e),
        }
        return parse_inputs(inputs, errors, opts).map(|mut set| {
            if empty_lookups {
                set.empty_lookups.push(in_repo(&path).to_string());
            }
            set
        });
    }
    if kustomization_file(&tree, &path).is_some() {
        match build_in_copy(&tree, &map, &path, &in_repo(&path), renderers) {
            Ok(bytes) => inputs.push(rendered(&path, bytes)),
            Err(e) => errors.push(e),
        }
        return parse_inputs(inputs, errors, opts);
    }

    // A plain directory (or a single file).
    let prefix = dir_prefix(&path);
    let mut nested: BTreeSet<String> = BTreeSet::new();
    for (key, bytes) in &map {
        let rel = if *key == path {
            key.rsplit('/').next().unwrap_or(key).to_string()
        } else if let Some(rel) = key.strip_prefix(&prefix) {
            rel.to_string()
        } else {
            continue;
        };
        let components: Vec<&str> = rel.split('/').collect();
        if components.iter().any(|c| c.starts_with('.')) {
            continue; // .git, .github, editor files: the same rule as on disk
        }
        // The outermost directory below the root holding a kustomization owns it.
        let mut owner = None;
        for depth in 1..components.len() {
            let dir = join(&path, &components[..depth].join("/"));
            if kustomization_file(&tree, &dir).is_some() {
                owner = Some(dir);
                break;
            }
        }
        match owner {
            Some(dir) => {
                nested.insert(dir);
            }
            None if is_manifest_file(&rel) => inputs.push(Input {
                path: key.clone(),
                bytes: bytes.to_vec(),
                rendered: false,
            }),
            None => {}
        }
    }
    let named: Vec<(String, String)> = nested.iter().map(|d| (d.clone(), d.clone())).collect();
    let doubles = double_renders(&tree, &named, renderers);
    if !doubles.is_empty() {
        return Err(ManifestErrors(doubles));
    }
    for dir in &nested {
        match build_in_copy(&tree, &map, dir, &in_repo(dir), renderers) {
            Ok(bytes) => inputs.push(rendered(dir, bytes)),
            Err(e) => errors.push(e),
        }
    }
    parse_inputs(inputs, errors, opts)
}

/// Materializes the chart at `dir` (its whole directory: templates, subcharts under
/// `charts/`, values files) and the values files it is given from elsewhere in the
/// revision, at their places in the repository, and renders it there.
fn template_in_copy(
    map: &BTreeMap<String, &[u8]>,
    dir: &str,
    renderers: &Renderers,
) -> Result<Templated, ManifestError> {
    let at = in_repo(dir);
    let mut copy = RenderCopy::new(&at, renderers)?;
    let prefix = dir_prefix(dir);
    for (key, bytes) in under(map, &prefix) {
        copy.write(key, bytes)?;
    }
    let refs = scratch_dir("tether-ref-values-").map_err(|source| ManifestError::Io {
        at: at.clone(),
        source,
    })?;
    let mut value_files = Vec::new();
    for (i, file) in renderers.helm.value_files.iter().enumerate() {
        if let Some(path) = renderers.helm.ref_file(file, i, refs.path(), &at)? {
            value_files.push(path);
            continue;
        }
        let key = resolve(dir, file).ok_or_else(|| ManifestError::OutsideRepository {
            at: at.clone(),
            field: "valueFiles",
            reference: file.clone(),
        })?;
        // Not in the tree: missing, or a symlink the source refused to follow.
        let bytes = map
            .get(&key)
            .ok_or_else(|| ManifestError::MissingValuesFile {
                at: at.clone(),
                file: file.clone(),
            })?;
        value_files.push(copy.write(&key, bytes)?);
    }
    let chart = copy.dir.path().join(dir);
    let out = renderers
        .helm
        .template(
            &chart,
            &value_files,
            &renderers.release,
            renderers.timeout,
            &at,
        )
        .and_then(|out| post_rendered(out, renderers, &at));
    let mut plaintext = copy.finish();
    drop(refs);
    out.map_err(|e| {
        let values = renderers
            .helm
            .values
            .iter()
            .map(|v| ("values.yaml", v.as_bytes()));
        let files = under(map, &prefix).chain(values);
        plaintext.extend(renderers.helm.secret_values());
        KnownSecrets::from_files(files, &renderers.helm.set)
            .with(plaintext)
            .mask_error(e)
    })
}

/// The files of `map` under `prefix` (a directory with its `/`, or all of them).
fn under<'a>(
    map: &'a BTreeMap<String, &'a [u8]>,
    prefix: &'a str,
) -> impl Iterator<Item = (&'a str, &'a [u8])> {
    map.range(prefix.to_string()..)
        .take_while(move |(key, _)| key.starts_with(prefix))
        .map(|(key, bytes)| (key.as_str(), *bytes))
}

/// A private copy of the part of the revision a renderer reads, removed when finished,
/// and the plaintext of the SOPS files written into it decrypted (errors mask it).
struct RenderCopy<'r> {
    dir: tempfile::TempDir,
    at: &'r Location,
    renderers: &'r Renderers,
    plaintext: Vec<String>,
}

impl<'r> RenderCopy<'r> {
    fn new(at: &'r Location, renderers: &'r Renderers) -> Result<Self, ManifestError> {
        let dir = scratch_dir("tether-render-").map_err(|source| ManifestError::Io {
            at: at.clone(),
            source,
        })?;
        Ok(RenderCopy {
            dir,
            at,
            renderers,
            plaintext: Vec::new(),
        })
    }

    /// Writes file `key` of the revision into the copy: its path there.
    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<PathBuf, ManifestError> {
        let root = self.dir.path();
        write_in_copy(
            root,
            key,
            bytes,
            self.at,
            self.renderers,
            &mut self.plaintext,
        )
    }

    /// Removes the copy: the plaintext it held.
    fn finish(self) -> Vec<String> {
        self.plaintext
    }
}

/// Writes one file of the revision into the private copy at `root`, refusing a path
/// that would land outside it (`..`, absolute): the source checks tree entries too,
/// but nothing a repository names may write where tether did not mean to. A SOPS file
/// is written decrypted with the renderers' keys, its values added to `plaintext`.
fn write_in_copy(
    root: &Path,
    key: &str,
    bytes: &[u8],
    at: &Location,
    renderers: &Renderers,
    plaintext: &mut Vec<String>,
) -> Result<PathBuf, ManifestError> {
    let inside = !key.is_empty()
        && Path::new(key)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if !inside {
        return Err(ManifestError::OutsideRenderFolder {
            at: at.clone(),
            path: key.to_string(),
        });
    }
    let io = |source| ManifestError::Io {
        at: at.clone(),
        source,
    };
    let target = root.join(key);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(io)?;
    }
    match super::sops::decrypt_for_copy(key, bytes, renderers.sops.get())? {
        Some((plain, values)) => {
            plaintext.extend(values);
            fs::write(&target, plain).map_err(io)?;
        }
        None => fs::write(&target, bytes).map_err(io)?,
    }
    Ok(target)
}

/// A chart's output with the app's post-renderers applied.
fn post_rendered(
    out: Templated,
    renderers: &Renderers,
    at: &Location,
) -> Result<Templated, ManifestError> {
    Ok(Templated {
        bytes: post_render::apply(out.bytes, renderers, at)?,
        ..out
    })
}

/// A directory of the revision as errors name it.
/// The prefix of the paths under `dir` (`""`: the whole tree).
fn dir_prefix(dir: &str) -> String {
    if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    }
}

/// A private folder a render writes into, removed when dropped.
pub(super) fn scratch_dir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(prefix).tempdir()
}

fn in_repo(dir: &str) -> Location {
    Location::file(if dir.is_empty() { "." } else { dir })
}

fn rendered(dir: &str, bytes: Vec<u8>) -> Input {
    rendered_as(dir, "kustomization.yaml", bytes)
}

/// A renderer's output, named after the file that asked for it.
fn rendered_as(dir: &str, name: &str, bytes: Vec<u8>) -> Input {
    Input {
        path: join(dir, name),
        bytes,
        rendered: true,
    }
}

/// Materializes what the kustomization at `dir` reads into a private temporary
/// directory and builds it there; `at` names it in errors.
fn build_in_copy(
    tree: &MemTree<'_>,
    map: &BTreeMap<String, &[u8]>,
    dir: &str,
    at: &Location,
    renderers: &Renderers,
) -> Result<Vec<u8>, ManifestError> {
    let at = at.clone();
    let used = closure(tree, dir, renderers.allow_remote_bases)?;
    let mut copy = RenderCopy::new(&at, renderers)?;
    for d in &used.dirs {
        for (key, bytes) in under(map, &dir_prefix(d)) {
            copy.write(key, bytes)?;
        }
    }
    for f in &used.files {
        if let Some(bytes) = map.get(f) {
            copy.write(f, bytes)?;
        }
    }
    let out = renderers
        .kustomize
        .build(&copy.dir.path().join(dir), renderers.timeout, &at);
    let plaintext = copy.finish();
    out.map_err(|e| {
        let prefixes: Vec<String> = used.dirs.iter().map(|d| join(d, "")).collect();
        let files = prefixes.iter().flat_map(|p| under(map, p)).chain(
            used.files
                .iter()
                .filter_map(|f| Some((f.as_str(), *map.get(f)?))),
        );
        KnownSecrets::from_files(files, &[])
            .with(plaintext)
            .mask_error(e)
    })
}

#[cfg(test)]
mod tests;
