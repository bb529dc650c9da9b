//! Status from any replica (`shards: N`): each replica reconciles only the apps of the
//! shards it holds, so for the others it asks their holder, at the URL the holder
//! published on its member Lease (`reconcile::shard`), and answers with what the holder
//! says. Every app carries `shard` and `owner` (the holder's identity). A peer that does
//! not answer within [`FORWARD_TIMEOUT`] leaves its apps `Unknown`, with a `message`
//! naming it. A forwarded request is marked, and answered from the peer's own state
//! only, so two replicas with different views never bounce a request between them.
//! Actions on one app (`sync`, `suspend`, `resume`) go to its holder the same way: only
//! its worker acts (a 502 naming the holder when it cannot be reached).
//!
//! A peer is called as a peer, never with the caller's credentials: each call is signed
//! with the replicas' shared key and its answer believed only with the peer's proof
//! ([`super::peer_auth`]); answers are read up to [`MAX_PEER_BODY`].

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Control;
use super::dashboard::SUMMARY_COLUMNS;
use super::peer_auth::{FORWARDED_HEADER, PEER_HEADER, PeerAuthError, PeerKey};
use crate::reconcile::shard::Owner;
use tether_core::report::status::Statuses;
use tether_core::source::DEFAULT_WEBHOOK_BODY_LIMIT;

/// How long a replica waits for a peer's answer: a status page must stay quick even
/// while a replica is dying (its shards move within a lease duration anyway).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest answer read from a peer: the full list of 5,000 apps is a few MB of
/// JSON; a peer answering more is not one (or is broken), and is not held in memory.
pub const MAX_PEER_BODY: usize = 32 * 1024 * 1024;

/// Why a peer's answer is missing.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("{url}: {source}")]
    NotAPeer {
        url: String,
        #[source]
        source: PeerAuthError,
    },
    #[error("{url} answered more than {MAX_PEER_BODY} bytes")]
    TooLarge { url: String },
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

/// Calls `owner` with `method` on `path` (`/api/v1/apps...`) as a peer: its status
/// code and JSON answer, once the answer proved to come from a replica.
async fn call(
    owner: &Owner,
    method: Method,
    path: &str,
    key: Option<&PeerKey>,
) -> Result<(u16, Value), ForwardError> {
    let url = url_of(owner, path)?;
    let not_a_peer = |source| ForwardError::NotAPeer {
        url: url.clone(),
        source,
    };
    let key = key.ok_or(PeerAuthError::NoKey).map_err(not_a_peer)?;
    let signed = key.sign(&method, path);
    let request = client()?
        .request(method, &url)
        .header(FORWARDED_HEADER, "1")
        .header(PEER_HEADER, signed.header.clone());
    let failed = |source| ForwardError::Request {
        url: url.clone(),
        source,
    };
    let response = request.send().await.map_err(failed)?;
    if let Err(err) = key.check_reply(&signed, response.headers()) {
        tracing::warn!(%url, peer = ?owner.holder, error = %err, "a replica's published URL did not answer as a peer");
        return Err(not_a_peer(err));
    }
    let code = response.status().as_u16();
    let body = read_bounded(response, &url).await?;
    let body = serde_json::from_slice(&body).map_err(|_| ForwardError::Status {
        url: url.clone(),
        code,
    })?;
    Ok((code, body))
}

/// An answer's body, up to [`MAX_PEER_BODY`].
async fn read_bounded(mut response: reqwest::Response, url: &str) -> Result<Vec<u8>, ForwardError> {
    let too_large = || ForwardError::TooLarge {
        url: url.to_string(),
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_PEER_BODY as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|source| ForwardError::Request {
            url: url.to_string(),
            source,
        })?
    {
        if body.len() + chunk.len() > MAX_PEER_BODY {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Asks `owner` for `path` (`/api/v1/apps...`), as a peer.
pub(super) async fn ask(
    owner: &Owner,
    path: &str,
    key: Option<&PeerKey>,
) -> Result<Value, ForwardError> {
    let (code, body) = call(owner, Method::GET, path, key).await?;
    if !(200..300).contains(&code) {
        return Err(ForwardError::Status {
            url: owner.url.clone().unwrap_or_default(),
            code,
        });
    }
    Ok(body)
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

/// The apps (by index) another replica holds, grouped by holder, so that each peer is
/// asked once; none for a forwarded request, answered from this replica's own state.
fn remote_groups<'a>(
    names: impl Iterator<Item = (usize, &'a str)>,
    control: &dyn Control,
    headers: &HeaderMap,
) -> BTreeMap<Option<String>, Vec<(usize, Owner)>> {
    let mut remote: BTreeMap<Option<String>, Vec<(usize, Owner)>> = BTreeMap::new();
    if is_forwarded(headers) {
        return remote;
    }
    for (index, name) in names {
        if let Some(owner) = control.owner(name).filter(|o| !o.local) {
            remote
                .entry(owner.holder.clone())
                .or_default()
                .push((index, owner));
        }
    }
    remote
}

/// Asks each group's holder for `path`, all at once.
async fn ask_groups(
    groups: BTreeMap<Option<String>, Vec<(usize, Owner)>>,
    path: &str,
    key: Option<&PeerKey>,
) -> Vec<(Vec<(usize, Owner)>, Result<Value, ForwardError>)> {
    let asked = groups.into_values().map(|group| async move {
        let answer = ask(&group[0].1, path, key).await;
        (group, answer)
    });
    futures::future::join_all(asked).await
}

/// The error for an app its owner answered without: it does not know it (yet), a
/// reload or an App on its way.
fn not_known(owner: &Owner) -> ForwardError {
    ForwardError::Status {
        url: owner.url.clone().unwrap_or_default(),
        code: 404,
    }
}

/// The full list of apps: ours as they are, the others' as their owners say.
pub async fn complete_list(
    mut apps: Vec<Value>,
    control: &dyn Control,
    headers: &HeaderMap,
    key: Option<&PeerKey>,
) -> Vec<Value> {
    for app in apps.iter_mut() {
        let name = app.get("name").and_then(Value::as_str).unwrap_or_default();
        if let Some(owner) = control.owner(name) {
            mark(app, &owner);
        }
    }
    let names = apps
        .iter()
        .enumerate()
        .map(|(i, a)| (i, a.get("name").and_then(Value::as_str).unwrap_or_default()));
    let groups = remote_groups(names, control, headers);
    for (group, answer) in ask_groups(groups, "/api/v1/apps", key).await {
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
                (None, Ok(_)) => unreachable(app, &owner, &not_known(&owner)),
            }
        }
    }
    apps
}

/// Where `column` is in a row of the summary view.
fn column(column: &str) -> usize {
    SUMMARY_COLUMNS
        .iter()
        .position(|c| *c == column)
        .unwrap_or(usize::MAX)
}

/// Sets a cell of a summary row (a peer's row may be shorter: a cell it lacks stays so).
fn set(row: &mut Value, column: usize, value: Value) {
    if let Some(cell) = row.as_array_mut().and_then(|cells| cells.get_mut(column)) {
        *cell = value;
    }
}

/// The compact list (`?view=summary`, see [`super::dashboard::summary`]): our rows as
/// they are, the others' as their holders' own summaries say, their `repo` indexes
/// moved into our `repos`. A row whose holder cannot say is `Unknown`, not acting,
/// and its `reason` names the holder, as in the full list.
pub async fn complete_summary(
    mut summary: Value,
    control: &dyn Control,
    headers: &HeaderMap,
    key: Option<&PeerKey>,
) -> Value {
    let names: Vec<String> = summary["apps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| row[0].as_str().unwrap_or_default().to_string())
        .collect();
    let groups = remote_groups(
        names.iter().enumerate().map(|(i, n)| (i, n.as_str())),
        control,
        headers,
    );
    if groups.is_empty() {
        return summary;
    }
    let answers = ask_groups(groups, "/api/v1/apps?view=summary", key).await;
    let mut repos: Vec<Value> = summary["repos"].as_array().cloned().unwrap_or_default();
    let Some(rows) = summary["apps"].as_array_mut() else {
        return summary;
    };
    let (sync, repo, acting, reason) = (
        column("sync"),
        column("repo"),
        column("acting"),
        column("reason"),
    );
    for (group, answer) in answers {
        let (theirs, their_repos) = match &answer {
            Ok(body) => (
                body["apps"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| Some((r[0].as_str()?.to_string(), r.clone())))
                    .collect::<BTreeMap<String, Value>>(),
                body["repos"].as_array().cloned().unwrap_or_default(),
            ),
            Err(_) => (BTreeMap::new(), Vec::new()),
        };
        for (index, owner) in group {
            let Some(row) = rows.get_mut(index) else {
                continue;
            };
            let name = names[index].as_str();
            match (theirs.get(name), &answer) {
                (Some(their), _) => {
                    *row = their.clone();
                    let prefix = row[repo].as_u64().and_then(|i| their_repos.get(i as usize));
                    let index = match prefix {
                        Some(prefix) => match repos.iter().position(|r| r == prefix) {
                            Some(i) => Value::from(i),
                            None => {
                                repos.push(prefix.clone());
                                Value::from(repos.len() - 1)
                            }
                        },
                        None => Value::from(-1),
                    };
                    set(row, repo, index);
                }
                (None, result) => {
                    let err = match result {
                        Err(err) => err,
                        Ok(_) => &not_known(&owner),
                    };
                    let mut app = json!({});
                    unreachable(&mut app, &owner, err);
                    set(row, sync, app["sync"].take());
                    set(row, acting, Value::from(false));
                    set(row, reason, app["message"].take());
                }
            }
        }
    }
    summary["repos"] = Value::from(repos);
    summary
}

/// One app: ours as it is, another replica's as its owner says.
pub async fn complete_one(
    mut app: Value,
    control: &dyn Control,
    headers: &HeaderMap,
    key: Option<&PeerKey>,
) -> Value {
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
    match ask(&owner, &path, key).await {
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
    State((control, key)): State<(Arc<dyn Control>, Option<PeerKey>)>,
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
    match call(&owner, Method::POST, &path, key.as_ref()).await {
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

/// The other replicas holding some app now, by identity: where each answers.
pub(super) fn live_peers(control: &dyn Control, statuses: &Statuses) -> BTreeMap<String, String> {
    let mut peers = BTreeMap::new();
    for name in statuses.map_all(|s| s.name.clone()) {
        if let Some(Owner {
            holder: Some(holder),
            url: Some(url),
            local: false,
            ..
        }) = control.owner(&name)
        {
            peers.insert(holder, url);
        }
    }
    peers
}

/// A Git provider's webhook, taken here and passed on to every other replica holding
/// apps (marked as forwarded, with its headers and body as sent, so each checks the
/// signature itself): a replica fetches only the sources of the apps it holds, so the
/// one the provider reached (through a Service, any of them) would otherwise wake
/// only its own. The provider gets this replica's answer; a delivery this replica
/// refuses (signature, size, shape) goes no further.
pub async fn forward_webhooks(
    State((control, statuses, key)): State<(Arc<dyn Control>, Statuses, Option<PeerKey>)>,
    request: Request,
    next: Next,
) -> Response {
    let small = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n <= DEFAULT_WEBHOOK_BODY_LIMIT);
    // Without shards every replica fetches every source: nothing to pass on.
    let sharded = control.owner("").is_some();
    if is_forwarded(request.headers()) || !small || !sharded {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, DEFAULT_WEBHOOK_BODY_LIMIT).await else {
        let error = json!({ "error": "the body is larger than it said" });
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    let path = parts.uri.path().to_string();
    let headers = parts.headers.clone();
    let response = next
        .run(Request::from_parts(
            parts,
            axum::body::Body::from(body.clone()),
        ))
        .await;
    if response.status().is_success() {
        let peers = live_peers(control.as_ref(), &statuses);
        for (holder, url) in peers {
            let (headers, body, key) = (headers.clone(), body.clone(), key.clone());
            let path = path.clone();
            tokio::spawn(async move {
                let sent = post_webhook(&url, &path, headers, body, key.as_ref()).await;
                if let Err(err) = sent {
                    tracing::warn!(peer = %holder, error = %err, "a webhook was not passed on");
                }
            });
        }
    }
    response
}

/// Posts a webhook's delivery to a peer as the provider sent it (its signature
/// headers kept), signed as a peer's call.
async fn post_webhook(
    base: &str,
    path: &str,
    mut headers: HeaderMap,
    body: bytes::Bytes,
    key: Option<&PeerKey>,
) -> Result<(), ForwardError> {
    let url = format!("{base}{path}");
    let key = key.ok_or_else(|| ForwardError::NotAPeer {
        url: url.clone(),
        source: PeerAuthError::NoKey,
    })?;
    for hop in [
        header::HOST,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::CONNECTION,
        header::AUTHORIZATION,
    ] {
        headers.remove(hop);
    }
    let signed = key.sign(&Method::POST, path);
    let response = client()?
        .post(&url)
        .headers(headers)
        .header(FORWARDED_HEADER, "1")
        .header(PEER_HEADER, signed.header.clone())
        .body(body)
        .send()
        .await
        .map_err(|source| ForwardError::Request {
            url: url.clone(),
            source,
        })?;
    key.check_reply(&signed, response.headers())
        .map_err(|source| ForwardError::NotAPeer {
            url: url.clone(),
            source,
        })?;
    let code = response.status();
    if !code.is_success() {
        return Err(ForwardError::Status {
            url,
            code: code.as_u16(),
        });
    }
    Ok(())
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

    #[test]
    fn a_summary_row_keeps_its_length_whatever_is_set() {
        let mut row = json!(["web", "Synced"]);
        set(&mut row, 1, Value::from("Unknown"));
        set(&mut row, 11, Value::from("far"));
        assert_eq!(row, json!(["web", "Unknown"]));
        assert_eq!(column("name"), 0);
        assert_eq!(column("reason"), 11);
    }
}
