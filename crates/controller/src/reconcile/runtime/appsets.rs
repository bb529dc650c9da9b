//! AppSets (`appsets.tether.dev`, issue #28) in `tether serve`: found by discovery,
//! followed with one watch, each run by a worker that fetches what its generators
//! read (Git trees through the source cache, with the polls and webhooks of any
//! source; the namespace's cluster Secrets), asks the pure core
//! (`reconcile::appset`) which Apps it wants, writes the difference with server-side
//! apply and writes the AppSet's status. The Apps it writes are run by the App watch
//! (`apps`), like any other. A second watch, of the Apps, runs an AppSet again when
//! one of its Apps is edited, relabelled or deleted by someone else, so a hand edit is
//! undone at once (as Argo CD's ApplicationSet controller watches its Applications).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use futures::StreamExt;
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::apps::{served, spawn_scope_watches};
use crate::config::{
    APP_GROUP, APP_KIND, APP_PLURAL, APP_STATUS_MANAGER, APP_VERSION, AppsWatchConfig,
};
use crate::reconcile::appset::{
    APPSET_KIND, APPSET_LABEL, APPSET_PLURAL, AppSet, AppSetError, CLUSTER_SECRET_LABEL, Change,
    ClusterSecret, Facts, GeneratorError, GitRef, LiveApp, plan,
};
use crate::reconcile::shard::Ownership;
use tether_core::cluster::objects::Watched;
use tether_core::cluster::{Cluster, Resolved};
use tether_core::source::{
    Auth, CredentialsSecret, PollConfig, Source, SourceCache, SourceState, SourceWatcher, Triggers,
};
use tether_core::sync::DEFAULT_REQUEST_CONCURRENCY;

/// How often an AppSet that reads cluster Secrets lists them again (Argo CD's
/// ApplicationSet controller requeues every 3 minutes; Secrets change rarely, and a
/// change of the AppSet itself regenerates at once).
pub(super) const CLUSTERS_REFRESH: Duration = Duration::from_secs(180);

/// Between passes of an AppSet whose writes failed (the App loop's first backoff step).
const FAILURE_RETRY: Duration = Duration::from_secs(5);

/// What every AppSet worker shares.
#[derive(Clone)]
pub(super) struct AppSetContext {
    pub cluster: Arc<Cluster>,
    pub sources: SourceCache,
    pub triggers: Triggers,
    pub ownership: Ownership,
    /// How a generator's repository is polled (`sources.*` of the configuration).
    pub poll: PollConfig,
}

/// The kinds a worker reads and writes.
#[derive(Clone)]
struct Kinds {
    appset: Resolved,
    app: Resolved,
    secret: Resolved,
}

/// Finds the AppSet and App kinds (asking again until they are served), then runs a
/// worker per AppSet for as long as it exists.
pub(super) fn spawn(context: AppSetContext, watch: AppsWatchConfig, cancel: CancellationToken) {
    tokio::spawn(async move {
        let cluster = context.cluster.clone();
        let Some(appset) = served(&cluster, &cancel, APPSET_KIND, APPSET_PLURAL).await else {
            return;
        };
        let Some(app) = served(&cluster, &cancel, APP_KIND, APP_PLURAL).await else {
            return;
        };
        let secret = match cluster
            .resolve(&GroupVersionKind::gvk("", "v1", "Secret"))
            .await
        {
            Ok(Some(secret)) => secret,
            other => {
                tracing::error!(answer = ?other.err(), "Secrets are not served: AppSets not run");
                return;
            }
        };
        tracing::info!(namespaces = ?watch.namespaces, "watching AppSets (appsets.tether.dev)");
        let mut events = follow(&cluster, &appset, &app, &watch, &cancel);
        let mut workers = Workers {
            context,
            kinds: Kinds {
                appset,
                app,
                secret,
            },
            running: HashMap::new(),
            stamps: HashMap::new(),
            cancel: cancel.clone(),
        };
        loop {
            let seen = tokio::select! {
                _ = cancel.cancelled() => return,
                seen = events.recv() => seen,
            };
            match seen {
                Some(Seen::AppSet(scope, seen)) => workers.seen(scope, seen),
                Some(Seen::App(scope, seen)) => workers.app_seen(scope, seen),
                None => return,
            }
        }
    });
}

/// What a watch saw, with the namespace it watches (None: all).
enum Seen {
    AppSet(Option<String>, Watched),
    App(Option<String>, Watched),
}

/// What the AppSet and App watches see, in one stream.
fn follow(
    cluster: &Cluster,
    appset: &Resolved,
    app: &Resolved,
    watch: &AppsWatchConfig,
    cancel: &CancellationToken,
) -> tokio::sync::mpsc::Receiver<Seen> {
    let (events_tx, events) = tokio::sync::mpsc::channel(1024);
    spawn_scope_watches(
        cluster,
        appset,
        watch,
        events_tx.clone(),
        Seen::AppSet,
        cancel,
    );
    spawn_scope_watches(cluster, app, watch, events_tx, Seen::App, cancel);
    events
}

/// What an AppSet answers for in one of its Apps: a change of it is looked at.
#[derive(Debug, Clone, PartialEq)]
struct Stamp {
    namespace: String,
    /// `metadata.generation`: moves with every change of the spec.
    generation: Value,
    /// The AppSets it names as its controller or in its label, by identity.
    appsets: Vec<String>,
}

impl Stamp {
    /// None for an App no AppSet claims.
    fn of(app: &Value) -> Option<Stamp> {
        let meta = &app["metadata"];
        let namespace = meta["namespace"].as_str()?;
        let controllers = meta["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["kind"] == APPSET_KIND && r["controller"] == true)
            .filter_map(|r| r["name"].as_str());
        let mut appsets: Vec<String> = controllers
            .chain(meta["labels"][APPSET_LABEL].as_str())
            .map(|name| crate::config::app_identity(namespace, name))
            .collect();
        appsets.sort();
        appsets.dedup();
        (!appsets.is_empty()).then(|| Stamp {
            namespace: namespace.to_string(),
            generation: meta["generation"].clone(),
            appsets,
        })
    }
}

/// The worker of each AppSet, by identity: its spec's sender and its stop.
struct Workers {
    context: AppSetContext,
    kinds: Kinds,
    running: HashMap<String, (watch::Sender<Value>, CancellationToken)>,
    /// The generated Apps, by identity, as last seen.
    stamps: HashMap<String, Stamp>,
    cancel: CancellationToken,
}

impl Workers {
    /// Starts, updates or stops workers after what a watch saw.
    fn seen(&mut self, scope: Option<String>, seen: Watched) {
        match seen {
            Watched::Listed(objects) => {
                // A new list is all there is: an AppSet of the scope not in it is gone.
                let listed: Vec<String> = objects.iter().map(object_id).collect();
                self.running.retain(|id, (tx, stop)| {
                    let in_scope = scope
                        .as_ref()
                        .is_none_or(|ns| tx.borrow()["metadata"]["namespace"] == ns.as_str());
                    let keep = !in_scope || listed.contains(id);
                    if !keep {
                        stop.cancel();
                    }
                    keep
                });
                objects.into_iter().for_each(|o| self.applied(o));
            }
            Watched::Applied(object) => self.applied(object),
            Watched::Deleted(object) => {
                if let Some((_, stop)) = self.running.remove(&object_id(&object)) {
                    stop.cancel();
                }
            }
        }
    }

    /// Runs again the AppSets of the Apps a watch saw change (a status write moves no
    /// generation: it is not a change). An AppSet's own writes run it once more, to
    /// find nothing to do.
    fn app_seen(&mut self, scope: Option<String>, seen: Watched) {
        match seen {
            Watched::Listed(objects) => {
                let listed: HashMap<String, Option<Stamp>> = objects
                    .iter()
                    .map(|o| (object_id(o), Stamp::of(o)))
                    .collect();
                let gone: Vec<String> = self
                    .stamps
                    .iter()
                    .filter(|(id, s)| {
                        scope.as_ref().is_none_or(|ns| s.namespace == *ns)
                            && !listed.contains_key(*id)
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                gone.into_iter().for_each(|id| self.app_changed(id, None));
                listed
                    .into_iter()
                    .for_each(|(id, stamp)| self.app_changed(id, stamp));
            }
            Watched::Applied(object) => self.app_changed(object_id(&object), Stamp::of(&object)),
            Watched::Deleted(object) => self.app_changed(object_id(&object), None),
        }
    }

    fn app_changed(&mut self, id: String, stamp: Option<Stamp>) {
        let old = match &stamp {
            Some(new) => self.stamps.insert(id, new.clone()),
            None => self.stamps.remove(&id),
        };
        if old == stamp {
            return;
        }
        let appsets = old.iter().chain(stamp.iter()).flat_map(|s| &s.appsets);
        for appset in appsets {
            if let Some((tx, _)) = self.running.get(appset) {
                // The same spec, sent again: the worker's next pass.
                tx.send_modify(|_| {});
            }
        }
    }

    /// A new or changed AppSet: its worker hears of a new spec (a status write, which
    /// moves no generation, is not one); one being deleted stops it.
    fn applied(&mut self, object: Value) {
        let id = object_id(&object);
        if !object["metadata"]["deletionTimestamp"].is_null() {
            // Being deleted: its Apps are the garbage collector's now (deleted, or with
            // `--cascade=orphan` freed), and a pass would adopt the freed ones again.
            if let Some((_, stop)) = self.running.remove(&id) {
                stop.cancel();
            }
            return;
        }
        if let Some((tx, _)) = self.running.get(&id) {
            tx.send_if_modified(|old| {
                let changed = old["metadata"]["generation"] != object["metadata"]["generation"]
                    || old["metadata"]["uid"] != object["metadata"]["uid"];
                if changed {
                    *old = object.clone();
                }
                changed
            });
            return;
        }
        let (tx, rx) = watch::channel(object);
        let stop = self.cancel.child_token();
        let (context, kinds) = (self.context.clone(), self.kinds.clone());
        tokio::spawn(run(context, kinds, id.clone(), rx, stop.clone()));
        self.running.insert(id, (tx, stop));
    }
}

fn object_id(object: &Value) -> String {
    let meta = &object["metadata"];
    crate::config::app_identity(
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default(),
    )
}

/// One Git generator's repository, kept fetched by a source watcher.
pub(super) struct Followed {
    source: Source,
    pub state: watch::Receiver<SourceState>,
    stop: CancellationToken,
}

/// One AppSet's worker: a pass whenever its spec, one of its Apps, a repository it
/// reads or (for clusters) the clock moves.
async fn run(
    context: AppSetContext,
    kinds: Kinds,
    id: String,
    mut spec: watch::Receiver<Value>,
    cancel: CancellationToken,
) {
    let mut followed: BTreeMap<GitRef, Followed> = BTreeMap::new();
    let mut written: Option<Value> = None;
    loop {
        let object = spec.borrow_and_update().clone();
        if context.ownership.is_writer(&id) && !still_there(&context, &kinds, &object).await {
            // Deleted: its own event stops the worker too, but may come after those
            // of the Apps the garbage collector removed, which would run a pass.
            break;
        }
        let parsed = AppSet::from_object(&object);
        let reads_clusters = parsed.as_ref().is_ok_and(AppSet::reads_clusters);
        if let Ok(appset) = &parsed {
            follow_sources(&context, &Reading::of(appset), &mut followed, &cancel);
        }
        let outcome = match parsed {
            Ok(appset) => pass(&context, &kinds, &appset, &followed).await,
            Err(err) => Outcome::Failed(err),
        };
        // A repository that moves wakes the worker by itself; Secrets and failed
        // writes are looked at again after a while.
        let wait = match &outcome {
            Outcome::WriteFailed(..) => Some(FAILURE_RETRY),
            Outcome::Failed(AppSetError::Generator(e)) if reads_clusters && e.is_retryable() => {
                Some(FAILURE_RETRY)
            }
            _ if reads_clusters => Some(CLUSTERS_REFRESH),
            _ => None,
        };
        if context.ownership.is_writer(&id) {
            let status = render_status(&object, &outcome, written.as_ref());
            if written.as_ref() != Some(&status) {
                let body = json!({
                    "apiVersion": format!("{APP_GROUP}/{APP_VERSION}"),
                    "kind": APPSET_KIND,
                    "metadata": {"namespace": object["metadata"]["namespace"], "name": object["metadata"]["name"]},
                    "status": status,
                });
                match context
                    .cluster
                    .apply_status(&kinds.appset, &body, APP_STATUS_MANAGER)
                    .await
                {
                    Ok(_) => written = Some(status),
                    Err(err) => {
                        tracing::warn!(appset = %id, error = %err, "cannot write the AppSet's status")
                    }
                }
            }
        }
        let sources_moved = async {
            let changes: Vec<_> = followed
                .values_mut()
                .map(|f| Box::pin(f.state.changed()))
                .collect();
            if changes.is_empty() {
                std::future::pending::<()>().await;
            }
            let _ = futures::future::select_all(changes).await;
        };
        tokio::select! {
            _ = cancel.cancelled() => break,
            changed = spec.changed() => if changed.is_err() { break },
            () = sources_moved => {}
            () = async { match wait { Some(wait) => tokio::time::sleep(wait).await, None => std::future::pending().await } } => {}
        }
    }
    for (_, f) in followed {
        f.stop.cancel();
        context.triggers.unregister(&f.source);
    }
}

/// What generators read, and for whom: an AppSet object's, or the configuration
/// file's `appSets`.
pub(super) struct Reading<'a> {
    pub git: Vec<GitRef>,
    /// Whose Secrets they read (Git credentials, cluster kubeconfigs).
    pub namespace: &'a str,
    pub clusters: bool,
    /// A tenant's (an AppSet object's): its repositories are reached over the network
    /// only, never tether's own files.
    pub tenant: bool,
}

impl<'a> Reading<'a> {
    fn of(appset: &'a AppSet) -> Reading<'a> {
        Reading {
            git: appset.git_refs(),
            namespace: &appset.namespace,
            clusters: appset.reads_clusters(),
            tenant: true,
        }
    }
}

/// Keeps a source watcher for each repository the generators read, and only those.
pub(super) fn follow_sources(
    context: &AppSetContext,
    reading: &Reading<'_>,
    followed: &mut BTreeMap<GitRef, Followed>,
    cancel: &CancellationToken,
) {
    let wanted = &reading.git;
    followed.retain(|git, f| {
        let keep = wanted.contains(git);
        if !keep {
            f.stop.cancel();
            context.triggers.unregister(&f.source);
        }
        keep
    });
    for git in wanted.iter().cloned() {
        if followed.contains_key(&git)
            || (reading.tenant && tether_core::source::check_tenant_repo_url(&git.repo).is_err())
        {
            continue;
        }
        // The whole tree: directories and files are matched against all of it.
        let mut source = Source::new(git.repo.clone(), git.revision.clone(), "");
        if let Some(name) = &git.secret {
            source = source.with_auth(Auth::Secret(CredentialsSecret {
                namespace: reading.namespace.to_string(),
                name: name.clone(),
            }));
        }
        let trigger = context.triggers.register(&source);
        let stop = cancel.child_token();
        let (state, _task) = SourceWatcher::spawn(
            context.sources.clone(),
            source.clone(),
            context.poll.clone(),
            trigger,
            stop.clone(),
        );
        followed.insert(
            git,
            Followed {
                source,
                state,
                stop,
            },
        );
    }
}

/// What one pass came to.
/// Whether the AppSet is still there as this object and not being deleted: the
/// deletion of its Apps by the garbage collector can reach the worker before its own,
/// and a pass then would stamp the Apps of a deleted AppSet again. A failed read
/// decides nothing (the pass's own requests meet the same cluster).
async fn still_there(context: &AppSetContext, kinds: &Kinds, object: &Value) -> bool {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    match context
        .cluster
        .get(&kinds.appset, meta["namespace"].as_str(), name)
        .await
    {
        Ok(Some(live)) => {
            live["metadata"]["uid"] == meta["uid"]
                && live["metadata"]["deletionTimestamp"].is_null()
        }
        Ok(None) => false,
        Err(_) => true,
    }
}

enum Outcome {
    /// The Apps are as generated: their names, each with its parameter set.
    Generated(Vec<(String, String)>),
    /// Nothing was written: why.
    Failed(AppSetError),
    /// Some writes failed (the others were made): the Apps wanted, and the failures.
    WriteFailed(Vec<(String, String)>, String),
}

/// One pass: gather what the generators read, generate, plan, write.
async fn pass(
    context: &AppSetContext,
    kinds: &Kinds,
    appset: &AppSet,
    followed: &BTreeMap<GitRef, Followed>,
) -> Outcome {
    let facts = match gather(context, &kinds.secret, &Reading::of(appset), followed).await {
        Ok(facts) => facts,
        Err(err) => return Outcome::Failed(err),
    };
    let desired = match appset.desired(&facts) {
        Ok(desired) => desired,
        Err(err) => return Outcome::Failed(err),
    };
    let generated: Vec<(String, String)> = desired
        .iter()
        .map(|d| (d.name.clone(), d.origin.clone()))
        .collect();
    if !context.ownership.is_writer(&appset.identity()) {
        return Outcome::Generated(generated);
    }
    let live = match context
        .cluster
        .list(&kinds.app, Some(&appset.namespace), "")
        .await
    {
        Ok(objects) => objects
            .iter()
            .filter_map(LiveApp::from_object)
            .collect::<Vec<_>>(),
        Err(err) => return Outcome::WriteFailed(generated, format!("cannot list Apps: {err}")),
    };
    let changes = match plan(appset, desired, &live) {
        Ok(changes) => changes,
        Err(err) => return Outcome::Failed(err),
    };
    let writes = changes
        .into_iter()
        .map(|change| write(context, kinds, &appset.namespace, change));
    let failures: Vec<String> = futures::stream::iter(writes)
        .buffer_unordered(DEFAULT_REQUEST_CONCURRENCY)
        .filter_map(|r| async move { r.err() })
        .collect()
        .await;
    if failures.is_empty() {
        Outcome::Generated(generated)
    } else {
        Outcome::WriteFailed(generated, failures.join("; "))
    }
}

/// The trees and cluster Secrets the generators read.
pub(super) async fn gather(
    context: &AppSetContext,
    secret: &Resolved,
    reading: &Reading<'_>,
    followed: &BTreeMap<GitRef, Followed>,
) -> Result<Facts, AppSetError> {
    let mut facts = Facts::default();
    for git in reading.git.iter().cloned() {
        if reading.tenant {
            if let Err(message) = tether_core::source::check_tenant_repo_url(&git.repo) {
                return Err(AppSetError::Spec(format!(
                    "spec.generators: git.repo: {message}"
                )));
            }
        }
        let Some(f) = followed.get(&git) else {
            continue;
        };
        let state = f.state.borrow().clone();
        let Some(revision) = state.revision else {
            let why = state
                .status
                .message
                .unwrap_or_else(|| "not fetched yet".into());
            return Err(GeneratorError::NotFetched(format!("{}: {why}", f.source)).into());
        };
        let (cache, source) = (context.sources.clone(), f.source.clone());
        let files = tokio::task::spawn_blocking(move || cache.read_files(&source, &revision))
            .await
            .map_err(|e| GeneratorError::NotFetched(format!("{}: {e}", f.source)))?
            .map_err(|e| GeneratorError::NotFetched(format!("{}: {e}", f.source)))?;
        facts.trees.insert(git, files);
    }
    if reading.clusters {
        // Only the AppSet's own namespace: a tenant's clusters are its own Secrets.
        let selector = format!("{CLUSTER_SECRET_LABEL}=true");
        let secrets = context
            .cluster
            .list(secret, Some(reading.namespace), &selector)
            .await
            .map_err(|e| GeneratorError::NotFetched(format!("cluster Secrets: {e}")))?;
        facts.clusters = secrets
            .iter()
            .map(|s| ClusterSecret {
                name: s["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                labels: s["metadata"]["labels"]
                    .as_object()
                    .map(|l| {
                        l.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
    }
    Ok(facts)
}

/// One write of the plan; its error names the App.
async fn write(
    context: &AppSetContext,
    kinds: &Kinds,
    namespace: &str,
    change: Change,
) -> Result<(), String> {
    let cluster = &context.cluster;
    match change {
        Change::Apply(app) => cluster
            .apply(&kinds.app, &app.object, true)
            .await
            .map(|_| tracing::info!(namespace, app = %app.name, origin = %app.origin, "App generated"))
            .map_err(|e| format!("App {}: {e}", app.name)),
        Change::Delete { name, uid } => cluster
            .delete(&kinds.app, Some(namespace), &name, Some(&uid))
            .await
            .map(|()| tracing::info!(namespace, app = %name, "generated App deleted: its parameter set is gone"))
            .map_err(|e| format!("App {name}: {e}")),
        Change::Orphan { name, owners } => {
            let patch = json!({"metadata": {"ownerReferences": owners, "labels": {APPSET_LABEL: null}}});
            cluster
                .merge_patch(&kinds.app, Some(namespace), &name, &patch)
                .await
                .map(|_| tracing::info!(namespace, app = %name, "generated App orphaned: its parameter set is gone"))
                .map_err(|e| format!("App {name}: {e}"))
        }
    }
}

/// The AppSet's status: the Apps it generated and a kstatus Ready condition.
fn render_status(object: &Value, outcome: &Outcome, written: Option<&Value>) -> Value {
    let generation = object["metadata"]["generation"].clone();
    let (state, reason, message, apps) = match outcome {
        Outcome::Generated(apps) => (
            "True",
            "Generated",
            format!("{} Apps generated", apps.len()),
            Some(apps),
        ),
        Outcome::Failed(err) => ("False", err.reason(), err.to_string(), None),
        Outcome::WriteFailed(apps, why) => ("False", "ApplyFailed", why.clone(), Some(apps)),
    };
    let previous = written
        .and_then(|w| w["conditions"].as_array())
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    // The transition time moves only when the condition's status does.
    let at = match previous {
        Some(p) if p["status"] == state => p["lastTransitionTime"].clone(),
        _ => Value::String(Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)),
    };
    let mut status = json!({
        "observedGeneration": generation,
        "conditions": [{
            "type": "Ready",
            "status": state,
            "observedGeneration": generation,
            "reason": reason,
            "message": message,
            "lastTransitionTime": at,
        }],
    });
    // A failed generation keeps the list it last wrote: those Apps are still there.
    let apps = match apps {
        Some(apps) => json!(
            apps.iter()
                .map(|(name, origin)| json!({"name": name, "parameters": origin}))
                .collect::<Vec<_>>()
        ),
        None => written
            .map(|w| w["apps"].clone())
            .unwrap_or_else(|| json!([])),
    };
    status["appCount"] = json!(apps.as_array().map_or(0, Vec::len));
    status["apps"] = apps;
    status
}
