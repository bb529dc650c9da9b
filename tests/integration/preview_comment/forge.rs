//! A loopback forge that answers as each provider documents its pull-request comment
//! API: GitHub (`/repos/…/issues/{n}/comments`, `Link` pages, `PATCH
//! …/issues/comments/{id}`), Gitea (the same under `/api/v1`, one answer with every
//! comment, `token` authentication), GitLab (`…/merge_requests/{iid}/notes`,
//! `X-Next-Page`, `PUT`, `PRIVATE-TOKEN`, system notes listed too), Bitbucket Cloud
//! (`…/pullrequests/{n}/comments`, `values` and `next`, deleted comments listed) and
//! Bitbucket Data Center (`…/activities` pages with `nextPageStart`, edits that must
//! name the current `version` or get 409). Every request is recorded.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// The token the forge accepts.
pub const TOKEN: &str = "tok-9f3kq27x-secret";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Github,
    Gitea,
    Gitlab,
    BitbucketCloud,
    BitbucketServer,
}

/// One request as the forge saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Request {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// A comment on the pull request. `hidden` is a GitLab system note or a deleted
/// Bitbucket Cloud comment: listed, not a comment anyone wrote.
#[derive(Debug, Clone)]
pub struct Comment {
    pub id: u64,
    pub version: u64,
    pub body: String,
    pub hidden: bool,
}

#[derive(Debug)]
struct Inner {
    kind: Kind,
    base: String,
    requests: Vec<Request>,
    comments: Vec<Comment>,
}

type Shared = Arc<Mutex<Inner>>;

pub struct Forge {
    pub base: String,
    kind: Kind,
    inner: Shared,
}

impl Forge {
    pub async fn start(kind: Kind) -> Forge {
        crate::support::init();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let inner: Shared = Arc::new(Mutex::new(Inner {
            kind,
            base: base.clone(),
            requests: Vec::new(),
            comments: Vec::new(),
        }));
        let app = Router::new().fallback(handle).with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Forge { base, kind, inner }
    }

    /// The API URL a user names for this provider.
    pub fn api_url(&self) -> String {
        let prefix = match self.kind {
            Kind::Github => "",
            Kind::Gitea => "/api/v1",
            Kind::Gitlab => "/api/v4",
            Kind::BitbucketCloud => "/2.0",
            Kind::BitbucketServer => "/bitbucket",
        };
        format!("{}{prefix}", self.base)
    }

    /// `count` comments by other people; `hidden` of them system notes or deleted
    /// comments that quote `quoted` (which must not be taken for ours).
    pub fn seed(&self, count: u64, hidden: u64, quoted: &str) {
        let mut inner = self.inner.lock();
        for i in 0..count {
            let id = 1000 + i;
            let is_hidden = i < hidden;
            let body = if is_hidden {
                format!("{quoted} (removed)")
            } else {
                format!("review remark {i}")
            };
            inner.comments.push(Comment {
                id,
                version: 0,
                body,
                hidden: is_hidden,
            });
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        std::mem::take(&mut self.inner.lock().requests)
    }

    pub fn comments(&self) -> Vec<Comment> {
        self.inner.lock().comments.clone()
    }
}

fn authorized(kind: Kind, headers: &HeaderMap) -> bool {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match kind {
        Kind::Gitea => get("authorization") == Some(&format!("token {TOKEN}")),
        Kind::Gitlab => get("private-token") == Some(TOKEN),
        _ => get("authorization") == Some(&format!("Bearer {TOKEN}")),
    }
}

fn query_map(query: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

async fn handle(
    State(inner): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut state = inner.lock();
    let request = Request {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or("").to_string(),
        headers: headers.clone(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    state.requests.push(request.clone());
    if !authorized(state.kind, &headers) {
        let message = match state.kind {
            Kind::Github => json!({"message": "Bad credentials", "status": "401"}),
            Kind::Gitlab => json!({"message": "401 Unauthorized"}),
            _ => {
                json!({"errors": [{"message": "Authentication failed. Please check your credentials and try again."}]})
            }
        };
        return (StatusCode::UNAUTHORIZED, axum::Json(message)).into_response();
    }
    let query = query_map(&request.query);
    match state.kind {
        Kind::Github | Kind::Gitea => github(&mut state, &request, &query),
        Kind::Gitlab => gitlab(&mut state, &request, &query),
        Kind::BitbucketCloud => bitbucket_cloud(&mut state, &request, &query),
        Kind::BitbucketServer => bitbucket_server(&mut state, &request, &query),
    }
}

fn number(query: &HashMap<String, String>, key: &str, default: usize) -> usize {
    query
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Adds a comment with the next ID.
fn add(state: &mut Inner, body: &str) -> Comment {
    let id = state.comments.iter().map(|c| c.id).max().unwrap_or(0) + 1;
    let comment = Comment {
        id,
        version: 0,
        body: body.to_string(),
        hidden: false,
    };
    state.comments.push(comment.clone());
    comment
}

fn edit(state: &mut Inner, id: &str, body: &str) -> Option<Comment> {
    let comment = state
        .comments
        .iter_mut()
        .find(|c| c.id.to_string() == id && !c.hidden)?;
    comment.body = body.to_string();
    comment.version += 1;
    Some(comment.clone())
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"message": "Not Found"})),
    )
        .into_response()
}

fn github(state: &mut Inner, r: &Request, query: &HashMap<String, String>) -> Response {
    let prefix = if state.kind == Kind::Gitea {
        "/api/v1"
    } else {
        ""
    };
    let list = format!("{prefix}/repos/acme/shop/issues/7/comments");
    let one = format!("{prefix}/repos/acme/shop/issues/comments/");
    let json = |c: &Comment| json!({"id": c.id, "body": c.body, "user": {"login": "tether-bot"}});
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", p) if p == list => {
            let all: Vec<Value> = state.comments.iter().map(json).collect();
            if state.kind == Kind::Gitea {
                return axum::Json(all).into_response();
            }
            let per_page = number(query, "per_page", 30).min(100);
            let page = number(query, "page", 1);
            let items: Vec<Value> = all
                .iter()
                .skip((page - 1) * per_page)
                .take(per_page)
                .cloned()
                .collect();
            let mut response = axum::Json(items).into_response();
            if page * per_page < all.len() {
                let link = format!(
                    "<{}{list}?per_page={per_page}&page={}>; rel=\"next\", <{}{list}?per_page={per_page}&page={}>; rel=\"last\"",
                    state.base,
                    page + 1,
                    state.base,
                    all.len().div_ceil(per_page)
                );
                response
                    .headers_mut()
                    .insert("link", link.parse().expect("header"));
            }
            response
        }
        ("POST", p) if p == list => {
            let Some(body) = r.body["body"].as_str() else {
                return (StatusCode::UNPROCESSABLE_ENTITY, "body is missing").into_response();
            };
            let c = add(state, body);
            (StatusCode::CREATED, axum::Json(json(&c))).into_response()
        }
        ("PATCH", p) if p.starts_with(&one) => {
            let body = r.body["body"].as_str().unwrap_or_default().to_string();
            match edit(state, &p[one.len()..], &body) {
                Some(c) => axum::Json(json(&c)).into_response(),
                None => not_found(),
            }
        }
        _ => not_found(),
    }
}

fn gitlab(state: &mut Inner, r: &Request, query: &HashMap<String, String>) -> Response {
    let list = "/api/v4/projects/acme%2Fshop/merge_requests/7/notes";
    let json =
        |c: &Comment| json!({"id": c.id, "body": c.body, "system": c.hidden, "noteable_iid": 7});
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", p) if p == list => {
            let per_page = number(query, "per_page", 20).min(100);
            let page = number(query, "page", 1);
            let items: Vec<Value> = state
                .comments
                .iter()
                .skip((page - 1) * per_page)
                .take(per_page)
                .map(json)
                .collect();
            let next = if page * per_page < state.comments.len() {
                (page + 1).to_string()
            } else {
                String::new()
            };
            let mut response = axum::Json(items).into_response();
            let headers = response.headers_mut();
            headers.insert("x-next-page", next.parse().expect("header"));
            headers.insert("x-page", page.to_string().parse().expect("header"));
            response
        }
        ("POST", p) if p == list => {
            let c = add(state, r.body["body"].as_str().unwrap_or_default());
            (StatusCode::CREATED, axum::Json(json(&c))).into_response()
        }
        ("PUT", p) if p.starts_with(&format!("{list}/")) => {
            let body = r.body["body"].as_str().unwrap_or_default().to_string();
            match edit(state, &p[list.len() + 1..], &body) {
                Some(c) => axum::Json(json(&c)).into_response(),
                None => not_found(),
            }
        }
        _ => not_found(),
    }
}

fn bitbucket_cloud(state: &mut Inner, r: &Request, query: &HashMap<String, String>) -> Response {
    let list = "/2.0/repositories/acme/shop/pullrequests/7/comments";
    let json = |c: &Comment| {
        json!({"id": c.id, "type": "pullrequest_comment", "deleted": c.hidden,
               "content": {"raw": c.body, "markup": "markdown"}})
    };
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", p) if p == list => {
            let pagelen = number(query, "pagelen", 10).min(100);
            let page = number(query, "page", 1);
            let values: Vec<Value> = state
                .comments
                .iter()
                .skip((page - 1) * pagelen)
                .take(pagelen)
                .map(json)
                .collect();
            let mut answer = json!({"pagelen": pagelen, "page": page, "size": state.comments.len(), "values": values});
            if page * pagelen < state.comments.len() {
                answer["next"] =
                    format!("{}{list}?pagelen={pagelen}&page={}", state.base, page + 1).into();
            }
            axum::Json(answer).into_response()
        }
        ("POST", p) if p == list => {
            let c = add(state, r.body["content"]["raw"].as_str().unwrap_or_default());
            (StatusCode::CREATED, axum::Json(json(&c))).into_response()
        }
        ("PUT", p) if p.starts_with(&format!("{list}/")) => {
            let body = r.body["content"]["raw"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match edit(state, &p[list.len() + 1..], &body) {
                Some(c) => axum::Json(json(&c)).into_response(),
                None => not_found(),
            }
        }
        _ => not_found(),
    }
}

fn bitbucket_server(state: &mut Inner, r: &Request, query: &HashMap<String, String>) -> Response {
    let pr = "/bitbucket/rest/api/latest/projects/ACME/repos/shop/pull-requests/7";
    let comments = format!("{pr}/comments");
    let json = |c: &Comment| json!({"id": c.id, "version": c.version, "text": c.body});
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", p) if p == format!("{pr}/activities") => {
            // Newest first, an approval among the comments.
            let mut activities: Vec<Value> = state
                .comments
                .iter()
                .filter(|c| !c.hidden)
                .map(|c| json!({"id": c.id * 10, "action": "COMMENTED", "commentAction": "ADDED", "comment": json(c)}))
                .collect();
            activities.push(json!({"id": 1, "action": "APPROVED"}));
            activities.reverse();
            let limit = number(query, "limit", 25);
            let start = number(query, "start", 0);
            let values: Vec<Value> = activities.iter().skip(start).take(limit).cloned().collect();
            let last = start + values.len() >= activities.len();
            let mut answer = json!({"size": values.len(), "limit": limit, "start": start, "isLastPage": last, "values": values});
            if !last {
                answer["nextPageStart"] = (start + limit).into();
            }
            axum::Json(answer).into_response()
        }
        ("POST", p) if p == comments => {
            let c = add(state, r.body["text"].as_str().unwrap_or_default());
            (StatusCode::CREATED, axum::Json(json(&c))).into_response()
        }
        ("PUT", p) if p.starts_with(&format!("{comments}/")) => {
            let id = &p[comments.len() + 1..];
            let current = state
                .comments
                .iter()
                .find(|c| c.id.to_string() == id)
                .map(|c| c.version);
            match current {
                None => not_found(),
                Some(v) if r.body["version"].as_u64() != Some(v) => {
                    let message = format!(
                        "You are attempting to modify a comment based on out-of-date information (version {v} is current)."
                    );
                    (
                        StatusCode::CONFLICT,
                        axum::Json(json!({"errors": [{"message": message}]})),
                    )
                        .into_response()
                }
                Some(_) => {
                    let body = r.body["text"].as_str().unwrap_or_default().to_string();
                    match edit(state, id, &body) {
                        Some(c) => axum::Json(json(&c)).into_response(),
                        None => not_found(),
                    }
                }
            }
        }
        _ => not_found(),
    }
}
