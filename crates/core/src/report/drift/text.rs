//! Text: a unified diff per drifted object (live → desired, as `kubectl diff` shows
//! it), the changed field paths, and a one-line summary.

use std::fmt::Write;

use similar::{ChangeTag, TextDiff};

use super::{DriftReport, title, to_yaml};
use tether_diff::diff::{Drift, ObjectDiff};
use tether_diff::manifest::NOT_COMPARED;

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const CYAN: &str = "\x1b[36m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// Lines of context around each change, as `diff -u`.
const CONTEXT_LINES: usize = 3;

/// The unified diff of one object's views (empty when they are equal).
pub fn unified_diff(o: &ObjectDiff, color: bool) -> String {
    unified_diff_between(o, color, ["live", "desired"])
}

/// [`unified_diff`] with the two sides named (`base`, `head` for a pull request).
pub fn unified_diff_between(o: &ObjectDiff, color: bool, [old, new]: [&str; 2]) -> String {
    let live = to_yaml(o.live.as_ref());
    let desired = to_yaml(o.desired.as_ref());
    let diff = TextDiff::from_lines(&live, &desired);
    let name = title(o);
    let mut out = String::new();
    let _ = writeln!(out, "--- {old}/{name}");
    let _ = writeln!(out, "+++ {new}/{name}");
    for hunk in diff
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .iter_hunks()
    {
        let header = hunk.header().to_string();
        if color {
            let _ = writeln!(out, "{CYAN}{header}{RESET}");
        } else {
            let _ = writeln!(out, "{header}");
        }
        for change in hunk.iter_changes() {
            let (sign, colour) = match change.tag() {
                ChangeTag::Delete => ("-", RED),
                ChangeTag::Insert => ("+", GREEN),
                ChangeTag::Equal => (" ", ""),
            };
            let line = change.value().trim_end_matches('\n');
            if color && !colour.is_empty() {
                let _ = writeln!(out, "{colour}{sign}{line}{RESET}");
            } else {
                let _ = writeln!(out, "{sign}{line}");
            }
        }
    }
    out
}

pub fn render_text(report: &DriftReport, color: bool) -> String {
    let mut out = String::new();
    for o in report.objects.iter().filter(|o| o.drift.is_drift()) {
        let status = o.drift.status().as_str();
        if color {
            let _ = writeln!(out, "{BOLD}{status}: {}{RESET}", title(o));
        } else {
            let _ = writeln!(out, "{status}: {}", title(o));
        }
        match &o.drift {
            Drift::Modified(changes) => {
                for c in changes {
                    match &c.changed_by {
                        Some(by) => {
                            let _ = writeln!(out, "  ~ {} ({})", c.path, by.phrase());
                        }
                        None => {
                            let _ = writeln!(out, "  ~ {}", c.path);
                        }
                    }
                }
            }
            Drift::Conflict(owner) => {
                let _ = writeln!(
                    out,
                    "  labelled for app {owner:?}: left alone until it lets go"
                );
            }
            _ => {}
        }
        out.push_str(&unified_diff(o, color));
        out.push('\n');
    }
    for sealed in &report.not_compared {
        let _ = writeln!(out, "{NOT_COMPARED}: {}", sealed.title());
    }
    if let Some(rev) = &report.revision {
        let _ = write!(out, "revision {rev}: ");
    }
    out.push_str(&report.summary().line());
    out.push('\n');
    out
}
