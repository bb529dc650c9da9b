//! `tether sandbox`: the in-memory API server as a process, for trying tether and for
//! tests that drive it with kubectl.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tether_sandbox::{self as sandbox, Sandbox, SandboxOptions};
use tokio::io::AsyncWriteExt as _;

use super::{Error, Outcome, shutdown_signal};

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

    /// How soon the Deployment controller acts on a change (ReplicaSets, the revision
    /// annotation), in milliseconds; 0 turns it off, for a Deployment no one else writes.
    #[arg(long, default_value_t = sandbox::DEFAULT_DEPLOYMENT_CONTROLLER_DELAY.as_millis() as u64)]
    pub deployment_delay_ms: u64,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..=1.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("{rate} is not between 0.0 and 1.0"))
    }
}

pub(super) async fn run(args: SandboxArgs) -> Result<Outcome, Error> {
    let options = SandboxOptions {
        listen: args.listen,
        simulate_controllers: args
            .simulate_controllers
            .then(|| Duration::from_millis(args.controller_delay_ms)),
        fail_rate: args.fail_rate,
        latency: Duration::from_millis(args.latency_ms),
    };
    let sandbox = Sandbox::start(options).await.map_err(Error::Sandbox)?;
    sandbox.set_deployment_controller_delay(
        (args.deployment_delay_ms > 0).then(|| Duration::from_millis(args.deployment_delay_ms)),
    );
    sandbox
        .write_kubeconfig(&args.kubeconfig)
        .map_err(|source| Error::Kubeconfig {
            path: args.kubeconfig.clone(),
            source,
        })?;
    // The ready line is what a parent process waits for: a parent that has gone is an
    // error here, not a closed pipe to ignore.
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("ready {}\n", sandbox.url()).as_bytes())
        .await
        .map_err(Error::Output)?;
    stdout.flush().await.map_err(Error::Output)?;
    tracing::info!(url = %sandbox.url(), kubeconfig = %args.kubeconfig.display(), "sandbox ready");

    shutdown_signal().await;
    tracing::info!("stopping the sandbox");
    sandbox.stop().await;
    Ok(Outcome::Success)
}
