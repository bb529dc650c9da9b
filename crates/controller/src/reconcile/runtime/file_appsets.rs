//! The configuration file's `appSets` in `tether serve` (issue #28): the file is
//! resolved with its AppSets expanded into file apps ([`FileAppSets::load`], a pure
//! function of the file and what the generators read: `reconcile::appset::file`), and
//! resolved again through the reload path a changed file takes whenever a generator's
//! input moves ([`FileAppSets::moved`]: a repository's new commit, from a poll or a
//! webhook, or a changed set of cluster Secrets). A generated app whose parameter set
//! is gone leaves the configuration like a deleted entry; with `syncPolicy.deletion:
//! delete` its objects are then pruned ([`prune_removed`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::Contexts;
use super::appsets::{AppSetContext, Followed, Reading, follow_sources, gather};
use crate::config::{Config, ConfigError, Problem};
use crate::reconcile::appset::file::{Reads, generate};
use crate::reconcile::appset::{Facts, GitRef};
use tether_core::cluster::Resolved;

/// How long loading the file waits for a generator's repository to be fetched for the
/// first time (a clone of a large repository on a loaded host; the App loop's own
/// fetches have no such bound, but a service cannot start without its apps).
const FIRST_FETCH_WAIT: Duration = Duration::from_secs(120);

/// How often the cluster Secrets a `clusters` generator reads are listed again (as the
/// AppSet objects' workers do: `appsets::CLUSTERS_REFRESH`).
const CLUSTERS_REFRESH: Duration = super::appsets::CLUSTERS_REFRESH;

/// The file's AppSets: the repositories their generators follow, and what was read.
pub(super) struct FileAppSets {
    context: AppSetContext,
    followed: BTreeMap<GitRef, Followed>,
    /// The revision of each repository the last load read.
    used: BTreeMap<GitRef, Option<String>>,
    /// The namespace whose cluster Secrets the last load listed, if any.
    clusters: Option<String>,
    secret: Option<Resolved>,
    cancel: CancellationToken,
}

impl FileAppSets {
    pub(super) fn new(context: AppSetContext, cancel: CancellationToken) -> FileAppSets {
        FileAppSets {
            context,
            followed: BTreeMap::new(),
            used: BTreeMap::new(),
            clusters: None,
            secret: None,
            cancel,
        }
    }

    /// Reads and resolves the file at `path`, its `appSets` expanded with what their
    /// generators read now (fetched first when not yet read).
    pub(super) async fn load(&mut self, path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            origin: origin.clone(),
            source,
        })?;
        let mut facts = Facts::default();
        let mut read: Option<Reads> = None;
        loop {
            let mut reads = Reads::default();
            let config = Config::parse_with(&text, &origin, &mut |namespace, item| {
                generate(namespace, item, &facts, &mut reads)
            });
            // What generators read depends on their specs only: a second round with
            // those inputs gathered is the last.
            if read.as_ref() == Some(&reads) || reads == Reads::default() {
                return config;
            }
            facts = self
                .gather(&reads)
                .await
                .map_err(|message| ConfigError::Invalid {
                    origin: origin.clone(),
                    problems: vec![Problem {
                        path: "appSets".into(),
                        line: None,
                        message,
                    }],
                })?;
            read = Some(reads);
        }
    }

    /// Follows the repositories `reads` names (and only those), waits for their first
    /// fetch, and reads their trees and the cluster Secrets.
    async fn gather(&mut self, reads: &Reads) -> Result<Facts, String> {
        let namespace = reads.clusters.clone().unwrap_or_default();
        let reading = Reading {
            git: reads.git.clone(),
            namespace: &namespace,
            clusters: reads.clusters.is_some(),
            tenant: false,
        };
        follow_sources(&self.context, &reading, &mut self.followed, &self.cancel);
        let first_fetches = self.followed.values_mut().map(|f| async move {
            let _ = f
                .state
                .wait_for(|s| s.syncs > 0 || s.revision.is_some())
                .await;
        });
        let _ =
            tokio::time::timeout(FIRST_FETCH_WAIT, futures::future::join_all(first_fetches)).await;
        // Seen before reading: a commit landing after this wakes `moved`.
        self.used = self
            .followed
            .iter_mut()
            .map(|(git, f)| {
                let revision = f.state.borrow_and_update().revision.clone();
                (git.clone(), revision.map(|r| r.sha))
            })
            .collect();
        let secret = self.secret_kind().await?;
        self.clusters = reads.clusters.clone();
        gather(&self.context, &secret, &reading, &self.followed)
            .await
            .map_err(|e| e.to_string())
    }

    /// The Secret kind, found once.
    async fn secret_kind(&mut self) -> Result<Resolved, String> {
        if let Some(secret) = &self.secret {
            return Ok(secret.clone());
        }
        let secret = self
            .context
            .cluster
            .resolve(&GroupVersionKind::gvk("", "v1", "Secret"))
            .await
            .map_err(|e| format!("cannot find the Secret kind: {e}"))?
            .ok_or("Secrets are not served")?;
        self.secret = Some(secret.clone());
        Ok(secret)
    }

    /// Resolves when a generator's input moved since the last load: a repository at a
    /// new commit, or (every [`CLUSTERS_REFRESH`]) the cluster Secrets, which the next
    /// load lists again. Never, for a file without such generators.
    pub(super) async fn moved(&mut self) {
        let clusters = self.clusters.is_some();
        let commits = async {
            loop {
                if self.followed.is_empty() {
                    std::future::pending::<()>().await;
                }
                let changes: Vec<_> = self
                    .followed
                    .values_mut()
                    .map(|f| Box::pin(f.state.changed()))
                    .collect();
                let (changed, _, _) = futures::future::select_all(changes).await;
                if changed.is_err() {
                    // Its watcher has ended (the service is stopping): nothing moves.
                    std::future::pending::<()>().await;
                }
                let moved = self.followed.iter_mut().any(|(git, f)| {
                    let now = f.state.borrow_and_update().revision.clone();
                    self.used.get(git) != Some(&now.map(|r| r.sha))
                });
                if moved {
                    return;
                }
            }
        };
        tokio::select! {
            () = commits => {}
            () = async {
                if clusters {
                    tokio::time::sleep(CLUSTERS_REFRESH).await
                } else {
                    std::future::pending().await
                }
            } => {}
        }
    }
}

/// After a reload: the objects of each generated app whose parameter set is gone are
/// pruned when its AppSet says `deletion: delete` (its worker is stopped by then).
/// Under `orphan` (the default) they stay as they are, unmanaged, as Argo CD's
/// `preserveResourcesOnDeletion` leaves them; so does a listed app taken out of the file.
pub(super) async fn prune_removed(contexts: &mut Contexts, old: &Config, new: &Config) {
    let gone = old
        .generated
        .iter()
        .filter(|g| g.prune && new.app(&g.app).is_none());
    for generated in gone {
        let Some(app) = old.app(&generated.app) else {
            continue;
        };
        if !contexts.ownership.is_writer(&app.name) {
            continue;
        }
        let pruned = match contexts.for_app(app, old).await {
            Ok((target, shared)) => {
                let pruned =
                    super::apps::prune_all(&shared.cluster, &app.name, &old.inventory_namespace)
                        .await;
                contexts.release(&target, &app.name);
                pruned
            }
            Err(err) => Err(err.to_string()),
        };
        match pruned {
            Ok(()) => {
                tracing::info!(app = %app.name, app_set = %generated.app_set, origin = %generated.origin, "generated app removed: its parameter set is gone, its objects pruned")
            }
            Err(err) => {
                tracing::error!(app = %app.name, app_set = %generated.app_set, error = %err, "generated app removed: its objects could not be pruned")
            }
        }
    }
}
