//! App objects (`apps.tether.dev`, issue #16) in `tether serve`: found by discovery,
//! followed with one watch (per namespace when `server.apps.namespaces` says so), run
//! in the same worker as the configuration's apps, their status written back through
//! the status subresource when it changed, and their deletion finished (prune or
//! orphan) before the finalizer goes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use futures::StreamExt;
use kube::core::GroupVersionKind;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::identity::{StartError, left_in_place};
use super::{Contexts, STOP_GRACE, ServeError, stop_app};
use crate::config::{
    APP_FINALIZER, APP_GROUP, APP_KIND, APP_PLURAL, APP_STATUS_MANAGER, APP_VERSION, AppObject,
    AppsWatchConfig, Config, DeletionPolicy,
};
use crate::reconcile::shard::Ownership;
use tether_core::cluster::objects::Watched;
use tether_core::cluster::{Cluster, Resolved};
use tether_core::metrics::METRICS;
use tether_core::report::status::{
    AppStatus, ConditionStatus, ConditionType, DEPENDENCY_NOT_READY, PassResult, Statuses,
};
use tether_core::source::Triggers;
use tether_core::sync::{DEFAULT_REQUEST_CONCURRENCY, HookRuns, SyncOptions, sync};
use tether_diff::manifest::ManifestSet;

/// How often discovery is asked again while the cluster does not serve the CRD and
/// tether may not watch CRDs (one request each time).
const DISCOVERY_RETRY: Duration = Duration::from_secs(15);

/// How often App statuses are compared with what was last written: a change shows
/// within this (the issue asks for a second); comparing costs no request.
const STATUS_PERIOD: Duration = Duration::from_millis(250);

/// Between attempts to finish a deletion (prune, finalizer) that failed.
const FINALIZE_RETRY: Duration = Duration::from_secs(5);

/// What the App watch tells the service's loop.
pub(super) enum AppEvent {
    /// The CRD is served: Apps can be read and written.
    Served(Resolved),
    /// What one watch saw; `None` is the watch of every namespace.
    Watched(Option<String>, Watched),
}

/// One App as the status writer knows it.
struct Entry {
    namespace: String,
    name: String,
    generation: i64,
    /// Why the spec is no app (its status says so, and no worker runs).
    invalid: Option<String>,
    /// The status last written (or read back), to write only on change.
    written: Option<Value>,
}

/// The App objects the service runs, shared by its loop and the status writer.
#[derive(Clone, Default)]
pub(super) struct AppObjects {
    kind: Arc<Mutex<Option<Resolved>>>,
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    finalizing: Arc<Mutex<HashSet<String>>>,
}

/// Finds the CRD (asking again until it is served), then follows Apps into `events`.
pub(super) fn spawn_watch(
    cluster: Arc<Cluster>,
    watch: AppsWatchConfig,
    events: mpsc::Sender<AppEvent>,
    cancel: CancellationToken,
) {
    tokio::spawn(async move {
        let Some(kind) = served(&cluster, &cancel, APP_KIND, APP_PLURAL).await else {
            return;
        };
        tracing::info!(namespaces = ?watch.namespaces, "watching App objects (apps.tether.dev)");
        if events.send(AppEvent::Served(kind.clone())).await.is_err() {
            return;
        }
        spawn_scope_watches(&cluster, &kind, &watch, events, AppEvent::Watched, &cancel);
    });
}

/// Follows `kind` with one watch per namespace of `server.apps.namespaces`, else one
/// of every namespace (`None`), each sending what it sees into `events` (wrapped with
/// its namespace) until either end goes.
pub(super) fn spawn_scope_watches<T: Send + 'static>(
    cluster: &Cluster,
    kind: &Resolved,
    watch: &AppsWatchConfig,
    events: mpsc::Sender<T>,
    wrap: fn(Option<String>, Watched) -> T,
    cancel: &CancellationToken,
) {
    let scopes: Vec<Option<String>> = if watch.namespaces.is_empty() {
        vec![None]
    } else {
        watch.namespaces.iter().cloned().map(Some).collect()
    };
    for scope in scopes {
        let stream = cluster.watch_objects(kind, scope.as_deref(), None);
        let (events, cancel) = (events.clone(), cancel.clone());
        tokio::spawn(async move {
            futures::pin_mut!(stream);
            loop {
                let seen = tokio::select! {
                    _ = cancel.cancelled() => return,
                    seen = stream.next() => seen,
                };
                let Some(seen) = seen else { return };
                if events.send(wrap(scope.clone(), seen)).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// The App kind (or the AppSet kind: `kind`, `plural`), once the cluster serves it.
/// Until then the one CRD is watched (a single long-lived request: a service without
/// Apps stays silent in a steady state) and discovery is asked again at each change
/// of it; without the right to watch CRDs, discovery is asked every
/// [`DISCOVERY_RETRY`] instead.
pub(super) async fn served(
    cluster: &Cluster,
    cancel: &CancellationToken,
    kind: &str,
    plural: &str,
) -> Option<Resolved> {
    let gvk = GroupVersionKind::gvk(APP_GROUP, APP_VERSION, kind);
    let crds = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    let mut changes = match cluster.resolve(&crds).await {
        Ok(Some(crds)) => Some(Box::pin(cluster.watch_objects(
            &crds,
            None,
            Some(&format!("metadata.name={plural}.{APP_GROUP}")),
        ))),
        _ => None,
    };
    loop {
        match cluster.resolve(&gvk).await {
            Ok(Some(kind)) => return Some(kind),
            Ok(None) => tracing::debug!("{plural}.{APP_GROUP} is not served yet"),
            Err(err) => {
                tracing::warn!(error = %err, "cannot ask whether {plural}.{APP_GROUP} is served")
            }
        }
        let ended = match changes.as_mut() {
            Some(stream) => loop {
                let seen = tokio::select! {
                    _ = cancel.cancelled() => return None,
                    seen = stream.next() => seen,
                };
                match seen {
                    // The initial list while there is no CRD, or the CRD going away.
                    Some(Watched::Listed(l)) if l.is_empty() => continue,
                    Some(Watched::Deleted(_)) => continue,
                    Some(_) => break false,
                    None => break true,
                }
            },
            None => {
                tokio::select! {
                    _ = cancel.cancelled() => return None,
                    _ = tokio::time::sleep(DISCOVERY_RETRY) => {}
                }
                false
            }
        };
        if ended {
            changes = None;
        }
    }
}

/// Writes each App's status when it differs from what was last written.
pub(super) fn spawn_status_writer(
    objects: AppObjects,
    cluster: Arc<Cluster>,
    statuses: Statuses,
    ownership: Ownership,
    cancel: CancellationToken,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(STATUS_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            let Some(kind) = objects.kind.lock().clone() else {
                continue;
            };
            // Computed under the lock, written without it.
            let due: Vec<(String, Value)> = {
                let entries = objects.entries.lock();
                entries
                    .iter()
                    // Written by whoever may write for the app: the leader, or its shard's holder.
                    .filter(|(id, _)| ownership.is_writer(id))
                    .filter_map(|(id, entry)| {
                        let next = render_status(entry, statuses.get(id).as_ref());
                        (entry.written.as_ref() != Some(&next)).then(|| (id.clone(), next))
                    })
                    .collect()
            };
            let writes = due.into_iter().filter_map(|(id, status)| {
                let entries = objects.entries.lock();
                let entry = entries.get(&id)?;
                let body = json!({
                    "apiVersion": format!("{APP_GROUP}/{APP_VERSION}"),
                    "kind": APP_KIND,
                    "metadata": {"namespace": entry.namespace, "name": entry.name},
                    "status": status,
                });
                let (cluster, kind, objects) = (cluster.clone(), kind.clone(), objects.clone());
                Some(async move {
                    match cluster.apply_status(&kind, &body, APP_STATUS_MANAGER).await {
                        Ok(_) => {
                            let mut entries = objects.entries.lock();
                            if let Some(entry) = entries.get_mut(&id) {
                                entry.written = Some(status);
                            }
                        }
                        // Gone meanwhile: its deletion is on its way through the watch.
                        Err(err) if err.is_not_found() => {}
                        Err(err) => {
                            tracing::warn!(app = %id, error = %err, "cannot write the App's status")
                        }
                    }
                })
            });
            // Many at once after a start or a fleet-wide change, as many as a pass's
            // requests (the sync stage's bound).
            futures::stream::iter(writes.collect::<Vec<_>>())
                .buffer_unordered(DEFAULT_REQUEST_CONCURRENCY)
                .collect::<Vec<()>>()
                .await;
        }
    });
}

/// The conditions an App's status is written with, each keeping the transition time
/// it was last written with while its status stays.
struct Conditions<'e> {
    entry: &'e Entry,
    list: Vec<Value>,
}

impl Conditions<'_> {
    fn set(&mut self, kind: &str, state: &str, reason: &str, message: &str, at: &str) {
        let previous = (self.entry.written.as_ref())
            .and_then(|w| w["conditions"].as_array())
            .and_then(|cs| cs.iter().find(|c| c["type"] == kind));
        // The transition time moves only when the condition's status does.
        let at = match previous {
            Some(p) if p["status"] == state => p["lastTransitionTime"].clone(),
            _ => Value::String(at.to_string()),
        };
        self.list.push(json!({
            "type": kind,
            "status": state,
            "observedGeneration": self.entry.generation,
            "reason": reason,
            "message": message,
            "lastTransitionTime": at,
        }));
    }
}

/// The App's status as the Kubernetes conventions and kstatus read it.
fn render_status(entry: &Entry, status: Option<&AppStatus>) -> Value {
    let mut conditions = Conditions {
        entry,
        list: Vec::new(),
    };
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    if let Some(invalid) = &entry.invalid {
        conditions.set("Ready", "False", "SpecInvalid", invalid, &now);
        conditions.set("Stalled", "True", "SpecInvalid", invalid, &now);
        conditions.set("Reconciling", "False", "SpecInvalid", "", &now);
        return json!({
            "observedGeneration": entry.generation,
            "conditions": conditions.list,
            "sync": "Unknown",
            "health": "Unknown",
        });
    }
    // A pass ended, or the worker could not start (its cluster: Stalled, said why), or
    // it waits for its dependencies (`dependsOn`: Ready says which).
    let stalled = |s: &AppStatus| {
        s.conditions.iter().any(|c| {
            (c.kind == ConditionType::Stalled && c.status == ConditionStatus::True)
                || c.reason == DEPENDENCY_NOT_READY
        })
    };
    match status.filter(|s| s.last_pass.is_some() || stalled(s)) {
        Some(status) => render_passed(conditions, status, &now),
        None => render_first_pass(conditions, &now),
    }
}

/// The status of an App whose first pass is running: what an earlier spec reached
/// stays until it ends.
fn render_first_pass(mut conditions: Conditions<'_>, now: &str) -> Value {
    let running = "the first pass is running";
    conditions.set("Ready", "Unknown", "Progressing", running, now);
    conditions.set("Reconciling", "True", "Progressing", running, now);
    let previous = conditions
        .entry
        .written
        .clone()
        .unwrap_or_else(|| json!({}));
    let mut out = json!({"conditions": conditions.list, "sync": "Unknown", "health": "Unknown"});
    for key in ["observedGeneration", "lastAppliedRevision"] {
        if let Some(v) = previous.get(key) {
            out[key] = v.clone();
        }
    }
    out
}

/// The status of an App a pass (or the worker's start) has spoken for: its
/// conditions, sync and health, its last pass and revisions.
fn render_passed(mut conditions: Conditions<'_>, status: &AppStatus, now: &str) -> Value {
    let entry = conditions.entry;
    for kind in [
        ConditionType::Ready,
        ConditionType::Stalled,
        ConditionType::SourceReady,
        ConditionType::Synced,
        ConditionType::Healthy,
        ConditionType::Pinned,
    ] {
        if let Some(c) = status.conditions.iter().find(|c| c.kind == kind) {
            let at = c
                .last_transition_time
                .to_rfc3339_opts(SecondsFormat::Secs, true);
            conditions.set(kind.as_str(), c.status.as_str(), &c.reason, &c.message, &at);
        }
    }
    conditions.set("Reconciling", "False", "Succeeded", "", now);
    let pass = status.last_pass.as_ref();
    let attempted = status.revision.as_ref().map(|r| r.sha.clone());
    let applied = match (pass.map(|p| p.result), status.sync.as_str()) {
        (Some(PassResult::Succeeded), "Synced") => attempted.clone(),
        _ => entry
            .written
            .as_ref()
            .and_then(|w| w["lastAppliedRevision"].as_str().map(str::to_string)),
    };
    let mut out = json!({
        "observedGeneration": entry.generation,
        "conditions": conditions.list,
        "sync": status.sync.as_str(),
        "health": status.health.as_str(),
        "objects": status.objects,
        "drifted": status.drifted.len(),
    });
    if let Some(pass) = pass {
        // No times: a steady state rewrites nothing.
        let mut last = json!({"result": pass.result.as_str(), "changed": pass.changed});
        if let Some(error) = &pass.error {
            last["error"] = error.clone().into();
        }
        out["lastPass"] = last;
    }
    if let Some(applied) = applied {
        out["lastAppliedRevision"] = applied.into();
    }
    if let Some(attempted) = attempted {
        out["lastAttemptedRevision"] = attempted.into();
    }
    out
}

impl Contexts {
    /// Takes in what the App watch saw.
    pub(super) async fn app_event(
        &mut self,
        event: AppEvent,
        config: &Config,
        triggers: &Triggers,
    ) -> Result<(), ServeError> {
        match event {
            AppEvent::Served(kind) => {
                *self.app_objects.kind.lock() = Some(kind);
            }
            AppEvent::Watched(scope, Watched::Listed(objects)) => {
                let listed: HashSet<String> = objects
                    .iter()
                    .filter_map(|o| AppObject::from_object(o).ok())
                    .map(|a| a.identity())
                    .collect();
                let gone: Vec<String> = {
                    let entries = self.app_objects.entries.lock();
                    entries
                        .iter()
                        .filter(|(id, e)| {
                            !listed.contains(*id)
                                && scope.as_ref().is_none_or(|s| *s == e.namespace)
                        })
                        .map(|(id, _)| id.clone())
                        .collect()
                };
                for id in gone {
                    self.forget_app_object(&id, triggers).await;
                }
                for object in objects {
                    self.app_applied(&object, config, triggers).await;
                }
            }
            AppEvent::Watched(_, Watched::Applied(object)) => {
                self.app_applied(&object, config, triggers).await;
            }
            AppEvent::Watched(_, Watched::Deleted(object)) => {
                if let Ok(app) = AppObject::from_object(&object) {
                    self.forget_app_object(&app.identity(), triggers).await;
                }
            }
        }
        Ok(())
    }

    async fn app_applied(&mut self, object: &Value, config: &Config, triggers: &Triggers) {
        if self.unchanged_app_object(object) {
            return;
        }
        let app = match AppObject::from_object(object) {
            Ok(app) => app,
            Err(err) => {
                tracing::warn!(error = %err, "an App object tether cannot read");
                return;
            }
        };
        let id = app.identity();
        let Some(kind) = self.app_objects.kind.lock().clone() else {
            return;
        };
        if app.deleting {
            if app.finalized {
                self.finalize(app, object, kind, config, triggers).await;
            } else {
                self.forget_app_object(&id, triggers).await;
            }
            return;
        }
        if !app.finalized && self.ownership.is_writer(&id) {
            let mut finalizers: Vec<Value> = object
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            finalizers.push(APP_FINALIZER.into());
            let patch = json!({"metadata": {
                "finalizers": finalizers,
                "resourceVersion": object.pointer("/metadata/resourceVersion"),
            }});
            // In the background: the loop goes on starting workers. A conflict means a
            // newer version is on its way through the watch, which tries again.
            let (cluster, id) = (self.default.clone(), id.clone());
            let (namespace, name) = (app.namespace.clone(), app.name.clone());
            tokio::spawn(async move {
                if let Err(err) = cluster
                    .merge_patch(&kind, Some(&namespace), &name, &patch)
                    .await
                {
                    tracing::debug!(app = %id, error = %err, "finalizer not added yet");
                }
            });
        }
        let running = self
            .apps
            .running
            .lock()
            .get(&id)
            .map(|r| r.handle.config.clone());
        let invalid = match &app.config {
            Ok(next) if running.as_ref() == Some(next) => None,
            Ok(next) => {
                self.stop_app_object(&id, triggers).await;
                self.statuses.remove(&id);
                match self.start(next, config, triggers).await {
                    Ok(()) => None,
                    Err(err) => Some(err.to_string()),
                }
            }
            Err(invalid) => {
                self.stop_app_object(&id, triggers).await;
                self.statuses.remove(&id);
                Some(invalid.clone())
            }
        };
        if let Some(invalid) = &invalid {
            tracing::warn!(app = %id, error = %invalid, "App not run");
        }
        let mut entries = self.app_objects.entries.lock();
        let entry = entries.entry(id).or_insert_with(|| Entry {
            namespace: app.namespace.clone(),
            name: app.name.clone(),
            generation: app.generation,
            invalid: None,
            written: object.get("status").filter(|s| s.is_object()).cloned(),
        });
        entry.generation = app.generation;
        entry.invalid = invalid;
    }

    /// Whether `object` says nothing new to this loop: a status write (ours, mostly)
    /// with the same spec generation, finalizer held, not being deleted. Most events
    /// are those; they skip parsing the spec again.
    fn unchanged_app_object(&self, object: &Value) -> bool {
        let meta = &object["metadata"];
        let (Some(namespace), Some(name)) = (meta["namespace"].as_str(), meta["name"].as_str())
        else {
            return false;
        };
        let finalized = meta["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == APP_FINALIZER));
        if !finalized || meta.get("deletionTimestamp").is_some() {
            return false;
        }
        let entries = self.app_objects.entries.lock();
        entries
            .get(&crate::config::app_identity(namespace, name))
            .is_some_and(|e| Some(e.generation) == meta["generation"].as_i64())
    }

    /// Stops an App's worker, if it runs.
    async fn stop_app_object(&mut self, id: &str, triggers: &Triggers) {
        let running = self.apps.running.lock().remove(id);
        if let Some(running) = running {
            triggers.unregister(&running.handle.config.source());
            let target = running.target.clone();
            stop_app(running, Instant::now() + STOP_GRACE).await;
            self.release(&target, id);
        }
    }

    /// An App that is gone: its worker stops, its status goes.
    async fn forget_app_object(&mut self, id: &str, triggers: &Triggers) {
        self.stop_app_object(id, triggers).await;
        self.app_objects.entries.lock().remove(id);
        self.statuses.remove(id);
        METRICS.forget_app(id);
    }

    /// A deleted App: the worker stops, then (in the background) its objects are
    /// pruned when its policy says so, and the finalizer is removed.
    async fn finalize(
        &mut self,
        app: AppObject,
        object: &Value,
        kind: Resolved,
        config: &Config,
        triggers: &Triggers,
    ) {
        let id = app.identity();
        let first = {
            let mut finalizing = self.app_objects.finalizing.lock();
            finalizing.insert(id.clone())
        };
        if !first {
            return;
        }
        // Deletion in reverse `dependsOn` order: what it depends on waits for this.
        let depends_on = app.config.as_ref().map(|c| c.depends_on.clone());
        let held =
            (self.dependencies).register(&id, depends_on.unwrap_or_default(), Arc::new(|| {}));
        self.stop_app_object(&id, triggers).await;
        if !self.ownership.is_writer(&id) {
            // The leader (or the shard's holder) finishes it; this one only lets go.
            let_go(&self.app_objects.finalizing, &id);
            return;
        }
        self.app_objects.entries.lock().remove(&id);
        let pruner = match self.pruner(&app, &id, config).await {
            Ok(pruner) => pruner,
            Err(err) => {
                tracing::warn!(app = %id, error = %err, "cannot finish the App's deletion yet");
                let_go(&self.app_objects.finalizing, &id);
                return;
            }
        };
        let others: Vec<Value> = object
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| f.iter().filter(|f| *f != APP_FINALIZER).cloned().collect())
            .unwrap_or_default();
        let deletion = Deletion {
            app,
            kind,
            others,
            apps_cluster: self.default.clone(),
            pruner,
            inventory_namespace: config.inventory_namespace.clone(),
        };
        let finalizing = self.app_objects.finalizing.clone();
        let statuses = self.statuses.clone();
        let dependencies = self.dependencies.clone();
        let cancel = self.workers.child_token();
        tokio::spawn(async move {
            loop {
                match deletion.attempt(&id, &dependencies.dependents(&id)).await {
                    Ok(()) => {
                        let policy = deletion.app.deletion_policy;
                        tracing::info!(app = %id, policy = ?policy, "App deleted");
                        break;
                    }
                    Err(err) => {
                        tracing::warn!(app = %id, error = %err, "cannot finish the App's deletion yet");
                    }
                }
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(FINALIZE_RETRY) => {}
                }
            }
            drop(held);
            statuses.remove(&id);
            METRICS.forget_app(&id);
            let_go(&finalizing, &id);
        });
    }

    /// Who prunes a deleted App's objects: nobody for `Orphan`; for `Prune`, the
    /// App's own connection. Pruned as the App applied them, never as tether: without
    /// its identity (see `identity`) the objects stay, as Flux's finalizer leaves
    /// them. A failure that may pass is the error: the next list of Apps finishes it.
    async fn pruner(
        &mut self,
        app: &AppObject,
        id: &str,
        config: &Config,
    ) -> Result<Option<Arc<Cluster>>, StartError> {
        Ok(match (app.deletion_policy, &app.config) {
            (DeletionPolicy::Orphan, _) => None,
            (DeletionPolicy::Prune, Err(invalid)) => left_in_place(id, invalid),
            (DeletionPolicy::Prune, Ok(c)) => match self.for_app(c, config).await {
                Ok((target, shared)) => {
                    let cluster = shared.cluster.clone();
                    self.release(&target, id);
                    Some(cluster)
                }
                Err(err) if err.is_retryable() => return Err(err),
                Err(err) => left_in_place(id, &err.to_string()),
            },
        })
    }
}

/// This replica no longer finishes the App's deletion (done, or for another, or for
/// a later list of Apps).
fn let_go(finalizing: &Mutex<HashSet<String>>, id: &str) {
    finalizing.lock().remove(id);
}

/// What finishing a deleted App's deletion takes, away from the runtime (it runs
/// in the background until done or tether stops).
struct Deletion {
    app: AppObject,
    kind: Resolved,
    /// The App's other finalizers: what its object keeps once tether lets go.
    others: Vec<Value>,
    apps_cluster: Arc<Cluster>,
    pruner: Option<Arc<Cluster>>,
    inventory_namespace: String,
}

impl Deletion {
    /// One try: the App's objects pruned (once the Apps that depend on it, its
    /// `dependents`, are deleted), then tether's finalizer removed (an App already
    /// gone is done).
    async fn attempt(&self, id: &str, dependents: &[String]) -> Result<(), String> {
        match &self.pruner {
            None => {}
            Some(_) if !dependents.is_empty() => {
                return Err(format!(
                    "the Apps that depend on it are deleted first: waiting for {}",
                    dependents.join(", ")
                ));
            }
            Some(cluster) => prune_all(cluster, id, &self.inventory_namespace).await?,
        }
        let app = &self.app;
        let patch = json!({"metadata": {"finalizers": self.others}});
        match (self.apps_cluster)
            .merge_patch(&self.kind, Some(&app.namespace), &app.name, &patch)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Prunes everything the app's inventory holds (the sync of nothing, with prune on:
/// the same path, guards and `tether.dev/prune: disabled` as any pass), then removes
/// the inventory itself.
pub(super) async fn prune_all(
    cluster: &Cluster,
    app: &str,
    inventory_namespace: &str,
) -> Result<(), String> {
    let options = SyncOptions {
        inventory_namespace,
        prune: true,
        allow_mass_prune: true,
        hooks: HookRuns::WhenWriting,
        ..SyncOptions::new(app)
    };
    let report = sync(cluster, &ManifestSet::default(), None, &options)
        .await
        .map_err(|e| e.to_string())?;
    if report.failed() {
        return Err(format!("{app}: some objects could not be pruned"));
    }
    tether_core::sync::inventory::remove(cluster, app, inventory_namespace)
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
