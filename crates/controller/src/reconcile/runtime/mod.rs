//! The controller runtime of `tether serve` (kube-rs's `Controller`, apart from what
//! serves HTTP): it owns every app's worker and source watcher, the worker registry
//! the watch dispatcher and the HTTP server reach apps through, the connections and
//! watch caches apps sync through, leadership and shards, the App and AppSet watches,
//! configuration reloads on SIGHUP, and the stop that finishes passes in flight within
//! `server.shutdownTimeout` (a pod's grace period: issue #12). `server::service` wires
//! it to the HTTP server; nothing here serves HTTP.
//!
//! ```text
//! module       what it owns
//! connections  one connection and watch cache per cluster; who each app acts as
//! dispatch     object changes to the app they concern; a sharded cache's shards
//! lifecycle    an app's worker started; a reload's stops, starts and restarts
//! apps         App objects: their watch, status, deletion
//! appsets      AppSets: the Apps they generate
//! identity     why a worker cannot start (who it would act as)
//! ledger       tether's ConfigMap records (suspensions, pins), watched
//! suspend      Suspend and Resume, kept in the cluster
//! pins         rollback pins, kept in the cluster
//! commit_page  the provider's commit page the status links to
//! ```

mod apps;
mod appsets;
mod commit_page;
mod connections;
mod dispatch;
mod file_appsets;
mod identity;
mod ledger;
mod lifecycle;
mod pins;
mod suspend;

pub use commit_page::commit_url_prefix;
pub use pins::{PINNED_CONFIGMAP, PinError};
pub use suspend::{SUSPENDED_CONFIGMAP, SuspendError};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError};
use crate::reconcile::app::{self, AppHandle, Shared};
use crate::reconcile::depends::Dependencies;
use crate::reconcile::leader::{Elector, LeaderConfig, Leadership, default_identity};
use crate::reconcile::shard::{Ownership, ShardConfig, Sharding};
use tether_core::cluster::cache::Cache;
use tether_core::cluster::{Cluster, ClusterError, ClusterKey};
use tether_core::report::commit_status::CommitStatusReporter;
use tether_core::report::delivery::{DeliveryError, DeliveryOptions};
use tether_core::report::notify::Notifier;
use tether_core::report::outbound::OutboundPolicy;
use tether_core::report::status::Statuses;
use tether_core::source::{CacheOptions, SourceCache, SourceError, Triggers};

/// How long a worker stopped by a reload may take to finish its pass (in-flight
/// applies). A service stop uses `server.shutdownTimeout` instead.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// The part of `server.shutdownTimeout` kept back from passes in flight for what must
/// follow them: the last notifications and commit statuses (a request each), then the
/// Lease release (one request, after which a follower takes over at its next retry
/// rather than after a whole lease duration). Shrinks to a fifth of a short budget.
const STOP_RESERVE: Duration = Duration::from_secs(3);

/// How long the start waits for the suspensions and pins recorded in the cluster (a
/// LIST each) before starting workers anyway: a cluster that slow has the watch tell
/// them later.
const SUSPENSIONS_WAIT: Duration = Duration::from_secs(5);

/// Where the service gets its configuration and cluster.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub config: PathBuf,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub cache_dir: Option<PathBuf>,
    /// Elect a leader with a Lease (also on when the config says so).
    pub leader_elect: bool,
    /// `--default-service-account`: overrides `server.defaultServiceAccount`.
    pub default_service_account: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error("Git cache: {0}")]
    Source(#[from] SourceError),
    #[error("outbound HTTP client: {0}")]
    Delivery(DeliveryError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
}

/// One running app: its worker and its source watcher.
struct Running {
    handle: AppHandle,
    source_task: JoinHandle<()>,
    source_cancel: CancellationToken,
    /// The connection it syncs through.
    target: Target,
    /// The cluster it syncs to, as it acts there: reads on its behalf (the
    /// dashboard's tree) go through it.
    cluster: Arc<Cluster>,
}

/// The cluster an app syncs to, as the service keys its connections and caches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    /// A context of the kubeconfig tether runs with (None: its current one, or
    /// in-cluster).
    Context(Option<String>),
    /// The cluster of a kubeconfig Secret: apps whose kubeconfigs are equal share it.
    Remote(ClusterKey),
}

/// One cluster's connection and watch cache, and the apps using them: dropped with
/// the last of its apps (the service's own cluster stays).
struct Connection {
    shared: Arc<Shared>,
    apps: std::collections::HashSet<String>,
    stop: CancellationToken,
}

/// The worker registry: the running apps, shared by the reload logic, the watch
/// dispatcher and the HTTP server (through `server::Control`).
pub struct Registry {
    running: Mutex<HashMap<String, Running>>,
    config_loaded: std::sync::atomic::AtomicBool,
    caches: Mutex<Vec<(Target, Cache)>>,
    ownership: Ownership,
    suspensions: suspend::Suspensions,
    pins: pins::Pins,
}
impl Registry {
    /// Asks the app for a manual sync; false when there is no such app.
    pub fn request_sync(&self, app: &str) -> bool {
        let running = self.running.lock();
        match running.get(app) {
            Some(r) => {
                r.handle.request_sync();
                true
            }
            None => false,
        }
    }

    /// Suspends or resumes the app's automation and records it in the cluster:
    /// `Ok(false)` when there is no such app.
    pub fn set_suspended(
        &self,
        app: &str,
        suspended: bool,
    ) -> futures::future::BoxFuture<'_, Result<bool, SuspendError>> {
        let app = app.to_string();
        Box::pin(async move {
            let declared = match self.running.lock().get(&app) {
                None => return Ok(false),
                // An App's `spec.suspend` is what Resume writes; a file's is not.
                Some(r) => r.handle.config.suspend && r.handle.config.tenant_namespace.is_none(),
            };
            if declared && !suspended {
                return Err(SuspendError::Declared(app));
            }
            self.suspensions.record(&app, suspended).await?;
            // At once here; other replicas (and an App's restarted worker) from the
            // cluster.
            let running = self.running.lock();
            if let Some(r) = running.get(&app) {
                r.handle.set_suspended(suspended);
            }
            Ok(true)
        })
    }

    /// Pins the app to an earlier revision (a rollback) or unpins it, and records it
    /// in the cluster: `Ok(false)` when there is no such app.
    pub fn set_pin(
        &self,
        app: &str,
        pin: Option<tether_core::report::status::Pin>,
    ) -> futures::future::BoxFuture<'_, Result<bool, PinError>> {
        let app = app.to_string();
        Box::pin(async move {
            let known = |apps: &Registry| {
                let running = apps.running.lock();
                running.contains_key(&app)
            };
            if !known(self) {
                return Ok(false);
            }
            self.pins.record(&app, pin.as_ref()).await?;
            // At once here (a rollback syncs even with automated sync off); other
            // replicas from the cluster.
            let running = self.running.lock();
            if let Some(r) = running.get(&app) {
                let rollback = pin.is_some();
                r.handle.set_pin(pin);
                if rollback {
                    r.handle.request_sync();
                }
            }
            Ok(true)
        })
    }

    /// The connection the app syncs through, for reads on its behalf.
    pub fn cluster(&self, app: &str) -> Option<Arc<Cluster>> {
        let running = self.running.lock();
        running.get(app).map(|r| r.cluster.clone())
    }

    /// Each readiness check by name, with whether it passes.
    pub fn readiness(&self) -> Vec<(&'static str, bool)> {
        let caches = self.caches.lock();
        vec![
            (
                "config loaded",
                self.config_loaded.load(std::sync::atomic::Ordering::SeqCst),
            ),
            (
                "caches synced",
                caches.iter().all(|(_, cache)| cache.synced()),
            ),
            ("leadership known", self.ownership.is_known()),
        ]
    }

    /// Who answers for `app` when apps are sharded across replicas.
    pub fn owner(&self, app: &str) -> Option<crate::reconcile::shard::Owner> {
        self.ownership.owner(app)
    }

    /// How many objects the watch caches hold.
    pub fn cache_objects(&self) -> usize {
        let caches = self.caches.lock();
        caches.iter().map(|(_, cache)| cache.len()).sum()
    }
}

/// The clusters apps sync to, one per kubeconfig context or kubeconfig Secret, each
/// with its watch cache, and the identity each app acts as (`connections`).
struct Contexts {
    options: ServeOptions,
    default: Arc<Cluster>,
    shared: HashMap<Target, Connection>,
    /// The ServiceAccount apps naming none act as (the option, else the file's; a
    /// server setting, read once).
    default_service_account: Option<String>,
    sources: SourceCache,
    statuses: Statuses,
    ownership: Ownership,
    passes: Arc<Semaphore>,
    heals: Arc<Semaphore>,
    workers: CancellationToken,
    apps: Arc<Registry>,
    notifier: Notifier,
    commit_statuses: CommitStatusReporter,
    app_objects: apps::AppObjects,
    /// Every app's `dependsOn` (`reconcile::depends`).
    dependencies: Dependencies,
}

/// The Git cache and the service's own cluster, opened before anything else starts.
pub async fn connect(
    options: &ServeOptions,
    config: &Config,
) -> Result<(SourceCache, Arc<Cluster>), ServeError> {
    let sources = SourceCache::open_with(
        options
            .cache_dir
            .clone()
            .unwrap_or_else(SourceCache::default_dir),
        CacheOptions {
            budget: config.sources.budget,
            ..CacheOptions::default()
        },
    )?;
    let cluster = Arc::new(
        Cluster::connect(options.kubeconfig.as_deref(), options.context.as_deref()).await?,
    );
    sources.read_secrets_with(cluster.clone());
    // A chart's dependency repositories are named by whoever writes the chart, not by
    // the operator: they reach only what an App's requests may (issue #26).
    sources.charts().guard(Arc::new(OutboundPolicy::new(
        config.server.outbound_allowed.clone(),
    )));
    Ok((sources, cluster))
}

/// The runtime, built by [`Runtime::new`], run by [`Runtime::run`] until the shutdown
/// signal, then stopped by [`Runtime::stop`].
pub struct Runtime {
    options: ServeOptions,
    current: Config,
    contexts: Contexts,
    registry: Arc<Registry>,
    statuses: Statuses,
    triggers: Triggers,
    workers: CancellationToken,
    elector: Option<(Elector, Leadership)>,
    sharding: Option<(Sharding, Ownership)>,
}

impl Runtime {
    /// Takes leadership or shards (as the configuration says) and makes the worker
    /// registry; no app starts before [`Runtime::run`]. `status_url` is where peers
    /// reach this replica's status API when apps are sharded.
    pub fn new(
        options: ServeOptions,
        config: Config,
        cluster: Arc<Cluster>,
        sources: SourceCache,
        status_url: Option<String>,
    ) -> Result<Runtime, ServeError> {
        let sharding = (config.shards > 1).then(|| {
            let election = LeaderConfig::from_config(&config.leader_election, default_identity());
            tracing::info!(identity = %election.identity, shards = config.shards, status_url = ?status_url, "sharding");
            let shards = ShardConfig {
                shards: config.shards,
                election,
                status_url,
            };
            Sharding::spawn(cluster.clone(), shards)
        });
        let elector = if sharding.is_some() {
            // Each shard is its own election: no single leader.
            if options.leader_elect {
                tracing::info!("--leader-elect: shards are elected each on their own instead");
            }
            None
        } else if options.leader_elect || config.leader_election.enabled {
            let leader = LeaderConfig::from_config(&config.leader_election, default_identity());
            tracing::info!(identity = %leader.identity, lease = %leader.lease_name, "electing a leader");
            Some(Elector::spawn(cluster.clone(), leader))
        } else {
            None
        };
        let leadership = elector
            .as_ref()
            .map_or_else(Leadership::always, |(_, leadership)| leadership.clone());
        let ownership = match &sharding {
            Some((_, ownership)) => ownership.clone(),
            None => Ownership::whole(leadership),
        };
        let statuses = Statuses::default();
        let triggers = Triggers::new();
        let registry = Arc::new(Registry {
            running: Mutex::new(HashMap::new()),
            config_loaded: std::sync::atomic::AtomicBool::new(true),
            caches: Mutex::new(Vec::new()),
            ownership: ownership.clone(),
            suspensions: suspend::Suspensions::new(
                cluster.clone(),
                config.inventory_namespace.clone(),
            ),
            pins: pins::Pins::new(cluster.clone(), config.inventory_namespace.clone()),
        });
        let workers = CancellationToken::new();
        let delivery = DeliveryOptions {
            outbound: Arc::new(OutboundPolicy::new(config.server.outbound_allowed.clone())),
            ..DeliveryOptions::default()
        };
        let contexts = Contexts {
            options: options.clone(),
            default: cluster,
            shared: HashMap::new(),
            default_service_account: options
                .default_service_account
                .clone()
                .or_else(|| config.server.default_service_account.clone()),
            sources,
            statuses: statuses.clone(),
            ownership,
            passes: Arc::new(Semaphore::new(config.concurrency)),
            heals: Arc::new(Semaphore::new(config.concurrency * app::HEALS_PER_PASS)),
            workers: workers.clone(),
            apps: registry.clone(),
            notifier: Notifier::start(delivery.clone()).map_err(ServeError::Delivery)?,
            commit_statuses: CommitStatusReporter::start(delivery).map_err(ServeError::Delivery)?,
            app_objects: apps::AppObjects::default(),
            dependencies: Dependencies::new(statuses.clone()),
        };
        contexts.dependencies.spawn_waker(workers.child_token());
        Ok(Runtime {
            options,
            current: config,
            contexts,
            registry,
            statuses,
            triggers,
            workers,
            elector,
            sharding,
        })
    }

    /// The worker registry, for the HTTP server.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Every app's status, as the workers write it.
    pub fn statuses(&self) -> &Statuses {
        &self.statuses
    }

    /// What a webhook or a poll tells the sources to fetch.
    pub fn triggers(&self) -> &Triggers {
        &self.triggers
    }

    /// Starts every app (after the suspensions and pins recorded in the cluster are
    /// read, or [`SUSPENSIONS_WAIT`] passed), the App and AppSet watches when the
    /// configuration asks for them, and runs until `shutdown`: App events start,
    /// restart and stop their workers, SIGHUP reloads the configuration file.
    pub async fn run(&mut self, shutdown: CancellationToken) -> Result<(), ServeError> {
        self.read_records().await;
        let (contexts, triggers, workers) = (&mut self.contexts, &self.triggers, &self.workers);
        // What AppSets' generators share: the file's (below) and the AppSet objects'.
        let appset_context = appsets::AppSetContext {
            cluster: contexts.default.clone(),
            sources: contexts.sources.clone(),
            triggers: triggers.clone(),
            ownership: contexts.ownership.clone(),
            poll: tether_core::source::PollConfig {
                min_interval: self.current.sources.min_interval,
                ..tether_core::source::PollConfig::default()
            },
        };
        // The file's appSets, expanded with what their generators read (issue #28).
        let mut file_appsets =
            file_appsets::FileAppSets::new(appset_context.clone(), workers.child_token());
        self.current = file_appsets.load(&self.options.config).await?;
        contexts.start_all(&self.current, triggers).await?;

        // App objects, next to the file's apps (issue #16).
        let (app_events_tx, mut app_events) = tokio::sync::mpsc::channel(1024);
        if self.current.server.apps.enabled {
            apps::spawn_watch(
                contexts.default.clone(),
                self.current.server.apps.clone(),
                app_events_tx,
                workers.child_token(),
            );
            apps::spawn_status_writer(
                contexts.app_objects.clone(),
                contexts.default.clone(),
                self.statuses.clone(),
                contexts.ownership.clone(),
                workers.child_token(),
            );
            // AppSets write Apps; the App watch above runs them (issue #28).
            appsets::spawn(
                appset_context,
                self.current.server.apps.clone(),
                workers.child_token(),
            );
        } else {
            drop(app_events_tx);
        }

        let mut hangups = hangup_signals();
        loop {
            // A changed file (SIGHUP) and a generator's moved input (its appSets'
            // apps) take one path.
            let reload = tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(event) = app_events.recv() => {
                    contexts.app_event(event, &self.current, triggers).await?;
                    false
                }
                _ = hangups.recv() => true,
                () = file_appsets.moved() => true,
            };
            if !reload {
                continue;
            }
            match file_appsets.load(&self.options.config).await {
                Ok(next) => {
                    contexts.reload(&self.current, &next, triggers).await?;
                    file_appsets::prune_removed(contexts, &self.current, &next).await;
                    tracing::info!(apps = next.apps.len(), "configuration reloaded");
                    self.current = next;
                }
                Err(err) => {
                    tracing::error!(error = %err, "new configuration refused; keeping the running one");
                }
            }
        }
        Ok(())
    }

    /// Follows the suspensions and rollback pins recorded in the cluster, and waits
    /// (at most [`SUSPENSIONS_WAIT`]) for their first reading, so that the first pass
    /// already honours them.
    async fn read_records(&self) {
        let (apps, workers) = (&self.registry, &self.workers);
        // Suspensions recorded in the cluster, before the first pass and as they change.
        let suspensions_listed = {
            let apps = apps.clone();
            apps.suspensions.clone().spawn_watch(
                move |app, suspended| {
                    let running = apps.running.lock();
                    if let Some(r) = running.get(app) {
                        r.handle.set_suspended(suspended);
                    }
                },
                workers.child_token(),
            )
        };
        // Rollback pins likewise: a restarted service keeps a rolled-back app where it is.
        let pins_listed = {
            let apps = apps.clone();
            apps.pins.clone().spawn_watch(
                move |app, pin| {
                    let running = apps.running.lock();
                    if let Some(r) = running.get(app) {
                        r.handle.set_pin(pin);
                    }
                },
                workers.child_token(),
            )
        };
        let _ = tokio::time::timeout(
            SUSPENSIONS_WAIT,
            futures::future::join(suspensions_listed, pins_listed),
        )
        .await;
    }

    /// Stops within `budget` from `began` (`server.shutdownTimeout`, read at the
    /// start: server settings change only at a restart): passes in flight finish (or
    /// are aborted at the deadline less a reserve), then the last notifications and
    /// commit statuses go out, then the Lease and shards are released. Returns the
    /// deadline, for what the caller still has to close (its HTTP server).
    pub async fn stop(self, began: Instant, budget: Duration) -> Instant {
        let Runtime {
            contexts,
            registry,
            workers,
            elector,
            sharding,
            ..
        } = self;
        let deadline = began + budget;
        let reserve = STOP_RESERVE.min(budget / 5);
        tracing::info!(budget = ?budget, "stopping: finishing passes in flight");
        // No new pass starts from here: a worker waiting for a permit gets none and ends.
        contexts.passes.close();
        contexts.heals.close();
        let running: Vec<Running> = {
            let mut map = registry.running.lock();
            map.drain().map(|(_, r)| r).collect()
        };
        let passes_until = deadline - reserve;
        futures::future::join_all(running.into_iter().map(|r| stop_app(r, passes_until))).await;
        workers.cancel();
        // What the last passes queued is sent within what is left, keeping half the
        // reserve for the Lease.
        within(
            deadline - reserve / 2,
            "sending the last notifications and commit statuses",
            futures::future::join(
                contexts.notifier.shutdown(),
                contexts.commit_statuses.shutdown(),
            ),
        )
        .await;
        if let Some((elector, _)) = elector {
            // Released only after the last write: the next leader starts from here. Not
            // released in time, the lease expires on its own.
            within(deadline, "releasing the lease", elector.release()).await;
        }
        if let Some((sharding, _)) = sharding {
            within(deadline, "releasing the shards", sharding.release()).await;
        }
        deadline
    }
}

/// Runs `work` until `until`, then gives up on it (dropping it cancels it).
pub async fn within<F: std::future::Future>(
    until: Instant,
    what: &str,
    work: F,
) -> Option<F::Output> {
    match tokio::time::timeout_at(until.into(), work).await {
        Ok(output) => Some(output),
        Err(_) => {
            tracing::warn!("stopping: {what} did not finish within server.shutdownTimeout");
            None
        }
    }
}

/// Stops an app's source and worker; a pass still running at `until` is aborted.
async fn stop_app(running: Running, until: Instant) {
    running.source_cancel.cancel();
    running
        .handle
        .stop(until.saturating_duration_since(Instant::now()))
        .await;
    running.source_task.abort();
}

/// SIGHUP deliveries (none where there are no signals).
fn hangup_signals() -> tokio::sync::mpsc::Receiver<()> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut hup) = signal(SignalKind::hangup()) {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    if tx.send(()).await.is_err() {
                        return;
                    }
                }
            });
        }
    }
    #[cfg(not(unix))]
    drop(tx);
    rx
}
