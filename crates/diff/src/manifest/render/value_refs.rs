//! Value files of another Git source (Argo CD's multi-source `$values/envs/prod.yaml`,
//! issue #26): an entry of `valueFiles` starting with `$` names a file of a source the
//! app calls by that name, read for the pass by the controller and handed here as a
//! [`ValuesLayer`]. The render stage only puts each one where its entry stands in
//! `valueFiles` (later wins, as with `helm -f`), from a private folder.

use std::fs;
use std::path::{Path, PathBuf};

use super::super::error::{Location, ManifestError};
use super::{HelmInputs, ValuesLayer};

/// What starts a value file of another source: `$NAME/path`.
pub const REF_PREFIX: char = '$';

/// Whether a `valueFiles` entry names a file of another source (`$NAME/path`).
pub fn is_ref_file(file: &str) -> bool {
    file.starts_with(REF_PREFIX)
}

impl HelmInputs {
    /// The value file of another source that `file` (the `index`th entry) names,
    /// written into `scratch`; None when `file` is one of the chart's revision.
    pub(super) fn ref_file(
        &self,
        file: &str,
        index: usize,
        scratch: &Path,
        at: &Location,
    ) -> Result<Option<PathBuf>, ManifestError> {
        if !is_ref_file(file) {
            return Ok(None);
        }
        let layer: &ValuesLayer =
            self.ref_values
                .get(file)
                .ok_or_else(|| ManifestError::UnknownValuesRef {
                    at: at.clone(),
                    file: file.to_string(),
                })?;
        let path = scratch.join(format!("ref-values-{index}.yaml"));
        fs::write(&path, &layer.json).map_err(|source| ManifestError::Io {
            at: at.clone(),
            source,
        })?;
        Ok(Some(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ref_file_is_written_from_its_layer_and_an_unknown_one_refused() {
        let scratch = tempfile::tempdir().expect("tempdir");
        let at = Location::file("web");
        let helm = HelmInputs {
            ref_values: [(
                "$values/envs/prod.yaml".to_string(),
                ValuesLayer {
                    origin: "values".into(),
                    json: "{\"greeting\":\"git\"}".into(),
                    secret: false,
                },
            )]
            .into(),
            ..HelmInputs::default()
        };
        assert!(is_ref_file("$values/envs/prod.yaml") && !is_ref_file("values.yaml"));
        let path = helm
            .ref_file("$values/envs/prod.yaml", 3, scratch.path(), &at)
            .expect("written")
            .expect("a ref file");
        assert_eq!(path, scratch.path().join("ref-values-3.yaml"));
        assert_eq!(
            fs::read_to_string(&path).expect("read"),
            "{\"greeting\":\"git\"}"
        );
        assert!(
            helm.ref_file("../values/prod.yaml", 0, scratch.path(), &at)
                .expect("a plain file")
                .is_none()
        );
        let err = helm
            .ref_file("$other/prod.yaml", 1, scratch.path(), &at)
            .expect_err("unknown");
        assert!(
            matches!(&err, ManifestError::UnknownValuesRef { file, .. } if file == "$other/prod.yaml"),
            "{err}"
        );
    }
}
