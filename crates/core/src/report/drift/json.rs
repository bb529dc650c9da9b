//! JSON: the contract of DESIGN.md (`revision`, `summary`, `resources`; `apps` for
//! several apps), which CI jobs and the status API parse.

use serde_json::{Value, json};

use super::DriftReport;
use tether_diff::diff::Drift;

pub fn render_json(report: &DriftReport) -> Value {
    let resources: Vec<Value> = report
        .objects
        .iter()
        .map(|o| {
            let mut resource = json!({
                "apiVersion": o.id.api_version(),
                "kind": o.id.kind,
                "namespace": o.id.namespace,
                "name": o.id.name,
                "status": o.drift.status().as_str(),
                "changes": o.drift.changes(),
            });
            if let (Drift::Conflict(owner), Some(map)) = (&o.drift, resource.as_object_mut()) {
                map.insert("owner".into(), owner.as_str().into());
            }
            resource
        })
        .collect();
    json!({
        "revision": report.revision,
        "summary": report.summary(),
        "resources": resources,
    })
}

/// Several apps, each rendered as [`render_json`] with its `name`.
pub fn render_json_apps(apps: &[(String, DriftReport)]) -> Value {
    let apps: Vec<Value> = apps
        .iter()
        .map(|(name, report)| {
            let mut v = render_json(report);
            if let Some(m) = v.as_object_mut() {
                m.insert("name".to_string(), Value::String(name.clone()));
            }
            v
        })
        .collect();
    json!({ "apps": apps })
}
