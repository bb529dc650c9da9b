//! Git, the source of truth: clone, fetch, and read one exact revision; and the
//! chart dependencies a revision's chart names ([`charts`]), fetched from Helm
//! repositories into a shared cache.
//!
//! The first stage of the loop. A [`Source`] is a repository URL, a reference (branch,
//! tag or full commit SHA) and a path inside the repository. [`SourceCache`] keeps one
//! bare clone per repository, scheme and credentials under a cache directory, fetches
//! it incrementally, resolves the reference to one commit ([`Revision`]) and reads the
//! files under the path straight from that commit's tree (no working tree, so a reader
//! of revision X never sees a file of revision Y). A repository is hostile input: tree
//! entries are checked as `git fsck` checks them and a read spends a
//! [`RevisionBudget`]; a revision is read for a source only after its own credentials
//! fetched it.
//!
//! Triggers live here too: [`SourceWatcher`] polls one source at an interval with
//! jitter (never more often than a minimum interval, backing off while it fails) and
//! wakes early when [`webhook_router`] receives a matching push from a Git provider.
//!
//! A source may require signed commits ([`VerifyPolicy`]): the revision is checked
//! against trusted OpenPGP and SSH keys ([`signature`]) before anything renders it.
//!
//! Failures are [`SourceError`]s: typed, never fatal, each documented as retryable or
//! not. The last good revision of a source stays in use and [`SourceCache::status`]
//! reports `Ready=False` with the reason, since when it fails and when it last worked.
//! Every conversation with a remote is bounded ([`GitTimeouts`]), and every message
//! the stage writes goes through one redaction of credentials in URLs ([`redact`]).

mod auth;
mod cache;
pub mod charts;
mod clone_key;
mod error;
mod local;
mod poll;
mod provider;
mod read;
mod records;
mod refs;
pub mod signature;
mod timeout;
mod url;
mod verify;
mod webhook;

pub use auth::is_ssh_url;
pub use auth::{Auth, CredentialsSecret, SecretRef};
pub use cache::{CacheOptions, SourceCache, SourceHold};
pub use error::{SourceError, TimeoutKind};
pub use local::LocalRepo;
pub use poll::{
    DEFAULT_COALESCE_WINDOW, DEFAULT_MIN_POLL_INTERVAL, DEFAULT_POLL_INTERVAL, DEFAULT_POLL_JITTER,
    MAX_FAILURE_BACKOFF, PollConfig, PushedRef, PushedRepo, SourceState, SourceWatcher, Trigger,
    Triggers,
};
pub use provider::{AzureRepo, Provider};
pub use read::{
    BudgetKind, DEFAULT_MAX_REVISION_BYTES, DEFAULT_MAX_REVISION_FILES,
    DEFAULT_MAX_REVISION_OBJECTS, FileKind, MAX_FILE_BYTES, RevisionBudget, SourceFile,
    check_entry_name,
};
pub use records::SourceStatus;
pub use timeout::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_FETCH_DEADLINE, DEFAULT_READ_TIMEOUT, GitTimeouts,
};
pub use url::{RepoKey, check_tenant_repo_url, normalize_repo_url, redact, redact_url};
pub use verify::{
    MAX_COMMITS_PER_CHECK, Verdicts, Verified, VerifyError, VerifyMode, VerifyPolicy,
};
pub use webhook::{
    AZURE_DEVOPS_SECRET_HEADER, DEFAULT_WEBHOOK_BODY_LIMIT, WebhookConfig, WebhookSecret,
    WebhookState, webhook_router,
};

use std::fmt;

/// Where an application's desired state lives: one path of one reference of one
/// repository. Its `Debug` and `Display` show the URL redacted ([`redact`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Source {
    /// Repository URL: `file://`, a plain local path, `git://`, `http(s)://`,
    /// `ssh://` or scp-like `user@host:path`.
    pub url: String,
    /// A branch (`main`), a tag (`v1.2.0`), a full ref name (`refs/heads/main`), a
    /// full 40-hex commit SHA, or `HEAD` (also `""`) for the remote's default branch.
    pub reference: String,
    /// Directory (or single file) inside the repository; `""` or `"."` is the root.
    pub path: String,
    /// How to authenticate; credentials are read from the environment or a file at
    /// fetch time, never stored in the configuration itself.
    pub auth: Auth,
    /// A chart of the Helm repository at `url` instead of a Git repository (issue #26):
    /// its name; `reference` is then the version or semver range and `path` is empty.
    pub chart: Option<String>,
    /// An OCI artifact of plain manifests at `url` (`oci://host/path/name`) instead of
    /// a Git repository (issue #26, Flux's `OCIRepository`): `reference` is then a tag,
    /// a semver range over the tags or a manifest digest, and `path` a folder in it.
    pub artifact: bool,
    /// Credentials for a chart's dependencies on other repositories (issue #26):
    /// Secrets matched by repository URL prefix (`source.dependencyCredentials`).
    pub dependency_credentials: Vec<charts::DependencyCredential>,
}

impl Source {
    /// A source without credentials.
    pub fn new(
        url: impl Into<String>,
        reference: impl Into<String>,
        path: impl Into<String>,
    ) -> Self {
        Source {
            url: url.into(),
            reference: reference.into(),
            path: path.into(),
            auth: Auth::None,
            chart: None,
            artifact: false,
            dependency_credentials: Vec::new(),
        }
    }

    /// The OCI artifact `repo` (`oci://host/path/name`) at `tag` (exact, a semver
    /// range over the tags, or `sha256:<hex>`), its folder `path` read as a Git path is.
    pub fn artifact(
        repo: impl Into<String>,
        tag: impl Into<String>,
        path: impl Into<String>,
    ) -> Self {
        Source {
            artifact: true,
            ..Source::new(repo, tag, path)
        }
    }

    /// Whether a registry, not a Git repository, serves this source (a chart or an
    /// OCI artifact): no clone, no commits, revisions named by digests.
    pub fn is_registry(&self) -> bool {
        self.chart.is_some() || self.artifact
    }

    /// Chart `name` of the Helm repository at `repo`, at the newest version `version`
    /// (exact or a semver range) allows when it is synced.
    pub fn chart(
        repo: impl Into<String>,
        name: impl Into<String>,
        version: impl Into<String>,
    ) -> Self {
        Source {
            chart: Some(name.into()),
            ..Source::new(repo, version, "")
        }
    }

    /// The same source with credentials.
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// The same source with credentials for its chart's dependencies.
    pub fn with_dependency_credentials(
        mut self,
        credentials: Vec<charts::DependencyCredential>,
    ) -> Self {
        self.dependency_credentials = credentials;
        self
    }

    /// The repository this source reads, normalized so that https/ssh/scp-like,
    /// `.git` and case variants of one repository are one (webhooks match on it; a
    /// clone is shared only with the same scheme and credentials too).
    pub fn repo_key(&self) -> RepoKey {
        normalize_repo_url(&self.url)
    }

    /// True when the reference is a full commit SHA (a pin that never moves).
    pub fn is_pinned(&self) -> bool {
        is_full_sha(&self.reference)
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("url", &redact(&self.url))
            .field("reference", &self.reference)
            .field("path", &self.path)
            .field("auth", &self.auth)
            .field("chart", &self.chart)
            .field("artifact", &self.artifact)
            .field("dependency_credentials", &self.dependency_credentials)
            .finish()
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.chart {
            Some(chart) => write!(f, "{} chart {chart}@{}", redact(&self.url), self.reference),
            None => write!(f, "{}@{}:{}", redact(&self.url), self.reference, self.path),
        }
    }
}

/// One resolved commit (or, for a chart source, `chart@version@sha256:<digest>`):
/// what every downstream stage reads and reports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Revision {
    /// Full 40-hex commit SHA; a chart source's `chart@version@sha256:<digest>`.
    pub sha: String,
    /// First line of the commit message.
    pub subject: String,
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.short(), self.subject)
    }
}

impl Revision {
    /// The revision as people read it: a commit's first 12 hex digits, a chart's
    /// `chart@version` (its digest is in [`Revision::sha`]).
    pub fn short(&self) -> &str {
        if is_full_sha(&self.sha) {
            return self.sha.get(..12).unwrap_or(&self.sha);
        }
        match self.sha.rsplit_once('@') {
            Some((chart, digest)) if digest.starts_with("sha256:") => chart,
            _ => &self.sha,
        }
    }
}

pub(crate) fn is_full_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_never_shows_the_credentials_of_its_url() {
        let s = Source::new(
            "https://ci:hunter2-token@git.example.com/o/r.git",
            "main",
            "k8s",
        );
        for shown in [s.to_string(), format!("{s:?}"), format!("{s:#?}")] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(
                shown.contains("https://***@git.example.com/o/r.git"),
                "{shown}"
            );
        }
    }
}
