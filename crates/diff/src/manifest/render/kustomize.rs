//! Kustomize, the render stage's first renderer: which files a kustomization uses
//! (so a Git revision is materialized with only those, and remote or escaping
//! references are refused before any process runs), and the build itself.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::super::KUSTOMIZATION_FILES;
use super::super::error::{Location, ManifestError};
use super::super::yaml::{full_parse, sanitize};

/// The command that builds a kustomization directory given as its last argument.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KustomizeCommand {
    pub program: String,
    pub args: Vec<String>,
}

impl KustomizeCommand {
    /// `kubectl kustomize DIR`: kubectl embeds kustomize, and tether's users have kubectl.
    pub fn kubectl() -> KustomizeCommand {
        KustomizeCommand {
            program: "kubectl".into(),
            args: vec!["kustomize".into()],
        }
    }

    /// `kustomize build DIR` with the standalone binary `program`.
    pub fn standalone(program: &str) -> KustomizeCommand {
        KustomizeCommand {
            program: program.into(),
            args: vec!["build".into()],
        }
    }

    /// Runs the build in `dir`; `at` names the kustomization in errors.
    pub(super) fn build(&self, dir: &Path, at: &Location) -> Result<Vec<u8>, ManifestError> {
        let started = std::time::Instant::now();
        let output = match Command::new(&self.program)
            .args(&self.args)
            .arg(dir)
            .output()
        {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ManifestError::RendererMissing {
                    at: at.clone(),
                    program: self.program.clone(),
                });
            }
            Err(source) => {
                return Err(ManifestError::Io {
                    at: at.clone(),
                    source,
                });
            }
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(ManifestError::Kustomize {
                at: at.clone(),
                message: sanitize(stderr.trim()),
            });
        }
        // One line per renderer process: a pass with no new commit must log none.
        tracing::info!(renderer = "kustomize", path = %at, ms = started.elapsed().as_millis() as u64, "rendered");
        Ok(output.stdout)
    }
}

impl Default for KustomizeCommand {
    fn default() -> Self {
        KustomizeCommand::kubectl()
    }
}

/// A read-only view of a file tree, keyed by `/`-separated paths without a leading `/`.
pub(super) trait TreeView {
    fn read(&self, path: &str) -> Option<Vec<u8>>;
    fn is_dir(&self, path: &str) -> bool;
}

/// What building the kustomization at one directory reads: the kustomization
/// directories (whole subtrees: kustomize reads patches, generator files and `.env`
/// files under them) and single files named from elsewhere.
#[derive(Debug, Default)]
pub(super) struct Closure {
    pub dirs: BTreeSet<String>,
    pub files: BTreeSet<String>,
}

/// The kustomization file of `dir`, if it has one.
pub(super) fn kustomization_file(tree: &dyn TreeView, dir: &str) -> Option<(String, Vec<u8>)> {
    KUSTOMIZATION_FILES.iter().find_map(|name| {
        let path = join(dir, name);
        tree.read(&path).map(|bytes| (path, bytes))
    })
}

/// Walks the kustomization at `root` and every kustomization it references.
/// A reference with a scheme or a host (`https://…`, `github.com/…`, `git@…`) is a
/// remote base, refused unless `allow_remote`; a path leaving the tree is refused.
pub(super) fn closure(
    tree: &dyn TreeView,
    root: &str,
    allow_remote: bool,
) -> Result<Closure, ManifestError> {
    let mut out = Closure::default();
    let mut stack = vec![root.to_string()];
    while let Some(dir) = stack.pop() {
        if !out.dirs.insert(dir.clone()) {
            continue;
        }
        let Some((file, bytes)) = kustomization_file(tree, &dir) else {
            // A referenced directory without one: kustomize says why.
            continue;
        };
        let at = Location::file(&file);
        let text = String::from_utf8_lossy(&bytes);
        let doc = full_parse(&text).map_err(|e| ManifestError::InvalidYaml {
            at: at.clone(),
            message: sanitize(&e.to_string()),
        })?;
        for (field, reference) in references(&doc) {
            if is_remote(&reference) {
                if allow_remote {
                    continue;
                }
                return Err(ManifestError::RemoteBase {
                    at: at.clone(),
                    field,
                    reference,
                });
            }
            let Some(resolved) = resolve(&dir, &reference) else {
                return Err(ManifestError::OutsideRepository {
                    at: at.clone(),
                    field,
                    reference,
                });
            };
            let dir_like = matches!(field, "resources" | "bases" | "components");
            if dir_like && tree.is_dir(&resolved) {
                stack.push(resolved);
            } else {
                out.files.insert(resolved);
            }
        }
    }
    Ok(out)
}

/// Every path a kustomization names, with the field naming it.
fn references(doc: &Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    for field in [
        "resources",
        "bases",
        "components",
        "crds",
        "configurations",
        "generators",
        "transformers",
        "validators",
        "patchesStrategicMerge",
    ] {
        for s in strings(doc.get(field)) {
            // patchesStrategicMerge also takes inline patches.
            if field == "patchesStrategicMerge" && s.contains('\n') {
                continue;
            }
            out.push((field, s));
        }
    }
    for field in ["patches", "patchesJson6902", "replacements"] {
        for item in doc
            .get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(path) = item.get("path").and_then(Value::as_str) {
                out.push((field, path.to_string()));
            }
        }
    }
    if let Some(path) = doc
        .get("openapi")
        .and_then(|o| o.get("path"))
        .and_then(Value::as_str)
    {
        out.push(("openapi", path.to_string()));
    }
    for field in ["configMapGenerator", "secretGenerator"] {
        for item in doc
            .get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for f in strings(item.get("files")) {
                // `key=path` names the key the file's content lands under.
                let path = f.split_once('=').map_or(f.as_str(), |(_, p)| p);
                out.push((field, path.to_string()));
            }
            for e in strings(item.get("envs")) {
                out.push((field, e));
            }
            if let Some(e) = item.get("env").and_then(Value::as_str) {
                out.push((field, e.to_string()));
            }
        }
    }
    out
}

/// Whether a reference names something kustomize would fetch over the network.
fn is_remote(reference: &str) -> bool {
    reference.contains("://")
        || reference.starts_with("git@")
        || reference.starts_with("github.com/")
        || reference.starts_with("gitlab.com/")
        || reference.starts_with("bitbucket.org/")
        || reference.contains("?ref=")
}

/// `dir` joined with a relative reference, normalized; `None` when it leaves the tree
/// (or is absolute: kustomize would read the machine's own files).
pub(super) fn resolve(dir: &str, reference: &str) -> Option<String> {
    if reference.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in reference.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

pub(super) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}
