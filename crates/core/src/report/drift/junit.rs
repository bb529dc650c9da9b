//! JUnit XML, for CI systems that chart test results: one test case per object,
//! a failure for each drifted one.

use std::fmt::Write;

use super::{DriftReport, unified_diff};
use tether_diff::manifest::NOT_COMPARED;

fn xml(s: &str) -> String {
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
    for o in &report.objects {
        let class = if o.id.group.is_empty() {
            o.id.kind.clone()
        } else {
            format!("{}.{}", o.id.kind, o.id.group)
        };
        let name = match &o.id.namespace {
            Some(ns) => format!("{ns}/{}", o.id.name),
            None => o.id.name.clone(),
        };
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\"",
            xml(&class),
            xml(&name)
        );
        if !o.drift.is_drift() {
            out.push_str("/>\n");
            continue;
        }
        let status = o.drift.status().as_str();
        let paths: Vec<String> = o
            .drift
            .changes()
            .iter()
            .map(|c| c.path.to_string())
            .collect();
        let message = if paths.is_empty() {
            status.to_string()
        } else {
            format!("{status}: {}", paths.join(", "))
        };
        let _ = writeln!(
            out,
            ">\n      <failure type=\"{status}\" message=\"{}\">{}</failure>\n    </testcase>",
            xml(&message),
            xml(&unified_diff(o, false))
        );
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
