//! The request each provider's commit-status API takes for one [`StatusReport`]: its
//! URL, headers and body, as the provider documents them.

use base64::Engine as _;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{CONTEXT_PREFIX, CommitState, CommitStatusTarget, StatusReport};
use crate::report::delivery::{DeliveryError, Post};
use crate::source::Provider;

/// GitHub documents the description as "a short description of the status"; longer
/// ones are refused with 422. 140 is the limit its UI and API enforce.
const MAX_DESCRIPTION_CHARS: usize = 140;

/// Bitbucket Cloud refuses build status keys longer than 40 characters.
const BITBUCKET_MAX_KEY_CHARS: usize = 40;

/// The API version GitHub recommends pinning (docs.github.com, "API Versions").
const GITHUB_API_VERSION: &str = "2022-11-28";

/// The Azure DevOps REST API version of "Statuses - Create" (learn.microsoft.com,
/// `Git/Statuses/Create`), required on every call.
const AZURE_DEVOPS_API_VERSION: &str = "7.1";

impl CommitState {
    /// This state as a provider spells it, out of its words for success, pending and
    /// failure.
    fn spelled(self, [success, pending, failure]: [&'static str; 3]) -> &'static str {
        match self {
            CommitState::Success => success,
            CommitState::Pending => pending,
            CommitState::Failure => failure,
        }
    }

    /// GitHub's and Gitea's `state`.
    fn github(self) -> &'static str {
        self.spelled(["success", "pending", "failure"])
    }

    fn gitlab(self) -> &'static str {
        self.spelled(["success", "running", "failed"])
    }

    /// Bitbucket Cloud's and Bitbucket Server's build `state`.
    fn bitbucket(self) -> &'static str {
        self.spelled(["SUCCESSFUL", "INPROGRESS", "FAILED"])
    }

    /// Azure DevOps' `GitStatusState`.
    fn azure_devops(self) -> &'static str {
        self.spelled(["succeeded", "pending", "failed"])
    }
}

/// The status's link (`target`'s `targetUrl`), when it has one, as the body's `key`.
fn link(body: &mut Value, key: &str, target: &CommitStatusTarget) {
    if let Some(link) = &target.target_url {
        body[key] = link.clone().into();
    }
}

/// How a request authenticates: the header and its value.
type Auth = (HeaderName, String);

impl StatusReport {
    /// The request for this status. The token is read from its env var or file now.
    pub(super) fn post(&self) -> Result<Post, DeliveryError> {
        let token = self.target.token.read().map_err(DeliveryError::Build)?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let (url, body, auth) = match self.target.provider {
            Provider::Github => {
                github_headers(&mut headers);
                let (url, body) = self.statuses();
                (url, body, (AUTHORIZATION, format!("Bearer {token}")))
            }
            // Gitea and Forgejo share GitHub's statuses API; they differ in headers only.
            Provider::Gitea => {
                let (url, body) = self.statuses();
                (url, body, (AUTHORIZATION, format!("token {token}")))
            }
            Provider::Gitlab => self.gitlab(token),
            Provider::Bitbucket => self.bitbucket_cloud(token),
            Provider::BitbucketServer => self.bitbucket_server(token)?,
            Provider::AzureDevops => self.azure_devops(&token),
            Provider::Generic => {
                return Err(DeliveryError::Build(
                    "the generic provider has no commit-status API".into(),
                ));
            }
        };
        let mut value = HeaderValue::from_str(&auth.1).map_err(|_| {
            DeliveryError::Build(format!(
                "the token in {:?} is not a valid header value",
                self.target.token
            ))
        })?;
        value.set_sensitive(true);
        headers.insert(auth.0, value);
        let body = serde_json::to_vec(&body).map_err(|e| DeliveryError::Build(e.to_string()))?;
        Ok(Post::new(self.target.requester, url, headers, body))
    }

    fn description(&self) -> String {
        truncate_chars(&self.description, MAX_DESCRIPTION_CHARS)
    }

    fn sha(&self) -> String {
        encode_segment(&self.sha)
    }

    /// GitHub's and Gitea's `POST /repos/{owner}/{repo}/statuses/{sha}`.
    fn statuses(&self) -> (String, Value) {
        let t = &self.target;
        let mut body = json!({
            "state": self.state.github(),
            "description": self.description(),
            "context": t.context,
        });
        link(&mut body, "target_url", t);
        let url = format!(
            "{}/repos/{}/statuses/{}",
            t.api_url,
            encode_path(&t.repository),
            self.sha()
        );
        (url, body)
    }

    /// GitLab's `POST /projects/{id}/statuses/{sha}`, the project path encoded as one
    /// segment.
    fn gitlab(&self, token: String) -> (String, Value, Auth) {
        let t = &self.target;
        let mut body = json!({
            "state": self.state.gitlab(),
            "name": t.context,
            "description": self.description(),
        });
        link(&mut body, "target_url", t);
        let url = format!(
            "{}/projects/{}/statuses/{}",
            t.api_url,
            encode_segment(&t.repository),
            self.sha()
        );
        (url, body, (HeaderName::from_static("private-token"), token))
    }

    /// Bitbucket Cloud's `POST /repositories/{workspace}/{repo}/commit/{sha}/statuses/build`.
    fn bitbucket_cloud(&self, token: String) -> (String, Value, Auth) {
        let t = &self.target;
        // Bitbucket requires a link; the commit's page is the honest default.
        let link = t.target_url.clone().unwrap_or_else(|| {
            format!(
                "https://bitbucket.org/{}/commits/{}",
                t.repository, self.sha
            )
        });
        let body = json!({
            "key": bitbucket_key(&t.context),
            "state": self.state.bitbucket(),
            "name": t.context,
            "description": self.description(),
            "url": link,
        });
        let url = format!(
            "{}/repositories/{}/commit/{}/statuses/build",
            t.api_url,
            encode_path(&t.repository),
            self.sha()
        );
        (url, body, (AUTHORIZATION, format!("Bearer {token}")))
    }

    /// Bitbucket Server / Data Center's repository-scoped build status (7.4 and later,
    /// "Updating build status for commits"): `POST {base}/rest/api/latest/projects/
    /// {key}/repos/{slug}/commits/{sha}/builds`. The older `/rest/build-status/1.0/
    /// commits/{sha}` is deprecated and not tied to a repository, so a status posted
    /// there would show on every fork holding the commit. Authenticated with an HTTP
    /// access token as a bearer token.
    fn bitbucket_server(&self, token: String) -> Result<(String, Value, Auth), DeliveryError> {
        let t = &self.target;
        let repo = bitbucket_server_repo(&t.repository)?;
        // A link is required here too: the commit's page on the same server.
        let link = t
            .target_url
            .clone()
            .unwrap_or_else(|| format!("{}/{repo}/commits/{}", t.api_url, self.sha));
        let body = json!({
            "key": t.context,
            "state": self.state.bitbucket(),
            "name": t.context,
            "description": self.description(),
            "url": link,
        });
        let url = format!(
            "{}/rest/api/latest/{repo}/commits/{}/builds",
            t.api_url,
            self.sha()
        );
        Ok((url, body, (AUTHORIZATION, format!("Bearer {token}"))))
    }

    /// Azure DevOps' `POST {org}/{project}/_apis/git/repositories/{repo}/commits/{sha}/statuses`,
    /// authenticated with a personal access token as the password of basic
    /// authentication (an empty user name), as Azure DevOps documents for PATs.
    fn azure_devops(&self, token: &str) -> (String, Value, Auth) {
        let t = &self.target;
        // The context shows as `genre/name`: `tether/shop` is genre `tether`, name `shop`.
        let (genre, name) = t
            .context
            .split_once('/')
            .unwrap_or((CONTEXT_PREFIX.trim_end_matches('/'), &t.context));
        let mut body = json!({
            "state": self.state.azure_devops(),
            "description": self.description(),
            "context": {"genre": genre, "name": name},
        });
        link(&mut body, "targetUrl", t);
        let mut parts = t.repository.splitn(3, '/').map(encode_segment);
        let (org, project, repo) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let url = format!(
            "{}/{org}/{project}/_apis/git/repositories/{repo}/commits/{}/statuses?api-version={AZURE_DEVOPS_API_VERSION}",
            t.api_url,
            self.sha()
        );
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(":{token}"));
        (url, body, (AUTHORIZATION, format!("Basic {basic}")))
    }
}

/// The media type and API version GitHub asks every REST request to name.
pub(crate) fn github_headers(headers: &mut HeaderMap) {
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/vnd.github+json"),
    );
    headers.insert(
        HeaderName::from_static("x-github-api-version"),
        HeaderValue::from_static(GITHUB_API_VERSION),
    );
}

/// Bitbucket Server's path of a `PROJECT/slug` repository: `projects/{KEY}/repos/{slug}`.
pub(crate) fn bitbucket_server_repo(repository: &str) -> Result<String, DeliveryError> {
    let (project, slug) = repository
        .split_once('/')
        .ok_or_else(|| DeliveryError::Build(format!("{repository:?} is not PROJECT/slug")))?;
    // Project keys are upper case; a personal project (`~user`) keeps its user name.
    let project = if project.starts_with('~') {
        project.to_string()
    } else {
        project.to_ascii_uppercase()
    };
    Ok(format!(
        "projects/{}/repos/{}",
        encode_segment(&project),
        encode_segment(slug)
    ))
}

/// Characters escaped in a URL path segment: everything but RFC 3986's unreserved
/// set, so GitLab's `group/project` becomes `group%2Fproject` as its API requires.
pub(crate) fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `owner/name` with each part encoded, the slash kept.
pub(crate) fn encode_path(repository: &str) -> String {
    repository
        .split('/')
        .map(encode_segment)
        .collect::<Vec<_>>()
        .join("/")
}

fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Bitbucket's key: the context when it fits, else a prefix and a hash of it, so
/// it stays unique and stable per app.
fn bitbucket_key(context: &str) -> String {
    if context.chars().count() <= BITBUCKET_MAX_KEY_CHARS {
        return context.to_string();
    }
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(context.as_bytes()));
    let prefix: String = context.chars().take(BITBUCKET_MAX_KEY_CHARS - 13).collect();
    format!("{prefix}-{}", &digest[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitlab_project_paths_are_one_encoded_segment() {
        assert_eq!(
            encode_segment("acme/platform/shop"),
            "acme%2Fplatform%2Fshop"
        );
        assert_eq!(encode_path("acme/my shop"), "acme/my%20shop");
    }

    #[test]
    fn long_contexts_make_stable_bitbucket_keys() {
        assert_eq!(bitbucket_key("tether/shop"), "tether/shop");
        let long = "tether/a-very-long-application-name-indeed-yes";
        let key = bitbucket_key(long);
        assert_eq!(key.chars().count(), BITBUCKET_MAX_KEY_CHARS);
        assert_eq!(key, bitbucket_key(long));
        assert_ne!(
            key,
            bitbucket_key("tether/a-very-long-application-name-indeed-no")
        );
    }
}
