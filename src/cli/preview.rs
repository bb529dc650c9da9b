//! `tether diff --base REF`: what merging a change does, for a pull request. The
//! repository is the Git checkout the command runs in; each app (`--path`, or the
//! apps of `--config` that read this repository) is rendered at the base and at the
//! head (`--ref`, default the checked-out `HEAD`) and the two compared, offline.

use std::path::Path;

use tether_controller::config::Config;
use tether_core::report::comment::{CommentTarget, Posted, upsert};
use tether_core::report::delivery::DeliveryOptions;
use tether_core::report::drift::DriftReport;
use tether_core::report::preview::{
    BARE_COMMENT_MARKER, GITHUB_COMMENT_LIMIT, Totals, comment_marker, default_comment_id,
    render_json, render_junit, render_markdown, render_markdown_files, render_text,
};
use tether_core::source::{LocalRepo, normalize_repo_url};
use tether_core::sync::SyncOptions;
use tether_core::sync::desired::{Desired, compare_offline, read_snapshot};
use tether_core::sync::preview::{AppOutcome, NoiseFilter, Preview, PreviewApp, preview};

use super::comment;
use super::diff::{Color, DiffArgs, ReportFormat, observe_online, sealed_without_keys};
use super::{Error, Outcome, write_stdout};

pub(super) async fn run(args: &DiffArgs, base: &str) -> Result<Outcome, Error> {
    // Where the comment goes is settled before any render: a job missing its token
    // fails at once, not after the work.
    let comment = match args.comment.comment {
        true => Some(comment::target(&args.comment, &|name| {
            std::env::var(name).ok()
        })?),
        false => None,
    };
    let cwd = std::env::current_dir().map_err(Error::Output)?;
    let repo = LocalRepo::discover(&cwd).map_err(Error::Cache)?;
    let base = repo.resolve(base).map_err(Error::Cache)?;
    let head = repo
        .resolve(&args.manifests.git.reference)
        .map_err(Error::Cache)?;
    let marker = marker(args, &repo, &cwd);
    let apps = match &args.config {
        Some(config) => config_apps(&repo, config, args)?,
        None => {
            let path = repo_path(&repo, &cwd, args.path.as_deref().unwrap_or("."));
            let name = args.app.clone().unwrap_or_else(|| {
                path.rsplit('/')
                    .next()
                    .filter(|n| !n.is_empty())
                    .unwrap_or("root")
                    .to_string()
            });
            let mut renderers =
                args.manifests
                    .render
                    .renderers(Some(&name), &path, &args.namespace)?;
            renderers.sops = sealed_without_keys(args, renderers.sops);
            vec![PreviewApp {
                renderers,
                name,
                default_namespace: args.namespace.clone(),
                path,
            }]
        }
    };
    let mut noise = NoiseFilter::default();
    noise.labels.extend(args.ignore_label.iter().cloned());
    noise
        .annotations
        .extend(args.ignore_annotation.iter().cloned());
    let live = wants_live(args);
    let mut found =
        tokio::task::spawn_blocking(move || preview(&repo, &base, &head, &apps, &noise, live))
            .await?
            .map_err(Error::Preview)?;
    if live {
        compare_live(args, &mut found).await?;
    }
    say_lookups_were_empty(&found);
    let mut out = match args.output {
        ReportFormat::Json => serde_json::to_string_pretty(&render_json(&found))?,
        ReportFormat::Junit => render_junit(&found),
        ReportFormat::Markdown => {
            let limit = args.markdown_limit.unwrap_or(GITHUB_COMMENT_LIMIT);
            render_markdown(&found, limit, &marker)
        }
        _ => render_text(
            &found,
            match args.color {
                Color::Always => true,
                Color::Never => false,
                Color::Auto => std::io::IsTerminal::is_terminal(&std::io::stdout()),
            },
        ),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if let Some(dir) = &args.output_dir {
        write_files(dir, &render_markdown_files(&found))?;
    }
    write_stdout(&out)?;
    if let Some(target) = comment {
        post_comment(&target, &found, args.markdown_limit, &marker).await?;
    }
    let failed: Vec<String> = found
        .apps
        .iter()
        .filter(|app| matches!(app.outcome, AppOutcome::Failed { .. }))
        .map(|app| app.name.clone())
        .collect();
    if args.fail_on_error && !failed.is_empty() {
        return Err(Error::RenderFailed { apps: failed });
    }
    Ok(if Totals::of(&found).has_changes() {
        Outcome::Drift
    } else {
        Outcome::Success
    })
}

/// Issue #26: a preview renders both revisions without a cluster, so a chart calling
/// `lookup` had its lookups answer empty maps (as `helm template`'s do), and what it
/// generates then (a random password) is not what the cluster holds. Said on
/// stderr, as `tether diff --live` says it, so that such a change is not taken for real.
fn say_lookups_were_empty(found: &Preview) {
    for app in &found.apps {
        for chart in &app.empty_lookups {
            eprintln!(
                "tether diff: app {}: chart {chart} calls lookup; rendered without a cluster (a preview), its lookups answered nothing (as helm template's do)",
                app.name
            );
        }
    }
}

/// Whether each rendered app's head is also compared with live objects: a snapshot
/// (`--live`) or a cluster named on the command line (`--kubeconfig`, `--context`).
/// A `KUBECONFIG` alone does not: a preview stays offline unless asked.
fn wants_live(args: &DiffArgs) -> bool {
    args.live.is_some() || args.cluster.kubeconfig.is_some() || args.cluster.context.is_some()
}

/// Each rendered app's head against the live objects: what merging does to the
/// cluster, decided as `tether diff` decides it (offline against the snapshot, or
/// by the observe path every sync takes, writing nothing).
async fn compare_live(args: &DiffArgs, found: &mut Preview) -> Result<(), Error> {
    let revision = found.head.clone();
    if let Some(path) = &args.live {
        let live = read_snapshot(path, &args.namespace)?;
        for app in &mut found.apps {
            if let Some(head) = app.head.take() {
                let objects = compare_offline(&head, &live, Some(&app.name), &[]);
                let report = DriftReport {
                    objects,
                    ..DriftReport::default()
                };
                // A live object an encrypted document names is not pruned by merging.
                app.live = Some(report.with_not_compared(head.sealed).objects);
            }
        }
        return Ok(());
    }
    let cluster = args.request.connect_to(&args.cluster).await?;
    for app in &mut found.apps {
        let Some(manifests) = app.head.take() else {
            continue;
        };
        let sealed = manifests.sealed.clone();
        let desired = Desired {
            revision: Some(revision.clone()),
            manifests,
            verified: None,
        };
        let options = SyncOptions {
            inventory_namespace: &args.inventory_namespace,
            ..SyncOptions::new(&app.name)
        };
        let report = observe_online(&cluster, &desired, &options)
            .await
            .map_err(|error| Error::App {
                app: app.name.clone(),
                error: Box::new(error),
            })?;
        app.live = Some(report.with_not_compared(sealed).objects);
    }
    Ok(())
}

/// The hidden marker of this preview's comment (and of its Markdown): `--comment-id`,
/// or a short hash of how the apps were chosen (the configuration's or the app's
/// path in the repository, and `--app`), the same on every run of the job.
fn marker(args: &DiffArgs, repo: &LocalRepo, cwd: &Path) -> String {
    let id = match &args.comment.comment_id {
        Some(id) => id.clone(),
        None => {
            let what = match &args.config {
                Some(config) => format!(
                    "config\0{}",
                    repo_path(repo, cwd, &config.to_string_lossy())
                ),
                None => format!(
                    "path\0{}",
                    repo_path(repo, cwd, args.path.as_deref().unwrap_or("."))
                ),
            };
            default_comment_id(&format!("{what}\0{}", args.app.as_deref().unwrap_or("")))
        }
    };
    comment_marker(&id)
}

/// Creates or updates the pull request's comment with the Markdown report, cut to
/// the provider's limit (or `--markdown-limit`, if smaller), and says which on stderr.
/// A comment of an earlier tether, marked without an id, is adopted.
async fn post_comment(
    target: &CommentTarget,
    found: &Preview,
    limit: Option<usize>,
    marker: &str,
) -> Result<(), Error> {
    let limit = limit.map_or(target.limit(), |l| l.min(target.limit()));
    let body = render_markdown(found, limit, marker);
    let adopt = [BARE_COMMENT_MARKER];
    let posted = upsert(target, &body, marker, &adopt, &DeliveryOptions::default())
        .await
        .map_err(Error::Comment)?;
    let what = match posted {
        Posted::Created => "added".to_string(),
        Posted::Updated { id } => format!("{id} updated"),
        Posted::Unchanged { id } => format!("{id} unchanged"),
    };
    eprintln!(
        "tether: comment {what} on {} {} #{}",
        target.provider, target.repository, target.number
    );
    Ok(())
}

/// `path` (relative to the current directory, as a user types it) as a path from
/// the repository's top, where Git's trees are read.
fn repo_path(repo: &LocalRepo, cwd: &Path, path: &str) -> String {
    let top = repo
        .work_dir()
        .and_then(|dir| std::fs::canonicalize(dir).ok());
    let here = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let prefix = top
        .and_then(|top| here.strip_prefix(top).ok().map(Path::to_path_buf))
        .unwrap_or_default();
    let mut parts: Vec<String> = Vec::new();
    for part in prefix.join(path).components() {
        match part {
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            std::path::Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    parts.join("/")
}

/// The apps of a service configuration whose source is this repository (one of its
/// remotes, or its own directory), all or the one `--app` names.
fn config_apps(repo: &LocalRepo, path: &Path, args: &DiffArgs) -> Result<Vec<PreviewApp>, Error> {
    let only = args.app.as_deref();
    // The renderers' programs are the command line's (--helm, --kustomize and their
    // environment variables), as the job's machine has them.
    let programs = args.manifests.render.renderers(None, ".", "")?;
    let config = Config::load(path).map_err(Error::Config)?;
    if let Some(name) = only
        && config.app(name).is_none()
    {
        return Err(Error::NoSuchApp {
            config: path.to_path_buf(),
            app: name.to_string(),
        });
    }
    let mut ours: Vec<_> = repo
        .remote_urls()
        .iter()
        .map(|url| normalize_repo_url(url))
        .collect();
    if let Some(dir) = repo.work_dir() {
        ours.push(normalize_repo_url(&dir.to_string_lossy()));
    }
    let apps: Vec<PreviewApp> = config
        .apps
        .iter()
        .filter(|app| only.is_none_or(|name| app.name == name))
        .filter(|app| ours.contains(&normalize_repo_url(&app.source.repo)))
        .map(|app| {
            let mut renderers = tether_diff::manifest::Renderers {
                timeout: config.render_timeout,
                kustomize: programs.kustomize.clone(),
                // Both revisions are rendered with the command line's variables.
                substitute: programs.substitute.clone(),
                ..app.renderers()
            };
            renderers.helm.program = programs.helm.program.clone();
            renderers.sops = sealed_without_keys(args, renderers.sops);
            PreviewApp {
                name: app.name.clone(),
                path: app.source.path.clone(),
                default_namespace: app.destination.namespace.clone(),
                renderers,
            }
        })
        .collect();
    if apps.is_empty() {
        return Err(Error::NoAppReadsRepository {
            config: path.to_path_buf(),
        });
    }
    Ok(apps)
}

/// Writes the report's files into `dir`, creating it.
fn write_files(dir: &Path, files: &[(String, String)]) -> Result<(), Error> {
    let io = |source| Error::OutputDir {
        dir: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    for (name, content) in files {
        std::fs::write(dir.join(name), content).map_err(io)?;
    }
    Ok(())
}
