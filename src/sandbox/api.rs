//! The sandbox's HTTP API: routing of Kubernetes API paths, the verbs (get, list, watch,
//! create, update, patch, delete, deletecollection) and the write pipeline that every
//! change goes through, in the order kube-apiserver applies it: decode, merge, default,
//! validate, track field ownership, bump generation, store.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt as _;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::defaults::{self, Defaulter};
use super::faults::{Counters, Faults};
use super::fields::{self, ApplyError, ApplyOptions, UpdateOptions};
use super::registry::{self, Registry, ResourceType};
use super::selector::{FieldSelector, LabelSelector};
use super::status::{self, ApiError, Cause};
use super::store::{Event, ObjectKey, PutError, Store, Stored, WatchStart};
use super::validate;
use crate::schema::{Schema, Schemas};

/// How often a watch with `allowWatchBookmarks` gets a BOOKMARK. kube-apiserver sends
/// them about once a minute; it also sends one just before a watch times out.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

/// The longest a watch stays open when the client gives no `timeoutSeconds`
/// (kube-apiserver picks a random time between 30 and 60 minutes).
const MAX_WATCH: Duration = Duration::from_secs(30 * 60);

/// Marks continue tokens as the sandbox's own.
const CONTINUE_VERSION: &str = "tether-sandbox/v1";

pub type Body = BoxBody<Bytes, Infallible>;

/// Everything the API serves from.
pub struct State {
    pub store: Store,
    pub registry: RwLock<Registry>,
    pub defaulter: Defaulter,
    pub faults: Faults,
    pub counters: Counters,
    pub token: String,
    /// `host:port`, for `GET /api`.
    pub server_address: String,
}

impl State {
    pub fn new(token: String, server_address: String) -> State {
        State {
            store: Store::new(),
            registry: RwLock::new(Registry::builtin()),
            defaulter: Defaulter::new(),
            faults: Faults::default(),
            counters: Counters::default(),
            token,
            server_address,
        }
    }

    pub fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|p| p.into_inner())
    }

    fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates the namespaces every cluster starts with.
    pub fn bootstrap(&self) {
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
pub struct Request {
    pub method: Method,
    pub path: String,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// What a handler answers.
pub enum Reply {
    Json(StatusCode, Value),
    Raw(StatusCode, Bytes, &'static str),
    Stream(Body),
}

impl Reply {
    fn ok(value: Value) -> Reply {
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
    fn key(&self) -> ObjectKey {
        (
            self.namespace.clone().unwrap_or_default(),
            self.name.clone().unwrap_or_default(),
        )
    }
}

/// The verb of a request, for counters (kube-apiserver's audit verbs). A dry run
/// writes nothing and is counted apart (`dryrun:patch`), so "no writes" means none.
pub fn verb_of(method: &Method, path: &str, query: &HashMap<String, String>) -> &'static str {
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
pub fn resource_of(path: &str) -> String {
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
    pub async fn serve(self: &Arc<Self>, request: Request) -> Result<Reply, ApiError> {
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
            Some(_) => return Err(ApiError::PageNotFound),
        }
        Ok(target)
    }

    async fn resource_request(
        self: &Arc<Self>,
        target: Target,
        request: Request,
    ) -> Result<Reply, ApiError> {
        let named = target.name.is_some();
        match (&request.method, named) {
            (&Method::GET, true) => self.get(&target),
            (&Method::GET, false) if is_watch(&request.query) => {
                self.watch(&target, &request.query)
            }
            (&Method::GET, false) => self.list(&target, &request.query),
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

    fn get(&self, target: &Target) -> Result<Reply, ApiError> {
        let stored = self.stored(target)?;
        if target.subresource.as_deref() == Some("scale") {
            return Ok(Reply::ok(scale_of(&stored.value())));
        }
        Ok(Reply::Raw(
            StatusCode::OK,
            object_json(&target.resource, &stored),
            "application/json",
        ))
    }

    fn list(&self, target: &Target, query: &HashMap<String, String>) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(query)?;
        let (rv, items) = self
            .store
            .list(&target.resource.key(), target.namespace.as_deref());
        let limit = query
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        // Later pages report the first page's resourceVersion, so a watch started from
        // it replays whatever changed while the pages were read.
        let (start_after, rv) = match query.get("continue").filter(|c| !c.is_empty()) {
            Some(token) => {
                let (key, first_rv) = decode_continue(token)?;
                (Some(key), first_rv)
            }
            None => (None, rv),
        };
        let mut selected = items
            .iter()
            .filter(|(key, _)| start_after.as_ref().is_none_or(|after| key > after))
            .filter(|(key, stored)| filter.matches(key, stored));
        let mut body = Vec::with_capacity(64 + items.len() * 1024);
        let mut last_key = None;
        body.extend_from_slice(b"[");
        for (index, (key, stored)) in selected.by_ref().enumerate() {
            if index > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&list_item_json(&target.resource, stored));
            if limit.is_some_and(|limit| index + 1 == limit) {
                last_key = Some(key.clone());
                break;
            }
        }
        body.extend_from_slice(b"]");
        let remaining = last_key.as_ref().map(|_| selected.count()).unwrap_or(0);
        let mut metadata = Map::new();
        metadata.insert("resourceVersion".into(), rv.to_string().into());
        if let (Some(last), true) = (last_key, remaining > 0) {
            metadata.insert("continue".into(), encode_continue(&last, rv).into());
            metadata.insert("remainingItemCount".into(), remaining.into());
        }
        let head = format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":",
            Value::from(target.resource.list_kind()),
            Value::from(target.resource.api_version()),
            Value::Object(metadata)
        );
        let mut out = Vec::with_capacity(head.len() + body.len() + 1);
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(&body);
        out.push(b'}');
        Ok(Reply::Raw(
            StatusCode::OK,
            Bytes::from(out),
            "application/json",
        ))
    }

    fn watch(
        self: &Arc<Self>,
        target: &Target,
        query: &HashMap<String, String>,
    ) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(query)?;
        let bookmarks = query
            .get("allowWatchBookmarks")
            .is_some_and(|b| b == "true" || b == "1");
        let timeout = query
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or(MAX_WATCH);
        let resource = target.resource.clone();
        let key = resource.key();
        let namespace = target.namespace.clone();
        let requested = query
            .get("resourceVersion")
            .filter(|rv| !rv.is_empty() && *rv != "0");

        let (initial, receiver, mut last_rv): (Vec<Bytes>, _, u64) = match requested {
            None => {
                let (rv, items, receiver) = self.store.watch_from_now(&key, namespace.as_deref());
                let events = items
                    .iter()
                    .filter(|(k, stored)| filter.matches(k, stored))
                    .map(|(_, stored)| watch_line("ADDED", &object_json(&resource, stored)))
                    .collect();
                (events, receiver, rv)
            }
            Some(rv) => {
                let after: u64 = rv
                    .parse()
                    .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {rv}")))?;
                let (start, receiver) = self.store.watch(after);
                match start {
                    WatchStart::Expired { oldest } => {
                        let gone = ApiError::Expired(format!(
                            "too old resource version: {after} ({})",
                            oldest - 1
                        ));
                        let line = watch_line(
                            "ERROR",
                            &Bytes::from(serde_json::to_vec(&gone.status()).unwrap_or_default()),
                        );
                        return Ok(Reply::Stream(stream_body(futures::stream::iter([line]))));
                    }
                    WatchStart::Replay(events) => {
                        let lines = events
                            .iter()
                            .filter(|e| {
                                e.resource == key
                                    && namespace.as_ref().is_none_or(|ns| &e.key.0 == ns)
                            })
                            .filter(|e| filter.matches(&e.key, &e.object))
                            .map(|e| {
                                watch_line(
                                    e.event_type.as_str(),
                                    &object_json(&resource, &e.object),
                                )
                            })
                            .collect();
                        (
                            lines,
                            receiver,
                            after.max(events.last().map(|e| e.resource_version).unwrap_or(after)),
                        )
                    }
                }
            }
        };

        let (sender, lines) = tokio::sync::mpsc::channel::<Bytes>(256);
        let state = self.clone();
        tokio::spawn(async move {
            let mut receiver: broadcast::Receiver<Arc<Event>> = receiver;
            for line in initial {
                if sender.send(line).await.is_err() {
                    return;
                }
            }
            let deadline = tokio::time::Instant::now() + timeout;
            let mut ticker = tokio::time::interval_at(
                tokio::time::Instant::now() + BOOKMARK_INTERVAL,
                BOOKMARK_INTERVAL,
            );
            loop {
                tokio::select! {
                    event = receiver.recv() => match event {
                        Ok(event) => {
                            if event.resource != key
                                || namespace.as_ref().is_some_and(|ns| &event.key.0 != ns)
                                || event.resource_version <= last_rv
                            {
                                continue;
                            }
                            last_rv = event.resource_version;
                            if !filter.matches(&event.key, &event.object) {
                                continue;
                            }
                            let line = watch_line(event.event_type.as_str(), &object_json(&resource, &event.object));
                            if sender.send(line).await.is_err() {
                                return;
                            }
                        }
                        // A watcher that fell too far behind is closed; it re-watches.
                        Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                    },
                    _ = ticker.tick(), if bookmarks => {
                        let rv = state.store.resource_version();
                        if sender.send(bookmark_line(&resource, rv)).await.is_err() {
                            return;
                        }
                    }
                    _ = tokio::time::sleep_until(deadline) => {
                        if bookmarks {
                            let _ = sender.send(bookmark_line(&resource, state.store.resource_version())).await;
                        }
                        return;
                    }
                    _ = sender.closed() => return,
                }
            }
        });
        let stream = futures::stream::unfold(lines, |mut lines| async move {
            lines.recv().await.map(|line| (line, lines))
        });
        Ok(Reply::Stream(stream_body(stream)))
    }

    fn create(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        if target.subresource.is_some() {
            return Err(ApiError::MethodNotAllowed);
        }
        let mut object = decode_body(request)?;
        check_type(resource, &object)?;
        let namespace = self.place(target, &mut object)?;
        let name = object_name(&object);
        let name = match name {
            Some(name) => name,
            None => match object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
            {
                Some(prefix) if !prefix.is_empty() => {
                    let name = format!("{prefix}{}", random_suffix());
                    object["metadata"]["name"] = Value::String(name.clone());
                    name
                }
                _ => String::new(),
            },
        };
        let manager = field_manager(request);
        let mut write = Write::new(resource.clone(), (namespace, name), None, object, &manager);
        write.dry_run = is_dry_run(&request.query);
        write.strict = is_strict(&request.query);
        self.commit(write)
            .map(|(code, value)| Reply::Json(code, value))
    }

    fn update(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        let stored = self.stored(target)?;
        let mut object = decode_body(request)?;
        if target.subresource.as_deref() == Some("scale") {
            return self.write_scale(target, request, &stored, object);
        }
        check_type(resource, &object)?;
        self.place(target, &mut object)?;
        let name = target.name.clone().unwrap_or_default();
        if object_name(&object).as_deref() != Some(name.as_str()) {
            return Err(ApiError::BadRequest(
                "the name of the object does not match the name on the URL".into(),
            ));
        }
        check_resource_version(resource, &object, &stored)?;
        let write = Write::for_request(target, Some(stored), object, request);
        self.commit(write)
            .map(|(code, value)| Reply::Json(code, value))
    }

    fn patch(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        let content_type = request
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let name = target.name.clone().unwrap_or_default();
        if content_type == "application/apply-patch+yaml" {
            return self.apply(target, request);
        }
        let stored = self.stored(target)?;
        let live = stored.value();
        let patched_source = if target.subresource.as_deref() == Some("scale") {
            scale_of(&live)
        } else {
            live.clone()
        };
        let patched = match content_type.as_str() {
            "application/json-patch+json" => {
                let patch: json_patch::Patch =
                    serde_json::from_slice(&request.body).map_err(|e| {
                        ApiError::BadRequest(format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ))
                    })?;
                let mut doc = patched_source;
                json_patch::patch(&mut doc, &patch).map_err(|e| ApiError::Invalid {
                    kind: resource.kind.clone(),
                    name: name.clone(),
                    message: format!(
                        "the server rejected our request due to an error in our request: {e}"
                    ),
                    causes: vec![],
                })?;
                doc
            }
            "application/merge-patch+json" => {
                let patch: Value = parse_json(&request.body)?;
                let mut doc = patched_source;
                json_patch::merge(&mut doc, &patch);
                doc
            }
            "application/strategic-merge-patch+json" => {
                if resource.custom {
                    return Err(ApiError::UnsupportedMediaType);
                }
                let patch: Value = parse_json(&request.body)?;
                let schema = self.schema_of(resource);
                fields::strategic_merge_patch(&schema, &patched_source, &patch)
                    .map_err(|e| ApiError::BadRequest(e.to_string()))?
            }
            _ => return Err(ApiError::UnsupportedMediaType),
        };
        if target.subresource.as_deref() == Some("scale") {
            return self.write_scale(target, request, &stored, patched);
        }
        check_type(resource, &patched)?;
        // A patch that carries a resourceVersion is a precondition, as for an update.
        check_resource_version(resource, &patched, &stored)?;
        let write = Write::for_request(target, Some(stored), patched, request);
        self.commit(write)
            .map(|(code, value)| Reply::Json(code, value))
    }

    /// Server-side apply: merge the applied configuration into the live object (or
    /// create it), under the field manager's ownership.
    fn apply(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        let manager = request
            .query
            .get("fieldManager")
            .cloned()
            .unwrap_or_default();
        if manager.is_empty() {
            return Err(ApiError::Invalid {
                kind: "PatchOptions".into(),
                name: String::new(),
                message: "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into(),
                causes: vec![Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: is required for apply patch".into(),
                    field: "fieldManager".into(),
                }],
            });
        }
        let config: Value = serde_saphyr::from_slice(&request.body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?;
        if !config.is_object() {
            return Err(ApiError::BadRequest(
                "the apply configuration must be an object".into(),
            ));
        }
        check_type(resource, &config)?;
        let mut config = config;
        self.place(target, &mut config)?;
        if object_name(&config).as_deref() != target.name.as_deref() {
            return Err(ApiError::BadRequest(
                "the name of the object does not match the name on the URL".into(),
            ));
        }
        let stored = self.store.get(&resource.key(), &target.key());
        let live = stored.as_ref().map(|s| s.value());
        let schema = self.schema_of(resource);
        let now = now();
        let api_version = resource.api_version();
        let reset: &[&str] = match target.subresource.as_deref() {
            None if resource.has_status => &["status"],
            Some("status") => &["spec"],
            _ => &[],
        };
        let options = ApplyOptions {
            manager: &manager,
            force: request.query.get("force").is_some_and(|f| f == "true"),
            api_version: &api_version,
            now: &now,
            reset_fields: reset,
            subresource: target.subresource.as_deref().unwrap_or_default(),
        };
        let merged =
            fields::apply(&schema, live.as_ref(), &config, &options).map_err(|err| match &err {
                ApplyError::Conflicts(conflicts) => ApiError::ApplyConflict {
                    message: err.to_string(),
                    causes: conflicts
                        .iter()
                        .map(|c| Cause {
                            reason: "FieldManagerConflict".into(),
                            message: c.message(),
                            field: c.field.clone(),
                        })
                        .collect(),
                },
                other => ApiError::BadRequest(other.to_string()),
            })?;
        let mut write = Write::new(resource.clone(), target.key(), stored, merged, &manager);
        write.ownership_tracked = true;
        write.dry_run = is_dry_run(&request.query);
        write.strict = is_strict(&request.query);
        write.subresource = target.subresource.clone();
        self.commit(write)
            .map(|(code, value)| Reply::Json(code, value))
    }

    /// Writes through the scale subresource: only `spec.replicas` changes.
    fn write_scale(
        &self,
        target: &Target,
        request: &Request,
        stored: &Arc<Stored>,
        scale: Value,
    ) -> Result<Reply, ApiError> {
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .ok_or_else(|| ApiError::BadRequest("spec.replicas is required in a Scale".into()))?;
        let mut object = stored.value();
        object["spec"]["replicas"] = replicas.into();
        let mut write = Write::new(
            target.resource.clone(),
            target.key(),
            Some(stored.clone()),
            object,
            &field_manager(request),
        );
        write.dry_run = is_dry_run(&request.query);
        let (_, written) = self.commit(write)?;
        Ok(Reply::ok(scale_of(&written)))
    }

    fn delete(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let stored = self.stored(target)?;
        let options: Value = if request.body.is_empty() {
            json!({})
        } else {
            parse_json(&request.body)?
        };
        let policy = request
            .query
            .get("propagationPolicy")
            .cloned()
            .or_else(|| options["propagationPolicy"].as_str().map(str::to_string));
        let dry_run = is_dry_run(&request.query)
            || options["dryRun"].as_array().is_some_and(|d| !d.is_empty());
        if let Some(uid) = options
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
        {
            if uid != stored.uid {
                return Err(conflict(
                    &target.resource,
                    target.name.as_deref().unwrap_or_default(),
                ));
            }
        }
        self.delete_object(
            &target.resource,
            &target.key(),
            stored,
            policy.as_deref(),
            dry_run,
        )
        .map(|(code, value)| Reply::Json(code, value))
    }

    /// Deletes one object: at once, or by marking it with a deletionTimestamp while
    /// finalizers hold it.
    fn delete_object(
        &self,
        resource: &Arc<ResourceType>,
        key: &ObjectKey,
        stored: Arc<Stored>,
        policy: Option<&str>,
        dry_run: bool,
    ) -> Result<(StatusCode, Value), ApiError> {
        let mut object = stored.value();
        let already_deleting = object.pointer("/metadata/deletionTimestamp").is_some();
        let mut finalizers: Vec<String> = object
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if already_deleting {
            return Ok((StatusCode::OK, object));
        }
        match policy {
            Some("Foreground") => finalizers.push("foregroundDeletion".into()),
            Some("Orphan") => finalizers.push("orphan".into()),
            _ => {}
        }
        let is_namespace = resource.is("", "Namespace");
        if finalizers.is_empty() && !is_namespace {
            if !dry_run {
                self.store
                    .remove(&resource.key(), key, stored.resource_version)
                    .map_err(|_| conflict(resource, &key.1))?;
                self.after_delete(
                    resource,
                    &object,
                    Some("Background") == policy || policy.is_none(),
                );
            }
            return Ok((
                StatusCode::OK,
                status::deleted(&resource.plural, &key.1, &stored.uid),
            ));
        }
        let metadata = object["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::Internal("stored object without metadata".into()))?;
        metadata.insert("deletionTimestamp".into(), now().into());
        metadata.insert("deletionGracePeriodSeconds".into(), 0.into());
        // kube-apiserver's markAsDeleting bumps the generation of an object that
        // tracks one (recorded in the fixtures' delete/delete-with-propagation: 6 → 7).
        if let Some(generation) = metadata.get("generation").and_then(Value::as_i64) {
            if generation > 0 {
                metadata.insert("generation".into(), (generation + 1).into());
            }
        }
        if !finalizers.is_empty() {
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        if is_namespace {
            object["status"]["phase"] = "Terminating".into();
        }
        if dry_run {
            return Ok((StatusCode::OK, object));
        }
        let mut marked = object.clone();
        self.store
            .put(
                &resource.key(),
                key,
                Some(stored.resource_version),
                &mut marked,
            )
            .map_err(|_| conflict(resource, &key.1))?;
        // What the garbage collector and the namespace controller do next, at once: the
        // sandbox has no dependents waiting on foreground deletion beyond those it
        // deletes here, and a namespace's content goes with it.
        if is_namespace {
            self.finish_namespace(&key.1);
        } else {
            self.finish_gc_finalizers(resource, key, &marked);
        }
        Ok((StatusCode::OK, marked))
    }

    /// After an object is gone: cascade to its dependents, and stop serving a CRD's
    /// resources when the CRD goes.
    fn after_delete(&self, resource: &Arc<ResourceType>, object: &Value, cascade: bool) {
        self.defaulter.release(object, None);
        let uid = object
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if cascade && !uid.is_empty() {
            for (dep_resource, dep_key) in self.store.dependents(uid) {
                let dep_type = self
                    .registry()
                    .all_types()
                    .into_iter()
                    .find(|t| t.key() == dep_resource);
                let (Some(dep_type), Some(dep)) =
                    (dep_type, self.store.get(&dep_resource, &dep_key))
                else {
                    continue;
                };
                let _ = self.delete_object(&dep_type, &dep_key, dep, Some("Background"), false);
            }
        }
        if resource.is("apiextensions.k8s.io", "CustomResourceDefinition") {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if let Some(removed) = self.registry_mut().remove_custom(name) {
                if let Some(first) = removed.types.first() {
                    self.store.drop_resource(&first.key());
                }
            }
        }
    }

    /// Completes `foregroundDeletion` and `orphan`: deletes (or orphans) dependents, then
    /// removes the finalizer, which deletes the object when no other finalizer holds it.
    fn finish_gc_finalizers(&self, resource: &Arc<ResourceType>, key: &ObjectKey, object: &Value) {
        let finalizers: Vec<String> = object
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if !finalizers
            .iter()
            .any(|f| f == "foregroundDeletion" || f == "orphan")
        {
            return;
        }
        if finalizers.iter().any(|f| f == "foregroundDeletion") {
            self.after_delete(resource, object, true);
        }
        let remaining: Vec<&String> = finalizers
            .iter()
            .filter(|f| *f != "foregroundDeletion" && *f != "orphan")
            .collect();
        let Some(stored) = self.store.get(&resource.key(), key) else {
            return;
        };
        if remaining.is_empty() {
            if self
                .store
                .remove(&resource.key(), key, stored.resource_version)
                .is_ok()
            {
                self.after_delete(resource, object, false);
            }
        } else {
            let mut object = stored.value();
            object["metadata"]["finalizers"] = json!(remaining);
            let _ = self.store.put(
                &resource.key(),
                key,
                Some(stored.resource_version),
                &mut object,
            );
        }
    }

    /// What the namespace controller does: delete everything in the namespace, then the
    /// namespace itself.
    fn finish_namespace(&self, namespace: &str) {
        let types = self.registry().all_types();
        for (resource, key) in self.store.keys_in_namespace(namespace) {
            let Some(resource_type) = types.iter().find(|t| t.key() == resource) else {
                continue;
            };
            if let Some(stored) = self.store.get(&resource, &key) {
                let _ = self.delete_object(resource_type, &key, stored, Some("Background"), false);
                // Objects held by their own finalizers stay until those are removed, as in
                // a real cluster; the namespace goes regardless.
            }
        }
        let Some(namespaces) = types.iter().find(|t| t.is("", "Namespace")).cloned() else {
            return;
        };
        let key = (String::new(), namespace.to_string());
        if let Some(stored) = self.store.get(&namespaces.key(), &key) {
            let _ = self
                .store
                .remove(&namespaces.key(), &key, stored.resource_version);
        }
    }

    fn delete_collection(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(&request.query)?;
        let dry_run = is_dry_run(&request.query);
        let (rv, items) = self
            .store
            .list(&target.resource.key(), target.namespace.as_deref());
        let mut deleted = Vec::new();
        for (key, stored) in items.into_iter().filter(|(k, s)| filter.matches(k, s)) {
            let value = stored.value();
            self.delete_object(&target.resource, &key, stored, None, dry_run)?;
            deleted.push(value);
        }
        Ok(Reply::ok(json!({
            "kind": target.resource.list_kind(),
            "apiVersion": target.resource.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": deleted,
        })))
    }

    /// Sets the object's namespace from the URL; refuses a different one in the body,
    /// and a namespace that does not exist.
    fn place(&self, target: &Target, object: &mut Value) -> Result<String, ApiError> {
        let resource = &target.resource;
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        let metadata = object["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::BadRequest("metadata must be an object".into()))?;
        if !resource.namespaced {
            metadata.remove("namespace");
            return Ok(String::new());
        }
        let namespace = target.namespace.clone().unwrap_or_default();
        match metadata.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            _ => {
                metadata.insert("namespace".into(), namespace.clone().into());
            }
        }
        Ok(namespace)
    }

    fn require_namespace(&self, resource: &ResourceType, namespace: &str) -> Result<(), ApiError> {
        if !resource.namespaced {
            return Ok(());
        }
        let key = super::store::ResourceKey {
            group: String::new(),
            resource: "namespaces".into(),
        };
        match self
            .store
            .get(&key, &(String::new(), namespace.to_string()))
        {
            None => Err(ApiError::not_found("namespaces", namespace)),
            Some(ns) if ns.value().pointer("/metadata/deletionTimestamp").is_some() => {
                Err(ApiError::Forbidden(format!(
                    "{} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                    resource.plural
                )))
            }
            Some(_) => Ok(()),
        }
    }

    fn schema_of(&self, resource: &ResourceType) -> Schema {
        if resource.custom {
            let registry = self.registry();
            return registry
                .custom_schema(&resource.group, &resource.version, &resource.kind)
                .map(Schema::from_openapi_v3)
                .unwrap_or_else(Schema::untyped);
        }
        Schemas::builtin()
            .get(&resource.group, &resource.version, &resource.kind)
            .unwrap_or_else(Schema::untyped)
    }

    /// The write pipeline shared by create, update, patch and apply.
    fn commit(&self, write: Write) -> Result<(StatusCode, Value), ApiError> {
        let Write {
            resource,
            key,
            old,
            mut new,
            manager,
            ownership_tracked,
            dry_run,
            strict,
            subresource,
        } = write;
        let (namespace, name) = &key;
        let old_value = old.as_ref().map(|s| s.value());
        let schema = self.schema_of(&resource);

        if old.is_none() {
            self.require_namespace(&resource, namespace)?;
        }
        set_type(&resource, &mut new);
        let metadata = new["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::BadRequest("metadata must be an object".into()))?;
        metadata.remove("resourceVersion");
        match &old_value {
            Some(old) => {
                // Server-owned metadata is the server's, whatever the request says.
                for field in [
                    "uid",
                    "creationTimestamp",
                    "generation",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                ] {
                    match old["metadata"].get(field) {
                        Some(value) => metadata.insert(field.into(), value.clone()),
                        None => metadata.remove(field),
                    };
                }
            }
            None => {
                metadata.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
                metadata.insert("creationTimestamp".into(), now().into());
                for field in [
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    metadata.remove(field);
                }
            }
        }

        // Status and spec each have their own endpoint where a status subresource exists.
        if resource.has_status {
            match (subresource.as_deref(), &old_value) {
                (Some("status"), Some(old)) => {
                    let status = new.get("status").cloned();
                    let mut kept = old.clone();
                    match status {
                        Some(status) => kept["status"] = status,
                        None => {
                            if let Some(o) = kept.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                    kept["metadata"]["managedFields"] = new["metadata"]
                        .get("managedFields")
                        .cloned()
                        .unwrap_or(Value::Null);
                    new = kept;
                }
                (_, Some(old)) => match old.get("status") {
                    Some(status) => new["status"] = status.clone(),
                    None => {
                        if let Some(o) = new.as_object_mut() {
                            o.remove("status");
                        }
                    }
                },
                (_, None) => match defaults::initial_status(&resource.group, &resource.kind) {
                    Some(status) => new["status"] = status,
                    None => {
                        if let Some(o) = new.as_object_mut() {
                            o.remove("status");
                        }
                    }
                },
            }
        }

        if resource.custom {
            let registry = self.registry();
            if let Some(schema) =
                registry.custom_schema(&resource.group, &resource.version, &resource.kind)
            {
                // Structural pruning, then defaulting, as kube-apiserver does.
                defaults::prune_custom_resource(schema, &mut new);
                defaults::default_custom_resource(schema, &mut new);
            }
        } else {
            self.defaulter.default_object(
                &resource.group,
                &resource.kind,
                &mut new,
                old_value.as_ref(),
            );
        }

        let mut errors =
            validate::validate(&resource.group, &resource.kind, &new, resource.namespaced);
        if let Some(old) = &old_value {
            errors.extend(validate::validate_update(
                &resource.group,
                &resource.kind,
                old,
                &new,
            ));
        }
        let checked = schema.validate(&new);
        errors.extend(checked.type_errors.iter().map(|e| validate::FieldError {
            field: e.field.clone(),
            reason: validate::FieldErrorReason::Invalid,
            message: e.message(),
        }));
        if !errors.is_empty() {
            self.defaulter.release(&new, old_value.as_ref());
            let kind = validate::qualified_kind(&resource.group, &resource.kind);
            return Err(ApiError::Invalid {
                message: validate::invalid_message(&kind, name, &errors),
                kind: resource.kind.clone(),
                name: name.clone(),
                causes: errors.iter().map(cause).collect(),
            });
        }
        if strict && !checked.unknown_fields.is_empty() {
            self.defaulter.release(&new, old_value.as_ref());
            let fields: Vec<String> = checked.unknown_fields.iter().map(|f| f.message()).collect();
            return Err(ApiError::BadRequest(format!(
                "strict decoding error: {}",
                fields.join(", ")
            )));
        }

        if !ownership_tracked {
            let reset: &[&str] = match subresource.as_deref() {
                None if resource.has_status => &["status"],
                _ => &[],
            };
            let options = UpdateOptions {
                manager: &manager,
                api_version: &resource.api_version(),
                now: &now(),
                reset_fields: reset,
                subresource: subresource.as_deref().unwrap_or_default(),
            };
            fields::record_update(&schema, old_value.as_ref(), &mut new, &options);
        }

        if defaults::tracks_generation(&resource.group, &resource.kind, resource.custom) {
            let generation = match &old_value {
                None => 1,
                Some(old) => {
                    let before = old["metadata"]["generation"].as_i64().unwrap_or(1);
                    if spec_changed(old, &new) {
                        before + 1
                    } else {
                        before
                    }
                }
            };
            new["metadata"]["generation"] = generation.into();
        }
        order_object(&mut new);

        let Some(old) = old else {
            if dry_run {
                self.defaulter.release(&new, None);
                return Ok((StatusCode::CREATED, new));
            }
            let stored = self
                .store
                .put(&resource.key(), &key, None, &mut new)
                .map_err(|_| {
                    self.defaulter.release(&new, None);
                    ApiError::AlreadyExists {
                        plural: resource.plural.clone(),
                        name: name.clone(),
                    }
                })?;
            self.after_write(&resource, &key, &stored);
            return Ok((StatusCode::CREATED, new));
        };
        let old_value = old_value.unwrap_or(Value::Null);
        // Writing what is already there changes nothing, not even the resourceVersion.
        if same_ignoring_timestamps(&old_value, &new) {
            return Ok((StatusCode::OK, old_value));
        }
        new["metadata"]["resourceVersion"] = old.resource_version.to_string().into();
        if dry_run {
            self.defaulter.release(&new, Some(&old_value));
            return Ok((StatusCode::OK, new));
        }
        // An object being deleted goes once its last finalizer is removed.
        let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
        let no_finalizers = new
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|f| f.is_empty());
        if deleting && no_finalizers {
            if let Some(metadata) = new["metadata"].as_object_mut() {
                metadata.remove("finalizers");
            }
            self.store
                .remove(&resource.key(), &key, old.resource_version)
                .map_err(|_| conflict(&resource, name))?;
            self.after_delete(&resource, &new, true);
            return Ok((StatusCode::OK, new));
        }
        let stored = self
            .store
            .put(&resource.key(), &key, Some(old.resource_version), &mut new)
            .map_err(|err| {
                self.defaulter.release(&new, Some(&old_value));
                match err {
                    PutError::Gone => ApiError::not_found(&resource.plural, name),
                    _ => conflict(&resource, name),
                }
            })?;
        // Addresses and ports the old object held and the new one does not are free.
        self.defaulter.release(&old_value, Some(&new));
        self.after_write(&resource, &key, &stored);
        Ok((StatusCode::OK, new))
    }

    /// Writes an object's status as a controller does, through the status subresource.
    /// `compute` sees the current object and returns the status it should have, or
    /// None to leave it alone; nothing is written when the status is already right.
    pub fn update_status(
        &self,
        resource: &Arc<ResourceType>,
        key: &ObjectKey,
        manager: &str,
        compute: impl FnOnce(&Value) -> Option<Value>,
    ) -> Result<(), ApiError> {
        let Some(stored) = self.store.get(&resource.key(), key) else {
            return Ok(());
        };
        let mut object = stored.value();
        let Some(status) = compute(&object) else {
            return Ok(());
        };
        if object.get("status") == Some(&status) {
            return Ok(());
        }
        object["status"] = status;
        let mut write = Write::new(resource.clone(), key.clone(), Some(stored), object, manager);
        write.subresource = Some("status".into());
        self.commit(write).map(|_| ())
    }

    /// What controllers that are part of the API server do right after a write: a CRD
    /// becomes Established and its resources are served.
    fn after_write(&self, resource: &ResourceType, key: &ObjectKey, stored: &Arc<Stored>) {
        if !resource.is("apiextensions.k8s.io", "CustomResourceDefinition") {
            return;
        }
        let mut crd = stored.value();
        let Some(custom) = registry::custom_resource_of(&crd) else {
            return;
        };
        self.registry_mut().add_custom(&key.1, custom);
        let established = crd
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
        if established {
            return;
        }
        crd["status"] = defaults::crd_established_status(&crd, &now());
        let _ = self.store.put(
            &resource.key(),
            key,
            Some(stored.resource_version),
            &mut crd,
        );
    }
}

/// One write on its way through the pipeline.
struct Write {
    resource: Arc<ResourceType>,
    key: ObjectKey,
    old: Option<Arc<Stored>>,
    new: Value,
    manager: String,
    /// Server-side apply already recorded the manager's fields.
    ownership_tracked: bool,
    dry_run: bool,
    strict: bool,
    subresource: Option<String>,
}

impl Write {
    /// A write of `new` over `old` at the target, with the request's field manager,
    /// dry run and field validation.
    fn for_request(
        target: &Target,
        old: Option<Arc<Stored>>,
        new: Value,
        request: &Request,
    ) -> Write {
        let mut write = Write::new(
            target.resource.clone(),
            target.key(),
            old,
            new,
            &field_manager(request),
        );
        write.dry_run = is_dry_run(&request.query);
        write.strict = is_strict(&request.query);
        write.subresource = target.subresource.clone();
        write
    }

    fn new(
        resource: Arc<ResourceType>,
        key: ObjectKey,
        old: Option<Arc<Stored>>,
        new: Value,
        manager: &str,
    ) -> Write {
        Write {
            resource,
            key,
            old,
            new,
            manager: manager.to_string(),
            ownership_tracked: false,
            dry_run: false,
            strict: false,
            subresource: None,
        }
    }
}

/// Label and field selectors of a list or watch.
struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn from_query(query: &HashMap<String, String>) -> Result<Filter, ApiError> {
        let labels = LabelSelector::parse(
            query
                .get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )
        .map_err(ApiError::BadRequest)?;
        let fields = FieldSelector::parse(
            query
                .get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )
        .map_err(ApiError::BadRequest)?;
        Ok(Filter { labels, fields })
    }

    fn matches(&self, key: &ObjectKey, stored: &Stored) -> bool {
        self.fields.matches(&key.0, &key.1) && self.labels.matches(&stored.labels)
    }
}

const VERSION: &str = include_str!("../../assets/discovery/version.json");

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn random_suffix() -> String {
    // kube-apiserver's generateName suffix: 5 characters, no vowels.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    use rand::Rng as _;
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// A validation error as a `Status` cause.
fn cause(error: &validate::FieldError) -> Cause {
    Cause {
        reason: error.reason.as_str().to_string(),
        message: error.message.clone(),
        field: error.field.clone(),
    }
}

fn conflict(resource: &ResourceType, name: &str) -> ApiError {
    ApiError::Conflict {
        plural: resource.plural.clone(),
        name: name.to_string(),
        reason: "the object has been modified; please apply your changes to the latest version and try again".into(),
    }
}

/// An object that names a resourceVersion may only replace that version.
fn check_resource_version(
    resource: &ResourceType,
    object: &Value,
    stored: &Stored,
) -> Result<(), ApiError> {
    match object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(rv) if rv != stored.resource_version.to_string() => Err(conflict(
            resource,
            object_name(object).as_deref().unwrap_or_default(),
        )),
        _ => Ok(()),
    }
}

fn is_dry_run(query: &HashMap<String, String>) -> bool {
    query.get("dryRun").is_some_and(|d| d == "All")
}

fn is_strict(query: &HashMap<String, String>) -> bool {
    query.get("fieldValidation").is_some_and(|v| v == "Strict")
}

/// The field manager of a non-apply write: the `fieldManager` parameter, or the user
/// agent up to its first `/`, as kube-apiserver derives it.
fn field_manager(request: &Request) -> String {
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

fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })
}

/// Decodes a create or update body: JSON, or YAML when the client sends YAML.
fn decode_body(request: &Request) -> Result<Value, ApiError> {
    let content_type = request
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if content_type.contains("protobuf") || content_type.contains("cbor") {
        // The sandbox speaks JSON and YAML only; clients fall back to JSON on 415.
        return Err(ApiError::UnsupportedMediaType);
    }
    let value: Value = if content_type.contains("yaml") {
        serde_saphyr::from_slice(&request.body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?
    } else {
        parse_json(&request.body)?
    };
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "the request body must be an object".into(),
        ));
    }
    Ok(value)
}

/// Refuses an object of another kind or group version than the URL names, with the
/// message kube-apiserver gives.
fn check_type(resource: &ResourceType, object: &Value) -> Result<(), ApiError> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind.is_empty() || api_version.is_empty() {
        // kubectl always sends both; the real server also fills in what the URL implies.
        return Ok(());
    }
    let wanted = resource.api_version();
    if kind != resource.kind || api_version != wanted {
        let internal_group = if resource.group.is_empty() {
            "core"
        } else {
            resource.group.split('.').next().unwrap_or_default()
        };
        return Err(ApiError::BadRequest(format!(
            "{kind} in version \"{}\" cannot be handled as a {}: converting ({}.{kind}) to ({internal_group}.{}): unknown conversion",
            api_version.rsplit('/').next().unwrap_or_default(),
            resource.kind,
            api_version.rsplit('/').next().unwrap_or_default(),
            resource.kind,
        )));
    }
    Ok(())
}

fn object_name(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

fn set_type(resource: &ResourceType, object: &mut Value) {
    object["kind"] = resource.kind.clone().into();
    object["apiVersion"] = resource.api_version().into();
}

/// Orders keys as kube-apiserver writes them: kind, apiVersion, metadata, then the rest.
fn order_object(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let mut ordered = Map::with_capacity(map.len());
    for key in ["kind", "apiVersion", "metadata"] {
        if let Some(value) = map.remove(key) {
            ordered.insert(key.into(), value);
        }
    }
    ordered.extend(std::mem::take(map));
    *map = ordered;
}

/// Whether anything outside metadata and status changed: what bumps `generation`.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return true;
    };
    let relevant = |map: &Map<String, Value>| -> Vec<(String, Value)> {
        map.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status" | "kind" | "apiVersion"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut a = relevant(old);
    let mut b = relevant(new);
    a.sort_by(|x, y| x.0.cmp(&y.0));
    b.sort_by(|x, y| x.0.cmp(&y.0));
    a != b
}

/// Equal but for managedFields timestamps and resourceVersion: such a write is a no-op.
fn same_ignoring_timestamps(old: &Value, new: &Value) -> bool {
    let strip = |value: &Value| {
        let mut value = value.clone();
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
            if let Some(entries) = metadata
                .get_mut("managedFields")
                .and_then(Value::as_array_mut)
            {
                for entry in entries {
                    if let Some(entry) = entry.as_object_mut() {
                        entry.remove("time");
                    }
                }
            }
        }
        value
    };
    strip(old) == strip(new)
}

/// The `Scale` of a Deployment, StatefulSet or ReplicaSet.
fn scale_of(object: &Value) -> Value {
    let selector = object
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let metadata = &object["metadata"];
    let mut scale_metadata = Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = metadata.get(field) {
            scale_metadata.insert(field.into(), value.clone());
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_metadata,
        "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

/// The object as served in the requested version (a CRD's versions share storage and
/// differ only in apiVersion: conversion strategy `None`).
fn object_json(resource: &ResourceType, stored: &Stored) -> Bytes {
    let api_version = resource.api_version();
    let prefix = format!(
        "{{\"kind\":{},\"apiVersion\":{}",
        Value::from(resource.kind.as_str()),
        Value::from(api_version.as_str())
    );
    if stored.json.starts_with(prefix.as_bytes()) {
        return stored.json.clone();
    }
    let mut value = stored.value();
    value["apiVersion"] = api_version.into();
    order_object(&mut value);
    Bytes::from(serde_json::to_vec(&value).unwrap_or_default())
}

/// A list item: built-in kinds' items carry no kind and apiVersion in kube-apiserver's
/// JSON lists; custom resources' items do.
fn list_item_json(resource: &ResourceType, stored: &Stored) -> Bytes {
    let json = object_json(resource, stored);
    if resource.custom {
        return json;
    }
    let prefix = format!(
        "{{\"kind\":{},\"apiVersion\":{},",
        Value::from(resource.kind.as_str()),
        Value::from(resource.api_version())
    );
    if json.starts_with(prefix.as_bytes()) {
        let mut item = Vec::with_capacity(json.len() - prefix.len() + 1);
        item.push(b'{');
        item.extend_from_slice(&json[prefix.len()..]);
        return Bytes::from(item);
    }
    json
}

fn watch_line(event_type: &str, object: &Bytes) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(event_type.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

fn bookmark_line(resource: &ResourceType, rv: u64) -> Bytes {
    let object = json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": {"resourceVersion": rv.to_string()}});
    watch_line(
        "BOOKMARK",
        &Bytes::from(serde_json::to_vec(&object).unwrap_or_default()),
    )
}

fn stream_body<S>(stream: S) -> Body
where
    S: futures::Stream<Item = Bytes> + Send + Sync + 'static,
{
    BodyExt::boxed(StreamBody::new(
        stream.map(|line| Ok::<_, Infallible>(Frame::data(line))),
    ))
}

pub fn full_body(bytes: Bytes) -> Body {
    BodyExt::boxed(Full::new(bytes))
}

fn encode_continue(key: &ObjectKey, resource_version: u64) -> String {
    let token = json!({"v": CONTINUE_VERSION, "rv": resource_version, "ns": key.0, "name": key.1});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// The last key of the previous page and the resourceVersion of the first.
fn decode_continue(token: &str) -> Result<(ObjectKey, u64), ApiError> {
    let invalid = || ApiError::BadRequest(format!("continue key is not valid: {token}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if value["v"] != CONTINUE_VERSION {
        return Err(invalid());
    }
    let key = (
        value["ns"].as_str().ok_or_else(invalid)?.to_string(),
        value["name"].as_str().ok_or_else(invalid)?.to_string(),
    );
    Ok((key, value["rv"].as_u64().ok_or_else(invalid)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_name_verbs_and_resources() {
        let q = HashMap::new();
        let watch: HashMap<String, String> = [("watch".to_string(), "1".to_string())].into();
        assert_eq!(
            verb_of(&Method::GET, "/api/v1/namespaces/a/configmaps/x", &q),
            "get"
        );
        assert_eq!(
            verb_of(&Method::GET, "/api/v1/namespaces/a/configmaps", &q),
            "list"
        );
        assert_eq!(
            verb_of(&Method::GET, "/apis/apps/v1/deployments", &watch),
            "watch"
        );
        assert_eq!(verb_of(&Method::GET, "/api/v1/namespaces/a", &q), "get");
        assert_eq!(
            verb_of(&Method::DELETE, "/api/v1/namespaces/a/configmaps", &q),
            "deletecollection"
        );
        assert_eq!(
            verb_of(
                &Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/web/scale",
                &q
            ),
            "patch"
        );
        assert_eq!(
            resource_of("/apis/apps/v1/namespaces/a/deployments/web"),
            "apps/deployments"
        );
        assert_eq!(resource_of("/api/v1/namespaces/a"), "namespaces");
        assert_eq!(resource_of("/api/v1/namespaces/a/configmaps"), "configmaps");
        assert_eq!(resource_of("/apis/apps/v1"), "discovery");
    }

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let key = ("ns".to_string(), "name".to_string());
        assert_eq!(
            decode_continue(&encode_continue(&key, 42)).unwrap(),
            (key, 42)
        );
        assert!(decode_continue("not-a-token").is_err());
    }

    #[test]
    fn generation_ignores_metadata_and_status() {
        let old = json!({"metadata": {"labels": {}}, "spec": {"replicas": 1}, "status": {}});
        let relabelled = json!({"metadata": {"labels": {"x": "y"}}, "spec": {"replicas": 1}, "status": {"ready": 1}});
        let scaled = json!({"metadata": {}, "spec": {"replicas": 2}});
        assert!(!spec_changed(&old, &relabelled));
        assert!(spec_changed(&old, &scaled));
    }

    #[test]
    fn kind_mismatch_reads_like_the_real_server() {
        let registry = Registry::builtin();
        let configmaps = registry.find("", "v1", "configmaps").unwrap();
        let err =
            check_type(&configmaps, &json!({"apiVersion": "v1", "kind": "Secret"})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"
        );
    }
}
