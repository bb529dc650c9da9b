//! A watch-fed cache of the objects tether manages: one watch per kind, with the
//! label selector `app.kubernetes.io/managed-by=tether` (Namespaces unfiltered, since
//! an app may use a namespace it does not own). A pass of an app in sync reads its
//! live objects here and makes no request; a change to any of them wakes its app.
//!
//! Objects are kept as the server sent them, managedFields included (sync needs them
//! to know, without a dry run, that an apply would change nothing), as compact JSON
//! bytes: a parsed object costs about twice its text in small allocations, and a pass
//! parses only the objects of its own app. They are held by kind, then by namespace
//! and name, so the kind is not repeated in every entry (at 100,000 objects, that
//! and the spare capacity of one large table were megabytes); a kind's JSON is
//! deflated against its first object and lies in a few large chunks rather than one
//! allocation per object ([`store`]).

mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, TypeMeta};
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::{Cluster, LiveObjects, Resolved};
use crate::manifest::ObjectKey;
use crate::ownership::MANAGED_SELECTOR;
use store::KindObjects;

/// How long a first pass waits for a new watch's initial list before reading the
/// server directly instead.
const INITIAL_LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// Backoff between watch streams of a kind after a failure: kube-rs's default watcher
/// backoff bounds (800 ms to 30 s), doubling, reset by a successful list.
const WATCH_RETRY_MIN: Duration = Duration::from_millis(800);
const WATCH_RETRY_MAX: Duration = Duration::from_secs(30);
/// Events waiting for slow subscribers; a subscriber that falls behind resyncs.
const EVENT_BUFFER: usize = 4096;

/// A managed object changed (or was deleted): which app it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub app: Option<String>,
    pub key: ObjectKey,
}

/// One object as it arrives: its app label, and the object as compact JSON (copied
/// into its kind's chunks by [`KindObjects::insert`]).
struct Stored {
    app: Option<Box<str>>,
    json: Vec<u8>,
}

/// Kinds are keyed by (group, kind): one stored object, whatever version addresses it.
type GroupKind = (String, String);

/// An object within its kind: namespace (none for cluster-scoped kinds) and name.
type Name = (Option<Box<str>>, Box<str>);

fn name_of(key: &ObjectKey) -> Name {
    (
        key.namespace.as_deref().map(Box::from),
        Box::from(key.name.as_str()),
    )
}

fn key_of(gk: &GroupKind, name: &Name) -> ObjectKey {
    ObjectKey {
        group: gk.0.clone(),
        kind: gk.1.clone(),
        namespace: name.0.as_deref().map(str::to_string),
        name: name.1.to_string(),
    }
}

/// A changed object's event: its app, and its key.
fn changed(gk: &GroupKind, name: &Name, app: Option<&str>) -> Changed {
    Changed {
        app: app.map(str::to_string),
        key: key_of(gk, name),
    }
}

struct Inner {
    cluster: Arc<Cluster>,
    objects: RwLock<HashMap<GroupKind, KindObjects>>,
    /// Kinds whose watch has delivered its initial list, with a flag per watch.
    kinds: Mutex<HashMap<GroupKind, watch::Receiver<bool>>>,
    events: broadcast::Sender<Changed>,
    shutdown: CancellationToken,
}

/// The cache; cheap to clone.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

impl Cache {
    pub fn new(cluster: Arc<Cluster>, shutdown: CancellationToken) -> Cache {
        Cache {
            inner: Arc::new(Inner {
                cluster,
                objects: RwLock::new(HashMap::new()),
                kinds: Mutex::new(HashMap::new()),
                events: broadcast::channel(EVENT_BUFFER).0,
                shutdown,
            }),
        }
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.inner.cluster
    }

    /// Changes to managed objects, as they arrive.
    pub fn subscribe(&self) -> broadcast::Receiver<Changed> {
        self.inner.events.subscribe()
    }

    /// Starts watching `kind` if nothing watches it yet, and waits (bounded) for its
    /// initial list. Returns whether the kind is now synced.
    pub async fn watch(&self, group: &str, kind_name: &str, kind: &Resolved) -> bool {
        let key = (group.to_string(), kind_name.to_string());
        let mut synced = {
            let mut kinds = self.inner.kinds.lock().unwrap_or_else(|p| p.into_inner());
            match kinds.get(&key) {
                // Watched already: synced, or listing again after a failure. A pass
                // does not wait for that; it reads the server meanwhile.
                Some(rx) => return *rx.borrow(),
                None => {
                    let (tx, rx) = watch::channel(false);
                    kinds.insert(key.clone(), rx.clone());
                    self.spawn_watch(key, kind.clone(), tx);
                    rx
                }
            }
        };
        matches!(
            tokio::time::timeout(INITIAL_LIST_TIMEOUT, synced.wait_for(|s| *s)).await,
            Ok(Ok(_))
        )
    }

    /// Whether every kind watched so far has delivered its initial list.
    pub fn synced(&self) -> bool {
        self.inner
            .kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .all(|rx| *rx.borrow())
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.inner
            .objects
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(KindObjects::len)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn is_synced(&self, group: &str, kind: &str) -> bool {
        self.inner
            .kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(group.to_string(), kind.to_string()))
            .is_some_and(|rx| *rx.borrow())
    }

    fn spawn_watch(&self, gk: GroupKind, kind: Resolved, synced: watch::Sender<bool>) {
        let inner = self.inner.clone();
        let api: Api<DynamicObject> = Api::all_with(inner.cluster.client().clone(), &kind.resource);
        let config = if gk.0.is_empty() && gk.1 == "Namespace" {
            watcher::Config::default()
        } else {
            watcher::Config::default().labels(MANAGED_SELECTOR)
        };
        tokio::spawn(async move {
            let mut delay = WATCH_RETRY_MIN;
            loop {
                let outcome = follow(&inner, &gk, &kind, &api, config.clone(), &synced).await;
                // Until the next full list, what the cache holds of this kind may be
                // stale: passes read the server, and /readyz says so.
                synced.send_replace(false);
                match outcome {
                    Followed::Shutdown => return,
                    Followed::Listed => delay = WATCH_RETRY_MIN,
                    Followed::Failed => {}
                }
                tokio::select! {
                    _ = inner.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(WATCH_RETRY_MAX);
            }
        });
    }
}

/// How a watch stream ended.
enum Followed {
    Shutdown,
    /// It failed after delivering a full list (its errors are new ones).
    Listed,
    /// It failed before listing.
    Failed,
}

/// Follows one watch stream (list, then watch) into the cache until it fails or the
/// cache shuts down. A failed stream is not resumed: a new one lists again, so the
/// kind is only ever marked synced after a complete list.
async fn follow(
    inner: &Inner,
    gk: &GroupKind,
    kind: &Resolved,
    api: &Api<DynamicObject>,
    config: watcher::Config,
    synced: &watch::Sender<bool>,
) -> Followed {
    let stream = watcher::watcher(api.clone(), config);
    futures::pin_mut!(stream);
    // Objects listed since the last Init: at InitDone they replace the kind's.
    let mut listing: Option<KindObjects> = None;
    let mut listed = false;
    loop {
        let event = tokio::select! {
            _ = inner.shutdown.cancelled() => return Followed::Shutdown,
            event = stream.next() => event,
        };
        let Some(event) = event else {
            return Followed::Shutdown;
        };
        match event {
            Ok(Event::Init) => listing = Some(KindObjects::default()),
            Ok(Event::InitApply(object)) => {
                if let Some((name, stored)) = keyed(kind, object) {
                    listing.get_or_insert_default().insert(
                        name,
                        stored.app.as_deref(),
                        &stored.json,
                    );
                }
            }
            Ok(Event::InitDone) => {
                let fresh = listing.take().unwrap_or_default();
                for change in replace_kind(inner, gk, fresh) {
                    let _ = inner.events.send(change);
                }
                listed = true;
                synced.send_replace(true);
            }
            Ok(Event::Apply(object)) => {
                if let Some((name, stored)) = keyed(kind, object) {
                    let change = changed(gk, &name, stored.app.as_deref());
                    inner
                        .objects
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(gk.clone())
                        .or_default()
                        .insert(name, stored.app.as_deref(), &stored.json);
                    let _ = inner.events.send(change);
                }
            }
            Ok(Event::Delete(object)) => {
                if let Some((name, stored)) = keyed(kind, object) {
                    if let Some(objects) = inner
                        .objects
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_mut(gk)
                    {
                        objects.remove(&name);
                    }
                    let _ = inner.events.send(changed(gk, &name, stored.app.as_deref()));
                }
            }
            Err(err) => {
                tracing::warn!(kind = %gk.1, group = %gk.0, error = %err, "watch failed; listing again");
                return if listed {
                    Followed::Listed
                } else {
                    Followed::Failed
                };
            }
        }
    }
}

impl LiveObjects for Cache {
    fn lookup(&self, key: &ObjectKey) -> Option<Option<Value>> {
        if !self.is_synced(&key.group, &key.kind) {
            return None;
        }
        let objects = self.inner.objects.read().unwrap_or_else(|p| p.into_inner());
        let kind = objects.get(&(key.group.clone(), key.kind.clone()));
        // An object absent here may still exist unlabelled (one tether is about to
        // adopt): sync's dry run finds it there and plans an update, labels included.
        match kind.and_then(|objects| objects.get(&name_of(key))) {
            // Bytes this cache serialized itself: they parse.
            Some(json) => serde_json::from_slice(&json).ok().map(Some),
            None => Some(None),
        }
    }

    fn owned(&self, group: &str, kind: &str, app: &str) -> Option<Vec<Value>> {
        if !self.is_synced(group, kind) {
            return None;
        }
        let objects = self.inner.objects.read().unwrap_or_else(|p| p.into_inner());
        let Some(objects) = objects.get(&(group.to_string(), kind.to_string())) else {
            return Some(Vec::new());
        };
        Some(
            objects
                .owned_by(app)
                .filter_map(|json| serde_json::from_slice(&json).ok())
                .collect(),
        )
    }
}

fn keyed(kind: &Resolved, mut object: DynamicObject) -> Option<(Name, Stored)> {
    let name: Box<str> = object.metadata.name.as_deref()?.into();
    let name = (object.metadata.namespace.as_deref().map(Box::from), name);
    // A list's items may carry no apiVersion and kind; the watch knows them.
    object.types.get_or_insert_with(|| TypeMeta {
        api_version: kind.resource.api_version.clone(),
        kind: kind.resource.kind.clone(),
    });
    // Written straight from the typed object: no second tree of it as a Value.
    let stored = Stored {
        app: app_of(&object),
        json: serde_json::to_vec(&object).ok()?,
    };
    Some((name, stored))
}

/// The app label, as `ownership::app_of` reads it from the object's JSON.
fn app_of(object: &DynamicObject) -> Option<Box<str>> {
    object
        .metadata
        .labels
        .as_ref()?
        .get(crate::ownership::APP_LABEL)
        .map(|app| Box::from(app.as_str()))
}

/// Replaces every object of one kind with a fresh listing; returns what changed.
fn replace_kind(inner: &Inner, gk: &GroupKind, mut listed: KindObjects) -> Vec<Changed> {
    let mut objects = inner.objects.write().unwrap_or_else(|p| p.into_inner());
    let mut changes = Vec::new();
    let old = objects.remove(gk).unwrap_or_default();
    for (name, app) in old.iter() {
        if listed.get(name).is_none() {
            changes.push(changed(gk, name, app));
        }
    }
    for (name, app) in listed.iter() {
        if old.get(name) != listed.get(name) || old.app(name) != app {
            changes.push(changed(gk, name, app));
        }
    }
    // The listing grew as it arrived; it is kept without the spare room.
    listed.shrink();
    objects.insert(gk.clone(), listed);
    changes
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};

    use super::*;

    fn configmaps() -> Resolved {
        Resolved {
            resource: ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap")),
            namespaced: true,
        }
    }

    /// A list's items may come without apiVersion and kind: the object held has the
    /// watch's, and its app label, written once from the typed object.
    #[test]
    fn a_listed_object_is_held_with_its_kind_and_app() {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop",
                "labels": {"tether.dev/app": "shop", "app.kubernetes.io/managed-by": "tether"}},
            "data": {"key": "v"},
        }))
        .expect("an object");
        let ((namespace, name), stored) = keyed(&configmaps(), object).expect("keyed");
        assert_eq!((namespace.as_deref(), &*name), (Some("shop"), "web"));
        assert_eq!(stored.app.as_deref(), Some("shop"));
        let held: Value = serde_json::from_slice(&stored.json).expect("JSON");
        assert_eq!(held["apiVersion"], "v1");
        assert_eq!(held["kind"], "ConfigMap");
        assert_eq!(held["data"]["key"], "v");
        assert_eq!(crate::ownership::app_of(&held), Some("shop"));

        let unnamed: DynamicObject =
            serde_json::from_value(serde_json::json!({"metadata": {}})).expect("an object");
        assert!(keyed(&configmaps(), unnamed).is_none(), "no name, not held");
    }
}
