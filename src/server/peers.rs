//! Status from any replica (`shards: N`): each replica reconciles only the apps of the
//! shards it holds, so for the others it asks their holder, at the URL the holder
//! published on its member Lease (`reconcile::shard`), and answers with what the holder
//! says. Every app carries `shard` and `owner` (the holder's identity). A peer that does
//! not answer within [`FORWARD_TIMEOUT`] leaves its apps `Unknown`, with a `message`
//! naming it. A forwarded request is marked, and answered from the peer's own state
//! only, so two replicas with different views never bounce a request between them.
//! Actions on one app (`sync`, `suspend`, `resume`) go to its holder the same way: only
//! its worker acts (a 502 naming the holder when it cannot be reached).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Control;
use crate::reconcile::shard::Owner;

/// Marks a request one replica forwards to another.
pub const FORWARDED_HEADER: &str = "x-tether-forwarded";

/// How long a replica waits for a peer's answer: a status page must stay quick even
/// while a replica is dying (its shards move within a lease duration anyway).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a peer's answer is missing.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("no replica holds shard {0} now")]
    Unheld(u32),
    #[error("{0} published no status URL")]
    NoUrl(String),
    #[error("cannot make an HTTP client: {0}")]
    Client(String),
    #[error("{url}: {source}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered {code}")]
    Status { url: String, code: u16 },
}

fn client() -> Result<&'static reqwest::Client, ForwardError> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let built = reqwest::Client::builder()
        .timeout(FORWARD_TIMEOUT)
        .build()
        .map_err(|e| ForwardError::Client(e.to_string()))?;
    Ok(CLIENT.get_or_init(|| built))
}

/// Whether a request came from a peer.
pub fn is_forwarded(headers: &HeaderMap) -> bool {
    headers.contains_key(FORWARDED_HEADER)
}

/// Where `owner` answers `path`.
fn url_of(owner: &Owner, path: &str) -> Result<String, ForwardError> {
    let holder = owner
        .holder
        .as_ref()
        .ok_or(ForwardError::Unheld(owner.shard))?;
    let base = owner
        .url
        .as_ref()
        .ok_or_else(|| ForwardError::NoUrl(holder.clone()))?;
    Ok(format!("{base}{path}"))
}

/// Asks `owner` for `path` (`/api/v1/apps...`), with the caller's credentials.
pub(super) async fn ask(
    owner: &Owner,
    path: &str,
    auth: Option<&HeaderValue>,
) -> Result<Value, ForwardError> {
    let url = url_of(owner, path)?;
    let mut request = client()?.get(&url).header(FORWARDED_HEADER, "1");
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth.clone());
    }
    let failed = |source| ForwardError::Request {
        url: url.clone(),
        source,
    };
    let response = request.send().await.map_err(failed)?;
    let code = response.status();
    if !code.is_success() {
        return Err(ForwardError::Status {
            url: url.clone(),
            code: code.as_u16(),
        });
    }
    response.json::<Value>().await.map_err(failed)
}

/// Marks `app` with who answers for it.
fn mark(app: &mut Value, owner: &Owner) {
    if let Some(object) = app.as_object_mut() {
        object.insert("shard".into(), Value::from(owner.shard));
        object.insert(
            "owner".into(),
            owner.holder.clone().map_or(Value::Null, Value::from),
        );
    }
}

/// This replica's own entry for an app it could not get from its owner: Unknown, and
/// why, naming the owner.
fn unreachable(app: &mut Value, owner: &Owner, err: &ForwardError) {
    mark(app, owner);
    if let Some(object) = app.as_object_mut() {
        let holder = owner.holder.as_deref().unwrap_or("no replica");
        object.insert("sync".into(), Value::from("Unknown"));
        object.insert(
            "message".into(),
            Value::from(format!(
                "shard {} is held by {holder}, whose status could not be read: {err}",
                owner.shard
            )),
        );
    }
}

/// The full list of apps: ours as they are, the others' as their owners say.
pub async fn complete_list(
    mut apps: Vec<Value>,
    control: &dyn Control,
    headers: &HeaderMap,
) -> Vec<Value> {
    let forwarded = is_forwarded(headers);
    let auth = headers.get(header::AUTHORIZATION);
    // Owners by index, grouped by holder: one request per peer.
    let mut remote: BTreeMap<Option<String>, Vec<(usize, Owner)>> = BTreeMap::new();
    for (index, app) in apps.iter_mut().enumerate() {
        let name = app.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(owner) = control.owner(name) else {
            continue;
        };
        mark(app, &owner);
        if !owner.local && !forwarded {
            remote
                .entry(owner.holder.clone())
                .or_default()
                .push((index, owner));
        }
    }
    let asked = remote.into_values().map(|group| async move {
        let answer = ask(&group[0].1, "/api/v1/apps", auth).await;
        (group, answer)
    });
    for (group, answer) in futures::future::join_all(asked).await {
        let theirs: BTreeMap<String, Value> = match &answer {
            Ok(body) => body
                .get("apps")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|a| Some((a.get("name")?.as_str()?.to_string(), a.clone())))
                .collect(),
            Err(_) => BTreeMap::new(),
        };
        for (index, owner) in group {
            let app = &mut apps[index];
            let name = app.get("name").and_then(Value::as_str).unwrap_or_default();
            match (theirs.get(name), &answer) {
                (Some(their), _) => {
                    *app = their.clone();
                    mark(app, &owner);
                }
                (None, Err(err)) => unreachable(app, &owner, err),
                (None, Ok(_)) => {
                    // The owner does not know it (yet): a reload or App on its way.
                    let err = ForwardError::Status {
                        url: owner.url.clone().unwrap_or_default(),
                        code: 404,
                    };
                    unreachable(app, &owner, &err);
                }
            }
        }
    }
    apps
}

/// One app: ours as it is, another replica's as its owner says.
pub async fn complete_one(mut app: Value, control: &dyn Control, headers: &HeaderMap) -> Value {
    let name = app
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(owner) = control.owner(&name) else {
        return app;
    };
    if owner.local || is_forwarded(headers) {
        mark(&mut app, &owner);
        return app;
    }
    let path = format!("/api/v1/apps/{name}");
    match ask(&owner, &path, headers.get(header::AUTHORIZATION)).await {
        Ok(mut their) => {
            mark(&mut their, &owner);
            their
        }
        Err(err) => {
            unreachable(&mut app, &owner, &err);
            app
        }
    }
}

/// The app an action path names: `/api/v1/apps/{name}/{sync|suspend|resume}`.
fn action_target(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/v1/apps/")?;
    let (name, action) = rest.split_once('/')?;
    matches!(action, "sync" | "suspend" | "resume").then_some(name)
}

/// Sends an action on another replica's app to its holder, and its answer back; every
/// other request goes on here.
pub async fn forward_actions(
    State(control): State<Arc<dyn Control>>,
    request: Request,
    next: Next,
) -> Response {
    let target = (request.method() == Method::POST && !is_forwarded(request.headers()))
        .then(|| action_target(request.uri().path()))
        .flatten()
        .and_then(|name| control.owner(name))
        .filter(|owner| !owner.local);
    let Some(owner) = target else {
        return next.run(request).await;
    };
    let path = request.uri().path().to_string();
    let auth = request.headers().get(header::AUTHORIZATION).cloned();
    match post(&owner, &path, auth.as_ref()).await {
        Ok((code, body)) => {
            let code = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
            (code, axum::Json(body)).into_response()
        }
        Err(err) => {
            let holder = owner.holder.as_deref().unwrap_or("no replica");
            let error = format!(
                "shard {} is held by {holder}, which did not take the request: {err}",
                owner.shard
            );
            (
                StatusCode::BAD_GATEWAY,
                axum::Json(json!({ "error": error })),
            )
                .into_response()
        }
    }
}

/// Posts an action to `owner`: its status code and JSON answer.
async fn post(
    owner: &Owner,
    path: &str,
    auth: Option<&HeaderValue>,
) -> Result<(u16, Value), ForwardError> {
    let url = url_of(owner, path)?;
    let mut request = client()?.post(&url).header(FORWARDED_HEADER, "1");
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth.clone());
    }
    let failed = |source| ForwardError::Request {
        url: url.clone(),
        source,
    };
    let response = request.send().await.map_err(failed)?;
    let code = response.status().as_u16();
    let body = response.json::<Value>().await.map_err(failed)?;
    Ok((code, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(holder: Option<&str>, url: Option<&str>) -> Owner {
        Owner {
            shard: 2,
            holder: holder.map(str::to_string),
            url: url.map(str::to_string),
            local: false,
        }
    }

    #[test]
    fn only_actions_on_one_app_are_forwarded() {
        assert_eq!(action_target("/api/v1/apps/web/sync"), Some("web"));
        assert_eq!(
            action_target("/api/v1/apps/team.web/suspend"),
            Some("team.web")
        );
        assert_eq!(action_target("/api/v1/apps/web/resume"), Some("web"));
        assert_eq!(action_target("/api/v1/apps/web"), None);
        assert_eq!(action_target("/api/v1/apps/web/delete"), None);
        assert_eq!(action_target("/api/v1/events"), None);
    }

    #[test]
    fn an_app_whose_owner_cannot_be_asked_is_unknown_and_names_it() {
        let silent = owner(Some("tether-1_ab"), None);
        let mut app = json!({"name": "web", "sync": "Synced"});
        let err = url_of(&silent, "/api/v1/apps").expect_err("no URL");
        unreachable(&mut app, &silent, &err);
        assert_eq!(app["sync"], "Unknown");
        assert_eq!(app["shard"], 2);
        assert_eq!(app["owner"], "tether-1_ab");
        assert_eq!(
            app["message"],
            "shard 2 is held by tether-1_ab, whose status could not be read: \
             tether-1_ab published no status URL"
        );
        let nobody = owner(None, None);
        let mut app = json!({"name": "web"});
        let err = url_of(&nobody, "/api/v1/apps").expect_err("no holder");
        unreachable(&mut app, &nobody, &err);
        assert_eq!(app["owner"], Value::Null);
        assert_eq!(
            app["message"],
            "shard 2 is held by no replica, whose status could not be read: \
             no replica holds shard 2 now"
        );
    }

    #[test]
    fn a_peer_is_asked_at_its_published_url() {
        let peer = owner(Some("b"), Some("http://10.0.0.7:8080"));
        let url = url_of(&peer, "/api/v1/apps/x");
        assert_eq!(
            url.ok().as_deref(),
            Some("http://10.0.0.7:8080/api/v1/apps/x")
        );
    }
}
