//! One app's worker: a level-triggered loop of passes. A pass reads the current
//! revision's manifests, the live objects (from the watch cache), and syncs, or (when
//! automation may not act) reports the drift the same sync would correct. Whatever
//! woke it, a pass does the same thing; triggers arriving during a pass make one more.
//! A wake by live changes of the app's own objects alone is a heal: the same pass over
//! those objects only, at once, so a heal costs what correcting them costs, not a read
//! of the whole app, and never queues behind other apps' passes.
//! A failing source is shown with its age, and announced once when it turns stale.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, TimeDelta, Utc};
use kube::core::GroupVersionKind;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use super::decryption::{self, AppKeys};
use super::depends::{Dependencies, Gate, Registration};
use super::inputs;
use super::leader::Leadership;
use super::pass::PassError;
use super::pin::{self, Pinning};
use super::shard::Ownership;
use super::trust::{Check, Trust};
use super::values::{self, PassValues};
use super::variables;
use crate::config::AppConfig;
use crate::windows::{self, Verdict};
use tether_core::cluster::Cluster;
use tether_core::cluster::cache::Cache;
use tether_core::cluster::lookup::LookupEndpoint;
use tether_core::metrics::METRICS;
use tether_core::report::commit_status::{
    CommitState, CommitStatusReporter, CommitStatusTarget, StatusReport,
};
use tether_core::report::drift::Summary;
use tether_core::report::notify::{Channel, Event, EventKind, EventRevision, Notifier};
use tether_core::report::status::{
    Automation, PassInfo, PassResult, Pin, RevisionInfo, SourceInfo, Statuses, SyncStatus,
};
use tether_core::source::{Revision, SourceCache, SourceState, SourceStatus};
use tether_core::sync::desired::{DesiredError, RenderCache, label_for_app, read_revision};
use tether_core::sync::health::{Health, Judge};
use tether_core::sync::inputs::Identity;
use tether_core::sync::inventory::Inventory;
use tether_core::sync::{HookRuns, SyncOptions, SyncReport, heal, sync};
use tether_diff::diff::IgnoreRule;
use tether_diff::manifest::substitute::Substitution;
use tether_diff::manifest::{ManifestSet, ObjectKey};
use tether_schema::ownership::is_hook;

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
    sync_requested: Arc<AtomicBool>,
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
        self.sync_requested.store(true, Ordering::SeqCst);
        self.wake();
    }

    fn lock_wakes(&self) -> std::sync::MutexGuard<'_, Wakes> {
        self.wakes.lock().unwrap_or_else(|p| p.into_inner())
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

/// Starts the worker of `config`, driven by `source` (the app's Git source watcher).
pub fn spawn(
    config: AppConfig,
    shared: Arc<Shared>,
    source: watch::Receiver<SourceState>,
    cancel: CancellationToken,
) -> AppHandle {
    let wake = Arc::new(Notify::new());
    let wakes = Arc::new(Mutex::new(Wakes::default()));
    let sync_requested = Arc::new(AtomicBool::new(false));
    let suspended = Arc::new(AtomicBool::new(false));
    let pinning = Pinning::default();
    let woken: super::depends::Wake = {
        let (wake, wakes) = (wake.clone(), wakes.clone());
        Arc::new(move || {
            wakes.lock().unwrap_or_else(|p| p.into_inner()).other = true;
            wake.notify_one();
        })
    };
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
        sync_requested: sync_requested.clone(),
        rendered: RenderCache::default(),
        identity: None,
        suspended: suspended.clone(),
        pinning: pinning.clone(),
        inventory: None,
        synced_revision: None,
        variables: None,
        keys: None,
        values: None,
        synced_hooks: false,
        stalled_on: None,
        backoff: Backoff::new(),
        retry_at: None,
        watched: HashSet::new(),
        trust: Trust::new(config.source.verify.clone()),
    };
    let task = tokio::spawn(worker.run(cancel.clone()));
    AppHandle {
        config,
        wake,
        wakes,
        sync_requested,
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
    sync_requested: Arc<AtomicBool>,
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
    /// Whether that revision has hooks (which run with every pass that writes, so a
    /// heal of it is a full pass).
    synced_hooks: bool,
    /// A revision that cannot be synced (invalid manifests): not retried until the
    /// source moves.
    stalled_on: Option<String>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    watched: HashSet<GroupVersionKind>,
    /// `source.verify`: the revision a pass may apply.
    trust: Trust,
}

impl Worker {
    async fn run(mut self, cancel: CancellationToken) {
        let mut leadership = self.leadership.clone();
        let mut next_resync = Instant::now() + self.shared.resync_interval;
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
            let deadline = [
                Some(next_resync),
                self.retry_at.filter(|_| here),
                windows_change,
                self.stale_at().filter(|_| here),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(next_resync);
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
            let wakes = std::mem::take(&mut *self.wakes.lock().unwrap_or_else(|p| p.into_inner()));
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
            if self.retry_at.is_some_and(|at| at > Instant::now())
                && self.rendered_is_current()
                && !self.sync_requested.load(Ordering::SeqCst)
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
            next_resync = Instant::now() + self.shared.resync_interval;
        }
    }

    async fn pass(&mut self) {
        let started = Instant::now();
        if self.elsewhere() {
            return;
        }
        let state = self.source.borrow_and_update().clone();
        let name = self.config.name.clone();
        self.observe_source(&state.status, state.revision.as_ref());
        let Some(head) = state.revision else {
            let tried = state.status.message.is_some();
            // A source that never fetched fails the pass: the app says why (a missing
            // credentials Secret, an unreachable host) instead of "first pass running".
            // The watcher retries it at each poll; the same failure is recorded once.
            let failed = state
                .status
                .message
                .as_ref()
                .filter(|_| !state.status.ready)
                .map(|m| PassError::Source(m.clone()));
            let result = if state.status.retryable {
                PassResult::Failed
            } else {
                PassResult::Stalled
            };
            self.shared.statuses.update(&name, |s| {
                s.sync = SyncStatus::Unknown;
                if !tried {
                    let reason = "the source has not been fetched yet";
                    s.set_condition("SourceReady", "False", "FetchFailed", reason, Utc::now());
                }
                let Some(err) = &failed else {
                    return;
                };
                let message = err.to_string();
                if s.last_pass.as_ref().and_then(|p| p.error.as_ref()) == Some(&message) {
                    return;
                }
                let now = Utc::now();
                s.last_pass = Some(PassInfo {
                    finished_at: now,
                    duration_ms: started.elapsed().as_millis() as u64,
                    result,
                    error: Some(message.clone()),
                    changed: 0,
                });
                s.set_condition("Ready", "False", err.reason(), &message, now);
                match result {
                    PassResult::Stalled => {
                        s.set_condition("Stalled", "True", err.reason(), &message, now)
                    }
                    _ => s.set_condition("Stalled", "False", "Retrying", "", now),
                }
            });
            return;
        };
        // Git's head is the status's revision; a pin holding the app elsewhere says so.
        let (revision, holding) = self.pinning.target(&head);
        let pin_set = self.pinning.get().is_some();
        self.shared.statuses.update(&name, |s| {
            s.revision = Some(RevisionInfo {
                sha: head.sha.clone(),
                subject: head.subject.clone(),
            });
            pin::show(s, holding.as_ref(), pin_set, Utc::now());
        });
        if self.dependencies.hold(&self.shared.statuses) {
            return;
        }
        match variables::read(
            &self.shared.cluster,
            &self.config,
            &self.shared.inventory_namespace,
        )
        .await
        {
            Ok(read) => self.variables = read,
            Err(err) => {
                self.record_pass(&revision, started, Err((PassError::Variables(err), 0)));
                return;
            }
        }
        match decryption::read(
            &self.shared.cluster,
            &self.config,
            &self.shared.inventory_namespace,
            self.keys.as_ref(),
        )
        .await
        {
            Ok(read) => self.keys = read,
            Err(err) => {
                self.record_pass(&revision, started, Err((PassError::Decryption(err), 0)));
                return;
            }
        }
        let read = values::read(
            &self.shared.cluster,
            &self.config,
            &self.shared.inventory_namespace,
        );
        match read.await {
            Ok(read) => self.values = read,
            Err(err) => {
                self.record_pass(&revision, started, Err((PassError::Values(err), 0)));
                return;
            }
        }
        if holding.is_none() {
            self.identify(&revision).await;
        }
        // A stalled revision waits for new inputs or new variables, or for a person
        // asking again.
        let manual = self.sync_requested.load(Ordering::SeqCst);
        if self.stalled_on.as_deref() == Some(self.revision_id(&revision.sha).as_str()) && !manual {
            return;
        }
        self.stalled_on = None;
        let revision = match holding {
            // A pin holds an earlier applied revision, verified when it was applied.
            Some(_) => revision,
            None => {
                let check = Check {
                    cluster: &self.shared.cluster,
                    sources: &self.shared.sources,
                    statuses: &self.shared.statuses,
                    app: &self.config,
                    applied: self.inventory.as_ref().and_then(|i| i.revision.as_deref()),
                };
                match self.trust.check(&revision, check).await {
                    Ok(trusted) => trusted,
                    Err(err) => return self.record_pass(&revision, started, Err((err, 0))),
                }
            }
        };
        let outcome = match tokio::time::timeout(PASS_DEADLINE, self.sync_revision(&revision)).await
        {
            Ok(outcome) => outcome,
            Err(_) => {
                // What the pass wrote is covered by the inventory it recorded first.
                self.inventory = None;
                Err((PassError::TimedOut(PASS_DEADLINE), 0))
            }
        };
        self.record_pass(&revision, started, outcome);
    }

    /// Records how a pass (or a heal) ended: the result, the error and its
    /// notification, the backoff, the conditions and the metrics.
    fn record_pass(
        &mut self,
        revision: &Revision,
        started: Instant,
        outcome: Result<usize, (PassError, usize)>,
    ) {
        let name = self.config.name.clone();
        let took = started.elapsed();
        let now = Utc::now();
        let (result, error, changed) = match outcome {
            Ok(changed) => {
                self.backoff.reset();
                self.retry_at = None;
                (PassResult::Succeeded, None, changed)
            }
            Err((err, changed)) if err.is_retryable() => (self.retry(), Some(err), changed),
            Err((err, changed)) => {
                self.stalled_on = Some(self.revision_id(&revision.sha));
                self.retry_at = None;
                (PassResult::Stalled, Some(err), changed)
            }
        };
        if let Some(err) = &error {
            tracing::warn!(app = %name, result = result.as_str(), reason = err.reason(), error = %err, "pass failed");
            self.notify(Event {
                app: name.clone(),
                kind: EventKind::SyncFailed,
                revision: Some(EventRevision::from(revision)),
                reason: Some(err.reason().to_string()),
                summary: Summary::default(),
                objects: Vec::new(),
            });
            self.post_status(
                &revision.sha,
                CommitState::Failure,
                err.reason().to_string(),
            );
        }
        METRICS.pass(&name, result.as_str(), took);
        let retry_at = self.retry_at;
        self.shared.statuses.update(&name, |s| {
            s.last_pass = Some(PassInfo {
                finished_at: now,
                duration_ms: took.as_millis() as u64,
                result,
                error: error.as_ref().map(ToString::to_string),
                changed,
            });
            s.next_attempt = retry_at.map(|at| now + (at - Instant::now()));
            let message = error.as_ref().map(ToString::to_string).unwrap_or_default();
            match &error {
                None => {
                    s.set_condition("Ready", "True", "Succeeded", "", now);
                    s.set_condition("Stalled", "False", "Succeeded", "", now);
                    if s.sync == SyncStatus::Synced {
                        s.record_applied(&revision.sha, &revision.subject, now);
                    }
                }
                Some(err) => {
                    s.set_condition("Ready", "False", err.reason(), &message, now);
                    if result == PassResult::Stalled {
                        s.set_condition("Stalled", "True", err.reason(), &message, now);
                    } else {
                        s.set_condition("Stalled", "False", "Retrying", "", now);
                    }
                }
            }
            if result != PassResult::Succeeded && s.last_pass.is_some() && s.drifted.is_empty() {
                s.sync = SyncStatus::Unknown;
            }
            METRICS.app_state(&s.name, s.drifted.len(), s.sync.as_str(), s.health.as_str());
        });
    }

    /// Whether another replica's shard holds this app: it reconciles and reports it,
    /// so this one reads nothing (no manifests, no dry runs, no watches) and only
    /// says who does. Its status API forwards to that replica (`server`).
    fn elsewhere(&mut self) -> bool {
        if !self.held_elsewhere() {
            return false;
        }
        // What the owner writes meanwhile is read afresh if the shard comes back, and
        // the app's state is the owner's to export: one series per app, fleet-wide.
        self.inventory = None;
        METRICS.forget_app(&self.config.name);
        drop(self.source.borrow_and_update());
        let reason = self.automation("").reason;
        self.shared.statuses.update(&self.config.name, |s| {
            s.sync = SyncStatus::Unknown;
            s.automation = Automation {
                acting: false,
                reason,
            };
        });
        true
    }

    /// Whether another replica's shard holds this app (see [`Worker::elsewhere`]).
    fn held_elsewhere(&self) -> bool {
        self.shared
            .ownership
            .owner(&self.config.name)
            .is_some_and(|owner| !owner.local)
    }

    /// Shows the source's standing: ready, or failing since when (the condition's
    /// transition time) and whether that is stale. A failing source keeps serving its
    /// last good revision, visibly. Staleness is announced once per failure.
    fn observe_source(&mut self, status: &SourceStatus, revision: Option<&Revision>) {
        let tried = status.ready || status.message.is_some();
        if !tried {
            return;
        }
        let now = Utc::now();
        let stale = is_stale(status, self.config.source.stale_after, now);
        let reason = status.reason.unwrap_or("FetchFailed");
        self.shared.statuses.update(&self.config.name, |s| {
            s.source = Some(SourceInfo {
                ready: status.ready,
                reason: status.reason.map(str::to_string),
                message: status.message.clone(),
                last_success: status.last_success,
                failing_since: status.failing_since,
                stale,
            });
            if status.ready {
                s.set_condition("SourceReady", "True", "Fetched", "", now);
            } else if let Some(message) = &status.message {
                match status.failing_since {
                    Some(since) => {
                        let at = since.to_rfc3339_opts(SecondsFormat::Secs, true);
                        let message = format!("{message} (since {at})");
                        s.set_condition_since("SourceReady", "False", reason, &message, since);
                    }
                    None => s.set_condition("SourceReady", "False", reason, message, now),
                }
            }
        });
        if status.ready {
            self.stale_reported = false;
        } else if stale && !self.stale_reported {
            self.stale_reported = true;
            tracing::warn!(
                app = %self.config.name,
                reason,
                failing_since = ?status.failing_since,
                "source stale: still at the last good revision"
            );
            self.notify(Event {
                app: self.config.name.clone(),
                kind: EventKind::SourceStale,
                revision: revision.map(EventRevision::from),
                reason: Some(reason.to_string()),
                summary: Summary::default(),
                objects: Vec::new(),
            });
        }
    }

    /// When the failing source turns stale, if it has not been announced yet: a pass
    /// then runs even if nothing else wakes the worker.
    fn stale_at(&self) -> Option<Instant> {
        if self.stale_reported {
            return None;
        }
        let since = self.source.borrow().status.failing_since?;
        let at = since + TimeDelta::from_std(self.config.source.stale_after).ok()?;
        let wait = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        Some(Instant::now() + wait)
    }

    /// Schedules the next attempt after a failure.
    fn retry(&mut self) -> PassResult {
        let delay = self.backoff.next_delay();
        self.retry_at = Some(Instant::now() + delay);
        PassResult::Failed
    }

    /// Syncs (or dry-runs) the app at `sha`. Returns how many objects changed; a
    /// failure carries how many changed before it.
    async fn sync_revision(&mut self, revision: &Revision) -> Result<usize, (PassError, usize)> {
        let sha = revision.sha.as_str();
        let desired = self.desired(revision).await.map_err(|e| (e, 0))?;
        self.watch_kinds(&desired).await;
        let id = self.revision_id(sha);
        let automation = self.automation(&id);
        let acting = automation.acting;
        let manual = self.sync_requested.swap(false, Ordering::SeqCst);
        let options = self.sync_options(&id, acting);
        let pass = sync(&self.shared.cluster, &desired, Some(sha), &options);
        let report = if acting {
            match self.leadership.while_leading(pass).await {
                Some(report) => report,
                None => {
                    // The dropped pass may have written the inventory: read it next time.
                    // A manual sync it carried is still owed, as to any follower.
                    self.inventory = None;
                    if manual {
                        self.sync_requested.store(true, Ordering::SeqCst);
                    }
                    return Err((PassError::LeadershipLost, 0));
                }
            }
        } else {
            pass.await
        };
        let report = report.map_err(|err| {
            // What the failed pass wrote is unknown: read the inventory next time.
            self.inventory = None;
            (PassError::from(err), 0)
        })?;
        if manual && !acting {
            // Asked for but not allowed: keep the request until it may act.
            self.sync_requested.store(true, Ordering::SeqCst);
        }
        self.inventory = Some(report.inventory.clone());
        if acting && !report.failed() {
            self.synced_revision = Some(id);
            self.synced_hooks = desired.objects.iter().any(|m| is_hook(&m.object));
        }
        let changed = if acting { report.written() } else { 0 };
        let now = Utc::now();
        let mut synced = false;
        self.shared.statuses.update(&self.config.name, |s| {
            s.record_sync(&report, now);
            s.automation = automation;
            synced = s.sync == SyncStatus::Synced;
        });
        self.announce(sha, &report, report.health, acting, synced, changed);
        match report.failure() {
            Some(failure) => Err((PassError::from(failure), changed)),
            None => Ok(changed),
        }
    }

    /// How a pass at revision `id` ([`variables::revision_id`]) syncs.
    fn sync_options(&self, id: &str, acting: bool) -> SyncOptions<'_> {
        SyncOptions {
            inventory_namespace: &self.shared.inventory_namespace,
            force: self.config.sync.force,
            prune: self.config.sync.prune,
            allow_mass_prune: self.config.sync.allow_mass_prune,
            dry_run: !acting,
            rules: &self.rules,
            // A tenant reads as itself: the cache, filled with tether's identity,
            // only wakes its worker (Flux likewise reads uncached when impersonating).
            live: match self.shared.cluster.service_account() {
                Some(_) => None,
                None => Some(&self.shared.cache),
            },
            inventory: self.inventory.as_ref(),
            hooks: HookRuns::WhenWriting,
            hook_timeout: self.config.sync.hook_timeout,
            // Applied in full at this revision: a heal skips the dry run.
            validated: acting && self.synced_revision.as_deref() == Some(id),
            health: Judge::new(&self.config.health_checks, &self.shared.health_rules),
            ..SyncOptions::new(&self.config.name)
        }
    }

    /// A pass over the app's objects in `changed` alone (a heal), when that is all a
    /// full pass would find to do: the revision is the one applied in full (Git's
    /// side is validated, rendered and kept), automation may act, no hook runs with a
    /// writing pass, nothing is backing off or stalled, the source has not moved, the
    /// objects are Git's (not prune candidates) and their live state comes from the
    /// watch cache. Each is decided as a full pass decides it and written only if it
    /// drifted: a heal costs one apply per drifted object, a controller's status
    /// change none, and neither reads the app's other objects. Their results update
    /// the app's status (drift, health); the resync interval's full pass still looks
    /// at everything. Returns false when a full pass must run instead.
    async fn heal_pass(&mut self, changed: &HashSet<ObjectKey>) -> bool {
        let started = Instant::now();
        if self.source.has_changed().unwrap_or(true) {
            return false;
        }
        let Some(head) = self.applicable_revision() else {
            return false;
        };
        let (revision, _) = self.pinning.target(&head);
        let sha = revision.sha.as_str();
        let id = self.revision_id(sha);
        let eligible = self.synced_revision.as_deref() == Some(id.as_str())
            && !self.synced_hooks
            && self.stalled_on.is_none()
            && self.retry_at.is_none()
            && self.inventory.is_some()
            && self.shared.cluster.service_account().is_none()
            && !self.sync_requested.load(Ordering::SeqCst)
            && self.automation(&id).acting
            && self.dependencies.gate() == Gate::Open;
        if !eligible {
            return false;
        }
        let Some(desired) = self.rendered.select(&id, changed) else {
            return false;
        };
        if desired.is_empty() {
            // Not one of Git's objects (a prune candidate): the full pass decides.
            return false;
        }
        let Ok(_permit) = self.shared.heals.clone().acquire_owned().await else {
            return false;
        };
        let options = self.sync_options(&id, true);
        let healing = heal(&self.shared.cluster, &desired, Some(sha), &options);
        let Some(healed) = self.leadership.while_leading(healing).await else {
            // The full pass that follows sees who leads now, and reads the inventory.
            self.inventory = None;
            return false;
        };
        let outcome = match healed {
            Ok(report) => {
                let changed = report.written();
                let now = Utc::now();
                let (mut synced, mut health) = (false, Health::Unknown);
                self.shared.statuses.update(&self.config.name, |s| {
                    s.record_heal(&report, now);
                    synced = s.sync == SyncStatus::Synced;
                    health = s.health;
                    METRICS.app_state(&s.name, s.drifted.len(), s.sync.as_str(), s.health.as_str());
                });
                self.announce(sha, &report, health, true, synced, changed);
                match report.failure() {
                    Some(failure) => Err((PassError::from(failure), changed)),
                    None => Ok(changed),
                }
            }
            Err(err) => {
                // What the heal wrote of the inventory is unknown: read it next time.
                self.inventory = None;
                Err((PassError::from(err), 0))
            }
        };
        self.record_pass(&revision, started, outcome);
        true
    }

    /// Tells people what this pass found: notifications on transitions, the commit
    /// status on every pass (the reporter posts only changes).
    fn announce(
        &mut self,
        sha: &str,
        report: &SyncReport,
        health: Health,
        acting: bool,
        synced: bool,
        changed: usize,
    ) {
        let revision = self.source.borrow().revision.clone();
        let revision = revision.as_ref().filter(|r| r.sha == sha);
        let event = |kind, reason: Option<&str>| {
            Event::from_sync(&self.config.name, kind, revision, reason, report)
        };
        if acting && changed > 0 {
            self.notify(event(EventKind::DriftCorrected, None));
            self.drift_reported = false;
        } else if !acting && report.changed() {
            if !self.drift_reported {
                self.notify(event(EventKind::DriftDetected, Some("OutOfSync")));
                self.drift_reported = true;
            }
        } else if synced {
            self.drift_reported = false;
        }
        if health == Health::Degraded && self.last_health != Some(Health::Degraded) {
            self.notify(event(EventKind::HealthDegraded, Some("Degraded")));
        }
        self.last_health = Some(health);
        self.post_pass_status(sha, report.failed(), synced, health);
    }

    /// The commit status of a pass's outcome at `sha`.
    fn post_pass_status(&self, sha: &str, failed: bool, synced: bool, health: Health) {
        let state = CommitState::from_pass(failed, synced, health);
        let description = if failed {
            "sync failed".to_string()
        } else if synced {
            format!("Synced, {health}")
        } else {
            "OutOfSync".to_string()
        };
        self.post_status(sha, state, description);
    }

    fn notify(&self, event: Event) {
        if !self.channels.is_empty() {
            self.shared.notifier.notify(&self.channels, event);
        }
    }

    fn post_status(&self, sha: &str, state: CommitState, description: String) {
        if let Some(target) = &self.status_target {
            self.shared.commit_statuses.report(StatusReport {
                target: target.clone(),
                sha: sha.to_string(),
                state,
                description,
            });
        }
    }

    /// Whether the kept render is of the source's current commit (or of the same
    /// inputs).
    fn rendered_is_current(&self) -> bool {
        let head = self.applicable_revision();
        let wanted = head.map(|head| self.revision_id(&self.pinning.target(&head).0.sha));
        wanted.as_ref() == self.rendered.revision()
    }

    /// The revision passes and heals apply: the source's, or with `source.verify` the
    /// last verified one.
    fn applicable_revision(&self) -> Option<Revision> {
        match self.trust.enabled() {
            true => self.trust.verified().cloned(),
            false => self.source.borrow().revision.clone(),
        }
    }

    /// The identity of what a pass at `sha` renders: the inputs identity when it is
    /// known at `sha` (else the commit), the variables and the SOPS keys.
    fn revision_id(&self, sha: &str) -> String {
        let base = match &self.identity {
            Some(identity) if identity.sha == sha => identity.id(),
            _ => sha.to_string(),
        };
        let id = variables::revision_id(&base, self.variables.as_ref());
        let id = decryption::revision_id(id, self.keys.as_ref());
        values::revision_id(id, self.values.as_ref())
    }

    /// Learns the inputs identity at `revision` ([`inputs`]), from the one known.
    async fn identify(&mut self, revision: &Revision) {
        let renderers = tether_diff::manifest::Renderers {
            timeout: self.shared.render_timeout,
            ..self.config.renderers()
        };
        let previous = self.identity.take();
        self.identity = inputs::identify(
            &self.config.name,
            &self.shared.sources,
            self.config.source(),
            revision,
            renderers,
            previous,
        )
        .await;
    }

    /// Takes the source's new commit without a pass when nothing the app's render
    /// reads changed since the revision applied in full, and nothing else is owed
    /// (no retry, stall, manual sync, pin or signature check): the status shows the
    /// new `revision` (and, Synced, the same `appliedRevision`: the objects applied
    /// are what it renders), the commit status is posted for it, and neither a
    /// render nor a request to the cluster is made. The inventory keeps the commit
    /// whose render was applied until the next full pass (a resync, a live change, a
    /// manual sync) writes the new one. Returns false when a pass must run.
    async fn unchanged_commit(&mut self) -> bool {
        let owed = self.trust.enabled()
            || self.pinning.get().is_some()
            || self.stalled_on.is_some()
            || self.retry_at.is_some()
            || self.sync_requested.load(Ordering::SeqCst)
            || self.held_elsewhere();
        let Some(applied) = self.synced_revision.clone().filter(|_| !owed) else {
            return false;
        };
        let state = self.source.borrow_and_update().clone();
        let Some(head) = state.revision else {
            return false;
        };
        // Only a new commit: a change of the source's standing alone (a failed fetch)
        // takes its pass, as before.
        if self
            .identity
            .as_ref()
            .is_none_or(|known| known.sha == head.sha)
        {
            return false;
        }
        self.identify(&head).await;
        if self.revision_id(&head.sha) != applied {
            return false;
        }
        self.observe_source(&state.status, Some(&head));
        let (mut synced, mut health) = (false, Health::Unknown);
        self.shared.statuses.update(&self.config.name, |s| {
            s.revision = Some(RevisionInfo {
                sha: head.sha.clone(),
                subject: head.subject.clone(),
            });
            synced = s.sync == SyncStatus::Synced;
            health = s.health;
            // What is applied is what the new commit renders: applied at it, as its
            // dependents (`dependsOn`) and a rollback's history see it.
            if synced {
                s.record_applied(&head.sha, &head.subject, Utc::now());
            }
        });
        METRICS.unchanged_commit(&self.config.name);
        self.post_pass_status(&head.sha, false, synced, health);
        true
    }

    /// The manifests at `wanted` with the pass's variables, read, rendered and
    /// validated once per revision and variables. Git's head, or the revision the app
    /// is pinned to, checked to be in the head's history.
    async fn desired(&mut self, wanted: &Revision) -> Result<ManifestSet, PassError> {
        let mut rendered = std::mem::take(&mut self.rendered);
        let set = rendered
            .manifests(&self.revision_id(&wanted.sha), || async {
                let source = self.config.source();
                let revision = match self.applicable_revision() {
                    Some(head) if head.sha == wanted.sha => head,
                    _ if self.pinning.get().is_some_and(|p| p.revision == wanted.sha) => self
                        .shared
                        .sources
                        .earlier(&source, &wanted.sha)
                        .await
                        .map_err(|e| PassError::Manifest(DesiredError::Source(e)))?,
                    _ => return Err(PassError::RevisionMoved),
                };
                METRICS.rendered(&self.config.name);
                let cluster = &self.shared.cluster;
                let scopes = cluster.scopes().await.map_err(PassError::Cluster)?;
                let (version, apis) = cluster.capabilities().await.map_err(PassError::Cluster)?;
                // Charts' `lookup` reads the cluster as this app's identity (issue #26).
                let lookup = LookupEndpoint::start(cluster)
                    .await
                    .map_err(|e| PassError::Manifest(e.into()))?;
                let mut set = read_revision(
                    &self.shared.sources,
                    &source,
                    &revision,
                    &self.config.destination.namespace,
                    Some(&scopes),
                    &tether_diff::manifest::Renderers {
                        timeout: self.shared.render_timeout,
                        substitute: self.variables.clone(),
                        sops: self.keys.as_ref().map(AppKeys::sops).unwrap_or_default(),
                        ..self.config.renderers()
                    }
                    .for_cluster(version, apis)
                    .with_values_from(
                        self.values
                            .as_ref()
                            .map(PassValues::layers)
                            .unwrap_or_default(),
                    )
                    .with_lookup(lookup.kubeconfig()),
                )
                .await
                .map_err(PassError::Manifest)?;
                drop(lookup);
                label_for_app(&mut set, &self.config.name);
                Ok(set)
            })
            .await;
        self.rendered = rendered;
        set
    }

    /// Starts watches for the kinds the app uses (and Namespaces), once each.
    async fn watch_kinds(&mut self, desired: &ManifestSet) {
        let mut kinds: Vec<GroupVersionKind> = desired
            .objects
            .iter()
            .map(|m| GroupVersionKind::gvk(&m.id.group, &m.id.version, &m.id.kind))
            .chain(self.inventory.iter().flat_map(|i| {
                i.objects.iter().map(|e| {
                    let id = e.id();
                    GroupVersionKind::gvk(&id.group, &id.version, &id.kind)
                })
            }))
            .collect();
        kinds.push(GroupVersionKind::gvk("", "v1", "Namespace"));
        for gvk in kinds {
            if self.watched.contains(&gvk) {
                continue;
            }
            if let Ok(Some(kind)) = self.shared.cluster.resolve(&gvk).await
                && self.shared.cache.watch(&gvk.group, &gvk.kind, &kind).await
            {
                self.watched.insert(gvk);
            }
        }
    }

    /// Whether automation may correct drift now at revision `id`, and if not, why.
    fn automation(&self, id: &str) -> Automation {
        let blocked = |reason: String| Automation {
            acting: false,
            reason: Some(reason),
        };
        let leadership = &self.leadership;
        if let Some(owner) = self.shared.ownership.owner(&self.config.name)
            && !owner.local
        {
            let holder = owner.holder.as_deref().unwrap_or("no replica yet");
            return blocked(format!("shard {} is held by {holder}", owner.shard));
        }
        if !leadership.is_leader() {
            let leader = leadership
                .holder()
                .map(|h| format!(" (the leader is {h})"))
                .unwrap_or_default();
            return blocked(format!("this replica is not the leader{leader}"));
        }
        if self.config.suspend {
            // Named as its definition spells it: the file's key, or the App's spec.
            let field = match self.config.tenant_namespace {
                Some(_) => "spec.suspend",
                None => "suspend",
            };
            return blocked(format!(
                "suspended ({field}: true): drift is reported, not corrected"
            ));
        }
        if self.suspended.load(Ordering::SeqCst) {
            return blocked("suspended from the API: drift is reported, not corrected".into());
        }
        if let Verdict::Closed { reason } = windows::verdict(&self.config.sync_windows, Utc::now())
        {
            return blocked(format!("sync window: {reason}"));
        }
        let manual = self.sync_requested.load(Ordering::SeqCst);
        if !self.config.sync.automated && !manual {
            return blocked("automated sync is off: drift is reported only".into());
        }
        let live_drift_only = self.synced_revision.as_deref() == Some(id);
        if live_drift_only && !self.config.sync.self_heal && !manual {
            return blocked("self-heal is off: live changes are reported, not corrected".into());
        }
        Automation {
            acting: true,
            reason: None,
        }
    }
}

/// Whether the source has failed for at least `stale_after`.
fn is_stale(status: &SourceStatus, stale_after: Duration, now: chrono::DateTime<Utc>) -> bool {
    !status.ready
        && status
            .failing_since
            .and_then(|since| (now - since).to_std().ok())
            .is_some_and(|age| age >= stale_after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_stale_only_once_it_has_failed_for_stale_after() {
        let now = Utc::now();
        let failing = |minutes: i64| SourceStatus {
            ready: false,
            reason: Some("FetchFailed"),
            message: Some("connection refused".into()),
            failing_since: Some(now - TimeDelta::minutes(minutes)),
            ..SourceStatus::default()
        };
        let ten = Duration::from_secs(600);
        assert!(!is_stale(&failing(9), ten, now));
        assert!(is_stale(&failing(10), ten, now));
        assert!(is_stale(&failing(60), ten, now));
        // A clock that moved back is not a failure of ten minutes.
        assert!(!is_stale(&failing(-5), ten, now));
        let ready = SourceStatus {
            ready: true,
            ..SourceStatus::default()
        };
        assert!(!is_stale(&ready, ten, now));
    }
}
