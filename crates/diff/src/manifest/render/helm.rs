//! Helm, the render stage's second renderer: a chart directory rendered with
//! `helm template`, its values from the app's configuration and the same revision.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::super::error::{Location, ManifestError};
use super::super::yaml::sanitize;

/// The chart's metadata file: a path holding it is a Helm chart.
pub const CHART_FILE: &str = "Chart.yaml";

/// What `helm template` is given besides the chart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelmInputs {
    /// The `helm` command; `helm` on PATH by default.
    pub program: Option<String>,
    /// The release name (`.Release.Name`); the app's name when unset.
    pub release_name: Option<String>,
    /// The release namespace (`.Release.Namespace`), the app's destination namespace.
    pub namespace: String,
    /// Values files, relative to the chart's directory: any file of the same revision
    /// (`../values/prod.yaml` too, as Argo CD allows), never one outside the
    /// repository. Later files win, as with `helm -f`.
    pub value_files: Vec<String>,
    /// Inline values (YAML), applied after the files.
    pub values: Option<String>,
    /// `--set` overrides, applied last.
    pub set: Vec<String>,
    /// The destination cluster's version (`.Capabilities.KubeVersion`), from its
    /// `/version`; unset offline, where Helm's default stands.
    pub kube_version: Option<String>,
    /// The destination cluster's API versions (`.Capabilities.APIVersions`) from
    /// discovery, `group/version` and `group/version/Kind` as Argo CD passes them;
    /// empty offline.
    pub api_versions: Vec<String>,
}

impl HelmInputs {
    fn program(&self) -> &str {
        self.program.as_deref().unwrap_or("helm")
    }

    /// Runs `helm template` on the chart at `chart` with `value_files` (already
    /// resolved and checked to lie inside the revision); `at` names the chart.
    pub(super) fn template(
        &self,
        chart: &Path,
        value_files: &[PathBuf],
        release: &str,
        at: &Location,
    ) -> Result<Vec<u8>, ManifestError> {
        let scratch = tempfile::Builder::new()
            .prefix("tether-values-")
            .tempdir()
            .map_err(|source| ManifestError::Io {
                at: at.clone(),
                source,
            })?;
        let mut args: Vec<std::ffi::OsString> = vec![
            "template".into(),
            self.release_name.as_deref().unwrap_or(release).into(),
            chart.into(),
            "--namespace".into(),
            self.namespace.as_str().into(),
            "--include-crds".into(),
        ];
        for path in value_files {
            args.push("--values".into());
            args.push(path.into());
        }
        if let Some(values) = &self.values {
            let path: PathBuf = scratch.path().join("values.yaml");
            std::fs::write(&path, values).map_err(|source| ManifestError::Io {
                at: at.clone(),
                source,
            })?;
            args.push("--values".into());
            args.push(path.into());
        }
        for set in &self.set {
            args.push("--set".into());
            args.push(set.into());
        }
        if let Some(version) = &self.kube_version {
            args.push("--kube-version".into());
            args.push(version.into());
        }
        for api in &self.api_versions {
            args.push("--api-versions".into());
            args.push(api.into());
        }
        let started = std::time::Instant::now();
        let output = match Command::new(self.program()).args(&args).output() {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ManifestError::RendererMissing {
                    at: at.clone(),
                    program: self.program().to_string(),
                });
            }
            Err(source) => {
                return Err(ManifestError::Io {
                    at: at.clone(),
                    source,
                });
            }
        };
        drop(scratch);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(ManifestError::Helm {
                at: at.clone(),
                message: sanitize(&first_error(&stderr)),
            });
        }
        tracing::info!(renderer = "helm", path = %at, ms = started.elapsed().as_millis() as u64, "rendered");
        Ok(output.stdout)
    }
}

/// Helm's first error with its indented continuation lines folded in: a template
/// error names the file on one line and what failed on the next ones.
fn first_error(stderr: &str) -> String {
    let mut lines = stderr.trim().lines();
    let mut out = lines.next().unwrap_or("").trim().to_string();
    for line in lines.take_while(|l| l.starts_with(char::is_whitespace)) {
        out.push(' ');
        out.push_str(line.trim());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::first_error;

    #[test]
    fn a_template_error_is_folded_onto_one_line_and_the_next_error_dropped() {
        let stderr = "Error: web/templates/a.yaml:1:43\n  executing at <.Values.x>:\n    nil pointer\nError: second\n";
        assert_eq!(
            first_error(stderr),
            "Error: web/templates/a.yaml:1:43 executing at <.Values.x>: nil pointer"
        );
    }
}
