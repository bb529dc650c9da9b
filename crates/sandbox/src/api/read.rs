//! Reads: get, list (with pages) and watch (with bookmarks), and the JSON the
//! server writes for each.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt as _;
use http::StatusCode;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::commit::order_object;
use super::scale::scale_of;
use super::{Body, Reply, State, Target};
use crate::conversion;
use crate::protobuf::{self, Format};
use crate::registry::{self, ResourceType};
use crate::selector::{FieldSelector, LabelSelector, extra_fields};
use crate::status::ApiError;
use crate::store::{Encoded, Event, ObjectKey, Stored, WatchStart};

/// How often a watch with `allowWatchBookmarks` gets a BOOKMARK. kube-apiserver sends
/// them about once a minute; it also sends one just before a watch times out.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

/// The longest a watch stays open when the client gives no `timeoutSeconds`
/// (kube-apiserver picks a random time between 30 and 60 minutes).
const MAX_WATCH: Duration = Duration::from_secs(30 * 60);

/// Marks continue tokens as the sandbox's own.
const CONTINUE_VERSION: &str = "tether-sandbox/v1";

impl State {
    pub(super) fn get(&self, target: &Target, format: Format) -> Result<Reply, ApiError> {
        let stored = self.stored(target)?;
        if target.subresource.as_deref() == Some("scale") {
            return Ok(Reply::ok(scale_of(&stored.value())));
        }
        if let Some(encoded) = protobuf_message(&target.resource, &stored, format) {
            return Ok(Reply::Raw(
                StatusCode::OK,
                encoded.enveloped.clone(),
                protobuf::MEDIA_TYPE,
            ));
        }
        Ok(Reply::Raw(
            StatusCode::OK,
            object_json(&target.resource, &stored),
            "application/json",
        ))
    }

    pub(super) fn list(
        &self,
        target: &Target,
        query: &HashMap<String, String>,
        format: Format,
    ) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(&target.resource, query)?;
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
        if format == Format::Protobuf && !target.resource.custom {
            let page: Vec<&(ObjectKey, Arc<Stored>)> = match limit {
                Some(limit) => selected.by_ref().take(limit).collect(),
                None => selected.by_ref().collect(),
            };
            let remaining = selected.count();
            let raws: Option<Vec<&[u8]>> = page
                .iter()
                .map(|(_, stored)| {
                    protobuf_message(&target.resource, stored, format).map(Encoded::message)
                })
                .collect();
            // An item without a protobuf form answers the whole list in JSON, below.
            if let Some(raws) = raws {
                let last = page.last().map(|(key, _)| key);
                let metadata = list_metadata(rv, last.filter(|_| remaining > 0), remaining);
                let resource = &target.resource;
                if let Ok(bytes) = protobuf::encode_list(
                    &resource.api_version(),
                    &resource.list_kind(),
                    &Value::Object(metadata),
                    raws,
                ) {
                    return Ok(Reply::Raw(
                        StatusCode::OK,
                        Bytes::from(bytes),
                        protobuf::MEDIA_TYPE,
                    ));
                }
            }
            return self.list(target, query, Format::Json);
        }
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
        let metadata = list_metadata(rv, last_key.as_ref().filter(|_| remaining > 0), remaining);
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

    pub(super) fn watch(
        self: &Arc<Self>,
        target: &Target,
        query: &HashMap<String, String>,
        format: Format,
    ) -> Result<Reply, ApiError> {
        let format = match target.resource.custom {
            true => Format::Json,
            false => format,
        };
        let filter = Filter::from_query(&target.resource, query)?;
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
                    .map(|(_, stored)| watch_event(format, &resource, "ADDED", stored))
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
                        let line = in_format(
                            format,
                            watch_line(
                                "ERROR",
                                &Bytes::from(
                                    serde_json::to_vec(&gone.status()).unwrap_or_default(),
                                ),
                            ),
                        );
                        return Ok(Reply::Stream(
                            stream_body(futures::stream::iter([line])),
                            format,
                        ));
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
                                watch_event(format, &resource, e.event_type.as_str(), &e.object)
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
            let mut open = OpenWatch::new(state.clone(), timeout);
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
                            let line = watch_event(format, &resource, event.event_type.as_str(), &event.object);
                            if sender.send(line).await.is_err() {
                                return;
                            }
                        }
                        // A watcher that fell too far behind is closed; it re-watches.
                        Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                    },
                    _ = ticker.tick(), if bookmarks => {
                        let rv = state.store.resource_version();
                        if sender.send(in_format(format, bookmark_line(&resource, rv))).await.is_err() {
                            return;
                        }
                    }
                    _ = tokio::time::sleep_until(deadline) => {
                        open.timed_out = true;
                        if bookmarks {
                            let bookmark = bookmark_line(&resource, state.store.resource_version());
                            let _ = sender.send(in_format(format, bookmark)).await;
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
        Ok(Reply::Stream(stream_body(stream), format))
    }
}

/// One watch event in the stream's format: a JSON line, or a protobuf frame made from
/// the store's encoding of the object.
fn watch_event(
    format: Format,
    resource: &ResourceType,
    event_type: &str,
    stored: &Stored,
) -> Bytes {
    if let Some(encoded) = protobuf_message(resource, stored, format) {
        if let Ok(frame) = protobuf::watch_frame_of(event_type, &encoded.enveloped) {
            return Bytes::from(frame);
        }
    }
    in_format(
        format,
        watch_line(event_type, &object_json(resource, stored)),
    )
}

/// A JSON watch line as the stream's format wants it.
fn in_format(format: Format, line: Bytes) -> Bytes {
    match format {
        Format::Json => line,
        Format::Protobuf => protobuf::negotiate::watch_frame_of_line(&line),
    }
}

/// A list's `metadata`: its resourceVersion, and where the next page starts when a
/// limit left items out.
fn list_metadata(rv: u64, last: Option<&ObjectKey>, remaining: usize) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), rv.to_string().into());
    if let Some(last) = last {
        metadata.insert("continue".into(), encode_continue(last, rv).into());
        metadata.insert("remainingItemCount".into(), remaining.into());
    }
    metadata
}

/// The stored protobuf encoding of an object, when the answer is protobuf and the
/// object is served as stored (a built-in kind in its stored version).
fn protobuf_message<'a>(
    resource: &ResourceType,
    stored: &'a Stored,
    format: Format,
) -> Option<&'a Encoded> {
    if format != Format::Protobuf || resource.custom || !served_as_stored(resource, stored) {
        return None;
    }
    stored.protobuf()
}

/// Whether the stored JSON is the object as served in `resource`'s version: it starts
/// `{"kind":"<kind>","apiVersion":"<group>/<version>"` (kinds, groups and versions
/// are plain names, never escaped in JSON). Compared piece by piece: this runs for
/// every object of every read.
fn served_as_stored(resource: &ResourceType, stored: &Stored) -> bool {
    let group: &[&[u8]] = match resource.group.is_empty() {
        true => &[],
        false => &[resource.group.as_bytes(), b"/"],
    };
    let head: [&[u8]; 3] = [
        b"{\"kind\":\"",
        resource.kind.as_bytes(),
        b"\",\"apiVersion\":\"",
    ];
    let tail: [&[u8]; 2] = [resource.version.as_bytes(), b"\""];
    let mut rest = &stored.json[..];
    for part in head.iter().chain(group).chain(tail.iter()) {
        match rest.strip_prefix(*part) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    true
}

/// A watch as the counters see it: open until dropped, however its task ends.
struct OpenWatch {
    state: Arc<State>,
    timeout: Duration,
    timed_out: bool,
}

impl OpenWatch {
    fn new(state: Arc<State>, timeout: Duration) -> OpenWatch {
        state.counters.watch_opened(timeout);
        OpenWatch {
            state,
            timeout,
            timed_out: false,
        }
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.state
            .counters
            .watch_closed(self.timeout, self.timed_out);
    }
}

/// Label and field selectors of a list or watch.
pub(super) struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    pub(super) fn from_query(
        resource: &ResourceType,
        query: &HashMap<String, String>,
    ) -> Result<Filter, ApiError> {
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
            // Selected on the stored object: events.k8s.io Events by core's fields.
            extra_fields(
                registry::storage_group(&resource.group, &resource.plural),
                &resource.plural,
            ),
        )
        .map_err(ApiError::BadRequest)?;
        Ok(Filter { labels, fields })
    }

    pub(super) fn matches(&self, key: &ObjectKey, stored: &Stored) -> bool {
        if !self.labels.matches(&stored.labels) {
            return false;
        }
        let object = self.fields.needs_object().then(|| stored.value());
        self.fields.matches(&key.0, &key.1, object.as_ref())
    }
}

/// The object as served in the requested version (a CRD's versions share storage and
/// differ only in apiVersion: conversion strategy `None`; a built-in kind stored in
/// another version is converted).
pub(super) fn object_json(resource: &ResourceType, stored: &Stored) -> Bytes {
    if served_as_stored(resource, stored) {
        return stored.json.clone();
    }
    let mut value = stored.value();
    if !conversion::served_as_stored(resource) {
        value = conversion::to_served(resource, value);
    }
    value["apiVersion"] = resource.api_version().into();
    order_object(&mut value);
    Bytes::from(serde_json::to_vec(&value).unwrap_or_default())
}

/// A list item: built-in kinds' items carry no kind and apiVersion in kube-apiserver's
/// JSON lists; custom resources' items do.
pub(super) fn list_item_json(resource: &ResourceType, stored: &Stored) -> Bytes {
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

pub(super) fn watch_line(event_type: &str, object: &Bytes) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(event_type.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

pub(super) fn bookmark_line(resource: &ResourceType, rv: u64) -> Bytes {
    let object = json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": {"resourceVersion": rv.to_string()}});
    watch_line(
        "BOOKMARK",
        &Bytes::from(serde_json::to_vec(&object).unwrap_or_default()),
    )
}

pub(super) fn stream_body<S>(stream: S) -> Body
where
    S: futures::Stream<Item = Bytes> + Send + Sync + 'static,
{
    BodyExt::boxed(StreamBody::new(
        stream.map(|line| Ok::<_, Infallible>(Frame::data(line))),
    ))
}

pub(crate) fn full_body(bytes: Bytes) -> Body {
    BodyExt::boxed(Full::new(bytes))
}

pub(super) fn encode_continue(key: &ObjectKey, resource_version: u64) -> String {
    let token = json!({"v": CONTINUE_VERSION, "rv": resource_version, "ns": key.0, "name": key.1});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// The last key of the previous page and the resourceVersion of the first.
pub(super) fn decode_continue(token: &str) -> Result<(ObjectKey, u64), ApiError> {
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
