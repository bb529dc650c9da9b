//! `tether status`: the report stage as a running `tether serve` holds it, read over
//! its status API.

use reqwest::Method;

use super::remote::ServerArgs;
use super::{Error, Outcome, write_stdout};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub server: ServerArgs,

    /// One app only.
    #[arg(long)]
    pub app: Option<String>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = StatusFormat::Table)]
    pub output: StatusFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    Table,
    Json,
}

pub(super) async fn run(args: StatusArgs) -> Result<Outcome, Error> {
    let path = match &args.app {
        Some(app) => format!("/api/v1/apps/{app}"),
        None => "/api/v1/apps".to_string(),
    };
    let body = args.server.call(Method::GET, &path, None).await?;
    let apps: Vec<serde_json::Value> = match &args.app {
        Some(_) => vec![body.clone()],
        None => body["apps"].as_array().cloned().unwrap_or_default(),
    };
    let out = match args.output {
        StatusFormat::Json => format!("{}\n", serde_json::to_string_pretty(&body)?),
        StatusFormat::Table => tether_core::report::status::render_table(&apps),
    };
    write_stdout(&out)?;
    let all_good = apps
        .iter()
        .all(|a| a["sync"] == "Synced" && a["health"] == "Healthy");
    Ok(if all_good {
        Outcome::Success
    } else {
        Outcome::NotReady
    })
}
