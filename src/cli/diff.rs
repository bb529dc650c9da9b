//! `tether diff`: observe desired and live state once and report the drift, for a
//! person, a CI job (`--live` snapshots, no cluster needed) or several apps of a
//! service configuration.

use std::path::{Path, PathBuf};

use tether_controller::reconcile::values::PassValues;
use tether_core::cluster::Cluster;
use tether_core::cluster::lookup::LookupEndpoint;
use tether_core::report::drift;
use tether_core::source::{Source, Verdicts};
use tether_core::sync::SyncOptions;
use tether_core::sync::desired::{
    Desired, DesiredError, DesiredInput, ReadOptions, Verification, compare_offline, read_desired,
    read_snapshot,
};

use super::{ClusterArgs, Error, GitArgs, ManifestArgs, Outcome, RequestArgs, write_stdout};

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Manifests: a local directory, or with --repo a directory inside the repository.
    #[arg(long, required_unless_present_any = ["config", "base", "chart"])]
    pub path: Option<String>,

    /// Diff the apps of a `tether serve` configuration file instead (all, or --app).
    #[arg(long, conflicts_with_all = ["path", "repo"])]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub manifests: ManifestArgs,

    /// Compare with objects in this file or directory instead of a cluster (with
    /// --base: each rendered app's head, besides base against head).
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    pub live: Option<PathBuf>,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub request: RequestArgs,

    /// The app the manifests belong to: its ownership labels are part of the desired
    /// state, and (with --live) objects labelled for it that Git no longer has are
    /// reported as Extra. Without it, manifests are compared as written.
    #[arg(long)]
    pub app: Option<String>,

    /// Namespace for namespaced objects that name none.
    #[arg(long, short = 'n', default_value = tether_diff::manifest::DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Where the app's inventory lives (online, with --app: objects it owns that Git
    /// no longer has are reported as Extra).
    #[arg(long, default_value = tether_schema::ownership::DEFAULT_INVENTORY_NAMESPACE)]
    pub inventory_namespace: String,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = ReportFormat::Text)]
    pub output: ReportFormat,

    /// Colour the text diff: auto (on a terminal), always or never.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,

    /// Accept a path that holds no manifests. Without it that is an error (exit 2):
    /// a wrong --path would otherwise read as "in sync".
    #[arg(long)]
    pub allow_empty: bool,

    /// Compare two commits of the Git checkout this runs in instead of desired and
    /// live: render each app (--path, or the apps of --config reading this
    /// repository) at this commit (a pull request's base: a branch, tag, SHA or
    /// `origin/main`) and at --ref (default: the checked-out HEAD), and report what
    /// merging changes. Apps whose inputs did not change are not rendered.
    #[arg(long, conflicts_with = "repo")]
    pub base: Option<String>,

    /// With --base: exit 2 when an app fails to render (it is reported either way,
    /// and the other apps are still compared).
    #[arg(long, requires = "base")]
    pub fail_on_error: bool,

    /// Fail on a SOPS-encrypted document when no key is configured, as `tether
    /// sync` does. Without keys (no --sops-key-file, SOPS_AGE_KEY(_FILE) or app
    /// decryption) such a document is otherwise reported "encrypted: not compared";
    /// with any key, one that opens none of its recipients is always an error.
    #[arg(long)]
    pub fail_on_encrypted: bool,

    /// With --base: also leave this label out of the comparison (repeatable; `key*`
    /// is a prefix). `helm.sh/chart` is always left out.
    #[arg(long, requires = "base")]
    pub ignore_label: Vec<String>,

    /// With --base: also leave this annotation out of the comparison (repeatable;
    /// `key*` is a prefix). `checksum/*` is always left out.
    #[arg(long, requires = "base")]
    pub ignore_annotation: Vec<String>,

    /// With --base -o markdown or --comment: the most characters the report may
    /// have, to fit a comment (default: the provider's limit with --comment, else
    /// GitHub's 65536; GitLab's is 1000000). The largest apps are cut first, each
    /// with a line saying how much was left out.
    #[arg(long)]
    pub markdown_limit: Option<usize>,

    /// With --base: also write the full Markdown report, never cut, to this
    /// directory (created if needed): one `<app>.md` per changed or failed app and
    /// `index.md`, for the job's artifact.
    #[arg(long, requires = "base")]
    pub output_dir: Option<std::path::PathBuf>,

    /// Boxed: the comment's flags are seldom given, and would make every command's
    /// arguments as large as `diff`'s.
    #[command(flatten)]
    pub comment: Box<super::comment::CommentArgs>,
}

/// What to do when no cluster is configured: name one, or compare offline.
const NO_CLUSTER_HINT: &str = "pass --kubeconfig FILE (or set KUBECONFIG) and, if needed, --context NAME; or compare with objects saved by `kubectl get -o yaml` instead: --live FILE|DIR";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
    Markdown,
    Junit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

pub(super) async fn run(args: DiffArgs) -> Result<Outcome, Error> {
    if args.config.is_some() && args.live.is_some() {
        return Err(Error::LiveWithConfig);
    }
    if let Some(config) = &args.config {
        return run_config(&args, config).await;
    }
    let report = diff(&args).await?;
    let mut out = drift::render(&report, drift_format(&args));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    write_stdout(&out)?;
    Ok(if report.has_drift() {
        Outcome::Drift
    } else {
        Outcome::Success
    })
}

/// `tether diff --config FILE [--app NAME]`: each app of a service configuration,
/// from its Git source, against its cluster.
async fn run_config(args: &DiffArgs, path: &Path) -> Result<Outcome, Error> {
    let config = tether_controller::config::Config::load(path).map_err(Error::Config)?;
    let apps: Vec<&tether_controller::config::AppConfig> = match &args.app {
        Some(name) => match config.app(name) {
            Some(app) => vec![app],
            None => {
                return Err(Error::NoSuchApp {
                    config: path.to_path_buf(),
                    app: name.clone(),
                });
            }
        },
        None => config.apps.iter().collect(),
    };
    if apps.len() > 1 && args.output == ReportFormat::Junit {
        return Err(Error::JunitForSeveralApps);
    }
    let cache = args.manifests.git.cache().map_err(Error::Cache)?;
    let mut reports = Vec::new();
    for app in apps {
        let rules = app.ignore_rules();
        let context = args
            .cluster
            .context
            .as_deref()
            .or(app.destination.context.as_deref());
        let result = async {
            let cluster = std::sync::Arc::new(
                args.request
                    .connect(&args.cluster, context, super::NO_CLUSTER_HINT)
                    .await?,
            );
            // `credentials.secretRef` Secrets are read on the app's cluster.
            cache.read_secrets_with(cluster.clone());
            let scopes = cluster.scopes().await.map_err(Error::Connect)?;
            let (version, apis) = cluster.capabilities().await.map_err(Error::Connect)?;
            let own = tether_controller::reconcile::variables::read(
                &cluster,
                app,
                &config.inventory_namespace,
            )
            .await
            .map_err(|e| Error::Vars(e.to_string()))?;
            // The app's own keys (its Secret, its key files), else the command's.
            let keys = tether_controller::reconcile::decryption::read(
                &cluster,
                app,
                &config.inventory_namespace,
                None,
            )
            .await
            .map_err(Error::Decryption)?;
            let values = tether_controller::reconcile::values::read(
                &cluster,
                app,
                &config.inventory_namespace,
            )
            .await
            .map_err(Error::Values)?;
            let sops = match keys {
                Some(keys) => keys.sops(),
                None => sealed_without_keys(args, args.manifests.render.sops_keys()?),
            };
            let lookup = LookupEndpoint::start(&cluster)
                .await
                .map_err(DesiredError::from)?;
            let read = ReadOptions {
                app: Some(&app.name),
                default_namespace: &app.destination.namespace,
                scopes: Some(&scopes),
                renderers: &tether_diff::manifest::Renderers {
                    timeout: config.render_timeout,
                    substitute: args.manifests.render.vars.substitution(own)?,
                    sops,
                    ..app.renderers()
                }
                .for_cluster(version, apis)
                .with_values_from(values.as_ref().map(PassValues::layers).unwrap_or_default())
                .with_lookup(lookup.kubeconfig()),
            };
            let source = app.source();
            let desired = read_desired(
                DesiredInput::Git {
                    cache: &cache,
                    source: &source,
                    verify: None,
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
            let sealed = desired.manifests.sealed.clone();
            Ok(observe_online(&cluster, &desired, &options)
                .await?
                .with_not_compared(sealed))
        }
        .await;
        let report = result.map_err(|error| Error::App {
            app: app.name.clone(),
            error: Box::new(error),
        })?;
        reports.push((app.name.clone(), report));
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
    Ok(if drift {
        Outcome::Drift
    } else {
        Outcome::Success
    })
}

/// Issue #27: with no SOPS key configured at all, `tether diff` reads encrypted
/// documents sealed (reported "encrypted: not compared") unless
/// `--fail-on-encrypted`; any key given keeps a file it does not open an error.
pub(super) fn sealed_without_keys(
    args: &DiffArgs,
    keys: tether_diff::manifest::SopsKeys,
) -> tether_diff::manifest::SopsKeys {
    if keys.get().is_none() && !args.fail_on_encrypted {
        tether_diff::manifest::SopsKeys::sealed()
    } else {
        keys
    }
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
pub(super) async fn observe_online(
    cluster: &Cluster,
    desired: &Desired,
    options: &SyncOptions<'_>,
) -> Result<drift::DriftReport, Error> {
    let inventory = if options.app.is_empty() {
        tether_core::sync::inventory::Inventory::default()
    } else {
        tether_core::sync::read_inventory(cluster, options.app, options.inventory_namespace)
            .await
            .map_err(Error::Observe)?
    };
    let observed = tether_core::sync::observe(cluster, &desired.manifests, &inventory, options)
        .await
        .map_err(Error::Observe)?;
    Ok(drift::DriftReport {
        revision: desired.revision.as_ref().map(|r| r.sha.clone()),
        objects: observed.drift().map_err(Error::Observe)?,
        ..drift::DriftReport::default()
    })
}

async fn diff(args: &DiffArgs) -> Result<drift::DriftReport, Error> {
    let path = args.path.as_deref().unwrap_or(".");
    let (mut renderers, chart) =
        args.manifests
            .renderers(args.app.as_deref(), path, &args.namespace)?;
    renderers.sops = sealed_without_keys(args, renderers.sops);
    let read = ReadOptions {
        app: args.app.as_deref(),
        default_namespace: &args.namespace,
        scopes: None,
        renderers: &renderers,
    };
    let policy = args.manifests.verify.policy()?;
    let verdicts = Verdicts::default();
    match &args.live {
        Some(live) => {
            let (repo, git) = (args.manifests.repo.as_deref(), &args.manifests.git);
            let check = policy.as_ref().map(|policy| Verification {
                policy,
                since: None,
                verdicts: &verdicts,
            });
            let desired = desired(path, (repo, chart.as_ref()), git, &read, check).await?;
            check_not_empty(args, &desired)?;
            say_lookups_were_empty(&desired);
            let live = read_snapshot(live, &args.namespace)?;
            let objects = compare_offline(&desired.manifests, &live, args.app.as_deref(), &[]);
            let report = drift::DriftReport {
                revision: desired.revision.as_ref().map(|r| r.sha.clone()),
                objects,
                ..drift::DriftReport::default()
            }
            .with_not_compared(desired.manifests.sealed.clone());
            // The command ends once the report is written. Freeing every parsed
            // object first would take a third of a large run, so the operating
            // system reclaims them at exit instead (as clang's -disable-free does).
            std::mem::forget((desired, live));
            Ok(report)
        }
        None => {
            let cluster = args
                .request
                .connect(
                    &args.cluster,
                    args.cluster.context.as_deref(),
                    NO_CLUSTER_HINT,
                )
                .await?;
            // Online, the server says which kinds are cluster-scoped.
            let scopes = cluster.scopes().await.map_err(Error::Connect)?;
            let remote = args.manifests.remote();
            let (renderers, _lookup) =
                for_cluster(&cluster, read.renderers.clone(), path, remote).await?;
            let read = ReadOptions {
                scopes: Some(&scopes),
                renderers: &renderers,
                ..read
            };
            let app = args.app.as_deref().unwrap_or("");
            let since = match args.app {
                Some(_) => {
                    let namespace = &args.inventory_namespace;
                    super::verify::since(policy.as_ref(), &cluster, app, namespace).await
                }
                None => None,
            };
            let (repo, git) = (args.manifests.repo.as_deref(), &args.manifests.git);
            let check = policy.as_ref().map(|policy| Verification {
                policy,
                since: since.as_deref(),
                verdicts: &verdicts,
            });
            let desired = desired(path, (repo, chart.as_ref()), git, &read, check).await?;
            check_not_empty(args, &desired)?;
            let options = SyncOptions {
                inventory_namespace: &args.inventory_namespace,
                ..SyncOptions::new(args.app.as_deref().unwrap_or(""))
            };
            let sealed = desired.manifests.sealed.clone();
            Ok(observe_online(&cluster, &desired, &options)
                .await?
                .with_not_compared(sealed))
        }
    }
}

/// Issue #26: a chart calling `lookup`, rendered against a snapshot (`--live`), had
/// no cluster to read: its lookups answered empty maps, as `helm template`'s do, and
/// what it generates when they find nothing (a random password) is not what the
/// cluster holds. Said on stderr, so that such drift is not taken for real.
fn say_lookups_were_empty(desired: &Desired) {
    for chart in &desired.manifests.empty_lookups {
        eprintln!(
            "tether diff: chart {chart} calls lookup; rendered without a cluster (--live), its lookups answered nothing (as helm template's do)"
        );
    }
}

/// Issue #31: a path without manifests diffs as "0 objects, in sync", so a CI job
/// pointed at the wrong folder passed. It is an error unless `--allow-empty` says so.
fn check_not_empty(args: &DiffArgs, desired: &Desired) -> Result<(), Error> {
    let sealed = !desired.manifests.sealed.is_empty();
    if !desired.manifests.is_empty() || sealed || args.allow_empty {
        return Ok(());
    }
    let path = args.path.as_deref().unwrap_or(".");
    Err(Error::NoManifests {
        path: match &args.manifests.repo {
            Some(repo) => format!(
                "{}@{}:{path}",
                tether_core::source::redact(repo),
                args.manifests.git.reference
            ),
            None => path.to_string(),
        },
    })
}

/// The renderers for a known cluster (`remote`: a Git or chart URL, whose content is
/// not known yet): a chart sees its version and API versions,
/// and its `lookup` calls read the cluster through the endpoint returned, which
/// must live until the render is done (issue #26).
/// A directory on disk that is no chart renders none, so its sync or diff makes no
/// `/version` request; a Git path's content is not known yet, so it is always asked.
pub(super) async fn for_cluster(
    cluster: &Cluster,
    renderers: tether_diff::manifest::Renderers,
    path: &str,
    repo: Option<&str>,
) -> Result<(tether_diff::manifest::Renderers, LookupEndpoint), Error> {
    let lookup = LookupEndpoint::start(cluster)
        .await
        .map_err(DesiredError::from)?;
    let renderers = renderers.with_lookup(lookup.kubeconfig());
    if repo.is_none()
        && !Path::new(path)
            .join(tether_diff::manifest::CHART_FILE)
            .is_file()
    {
        return Ok((renderers, lookup));
    }
    let (version, apis) = cluster.capabilities().await.map_err(Error::Connect)?;
    Ok((renderers.for_cluster(version, apis), lookup))
}

/// The desired state at `path`, on disk or (with `repo`) in Git, or of the chart
/// source `chart` (`--chart`). `tether sync` reads its desired state the same way.
pub(super) async fn desired(
    path: &str,
    (repo, chart): (Option<&str>, Option<&Source>),
    git: &GitArgs,
    read: &ReadOptions<'_>,
    verify: Option<Verification<'_>>,
) -> Result<Desired, DesiredError> {
    if let Some(source) = chart {
        let cache = git.cache()?;
        let input = DesiredInput::Git {
            cache: &cache,
            source,
            // A chart has no commit to be signed.
            verify: None,
        };
        return read_desired(input, read).await;
    }
    match repo {
        Some(repo) => {
            let source = git.source(repo, path);
            let cache = git.cache()?;
            read_desired(
                DesiredInput::Git {
                    cache: &cache,
                    source: &source,
                    verify,
                },
                read,
            )
            .await
        }
        None => read_desired(DesiredInput::Dir(Path::new(path)), read).await,
    }
}
