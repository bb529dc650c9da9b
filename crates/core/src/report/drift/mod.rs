//! Drift reports: the verdicts of the diff stage rendered as text (a unified diff per
//! object), JSON (the contract in DESIGN.md), Markdown (a pull-request comment) and
//! JUnit XML (one test case per object). Every rendering works from the masked views
//! of [`ObjectDiff`], so no Secret value can reach one.

mod json;
mod junit;
mod markdown;
mod text;

use serde::Serialize;

use tether_diff::diff::{ObjectDiff, Status};
use tether_diff::manifest::Sealed;

pub(crate) use json::not_compared;
pub use json::{render_json, render_json_apps};
pub use junit::render_junit;
pub(crate) use junit::{drift_cases, failure_message, open_case, xml};
pub use markdown::render_markdown;
pub use text::{render_text, unified_diff, unified_diff_between};

/// The drift of one app (or one path) at one revision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DriftReport {
    /// The commit the desired state was read at, when it came from Git.
    pub revision: Option<String>,
    pub objects: Vec<ObjectDiff>,
    /// SOPS-encrypted documents read without keys: reported as
    /// [`tether_diff::manifest::NOT_COMPARED`], neither drift nor in sync.
    pub not_compared: Vec<Sealed>,
}

/// How many objects are in each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    #[serde(rename = "InSync")]
    pub in_sync: usize,
    #[serde(rename = "Modified")]
    pub modified: usize,
    #[serde(rename = "Missing")]
    pub missing: usize,
    #[serde(rename = "Extra")]
    pub extra: usize,
    /// Objects labelled for another app (see [`Status::Conflict`]).
    #[serde(rename = "Conflict")]
    pub conflict: usize,
    /// SOPS-encrypted documents that were not compared (no keys); absent when none.
    #[serde(rename = "NotCompared", skip_serializing_if = "is_zero")]
    pub not_compared: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    pub fn total(&self) -> usize {
        self.in_sync + self.modified + self.missing + self.extra + self.conflict + self.not_compared
    }

    /// Objects that differ: neither in sync nor left uncompared.
    pub fn drifted(&self) -> usize {
        self.total() - self.in_sync - self.not_compared
    }

    pub fn count(&self, status: Status) -> usize {
        match status {
            Status::InSync => self.in_sync,
            Status::Modified => self.modified,
            Status::Missing => self.missing,
            Status::Extra => self.extra,
            Status::Conflict => self.conflict,
        }
    }

    /// Counts one object of `status`.
    pub fn add(&mut self, status: Status) {
        match status {
            Status::InSync => self.in_sync += 1,
            Status::Modified => self.modified += 1,
            Status::Missing => self.missing += 1,
            Status::Extra => self.extra += 1,
            Status::Conflict => self.conflict += 1,
        }
    }

    /// `5 objects: 3 in sync, 1 modified, 1 missing, 0 extra` (and `, 1 in conflict`
    /// when another app claims any, `, 1 encrypted: not compared` when keys lacked).
    pub fn line(&self) -> String {
        let n = self.total();
        let mut conflict = if self.conflict > 0 {
            format!(", {} in conflict", self.conflict)
        } else {
            String::new()
        };
        if self.not_compared > 0 {
            conflict.push_str(&format!(
                ", {} {}",
                self.not_compared,
                tether_diff::manifest::NOT_COMPARED
            ));
        }
        format!(
            "{n} object{}: {} in sync, {} modified, {} missing, {} extra{conflict}",
            if n == 1 { "" } else { "s" },
            self.in_sync,
            self.modified,
            self.missing,
            self.extra
        )
    }
}

impl DriftReport {
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for o in &self.objects {
            s.add(o.drift.status());
        }
        s.not_compared = self.not_compared.len();
        s
    }

    pub fn has_drift(&self) -> bool {
        self.objects.iter().any(|o| o.drift.is_drift())
    }

    /// The report with `sealed` documents reported as not compared. A live object
    /// one of them names is not Extra: Git still has it, encrypted (a document whose
    /// identity is encrypted too cannot be matched, and leaves its object Extra).
    pub fn with_not_compared(mut self, sealed: Vec<Sealed>) -> DriftReport {
        let named: std::collections::HashSet<_> = sealed
            .iter()
            .filter_map(|s| s.id.as_ref().map(|id| id.key()))
            .collect();
        self.objects
            .retain(|o| o.drift.status() != Status::Extra || !named.contains(&o.id.key()));
        self.not_compared = sealed;
        self
    }
}

/// The output formats of `tether diff -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text { color: bool },
    Json,
    Markdown,
    Junit,
}

/// Renders one report in the given format.
pub fn render(report: &DriftReport, format: Format) -> String {
    match format {
        Format::Text { color } => render_text(report, color),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&render_json(report)).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Markdown => render_markdown(report),
        Format::Junit => render_junit(report),
    }
}

/// The object as `Kind[.group] namespace/name`, as reports title it.
pub(crate) fn title(o: &ObjectDiff) -> String {
    o.id.to_string()
}

/// YAML of a view, for text diffs.
pub(crate) fn to_yaml(v: Option<&serde_json::Value>) -> String {
    match v {
        Some(v) => serde_saphyr::to_string(v)
            .unwrap_or_else(|_| serde_json::to_string_pretty(v).unwrap_or_default()),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use tether_diff::diff::{Change, ChangedBy, Drift, FieldPath, Segment};
    use tether_diff::manifest::ObjectId;

    fn scaled(changed_by: Option<ChangedBy>) -> DriftReport {
        DriftReport {
            revision: Some("abc123".into()),
            objects: vec![ObjectDiff {
                id: ObjectId {
                    group: "apps".into(),
                    version: "v1".into(),
                    kind: "Deployment".into(),
                    namespace: Some("shop".into()),
                    name: "web".into(),
                },
                drift: Drift::Modified(vec![Change {
                    path: FieldPath(vec![
                        Segment::Field("spec".into()),
                        Segment::Field("replicas".into()),
                    ]),
                    desired: Some(json!(2)),
                    live: Some(json!(5)),
                    changed_by,
                }]),
                desired: Some(json!({"spec": {"replicas": 2}})),
                live: Some(json!({"spec": {"replicas": 5}})),
            }],
            ..DriftReport::default()
        }
    }

    #[test]
    fn every_format_says_who_changed_a_field_when_known() {
        let by = ChangedBy {
            manager: "kubectl".into(),
            operation: "Update".into(),
            time: Some("2026-11-24T12:04:00Z".into()),
        };
        let report = scaled(Some(by));
        let json = render_json(&report);
        assert_eq!(
            json["resources"][0]["changes"][0]["changedBy"],
            json!({"manager": "kubectl", "operation": "Update", "time": "2026-11-24T12:04:00Z"})
        );
        let text = render_text(&report, false);
        assert!(
            text.contains(
                "  ~ spec.replicas (changed by kubectl (Update) at 2026-11-24T12:04:00Z)\n"
            ),
            "{text}"
        );
        let markdown = render_markdown(&report);
        assert!(
            markdown.contains(
                "- `spec.replicas` changed by kubectl (Update) at 2026-11-24T12:04:00Z\n"
            ),
            "{markdown}"
        );
    }

    #[test]
    fn an_unknown_writer_is_left_out_rather_than_guessed() {
        let report = scaled(None);
        let json = render_json(&report);
        assert!(
            json["resources"][0]["changes"][0]
                .get("changedBy")
                .is_none()
        );
        assert!(render_text(&report, false).contains("  ~ spec.replicas\n"));
        assert!(render_markdown(&report).contains("- `spec.replicas`\n"));
    }

    /// Issue #27: a document read sealed names a live object; that object is not
    /// Extra (Git still has it), is counted apart, and is no drift.
    #[test]
    fn a_sealed_document_is_counted_apart_and_its_live_object_is_not_extra() {
        let id = |kind: &str, name: &str| ObjectId {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: Some("default".into()),
            name: name.into(),
        };
        let extra = |kind: &str, name: &str| ObjectDiff {
            id: id(kind, name),
            drift: Drift::Extra,
            desired: None,
            live: Some(json!({})),
        };
        let origin = |file: &str| tether_diff::manifest::Origin {
            file: file.into(),
            document: 1,
            line: 1,
            item: None,
        };
        let report = DriftReport {
            objects: vec![extra("Secret", "db"), extra("ConfigMap", "old")],
            ..DriftReport::default()
        }
        .with_not_compared(vec![
            Sealed {
                origin: origin("db.enc.yaml"),
                id: Some(id("Secret", "db")),
                fingerprint: 1,
            },
            Sealed {
                origin: origin("all.enc.yaml"),
                id: None,
                fingerprint: 2,
            },
        ]);
        let titles: Vec<String> = report.objects.iter().map(title).collect();
        assert_eq!(titles, ["ConfigMap default/old"]);
        let summary = report.summary();
        assert_eq!((summary.total(), summary.drifted()), (3, 1));
        assert_eq!(
            summary.line(),
            "3 objects: 0 in sync, 0 modified, 0 missing, 1 extra, 2 encrypted: not compared"
        );
        let text = render_text(&report, false);
        assert!(
            text.contains("encrypted: not compared: file all.enc.yaml document 1\n"),
            "{text}"
        );
    }
}
