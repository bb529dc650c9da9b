//! The Kubernetes API, through kube-rs: the only stage that talks to an API server.
//!
//! Objects travel as `serde_json::Value`: tether manages any kind, including custom
//! resources it has never seen, and the diff stage compares values, not Rust types.
//! Reads and applies are parsed from the server's answer straight into values (see
//! [`Cluster::answer`]); kube's `DynamicObject` is kept for watches and for the
//! bodies of creates and replaces.

mod answer;
pub mod cache;
pub mod lookup;
pub mod objects;
pub(crate) mod tenancy;

use answer::{Page, typed_body, typed_item};

pub use tenancy::{Bookkeeping, ClusterKey, KubeConfigSecret, ServiceAccount};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::config::KubeconfigError;
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::discovery::Scope as ServedScope;
use kube::{Client, Config};
use parking_lot::Mutex;
use serde_json::{Map, Value};

use tether_diff::manifest::{GroupKind, ObjectKey, Scope};
use tether_schema::ownership::FIELD_MANAGER;

/// A view of live objects kept by someone else (the service's watch cache), so that a
/// pass over an app in sync needs no request at all.
pub trait LiveObjects: Send + Sync {
    /// The live object: `Some(None)` when it is known not to exist, `None` when this
    /// view does not know (the caller then asks the API server).
    fn lookup(&self, key: &ObjectKey) -> Option<Option<Value>>;

    /// The objects of a kind labelled for `app`, or `None` when this view does not
    /// hold the kind.
    fn owned(&self, group: &str, kind: &str, app: &str) -> Option<Vec<Value>>;
}

/// A kind the API server serves, with its scope.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// Why a request to the API server failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No usable kubeconfig or in-cluster configuration: fix the configuration.
    #[error("cannot configure a Kubernetes client: {0}")]
    Config(#[from] ConfigError),
    /// A Secret that should hold another cluster's kubeconfig cannot be used. Only
    /// where it was and what is wrong with its shape: never its contents.
    #[error("cannot configure a Kubernetes client: {secret}: {problem}")]
    Secret {
        secret: String,
        problem: SecretProblem,
    },
    /// The cluster does not serve a kind tether needs (`Namespaces`, `ConfigMaps`).
    #[error("the cluster serves no {0}")]
    NotServed(&'static str),
    /// An object that cannot be sent as it is: fix the object.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// The API server answered with a `Status`: 4xx answers need a change to the input
    /// (or to permissions); 409, 429 and 5xx can succeed on a retry.
    #[error("{reason} ({code}): {message}")]
    Api {
        code: u16,
        reason: String,
        message: String,
    },
    /// The server could not be reached or the connection broke: retryable.
    #[error("cannot reach the API server: {0}")]
    Transport(#[source] kube::Error),
    /// No answer began within the request timeout: retryable.
    #[error("cannot reach the API server: no answer within {}s", .0.as_secs_f64())]
    Timeout(Duration),
    /// The answer is not the object it should be: retryable (a proxy's page, a cut body).
    #[error("cannot read the API server's answer: {0}")]
    Answer(#[source] serde_json::Error),
}

/// Why no client could be configured.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: {source}", path.display())]
    KubeconfigFile {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    #[error("{0}")]
    Kubeconfig(#[source] KubeconfigError),
    #[error("{0}")]
    Infer(#[source] kube::config::InferConfigError),
    #[error("{0}")]
    Client(#[source] kube::Error),
    #[error("impersonation needs a connection made from a kubeconfig or in-cluster")]
    NoImpersonation,
}

/// What is wrong with a Secret tether reads a kubeconfig (or its data) from.
#[derive(Debug, thiserror::Error)]
pub enum SecretProblem {
    #[error("not found")]
    NotFound,
    #[error("has no key {0}")]
    NoKey(String),
    #[error("key {0} is not base64")]
    NotBase64(String),
    #[error("the kubeconfig is not UTF-8 text")]
    NotUtf8,
    #[error("not a kubeconfig")]
    NotAKubeconfig,
    #[error("user {user:?} uses {what}; only inline credentials are accepted")]
    Credentials { user: String, what: &'static str },
    #[error("cluster {0:?} uses certificate-authority (a file); use certificate-authority-data")]
    CertificateAuthorityFile(String),
    #[error("the kubeconfig names no usable current context, cluster and user")]
    NoContext,
}

/// Why an object cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("an object without metadata.name cannot be {0}")]
    NoName(&'static str),
    #[error("not a Kubernetes object: {0}")]
    NotAnObject(#[source] serde_json::Error),
}

impl ClusterError {
    /// Whether trying again later can succeed without a change to the input.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClusterError::Config(_)
            | ClusterError::Secret { .. }
            | ClusterError::NotServed(_)
            | ClusterError::Object(_) => false,
            ClusterError::Api { code, .. } => *code == 409 || *code == 429 || *code >= 500,
            ClusterError::Transport(_) | ClusterError::Timeout(_) | ClusterError::Answer(_) => true,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, ClusterError::Api { code: 404, .. })
    }
}

impl From<kube::Error> for ClusterError {
    fn from(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => ClusterError::Api {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            // Not the JSON it should be (a proxy's page, a cut body).
            kube::Error::SerdeError(err) => ClusterError::Answer(err),
            other => ClusterError::Transport(other),
        }
    }
}

/// How long one request to the API server may take before it is given up on: the
/// API server ends a request itself after 60 s (its `--request-timeout`), so an answer
/// that has not begun in 30 s comes from a connection that is gone (a black-holed
/// address, a dead load balancer). Watches are long-lived and bounded by kube-rs's
/// watcher idle timeout instead.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long establishing a connection may take (TCP and TLS): client-go's dialer uses
/// 30 s; a reachable API server answers in milliseconds, so 10 s fails faster.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many times a request the server refused as busy or failing is sent, and the
/// first pause (doubling): client-go retries such answers a handful of times too.
/// Five attempts pass a request through a control plane failing one request in five
/// all but always (1 in 3,000 fails), within 0.75 s of pauses; a control plane that
/// fails everything fails each request within that too.
const RETRY_ATTEMPTS: u32 = 5;
const RETRY_FIRST_DELAY: Duration = Duration::from_millis(50);
/// The longest pause a server's `retryAfterSeconds` is granted between two attempts.
const RETRY_MAX_DELAY: Duration = Duration::from_secs(2);

/// Whether a request may be sent again after a 429 or 5xx: a create (POST) may have
/// been stored before the failure, every other request tether makes is idempotent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    WhenBusy,
    Never,
}

/// A connection to one cluster, with the kinds it serves resolved once and cached.
/// A clone shares the client and what was resolved.
#[derive(Clone)]
pub struct Cluster {
    client: Client,
    /// What `client` was built from: the base of the same cluster's impersonating
    /// connections (None for a client built elsewhere).
    config: Option<Config>,
    /// Bounds every request-response exchange (see [`DEFAULT_REQUEST_TIMEOUT`]).
    timeout: Duration,
    /// Shared with the same cluster's impersonating connections: what a server
    /// serves is the same for every identity.
    kinds: Arc<Mutex<HashMap<GroupVersionKind, Option<Resolved>>>>,
    /// Whether aggregated discovery has filled `kinds` (two requests for every kind
    /// the server serves, instead of one per group version).
    discovered: Arc<tokio::sync::OnceCell<()>>,
    /// Set on a connection that acts as a ServiceAccount (see [`Cluster::impersonating`]).
    tenant: Option<tenancy::Tenant>,
}

impl Cluster {
    /// Connects with a kubeconfig file and context, or the default kubeconfig, or the
    /// in-cluster service account, in that order, as kubectl does.
    pub async fn connect(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Cluster, ClusterError> {
        let options = kube::config::KubeConfigOptions {
            context: context.map(str::to_string),
            ..Default::default()
        };
        let config = match kubeconfig {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                    ConfigError::KubeconfigFile {
                        path: path.to_path_buf(),
                        source,
                    }
                })?;
                Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(ConfigError::Kubeconfig)?
            }
            None if context.is_some() => Config::from_kubeconfig(&options)
                .await
                .map_err(ConfigError::Kubeconfig)?,
            None => Config::infer().await.map_err(ConfigError::Infer)?,
        };
        Cluster::from_config(config)
    }

    /// Connects with a configuration already read (a kubeconfig from a Secret).
    pub fn from_config(mut config: Config) -> Result<Cluster, ClusterError> {
        config.connect_timeout = Some(DEFAULT_CONNECT_TIMEOUT);
        // Retries are tether's (see `Cluster::bounded`): kube-rs's own layer would
        // retry 429/503 up to 15 times inside each of them, past any pass's patience.
        config.default_retry = false;
        let client = build_client(config.clone())?;
        let mut cluster = Cluster::from_client(client);
        cluster.config = Some(config);
        Ok(cluster)
    }

    pub fn from_client(client: Client) -> Cluster {
        Cluster {
            client,
            config: None,
            timeout: DEFAULT_REQUEST_TIMEOUT,
            kinds: Arc::new(Mutex::new(HashMap::new())),
            discovered: Arc::new(tokio::sync::OnceCell::new()),
            tenant: None,
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The same connection with another bound on each request.
    pub fn with_timeout(mut self, timeout: Duration) -> Cluster {
        self.timeout = timeout;
        self
    }

    /// Runs one exchange with the API server within the request timeout, and again
    /// (backing off) while the server answers that it is busy or failing (429, 5xx)
    /// and the request is safe to repeat. A pass makes dozens of requests: without
    /// this, one overloaded moment fails it whole, and a validation that must see
    /// every object succeed would rarely pass at all on a flaky control plane.
    async fn bounded<T, F, Fut>(&self, retry: Retry, exchange: F) -> Result<T, ClusterError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        let mut delay = RETRY_FIRST_DELAY;
        let mut attempt = 1;
        loop {
            let answer = match tokio::time::timeout(self.timeout, exchange()).await {
                Ok(answer) => answer,
                Err(_) => {
                    return Err(ClusterError::Timeout(self.timeout));
                }
            };
            match answer {
                Err(kube::Error::Api(status))
                    if retry == Retry::WhenBusy
                        && attempt < RETRY_ATTEMPTS
                        && (status.code == 429 || status.code >= 500) =>
                {
                    // Jitter, so that many passes refused together do not return
                    // together; a server that says how long to wait (API priority and
                    // fairness does) is given that, up to a bound.
                    let asked = status
                        .details
                        .as_ref()
                        .map(|d| Duration::from_secs(u64::from(d.retry_after_seconds)))
                        .unwrap_or_default()
                        .min(RETRY_MAX_DELAY);
                    let pause = delay.mul_f64(rand::random_range(0.5..1.5)).max(asked);
                    tokio::time::sleep(pause).await;
                    delay *= 2;
                    attempt += 1;
                }
                answer => return answer.map_err(ClusterError::from),
            }
        }
    }

    /// The resource serving a kind, or None when the server does not serve it (yet: a
    /// CRD in the same revision).
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<Option<Resolved>, ClusterError> {
        if let Some(known) = self.cached(gvk) {
            return Ok(known);
        }
        self.discover().await?;
        if let Some(known) = self.cached(gvk) {
            return Ok(known);
        }
        // Not in the snapshot: a CRD created since, or a server without aggregated
        // discovery. Ask for this group version alone.
        let lookup = || async {
            match kube::discovery::pinned_kind(&self.client, gvk).await {
                Ok((resource, capabilities)) => Ok(Some(Resolved {
                    resource,
                    namespaced: capabilities.scope == ServedScope::Namespaced,
                })),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
                Err(kube::Error::Discovery(_)) => Ok(None),
                Err(err) => Err(err),
            }
        };
        let resolved = self.bounded(Retry::WhenBusy, lookup).await?;
        // A kind not served is not cached: its CRD may be created by the next sync.
        if resolved.is_some() {
            self.kinds.lock().insert(gvk.clone(), resolved.clone());
        }
        Ok(resolved)
    }

    /// Discovers once per connection (see [`Cluster::discover_all`]); a server that
    /// did not answer is asked again next time.
    async fn discover(&self) -> Result<(), ClusterError> {
        self.discovered
            .get_or_try_init(|| self.discover_all())
            .await
            .map(|_| ())
    }

    /// Caches every kind aggregated discovery reports; a server without it (before
    /// Kubernetes 1.26) is asked per group version instead. A server that does not
    /// answer at all is an error: asking it once per kind would only wait longer.
    async fn discover_all(&self) -> Result<(), ClusterError> {
        let run = || async {
            match kube::Discovery::new(self.client.clone())
                .run_aggregated()
                .await
            {
                Ok(discovery) => Ok(Some(discovery)),
                Err(err @ (kube::Error::HyperError(_) | kube::Error::Service(_))) => Err(err),
                Err(kube::Error::Api(status)) if status.code == 429 || status.code >= 500 => {
                    Err(kube::Error::Api(status))
                }
                Err(err) => {
                    tracing::debug!(error = %err, "no aggregated discovery; resolving kinds one group version at a time");
                    Ok(None)
                }
            }
        };
        let Some(discovery) = self.bounded(Retry::WhenBusy, run).await? else {
            return Ok(());
        };
        let mut kinds = self.kinds.lock();
        for group in discovery.groups() {
            for version in group.versions() {
                for (resource, capabilities) in group.versioned_resources(version) {
                    let gvk =
                        GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
                    let namespaced = capabilities.scope == ServedScope::Namespaced;
                    kinds.entry(gvk).or_insert(Some(Resolved {
                        resource,
                        namespaced,
                    }));
                }
            }
        }
        Ok(())
    }

    /// The scope of every kind the server serves, by group and kind (for reading
    /// manifests: a custom resource's scope comes from its served CRD).
    pub async fn scopes(&self) -> Result<HashMap<GroupKind, Scope>, ClusterError> {
        self.discover().await?;
        let kinds = self.kinds.lock();
        Ok(kinds
            .iter()
            .filter_map(|(gvk, resolved)| {
                let scope = if resolved.as_ref()?.namespaced {
                    Scope::Namespaced
                } else {
                    Scope::Cluster
                };
                let gk = GroupKind {
                    group: gvk.group.clone(),
                    kind: gvk.kind.clone(),
                };
                Some((gk, scope))
            })
            .collect())
    }

    /// What a Helm chart may ask of the cluster (`.Capabilities`): the server's
    /// version as `/version` reports it, and every served `group/version` and
    /// `group/version/Kind` from discovery, sorted (Argo CD passes both forms).
    pub async fn capabilities(&self) -> Result<(String, Vec<String>), ClusterError> {
        let version = self
            .bounded(Retry::WhenBusy, || self.client.apiserver_version())
            .await?
            .git_version;
        self.discover().await?;
        let kinds = self.kinds.lock();
        let mut apis = std::collections::BTreeSet::new();
        for (gvk, resolved) in kinds.iter() {
            if resolved.is_some() {
                let gv = if gvk.group.is_empty() {
                    gvk.version.clone()
                } else {
                    format!("{}/{}", gvk.group, gvk.version)
                };
                apis.insert(format!("{gv}/{}", gvk.kind));
                apis.insert(gv);
            }
        }
        Ok((version, apis.into_iter().collect()))
    }

    fn cached(&self, gvk: &GroupVersionKind) -> Option<Option<Resolved>> {
        self.kinds.lock().get(gvk).cloned()
    }

    /// A served version of a group and kind: for an object recorded under a version
    /// the server no longer serves (a CRD that dropped `v1alpha1`), still the same
    /// object under another version.
    pub async fn resolve_group_kind(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Option<Resolved>, ClusterError> {
        // A fresh look: the versions served change when CRDs do.
        self.refresh_discovery().await?;
        let kinds = self.kinds.lock();
        let mut served: Vec<_> = kinds
            .iter()
            .filter(|(gvk, resolved)| gvk.group == group && gvk.kind == kind && resolved.is_some())
            .collect();
        // Any served version addresses the same stored object; take a stable one.
        served.sort_by(|a, b| a.0.version.cmp(&b.0.version));
        Ok(served.first().and_then(|(_, resolved)| (*resolved).clone()))
    }

    /// Every namespaced kind the server serves, one version per group and kind.
    pub async fn namespaced_kinds(&self) -> Result<Vec<Resolved>, ClusterError> {
        self.discover().await?;
        let kinds = self.kinds.lock();
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<Resolved> = kinds
            .iter()
            .filter_map(|(gvk, resolved)| {
                let resolved = resolved.as_ref()?;
                (resolved.namespaced && seen.insert((gvk.group.clone(), gvk.kind.clone())))
                    .then(|| resolved.clone())
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.resource.group, &a.resource.kind).cmp(&(&b.resource.group, &b.resource.kind))
        });
        Ok(out)
    }

    /// Reads aggregated discovery again: kinds served or dropped since the last look.
    async fn refresh_discovery(&self) -> Result<(), ClusterError> {
        self.kinds.lock().clear();
        self.discover_all().await
    }

    /// The API of a kind, through this connection's client (its tenant's, when it
    /// impersonates one: see [`Cluster::for_bookkeeping`] for the one exception).
    fn api(&self, kind: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        let client = self.client.clone();
        match (kind.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(client, ns, &kind.resource),
            _ => Api::all_with(client, &kind.resource),
        }
    }

    /// The objects of a kind (in a namespace, for a namespaced kind) matching a label
    /// selector (every object when it is empty), all pages.
    pub async fn list(
        &self,
        kind: &Resolved,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<Value>, ClusterError> {
        let request = self.request(kind, namespace);
        let mut params = kube::api::ListParams::default();
        if !label_selector.is_empty() {
            params = params.labels(label_selector);
        }
        let mut objects = Vec::new();
        loop {
            let page: Page = self
                .answer(Retry::WhenBusy, || request.list(&params))
                .await?;
            let next = page.metadata.continue_.filter(|c| !c.is_empty());
            for item in page.items.into_iter().flatten() {
                objects.push(typed_item(item, kind));
            }
            match next {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(objects),
            }
        }
    }

    /// The live object, or None when it does not exist.
    pub async fn get(
        &self,
        kind: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ClusterError> {
        let request = self.request(kind, namespace);
        let params = kube::api::GetParams::default();
        match self
            .answer::<Map<String, Value>>(Retry::WhenBusy, || request.get(name, &params))
            .await
        {
            Ok(object) => Ok(Some(Value::Object(object))),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// What the object would become if tether applied it now: the API server's own
    /// answer to a server-side apply dry run, defaults and admission included. Without
    /// `force`, a field another manager owns is a conflict, as it would be for real.
    pub async fn dry_run_apply(
        &self,
        kind: &Resolved,
        object: &Value,
        force: bool,
    ) -> Result<Value, ClusterError> {
        let mut params = PatchParams::apply(FIELD_MANAGER).dry_run();
        if force {
            params = params.force();
        }
        self.patch_apply(kind, object, &params).await
    }

    /// Server-side apply as field manager `tether`.
    pub async fn apply(
        &self,
        kind: &Resolved,
        object: &Value,
        force: bool,
    ) -> Result<Value, ClusterError> {
        let mut params = PatchParams::apply(FIELD_MANAGER);
        if force {
            params = params.force();
        }
        self.patch_apply(kind, object, &params).await
    }

    async fn patch_apply(
        &self,
        kind: &Resolved,
        object: &Value,
        params: &PatchParams,
    ) -> Result<Value, ClusterError> {
        let (namespace, name) = identity(object, "applied")?;
        let request = self.request(kind, namespace);
        // Serialised once, however many attempts send it.
        let body = serde_json::value::to_raw_value(object).map_err(ObjectError::NotAnObject)?;
        let patch = Patch::Apply(&*body);
        let applied = self
            .answer(Retry::WhenBusy, || request.patch(name, params, &patch))
            .await?;
        Ok(Value::Object(applied))
    }

    /// Creates an object (POST) as field manager `tether`. An object that already
    /// exists is `ClusterError::Api { code: 409, .. }` (AlreadyExists); a namespace that
    /// does not exist is a 404.
    /// An object with `metadata.generateName` and no name gets one from the server.
    pub async fn create(&self, kind: &Resolved, object: &Value) -> Result<Value, ClusterError> {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let body = typed_body(object)?;
        let request = self.request(kind, namespace);
        let created = self
            .answer(Retry::Never, || {
                request.create(&write_params(), body.clone())
            })
            .await?;
        Ok(Value::Object(created))
    }

    /// Replaces an object (PUT) as field manager `tether`. With `metadata.resourceVersion`
    /// set, the write is optimistic: when the object changed since that version the
    /// server refuses it with `ClusterError::Api { code: 409, .. }` (Conflict), and the
    /// caller re-reads and decides again.
    pub async fn replace(&self, kind: &Resolved, object: &Value) -> Result<Value, ClusterError> {
        let (namespace, name) = identity(object, "replaced")?;
        let body = typed_body(object)?;
        let request = self.request(kind, namespace);
        let replaced = self
            .answer(Retry::WhenBusy, || {
                request.replace(name, &write_params(), body.clone())
            })
            .await?;
        Ok(Value::Object(replaced))
    }

    /// Deletes an object with background propagation; an object already gone is fine.
    /// A 404 that does not name the object (the resource itself is not served, as
    /// after a CRD stopped serving that version) is an error: nothing was deleted.
    /// With `uid`, only that incarnation of the object is deleted: one deleted and
    /// created again since it was read (by someone else) is refused with a 409.
    pub async fn delete(
        &self,
        kind: &Resolved,
        namespace: Option<&str>,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), ClusterError> {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: uid.map(|uid| kube::api::Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let api = self.api(kind, namespace);
        self.bounded(Retry::WhenBusy, || async {
            match api.delete(name, &params).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status))
                    if status.code == 404
                        && status.details.as_ref().is_some_and(|d| d.name == name) =>
                {
                    Ok(())
                }
                Err(err) => Err(err),
            }
        })
        .await
    }
}

/// Counts every request to the API server by verb and status code (`/metrics`).
#[derive(Clone)]
struct CountRequests<S>(S);

impl<S, B, R> tower::Service<http::Request<B>> for CountRequests<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let watch = request
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
        let verb = if watch {
            "WATCH"
        } else {
            match *request.method() {
                http::Method::GET => "GET",
                http::Method::POST => "POST",
                http::Method::PUT => "PUT",
                http::Method::PATCH => "PATCH",
                http::Method::DELETE => "DELETE",
                _ => "OTHER",
            }
        };
        let answer = self.0.call(request);
        Box::pin(async move {
            let answer = answer.await;
            // 0: no answer at all (connection refused, reset, timeout).
            let code = answer.as_ref().map_or(0, |r| r.status().as_u16());
            crate::metrics::METRICS.api_request(verb, code);
            answer
        })
    }
}

/// A client for `config`, its requests counted for `/metrics`.
fn build_client(config: Config) -> Result<Client, ClusterError> {
    Ok(kube::client::ClientBuilder::try_from(config)
        .map_err(ConfigError::Client)?
        .with_layer(&tower::layer::layer_fn(CountRequests))
        .build())
}

fn to_value(object: DynamicObject) -> Result<Value, ClusterError> {
    serde_json::to_value(object).map_err(ClusterError::Answer)
}

fn write_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_string()),
    }
}

/// The namespace and name of an object about to be written.
fn identity<'a>(
    object: &'a Value,
    verb: &'static str,
) -> Result<(Option<&'a str>, &'a str), ClusterError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or(ObjectError::NoName(verb))?;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    Ok((namespace, name))
}
