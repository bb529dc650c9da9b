//! HTTP: the status API, `/healthz`, `/readyz`, `/metrics`, manual syncs, and the Git
//! providers' webhooks (from the source stage). With a token configured, `/api/v1`
//! (status and manual syncs) asks for it as a bearer token; probes and metrics stay
//! open for kubelets and Prometheus, and webhooks carry their own signatures. The
//! dashboard's page (`dashboard`) is open too: it holds no data, and asks for the
//! token when the API does.
//!
//! The top floor of the library: `service` runs `tether serve`, the workers of the
//! reconcile loop and this HTTP surface together under one shutdown signal.

pub mod dashboard;
pub mod peers;
pub mod service;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::config::ApiToken;
use crate::report::status::Statuses;

/// What the server needs from the running service.
pub trait Control: Send + Sync {
    /// Asks the app for a manual sync; false when there is no such app.
    fn request_sync(&self, app: &str) -> bool;
    /// Suspends or resumes the app's automation; false when there is no such app.
    fn set_suspended(&self, app: &str, suspended: bool) -> bool;
    /// Each readiness check by name, with whether it passes.
    fn readiness(&self) -> Vec<(&'static str, bool)>;
    /// Who answers for `app` when apps are sharded across replicas (see [`peers`]);
    /// None: this replica answers for every app.
    fn owner(&self, _app: &str) -> Option<crate::reconcile::shard::Owner> {
        None
    }
}

/// The bearer token of a request (`Authorization: Bearer <token>`). The scheme is
/// case-insensitive (RFC 7235), the token is not.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .and_then(|(scheme, token)| scheme.eq_ignore_ascii_case("bearer").then_some(token))
}

#[derive(Clone)]
struct ServerState {
    statuses: Statuses,
    control: Arc<dyn Control>,
}

/// The whole HTTP surface; `webhooks` is the source stage's receiver. With `token`,
/// `/api/v1` answers 401 to requests without it.
pub fn router(
    statuses: Statuses,
    control: Arc<dyn Control>,
    webhooks: Router,
    token: Option<ApiToken>,
) -> Router {
    let mut api = Router::new()
        .route("/api/v1/apps", get(list_apps))
        .route("/api/v1/apps/{name}", get(get_app))
        .route("/api/v1/apps/{name}/sync", post(sync_app))
        .route("/api/v1/apps/{name}/suspend", post(suspend_app))
        .route("/api/v1/apps/{name}/resume", post(resume_app))
        .route("/api/v1/events", get(events))
        .route_layer(middleware::from_fn_with_state(
            control.clone(),
            peers::forward_actions,
        ));
    if let Some(token) = token {
        api = api.route_layer(middleware::from_fn_with_state(token, authorize));
    }
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(api)
        .merge(dashboard::routes())
        .with_state(ServerState { statuses, control })
        .merge(webhooks)
}

async fn authorize(State(token): State<ApiToken>, request: Request, next: Next) -> Response {
    if bearer(request.headers()).is_some_and(|given| token.accepts(given)) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, r#"Bearer realm="tether""#)],
        axum::Json(json!({
            "error": "this API needs the token server.apiToken names, as Authorization: Bearer <token>"
        })),
    )
        .into_response()
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

#[derive(serde::Deserialize)]
struct ListQuery {
    /// `summary`: the compact list the dashboard reads (see [`dashboard::summary`]).
    view: Option<String>,
}

async fn list_apps(
    State(state): State<ServerState>,
    Query(query): Query<ListQuery>,
    headers: HeaderMap,
) -> Response {
    match query.view.as_deref() {
        None | Some("full") => {
            let apps = state
                .statuses
                .all()
                .into_iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect();
            let apps = peers::complete_list(apps, state.control.as_ref(), &headers).await;
            axum::Json(json!({ "apps": apps })).into_response()
        }
        Some("summary") => axum::Json(dashboard::summary(&state.statuses)).into_response(),
        Some(other) => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({
                "error": format!("unknown view {other:?}: use \"full\" or \"summary\"")
            })),
        )
            .into_response(),
    }
}

async fn events(State(state): State<ServerState>) -> Response {
    dashboard::events(state.statuses.clone())
}

async fn suspend_app(State(state): State<ServerState>, Path(name): Path<String>) -> Response {
    set_suspended(&state, &name, true)
}

async fn resume_app(State(state): State<ServerState>, Path(name): Path<String>) -> Response {
    set_suspended(&state, &name, false)
}

fn set_suspended(state: &ServerState, name: &str, suspended: bool) -> Response {
    if state.control.set_suspended(name, suspended) {
        let status = if suspended { "suspended" } else { "resumed" };
        axum::Json(json!({ "status": status, "app": name })).into_response()
    } else {
        not_found(name)
    }
}

async fn get_app(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(status) = state
        .statuses
        .get(&name)
        .and_then(|s| serde_json::to_value(s).ok())
    else {
        return not_found(&name);
    };
    axum::Json(peers::complete_one(status, state.control.as_ref(), &headers).await).into_response()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn with_authorization(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            value.parse().expect("a header value"),
        );
        headers
    }

    fn accepted(token: &ApiToken, headers: &HeaderMap) -> bool {
        bearer(headers).is_some_and(|given| token.accepts(given))
    }

    #[test]
    fn only_the_exact_bearer_token_is_accepted() {
        let token = ApiToken::new("s3cret");
        assert!(accepted(&token, &with_authorization("Bearer s3cret")));
        assert!(accepted(&token, &with_authorization("bearer s3cret")));
        assert!(!accepted(&token, &HeaderMap::new()));
        for wrong in [
            "Bearer s3cre",
            "Bearer s3crett",
            "Bearer S3CRET",
            "Bearers3cret",
            "Bearer ",
            "Basic s3cret",
            "s3cret",
        ] {
            assert!(!accepted(&token, &with_authorization(wrong)), "{wrong}");
        }
        assert_eq!(format!("{token:?}"), "ApiToken(..)");
    }
}
