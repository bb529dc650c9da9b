//! Pull-request comments (issue #29): `tether diff --base --comment` keeps one comment
//! per previewed configuration on the pull or merge request up to date with the
//! preview. The comment is found by the report's hidden marker line, which names
//! what is previewed (its listing read page by page), edited when it exists and
//! created when it does not, so a rerun on a new push edits instead of adding
//! another, and two jobs previewing different configurations keep one each. Requests go through the commit-status providers' client
//! (`delivery`): the same timeouts, retries, no redirects, and the same outbound
//! guard, as the command line's user (the operator) names the API.

use reqwest::Method;

use super::commit_status::{CommitStatusError, check_repository, default_api_url};
use super::delivery::{self, Clients, Counters, DeliveryError, DeliveryOptions, Post};
use super::outbound::Requester;
use super::preview::GITHUB_COMMENT_LIMIT;
use crate::source::{Provider, SecretRef};

mod api;

/// GitLab's limit on a note's body, in characters (docs.gitlab.com, "Notes API":
/// a body is limited to 1,000,000 characters).
pub const GITLAB_NOTE_LIMIT: usize = 1_000_000;

/// The limit for providers that document none (Gitea/Forgejo, Bitbucket Cloud and
/// Server): GitHub's, a size every provider stores and its page renders.
pub const UNDOCUMENTED_COMMENT_LIMIT: usize = GITHUB_COMMENT_LIMIT;

/// Most listing pages read while looking for the comment: 100 pages of 100 is far
/// past any pull request's discussion, and a listing that never ends (a provider
/// bug, a proxy answering the same page) still stops.
const MAX_PAGES: usize = 100;

/// Where the comment goes: a provider's API, a repository, a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentTarget {
    pub provider: Provider,
    /// Without a trailing slash.
    pub api_url: String,
    /// `owner/name`; GitLab's project path or ID; Bitbucket Server's `PROJECT/slug`.
    pub repository: String,
    /// The pull request's number (GitLab: the merge request's IID).
    pub number: u64,
    /// Read once, when the comment is posted.
    pub token: SecretRef,
}

/// What posting did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posted {
    /// No comment of ours was there: one was added.
    Created,
    /// Ours (this ID) was edited to the new report.
    Updated { id: String },
    /// Ours already said exactly this: nothing was written.
    Unchanged { id: String },
}

/// Why the comment was not posted. [`retryable`](Self::retryable) says whether the
/// same run could succeed later; the others need a change of flags, token or
/// permissions.
#[derive(Debug, thiserror::Error)]
pub enum CommentError {
    #[error("{provider} has no pull-request comment API tether speaks")]
    NoCommentApi { provider: Provider },
    #[error("{provider} has no public API: name the server's API URL")]
    MissingApiUrl { provider: Provider },
    #[error("the API URL {url:?} is not an http(s) URL")]
    InvalidApiUrl { url: String },
    #[error("the repository: {0}")]
    Repository(#[source] CommitStatusError),
    /// The token cannot be read; the message names its variable or file, never it.
    #[error("the API token: {0}")]
    Token(String),
    #[error("{step} on {provider} pull request {number}: {error}")]
    Request {
        step: &'static str,
        provider: Provider,
        number: u64,
        #[source]
        error: DeliveryError,
    },
    /// A listing answered something other than the provider's documented JSON.
    #[error("listing the comments on {provider}: {detail}")]
    Answer { provider: Provider, detail: String },
    /// A listing's next page is on another server: the token is not sent there.
    #[error("listing the comments on {provider}: the next page {origin} is not the API's server")]
    ForeignPage { provider: Provider, origin: String },
}

impl CommentError {
    /// Whether a later run could succeed unchanged: the provider was unreachable or
    /// kept failing with a retryable error.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            CommentError::Request {
                error: DeliveryError::GaveUp { .. },
                ..
            }
        )
    }
}

impl CommentTarget {
    /// Check and complete a target: the provider's public API when `api_url` is
    /// absent, a repository its API can name.
    pub fn new(
        provider: Provider,
        api_url: Option<&str>,
        repository: &str,
        number: u64,
        token: SecretRef,
    ) -> Result<CommentTarget, CommentError> {
        if matches!(provider, Provider::AzureDevops | Provider::Generic) {
            return Err(CommentError::NoCommentApi { provider });
        }
        let api_url = match (api_url, default_api_url(provider)) {
            (Some(url), _) => url.trim_end_matches('/').to_string(),
            (None, Some(default)) => default.to_string(),
            (None, None) => return Err(CommentError::MissingApiUrl { provider }),
        };
        match url::Url::parse(&api_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
            _ => return Err(CommentError::InvalidApiUrl { url: api_url }),
        }
        let repository = repository.trim_matches('/').to_string();
        check_repository(provider, &repository).map_err(CommentError::Repository)?;
        Ok(CommentTarget {
            provider,
            api_url,
            repository,
            number,
            token,
        })
    }

    /// The most characters a comment may have on this provider.
    pub fn limit(&self) -> usize {
        match self.provider {
            Provider::Github => GITHUB_COMMENT_LIMIT,
            Provider::Gitlab => GITLAB_NOTE_LIMIT,
            _ => UNDOCUMENTED_COMMENT_LIMIT,
        }
    }
}

/// One of the pull request's comments, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Existing {
    id: String,
    /// Bitbucket Server's optimistic lock: an edit names the version it replaces.
    version: Option<u64>,
    body: String,
}

/// One page of a listing.
#[derive(Debug, Default)]
struct Page {
    comments: Vec<Existing>,
    /// The next page's URL, if there is one.
    next: Option<String>,
}

/// Create or update the comment holding `marker` on `target`'s pull request so it
/// reads `body` (which holds `marker`). The first comment holding the marker is ours;
/// when none does, the first holding one of `adopt` (an older form of the marker)
/// becomes ours, so an upgrade edits the comment it finds instead of adding one.
pub async fn upsert(
    target: &CommentTarget,
    body: &str,
    marker: &str,
    adopt: &[&str],
    options: &DeliveryOptions,
) -> Result<Posted, CommentError> {
    let token = target.token.read().map_err(CommentError::Token)?;
    let api = api::Api::new(target, &token)?;
    let clients = Clients::new(options).map_err(|error| api.failed("connecting", error))?;
    let session = Session {
        api: &api,
        clients: &clients,
        options,
        counters: Counters::default(),
    };
    let mut next = Some(api.list_url());
    let (mut ours, mut adopted) = (None, None);
    for _ in 0..MAX_PAGES {
        let Some(url) = next.take() else { break };
        let answer = session
            .send(Method::GET, url, None, "listing the comments")
            .await?;
        let headers = answer.headers().clone();
        let text = answer.text().await.map_err(|e| CommentError::Answer {
            provider: target.provider,
            detail: e.without_url().to_string(),
        })?;
        let page = api.page(&headers, &text)?;
        for comment in page.comments {
            if comment.body.contains(marker) {
                ours = Some(comment);
                break;
            }
            if adopted.is_none() && adopt.iter().any(|old| comment.body.contains(old)) {
                adopted = Some(comment);
            }
        }
        if ours.is_some() {
            break;
        }
        next = page.next;
    }
    match ours.or(adopted) {
        // Never write what has not changed: the provider would show it as edited.
        Some(existing) if existing.body.trim_end() == body.trim_end() => {
            Ok(Posted::Unchanged { id: existing.id })
        }
        Some(existing) => {
            let (method, url, json) = api.update(&existing, body);
            session
                .send(method, url, Some(json), "editing the comment")
                .await?;
            Ok(Posted::Updated { id: existing.id })
        }
        None => {
            let (url, json) = api.create(body);
            session
                .send(Method::POST, url, Some(json), "adding the comment")
                .await?;
            Ok(Posted::Created)
        }
    }
}

/// One posting's client and counters.
struct Session<'a> {
    api: &'a api::Api<'a>,
    clients: &'a Clients,
    options: &'a DeliveryOptions,
    counters: Counters,
}

impl Session<'_> {
    /// Send a request to the provider as the operator (the command line names the
    /// API), retried as commit statuses are; the provider's answer when it succeeds.
    async fn send(
        &self,
        method: Method,
        url: String,
        json: Option<serde_json::Value>,
        step: &'static str,
    ) -> Result<reqwest::Response, CommentError> {
        let headers = self.api.headers(json.is_some())?;
        let body = json.map(|j| j.to_string().into_bytes()).unwrap_or_default();
        let post = Post::new(Requester::Operator, url, headers, body).with_method(method);
        delivery::send_with_retry(self.clients, self.options, &self.counters, &post)
            .await
            .map(|(_, answer)| answer)
            .map_err(|error| self.api.failed(step, error))
    }
}

impl api::Api<'_> {
    fn failed(&self, step: &'static str, error: DeliveryError) -> CommentError {
        CommentError::Request {
            step,
            provider: self.target.provider,
            number: self.target.number,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_take_the_public_api_and_refuse_what_cannot_work() {
        let token = SecretRef::Env("T".into());
        let github = CommentTarget::new(Provider::Github, None, "acme/shop/", 7, token.clone())
            .expect("github");
        assert_eq!(github.api_url, "https://api.github.com");
        assert_eq!(github.repository, "acme/shop");
        assert_eq!(github.limit(), 65_536);
        let gitlab = CommentTarget::new(Provider::Gitlab, None, "4242", 7, token.clone())
            .expect("a numeric project ID");
        assert_eq!(gitlab.limit(), GITLAB_NOTE_LIMIT);
        assert!(matches!(
            CommentTarget::new(Provider::Gitea, None, "acme/shop", 7, token.clone()),
            Err(CommentError::MissingApiUrl { .. })
        ));
        assert!(matches!(
            CommentTarget::new(
                Provider::Github,
                Some("ftp://x"),
                "acme/shop",
                7,
                token.clone()
            ),
            Err(CommentError::InvalidApiUrl { .. })
        ));
        assert!(matches!(
            CommentTarget::new(Provider::Github, None, "shop", 7, token.clone()),
            Err(CommentError::Repository(_))
        ));
        assert!(matches!(
            CommentTarget::new(Provider::AzureDevops, None, "o/p/r", 7, token),
            Err(CommentError::NoCommentApi { .. })
        ));
    }
}
