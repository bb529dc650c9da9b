//! `tether status`: the report stage as a running `tether serve` holds it, read over
//! its status API.

use std::path::PathBuf;

use tether_core::source::SecretRef;

use super::{Error, Outcome, write_stdout};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The URL of a running `tether serve`.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "TETHER_SERVER",
        hide_env_values = true
    )]
    pub server: String,

    /// One app only.
    #[arg(long)]
    pub app: Option<String>,

    /// A file holding the token the server's `server.apiToken` names. Without it, the
    /// token is read from TETHER_API_TOKEN, if set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = StatusFormat::Table)]
    pub output: StatusFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    Table,
    Json,
}

/// Where `tether status` finds the API token when no file is given.
const API_TOKEN_ENV: &str = "TETHER_API_TOKEN";

pub(super) async fn run(args: StatusArgs) -> Result<Outcome, Error> {
    let base = args.server.trim_end_matches('/');
    let url = match &args.app {
        Some(app) => format!("{base}/api/v1/apps/{app}"),
        None => format!("{base}/api/v1/apps"),
    };
    let secret = match &args.token_file {
        Some(path) => Some(SecretRef::File(path.clone())),
        None => std::env::var_os(API_TOKEN_ENV).map(|_| SecretRef::Env(API_TOKEN_ENV.into())),
    };
    let mut request = reqwest::Client::new().get(&url);
    if let Some(secret) = secret {
        let token = secret.read().map_err(Error::ApiToken)?;
        request = request.bearer_auth(token.trim());
    }
    let answer = request.send().await.map_err(|error| Error::Unreachable {
        base: base.to_string(),
        error,
    })?;
    if !answer.status().is_success() {
        let status = answer.status();
        let body = answer.text().await.unwrap_or_default();
        return Err(Error::Refused {
            url,
            status,
            body: body.trim().to_string(),
        });
    }
    let body: serde_json::Value = answer.json().await.map_err(Error::Answer)?;
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
