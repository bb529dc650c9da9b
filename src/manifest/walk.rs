//! The directory walk: a thin layer over [`super::parse_inputs`] that reads files
//! in a deterministic order, refuses symlinks leading out of the root and renders
//! kustomizations with `kubectl kustomize`.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::{Location, ManifestError, ManifestErrors};
use super::{
    Input, KUSTOMIZATION_FILES, ManifestSet, ParseOptions, display_path, is_manifest_file,
    parse_inputs,
};

/// Reads every manifest under `root` (a directory or a single file).
///
/// A directory holding a kustomization is rendered by `kubectl kustomize` as one
/// unit, and its subtree is not walked again (the kustomization lists what it uses).
pub fn read_dir(root: &Path, opts: &ParseOptions<'_>) -> Result<ManifestSet, ManifestErrors> {
    let mut inputs = Vec::new();
    let mut errors = Vec::new();
    let root_canon = match fs::canonicalize(root) {
        Ok(p) => p,
        Err(source) => {
            return Err(ManifestErrors(vec![ManifestError::Io {
                at: Location::file(&root.display().to_string()),
                source,
            }]));
        }
    };
    if root_canon.is_file() {
        let name = root.file_name().map_or_else(
            || root.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        read_file(&root_canon, &name, opts, &mut inputs, &mut errors);
    } else {
        let mut visited = HashSet::new();
        walk(
            &root_canon,
            &root_canon,
            Path::new(""),
            opts,
            &mut visited,
            &mut inputs,
            &mut errors,
        );
    }
    parse_inputs(inputs, errors, opts)
}

fn walk(
    root: &Path,
    dir: &Path,
    rel: &Path,
    opts: &ParseOptions<'_>,
    visited: &mut HashSet<PathBuf>,
    inputs: &mut Vec<Input>,
    errors: &mut Vec<ManifestError>,
) {
    // A symlinked directory seen twice would loop forever.
    if !visited.insert(dir.to_path_buf()) {
        return;
    }
    let rel_name = display_path(rel);
    let at_dir = Location::file(if rel_name.is_empty() { "." } else { &rel_name });
    if KUSTOMIZATION_FILES.iter().any(|k| dir.join(k).is_file()) {
        match render_kustomize(dir) {
            Ok(bytes) => inputs.push(Input {
                path: display_path(&rel.join("kustomization.yaml")),
                bytes,
                rendered: true,
            }),
            Err(e) => errors.push(match e {
                ManifestError::KubectlMissing { .. } => {
                    ManifestError::KubectlMissing { at: at_dir }
                }
                ManifestError::Kustomize { message, .. } => ManifestError::Kustomize {
                    at: at_dir,
                    message,
                },
                ManifestError::Io { source, .. } => ManifestError::Io { at: at_dir, source },
                other => other,
            }),
        }
        return;
    }
    let mut entries: Vec<_> = match fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(Result::ok).map(|e| e.file_name()).collect(),
        Err(source) => {
            errors.push(ManifestError::Io { at: at_dir, source });
            return;
        }
    };
    entries.sort();
    for name in entries {
        let name_str = name.to_string_lossy();
        if name_str.starts_with('.') {
            continue; // .git, editor files
        }
        let path = dir.join(&name);
        let rel_path = rel.join(&name);
        let rel_str = display_path(&rel_path);
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(source) => {
                errors.push(ManifestError::Io {
                    at: Location::file(&rel_str),
                    source,
                });
                continue;
            }
        };
        let target = if meta.file_type().is_symlink() {
            match fs::canonicalize(&path) {
                Ok(t) if t.starts_with(root) => t,
                Ok(_) => {
                    errors.push(ManifestError::SymlinkOutsideRoot {
                        at: Location::file(&rel_str),
                    });
                    continue;
                }
                // A dangling link names nothing to read.
                Err(_) => continue,
            }
        } else {
            path.clone()
        };
        if target.is_dir() {
            walk(root, &target, &rel_path, opts, visited, inputs, errors);
        } else if is_manifest_file(&rel_str) {
            read_file(&target, &rel_str, opts, inputs, errors);
        }
    }
}

fn read_file(
    path: &Path,
    rel: &str,
    opts: &ParseOptions<'_>,
    inputs: &mut Vec<Input>,
    errors: &mut Vec<ManifestError>,
) {
    let at = Location::file(rel);
    match fs::metadata(path) {
        Ok(m) if m.len() > opts.max_file_bytes => {
            errors.push(ManifestError::TooLarge {
                at,
                size: m.len(),
                limit: opts.max_file_bytes,
            });
            return;
        }
        Ok(_) => {}
        Err(source) => {
            errors.push(ManifestError::Io { at, source });
            return;
        }
    }
    match fs::read(path) {
        Ok(bytes) => inputs.push(Input {
            path: rel.to_string(),
            bytes,
            rendered: false,
        }),
        Err(source) => errors.push(ManifestError::Io { at, source }),
    }
}

/// Renders a kustomization directory with `kubectl kustomize` and returns its YAML.
pub fn render_kustomize(dir: &Path) -> Result<Vec<u8>, ManifestError> {
    let at = Location::file(&dir.display().to_string());
    let output = match Command::new("kubectl").arg("kustomize").arg(dir).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ManifestError::KubectlMissing { at });
        }
        Err(source) => return Err(ManifestError::Io { at, source }),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(ManifestError::Kustomize {
            at,
            message: super::yaml::sanitize(stderr.trim()),
        });
    }
    Ok(output.stdout)
}
