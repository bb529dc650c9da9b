//! Kustomize, the render stage's first renderer: which files a kustomization uses
//! (so a Git revision is materialized with only those, and remote or escaping
//! references are refused before any process runs), and the build itself.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::super::KUSTOMIZATION_FILES;
use super::super::error::{Location, ManifestError};
use super::super::yaml::{full_parse, sanitize};
use super::process::render;
use super::redact::renderer_message;

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

    /// Runs the build in `dir`, stopped after `timeout`; `at` names the kustomization
    /// in errors.
    pub(super) fn build(
        &self,
        dir: &Path,
        timeout: Duration,
        at: &Location,
    ) -> Result<Vec<u8>, ManifestError> {
        let started = std::time::Instant::now();
        let output = render(
            Command::new(&self.program).args(&self.args).arg(dir),
            timeout,
            at,
        )?;
        if !output.status.success() {
            return Err(ManifestError::Kustomize {
                at: at.clone(),
                message: renderer_message(&output.stderr),
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
    fn is_file(&self, path: &str) -> bool;
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

/// Fields whose entries may be kustomization directories, walked in turn.
const DIRECTORY_FIELDS: &[&str] = &[
    "resources",
    "bases",
    "components",
    "generators",
    "transformers",
    "validators",
    "helmGlobals",
    "helmChartInflationGenerator",
];

/// Walks the kustomization at `root` and every kustomization it references.
///
/// A reference is accepted by a positive rule: it must be a path of the tree
/// ([`as_path`]) naming a file or directory the tree has. Anything kustomize could
/// read as a URL (`https://…`, `git::…`, `deploy@host:org/repo.git`, `GIT@…`,
/// `github.com:org/repo`, `github.com/org/repo`) is a remote base, refused unless
/// `allow_remote`; a path leaving the tree, an absolute one or a `file:` URL is
/// refused always, as is a path naming nothing (kustomize would try it as a URL).
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
            let resolved = match as_path(&reference) {
                Some(path) => resolve(&dir, path),
                None if is_local_url(&reference) => None,
                None if allow_remote => continue,
                None => {
                    return Err(ManifestError::RemoteBase {
                        at: at.clone(),
                        field,
                        reference,
                    });
                }
            };
            let Some(resolved) = resolved else {
                return Err(ManifestError::OutsideRepository {
                    at: at.clone(),
                    field,
                    reference,
                });
            };
            if DIRECTORY_FIELDS.contains(&field) && tree.is_dir(&resolved) {
                stack.push(resolved);
            } else if tree.is_file(&resolved) {
                out.files.insert(resolved);
            } else {
                return Err(ManifestError::NotInRepository {
                    at: at.clone(),
                    field,
                    reference,
                });
            }
        }
    }
    Ok(out)
}

/// A reference as a path, when it can only be one: every segment a plain name,
/// without the `:`, `@` and `?` that make kustomize read a scheme, a `user@host:`
/// or a `?ref=` query, and not starting at a `github.com` folder, which kustomize
/// fetches from GitHub even when the tree has one. `./x` is `x`.
fn as_path(reference: &str) -> Option<&str> {
    let path = reference.strip_prefix("./").unwrap_or(reference);
    let plain = !path.is_empty() && !path.contains([':', '@', '?', '\\']);
    let first = path.split('/').next().unwrap_or(path);
    (plain && !first.eq_ignore_ascii_case("github.com")).then_some(path)
}

/// Whether a reference is a `file:` URL (after kustomize's `git::` prefix): a
/// repository on the machine, outside the revision whatever remote bases may do.
fn is_local_url(reference: &str) -> bool {
    let lower = reference.to_ascii_lowercase();
    lower.trim_start_matches("git::").starts_with("file:")
}

/// Every path or URL a kustomization names, with the field naming it.
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
    let items = |field: &str| -> Vec<&Value> {
        doc.get(field)
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
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
            // These also take inline objects: generators, transformers, patches.
            if s.contains('\n') || s.trim_start().starts_with('{') {
                continue;
            }
            out.push((field, s));
        }
    }
    for field in ["patches", "patchesJson6902", "replacements"] {
        for item in items(field) {
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
        for item in items(field) {
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
    // Charts kustomize inflates itself (`--enable-helm`): a repository is a URL, the
    // chart home and values files are paths.
    for item in items("helmCharts") {
        for key in ["repo", "valuesFile"] {
            if let Some(v) = item
                .get(key)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
            {
                out.push(("helmCharts", v.to_string()));
            }
        }
        for f in strings(item.get("additionalValuesFiles")) {
            out.push(("helmCharts", f));
        }
    }
    for item in items("helmChartInflationGenerator") {
        for key in ["chartRepoUrl", "chartHome", "values"] {
            if let Some(v) = item
                .get(key)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
            {
                out.push(("helmChartInflationGenerator", v.to_string()));
            }
        }
    }
    if let Some(home) = doc
        .get("helmGlobals")
        .and_then(|g| g.get("chartHome"))
        .and_then(Value::as_str)
    {
        out.push(("helmGlobals", home.to_string()));
    }
    out
}

/// `dir` joined with a relative reference, normalized; `None` when it leaves the tree
/// (or is absolute: kustomize would read the machine's own files). Chart dependencies'
/// `file://` references are resolved by it too.
pub fn resolve(dir: &str, reference: &str) -> Option<String> {
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
