//! JUnit XML, for CI systems that chart test results: one test case per object,
//! a failure for each drifted one.

use std::fmt::Write;

use tether_diff::diff::ObjectDiff;
use tether_diff::manifest::{NOT_COMPARED, ObjectId};

use super::{DriftReport, unified_diff};

/// `s` as XML text or attribute value.
pub(crate) fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters other than tab and newlines are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// An object's test case, opened and left without its closing `>`: class
/// `Kind.group`, name `namespace/name`.
pub(crate) fn open_case(out: &mut String, id: &ObjectId) {
    let class = if id.group.is_empty() {
        id.kind.clone()
    } else {
        format!("{}.{}", id.kind, id.group)
    };
    let name = match &id.namespace {
        Some(ns) => format!("{ns}/{}", id.name),
        None => id.name.clone(),
    };
    let _ = write!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\"",
        xml(&class),
        xml(&name)
    );
}

/// A failure's message: what happened to the object and the fields that differ.
pub(crate) fn failure_message(what: &str, o: &ObjectDiff) -> String {
    let paths: Vec<String> = o
        .drift
        .changes()
        .iter()
        .map(|c| c.path.to_string())
        .collect();
    if paths.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {}", paths.join(", "))
    }
}

/// One test case per object, a failure (status, fields, masked diff) for each
/// drifted one: a drift report's, or a preview's head-vs-live section.
pub(crate) fn drift_cases(out: &mut String, objects: &[ObjectDiff]) {
    for o in objects {
        open_case(out, &o.id);
        if !o.drift.is_drift() {
            out.push_str("/>\n");
            continue;
        }
        let status = o.drift.status().as_str();
        let message = failure_message(status, o);
        let _ = writeln!(
            out,
            ">\n      <failure type=\"{status}\" message=\"{}\">{}</failure>\n    </testcase>",
            xml(&message),
            xml(&unified_diff(o, false))
        );
    }
}

pub fn render_junit(report: &DriftReport) -> String {
    let s = report.summary();
    let (tests, failures) = (s.total(), s.drifted());
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"tether diff\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">"
    );
    let suite = report
        .revision
        .as_deref()
        .map_or("tether diff".to_string(), |r| format!("tether diff {r}"));
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{}\">",
        xml(&suite),
        s.not_compared
    );
    // A document not compared is a skipped test: neither passed nor failed.
    for sealed in &report.not_compared {
        let _ = writeln!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\">\n      <skipped message=\"{NOT_COMPARED}\"/>\n    </testcase>",
            xml(&sealed.origin.file),
            xml(&sealed.title())
        );
    }
    drift_cases(&mut out, &report.objects);
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
