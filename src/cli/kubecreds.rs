//! The user's own kubeconfig credentials for the commands that talk to `tether serve`
//! (issue #30, sessions for the CLI): with no `--token-file` or TETHER_API_TOKEN, they
//! send the bearer token kubectl would send to the API server for the current context
//! (or `--context`, from `--kubeconfig` or KUBECONFIG): an inline `token`, a
//! `tokenFile`, or an `exec` plugin's ExecCredential (`client.authentication.k8s.io`
//! v1 or v1beta1, `status.token`). tether serve checks it with a TokenReview.
//!
//! kube-rs reads the kubeconfig and runs the plugin; this takes the `Authorization`
//! header its client would add, so the rules (precedence, relative paths, the plugin's
//! environment, `expirationTimestamp`) are kube-rs's and kubectl's. Nothing is cached
//! on disk: a plugin's token lives as long as the process. A client certificate cannot
//! be forwarded in a header, so a context that has only one is refused with what to
//! use instead. Tokens never appear in errors: a plugin's output is not quoted.

use http::header::AUTHORIZATION;
use http::{HeaderValue, Request, Response};
use kube::client::{AuthError, Body, ConfigExt};
use kube::config::{Config, KubeConfigOptions, Kubeconfig, KubeconfigError};
use tower::{BoxError, Layer, ServiceExt};

use super::ClusterArgs;

/// The header a kubeconfig gives, and the context it came from (for messages).
pub struct KubeCredential {
    pub header: HeaderValue,
    pub context: String,
}

/// Why the kubeconfig's credentials cannot be used. None is retryable as is: each
/// needs the user to fix the kubeconfig, the plugin or the flags.
#[derive(Debug, thiserror::Error)]
pub enum KubeCredsError {
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[source] KubeconfigError),
    #[error("kubeconfig: no current context\nhint: pass --context NAME, or --token-file FILE")]
    NoContext,
    /// The user's credentials could not be had (a token file, the exec plugin): the
    /// reason names the file or command and the plugin's stderr, never its stdout.
    #[error("kubeconfig context {context:?}: {reason}")]
    Auth { context: String, reason: String },
    #[error(
        "kubeconfig context {context:?} authenticates with {what}, which cannot be forwarded to tether serve\nhint: use a token: `kubectl create token SERVICEACCOUNT > FILE` and --token-file FILE, or a context whose user has a token or an exec plugin that prints one"
    )]
    NoToken { context: String, what: &'static str },
}

/// The bearer header of the kubeconfig `cluster` names, or `None` when there is no
/// kubeconfig at all and no flag asked for one (kubectl then sends no credentials
/// either) or its user has none.
pub async fn bearer(cluster: &ClusterArgs) -> Result<Option<KubeCredential>, KubeCredsError> {
    let explicit = cluster.kubeconfig.is_some() || cluster.context.is_some();
    let file = match &cluster.kubeconfig {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    };
    let file = match file {
        Ok(file) => file,
        Err(KubeconfigError::FindPath) if !explicit => return Ok(None),
        Err(KubeconfigError::ReadConfig(error, _))
            if !explicit && error.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(error) => return Err(KubeCredsError::Kubeconfig(error)),
    };
    let Some(context) = cluster.context.clone().or(file.current_context.clone()) else {
        return if explicit {
            Err(KubeCredsError::NoContext)
        } else {
            Ok(None)
        };
    };
    let options = KubeConfigOptions {
        context: Some(context.clone()),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(file, &options)
        .await
        .map_err(KubeCredsError::Kubeconfig)?;
    let info = config.auth_info.clone();
    let header = header_of(config)
        .await
        .map_err(|error| KubeCredsError::Auth {
            context: context.clone(),
            reason: error,
        })?;
    let no_token = |what| {
        Err(KubeCredsError::NoToken {
            context: context.clone(),
            what,
        })
    };
    match header {
        Some(header) if header.as_bytes().starts_with(b"Bearer ") => {
            Ok(Some(KubeCredential { header, context }))
        }
        Some(_) => no_token("a username and password"),
        None if info.exec.is_some() => {
            no_token("an exec plugin that gives no token (a client certificate, or nothing)")
        }
        None if info.client_certificate.is_some() || info.client_certificate_data.is_some() => {
            no_token("a client certificate only")
        }
        None => Ok(None),
    }
}

/// The `Authorization` header kube-rs's client would add for `config`'s user: its auth
/// layer over a service that only returns the header. The plugin runs on a blocking
/// thread, as kube-rs runs it on refresh.
async fn header_of(config: Config) -> Result<Option<HeaderValue>, String> {
    let layer = tokio::task::spawn_blocking(move || config.auth_layer())
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| match error {
            kube::Error::Auth(error) => describe(&error),
            other => other.to_string(),
        })?;
    let Some(layer) = layer else {
        return Ok(None);
    };
    // The layers wrap HTTP services: the "response" carries the header back.
    let capture = tower::service_fn(|request: Request<Body>| async move {
        Ok::<_, BoxError>(Response::new(request.headers().get(AUTHORIZATION).cloned()))
    });
    let answer = layer
        .layer(capture)
        .oneshot(Request::new(Body::from(Vec::new())))
        .await
        .map_err(|error| match error.downcast_ref::<AuthError>() {
            Some(error) => describe(error),
            None => error.to_string(),
        })?;
    Ok(answer.into_body())
}

/// kube-rs's auth error without what could hold a token: a failed plugin's stdout,
/// the text of output that did not parse.
fn describe(error: &AuthError) -> String {
    match error {
        AuthError::AuthExecRun { cmd, out } => format!(
            "the exec plugin `{cmd}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        AuthError::AuthExecParse(_) => {
            "the exec plugin's output is not an ExecCredential (client.authentication.k8s.io/v1 or v1beta1)".to_string()
        }
        AuthError::ExecPluginFailed => {
            "the exec plugin's ExecCredential has no status (status.token)".to_string()
        }
        other => other.to_string(),
    }
}
