//! The connections apps sync through: one per kubeconfig context or kubeconfig
//! Secret, each with its watch cache and the dispatcher that tells apps of changes,
//! shared by the apps that use it and closed with the last of them; and the identity
//! (a ServiceAccount, impersonated) each app acts as there.

use std::sync::Arc;

use super::dispatch::{CACHE_LINGER_LEASES, spawn_dispatcher, spawn_holder};
use super::identity::StartError;
use super::{Connection, Contexts, Target};
use crate::config::{AppConfig, Config};
use crate::reconcile::app::Shared;
use crate::reconcile::shard::shard_of;
use tether_core::cluster::cache::{Cache, ShardMap};
use tether_core::cluster::{Bookkeeping, Cluster, ClusterError};

impl Contexts {
    /// The connection and cache of the cluster `app` syncs to, made on first use. A
    /// kubeconfig Secret is read (as tether) at every start: its key says whether an
    /// existing connection serves it.
    pub(super) async fn shared(
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
    pub(super) async fn for_app(
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
    pub(super) fn release(&mut self, target: &Target, app: &str) {
        let Some(connection) = self.shared.get_mut(target) else {
            return;
        };
        connection.apps.remove(app);
        if !connection.apps.is_empty() || *target == Target::Context(None) {
            return;
        }
        if let Some(connection) = self.shared.remove(target) {
            connection.stop.cancel();
            self.apps.caches.lock().retain(|(t, _)| t != target);
            if let Target::Remote(key) = target {
                tracing::info!(cluster = %key, "no app uses the cluster any more: disconnected");
            }
        }
    }
}
