//! The commands that talk to a running `tether serve` over its API (`status`,
//! `rollback`, `unpin`): where it is, the token that lets them in (a file, the
//! environment, or the user's own kubeconfig credentials: [`super::kubecreds`]), and
//! one request with its failures said plainly.

use std::path::PathBuf;

use reqwest::Method;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::Value;
use tether_core::source::SecretRef;

use super::{ClusterArgs, Error, kubecreds};

/// Where `tether serve` is, and the token it asks for.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The URL of a running `tether serve` (http:// or https://).
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "TETHER_SERVER",
        hide_env_values = true,
        value_parser = parse_server
    )]
    pub server: String,

    /// A file holding a bearer token: the server's `server.apiToken`, or a Kubernetes
    /// token of yours (`kubectl create token`) that RBAC lets see or change the app.
    /// Without it, the token is read from TETHER_API_TOKEN, if set, or else is your
    /// kubeconfig user's (a token, a token file or an exec plugin's), as kubectl's.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// The kubeconfig whose credentials are sent when no token is given.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// The `Authorization` header to send, and where it came from: the only thing a
/// message says of it.
struct Credential {
    header: HeaderValue,
    from: String,
}

/// Where the commands find the API token when no file is given.
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

impl ServerArgs {
    /// Asks the API for `path` (under `--server`) with `body` as JSON, and returns its
    /// JSON answer; an error status is [`Error::Refused`] with the server's words.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        let base = self.server.as_str();
        let url = format!("{base}{path}");
        let credential = self.credential().await?;
        let mut request = reqwest::Client::new().request(method, &url);
        if let Some(credential) = &credential {
            request = request.header(AUTHORIZATION, credential.header.clone());
        }
        if let Some(body) = body {
            request = request.json(body);
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
            if status == reqwest::StatusCode::UNAUTHORIZED {
                return Err(Error::Unauthenticated {
                    url,
                    body: body.trim().to_string(),
                    from: credential
                        .map_or_else(|| "a request without a token".to_string(), |c| c.from),
                });
            }
            return Err(Error::Refused {
                url,
                status,
                body: body.trim().to_string(),
            });
        }
        answer.json().await.map_err(Error::Answer)
    }
}

impl ServerArgs {
    /// The credential to send: `--token-file`, else TETHER_API_TOKEN, else the
    /// kubeconfig user's token, else none (a server without authentication).
    async fn credential(&self) -> Result<Option<Credential>, Error> {
        let (secret, from) = match &self.token_file {
            Some(path) => (
                SecretRef::File(path.clone()),
                format!("the token of --token-file {}", path.display()),
            ),
            None if std::env::var_os(API_TOKEN_ENV).is_some() => (
                SecretRef::Env(API_TOKEN_ENV.into()),
                format!("the token in {API_TOKEN_ENV}"),
            ),
            None => {
                let credential = kubecreds::bearer(&self.cluster).await?;
                return Ok(credential.map(|c| Credential {
                    header: c.header,
                    from: format!("the token of kubeconfig context {:?}", c.context),
                }));
            }
        };
        let token = secret.read().map_err(Error::ApiToken)?;
        let mut header = HeaderValue::try_from(format!("Bearer {}", token.trim()))
            .map_err(|_| Error::ApiToken(format!("{from} is not one line of text")))?;
        header.set_sensitive(true);
        Ok(Some(Credential { header, from }))
    }
}
