//! The ways the source stage fails, each saying whether a retry can help.

use std::fmt;
use std::time::Duration;

use super::charts::ChartError;
use super::read::BudgetKind;
use super::url::{redact, redact_known};

/// A source stage failure. None is fatal: the caller keeps the last good revision and
/// reports `Ready=False` with [`SourceError::reason`].
///
/// Retryable errors are worth a backoff and another try unchanged; the others need a
/// change (credentials, configuration, a push) before a retry can succeed, so the
/// reconciler should stall and report rather than hammer the remote.
///
/// Every message is shown through [`super::redact`]: a credential in a repository URL,
/// or in a libgit2 message quoting one, never reaches a log, a status or the CLI.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The remote could not be reached (network down, server gone, DNS, TLS).
    /// Retryable.
    #[error("remote {} unreachable: {}", redact(.url), redact(.message))]
    Unreachable { url: String, message: String },

    /// The remote answered that no repository lives at this URL (HTTP 404). Not
    /// retryable: the URL is wrong, the repository is gone, or the credentials may not
    /// see it (GitHub, GitLab and Bitbucket answer 404, not 403, for a private
    /// repository out of reach).
    #[error(
        "repository {} not found (HTTP 404): check the URL, and that the credentials may read it",
        redact(.url)
    )]
    RepoNotFound { url: String },

    /// The remote did not answer in time: no connection within the connect timeout,
    /// no byte within the read timeout, or the whole fetch (or `ls-remote`) past its
    /// deadline. Retryable: a black-holed host often comes back, and the per-repository
    /// lock has been released so other syncs go on meanwhile.
    #[error("remote {} timed out: {timeout} of {} exceeded", redact(.url), seconds(*.after))]
    Timeout {
        url: String,
        /// Which limit was hit.
        timeout: TimeoutKind,
        /// The limit's value.
        after: Duration,
    },

    /// The remote refused our credentials, or none were configured but some were
    /// required. Not retryable: the credentials must change.
    #[error("authentication to {} refused: {}", redact(.url), redact(.message))]
    AuthRefused { url: String, message: String },

    /// A credential could not be read from its environment variable or file, or an SSH
    /// key / known_hosts file is missing. Not retryable until the file or variable exists.
    #[error("credentials for {}: {}", redact(.url), redact(.message))]
    Credentials { url: String, message: String },

    /// The server's SSH host key is not in known_hosts, or does not match it. Not
    /// retryable: someone has to trust the key (or find out why it changed).
    #[error("host key of {host} not trusted: {}", redact(.message))]
    HostKeyUnknown { host: String, message: String },

    /// The reference (branch, tag or SHA) does not exist on the remote. Not retryable
    /// until someone pushes it.
    #[error("reference {reference:?} not found in {}", redact(.url))]
    RefMissing { url: String, reference: String },

    /// The path does not exist at this revision. Not retryable until a commit adds it.
    #[error("path {path:?} does not exist at revision {sha}")]
    PathMissing { path: String, sha: String },

    /// The path leaves the repository (`..`), or a symlink under it points outside the
    /// path root. Not retryable: the configuration or the repository must change.
    #[error("{file:?} points outside {root:?}: {message}")]
    OutsideRoot {
        file: String,
        root: String,
        message: String,
    },

    /// A file is larger than the per-file limit. Not retryable.
    #[error("file {file:?} is {size} bytes, above the {limit}-byte limit")]
    FileTooLarge { file: String, size: u64, limit: u64 },

    /// A tree entry has a name `git fsck` refuses (`..`, `.git` in any spelling, a `/`
    /// or NUL): nothing of the revision is read. Not retryable: a commit must remove it.
    #[error("tree entry {path:?} refused: {message}")]
    UnsafeEntry { path: String, message: String },

    /// Reading the path at this revision ran past its budget (files, bytes or objects;
    /// [`super::RevisionBudget`]), stopped at `at`. Not retryable: the repository must
    /// shrink, or the operator raise the budget.
    #[error(
        "reading {root:?} exceeds the budget of {limit} {kind} (stopped at {at:?}): a Git \
         bomb, or raise sources.budget.{kind_key}",
        kind_key = budget_key(*.kind)
    )]
    RevisionTooLarge {
        root: String,
        at: String,
        kind: BudgetKind,
        limit: u64,
    },

    /// A server other than the source's (another host, port or scheme: a redirect)
    /// asked for the source's credentials, and was given none. Not retryable: the
    /// URL must name the server that holds the repository.
    #[error("credentials for {} withheld from {}: they are given only to the scheme, host and port they belong to", redact(.url), redact(.asked))]
    CredentialsWithheld { url: String, asked: String },

    /// The revision was not fetched or listed with this source's own credentials (it
    /// never synced, or synced another revision). Retryable: a sync of the source
    /// checks it.
    #[error("revision {sha} was not fetched for {} with its own credentials", redact(.url))]
    NotVerified { url: String, sha: String },

    /// An earlier revision asked for (a rollback's) is not in the history of the
    /// revision the source is at: never this branch's, or rewritten away. Not
    /// retryable: another revision must be asked for.
    #[error("revision {sha} is not in the history of {} at {head}", redact(.url))]
    NotAncestor {
        url: String,
        sha: String,
        head: String,
    },

    /// The local clone is damaged and could not be repaired by re-cloning (the repair
    /// itself needs the remote). Retryable: the next sync re-clones again.
    #[error("cache of {} is corrupt: {}", redact(.url), redact(.message))]
    CacheCorrupt { url: String, message: String },

    /// The cache directory could not be created or written. Retryable (disk full,
    /// permissions fixed by an operator).
    #[error("cache directory {path}: {source}")]
    CacheIo {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// Any other libgit2 failure. Retryable.
    #[error("git: {}", redact(.message))]
    Git { message: String },

    /// A chart source's repository, index or archive failed (issue #26); retryable
    /// as the [`ChartError`] says. Its message redacts the repository's credentials.
    #[error("chart source: {0}")]
    Chart(Box<ChartError>),
}

impl From<ChartError> for SourceError {
    fn from(err: ChartError) -> Self {
        SourceError::Chart(Box::new(err))
    }
}

/// Which of the transport's limits a [`SourceError::Timeout`] hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// No TCP connection within [`super::DEFAULT_CONNECT_TIMEOUT`].
    Connect,
    /// A connected server sent nothing within [`super::DEFAULT_READ_TIMEOUT`].
    Read,
    /// The whole fetch or `ls-remote` ran past its deadline
    /// ([`super::GitTimeouts::deadline`]).
    Deadline,
}

impl fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutKind::Connect => "connect timeout",
            TimeoutKind::Read => "read timeout",
            TimeoutKind::Deadline => "deadline",
        })
    }
}

/// The configuration key of a budget, as the message tells an operator to raise it.
fn budget_key(kind: BudgetKind) -> &'static str {
    match kind {
        BudgetKind::Files => "files",
        BudgetKind::Bytes => "bytes",
        BudgetKind::Objects => "objects",
    }
}

/// `30s`, `1.5s`: a limit as a person reads it.
fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

impl SourceError {
    /// The same error with every credential of `url` (the source's configured URL)
    /// masked in every field, including libgit2's own messages that quote the URL, so
    /// that even `{:?}` of the error shows none.
    pub(crate) fn redact(self, url: &str) -> Self {
        let fix = |s: String| redact_known(&s, url);
        match self {
            SourceError::Unreachable { url, message } => SourceError::Unreachable {
                url: fix(url),
                message: fix(message),
            },
            SourceError::RepoNotFound { url } => SourceError::RepoNotFound { url: fix(url) },
            SourceError::Timeout {
                url: u,
                timeout,
                after,
            } => SourceError::Timeout {
                url: fix(u),
                timeout,
                after,
            },
            SourceError::AuthRefused { url, message } => SourceError::AuthRefused {
                url: fix(url),
                message: fix(message),
            },
            SourceError::Credentials { url, message } => SourceError::Credentials {
                url: fix(url),
                message: fix(message),
            },
            SourceError::HostKeyUnknown { host, message } => SourceError::HostKeyUnknown {
                host,
                message: fix(message),
            },
            SourceError::RefMissing { url, reference } => SourceError::RefMissing {
                url: fix(url),
                reference,
            },
            SourceError::CacheCorrupt { url, message } => SourceError::CacheCorrupt {
                url: fix(url),
                message: fix(message),
            },
            SourceError::Git { message } => SourceError::Git {
                message: fix(message),
            },
            SourceError::CredentialsWithheld { url, asked } => SourceError::CredentialsWithheld {
                url: fix(url),
                asked: fix(asked),
            },
            SourceError::NotVerified { url, sha } => {
                SourceError::NotVerified { url: fix(url), sha }
            }
            SourceError::NotAncestor { url, sha, head } => SourceError::NotAncestor {
                url: fix(url),
                sha,
                head,
            },
            other => other,
        }
    }

    /// Whether retrying unchanged (with backoff) can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            SourceError::Unreachable { .. }
            | SourceError::Timeout { .. }
            | SourceError::CacheCorrupt { .. }
            | SourceError::CacheIo { .. }
            | SourceError::NotVerified { .. }
            | SourceError::Git { .. } => true,
            SourceError::Chart(err) => err.is_retryable(),
            SourceError::AuthRefused { .. }
            | SourceError::Credentials { .. }
            | SourceError::HostKeyUnknown { .. }
            | SourceError::RepoNotFound { .. }
            | SourceError::RefMissing { .. }
            | SourceError::PathMissing { .. }
            | SourceError::OutsideRoot { .. }
            | SourceError::FileTooLarge { .. }
            | SourceError::UnsafeEntry { .. }
            | SourceError::RevisionTooLarge { .. }
            | SourceError::CredentialsWithheld { .. }
            | SourceError::NotAncestor { .. } => false,
        }
    }

    /// A short CamelCase reason for status conditions (`Ready=False, reason=…`).
    pub fn reason(&self) -> &'static str {
        match self {
            SourceError::Unreachable { .. } => "RemoteUnreachable",
            SourceError::Chart(err) => err.reason(),
            SourceError::RepoNotFound { .. } => "RepositoryNotFound",
            SourceError::Timeout { .. } => "RemoteTimeout",
            SourceError::AuthRefused { .. } => "AuthenticationFailed",
            SourceError::Credentials { .. } => "CredentialsUnavailable",
            SourceError::HostKeyUnknown { .. } => "HostKeyUnknown",
            SourceError::RefMissing { .. } => "RefNotFound",
            SourceError::PathMissing { .. } => "PathNotFound",
            SourceError::OutsideRoot { .. } => "PathOutsideRoot",
            SourceError::FileTooLarge { .. } => "FileTooLarge",
            SourceError::UnsafeEntry { .. } => "UnsafeTreeEntry",
            SourceError::RevisionTooLarge { .. } => "RevisionTooLarge",
            SourceError::CredentialsWithheld { .. } => "CredentialsWithheld",
            SourceError::NotVerified { .. } => "RevisionNotVerified",
            SourceError::NotAncestor { .. } => "RevisionNotInHistory",
            SourceError::CacheCorrupt { .. } => "CacheCorrupt",
            SourceError::CacheIo { .. } => "CacheUnavailable",
            SourceError::Git { .. } => "GitError",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_error_displays_or_debugs_a_credential() {
        let url = "https://user:pa/ss@h.example/r.git";
        let errors = [
            SourceError::Unreachable {
                url: url.into(),
                message: format!("failed to connect to {url}"),
            },
            SourceError::Timeout {
                url: url.into(),
                timeout: TimeoutKind::Read,
                after: Duration::from_secs(30),
            },
            SourceError::AuthRefused {
                url: url.into(),
                message: "refused".into(),
            },
            SourceError::RefMissing {
                url: url.into(),
                reference: "main".into(),
            },
            SourceError::Git {
                message: format!("unexpected http status for {url}/info/refs"),
            },
        ];
        for e in errors {
            let shown = e.to_string();
            assert!(
                !shown.contains("pa/ss") && !shown.contains("ss@"),
                "{shown}"
            );
            let redacted = e.redact(url);
            let debug = format!("{redacted:?}");
            assert!(!debug.contains("pa/ss"), "{debug}");
        }
    }

    #[test]
    fn a_timeout_names_the_limit_and_is_retryable() {
        let e = SourceError::Timeout {
            url: "git://TOKEN9@h/r".into(),
            timeout: TimeoutKind::Deadline,
            after: Duration::from_millis(1500),
        };
        assert_eq!(
            e.to_string(),
            "remote git://***@h/r timed out: deadline of 1.5s exceeded"
        );
        assert!(e.is_retryable());
        assert_eq!(e.reason(), "RemoteTimeout");
    }
}
