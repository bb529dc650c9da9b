//! Acting on drift: make the cluster match the desired state with as few writes as
//! possible, in an order that works the first time, deleting only what the app owns.
//!
//! A sync reads top to bottom as the loop: observe (live objects and what applying
//! each would do, `observe` and `decide`), record what it may write in the inventory,
//! act (`apply`, in order), prune, and record what the app owns now. It validates
//! everything before it writes anything: every object that would change is dry-run
//! first, and one refusal means nothing is applied. Objects that cannot be dry-run
//! yet (their CRD or Namespace is created by this same sync) are dry-run as soon as
//! what they need exists, before any of them is applied.
//!
//! A new object therefore costs two requests (its dry run and its apply), where
//! `kubectl apply --server-side` sends one and validates nothing before writing. Judging
//! new objects in process instead was weighed and left out: the served OpenAPI schemas
//! catch types and undeclared fields, but kube-apiserver refuses far more (its
//! registries' validation of names, selectors, pod specs, ports; admission webhooks,
//! ValidatingAdmissionPolicies, ResourceQuotas; the acting ServiceAccount's RBAC), and
//! an object such a judge passes but the server refuses would be written after others,
//! breaking "one refusal means nothing is applied". What a cold sync costs, side by
//! side with kubectl, is in `benches/README.md` (`benches/sync.rs`).
//!
//! Hooks are steps at their phases; the Namespaces and CRDs a revision creates are
//! applied before its PreSync hooks, which may need them.

mod annotations;
mod apply;
mod decide;
pub mod desired;
pub mod health;
pub mod hooks;
pub mod inputs;
pub mod inventory;
mod item;
mod observe;
pub mod plan;
pub mod preview;
pub mod prune;
mod report;

use std::time::{Duration, Instant};

use crate::cluster::{Cluster, ClusterError, LiveObjects};
use tether_diff::diff::{DiffOptions, IgnoreRule, Mode};
use tether_diff::manifest::ManifestSet;
use tether_schema::ownership::DEFAULT_INVENTORY_NAMESPACE;

use health::{Assessment, Health};
use hooks::HookError;
use inventory::{Entry, Inventory, InventoryError};
use item::Plan;
use plan::WaveError;
use report::Phase;

pub use observe::{Candidate, Observed, observe, observe_objects};
pub use report::{Action, Lineage, ObjectResult, OwnerReference, SyncFailure, SyncReport};
pub use report::{HookAction, HookResult};

/// How many requests a sync keeps in flight: enough to hide round trips, few enough
/// not to trip API priority and fairness on a real cluster (kubectl's own parallel
/// operations default to a similar figure).
pub const DEFAULT_REQUEST_CONCURRENCY: usize = 16;

/// What a sync may do.
#[derive(Clone)]
pub struct SyncOptions<'a> {
    /// Names the inventory; every applied object is labelled for it. Empty (only to
    /// observe, as `tether diff` without `--app` does): the objects belong to no app,
    /// so none is another app's and nothing is a prune candidate.
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
    /// Live objects already known; without it, the app's objects are listed.
    pub live: Option<&'a dyn LiveObjects>,
    /// The app's inventory as the caller last saw it written; without it, it is read.
    /// It is read again before anything is pruned.
    pub inventory: Option<&'a Inventory>,
    /// Told after each step how many desired objects are done, of how many.
    pub progress: Option<&'a (dyn Fn(usize, usize) + Sync)>,
    /// When the app's hooks run.
    pub hooks: HookRuns,
    /// How long the hooks of one phase may run in all; past it the phase fails.
    pub hook_timeout: Duration,
    /// This revision was applied in full before (every object accepted by the
    /// server): a heal of one object is applied without a dry run first (see
    /// `decide`).
    pub validated: bool,
    /// The CEL health rules of the app and the configuration (issue #28), in front of
    /// the built-in ones.
    pub health: health::Judge<'a>,
}

/// When a sync runs the app's hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookRuns {
    /// Every sync: an explicit `tether sync` is one sync operation, as Argo CD runs
    /// hooks on every sync it is asked for.
    Always,
    /// Only a pass that has something to write (create, change or prune): `tether
    /// serve` passes again and again, and a steady-state pass is no sync operation.
    WhenWriting,
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
            concurrency: DEFAULT_REQUEST_CONCURRENCY,
            rules: &[],
            live: None,
            inventory: None,
            progress: None,
            hooks: HookRuns::Always,
            hook_timeout: hooks::DEFAULT_HOOK_TIMEOUT,
            validated: false,
            health: health::Judge::default(),
        }
    }
}

/// Why a sync could not run at all (per-object failures are in the report).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("invalid sync waves:\n  {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Waves(Vec<WaveError>),
    #[error("invalid hooks:\n  {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Hooks(Vec<HookError>),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// The server refused to validate objects (a diff cannot say what applying them
    /// would do).
    #[error("{}", .0.join("\n"))]
    Refused(Vec<String>),
    /// The manifests name tether's own records (an inventory): nothing is applied.
    #[error("objects tether keeps for itself:\n  {}", .0.join("\n  "))]
    Bookkeeping(Vec<String>),
}

impl SyncError {
    pub fn is_retryable(&self) -> bool {
        match self {
            SyncError::Waves(_)
            | SyncError::Hooks(_)
            | SyncError::Inventory(_)
            | SyncError::Refused(_)
            | SyncError::Bookkeeping(_) => false,
            SyncError::Cluster(err) => err.is_retryable(),
        }
    }
}

impl From<inventory::ReadError> for SyncError {
    fn from(err: inventory::ReadError) -> Self {
        match err {
            inventory::ReadError::Cluster(err) => SyncError::Cluster(err),
            inventory::ReadError::Invalid(err) => SyncError::Inventory(err),
        }
    }
}

/// Makes the cluster match `desired` for `options.app`, running its hooks (objects
/// annotated as such) at their phases.
pub async fn sync(
    cluster: &Cluster,
    desired: &ManifestSet,
    revision: Option<&str>,
    options: &SyncOptions<'_>,
) -> Result<SyncReport, SyncError> {
    let started = Instant::now();
    let bookkeeping = inventory::bookkeeping_in(desired, options.inventory_namespace);
    if !bookkeeping.is_empty() {
        return Err(SyncError::Bookkeeping(bookkeeping));
    }
    // Hooks are not app objects: from here on, `desired` is the app's objects only.
    let (app_objects, hooks) = hooks::split(desired).map_err(SyncError::Hooks)?;
    let desired: &ManifestSet = &app_objects;
    let steps =
        plan::plan(desired.objects.iter().map(|m| (&m.id, &m.object))).map_err(SyncError::Waves)?;
    let mut inventory = match options.inventory {
        Some(known) => known.clone(),
        None => inventory::read(cluster, options.app, options.inventory_namespace).await?,
    };
    let Observed {
        items,
        candidates,
        schema,
        mask,
    } = observe(cluster, desired, &inventory, options).await?;
    let diff_options = DiffOptions {
        mode: Mode::Online,
        rules: options.rules,
        schema: &schema,
        mask: &mask,
    };
    let mut report = new_report(options, revision, &inventory);
    let Some(mut items) = refuse_invalid(items, &mut report, &options.health) else {
        return Ok(report);
    };
    if options.dry_run {
        for phase in [Phase::PreSync, Phase::Sync, Phase::PostSync] {
            report
                .hooks
                .extend(hooks::skipped(&hooks, phase, "dry run: not run"));
        }
        report.objects = finish(items, "", &options.health);
        report.health = report::worst(&report.objects);
        let kept = prune::run(
            cluster,
            candidates,
            &inventory,
            desired.len(),
            options,
            &mut report,
        )
        .await?;
        report.inventory = next_inventory(desired, revision, kept);
        return Ok(report);
    }

    // Hooks run with a sync operation; in `serve`, a pass that writes nothing is none.
    let writes = items.iter().any(|i| {
        matches!(
            i.plan,
            Plan::Create | Plan::Configure(_) | Plan::Replace(_) | Plan::Deferred(_)
        )
    }) || (options.prune
        && candidates
            .iter()
            .any(|c| matches!(c.verdict, prune::Verdict::Delete)));
    let run_hooks = !hooks.is_empty() && (options.hooks == HookRuns::Always || writes);
    if !hooks.is_empty() && !run_hooks {
        for phase in [Phase::PreSync, Phase::Sync, Phase::PostSync] {
            report
                .hooks
                .extend(hooks::skipped(&hooks, phase, "nothing to sync: not run"));
        }
    }
    // Before the first write, the inventory covers everything this pass may write.
    let covering = inventory.covering(desired);
    let mut covered = covering.objects == inventory.objects;
    let mut made = apply::Made::default();
    let pre_sync = run_hooks && hooks.iter().any(|h| h.phases.contains(&Phase::PreSync));
    let first = foundation(&steps, &items);
    if pre_sync && !first.is_empty() {
        // The Namespaces and CRDs this revision creates exist before its PreSync hooks
        // run (a hook in a namespace of the revision would fail forever otherwise), as
        // Argo CD's CreateNamespace makes the app's namespace first.
        write_inventory(cluster, &covering, options).await?;
        covered = true;
        let completed = apply::apply_steps(
            cluster,
            &mut items,
            &first,
            &diff_options,
            options,
            started,
            &mut made,
        )
        .await;
        report.wait_failed = completed.err();
        let failed = items
            .iter()
            .any(|i| matches!(i.result, Some((Action::Failed, _))));
        if failed || report.wait_failed.is_some() {
            report.objects = finish(
                items,
                "not applied: an earlier step failed",
                &options.health,
            );
            report.health = report::worst(&report.objects);
            run_sync_fail(cluster, &hooks, options, &mut report).await;
            return Ok(report);
        }
    }
    if run_hooks {
        let ran = run_phase(cluster, &hooks, Phase::PreSync, options).await;
        let failed = ran.iter().any(|r| r.action == HookAction::Failed);
        report.hooks.extend(ran);
        if failed {
            // A failed PreSync hook applies nothing else.
            report.objects = finish(items, "not applied: a PreSync hook failed", &options.health);
            report.health = report::worst(&report.objects);
            run_sync_fail(cluster, &hooks, options, &mut report).await;
            return Ok(report);
        }
    }

    if !covered {
        write_inventory(cluster, &covering, options).await?;
    }
    let completed = apply::apply_steps(
        cluster,
        &mut items,
        &steps,
        &diff_options,
        options,
        started,
        &mut made,
    )
    .await;
    report.wait_failed = completed.err();
    let skipped = if report.wait_failed.is_some() {
        "not applied: an earlier wave did not become healthy"
    } else {
        "not applied: an earlier step failed"
    };
    let mut any_failed = items
        .iter()
        .any(|i| matches!(i.result, Some((Action::Failed, _))));
    if run_hooks && !any_failed && report.wait_failed.is_none() {
        let ran = run_phase(cluster, &hooks, Phase::Sync, options).await;
        any_failed |= ran.iter().any(|r| r.action == HookAction::Failed);
        report.hooks.extend(ran);
        let post_sync = hooks.iter().any(|h| h.phases.contains(&Phase::PostSync));
        if !any_failed && post_sync {
            // PostSync hooks run once the app is Healthy, whether or not `--wait` asked.
            let all: Vec<usize> = (0..items.len()).collect();
            // Within `--wait`'s time for the whole sync, else the phase's hook timeout.
            let healthy_by = match options.wait {
                Some(wait) => started + wait,
                None => Instant::now() + options.hook_timeout,
            };
            report.wait_failed =
                apply::wait_healthy(cluster, &mut items, &all, healthy_by, &options.health)
                    .await
                    .err();
        }
    }
    let longest = longest_write(&items);
    report.objects = finish(items, skipped, &options.health);
    report.health = report::worst(&report.objects);

    let kept: Vec<Entry> = if !any_failed && report.wait_failed.is_none() {
        if options.inventory.is_some() && !candidates.is_empty() {
            // Prune decides from the inventory as stored now, not as last seen.
            let stored = inventory::read(cluster, options.app, options.inventory_namespace).await?;
            inventory.objects.extend(stored.objects);
        }
        prune::run(
            cluster,
            candidates,
            &inventory,
            desired.len(),
            options,
            &mut report,
        )
        .await?
    } else {
        // Nothing is pruned after a failure: what the app owns stays recorded.
        candidates
            .iter()
            .filter(|c| {
                matches!(
                    c.verdict,
                    prune::Verdict::Delete | prune::Verdict::Protected(_)
                )
            })
            .map(|c| Entry::of(&c.id))
            .collect()
    };
    let next = next_inventory(desired, revision, kept);
    if next != covering {
        write_inventory(cluster, &next, options).await?;
    }
    report.inventory = next;
    if run_hooks {
        if !report.failed() {
            let ran = run_phase(cluster, &hooks, Phase::PostSync, options).await;
            report.hooks.extend(ran);
        }
        if report.failed() {
            run_sync_fail(cluster, &hooks, options, &mut report).await;
        }
    }
    log_finished(&report, "sync", desired.len(), started, longest);
    Ok(report)
}

/// Heals some objects of a revision the app has applied in full: `desired` holds
/// only the objects a live change touched. They are observed and decided as a sync
/// decides them (the verdicts, the dry run and "one refusal means nothing is
/// written" included) and the drifted ones applied in order; nothing else is read,
/// nothing is pruned, no hook runs, and the inventory is written only if it did not
/// cover these objects yet. The report holds these objects only: what the whole app
/// looks like is the next full sync's to say.
pub async fn heal(
    cluster: &Cluster,
    desired: &ManifestSet,
    revision: Option<&str>,
    options: &SyncOptions<'_>,
) -> Result<SyncReport, SyncError> {
    let started = Instant::now();
    let steps =
        plan::plan(desired.objects.iter().map(|m| (&m.id, &m.object))).map_err(SyncError::Waves)?;
    let inventory = match options.inventory {
        Some(known) => known.clone(),
        None => inventory::read(cluster, options.app, options.inventory_namespace).await?,
    };
    let Observed {
        items,
        schema,
        mask,
        ..
    } = observe_objects(cluster, desired, options).await?;
    let diff_options = DiffOptions {
        mode: Mode::Online,
        rules: options.rules,
        schema: &schema,
        mask: &mask,
    };
    let mut report = new_report(options, revision, &inventory);
    let Some(mut items) = refuse_invalid(items, &mut report, &options.health) else {
        return Ok(report);
    };
    if options.dry_run {
        report.objects = finish(items, "", &options.health);
        report.health = report::worst(&report.objects);
        return Ok(report);
    }
    let covering = inventory.covering(desired);
    if covering.objects != inventory.objects {
        write_inventory(cluster, &covering, options).await?;
        report.inventory = covering;
    }
    let completed = apply::apply_steps(
        cluster,
        &mut items,
        &steps,
        &diff_options,
        options,
        started,
        &mut apply::Made::default(),
    )
    .await;
    report.wait_failed = completed.err();
    let longest = longest_write(&items);
    report.objects = finish(
        items,
        "not applied: an earlier step failed",
        &options.health,
    );
    report.health = report::worst(&report.objects);
    log_finished(&report, "heal", desired.len(), started, longest);
    Ok(report)
}

/// The kinds a sync applies first (`plan::kind_rank`): Namespaces (0) and CRDs (1).
const FOUNDATION_RANK: u8 = 1;

/// The steps of `steps` cut down to the Namespaces and CRDs they create: what the
/// revision's PreSync hooks may need to exist.
fn foundation(steps: &[plan::Step], items: &[item::Item<'_>]) -> Vec<plan::Step> {
    steps
        .iter()
        .filter_map(|step| {
            let objects: Vec<usize> = step
                .objects
                .iter()
                .copied()
                .filter(|&i| {
                    let id = &items[i].manifest.id;
                    items[i].plan == Plan::Create
                        && plan::kind_rank(&id.group, &id.kind) <= FOUNDATION_RANK
                })
                .collect();
            (!objects.is_empty()).then(|| plan::Step {
                objects,
                ..step.clone()
            })
        })
        .collect()
}

/// The longest write request of a pass, as tether timed it; zero when it wrote nothing.
fn longest_write(items: &[item::Item<'_>]) -> Duration {
    items
        .iter()
        .filter_map(|i| i.written_in)
        .max()
        .unwrap_or_default()
}

/// One log line for a sync or heal that wrote or failed (`what` says which), with its
/// longest write's round trip (`write_us`): of a heal's time, the part the API server's
/// answer bounds (issue #31's heal floor; the serve bench reads it).
fn log_finished(
    report: &SyncReport,
    what: &'static str,
    objects: usize,
    started: Instant,
    longest_write: Duration,
) {
    if report.changed() || report.failed() {
        tracing::info!(
            app = %report.app,
            objects,
            created = report.count(Action::Created),
            configured = report.count(Action::Configured),
            pruned = report.count(Action::Pruned),
            failed = report.count(Action::Failed),
            conflicts = report.count(Action::Conflict),
            elapsed_ms = started.elapsed().as_millis() as u64,
            write_us = longest_write.as_micros() as u64,
            "{what} finished"
        );
    }
}

/// A report of nothing done yet.
fn new_report(
    options: &SyncOptions<'_>,
    revision: Option<&str>,
    inventory: &Inventory,
) -> SyncReport {
    SyncReport {
        app: options.app.to_string(),
        revision: revision.map(str::to_string),
        dry_run: options.dry_run,
        objects: Vec::new(),
        prune_refused: None,
        health: Health::Healthy,
        wait_failed: None,
        validation_failed: false,
        validation_retryable: false,
        inventory: inventory.clone(),
        hooks: Vec::new(),
    }
}

/// One object the server did not validate means nothing is applied: the report
/// then says so for every object, and the items are spent. Otherwise they are
/// given back.
fn refuse_invalid<'m>(
    items: Vec<item::Item<'m>>,
    report: &mut SyncReport,
    judge: &health::Judge<'_>,
) -> Option<Vec<item::Item<'m>>> {
    let failures = items
        .iter()
        .filter(|i| matches!(i.plan, Plan::Failed(_) | Plan::Unavailable(_)))
        .count();
    if failures == 0 {
        return Some(items);
    }
    report.validation_failed = true;
    report.validation_retryable = items.iter().all(|i| !matches!(i.plan, Plan::Failed(_)));
    let why = format!("not applied: {failures} objects failed validation");
    report.objects = finish(items, &why, judge);
    report.health = report::worst(&report.objects);
    None
}

/// Runs the SyncFail hooks of a sync that failed (with a deadline of their own, as
/// every phase has).
async fn run_sync_fail(
    cluster: &Cluster,
    hooks: &[hooks::Hook<'_>],
    options: &SyncOptions<'_>,
    report: &mut SyncReport,
) {
    let ran = run_phase(cluster, hooks, Phase::SyncFail, options).await;
    report.hooks.extend(ran);
}

/// Runs the hooks of one phase with the sync's app and hook timeout.
async fn run_phase(
    cluster: &Cluster,
    hooks: &[hooks::Hook<'_>],
    phase: Phase,
    options: &SyncOptions<'_>,
) -> Vec<HookResult> {
    hooks::run_phase(cluster, hooks, phase, options.app, options.hook_timeout).await
}

/// What the app owns after a pass: its desired objects, and what prune kept.
fn next_inventory(desired: &ManifestSet, revision: Option<&str>, kept: Vec<Entry>) -> Inventory {
    Inventory {
        revision: revision.map(str::to_string),
        objects: desired
            .objects
            .iter()
            .map(|m| Entry::of(&m.id))
            .chain(kept)
            .collect(),
    }
}

async fn write_inventory(
    cluster: &Cluster,
    inventory: &Inventory,
    options: &SyncOptions<'_>,
) -> Result<(), SyncError> {
    inventory::write(cluster, inventory, options.app, options.inventory_namespace)
        .await
        .map_err(SyncError::Cluster)
}

/// An app's inventory as stored in the cluster; empty when it has none yet.
pub async fn read_inventory(
    cluster: &Cluster,
    app: &str,
    namespace: &str,
) -> Result<Inventory, SyncError> {
    Ok(inventory::read(cluster, app, namespace).await?)
}

/// The report's entries for the desired objects; objects never reached get
/// `skipped` with `why`.
fn finish(items: Vec<item::Item<'_>>, why: &str, judge: &health::Judge<'_>) -> Vec<ObjectResult> {
    items
        .into_iter()
        .map(|item| {
            // Without a verdict an object is in sync, unless the server refused it.
            let drift = match (&item.diff, &item.plan) {
                (Some(diff), _) => Some(diff.drift.status()),
                (None, Plan::Failed(_) | Plan::Unavailable(_)) => None,
                (None, _) => Some(tether_diff::diff::Status::InSync),
            };
            let (changes, views) = match (&item.plan, &item.diff) {
                (Plan::Configure(_), Some(diff)) => {
                    (diff.drift.changes().to_vec(), Some(Box::new(diff.clone())))
                }
                _ => (Vec::new(), None),
            };
            let (action, message) = match (item.result, item.plan) {
                (Some(result), _) => result,
                (None, Plan::Failed(message) | Plan::Unavailable(message)) => {
                    (Action::Failed, message)
                }
                (None, Plan::Conflict(owner)) => (
                    Action::Conflict,
                    format!("labelled for app {owner:?}: not applied"),
                ),
                // A dry run (or a sync stopped by a failure) reports what it would do.
                (None, Plan::Unchanged) => (Action::Unchanged, String::new()),
                (None, Plan::Skip(why)) => (Action::Skipped, why),
                (None, _) if !why.is_empty() => (Action::Skipped, why.to_string()),
                (None, Plan::Create) => (Action::Created, String::new()),
                (None, Plan::Configure(m)) => (Action::Configured, m),
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
                Some(live) => judge.assess(&item.manifest.id, live),
                None => Assessment::missing(),
            });
            ObjectResult {
                id: item.manifest.id.clone(),
                action,
                drift,
                health,
                message,
                changes,
                views,
                lineage: item.latest.as_ref().map(Lineage::of).unwrap_or_default(),
            }
        })
        .collect()
}
