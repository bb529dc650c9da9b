//! `tether sync`: one pass of the loop's act stage from the command line: read the
//! desired state, then apply, prune and wait as the flags allow, and report.

use std::path::PathBuf;
use std::time::Duration;

use tether_core::sync::SyncOptions;
use tether_core::sync::desired::{ReadOptions, Verification};
use tether_core::sync::health::Judge;

use super::{ClusterArgs, Error, Format, ManifestArgs, Outcome, RequestArgs, write_stdout};

#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// Manifests: a local directory, or with --repo a directory inside the repository.
    #[arg(long, required_unless_present = "chart")]
    pub path: Option<String>,

    #[command(flatten)]
    pub manifests: ManifestArgs,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub request: RequestArgs,

    /// The app: names its inventory (`tether-inventory-<app>`) and labels its objects.
    #[arg(long)]
    pub app: String,

    /// Namespace for namespaced objects that name none.
    #[arg(long, short = 'n', default_value = tether_diff::manifest::DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Where the app's inventory ConfigMap lives (created when missing).
    #[arg(long, default_value = tether_schema::ownership::DEFAULT_INVENTORY_NAMESPACE)]
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
    #[arg(long, default_value = "5m", value_parser = tether_controller::config::parse_duration, requires = "wait")]
    pub timeout: Duration,

    /// How long the hooks of one phase (PreSync, Sync, PostSync, SyncFail) may run in
    /// all; past it the sync fails, naming the hooks still running, and SyncFail hooks run.
    #[arg(long, default_value = "5m", value_parser = tether_controller::config::parse_duration)]
    pub hook_timeout: Duration,

    /// Requests in flight at once.
    #[arg(long, default_value_t = tether_core::sync::DEFAULT_REQUEST_CONCURRENCY)]
    pub concurrency: usize,

    /// Judge health as `tether serve` would with this configuration file: its CEL rules
    /// (`healthCheckExprs`) at the top and those of its app named --app, before the
    /// built-in rules.
    #[arg(long)]
    pub config: Option<PathBuf>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// Syncs of fewer objects finish before a progress bar would be worth reading.
const PROGRESS_MIN_OBJECTS: usize = 50;

pub(super) async fn run(args: SyncArgs) -> Result<Outcome, Error> {
    // Read first: a configuration that does not load stops the sync before any request.
    let config = args
        .config
        .as_deref()
        .map(tether_controller::config::Config::load)
        .transpose()
        .map_err(Error::Config)?;
    let cluster = args.request.connect_to(&args.cluster).await?;
    let scopes = cluster.scopes().await.map_err(Error::Connect)?;
    let path = args.path.as_deref().unwrap_or(".");
    let (renderers, chart) = args
        .manifests
        .renderers(Some(&args.app), path, &args.namespace)?;
    let remote = args.manifests.remote();
    let (renderers, _lookup) = super::diff::for_cluster(&cluster, renderers, path, remote).await?;
    let read = ReadOptions {
        app: Some(&args.app),
        default_namespace: &args.namespace,
        scopes: Some(&scopes),
        renderers: &renderers,
    };
    let policy = args.manifests.verify.policy()?;
    let (app, namespace) = (&args.app, &args.inventory_namespace);
    let since = super::verify::since(policy.as_ref(), &cluster, app, namespace).await;
    let verdicts = tether_core::source::Verdicts::default();
    let check = policy.as_ref().map(|policy| Verification {
        policy,
        since: since.as_deref(),
        verdicts: &verdicts,
    });
    let (repo, git) = (args.manifests.repo.as_deref(), &args.manifests.git);
    let desired = super::diff::desired(path, (repo, chart.as_ref()), git, &read, check).await?;
    let options = SyncOptions {
        inventory_namespace: &args.inventory_namespace,
        force: !args.no_force,
        prune: args.prune,
        allow_mass_prune: args.allow_mass_prune,
        dry_run: args.dry_run,
        replace_immutable: args.replace_immutable,
        wait: args.wait.then_some(args.timeout),
        hook_timeout: args.hook_timeout,
        concurrency: args.concurrency.max(1),
        health: Judge {
            app: config
                .as_ref()
                .and_then(|c| c.app(&args.app))
                .map(|a| &a.health_checks),
            global: config.as_ref().map(|c| &c.health_checks),
        },
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
    let report = tether_core::sync::sync(&cluster, &desired.manifests, revision, &options).await;
    if show_progress {
        eprint!("\r\x1b[K");
    }
    let report = report.map_err(Error::Sync)?;
    let out = match args.output {
        Format::Text => tether_core::report::sync::render_text(&report),
        Format::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&tether_core::report::sync::to_json(&report))?
        ),
    };
    write_stdout(&out)?;
    Ok(if report.failed() {
        Outcome::SyncFailed
    } else {
        Outcome::Success
    })
}
