//! The ways the source stage fails, each saying whether a retry can help.

/// A source stage failure. None is fatal: the caller keeps the last good revision and
/// reports `Ready=False` with [`SourceError::reason`].
///
/// Retryable errors are worth a backoff and another try unchanged; the others need a
/// change (credentials, configuration, a push) before a retry can succeed, so the
/// reconciler should stall and report rather than hammer the remote.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The remote could not be reached (network down, server gone, DNS, TLS).
    /// Retryable.
    #[error("remote {url} unreachable: {message}")]
    Unreachable { url: String, message: String },

    /// The remote refused our credentials, or none were configured but some were
    /// required. Not retryable: the credentials must change.
    #[error("authentication to {url} refused: {message}")]
    AuthRefused { url: String, message: String },

    /// A credential could not be read from its environment variable or file, or an SSH
    /// key / known_hosts file is missing. Not retryable until the file or variable exists.
    #[error("credentials for {url}: {message}")]
    Credentials { url: String, message: String },

    /// The server's SSH host key is not in known_hosts, or does not match it. Not
    /// retryable: someone has to trust the key (or find out why it changed).
    #[error("host key of {host} not trusted: {message}")]
    HostKeyUnknown { host: String, message: String },

    /// The reference (branch, tag or SHA) does not exist on the remote. Not retryable
    /// until someone pushes it.
    #[error("reference {reference:?} not found in {url}")]
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

    /// The local clone is damaged and could not be repaired by re-cloning (the repair
    /// itself needs the remote). Retryable: the next sync re-clones again.
    #[error("cache of {url} is corrupt: {message}")]
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
    #[error("git: {message}")]
    Git { message: String },
}

impl SourceError {
    /// The same error with the password of `url` (if it has one) replaced by `***`
    /// everywhere, including in libgit2's own messages, which may quote the URL.
    pub(crate) fn redact(self, url: &str) -> Self {
        let Some(password) = super::url::password_in(url) else {
            return self;
        };
        let fix = |s: String| s.replace(password, "***");
        match self {
            SourceError::Unreachable { url, message } => SourceError::Unreachable {
                url: fix(url),
                message: fix(message),
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
            other => other,
        }
    }

    /// Whether retrying unchanged (with backoff) can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            SourceError::Unreachable { .. }
            | SourceError::CacheCorrupt { .. }
            | SourceError::CacheIo { .. }
            | SourceError::Git { .. } => true,
            SourceError::AuthRefused { .. }
            | SourceError::Credentials { .. }
            | SourceError::HostKeyUnknown { .. }
            | SourceError::RefMissing { .. }
            | SourceError::PathMissing { .. }
            | SourceError::OutsideRoot { .. }
            | SourceError::FileTooLarge { .. } => false,
        }
    }

    /// A short CamelCase reason for status conditions (`Ready=False, reason=…`).
    pub fn reason(&self) -> &'static str {
        match self {
            SourceError::Unreachable { .. } => "RemoteUnreachable",
            SourceError::AuthRefused { .. } => "AuthenticationFailed",
            SourceError::Credentials { .. } => "CredentialsUnavailable",
            SourceError::HostKeyUnknown { .. } => "HostKeyUnknown",
            SourceError::RefMissing { .. } => "RefNotFound",
            SourceError::PathMissing { .. } => "PathNotFound",
            SourceError::OutsideRoot { .. } => "PathOutsideRoot",
            SourceError::FileTooLarge { .. } => "FileTooLarge",
            SourceError::CacheCorrupt { .. } => "CacheCorrupt",
            SourceError::CacheIo { .. } => "CacheUnavailable",
            SourceError::Git { .. } => "GitError",
        }
    }
}
