//! `tether status`: the report stage as a running `tether serve` holds it, read over
//! its status API.

use std::path::PathBuf;

use tether_core::source::SecretRef;

use super::{Error, Outcome, write_stdout};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The URL of a running `tether serve` (http:// or https://).
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "TETHER_SERVER",
        hide_env_values = true,
        value_parser = parse_server
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

/// `--server` as a base URL: http(s), with a host. Issue #31: `127.0.0.1:8080` went
/// through to reqwest, which said only "builder error".
fn parse_server(text: &str) -> Result<String, String> {
    let base = text.trim().trim_end_matches('/');
    match reqwest::Url::parse(base) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() => {
            Ok(base.to_string())
        }
        // `host:port` parses as a URL of scheme `host` (or not at all, for an address).
        _ if !base.contains("://") => Err(format!(
            "the URL needs a scheme: http://{base} (or https://{base})"
        )),
        _ => Err(format!("{base:?} is not an http:// or https:// URL")),
    }
}

/// The innermost cause of an error: the system's own words (`Connection refused`).
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

pub(super) async fn run(args: StatusArgs) -> Result<Outcome, Error> {
    let base = args.server.as_str();
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
    let answer = request.send().await.map_err(|error| {
        if error.is_connect() {
            Error::NoServer {
                base: base.to_string(),
                cause: root_cause(&error),
            }
        } else {
            Error::Unreachable {
                base: base.to_string(),
                error,
            }
        }
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
