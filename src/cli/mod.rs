//! The command line, the top of the loop: `tether <command>` parses and validates its
//! arguments here, hands them to the stage that does the work, and says how the
//! command ended as an [`Outcome`] or an [`Error`] for `main` to map to an exit code.

pub mod allocator;
mod chart;
mod comment;
mod diff;
mod exit;
mod kubecreds;
mod preview;
mod remote;
mod rollback;
#[cfg(feature = "sandbox")]
mod sandbox;
mod serve;
mod source;
mod status;
mod sync;
mod vars;
mod verify;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use tether_controller::config::Credentials;
use tether_core::source::{SecretRef, Source, SourceCache, SourceError};
use tether_diff::manifest::{HelmInputs, KustomizeCommand, Renderers, SopsKeys};

pub use exit::{EXIT_ERROR, Error, Outcome};

#[derive(Debug, Parser)]
#[command(
    name = "tether",
    version,
    about = "GitOps reconciler: keeps Kubernetes clusters equal to a Git repository"
)]
pub struct Cli {
    /// Log format on stderr. The level is set with RUST_LOG (default: tether's own
    /// messages at info, none of its libraries'; e.g. RUST_LOG=info,kube=debug).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a Kubernetes-compatible API server in memory, for trying tether and for tests.
    ///
    /// Prints one line `ready <url>` on stdout once it accepts requests, and stops on
    /// SIGTERM or SIGINT.
    #[cfg(feature = "sandbox")]
    Sandbox(sandbox::SandboxArgs),

    /// Fetch a Git source and show the revision it resolves to and the files at its path.
    ///
    /// Exits 0 when the source is readable, 2 when it is not (unreachable remote,
    /// refused credentials, missing ref or path).
    Source(source::SourceArgs),

    /// Show how the cluster (or a snapshot of it) differs from the desired state.
    ///
    /// Desired state comes from `--path DIR`, or from `--repo URL --ref REF --path
    /// SUBDIR`. Live state comes from the cluster (`--kubeconfig`, `--context`, or the
    /// default kubeconfig / in-cluster config), compared with the API server's own
    /// server-side apply dry run, or from `--live FILE|DIR` (objects as `kubectl get -o
    /// yaml` prints them) for CI jobs with no cluster access. Exits 0 when in sync, 1
    /// when drift is found, 2 on error.
    Diff(diff::DiffArgs),

    /// Make the cluster match the desired state: validate everything, then apply what
    /// drifted with server-side apply, in order, and prune what the app no longer has.
    ///
    /// Desired state comes from `--path DIR` or `--repo URL --ref REF --path SUBDIR`,
    /// as for `tether diff`; `--app` names the app (its inventory and ownership label).
    /// Nothing is applied unless every changed object passes a server dry run. Exits 0
    /// on success, 1 when an object failed, prune was refused or health failed, 2 on
    /// bad input.
    Sync(sync::SyncArgs),

    /// Run the reconciler: keep every app in the configuration in sync, forever.
    ///
    /// Serves the status API, /healthz, /readyz, /metrics and the Git providers'
    /// webhooks on `server.listen`. SIGHUP reloads the configuration (an invalid one is
    /// refused and the running one kept); SIGTERM stops after passes in flight.
    Serve(serve::ServeArgs),

    /// Show where each app of a running `tether serve` stands.
    ///
    /// Exits 0 when every app is Synced and Healthy, 1 otherwise, 2 when the server
    /// cannot be reached or has no such app.
    Status(status::StatusArgs),

    /// Roll an app of a running `tether serve` back to a revision it was applied at,
    /// and keep it there.
    ///
    /// The app syncs that revision (rendered from Git at that commit) and stays on it:
    /// new commits are not followed, and self-heal heals toward it, until `tether
    /// unpin APP` or, with --until-git-moves, until Git's head moves past the commit it
    /// is at now. Needs `patch` on apps.tether.dev when you log in with your own
    /// token. Exits 0 once pinned, 2 when refused.
    Rollback(rollback::RollbackArgs),

    /// Let an app rolled back with `tether rollback` follow Git's head again.
    ///
    /// Exits 0 once unpinned, 2 when refused.
    Unpin(rollback::UnpinArgs),

    /// Print tether's custom resource definitions (`apps.tether.dev`,
    /// `appsets.tether.dev`), for installs without Helm: `tether crd | kubectl apply -f -`.
    Crd,
}

/// Which cluster to talk to; without either, the default kubeconfig (KUBECONFIG,
/// ~/.kube/config) or the in-cluster service account, as kubectl does.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Path to a kubeconfig file.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

/// How long one request to the API server may take, for the commands that talk to
/// it once (`diff`, `sync`); kubectl's flag of the same name and spelling.
#[derive(Debug, Clone, clap::Args)]
pub struct RequestArgs {
    /// Give up on a single request to the API server after this long (e.g. 10s, 1m);
    /// 0 waits for ever, as in kubectl. A bare number is seconds.
    #[arg(long, default_value = "30s", value_parser = parse_request_timeout)]
    pub request_timeout: Duration,
}

/// What to do when no cluster is configured, for the commands that need one.
const NO_CLUSTER_HINT: &str =
    "pass --kubeconfig FILE (or set KUBECONFIG) and, if needed, --context NAME";

impl RequestArgs {
    /// Connects to the cluster `cluster` names, each request bounded by the timeout.
    /// When no configuration names a cluster, the error carries `hint`: the flags of
    /// the command that would.
    pub async fn connect(
        &self,
        cluster: &ClusterArgs,
        context: Option<&str>,
        hint: &'static str,
    ) -> Result<tether_core::cluster::Cluster, Error> {
        let connected =
            tether_core::cluster::Cluster::connect(cluster.kubeconfig.as_deref(), context)
                .await
                .map_err(|error| match error {
                    error @ tether_core::cluster::ClusterError::Config(_) => {
                        Error::NoCluster { error, hint }
                    }
                    other => Error::Connect(other),
                })?;
        Ok(connected.with_timeout(self.request_timeout))
    }

    /// Connects to the cluster `--kubeconfig` and `--context` name, as `diff`, `sync`
    /// and `preview` do.
    pub async fn connect_to(
        &self,
        cluster: &ClusterArgs,
    ) -> Result<tether_core::cluster::Cluster, Error> {
        self.connect(cluster, cluster.context.as_deref(), NO_CLUSTER_HINT)
            .await
    }
}

/// Where the manifests of `diff` and `sync` come from besides `--path`: a Git
/// repository or a chart, how they render and how their commits are verified.
#[derive(Debug, clap::Args)]
pub struct ManifestArgs {
    /// Read the manifests from this Git repository instead of the local disk.
    #[arg(long)]
    pub repo: Option<String>,

    #[command(flatten)]
    pub git: GitArgs,

    #[command(flatten)]
    pub chart: chart::ChartArgs,

    #[command(flatten)]
    pub render: RenderArgs,

    #[command(flatten)]
    pub verify: verify::VerifyArgs,
}

impl ManifestArgs {
    /// The renderers of `path` for `app`, made for the chart when `--chart` names one,
    /// with that chart's source.
    fn renderers(
        &self,
        app: Option<&str>,
        path: &str,
        namespace: &str,
    ) -> Result<(Renderers, Option<Source>), Error> {
        let mut renderers = self.render.renderers(app, path, namespace)?;
        let chart = self.chart.source(&self.git)?;
        if let Some(source) = &chart {
            renderers = chart::renderers(source, renderers, app, &self.render.values)?;
        }
        Ok((renderers, chart))
    }

    /// The remote the manifests come from (a Git or chart URL), if not the local disk.
    fn remote(&self) -> Option<&str> {
        self.repo.as_deref().or(self.chart.chart.as_deref())
    }
}

/// `--request-timeout` as kubectl reads it: a duration, a bare number of seconds, or
/// 0 for no bound (the timeout then never fires).
fn parse_request_timeout(text: &str) -> Result<Duration, String> {
    let duration = match text.trim().parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => tether_controller::config::parse_duration(text)?,
    };
    Ok(if duration.is_zero() {
        Duration::MAX
    } else {
        duration
    })
}

/// How the render stage builds the path: a chart's release and values, and the
/// renderers' binaries.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// Helm release name, when --path is a chart (default: the app's name, or the
    /// chart directory's).
    #[arg(long)]
    pub release: Option<String>,

    /// A values file for a chart, relative to the chart (repeatable; later wins).
    #[arg(long = "values")]
    pub values: Vec<String>,

    /// A value for a chart, as `helm --set` takes it: `key=value` (repeatable, wins).
    #[arg(long = "set")]
    pub set: Vec<String>,

    /// The helm command that renders charts.
    #[arg(
        long,
        env = "TETHER_HELM",
        default_value = "helm",
        hide_env_values = true
    )]
    pub helm: String,

    /// Builds kustomizations: `kubectl` runs `kubectl kustomize`, anything else is a
    /// standalone kustomize run as `<command> build`.
    #[arg(
        long,
        env = "TETHER_KUSTOMIZE",
        default_value = "kubectl",
        hide_env_values = true
    )]
    pub kustomize: String,

    /// Let kustomizations name remote bases (URLs), which kustomize fetches itself.
    #[arg(long)]
    pub allow_remote_bases: bool,

    /// How long one kustomize or helm run may take before it, and every process it
    /// started, is killed.
    #[arg(long, default_value = "2m", value_parser = tether_controller::config::parse_duration)]
    pub render_timeout: std::time::Duration,

    #[command(flatten)]
    pub vars: vars::VarArgs,
    /// A file of keys for SOPS-encrypted manifests: age identities or an armored PGP
    /// private key (repeatable). SOPS_AGE_KEY and SOPS_AGE_KEY_FILE are read too, as
    /// `sops` reads them.
    #[arg(long = "sops-key-file", value_name = "FILE")]
    pub sops_key_files: Vec<PathBuf>,
}

impl RenderArgs {
    /// The keys for SOPS-encrypted manifests: `--sops-key-file` and the environment.
    fn sops_keys(&self) -> Result<SopsKeys, Error> {
        let mut keys = tether_sops::Keys::new();
        for file in &self.sops_key_files {
            keys.add_file(file)?;
        }
        keys.add_from_env()?;
        Ok(if keys.is_empty() {
            SopsKeys::default()
        } else {
            SopsKeys::new(keys)
        })
    }

    /// The renderers for an app (`app` names the default release) whose objects land
    /// in `namespace`.
    pub fn renderers(
        &self,
        app: Option<&str>,
        path: &str,
        namespace: &str,
    ) -> Result<Renderers, Error> {
        let dir_name = path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty() && *n != ".")
            .unwrap_or("release");
        Ok(Renderers {
            kustomize: if self.kustomize == "kubectl" {
                KustomizeCommand::kubectl()
            } else {
                KustomizeCommand::standalone(&self.kustomize)
            },
            allow_remote_bases: self.allow_remote_bases,
            helm: HelmInputs {
                program: Some(self.helm.clone()),
                release_name: self.release.clone(),
                namespace: namespace.to_string(),
                value_files: self.values.clone(),
                values_from: Vec::new(),
                values: None,
                set: self.set.clone(),
                kube_version: None,
                api_versions: Vec::new(),
                lookup: None,
                // `$NAME/path` value files are the service's (`valueSources`).
                ref_values: Default::default(),
            },
            release: app.unwrap_or(dir_name).to_string(),
            timeout: self.render_timeout,
            substitute: self.vars.substitution(None)?,
            sops: self.sops_keys()?,
            post_renderers: Vec::new(),
        })
    }
}

/// How to reach a Git repository: cache and credentials.
#[derive(Debug, Clone, clap::Args)]
pub struct GitArgs {
    /// Branch, tag, full commit SHA, or HEAD (the remote's default branch).
    #[arg(long = "ref", default_value = "HEAD")]
    pub reference: String,

    /// Where clones are kept (one per repository, fetched incrementally).
    #[arg(long, env = "TETHER_CACHE_DIR", hide_env_values = true)]
    pub cache_dir: Option<PathBuf>,

    /// HTTP(S) user name, with --password-env or --password-file, or with a token.
    #[arg(long)]
    pub username: Option<String>,

    /// Environment variable holding the HTTP(S) password.
    #[arg(long, conflicts_with = "password_file", requires = "username")]
    pub password_env: Option<String>,

    /// File holding the HTTP(S) password.
    #[arg(long, requires = "username")]
    pub password_file: Option<PathBuf>,

    /// Environment variable holding an HTTP(S) access token.
    #[arg(long, conflicts_with_all = ["token_file", "password_env", "password_file"])]
    pub token_env: Option<String>,

    /// File holding an HTTP(S) access token.
    #[arg(long, conflicts_with_all = ["password_env", "password_file"])]
    pub token_file: Option<PathBuf>,

    /// SSH private key file (for ssh:// and user@host:path URLs).
    #[arg(long, requires = "known_hosts")]
    pub ssh_key: Option<PathBuf>,

    /// known_hosts file the SSH server's key must be listed in.
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
}

impl GitArgs {
    /// The source at `repo` and `path` these arguments name, with its credentials
    /// (chosen as the service chooses them from its configuration).
    pub fn source(&self, repo: &str, path: &str) -> Source {
        let secret = |env: &Option<String>, file: &Option<PathBuf>| {
            env.clone()
                .map(SecretRef::Env)
                .or_else(|| file.clone().map(SecretRef::File))
        };
        let credentials = Credentials {
            username: self.username.clone(),
            password: secret(&self.password_env, &self.password_file),
            token: secret(&self.token_env, &self.token_file),
            ssh_key_file: self.ssh_key.clone(),
            known_hosts_file: self.known_hosts.clone(),
            secret_ref: None,
        };
        Source::new(repo, &self.reference, path).with_auth(credentials.auth(repo))
    }

    pub fn cache(&self) -> Result<SourceCache, SourceError> {
        SourceCache::open(
            self.cache_dir
                .clone()
                .unwrap_or_else(SourceCache::default_dir),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// What is logged without RUST_LOG: tether's own messages (its crates' targets all
/// start with `tether`) at info, and nothing of its libraries. A library's line (kube's
/// `failed with status 500` for each retried request, hyper's, rustls') says less
/// than the error tether reports for the same failure, once, in its own words.
const DEFAULT_LOG_FILTER: &str = "off,tether=info";

/// Sets up `tracing` on stderr; stdout belongs to the commands' own output.
pub fn init_logging(format: LogFormat) -> Result<(), Error> {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    // Colours only for a person at a terminal, never in CI logs or files.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    result.map_err(|err| Error::Logging(err.to_string()))
}

/// Runs one command to its end.
pub async fn run(cli: Cli) -> Result<Outcome, Error> {
    match cli.command {
        #[cfg(feature = "sandbox")]
        Command::Sandbox(args) => sandbox::run(args).await,
        Command::Source(args) => source::run(args).await,
        // With --base, a pull request's preview: its own pass over the repository.
        Command::Diff(args) => match args.base.clone() {
            Some(base) => preview::run(&args, &base).await,
            None => diff::run(args).await,
        },
        Command::Sync(args) => sync::run(args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Rollback(args) => rollback::rollback(args).await,
        Command::Unpin(args) => rollback::unpin(args).await,
        Command::Crd => {
            let crds = format!(
                "{}---\n{}",
                tether_controller::config::APP_CRD_YAML,
                tether_controller::reconcile::appset::APPSET_CRD_YAML
            );
            write_stdout(&crds).map(|()| Outcome::Success)
        }
    }
}

/// Writes a command's output to stdout. A reader that has gone (`tether diff | head`)
/// is not an error, and unlike ripgrep's early stop it does not decide the exit code
/// either: the finding is known before the output is written, so a CI job piping
/// `tether diff` still fails on drift.
fn write_stdout(text: &str) -> Result<(), Error> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(Error::Output),
    }
}

/// Resolves on the first SIGTERM or SIGINT.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_timeout_reads_as_kubectl_reads_it() {
        assert_eq!(parse_request_timeout("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_request_timeout("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_request_timeout("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_request_timeout("0"), Ok(Duration::MAX));
        assert_eq!(parse_request_timeout("0s"), Ok(Duration::MAX));
        assert!(
            parse_request_timeout("soon")
                .unwrap_err()
                .contains("is not a duration")
        );
    }
    use tether_core::source::Auth;

    fn source_args(args: &[&str]) -> source::SourceArgs {
        let mut argv = vec!["tether", "source"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).expect("arguments parse").command {
            Command::Source(args) => args,
            other => panic!("not `source`: {other:?}"),
        }
    }

    #[test]
    fn git_flags_become_the_credentials_the_url_needs() {
        let a = source_args(&[
            "--repo",
            "https://h/r",
            "--username",
            "bot",
            "--token-env",
            "T",
            "--ssh-key",
            "/k",
            "--known-hosts",
            "/kh",
        ]);
        assert_eq!(
            a.git.source(&a.repo, &a.path).auth,
            Auth::Token {
                token: SecretRef::Env("T".into()),
                username: Some("bot".into())
            }
        );
        // The same flags for an SSH remote offer the key.
        assert_eq!(
            a.git.source("git@h:r.git", ".").auth,
            Auth::SshKey {
                private_key: "/k".into(),
                known_hosts: "/kh".into(),
                passphrase: None,
                username: Some("bot".into())
            }
        );
        let a = source_args(&[
            "--repo",
            "https://h/r",
            "--username",
            "bot",
            "--password-file",
            "/p",
        ]);
        assert_eq!(
            a.git.source(&a.repo, &a.path).auth,
            Auth::Basic {
                username: "bot".into(),
                password: SecretRef::File("/p".into())
            }
        );
        let a = source_args(&["--repo", "/tmp/r"]);
        assert_eq!(a.git.source(&a.repo, &a.path).auth, Auth::None);
    }
}
