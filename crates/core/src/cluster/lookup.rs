//! Helm's `lookup` answered from the live cluster (issue #26, argoproj/argo-cd#5202),
//! read-only and as the app's own identity.
//!
//! A chart whose templates call `lookup` (grafana's admin password, a generated
//! certificate) is rendered by `helm template --dry-run=server --kubeconfig FILE`
//! (see `tether_diff::manifest::Renderers::with_lookup`). The kubeconfig given to
//! Helm never holds tether's credentials: it names a loopback endpoint served for
//! that one render, over TLS with a certificate authority made for it (client-go
//! sends no credentials over plain HTTP), with a bearer token made for it, in a
//! `0600` file in a private temporary folder; all of it ends with the endpoint. The
//! endpoint forwards what a render reads (discovery, OpenAPI, `get` and `list` of
//! objects) to the API server through the app's [`Cluster`], so it sees exactly what
//! the app's ServiceAccount may read; it refuses every other verb (`405`), watches
//! (`405`), subresources (`pods/log`, `exec`, `proxy`: `404`) and any other path
//! (`404`). The API server's own answers (a `403` for a Secret the app may not read)
//! reach Helm unchanged.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use http::{HeaderValue, Method, StatusCode, header};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use subtle::ConstantTimeEq;

use super::Cluster;

/// Random bytes of an endpoint's bearer token: 256 bits, as a ServiceAccount
/// token's signature carries, so it cannot be guessed while a render lasts.
const TOKEN_BYTES: usize = 32;

/// How long the endpoint waits after failing to accept a connection: axum's own
/// `serve` waits as long.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The address the endpoint listens on: only this machine reaches it.
const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// Why the endpoint could not be served. Retryable: a loopback port, a temporary
/// file or a key was not available this time.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("cannot serve the chart's lookups: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot serve the chart's lookups: a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("cannot serve the chart's lookups: TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// The endpoint of one render: stopped, and its kubeconfig removed, when dropped.
pub struct LookupEndpoint {
    /// The private folder holding the kubeconfig (removed with it).
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    /// Accepts connections and owns them: aborting it ends every one.
    server: tokio::task::JoinHandle<()>,
}

impl LookupEndpoint {
    /// Serves reads as `cluster`'s identity on a random loopback port.
    pub async fn start(cluster: &Cluster) -> Result<LookupEndpoint, LookupError> {
        let listener = tokio::net::TcpListener::bind((LOOPBACK, 0)).await?;
        let port = listener.local_addr()?.port();
        let token = hex::encode(rand::random::<[u8; TOKEN_BYTES]>());
        let (ca_pem, tls) = certificates()?;
        let dir = tempfile::Builder::new()
            .prefix("tether-lookup-")
            .tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        write_private(&kubeconfig, &kubeconfig_text(port, &ca_pem, &token))?;
        // Once per render of a chart: where its `lookup` calls go.
        tracing::info!(port, "serving a chart's lookups for one render");
        let state = Arc::new(Forward {
            cluster: cluster.clone(),
            token,
            timeout: cluster.timeout,
        });
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        let server = tokio::spawn(serve(listener, acceptor, state));
        Ok(LookupEndpoint {
            _dir: dir,
            kubeconfig,
            server,
        })
    }

    /// The kubeconfig naming the endpoint, for `helm --kubeconfig`.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
}

impl Drop for LookupEndpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Accepts connections until aborted; the connections end with it.
async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    state: Arc<Forward>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors, say: wait for some to close, not spin.
                tracing::debug!(%error, "the lookup endpoint could not accept");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let (acceptor, state) = (acceptor.clone(), state.clone());
        connections.spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service = hyper::service::service_fn(move |request: http::Request<_>| {
                let state = state.clone();
                let (parts, _) = request.into_parts();
                async move { Ok::<_, std::convert::Infallible>(forward(&state, parts).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
        });
        while connections.try_join_next().is_some() {}
    }
}

/// The endpoints' certificate authority (its PEM, for the kubeconfig) and TLS
/// configuration: made at the first render that asks (two key generations), then
/// shared by every endpoint of the process, so a pass pays for a port, a token and a
/// file, not for keys. The token, new per render, is what lets Helm in.
fn certificates() -> Result<(String, Arc<ServerConfig>), LookupError> {
    static MADE: std::sync::OnceLock<(String, Arc<ServerConfig>)> = std::sync::OnceLock::new();
    if let Some(made) = MADE.get() {
        return Ok(made.clone());
    }
    let made = make_certificates()?;
    Ok(MADE.get_or_init(|| made).clone())
}

/// A certificate authority and a certificate it signed for the loopback address, as
/// the sandbox makes its own (`kubeadm`'s shape).
fn make_certificates() -> Result<(String, Arc<ServerConfig>), LookupError> {
    let name = |common: &str| {
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, common);
        name
    };
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name = name("tether-lookup-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::default();
    leaf.distinguished_name = name("tether-lookup");
    leaf.subject_alt_names = vec![SanType::IpAddress(IpAddr::V4(LOOPBACK))];
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &issuer)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
    Ok((ca_cert.pem(), Arc::new(config)))
}

/// A kubeconfig for the endpoint at `port`, trusting `ca_pem`, with `token`.
fn kubeconfig_text(port: u16, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: tether-lookup\n  cluster:\n    server: https://{LOOPBACK}:{port}\n\
         \x20   certificate-authority-data: {ca}\n\
         users:\n- name: tether-lookup\n  user:\n    token: {token}\n\
         contexts:\n- name: tether-lookup\n  context:\n    cluster: tether-lookup\n    user: tether-lookup\n\
         current-context: tether-lookup\n"
    )
}

/// Writes `text` to a new file only its owner may read.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// What the endpoint forwards with.
struct Forward {
    cluster: Cluster,
    token: String,
    timeout: Duration,
}

/// What the endpoint does with a request, from its method, path and query alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Forward,
    /// A write, or a watch: refused with `405`, as a read-only server answers.
    ReadOnly(&'static str),
    /// A subresource or a path that is no object, list or discovery document.
    NotServed,
}

/// Decides a request. Pure.
fn verdict(method: &Method, path: &str, query: Option<&str>) -> Verdict {
    if method != Method::GET {
        return Verdict::ReadOnly("only get and list are served to a chart's lookup");
    }
    let watching = query.unwrap_or_default().split('&').any(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        key == "watch" && !matches!(value, "" | "false" | "0")
    });
    if watching {
        return Verdict::ReadOnly("watch is not served to a chart's lookup");
    }
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    if segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return Verdict::NotServed;
    }
    // What follows the group version: a list, an object, or a namespace's list or
    // object; anything longer is a subresource (`log`, `exec`, `proxy`).
    let object_path = |rest: &[&str]| match rest {
        ["watch", ..] => Verdict::ReadOnly("watch is not served to a chart's lookup"),
        [] | [_] | [_, _] => Verdict::Forward,
        ["namespaces", _, _] | ["namespaces", _, _, _] => Verdict::Forward,
        _ => Verdict::NotServed,
    };
    match segments.as_slice() {
        ["version"] | ["api"] | ["apis"] | ["apis", _] => Verdict::Forward,
        ["openapi", "v2"] | ["openapi", "v3", ..] => Verdict::Forward,
        ["api", _version, rest @ ..] => object_path(rest),
        ["apis", _group, _version, rest @ ..] => object_path(rest),
        _ => Verdict::NotServed,
    }
}

/// A Kubernetes `Status` answer, as Helm's client reads a refusal.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

/// Answers one request: with the render's token, what [`verdict`] lets through is
/// sent on as the app's identity and the API server's answer returned as it is.
async fn forward(state: &Forward, request: http::request::Parts) -> Response {
    let presented = request
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !bool::from(presented.as_bytes().ct_eq(state.token.as_bytes())) {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    let uri = &request.uri;
    match verdict(&request.method, uri.path(), uri.query()) {
        Verdict::Forward => {}
        Verdict::ReadOnly(message) => {
            tracing::info!(method = %request.method, path = uri.path(), "a chart's lookup tried more than a read: refused");
            return status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message);
        }
        Verdict::NotServed => {
            return status(
                StatusCode::NOT_FOUND,
                "NotFound",
                "not served to a chart's lookup",
            );
        }
    }
    let target = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
    let mut outgoing = http::Request::get(target);
    if let Some(accept) = request.headers.get(header::ACCEPT) {
        outgoing = outgoing.header(header::ACCEPT, accept);
    }
    let Ok(outgoing) = outgoing.body(kube::client::Body::from(Vec::new())) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "not a request path");
    };
    let client = state.cluster.client();
    let answer = match tokio::time::timeout(state.timeout, client.send(outgoing)).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => {
            tracing::warn!(%error, "a chart's lookup could not reach the API server");
            let message = "cannot reach the API server";
            return status(StatusCode::BAD_GATEWAY, "ServiceUnavailable", message);
        }
        Err(_) => {
            let message = "the API server did not answer in time";
            return status(StatusCode::GATEWAY_TIMEOUT, "Timeout", message);
        }
    };
    let (parts, body) = answer.into_parts();
    let mut response = Response::new(axum::body::Body::new(body));
    *response.status_mut() = parts.status;
    let content_type = parts.headers.get(header::CONTENT_TYPE).cloned();
    let content_type = content_type.unwrap_or(HeaderValue::from_static("application/json"));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_forwarded_and_writes_watches_and_subresources_are_not() {
        let get = Method::GET;
        for path in [
            "/version",
            "/api",
            "/apis",
            "/apis/apps",
            "/api/v1",
            "/apis/apps/v1",
            "/openapi/v2",
            "/openapi/v3/apis/apps/v1",
            "/api/v1/namespaces",
            "/api/v1/namespaces/web",
            "/api/v1/namespaces/web/secrets",
            "/api/v1/namespaces/web/secrets/grafana",
            "/api/v1/nodes/one",
            "/apis/apps/v1/namespaces/web/deployments/app",
        ] {
            assert_eq!(verdict(&get, path, None), Verdict::Forward, "{path}");
        }
        assert_eq!(
            verdict(
                &get,
                "/api/v1/namespaces/web/secrets",
                Some("limit=5&watch=false")
            ),
            Verdict::Forward
        );
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let verdict = verdict(&method, "/api/v1/namespaces/web/secrets", None);
            assert!(matches!(verdict, Verdict::ReadOnly(_)), "{method}");
        }
        for (path, query) in [
            ("/api/v1/namespaces/web/secrets", Some("watch=true")),
            ("/api/v1/namespaces/web/secrets", Some("a=b&watch=1")),
            ("/api/v1/watch/namespaces/web/secrets", None),
        ] {
            let verdict = verdict(&get, path, query);
            assert!(matches!(verdict, Verdict::ReadOnly(_)), "{path}?{query:?}");
        }
        for path in [
            "/api/v1/namespaces/web/pods/app/log",
            "/api/v1/namespaces/web/pods/app/exec",
            "/api/v1/namespaces/web/services/app/proxy",
            "/api/v1/nodes/one/proxy",
            "/api/v1/namespaces/web/../kube-system/secrets",
            "/api//v1",
            "/metrics",
            "/debug/pprof",
            "/",
        ] {
            assert_eq!(verdict(&get, path, None), Verdict::NotServed, "{path}");
        }
    }

    #[test]
    fn the_kubeconfig_names_only_the_endpoint_and_its_token() {
        let text = kubeconfig_text(4242, "PEM", "abc");
        assert!(text.contains("server: https://127.0.0.1:4242\n"), "{text}");
        assert!(
            text.contains("    certificate-authority-data: UEVN\n"),
            "{text}"
        );
        assert!(text.contains("token: abc\n"), "{text}");
    }
}
