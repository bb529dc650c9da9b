//! Files → typed objects with identity: the desired state, read and validated.
//!
//! The core is [`parse_files`], which takes `(relative path, bytes)` pairs so that the
//! same code reads a directory on disk ([`read_dir`]) or the files of a Git revision.
//! Every error names the file, the document and the line, and all of them are
//! collected: a repository with three broken files reports three errors, not one.

mod block;
mod error;
pub(crate) mod render;
mod scope;
mod sops;
pub mod substitute;
mod walk;
mod yaml;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde_json::Value;

pub use error::{Location, ManifestError, ManifestErrors};
pub use render::{
    CHART_FILE, DEFAULT_RENDER_TIMEOUT, FileTree, HelmInputs, KustomizeCommand, REF_PREFIX,
    Renderers, ValuesLayer, is_ref_file, needs_repository, render_inputs, render_tree, resolve,
};
pub use scope::{Scope, builtin_scope, crd_scope};
pub use sops::{NOT_COMPARED, Sealed, SopsKeys};
pub use walk::{read_dir, render_dir};

/// Largest manifest file read, in bytes. Kubernetes itself refuses objects over
/// 1.5 MiB (etcd's request limit), so 8 MiB leaves room for multi-document files and
/// `kind: List` dumps while keeping a mistaken binary out.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Deepest YAML nesting accepted. serde_json's own recursion limit is 128, and the
/// deepest real-world manifests (CRDs with nested OpenAPI schemas) stay well under it.
pub const MAX_YAML_DEPTH: usize = 128;

/// The namespace a namespaced object without one lands in, as with `kubectl apply`.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Names `kubectl kustomize` recognises as a kustomization.
pub const KUSTOMIZATION_FILES: &[&str] =
    &["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// An API group and kind, the unit of scope and schema lookups.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

/// Who an object is: what the API server would address it by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    pub name: String,
}

/// An object's identity without its version: two versions of one kind name the same
/// stored object, so desired and live objects are matched on this.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectId {
    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn group_kind(&self) -> GroupKind {
        GroupKind {
            group: self.group.clone(),
            kind: self.kind.clone(),
        }
    }

    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            group: self.group.clone(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// Reads the identity an object declares; `None` when apiVersion, kind or
    /// metadata.name is missing. The namespace is taken as written. A hook may name
    /// itself by `metadata.generateName` alone: its name is then that prefix (the
    /// server picks the rest each time the hook runs).
    pub fn of(object: &Value) -> Option<ObjectId> {
        let (group, version) = split_api_version(object.get("apiVersion")?.as_str()?);
        let kind = object.get("kind")?.as_str()?.to_string();
        let metadata = object.get("metadata")?;
        let name = match metadata.get("name") {
            Some(name) => name.as_str()?.to_string(),
            None if tether_schema::ownership::is_hook(object) => {
                metadata.get("generateName")?.as_str()?.to_string()
            }
            None => return None,
        };
        let namespace = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .map(str::to_string);
        Some(ObjectId {
            group,
            version,
            kind,
            namespace,
            name,
        })
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.key(), f)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " {ns}/{}", self.name),
            None => write!(f, " {}", self.name),
        }
    }
}

/// Splits `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`).
pub fn split_api_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

/// Where an object was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Path relative to the root that was read, with `/` separators.
    pub file: String,
    /// 1-based index of the YAML document in the file.
    pub document: usize,
    /// 1-based line where the document starts.
    pub line: usize,
    /// 0-based index in the `items` of a `kind: List` document.
    pub item: Option<usize>,
}

impl Origin {
    pub fn location(&self) -> Location {
        Location {
            file: self.file.clone(),
            document: Some(self.document),
            line: Some(self.line),
            item: self.item,
        }
    }
}

/// One object of the desired (or recorded live) state.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub id: ObjectId,
    /// The object as written, with `metadata.namespace` filled in for namespaced kinds.
    pub object: Value,
    pub origin: Origin,
}

/// The objects read from one path, in file order then document order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManifestSet {
    pub objects: Vec<Manifest>,
    /// SOPS-encrypted documents read without keys ([`ParseOptions::sops_sealed`]):
    /// reported, never compared or applied.
    pub sealed: Vec<Sealed>,
    /// Charts (by path) whose templates call `lookup`, rendered without a cluster:
    /// their lookups answered empty maps, as `helm template`'s do (issue #26).
    pub empty_lookups: Vec<String>,
}

impl ManifestSet {
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&Manifest> {
        self.objects.iter().find(|m| &m.id.key() == key)
    }
}

/// An online scope lookup (discovery), consulted before the built-in table.
pub type ScopeLookup<'a> = &'a (dyn Fn(&GroupKind) -> Option<Scope> + Sync);

/// How to read manifests.
#[derive(Clone, Copy)]
pub struct ParseOptions<'a> {
    /// Namespace given to namespaced objects that name none.
    pub default_namespace: &'a str,
    /// Discovery, when a cluster is at hand; the built-in table and the CRDs of the
    /// same set answer otherwise, and a kind none of them knows is taken as namespaced
    /// (most custom resources are).
    pub scope: Option<ScopeLookup<'a>>,
    /// Files larger than this are refused.
    pub max_file_bytes: u64,
    /// Post-build substitution of every object read, before it is identified (a
    /// placeholder may name it); None reads objects as written.
    pub substitute: Option<&'a substitute::Substitution>,
    /// Keys for SOPS-encrypted files; without them such a file is an error. The render
    /// stage takes them from [`Renderers::sops`].
    pub sops_keys: Option<&'a tether_sops::Keys>,
    /// Without `sops_keys`, read encrypted documents into [`ManifestSet::sealed`]
    /// instead of failing (`tether diff`; see [`SopsKeys::sealed`]).
    pub sops_sealed: bool,
}

impl Default for ParseOptions<'_> {
    fn default() -> Self {
        ParseOptions {
            default_namespace: DEFAULT_NAMESPACE,
            scope: None,
            max_file_bytes: MAX_FILE_BYTES,
            substitute: None,
            sops_keys: None,
            sops_sealed: false,
        }
    }
}

impl fmt::Debug for ParseOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParseOptions")
            .field("default_namespace", &self.default_namespace)
            .field("scope", &self.scope.map(|_| "<lookup>"))
            .field("max_file_bytes", &self.max_file_bytes)
            .field("substitute", &self.substitute)
            .field("sops_keys", &self.sops_keys)
            .field("sops_sealed", &self.sops_sealed)
            .finish()
    }
}

/// Whether a path names a manifest file by its extension.
pub fn is_manifest_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".yaml") || lower.ends_with(".yml") || lower.ends_with(".json")
}

fn is_kustomization(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    KUSTOMIZATION_FILES.contains(&name)
}

/// Normalises a relative path to `/` separators.
fn display_path(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A file handed to the parser. `rendered` marks the output of `kubectl kustomize`,
/// which is parsed as is even though it bears a kustomization's name.
pub(crate) struct Input {
    pub path: String,
    pub bytes: Vec<u8>,
    pub rendered: bool,
}

/// Parses manifest files given as `(relative path, bytes)`: the entry point for both a
/// directory on disk and the files of a Git revision.
///
/// Files that are not `.yaml`, `.yml` or `.json` are skipped; the rest are read in
/// path order. A kustomization among them is an error: the render stage
/// ([`render_tree`], [`render_dir`]) builds kustomizations. All errors are collected.
pub fn parse_files<P: AsRef<Path>, B: AsRef<[u8]>>(
    files: &[(P, B)],
    opts: &ParseOptions<'_>,
) -> Result<ManifestSet, ManifestErrors> {
    let inputs = files
        .iter()
        .map(|(path, bytes)| Input {
            path: display_path(path.as_ref()),
            bytes: bytes.as_ref().to_vec(),
            rendered: false,
        })
        .collect();
    parse_inputs(inputs, Vec::new(), opts)
}

pub(crate) fn parse_inputs(
    mut inputs: Vec<Input>,
    mut errors: Vec<ManifestError>,
    opts: &ParseOptions<'_>,
) -> Result<ManifestSet, ManifestErrors> {
    inputs.retain(|i| i.rendered || is_manifest_file(&i.path) || is_kustomization(&i.path));
    inputs.sort_by(|a, b| a.path.cmp(&b.path));

    let mut raw = match read_all(&inputs, opts, &mut errors) {
        Ok(raw) => raw,
        Err(source) => {
            errors.push(ManifestError::Io {
                at: Location::file("."),
                source,
            });
            return Err(ManifestErrors(errors));
        }
    };

    // Sealed documents are set aside before anything reads their values.
    let mut sealed_docs = Vec::new();
    if reads_sealed(opts) {
        let (sealed, plain) = raw
            .into_iter()
            .partition(|(o, _)| sops::is_sealed_document(o));
        (sealed_docs, raw) = (sealed, plain);
    }

    if let Some(substitution) = opts.substitute {
        raw.retain_mut(
            |(object, origin)| match substitution.apply(object, origin) {
                Ok(()) => true,
                Err(e) => {
                    errors.push(e);
                    false
                }
            },
        );
    }

    // Scope: CRDs of the same set are known before any object is identified.
    let mut crds: HashMap<GroupKind, Scope> = HashMap::new();
    for (object, _) in &raw {
        if object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
            && let Some((gk, scope)) = scope::crd_scope(object)
        {
            crds.insert(gk, scope);
        }
    }
    let scope_of = |gk: &GroupKind| -> Scope {
        opts.scope
            .and_then(|lookup| lookup(gk))
            .or_else(|| builtin_scope(gk))
            .or_else(|| crds.get(gk).copied())
            .unwrap_or(Scope::Namespaced)
    };
    let sealed = sealed_docs
        .into_iter()
        .map(|(object, origin)| Sealed::of(&object, origin, scope_of, opts.default_namespace))
        .collect();

    let mut seen: HashMap<ObjectKey, Location> = HashMap::new();
    let mut objects = Vec::with_capacity(raw.len());
    for (mut object, origin) in raw {
        let at = origin.location();
        let Some(mut id) = identify(&object, &at, &mut errors) else {
            continue;
        };
        match scope_of(&id.group_kind()) {
            Scope::Cluster => id.namespace = None,
            Scope::Namespaced => {
                if id.namespace.is_none() {
                    let ns = opts.default_namespace.to_string();
                    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert("namespace".to_string(), Value::String(ns.clone()));
                    }
                    id.namespace = Some(ns);
                }
            }
        }
        let key = id.key();
        if let Some(first) = seen.get(&key) {
            errors.push(ManifestError::Duplicate {
                at,
                first: Box::new(first.clone()),
                object: key.to_string(),
            });
            continue;
        }
        seen.insert(key, at);
        objects.push(Manifest { id, object, origin });
    }

    // File order, then document order, whichever stage found the error.
    errors.sort_by(|a, b| {
        let (a, b) = (a.location(), b.location());
        (&a.file, a.document, a.item).cmp(&(&b.file, b.document, b.item))
    });
    if errors.is_empty() {
        Ok(ManifestSet {
            objects,
            sealed,
            empty_lookups: Vec::new(),
        })
    } else {
        Err(ManifestErrors(errors))
    }
}

/// Stack for the parser thread. Deserialising a document 128 levels deep
/// ([`MAX_YAML_DEPTH`]) takes more than the 2 MiB test and tokio threads get in a
/// debug build (measured: 100 levels overflow 2 MiB, 16 MiB holds any input);
/// the memory is reserved, not committed.
pub const PARSE_STACK_BYTES: usize = 32 * 1024 * 1024;

/// Most parser threads used. YAML parsing dominates reading a large repository
/// (about 0.2 ms per object with serde-saphyr), and files parse independently.
pub const MAX_PARSE_THREADS: usize = 8;

/// Parses one file into `raw` and `errs`.
fn read_input(
    input: &Input,
    opts: &ParseOptions<'_>,
    raw: &mut Vec<(Value, Origin)>,
    errs: &mut Vec<ManifestError>,
) {
    let at = Location::file(&input.path);
    if !input.rendered && is_kustomization(&input.path) {
        errs.push(ManifestError::KustomizationNeedsCheckout { at });
        return;
    }
    let size = input.bytes.len() as u64;
    if size > opts.max_file_bytes {
        errs.push(ManifestError::TooLarge {
            at,
            size,
            limit: opts.max_file_bytes,
        });
        return;
    }
    let is_json = input.path.to_ascii_lowercase().ends_with(".json");
    let decrypted = if reads_sealed(opts) {
        Ok(None)
    } else {
        sops::decrypt_input(input, opts.sops_keys)
    };
    match decrypted {
        Ok(Some(plain)) => yaml::read_documents(&input.path, &plain, is_json, raw, errs),
        Ok(None) => yaml::read_documents(&input.path, &input.bytes, is_json, raw, errs),
        Err(e) => errs.push(e),
    }
}

/// Whether encrypted documents are read sealed: asked for, and no keys at all.
fn reads_sealed(opts: &ParseOptions<'_>) -> bool {
    opts.sops_sealed && opts.sops_keys.is_none()
}

type Parsed = (Vec<(Value, Origin)>, Vec<ManifestError>);

/// Parses every input on threads with [`PARSE_STACK_BYTES`] of stack. Each thread
/// takes the next file when it finishes one, so a thread the machine runs slower
/// holds nobody up; the results are put back in file order.
fn read_all(
    inputs: &[Input],
    opts: &ParseOptions<'_>,
    errors: &mut Vec<ManifestError>,
) -> std::io::Result<Vec<(Value, Origin)>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_PARSE_THREADS)
        .min(inputs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done: Vec<(usize, Parsed)> = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(input) = inputs.get(i) else {
                return done;
            };
            let (mut raw, mut errs) = (Vec::new(), Vec::new());
            read_input(input, opts, &mut raw, &mut errs);
            done.push((i, (raw, errs)));
        }
    };
    let mut parsed = std::thread::scope(|scope| -> std::io::Result<_> {
        let mut handles = Vec::with_capacity(threads);
        for _ in 0..threads {
            handles.push(
                std::thread::Builder::new()
                    .name("manifest-parse".into())
                    .stack_size(PARSE_STACK_BYTES)
                    .spawn_scoped(scope, work)?,
            );
        }
        let mut parsed = Vec::with_capacity(inputs.len());
        for h in handles {
            match h.join() {
                Ok(done) => parsed.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok(parsed)
    })?;
    parsed.sort_unstable_by_key(|(i, _)| *i);
    let mut raw = Vec::new();
    for (_, (r, e)) in parsed {
        raw.extend(r);
        errors.extend(e);
    }
    Ok(raw)
}

/// Checks the fields every object needs and reads its identity.
fn identify(object: &Value, at: &Location, errors: &mut Vec<ManifestError>) -> Option<ObjectId> {
    let before = errors.len();
    let missing = |field: &'static str| ManifestError::MissingField {
        at: at.clone(),
        field,
    };
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).filter(|s| !s.is_empty())
    }
    if text(object.get("apiVersion")).is_none() {
        errors.push(missing("apiVersion"));
    }
    if text(object.get("kind")).is_none() {
        errors.push(missing("kind"));
    }
    match object.get("metadata") {
        Some(Value::Object(meta)) => {
            // generateName is for hooks only: an app object needs a stable name to
            // be compared, recorded and pruned.
            let generated = tether_schema::ownership::is_hook(object) && meta.get("name").is_none();
            let name = if generated { "generateName" } else { "name" };
            if text(meta.get(name)).is_none() {
                errors.push(missing("metadata.name"));
            }
        }
        _ => errors.push(missing("metadata.name")),
    }
    if errors.len() > before {
        return None;
    }
    ObjectId::of(object)
}

#[cfg(test)]
mod tests;
