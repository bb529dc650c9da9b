//! The sandbox's storage: every object as compact JSON, one global resourceVersion
//! counter, and a bounded history of changes that watches replay, like etcd behind a
//! real API server.
//!
//! Objects are kept serialised (`Bytes`) rather than as `serde_json::Value` trees: a
//! list or a watch event is then a copy of bytes, and 10,000 Deployments fit in a few
//! tens of MiB. Writes parse, change and re-serialise the one object they touch.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use serde_json::Value;
use tokio::sync::broadcast;

use super::protobuf;

/// How many changes the store remembers for watches. A watch from an older
/// resourceVersion gets `410 Expired`, as from an etcd that has compacted its history.
pub(crate) const HISTORY_LIMIT: usize = 100_000;

/// How many events a slow watcher may fall behind before its watch is closed (the
/// client then re-watches from its last resourceVersion, as kube-apiserver's watch
/// cache does with slow consumers).
const WATCH_BUFFER: usize = 16_384;

/// Storage is per resource, independent of the version it is served in: the versions of
/// one CRD share their objects, as they share one etcd prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ResourceKey {
    pub(crate) group: String,
    pub(crate) resource: String,
}

/// An object's place in its resource: namespace ("" for cluster-scoped) and name. The
/// order is etcd's key order, which is the order of list answers.
pub(crate) type ObjectKey = (String, String);

/// One stored object.
#[derive(Debug)]
pub(crate) struct Stored {
    pub(crate) resource_version: u64,
    /// The whole object as JSON, `kind` and `apiVersion` included.
    pub(crate) json: Bytes,
    pub(crate) labels: BTreeMap<String, String>,
    /// UIDs of the owners named in `ownerReferences`, for garbage collection.
    pub(crate) owners: Vec<String>,
    pub(crate) uid: String,
    /// The bare protobuf message of a built-in kind's object, encoded once per
    /// resourceVersion (at its write, or at its first protobuf answer) and shared by
    /// every get, list and watch frame that answers it in protobuf. None inside: the
    /// object has no protobuf form (a custom resource, a field newer than `k8s-pb`).
    protobuf: OnceLock<Option<Encoded>>,
}

/// An object in protobuf: enveloped as a get answers it, with the bare message inside
/// (a list's item) at a known place.
#[derive(Debug)]
pub(crate) struct Encoded {
    pub(crate) enveloped: Bytes,
    message: std::ops::Range<usize>,
}

impl Encoded {
    fn of(value: &Value, capacity: usize) -> Option<Encoded> {
        let (enveloped, message) = protobuf::encode_enveloped(value, capacity).ok()?;
        Some(Encoded {
            message,
            enveloped: Bytes::from(enveloped),
        })
    }

    /// The bare message, as a list carries its items.
    pub(crate) fn message(&self) -> &[u8] {
        &self.enveloped[self.message.clone()]
    }
}

impl Stored {
    pub(crate) fn from_value(value: &Value, resource_version: u64) -> Stored {
        let metadata = value.get("metadata");
        let labels = metadata
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let owners = metadata
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| Some(r.get("uid")?.as_str()?.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let uid = metadata
            .and_then(|m| m.get("uid"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Stored {
            resource_version,
            json: Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
            labels,
            owners,
            uid,
            protobuf: OnceLock::new(),
        }
    }

    /// The object as a value, for a write to change it.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// The object in protobuf, encoded from its JSON the first time it is asked for.
    pub(crate) fn protobuf(&self) -> Option<&Encoded> {
        self.protobuf
            .get_or_init(|| Encoded::of(&self.value(), self.json.len()))
            .as_ref()
    }

    /// Encodes the protobuf message now, from the value being stored (no JSON to parse
    /// back): for a write whose answer is wanted in protobuf, so that the answer and
    /// every later read share the one encoding.
    pub(crate) fn encode_protobuf_from(&self, value: &Value) -> Option<&Encoded> {
        self.protobuf
            .get_or_init(|| Encoded::of(value, self.json.len()))
            .as_ref()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) resource_version: u64,
    pub(crate) event_type: EventType,
    pub(crate) resource: ResourceKey,
    pub(crate) key: ObjectKey,
    pub(crate) object: Arc<Stored>,
}

#[derive(Default)]
struct Inner {
    resource_version: u64,
    objects: HashMap<ResourceKey, BTreeMap<ObjectKey, Arc<Stored>>>,
    history: VecDeque<Arc<Event>>,
}

pub(crate) struct Store {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Arc<Event>>,
    /// [`HISTORY_LIMIT`] unless a test shrinks it to reach `410 Expired` quickly.
    history_limit: AtomicUsize,
}

/// The objects of a resource at one resourceVersion, in key order.
pub(crate) type Snapshot = Vec<(ObjectKey, Arc<Stored>)>;

/// Where a watch starts.
pub(crate) enum WatchStart {
    /// The changes after this resourceVersion, replayed from history.
    Replay(Vec<Arc<Event>>),
    /// The requested resourceVersion is older than the history kept.
    Expired { oldest: u64 },
}

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

impl Store {
    pub(crate) fn new() -> Store {
        let (events, _) = broadcast::channel(WATCH_BUFFER);
        Store {
            inner: Mutex::new(Inner::default()),
            events,
            history_limit: AtomicUsize::new(HISTORY_LIMIT),
        }
    }

    /// Keeps at most `limit` changes (at least one) for watches, dropping older ones
    /// now: what an etcd compaction does, for tests of `410 Expired`.
    pub(crate) fn set_history_limit(&self, limit: usize) {
        let limit = limit.max(1);
        self.history_limit.store(limit, Ordering::Relaxed);
        let mut inner = self.lock();
        while inner.history.len() > limit {
            inner.history.pop_front();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.inner.lock()
    }

    /// The newest resourceVersion handed out.
    pub(crate) fn resource_version(&self) -> u64 {
        self.lock().resource_version
    }

    pub(crate) fn get(&self, resource: &ResourceKey, key: &ObjectKey) -> Option<Arc<Stored>> {
        self.lock().objects.get(resource)?.get(key).cloned()
    }

    /// A consistent snapshot of the objects of one resource (optionally one namespace),
    /// with the resourceVersion it was taken at.
    pub(crate) fn list(
        &self,
        resource: &ResourceKey,
        namespace: Option<&str>,
    ) -> (u64, Vec<(ObjectKey, Arc<Stored>)>) {
        let inner = self.lock();
        let items = match inner.objects.get(resource) {
            None => Vec::new(),
            Some(objects) => match namespace {
                None => objects
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                Some(ns) => objects
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((object_ns, _), _)| object_ns == ns)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            },
        };
        (inner.resource_version, items)
    }

    /// Every resource that has objects in `namespace`, for deleting a namespace.
    pub(crate) fn keys_in_namespace(&self, namespace: &str) -> Vec<(ResourceKey, ObjectKey)> {
        let inner = self.lock();
        let mut keys = Vec::new();
        for (resource, objects) in &inner.objects {
            keys.extend(
                objects
                    .range((namespace.to_string(), String::new())..)
                    .take_while(|((ns, _), _)| ns == namespace)
                    .map(|(k, _)| (resource.clone(), k.clone())),
            );
        }
        keys
    }

    /// Objects whose ownerReferences name `uid`, for cascading deletes.
    pub(crate) fn dependents(&self, uid: &str) -> Vec<(ResourceKey, ObjectKey)> {
        let inner = self.lock();
        let mut keys = Vec::new();
        for (resource, objects) in &inner.objects {
            for (key, stored) in objects {
                if stored.owners.iter().any(|owner| owner == uid) {
                    keys.push((resource.clone(), key.clone()));
                }
            }
        }
        keys
    }

    /// Stores `value` under a new resourceVersion if the stored object is still at
    /// `expected` (None: must not exist). The closure sees the new resourceVersion so it
    /// can write it into the object before it is serialised.
    pub(crate) fn put(
        &self,
        resource: &ResourceKey,
        key: &ObjectKey,
        expected: Option<u64>,
        value: &mut Value,
    ) -> Result<Arc<Stored>, PutError> {
        let mut inner = self.lock();
        let current = inner
            .objects
            .get(resource)
            .and_then(|objects| objects.get(key))
            .map(|s| s.resource_version);
        match (expected, current) {
            (None, Some(_)) => return Err(PutError::Exists),
            (Some(_), None) => return Err(PutError::Gone),
            (Some(expected), Some(current)) if expected != current => return Err(PutError::Stale),
            _ => {}
        }
        inner.resource_version += 1;
        let rv = inner.resource_version;
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let stored = Arc::new(Stored::from_value(value, rv));
        inner
            .objects
            .entry(resource.clone())
            .or_default()
            .insert(key.clone(), stored.clone());
        let event_type = if current.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(&mut inner, event_type, resource, key, stored.clone());
        Ok(stored)
    }

    /// Removes an object if it is still at `expected`; the DELETED event carries the
    /// object with a new resourceVersion, as a real server's does.
    pub(crate) fn remove(
        &self,
        resource: &ResourceKey,
        key: &ObjectKey,
        expected: u64,
    ) -> Result<Arc<Stored>, PutError> {
        let mut inner = self.lock();
        let Some(current) = inner
            .objects
            .get(resource)
            .and_then(|objects| objects.get(key))
            .cloned()
        else {
            return Err(PutError::Gone);
        };
        if current.resource_version != expected {
            return Err(PutError::Stale);
        }
        if let Some(objects) = inner.objects.get_mut(resource) {
            objects.remove(key);
        }
        inner.resource_version += 1;
        let rv = inner.resource_version;
        let mut value = current.value();
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let stored = Arc::new(Stored::from_value(&value, rv));
        self.record(
            &mut inner,
            EventType::Deleted,
            resource,
            key,
            stored.clone(),
        );
        Ok(stored)
    }

    fn record(
        &self,
        inner: &mut Inner,
        event_type: EventType,
        resource: &ResourceKey,
        key: &ObjectKey,
        object: Arc<Stored>,
    ) {
        let event = Arc::new(Event {
            resource_version: inner.resource_version,
            event_type,
            resource: resource.clone(),
            key: key.clone(),
            object,
        });
        let limit = self.history_limit.load(Ordering::Relaxed);
        while inner.history.len() >= limit {
            inner.history.pop_front();
        }
        inner.history.push_back(event.clone());
        // Sent under the lock so that watchers see events in resourceVersion order.
        let _ = self.events.send(event);
    }

    /// Subscribes to changes after `after` (a resourceVersion). The replayed history and
    /// the live subscription are taken under one lock, so no event falls between them.
    pub(crate) fn watch(&self, after: u64) -> (WatchStart, broadcast::Receiver<Arc<Event>>) {
        let inner = self.lock();
        let receiver = self.events.subscribe();
        let oldest_kept = inner.history.front().map(|e| e.resource_version);
        let start = match oldest_kept {
            // History starts right after `after` or earlier: everything is there.
            Some(oldest) if after + 1 < oldest => WatchStart::Expired { oldest },
            _ => WatchStart::Replay(
                inner
                    .history
                    .iter()
                    .skip_while(|e| e.resource_version <= after)
                    .cloned()
                    .collect(),
            ),
        };
        (start, receiver)
    }

    /// Subscribes to changes from now on, with the current objects of the resource as a
    /// snapshot (a watch without a resourceVersion starts with them as ADDED events).
    pub(crate) fn watch_from_now(
        &self,
        resource: &ResourceKey,
        namespace: Option<&str>,
    ) -> (u64, Snapshot, broadcast::Receiver<Arc<Event>>) {
        let inner = self.lock();
        let receiver = self.events.subscribe();
        let items = match inner.objects.get(resource) {
            None => Vec::new(),
            Some(objects) => objects
                .iter()
                .filter(|((ns, _), _)| namespace.is_none_or(|wanted| wanted == ns))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        (inner.resource_version, items, receiver)
    }

    /// Every change from now on, of any resource (for simulated controllers).
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// Drops every object of a resource (a deleted CRD takes its objects with it).
    pub(crate) fn drop_resource(&self, resource: &ResourceKey) -> usize {
        let keys: Vec<(ObjectKey, u64)> = {
            let inner = self.lock();
            inner
                .objects
                .get(resource)
                .map(|objects| {
                    objects
                        .iter()
                        .map(|(k, v)| (k.clone(), v.resource_version))
                        .collect()
                })
                .unwrap_or_default()
        };
        keys.iter()
            .filter(|(key, rv)| self.remove(resource, key, *rv).is_ok())
            .count()
    }
}

/// Why a store write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PutError {
    #[error("the object already exists")]
    Exists,
    #[error("the object no longer exists")]
    Gone,
    #[error("the object has been modified")]
    Stale,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm() -> ResourceKey {
        ResourceKey {
            group: String::new(),
            resource: "configmaps".into(),
        }
    }

    fn key(ns: &str, name: &str) -> ObjectKey {
        (ns.into(), name.into())
    }

    #[test]
    fn put_assigns_increasing_resource_versions_and_checks_preconditions() {
        let store = Store::new();
        let mut a = json!({"metadata": {"name": "a", "labels": {"app": "x"}}});
        let first = store.put(&cm(), &key("ns", "a"), None, &mut a).unwrap();
        assert_eq!(first.resource_version, 1);
        assert_eq!(a["metadata"]["resourceVersion"], "1");
        assert_eq!(first.labels.get("app").map(String::as_str), Some("x"));
        assert_eq!(
            store.put(&cm(), &key("ns", "a"), None, &mut a).unwrap_err(),
            PutError::Exists
        );
        assert_eq!(
            store
                .put(&cm(), &key("ns", "a"), Some(7), &mut a)
                .unwrap_err(),
            PutError::Stale
        );
        assert_eq!(
            store
                .put(&cm(), &key("ns", "b"), Some(1), &mut a)
                .unwrap_err(),
            PutError::Gone
        );
        let second = store.put(&cm(), &key("ns", "a"), Some(1), &mut a).unwrap();
        assert_eq!(second.resource_version, 2);
    }

    #[test]
    fn list_is_in_key_order_and_filters_namespaces() {
        let store = Store::new();
        for (ns, name) in [("b", "x"), ("a", "z"), ("a", "y"), ("ab", "w")] {
            store
                .put(&cm(), &key(ns, name), None, &mut json!({"metadata": {}}))
                .unwrap();
        }
        let (rv, all) = store.list(&cm(), None);
        assert_eq!(rv, 4);
        let names: Vec<_> = all.iter().map(|(k, _)| k.1.as_str()).collect();
        assert_eq!(names, ["y", "z", "w", "x"]);
        let (_, only_a) = store.list(&cm(), Some("a"));
        assert_eq!(only_a.len(), 2);
        assert_eq!(store.keys_in_namespace("a").len(), 2);
    }

    #[test]
    fn watch_replays_history_after_a_version_and_expires_old_versions() {
        let store = Store::new();
        store
            .put(&cm(), &key("ns", "a"), None, &mut json!({"metadata": {}}))
            .unwrap();
        store
            .put(
                &cm(),
                &key("ns", "a"),
                Some(1),
                &mut json!({"metadata": {}}),
            )
            .unwrap();
        store.remove(&cm(), &key("ns", "a"), 2).unwrap();
        let (start, _) = store.watch(1);
        let WatchStart::Replay(events) = start else {
            panic!("expected a replay")
        };
        let seen: Vec<_> = events
            .iter()
            .map(|e| (e.resource_version, e.event_type))
            .collect();
        assert_eq!(seen, [(2, EventType::Modified), (3, EventType::Deleted)]);
        let (start, _) = store.watch(0);
        assert!(matches!(start, WatchStart::Replay(events) if events.len() == 3));
    }

    #[test]
    fn a_shorter_history_expires_older_resource_versions() {
        let store = Store::new();
        for name in ["a", "b", "c", "d"] {
            store
                .put(&cm(), &key("ns", name), None, &mut json!({"metadata": {}}))
                .unwrap();
        }
        store.set_history_limit(2);
        assert!(matches!(
            store.watch(1).0,
            WatchStart::Expired { oldest: 3 }
        ));
        assert!(matches!(store.watch(2).0, WatchStart::Replay(events) if events.len() == 2));
        store
            .put(&cm(), &key("ns", "e"), None, &mut json!({"metadata": {}}))
            .unwrap();
        assert!(matches!(
            store.watch(2).0,
            WatchStart::Expired { oldest: 4 }
        ));
    }

    #[test]
    fn remove_refuses_stale_versions() {
        let store = Store::new();
        store
            .put(&cm(), &key("ns", "a"), None, &mut json!({"metadata": {}}))
            .unwrap();
        assert_eq!(
            store.remove(&cm(), &key("ns", "a"), 9).unwrap_err(),
            PutError::Stale
        );
        assert_eq!(
            store.remove(&cm(), &key("ns", "b"), 1).unwrap_err(),
            PutError::Gone
        );
        assert!(store.remove(&cm(), &key("ns", "a"), 1).is_ok());
        assert!(store.get(&cm(), &key("ns", "a")).is_none());
    }
}
