//! Apps' status for people (`tether status`): one table row per app.

use serde_json::Value;

/// `NAME SYNC HEALTH REVISION LAST PASS AUTOMATION` for the apps the status API returned.
pub fn render_table(apps: &[Value]) -> String {
    let header = ["NAME", "SYNC", "HEALTH", "REVISION", "LAST PASS", "NOTE"];
    let rows: Vec<[String; 6]> = apps
        .iter()
        .map(|app| {
            let text = |v: &Value| v.as_str().unwrap_or("-").to_string();
            let revision = app["revision"]["sha"]
                .as_str()
                .map(|sha| sha.chars().take(12).collect())
                .unwrap_or_else(|| "-".to_string());
            let pass = &app["lastPass"];
            let last = match pass["result"].as_str() {
                Some(result) => format!("{result} {}ms", pass["durationMs"]),
                None => "-".to_string(),
            };
            let note = pass["error"]
                .as_str()
                .or_else(|| app["automation"]["reason"].as_str())
                .unwrap_or("")
                .to_string();
            [
                text(&app["name"]),
                text(&app["sync"]),
                text(&app["health"]),
                revision,
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
    let mut line = |cells: [&str; 6]| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    }
}
