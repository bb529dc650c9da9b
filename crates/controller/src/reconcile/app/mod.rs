//! One app's worker: a level-triggered loop of passes. A pass reads the current
//! revision's manifests, the live objects (from the watch cache), and syncs, or (when
//! automation may not act) reports the drift the same sync would correct. Whatever
//! woke it, a pass does the same thing; triggers arriving during a pass make one more.
//! A wake by live changes of the app's own objects alone is a heal: the same pass over
//! those objects only, at once, so a heal costs what correcting them costs, not a read
//! of the whole app, and never queues behind other apps' passes.
//! A failing source is shown with its age, and announced once when it turns stale.
//!
//! Here: the handle the runtime holds, and the loop (wait for the next wake, then
//! heal, take a commit, or pass). Beside it:
//!
//! ```text
//! schedule    when the worker wakes next on its own (resync, retry, window, staleness)
//! pass        what a wake does: a full pass, a heal, an unchanged commit taken
//! render      the revision a pass applies, its identity and its manifests
//! automation  whether automation may act now, and why not
//! outcome     the one place a pass's outcome is recorded (status, metrics, events)
//! ```

mod automation;
mod outcome;
mod pass;
mod render;
mod schedule;

use parking_lot::Mutex;
use schedule::{ManualSync, Schedule};

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use kube::core::GroupVersionKind;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::decryption::AppKeys;
use super::depends::{Dependencies, Registration};
use super::leader::Leadership;
use super::pin::Pinning;
use super::shard::Ownership;
use super::trust::Trust;
use super::value_sources::ValueSources;
use super::values::PassValues;
use crate::config::AppConfig;
use crate::windows;
use tether_core::cluster::Cluster;
use tether_core::cluster::cache::Cache;
use tether_core::report::commit_status::{CommitStatusReporter, CommitStatusTarget};
use tether_core::report::notify::{Channel, Notifier};
use tether_core::report::status::{Pin, Statuses};
use tether_core::source::{Source, SourceCache, SourceState};
use tether_core::sync::desired::RenderCache;
use tether_core::sync::health::Health;
use tether_core::sync::inputs::Identity;
use tether_core::sync::inventory::Inventory;
use tether_diff::diff::IgnoreRule;
use tether_diff::manifest::substitute::Substitution;
use tether_diff::manifest::{ObjectKey, ValuesLayer};

/// The longest a pass may run: every request is bounded on its own, so this catches
/// a pass that keeps making slow progress (thousands of objects behind a throttled API
/// server) and lets the app report it instead of holding its worker for good.
const PASS_DEADLINE: Duration = Duration::from_secs(10 * 60);

/// Heals at once per pass permit (`concurrency`): a heal is one or a few applies,
/// a pass up to [`tether_core::sync::DEFAULT_REQUEST_CONCURRENCY`] requests at a time.
pub const HEALS_PER_PASS: usize = 4;

/// What every worker shares.
pub struct Shared {
    pub cluster: Arc<Cluster>,
    pub cache: Cache,
    pub sources: SourceCache,
    pub statuses: Statuses,
    /// Which leadership fences each app's writes: the leader's, or its shard's.
    pub ownership: Ownership,
    pub inventory_namespace: String,
    /// Bounds how many apps run a pass at once.
    pub passes: Arc<Semaphore>,
    /// Bounds how many heals run at once ([`HEALS_PER_PASS`] per pass permit): they
    /// do not queue behind passes, but a storm of live changes across many apps
    /// (a namespace emptied, a careless `kubectl apply` across the fleet) must not
    /// open thousands of requests to the API server at once.
    pub heals: Arc<Semaphore>,
    pub resync_interval: Duration,
    /// How long one renderer run may take (`renderTimeout`).
    pub render_timeout: Duration,
    pub notifier: Notifier,
    pub commit_statuses: CommitStatusReporter,
    /// Every app's `dependsOn`, and the wakes of those waiting.
    pub dependencies: Dependencies,
    /// The configuration's CEL health rules (`healthCheckExprs`), compiled.
    pub health_rules: tether_core::sync::health::HealthRules,
}

/// What woke a worker since it last looked: objects of the app that changed live,
/// and whether anything else did (a resync, a manual sync, a dropped event).
#[derive(Debug, Default)]
struct Wakes {
    objects: HashSet<ObjectKey>,
    other: bool,
}

/// A running worker.
pub struct AppHandle {
    pub config: AppConfig,
    wake: Arc<Notify>,
    wakes: Arc<Mutex<Wakes>>,
    manual: ManualSync,
    suspended: Arc<AtomicBool>,
    pinning: Pinning,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl AppHandle {
    /// Asks for one more pass (coalesced with any other request).
    pub fn wake(&self) {
        self.lock_wakes().other = true;
        self.wake.notify_one();
    }

    /// One of the app's objects changed live: a pass, which may start as a heal of
    /// that object alone (see `Worker::heal_pass`).
    pub fn object_changed(&self, key: ObjectKey) {
        self.lock_wakes().objects.insert(key);
        self.wake.notify_one();
    }

    /// A manual sync: one pass that acts even when automated sync is off.
    pub fn request_sync(&self) {
        self.manual.request();
        self.wake();
    }

    fn lock_wakes(&self) -> parking_lot::MutexGuard<'_, Wakes> {
        self.wakes.lock()
    }

    /// Suspends or resumes automation from the API (the dashboard's button), on top of
    /// the configuration's `suspend`; takes a pass so the status shows it at once.
    /// Lasts until the worker restarts (a reload that changes the app, a restart).
    pub fn set_suspended(&self, suspended: bool) {
        self.suspended.store(suspended, Ordering::SeqCst);
        self.wake();
    }

    /// Pins the app to an earlier revision (a rollback) or unpins it (None); takes a
    /// pass, which syncs the revision now wanted.
    pub fn set_pin(&self, pin: Option<Pin>) {
        self.pinning.set(pin);
        self.wake();
    }

    /// Stops the worker after its current pass; waits at most `grace` for it.
    pub async fn stop(self, grace: Duration) {
        self.cancel.cancel();
        let mut task = self.task;
        if tokio::time::timeout(grace, &mut task).await.is_err() {
            tracing::warn!(app = %self.config.name, "pass did not finish in time; stopping it");
            task.abort();
        }
    }
}

/// Starts the worker of `config`, driven by `source` (the app's Git source watcher)
/// and by `value_sources` (the watchers of its `source.helm.valueSources`, by name),
/// each of whose new states takes a pass.
pub fn spawn(
    config: AppConfig,
    shared: Arc<Shared>,
    source: watch::Receiver<SourceState>,
    value_sources: Vec<(String, Source, watch::Receiver<SourceState>)>,
    cancel: CancellationToken,
) -> AppHandle {
    let wake = Arc::new(Notify::new());
    let wakes = Arc::new(Mutex::new(Wakes::default()));
    let manual = ManualSync::default();
    let schedule = Schedule::new(shared.resync_interval, manual.clone());
    let suspended = Arc::new(AtomicBool::new(false));
    let pinning = Pinning::default();
    let woken: super::depends::Wake = {
        let (wake, wakes) = (wake.clone(), wakes.clone());
        Arc::new(move || {
            wakes.lock().other = true;
            wake.notify_one();
        })
    };
    for (_, _, state) in &value_sources {
        let (mut state, woken, cancel) = (state.clone(), woken.clone(), cancel.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    changed = state.changed() => match changed {
                        Ok(()) => woken(),
                        Err(_) => return,
                    },
                }
            }
        });
    }
    let dependencies = shared.dependencies.register_with(
        &config.name,
        config.depends_on.clone(),
        config.ready_exprs.clone(),
        woken,
    );
    let worker = Worker {
        dependencies,
        leadership: shared.ownership.for_app(&config.name),
        channels: config.notifications.clone(),
        status_target: config.commit_status.clone(),
        last_health: None,
        drift_reported: false,
        stale_reported: false,
        rules: config.ignore_rules(),
        config: config.clone(),
        shared,
        source,
        wake: wake.clone(),
        wakes: wakes.clone(),
        rendered: RenderCache::default(),
        identity: None,
        suspended: suspended.clone(),
        pinning: pinning.clone(),
        inventory: None,
        synced_revision: None,
        variables: None,
        keys: None,
        values: None,
        value_sources: ValueSources::new(value_sources),
        ref_values: BTreeMap::new(),
        synced_hooks: false,
        schedule,
        watched: HashSet::new(),
        trust: Trust::new(config.source.verify.clone()),
    };
    let task = tokio::spawn(worker.run(cancel.clone()));
    AppHandle {
        config,
        wake,
        wakes,
        manual,
        suspended,
        pinning,
        cancel,
        task,
    }
}

struct Worker {
    config: AppConfig,
    /// Its place among the apps' `dependsOn`: a pass waits for its dependencies.
    dependencies: Registration,
    /// The leader's, or this app's shard's: writes happen only while it leads.
    leadership: Leadership,
    channels: Vec<Arc<Channel>>,
    status_target: Option<Arc<CommitStatusTarget>>,
    /// The health after the previous pass: Degraded is announced once, on arrival.
    last_health: Option<Health>,
    /// Whether the current drift has been announced.
    drift_reported: bool,
    /// Whether the source's current failure has been announced as stale.
    stale_reported: bool,
    rules: Vec<IgnoreRule>,
    shared: Arc<Shared>,
    source: watch::Receiver<SourceState>,
    wake: Arc<Notify>,
    wakes: Arc<Mutex<Wakes>>,
    /// Suspended from the API (see [`AppHandle::set_suspended`]).
    suspended: Arc<AtomicBool>,
    /// The revision a rollback holds the app at (see [`pin`]).
    pinning: Pinning,
    /// The manifests of the last revision read, by [`Worker::revision_id`].
    rendered: RenderCache,
    /// The inputs identity at the last commit looked at ([`inputs`]).
    identity: Option<Identity>,
    /// The inventory as last written (or read) by this worker.
    inventory: Option<Inventory>,
    /// The revision last applied in full, by [`variables::revision_id`].
    synced_revision: Option<String>,
    /// The post-build variables the last pass read (`postBuild`).
    variables: Option<Substitution>,
    /// The SOPS keys the last pass read (`decryption`).
    keys: Option<AppKeys>,
    /// The chart values the last pass read (`source.helm.valuesFrom`).
    values: Option<PassValues>,
    /// The watchers of `source.helm.valueSources`, and the files last read of them.
    value_sources: ValueSources,
    /// The value files the last pass read from `value_sources`, by `valueFiles` entry.
    ref_values: BTreeMap<String, ValuesLayer>,
    /// Whether that revision has hooks (which run with every pass that writes, so a
    /// heal of it is a full pass).
    synced_hooks: bool,
    /// When it wakes on its own, and what it owes (a retry, a stall, a manual sync).
    schedule: Schedule,
    watched: HashSet<GroupVersionKind>,
    /// `source.verify`: the revision a pass may apply.
    trust: Trust,
}

impl Worker {
    async fn run(mut self, cancel: CancellationToken) {
        let mut leadership = self.leadership.clone();
        loop {
            let windows_change = windows::next_change(&self.config.sync_windows, Utc::now())
                .and_then(|at| (at - Utc::now()).to_std().ok())
                .map(|d| Instant::now() + d);
            // An app another replica holds has no retry or staleness to act on here: its
            // pass returns at once (`elsewhere`) and moves neither deadline, so one that
            // had passed would wake this loop again at once, forever (a core spent on a
            // replica that lost the shard of an app whose last pass failed). The source
            // is withdrawn while held elsewhere, which clears its staleness too, but only
            // once a fetch under way has ended.
            let here = !self.held_elsewhere();
            let deadline = self
                .schedule
                .next_wake(windows_change, self.stale_at(), here);
            let (mut notified, mut moved) = (false, false);
            tokio::select! {
                _ = cancel.cancelled() => return,
                changed = self.source.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    moved = true;
                }
                _ = self.wake.notified() => notified = true,
                _ = leadership.changed() => {
                    // Another replica may have written the inventory while this one
                    // followed: the next pass reads it as stored.
                    self.inventory = None;
                }
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
            if cancel.is_cancelled() {
                return;
            }
            let wakes = std::mem::take(&mut *self.wakes.lock());
            // Woken by live changes of the app's objects alone: look at those at
            // once (and heal them), without waiting for a pass permit behind other
            // apps' passes.
            if notified
                && !wakes.other
                && !wakes.objects.is_empty()
                && self.heal_pass(&wakes.objects).await
            {
                continue;
            }
            // Woken by the source alone: a commit that changes nothing the app's
            // render reads is taken without a pass.
            if moved
                && !wakes.other
                && wakes.objects.is_empty()
                && Box::pin(self.unchanged_commit()).await
            {
                continue;
            }
            let Ok(_permit) = self.shared.passes.clone().acquire_owned().await else {
                return;
            };
            if self.schedule.backing_off(Instant::now())
                && self.rendered_is_current()
                && !self.schedule.manual.owed()
            {
                // Backing off: live changes and resyncs wait for the retry; the
                // source's standing is still shown (and marked seen, or its change
                // would wake this loop again at once).
                let state = self.source.borrow_and_update().clone();
                self.observe_source(&state.status, state.revision.as_ref());
                continue;
            }
            // Boxed: a worker waits far longer than it runs, and an inline pass would
            // make every idle worker's task as large as its deepest pass (12 KiB each).
            Box::pin(self.pass()).await;
            self.schedule
                .passed(Instant::now(), self.shared.resync_interval);
        }
    }
}
