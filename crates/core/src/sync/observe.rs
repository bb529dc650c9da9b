//! Observe: the one path that says how an app's live objects stand against Git, for
//! `tether diff`, `tether sync` and `tether serve` alike. It resolves each desired
//! object's kind, reads its live state (from the caller's view, a labelled list per
//! kind, or the object itself), decides what applying it would do (see `decide`), and
//! finds the prune candidates: what the inventory or the app's label claims and Git
//! no longer has.

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::StreamExt as _;
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::cluster::{Cluster, ClusterError, LiveObjects, Resolved};
use tether_diff::diff::{
    DiffOptions, Drift, MaskKey, Mode, ObjectDiff, OpenApiSchemas, diff_object,
};
use tether_diff::manifest::{Manifest, ManifestSet, ObjectId, ObjectKey};
use tether_schema::ownership::{APP_LABEL, FIELD_MANAGER, is_hook};

use super::annotations::{Options, ignores_extraneous};
use super::decide::{self, Grounds};
use super::inventory::Inventory;
use super::item::{Item, Latest, Plan, gvk_of, is_crd, is_namespace, not_validated, read_live};
use super::prune::{self, Verdict};
use super::{SyncError, SyncOptions};

/// A live object the app claims (by inventory or label) that Git no longer has.
pub struct Candidate {
    pub id: ObjectId,
    pub kind: Option<Resolved>,
    pub live: Option<Value>,
    pub verdict: Verdict,
}

/// An app observed: its desired objects, and what prune would consider.
pub struct Observed<'m> {
    pub(super) items: Vec<Item<'m>>,
    pub candidates: Vec<Candidate>,
    /// Compiled once per observation: the schemas of the desired kinds.
    pub(super) schema: OpenApiSchemas,
    pub(super) mask: MaskKey,
}

impl Observed<'_> {
    /// The drift of every desired object and every prune candidate the app owns, as
    /// `tether diff` reports it. An object the server refused to validate is an
    /// error here: a diff cannot say what applying it would do.
    pub fn drift(self) -> Result<Vec<ObjectDiff>, SyncError> {
        let refused = not_validated(&self.items);
        if !refused.is_empty() {
            return Err(SyncError::Refused(refused));
        }
        let mut out: Vec<ObjectDiff> = self
            .items
            .into_iter()
            .map(|item| {
                item.diff.unwrap_or_else(|| ObjectDiff {
                    id: item.manifest.id.clone(),
                    drift: Drift::InSync,
                    desired: None,
                    live: None,
                })
            })
            .collect();
        let options = DiffOptions {
            mode: Mode::Online,
            rules: &[],
            schema: &self.schema,
            mask: &self.mask,
        };
        for candidate in self.candidates {
            // Argo CD's IgnoreExtraneous: not in Git, and not drift either.
            let ignored = candidate.live.as_ref().is_some_and(ignores_extraneous);
            if matches!(candidate.verdict, Verdict::Delete | Verdict::Protected(_)) && !ignored {
                out.push(diff_object(
                    &candidate.id,
                    None,
                    candidate.live.as_ref(),
                    &options,
                ));
            }
        }
        Ok(out)
    }
}

/// Observes `desired` for `options.app` against the cluster. `inventory` is what the
/// app is recorded to own.
pub async fn observe<'m>(
    cluster: &Cluster,
    desired: &'m ManifestSet,
    inventory: &Inventory,
    options: &SyncOptions<'_>,
) -> Result<Observed<'m>, SyncError> {
    let kinds = resolve_kinds(cluster, desired).await?;
    let claimed = claimed_kinds(cluster, inventory, &kinds).await?;
    // Without a caller's view, one labelled list per kind finds the app's objects:
    // a re-sync of an app in sync reads a few lists, not one object at a time.
    let listed;
    let unlisted;
    let (view, desired_view): (&dyn LiveObjects, &dyn LiveObjects) = match options.live {
        Some(view) => (view, view),
        None if options.app.is_empty() => (&Unknown, &Unknown),
        None => {
            listed = list_owned(cluster, &claimed, options.app).await?;
            unlisted = Unlisted(&listed);
            (&listed, &unlisted)
        }
    };
    let mut observed = decided(cluster, view, desired_view, desired, &kinds, options).await?;
    if !options.app.is_empty() {
        observed.candidates =
            candidates(cluster, view, desired, inventory, &claimed, options).await?;
    }
    Ok(observed)
}

/// Observes only `desired` (some objects of an app, for a heal): what applying each
/// would do, decided as [`observe`] decides it, with no prune candidates: which
/// objects the app owns does not change by healing some of them, and finding them
/// would read every object of the app's kinds.
pub async fn observe_objects<'m>(
    cluster: &Cluster,
    desired: &'m ManifestSet,
    options: &SyncOptions<'_>,
) -> Result<Observed<'m>, SyncError> {
    let kinds = resolve_kinds(cluster, desired).await?;
    let view: &dyn LiveObjects = options.live.unwrap_or(&Unknown);
    Ok(decided(cluster, view, view, desired, &kinds, options).await?)
}

/// The desired objects read (through `desired_view`), each with what applying it
/// would do (see `decide`). Hooks are not the app's objects: `tether diff` leaves
/// them out (`sync` has already). The Namespaces are read first, since whether one
/// exists decides whether the objects in it can be dry-run now; then each object is
/// read and decided in one go, `options.concurrency` at a time, so that only the
/// objects in flight (and those to be written) hold a live copy, not all of them at
/// once.
async fn decided<'m>(
    cluster: &Cluster,
    view: &dyn LiveObjects,
    desired_view: &dyn LiveObjects,
    desired: &'m ManifestSet,
    kinds: &HashMap<GroupVersionKind, Option<Resolved>>,
    options: &SyncOptions<'_>,
) -> Result<Observed<'m>, ClusterError> {
    let schema = schemas_for(desired);
    let mask = MaskKey::random();
    let diff_options = DiffOptions {
        mode: Mode::Online,
        rules: options.rules,
        schema: &schema,
        mask: &mask,
    };
    let manifests: Vec<&'m Manifest> = desired
        .objects
        .iter()
        .filter(|manifest| !is_hook(&manifest.object))
        .collect();
    let namespaces = manifests.iter().copied().filter(|m| is_namespace(&m.id));
    let namespaces = read_items(cluster, namespaces, kinds, desired_view, options).await?;
    let grounds = Grounds::find(cluster, view, &manifests, &namespaces).await;
    let one_by_one = decide::one_by_one(options);
    let mut read = namespaces.into_iter();
    // Futures built eagerly, then driven together: with a stream of closures over
    // borrowed items the compiler cannot prove the sync future Send.
    let decisions: Vec<_> = manifests
        .iter()
        .map(|&manifest| {
            let known = is_namespace(&manifest.id).then(|| read.next()).flatten();
            let (grounds, diff_options) = (&grounds, &diff_options);
            async move {
                let item = match known {
                    Some(item) => item,
                    None => read_item(cluster, manifest, kinds, desired_view).await?,
                };
                Ok::<_, ClusterError>(if one_by_one {
                    decide::decide_one(cluster, item, grounds, diff_options, options).await
                } else {
                    item
                })
            }
        })
        .collect();
    let mut items = futures::stream::iter(decisions)
        .buffered(options.concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    if !one_by_one {
        decide::decide(cluster, &mut items, &grounds, &diff_options, options).await;
    }
    Ok(Observed {
        items,
        candidates: Vec::new(),
        schema,
        mask,
    })
}

/// The kind serving each desired object's group, version and kind (`None`: not served).
async fn resolve_kinds(
    cluster: &Cluster,
    desired: &ManifestSet,
) -> Result<HashMap<GroupVersionKind, Option<Resolved>>, ClusterError> {
    let mut kinds: HashMap<GroupVersionKind, Option<Resolved>> = HashMap::new();
    for manifest in &desired.objects {
        let gvk = gvk_of(&manifest.id);
        if let std::collections::hash_map::Entry::Vacant(slot) = kinds.entry(gvk) {
            let resolved = cluster.resolve(slot.key()).await?;
            slot.insert(resolved);
        }
    }
    Ok(kinds)
}

/// The kinds the app may have objects of: the desired ones, and those its inventory
/// records (resolved through any served version when the recorded one is gone).
async fn claimed_kinds(
    cluster: &Cluster,
    inventory: &Inventory,
    desired: &HashMap<GroupVersionKind, Option<Resolved>>,
) -> Result<BTreeMap<(String, String), Resolved>, ClusterError> {
    let mut claimed = BTreeMap::new();
    for (gvk, resolved) in desired {
        if let Some(resolved) = resolved {
            claimed.insert((gvk.group.clone(), gvk.kind.clone()), resolved.clone());
        }
    }
    for entry in &inventory.objects {
        let id = entry.id();
        let gk = (id.group.clone(), id.kind.clone());
        if claimed.contains_key(&gk) {
            continue;
        }
        if let Some(resolved) = resolve_entry(cluster, &id).await? {
            claimed.insert(gk, resolved);
        }
    }
    Ok(claimed)
}

/// The kind serving a recorded object: its own version, or another served version of
/// its group and kind.
async fn resolve_entry(cluster: &Cluster, id: &ObjectId) -> Result<Option<Resolved>, ClusterError> {
    match cluster.resolve(&gvk_of(id)).await? {
        Some(resolved) => Ok(Some(resolved)),
        None => cluster.resolve_group_kind(&id.group, &id.kind).await,
    }
}

/// A view that knows nothing: every object is read from the server.
struct Unknown;

impl LiveObjects for Unknown {
    fn lookup(&self, _: &ObjectKey) -> Option<Option<Value>> {
        None
    }

    fn owned(&self, _: &str, _: &str, _: &str) -> Option<Vec<Value>> {
        None
    }
}

/// Objects found by listing, by key; an object not listed may still exist without the
/// app's label, so a miss is "unknown", never "absent".
struct Listed {
    objects: HashMap<ObjectKey, Value>,
    /// The kinds listed, by (group, kind).
    kinds: HashSet<(String, String)>,
}

impl LiveObjects for Listed {
    fn lookup(&self, key: &ObjectKey) -> Option<Option<Value>> {
        self.objects.get(key).map(|v| Some(v.clone()))
    }

    fn owned(&self, group: &str, kind: &str, _app: &str) -> Option<Vec<Value>> {
        self.kinds
            .contains(&(group.to_string(), kind.to_string()))
            .then(|| {
                self.objects
                    .iter()
                    .filter(|(k, _)| k.group == group && k.kind == kind)
                    .map(|(_, v)| v.clone())
                    .collect()
            })
    }
}

/// The listed objects as the desired ones are read: one of a listed kind that is not
/// listed is taken as absent, as the watch cache takes it. It may still exist without
/// the app's label (one to adopt): the dry run every object missing here gets says so
/// (its answer has a resourceVersion) and decide then reads it. A cold sync so costs a
/// dry run and an apply per object, not a read as well. Namespaces are read: the list
/// holds only the labelled ones, and whether a namespace exists decides, before any
/// dry run, whether the objects in it can be validated now. Prune candidates are
/// still read from the server when not listed (an inventory entry whose label was
/// removed is not the app's, not gone).
struct Unlisted<'l>(&'l Listed);

impl LiveObjects for Unlisted<'_> {
    fn lookup(&self, key: &ObjectKey) -> Option<Option<Value>> {
        if let Some(found) = self.0.lookup(key) {
            return Some(found);
        }
        let namespace = key.group.is_empty() && key.kind == "Namespace";
        let listed = self
            .0
            .kinds
            .contains(&(key.group.clone(), key.kind.clone()));
        (listed && !namespace).then_some(None)
    }

    fn owned(&self, group: &str, kind: &str, app: &str) -> Option<Vec<Value>> {
        self.0.owned(group, kind, app)
    }
}

/// Lists, per claimed kind, the objects labelled for the app (all namespaces).
async fn list_owned(
    cluster: &Cluster,
    claimed: &BTreeMap<(String, String), Resolved>,
    app: &str,
) -> Result<Listed, ClusterError> {
    let selector = format!("{APP_LABEL}={app}");
    let lists = claimed.iter().map(|(gk, kind)| {
        let selector = &selector;
        async move { (gk, cluster.list(kind, None, selector).await) }
    });
    let mut listed = Listed {
        objects: HashMap::new(),
        kinds: HashSet::new(),
    };
    for (gk, result) in futures::future::join_all(lists).await {
        let objects = match result {
            Ok(objects) => objects,
            // Allowed in some namespaces only (a tenant's RBAC): this kind's objects
            // are read one by one instead, and none is found by its label alone.
            Err(ClusterError::Api { code: 403, .. }) => {
                tracing::debug!(group = %gk.0, kind = %gk.1, "may not list across namespaces; reading objects one by one");
                continue;
            }
            Err(err) => return Err(err),
        };
        listed.kinds.insert(gk.clone());
        for object in objects {
            if let Some(key) = key_of(&gk.0, &gk.1, &object) {
                listed.objects.insert(key, object);
            }
        }
    }
    Ok(listed)
}

/// The objects of one kind labelled for `app`, from the server; none when this
/// identity may not list them across namespaces (as [`list_owned`] takes it).
async fn list_labelled(
    cluster: &Cluster,
    kind: &Resolved,
    app: &str,
) -> Result<Vec<Value>, ClusterError> {
    match cluster
        .list(kind, None, &format!("{APP_LABEL}={app}"))
        .await
    {
        Ok(objects) => Ok(objects),
        Err(ClusterError::Api { code: 403, .. }) => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

/// Reads the live state of `manifests`, `options.concurrency` at a time.
async fn read_items<'m>(
    cluster: &Cluster,
    manifests: impl Iterator<Item = &'m Manifest>,
    kinds: &HashMap<GroupVersionKind, Option<Resolved>>,
    view: &dyn LiveObjects,
    options: &SyncOptions<'_>,
) -> Result<Vec<Item<'m>>, ClusterError> {
    let reads: Vec<_> = manifests
        .map(|manifest| read_item(cluster, manifest, kinds, view))
        .collect();
    futures::stream::iter(reads)
        .buffered(options.concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// One desired object with its live state, not decided yet.
async fn read_item<'m>(
    cluster: &Cluster,
    manifest: &'m Manifest,
    kinds: &HashMap<GroupVersionKind, Option<Resolved>>,
    view: &dyn LiveObjects,
) -> Result<Item<'m>, ClusterError> {
    let kind = kinds.get(&gvk_of(&manifest.id)).cloned().flatten();
    let live = match &kind {
        Some(kind) => read_live(cluster, view, kind, &manifest.id).await?,
        None => None,
    };
    Ok(Item {
        manifest,
        options: Options::of(&manifest.object),
        kind,
        latest: Latest::AsRead,
        live,
        plan: Plan::Unchanged,
        diff: None,
        result: None,
        undecided: false,
        written_in: None,
    })
}

/// Prune candidates: (inventory ∪ live objects labelled for the app) − desired, each
/// with its live object and what prune may do with it. An object tether applied and
/// labelled is found even when no inventory names it (a sync killed before recording
/// it); one someone else created and labelled by hand is not tether's to delete.
async fn candidates(
    cluster: &Cluster,
    view: &dyn LiveObjects,
    desired: &ManifestSet,
    inventory: &Inventory,
    claimed: &BTreeMap<(String, String), Resolved>,
    options: &SyncOptions<'_>,
) -> Result<Vec<Candidate>, ClusterError> {
    let wanted: HashSet<ObjectKey> = desired.objects.iter().map(|m| m.id.key()).collect();
    let mut found: BTreeMap<ObjectKey, (ObjectId, Option<Value>)> = BTreeMap::new();
    for id in prune::candidates(inventory, &wanted) {
        found.insert(id.key(), (id, None));
    }
    for ((group, kind), resolved) in claimed {
        let owned = match view.owned(group, kind, options.app) {
            Some(owned) => owned,
            // The caller's cache does not hold all of the app's objects of this kind
            // (not listed yet, or the app's shard just arrived): the server says.
            None if options.live.is_some() => list_labelled(cluster, resolved, options.app).await?,
            None => Vec::new(),
        };
        for object in owned {
            let Some(key) = key_of(group, kind, &object) else {
                continue;
            };
            // Labelled by hand is not enough: an orphan is what tether itself applied.
            // A hook's instance is the hook's to keep or delete, never prune's.
            if wanted.contains(&key)
                || found.contains_key(&key)
                || !applied_by_tether(&object)
                || is_hook(&object)
            {
                continue;
            }
            let id = ObjectId {
                group: group.clone(),
                version: resolved.resource.version.clone(),
                kind: kind.clone(),
                namespace: key.namespace.clone(),
                name: key.name.clone(),
            };
            found.insert(key, (id, Some(object)));
        }
    }
    let mut out = Vec::new();
    for (_, (id, known)) in found {
        let gk = (id.group.clone(), id.kind.clone());
        let kind = match claimed.get(&gk) {
            Some(kind) => Some(kind.clone()),
            None => resolve_entry(cluster, &id).await?,
        };
        let live = match (&kind, known) {
            (_, Some(live)) => Some(live),
            (Some(kind), None) => read_live(cluster, view, kind, &id).await?,
            // Neither the kind nor any version of it is served: the object is gone
            // with its CustomResourceDefinition.
            (None, None) => None,
        };
        let verdict = prune::verdict(options.app, live.as_ref());
        out.push(Candidate {
            id,
            kind,
            live,
            verdict,
        });
    }
    Ok(out)
}

/// Whether tether's field manager applied the object (it owns fields by apply).
fn applied_by_tether(object: &Value) -> bool {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|entries| {
            entries.iter().any(|e| {
                e.get("manager").and_then(Value::as_str) == Some(FIELD_MANAGER)
                    && e.get("operation").and_then(Value::as_str) == Some("Apply")
            })
        })
}

fn key_of(group: &str, kind: &str, object: &Value) -> Option<ObjectKey> {
    Some(ObjectKey {
        group: group.to_string(),
        kind: kind.to_string(),
        namespace: object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string),
        name: object.pointer("/metadata/name")?.as_str()?.to_string(),
    })
}

/// The schemas of the desired kinds; CRDs in the set declare their kinds'.
fn schemas_for(desired: &ManifestSet) -> OpenApiSchemas {
    let crds = desired
        .objects
        .iter()
        .filter(|m| is_crd(&m.id))
        .map(|m| &m.object);
    OpenApiSchemas::new(desired.objects.iter().map(|m| &m.id), crds)
}
