//! How a command ended, for `main` to map to an exit code in one place (the
//! `kubectl diff` convention): 0 nothing to report, 1 a finding, 2 an error.

use std::error::Error as _;
use std::path::PathBuf;

use tether_controller::config::ConfigError;
use tether_controller::server::service::ServeError;
use tether_core::cluster::ClusterError;
use tether_core::source::SourceError;
use tether_core::sync::SyncError;
use tether_core::sync::desired::DesiredError;
#[cfg(feature = "sandbox")]
use tether_sandbox::SandboxError;

/// Exit code of a command that could not do its work: every [`Error`].
pub const EXIT_ERROR: u8 = 2;

/// Exit code of a command that ran to its end and found something wrong.
const EXIT_FINDING: u8 = 1;

/// How a command that ran to its end ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to report: in sync, synced and healthy, or a command that only shows.
    Success,
    /// `tether diff`: the live state differs from the desired state.
    Drift,
    /// `tether sync`: an object failed, prune was refused or the app did not become
    /// healthy.
    SyncFailed,
    /// `tether status`: an app is not both Synced and Healthy.
    NotReady,
}

impl Outcome {
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Success => 0,
            Outcome::Drift | Outcome::SyncFailed | Outcome::NotReady => EXIT_FINDING,
        }
    }
}

/// Why a command could not do its work: bad input or configuration, a cluster, Git
/// remote or server that cannot be reached or refuses. `main` prints it once, as
/// `error: <message>`, and exits [`EXIT_ERROR`]; the message says the cause too.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Logging could not be set up (a subscriber was already installed).
    #[error("cannot set up logging: {0}")]
    Logging(String),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The command's output could not be written (a reader gone is not this error).
    #[error("{0}")]
    Output(#[source] std::io::Error),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A blocking task of the command panicked: a bug, never the input's fault.
    #[error("{0}")]
    Internal(#[from] tokio::task::JoinError),

    /// The desired (or, offline, live) state is invalid, or the Git source behind
    /// it cannot be read.
    #[error("{0}")]
    Desired(#[from] DesiredError),
    /// The cluster could not be observed: unreachable, or it refused to validate.
    #[error("{0}")]
    Observe(#[source] SyncError),
    /// One app of `tether diff --config` could not be observed.
    #[error("app {app}: {error}")]
    App {
        app: String,
        #[source]
        error: Box<Error>,
    },
    /// A SOPS key file (`--sops-key-file`, `SOPS_AGE_KEY…`) is unreadable or holds no key.
    #[error("{0}")]
    SopsKey(#[from] tether_sops::SopsError),
    /// A `--verify-key` file is unreadable.
    #[error("cannot read the verification key {}: {source}", path.display())]
    VerifyKeyFile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A `--verify-key` file holds no key tether can use (named, never its bytes).
    #[error("{0}")]
    VerifyKey(#[source] tether_core::source::signature::KeyError),
    /// The service configuration is invalid.
    #[error("{0}")]
    Config(#[source] ConfigError),
    #[error("{}: no app named {app:?}", config.display())]
    NoSuchApp { config: PathBuf, app: String },
    #[error("JUnit output covers one app: pass --app, or use -o json")]
    JunitForSeveralApps,
    #[error(
        "--live with --config needs --base (each app's head against the snapshot); without it, --config compares each app with its own cluster"
    )]
    LiveWithConfig,
    /// `tether diff --base` could not read the checkout or a commit.
    #[error("{0}")]
    Preview(#[source] tether_core::sync::preview::PreviewError),
    /// `tether diff --base --fail-on-error`: apps whose render failed (reported).
    #[error("render failed for app(s) {}", apps.join(", "))]
    RenderFailed { apps: Vec<String> },
    /// `--comment` cannot name its pull request, provider, API or token.
    #[error("--comment: {0}")]
    CommentTarget(String),
    /// The pull-request comment was not posted (the report was printed).
    #[error("the pull-request comment was not posted: {0}")]
    Comment(#[source] tether_core::report::comment::CommentError),
    #[error("cannot write the report to {}: {source}", dir.display())]
    OutputDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}: no app reads this repository\nhint: an app's source.repo must be one of this checkout's remotes (git remote -v) or its directory",
        config.display()
    )]
    NoAppReadsRepository { config: PathBuf },
    /// The Git cache directory cannot be created.
    #[error("{0}")]
    Cache(#[source] SourceError),
    /// A Git source (`at`, as it prints itself) cannot be fetched or read; its reason
    /// is the one the service reports for it.
    #[error("{at}: {error} ({})", error.reason())]
    Source {
        at: String,
        #[source]
        error: SourceError,
    },
    #[error("{0}")]
    Connect(#[source] ClusterError),
    /// Post-build variables (`--var`, `--vars-file`, an app's `substituteFrom`)
    /// cannot be read; the message names where, never a value.
    #[error("post-build variables: {0}")]
    Vars(String),
    /// An app's SOPS keys (`decryption`: its Secret, its key files) cannot be read;
    /// the message names where, never a key.
    #[error("{0}")]
    Decryption(#[source] tether_controller::reconcile::decryption::DecryptionError),
    /// An app's chart values (`source.helm.valuesFrom`) cannot be read; the message
    /// names the ConfigMap or Secret and key, never a value.
    #[error("{0}")]
    Values(#[source] tether_controller::reconcile::values::ValuesError),
    /// `--chart` is no chart URL (issue #26).
    #[error(
        "--chart {url}: not a chart URL (oci://HOST/PATH/NAME, or https://HOST/PATH/NAME for chart NAME of a Helm repository)"
    )]
    ChartUrl { url: String },
    /// A `--values` file given with `--chart` cannot be read or holds no values mapping.
    #[error("--values {file}: {problem}")]
    LocalValues { file: String, problem: String },
    /// No kubeconfig or in-cluster configuration names a cluster: the message says
    /// kube's reason, the hint the flags that name one.
    #[error("{error}\nhint: {hint}")]
    NoCluster {
        #[source]
        error: ClusterError,
        hint: &'static str,
    },
    /// `tether diff` found no manifests to compare, which a wrong `--path` gives too.
    #[error(
        "no manifests in {path}: no .yaml, .yml or .json file there holds a Kubernetes object\nhint: check --path, or pass --allow-empty if an empty desired state is intended"
    )]
    NoManifests { path: String },
    /// `tether sync` could not run at all (per-object failures are an outcome).
    #[error("{0}")]
    Sync(#[source] SyncError),
    #[error("{0}")]
    Serve(#[source] ServeError),
    #[cfg(feature = "sandbox")]
    #[error("cannot start the sandbox: {0}")]
    Sandbox(#[source] SandboxError),
    /// `tether sandbox` cannot write the kubeconfig that reaches it.
    #[cfg(feature = "sandbox")]
    #[error("cannot write the kubeconfig to {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },

    /// The status API token cannot be read.
    #[error("the API token: {0}")]
    ApiToken(String),
    /// Nothing accepts connections at `base`: `cause` is the system's reason
    /// (connection refused, no such host).
    #[error(
        "could not connect to {base}: {cause}\nhint: is `tether serve` running there? Start it, or point --server (or TETHER_SERVER) at the URL it listens on"
    )]
    NoServer { base: String, cause: String },
    /// A connection was made but the exchange failed (TLS, a reset, a timeout).
    #[error("cannot reach {base}: {error}{causes}", causes = Causes(.error.source()))]
    Unreachable {
        base: String,
        #[source]
        error: reqwest::Error,
    },
    /// The user's kubeconfig credentials cannot be had or cannot be sent.
    #[error("{0}")]
    KubeCreds(#[from] super::kubecreds::KubeCredsError),
    /// The status API did not accept the token (or asked for one): `from` says where
    /// the token came from, never the token.
    #[error(
        "{url}: 401 Unauthorized: {body}\nhint: tether serve did not accept {from}: pass a token it accepts with --token-file FILE (yours: `kubectl create token SERVICEACCOUNT`, or the operator's server.apiToken), or use a kubeconfig context whose user has one"
    )]
    Unauthenticated {
        url: String,
        body: String,
        from: String,
    },
    /// The status API answered with an error status.
    #[error("{url}: {status}: {body}")]
    Refused {
        url: String,
        status: reqwest::StatusCode,
        body: String,
    },
    /// The status API's answer is not the JSON it serves. reqwest's own message
    /// leaves the cause out, so it is added.
    #[error("{0}{causes}", causes = Causes(.0.source()))]
    Answer(#[source] reqwest::Error),
}

/// An error's causes, each after `: `, as `anyhow` prints them with `{:#}`.
struct Causes<'a>(Option<&'a (dyn std::error::Error + 'static)>);

impl std::fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut cause = self.0;
        while let Some(err) = cause {
            write!(f, ": {err}")?;
            cause = err.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_exit_1_and_errors_exit_2_as_kubectl_diff_does() {
        assert_eq!(Outcome::Success.exit_code(), 0);
        assert_eq!(Outcome::Drift.exit_code(), 1);
        assert_eq!(Outcome::SyncFailed.exit_code(), 1);
        assert_eq!(Outcome::NotReady.exit_code(), 1);
        assert_eq!(EXIT_ERROR, 2);
    }

    #[cfg(feature = "sandbox")]
    #[test]
    fn a_cause_in_the_message_is_not_repeated() {
        let err = Error::Sandbox(SandboxError::Listen {
            address: "127.0.0.1:1".parse().expect("address"),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
        assert_eq!(
            err.to_string(),
            "cannot start the sandbox: cannot listen on 127.0.0.1:1: permission denied"
        );
    }
}
