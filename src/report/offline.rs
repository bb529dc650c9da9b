//! `tether diff --path DIR --live FILE|DIR`: the drift of manifests against recorded
//! live objects (as `kubectl get -o yaml` prints them), for CI jobs with no cluster.

use std::path::Path;

use serde_json::Value;

use super::drift::DriftReport;
use crate::diff::{
    APP_LABEL, BuiltinSchemas, DiffOptions, ExtraPolicy, IgnoreRule, MaskKey, Mode, diff_sets,
};
use crate::manifest::{DEFAULT_NAMESPACE, ManifestErrors, ManifestSet, ParseOptions, read_dir};

/// `kubectl diff`'s convention: 0 in sync, 1 drift, 2 error (never 1 for an error).
pub const EXIT_IN_SYNC: i32 = 0;
pub const EXIT_DRIFT: i32 = 1;
pub const EXIT_ERROR: i32 = 2;

/// The label every object tether applies carries (DESIGN.md, Ownership).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "tether";

/// What to compare.
#[derive(Debug, Clone, Copy)]
pub struct OfflineDiff<'a> {
    /// Desired manifests: a directory (or one file).
    pub path: &'a Path,
    /// Live objects: a file or directory of `kubectl get -o yaml` output.
    pub live: &'a Path,
    /// The app, when one is named: its ownership labels become part of the desired
    /// state, and live objects labelled as its own but no longer desired are Extra.
    /// Without one, manifests are compared as written and nothing is Extra.
    pub app: Option<&'a str>,
    pub default_namespace: &'a str,
    pub rules: &'a [IgnoreRule],
}

impl<'a> OfflineDiff<'a> {
    pub fn new(path: &'a Path, live: &'a Path) -> Self {
        OfflineDiff {
            path,
            live,
            app: None,
            default_namespace: DEFAULT_NAMESPACE,
            rules: &[],
        }
    }
}

/// Why an offline diff could not be made (exit code 2). Not retryable: the input
/// needs a change.
#[derive(Debug, thiserror::Error)]
pub enum OfflineDiffError {
    #[error("desired state: {0}")]
    Desired(#[source] ManifestErrors),
    #[error("live objects: {0}")]
    Live(#[source] ManifestErrors),
}

/// Adds the ownership labels an app's objects carry once applied.
fn label_for_app(set: &mut ManifestSet, app: &str) {
    for m in &mut set.objects {
        let Some(meta) = m.object.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(
                MANAGED_BY_LABEL.to_string(),
                Value::String(MANAGED_BY_VALUE.to_string()),
            );
            labels.insert(APP_LABEL.to_string(), Value::String(app.to_string()));
        }
    }
}

/// Reads both sides and compares them offline.
pub fn run_offline_diff(req: &OfflineDiff<'_>) -> Result<DriftReport, OfflineDiffError> {
    let opts = ParseOptions {
        default_namespace: req.default_namespace,
        ..ParseOptions::default()
    };
    let mut desired = read_dir(req.path, &opts).map_err(OfflineDiffError::Desired)?;
    let live = read_dir(req.live, &opts).map_err(OfflineDiffError::Live)?;
    if let Some(app) = req.app {
        label_for_app(&mut desired, app);
    }
    let mask = MaskKey::random();
    let schema = BuiltinSchemas;
    let diff_opts = DiffOptions {
        mode: Mode::Offline,
        rules: req.rules,
        schema: &schema,
        mask: &mask,
    };
    let extra = match req.app {
        Some(app) => ExtraPolicy::OwnedBy(app),
        None => ExtraPolicy::Ignore,
    };
    let objects = diff_sets(
        desired.objects.iter().map(|m| (&m.id, &m.object)),
        live.objects.iter().map(|m| (&m.id, &m.object)),
        extra,
        &diff_opts,
    );
    Ok(DriftReport {
        revision: None,
        objects,
    })
}

/// The exit code for a diff's outcome.
pub fn exit_code<E>(result: &Result<DriftReport, E>) -> i32 {
    match result {
        Ok(r) if r.has_drift() => EXIT_DRIFT,
        Ok(_) => EXIT_IN_SYNC,
        Err(_) => EXIT_ERROR,
    }
}
