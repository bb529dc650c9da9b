//! Acting on drift: make the cluster match the desired state with as few writes as
//! possible, in an order that works the first time, deleting only what the app owns.
//!
//! A sync validates everything before it writes anything: every object that would
//! change is dry-run first, and one refusal means nothing is applied. Objects that
//! cannot be dry-run yet (their CRD or Namespace is created by this same sync) are
//! dry-run as soon as what they need exists, before any of them is applied.

pub mod health;
pub mod inventory;
pub mod plan;
pub mod prune;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::core::GroupVersionKind;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::{Cluster, ClusterError, Resolved};
use crate::diff::{
    Change, DiffOptions, Drift, IgnoreRule, MaskKey, Mode, OpenApiSchemas, diff, is_secret,
    unchanged_by_apply,
};
use crate::manifest::{GroupKind, Manifest, ManifestSet, ObjectId, ObjectKey, Scope, crd_scope};
use crate::ownership::{
    APP_LABEL, DEFAULT_INVENTORY_NAMESPACE, FIELD_MANAGER, MANAGED_BY_LABEL, MANAGED_BY_VALUE,
    PRUNE_ANNOTATION, PRUNE_DISABLED, inventory_name,
};

use health::{Assessment, Health};
use inventory::{Entry, Inventory, InventoryError};
use plan::{Step, WaveError};

/// How many requests a sync keeps in flight: enough to hide round trips, few enough
/// not to trip API priority and fairness on a real cluster (kubectl's own parallel
/// operations default to a similar figure).
pub const DEFAULT_CONCURRENCY: usize = 16;

/// How long a CRD created by a sync may take to become Established and served.
const CRD_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a sync looks again at something it waits for (a CRD, a deletion, health).
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How long `--replace-immutable` waits for the old object to be gone.
const REPLACE_TIMEOUT: Duration = Duration::from_secs(60);

/// A view of live objects kept by someone else (the service's watch cache), so that a
/// sync of an app in sync needs no request at all.
pub trait LiveObjects: Send + Sync {
    /// The live object: `Some(None)` when it is known not to exist, `None` when this
    /// view does not know (the sync then asks the API server).
    fn lookup(&self, key: &ObjectKey) -> Option<Option<Value>>;
}

/// What a sync may do.
#[derive(Clone)]
pub struct SyncOptions<'a> {
    /// Names the inventory; every applied object is labelled for it.
    pub app: &'a str,
    pub inventory_namespace: &'a str,
    /// Take fields other managers own (server-side apply `force`).
    pub force: bool,
    pub prune: bool,
    pub allow_mass_prune: bool,
    /// Validate and report, write nothing.
    pub dry_run: bool,
    /// Delete and recreate an object whose change touches an immutable field.
    pub replace_immutable: bool,
    /// Wait for each wave to be Healthy, within this overall time.
    pub wait: Option<Duration>,
    pub concurrency: usize,
    /// Differences these rules ignore are not a reason to write.
    pub rules: &'a [IgnoreRule],
    /// Live objects already known; without it, every object is read from the server.
    pub live: Option<&'a dyn LiveObjects>,
    /// The app's inventory as the caller last saw it written; without it, it is read.
    pub inventory: Option<&'a Inventory>,
    /// Told after each step how many desired objects are done, of how many.
    pub progress: Option<&'a (dyn Fn(usize, usize) + Sync)>,
}

impl<'a> SyncOptions<'a> {
    pub fn new(app: &'a str) -> SyncOptions<'a> {
        SyncOptions {
            app,
            inventory_namespace: DEFAULT_INVENTORY_NAMESPACE,
            force: true,
            prune: false,
            allow_mass_prune: false,
            dry_run: false,
            replace_immutable: false,
            wait: None,
            concurrency: DEFAULT_CONCURRENCY,
            rules: &[],
            live: None,
            inventory: None,
            progress: None,
        }
    }
}

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Created,
    Configured,
    /// Deleted and created again (`--replace-immutable`).
    Replaced,
    Unchanged,
    Pruned,
    Skipped,
    Failed,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Replaced => "replaced",
            Action::Unchanged => "unchanged",
            Action::Pruned => "pruned",
            Action::Skipped => "skipped",
            Action::Failed => "failed",
        }
    }
}

/// One object's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectResult {
    pub id: ObjectId,
    pub action: Action,
    /// Absent for pruned and skipped objects.
    pub health: Option<Assessment>,
    /// Why, for a person: the server's refusal, what changed, why it was skipped.
    pub message: String,
    /// For a configured object, what differed (Secret values masked).
    pub changes: Vec<Change>,
}

/// The outcome of a sync.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncReport {
    pub app: String,
    pub revision: Option<String>,
    pub dry_run: bool,
    pub objects: Vec<ObjectResult>,
    /// Why prune did not run, when a guard stopped it.
    pub prune_refused: Option<String>,
    /// The worst health of the desired objects.
    pub health: Health,
    /// With `--wait`: why waiting ended without every object Healthy.
    pub wait_failed: Option<String>,
    /// The app's inventory after the sync (as written, or as it would be).
    pub inventory: Inventory,
}

impl SyncReport {
    /// Whether the sync needs a person: an object failed, prune was refused, or the
    /// app did not become healthy in time.
    pub fn failed(&self) -> bool {
        self.prune_refused.is_some()
            || self.wait_failed.is_some()
            || self.objects.iter().any(|o| o.action == Action::Failed)
    }

    pub fn count(&self, action: Action) -> usize {
        self.objects.iter().filter(|o| o.action == action).count()
    }

    /// Whether the sync wrote (or, in a dry run, would write) anything.
    pub fn changed(&self) -> bool {
        self.objects.iter().any(|o| {
            matches!(
                o.action,
                Action::Created | Action::Configured | Action::Replaced | Action::Pruned
            )
        })
    }
}

/// Why a sync could not run at all (per-object failures are in the report).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("invalid sync waves:\n  {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Waves(Vec<WaveError>),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Inventory(#[from] InventoryError),
}

impl SyncError {
    pub fn is_retryable(&self) -> bool {
        match self {
            SyncError::Waves(_) | SyncError::Inventory(_) => false,
            SyncError::Cluster(err) => err.is_retryable(),
        }
    }
}

/// What a sync will do with a desired object.
#[derive(Debug, Clone, PartialEq)]
enum Plan {
    Unchanged,
    Create,
    Configure(String, Vec<Change>),
    Replace(String),
    /// Cannot be dry-run until its CRD or Namespace exists; that one is in this sync.
    Deferred(Need),
    Failed(String),
}

/// What a deferred object waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Need {
    /// Its kind, defined by a CRD in this sync.
    kind: Option<GroupVersionKind>,
    /// Its namespace, created by this sync.
    namespace: Option<String>,
}

struct Item<'m> {
    manifest: &'m Manifest,
    kind: Option<Resolved>,
    live: Option<Value>,
    plan: Plan,
    /// The object as the server last returned it (apply answer or live object).
    latest: Option<Value>,
    result: Option<(Action, String)>,
}

/// Makes the cluster match `desired` for `options.app`.
pub async fn sync(
    cluster: &Cluster,
    desired: &ManifestSet,
    revision: Option<&str>,
    options: &SyncOptions<'_>,
) -> Result<SyncReport, SyncError> {
    let started = Instant::now();
    let steps =
        plan::plan(desired.objects.iter().map(|m| (&m.id, &m.object))).map_err(SyncError::Waves)?;
    let schema = schemas_for(desired);
    let mask = MaskKey::random();
    let diff_options = DiffOptions {
        mode: Mode::Online,
        rules: options.rules,
        schema: &schema,
        mask: &mask,
    };
    let mut items = observe(cluster, desired, options).await?;
    decide(cluster, &mut items, &diff_options, options).await;

    let inventory = match options.inventory {
        Some(known) => known.clone(),
        None => read_inventory(cluster, options.app, options.inventory_namespace).await?,
    };
    let failures = items
        .iter()
        .filter(|i| matches!(i.plan, Plan::Failed(_)))
        .count();
    let mut report = SyncReport {
        app: options.app.to_string(),
        revision: revision.map(str::to_string),
        dry_run: options.dry_run,
        objects: Vec::new(),
        prune_refused: None,
        health: Health::Healthy,
        wait_failed: None,
        inventory: inventory.clone(),
    };
    if failures > 0 {
        let why = format!("not applied: {failures} objects failed validation");
        report.objects = finish(items, &why);
        report.health = worst(&report.objects);
        return Ok(report);
    }
    if options.dry_run {
        report.objects = finish(items, "");
        report.health = worst(&report.objects);
        prune_all(cluster, &inventory, desired, options, &mut report).await?;
        return Ok(report);
    }

    let completed = apply_steps(cluster, &mut items, &steps, &diff_options, options, started).await;
    report.wait_failed = completed.err();
    let skipped = if report.wait_failed.is_some() {
        "not applied: an earlier wave did not become healthy"
    } else {
        "not applied: an earlier step failed"
    };
    let any_failed = items
        .iter()
        .any(|i| matches!(i.result, Some((Action::Failed, _))));
    report.objects = finish(items, skipped);
    report.health = worst(&report.objects);

    let mut kept: Vec<Entry> = Vec::new();
    if !any_failed && report.wait_failed.is_none() {
        kept = prune_all(cluster, &inventory, desired, options, &mut report).await?;
    } else {
        // Nothing is pruned after a failure: what the app owns stays recorded.
        kept.extend(
            prune::candidates(&inventory, &desired_keys(desired))
                .iter()
                .map(Entry::of),
        );
    }
    let next = Inventory {
        revision: revision.map(str::to_string),
        objects: desired
            .objects
            .iter()
            .map(|m| Entry::of(&m.id))
            .chain(kept)
            .collect(),
    };
    if next != inventory {
        write_inventory(cluster, &next, options).await?;
    }
    report.inventory = next;
    if report.changed() || report.failed() {
        tracing::info!(
            app = options.app,
            objects = desired.len(),
            created = report.count(Action::Created),
            configured = report.count(Action::Configured),
            pruned = report.count(Action::Pruned),
            failed = report.count(Action::Failed),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "sync finished"
        );
    }
    Ok(report)
}

/// The live object named by `id` as `kind` addresses it: from the caller's view when
/// it knows, else from the server.
async fn read_live(
    cluster: &Cluster,
    options: &SyncOptions<'_>,
    kind: &Resolved,
    id: &ObjectId,
) -> Result<Option<Value>, ClusterError> {
    let namespace = namespace_of(kind, id);
    if let Some(view) = options.live {
        let key = ObjectKey {
            group: id.group.clone(),
            kind: id.kind.clone(),
            namespace: namespace.map(str::to_string),
            name: id.name.clone(),
        };
        if let Some(known) = view.lookup(&key) {
            return Ok(known);
        }
    }
    cluster.get(kind, namespace, &id.name).await
}

/// Objects found by listing, by key; an object not listed may still exist without the
/// app's label, so a miss is "unknown", never "absent".
struct Listed(HashMap<ObjectKey, Value>);

impl LiveObjects for Listed {
    fn lookup(&self, key: &ObjectKey) -> Option<Option<Value>> {
        self.0.get(key).map(|v| Some(v.clone()))
    }
}

/// Lists, per kind and namespace of the desired set, the objects labelled for the app.
async fn list_owned(
    cluster: &Cluster,
    desired: &ManifestSet,
    kinds: &HashMap<GroupVersionKind, Option<Resolved>>,
    options: &SyncOptions<'_>,
) -> Result<Listed, ClusterError> {
    let selector = format!("{}={}", APP_LABEL, options.app);
    let mut groups: Vec<(GroupVersionKind, Option<String>)> = Vec::new();
    for manifest in &desired.objects {
        let gvk = gvk_of(&manifest.id);
        let Some(Some(kind)) = kinds.get(&gvk) else {
            continue;
        };
        let group = (gvk, namespace_of(kind, &manifest.id).map(str::to_string));
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    let lists: Vec<_> = groups
        .iter()
        .filter_map(|(gvk, namespace)| {
            let kind = kinds.get(gvk)?.as_ref()?;
            let selector = &selector;
            Some(async move {
                let objects = cluster.list(kind, namespace.as_deref(), selector).await?;
                Ok::<_, ClusterError>((gvk, objects))
            })
        })
        .collect();
    let mut found = HashMap::new();
    for listed in futures::future::join_all(lists).await {
        let (gvk, objects) = listed?;
        for object in objects {
            let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            let key = ObjectKey {
                group: gvk.group.clone(),
                kind: gvk.kind.clone(),
                namespace: object
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                name: name.to_string(),
            };
            found.insert(key, object);
        }
    }
    Ok(Listed(found))
}

/// Resolves every kind and reads every desired object's live state.
async fn observe<'m>(
    cluster: &Cluster,
    desired: &'m ManifestSet,
    options: &SyncOptions<'_>,
) -> Result<Vec<Item<'m>>, SyncError> {
    let mut kinds: HashMap<GroupVersionKind, Option<Resolved>> = HashMap::new();
    for manifest in &desired.objects {
        let gvk = gvk_of(&manifest.id);
        if let std::collections::hash_map::Entry::Vacant(slot) = kinds.entry(gvk) {
            let resolved = cluster.resolve(slot.key()).await?;
            slot.insert(resolved);
        }
    }
    // Without a caller's view, one list per kind and namespace finds the objects
    // already labelled for the app: a re-sync of an app in sync reads a few lists,
    // not one object at a time.
    let listed;
    let options = &match options.live {
        Some(_) => options.clone(),
        None => {
            listed = list_owned(cluster, desired, &kinds, options).await?;
            SyncOptions {
                live: Some(&listed),
                ..options.clone()
            }
        }
    };
    // Futures built eagerly, then driven together: with a stream of closures over
    // borrowed items the compiler cannot prove the sync future Send.
    let reads: Vec<_> = desired
        .objects
        .iter()
        .map(|manifest| {
            let kind = kinds.get(&gvk_of(&manifest.id)).cloned().flatten();
            async move {
                let live = match &kind {
                    Some(kind) => read_live(cluster, options, kind, &manifest.id).await?,
                    None => None,
                };
                Ok::<_, ClusterError>(Item {
                    manifest,
                    kind,
                    latest: live.clone(),
                    live,
                    plan: Plan::Unchanged,
                    result: None,
                })
            }
        })
        .collect();
    let items: Vec<Item<'m>> = futures::stream::iter(reads)
        .buffered(options.concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    Ok(items)
}

/// Decides what each object needs, dry-running every object that would change.
async fn decide(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) {
    let crd_kinds = crd_kinds(items.iter().map(|i| i.manifest));
    let namespaces = namespaces_present(cluster, options, items).await;
    for item in items.iter_mut() {
        let id = &item.manifest.id;
        let namespaced = match &item.kind {
            Some(kind) => kind.namespaced,
            None => match crd_kinds.get(&id.group_kind()) {
                Some(namespaced) => *namespaced,
                None => {
                    item.plan = Plan::Failed(format!(
                        "the cluster does not serve {}/{} and no CustomResourceDefinition in this revision defines it",
                        id.api_version(),
                        id.kind
                    ));
                    continue;
                }
            },
        };
        let mut need = Need {
            kind: item.kind.is_none().then(|| gvk_of(id)),
            namespace: None,
        };
        if namespaced && let Some(ns) = &id.namespace {
            match namespaces.get(ns) {
                Some(true) => {}
                Some(false) => need.namespace = Some(ns.clone()),
                None => {
                    item.plan = Plan::Failed(format!(
                        "namespace {ns:?} neither exists nor is in this revision"
                    ));
                    continue;
                }
            }
        }
        if need.kind.is_some() || need.namespace.is_some() {
            item.plan = Plan::Deferred(need);
            continue;
        }
        item.plan = match &item.live {
            Some(live)
                if unchanged_by_apply(
                    id,
                    &item.manifest.object,
                    live,
                    FIELD_MANAGER,
                    diff_options.schema,
                ) =>
            {
                Plan::Unchanged
            }
            _ => Plan::Create, // refined by the dry run below
        };
    }
    let checks: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].plan == Plan::Create)
        .collect();
    let answers = dry_run_all(cluster, items, checks, diff_options, options).await;
    for (i, plan) in answers {
        items[i].plan = plan;
    }
}

/// Dry-runs the items at `indices`, `options.concurrency` at a time.
async fn dry_run_all(
    cluster: &Cluster,
    items: &[Item<'_>],
    indices: Vec<usize>,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) -> Vec<(usize, Plan)> {
    let runs: Vec<_> = indices
        .into_iter()
        .map(|i| {
            let item = &items[i];
            async move { (i, dry_run(cluster, item, diff_options, options).await) }
        })
        .collect();
    futures::stream::iter(runs)
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await
}

/// Asks the server what applying the object would do, and what that means.
async fn dry_run(
    cluster: &Cluster,
    item: &Item<'_>,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) -> Plan {
    let Some(kind) = &item.kind else {
        return Plan::Failed("the kind is not served".into());
    };
    let id = &item.manifest.id;
    match cluster
        .dry_run_apply(kind, &item.manifest.object, options.force)
        .await
    {
        Ok(answer) => {
            let adopted;
            let live = match &item.live {
                Some(live) => live,
                None if !exists(&answer) => return Plan::Create,
                // Absent from the app's view (a cache of the objects labelled for it)
                // yet on the server: an object this sync adopts. Its changes are
                // reported against what is there, never as a creation.
                None => match cluster.get(kind, namespace_of(kind, id), &id.name).await {
                    Ok(Some(live)) => {
                        adopted = live;
                        &adopted
                    }
                    Ok(None) => return Plan::Create,
                    Err(err) => return Plan::Failed(server_message(id, &err)),
                },
            };
            match diff(id, Some(&answer), Some(live), diff_options) {
                Drift::InSync => Plan::Unchanged,
                drift => Plan::Configure(describe_changes(&drift), drift.changes().to_vec()),
            }
        }
        Err(err) if item.live.is_some() && is_immutable(&err) && options.replace_immutable => {
            Plan::Replace(server_message(id, &err))
        }
        Err(err) if is_immutable(&err) => Plan::Failed(format!(
            "{} (pass --replace-immutable to delete and recreate it)",
            server_message(id, &err)
        )),
        Err(err) => Plan::Failed(server_message(id, &err)),
    }
}

/// Whether a dry-run answer is an object the server already stores: a would-be
/// creation has no resourceVersion yet (the registry assigns one when it persists).
fn exists(answer: &Value) -> bool {
    answer
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
}

/// Applies the steps in order; stops at the first step with a failure. Returns why
/// waiting for health failed, if it did.
async fn apply_steps(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    steps: &[Step],
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
    started: Instant,
) -> Result<(), String> {
    let mut created_namespaces: HashSet<String> = HashSet::new();
    let mut served: HashSet<GroupVersionKind> = HashSet::new();
    for (n, step) in steps.iter().enumerate() {
        // Deferred objects whose CRD or Namespace now exists are validated before
        // anything that depends on them is written.
        if !validate_deferred(
            cluster,
            items,
            &created_namespaces,
            &served,
            diff_options,
            options,
        )
        .await
        {
            return Ok(());
        }
        let writes: Vec<_> = step
            .objects
            .iter()
            .copied()
            .filter(|&i| items[i].result.is_none())
            .map(|i| {
                let item = &items[i];
                async move { (i, execute(cluster, item, options).await) }
            })
            .collect();
        let results: Vec<(usize, Executed)> = futures::stream::iter(writes)
            .buffer_unordered(options.concurrency.max(1))
            .collect()
            .await;
        let mut failed = false;
        for (i, result) in results {
            let item = &mut items[i];
            match result {
                Ok((action, answer)) => {
                    if let Some(answer) = answer {
                        item.latest = Some(answer);
                    }
                    let message = match &item.plan {
                        Plan::Configure(m, _) | Plan::Replace(m) => m.clone(),
                        _ => String::new(),
                    };
                    item.result = Some((action, message));
                    let id = &item.manifest.id;
                    if id.group.is_empty() && id.kind == "Namespace" {
                        created_namespaces.insert(id.name.clone());
                    }
                }
                Err(message) => {
                    failed = true;
                    item.result = Some((Action::Failed, message));
                }
            }
        }
        if let Some(progress) = options.progress {
            let done = items.iter().filter(|i| i.result.is_some()).count();
            progress(done, items.len());
        }
        if failed {
            return Ok(());
        }
        // CRDs this step wrote; an unchanged one is already established and served.
        let crds: Vec<usize> = step
            .objects
            .iter()
            .copied()
            .filter(|&i| is_crd(&items[i].manifest.id))
            .filter(|&i| !matches!(items[i].result, Some((Action::Unchanged, _))))
            .collect();
        if !crds.is_empty() {
            match wait_for_crds(cluster, items, &crds).await {
                Some(kinds) => served.extend(kinds),
                None => return Ok(()),
            }
        }
        let wave_done = steps.get(n + 1).is_none_or(|next| next.wave != step.wave);
        if let (Some(timeout), true) = (options.wait, wave_done) {
            let wave: Vec<usize> = steps
                .iter()
                .filter(|s| s.wave == step.wave)
                .flat_map(|s| s.objects.iter().copied())
                .collect();
            wait_healthy(cluster, items, &wave, started + timeout).await?;
        }
    }
    Ok(())
}

/// Dry-runs the deferred objects whose prerequisites now exist; false when any is
/// refused (they are marked failed, and nothing more is applied).
async fn validate_deferred(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    namespaces: &HashSet<String>,
    served: &HashSet<GroupVersionKind>,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) -> bool {
    let mut ready = Vec::new();
    for (i, item) in items.iter_mut().enumerate() {
        let Plan::Deferred(need) = &item.plan else {
            continue;
        };
        let kind_met = need.kind.as_ref().is_none_or(|gvk| served.contains(gvk));
        let namespace_met = need
            .namespace
            .as_ref()
            .is_none_or(|ns| namespaces.contains(ns));
        if !(kind_met && namespace_met) {
            continue;
        }
        if item.kind.is_none() {
            item.plan = match cluster.resolve(&gvk_of(&item.manifest.id)).await {
                Ok(Some(kind)) => {
                    item.kind = Some(kind);
                    Plan::Create
                }
                Ok(None) => Plan::Failed("the kind is still not served".into()),
                Err(err) => Plan::Failed(err.to_string()),
            };
            if let Plan::Failed(message) = &item.plan {
                item.result = Some((Action::Failed, message.clone()));
                continue;
            }
        }
        ready.push(i);
    }
    let answers = dry_run_all(cluster, items, ready, diff_options, options).await;
    let mut ok = true;
    for (i, plan) in answers {
        if let Plan::Failed(message) = &plan {
            ok = false;
            items[i].result = Some((Action::Failed, message.clone()));
        }
        items[i].plan = plan;
    }
    ok
}

/// What writing one object did and the server's answer, or why it failed.
type Executed = Result<(Action, Option<Value>), String>;

/// Writes one object as planned.
async fn execute(cluster: &Cluster, item: &Item<'_>, options: &SyncOptions<'_>) -> Executed {
    let id = &item.manifest.id;
    let Some(kind) = &item.kind else {
        return Err("the kind is not served".into());
    };
    let action = match &item.plan {
        Plan::Unchanged => return Ok((Action::Unchanged, None)),
        Plan::Create => Action::Created,
        Plan::Configure(..) => Action::Configured,
        Plan::Replace(_) => {
            let namespace = namespace_of(kind, id);
            cluster
                .delete(kind, namespace, &id.name)
                .await
                .map_err(|e| server_message(id, &e))?;
            wait_gone(cluster, kind, namespace, &id.name).await?;
            Action::Replaced
        }
        Plan::Deferred(_) | Plan::Failed(_) => {
            return Err("not validated".into());
        }
    };
    match cluster
        .apply(kind, &item.manifest.object, options.force)
        .await
    {
        Ok(answer) => Ok((action, Some(answer))),
        Err(err) => Err(server_message(id, &err)),
    }
}

async fn wait_gone(
    cluster: &Cluster,
    kind: &Resolved,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + REPLACE_TIMEOUT;
    loop {
        match cluster.get(kind, namespace, name).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) if Instant::now() < deadline => tokio::time::sleep(POLL_INTERVAL).await,
            Ok(Some(_)) => {
                return Err(format!(
                    "the old object was not deleted within {}s",
                    REPLACE_TIMEOUT.as_secs()
                ));
            }
            Err(err) => return Err(err.to_string()),
        }
    }
}

/// Waits until the CRDs just applied are Established and their kinds served; returns
/// the kinds now served, or None (the CRD marked failed) when one is not in time.
async fn wait_for_crds(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    crds: &[usize],
) -> Option<Vec<GroupVersionKind>> {
    let deadline = Instant::now() + CRD_READY_TIMEOUT;
    let mut served = Vec::new();
    for &i in crds {
        let item = &items[i];
        let Some(kind) = item.kind.clone() else {
            continue;
        };
        let name = item.manifest.id.name.clone();
        let kinds = defined_kinds(&item.manifest.object);
        loop {
            let established = match cluster.get(&kind, None, &name).await {
                Ok(Some(crd)) => {
                    let ok = health::assess(&items[i].manifest.id, &crd).health == Health::Healthy;
                    items[i].latest = Some(crd);
                    ok
                }
                _ => false,
            };
            let mut all_served = established;
            if established {
                for gvk in &kinds {
                    all_served &= matches!(cluster.resolve(gvk).await, Ok(Some(_)));
                }
            }
            if all_served {
                served.extend(kinds);
                break;
            }
            if Instant::now() >= deadline {
                items[i].result = Some((
                    Action::Failed,
                    format!(
                        "applied, but not established and served within {}s",
                        CRD_READY_TIMEOUT.as_secs()
                    ),
                ));
                return None;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
    Some(served)
}

/// Waits until every object of a wave is Healthy; fails on Degraded or at the
/// deadline.
async fn wait_healthy(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    wave: &[usize],
    deadline: Instant,
) -> Result<(), String> {
    loop {
        let mut pending = None;
        for &i in wave {
            let item = &items[i];
            let Some(kind) = &item.kind else { continue };
            let id = &item.manifest.id;
            let live = cluster
                .get(kind, namespace_of(kind, id), &id.name)
                .await
                .map_err(|e| format!("{id}: cannot read its health: {e}"))?;
            let assessment = match &live {
                Some(live) => health::assess(id, live),
                None => Assessment::missing(),
            };
            items[i].latest = live;
            match assessment.health {
                Health::Healthy => {}
                Health::Degraded => {
                    return Err(format!("{id} is Degraded: {}", assessment.message));
                }
                _ => pending = pending.or(Some((id.clone(), assessment))),
            }
        }
        let Some((id, assessment)) = pending else {
            return Ok(());
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out waiting for health: {id} is {} ({})",
                assessment.health, assessment.message
            ));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Prunes what the inventory holds and the desired set no longer has; returns the
/// entries the inventory keeps (protected, or failed to delete).
async fn prune_all(
    cluster: &Cluster,
    inventory: &Inventory,
    desired: &ManifestSet,
    options: &SyncOptions<'_>,
    report: &mut SyncReport,
) -> Result<Vec<Entry>, SyncError> {
    let mut candidates = prune::candidates(inventory, &desired_keys(desired));
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    plan::prune_order(&mut candidates);
    let mut judged = Vec::new();
    for id in candidates {
        let Some(kind) = cluster.resolve(&gvk_of(&id)).await? else {
            continue; // its kind is gone, and the object with it
        };
        let live = read_live(cluster, options, &kind, &id).await?;
        match prune::verdict(options.app, live.as_ref()) {
            prune::Verdict::Gone => {}
            verdict => judged.push((id, kind, verdict)),
        }
    }
    // The guard counts what would really be deleted, not what is protected or foreign.
    let deletions = judged
        .iter()
        .filter(|(_, _, v)| *v == prune::Verdict::Delete)
        .count();
    let refusal = if options.prune {
        prune::guard(
            deletions,
            inventory.objects.len(),
            desired.len(),
            options.allow_mass_prune,
        )
        .err()
    } else {
        None
    };
    if let Some(refusal) = &refusal {
        report.prune_refused = Some(refusal.to_string());
    }
    let mut kept = Vec::new();
    for (id, kind, verdict) in judged {
        let namespace = namespace_of(&kind, &id);
        let (action, message) = match verdict {
            prune::Verdict::Gone => continue,
            prune::Verdict::NotOwned => (
                Action::Skipped,
                format!("not pruned: not labelled {}={}", APP_LABEL, options.app),
            ),
            prune::Verdict::Protected => {
                kept.push(Entry::of(&id));
                (
                    Action::Skipped,
                    format!(
                        "not pruned: annotated {}: {}",
                        PRUNE_ANNOTATION, PRUNE_DISABLED
                    ),
                )
            }
            prune::Verdict::Delete if !options.prune => {
                kept.push(Entry::of(&id));
                (
                    Action::Skipped,
                    "no longer in the desired state; prune is off".to_string(),
                )
            }
            prune::Verdict::Delete if refusal.is_some() => {
                kept.push(Entry::of(&id));
                (Action::Skipped, "not pruned: prune refused".to_string())
            }
            prune::Verdict::Delete if options.dry_run => (Action::Pruned, String::new()),
            prune::Verdict::Delete => match cluster.delete(&kind, namespace, &id.name).await {
                Ok(()) => (Action::Pruned, String::new()),
                Err(err) => {
                    kept.push(Entry::of(&id));
                    (
                        Action::Failed,
                        format!("prune failed: {}", server_message(&id, &err)),
                    )
                }
            },
        };
        report.objects.push(ObjectResult {
            id,
            action,
            health: None,
            message,
            changes: Vec::new(),
        });
    }
    Ok(kept)
}

/// An app's inventory as stored in the cluster; empty when it has none yet.
pub async fn read_inventory(
    cluster: &Cluster,
    app: &str,
    namespace: &str,
) -> Result<Inventory, SyncError> {
    let kind = configmap_kind(cluster).await?;
    let name = inventory_name(app);
    match cluster.get(&kind, Some(namespace), &name).await? {
        Some(configmap) => Ok(Inventory::from_configmap(&configmap)?),
        None => Ok(Inventory::default()),
    }
}

/// Writes the inventory, creating its namespace the first time.
async fn write_inventory(
    cluster: &Cluster,
    inventory: &Inventory,
    options: &SyncOptions<'_>,
) -> Result<(), SyncError> {
    let kind = configmap_kind(cluster).await?;
    let configmap = inventory.to_configmap(options.app, options.inventory_namespace);
    match cluster.apply(&kind, &configmap, true).await {
        Ok(_) => Ok(()),
        Err(err) if err.is_not_found() => {
            let gvk = GroupVersionKind::gvk("", "v1", "Namespace");
            let namespace_kind = cluster
                .resolve(&gvk)
                .await?
                .ok_or_else(|| ClusterError::Config("the cluster serves no Namespaces".into()))?;
            let namespace = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": options.inventory_namespace,
                    "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
                },
            });
            cluster.apply(&namespace_kind, &namespace, true).await?;
            cluster.apply(&kind, &configmap, true).await?;
            Ok(())
        }
        Err(err) => Err(err.into()),
    }
}

async fn configmap_kind(cluster: &Cluster) -> Result<Resolved, SyncError> {
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    Ok(cluster
        .resolve(&gvk)
        .await?
        .ok_or_else(|| ClusterError::Config("the cluster serves no ConfigMaps".into()))?)
}

/// Which namespaces the desired objects need exist: true when present, false when
/// absent but created by this sync; namespaces neither present nor desired are left
/// out.
async fn namespaces_present(
    cluster: &Cluster,
    options: &SyncOptions<'_>,
    items: &[Item<'_>],
) -> HashMap<String, bool> {
    let mut present = HashMap::new();
    for item in items {
        let id = &item.manifest.id;
        if id.group.is_empty() && id.kind == "Namespace" {
            present.insert(id.name.clone(), item.live.is_some());
        }
    }
    let gvk = GroupVersionKind::gvk("", "v1", "Namespace");
    let Ok(Some(kind)) = cluster.resolve(&gvk).await else {
        return present;
    };
    let wanted: HashSet<&String> = items
        .iter()
        .filter_map(|i| i.manifest.id.namespace.as_ref())
        .filter(|ns| !present.contains_key(*ns))
        .collect();
    for ns in wanted {
        let id = ObjectId {
            group: String::new(),
            version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: ns.clone(),
        };
        if let Ok(Some(_)) = read_live(cluster, options, &kind, &id).await {
            present.insert(ns.clone(), true);
        }
    }
    present
}

/// The kinds CRDs in the set define, by (group, kind), with whether they are
/// namespaced.
fn crd_kinds<'m>(manifests: impl Iterator<Item = &'m Manifest>) -> HashMap<GroupKind, bool> {
    manifests
        .filter(|m| is_crd(&m.id))
        .filter_map(|m| crd_scope(&m.object))
        .map(|(gk, scope)| (gk, scope == Scope::Namespaced))
        .collect()
}

/// The kinds (one per served version) a CRD object defines.
fn defined_kinds(crd: &Value) -> Vec<GroupVersionKind> {
    let Some((gk, _)) = crd_scope(crd) else {
        return Vec::new();
    };
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|versions| {
            versions
                .iter()
                .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
                .filter_map(|v| v.get("name").and_then(Value::as_str))
                .map(|version| GroupVersionKind::gvk(&gk.group, version, &gk.kind))
                .collect()
        })
        .unwrap_or_default()
}

fn is_crd(id: &ObjectId) -> bool {
    id.group == "apiextensions.k8s.io" && id.kind == "CustomResourceDefinition"
}

fn gvk_of(id: &ObjectId) -> GroupVersionKind {
    GroupVersionKind::gvk(&id.group, &id.version, &id.kind)
}

fn namespace_of<'i>(kind: &Resolved, id: &'i ObjectId) -> Option<&'i str> {
    if kind.namespaced {
        id.namespace.as_deref()
    } else {
        None
    }
}

fn desired_keys(desired: &ManifestSet) -> HashSet<ObjectKey> {
    desired.objects.iter().map(|m| m.id.key()).collect()
}

fn schemas_for(desired: &ManifestSet) -> OpenApiSchemas {
    let crds = desired
        .objects
        .iter()
        .filter(|m| is_crd(&m.id))
        .map(|m| &m.object);
    OpenApiSchemas::new(desired.objects.iter().map(|m| &m.id), crds)
}

fn is_immutable(err: &ClusterError) -> bool {
    matches!(err, ClusterError::Api { code: 422, message, .. } if message.contains("immutable"))
}

/// The server's refusal, for a person; a Secret's is withheld, since the server may
/// quote the value it refused.
fn server_message(id: &ObjectId, err: &ClusterError) -> String {
    match err {
        ClusterError::Api { code, reason, .. } if is_secret(id) => {
            format!("{reason} ({code}): the server's message is withheld for a Secret")
        }
        ClusterError::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// `spec.replicas, spec.template.spec.containers[name="web"].image`, at most a few.
fn describe_changes(drift: &Drift) -> String {
    const SHOWN: usize = 3;
    let changes = drift.changes();
    let mut paths: Vec<String> = changes
        .iter()
        .take(SHOWN)
        .map(|c| c.path.to_string())
        .collect();
    if changes.len() > SHOWN {
        paths.push(format!("and {} more", changes.len() - SHOWN));
    }
    paths.join(", ")
}

/// The report's entries for the desired objects; objects never reached get
/// `skipped` with `why`.
fn finish(items: Vec<Item<'_>>, why: &str) -> Vec<ObjectResult> {
    items
        .into_iter()
        .map(|item| {
            let changes = match &item.plan {
                Plan::Configure(_, changes) => changes.clone(),
                _ => Vec::new(),
            };
            let (action, message) = match (item.result, item.plan) {
                (Some(result), _) => result,
                (None, Plan::Failed(message)) => (Action::Failed, message),
                // A dry run (or a sync stopped by a failure) reports what it would do.
                (None, Plan::Unchanged) => (Action::Unchanged, String::new()),
                (None, _) if !why.is_empty() => (Action::Skipped, why.to_string()),
                (None, Plan::Create) => (Action::Created, String::new()),
                (None, Plan::Configure(m, _)) => (Action::Configured, m),
                (None, Plan::Replace(m)) => (Action::Replaced, m),
                (None, Plan::Deferred(need)) => (
                    Action::Created,
                    if need.kind.is_some() {
                        "validated once its CustomResourceDefinition exists"
                    } else {
                        "validated once its Namespace exists"
                    }
                    .to_string(),
                ),
            };
            let health = Some(match &item.latest {
                Some(live) => health::assess(&item.manifest.id, live),
                None => Assessment::missing(),
            });
            ObjectResult {
                id: item.manifest.id.clone(),
                action,
                health,
                message,
                changes,
            }
        })
        .collect()
}

fn worst(objects: &[ObjectResult]) -> Health {
    objects
        .iter()
        .filter_map(|o| o.health.as_ref().map(|h| h.health))
        .max()
        .unwrap_or(Health::Healthy)
}
