//! Apps' status for people (`tether status`): one table row per app.

use serde_json::Value;

use super::DEPENDENCY_NOT_READY;

/// `NAME SYNC HEALTH REVISION SOURCE LAST PASS NOTE` for the apps the status API
/// returned. SOURCE is `Ready`, the reason a source fails, or `STALE` once it has
/// failed for longer than its `staleAfter` (REVISION is then its last good one). A
/// rolled-back app shows the revision it is pinned to, and the pin as its note.
pub fn render_table(apps: &[Value]) -> String {
    let header = [
        "NAME",
        "SYNC",
        "HEALTH",
        "REVISION",
        "SOURCE",
        "LAST PASS",
        "NOTE",
    ];
    let rows: Vec<[String; 7]> = apps
        .iter()
        .map(|app| {
            let text = |v: &Value| v.as_str().unwrap_or("-").to_string();
            let revision = app["pin"]["revision"]
                .as_str()
                .or_else(|| app["revision"]["sha"].as_str())
                .map(|sha| sha.chars().take(12).collect())
                .unwrap_or_else(|| "-".to_string());
            let pass = &app["lastPass"];
            let last = match pass["result"].as_str() {
                Some(result) => format!("{result} {}ms", pass["durationMs"]),
                None => "-".to_string(),
            };
            let source = &app["source"];
            // A refused signature (issue #27) shows as the source's state, and why.
            let unverified = app["conditions"].as_array().and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c["type"] == "SourceVerified" && c["status"] == "False")
                    .map(|c| c["message"].as_str().unwrap_or_default().to_string())
            });
            let source_cell = match source["ready"].as_bool() {
                Some(true) if unverified.is_some() => "Unverified".to_string(),
                None => "-".to_string(),
                Some(true) => "Ready".to_string(),
                Some(false) if source["stale"] == true => "STALE".to_string(),
                Some(false) => source["reason"].as_str().unwrap_or("Failing").to_string(),
            };
            let failing = source["failingSince"]
                .as_str()
                .map(|since| format!("source failing since {since}"));
            // Waiting for dependencies (`dependsOn`) says why before any older error.
            let waiting = app["conditions"].as_array().and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c["type"] == "Ready" && c["reason"] == DEPENDENCY_NOT_READY)
                    .and_then(|c| c["message"].as_str())
                    .map(str::to_string)
            });
            let pinned = app["conditions"].as_array().and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c["type"] == "Pinned" && c["status"] == "True")
                    .and_then(|c| c["message"].as_str())
                    .map(|m| format!("Pinned: {m}"))
            });
            let note = waiting
                .or(unverified)
                .or_else(|| pass["error"].as_str().map(str::to_string))
                .or(failing)
                .or(pinned)
                .or_else(|| unhealthy(app))
                .or_else(|| app["automation"]["reason"].as_str().map(str::to_string))
                .unwrap_or_default();
            [
                text(&app["name"]),
                text(&app["sync"]),
                text(&app["health"]),
                revision,
                source_cell,
                last,
                note,
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
    let mut line = |cells: [&str; 7]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            text.push_str(&format!("{cell:<width$}  ", width = widths[i]));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
    out
}

/// Why an app is not Healthy, when its status lists its objects (one app's status
/// does): `Kind/name: message` of the first object as unhealthy as the app that says
/// why (a built-in verdict or a CEL rule's, issue #28).
fn unhealthy(app: &Value) -> Option<String> {
    if app["health"] == "Healthy" {
        return None;
    }
    app["resources"].as_array()?.iter().find_map(|r| {
        let message = r["healthMessage"]
            .as_str()
            .filter(|m| !m.is_empty() && r["health"] == app["health"])?;
        Some(format!(
            "{}/{}: {message}",
            r["kind"].as_str()?,
            r["name"].as_str()?
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unhealthy_app_says_which_object_and_why() {
        let app = json!({
            "name": "gadgets", "sync": "Synced", "health": "Degraded",
            "automation": {"acting": true},
            "resources": [
                {"kind": "ConfigMap", "name": "c", "health": "Healthy"},
                {"kind": "Gadget", "name": "g1", "health": "Degraded",
                 "healthMessage": "disk full [failed (status.phase == 'Failed') holds]"}]
        });
        let table = render_table(std::slice::from_ref(&app));
        assert!(
            table.ends_with("Gadget/g1: disk full [failed (status.phase == 'Failed') holds]\n"),
            "{table}"
        );
        let mut healthy = app;
        healthy["health"] = json!("Healthy");
        assert_eq!(cell(&render_table(&[healthy]), 1, "HEALTH"), "Healthy");
    }

    #[test]
    fn one_row_per_app_with_why_automation_waits() {
        let apps = [json!({
            "name": "web", "sync": "OutOfSync", "health": "Healthy",
            "revision": {"sha": "0123456789abcdef0123", "subject": "x"},
            "lastPass": {"result": "Succeeded", "durationMs": 12},
            "automation": {"acting": false, "reason": "suspended"}
        })];
        let table = render_table(&apps);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("NAME"));
        assert!(lines[1].contains("web") && lines[1].contains("OutOfSync"));
        assert!(lines[1].contains("0123456789ab") && !lines[1].contains("0123456789abc"));
        assert!(lines[1].ends_with("suspended"));
        assert!(lines[0].contains("SOURCE"));
        assert_eq!(cell(&table, 1, "SOURCE"), "-");

        let refused = [json!({
            "name": "web", "source": {"ready": true},
            "lastPass": {"result": "Succeeded", "durationMs": 3},
            "conditions": [{"type": "SourceVerified", "status": "False",
                            "message": "commit abc is not signed; 0123 stays applied"}]
        })];
        let table = render_table(&refused);
        assert_eq!(cell(&table, 1, "SOURCE"), "Unverified");
        assert!(
            table.ends_with("commit abc is not signed; 0123 stays applied\n"),
            "{table}"
        );
    }

    #[test]
    fn an_app_waiting_for_its_dependencies_says_which_before_an_older_error() {
        let apps = [json!({
            "name": "crs", "sync": "Unknown", "health": "Unknown",
            "lastPass": {"result": "Failed", "durationMs": 3, "error": "apply failed: old"},
            "conditions": [{"type": "Ready", "status": "False", "reason": "DependencyNotReady",
                            "message": "waiting for ops (not Synced at its revision)"}],
            "automation": {"acting": false}
        })];
        let table = render_table(&apps);
        let row = table.lines().nth(1).expect("a row");
        assert!(
            row.ends_with("waiting for ops (not Synced at its revision)"),
            "{table}"
        );
    }

    #[test]
    fn a_pinned_app_shows_the_pinned_revision_and_who_pinned_it() {
        let apps = [json!({
            "name": "web", "sync": "Synced", "health": "Healthy",
            "revision": {"sha": "ffffffffffffffff", "subject": "head"},
            "pin": {"revision": "0123456789abcdef", "subject": "good"},
            "lastPass": {"result": "Succeeded", "durationMs": 3},
            "conditions": [{"type": "Pinned", "status": "True", "reason": "RolledBack",
                            "message": "pinned to 0123456789ab by alice at 2026-11-27T12:00:00Z"}],
            "automation": {"acting": true}
        })];
        let table = render_table(&apps);
        assert_eq!(cell(&table, 1, "REVISION"), "0123456789ab", "{table}");
        assert!(
            table
                .lines()
                .nth(1)
                .is_some_and(|l| l
                    .ends_with("Pinned: pinned to 0123456789ab by alice at 2026-11-27T12:00:00Z")),
            "{table}"
        );
    }

    /// The text under `column` in row `row`, by the header's offsets.
    fn cell(table: &str, row: usize, column: &str) -> String {
        let lines: Vec<&str> = table.lines().collect();
        let start = lines[0].find(column).expect("the column");
        let line = lines[row];
        line.get(start..)
            .unwrap_or("")
            .split("  ")
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    }

    #[test]
    fn a_failing_source_shows_its_reason_then_stale_with_since_when() {
        let app = |stale: bool| {
            json!({
                "name": "web", "sync": "Synced", "health": "Healthy",
                "revision": {"sha": "0123456789abcdef0123", "subject": "x"},
                "source": {
                    "ready": false, "reason": "FetchFailed", "message": "refused",
                    "failingSince": "2026-11-02T10:00:00Z", "stale": stale
                },
                "lastPass": {"result": "Succeeded", "durationMs": 3},
                "automation": {"acting": true}
            })
        };
        let failing = render_table(&[app(false)]);
        assert_eq!(cell(&failing, 1, "SOURCE"), "FetchFailed", "{failing}");
        assert!(
            failing
                .lines()
                .nth(1)
                .is_some_and(|l| l.ends_with("source failing since 2026-11-02T10:00:00Z")),
            "{failing}"
        );
        let stale = render_table(&[app(true)]);
        assert_eq!(cell(&stale, 1, "SOURCE"), "STALE", "{stale}");
        let ready = render_table(&[json!({
            "name": "web", "sync": "Synced", "health": "Healthy",
            "source": {"ready": true, "stale": false}
        })]);
        assert_eq!(cell(&ready, 1, "SOURCE"), "Ready", "{ready}");
    }
}
