//! Webhook receivers: a Git provider says a branch moved, and the sources following it
//! sync now instead of at their next poll.
//!
//! Every delivery is checked in the same order: size (413), signature (401), body
//! shape (400), then what it means (202 when it wakes a source, 200 with a reason when
//! it does not). Signatures are compared in constant time, and a provider without a
//! configured secret is refused unless unsigned deliveries were explicitly allowed.
//! An answer says how many sources woke and which refs moved, never which sources:
//! their URLs are configuration the sender has no business reading.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{Provider, PushedRef, PushedRepo, Triggers};

mod azure;

pub use azure::AZURE_DEVOPS_SECRET_HEADER;

/// Largest webhook body accepted. GitHub caps payloads at 25 MB but a push of a handful
/// of commits is a few KiB; GitLab's default is similar. 1 MiB refuses junk early while
/// leaving room for pushes of many commits.
pub const DEFAULT_WEBHOOK_BODY_LIMIT: usize = 1024 * 1024;

/// A webhook secret. Its `Debug` never shows the value.
#[derive(Clone)]
pub struct WebhookSecret(Vec<u8>);

impl WebhookSecret {
    /// A secret from its bytes (read from an environment variable or file by the caller).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        WebhookSecret(bytes.into())
    }

    /// Whether `given` (a token or password as sent) is this secret. Digests are
    /// compared, so the comparison takes the same time whatever the lengths.
    fn matches(&self, given: &[u8]) -> bool {
        let a = Sha256::digest(given);
        let b = Sha256::digest(&self.0);
        bool::from(a.ct_eq(&b))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

/// How the receivers check deliveries.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// One secret per provider.
    pub secrets: HashMap<Provider, WebhookSecret>,
    /// Accept unsigned deliveries for providers without a secret. Off by default: anyone
    /// who can reach the endpoint could otherwise make tether fetch at will.
    pub allow_unsigned: bool,
    /// Largest body accepted (413 above).
    pub body_limit: usize,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            secrets: HashMap::new(),
            allow_unsigned: false,
            body_limit: DEFAULT_WEBHOOK_BODY_LIMIT,
        }
    }
}

impl WebhookConfig {
    /// The same config with a secret for `provider`.
    pub fn with_secret(mut self, provider: Provider, secret: WebhookSecret) -> Self {
        self.secrets.insert(provider, secret);
        self
    }
}

/// What the receivers need: the config and the sources they can wake.
#[derive(Debug, Clone)]
pub struct WebhookState {
    config: Arc<WebhookConfig>,
    triggers: Triggers,
}

impl WebhookState {
    /// Receivers checking with `config` and waking `triggers`.
    pub fn new(config: WebhookConfig, triggers: Triggers) -> Self {
        WebhookState {
            config: Arc::new(config),
            triggers,
        }
    }
}

/// `POST /webhooks/{github,gitlab,gitea,gogs,bitbucket,azuredevops,generic}`.
/// Bitbucket Cloud and Bitbucket Server / Data Center share `/webhooks/bitbucket`.
pub fn webhook_router(state: WebhookState) -> Router {
    ENDPOINTS
        .iter()
        .fold(Router::new(), |router, &(name, provider)| {
            router.route(&format!("/webhooks/{name}"), endpoint(provider, name))
        })
        .with_state(state)
}

/// Each endpoint's name (in its path, logs and metrics) and the payloads it reads;
/// Gogs sends Gitea's.
const ENDPOINTS: [(&str, Provider); 7] = [
    ("github", Provider::Github),
    ("gitlab", Provider::Gitlab),
    ("gitea", Provider::Gitea),
    ("gogs", Provider::Gitea),
    ("bitbucket", Provider::Bitbucket),
    ("azuredevops", Provider::AzureDevops),
    ("generic", Provider::Generic),
];

/// The handler of one endpoint.
fn endpoint(provider: Provider, name: &'static str) -> MethodRouter<WebhookState> {
    post(
        move |State(s): State<WebhookState>, h: HeaderMap, b: Body| async move {
            receive(&s, provider, name, &h, b).await
        },
    )
}

/// Why a delivery was refused.
#[derive(Debug)]
enum Rejection {
    TooLarge,
    Unauthorized(&'static str),
    BadPayload(String),
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let (code, msg) = match self {
            Rejection::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "body too large".to_string()),
            Rejection::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m.to_string()),
            Rejection::BadPayload(m) => (StatusCode::BAD_REQUEST, m),
        };
        (code, axum::Json(json!({ "error": msg }))).into_response()
    }
}

/// What a verified delivery means.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    /// A branch or tag moved in a repository named any of these ways.
    Push {
        repos: Vec<PushedRepo>,
        pushed: Vec<PushedRef>,
    },
    /// Nothing to fetch, and why.
    Ignored(String),
}

/// One delivery to the endpoint `label` (`gogs` is checked as [`Provider::Gitea`]).
async fn receive(
    state: &WebhookState,
    provider: Provider,
    label: &'static str,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let metrics = &crate::metrics::METRICS;
    match verify_and_parse(state, provider, headers, body).await {
        Err(rejection) => {
            tracing::info!(provider = label, ?rejection, "webhook refused");
            let outcome = match rejection {
                Rejection::TooLarge => "too_large",
                Rejection::Unauthorized(_) => "unauthorized",
                Rejection::BadPayload(_) => "bad_payload",
            };
            metrics.webhook(label, outcome);
            rejection.into_response()
        }
        Ok(Event::Ignored(reason)) => {
            metrics.webhook(label, "ignored");
            (
                StatusCode::OK,
                axum::Json(json!({ "status": "ignored", "reason": reason })),
            )
                .into_response()
        }
        Ok(Event::Push { repos, pushed }) => {
            let mut matched = Vec::new();
            let mut refs = Vec::new();
            for p in &pushed {
                let fired = state.triggers.push_to(&repos, p);
                if !fired.is_empty() {
                    refs.push(p.full_name());
                }
                for source in fired {
                    if !matched.contains(&source) {
                        matched.push(source);
                    }
                }
            }
            if matched.is_empty() {
                metrics.webhook(label, "unmatched");
                let reason = "push matches no source (repository or ref not followed)";
                return (
                    StatusCode::OK,
                    axum::Json(json!({ "status": "ignored", "reason": reason })),
                )
                    .into_response();
            }
            // The log may name the sources (redacted): it is ours, the answer is not.
            let names: Vec<String> = matched.iter().map(ToString::to_string).collect();
            tracing::info!(provider = label, sources = ?names, "webhook woke sources");
            metrics.webhook(label, "accepted");
            (
                StatusCode::ACCEPTED,
                axum::Json(json!({
                    "status": "accepted",
                    "matched": matched.len(),
                    "refs": refs,
                })),
            )
                .into_response()
        }
    }
}

async fn verify_and_parse(
    state: &WebhookState,
    provider: Provider,
    headers: &HeaderMap,
    body: Body,
) -> Result<Event, Rejection> {
    let limit = state.config.body_limit;
    let declared = header(headers, "content-length").and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(Rejection::TooLarge);
    }
    let body = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| Rejection::TooLarge)?;
    verify(state, provider, headers, &body)?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Rejection::BadPayload(format!("body is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(Rejection::BadPayload("body is not a JSON object".into()));
    }
    match provider {
        Provider::Github => github_event(headers, &value),
        Provider::Gitlab => gitlab_event(headers, &value),
        Provider::Gitea => gitea_event(headers, &value),
        Provider::Bitbucket | Provider::BitbucketServer => bitbucket_event(headers, &value),
        Provider::AzureDevops => azure::event(&value),
        Provider::Generic => generic_event(&value),
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn verify(
    state: &WebhookState,
    provider: Provider,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), Rejection> {
    let Some(secret) = state.config.secrets.get(&provider) else {
        if state.config.allow_unsigned {
            return Ok(());
        }
        return Err(Rejection::Unauthorized(
            "no webhook secret configured for this provider",
        ));
    };
    let ok = match provider {
        Provider::Gitlab => {
            let token = header(headers, "x-gitlab-token")
                .ok_or(Rejection::Unauthorized("missing X-Gitlab-Token"))?;
            secret.matches(token.as_bytes())
        }
        Provider::AzureDevops => azure::authorized(secret, headers)?,
        Provider::Github => hmac_ok(secret, body, prefixed(headers, "x-hub-signature-256")?)?,
        Provider::Bitbucket | Provider::BitbucketServer => {
            hmac_ok(secret, body, prefixed(headers, "x-hub-signature")?)?
        }
        Provider::Generic => hmac_ok(secret, body, prefixed(headers, "x-signature")?)?,
        Provider::Gitea => {
            let sig = header(headers, "x-gitea-signature")
                .or_else(|| header(headers, "x-forgejo-signature"))
                .or_else(|| header(headers, "x-gogs-signature"))
                .ok_or(Rejection::Unauthorized(
                    "missing X-Gitea-Signature / X-Forgejo-Signature / X-Gogs-Signature",
                ))?;
            hmac_ok(secret, body, sig)?
        }
    };
    if ok {
        Ok(())
    } else {
        Err(Rejection::Unauthorized("signature does not match"))
    }
}

/// The hex digest of a `sha256=<hex>` header.
fn prefixed<'h>(headers: &'h HeaderMap, name: &'static str) -> Result<&'h str, Rejection> {
    let value = header(headers, name).ok_or(Rejection::Unauthorized("missing signature header"))?;
    value
        .strip_prefix("sha256=")
        .ok_or(Rejection::Unauthorized("signature is not sha256=<hex>"))
}

fn hmac_ok(secret: &WebhookSecret, body: &[u8], hex_sig: &str) -> Result<bool, Rejection> {
    let sig =
        hex::decode(hex_sig.trim()).map_err(|_| Rejection::Unauthorized("signature is not hex"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&secret.0)
        .map_err(|_| Rejection::Unauthorized("unusable secret"))?;
    mac.update(body);
    // `verify_slice` compares in constant time.
    Ok(mac.verify_slice(&sig).is_ok())
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// The refs of a push that moved several: the array at `changes`, each item naming
/// its ref at `name`. None when the payload has no such array.
fn pushed_refs(v: &Value, changes: &str, name: &str) -> Option<Vec<PushedRef>> {
    let changes = v.pointer(changes)?.as_array()?;
    let refs = changes.iter().filter_map(|c| str_at(c, name));
    Some(refs.map(PushedRef::parse).collect())
}

fn urls_at(v: &Value, pointers: &[&str]) -> Vec<PushedRepo> {
    pointers
        .iter()
        .filter_map(|p| str_at(v, p))
        .filter(|s| !s.is_empty())
        .map(|s| PushedRepo::Url(s.to_string()))
        .collect()
}

fn bad(provider: &str, what: &str) -> Rejection {
    Rejection::BadPayload(format!("not a {provider} {what} payload"))
}

const GITHUB_REPO_URLS: &[&str] = &[
    "/repository/clone_url",
    "/repository/ssh_url",
    "/repository/git_url",
    "/repository/html_url",
    "/repository/url",
];

/// GitHub: `push`, and `pull_request` closed with `merged: true` (the base branch moved).
fn github_event(headers: &HeaderMap, v: &Value) -> Result<Event, Rejection> {
    let event = header(headers, "x-github-event").unwrap_or("");
    github_like(event, v, "GitHub")
}

/// Gitea, Forgejo and Gogs send GitHub-shaped payloads (`push`, and `pull_request`
/// closed with `merged: true`).
fn gitea_event(headers: &HeaderMap, v: &Value) -> Result<Event, Rejection> {
    let event = header(headers, "x-gitea-event")
        .or_else(|| header(headers, "x-forgejo-event"))
        .or_else(|| header(headers, "x-gogs-event"))
        .or_else(|| header(headers, "x-github-event"))
        .unwrap_or("");
    github_like(event, v, "Gitea")
}

fn github_like(event: &str, v: &Value, provider: &str) -> Result<Event, Rejection> {
    match event {
        "push" => {
            let r = str_at(v, "/ref").ok_or_else(|| bad(provider, "push"))?;
            let repos = urls_at(v, GITHUB_REPO_URLS);
            if repos.is_empty() {
                return Err(bad(provider, "push"));
            }
            Ok(Event::Push {
                repos,
                pushed: vec![PushedRef::parse(r)],
            })
        }
        "pull_request" => {
            let action = str_at(v, "/action").ok_or_else(|| bad(provider, "pull_request"))?;
            let merged = v
                .pointer("/pull_request/merged")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if action != "closed" || !merged {
                return Ok(Event::Ignored(format!("pull request {action}, not merged")));
            }
            let base =
                str_at(v, "/pull_request/base/ref").ok_or_else(|| bad(provider, "pull_request"))?;
            let mut repos = urls_at(v, GITHUB_REPO_URLS);
            repos.extend(urls_at(
                v,
                &[
                    "/pull_request/base/repo/clone_url",
                    "/pull_request/base/repo/ssh_url",
                ],
            ));
            Ok(Event::Push {
                repos,
                pushed: vec![PushedRef::Branch(base.to_string())],
            })
        }
        "ping" => Ok(Event::Ignored("ping".into())),
        "" => Err(Rejection::BadPayload(format!(
            "missing {provider} event header"
        ))),
        other => Ok(Event::Ignored(format!("event {other:?} is not a push"))),
    }
}

const GITLAB_REPO_URLS: &[&str] = &[
    "/project/git_http_url",
    "/project/git_ssh_url",
    "/project/web_url",
    "/repository/git_http_url",
    "/repository/git_ssh_url",
    "/repository/homepage",
];

/// GitLab: `Push Hook`, `Tag Push Hook`, and `Merge Request Hook` with action `merge`;
/// and a `System Hook` (instance-wide, sent to an administrator's hook) whose
/// `event_name` is `push`, `tag_push`, `repository_update` or a merged `merge_request`.
fn gitlab_event(headers: &HeaderMap, v: &Value) -> Result<Event, Rejection> {
    let header_event = header(headers, "x-gitlab-event");
    // A system hook says what happened in the body only; its project payloads have
    // the shape of the project hook's, so the same arms read them.
    let event = match header_event {
        Some("System Hook") => str_at(v, "/event_name")
            .or_else(|| str_at(v, "/object_kind"))
            .ok_or_else(|| bad("GitLab", "system hook (no event_name)"))?,
        Some(event) => event,
        None => str_at(v, "/object_kind").unwrap_or_default(),
    };
    match event {
        "Push Hook" | "Tag Push Hook" | "push" | "tag_push" => {
            let r = str_at(v, "/ref").ok_or_else(|| bad("GitLab", "push"))?;
            let repos = urls_at(v, GITLAB_REPO_URLS);
            if repos.is_empty() {
                return Err(bad("GitLab", "push"));
            }
            Ok(Event::Push {
                repos,
                pushed: vec![PushedRef::parse(r)],
            })
        }
        // A system hook's push of several refs at once (or of tags): each change
        // names its ref, the project names the repository.
        "repository_update" => {
            let pushed = pushed_refs(v, "/changes", "/ref")
                .ok_or_else(|| bad("GitLab", "repository_update"))?;
            let repos = urls_at(v, GITLAB_REPO_URLS);
            if repos.is_empty() {
                return Err(bad("GitLab", "repository_update"));
            }
            Ok(Event::Push { repos, pushed })
        }
        "Merge Request Hook" | "merge_request" => {
            let attrs = v
                .get("object_attributes")
                .ok_or_else(|| bad("GitLab", "merge request"))?;
            let action = str_at(attrs, "/action").unwrap_or("");
            if action != "merge" {
                return Ok(Event::Ignored(format!(
                    "merge request {action}, not merged"
                )));
            }
            let target =
                str_at(attrs, "/target_branch").ok_or_else(|| bad("GitLab", "merge request"))?;
            let mut repos = urls_at(v, GITLAB_REPO_URLS);
            repos.extend(urls_at(
                attrs,
                &["/target/git_http_url", "/target/git_ssh_url"],
            ));
            Ok(Event::Push {
                repos,
                pushed: vec![PushedRef::Branch(target.to_string())],
            })
        }
        "" => Err(Rejection::BadPayload(
            "missing X-Gitlab-Event header".into(),
        )),
        other => Ok(Event::Ignored(format!("event {other:?} is not a push"))),
    }
}

/// Bitbucket Cloud (`repo:push`, `pullrequest:fulfilled`) and Server / Data Center
/// (`repo:refs_changed`, `pr:merged`).
fn bitbucket_event(headers: &HeaderMap, v: &Value) -> Result<Event, Rejection> {
    let event = header(headers, "x-event-key")
        .map(str::to_string)
        .or_else(|| str_at(v, "/eventKey").map(str::to_string))
        .unwrap_or_default();
    // Cloud names the repository by its web page and `workspace/slug`.
    let mut cloud = urls_at(v, &["/repository/links/html/href"]);
    if let Some(full) = str_at(v, "/repository/full_name") {
        cloud.push(PushedRepo::Url(format!("https://bitbucket.org/{full}")));
    }
    cloud.extend(clone_hrefs(v, "/repository/links/clone"));
    match event.as_str() {
        "repo:push" => {
            let changes = v
                .pointer("/push/changes")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Bitbucket", "repo:push"))?;
            let mut pushed = Vec::new();
            for c in changes {
                // `new` is null when the ref was deleted; the old name still moved.
                let side = c
                    .get("new")
                    .filter(|n| !n.is_null())
                    .or_else(|| c.get("old"));
                let (Some(kind), Some(name)) = (
                    side.and_then(|s| str_at(s, "/type")),
                    side.and_then(|s| str_at(s, "/name")),
                ) else {
                    continue;
                };
                pushed.push(if kind == "tag" {
                    PushedRef::Tag(name.to_string())
                } else {
                    PushedRef::Branch(name.to_string())
                });
            }
            if cloud.is_empty() {
                return Err(bad("Bitbucket", "repo:push"));
            }
            Ok(Event::Push {
                repos: cloud,
                pushed,
            })
        }
        "repo:refs_changed" => {
            let changes = v
                .pointer("/changes")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Bitbucket", "repo:refs_changed"))?;
            let pushed = changes
                .iter()
                .filter_map(|c| str_at(c, "/ref/id").or_else(|| str_at(c, "/refId")))
                .map(PushedRef::parse)
                .collect();
            let repos = server_repos(v, "/repository")
                .ok_or_else(|| bad("Bitbucket", "repo:refs_changed"))?;
            Ok(Event::Push { repos, pushed })
        }
        "pullrequest:fulfilled" => {
            let branch = str_at(v, "/pullrequest/destination/branch/name")
                .ok_or_else(|| bad("Bitbucket", "pullrequest:fulfilled"))?;
            let mut repos = cloud;
            if let Some(full) = str_at(v, "/pullrequest/destination/repository/full_name") {
                repos.push(PushedRepo::Url(format!("https://bitbucket.org/{full}")));
            }
            if repos.is_empty() {
                return Err(bad("Bitbucket", "pullrequest:fulfilled"));
            }
            Ok(Event::Push {
                repos,
                pushed: vec![PushedRef::Branch(branch.to_string())],
            })
        }
        "pr:merged" => {
            let to =
                str_at(v, "/pullRequest/toRef/id").ok_or_else(|| bad("Bitbucket", "pr:merged"))?;
            let repos = server_repos(v, "/pullRequest/toRef/repository")
                .ok_or_else(|| bad("Bitbucket", "pr:merged"))?;
            Ok(Event::Push {
                repos,
                pushed: vec![PushedRef::parse(to)],
            })
        }
        "diagnostics:ping" => Ok(Event::Ignored("ping".into())),
        "" => Err(Rejection::BadPayload("missing X-Event-Key header".into())),
        other => Ok(Event::Ignored(format!("event {other:?} is not a push"))),
    }
}

/// A Bitbucket Server / Data Center repository object at `pointer`: its clone links
/// when it has them (exact host and path), else its project key and slug, which is
/// all its documented push payloads carry.
fn server_repos(v: &Value, pointer: &str) -> Option<Vec<PushedRepo>> {
    let repo = v.pointer(pointer)?;
    let links = clone_hrefs(repo, "/links/clone");
    if !links.is_empty() {
        return Some(links);
    }
    let project = str_at(repo, "/project/key")?;
    let slug = str_at(repo, "/slug")?;
    Some(vec![PushedRepo::ProjectSlug {
        project: project.to_string(),
        slug: slug.to_string(),
    }])
}

/// `{"repository": "<url>", "ref": "refs/heads/main"}`; `repository` may also be a list.
fn generic_event(v: &Value) -> Result<Event, Rejection> {
    let r = str_at(v, "/ref")
        .ok_or_else(|| bad("generic", "push (needs \"repository\" and \"ref\")"))?;
    let repos: Vec<PushedRepo> = match v.get("repository") {
        Some(Value::String(s)) => vec![PushedRepo::Url(s.clone())],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(|s| PushedRepo::Url(s.to_string()))
            .collect(),
        _ => Vec::new(),
    };
    if repos.is_empty() {
        return Err(bad("generic", "push (needs \"repository\" and \"ref\")"));
    }
    Ok(Event::Push {
        repos,
        pushed: vec![PushedRef::parse(r)],
    })
}

/// The `href`s of a Bitbucket `links.clone` array at `pointer` (https and ssh URLs).
fn clone_hrefs(v: &Value, pointer: &str) -> Vec<PushedRepo> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|clones| {
            clones
                .iter()
                .filter_map(|c| str_at(c, "/href"))
                .map(|s| PushedRepo::Url(s.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_merged_pull_request_moves_the_base_branch() {
        let v = json!({
            "action": "closed",
            "pull_request": { "merged": true, "base": { "ref": "main" } },
            "repository": { "clone_url": "https://github.com/o/r.git" }
        });
        let e = github_like("pull_request", &v, "GitHub").expect("parse");
        assert_eq!(
            e,
            Event::Push {
                repos: vec![PushedRepo::Url("https://github.com/o/r.git".into())],
                pushed: vec![PushedRef::Branch("main".into())]
            }
        );
        let open = json!({ "action": "opened", "pull_request": { "merged": false } });
        assert!(matches!(
            github_like("pull_request", &open, "GitHub"),
            Ok(Event::Ignored(_))
        ));
    }

    #[test]
    fn secrets_never_print() {
        assert_eq!(
            format!("{:?}", WebhookSecret::new("hunter2")),
            "WebhookSecret(***)"
        );
    }
}
