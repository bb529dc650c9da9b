//! HTTP: the status API, `/healthz`, `/readyz`, `/metrics`, manual syncs, and the Git
//! providers' webhooks (from the source stage). With a token configured, `/api/v1`
//! (status and manual syncs) asks for it as a bearer token; without one it refuses
//! foreign hosts and cross-site changes (`guard`). Probes and metrics stay open for
//! kubelets and Prometheus, and webhooks carry their own signatures. The dashboard's
//! page (`dashboard`) is open too: it holds no data, and asks for the token when the
//! API does. Replicas call each other as peers (`peer_auth`, `peers`, `relay`).
//!
//! The top floor of the library: `service` wires `tether serve`, the controller runtime
//! (`reconcile::runtime`) and this HTTP surface together under one shutdown signal.

pub(crate) mod dashboard;
pub mod guard;
pub(crate) mod peer_auth;
pub(crate) mod peers;
pub mod people;
pub(crate) mod relay;
mod rollback;
pub mod service;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::future::BoxFuture;
use serde_json::json;
use tower_http::compression::CompressionLayer;

use dashboard::tree::{TreeCache, read_tree};
use guard::Access;
use peer_auth::PeerKey;
use people::{Caller, People};
use relay::Relay;
use service::{PinError, SuspendError};
use tether_core::cluster::Cluster;
use tether_core::report::status::Statuses;

/// What the server needs from the running service.
pub trait Control: Send + Sync {
    /// Asks the app for a manual sync; false when there is no such app.
    fn request_sync(&self, app: &str) -> bool;
    /// Suspends or resumes the app's automation, and records it in the cluster so a
    /// restart and every replica keep it: `Ok(false)` when there is no such app, an
    /// error when it could not be recorded (and nothing changed).
    fn set_suspended(
        &self,
        app: &str,
        suspended: bool,
    ) -> BoxFuture<'_, Result<bool, SuspendError>>;
    /// Pins the app to an earlier revision (a rollback: it then syncs that revision
    /// and stays there) or unpins it (None), and records it in the cluster so a
    /// restart and every replica keep it: `Ok(false)` when there is no such app.
    /// Without workers (the default) there is none to pin.
    fn set_pin(
        &self,
        _app: &str,
        _pin: Option<tether_core::report::status::Pin>,
    ) -> BoxFuture<'_, Result<bool, PinError>> {
        Box::pin(async { Ok(false) })
    }
    /// Each readiness check by name, with whether it passes.
    fn readiness(&self) -> Vec<(&'static str, bool)>;
    /// The connection the app syncs through (as its ServiceAccount, when it has one),
    /// for reads on its behalf: the objects its controllers made.
    fn cluster(&self, _app: &str) -> Option<Arc<Cluster>> {
        None
    }
    /// Who answers for `app` when apps are sharded across replicas (see [`peers`]);
    /// None: this replica answers for every app.
    fn owner(&self, _app: &str) -> Option<crate::reconcile::shard::Owner> {
        None
    }
    /// How many objects this service's watch caches hold (`tether_cache_objects`).
    fn cache_objects(&self) -> usize {
        0
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
    trees: TreeCache,
    peer_key: Option<PeerKey>,
    relay: Relay,
    people: Option<Arc<People>>,
}

/// The whole HTTP surface; `webhooks` is the source stage's receiver. `/api/v1` is
/// reached as `access` says ([`guard`]), or by a peer signing with `peer_key`.
pub fn router(
    statuses: Statuses,
    control: Arc<dyn Control>,
    webhooks: Router,
    access: Access,
    peer_key: Option<PeerKey>,
) -> Router {
    let api = Router::new()
        .route("/api/v1/apps", get(list_apps))
        .route("/api/v1/apps/{name}", get(get_app))
        .route("/api/v1/apps/{name}/sync", post(sync_app))
        .route("/api/v1/apps/{name}/suspend", post(suspend_app))
        .route("/api/v1/apps/{name}/resume", post(resume_app))
        .route("/api/v1/apps/{name}/rollback", post(rollback::rollback_app))
        .route("/api/v1/apps/{name}/unpin", post(rollback::unpin_app))
        .route("/api/v1/apps/{name}/tree", get(app_tree))
        .route("/api/v1/events", get(events))
        .route_layer(middleware::from_fn_with_state(
            (control.clone(), peer_key.clone()),
            peers::forward_actions,
        ))
        .route_layer(middleware::from_fn_with_state(
            (access.people.clone(), statuses.clone()),
            people::authorize,
        ))
        .route_layer(middleware::from_fn_with_state(access.clone(), guard::guard));
    let relay = Relay::new(control.clone(), statuses.clone(), peer_key.clone());
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(api)
        .merge(people::oidc::flow::pages(
            access.oidc.clone(),
            dashboard::routes(),
        ))
        .with_state(ServerState {
            statuses: statuses.clone(),
            control: control.clone(),
            trees: TreeCache::default(),
            peer_key: peer_key.clone(),
            relay,
            people: access.people,
        })
        .merge(webhooks.layer(middleware::from_fn_with_state(
            (control, statuses, peer_key.clone()),
            peers::forward_webhooks,
        )))
        // A call saying it comes from a peer proves it before anything else runs.
        .layer(middleware::from_fn_with_state(
            peer_key,
            peer_auth::authenticate,
        ))
        // gzip for whoever accepts it: 5,000 apps' list is ~700 KB of JSON, ~10 times
        // less gzipped. Event streams, tiny answers and the assets (gzipped once, in
        // `dashboard`) are left as they are.
        .layer(CompressionLayer::new())
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

async fn metrics(State(state): State<ServerState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        tether_core::metrics::METRICS.render_with(state.control.cache_objects()),
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
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let mut answer = match query.view.as_deref() {
        None | Some("full") => {
            let apps = state
                .statuses
                .all()
                .into_iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect();
            let apps = peers::complete_list(
                apps,
                state.control.as_ref(),
                &headers,
                state.peer_key.as_ref(),
            )
            .await;
            json!({ "apps": apps })
        }
        Some("summary") => {
            let summary = dashboard::summary(&state.statuses);
            peers::complete_summary(
                summary,
                state.control.as_ref(),
                &headers,
                state.peer_key.as_ref(),
            )
            .await
        }
        Some(other) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({
                    "error": format!("unknown view {other:?}: use \"full\" or \"summary\"")
                })),
            )
                .into_response();
        }
    };
    if let (Some(people), Caller::User(user)) = (&state.people, &caller) {
        people::retain_visible(people, user, &mut answer).await;
    }
    axum::Json(answer).into_response()
}

/// The live feed: this replica's apps, and with shards the others' through their
/// holders' own feeds (see [`relay`]), so the page on any replica sees them all.
/// A user's feed carries the apps they may see, of this replica only (a peer's relayed
/// events are not theirs to filter).
async fn events(
    State(state): State<ServerState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let control = state.control.clone();
    let viewer = match (&state.people, caller) {
        (Some(people), Caller::User(user)) => Some((people.clone(), user)),
        _ => None,
    };
    let relayed = match viewer {
        None => state.relay.subscribe(&headers),
        Some(_) => None,
    };
    let ours = move |app: String| -> BoxFuture<'static, bool> {
        let local = control.owner(&app).is_none_or(|o| o.local);
        let viewer = viewer.clone();
        Box::pin(async move {
            match viewer {
                _ if !local => false,
                None => true,
                Some((people, user)) => people.visible(&user, vec![app]).await.len() == 1,
            }
        })
    };
    dashboard::events(state.statuses.clone(), ours, relayed)
}

async fn suspend_app(State(state): State<ServerState>, Path(name): Path<String>) -> Response {
    set_suspended(&state, &name, true).await
}

async fn resume_app(State(state): State<ServerState>, Path(name): Path<String>) -> Response {
    set_suspended(&state, &name, false).await
}

async fn set_suspended(state: &ServerState, name: &str, suspended: bool) -> Response {
    match state.control.set_suspended(name, suspended).await {
        Ok(true) => {
            let status = if suspended { "suspended" } else { "resumed" };
            axum::Json(json!({ "status": status, "app": name })).into_response()
        }
        Ok(false) => not_found(name),
        Err(err @ SuspendError::Declared(_)) => (
            StatusCode::CONFLICT,
            axum::Json(json!({ "error": err.to_string() })),
        )
            .into_response(),
        // The cluster refused or could not be reached: nothing changed.
        Err(err) => (
            StatusCode::BAD_GATEWAY,
            axum::Json(json!({ "error": err.to_string() })),
        )
            .into_response(),
    }
}

/// `GET /api/v1/apps/{name}/tree`: the app's objects with what their controllers
/// made, by ownerReferences (see [`dashboard::tree`]). Read on demand and shared for
/// a moment; another replica's app is asked of its holder (see [`peers`]); an app
/// whose worker does not run (one that could not start) gets its own objects without
/// children.
async fn app_tree(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(resources) = state.statuses.with(&name, |s| s.resources.clone()) else {
        return not_found(&name);
    };
    if let Some(owner) = state
        .control
        .owner(&name)
        .filter(|o| !o.local && !peers::is_forwarded(&headers))
    {
        let path = format!("/api/v1/apps/{name}/tree");
        return match peers::ask(&owner, &path, state.peer_key.as_ref()).await {
            Ok(tree) => axum::Json(tree).into_response(),
            Err(err) => {
                let holder = owner.holder.as_deref().unwrap_or("no replica");
                let error = format!(
                    "shard {} is held by {holder}, whose tree could not be read: {err}",
                    owner.shard
                );
                (
                    StatusCode::BAD_GATEWAY,
                    axum::Json(json!({ "error": error })),
                )
                    .into_response()
            }
        };
    }
    if let Some(tree) = state.trees.fresh(&name) {
        return axum::Json(tree.as_ref()).into_response();
    }
    let tree = match state.control.cluster(&name) {
        Some(cluster) => read_tree(&cluster, &resources).await,
        None => dashboard::tree::ObjectTree {
            roots: dashboard::tree::build_tree(&resources, &[]),
            errors: Vec::new(),
        },
    };
    let tree = Arc::new(tree);
    state.trees.keep(&name, tree.clone());
    axum::Json(tree.as_ref()).into_response()
}

async fn get_app(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    match app_status(&state, &name, &headers).await {
        Some(status) => axum::Json(status).into_response(),
        None => not_found(&name),
    }
}

/// One app's status as the API shows it, from whichever replica holds it (see
/// [`peers`]); None for an unknown app.
async fn app_status(
    state: &ServerState,
    name: &str,
    headers: &HeaderMap,
) -> Option<serde_json::Value> {
    let status = serde_json::to_value(state.statuses.get(name)?).ok()?;
    let key = state.peer_key.as_ref();
    Some(peers::complete_one(status, state.control.as_ref(), headers, key).await)
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
    use crate::config::ApiToken;

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

    struct NoApps;

    impl Control for NoApps {
        fn request_sync(&self, _: &str) -> bool {
            false
        }
        fn set_suspended(&self, _: &str, _: bool) -> BoxFuture<'_, Result<bool, SuspendError>> {
            Box::pin(async { Ok(false) })
        }
        fn readiness(&self) -> Vec<(&'static str, bool)> {
            Vec::new()
        }
    }

    async fn answer(router: &Router, path: &str, accept: &str) -> Response {
        use tower::ServiceExt;
        router
            .clone()
            .oneshot(
                axum::http::Request::get(path)
                    .header(header::HOST, "127.0.0.1:8080")
                    .header(header::ACCEPT_ENCODING, accept)
                    .body(axum::body::Body::empty())
                    .expect("a request"),
            )
            .await
            .expect("an answer")
    }

    #[tokio::test]
    async fn the_api_answers_gzipped_when_asked_and_event_streams_never_are() {
        use std::io::Read;
        let statuses = Statuses::default();
        for i in 0..200 {
            statuses.update(&format!("app-{i:03}"), |_| {});
        }
        let router = router(
            statuses,
            Arc::new(NoApps),
            Router::new(),
            Access::default(),
            None,
        );
        let plain = answer(&router, "/api/v1/apps?view=summary", "identity").await;
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
        let plain = axum::body::to_bytes(plain.into_body(), usize::MAX)
            .await
            .expect("a body");
        let zipped = answer(&router, "/api/v1/apps?view=summary", "gzip, br").await;
        assert_eq!(zipped.headers()[header::CONTENT_ENCODING], "gzip");
        let zipped = axum::body::to_bytes(zipped.into_body(), usize::MAX)
            .await
            .expect("a body");
        assert!(
            zipped.len() * 4 < plain.len(),
            "{} of {}",
            zipped.len(),
            plain.len()
        );
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(&zipped[..])
            .read_to_end(&mut text)
            .expect("gzip");
        assert_eq!(text, plain);
        // An event stream goes out as it is written, never held back to compress.
        let events = answer(&router, "/api/v1/events", "gzip").await;
        assert_eq!(events.headers()[header::CONTENT_TYPE], "text/event-stream");
        assert!(events.headers().get(header::CONTENT_ENCODING).is_none());
        let missing = answer(&router, "/api/v1/apps/nope/tree", "gzip").await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
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
