//! Decide: what applying each desired object would do. An object is known to be
//! unchanged without asking the server when every desired field already has its
//! value and tether owns no field Git dropped; otherwise the server's answer to a
//! server-side apply dry run is compared with the live object it was computed from.
//!
//! That last clause is what keeps verdicts free of races: controllers write while a
//! pass runs (the Deployment controller's `deployment.kubernetes.io/revision`, a few
//! milliseconds after each apply), so an answer and a live copy read at different
//! resourceVersions differ by whatever was written between them. A verdict compares
//! the two only at the same resourceVersion, reading the live object again (a few
//! times at most) when they are not.

use std::collections::{HashMap, HashSet};

use futures::StreamExt as _;
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::cluster::{Cluster, ClusterError, LiveObjects, Resolved};
use tether_diff::diff::{
    DiffOptions, Drift, ObjectDiff, diff_object, is_secret, unchanged_by_apply,
};
use tether_diff::manifest::{GroupKind, Manifest, ObjectId, Scope, crd_scope};
use tether_schema::ownership::{FIELD_MANAGER, app_of};

use super::SyncOptions;
use super::annotations::{Write, not_reconciled};
use super::item::{
    Item, Latest, Need, Plan, gvk_of, is_crd, is_namespace, namespace_of, read_live,
};

/// How many times a dry run is repeated when the live object moved under it: each
/// round costs a dry run and a read; a controller settles within a couple.
const RACE_ATTEMPTS: usize = 3;

const IF_NOT_PRESENT: &str =
    "exists: not updated (annotated kustomize.toolkit.fluxcd.io/ssa: IfNotPresent)";

/// What deciding any one object needs to know of the whole set, found before the
/// objects are decided.
pub(super) struct Grounds {
    /// The kinds CRDs in the set define, by (group, kind), with their scope.
    crd_kinds: HashMap<GroupKind, bool>,
    /// Whether the namespaces the objects need exist (see [`namespaces_present`]).
    namespaces: HashMap<String, bool>,
}

impl Grounds {
    /// The grounds of `manifests`, whose Namespaces `namespaces` holds, read.
    pub(super) async fn find(
        cluster: &Cluster,
        view: &dyn LiveObjects,
        manifests: &[&Manifest],
        namespaces: &[Item<'_>],
    ) -> Grounds {
        Grounds {
            crd_kinds: crd_kinds(manifests.iter().copied()),
            namespaces: namespaces_present(cluster, view, manifests, namespaces).await,
        }
    }
}

/// Whether each object can be decided on its own, its live copy dropped as soon as it
/// is judged: all but a heal of a validated revision, which dry-runs nothing when
/// only one object drifted, so needs every object's plan first
/// ([`heals_unchecked`]).
pub(super) fn one_by_one(options: &SyncOptions<'_>) -> bool {
    !options.validated || options.dry_run
}

/// Decides what one object needs, dry-running it when it would change, then keeps
/// of its live copy only what the report needs when nothing will write it.
pub(super) async fn decide_one<'m>(
    cluster: &Cluster,
    mut item: Item<'m>,
    grounds: &Grounds,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) -> Item<'m> {
    plan(&mut item, grounds, diff_options, options);
    if item.plan == Plan::Create {
        let decided = dry_run(cluster, &item, diff_options, options).await;
        record(&mut item, decided);
    }
    hold_unreconciled(&mut item);
    item.settle(options);
    item
}

/// Decides what each object needs, dry-running every object that would change.
pub(super) async fn decide(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    grounds: &Grounds,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) {
    for item in items.iter_mut() {
        plan(item, grounds, diff_options, options);
    }
    let mut checks: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].plan == Plan::Create)
        .collect();
    if let [only] = checks[..]
        && heals_unchecked(&items[only], options)
    {
        let item = &mut items[only];
        if item.live.is_some() {
            item.plan = Plan::Configure(String::new());
        }
        item.undecided = true;
        checks.clear();
    }
    dry_run_all(cluster, items, checks, diff_options, options).await;
    for item in items.iter_mut() {
        hold_unreconciled(item);
        item.settle(options);
    }
}

/// Plans one object from its live copy, before any dry run: `Plan::Create` stands
/// for "to be dry-run", which refines it.
fn plan(
    item: &mut Item<'_>,
    grounds: &Grounds,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) {
    let id = &item.manifest.id;
    if let Some(owner) = item.live.as_ref().and_then(foreign_owner(options.app)) {
        item.diff = Some(conflict(id, &owner));
        item.plan = Plan::Conflict(owner);
        return;
    }
    if item.options.write == Write::IfNotPresent && item.live.is_some() {
        item.plan = Plan::Skip(IF_NOT_PRESENT.into());
        return;
    }
    let namespaced = match &item.kind {
        Some(kind) => kind.namespaced,
        None => match grounds.crd_kinds.get(&id.group_kind()) {
            Some(namespaced) => *namespaced,
            // Argo CD's SkipDryRunOnMissingResource: a kind something else will
            // define (a controller, another app) is not this revision's error.
            None if item.options.skip_missing_kind => {
                item.plan = Plan::Skip(format!(
                    "not applied: the cluster does not serve {}/{} and no CustomResourceDefinition in this revision defines it (annotated argocd.argoproj.io/sync-options: SkipDryRunOnMissingResource=true)",
                    id.api_version(),
                    id.kind
                ));
                item.diff = Some(missing(item.manifest, diff_options));
                return;
            }
            None => {
                item.plan = Plan::Failed(format!(
                    "the cluster does not serve {}/{} and no CustomResourceDefinition in this revision defines it",
                    id.api_version(),
                    id.kind
                ));
                return;
            }
        },
    };
    let mut need = Need {
        kind: item.kind.is_none().then(|| gvk_of(id)),
        namespace: None,
    };
    if namespaced && let Some(ns) = &id.namespace {
        match grounds.namespaces.get(ns) {
            Some(true) => {}
            Some(false) => need.namespace = Some(ns.clone()),
            None => {
                item.plan = Plan::Failed(format!(
                    "namespace {ns:?} neither exists nor is in this revision"
                ));
                return;
            }
        }
    }
    if need.kind.is_some() || need.namespace.is_some() {
        item.plan = Plan::Deferred(need);
        item.diff = Some(missing(item.manifest, diff_options));
        return;
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
        _ => Plan::Create, // refined by the dry run
    };
}

/// Whether the one object that drifted in a validated revision is applied without a
/// dry run: a heal then costs one request, the apply. The server accepted this very
/// manifest when the revision was applied; a live edit changed the object since, and
/// the apply puts Git's fields back. That apply can still be refused (an admission
/// policy added since): it is then reported as a failed heal, and since it is the only
/// object this pass writes, "one invalid object means nothing is written" holds (prune
/// and the PostSync hooks do not run after a failure). Only an object written by
/// plain apply qualifies: an edited one (another app's was set apart as a conflict
/// above, from the view) or a deleted one (recreated; one found there unlabelled is
/// adopted, as the dry run would have planned). A live edit cannot touch an immutable
/// field, so no replace is missed. The verdict (what the heal changed) is the apply's
/// answer against the live copy.
fn heals_unchecked(item: &Item<'_>, options: &SyncOptions<'_>) -> bool {
    options.validated
        && !options.dry_run
        && item.options.write == Write::Apply
        && item.options.not_reconciled.is_none()
        && item.live.as_ref().and_then(not_reconciled).is_none()
}

/// An object Flux's `reconcile: disabled` or `ssa: Ignore` (in Git, or set on the live
/// object) keeps out of reconciliation: its drift is reported, nothing is written,
/// and a refusal to validate it stops nothing else.
fn hold_unreconciled(item: &mut Item<'_>) {
    let Some(why) = item
        .options
        .not_reconciled
        .or_else(|| item.live.as_ref().and_then(not_reconciled))
    else {
        return;
    };
    item.plan = match &item.plan {
        Plan::Unchanged | Plan::Conflict(_) | Plan::Skip(_) => return,
        Plan::Create | Plan::Configure(_) | Plan::Replace(_) | Plan::Deferred(_) => {
            Plan::Skip(format!("not applied: annotated {why}"))
        }
        Plan::Failed(refusal) | Plan::Unavailable(refusal) => {
            Plan::Skip(format!("not applied: annotated {why} ({refusal})"))
        }
    };
}

/// Dry-runs the items at `indices`, `options.concurrency` at a time, and records
/// their plans and verdicts.
pub(super) async fn dry_run_all(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    indices: Vec<usize>,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) {
    let runs: Vec<_> = indices
        .into_iter()
        .map(|i| {
            let item = &items[i];
            async move { (i, dry_run(cluster, item, diff_options, options).await) }
        })
        .collect();
    let answers: Vec<_> = futures::stream::iter(runs)
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await;
    for (i, decided) in answers {
        record(&mut items[i], decided);
    }
}

/// Records a dry run's outcome on its item.
fn record(item: &mut Item<'_>, (plan, live, diff): Decided) {
    item.plan = plan;
    if let Some(live) = live {
        item.latest = Latest::AsRead;
        item.live = Some(live);
    }
    item.diff = diff;
}

/// A dry run's outcome: the plan, the live object it was compared with when that was
/// read again, and the verdict.
type Decided = (Plan, Option<Value>, Option<ObjectDiff>);

/// Asks the server what applying the object would do, and what that means.
async fn dry_run(
    cluster: &Cluster,
    item: &Item<'_>,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) -> Decided {
    let Some(kind) = &item.kind else {
        return (Plan::Failed("the kind is not served".into()), None, None);
    };
    let id = &item.manifest.id;
    let object = &item.manifest.object;
    let force = options.force;
    let replace_immutable = options.replace_immutable || item.options.recreate_immutable;
    let mut live = item.live.clone();
    let mut reread = false;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let answer = match cluster.dry_run_apply(kind, object, force).await {
            Ok(answer) => answer,
            Err(err) if is_immutable(&err) && replace_immutable => {
                return plan_replace(cluster, kind, id, live, reread, &err).await;
            }
            Err(err) if is_immutable(&err) => {
                let message = format!(
                    "{} (pass --replace-immutable to delete and recreate it)",
                    server_message(id, &err)
                );
                return (Plan::Failed(message), None, None);
            }
            Err(err) => return (refused(id, &err), None, None),
        };
        if !exists(&answer) {
            return (
                Plan::Create,
                None,
                Some(missing(item.manifest, diff_options)),
            );
        }
        // Absent from the view (a cache of the objects labelled for the app) or read
        // before the answer was computed: read what the answer was computed from.
        if live
            .as_ref()
            .is_none_or(|l| resource_version(l) != resource_version(&answer))
        {
            live = match cluster.get(kind, namespace_of(kind, id), &id.name).await {
                Ok(found) => found,
                Err(err) => return (refused(id, &err), None, None),
            };
            reread = true;
        }
        let Some(current) = &live else {
            // Deleted between the dry run and the read: it is to be created.
            return (
                Plan::Create,
                None,
                Some(missing(item.manifest, diff_options)),
            );
        };
        if let Some(owner) = foreign_owner(options.app)(current) {
            let diff = conflict(id, &owner);
            return (
                Plan::Conflict(owner),
                reread.then(|| current.clone()),
                Some(diff),
            );
        }
        if item.options.write == Write::IfNotPresent {
            // Found only now (it was not in the view): still not updated.
            return (
                Plan::Skip(IF_NOT_PRESENT.into()),
                reread.then(|| current.clone()),
                None,
            );
        }
        let settled = resource_version(current) == resource_version(&answer);
        if !settled && attempt < RACE_ATTEMPTS {
            continue;
        }
        if !settled {
            tracing::debug!(object = %id, "the object kept changing during the dry run; compared with its latest copy");
        }
        let diff = diff_object(id, Some(&answer), Some(current), diff_options);
        let plan = match &diff.drift {
            Drift::InSync => Plan::Unchanged,
            drift => Plan::Configure(describe_changes(drift)),
        };
        let diff = diff.drift.is_drift().then_some(diff);
        return (plan, reread.then(|| current.clone()), diff);
    }
}

/// The plan for an object the server refused to change in place (an immutable
/// field) when it may be replaced: delete and recreate it, which needs the live
/// object's uid, read here if the view did not have it (unlabelled).
async fn plan_replace(
    cluster: &Cluster,
    kind: &Resolved,
    id: &ObjectId,
    mut live: Option<Value>,
    mut reread: bool,
    err: &ClusterError,
) -> Decided {
    if live.is_none() {
        live = match cluster.get(kind, namespace_of(kind, id), &id.name).await {
            Ok(found) => found,
            Err(err) => return (refused(id, &err), None, None),
        };
        reread = true;
    }
    let Some(current) = live else {
        return (refused(id, err), None, None);
    };
    let diff = ObjectDiff {
        id: id.clone(),
        drift: Drift::Modified(Vec::new()),
        desired: None,
        live: None,
    };
    let current = reread.then_some(current);
    (Plan::Replace(server_message(id, err)), current, Some(diff))
}

/// The app another app's label names on a live object, when it is not `app` (and
/// `app` is one: objects compared as written belong to no app).
fn foreign_owner(app: &str) -> impl Fn(&Value) -> Option<String> + '_ {
    move |live| {
        app_of(live)
            .filter(|owner| !app.is_empty() && *owner != app)
            .map(str::to_string)
    }
}

/// The verdict for an object another app owns.
fn conflict(id: &ObjectId, owner: &str) -> ObjectDiff {
    ObjectDiff {
        id: id.clone(),
        drift: Drift::Conflict(owner.to_string()),
        desired: None,
        live: None,
    }
}

/// The verdict for an object that does not exist yet.
fn missing(manifest: &Manifest, diff_options: &DiffOptions<'_>) -> ObjectDiff {
    diff_object(&manifest.id, Some(&manifest.object), None, diff_options)
}

fn resource_version(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty())
}

/// Whether a dry-run answer is an object the server already stores: a would-be
/// creation has no resourceVersion yet (the registry assigns one when it persists).
fn exists(answer: &Value) -> bool {
    resource_version(answer).is_some()
}

/// Which namespaces the desired objects need exist: true when present, false when
/// absent but created by this sync; namespaces neither present nor desired are left
/// out.
async fn namespaces_present(
    cluster: &Cluster,
    view: &dyn LiveObjects,
    manifests: &[&Manifest],
    namespaces: &[Item<'_>],
) -> HashMap<String, bool> {
    let mut present = HashMap::new();
    for item in namespaces {
        let id = &item.manifest.id;
        if is_namespace(id) {
            present.insert(id.name.clone(), item.live.is_some());
        }
    }
    let gvk = GroupVersionKind::gvk("", "v1", "Namespace");
    let Ok(Some(kind)) = cluster.resolve(&gvk).await else {
        return present;
    };
    let wanted: HashSet<&String> = manifests
        .iter()
        .filter_map(|m| m.id.namespace.as_ref())
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
        match read_live(cluster, view, &kind, &id).await {
            Ok(Some(_)) => {
                present.insert(ns.clone(), true);
            }
            // A tenant may not read its namespace: the dry run, which it may make,
            // says whether the namespace is there.
            Err(ClusterError::Api { code: 403, .. }) => {
                present.insert(ns.clone(), true);
            }
            _ => {}
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

fn is_immutable(err: &ClusterError) -> bool {
    matches!(err, ClusterError::Api { code: 422, message, .. } if message.contains("immutable"))
}

/// The plan for an object the server did not validate: failed, or unavailable when a
/// retry can pass.
pub(super) fn refused(id: &ObjectId, err: &ClusterError) -> Plan {
    let message = server_message(id, err);
    if err.is_retryable() {
        Plan::Unavailable(message)
    } else {
        Plan::Failed(message)
    }
}

/// The server's refusal, for a person; a Secret's is withheld, since the server may
/// quote the value it refused.
pub(super) fn server_message(id: &ObjectId, err: &ClusterError) -> String {
    match err {
        ClusterError::Api { code, reason, .. } if is_secret(id) => {
            format!("{reason} ({code}): the server's message is withheld for a Secret")
        }
        ClusterError::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// `spec.replicas, spec.template.spec.containers[name="web"].image`, at most a few.
pub(super) fn describe_changes(drift: &Drift) -> String {
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
