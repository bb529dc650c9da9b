//! JSON: the contract of DESIGN.md (`revision`, `summary`, `resources`; `apps` for
//! several apps), which CI jobs and the status API parse.

use serde_json::{Value, json};

use super::DriftReport;
use tether_diff::diff::Drift;
use tether_diff::manifest::{NOT_COMPARED, ObjectId, Sealed};

/// The `status` of a document not compared, beside `InSync`, `Modified`, ….
pub const NOT_COMPARED_STATUS: &str = "NotCompared";

pub fn render_json(report: &DriftReport) -> Value {
    let mut resources: Vec<Value> = report
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
    resources.extend(
        report
            .not_compared
            .iter()
            .map(|s| not_compared(s, NOT_COMPARED_STATUS)),
    );
    json!({
        "revision": report.revision,
        "summary": report.summary(),
        "resources": resources,
    })
}

/// Several apps, each rendered as [`render_json`] with its `name`.
/// A SOPS document read without keys, as a resource of `status`: its identity when
/// in clear, always its file and document, and why it was not compared.
pub(crate) fn not_compared(sealed: &Sealed, status: &str) -> Value {
    let id = sealed.id.as_ref();
    json!({
        "apiVersion": id.map(ObjectId::api_version),
        "kind": id.map(|id| &id.kind),
        "namespace": id.and_then(|id| id.namespace.as_ref()),
        "name": id.map(|id| &id.name),
        "file": sealed.origin.file,
        "document": sealed.origin.document,
        "status": status,
        "reason": NOT_COMPARED,
        "changes": [],
    })
}

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
