//! The stages of a sync pass, in the order `sync()` and `heal()` call them: each is a
//! method of [`Pass`] that returns the [`StageFailure`] where it fails (or a
//! [`SyncError`] when the pass cannot go on at all), and [`Pass::close`] turns the
//! first failure into the report, running what a failed pass still owes (the
//! inventory of what it may have written, the SyncFail hooks).
//!
//! The stages that act walk the plan (`plan`) top to bottom, each taking the steps
//! that are its own from the front: pre-sync the PreSync steps (the Namespaces and
//! CRDs hoisted there, then the hooks), apply by wave the Sync objects, sync hooks
//! the Sync hooks, post-sync the PostSync hooks; a failed pass skips to SyncFail.

use std::time::{Duration, Instant};

use crate::cluster::{Cluster, ClusterError};
use tether_diff::diff::{DiffOptions, MaskKey, Mode, OpenApiSchemas};
use tether_diff::manifest::ManifestSet;

use super::health::{self, Health};
use super::hooks::{self, Hook};
use super::inventory::{self, Entry, Inventory};
use super::item::{Item, Plan, not_validated};
use super::observe::{Candidate, Observed, observe, observe_objects};
use super::plan::{self, Step, Work};
use super::report::{self, Action, HookAction, ObjectResult, SyncReport};
use super::stage::Phase;
use super::stage::{ObjectFailure, StageFailure};
use super::{HookRuns, SyncError, SyncOptions, apply, prune};

/// Why the stages stopped: a stage failed (the report says which), or the pass
/// could not go on (the caller gets the error, not a report).
pub(super) enum Stop {
    Failed(StageFailure),
    Error(SyncError),
}

impl From<StageFailure> for Stop {
    fn from(failure: StageFailure) -> Self {
        Stop::Failed(failure)
    }
}

impl From<SyncError> for Stop {
    fn from(err: SyncError) -> Self {
        Stop::Error(err)
    }
}

impl From<ClusterError> for Stop {
    fn from(err: ClusterError) -> Self {
        Stop::Error(SyncError::Cluster(err))
    }
}

/// What a pass reads and owns: a whole app (its prune candidates and inventory
/// record too), or some of its objects only (a heal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    App,
    Objects,
}

/// What a pass acts on, and in which order: the app's objects, its hooks, and the
/// plan's steps over both.
pub(super) struct Planned<'p> {
    pub(super) objects: &'p ManifestSet,
    pub(super) hooks: Vec<Hook<'p>>,
    pub(super) steps: Vec<Step>,
    /// When the pass started (`--wait` counts from here).
    pub(super) started: Instant,
}

/// One pass in progress: what it observed and has done so far.
pub(super) struct Pass<'p, 'o> {
    cluster: &'p Cluster,
    options: &'p SyncOptions<'o>,
    scope: Scope,
    started: Instant,
    desired: &'p ManifestSet,
    revision: Option<&'p str>,
    /// The plan's steps not taken yet, in order.
    steps: Vec<Step>,
    inventory: Inventory,
    /// The inventory before the first write: everything this pass may write.
    covering: Inventory,
    covered: bool,
    items: Vec<Item<'p>>,
    candidates: Vec<Candidate>,
    schema: OpenApiSchemas,
    mask: MaskKey,
    hooks: Vec<Hook<'p>>,
    run_hooks: bool,
    made: apply::Made,
    /// The pass got to applying by wave: what it owns is recorded even if it fails.
    reached_apply: bool,
    recorded: bool,
    /// What prune kept, once it ran.
    kept: Option<Vec<Entry>>,
    longest_write: Duration,
    report: SyncReport,
}

impl<'p, 'o> Pass<'p, 'o> {
    /// Observe: the live objects, what applying each would do, and what prune
    /// would delete (of `inventory`, the app's as known). Whether the hooks run is
    /// decided here, and with it whether the plan hoists the Namespaces and CRDs the
    /// revision creates ahead of its PreSync hooks.
    pub(super) async fn observe(
        cluster: &'p Cluster,
        plan: Planned<'p>,
        inventory: Inventory,
        revision: Option<&'p str>,
        options: &'p SyncOptions<'o>,
        scope: Scope,
    ) -> Result<Pass<'p, 'o>, SyncError> {
        let Planned {
            objects: desired,
            hooks,
            mut steps,
            started,
        } = plan;
        let Observed {
            items,
            candidates,
            schema,
            mask,
        } = match scope {
            Scope::App => observe(cluster, desired, &inventory, options).await?,
            Scope::Objects => observe_objects(cluster, desired, options).await?,
        };
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
        let run_hooks =
            !hooks.is_empty() && !options.dry_run && (options.hooks == HookRuns::Always || writes);
        if run_hooks {
            // A hook in a namespace of the revision would fail forever otherwise.
            plan::hoist(&mut steps, |i| items[i].plan == Plan::Create);
        }
        let covering = inventory.covering(desired);
        Ok(Pass {
            cluster,
            options,
            scope,
            started,
            desired,
            revision,
            steps,
            covered: covering.objects == inventory.objects,
            covering,
            report: new_report(options, revision, &inventory),
            inventory,
            items,
            candidates,
            schema,
            mask,
            hooks,
            run_hooks,
            made: apply::Made::default(),
            reached_apply: false,
            recorded: false,
            kept: None,
            longest_write: Duration::ZERO,
        })
    }

    /// Validate: one object the server did not validate means nothing is applied.
    pub(super) fn validate(&self) -> Result<(), StageFailure> {
        let objects = not_validated(&self.items);
        if objects.is_empty() {
            return Ok(());
        }
        let refused = self.items.iter().any(|i| matches!(i.plan, Plan::Failed(_)));
        Err(if refused {
            StageFailure::Refused { objects }
        } else {
            StageFailure::Unavailable { objects }
        })
    }

    /// Pre-sync: the PreSync steps of the plan, the Namespaces and CRDs this revision
    /// creates (when it has PreSync hooks), then its PreSync hooks. Hooks that do not
    /// run this pass are reported skipped here.
    pub(super) async fn pre_sync(&mut self) -> Result<(), Stop> {
        if !self.run_hooks {
            self.skip_hooks();
            return Ok(());
        }
        if self.next_is(Phase::PreSync, Work::Apply) {
            self.cover_inventory().await?;
            self.walk(Phase::PreSync, Work::Apply).await?;
        }
        Ok(self.walk(Phase::PreSync, Work::RunHooks).await?)
    }

    /// Cover inventory: before the first write, the inventory names everything this
    /// pass may write, so an interrupted pass leaves nothing unowned.
    pub(super) async fn cover_inventory(&mut self) -> Result<(), SyncError> {
        if self.options.dry_run || self.covered {
            return Ok(());
        }
        write_inventory(self.cluster, &self.covering, self.options).await?;
        self.report.inventory = self.covering.clone();
        self.covered = true;
        Ok(())
    }

    /// Apply by wave: the Sync objects of the plan in order, stopping at the first
    /// step that fails.
    pub(super) async fn apply_by_wave(&mut self) -> Result<(), StageFailure> {
        self.reached_apply = true;
        if self.options.dry_run {
            return Ok(());
        }
        self.walk(Phase::Sync, Work::Apply).await
    }

    /// Sync hooks, then (when there are PostSync hooks) the wait for the app to be
    /// Healthy that PostSync hooks need.
    pub(super) async fn sync_hooks(&mut self) -> Result<(), StageFailure> {
        if !self.run_hooks {
            return Ok(());
        }
        self.walk(Phase::Sync, Work::RunHooks).await?;
        if !self.steps.iter().any(|s| s.phase == Phase::PostSync) {
            return Ok(());
        }
        // PostSync hooks run once the app is Healthy, whether or not `--wait` asked:
        // within `--wait`'s time for the whole sync, else the phase's hook timeout.
        let all: Vec<usize> = (0..self.items.len()).collect();
        let healthy_by = match self.options.wait {
            Some(wait) => self.started + wait,
            None => Instant::now() + self.options.hook_timeout,
        };
        let judge = &self.options.health;
        apply::wait_healthy(self.cluster, &mut self.items, &all, healthy_by, judge)
            .await
            .map_err(|why| StageFailure::Health(Box::new(why)))
    }

    /// Prune: delete what the app owns and no longer declares (in a dry run, say
    /// what would be), unless a guard refuses.
    pub(super) async fn prune(&mut self) -> Result<(), Stop> {
        self.report_objects("");
        let candidates = std::mem::take(&mut self.candidates);
        if !self.options.dry_run && self.options.inventory.is_some() && !candidates.is_empty() {
            // Prune decides from the inventory as stored now, not as last seen.
            let (app, namespace) = (self.options.app, self.options.inventory_namespace);
            let stored = inventory::read(self.cluster, app, namespace)
                .await
                .map_err(SyncError::from)?;
            self.inventory.objects.extend(stored.objects);
        }
        let pruned = prune::run(
            self.cluster,
            candidates,
            &self.inventory,
            self.desired.len(),
            self.options,
            &mut self.report,
        )
        .await?;
        self.kept = Some(pruned.kept);
        if let Some(refusal) = pruned.refused {
            return Err(StageFailure::PruneRefused(refusal).into());
        }
        if !pruned.failed.is_empty() {
            return Err(StageFailure::Prune {
                objects: pruned.failed,
            }
            .into());
        }
        Ok(())
    }

    /// Record inventory: what the app owns now, its desired objects and what prune
    /// kept (everything it owned, when prune did not run).
    pub(super) async fn record_inventory(&mut self) -> Result<(), SyncError> {
        if self.scope == Scope::Objects || self.recorded {
            return Ok(());
        }
        self.recorded = true;
        let kept = self.kept.take().unwrap_or_else(|| {
            // Nothing is pruned after a failure: what the app owns stays recorded.
            self.candidates
                .iter()
                .filter(|c| {
                    matches!(
                        c.verdict,
                        prune::Verdict::Delete | prune::Verdict::Protected(_)
                    )
                })
                .map(|c| Entry::of(&c.id))
                .collect()
        });
        let next = next_inventory(self.desired, self.revision, kept);
        if !self.options.dry_run && next != self.covering {
            write_inventory(self.cluster, &next, self.options).await?;
        }
        self.report.inventory = next;
        Ok(())
    }

    /// Objects labelled for another app were left alone: the pass did not do all
    /// Git asks (and PostSync hooks do not run).
    pub(super) fn claimed(&mut self) -> Result<(), StageFailure> {
        self.report_objects("");
        let objects: Vec<ObjectFailure> = self
            .report
            .objects
            .iter()
            .filter(|o| o.action == Action::Conflict)
            .map(|o| ObjectFailure {
                id: o.id.clone(),
                cause: o.message.clone(),
            })
            .collect();
        match objects.is_empty() {
            true => Ok(()),
            false => Err(StageFailure::Conflict { objects }),
        }
    }

    /// Post-sync: the PostSync hooks of a pass that did all it was asked.
    pub(super) async fn post_sync(&mut self) -> Result<(), StageFailure> {
        if !self.run_hooks {
            return Ok(());
        }
        self.walk(Phase::PostSync, Work::RunHooks).await
    }

    /// The report of a pass that ran its stages to `outcome`. A failed pass still
    /// reports every object (those it never reached as skipped, saying why), records
    /// what it owns if it got to applying, and runs its SyncFail hooks (neither after
    /// a validation failure: nothing of the revision was written).
    pub(super) async fn close(
        mut self,
        outcome: Result<(), Stop>,
    ) -> Result<SyncReport, SyncError> {
        let failure = match outcome {
            Ok(()) => self.claimed().err(),
            Err(Stop::Failed(failure)) => Some(failure),
            Err(Stop::Error(err)) => return Err(err),
        };
        if let Some(failure) = &failure {
            self.report_objects(&failure.not_reached());
            if self.reached_apply && !failure.is_validation() {
                self.record_inventory().await?;
            }
            if self.run_hooks && !failure.is_validation() {
                // The steps the failure cut short are never taken; SyncFail's are. Their
                // own failures are in the report's hooks; the pass failed already.
                self.steps.retain(|s| s.phase == Phase::SyncFail);
                let _ = self.walk(Phase::SyncFail, Work::RunHooks).await;
            }
        }
        self.report.failure = failure;
        if !self.options.dry_run {
            self.log_finished();
        }
        Ok(self.report)
    }

    /// Writes `steps` (`apply`); the objects refused in their deferred dry run, the
    /// objects that failed, or why waiting for health ended, are the stage's failure.
    async fn write(&mut self, steps: &[Step]) -> Result<(), StageFailure> {
        let diff_options = DiffOptions {
            mode: Mode::Online,
            rules: self.options.rules,
            schema: &self.schema,
            mask: &self.mask,
        };
        let waited = apply::apply_steps(
            self.cluster,
            &mut self.items,
            steps,
            &diff_options,
            self.options,
            self.started,
            &mut self.made,
        )
        .await;
        // An object whose Namespace this pass created was refused once it could be
        // dry-run: when nothing else was written, the Namespaces go again and the pass
        // failed validation, as if they had never been needed.
        if let Err(refused) = self.validate()
            && apply::undo_namespaces(self.cluster, &mut self.items, &mut self.made).await
        {
            return Err(refused);
        }
        let objects: Vec<ObjectFailure> = self
            .items
            .iter()
            .filter_map(|i| match &i.result {
                Some((Action::Failed, cause)) => Some(ObjectFailure {
                    id: i.manifest.id.clone(),
                    cause: cause.clone(),
                }),
                _ => None,
            })
            .collect();
        if !objects.is_empty() {
            return Err(StageFailure::Apply { objects });
        }
        waited.map_err(|why| StageFailure::Health(Box::new(why)))
    }

    /// Whether the plan's next step is `phase`'s `work`.
    fn next_is(&self, phase: Phase, work: Work) -> bool {
        self.steps
            .first()
            .is_some_and(|s| s.phase == phase && s.work == work)
    }

    /// Takes the plan's next steps while they are `phase`'s `work`: objects are
    /// written together (a wave's health is waited for across its kinds' steps),
    /// hooks run as one phase (one deadline; its `HookSucceeded` instances deleted
    /// once all succeeded).
    async fn walk(&mut self, phase: Phase, work: Work) -> Result<(), StageFailure> {
        let n = self
            .steps
            .iter()
            .take_while(|s| s.phase == phase && s.work == work)
            .count();
        if n == 0 {
            return Ok(());
        }
        let steps: Vec<Step> = self.steps.drain(..n).collect();
        match work {
            Work::Apply => self.write(&steps).await,
            Work::RunHooks => self.run_hooks(phase, &steps).await,
        }
    }

    /// Runs the hooks of one phase's steps (with a deadline of its own, as every
    /// phase has).
    async fn run_hooks(&mut self, phase: Phase, steps: &[Step]) -> Result<(), StageFailure> {
        let (app, timeout) = (self.options.app, self.options.hook_timeout);
        let ran = hooks::run_phase(self.cluster, &self.hooks, steps, phase, app, timeout).await;
        let failed: Vec<ObjectFailure> = ran
            .iter()
            .filter(|r| r.action == HookAction::Failed)
            .map(|r| ObjectFailure {
                id: r.id.clone(),
                cause: r.message.clone(),
            })
            .collect();
        self.report.hooks.extend(ran);
        match failed.is_empty() {
            true => Ok(()),
            false => Err(StageFailure::Hook {
                phase,
                hooks: failed,
            }),
        }
    }

    /// Hooks that do not run this pass (a dry run; in `serve`, a pass with nothing to
    /// write) leave the plan, reported skipped (SyncFail's only run on a failure).
    fn skip_hooks(&mut self) {
        let why = if self.options.dry_run {
            "dry run: not run"
        } else {
            "nothing to sync: not run"
        };
        let (hook_steps, object_steps) = std::mem::take(&mut self.steps)
            .into_iter()
            .partition(|s| s.work == Work::RunHooks);
        self.steps = object_steps;
        let hook_steps: Vec<Step> = hook_steps;
        for step in hook_steps.iter().filter(|s| s.phase != Phase::SyncFail) {
            let skipped = hooks::skipped(&self.hooks, &step.objects, step.phase, why);
            self.report.hooks.extend(skipped);
        }
    }

    /// Moves the desired objects not reported yet into the report; those never
    /// reached are skipped with `why`.
    fn report_objects(&mut self, why: &str) {
        let items = std::mem::take(&mut self.items);
        if items.is_empty() {
            return;
        }
        let longest = items.iter().filter_map(|i| i.written_in).max();
        self.longest_write = self.longest_write.max(longest.unwrap_or_default());
        let objects = finish(items, why, &self.options.health);
        self.report.objects.extend(objects);
        self.report.health = report::worst(&self.report.objects);
    }

    /// One log line for a pass that wrote or failed, with its longest write's round
    /// trip (`write_us`): of a heal's time, the part the API server's answer bounds
    /// (issue #31's heal floor; the serve bench reads it).
    fn log_finished(&self) {
        let report = &self.report;
        if !(report.changed() || report.failed()) {
            return;
        }
        let what = match self.scope {
            Scope::App => "sync",
            Scope::Objects => "heal",
        };
        tracing::info!(
            app = %report.app,
            objects = self.desired.len(),
            created = report.count(Action::Created),
            configured = report.count(Action::Configured),
            pruned = report.count(Action::Pruned),
            failed = report.count(Action::Failed),
            conflicts = report.count(Action::Conflict),
            elapsed_ms = self.started.elapsed().as_millis() as u64,
            write_us = self.longest_write.as_micros() as u64,
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
        health: Health::Healthy,
        failure: None,
        inventory: inventory.clone(),
        hooks: Vec::new(),
    }
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

/// The report's entries for the desired objects; objects never reached get
/// `skipped` with `why`.
fn finish(items: Vec<Item<'_>>, why: &str, judge: &health::Judge<'_>) -> Vec<ObjectResult> {
    items
        .into_iter()
        .map(|item| {
            let (health, lineage) = item.judgement(judge);
            let health = Some(health);
            // Without a verdict an object is in sync, unless the server refused it.
            let drift = match (&item.diff, &item.plan) {
                (Some(diff), _) => Some(diff.drift.status()),
                (None, Plan::Failed(_) | Plan::Unavailable(_)) => None,
                (None, _) => Some(tether_diff::diff::Status::InSync),
            };
            let (changes, views) = match (&item.plan, item.diff) {
                (Plan::Configure(_), Some(diff)) => {
                    (diff.drift.changes().to_vec(), Some(Box::new(diff)))
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
            ObjectResult {
                id: item.manifest.id.clone(),
                action,
                drift,
                health,
                message,
                changes,
                views,
                lineage,
            }
        })
        .collect()
}
