//! `tether serve`: every app's worker, their sources, the watch cache, the HTTP
//! server, leadership, configuration reloads on SIGHUP, and a graceful stop that fits
//! in `server.shutdownTimeout` (a pod's grace period: issue #12).

mod apps;
mod appsets;
mod file_appsets;
mod identity;
mod ledger;
mod pins;
mod suspend;

use identity::StartError;

pub use pins::{PINNED_CONFIGMAP, PinError};
pub use suspend::{SUSPENDED_CONFIGMAP, SuspendError};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{AppConfig, Config, ConfigError};
use crate::reconcile::app::{self, AppHandle, Shared};
use crate::reconcile::depends::Dependencies;
use crate::reconcile::leader::{Elector, LeaderConfig, Leadership, default_identity};
use crate::reconcile::shard::{Ownership, ShardConfig, Sharding, shard_of};
use crate::server::{self, Control};
use tether_core::cluster::cache::{Cache, ShardMap};
use tether_core::cluster::{Bookkeeping, Cluster, ClusterError, ClusterKey};
use tether_core::metrics::METRICS;
use tether_core::report::commit_status::CommitStatusReporter;
use tether_core::report::delivery::{DeliveryError, DeliveryOptions};
use tether_core::report::notify::Notifier;
use tether_core::report::outbound::OutboundPolicy;
use tether_core::report::status::Statuses;
use tether_core::source::{
    CacheOptions, SourceCache, SourceError, SourceWatcher, Triggers, WebhookState, webhook_router,
};

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

/// The apps, shared by the reload logic and the HTTP server.
struct Apps {
    running: Mutex<HashMap<String, Running>>,
    config_loaded: std::sync::atomic::AtomicBool,
    caches: Mutex<Vec<(Target, Cache)>>,
    ownership: Ownership,
    suspensions: suspend::Suspensions,
    pins: pins::Pins,
}

impl Control for Apps {
    fn request_sync(&self, app: &str) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.get(app) {
            Some(r) => {
                r.handle.request_sync();
                true
            }
            None => false,
        }
    }

    fn set_suspended(
        &self,
        app: &str,
        suspended: bool,
    ) -> futures::future::BoxFuture<'_, Result<bool, SuspendError>> {
        let app = app.to_string();
        Box::pin(async move {
            let declared = match self
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&app)
            {
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
            let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(r) = running.get(&app) {
                r.handle.set_suspended(suspended);
            }
            Ok(true)
        })
    }

    fn set_pin(
        &self,
        app: &str,
        pin: Option<tether_core::report::status::Pin>,
    ) -> futures::future::BoxFuture<'_, Result<bool, PinError>> {
        let app = app.to_string();
        Box::pin(async move {
            let known = |apps: &Apps| {
                let running = apps.running.lock().unwrap_or_else(|p| p.into_inner());
                running.contains_key(&app)
            };
            if !known(self) {
                return Ok(false);
            }
            self.pins.record(&app, pin.as_ref()).await?;
            // At once here (a rollback syncs even with automated sync off); other
            // replicas from the cluster.
            let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
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

    fn cluster(&self, app: &str) -> Option<Arc<Cluster>> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.get(app).map(|r| r.cluster.clone())
    }

    fn readiness(&self) -> Vec<(&'static str, bool)> {
        let caches = self.caches.lock().unwrap_or_else(|p| p.into_inner());
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

    fn owner(&self, app: &str) -> Option<crate::reconcile::shard::Owner> {
        self.ownership.owner(app)
    }

    fn cache_objects(&self) -> usize {
        let caches = self.caches.lock().unwrap_or_else(|p| p.into_inner());
        caches.iter().map(|(_, cache)| cache.len()).sum()
    }
}

/// Runs the service until `shutdown` fires.
pub async fn serve(options: ServeOptions, shutdown: CancellationToken) -> Result<(), ServeError> {
    let config = Config::load(&options.config)?;
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
    let token = config.server.api_token()?;
    let peer_key = config
        .server
        .peer_token()?
        .map(|token| server::peer_auth::PeerKey::new(token.expose()));
    if token.is_none() && config.server.insecure_open_api {
        // Validation let a non-loopback address through only because the file says so.
        tracing::warn!(listen = %config.server.listen, "server.insecureOpenAPI: the status API (/api/v1) can trigger syncs and shows drifted values to anyone who can reach this address; set server.apiToken to require a token");
    }
    // Bound before shards are taken: peers are told the address actually bound.
    let listener = tokio::net::TcpListener::bind(config.server.listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: config.server.listen,
            source,
        })?;
    let bound = listener.local_addr().unwrap_or(config.server.listen);
    let sharding = (config.shards > 1).then(|| {
        let election = LeaderConfig::from_config(&config.leader_election, default_identity());
        let status_url = config
            .server
            .advertise_url
            .clone()
            .or_else(|| advertised_url(bound));
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
    let apps = Arc::new(Apps {
        running: Mutex::new(HashMap::new()),
        config_loaded: std::sync::atomic::AtomicBool::new(true),
        caches: Mutex::new(Vec::new()),
        ownership: ownership.clone(),
        suspensions: suspend::Suspensions::new(cluster.clone(), config.inventory_namespace.clone()),
        pins: pins::Pins::new(cluster.clone(), config.inventory_namespace.clone()),
    });
    let workers = CancellationToken::new();
    let delivery = DeliveryOptions {
        outbound: Arc::new(OutboundPolicy::new(config.server.outbound_allowed.clone())),
        ..DeliveryOptions::default()
    };
    let mut contexts = Contexts {
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
        apps: apps.clone(),
        notifier: Notifier::start(delivery.clone()).map_err(ServeError::Delivery)?,
        commit_statuses: CommitStatusReporter::start(delivery).map_err(ServeError::Delivery)?,
        app_objects: apps::AppObjects::default(),
        dependencies: Dependencies::new(statuses.clone()),
    };
    contexts.dependencies.spawn_waker(workers.child_token());

    let webhooks = webhook_router(WebhookState::new(
        config.server.webhook_config()?,
        triggers.clone(),
    ));
    // With a token the API is served beyond loopback: people log in with their own
    // Kubernetes tokens and RBAC limits them (issue #30).
    let people = token.as_ref().map(|_| {
        Arc::new(server::people::People::new(
            contexts.default.client().clone(),
            config.inventory_namespace.clone(),
        ))
    });
    let oidc = config.server.oidc.clone().map(|oidc| {
        let policy = Arc::new(OutboundPolicy::new(config.server.outbound_allowed.clone()));
        server::people::oidc::Oidc::new(oidc, policy).map(Arc::new)
    });
    let access = server::guard::Access {
        token,
        insecure_open_api: config.server.insecure_open_api,
        people,
        oidc: oidc.transpose()?,
    };
    let router = server::router(statuses.clone(), apps.clone(), webhooks, access, peer_key);
    let server_stop = CancellationToken::new();
    let mut server = {
        let stop = server_stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
            if let Err(err) = served {
                tracing::error!(error = %err, "HTTP server stopped");
            }
        })
    };
    tracing::info!(listen = %bound, apps = config.apps.len(), "tether serving");

    // Server settings, the stop budget among them, change only at a restart.
    let budget = config.server.shutdown_timeout;
    let mut current = config;
    // Suspensions recorded in the cluster, before the first pass and as they change.
    let suspensions_listed = {
        let apps = apps.clone();
        apps.suspensions.clone().spawn_watch(
            move |app, suspended| {
                let running = apps.running.lock().unwrap_or_else(|p| p.into_inner());
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
                let running = apps.running.lock().unwrap_or_else(|p| p.into_inner());
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
    // What AppSets' generators share: the file's (below) and the AppSet objects'.
    let appset_context = appsets::AppSetContext {
        cluster: contexts.default.clone(),
        sources: contexts.sources.clone(),
        triggers: triggers.clone(),
        ownership: contexts.ownership.clone(),
        poll: tether_core::source::PollConfig {
            min_interval: current.sources.min_interval,
            ..tether_core::source::PollConfig::default()
        },
    };
    // The file's appSets, expanded with what their generators read (issue #28).
    let mut file_appsets =
        file_appsets::FileAppSets::new(appset_context.clone(), workers.child_token());
    current = file_appsets.load(&options.config).await?;
    contexts.start_all(&current, &triggers).await?;

    // App objects, next to the file's apps (issue #16).
    let (app_events_tx, mut app_events) = tokio::sync::mpsc::channel(1024);
    if current.server.apps.enabled {
        apps::spawn_watch(
            contexts.default.clone(),
            current.server.apps.clone(),
            app_events_tx,
            workers.child_token(),
        );
        apps::spawn_status_writer(
            contexts.app_objects.clone(),
            contexts.default.clone(),
            statuses.clone(),
            contexts.ownership.clone(),
            workers.child_token(),
        );
        // AppSets write Apps; the App watch above runs them (issue #28).
        appsets::spawn(
            appset_context,
            current.server.apps.clone(),
            workers.child_token(),
        );
    } else {
        drop(app_events_tx);
    }

    let mut hangups = hangup_signals();
    loop {
        // A changed file (SIGHUP) and a generator's moved input (its appSets' apps)
        // take one path.
        let reload = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(event) = app_events.recv() => {
                contexts.app_event(event, &current, &triggers).await?;
                false
            }
            _ = hangups.recv() => true,
            () = file_appsets.moved() => true,
        };
        if !reload {
            continue;
        }
        match file_appsets.load(&options.config).await {
            Ok(next) => {
                contexts.reload(&current, &next, &triggers).await?;
                file_appsets::prune_removed(&mut contexts, &current, &next).await;
                tracing::info!(apps = next.apps.len(), "configuration reloaded");
                current = next;
            }
            Err(err) => {
                tracing::error!(error = %err, "new configuration refused; keeping the running one");
            }
        }
    }

    let stopping = Instant::now();
    let deadline = stopping + budget;
    let reserve = STOP_RESERVE.min(budget / 5);
    tracing::info!(budget = ?budget, "stopping: finishing passes in flight");
    // No new pass starts from here: a worker waiting for a permit gets none and ends.
    contexts.passes.close();
    contexts.heals.close();
    let running: Vec<Running> = {
        let mut map = apps.running.lock().unwrap_or_else(|p| p.into_inner());
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
    // Event streams (the dashboard's) end, or the server would wait them out.
    statuses.close_feed();
    server_stop.cancel();
    if within(deadline, "closing HTTP connections", &mut server)
        .await
        .is_none()
    {
        server.abort();
    }
    tracing::info!(took = ?stopping.elapsed(), "stopped");
    Ok(())
}

/// Where peers reach this replica's status API (sharding) without
/// `server.advertiseURL`: `TETHER_ADVERTISE_URL`, else `POD_IP` (the chart sets it from
/// the downward API) with the listen port, else the listen address itself when it
/// names one host.
fn advertised_url(listen: std::net::SocketAddr) -> Option<String> {
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(url) = env("TETHER_ADVERTISE_URL") {
        return Some(url.trim_end_matches('/').to_string());
    }
    if let Some(ip) = env("POD_IP").and_then(|ip| ip.parse::<std::net::IpAddr>().ok()) {
        return Some(format!(
            "http://{}",
            std::net::SocketAddr::new(ip, listen.port())
        ));
    }
    (!listen.ip().is_unspecified()).then(|| format!("http://{listen}"))
}

/// Runs `work` until `until`, then gives up on it (dropping it cancels it).
async fn within<F: std::future::Future>(until: Instant, what: &str, work: F) -> Option<F::Output> {
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

/// The clusters apps sync to, one per kubeconfig context or kubeconfig Secret, each
/// with its watch cache, and the identity each app acts as.
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
    apps: Arc<Apps>,
    notifier: Notifier,
    commit_statuses: CommitStatusReporter,
    app_objects: apps::AppObjects,
    /// Every app's `dependsOn` (`reconcile::depends`).
    dependencies: Dependencies,
}

impl Contexts {
    /// The connection and cache of the cluster `app` syncs to, made on first use. A
    /// kubeconfig Secret is read (as tether) at every start: its key says whether an
    /// existing connection serves it.
    async fn shared(
        &mut self,
        app: &AppConfig,
        config: &Config,
    ) -> Result<(Target, Arc<Shared>), ClusterError> {
        let (target, fresh) = match app.kube_config_secret(&config.inventory_namespace) {
            Some(secret) => {
                let (cluster, key) = self.default.connect_secret(&secret).await?;
                (Target::Remote(key), Some(cluster))
            }
            None => (Target::Context(app.destination.context.clone()), None),
        };
        if let Some(connection) = self.shared.get_mut(&target) {
            connection.apps.insert(app.name.clone());
            return Ok((target, connection.shared.clone()));
        }
        let cluster = match (fresh, &target) {
            (Some(cluster), _) => Arc::new(cluster),
            (None, Target::Context(Some(context))) => {
                Arc::new(Cluster::connect(self.options.kubeconfig.as_deref(), Some(context)).await?)
            }
            (None, _) => self.default.clone(),
        };
        if let Target::Remote(key) = &target {
            tracing::info!(cluster = %key, app = %app.name, "connected to another cluster");
        }
        let stop = self.workers.child_token();
        let cache = match self.ownership.shard_leaderships() {
            Some(seats) => {
                let map = ShardMap {
                    count: self.ownership.shards(),
                    shard_of,
                };
                let cache = Cache::sharded(cluster.clone(), stop.child_token(), map);
                let linger = config.leader_election.lease_duration * CACHE_LINGER_LEASES;
                spawn_holder(cache.clone(), seats, linger, stop.child_token());
                cache
            }
            None => Cache::new(cluster.clone(), stop.child_token()),
        };
        self.apps
            .caches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((target.clone(), cache.clone()));
        spawn_dispatcher(cache.clone(), self.apps.clone(), stop.child_token());
        let shared = Arc::new(Shared {
            cluster,
            cache,
            sources: self.sources.clone(),
            statuses: self.statuses.clone(),
            ownership: self.ownership.clone(),
            inventory_namespace: config.inventory_namespace.clone(),
            passes: self.passes.clone(),
            heals: self.heals.clone(),
            resync_interval: config.resync_interval,
            render_timeout: config.render_timeout,
            notifier: self.notifier.clone(),
            commit_statuses: self.commit_statuses.clone(),
            dependencies: self.dependencies.clone(),
            health_rules: config.health_checks.clone(),
        });
        let connection = Connection {
            shared: shared.clone(),
            apps: [app.name.clone()].into(),
            stop,
        };
        self.shared.insert(target.clone(), connection);
        Ok((target, shared))
    }

    /// What `app`'s worker uses: its cluster's connection and cache, through a
    /// connection that impersonates its ServiceAccount when it has one (or the
    /// server has a default). Its inventory stays tether's (see `cluster::tenancy`).
    /// Only the configuration file's apps (the operator's own) may act as tether: an
    /// App object without a ServiceAccount is refused before anything is read for it.
    async fn for_app(
        &mut self,
        app: &AppConfig,
        config: &Config,
    ) -> Result<(Target, Arc<Shared>), StartError> {
        let account = app.service_account(self.default_service_account.as_deref());
        if account.is_none() && app.tenant_namespace.is_some() {
            return Err(StartError::NoServiceAccount(app.name.replacen('.', "/", 1)));
        }
        let (target, base) = self.shared(app, config).await?;
        let Some(account) = account else {
            return Ok((target, base));
        };
        let bookkeeping = Bookkeeping {
            namespace: config.inventory_namespace.clone(),
            name: app.inventory_name(),
        };
        let impersonating = async {
            base.cluster
                .ensure_namespace(&config.inventory_namespace)
                .await?;
            base.cluster.impersonating(&account, Some(bookkeeping))
        };
        let cluster = match impersonating.await {
            Ok(cluster) => cluster,
            Err(err) => {
                self.release(&target, &app.name);
                return Err(err.into());
            }
        };
        tracing::info!(app = %app.name, service_account = %account, "acting as a ServiceAccount");
        Ok((
            target,
            Arc::new(Shared {
                cluster: Arc::new(cluster),
                cache: base.cache.clone(),
                sources: base.sources.clone(),
                statuses: base.statuses.clone(),
                ownership: base.ownership.clone(),
                inventory_namespace: base.inventory_namespace.clone(),
                passes: base.passes.clone(),
                heals: base.heals.clone(),
                resync_interval: base.resync_interval,
                render_timeout: base.render_timeout,
                notifier: base.notifier.clone(),
                commit_statuses: base.commit_statuses.clone(),
                dependencies: base.dependencies.clone(),
                health_rules: base.health_rules.clone(),
            }),
        ))
    }

    /// `app` no longer uses `target`: a connection no app uses is closed, its watches
    /// stopped (the service's own cluster stays, for leadership and the next app).
    fn release(&mut self, target: &Target, app: &str) {
        let Some(connection) = self.shared.get_mut(target) else {
            return;
        };
        connection.apps.remove(app);
        if !connection.apps.is_empty() || *target == Target::Context(None) {
            return;
        }
        if let Some(connection) = self.shared.remove(target) {
            connection.stop.cancel();
            self.apps
                .caches
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|(t, _)| t != target);
            if let Target::Remote(key) = target {
                tracing::info!(cluster = %key, "no app uses the cluster any more: disconnected");
            }
        }
    }

    async fn start_all(&mut self, config: &Config, triggers: &Triggers) -> Result<(), ServeError> {
        for app in &config.apps {
            self.start(app, config, triggers).await?;
        }
        Ok(())
    }

    /// Starts an app's worker. An app whose cluster or identity cannot be set up
    /// (a kubeconfig Secret missing or malformed) does not start: its status says
    /// why, and the next reload tries again; the other apps run on.
    /// Whether this replica holds `app`, for its source: with shards, only the shard's
    /// holder fetches (the others' idle apps cost no fetch); otherwise always, so a
    /// follower of `--leader-elect` keeps its sources warm for a takeover.
    fn held(&self, app: &str, stop: CancellationToken) -> tokio::sync::watch::Receiver<bool> {
        if self.ownership.owner(app).is_none() {
            return tokio::sync::watch::channel(true).1;
        }
        let mut leadership = self.ownership.for_app(app);
        let (tx, rx) = tokio::sync::watch::channel(leadership.is_leader());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    () = leadership.changed() => {}
                }
                tx.send_if_modified(|held| {
                    let now = leadership.is_leader();
                    std::mem::replace(held, now) != now
                });
            }
        });
        rx
    }

    async fn start(
        &mut self,
        app: &AppConfig,
        config: &Config,
        triggers: &Triggers,
    ) -> Result<(), ServeError> {
        let (target, shared) = match self.for_app(app, config).await {
            Ok(found) => found,
            Err(err) => {
                tracing::error!(app = %app.name, error = %err, "cannot set up the app's cluster or identity; not started");
                let (message, reason) = (err.to_string(), err.reason());
                self.statuses.update(&app.name, |s| {
                    let now = chrono::Utc::now();
                    s.set_condition("Ready", "False", reason, &message, now);
                    s.set_condition("Stalled", "True", reason, &message, now);
                });
                return Ok(());
            }
        };
        let source = app.source();
        let trigger = triggers.register(&source);
        let source_cancel = self.workers.child_token();
        let (rx, source_task) = SourceWatcher::spawn_while(
            self.sources.clone(),
            source,
            app.poll_config(&config.sources),
            trigger,
            self.held(&app.name, source_cancel.clone()),
            source_cancel.clone(),
        );
        let cluster = shared.cluster.clone();
        let handle = app::spawn(app.clone(), shared, rx, self.workers.child_token());
        if self.apps.suspensions.is_recorded(&app.name) {
            handle.set_suspended(true);
        }
        if let Some(pin) = self.apps.pins.get(&app.name) {
            handle.set_pin(Some(pin));
        }
        let commit_page = server::dashboard::commit_url_prefix(&app.source.repo);
        self.statuses
            .update(&app.name, |s| s.commit_url_prefix = commit_page);
        self.apps
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                app.name.clone(),
                Running {
                    handle,
                    source_task,
                    source_cancel,
                    target,
                    cluster,
                },
            );
        Ok(())
    }

    /// Applies a new configuration: apps removed stop, apps added start, apps changed
    /// restart; apps unchanged keep running undisturbed.
    async fn reload(
        &mut self,
        old: &Config,
        new: &Config,
        triggers: &Triggers,
    ) -> Result<(), ServeError> {
        if old.server != new.server {
            tracing::warn!(
                "server settings (listen address, webhook secrets, API token) change at the next restart"
            );
        }
        if old.shards != new.shards || old.leader_election != new.leader_election {
            tracing::warn!("shards and leader election change at the next restart");
        }
        if old.sources.budget != new.sources.budget {
            tracing::warn!("sources.budget changes at the next restart");
        }
        for app in &old.apps {
            if new.app(&app.name) == Some(app) {
                continue;
            }
            let running = self
                .apps
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&app.name);
            if let Some(running) = running {
                triggers.unregister(&app.source());
                let target = running.target.clone();
                stop_app(running, Instant::now() + STOP_GRACE).await;
                self.release(&target, &app.name);
            }
            if new.app(&app.name).is_none() {
                self.statuses.remove(&app.name);
                METRICS.forget_app(&app.name);
            }
        }
        for app in &new.apps {
            let running = self
                .apps
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&app.name);
            // An app that could not start last time tries again.
            if old.app(&app.name) != Some(app) || !running {
                self.start(app, new, triggers).await?;
            }
        }
        Ok(())
    }
}

/// How long a sharded cache keeps the objects of a shard after losing it, in lease
/// durations (60 s with the default 15 s lease). A shard lost because a renewal missed
/// its deadline (an API server slow under load) usually comes back within a few retry
/// periods; dropping it at once would cost a full list per kind on its return, more
/// load on the server that was already late, and so more lost renewals (seen at 100,000
/// objects on a loaded machine). A shard handed to another replica frees its memory
/// this much later.
const CACHE_LINGER_LEASES: u32 = 4;

/// The shards a cache keeps: those held, and those lost less than `linger` ago (their
/// loss times in `lost`, updated here); with when the next of these runs out.
fn kept_shards(
    held: &BTreeSet<u32>,
    lost: &mut BTreeMap<u32, Instant>,
    previous: &BTreeSet<u32>,
    now: Instant,
    linger: Duration,
) -> (BTreeSet<u32>, Option<Instant>) {
    for shard in previous.difference(held) {
        lost.entry(*shard).or_insert(now);
    }
    lost.retain(|shard, at| !held.contains(shard) && now.saturating_duration_since(*at) < linger);
    let kept = held.iter().chain(lost.keys()).copied().collect();
    let next = lost.values().map(|at| *at + linger).min();
    (kept, next)
}

/// Tells a sharded cache which shards this replica holds, as they come and go: it
/// keeps only their apps' objects (and, for `linger`, a lost shard's).
fn spawn_holder(
    cache: Cache,
    mut seats: Vec<Leadership>,
    linger: Duration,
    cancel: CancellationToken,
) {
    if seats.is_empty() {
        return;
    }
    let held = |seats: &[Leadership]| -> BTreeSet<u32> {
        (0u32..)
            .zip(seats)
            .filter(|(_, seat)| seat.is_leader())
            .map(|(shard, _)| shard)
            .collect()
    };
    // Before any watch starts: a first list with no shard held would be thrown away.
    let mut previous = held(&seats);
    cache.hold(&previous);
    tokio::spawn(async move {
        let mut lost = BTreeMap::new();
        let mut expiry: Option<Instant> = None;
        loop {
            let changes = seats.iter_mut().map(|seat| Box::pin(seat.changed()));
            let expired = async {
                match expiry {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = futures::future::select_all(changes) => {}
                () = expired => {}
            }
            let now = held(&seats);
            let (kept, next) = kept_shards(&now, &mut lost, &previous, Instant::now(), linger);
            cache.hold(&kept);
            previous = now;
            expiry = next;
        }
    });
}

/// Tells the app whose object changed which one did.
fn spawn_dispatcher(cache: Cache, apps: Arc<Apps>, cancel: CancellationToken) {
    let mut events = cache.subscribe();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => return,
                event = events.recv() => event,
            };
            match event {
                Ok(changed) => {
                    let Some(app) = changed.app else { continue };
                    let running = apps.running.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(r) = running.get(&app) {
                        r.handle.object_changed(changed.key);
                    }
                }
                // Fell behind: some changes are unknown, so every app takes a pass.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    let running = apps.running.lock().unwrap_or_else(|p| p.into_inner());
                    running.values().for_each(|r| r.handle.wake());
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_shard_is_kept_for_the_linger_then_dropped_and_a_return_cancels_it() {
        let linger = Duration::from_secs(60);
        let t0 = Instant::now();
        let set = |s: &[u32]| s.iter().copied().collect::<BTreeSet<u32>>();
        let mut lost = BTreeMap::new();
        // Shard 1 lost: still kept, until t0 + linger.
        let (kept, next) = kept_shards(&set(&[0]), &mut lost, &set(&[0, 1]), t0, linger);
        assert_eq!(kept, set(&[0, 1]));
        assert_eq!(next, Some(t0 + linger));
        // Later, nothing changed but time: kept until then, dropped after.
        let at = t0 + Duration::from_secs(59);
        let (kept, _) = kept_shards(&set(&[0]), &mut lost, &set(&[0]), at, linger);
        assert_eq!(kept, set(&[0, 1]));
        let (kept, next) = kept_shards(&set(&[0]), &mut lost, &set(&[0]), t0 + linger, linger);
        assert_eq!(kept, set(&[0]));
        assert_eq!(next, None);
        // Lost and back within the linger: held, nothing pending.
        let (_, _) = kept_shards(&set(&[]), &mut lost, &set(&[0]), t0, linger);
        let (kept, next) = kept_shards(
            &set(&[0]),
            &mut lost,
            &set(&[]),
            t0 + Duration::from_secs(5),
            linger,
        );
        assert_eq!(kept, set(&[0]));
        assert_eq!(next, None);
        assert!(lost.is_empty());
    }
}
