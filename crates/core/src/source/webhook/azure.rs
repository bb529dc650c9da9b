//! Azure DevOps (Azure Repos) service hooks: the Web Hooks consumer's `git.push` and
//! `git.pullrequest.merged` deliveries (learn.microsoft.com, "Service hook events").
//!
//! Azure DevOps signs nothing. A subscription authenticates by what its Web Hooks
//! consumer sends: basic authentication (its "Basic authentication username /
//! password" settings), or a custom header from its "HTTP headers" setting. Either
//! carries the configured secret: as the password (any user name), or as the value
//! of [`AZURE_DEVOPS_SECRET_HEADER`].

use axum::http::HeaderMap;
use base64::Engine as _;
use serde_json::Value;

use super::{Event, Rejection, WebhookSecret, bad, header, pushed_refs, str_at, urls_at};
use crate::source::provider::AzureRepo;
use crate::source::{PushedRef, PushedRepo};

/// The header that carries a shared secret, set in the subscription's "HTTP headers"
/// as `X-Tether-Webhook-Secret: <secret>`.
pub const AZURE_DEVOPS_SECRET_HEADER: &str = "x-tether-webhook-secret";

/// Where a payload names its repository: the clone URL every payload carries, and the
/// ssh and web URLs newer ones add.
const REPO_URLS: &[&str] = &[
    "/resource/repository/remoteUrl",
    "/resource/repository/sshUrl",
    "/resource/repository/webUrl",
];

/// Whether the delivery carries the secret, as a header or as a basic-auth password.
pub(super) fn authorized(secret: &WebhookSecret, headers: &HeaderMap) -> Result<bool, Rejection> {
    if let Some(given) = header(headers, AZURE_DEVOPS_SECRET_HEADER) {
        return Ok(secret.matches(given.as_bytes()));
    }
    let credentials = header(headers, "authorization")
        .and_then(|value| {
            let (scheme, rest) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then_some(rest)
        })
        .ok_or(Rejection::Unauthorized(
            "missing basic authentication or X-Tether-Webhook-Secret",
        ))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials.trim())
        .map_err(|_| Rejection::Unauthorized("basic authentication is not base64"))?;
    let password = decoded
        .iter()
        .position(|b| *b == b':')
        .map(|colon| &decoded[colon + 1..])
        .ok_or(Rejection::Unauthorized(
            "basic authentication has no password",
        ))?;
    Ok(secret.matches(password))
}

/// `git.push`: every updated ref moved; `git.pullrequest.merged`: the target branch
/// moved when the merge succeeded (the event also fires for a merge that met conflicts).
pub(super) fn event(v: &Value) -> Result<Event, Rejection> {
    let event =
        str_at(v, "/eventType").ok_or_else(|| Rejection::BadPayload("missing eventType".into()))?;
    match event {
        "git.push" => {
            let pushed = pushed_refs(v, "/resource/refUpdates", "/name")
                .ok_or_else(|| bad("Azure DevOps", "git.push"))?;
            let repos = repos(v).ok_or_else(|| bad("Azure DevOps", "git.push"))?;
            Ok(Event::Push { repos, pushed })
        }
        "git.pullrequest.merged" => {
            let status = str_at(v, "/resource/mergeStatus").unwrap_or("");
            if status != "succeeded" {
                return Ok(Event::Ignored(format!(
                    "pull request merge {status:?}, not merged"
                )));
            }
            let target = str_at(v, "/resource/targetRefName")
                .ok_or_else(|| bad("Azure DevOps", "git.pullrequest.merged"))?;
            let repos = repos(v).ok_or_else(|| bad("Azure DevOps", "git.pullrequest.merged"))?;
            Ok(Event::Push {
                repos,
                pushed: vec![PushedRef::parse(target)],
            })
        }
        other => Ok(Event::Ignored(format!("event {other:?} is not a push"))),
    }
}

/// The repository's URLs in the payload, with the https and ssh spellings of the same
/// repository on Azure DevOps Services (payloads name only the https one, and older
/// ones by `{org}.visualstudio.com`).
fn repos(v: &Value) -> Option<Vec<PushedRepo>> {
    let mut repos = urls_at(v, REPO_URLS);
    let remote = str_at(v, "/resource/repository/remoteUrl")?;
    if let Some(repo) = AzureRepo::from_url(remote) {
        repos.extend(repo.cloud_urls().into_iter().map(PushedRepo::Url));
    }
    Some(repos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn basic(userpass: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        let encoded = base64::engine::general_purpose::STANDARD.encode(userpass);
        let value = HeaderValue::from_str(&format!("Basic {encoded}")).expect("header");
        h.insert("authorization", value);
        h
    }

    #[test]
    fn the_secret_is_the_basic_password_or_the_header() {
        let secret = WebhookSecret::new("s3cret:with-colon");
        assert!(authorized(&secret, &basic("azure:s3cret:with-colon")).unwrap());
        assert!(authorized(&secret, &basic(":s3cret:with-colon")).unwrap());
        assert!(!authorized(&secret, &basic("s3cret:with-colon:")).unwrap());
        let mut h = HeaderMap::new();
        h.insert(
            AZURE_DEVOPS_SECRET_HEADER,
            HeaderValue::from_static("s3cret:with-colon"),
        );
        assert!(authorized(&secret, &h).unwrap());
        assert!(authorized(&secret, &HeaderMap::new()).is_err());
        assert!(authorized(&secret, &basic("no-colon")).is_err());
    }

    #[test]
    fn a_merge_with_conflicts_moves_nothing() {
        let v = serde_json::json!({
            "eventType": "git.pullrequest.merged",
            "resource": {
                "mergeStatus": "conflicts",
                "targetRefName": "refs/heads/main",
                "repository": {"remoteUrl": "https://dev.azure.com/o/p/_git/r"}
            }
        });
        assert!(matches!(event(&v), Ok(Event::Ignored(r)) if r.contains("conflicts")));
    }
}
