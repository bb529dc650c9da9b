//! HTTP: the status API, `/healthz`, `/readyz`, `/metrics`, manual syncs, and the Git
//! providers' webhooks (from the source stage).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::reconcile::status::Statuses;

/// What the server needs from the running service.
pub trait Control: Send + Sync {
    /// Asks the app for a manual sync; false when there is no such app.
    fn request_sync(&self, app: &str) -> bool;
    /// Each readiness check by name, with whether it passes.
    fn readiness(&self) -> Vec<(&'static str, bool)>;
}

#[derive(Clone)]
struct ServerState {
    statuses: Statuses,
    control: Arc<dyn Control>,
}

/// The whole HTTP surface; `webhooks` is the source stage's receiver.
pub fn router(statuses: Statuses, control: Arc<dyn Control>, webhooks: Router) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/v1/apps", get(list_apps))
        .route("/api/v1/apps/{name}", get(get_app))
        .route("/api/v1/apps/{name}/sync", post(sync_app))
        .with_state(ServerState { statuses, control })
        .merge(webhooks)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<ServerState>) -> Response {
    let checks = state.control.readiness();
    let ready = checks.iter().all(|(_, ok)| *ok);
    let body: String = checks
        .iter()
        .map(|(name, ok)| format!("[{}] {name}\n", if *ok { "+" } else { "-" }))
        .collect();
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, body).into_response()
}

async fn metrics() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::METRICS.render(),
    )
        .into_response()
}

async fn list_apps(State(state): State<ServerState>) -> Response {
    axum::Json(json!({ "apps": state.statuses.all() })).into_response()
}

async fn get_app(State(state): State<ServerState>, Path(name): Path<String>) -> Response {
    match state.statuses.get(&name) {
        Some(status) => axum::Json(status).into_response(),
        None => not_found(&name),
    }
}

async fn sync_app(State(state): State<ServerState>, Path(name): Path<String>) -> Response {
    if state.control.request_sync(&name) {
        (
            StatusCode::ACCEPTED,
            axum::Json(json!({ "status": "accepted", "app": name })),
        )
            .into_response()
    } else {
        not_found(&name)
    }
}

fn not_found(name: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({ "error": format!("no app named {name:?}") })),
    )
        .into_response()
}
