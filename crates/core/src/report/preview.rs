//! Pull-request previews for people and CI jobs: what merging a change does to each
//! app ([`Preview`]), as text, JSON, JUnit, or Markdown sized for a pull-request comment.
//! A summary comes first (apps and objects changed, image changes per container,
//! CRD changes, Secrets changed by key name), then each app. Every rendering works
//! from the masked views of the diff stage, so no Secret value can reach one.

mod junit;

use std::fmt::Write;

use serde_json::{Value, json};

use super::drift::{DriftReport, unified_diff, unified_diff_between};
use crate::sync::preview::{AppOutcome, AppPreview, Comparison, Preview, secret_keys};
use tether_diff::diff::{Drift, ObjectDiff, Segment};
use tether_diff::manifest::NOT_COMPARED;

pub use junit::render_junit;

/// The hidden line of tether's pull-request comments before they carried an id
/// (one comment per pull request): a comment holding it is adopted, edited into the
/// comment of the first run that finds no comment of its own id.
pub const BARE_COMMENT_MARKER: &str = "<!-- tether-preview -->";

/// The length of a default comment id: 12 hex digits (48 bits of SHA-256), as short
/// as a Git abbreviated commit and as unlikely to collide among a pull request's jobs.
const DEFAULT_ID_LEN: usize = 12;

/// The hidden line that marks tether's comment on a pull request for what `id`
/// names, so a rerun finds and edits it and a job previewing something else keeps
/// its own comment.
pub fn comment_marker(id: &str) -> String {
    format!("<!-- tether-preview id={id} -->")
}

/// The comment id of a preview that names none: a short hash of what is previewed
/// (`what`: how the apps were chosen, e.g. the configuration's path in the
/// repository), the same on every run of the job and on every machine.
pub fn default_comment_id(what: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut id = hex::encode(Sha256::digest(what.as_bytes()));
    id.truncate(DEFAULT_ID_LEN);
    id
}

/// GitHub's limit on an issue or pull-request comment body, in characters (its API
/// answers 422 "body is too long (maximum is 65536 characters)").
pub const GITHUB_COMMENT_LIMIT: usize = 65_536;

/// The two sides of every object diff in a preview.
const SIDES: [&str; 2] = ["base", "head"];

/// What a change does to one object, in a reviewer's words.
fn verb(drift: &Drift) -> &'static str {
    match drift {
        Drift::Missing => "Added",
        Drift::Extra => "Removed",
        Drift::Modified(_) => "Changed",
        Drift::InSync | Drift::Conflict(_) => "Unchanged",
    }
}

/// Objects added, removed and changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub added: usize,
    pub removed: usize,
    pub changed: usize,
}

impl Counts {
    /// Encrypted documents the change touches count as changed (not compared).
    fn of(comparison: &Comparison) -> Counts {
        let mut c = Counts {
            changed: comparison.not_compared.len(),
            ..Counts::default()
        };
        for o in &comparison.objects {
            match o.drift {
                Drift::Missing => c.added += 1,
                Drift::Extra => c.removed += 1,
                Drift::Modified(_) => c.changed += 1,
                Drift::InSync | Drift::Conflict(_) => {}
            }
        }
        c
    }

    fn any(&self) -> bool {
        self.added + self.removed + self.changed > 0
    }

    fn line(&self) -> String {
        format!(
            "{} added, {} removed, {} changed",
            self.added, self.removed, self.changed
        )
    }
}

/// Apps and objects over the whole preview.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub changed_apps: usize,
    pub unchanged_apps: usize,
    pub failed_apps: usize,
    pub objects: Counts,
    pub filtered: usize,
    /// Apps whose head differs from the cluster (when compared with it).
    pub live_drift_apps: usize,
}

impl Totals {
    pub fn of(preview: &Preview) -> Totals {
        let mut t = Totals::default();
        for app in &preview.apps {
            if live_drift(app).is_some_and(|d| !d.is_empty()) {
                t.live_drift_apps += 1;
            }
            match &app.outcome {
                AppOutcome::Unchanged => t.unchanged_apps += 1,
                AppOutcome::Failed { .. } => t.failed_apps += 1,
                AppOutcome::Compared(c) => {
                    let counts = Counts::of(c);
                    if counts.any() {
                        t.changed_apps += 1;
                    } else {
                        t.unchanged_apps += 1;
                    }
                    t.objects.added += counts.added;
                    t.objects.removed += counts.removed;
                    t.objects.changed += counts.changed;
                    t.filtered += c.filtered;
                }
            }
        }
        t
    }

    /// Whether the change does anything a reviewer should see (a failed render too,
    /// and a head that differs from the cluster).
    pub fn has_changes(&self) -> bool {
        self.changed_apps + self.failed_apps + self.live_drift_apps > 0
    }
}

/// The objects where the app's head differs from the cluster, when compared.
fn live_drift(app: &AppPreview) -> Option<Vec<&ObjectDiff>> {
    let live = app.live.as_ref()?;
    Some(live.iter().filter(|o| o.drift.is_drift()).collect())
}

/// The line heading an app's head-vs-live section.
fn live_heading(drifted: &[&ObjectDiff]) -> String {
    match drifted.len() {
        0 => "head vs live: in sync (merging changes nothing live)".to_string(),
        n => format!("head vs live: merging changes {n} object(s) in the cluster"),
    }
}

/// One object of a head-vs-live section: its status as `tether diff` says it
/// (Missing: merging creates it; Modified; Extra: merging prunes it), the fields,
/// and the live → head diff.
fn live_object(o: &ObjectDiff, color: bool) -> String {
    let mut out = format!("{}: {}\n", o.drift.status().as_str(), o.id);
    for c in o.drift.changes() {
        let _ = writeln!(out, "  ~ {}", c.path);
    }
    out.push_str(&unified_diff(o, color));
    out
}

/// One container's image, before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageChange {
    pub app: String,
    pub object: String,
    pub container: String,
    pub from: String,
    pub to: String,
}

/// What a reviewer is told first, besides the counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Highlights {
    pub images: Vec<ImageChange>,
    /// `(app, CRD, what happened)`.
    pub crds: Vec<(String, String, String)>,
    /// `(app, Secret, key names)`: never a value.
    pub secrets: Vec<(String, String, Vec<String>)>,
}

fn compared(preview: &Preview) -> impl Iterator<Item = (&str, &Comparison)> {
    preview.apps.iter().filter_map(|app| match &app.outcome {
        AppOutcome::Compared(c) => Some((app.name.as_str(), c)),
        _ => None,
    })
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "(none)".to_string(),
    }
}

impl Highlights {
    pub fn of(preview: &Preview) -> Highlights {
        let mut h = Highlights::default();
        for (app, comparison) in compared(preview) {
            for o in comparison.objects.iter().filter(|o| o.drift.is_drift()) {
                for c in o.drift.changes() {
                    if let [.., Segment::Key(pairs), Segment::Field(field)] = c.path.segments()
                        && field == "image"
                    {
                        let container = pairs
                            .iter()
                            .find(|(k, _)| k == "name")
                            .map(|(_, v)| text_of(Some(v)))
                            .unwrap_or_default();
                        h.images.push(ImageChange {
                            app: app.to_string(),
                            object: o.id.to_string(),
                            container,
                            from: text_of(c.live.as_ref()),
                            to: text_of(c.desired.as_ref()),
                        });
                    }
                }
                if o.id.group == "apiextensions.k8s.io" && o.id.kind == "CustomResourceDefinition" {
                    let what = match &o.drift {
                        Drift::Modified(changes) => {
                            let n = changes.len();
                            format!("changed ({n} field{})", if n == 1 { "" } else { "s" })
                        }
                        other => verb(other).to_lowercase(),
                    };
                    h.crds.push((app.to_string(), o.id.name.clone(), what));
                }
                let keys = secret_keys(o);
                if !keys.is_empty() {
                    h.secrets.push((app.to_string(), o.id.to_string(), keys));
                }
            }
        }
        h
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// The preview as text: the summary, the highlights, then each app's objects with
/// a unified diff (base → head) per changed object.
pub fn render_text(preview: &Preview, color: bool) -> String {
    let t = Totals::of(preview);
    let h = Highlights::of(preview);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tether diff {}..{}: {} app(s) changed, {} unchanged, {} failed; objects: {}; {} filtered; {} render(s)",
        short(&preview.base.sha),
        short(&preview.head.sha),
        t.changed_apps,
        t.unchanged_apps,
        t.failed_apps,
        t.objects.line(),
        t.filtered,
        preview.renders,
    );
    for i in &h.images {
        let _ = writeln!(
            out,
            "image: app {} {} container {}: {} → {}",
            i.app, i.object, i.container, i.from, i.to
        );
    }
    for (app, crd, what) in &h.crds {
        let _ = writeln!(out, "CRD: app {app} {crd}: {what}");
    }
    for (app, secret, keys) in &h.secrets {
        let _ = writeln!(out, "Secret: app {app} {secret}: keys {}", keys.join(", "));
    }
    for app in &preview.apps {
        out.push('\n');
        match &app.outcome {
            AppOutcome::Unchanged => {
                let _ = writeln!(out, "app {}: unchanged (not rendered)", app.name);
            }
            AppOutcome::Failed { side, error } => {
                let _ = writeln!(
                    out,
                    "app {}: render failed at {}: {error}",
                    app.name,
                    side.as_str()
                );
            }
            AppOutcome::Compared(c) => {
                let counts = Counts::of(c);
                let _ = writeln!(
                    out,
                    "app {}: {}: {}, {} filtered",
                    app.name,
                    if counts.any() { "changed" } else { "unchanged" },
                    counts.line(),
                    c.filtered
                );
                for o in c.objects.iter().filter(|o| o.drift.is_drift()) {
                    out.push_str(&object_text(o, color));
                }
                for sealed in &c.not_compared {
                    let _ = writeln!(out, "Changed ({NOT_COMPARED}): {}", sealed.title());
                }
            }
        }
        if let Some(drifted) = live_drift(app) {
            let _ = writeln!(out, "app {}: {}", app.name, live_heading(&drifted));
            for o in drifted {
                out.push_str(&live_object(o, color));
            }
        }
    }
    out
}

fn object_text(o: &ObjectDiff, color: bool) -> String {
    let mut out = format!("{}: {}\n", verb(&o.drift), o.id);
    for c in o.drift.changes() {
        let _ = writeln!(out, "  ~ {}", c.path);
    }
    out.push_str(&unified_diff_between(o, color, SIDES));
    out
}

/// The preview as one JSON object: `base`, `head`, `renders`, `summary`, the
/// highlights (`images`, `crds`, `secrets`) and `apps`, each with its `status`
/// (Changed, Unchanged, Failed) and its `resources` (status Added, Removed,
/// Changed; `changes` with `path`, `base` and `head`).
pub fn render_json(preview: &Preview) -> Value {
    let t = Totals::of(preview);
    let h = Highlights::of(preview);
    let revision = |r: &crate::source::Revision| json!({"sha": r.sha, "subject": r.subject});
    let apps: Vec<Value> = preview
        .apps
        .iter()
        .map(|app| match &app.outcome {
            AppOutcome::Unchanged => {
                json!({"name": app.name, "status": "Unchanged", "rendered": false})
            }
            AppOutcome::Failed { side, error } => json!({
                "name": app.name, "status": "Failed", "side": side.as_str(), "error": error,
            }),
            AppOutcome::Compared(c) => {
                let counts = Counts::of(c);
                let resources: Vec<Value> = c
                    .objects
                    .iter()
                    .filter(|o| o.drift.is_drift())
                    .map(|o| {
                        let changes: Vec<Value> = o
                            .drift
                            .changes()
                            .iter()
                            .map(|c| json!({"path": c.path, "base": c.live, "head": c.desired}))
                            .collect();
                        json!({
                            "apiVersion": o.id.api_version(), "kind": o.id.kind,
                            "namespace": o.id.namespace, "name": o.id.name,
                            "status": verb(&o.drift), "changes": changes,
                        })
                    })
                    .chain(c.not_compared.iter().map(|sealed| {
                        super::drift::not_compared(sealed, "Changed")
                    }))
                    .collect();
                json!({
                    "name": app.name,
                    "status": if counts.any() { "Changed" } else { "Unchanged" },
                    "rendered": true,
                    "summary": {"added": counts.added, "removed": counts.removed, "changed": counts.changed},
                    "filtered": c.filtered,
                    "resources": resources,
                    "live": app.live.as_ref().map(|objects| super::drift::render_json(&DriftReport {
                        revision: Some(preview.head.sha.clone()),
                        objects: objects.clone(),
                        ..DriftReport::default()
                    })),
                })
            }
        })
        .collect();
    json!({
        "base": revision(&preview.base),
        "head": revision(&preview.head),
        "renders": preview.renders,
        "summary": {
            "apps": {"changed": t.changed_apps, "unchanged": t.unchanged_apps, "failed": t.failed_apps},
            "objects": {"added": t.objects.added, "removed": t.objects.removed, "changed": t.objects.changed},
            "filtered": t.filtered,
        },
        "images": h.images.iter().map(|i| json!({
            "app": i.app, "object": i.object, "container": i.container, "from": i.from, "to": i.to,
        })).collect::<Vec<_>>(),
        "crds": h.crds.iter().map(|(app, name, what)| json!({"app": app, "name": name, "change": what})).collect::<Vec<_>>(),
        "secrets": h.secrets.iter().map(|(app, object, keys)| json!({"app": app, "object": object, "keys": keys})).collect::<Vec<_>>(),
        "apps": apps,
    })
}

/// Escapes text for a table cell or a `<summary>`.
fn cell(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace('\n', " ")
}

/// The Markdown before the apps: verdict, counts and highlights.
fn markdown_head(preview: &Preview) -> String {
    let t = Totals::of(preview);
    let h = Highlights::of(preview);
    let mut out = format!(
        "### tether diff: {} of {} apps changed\n\nBase `{}` → head `{}` · objects: {} · {} filtered",
        t.changed_apps,
        preview.apps.len(),
        short(&preview.base.sha),
        short(&preview.head.sha),
        t.objects.line(),
        t.filtered,
    );
    if t.failed_apps > 0 {
        let _ = write!(out, " · **{} app(s) failed to render**", t.failed_apps);
    }
    out.push_str("\n\n");
    if !h.images.is_empty() {
        out.push_str("| App | Object | Container | Image |\n|---|---|---|---|\n");
        for i in &h.images {
            let _ = writeln!(
                out,
                "| {} | {} | {} | `{}` → `{}` |",
                cell(&i.app),
                cell(&i.object),
                cell(&i.container),
                cell(&i.from).replace('`', "'"),
                cell(&i.to).replace('`', "'")
            );
        }
        out.push('\n');
    }
    for (app, crd, what) in &h.crds {
        let _ = writeln!(out, "- **CRD** {} (app {}): {what}", cell(crd), cell(app));
    }
    for (app, secret, keys) in &h.secrets {
        let _ = writeln!(
            out,
            "- **Secret** {} (app {}): keys {}",
            cell(secret),
            cell(app),
            cell(&keys.join(", "))
        );
    }
    if !h.crds.is_empty() || !h.secrets.is_empty() {
        out.push('\n');
    }
    out
}

/// One app's section: its summary line and its body (objects, or the error).
fn markdown_app(app: &AppPreview) -> Option<(String, String)> {
    let name = app.name.as_str();
    match &app.outcome {
        AppOutcome::Unchanged => None,
        AppOutcome::Failed { side, error } => Some((
            format!("<b>{}</b>: render failed at {}", cell(name), side.as_str()),
            format!("~~~\n{}\n~~~\n", error.replace("~~~", "~ ~ ~")),
        )),
        AppOutcome::Compared(c) => {
            let counts = Counts::of(c);
            let live = live_drift(app);
            if !counts.any() && live.as_ref().is_none_or(Vec::is_empty) {
                return None;
            }
            let mut body = String::new();
            for o in c.objects.iter().filter(|o| o.drift.is_drift()) {
                let _ = writeln!(body, "**{}** {}\n", verb(&o.drift), cell(&o.id.to_string()));
                for ch in o.drift.changes() {
                    let _ = writeln!(body, "- `{}`", ch.path.to_string().replace('`', "'"));
                }
                // A tilde fence: YAML can hold backticks, hardly a line of three tildes.
                let _ = write!(
                    body,
                    "\n~~~diff\n{}~~~\n\n",
                    unified_diff_between(o, false, SIDES)
                );
            }
            for sealed in &c.not_compared {
                let _ = writeln!(
                    body,
                    "**Changed** {} ({NOT_COMPARED})\n",
                    cell(&sealed.title())
                );
            }
            if let Some(drifted) = live {
                let _ = writeln!(body, "#### {}\n", cell(&live_heading(&drifted)));
                for o in drifted {
                    let _ = writeln!(
                        body,
                        "**{}** {}\n",
                        o.drift.status().as_str(),
                        cell(&o.id.to_string())
                    );
                    for ch in o.drift.changes() {
                        let _ = writeln!(body, "- `{}`", ch.path.to_string().replace('`', "'"));
                    }
                    let _ = write!(body, "\n~~~diff\n{}~~~\n\n", unified_diff(o, false));
                }
            }
            Some((
                format!(
                    "<b>{}</b>: {} ({} filtered)",
                    cell(name),
                    counts.line(),
                    c.filtered
                ),
                body,
            ))
        }
    }
}

/// `body` cut at a line end to at most `budget` bytes, with an open fence closed and
/// a line saying how much was left out. Unchanged when it fits.
fn cut(body: &str, budget: usize) -> String {
    if body.len() <= budget {
        return body.to_string();
    }
    let note_room = 200;
    if budget < note_room {
        // Too little room for any of the body: the shortest honest line, if it fits.
        let short = format!(
            "_({} characters left out: see the job's artifact)_\n",
            body.len()
        );
        return if short.len() <= budget {
            short
        } else {
            String::new()
        };
    }
    let mut kept = String::new();
    let mut fenced = false;
    for line in body.split_inclusive('\n') {
        if kept.len() + line.len() + note_room > budget {
            break;
        }
        if line.starts_with("~~~") {
            fenced = !fenced;
        }
        kept.push_str(line);
    }
    if fenced {
        kept.push_str("~~~\n");
    }
    let _ = writeln!(
        kept,
        "\n_… {} of {} characters of this app's report left out to fit the comment; the full report is in the job's artifact (`-o markdown --output-dir`)._",
        body.len() - kept.len().min(body.len()),
        body.len()
    );
    kept
}

/// The preview as a pull-request comment of at most `limit` bytes (a byte is at
/// most a character, so a provider's character limit holds): every changed or
/// failed app folded in `<details>`, the largest ones cut first so the small ones
/// stay whole, the unchanged apps named at the end, and `marker` (a
/// [`comment_marker`]).
pub fn render_markdown(preview: &Preview, limit: usize, marker: &str) -> String {
    let head = markdown_head(preview);
    let unchanged: Vec<String> = preview
        .apps
        .iter()
        .filter(|app| markdown_app(app).is_none())
        .map(|app| format!("`{}`", app.name.replace('`', "'")))
        .collect();
    let mut tail = String::new();
    if !unchanged.is_empty() {
        let _ = writeln!(tail, "\nUnchanged: {}", unchanged.join(", "));
    }
    let _ = writeln!(tail, "\n{marker}");
    let sections: Vec<(String, String)> = preview.apps.iter().filter_map(markdown_app).collect();
    let frame = |summary: &str| format!("<details><summary>{summary}</summary>\n\n\n</details>\n");
    let fixed =
        head.len() + tail.len() + sections.iter().map(|(s, _)| frame(s).len()).sum::<usize>();
    // Share what is left fairly: apps smaller than their share keep all of it, and
    // what they leave goes to the larger ones.
    let mut budget = limit.saturating_sub(fixed);
    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&i| sections[i].1.len());
    let mut allowed = vec![0; sections.len()];
    for (n, &i) in order.iter().enumerate() {
        let share = budget / (sections.len() - n);
        allowed[i] = sections[i].1.len().min(share);
        budget -= allowed[i];
    }
    let mut out = head;
    for ((summary, body), allowed) in sections.iter().zip(allowed) {
        let _ = write!(
            out,
            "<details><summary>{summary}</summary>\n\n{}\n</details>\n",
            cut(body, allowed)
        );
    }
    out.push_str(&tail);
    if out.len() > limit {
        // Only a summary larger than the limit itself gets here.
        // Room for the line break and the marker line `writeln!` adds below.
        let mut end = limit.saturating_sub(marker.len() + 2);
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        let _ = writeln!(out, "\n{marker}");
    }
    out
}

/// A file name for an app's report: its name with anything but letters, digits,
/// `-`, `_` and `.` replaced, so no name can leave the output directory.
fn file_name(app: &str) -> String {
    let safe: String = app
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}.md", safe.trim_start_matches('.'))
}

/// The full report as files, for a CI job's artifact (`--output-dir`): one
/// `<app>.md` per changed or failed app, never cut, and `index.md` with the
/// summary and a link to each. Returns `(file name, content)` pairs.
pub fn render_markdown_files(preview: &Preview) -> Vec<(String, String)> {
    let mut index = markdown_head(preview);
    let mut files = Vec::new();
    for app in &preview.apps {
        match markdown_app(app) {
            Some((summary, body)) => {
                let name = file_name(&app.name);
                let _ = writeln!(index, "- [{}]({name}): {summary}", cell(&app.name));
                files.push((name, format!("### {summary}\n\n{body}")));
            }
            None => {
                let _ = writeln!(index, "- {}: unchanged", cell(&app.name));
            }
        }
    }
    files.push(("index.md".to_string(), index));
    files
}
