//! The sandbox's HTTP API: routing of Kubernetes API paths, the verbs (get, list, watch,
//! create, update, patch, delete, deletecollection) and the write pipeline that every
//! change goes through, in the order kube-apiserver applies it: decode, merge, default,
//! validate, track field ownership, bump generation, store.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::combinators::BoxBody;
use parking_lot::RwLock;
use serde_json::{Value, json};

use super::controller_settings::Settings;
use super::defaults::Defaulter;
use super::faults::{Counters, Faults};
use super::protobuf::Format;
use super::registry::{self, Registry, ResourceType};
use super::status::ApiError;
use super::store::{ObjectKey, Store, Stored};
use commit::Write;

mod access_review;
mod commit;
mod lifecycle;
mod read;
mod scale;
mod table;
#[cfg(test)]
mod tests;
mod token_request;
mod write;

pub(crate) use read::full_body;

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// Everything the API serves from.
pub(crate) struct State {
    pub(crate) store: Store,
    pub(crate) registry: RwLock<Registry>,
    pub(crate) defaulter: Defaulter,
    pub(crate) faults: Faults,
    pub(crate) counters: Counters,
    /// Whether the Deployment controller runs, and how soon it acts.
    pub(crate) deployment_controller: Settings,
    pub(crate) token: String,
    /// Tokens besides `token`: issued by TokenRequests, or static.
    pub(crate) tokens: crate::tokens::Tokens,
    /// `host:port`, for `GET /api`.
    pub(crate) server_address: String,
}

impl State {
    pub(crate) fn new(token: String, server_address: String) -> State {
        State {
            store: Store::new(),
            registry: RwLock::new(Registry::builtin()),
            defaulter: Defaulter::new(),
            faults: Faults::default(),
            counters: Counters::default(),
            deployment_controller: Settings::default(),
            token,
            tokens: crate::tokens::Tokens::default(),
            server_address,
        }
    }

    pub(crate) fn registry(&self) -> parking_lot::RwLockReadGuard<'_, Registry> {
        self.registry.read()
    }

    fn registry_mut(&self) -> parking_lot::RwLockWriteGuard<'_, Registry> {
        self.registry.write()
    }

    /// Creates the namespaces every cluster starts with.
    pub(crate) fn bootstrap(&self) {
        let namespaces = self.registry().by_kind("", "v1", "Namespace");
        let Some(namespaces) = namespaces else { return };
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let object =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            let write = Write::new(
                namespaces.clone(),
                (String::new(), name.to_string()),
                None,
                object,
                "kube-apiserver",
            );
            if let Err(err) = self.commit(write) {
                tracing::warn!(namespace = name, error = %err, "cannot create a built-in namespace");
            }
        }
    }
}

/// One parsed request.
pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: HashMap<String, String>,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// The format negotiated for the answer: reads of built-in kinds write protobuf
    /// straight from the store's encoding.
    pub(crate) format: Format,
    /// A protobuf body already decoded (`body` is then empty): handed to the handler
    /// once, so the object is not written to JSON and parsed back.
    pub(crate) decoded: parking_lot::Mutex<Option<Value>>,
    /// Warnings for the answer's headers.
    pub(crate) warnings: Warnings,
    /// Whom the bearer token authenticated (before any impersonation).
    pub(crate) requester: crate::rbac::UserInfo,
}

impl Request {
    pub(crate) fn take_decoded(&self) -> Option<Value> {
        self.decoded.lock().take()
    }
}

/// What a handler answers.
pub(crate) enum Reply {
    Json(StatusCode, Value),
    Raw(StatusCode, Bytes, &'static str),
    /// A watch: JSON lines, or protobuf frames when the request's format was protobuf.
    Stream(Body, Format),
}

impl Reply {
    pub(super) fn ok(value: Value) -> Reply {
        Reply::Json(StatusCode::OK, value)
    }
}

/// The resource a path names.
struct Target {
    resource: Arc<ResourceType>,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

impl Target {
    pub(super) fn key(&self) -> ObjectKey {
        (
            self.namespace.clone().unwrap_or_default(),
            self.name.clone().unwrap_or_default(),
        )
    }
}

/// The verb of a request, for counters (kube-apiserver's audit verbs). A dry run
/// writes nothing and is counted apart (`dryrun:patch`), so "no writes" means none.
pub(crate) fn verb_of(
    method: &Method,
    path: &str,
    query: &HashMap<String, String>,
) -> &'static str {
    let named = is_named(path);
    let dry_run = is_dry_run(query);
    match *method {
        Method::GET if is_watch(query) => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST if dry_run => "dryrun:create",
        Method::POST => "create",
        Method::PUT if dry_run => "dryrun:update",
        Method::PUT => "update",
        Method::PATCH if dry_run => "dryrun:patch",
        Method::PATCH => "patch",
        Method::DELETE if dry_run => "dryrun:delete",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

/// Whether the client asks for aggregated discovery (`as=APIGroupDiscoveryList`).
fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|accept| {
            accept
                .split(',')
                .any(|t| t.contains("as=APIGroupDiscoveryList") && t.contains("v=v2;"))
        })
}

fn is_watch(query: &HashMap<String, String>) -> bool {
    query.get("watch").is_some_and(|w| w == "true" || w == "1")
}

/// Whether a resource path names one object (`…/configmaps/x`) rather than a collection.
fn is_named(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _, rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => return true,
    };
    match rest {
        ["namespaces", _, _, _, ..] => true,
        ["namespaces", _, _] => false,
        [_, _, ..] => true,
        _ => false,
    }
}

/// The resource a path's counters are filed under: `configmaps`, `apps/deployments`.
pub(crate) fn resource_of(path: &str) -> String {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _, rest @ ..] => ("", rest),
        ["apis", group, _, rest @ ..] => (*group, rest),
        _ => return "discovery".to_string(),
    };
    let resource = match rest {
        [] => return "discovery".to_string(),
        ["namespaces", _, resource, ..] => resource,
        [resource, ..] => resource,
    };
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{group}/{resource}")
    }
}

impl State {
    /// Serves one authenticated request.
    pub(crate) async fn serve(self: &Arc<Self>, request: Request) -> Result<Reply, ApiError> {
        let path = request.path.trim_end_matches('/').to_string();
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match segments.as_slice() {
            ["version"] => Ok(Reply::ok(
                serde_json::from_str(VERSION).unwrap_or(Value::Null),
            )),
            ["healthz"] | ["livez"] | ["readyz"] => Ok(Reply::Raw(
                StatusCode::OK,
                Bytes::from_static(b"ok"),
                "text/plain",
            )),
            ["api"] | ["apis"] if wants_aggregated(&request.headers) => {
                let body = self.registry().aggregated(segments == ["api"]);
                let bytes = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
                Ok(Reply::Raw(
                    StatusCode::OK,
                    bytes,
                    registry::AGGREGATED_CONTENT_TYPE,
                ))
            }
            ["api"] => Ok(Reply::ok(Registry::api_versions(&self.server_address))),
            ["apis"] => Ok(Reply::ok(self.registry().group_list())),
            ["apis", group] => self
                .registry()
                .group(group)
                .map(Reply::ok)
                .ok_or(ApiError::PageNotFound),
            ["api", version] => self.resource_list("", version),
            ["apis", group, version] => self.resource_list(group, version),
            ["openapi", "v3"] => Ok(Reply::ok(super::openapi::index(&self.registry()))),
            ["openapi", "v3", rest @ ..] => {
                super::openapi::document(&self.registry(), &rest.join("/"))
                    .map(|bytes| Reply::Raw(StatusCode::OK, bytes, "application/json"))
                    .ok_or(ApiError::PageNotFound)
            }
            ["sandbox", "requests"] => Ok(self.requests(&request.method)),
            ["sandbox", "faults"] => self.set_faults(&request),
            ["sandbox", "controllers"] => self.set_controllers(&request),
            ["api", version, rest @ ..] => {
                let target = self.target("", version, rest)?;
                self.resource_request(target, request).await
            }
            ["apis", group, version, rest @ ..] => {
                let target = self.target(group, version, rest)?;
                self.resource_request(target, request).await
            }
            _ => Err(ApiError::PageNotFound),
        }
    }

    /// Whether a path names a built-in resource, whose objects travel in protobuf too
    /// (custom resources have no protobuf form).
    pub(crate) fn serves_protobuf(&self, path: &str) -> bool {
        self.custom_resource_at(path) == Some(false)
    }

    /// Whether a path names a custom resource (Some(true)), a built-in one
    /// (Some(false)), or no resource at all (discovery, OpenAPI, unknown paths).
    pub(crate) fn custom_resource_at(&self, path: &str) -> Option<bool> {
        // The resource part of `target`'s paths, read without building a target.
        let mut segments = path.trim_matches('/').split('/');
        let (group, version) = match segments.next()? {
            "api" => ("", segments.next()?),
            "apis" => (segments.next()?, segments.next()?),
            _ => return None,
        };
        let first = segments.next().filter(|s| !s.is_empty())?;
        let plural = match (first, segments.next(), segments.next()) {
            ("namespaces", Some(_), None | Some("status" | "finalize")) if group.is_empty() => {
                "namespaces"
            }
            ("namespaces", Some(_), Some(plural)) => plural,
            (plural, ..) => plural,
        };
        self.registry().is_custom(group, version, plural)
    }

    fn resource_list(&self, group: &str, version: &str) -> Result<Reply, ApiError> {
        self.registry()
            .resource_list(group, version)
            .map(Reply::ok)
            .ok_or(ApiError::PageNotFound)
    }

    fn requests(&self, method: &Method) -> Reply {
        if method == Method::DELETE {
            self.counters.reset();
        }
        Reply::ok(self.counters.snapshot().to_json())
    }

    /// `PUT /sandbox/faults` with `{"failRate": 0.2, "latencyMs": 50}`.
    fn set_faults(&self, request: &Request) -> Result<Reply, ApiError> {
        if request.method == Method::PUT {
            let body: Value = serde_json::from_slice(&request.body)
                .map_err(|e| ApiError::BadRequest(e.to_string()))?;
            if let Some(rate) = body.get("failRate").and_then(Value::as_f64) {
                self.faults.set_fail_rate(rate);
            }
            if let Some(ms) = body.get("latencyMs").and_then(Value::as_u64) {
                self.faults.set_latency(Duration::from_millis(ms));
            }
        }
        Ok(Reply::ok(json!({
            "failRate": self.faults.fail_rate(),
            "latencyMs": self.faults.latency().as_millis() as u64,
        })))
    }

    /// `PUT /sandbox/controllers` with `{"deploymentDelayMs": 5}`, or `null` to stop
    /// the Deployment controller.
    fn set_controllers(&self, request: &Request) -> Result<Reply, ApiError> {
        let settings = &self.deployment_controller;
        if request.method == Method::PUT {
            let body: Value = serde_json::from_slice(&request.body)
                .map_err(|e| ApiError::BadRequest(e.to_string()))?;
            match body.get("deploymentDelayMs") {
                Some(Value::Null) => settings.set_delay(None),
                Some(ms) => {
                    let ms = ms.as_u64().ok_or_else(|| {
                        ApiError::BadRequest(
                            "deploymentDelayMs must be a whole number or null".into(),
                        )
                    })?;
                    settings.set_delay(Some(Duration::from_millis(ms)));
                }
                None => {}
            }
        }
        Ok(Reply::ok(json!({
            "deploymentDelayMs": settings.delay().map(|d| d.as_millis() as u64),
        })))
    }

    /// Resolves `[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]`.
    fn target(&self, group: &str, version: &str, rest: &[&str]) -> Result<Target, ApiError> {
        let registry = self.registry();
        let find = |plural: &str| {
            registry
                .find(group, version, plural)
                .ok_or(ApiError::PageNotFound)
        };
        let owned = |s: &&str| s.to_string();
        let target = match rest {
            // The namespace object itself and its subresources.
            ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => Target {
                resource: find("namespaces")?,
                namespace: None,
                name: Some(name.to_string()),
                subresource: Some(sub.to_string()),
            },
            ["namespaces", namespace, plural, more @ ..] => {
                let resource = find(plural)?;
                if !resource.namespaced || more.len() > 2 {
                    return Err(ApiError::PageNotFound);
                }
                Target {
                    resource,
                    namespace: Some(namespace.to_string()),
                    name: more.first().map(owned),
                    subresource: more.get(1).map(owned),
                }
            }
            [plural, more @ ..] if more.len() <= 2 => {
                let resource = find(plural)?;
                if resource.namespaced && !more.is_empty() {
                    // A namespaced object addressed without its namespace.
                    return Err(ApiError::PageNotFound);
                }
                Target {
                    resource,
                    namespace: None,
                    name: more.first().map(owned),
                    subresource: more.get(1).map(owned),
                }
            }
            _ => return Err(ApiError::PageNotFound),
        };
        match target.subresource.as_deref() {
            None => {}
            Some("status") if target.resource.has_status => {}
            Some("scale") if target.resource.has_scale => {}
            Some("finalize") if target.resource.is("", "Namespace") => {}
            Some("token") if target.resource.is("", "ServiceAccount") => {}
            Some(_) => return Err(ApiError::PageNotFound),
        }
        Ok(target)
    }

    async fn resource_request(
        self: &Arc<Self>,
        target: Target,
        request: Request,
    ) -> Result<Reply, ApiError> {
        if access_review::is_review(&target.resource) {
            return self.review(&target, &request);
        }
        if target.subresource.as_deref() == Some("token") {
            return self.token_request(&target, &request);
        }
        let named = target.name.is_some();
        let table = (request.method == Method::GET && target.subresource.is_none())
            .then(|| table::requested(&request.headers, &request.query))
            .flatten();
        if let Some(table) = table {
            // A Table is made from the JSON objects, and written in JSON.
            let reply = match named {
                true => self.get(&target, Format::Json),
                false if is_watch(&request.query) => {
                    self.watch(&target, &request.query, Format::Json)
                }
                false => self.list(&target, &request.query, Format::Json),
            }?;
            let columns = self.registry().printer_columns(&target.resource);
            return table::convert(&target.resource, columns, &table, reply);
        }
        check_write_options(&request.method, &request.query)?;
        match (&request.method, named) {
            (&Method::GET, true) => self.get(&target, request.format),
            (&Method::GET, false) if is_watch(&request.query) => {
                self.watch(&target, &request.query, request.format)
            }
            (&Method::GET, false) => self.list(&target, &request.query, request.format),
            (&Method::POST, false) => self.create(&target, &request),
            (&Method::PUT, true) => self.update(&target, &request),
            (&Method::PATCH, true) => self.patch(&target, &request),
            (&Method::DELETE, true) => self.delete(&target, &request),
            (&Method::DELETE, false) => self.delete_collection(&target, &request),
            _ => Err(ApiError::MethodNotAllowed),
        }
    }

    fn stored(&self, target: &Target) -> Result<Arc<Stored>, ApiError> {
        let name = target.name.as_deref().unwrap_or_default();
        self.store
            .get(&target.resource.key(), &target.key())
            .ok_or_else(|| ApiError::not_found(&target.resource.plural, name))
    }
}

const VERSION: &str = include_str!("../../../../assets/discovery/version.json");

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn is_dry_run(query: &HashMap<String, String>) -> bool {
    query.get("dryRun").is_some_and(|d| d == "All")
}

/// `fieldValidation`: what a create, update or patch does with fields the kind's
/// schema does not declare (server-side apply always refuses them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum FieldValidation {
    /// Dropped silently.
    Ignore,
    /// Dropped, each named in a `Warning` header: kube-apiserver's default when the
    /// request does not say (kubectl says `Strict`).
    #[default]
    Warn,
    /// The write is refused (400, `strict decoding error`).
    Strict,
}

/// The values `fieldValidation` may take (`metav1.FieldValidation*`, and empty for the
/// default), sorted as kube-apiserver lists them in its refusal.
const FIELD_VALIDATION_VALUES: [&str; 4] = ["", "Ignore", "Strict", "Warn"];

/// Refuses a write whose options kube-apiserver's handler refuses before it reads the
/// body (`ValidateCreateOptions`, `ValidateUpdateOptions`, `ValidatePatchOptions`): a
/// `fieldValidation` other than Ignore, Warn or Strict is a 422 on the options kind,
/// `PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: …`.
fn check_write_options(method: &Method, query: &HashMap<String, String>) -> Result<(), ApiError> {
    let options = match *method {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        Method::PATCH => "PatchOptions",
        _ => return Ok(()),
    };
    let Some(value) = query.get("fieldValidation") else {
        return Ok(());
    };
    if FIELD_VALIDATION_VALUES.contains(&value.as_str()) {
        return Ok(());
    }
    let error = crate::validate::FieldError::not_supported(
        "fieldValidation",
        value,
        &FIELD_VALIDATION_VALUES,
    );
    let kind = crate::validate::qualified_kind("meta.k8s.io", options);
    Err(ApiError::Invalid {
        message: crate::validate::invalid_message(&kind, "", std::slice::from_ref(&error)),
        group: "meta.k8s.io".into(),
        kind: options.into(),
        name: String::new(),
        causes: vec![commit::cause(&error)],
    })
}

pub(super) fn field_validation(query: &HashMap<String, String>) -> FieldValidation {
    match query.get("fieldValidation").map(String::as_str) {
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        _ => FieldValidation::Warn,
    }
}

/// The warnings a request's answer carries, one `Warning: 299 - "…"` header each, as
/// kube-apiserver's warning recorder writes them. Shared with the code that answers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Warnings(Arc<parking_lot::Mutex<Vec<String>>>);

impl Warnings {
    pub(super) fn add(&self, text: String) {
        self.0.lock().push(text);
    }

    /// The header values: `299 - "unknown field \"spec.x\""`.
    pub(crate) fn header_values(&self) -> Vec<String> {
        self.0
            .lock()
            .iter()
            .map(|text| format!("299 - {}", crate::validate::go_quote(text)))
            .collect()
    }
}

/// The field manager of a non-apply write: the `fieldManager` parameter, or the user
/// agent up to its first `/`, as kube-apiserver derives it.
pub(super) fn field_manager(request: &Request) -> String {
    if let Some(manager) = request.query.get("fieldManager").filter(|m| !m.is_empty()) {
        return manager.clone();
    }
    request
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .filter(|m| !m.is_empty())
        .unwrap_or("unknown")
        .to_string()
}
