//! Helm, the render stage's second renderer: a chart directory rendered with
//! `helm template`, its values from the app's configuration and the same revision.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::super::error::{Location, ManifestError};
use super::process::render;
use super::redact::renderer_message;

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
    /// Values read from elsewhere for this pass (`valuesFrom`: ConfigMaps and
    /// Secrets), in order, applied after the files and before the inline values.
    pub values_from: Vec<ValuesLayer>,
    /// Inline values (YAML), applied after the files and `values_from`.
    pub values: Option<String>,
    /// `--set` overrides, applied last.
    pub set: Vec<String>,
    /// The value files of other sources (`$NAME/path` entries of `value_files`), by
    /// their entry, read for this pass (see [`super::value_refs`]).
    pub ref_values: std::collections::BTreeMap<String, ValuesLayer>,
    /// The destination cluster's version (`.Capabilities.KubeVersion`), from its
    /// `/version`; unset offline, where Helm's default stands.
    pub kube_version: Option<String>,
    /// The destination cluster's API versions (`.Capabilities.APIVersions`) from
    /// discovery, `group/version` and `group/version/Kind` as Argo CD passes them;
    /// empty offline.
    pub api_versions: Vec<String>,
    /// The kubeconfig of a read-only endpoint that answers templates' `lookup` for
    /// this render as the app's identity (see [`super::lookup`]); None offline, where
    /// `lookup` answers empty maps as `helm template` does.
    pub lookup: Option<PathBuf>,
}

/// A chart's output.
pub(crate) struct Templated {
    pub bytes: Vec<u8>,
    /// The chart calls `lookup` and no cluster answered it: it rendered with empty maps.
    pub empty_lookups: bool,
}

/// One values document read for a pass from outside the chart's revision
/// (Flux's `valuesFrom`), already checked to be a mapping.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ValuesLayer {
    /// Where it was read, as errors name it (`Secret team/db key values.yaml`).
    pub origin: String,
    /// The values: a JSON object (JSON is YAML, as `helm --values` reads it).
    pub json: String,
    /// Read from a Secret: its strings are masked in renderer errors.
    pub secret: bool,
}

/// Never prints a Secret's values, whoever debug-prints the renderers.
impl std::fmt::Debug for ValuesLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let json = if self.secret { "<secret>" } else { &self.json };
        f.debug_struct("ValuesLayer")
            .field("origin", &self.origin)
            .field("json", &json)
            .finish()
    }
}

impl HelmInputs {
    /// The strings of the values read from Secrets, which a renderer's error may
    /// quote and must not show.
    pub(super) fn secret_values(&self) -> Vec<String> {
        fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
            match value {
                serde_json::Value::String(s) => out.push(s.clone()),
                serde_json::Value::Number(n) => out.push(n.to_string()),
                serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
                serde_json::Value::Object(map) => map.values().for_each(|v| strings(v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        for layer in self.values_from.iter().filter(|l| l.secret) {
            match serde_json::from_str(&layer.json) {
                Ok(value) => strings(&value, &mut out),
                // Not JSON (never from the reader): the whole text is the secret.
                Err(_) => out.push(layer.json.clone()),
            }
        }
        out
    }

    fn program(&self) -> &str {
        self.program.as_deref().unwrap_or("helm")
    }

    /// Runs `helm template` on the chart at `chart` with `value_files` (already
    /// resolved and checked to lie inside the revision); `at` names the chart. A chart
    /// calling `lookup` is rendered against [`HelmInputs::lookup`] when there is one.
    pub(super) fn template(
        &self,
        chart: &Path,
        value_files: &[PathBuf],
        release: &str,
        timeout: Duration,
        at: &Location,
    ) -> Result<Templated, ManifestError> {
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
        for (i, layer) in self.values_from.iter().enumerate() {
            let path: PathBuf = scratch.path().join(format!("values-from-{i}.yaml"));
            std::fs::write(&path, &layer.json).map_err(|source| ManifestError::Io {
                at: at.clone(),
                source,
            })?;
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
        let calls_lookup = super::lookup::chart_calls_lookup(chart);
        if let (true, Some(kubeconfig)) = (calls_lookup, &self.lookup) {
            // Helm's server-side dry run: `lookup` reads the cluster, nothing is written.
            // Objects tether applied carry no Helm ownership labels: without
            // `--take-ownership` (Helm 3.17+) the dry run refuses to "install" over them.
            args.push("--dry-run=server".into());
            args.push("--take-ownership".into());
            args.push("--kubeconfig".into());
            args.push(kubeconfig.into());
        }
        let started = std::time::Instant::now();
        let output = render(Command::new(self.program()).args(&args), timeout, at)?;
        drop(scratch);
        if !output.status.success() {
            return Err(ManifestError::Helm {
                at: at.clone(),
                message: renderer_message(&output.stderr),
            });
        }
        tracing::info!(renderer = "helm", path = %at, ms = started.elapsed().as_millis() as u64, lookup = calls_lookup, "rendered");
        Ok(Templated {
            bytes: output.stdout,
            empty_lookups: calls_lookup && self.lookup.is_none(),
        })
    }
}
