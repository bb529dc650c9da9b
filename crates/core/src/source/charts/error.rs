//! Why a chart's dependencies could not be vendored: each error names the chart, the
//! dependency and the repository (credentials in its URL redacted), and says whether
//! a retry can help.

use super::archive::ArchiveProblem;
use crate::outbound::OutboundError;

/// What a fetched digest was checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// An archive, against its index.yaml entry.
    Index,
    /// An OCI chart layer, against its manifest.
    Layer,
    /// An OCI manifest, against the digest the registry or the reference named.
    Manifest,
    /// A chart's files, against the revision that named them.
    Revision,
}

impl Checked {
    fn what(self) -> &'static str {
        match self {
            Checked::Index | Checked::Layer => "archive",
            Checked::Manifest => "manifest",
            Checked::Revision => "chart",
        }
    }

    fn by(self) -> &'static str {
        match self {
            Checked::Index => "index.yaml",
            Checked::Layer => "the manifest",
            Checked::Manifest => "the registry",
            Checked::Revision => "the revision",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// Chart.yaml or Chart.lock does not parse: the revision must change.
    #[error("{file}: {message}")]
    Metadata { file: String, message: String },
    /// A Chart.lock is present and does not list this dependency.
    #[error(
        "{chart}: dependency {dependency} ({repository}) is missing from Chart.lock \
         (run `helm dependency update` and commit Chart.lock)"
    )]
    NotInLock {
        chart: String,
        dependency: String,
        repository: String,
    },
    /// A `file://` dependency pointing out of the revision (`..` past its root).
    #[error("{chart}: dependency {dependency}: {repository} leaves the repository")]
    OutsideRepository {
        chart: String,
        dependency: String,
        repository: String,
    },
    /// A `file://` dependency whose folder holds no chart of that name.
    #[error("{chart}: dependency {dependency}: {repository} holds no chart {dependency}")]
    MissingLocal {
        chart: String,
        dependency: String,
        repository: String,
    },
    /// A repository tether does not fetch from: `@name` aliases of a local Helm setup.
    #[error(
        "{chart}: dependency {dependency}: repository {repository} is not supported \
         (an http(s):// Helm repository, an oci:// registry or a file:// path is; \
         or vendor the chart in charts/)"
    )]
    Unsupported {
        chart: String,
        dependency: String,
        repository: String,
    },
    /// The repository could not be reached (connection, timeout): retryable.
    #[error("{repo}: {what}: {message}")]
    Unreachable {
        repo: String,
        what: String,
        message: String,
    },
    /// The repository answered with an error status; 5xx and 429 are retryable.
    #[error("{repo}: {what}: HTTP {status}")]
    Status {
        repo: String,
        what: String,
        status: u16,
    },
    /// The SSRF guard refused the repository's address.
    #[error("{repo}: {source}")]
    Refused {
        repo: String,
        #[source]
        source: OutboundError,
    },
    /// A response over its size budget.
    #[error("{repo}: {what} is over {limit} bytes")]
    TooLarge {
        repo: String,
        what: String,
        limit: u64,
    },
    /// index.yaml does not parse, or its entry lacks what a download needs.
    #[error("{repo}: index.yaml: {message}")]
    Index { repo: String, message: String },
    #[error("{repo}: no chart {chart} in index.yaml (it has: {available})")]
    UnknownChart {
        repo: String,
        chart: String,
        available: String,
    },
    #[error("{repo}: chart {chart} has no version matching {constraint:?} (versions: {versions})")]
    UnknownVersion {
        repo: String,
        chart: String,
        constraint: String,
        versions: String,
    },
    /// An OCI artifact source's tag (or range, or digest) the registry does not hold.
    #[error("{repo}: no tag or digest matching {reference:?} (tags: {tags})")]
    UnknownTag {
        repo: String,
        reference: String,
        tags: String,
    },
    /// A dependency's `version` that is no semver range.
    #[error(
        "{chart}: dependency {dependency}: version {constraint:?} is not a semver range: {message}"
    )]
    BadConstraint {
        chart: String,
        dependency: String,
        constraint: String,
        message: String,
    },
    /// What was fetched is not what index.yaml, an OCI manifest or the revision
    /// named: the repository must change.
    #[error(
        "{repo}: {chart}-{version}: the {}'s digest is {actual}, {} says {expected}",
        .checked.what(),
        .checked.by()
    )]
    DigestMismatch {
        repo: String,
        chart: String,
        version: String,
        checked: Checked,
        expected: String,
        actual: String,
    },
    /// An OCI registry's answer that is no Helm chart (another artifact's media
    /// types, no chart layer, a manifest that does not parse, a bad reference).
    #[error("{repo}: {chart}: {message}")]
    Registry {
        repo: String,
        chart: String,
        message: String,
    },
    #[error("{repo}: {chart}-{version}: {problem}")]
    Archive {
        repo: String,
        chart: String,
        version: String,
        #[source]
        problem: ArchiveProblem,
    },
    /// A dependency's repository refused or failed its request: the chart and
    /// the dependency named, and whether tether had credentials for it.
    #[error(
        "{chart}: dependency {dependency}: {source}{}",
        if *.anonymous && .source.is_refusal() {
            " (fetched anonymously: no source.dependencyCredentials entry matches \
             its repository)"
        } else {
            ""
        }
    )]
    Dependency {
        chart: String,
        dependency: String,
        anonymous: bool,
        #[source]
        source: Box<ChartError>,
    },
}

impl ChartError {
    /// Whether trying again later can help without a change to Git or the repository.
    pub fn is_retryable(&self) -> bool {
        match self {
            ChartError::Dependency { source, .. } => source.is_retryable(),
            ChartError::Unreachable { .. } => true,
            ChartError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// A short CamelCase reason for a chart source's `Ready=False` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            ChartError::Dependency { source, .. } => source.reason(),
            ChartError::Unreachable { .. } => "RemoteUnreachable",
            ChartError::Status {
                status: 401 | 403, ..
            } => "AuthenticationFailed",
            ChartError::UnknownChart { .. } | ChartError::UnknownVersion { .. } => {
                "ChartVersionNotFound"
            }
            ChartError::UnknownTag { .. } => "ArtifactNotFound",
            ChartError::DigestMismatch { .. } => "DigestMismatch",
            _ => "ChartFailed",
        }
    }
}

impl ChartError {
    /// Whether the repository refused the request (`401`, `403`): credentials
    /// missing or wrong.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ChartError::Status {
                status: 401 | 403,
                ..
            }
        )
    }

    /// This error of a request for dependency `dependency` of the chart at `chart`,
    /// fetched with a login (`anonymous` false) or without; errors that already name
    /// them (a version, a lock) stay as they are.
    pub(super) fn of_dependency(self, chart: &str, dependency: &str, login: bool) -> ChartError {
        match self {
            ChartError::Unreachable { .. }
            | ChartError::Status { .. }
            | ChartError::Refused { .. }
            | ChartError::TooLarge { .. }
            | ChartError::Index { .. }
            | ChartError::UnknownChart { .. }
            | ChartError::Registry { .. } => ChartError::Dependency {
                chart: chart.to_string(),
                dependency: dependency.to_string(),
                anonymous: !login,
                source: Box::new(self),
            },
            other => other,
        }
    }
}
