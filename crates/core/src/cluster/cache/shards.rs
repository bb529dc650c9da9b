//! Admission by shard: which objects a replica holds, and the hashes of those it leaves
//! out, so that "not here" never reads as "absent" (see the cache's module doc).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher as _, RandomState};

use kube::api::DynamicObject;
use parking_lot::RwLock;
use tether_diff::manifest::ObjectKey;
use tether_schema::ownership::{APP_LABEL, INVENTORY_LABEL};

use super::store::KindObjects;
use super::{Cache, Changed, GroupKind, Inner, Resolved, changed, keyed, replace_kind};

/// How apps map to shards: the shard module's hash, given from above (the cache sits
/// below the loop that owns shards, and must not compute them its own way).
#[derive(Debug, Clone, Copy)]
pub struct ShardMap {
    /// The number of shards; one or none holds everything.
    pub count: u32,
    /// An app's shard from its identity (the `tether.dev/app` label's value).
    pub shard_of: fn(&str, u32) -> u32,
}

/// Admission by shard, with what is known of each kind.
pub(super) struct Sharded {
    pub(super) map: ShardMap,
    /// Two keyed hashers make a 128-bit hash of a left-out object's namespace and name:
    /// a collision (about 2^-128 per pair) would only make a lookup "not known".
    pub(super) hashers: (RandomState, RandomState),
    pub(super) state: RwLock<ShardState>,
}

/// Which shards are held, and per kind which of them are complete here. Locked before
/// `Inner::objects` wherever both are taken.
#[derive(Debug, Default)]
pub(super) struct ShardState {
    pub(super) held: BTreeSet<u32>,
    pub(super) kinds: HashMap<GroupKind, KindShards>,
}

#[derive(Debug, Default)]
pub(super) struct KindShards {
    /// Shards whose objects of this kind are all here: held without a break since the
    /// start of the kind's last complete list.
    pub(super) complete: BTreeSet<u32>,
    /// The same for a list in progress, from its start; it becomes `complete` when done.
    pub(super) listing: Option<BTreeSet<u32>>,
    /// Hashes of the objects of this kind left out (held elsewhere).
    pub(super) elsewhere: HashSet<u128>,
}

impl ShardState {
    /// Holds `held` from now on; returns whether a shard was gained, and one lost. A
    /// shard not held stops being complete in every kind and in every list under way,
    /// so one gained back counts as known only after a list that began after it.
    pub(super) fn hold(&mut self, held: &BTreeSet<u32>) -> (bool, bool) {
        let gained = held.difference(&self.held).next().is_some();
        let lost = self.held.difference(held).next().is_some();
        self.held = held.clone();
        for kind in self.kinds.values_mut() {
            kind.complete.retain(|s| held.contains(s));
            if let Some(listing) = &mut kind.listing {
                listing.retain(|s| held.contains(s));
            }
        }
        (gained, lost)
    }

    /// A list of `gk` begins: the shards held now are the ones it can complete.
    pub(super) fn start_listing(&mut self, gk: &GroupKind) {
        let held = self.held.clone();
        self.kinds.entry(gk.clone()).or_default().listing = Some(held);
    }

    /// A list of `gk` is in: its shards are complete, `elsewhere` what it left out.
    pub(super) fn finish_listing(&mut self, gk: &GroupKind, elsewhere: HashSet<u128>) {
        let kind = self.kinds.entry(gk.clone()).or_default();
        kind.complete = kind.listing.take().unwrap_or_default();
        kind.elsewhere = elsewhere;
    }

    /// Whether every object of `gk` in `shard` is here.
    pub(super) fn knows_all(&self, gk: &GroupKind, shard: u32) -> bool {
        self.held.contains(&shard)
            && self
                .kinds
                .get(gk)
                .is_some_and(|kind| kind.complete.contains(&shard))
    }
}

impl Sharded {
    pub(super) fn shard(&self, app: &str) -> u32 {
        (self.map.shard_of)(app, self.map.count)
    }

    /// Whether an object of `gk` belonging to `owner` is held here: Namespaces and
    /// objects of no app always (see [`owner_of`]), an app's when its shard is held.
    pub(super) fn admits(&self, held: &BTreeSet<u32>, gk: &GroupKind, owner: Option<&str>) -> bool {
        is_namespace(gk) || owner.is_none_or(|app| held.contains(&self.shard(app)))
    }

    pub(super) fn hash(&self, namespace: Option<&str>, name: &str) -> u128 {
        let high = self.hashers.0.hash_one((namespace, name));
        let low = self.hashers.1.hash_one((namespace, name));
        (u128::from(high) << 64) | u128::from(low)
    }
}

pub(super) fn is_namespace(gk: &GroupKind) -> bool {
    gk.0.is_empty() && gk.1 == "Namespace"
}

/// The app an object belongs to, for admission: its `tether.dev/app` label, or for an
/// inventory ConfigMap the app it records (read from the server, never from here, and
/// one per app: it follows its app). Other objects of no app (member Leases, an object
/// whose app label was removed by hand) are few and kept on every replica: a lookup of
/// a desired object that lost its label then still answers from here.
pub(super) fn owner_of(labels: &std::collections::BTreeMap<String, String>) -> Option<&str> {
    labels
        .get(APP_LABEL)
        .or_else(|| labels.get(INVENTORY_LABEL))
        .map(String::as_str)
}

/// [`owner_of`] for an object as held: its app, or read from its JSON (inflated only
/// for the few objects of no app).
pub(super) fn held_owner(app: Option<&str>, json: impl FnOnce() -> Vec<u8>) -> Option<String> {
    if let Some(app) = app {
        return Some(app.to_string());
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        labels: std::collections::BTreeMap<String, String>,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Meta,
    }
    let object: Object = serde_json::from_slice(&json()).ok()?;
    owner_of(&object.metadata.labels).map(str::to_string)
}

impl Cache {
    /// The shard state, read-locked, with shards; None without.
    pub(super) fn shard_state(&self) -> Option<parking_lot::RwLockReadGuard<'_, ShardState>> {
        let shards = self.inner.shards.as_ref()?;
        Some(shards.state.read())
    }

    /// Whether `key`, absent here, is an object left out (another replica's app).
    pub(super) fn left_out(
        &self,
        state: Option<&ShardState>,
        gk: &GroupKind,
        key: &ObjectKey,
    ) -> bool {
        let (Some(shards), Some(state)) = (&self.inner.shards, state) else {
            return false;
        };
        let hash = shards.hash(key.namespace.as_deref(), &key.name);
        state
            .kinds
            .get(gk)
            .is_some_and(|kind| kind.elsewhere.contains(&hash))
    }
}

/// A list of `gk` begins.
pub(super) fn start_listing(inner: &Inner, gk: &GroupKind) {
    if let Some(shards) = &inner.shards {
        shards.state.write().start_listing(gk);
    }
}

/// The hash of a listed object to leave out, or None to keep it.
pub(super) fn left_out(inner: &Inner, gk: &GroupKind, object: &DynamicObject) -> Option<u128> {
    let shards = inner.shards.as_ref()?;
    let state = shards.state.read();
    if shards.admits(&state.held, gk, owner_of_object(object)) {
        return None;
    }
    let name = object.metadata.name.as_deref()?;
    Some(shards.hash(object.metadata.namespace.as_deref(), name))
}

fn owner_of_object(object: &DynamicObject) -> Option<&str> {
    object.metadata.labels.as_ref().and_then(owner_of)
}

/// A list is in: what it kept replaces the kind, less what a shard lost meanwhile.
pub(super) fn finish_listing(
    inner: &Inner,
    gk: &GroupKind,
    mut fresh: KindObjects,
    mut elsewhere: HashSet<u128>,
) -> Vec<Changed> {
    let Some(shards) = &inner.shards else {
        return replace_kind(inner, gk, fresh);
    };
    let mut state = shards.state.write();
    if !is_namespace(gk) {
        fresh.retain(|name, app, json| {
            let keep = shards.admits(&state.held, gk, held_owner(app, json).as_deref());
            if !keep {
                elsewhere.insert(shards.hash(name.0.as_deref(), &name.1));
            }
            keep
        });
    }
    state.finish_listing(gk, elsewhere);
    // Under the shard lock: a shard cannot be lost between the check and the insert.
    replace_kind(inner, gk, fresh)
}

/// A watch event of an object, with shards: held, or remembered as left out.
pub(super) fn apply_sharded(
    inner: &Inner,
    gk: &GroupKind,
    kind: &Resolved,
    object: DynamicObject,
) -> Option<Changed> {
    let shards = inner.shards.as_ref()?;
    let mut state = shards.state.write();
    let admitted = shards.admits(&state.held, gk, owner_of_object(&object));
    let hash = shards.hash(
        object.metadata.namespace.as_deref(),
        object.metadata.name.as_deref()?,
    );
    let elsewhere = &mut state.kinds.entry(gk.clone()).or_default().elsewhere;
    let mut objects = inner.objects.write();
    let held = objects.entry(gk.clone()).or_default();
    if admitted {
        let (name, stored) = keyed(kind, object)?;
        elsewhere.remove(&hash);
        let change = changed(gk, &name, stored.app.as_deref());
        held.insert(name, stored.app.as_deref(), &stored.json);
        Some(change)
    } else {
        elsewhere.insert(hash);
        // Relabelled to another replica's app: gone from its old app's view.
        let name = (
            object.metadata.namespace.as_deref().map(Box::from),
            Box::from(object.metadata.name.as_deref()?),
        );
        let app = held.app(&name).map(str::to_string);
        held.remove(&name)
            .then(|| changed(gk, &name, app.as_deref()))
    }
}

/// A deletion, with shards: announced only when the object was held here.
pub(super) fn delete_sharded(
    inner: &Inner,
    gk: &GroupKind,
    object: &DynamicObject,
) -> Option<Changed> {
    let shards = inner.shards.as_ref()?;
    let mut state = shards.state.write();
    let namespace = object.metadata.namespace.as_deref();
    let name = object.metadata.name.as_deref()?;
    if let Some(kind) = state.kinds.get_mut(gk) {
        kind.elsewhere.remove(&shards.hash(namespace, name));
    }
    let name = (namespace.map(Box::from), Box::from(name));
    let mut objects = inner.objects.write();
    let held = objects.get_mut(gk)?;
    let app = held.app(&name).map(str::to_string);
    held.remove(&name)
        .then(|| changed(gk, &name, app.as_deref()))
}
