//! Markdown, ready to post as a pull-request comment: a summary table, a table of the
//! drifted objects, and a collapsible diff per object.

use std::fmt::Write;

use super::{DriftReport, title, unified_diff};
use tether_diff::diff::Status;
use tether_diff::manifest::NOT_COMPARED;

/// Escapes text for a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

pub fn render_markdown(report: &DriftReport) -> String {
    let s = report.summary();
    let mut out = String::new();
    let mut verdict = if s.drifted() == 0 {
        "in sync".to_string()
    } else {
        format!("{} of {} objects drifted", s.drifted(), s.total())
    };
    if s.not_compared > 0 {
        verdict.push_str(&format!(" ({} {NOT_COMPARED})", s.not_compared));
    }
    let _ = writeln!(out, "### tether diff: {verdict}\n");
    if let Some(rev) = &report.revision {
        let _ = writeln!(out, "Revision `{}`\n", cell(rev));
    }
    out.push_str("| Status | Objects |\n|---|---:|\n");
    // A Conflict row only when another app claims something: most reports have none.
    for st in Status::ALL
        .into_iter()
        .filter(|st| *st != Status::Conflict || s.conflict > 0)
    {
        let _ = writeln!(out, "| {} | {} |", st.as_str(), s.count(st));
    }
    if s.not_compared > 0 {
        let _ = writeln!(out, "| {NOT_COMPARED} | {} |", s.not_compared);
        out.push_str("\n**Encrypted, not compared** (no SOPS key):\n\n");
        for sealed in &report.not_compared {
            let _ = writeln!(out, "- `{}`", sealed.title().replace('`', "'"));
        }
    }
    let drifted: Vec<_> = report
        .objects
        .iter()
        .filter(|o| o.drift.is_drift())
        .collect();
    if drifted.is_empty() {
        return out;
    }
    out.push_str("\n| Kind | Namespace | Name | Status | Changes |\n|---|---|---|---|---:|\n");
    for o in &drifted {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell(&o.id.kind),
            cell(o.id.namespace.as_deref().unwrap_or("")),
            cell(&o.id.name),
            o.drift.status().as_str(),
            o.drift.changes().len()
        );
    }
    for o in &drifted {
        let _ = writeln!(
            out,
            "\n<details><summary>{}: {}</summary>\n",
            o.drift.status().as_str(),
            html_escape(&title(o))
        );
        for c in o.drift.changes() {
            let by = c
                .changed_by
                .as_ref()
                .map(|by| format!(" {}", cell(&by.phrase()).replace('`', "'")))
                .unwrap_or_default();
            let _ = writeln!(out, "- `{}`{by}", c.path.to_string().replace('`', "'"));
        }
        // A tilde fence: YAML can hold backticks, hardly a line of three tildes.
        let _ = write!(
            out,
            "\n~~~diff\n{}~~~\n\n</details>\n",
            unified_diff(o, false)
        );
    }
    out
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
