//! `tether serve`, wired: the configuration read, the controller runtime
//! (`reconcile::runtime`: workers, sources, watch caches, leadership, reloads, the
//! stop) built, the HTTP server bound and routed to it, and one shutdown signal that
//! stops both within `server.shutdownTimeout` (issue #12).

pub use crate::reconcile::runtime::{
    PINNED_CONFIGMAP, PinError, SUSPENDED_CONFIGMAP, ServeError, ServeOptions, SuspendError,
};

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::reconcile::runtime::{self, Registry, Runtime, within};
use crate::reconcile::shard::Owner;
use crate::server::{self, Control};
use tether_core::cluster::Cluster;
use tether_core::report::outbound::OutboundPolicy;
use tether_core::report::status::Pin;
use tether_core::source::{WebhookState, webhook_router};

/// The HTTP server reaches apps through the runtime's worker registry.
impl Control for Registry {
    fn request_sync(&self, app: &str) -> bool {
        Registry::request_sync(self, app)
    }

    fn set_suspended(
        &self,
        app: &str,
        suspended: bool,
    ) -> BoxFuture<'_, Result<bool, SuspendError>> {
        Registry::set_suspended(self, app, suspended)
    }

    fn set_pin(&self, app: &str, pin: Option<Pin>) -> BoxFuture<'_, Result<bool, PinError>> {
        Registry::set_pin(self, app, pin)
    }

    fn cluster(&self, app: &str) -> Option<Arc<Cluster>> {
        Registry::cluster(self, app)
    }

    fn readiness(&self) -> Vec<(&'static str, bool)> {
        Registry::readiness(self)
    }

    fn owner(&self, app: &str) -> Option<Owner> {
        Registry::owner(self, app)
    }

    fn cache_objects(&self) -> usize {
        Registry::cache_objects(self)
    }
}

/// Runs the service until `shutdown` fires.
pub async fn serve(options: ServeOptions, shutdown: CancellationToken) -> Result<(), ServeError> {
    let config = Config::load(&options.config)?;
    let (sources, cluster) = runtime::connect(&options, &config).await?;
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
    let status_url = (config.shards > 1)
        .then(|| {
            config
                .server
                .advertise_url
                .clone()
                .or_else(|| advertised_url(bound))
        })
        .flatten();
    // Server settings, the stop budget among them, change only at a restart.
    let budget = config.server.shutdown_timeout;
    let webhook_config = config.server.webhook_config()?;
    // With a token the API is served beyond loopback: people log in with their own
    // Kubernetes tokens and RBAC limits them (issue #30).
    let people = token.as_ref().map(|_| {
        Arc::new(server::people::People::new(
            cluster.client().clone(),
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
    let apps = config.apps.len();
    let mut runtime = Runtime::new(options, config, cluster, sources, status_url)?;
    let statuses = runtime.statuses().clone();
    let webhooks = webhook_router(WebhookState::new(
        webhook_config,
        runtime.triggers().clone(),
    ));
    let router = server::router(
        statuses.clone(),
        runtime.registry(),
        webhooks,
        access,
        peer_key,
    );
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
    tracing::info!(listen = %bound, apps, "tether serving");

    runtime.run(shutdown).await?;

    let stopping = Instant::now();
    let deadline = runtime.stop(stopping, budget).await;
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
