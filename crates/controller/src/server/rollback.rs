//! Rollback that holds (issue #30), over HTTP. `POST /api/v1/apps/{name}/rollback`
//! with `{"revision": SHA, "reason": "...", "untilGitMoves": false}` pins the app to
//! a revision it was applied at (one of its `appliedRevisions`; a full SHA or an
//! unambiguous prefix): it syncs that revision, rendered from Git at that commit, and
//! heals toward it until `POST /api/v1/apps/{name}/unpin`, or, with `untilGitMoves`,
//! until Git's head moves past the one it is at now. Both are changes: `people`
//! authorizes them (`patch` on apps.tether.dev) and records them (Event, log line);
//! the runtime keeps the pin in the cluster (`reconcile::runtime::pins`).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::people::{Caller, audit};
use super::{ServerState, app_status, not_found};
use tether_core::report::status::{APPLIED_HISTORY, AppliedRevision, Pin, find_applied};

/// The longest reason a rollback may carry: a sentence or two, kept in the status,
/// the ConfigMap and the `Pinned` condition (whose message Kubernetes bounds at
/// 32,768 bytes).
pub const MAX_REASON: usize = 1024;

/// What a rollback asks for.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RollbackRequest {
    revision: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    until_git_moves: bool,
}

fn refuse(code: StatusCode, error: String) -> Response {
    (code, Json(json!({ "error": error }))).into_response()
}

pub(super) async fn rollback_app(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Json<RollbackRequest>, JsonRejection>,
) -> Response {
    let asked = match body {
        Ok(Json(asked)) => asked,
        Err(rejection) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "a rollback's body is {{\"revision\": SHA, \"reason\": TEXT, \"untilGitMoves\": BOOL}}: {}",
                    rejection.body_text()
                ),
            );
        }
    };
    if asked.reason.chars().count() > MAX_REASON {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("reason: longer than {MAX_REASON} characters"),
        );
    }
    // The app's applied history and Git's head, from whichever replica holds it.
    let Some(status) = app_status(&state, &name, &headers).await else {
        return not_found(&name);
    };
    let applied: Vec<AppliedRevision> =
        serde_json::from_value(status["appliedRevisions"].clone()).unwrap_or_default();
    let Some(target) = find_applied(&applied, &asked.revision) else {
        return refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            never_applied(&name, &asked.revision, &applied),
        );
    };
    let head = status
        .pointer("/revision/sha")
        .and_then(Value::as_str)
        .map(str::to_string);
    let pin = Pin {
        revision: target.sha.clone(),
        subject: target.subject.clone(),
        by: audit::who(&caller).to_string(),
        at: chrono::Utc::now(),
        reason: asked.reason.trim().to_string(),
        until_git_moves_from: head.filter(|_| asked.until_git_moves),
    };
    match state.control.set_pin(&name, Some(pin.clone())).await {
        Ok(true) => Json(json!({ "status": "pinned", "app": name, "pin": pin })).into_response(),
        Ok(false) => not_found(&name),
        // The cluster refused or could not be reached: nothing changed.
        Err(err) => refuse(StatusCode::BAD_GATEWAY, err.to_string()),
    }
}

pub(super) async fn unpin_app(
    State(state): State<ServerState>,
    Path(name): Path<String>,
) -> Response {
    match state.control.set_pin(&name, None).await {
        Ok(true) => Json(json!({ "status": "unpinned", "app": name })).into_response(),
        Ok(false) => not_found(&name),
        Err(err) => refuse(StatusCode::BAD_GATEWAY, err.to_string()),
    }
}

/// Why `wanted` is no rollback target of `app`, naming those it has.
fn never_applied(app: &str, wanted: &str, applied: &[AppliedRevision]) -> String {
    let known: Vec<&str> = applied
        .iter()
        .map(|r| r.sha.get(..12).unwrap_or(&r.sha))
        .collect();
    let known = if known.is_empty() {
        "none yet".to_string()
    } else {
        known.join(", ")
    };
    format!(
        "revision {wanted:?} is not one app {app:?} was applied at (or names several): a rollback goes back to one of its last {APPLIED_HISTORY} applied revisions ({known})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_never_applied_is_refused_naming_those_that_were() {
        let applied = [AppliedRevision {
            sha: "0123456789abcdef".repeat(2) + "01234567",
            subject: "good".into(),
            applied_at: chrono::Utc::now(),
        }];
        let message = never_applied("team-a.web", "deadbeef", &applied);
        assert_eq!(
            message,
            "revision \"deadbeef\" is not one app \"team-a.web\" was applied at (or names several): a rollback goes back to one of its last 10 applied revisions (0123456789ab)"
        );
        assert!(never_applied("web", "x", &[]).ends_with("(none yet)"));
    }
}
