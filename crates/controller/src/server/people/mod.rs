//! People and permissions (issue #30): a caller of `/api/v1` other than the operator
//! logs in with a Kubernetes bearer token (a ServiceAccount token from `kubectl create
//! token`, or an OIDC ID token the API server accepts), checked with a `TokenReview`,
//! and may do to an App what Kubernetes RBAC allows them, asked with a
//! `SubjectAccessReview`: `get` on `apps.tether.dev` to see it, `patch` to sync,
//! suspend, resume, roll back or unpin it. Apps from the configuration file are
//! authorized as if they lived in the inventory namespace (under their own name).
//!
//! Both answers are kept a few seconds ([`TOKEN_TTL`], [`DECISION_TTL`]) by token hash
//! and by (user, verb, app), in bounded maps, so a page load costs one review per
//! namespace (a `list` check) plus one per app only in namespaces the user may not
//! list. The API token (`server.apiToken`) stays the operator's break-glass credential
//! and is never sent to the cluster; nor is a user's token logged. Each action taken
//! leaves a trail (`audit`).

pub(crate) mod audit;
pub(crate) mod cache;
pub mod oidc;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::config::{APP_GROUP, APP_PLURAL};
use cache::Expiring;
use tether_core::report::status::Statuses;

/// How long a TokenReview's answer is believed: kube-apiserver's webhook token
/// authenticator keeps answers 2 minutes; tether keeps them shorter, so a deleted
/// ServiceAccount's token stops working here within half a minute.
pub const TOKEN_TTL: Duration = Duration::from_secs(30);
/// How long an authorization decision is kept ("a few seconds", the issue): a
/// RoleBinding removed takes effect within it.
pub const DECISION_TTL: Duration = Duration::from_secs(5);
/// Entries per cache: ample for every user of a dashboard times their apps; past it
/// the oldest go (see [`Expiring`]).
pub const CACHE_LIMIT: usize = 50_000;
/// A review's bound: the API server answers in milliseconds; a hung one must not hang
/// the page.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// Reviews asked at once when a list needs one per app.
const REVIEW_CONCURRENCY: usize = 16;

/// Who makes a request to `/api/v1`: the operator (the API token, a peer replica, or
/// anyone on an open loopback API) or a user the cluster authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Operator,
    User(Arc<User>),
}

/// A user as a TokenReview names them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a request does to an App, and the RBAC verb it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    List,
    Patch,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Patch => "patch",
        }
    }
}

/// Why a review could not be made (retryable: the API server may answer later).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReviewError {
    #[error("the cluster's {kind} failed: {message}")]
    Api { kind: &'static str, message: String },
    #[error("the cluster's {0} did not answer within {REVIEW_TIMEOUT:?}")]
    Timeout(&'static str),
}

/// Where an app is authorized: its App object's namespace and name, or for an app of
/// the configuration file (a DNS label, no dot) `file_namespace` and its own name.
pub fn scope<'a>(app: &'a str, file_namespace: &'a str) -> (&'a str, &'a str) {
    app.split_once('.').unwrap_or((file_namespace, app))
}

/// Asks the cluster who a token is and what they may do, and remembers the answers.
pub struct People {
    client: kube::Client,
    file_namespace: String,
    tokens: Expiring<[u8; 32], Option<Arc<User>>>,
    decisions: Expiring<(Arc<User>, Verb, String, String), bool>,
}

impl std::fmt::Debug for People {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("People")
            .field("file_namespace", &self.file_namespace)
            .finish_non_exhaustive()
    }
}

impl People {
    pub fn new(client: kube::Client, file_namespace: String) -> People {
        People {
            client,
            file_namespace,
            tokens: Expiring::new(TOKEN_TTL, CACHE_LIMIT),
            decisions: Expiring::new(DECISION_TTL, CACHE_LIMIT),
        }
    }

    /// The user `token` authenticates, None when the cluster says it does not. Only
    /// the token's SHA-256 is kept.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Arc<User>>, ReviewError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(known) = self.tokens.get(&key) {
            return Ok(known);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let answer = bounded("TokenReview", async {
            api.create(&kube::api::PostParams::default(), &review).await
        })
        .await?;
        let status = answer.status.unwrap_or_default();
        let user = status
            .user
            .filter(|_| status.authenticated == Some(true))
            .and_then(|user| {
                Some(Arc::new(User {
                    name: user.username.filter(|n| !n.is_empty())?,
                    uid: user.uid.unwrap_or_default(),
                    groups: user.groups.unwrap_or_default(),
                    extra: user.extra.unwrap_or_default().into_iter().collect(),
                }))
            });
        self.tokens.insert(key, user.clone());
        Ok(user)
    }

    /// Whether `user` may `verb` the app (`list`: the apps of its namespace).
    pub async fn allowed(
        &self,
        user: &Arc<User>,
        verb: Verb,
        app: &str,
    ) -> Result<bool, ReviewError> {
        let (namespace, name) = scope(app, &self.file_namespace);
        let name = if verb == Verb::List { "" } else { name };
        let key = (user.clone(), verb, namespace.to_string(), name.to_string());
        if let Some(allowed) = self.decisions.get(&key) {
            return Ok(allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(APP_GROUP.to_string()),
                    resource: Some(APP_PLURAL.to_string()),
                    verb: Some(verb.as_str().to_string()),
                    namespace: Some(namespace.to_string()),
                    name: Some(name.to_string()).filter(|n| !n.is_empty()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
        let answer = bounded("SubjectAccessReview", async {
            api.create(&kube::api::PostParams::default(), &review).await
        })
        .await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        self.decisions.insert(key, allowed);
        Ok(allowed)
    }

    /// Of `apps`, those `user` may see: every app of a namespace where they may list
    /// Apps (one review per namespace), else each app they may get. An app whose
    /// review failed is left out (and logged).
    pub async fn visible(&self, user: &Arc<User>, apps: Vec<String>) -> HashSet<String> {
        // Any app of a namespace stands for it in its `list` review.
        let mut namespaces: BTreeMap<String, String> = BTreeMap::new();
        for app in &apps {
            let namespace = scope(app, &self.file_namespace).0;
            if !namespaces.contains_key(namespace) {
                namespaces.insert(namespace.to_string(), app.clone());
            }
        }
        let listable: HashSet<String> = self
            .granted(user, Verb::List, namespaces)
            .await
            .into_iter()
            .collect();
        let (mut shown, mut others) = (HashSet::new(), Vec::new());
        for app in apps {
            if listable.contains(scope(&app, &self.file_namespace).0) {
                shown.insert(app);
            } else {
                others.push((app.clone(), app));
            }
        }
        shown.extend(self.granted(user, Verb::Get, others).await);
        shown
    }

    /// The keys of `asks` (a key, and the app to review for it) whose app `user` may
    /// `verb`, [`REVIEW_CONCURRENCY`] reviews at a time. A failed review counts as
    /// no (and is logged).
    async fn granted(
        &self,
        user: &Arc<User>,
        verb: Verb,
        asks: impl IntoIterator<Item = (String, String)>,
    ) -> Vec<String> {
        futures::stream::iter(asks)
            .map(|(key, app)| async move {
                match self.allowed(user, verb, &app).await {
                    Ok(allowed) => allowed.then_some(key),
                    Err(err) => {
                        let verb = verb.as_str();
                        tracing::warn!(user = %user.name, app, verb, error = %err, "cannot authorize");
                        None
                    }
                }
            })
            .buffer_unordered(REVIEW_CONCURRENCY)
            .filter_map(std::future::ready)
            .collect()
            .await
    }

    /// Why `user` may not `action` the app (an API path's last word: sync, suspend…),
    /// or None when they may. A refused change says whether they may view it.
    pub async fn refusal(
        &self,
        user: &Arc<User>,
        action: Action,
        app: &str,
    ) -> Result<Option<String>, ReviewError> {
        let (namespace, _) = scope(app, &self.file_namespace);
        if !self.allowed(user, Verb::Get, app).await? {
            return Ok(Some(format!(
                "{} may not view app {app:?}: needs get on {APP_PLURAL}.{APP_GROUP} in {namespace}",
                user.name
            )));
        }
        let Action::Change(what) = action else {
            return Ok(None);
        };
        if self.allowed(user, Verb::Patch, app).await? {
            return Ok(None);
        }
        Ok(Some(format!(
            "{} may view app {app:?} but not {what} it: needs patch on {APP_PLURAL}.{APP_GROUP} in {namespace}",
            user.name
        )))
    }
}

/// Leaves in a list answer (`{"apps": [...]}`, each an object with a `name` or, in
/// the summary view, a row whose first cell is the name) only the apps `user` may see.
pub async fn retain_visible(people: &People, user: &Arc<User>, answer: &mut serde_json::Value) {
    let Some(apps) = answer
        .get_mut("apps")
        .and_then(serde_json::Value::as_array_mut)
    else {
        return;
    };
    let name = |app: &serde_json::Value| {
        app.get("name")
            .or_else(|| app.get(0))
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let names = apps.iter().filter_map(name).collect();
    let visible = people.visible(user, names).await;
    apps.retain(|app| name(app).is_some_and(|n| visible.contains(&n)));
}

/// A review, bounded by [`REVIEW_TIMEOUT`].
async fn bounded<T>(
    kind: &'static str,
    review: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ReviewError> {
    match tokio::time::timeout(REVIEW_TIMEOUT, review).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(err)) => Err(ReviewError::Api {
            kind,
            message: err.to_string(),
        }),
        Err(_) => Err(ReviewError::Timeout(kind)),
    }
}

/// What a request to one app's path does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    View,
    /// The word users know it by: sync, suspend, resume, roll back, unpin.
    Change(&'static str),
}

/// The app a request to `/api/v1/apps/{name}[/…]` touches and what it does to it;
/// None for the list and the event stream (filtered by their handlers).
pub fn requirement<'p>(method: &Method, path: &'p str) -> Option<(&'p str, Action)> {
    let rest = path.strip_prefix("/api/v1/apps/")?;
    let (app, sub) = rest.split_once('/').unwrap_or((rest, ""));
    let action = match (method, sub) {
        (&Method::POST, "sync") => Action::Change("sync"),
        (&Method::POST, "suspend") => Action::Change("suspend"),
        (&Method::POST, "resume") => Action::Change("resume"),
        (&Method::POST, "rollback") => Action::Change("roll back"),
        (&Method::POST, "unpin") => Action::Change("unpin"),
        (_, "" | "tree") => Action::View,
        // Unknown paths are the router's 404 or 405; checked as changes, the strictest.
        _ => Action::Change("change"),
    };
    Some((app, action))
}

/// The authorization of one app's path, for a user (the operator passes), and the
/// trail of an action taken. Runs after [`super::guard::guard`] (which names the
/// caller) and before a peer forward, so a change is authorized and recorded where it
/// is asked for (a peer's forwarded call was recorded by the replica it came from).
pub async fn authorize(
    State((people, statuses)): State<(Option<Arc<People>>, Statuses)>,
    request: Request,
    next: Next,
) -> Response {
    let Some((app, action)) = requirement(request.method(), request.uri().path())
        .map(|(app, action)| (app.to_string(), action))
    else {
        return next.run(request).await;
    };
    let caller = request
        .extensions()
        .get::<Caller>()
        .cloned()
        .unwrap_or(Caller::Operator);
    if let (Some(people), Caller::User(user)) = (&people, &caller) {
        match people.refusal(user, action, &app).await {
            Ok(None) => {}
            Ok(Some(refusal)) => {
                tracing::info!(user = %user.name, app, error = %refusal, "refused a request");
                let body = axum::Json(json!({ "error": refusal }));
                return (StatusCode::FORBIDDEN, body).into_response();
            }
            Err(err) => return unavailable(&err),
        }
    }
    let from_peer = request
        .extensions()
        .get::<super::peer_auth::FromPeer>()
        .is_some();
    let response = next.run(request).await;
    if let Action::Change(what) = action
        && response.status().is_success()
        && !from_peer
    {
        audit::record(people.as_deref(), &statuses, &caller, &app, what);
    }
    response
}

/// A review that failed: 503, as the API server could not be asked.
pub fn unavailable(err: &ReviewError) -> Response {
    tracing::warn!(error = %err, "cannot review a request");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({ "error": format!("cannot check the request's permissions: {err}") })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_objects_are_authorized_in_their_namespace_and_file_apps_in_the_configured_one() {
        assert_eq!(scope("team-a.web", "tether"), ("team-a", "web"));
        assert_eq!(scope("team-a.web.v2", "tether"), ("team-a", "web.v2"));
        assert_eq!(scope("guestbook", "tether"), ("tether", "guestbook"));
    }

    #[test]
    fn each_app_path_needs_view_or_change() {
        let post = Method::POST;
        let get = Method::GET;
        assert_eq!(
            requirement(&get, "/api/v1/apps/team-a.web"),
            Some(("team-a.web", Action::View))
        );
        assert_eq!(
            requirement(&get, "/api/v1/apps/web/tree"),
            Some(("web", Action::View))
        );
        for what in ["sync", "suspend", "resume", "unpin"] {
            let path = format!("/api/v1/apps/web/{what}");
            assert_eq!(
                requirement(&post, &path).map(|(_, a)| a),
                Some(Action::Change(what))
            );
        }
        assert_eq!(
            requirement(&post, "/api/v1/apps/web/rollback").map(|(_, a)| a),
            Some(Action::Change("roll back"))
        );
        assert_eq!(
            requirement(&post, "/api/v1/apps/web/delete"),
            Some(("web", Action::Change("change")))
        );
        assert_eq!(requirement(&get, "/api/v1/apps"), None);
        assert_eq!(requirement(&get, "/api/v1/events"), None);
    }
}
