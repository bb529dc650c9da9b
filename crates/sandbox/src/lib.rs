//! A Kubernetes-compatible API server held in memory, for trying tether and for tests.
//!
//! The sandbox is a stand-in for a real cluster, never a replacement: where it and a real
//! kube-apiserver could differ, the real API's documented behaviour wins, and the
//! fidelity tests replay answers recorded from a real kube-apiserver 1.36 against it.
//! It speaks HTTPS (HTTP/2 and HTTP/1.1) with a CA it generates, authenticates a bearer
//! token, and writes a kubeconfig that `kubectl` and kube-rs use unchanged.

pub(crate) mod api;
pub(crate) mod controller_settings;
pub(crate) mod controllers;
pub(crate) mod conversion;
pub(crate) mod defaults;
pub(crate) mod faults;
pub(crate) mod fields;
pub(crate) mod openapi;
pub mod protobuf;
pub(crate) mod rbac;
pub(crate) mod registry;
pub(crate) mod selector;
pub(crate) mod status;
pub(crate) mod store;
pub(crate) mod tls;
pub(crate) mod tokens;
pub(crate) mod validate;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rand::distr::{Alphanumeric, SampleString as _};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

pub use controller_settings::DEFAULT_DEPLOYMENT_CONTROLLER_DELAY;
pub use faults::{RequestCounts, UserRequest, WRITE_VERBS, WatchCounts};

use api::{Body, Reply, State};
use status::ApiError;

/// How long simulated controllers wait before reporting a workload's status: long
/// enough for a client to see Progressing, short enough for tests.
pub const DEFAULT_CONTROLLER_DELAY: Duration = Duration::from_millis(200);

/// How to run a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    pub listen: SocketAddr,
    /// Simulate workload controllers, reporting status after this delay.
    pub simulate_controllers: Option<Duration>,
    /// Share of requests answered with 500, 503 or 429.
    pub fail_rate: f64,
    /// Added to every answer.
    pub latency: Duration,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            simulate_controllers: None,
            fail_rate: 0.0,
            latency: Duration::ZERO,
        }
    }
}

/// Why the sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot build a client for the sandbox: {0}")]
    Client(String),
}

/// A running sandbox. Dropping it stops it too; [`Sandbox::stop`] also waits for the
/// server task to end.
pub struct Sandbox {
    url: String,
    kubeconfig: String,
    state: Arc<State>,
    shutdown: CancellationToken,
    server: Option<JoinHandle<()>>,
}

impl Sandbox {
    /// Starts a sandbox and returns once it accepts requests.
    pub async fn start(options: SandboxOptions) -> Result<Sandbox, SandboxError> {
        let listener =
            TcpListener::bind(options.listen)
                .await
                .map_err(|source| SandboxError::Listen {
                    address: options.listen,
                    source,
                })?;
        let address = listener
            .local_addr()
            .map_err(|source| SandboxError::Listen {
                address: options.listen,
                source,
            })?;
        let certificates = tls::generate(address.ip())?;
        let url = format!("https://{address}");
        let token = Alphanumeric.sample_string(&mut rand::rng(), 32);
        let kubeconfig = tls::kubeconfig(&url, &certificates.ca_pem, &token);

        let state = Arc::new(State::new(token, address.to_string()));
        state.faults.set_fail_rate(options.fail_rate);
        state.faults.set_latency(options.latency);
        state.bootstrap();

        let shutdown = CancellationToken::new();
        tokio::spawn(controllers::deployment::run(
            state.clone(),
            shutdown.clone(),
        ));
        if let Some(delay) = options.simulate_controllers {
            tokio::spawn(controllers::run(state.clone(), delay, shutdown.clone()));
        }
        let acceptor = TlsAcceptor::from(certificates.server_config);
        let server = tokio::spawn(serve(listener, acceptor, state.clone(), shutdown.clone()));
        Ok(Sandbox {
            url,
            kubeconfig,
            state,
            shutdown,
            server: Some(server),
        })
    }

    /// The `https://127.0.0.1:PORT` URL of the API.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig (YAML) for this sandbox, context `tether-sandbox`.
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// Accepts `token` as `user` (in `groups`, and `system:authenticated`) from now
    /// on, as a line of kube-apiserver's `--token-auth-file` would.
    pub fn add_static_token(&self, token: &str, user: &str, groups: &[&str]) {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        groups.push(rbac::AUTHENTICATED_GROUP.to_string());
        let user = rbac::UserInfo {
            name: user.to_string(),
            groups,
        };
        self.state.tokens.add_static(token, user);
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, &self.kubeconfig)
    }

    /// A kube-rs client for this sandbox.
    pub async fn client(&self) -> Result<kube::Client, SandboxError> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig)
            .map_err(|e| SandboxError::Client(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| SandboxError::Client(e.to_string()))?;
        kube::Client::try_from(config).map_err(|e| SandboxError::Client(e.to_string()))
    }

    /// Requests served so far, by verb and resource.
    pub fn requests(&self) -> RequestCounts {
        self.state.counters.snapshot()
    }

    /// Watches open (by the `timeoutSeconds` each runs for) and how many ended at
    /// their timeout since the start or [`Sandbox::reset_requests`].
    pub fn watches(&self) -> WatchCounts {
        self.state.counters.watches()
    }

    /// The time the sandbox spent answering requests (watches and injected latency
    /// aside) since it started or since [`Sandbox::reset_requests`].
    pub fn serving_time(&self) -> Duration {
        self.state.counters.serving_time()
    }

    /// The requests RBAC let through, by the user they ran as (after impersonation),
    /// oldest first, since the start or [`Sandbox::reset_requests`]: the sandbox's
    /// audit log.
    pub fn audit(&self) -> Vec<UserRequest> {
        self.state.counters.audit()
    }

    /// The audit's writes: allowed, not dry runs.
    pub fn writes(&self) -> Vec<UserRequest> {
        let mut audit = self.audit();
        audit.retain(UserRequest::is_write);
        audit
    }

    /// The most API requests (watches aside) answered at once since the start or
    /// [`Sandbox::reset_requests`], injected latency included.
    pub fn peak_in_flight(&self) -> u64 {
        self.state.counters.peak_in_flight()
    }

    /// Starts [`Sandbox::peak_in_flight`] again from the requests in flight now, so a
    /// test can leave out its own request.
    pub fn reset_peak_in_flight(&self) {
        self.state.counters.reset_peak_in_flight();
    }

    pub fn reset_requests(&self) {
        self.state.counters.reset();
    }

    pub fn set_fail_rate(&self, rate: f64) {
        self.state.faults.set_fail_rate(rate);
    }

    pub fn set_latency(&self, latency: Duration) {
        self.state.faults.set_latency(latency);
    }

    /// How soon the Deployment controller acts on a change (default
    /// [`DEFAULT_DEPLOYMENT_CONTROLLER_DELAY`]); None stops it, for a test that needs a
    /// Deployment nobody else writes to.
    pub fn set_deployment_controller_delay(&self, delay: Option<Duration>) {
        self.state.deployment_controller.set_delay(delay);
    }

    /// Keeps only the last `limit` changes for watches (default
    /// [`store::HISTORY_LIMIT`]), so that a test can watch from an expired
    /// resourceVersion without making 100,000 changes first.
    pub fn set_watch_history_limit(&self, limit: usize) {
        self.state.store.set_history_limit(limit);
    }

    /// Stops accepting requests, ends open connections and watches, and waits.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    state: Arc<State>,
    shutdown: CancellationToken,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => break,
        };
        let (stream, _) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::debug!(error = %err, "accept failed");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let state = state.clone();
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let tls = match acceptor.accept(stream).await {
                Ok(tls) => tls,
                Err(err) => {
                    tracing::debug!(error = %err, "TLS handshake failed");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(state, request).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    // Open watches never finish by themselves; give others a moment.
                    let _ = tokio::time::timeout(Duration::from_millis(200), connection).await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}

/// Serves one request: counters, injected latency, then [`answer`]. The time spent
/// answering (injected latency and open watches aside) is counted too, so a benchmark
/// can tell the sandbox's own cost per request from its client's.
async fn handle(state: Arc<State>, request: hyper::Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let query = parse_query(parts.uri.query().unwrap_or_default());
    let api_request = !path.starts_with("/sandbox/");
    let verb = api::verb_of(&parts.method, &path, &query);
    if api_request {
        state.counters.record(verb, &api::resource_of(&path));
    }
    let _in_flight = (api_request && verb != "watch").then(|| state.counters.enter());

    let latency = state.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let started = std::time::Instant::now();
    let response = answer(&state, parts, body, path, query).await;
    if api_request && verb != "watch" {
        state.counters.add_serving_time(started.elapsed());
    }
    response
}

/// Answers one request: injected faults, authentication, impersonation and
/// authorization, protobuf negotiation, then the API proper.
async fn answer(
    state: &Arc<State>,
    parts: http::request::Parts,
    body: Incoming,
    path: String,
    query: HashMap<String, String>,
) -> Response<Body> {
    let sandbox_endpoint = path.starts_with("/sandbox/");
    let Some(requester) = authenticate(state, &parts.headers) else {
        return error_response(&ApiError::Unauthorized);
    };
    // The sandbox's own endpoints are for the test holding its admin token only.
    if sandbox_endpoint && requester != rbac::UserInfo::admin() {
        return error_response(&ApiError::Forbidden(format!(
            "user {:?} cannot use the sandbox's own endpoints",
            requester.name
        )));
    }
    let accept = protobuf::Accept::from_headers(&parts.headers);
    let protobuf_body = protobuf::negotiate::is_protobuf_body(&parts.headers);
    let serves_protobuf = (accept.mentions_protobuf() || protobuf_body)
        && !sandbox_endpoint
        && state.serves_protobuf(&path);
    let format = accept.choose(serves_protobuf);
    if !sandbox_endpoint {
        if let Some(fault) = state.faults.draw() {
            return answer_error(format, &fault);
        }
        let verb = api::verb_of(&parts.method, &path, &query);
        let audit = |user: &str, allowed: bool| {
            let dry_run = query.get("dryRun").is_some_and(|d| d == "All");
            let request = UserRequest {
                user: user.to_string(),
                verb: verb.to_string(),
                path: path.clone(),
                dry_run,
                allowed,
            };
            state.counters.record_request(request);
        };
        let checked = rbac::check(
            &state.store,
            requester.clone(),
            &parts.method,
            &path,
            &query,
            &parts.headers,
        );
        match checked {
            Err(refused) => {
                if let Some(user) = &refused.user {
                    audit(user, false);
                }
                return answer_error(format, &refused.error);
            }
            Ok(user) => audit(&user.name, true),
        }
    }
    // kube-apiserver negotiates the answer before it reads the body or does anything.
    if !sandbox_endpoint
        && !accept.acceptable(serves_protobuf)
        && state.custom_resource_at(&path).is_some()
    {
        let refused = ApiError::NotAcceptable(protobuf::negotiate::SERVED_MEDIA_TYPES.into());
        return error_response(&refused);
    }
    let body = match http_body_util::Limited::new(body, MAX_REQUEST_BODY)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return error_response(&ApiError::BadRequest(format!(
                "the request body is larger than {MAX_REQUEST_BODY} bytes"
            )));
        }
    };
    let mut headers = parts.headers;
    let mut decoded = None;
    // A protobuf body for a custom resource reaches the handlers as is: they answer 415.
    let body = if serves_protobuf && protobuf_body {
        match protobuf::decode_object(&body) {
            Ok(object) => {
                headers.insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                let json = match parts.method {
                    // Creates and updates read `decoded`; other bodies (DeleteOptions)
                    // are read as JSON.
                    http::Method::POST | http::Method::PUT => Bytes::new(),
                    _ => Bytes::from(serde_json::to_vec(&object).unwrap_or_default()),
                };
                decoded = Some(object);
                json
            }
            Err(protobuf::ProtobufError::UnknownKind { .. }) => {
                return answer_error(format, &ApiError::UnsupportedMediaType);
            }
            Err(err) => {
                return answer_error(format, &ApiError::BadRequest(err.to_string()));
            }
        }
    } else {
        body
    };
    let request = api::Request {
        method: parts.method,
        path,
        query,
        headers,
        body,
        format,
        decoded: parking_lot::Mutex::new(decoded),
        warnings: api::Warnings::default(),
        requester,
    };
    let started = std::time::Instant::now();
    let method = request.method.clone();
    let path = request.path.clone();
    let warnings = request.warnings.clone();
    let reply = state.serve(request).await;
    tracing::debug!(%method, %path, elapsed_us = started.elapsed().as_micros() as u64, ok = reply.is_ok(), "request");
    let mut response = reply_response(format, reply);
    for warning in warnings.header_values() {
        if let Ok(value) = http::HeaderValue::from_str(&warning) {
            response.headers_mut().append(http::header::WARNING, value);
        }
    }
    response
}

/// A handler's reply (or error) as a response in the negotiated format.
fn reply_response(format: protobuf::Format, reply: Result<Reply, ApiError>) -> Response<Body> {
    match reply {
        Ok(Reply::Json(code, value)) if format == protobuf::Format::Protobuf => {
            // A kind without a message (a Table) or a field newer than the messages
            // answers JSON, which every client that asks for protobuf also accepts.
            match protobuf::encode_object(&value) {
                Ok(bytes) => response(code, protobuf::MEDIA_TYPE, api::full_body(bytes.into())),
                Err(err) => {
                    tracing::debug!(error = %err, "answering JSON instead of protobuf");
                    json_response(
                        code,
                        Bytes::from(serde_json::to_vec(&value).unwrap_or_default()),
                    )
                }
            }
        }
        Ok(Reply::Json(code, value)) => json_response(
            code,
            Bytes::from(serde_json::to_vec(&value).unwrap_or_default()),
        ),
        Ok(Reply::Raw(code, bytes, "application/json")) if format == protobuf::Format::Protobuf => {
            // Gets and lists are written as JSON bytes straight from the store.
            let encoded = serde_json::from_slice(&bytes)
                .ok()
                .and_then(|value| protobuf::encode_object(&value).ok());
            match encoded {
                Some(encoded) => {
                    response(code, protobuf::MEDIA_TYPE, api::full_body(encoded.into()))
                }
                None => json_response(code, bytes),
            }
        }
        Ok(Reply::Raw(code, bytes, content_type)) => {
            response(code, content_type, api::full_body(bytes))
        }
        // Watches are written in their format by the handler, from the store's encodings.
        Ok(Reply::Stream(body, protobuf::Format::Protobuf)) => {
            response(StatusCode::OK, protobuf::WATCH_MEDIA_TYPE, body)
        }
        Ok(Reply::Stream(body, protobuf::Format::Json)) => {
            response(StatusCode::OK, "application/json", body)
        }
        Err(err) => answer_error(format, &err),
    }
}

/// An error as a `Status` in the negotiated format.
fn answer_error(format: protobuf::Format, err: &ApiError) -> Response<Body> {
    if format == protobuf::Format::Protobuf && !matches!(err, ApiError::PageNotFound) {
        if let Ok(bytes) = protobuf::encode_object(&err.status()) {
            let body = api::full_body(bytes.into());
            return with_retry_after(err, response(err.code(), protobuf::MEDIA_TYPE, body));
        }
    }
    error_response(err)
}

/// The largest request body read (kube-apiserver accepts 3 MiB objects; YAML and
/// patches need a little more).
const MAX_REQUEST_BODY: usize = 8 * 1024 * 1024;

/// Whom the request's bearer token authenticates (for the API server's audience), or
/// None: 401.
fn authenticate(state: &State, headers: &http::HeaderMap) -> Option<rbac::UserInfo> {
    let token = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())?
        .strip_prefix("Bearer ")?;
    match state.authenticate(token, &[]) {
        Ok(accepted) => Some(accepted.credential.user),
        Err(err) => {
            tracing::debug!(error = %err, "bearer token refused");
            None
        }
    }
}

fn parse_query(query: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

fn response(code: StatusCode, content_type: &str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = code;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

fn json_response(code: StatusCode, bytes: Bytes) -> Response<Body> {
    response(code, "application/json", api::full_body(bytes))
}

fn error_response(err: &ApiError) -> Response<Body> {
    let (body, content_type) = err.body();
    with_retry_after(
        err,
        response(err.code(), content_type, api::full_body(body)),
    )
}

/// An overloaded or unavailable server's answer says when to come back, as
/// kube-apiserver's `Retry-After: 1` does.
fn with_retry_after(err: &ApiError, mut response: Response<Body>) -> Response<Body> {
    if matches!(
        err,
        ApiError::ServiceUnavailable(_) | ApiError::TooManyRequests(_)
    ) {
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// The strings of a JSON array; none when it is absent or not an array, and its other
/// items skipped.
pub(crate) fn strings(value: Option<&serde_json::Value>) -> Vec<String> {
    value
        .and_then(serde_json::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
