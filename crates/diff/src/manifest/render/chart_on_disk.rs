//! A chart of a directory on disk (`tether diff --path DIR`), rendered in place: its
//! values files may lie anywhere in the Git work tree holding it, never outside it.

use std::fs;
use std::path::Path;

use super::super::error::{Location, ManifestError};
use super::{KnownSecrets, Renderers, Templated, known_on_disk, post_rendered};

/// Renders a chart on disk in place. Its values files may lie anywhere in the Git
/// work tree holding the chart (the chart's own directory when it is in none), and
/// are refused when they, or a symlink on the way, lead out of it.
pub(in crate::manifest) fn template_on_disk(
    dir: &Path,
    at: &Location,
    renderers: &Renderers,
) -> Result<Templated, ManifestError> {
    let io = |source| ManifestError::Io {
        at: at.clone(),
        source,
    };
    let chart = fs::canonicalize(dir).map_err(io)?;
    let root = chart
        .ancestors()
        .find(|a| a.join(".git").exists())
        .unwrap_or(&chart)
        .to_path_buf();
    // SOPS-encrypted values files (the helm-secrets layout) reach helm decrypted, from
    // a private folder removed after the render.
    let private = super::scratch_dir("tether-render-").map_err(io)?;
    let mut value_files = Vec::new();
    for (i, file) in renderers.helm.value_files.iter().enumerate() {
        if let Some(path) = renderers.helm.ref_file(file, i, private.path(), at)? {
            value_files.push(path);
            continue;
        }
        let outside = || ManifestError::OutsideRepository {
            at: at.clone(),
            field: "valueFiles",
            reference: file.clone(),
        };
        if Path::new(file).is_absolute() {
            return Err(outside());
        }
        let path = match fs::canonicalize(chart.join(file)) {
            Ok(path) if path.is_file() => path,
            _ => {
                return Err(ManifestError::MissingValuesFile {
                    at: at.clone(),
                    file: file.clone(),
                });
            }
        };
        if !path.starts_with(&root) {
            return Err(outside());
        }
        value_files.push(path);
    }
    let mut plaintext = Vec::new();
    let mut given = Vec::with_capacity(value_files.len());
    for (i, (path, file)) in value_files
        .iter()
        .zip(&renderers.helm.value_files)
        .enumerate()
    {
        let bytes = fs::read(path).map_err(io)?;
        given.push(
            match super::super::sops::decrypt_for_copy(file, &bytes, renderers.sops.get())? {
                Some((plain, values)) => {
                    plaintext.extend(values);
                    let target = private.path().join(format!("{i}.yaml"));
                    fs::write(&target, plain).map_err(io)?;
                    target
                }
                None => path.clone(),
            },
        );
    }
    let out = renderers
        .helm
        .template(dir, &given, &renderers.release, renderers.timeout, at)
        .and_then(|out| post_rendered(out, renderers, at));
    drop(private);
    out.map_err(|e| {
        let inline = renderers.helm.values.as_deref().unwrap_or_default();
        let known = known_on_disk(
            std::iter::once(chart.clone()),
            value_files.iter().cloned(),
            &renderers.helm.set,
        );
        let values = KnownSecrets::from_files([("values.yaml", inline.as_bytes())], &[]).with(
            plaintext
                .into_iter()
                .chain(renderers.helm.secret_values())
                .collect(),
        );
        values.mask_error(known.mask_error(e))
    })
}
