//! The render stage on disk: a thin layer over [`super::parse_inputs`] that reads
//! files in a deterministic order, refuses symlinks leading out of the root and builds
//! kustomizations in place, by the path rules of [`super::render`].

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::error::{Location, ManifestError, ManifestErrors};
use super::render::{CHART_FILE, Renderers, build_on_disk, check_nested_on_disk, template_on_disk};
use super::{
    Input, KUSTOMIZATION_FILES, ManifestSet, ParseOptions, display_path, is_manifest_file,
    parse_inputs,
};

/// Reads every manifest under `root` (a directory or a single file) with the default
/// renderers; see [`render_dir`].
pub fn read_dir(root: &Path, opts: &ParseOptions<'_>) -> Result<ManifestSet, ManifestErrors> {
    render_dir(root, &Renderers::default(), opts)
}

/// Renders the files under `root` (a directory or a single file).
///
/// A directory holding a kustomization is built as one unit, and its subtree is not
/// walked again (the kustomization lists what it uses).
pub fn render_dir(
    root: &Path,
    renderers: &Renderers,
    opts: &ParseOptions<'_>,
) -> Result<ManifestSet, ManifestErrors> {
    let opts = &renderers.parse_options(opts);
    let mut inputs = Vec::new();
    let mut errors = Vec::new();
    let mut empty_lookups = Vec::new();
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
        let mut walk = Walk {
            root: &root_canon,
            renderers,
            opts,
            visited: &mut visited,
            nested: Vec::new(),
            empty_lookups: Vec::new(),
            inputs: &mut inputs,
            errors: &mut errors,
        };
        walk.dir(&root_canon, Path::new(""));
        let doubles = check_nested_on_disk(&walk.nested, renderers);
        if !doubles.is_empty() {
            return Err(ManifestErrors(doubles));
        }
        empty_lookups = walk.empty_lookups;
    }
    parse_inputs(inputs, errors, opts).map(|set| ManifestSet {
        empty_lookups,
        ..set
    })
}

struct Walk<'w, 'o> {
    root: &'w Path,
    renderers: &'w Renderers,
    opts: &'w ParseOptions<'o>,
    visited: &'w mut HashSet<PathBuf>,
    /// Kustomizations below the root: `(path from the root, directory)`.
    nested: Vec<(String, PathBuf)>,
    /// The chart at the root, when it called `lookup` with no cluster to answer.
    empty_lookups: Vec<String>,
    inputs: &'w mut Vec<Input>,
    errors: &'w mut Vec<ManifestError>,
}

impl Walk<'_, '_> {
    fn dir(&mut self, dir: &Path, rel: &Path) {
        // A symlinked directory seen twice would loop forever.
        if !self.visited.insert(dir.to_path_buf()) {
            return;
        }
        let rel_name = display_path(rel);
        let at_dir = Location::file(if rel_name.is_empty() { "." } else { &rel_name });
        // A chart is one only at the app's root, as in Argo CD and Flux.
        if rel_name.is_empty() && dir.join(CHART_FILE).is_file() {
            match template_on_disk(dir, &at_dir, self.renderers) {
                Ok(out) => {
                    if out.empty_lookups {
                        self.empty_lookups.push(self.root.display().to_string());
                    }
                    self.inputs.push(Input {
                        path: CHART_FILE.to_string(),
                        bytes: out.bytes,
                        rendered: true,
                    });
                }
                Err(e) => self.errors.push(e),
            }
            return;
        }
        if KUSTOMIZATION_FILES.iter().any(|k| dir.join(k).is_file()) {
            if !rel_name.is_empty() {
                self.nested.push((rel_name.clone(), dir.to_path_buf()));
            }
            match build_on_disk(dir, &at_dir, self.renderers) {
                Ok(bytes) => self.inputs.push(Input {
                    path: display_path(&rel.join("kustomization.yaml")),
                    bytes,
                    rendered: true,
                }),
                Err(e) => self.errors.push(e),
            }
            return;
        }
        let mut entries: Vec<_> = match fs::read_dir(dir) {
            Ok(rd) => rd.filter_map(Result::ok).map(|e| e.file_name()).collect(),
            Err(source) => {
                self.errors.push(ManifestError::Io { at: at_dir, source });
                return;
            }
        };
        entries.sort();
        for name in entries {
            let name_str = name.to_string_lossy();
            if name_str.starts_with('.') {
                continue; // .git, .github, editor files: the same rule as for Git
            }
            let path = dir.join(&name);
            let rel_path = rel.join(&name);
            let rel_str = display_path(&rel_path);
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(source) => {
                    self.errors.push(ManifestError::Io {
                        at: Location::file(&rel_str),
                        source,
                    });
                    continue;
                }
            };
            let target = if meta.file_type().is_symlink() {
                match fs::canonicalize(&path) {
                    Ok(t) if t.starts_with(self.root) => t,
                    Ok(_) => {
                        self.errors.push(ManifestError::SymlinkOutsideRoot {
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
                self.dir(&target, &rel_path);
            } else if is_manifest_file(&rel_str) {
                read_file(&target, &rel_str, self.opts, self.inputs, self.errors);
            }
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
