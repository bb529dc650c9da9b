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
//!
//! With `shards: N` ([`Cache::sharded`]) a replica holds only the objects of the apps
//! whose shards it holds ([`Cache::hold`]): memory follows its share, not the cluster.
//! An object it leaves out is still accounted for, as a 128-bit hash of its namespace
//! and name, so that "not here" never reads as "absent": a lookup of a left-out object,
//! and a by-app scan of an app whose objects are not all here (its shard not held, or
//! gained but not yet listed), answer "not known" and the caller reads the server.
//! Gaining a shard restarts the kinds' watches (see [`Cache::hold`] for why); losing
//! one drops its objects at once, and their changes are no longer announced.

mod shards;
mod store;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::RandomState;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, TypeMeta};
use kube::runtime::watcher::{self, Event};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::{Cluster, LiveObjects, Resolved};
pub use shards::ShardMap;
use shards::{
    ShardState, Sharded, apply_sharded, delete_sharded, finish_listing, held_owner, is_namespace,
    left_out, start_listing,
};
use store::KindObjects;
use tether_diff::manifest::ObjectKey;
use tether_schema::ownership::MANAGED_SELECTOR;

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
    /// Which apps' objects are held, with `shards: N`; None: every app's.
    shards: Option<Sharded>,
    /// Bumped when a shard is gained: every kind's watch lists again.
    relist: watch::Sender<u64>,
}

/// The cache; cheap to clone.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

impl Cache {
    pub fn new(cluster: Arc<Cluster>, shutdown: CancellationToken) -> Cache {
        Cache::with_shards(cluster, shutdown, None)
    }

    /// A cache that holds only the objects of apps in the shards it is told it holds
    /// ([`Cache::hold`]; none at first). With one shard, the same as [`Cache::new`].
    pub fn sharded(cluster: Arc<Cluster>, shutdown: CancellationToken, map: ShardMap) -> Cache {
        let shards = (map.count > 1).then(|| Sharded {
            map,
            hashers: (RandomState::new(), RandomState::new()),
            state: RwLock::new(ShardState::default()),
        });
        Cache::with_shards(cluster, shutdown, shards)
    }

    fn with_shards(
        cluster: Arc<Cluster>,
        shutdown: CancellationToken,
        shards: Option<Sharded>,
    ) -> Cache {
        Cache {
            inner: Arc::new(Inner {
                cluster,
                objects: RwLock::new(HashMap::new()),
                kinds: Mutex::new(HashMap::new()),
                events: broadcast::channel(EVENT_BUFFER).0,
                shutdown,
                shards,
                relist: watch::channel(0).0,
            }),
        }
    }

    /// Holds the objects of the apps in `held` from now on. A lost shard's objects are
    /// dropped at once (left-out ones are remembered by hash). A gained shard's are
    /// listed by restarting every kind's watch, and its apps are "not known" until
    /// that list is in: a list of everything tether manages, not a list by label of
    /// the gained apps, because a list merged into a running watch would be a snapshot
    /// older than events already applied (resourceVersions may not be compared), and
    /// could bring back a deleted object or an old state; a restarted watch replaces
    /// the kind with one consistent list, as after a 410 Gone. At 100,000 objects that
    /// is one full list per kind per gain, the cost of a replica's start, and gains
    /// happen when a replica joins or dies; meanwhile reads of the gained apps go to
    /// the server, and the other apps keep reading the cache.
    pub fn hold(&self, held: &BTreeSet<u32>) {
        let Some(shards) = &self.inner.shards else {
            return;
        };
        let mut state = shards.state.write();
        let state = &mut *state;
        let (gained, lost) = state.hold(held);
        if lost {
            let mut objects = self.inner.objects.write();
            for (gk, held_objects) in objects.iter_mut() {
                if is_namespace(gk) {
                    continue;
                }
                let kind = state.kinds.entry(gk.clone()).or_default();
                // The memory comes back, not just the entries.
                held_objects.retain(|name, app, json| {
                    let keep = shards.admits(&state.held, gk, held_owner(app, json).as_deref());
                    if !keep {
                        kind.elsewhere
                            .insert(shards.hash(name.0.as_deref(), &name.1));
                    }
                    keep
                });
            }
        }
        if gained {
            self.inner.relist.send_modify(|generation| *generation += 1);
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
            let mut kinds = self.inner.kinds.lock();
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
        self.inner.kinds.lock().values().all(|rx| *rx.borrow())
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.inner
            .objects
            .read()
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
                if matches!(outcome, Followed::Relist) {
                    // Still current for the shards held before; the gained ones are
                    // not known until the new list is in.
                    delay = WATCH_RETRY_MIN;
                    continue;
                }
                // Until the next full list, what the cache holds of this kind may be
                // stale: passes read the server, and /readyz says so.
                synced.send_replace(false);
                match outcome {
                    Followed::Shutdown => return,
                    Followed::Listed | Followed::Relist => delay = WATCH_RETRY_MIN,
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
    /// A shard was gained: its objects need a new list.
    Relist,
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
    let mut relist = inner.relist.subscribe();
    relist.mark_unchanged();
    // Namespaces are held whatever the shards: a gained shard needs no new list of them.
    let relists = inner.shards.is_some() && !is_namespace(gk);
    // Objects listed since the last Init: at InitDone they replace the kind's.
    let mut listing: Option<KindObjects> = None;
    // With shards: the hashes of the listed objects left out.
    let mut elsewhere: HashSet<u128> = HashSet::new();
    let mut listed = false;
    loop {
        let event = tokio::select! {
            _ = inner.shutdown.cancelled() => return Followed::Shutdown,
            Ok(()) = relist.changed(), if relists => return Followed::Relist,
            event = stream.next() => event,
        };
        let Some(event) = event else {
            return Followed::Shutdown;
        };
        match event {
            Ok(Event::Init) => {
                listing = Some(KindObjects::default());
                elsewhere.clear();
                start_listing(inner, gk);
            }
            Ok(Event::InitApply(object)) => match left_out(inner, gk, &object) {
                Some(hash) => {
                    elsewhere.insert(hash);
                }
                None => {
                    if let Some((name, stored)) = keyed(kind, object) {
                        listing.get_or_insert_default().insert(
                            name,
                            stored.app.as_deref(),
                            &stored.json,
                        );
                    }
                }
            },
            Ok(Event::InitDone) => {
                let fresh = listing.take().unwrap_or_default();
                let left = std::mem::take(&mut elsewhere);
                for change in finish_listing(inner, gk, fresh, left) {
                    let _ = inner.events.send(change);
                }
                listed = true;
                synced.send_replace(true);
            }
            Ok(Event::Apply(object)) if inner.shards.is_some() => {
                if let Some(change) = apply_sharded(inner, gk, kind, object) {
                    let _ = inner.events.send(change);
                }
            }
            Ok(Event::Delete(object)) if inner.shards.is_some() => {
                if let Some(change) = delete_sharded(inner, gk, &object) {
                    let _ = inner.events.send(change);
                }
            }
            Ok(Event::Apply(object)) => {
                if let Some(change) = apply_unsharded(inner, gk, kind, object) {
                    let _ = inner.events.send(change);
                }
            }
            Ok(Event::Delete(object)) => {
                if let Some(change) = delete_unsharded(inner, gk, kind, object) {
                    let _ = inner.events.send(change);
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

/// A watched object stored (without shards, every object is held).
fn apply_unsharded(
    inner: &Inner,
    gk: &GroupKind,
    kind: &Resolved,
    object: DynamicObject,
) -> Option<Changed> {
    let (name, stored) = keyed(kind, object)?;
    let change = changed(gk, &name, stored.app.as_deref());
    inner.objects.write().entry(gk.clone()).or_default().insert(
        name,
        stored.app.as_deref(),
        &stored.json,
    );
    Some(change)
}

/// A watched object's deletion taken in (without shards).
fn delete_unsharded(
    inner: &Inner,
    gk: &GroupKind,
    kind: &Resolved,
    object: DynamicObject,
) -> Option<Changed> {
    let (name, stored) = keyed(kind, object)?;
    if let Some(objects) = inner.objects.write().get_mut(gk) {
        objects.remove(&name);
    }
    Some(changed(gk, &name, stored.app.as_deref()))
}

impl LiveObjects for Cache {
    fn lookup(&self, key: &ObjectKey) -> Option<Option<Value>> {
        if !self.is_synced(&key.group, &key.kind) {
            return None;
        }
        let shard_state = self.shard_state();
        let objects = self.inner.objects.read();
        let gk = (key.group.clone(), key.kind.clone());
        let kind = objects.get(&gk);
        // An object absent here may still exist unlabelled (one tether is about to
        // adopt): sync's dry run finds it there and plans an update, labels included.
        match kind.and_then(|objects| objects.get(&name_of(key))) {
            // Bytes this cache serialized itself: they parse.
            Some(json) => serde_json::from_slice(&json).ok().map(Some),
            // Left out here (another replica's app): not known, never absent.
            None if self.left_out(shard_state.as_deref(), &gk, key) => None,
            None => Some(None),
        }
    }

    fn owned(&self, group: &str, kind: &str, app: &str) -> Option<Vec<Value>> {
        if !self.is_synced(group, kind) {
            return None;
        }
        let gk = (group.to_string(), kind.to_string());
        // Held through the scan: a shard lost meanwhile cannot empty it halfway.
        let shard_state = self.shard_state();
        if let (Some(shards), Some(state)) = (&self.inner.shards, shard_state.as_deref())
            && !state.knows_all(&gk, shards.shard(app))
        {
            return None;
        }
        let objects = self.inner.objects.read();
        let Some(objects) = objects.get(&gk) else {
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
        .get(tether_schema::ownership::APP_LABEL)
        .map(|app| Box::from(app.as_str()))
}

/// Replaces every object of one kind with a fresh listing; returns what changed.
fn replace_kind(inner: &Inner, gk: &GroupKind, mut listed: KindObjects) -> Vec<Changed> {
    let mut objects = inner.objects.write();
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

    use super::shards::owner_of;
    use super::*;
    use tether_schema::ownership::{APP_LABEL, INVENTORY_LABEL};

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
        assert_eq!(tether_schema::ownership::app_of(&held), Some("shop"));

        let unnamed: DynamicObject =
            serde_json::from_value(serde_json::json!({"metadata": {}})).expect("an object");
        assert!(keyed(&configmaps(), unnamed).is_none(), "no name, not held");
    }

    fn set(shards: &[u32]) -> BTreeSet<u32> {
        shards.iter().copied().collect()
    }

    fn gk(kind: &str) -> GroupKind {
        (String::new(), kind.to_string())
    }

    /// Shard of "a<digit>" is the digit: a readable stand-in for the shard hash.
    fn by_digit(app: &str, count: u32) -> u32 {
        app.chars().last().and_then(|c| c.to_digit(10)).unwrap_or(0) % count
    }

    fn sharded(count: u32) -> Sharded {
        Sharded {
            map: ShardMap {
                count,
                shard_of: by_digit,
            },
            hashers: (RandomState::new(), RandomState::new()),
            state: RwLock::new(ShardState::default()),
        }
    }

    #[test]
    fn admission_keeps_namespaces_and_objects_of_no_app_and_the_held_shards_apps() {
        let shards = sharded(3);
        let held = set(&[1]);
        assert!(shards.admits(&held, &gk("ConfigMap"), Some("a1")));
        assert!(
            shards.admits(&held, &gk("ConfigMap"), Some("a4")),
            "4 mod 3 is 1"
        );
        assert!(!shards.admits(&held, &gk("ConfigMap"), Some("a2")));
        assert!(shards.admits(&held, &gk("ConfigMap"), None));
        assert!(shards.admits(&held, &gk("Namespace"), Some("a2")));
        assert!(!shards.admits(&set(&[]), &gk("Secret"), Some("a0")));
    }

    #[test]
    fn an_inventory_follows_its_app_and_the_app_label_wins() {
        let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(owner_of(&labels(&[(INVENTORY_LABEL, "a1")])), Some("a1"));
        assert_eq!(
            owner_of(&labels(&[(APP_LABEL, "a2"), (INVENTORY_LABEL, "a1")])),
            Some("a2")
        );
        assert_eq!(owner_of(&labels(&[("tether.dev/role", "member")])), None);
        let inventory = br#"{"metadata":{"name":"tether-inventory-a1","labels":{"tether.dev/inventory":"a1"}},"data":{}}"#;
        assert_eq!(
            held_owner(None, || inventory.to_vec()).as_deref(),
            Some("a1")
        );
        let unread = || -> Vec<u8> { panic!("an app's object is not inflated") };
        assert_eq!(held_owner(Some("a2"), unread).as_deref(), Some("a2"));
    }

    #[test]
    fn a_gained_shard_is_known_only_after_a_list_that_began_once_it_was_held() {
        let mut state = ShardState::default();
        let cm = gk("ConfigMap");
        assert_eq!(state.hold(&set(&[0])), (true, false));
        state.start_listing(&cm);
        state.finish_listing(&cm, HashSet::new());
        assert!(state.knows_all(&cm, 0));
        // Gained: not known in a kind listed before.
        assert_eq!(state.hold(&set(&[0, 1])), (true, false));
        assert!(state.knows_all(&cm, 0));
        assert!(!state.knows_all(&cm, 1));
        // A list that began before the gain completes only what was held then.
        state.start_listing(&cm);
        assert_eq!(state.hold(&set(&[0, 1, 2])), (true, false));
        state.finish_listing(&cm, HashSet::new());
        assert!(state.knows_all(&cm, 1));
        assert!(!state.knows_all(&cm, 2));
        // Never listed: nothing known.
        assert!(!state.knows_all(&gk("Secret"), 0));
    }

    #[test]
    fn a_shard_lost_during_a_list_and_gained_back_is_not_known_from_that_list() {
        let mut state = ShardState::default();
        let cm = gk("ConfigMap");
        state.hold(&set(&[0, 1]));
        state.start_listing(&cm);
        // Lost and back while the list runs: objects of it may have been left out.
        assert_eq!(state.hold(&set(&[0])), (false, true));
        assert_eq!(state.hold(&set(&[0, 1])), (true, false));
        state.finish_listing(&cm, HashSet::new());
        assert!(state.knows_all(&cm, 0));
        assert!(!state.knows_all(&cm, 1));
        // A lost shard is not known, even in a kind listed with it.
        state.start_listing(&cm);
        state.finish_listing(&cm, HashSet::new());
        assert!(state.knows_all(&cm, 1));
        assert_eq!(state.hold(&set(&[0])), (false, true));
        assert!(!state.knows_all(&cm, 1));
        assert_eq!(state.hold(&set(&[0])), (false, false), "no change");
    }

    #[test]
    fn a_left_out_name_hashes_the_same_from_a_key_and_from_an_object() {
        let shards = sharded(2);
        let name: Name = (Some("ns".into()), "web".into());
        let key = key_of(&gk("ConfigMap"), &name);
        assert_eq!(
            shards.hash(name.0.as_deref(), &name.1),
            shards.hash(key.namespace.as_deref(), &key.name)
        );
        assert_ne!(
            shards.hash(Some("ns"), "web"),
            shards.hash(None, "web"),
            "a cluster-scoped name is another object"
        );
        assert_ne!(
            shards.hash(Some("ns"), "web"),
            shards.hash(Some("nsw"), "eb")
        );
    }
}
