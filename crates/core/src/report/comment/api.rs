//! Each provider's pull-request comment API as it documents it: where the comments
//! are listed and how the next page is named, how one is edited and added, and how
//! a request authenticates. Pure: URLs, headers and bodies in, parsed pages out.
//!
//! - GitHub: `GET/POST /repos/{owner}/{repo}/issues/{n}/comments`, `PATCH
//!   /repos/{owner}/{repo}/issues/comments/{id}`; pages by the `Link` header.
//! - Gitea/Forgejo: the same paths under `/api/v1`, `Authorization: token …`.
//! - GitLab: `GET/POST /projects/{id}/merge_requests/{iid}/notes`, `PUT …/notes/{id}`;
//!   pages by `X-Next-Page`; system notes are not comments.
//! - Bitbucket Cloud: `GET/POST /repositories/{ws}/{repo}/pullrequests/{n}/comments`,
//!   `PUT …/comments/{id}` with `content.raw`; pages by the answer's `next`.
//! - Bitbucket Server / Data Center: general comments are read from `GET
//!   …/pull-requests/{n}/activities` (pages by `nextPageStart`), added with `POST
//!   …/comments` and edited with `PUT …/comments/{id}` naming the `version` replaced.

use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{CommentError, CommentTarget, Existing, Page};
use crate::report::commit_status::{
    bitbucket_server_repo, encode_path, encode_segment, github_headers,
};
use crate::source::Provider;

/// Items per listing page: the most GitHub (`per_page`), GitLab (`per_page`),
/// Bitbucket Cloud (`pagelen`) and Bitbucket Server (`limit`) each allow.
const PAGE_SIZE: u32 = 100;

/// One provider's API for one pull request.
pub(super) struct Api<'a> {
    pub(super) target: &'a CommentTarget,
    token: &'a str,
    /// The comments' collection: listed (after the query) and posted to.
    collection: String,
}

impl<'a> Api<'a> {
    pub(super) fn new(target: &'a CommentTarget, token: &'a str) -> Result<Api<'a>, CommentError> {
        let base = &target.api_url;
        let n = target.number;
        let collection = match target.provider {
            Provider::Github | Provider::Gitea => format!(
                "{base}/repos/{}/issues/{n}/comments",
                encode_path(&target.repository)
            ),
            Provider::Gitlab => format!(
                "{base}/projects/{}/merge_requests/{n}/notes",
                encode_segment(&target.repository)
            ),
            Provider::Bitbucket => format!(
                "{base}/repositories/{}/pullrequests/{n}/comments",
                encode_path(&target.repository)
            ),
            Provider::BitbucketServer => {
                let repo = bitbucket_server_repo(&target.repository).map_err(|error| {
                    CommentError::Request {
                        step: "naming the repository",
                        provider: target.provider,
                        number: n,
                        error,
                    }
                })?;
                format!("{base}/rest/api/latest/{repo}/pull-requests/{n}/comments")
            }
            provider @ (Provider::AzureDevops | Provider::Generic) => {
                return Err(CommentError::NoCommentApi { provider });
            }
        };
        Ok(Api {
            target,
            token,
            collection,
        })
    }

    /// The first page of the listing.
    pub(super) fn list_url(&self) -> String {
        match self.target.provider {
            Provider::Github => format!("{}?per_page={PAGE_SIZE}", self.collection),
            // Gitea's issue-comment listing answers every comment at once.
            Provider::Gitea => self.collection.clone(),
            Provider::Gitlab => self.gitlab_page(1),
            Provider::Bitbucket => format!("{}?pagelen={PAGE_SIZE}", self.collection),
            _ => self.bitbucket_server_page(0),
        }
    }

    fn gitlab_page(&self, page: u64) -> String {
        format!(
            "{}?per_page={PAGE_SIZE}&sort=asc&order_by=created_at&page={page}",
            self.collection
        )
    }

    fn bitbucket_server_page(&self, start: u64) -> String {
        let activities = self
            .collection
            .strip_suffix("/comments")
            .unwrap_or(&self.collection);
        format!("{activities}/activities?limit={PAGE_SIZE}&start={start}")
    }

    /// The headers of a request; the token's value is marked sensitive (never logged).
    pub(super) fn headers(&self, has_body: bool) -> Result<HeaderMap, CommentError> {
        let mut headers = HeaderMap::new();
        if has_body {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let token = self.token;
        let (name, value) = match self.target.provider {
            Provider::Github => {
                github_headers(&mut headers);
                (AUTHORIZATION, format!("Bearer {token}"))
            }
            Provider::Gitea => (AUTHORIZATION, format!("token {token}")),
            Provider::Gitlab => (HeaderName::from_static("private-token"), token.to_string()),
            _ => (AUTHORIZATION, format!("Bearer {token}")),
        };
        if !headers.contains_key(ACCEPT) {
            headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        }
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            CommentError::Token(format!(
                "{:?} holds a character a header cannot carry",
                self.target.token
            ))
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
        Ok(headers)
    }

    /// The comments of one listing page and the next page's URL.
    pub(super) fn page(&self, headers: &HeaderMap, text: &str) -> Result<Page, CommentError> {
        let provider = self.target.provider;
        let answer: Value = serde_json::from_str(text).map_err(|e| CommentError::Answer {
            provider,
            detail: format!("not JSON: {e}"),
        })?;
        let items = |value: &Value| -> Result<Vec<Value>, CommentError> {
            value.as_array().cloned().ok_or(CommentError::Answer {
                provider,
                detail: "no list of comments".into(),
            })
        };
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let (comments, next) = match provider {
            Provider::Github | Provider::Gitea => {
                let comments = items(&answer)?
                    .iter()
                    .filter_map(|c| existing(&c["id"], &c["body"], None))
                    .collect();
                (comments, header("link").and_then(next_link))
            }
            Provider::Gitlab => {
                let comments = items(&answer)?
                    .iter()
                    .filter(|c| c["system"] != Value::Bool(true))
                    .filter_map(|c| existing(&c["id"], &c["body"], None))
                    .collect();
                let next = header("x-next-page")
                    .and_then(|n| n.parse().ok())
                    .map(|n| self.gitlab_page(n));
                (comments, next)
            }
            Provider::Bitbucket => {
                let comments = items(&answer["values"])?
                    .iter()
                    .filter(|c| c["deleted"] != Value::Bool(true))
                    .filter_map(|c| existing(&c["id"], &c["content"]["raw"], None))
                    .collect();
                (comments, answer["next"].as_str().map(str::to_string))
            }
            _ => {
                let comments = items(&answer["values"])?
                    .iter()
                    .filter(|a| a["action"] == "COMMENTED" && a["commentAction"] != "DELETED")
                    .filter_map(|a| {
                        let c = &a["comment"];
                        existing(&c["id"], &c["text"], c["version"].as_u64())
                    })
                    .collect();
                let next = match (
                    answer["isLastPage"].as_bool(),
                    answer["nextPageStart"].as_u64(),
                ) {
                    (Some(false), Some(start)) => Some(self.bitbucket_server_page(start)),
                    _ => None,
                };
                (comments, next)
            }
        };
        if let Some(url) = &next {
            self.same_server(url)?;
        }
        Ok(Page { comments, next })
    }

    /// A next page elsewhere than the API would receive the token: refused.
    fn same_server(&self, url: &str) -> Result<(), CommentError> {
        let origin = |u: &str| url::Url::parse(u).ok().map(|u| u.origin());
        let next = origin(url);
        if next.is_some() && next == origin(&self.target.api_url) {
            return Ok(());
        }
        Err(CommentError::ForeignPage {
            provider: self.target.provider,
            origin: next.map_or_else(|| "(not a URL)".into(), |o| o.ascii_serialization()),
        })
    }

    /// How `existing` is edited to read `body`: method, URL and JSON.
    pub(super) fn update(&self, existing: &Existing, body: &str) -> (Method, String, Value) {
        let id = encode_segment(&existing.id);
        match self.target.provider {
            Provider::Github | Provider::Gitea => {
                let issues = self
                    .collection
                    .rsplit_once("/issues/")
                    .map_or(self.collection.as_str(), |(repo, _)| repo);
                (
                    Method::PATCH,
                    format!("{issues}/issues/comments/{id}"),
                    json!({ "body": body }),
                )
            }
            Provider::Gitlab => (
                Method::PUT,
                format!("{}/{id}", self.collection),
                json!({ "body": body }),
            ),
            Provider::Bitbucket => (
                Method::PUT,
                format!("{}/{id}", self.collection),
                json!({ "content": { "raw": body } }),
            ),
            _ => (
                Method::PUT,
                format!("{}/{id}", self.collection),
                json!({ "text": body, "version": existing.version.unwrap_or(0) }),
            ),
        }
    }

    /// How a new comment reading `body` is added: URL and JSON.
    pub(super) fn create(&self, body: &str) -> (String, Value) {
        let json = match self.target.provider {
            Provider::Bitbucket => json!({ "content": { "raw": body } }),
            Provider::BitbucketServer => json!({ "text": body }),
            _ => json!({ "body": body }),
        };
        (self.collection.clone(), json)
    }
}

/// A listed comment, if it has an ID and a body.
fn existing(id: &Value, body: &Value, version: Option<u64>) -> Option<Existing> {
    let id = match id {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => return None,
    };
    Some(Existing {
        id,
        version,
        body: body.as_str()?.to_string(),
    })
}

/// The `rel="next"` URL of an RFC 8288 `Link` header.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"");
        let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then(|| url.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SecretRef;

    fn target(provider: Provider, repository: &str) -> CommentTarget {
        CommentTarget::new(
            provider,
            Some("https://git.example.com/api"),
            repository,
            7,
            SecretRef::Env("T".into()),
        )
        .expect("a target")
    }

    #[test]
    fn the_link_header_names_the_next_page() {
        let link = "<https://api.github.com/repositories/1/issues/7/comments?page=2>; rel=\"next\", \
                    <https://api.github.com/repositories/1/issues/7/comments?page=5>; rel=\"last\"";
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/repositories/1/issues/7/comments?page=2")
        );
        assert_eq!(next_link("<https://x/?page=1>; rel=\"prev\""), None);
    }

    #[test]
    fn a_next_page_on_another_server_is_refused() {
        let t = target(Provider::Bitbucket, "acme/shop");
        let api = Api::new(&t, "secret").expect("api");
        let page = r#"{"values": [], "next": "https://elsewhere.example/steal?page=2"}"#;
        let err = api.page(&HeaderMap::new(), page).expect_err("foreign");
        assert!(matches!(err, CommentError::ForeignPage { .. }), "{err}");
        let page = r#"{"values": [], "next": "https://git.example.com/api/x?page=2"}"#;
        assert!(api.page(&HeaderMap::new(), page).is_ok());
    }

    #[test]
    fn bitbucket_server_reads_general_comments_from_the_activities() {
        let t = target(Provider::BitbucketServer, "acme/shop");
        let api = Api::new(&t, "secret").expect("api");
        assert_eq!(
            api.list_url(),
            "https://git.example.com/api/rest/api/latest/projects/ACME/repos/shop/pull-requests/7/activities?limit=100&start=0"
        );
        let page = r#"{"values": [
            {"action": "APPROVED"},
            {"action": "COMMENTED", "commentAction": "ADDED",
             "comment": {"id": 12, "version": 3, "text": "hi"}}],
            "isLastPage": false, "nextPageStart": 25}"#;
        let page = api.page(&HeaderMap::new(), page).expect("a page");
        assert_eq!(
            page.comments,
            [Existing {
                id: "12".into(),
                version: Some(3),
                body: "hi".into()
            }]
        );
        assert!(page.next.expect("more").ends_with("start=25"));
        let (method, url, body) = api.update(&page.comments[0], "new");
        assert_eq!(method, Method::PUT);
        assert!(url.ends_with("/pull-requests/7/comments/12"), "{url}");
        assert_eq!(body, json!({"text": "new", "version": 3}));
    }
}
