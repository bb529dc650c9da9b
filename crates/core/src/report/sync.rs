//! A sync's outcome for people (a table) and machines (JSON).

use serde_json::{Value, json};

use crate::sync::{Action, HookResult, SyncReport};

/// A table of objects and their actions, then one summary line.
pub fn render_text(report: &SyncReport) -> String {
    let header = ["KIND", "NAMESPACE", "NAME", "ACTION", "HEALTH", "MESSAGE"];
    let rows: Vec<[String; 6]> = report
        .objects
        .iter()
        .map(|o| {
            let health = o.health.as_ref().map(|h| h.health.as_str()).unwrap_or("-");
            let mut message = o.message.clone();
            if let Some(h) = &o.health
                && !h.message.is_empty()
                && message.is_empty()
            {
                message = h.message.clone();
            }
            [
                o.id.kind.clone(),
                o.id.namespace.clone().unwrap_or_default(),
                o.id.name.clone(),
                o.action.as_str().to_string(),
                health.to_string(),
                message,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let last = cells.len() - 1;
        for (i, cell) in cells.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    out.push('\n');
    out.push_str(&summary_line(report));
    out.push('\n');
    if let Some(refused) = report.prune_refused() {
        out.push_str(&format!("prune refused: {refused}\n"));
    }
    if let Some(wait) = report.wait_failed() {
        out.push_str(&format!("wait failed: {wait}\n"));
    }
    for hook in &report.hooks {
        out.push_str(&hook_line(hook));
        out.push('\n');
    }
    out
}

/// `hook PreSync Job ns/migrate-x7k2p: succeeded (deleted)`, one line per hook run.
fn hook_line(hook: &HookResult) -> String {
    let mut line = format!(
        "hook {} {}: {}",
        hook.phase.as_str(),
        hook.id,
        hook.action.as_str()
    );
    let notes: Vec<&str> = [
        hook.deleted.then_some("deleted"),
        (!hook.message.is_empty()).then_some(hook.message.as_str()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !notes.is_empty() {
        line.push_str(&format!(" ({})", notes.join("; ")));
    }
    line
}

fn summary_line(report: &SyncReport) -> String {
    let counts: Vec<String> = Action::ALL
        .iter()
        .map(|a| format!("{} {}", report.count(*a), a.as_str()))
        .collect();
    let at = report
        .revision
        .as_deref()
        .map(|r| format!(" at {}", &r[..r.len().min(12)]))
        .unwrap_or_default();
    let dry = if report.dry_run { " (dry run)" } else { "" };
    format!(
        "app {}{at}{dry}: {}; health {}",
        report.app,
        counts.join(", "),
        report.health
    )
}

/// The report as one JSON object.
pub fn to_json(report: &SyncReport) -> Value {
    let summary: serde_json::Map<String, Value> = Action::ALL
        .iter()
        .map(|a| (a.as_str().to_string(), json!(report.count(*a))))
        .collect();
    let resources: Vec<Value> = report
        .objects
        .iter()
        .map(|o| {
            let mut r = json!({
                "apiVersion": o.id.api_version(),
                "kind": o.id.kind,
                "namespace": o.id.namespace,
                "name": o.id.name,
                "action": o.action,
            });
            if let Some(h) = &o.health {
                r["health"] = json!(h.health);
                if !h.message.is_empty() {
                    r["healthMessage"] = json!(h.message);
                }
            }
            if !o.message.is_empty() {
                r["message"] = json!(o.message);
            }
            if !o.changes.is_empty() {
                // Secret values are already masked by the diff.
                r["changes"] = o
                    .changes
                    .iter()
                    .map(|c| json!({"path": c.path.to_string(), "desired": c.desired, "live": c.live}))
                    .collect();
            }
            r
        })
        .collect();
    json!({
        "app": report.app,
        "revision": report.revision,
        "dryRun": report.dry_run,
        "health": report.health,
        "summary": summary,
        "pruneRefused": report.prune_refused().map(ToString::to_string),
        "waitFailed": report.wait_failed().map(ToString::to_string),
        "resources": resources,
        "hooks": report.hooks.iter().map(|h| json!({
            "phase": h.phase,
            "apiVersion": h.id.api_version(),
            "kind": h.id.kind,
            "namespace": h.id.namespace,
            "name": h.id.name,
            "action": h.action,
            "message": h.message,
            "deleted": h.deleted,
        })).collect::<Vec<_>>(),
    })
}
