//! Commit statuses: after a pass, the result for its revision is posted to the Git
//! provider (GitHub, GitLab, Gitea/Forgejo, Bitbucket Cloud, Bitbucket Server / Data
//! Center, Azure DevOps), so the commit shows whether the cluster runs it. Posting happens on a worker task: the loop only
//! queues, and a status is posted only when it differs from the last one posted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use super::delivery::{
    self, Admission, CloseOnDrop, DeliveryError, DeliveryOptions, DeliveryStats, Queue,
};
use super::outbound::Requester;
use crate::source::{AzureRepo, Provider, SecretRef};
use crate::sync::health::Health;

mod request;
pub(crate) use request::{bitbucket_server_repo, encode_path, encode_segment, github_headers};

/// GitHub's public API (docs.github.com, "REST API endpoints for commit statuses").
pub const GITHUB_API_URL: &str = "https://api.github.com";
/// GitLab.com's API v4 (docs.gitlab.com, "Commits API").
pub const GITLAB_API_URL: &str = "https://gitlab.com/api/v4";
/// Bitbucket Cloud's API 2.0 (developer.atlassian.com, "Commit statuses").
pub const BITBUCKET_API_URL: &str = "https://api.bitbucket.org/2.0";
/// Azure DevOps Services (learn.microsoft.com, "Statuses - Create": `https://dev.azure.com/{organization}/…`).
pub const AZURE_DEVOPS_API_URL: &str = "https://dev.azure.com";

/// The status context (GitHub, Gitea), name (GitLab) or key (Bitbucket) prefix: one
/// status per app, so several apps deploying one commit each get a line.
pub const CONTEXT_PREFIX: &str = "tether/";

/// The API a provider serves the world from; None for self-hosted-only providers
/// (Gitea, Bitbucket Server), whose `apiUrl` is required.
pub fn default_api_url(provider: Provider) -> Option<&'static str> {
    match provider {
        Provider::Github => Some(GITHUB_API_URL),
        Provider::Gitlab => Some(GITLAB_API_URL),
        Provider::Bitbucket => Some(BITBUCKET_API_URL),
        Provider::AzureDevops => Some(AZURE_DEVOPS_API_URL),
        Provider::Gitea | Provider::BitbucketServer | Provider::Generic => None,
    }
}

/// An app's `commitStatus:` block, as written in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommitStatusConfig {
    pub provider: Provider,
    /// The API base URL (GitHub Enterprise, self-hosted GitLab, Azure DevOps Server's
    /// `https://host/tfs`, tests). Required for Gitea and for Bitbucket Server (its
    /// base URL, with any context path), which have no public default.
    #[serde(default)]
    pub api_url: Option<String>,
    /// `owner/name` (GitLab: the full project path, groups included; Bitbucket Server:
    /// `PROJECT/slug`; Azure DevOps: `organization/project/repository`). Derived from
    /// the app's repository URL when absent.
    #[serde(default)]
    pub repository: Option<String>,
    /// The environment variable holding the API token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The file holding the API token (e.g. a mounted Secret).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// The status context; defaults to `tether/<app>`.
    #[serde(default)]
    pub context: Option<String>,
    /// A link shown with the status (e.g. tether's status page for the app).
    #[serde(default)]
    pub target_url: Option<String>,
}

/// Why a `commitStatus:` block cannot be used. All need a change of configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitStatusError {
    #[error("commitStatus.apiUrl is required for provider {provider}")]
    MissingApiUrl { provider: &'static str },
    #[error("commitStatus.provider {provider} has no commit-status API")]
    NoStatusApi { provider: &'static str },
    #[error("commitStatus.apiUrl {url:?} is not an http(s) URL")]
    InvalidApiUrl { url: String },
    #[error("commitStatus needs exactly one of tokenEnv and tokenFile")]
    Token,
    #[error("commitStatus.repository: cannot find owner/name in {input:?}: {reason}")]
    Repository { input: String, reason: &'static str },
}

/// The state posted for a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum CommitState {
    /// Synced and healthy.
    Success,
    /// Out of sync, or synced and still progressing.
    Pending,
    /// The pass failed, or the app is degraded.
    Failure,
}

impl CommitState {
    /// The state for a pass: a failed pass or a degraded app is a failure; out of
    /// sync, progressing, missing or unknown objects are pending (the cluster is on its way, or
    /// waits for a manual sync); synced and healthy is success.
    pub fn from_pass(failed: bool, synced: bool, health: Health) -> CommitState {
        match (failed, synced, health) {
            (true, _, _) | (_, _, Health::Degraded) => CommitState::Failure,
            (false, true, Health::Healthy) => CommitState::Success,
            _ => CommitState::Pending,
        }
    }
}

/// A resolved `commitStatus:` block: where and as what one app's statuses are posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatusTarget {
    pub app: String,
    pub provider: Provider,
    /// Without a trailing slash.
    pub api_url: String,
    /// `owner/name`, or GitLab's full project path.
    pub repository: String,
    /// Read at each post, so a rotated token is used without a restart.
    pub token: SecretRef,
    pub context: String,
    pub target_url: Option<String>,
    /// Whose target it is: an App's API URL must be a public address (`outbound`).
    pub requester: Requester,
}

impl CommitStatusConfig {
    /// Check the block and resolve it for `app`, whose source is `repo_url`. The
    /// token is not read here: it is read at each post.
    pub fn resolve(
        &self,
        app: &str,
        repo_url: &str,
    ) -> Result<CommitStatusTarget, CommitStatusError> {
        if self.provider == Provider::Generic {
            return Err(CommitStatusError::NoStatusApi {
                provider: self.provider.as_str(),
            });
        }
        let api_url = match (&self.api_url, default_api_url(self.provider)) {
            (Some(url), _) => url.trim_end_matches('/').to_string(),
            (None, Some(default)) => default.to_string(),
            (None, None) => {
                return Err(CommitStatusError::MissingApiUrl {
                    provider: self.provider.as_str(),
                });
            }
        };
        match url::Url::parse(&api_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
            _ => return Err(CommitStatusError::InvalidApiUrl { url: api_url }),
        }
        let token = SecretRef::env_or_file(&self.token_env, &self.token_file)
            .ok()
            .flatten()
            .ok_or(CommitStatusError::Token)?;
        let repository = match &self.repository {
            Some(r) => {
                let r = r.trim_matches('/');
                check_repository(self.provider, r)?;
                r.to_string()
            }
            None => repository_from_url(self.provider, repo_url)?,
        };
        Ok(CommitStatusTarget {
            app: app.to_string(),
            provider: self.provider,
            api_url,
            repository,
            token,
            context: self
                .context
                .clone()
                .unwrap_or_else(|| format!("{CONTEXT_PREFIX}{app}")),
            target_url: self.target_url.clone(),
            requester: Requester::Operator,
        })
    }
}

/// Whether `path` names a repository the way `provider`'s API does (`owner/name`,
/// GitLab's `group/project` or numeric ID, Azure's `organization/project/repository`).
pub fn check_repository(provider: Provider, path: &str) -> Result<(), CommitStatusError> {
    let segments: Vec<&str> = path.split('/').collect();
    let err = |reason| CommitStatusError::Repository {
        input: path.to_string(),
        reason,
    };
    if segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return Err(err("empty or relative path segment"));
    }
    match provider {
        // A numeric project ID is as good as the path.
        Provider::Gitlab if segments.len() >= 2 || path.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(())
        }
        Provider::Gitlab => Err(err("a GitLab project path is group/project")),
        Provider::AzureDevops if segments.len() == 3 => Ok(()),
        Provider::AzureDevops => Err(err("expected organization/project/repository")),
        _ if segments.len() == 2 => Ok(()),
        _ => Err(err("expected exactly owner/name")),
    }
}

/// The repository path in a clone URL: `https://host/owner/name.git`,
/// `ssh://git@host:2222/owner/name`, `git@host:owner/name.git`. GitLab keeps the
/// whole path (groups and subgroups); Azure DevOps names organization, project and
/// repository ([`AzureRepo`]); the others take the last two segments, so an install
/// under a sub-path (`https://host/gitea/owner/name`, Bitbucket Server's
/// `https://host/scm/PROJECT/slug`) still works.
pub fn repository_from_url(
    provider: Provider,
    repo_url: &str,
) -> Result<String, CommitStatusError> {
    let raw = repo_url.trim();
    let err = |reason| CommitStatusError::Repository {
        input: crate::source::redact_url(raw),
        reason,
    };
    let path = if raw.contains("://") {
        let url = url::Url::parse(raw).map_err(|_| err("not a URL"))?;
        if url.scheme() == "file" {
            return Err(err("a local repository has no provider"));
        }
        url.path().to_string()
    } else {
        match raw.split_once(':') {
            Some((host, path)) if !host.is_empty() && !host.contains('/') => path.to_string(),
            _ => return Err(err("neither a URL nor user@host:path")),
        }
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let repository = match provider {
        Provider::AzureDevops => AzureRepo::from_url(raw)
            .map(|r| format!("{}/{}/{}", r.organization, r.project, r.repository))
            .unwrap_or_default(),
        Provider::Gitlab => {
            // GitLab's clone URLs can carry a `/-/` marker in web URLs; clone URLs
            // do not, but a pasted web URL should not become a project path.
            let end = segments
                .iter()
                .position(|s| *s == "-")
                .unwrap_or(segments.len());
            segments[..end].join("/")
        }
        _ if segments.len() >= 2 => segments[segments.len() - 2..].join("/"),
        _ => String::new(),
    };
    check_repository(provider, &repository).map_err(|_| err("no owner/name path in it"))?;
    Ok(repository)
}

/// One status to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    pub target: Arc<CommitStatusTarget>,
    /// The full commit SHA.
    pub sha: String,
    pub state: CommitState,
    /// A short line (e.g. "Synced, Healthy" or "ApplyFailed"); cut to 140 characters.
    pub description: String,
}

/// The last state posted per app, with the commit it was posted for. Only the
/// newest commit is remembered: an app's older commits are not reported again.
type Posted = Arc<Mutex<HashMap<String, (String, CommitState)>>>;

/// The handle the reconcile loop holds: [`report`](Self::report) queues and returns
/// at once; a worker task posts, skipping a state equal to the last one posted.
#[derive(Clone)]
pub struct CommitStatusReporter {
    queue: Arc<Queue<StatusReport>>,
    posted: Posted,
    worker: Arc<Mutex<Option<JoinHandle<()>>>>,
    _closer: Arc<CloseOnDrop<StatusReport>>,
}

impl CommitStatusReporter {
    /// Start the worker on the current Tokio runtime (an error outside one). Dropping
    /// every clone of the handle closes the queue; the worker drains it and ends.
    pub fn start(options: DeliveryOptions) -> Result<CommitStatusReporter, DeliveryError> {
        let clients = Arc::new(delivery::Clients::new(&options)?);
        let queue = Queue::new(options.queue_capacity);
        let posted: Posted = Arc::default();
        let worker = {
            let queue = queue.clone();
            let posted = posted.clone();
            delivery::spawn_worker(queue.clone(), move |_app, job: StatusReport| {
                let clients = clients.clone();
                let options = options.clone();
                let queue = queue.clone();
                let posted = posted.clone();
                async move { deliver(&clients, &options, &queue, &posted, job).await }
            })?
        };
        Ok(CommitStatusReporter {
            _closer: Arc::new(CloseOnDrop(queue.clone())),
            queue,
            posted,
            worker: Arc::new(Mutex::new(Some(worker))),
        })
    }

    /// Queue a status for the app's revision; never waits on the network. A status
    /// still waiting for the same app is replaced (only the newest result matters).
    /// Returns false when the reporter has been shut down.
    pub fn report(&self, report: StatusReport) -> bool {
        // Equal results are skipped by the worker, not here: a different result for
        // the app may be waiting in the queue, and this one must replace it.
        let app = report.target.app.clone();
        self.queue.push(&app, report, Admission::ReplaceSameApp)
    }

    /// Forget what was posted for `app` (it was removed, or its target changed), so
    /// the next result is posted even if equal.
    pub fn forget(&self, app: &str) {
        self.posted.lock().remove(app);
    }

    /// Wait until every status queued so far has been posted or given up on.
    pub async fn flush(&self) {
        self.queue.flush().await;
    }

    /// Stop taking reports, post what is queued, and end the worker.
    pub async fn shutdown(&self) {
        self.queue.close();
        let worker = self.worker.lock().take();
        if let Some(worker) = worker {
            let _ = worker.await;
        }
    }

    pub fn stats(&self) -> DeliveryStats {
        self.queue.counters.snapshot()
    }
}

async fn deliver(
    clients: &delivery::Clients,
    options: &DeliveryOptions,
    queue: &Queue<StatusReport>,
    posted: &Posted,
    job: StatusReport,
) {
    let app = job.target.app.as_str();
    // Checked again here: a report queued before an equal one was posted.
    let unchanged = posted
        .lock()
        .get(app)
        .is_some_and(|(s, st)| *s == job.sha && *st == job.state);
    if unchanged {
        queue.counters.skipped();
        return;
    }
    let provider = job.target.provider.as_str();
    let result = match job.post() {
        Ok(post) => delivery::post_with_retry(clients, options, &queue.counters, &post).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(attempts) => {
            queue.counters.delivered();
            posted
                .lock()
                .insert(app.to_string(), (job.sha.clone(), job.state));
            tracing::debug!(app, provider, sha = %job.sha, state = ?job.state, attempts, "commit status posted");
        }
        Err(error) => {
            queue.counters.failed();
            tracing::warn!(app, provider, sha = %job.sha, state = ?job.state, %error, "commit status not posted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_and_name_come_from_every_url_form() {
        let cases = [
            "https://github.com/acme/shop.git",
            "https://github.com/acme/shop",
            "https://github.com/acme/shop/",
            "https://user@github.com/acme/shop.git",
            "http://git.local:3000/acme/shop.git",
            "ssh://git@github.com/acme/shop.git",
            "ssh://git@git.local:2222/acme/shop",
            "git@github.com:acme/shop.git",
            "git@github.com:acme/shop",
            "github.com:acme/shop.git",
            "https://git.local/gitea/acme/shop.git",
        ];
        for url in cases {
            assert_eq!(
                repository_from_url(Provider::Github, url).as_deref(),
                Ok("acme/shop"),
                "{url}"
            );
        }
    }

    #[test]
    fn gitlab_keeps_groups_and_encodes_the_project_path() {
        for url in [
            "https://gitlab.com/acme/platform/shop.git",
            "git@gitlab.com:acme/platform/shop.git",
            "ssh://git@gitlab.com:2222/acme/platform/shop",
            "https://gitlab.com/acme/platform/shop/-/tree/main",
        ] {
            assert_eq!(
                repository_from_url(Provider::Gitlab, url).as_deref(),
                Ok("acme/platform/shop"),
                "{url}"
            );
        }
    }

    #[test]
    fn urls_without_owner_and_name_are_refused() {
        for url in [
            "https://github.com/shop.git",
            "file:///srv/git/acme/shop",
            "/srv/git/acme/shop",
            "git@github.com:shop.git",
            "",
        ] {
            assert!(
                matches!(
                    repository_from_url(Provider::Github, url),
                    Err(CommitStatusError::Repository { .. })
                ),
                "{url}"
            );
        }
        assert!(repository_from_url(Provider::Gitlab, "https://gitlab.com/shop").is_err());
    }

    #[test]
    fn a_password_in_the_url_is_not_in_the_error() {
        let err = repository_from_url(Provider::Github, "https://me:hunter2@github.com/shop")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn the_config_resolves_with_defaults_and_names_what_is_wrong() {
        let yaml = "provider: github\ntokenEnv: GH_TOKEN\n";
        let config: CommitStatusConfig = serde_saphyr::from_str(yaml).unwrap();
        let target = config
            .resolve("shop", "git@github.com:acme/shop.git")
            .unwrap();
        assert_eq!(target.api_url, GITHUB_API_URL);
        assert_eq!(target.repository, "acme/shop");
        assert_eq!(target.context, "tether/shop");
        assert_eq!(target.token, SecretRef::Env("GH_TOKEN".into()));
        let by_id: CommitStatusConfig =
            serde_saphyr::from_str("provider: gitlab\ntokenEnv: T\nrepository: \"4242\"\n")
                .unwrap();
        assert_eq!(by_id.resolve("shop", "").unwrap().repository, "4242");

        let gitea: CommitStatusConfig =
            serde_saphyr::from_str("provider: gitea\ntokenFile: /run/token\n").unwrap();
        assert_eq!(
            gitea.resolve("shop", "https://git.local/acme/shop"),
            Err(CommitStatusError::MissingApiUrl { provider: "gitea" })
        );
        let both: CommitStatusConfig =
            serde_saphyr::from_str("provider: gitlab\ntokenFile: /run/token\ntokenEnv: T\n")
                .unwrap();
        assert_eq!(
            both.resolve("shop", "https://gitlab.com/acme/shop"),
            Err(CommitStatusError::Token)
        );
        let unknown = serde_saphyr::from_str::<CommitStatusConfig>(
            "provider: github\ntokenEnv: T\ntoken: abc\n",
        );
        assert!(unknown.is_err(), "unknown fields are refused");
        let bad_provider =
            serde_saphyr::from_str::<CommitStatusConfig>("provider: svn\ntokenEnv: T\n");
        assert!(bad_provider.is_err());
    }

    #[test]
    fn pass_outcomes_map_to_states() {
        use CommitState::*;
        use Health::*;
        assert_eq!(CommitState::from_pass(false, true, Healthy), Success);
        assert_eq!(CommitState::from_pass(false, false, Healthy), Pending);
        assert_eq!(CommitState::from_pass(false, true, Progressing), Pending);
        assert_eq!(CommitState::from_pass(false, true, Missing), Pending);
        assert_eq!(CommitState::from_pass(false, false, Degraded), Failure);
        assert_eq!(CommitState::from_pass(true, true, Healthy), Failure);
    }
}
