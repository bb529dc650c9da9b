//! The command line: `tether <command>`. Arguments are parsed and validated here, then
//! handed to the stage that does the work.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use tokio::io::AsyncWriteExt as _;

use crate::cluster::Cluster;
use crate::config::Credentials;
use crate::report::drift;
use crate::sandbox::{self, SandboxOptions};
use crate::source::{SecretRef, Source, SourceCache, SourceError};
use crate::sync::SyncOptions;
use crate::sync::desired::{
    Desired, DesiredError, DesiredInput, ReadOptions, compare_offline, read_desired, read_snapshot,
};

/// Exit code for a command that failed (bad input, unreachable cluster, …). Follows
/// `kubectl diff`: 0 means success, 1 a finding (drift), 2 an error.
pub const EXIT_ERROR: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "tether",
    version,
    about = "GitOps reconciler: keeps Kubernetes clusters equal to a Git repository"
)]
pub struct Cli {
    /// Log format on stderr. The level is set with RUST_LOG (default: info).
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
    Sandbox(SandboxArgs),

    /// Fetch a Git source and show the revision it resolves to and the files at its path.
    ///
    /// Exits 0 when the source is readable, 2 when it is not (unreachable remote,
    /// refused credentials, missing ref or path).
    Source(SourceArgs),

    /// Show how the cluster (or a snapshot of it) differs from the desired state.
    ///
    /// Desired state comes from `--path DIR`, or from `--repo URL --ref REF --path
    /// SUBDIR`. Live state comes from the cluster (`--kubeconfig`, `--context`, or the
    /// default kubeconfig / in-cluster config), compared with the API server's own
    /// server-side apply dry run, or from `--live FILE|DIR` (objects as `kubectl get -o
    /// yaml` prints them) for CI jobs with no cluster access. Exits 0 when in sync, 1
    /// when drift is found, 2 on error.
    Diff(DiffArgs),

    /// Make the cluster match the desired state: validate everything, then apply what
    /// drifted with server-side apply, in order, and prune what the app no longer has.
    ///
    /// Desired state comes from `--path DIR` or `--repo URL --ref REF --path SUBDIR`,
    /// as for `tether diff`; `--app` names the app (its inventory and ownership label).
    /// Nothing is applied unless every changed object passes a server dry run. Exits 0
    /// on success, 1 when an object failed, prune was refused or health failed, 2 on
    /// bad input.
    Sync(SyncArgs),

    /// Run the reconciler: keep every app in the configuration in sync, forever.
    ///
    /// Serves the status API, /healthz, /readyz, /metrics and the Git providers'
    /// webhooks on `server.listen`. SIGHUP reloads the configuration (an invalid one is
    /// refused and the running one kept); SIGTERM stops after passes in flight.
    Serve(ServeArgs),

    /// Show where each app of a running `tether serve` stands.
    ///
    /// Exits 0 when every app is Synced and Healthy, 1 otherwise, 2 when the server
    /// cannot be reached or has no such app.
    Status(StatusArgs),
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The configuration file (YAML; see README for every option).
    #[arg(long)]
    pub config: PathBuf,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// Only the holder of a coordination.k8s.io Lease writes (for several replicas).
    #[arg(long)]
    pub leader_elect: bool,

    /// Where Git clones are kept.
    #[arg(long, env = "TETHER_CACHE_DIR", hide_env_values = true)]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The URL of a running `tether serve`.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "TETHER_SERVER",
        hide_env_values = true
    )]
    pub server: String,

    /// One app only.
    #[arg(long)]
    pub app: Option<String>,

    /// A file holding the token the server's `server.apiToken` names. Without it, the
    /// token is read from TETHER_API_TOKEN, if set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = StatusFormat::Table)]
    pub output: StatusFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    Table,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// Manifests: a local directory, or with --repo a directory inside the repository.
    #[arg(long)]
    pub path: String,

    /// Read the manifests from this Git repository instead of the local disk.
    #[arg(long)]
    pub repo: Option<String>,

    #[command(flatten)]
    pub git: GitArgs,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// The app: names its inventory (`tether-inventory-<app>`) and labels its objects.
    #[arg(long)]
    pub app: String,

    /// Namespace for namespaced objects that name none.
    #[arg(long, short = 'n', default_value = crate::manifest::DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Where the app's inventory ConfigMap lives (created when missing).
    #[arg(long, default_value = crate::ownership::DEFAULT_INVENTORY_NAMESPACE)]
    pub inventory_namespace: String,

    /// Validate and show what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Delete objects the app applied before and the desired state no longer has.
    #[arg(long)]
    pub prune: bool,

    /// Allow a prune of more than half of the app's objects, or from an empty desired state.
    #[arg(long, requires = "prune")]
    pub allow_mass_prune: bool,

    /// Report conflicts with other field managers instead of taking their fields.
    #[arg(long)]
    pub no_force: bool,

    /// Delete and recreate objects whose change touches an immutable field.
    #[arg(long)]
    pub replace_immutable: bool,

    /// Wait for each wave to be healthy before the next, and for the app at the end.
    #[arg(long)]
    pub wait: bool,

    /// How long --wait waits in all (e.g. 90s, 5m).
    #[arg(long, default_value = "5m", value_parser = crate::config::parse_duration, requires = "wait")]
    pub timeout: Duration,

    /// Requests in flight at once.
    #[arg(long, default_value_t = crate::sync::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Manifests: a local directory, or with --repo a directory inside the repository.
    #[arg(long, required_unless_present = "config")]
    pub path: Option<String>,

    /// Diff the apps of a `tether serve` configuration file instead (all, or --app).
    #[arg(long, conflicts_with_all = ["path", "repo", "live"])]
    pub config: Option<PathBuf>,

    /// Read the manifests from this Git repository instead of the local disk.
    #[arg(long)]
    pub repo: Option<String>,

    #[command(flatten)]
    pub git: GitArgs,

    /// Compare with objects in this file or directory instead of a cluster.
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    pub live: Option<PathBuf>,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// The app the manifests belong to: its ownership labels are part of the desired
    /// state, and (with --live) objects labelled for it that Git no longer has are
    /// reported as Extra. Without it, manifests are compared as written.
    #[arg(long)]
    pub app: Option<String>,

    /// Namespace for namespaced objects that name none.
    #[arg(long, short = 'n', default_value = crate::manifest::DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Where the app's inventory lives (online, with --app: objects it owns that Git
    /// no longer has are reported as Extra).
    #[arg(long, default_value = crate::ownership::DEFAULT_INVENTORY_NAMESPACE)]
    pub inventory_namespace: String,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = ReportFormat::Text)]
    pub output: ReportFormat,

    /// Colour the text diff: auto (on a terminal), always or never.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
    Markdown,
    Junit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
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

#[derive(Debug, clap::Args)]
pub struct SourceArgs {
    /// Repository URL: file://, a local path, git://, http(s)://, ssh:// or user@host:path.
    #[arg(long)]
    pub repo: String,

    /// Directory inside the repository.
    #[arg(long, default_value = ".")]
    pub path: String,

    #[command(flatten)]
    pub git: GitArgs,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// Where to write a kubeconfig (server, CA, token; context `tether-sandbox`).
    #[arg(long)]
    pub kubeconfig: PathBuf,

    /// Let workloads report status as healthy controllers would, after a short delay.
    #[arg(long)]
    pub simulate_controllers: bool,

    /// Delay before simulated controllers report status, in milliseconds.
    #[arg(long, default_value_t = sandbox::DEFAULT_CONTROLLER_DELAY.as_millis() as u64, requires = "simulate_controllers")]
    pub controller_delay_ms: u64,

    /// Share of requests (0.0 to 1.0) answered with 500, 503 or 429, for reliability tests.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub fail_rate: f64,

    /// Delay every answer by this many milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..=1.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("{rate} is not between 0.0 and 1.0"))
    }
}

/// Sets up `tracing` on stderr; stdout belongs to the commands' own output.
pub fn init_logging(format: LogFormat) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
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
    result.map_err(|err| anyhow::anyhow!("cannot set up logging: {err}"))
}

/// Runs one command and returns its exit code.
pub async fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Sandbox(args) => run_sandbox(args).await,
        Command::Source(args) => run_source(args).await,
        Command::Diff(args) => run_diff(args).await,
        Command::Sync(args) => run_sync(args).await,
        Command::Serve(args) => run_serve(args).await,
        Command::Status(args) => run_status(args).await,
    }
}

/// Exit code of `tether diff` when drift was found.
pub const EXIT_DRIFT: u8 = 1;

async fn run_diff(args: DiffArgs) -> anyhow::Result<u8> {
    if let Some(config) = &args.config {
        return run_diff_config(&args, config).await;
    }
    let report = match diff(&args).await {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_ERROR);
        }
    };
    let mut out = drift::render(&report, drift_format(&args));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    write_stdout(&out)?;
    Ok(if report.has_drift() { EXIT_DRIFT } else { 0 })
}

/// Why `tether diff` could not report.
#[derive(Debug, thiserror::Error)]
enum DiffError {
    #[error(transparent)]
    Desired(#[from] DesiredError),
    #[error(transparent)]
    Observe(#[from] crate::sync::SyncError),
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// `tether diff --config FILE [--app NAME]`: each app of a service configuration,
/// from its Git source, against its cluster.
async fn run_diff_config(args: &DiffArgs, path: &Path) -> anyhow::Result<u8> {
    let config = match crate::config::Config::load(path) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_ERROR);
        }
    };
    let apps: Vec<&crate::config::AppConfig> = match &args.app {
        Some(name) => match config.app(name) {
            Some(app) => vec![app],
            None => {
                eprintln!("error: {}: no app named {name:?}", path.display());
                return Ok(EXIT_ERROR);
            }
        },
        None => config.apps.iter().collect(),
    };
    if apps.len() > 1 && args.output == ReportFormat::Junit {
        eprintln!("error: JUnit output covers one app: pass --app, or use -o json");
        return Ok(EXIT_ERROR);
    }
    let cache = args.git.cache()?;
    let mut reports = Vec::new();
    for app in apps {
        let rules = app.ignore_rules();
        let context = args
            .cluster
            .context
            .as_deref()
            .or(app.destination.context.as_deref());
        let result = async {
            let cluster = Cluster::connect(args.cluster.kubeconfig.as_deref(), context).await?;
            let scopes = cluster.scopes().await;
            let read = ReadOptions {
                app: Some(&app.name),
                default_namespace: &app.destination.namespace,
                scopes: Some(&scopes),
            };
            let source = app.source();
            let desired = read_desired(
                DesiredInput::Git {
                    cache: &cache,
                    source: &source,
                },
                &read,
            )
            .await?;
            let options = SyncOptions {
                inventory_namespace: &config.inventory_namespace,
                rules: &rules,
                force: app.sync.force,
                ..SyncOptions::new(&app.name)
            };
            observe_online(&cluster, &desired, &options).await
        }
        .await;
        match result {
            Ok(report) => reports.push((app.name.clone(), report)),
            Err(err) => {
                eprintln!("error: app {}: {err}", app.name);
                return Ok(EXIT_ERROR);
            }
        }
    }
    let out = match args.output {
        ReportFormat::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&drift::render_json_apps(&reports))?
        ),
        _ => {
            let format = drift_format(args);
            let mut out = String::new();
            for (name, report) in &reports {
                if reports.len() > 1 {
                    out.push_str(&match args.output {
                        ReportFormat::Markdown => format!("## {name}\n\n"),
                        _ => format!("app {name}\n"),
                    });
                }
                out.push_str(&drift::render(report, format));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            out
        }
    };
    write_stdout(&out)?;
    let drift = reports.iter().any(|(_, r)| r.has_drift());
    Ok(if drift { EXIT_DRIFT } else { 0 })
}

fn drift_format(args: &DiffArgs) -> drift::Format {
    let color = match args.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::IsTerminal::is_terminal(&std::io::stdout()),
    };
    match args.output {
        ReportFormat::Text => drift::Format::Text { color },
        ReportFormat::Json => drift::Format::Json,
        ReportFormat::Markdown => drift::Format::Markdown,
        ReportFormat::Junit => drift::Format::Junit,
    }
}

/// The drift of the desired state against the cluster, decided by the same observe
/// path `tether sync` and `tether serve` act on: nothing is written.
async fn observe_online(
    cluster: &Cluster,
    desired: &Desired,
    options: &SyncOptions<'_>,
) -> Result<drift::DriftReport, DiffError> {
    let inventory = if options.app.is_empty() {
        crate::sync::inventory::Inventory::default()
    } else {
        crate::sync::read_inventory(cluster, options.app, options.inventory_namespace).await?
    };
    let observed = crate::sync::observe(cluster, &desired.manifests, &inventory, options).await?;
    Ok(drift::DriftReport {
        revision: desired.revision.as_ref().map(|r| r.sha.clone()),
        objects: observed.drift()?,
    })
}

async fn diff(args: &DiffArgs) -> Result<drift::DriftReport, DiffError> {
    let path = args.path.as_deref().unwrap_or(".");
    let read = ReadOptions {
        app: args.app.as_deref(),
        default_namespace: &args.namespace,
        scopes: None,
    };
    match &args.live {
        Some(live) => {
            let desired = desired(path, args.repo.as_deref(), &args.git, &read).await?;
            let live = read_snapshot(live, &args.namespace)?;
            let objects = compare_offline(&desired.manifests, &live, args.app.as_deref(), &[]);
            let report = drift::DriftReport {
                revision: desired.revision.as_ref().map(|r| r.sha.clone()),
                objects,
            };
            // The command ends once the report is written. Freeing every parsed
            // object first would take a third of a large run, so the operating
            // system reclaims them at exit instead (as clang's -disable-free does).
            std::mem::forget((desired, live));
            Ok(report)
        }
        None => {
            let cluster = Cluster::connect(
                args.cluster.kubeconfig.as_deref(),
                args.cluster.context.as_deref(),
            )
            .await?;
            // Online, the server says which kinds are cluster-scoped.
            let scopes = cluster.scopes().await;
            let read = ReadOptions {
                scopes: Some(&scopes),
                ..read
            };
            let desired = desired(path, args.repo.as_deref(), &args.git, &read).await?;
            let options = SyncOptions {
                inventory_namespace: &args.inventory_namespace,
                ..SyncOptions::new(args.app.as_deref().unwrap_or(""))
            };
            observe_online(&cluster, &desired, &options).await
        }
    }
}

/// The desired state at `path`, on disk or (with `repo`) in Git.
async fn desired(
    path: &str,
    repo: Option<&str>,
    git: &GitArgs,
    read: &ReadOptions<'_>,
) -> Result<Desired, DesiredError> {
    match repo {
        Some(repo) => {
            let source = git.source(repo, path);
            let cache = git.cache()?;
            read_desired(
                DesiredInput::Git {
                    cache: &cache,
                    source: &source,
                },
                read,
            )
            .await
        }
        None => read_desired(DesiredInput::Dir(Path::new(path)), read).await,
    }
}

async fn run_sync(args: SyncArgs) -> anyhow::Result<u8> {
    let cluster = match Cluster::connect(
        args.cluster.kubeconfig.as_deref(),
        args.cluster.context.as_deref(),
    )
    .await
    {
        Ok(cluster) => cluster,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_ERROR);
        }
    };
    let scopes = cluster.scopes().await;
    let read = ReadOptions {
        app: Some(&args.app),
        default_namespace: &args.namespace,
        scopes: Some(&scopes),
    };
    let desired = match desired(&args.path, args.repo.as_deref(), &args.git, &read).await {
        Ok(desired) => desired,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_ERROR);
        }
    };
    let options = SyncOptions {
        inventory_namespace: &args.inventory_namespace,
        force: !args.no_force,
        prune: args.prune,
        allow_mass_prune: args.allow_mass_prune,
        dry_run: args.dry_run,
        replace_immutable: args.replace_immutable,
        wait: args.wait.then_some(args.timeout),
        concurrency: args.concurrency.max(1),
        ..SyncOptions::new(&args.app)
    };
    // A progress bar for a person watching a long sync; never in logs or pipes.
    let bar = |done: usize, total: usize| {
        const WIDTH: usize = 30;
        let filled = done * WIDTH / total.max(1);
        eprint!(
            "\r  applying [{}{}] {done}/{total}",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled)
        );
    };
    let show_progress = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && desired.manifests.len() >= PROGRESS_MIN_OBJECTS;
    let options = SyncOptions {
        progress: show_progress.then_some(&bar as &(dyn Fn(usize, usize) + Sync)),
        ..options
    };
    let revision = desired.revision.as_ref().map(|r| r.sha.as_str());
    let report = crate::sync::sync(&cluster, &desired.manifests, revision, &options).await;
    if show_progress {
        eprint!("\r\x1b[K");
    }
    let report = match report {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_ERROR);
        }
    };
    let out = match args.output {
        Format::Text => crate::report::sync::render_text(&report),
        Format::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&crate::report::sync::to_json(&report))?
        ),
    };
    write_stdout(&out)?;
    Ok(if report.failed() { EXIT_FAILED } else { 0 })
}

async fn run_serve(args: ServeArgs) -> anyhow::Result<u8> {
    let options = crate::reconcile::service::ServeOptions {
        config: args.config,
        kubeconfig: args.cluster.kubeconfig,
        context: args.cluster.context,
        cache_dir: args.cache_dir,
        leader_elect: args.leader_elect,
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        stop.cancel();
    });
    match crate::reconcile::service::serve(options, shutdown).await {
        Ok(()) => Ok(0),
        Err(err) => {
            eprintln!("error: {err}");
            Ok(EXIT_ERROR)
        }
    }
}

/// Where `tether status` finds the API token when no file is given.
const API_TOKEN_ENV: &str = "TETHER_API_TOKEN";

async fn run_status(args: StatusArgs) -> anyhow::Result<u8> {
    let base = args.server.trim_end_matches('/');
    let url = match &args.app {
        Some(app) => format!("{base}/api/v1/apps/{app}"),
        None => format!("{base}/api/v1/apps"),
    };
    let secret = match &args.token_file {
        Some(path) => Some(SecretRef::File(path.clone())),
        None => std::env::var_os(API_TOKEN_ENV).map(|_| SecretRef::Env(API_TOKEN_ENV.into())),
    };
    let mut request = reqwest::Client::new().get(&url);
    if let Some(secret) = secret {
        match secret.read() {
            Ok(token) => request = request.bearer_auth(token.trim()),
            Err(err) => {
                eprintln!("error: the API token: {err}");
                return Ok(EXIT_ERROR);
            }
        }
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(err) => {
            eprintln!("error: cannot reach {base}: {err}");
            return Ok(EXIT_ERROR);
        }
    };
    if !answer.status().is_success() {
        let code = answer.status();
        let body = answer.text().await.unwrap_or_default();
        eprintln!("error: {url}: {code}: {}", body.trim());
        return Ok(EXIT_ERROR);
    }
    let body: serde_json::Value = answer.json().await?;
    let apps: Vec<serde_json::Value> = match &args.app {
        Some(_) => vec![body.clone()],
        None => body["apps"].as_array().cloned().unwrap_or_default(),
    };
    let out = match args.output {
        StatusFormat::Json => format!("{}\n", serde_json::to_string_pretty(&body)?),
        StatusFormat::Table => crate::report::status::render_table(&apps),
    };
    write_stdout(&out)?;
    let all_good = apps
        .iter()
        .all(|a| a["sync"] == "Synced" && a["health"] == "Healthy");
    Ok(if all_good { 0 } else { EXIT_FAILED })
}

/// Syncs of fewer objects finish before a progress bar would be worth reading.
const PROGRESS_MIN_OBJECTS: usize = 50;

/// Exit code of `tether sync` when an object failed, prune was refused or the app
/// did not become healthy.
pub const EXIT_FAILED: u8 = 1;

/// Writes to stdout; a closed pipe (`tether diff | head`) is not an error.
fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

async fn run_source(args: SourceArgs) -> anyhow::Result<u8> {
    let source = args.git.source(&args.repo, &args.path);
    let cache = args.git.cache()?;
    let revision = match cache.sync(&source).await {
        Ok(revision) => revision,
        Err(err) => {
            eprintln!("error: {source}: {err} ({})", err.reason());
            return Ok(EXIT_ERROR);
        }
    };
    let files = {
        let (cache, source, revision) = (cache.clone(), source.clone(), revision.clone());
        tokio::task::spawn_blocking(move || cache.read_files(&source, &revision)).await?
    };
    let files = match files {
        Ok(files) => files,
        Err(err) => {
            eprintln!("error: {source}: {err} ({})", err.reason());
            return Ok(EXIT_ERROR);
        }
    };
    match args.output {
        Format::Text => {
            println!("source    {source}");
            println!("revision  {} {}", revision.sha, revision.subject);
            println!("files     {}", files.len());
            for file in &files {
                println!("  {:>9}  {}", file.bytes.len(), file.path);
            }
        }
        Format::Json => {
            let files: Vec<_> = files
                .iter()
                .map(|f| serde_json::json!({"path": f.path, "bytes": f.bytes.len()}))
                .collect();
            let out = serde_json::json!({
                "source": source.to_string(),
                "revision": {"sha": revision.sha, "subject": revision.subject},
                "files": files,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
    }
    Ok(0)
}

async fn run_sandbox(args: SandboxArgs) -> anyhow::Result<u8> {
    let options = SandboxOptions {
        listen: args.listen,
        simulate_controllers: args
            .simulate_controllers
            .then(|| Duration::from_millis(args.controller_delay_ms)),
        fail_rate: args.fail_rate,
        latency: Duration::from_millis(args.latency_ms),
    };
    let sandbox = sandbox::Sandbox::start(options)
        .await
        .context("cannot start the sandbox")?;
    sandbox
        .write_kubeconfig(&args.kubeconfig)
        .with_context(|| {
            format!(
                "cannot write the kubeconfig to {}",
                args.kubeconfig.display()
            )
        })?;
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("ready {}\n", sandbox.url()).as_bytes())
        .await?;
    stdout.flush().await?;
    tracing::info!(url = %sandbox.url(), kubeconfig = %args.kubeconfig.display(), "sandbox ready");

    shutdown_signal().await;
    tracing::info!("stopping the sandbox");
    sandbox.stop().await;
    Ok(0)
}

/// Resolves on the first SIGTERM or SIGINT.
pub async fn shutdown_signal() {
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
    use crate::source::Auth;

    fn source_args(args: &[&str]) -> SourceArgs {
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
