//! `tether serve`: the whole loop as a service, until SIGTERM or SIGINT.

use std::path::PathBuf;

use tether_controller::server::service::{ServeOptions, serve};

use super::{ClusterArgs, Error, Outcome, shutdown_signal};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The configuration file (YAML; docs/configuration.md documents every option).
    #[arg(long)]
    pub config: PathBuf,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// Only the holder of a coordination.k8s.io Lease writes (for several replicas).
    #[arg(long)]
    pub leader_elect: bool,

    /// The ServiceAccount (in each app's namespace) that apps naming none act as:
    /// every app's reads and writes are then impersonated (overrides
    /// `server.defaultServiceAccount`).
    #[arg(long, value_name = "NAME")]
    pub default_service_account: Option<String>,

    /// Where Git clones are kept.
    #[arg(long, env = "TETHER_CACHE_DIR", hide_env_values = true)]
    pub cache_dir: Option<PathBuf>,
}

pub(super) async fn run(args: ServeArgs) -> Result<Outcome, Error> {
    let options = ServeOptions {
        config: args.config,
        kubeconfig: args.cluster.kubeconfig,
        context: args.cluster.context,
        cache_dir: args.cache_dir,
        leader_elect: args.leader_elect,
        default_service_account: args.default_service_account,
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        stop.cancel();
    });
    serve(options, shutdown).await.map_err(Error::Serve)?;
    Ok(Outcome::Success)
}
