//! `dependsOn` in the loop (issue #28): a pass of an app that depends on others reads,
//! syncs and prunes nothing until each of them is Ready, Synced and Healthy at its
//! current revision; until then its status says which it waits for and why
//! (`Ready=False`, reason `DependencyNotReady`). The wait costs no polling: every
//! status change is announced on the status feed, and the one waker reading it wakes
//! the waiting dependents of an app the moment all their dependencies are ready.
//! A chain that comes back to where it started (App objects can make one the
//! configuration file could not check) stalls every app on it, named in their status.
//! A dependency is known by its status here, so it must be reconciled by this replica
//! (with shards, dependents and dependencies belong in one shard).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::Utc;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::config::depends::{display, find_cycle, render_chain};
use tether_core::report::status::{
    AppStatus, Automation, ConditionStatus, ConditionType, DEPENDENCY_NOT_READY, Statuses,
    SyncStatus,
};
use tether_core::sync::health::Health;
use tether_core::sync::health::cel::Predicate;

/// The `Ready` and `Stalled` reason of an app on a dependency cycle.
pub const DEPENDENCY_CYCLE: &str = "DependencyCycle";

/// How a worker is woken (see `AppHandle::wake`).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// The running apps' dependencies, and the wakes of those waiting.
#[derive(Clone)]
pub struct Dependencies {
    graph: Arc<Mutex<Graph>>,
    statuses: Statuses,
}

#[derive(Default)]
struct Graph {
    /// What each registered app depends on.
    edges: BTreeMap<String, Vec<String>>,
    /// Each registered app's `readyExpr`s, by dependency.
    ready_exprs: HashMap<String, ReadyExprs>,
    nodes: HashMap<String, Node>,
    /// Tells a registration from the one that replaced it (a restarted worker).
    next_token: u64,
}

struct Node {
    token: u64,
    wake: Wake,
    /// What its last pass waited for, if it did.
    waiting: Option<Waiting>,
}

/// What wakes a waiting app.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Waiting {
    /// A dependency's status change that leaves all of them ready (the message its
    /// status shows, to show a new one when reasons change).
    Dependencies(String),
    /// A change of the graph (the cycle may be gone).
    Cycle,
}

/// What changed, for [`Dependencies::wake_waiting`].
#[derive(Debug, Clone, Copy)]
enum Change<'a> {
    /// This app's status.
    Status(&'a str),
    /// Some statuses, unknown which (the feed lagged).
    Statuses,
    /// The apps registered, or their dependencies.
    Graph,
}

/// An app's `dependsOn[].readyExpr`s by dependency (see [`ready_expr`]).
pub type ReadyExprs = BTreeMap<String, Predicate>;

/// Whether a pass may go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Open,
    /// Waiting for these dependencies: the message names each and why.
    Waiting(String),
    /// On a cycle: the message names the chain. Needs a change of configuration.
    Cycle(String),
}

impl Dependencies {
    pub fn new(statuses: Statuses) -> Dependencies {
        Dependencies {
            graph: Arc::default(),
            statuses,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Graph> {
        self.graph.lock()
    }

    /// `app` runs (or is being deleted) with these dependencies, until the
    /// registration drops. A new graph may break a cycle: apps on one look again.
    pub fn register(&self, app: &str, depends_on: Vec<String>, wake: Wake) -> Registration {
        self.register_with(app, depends_on, ReadyExprs::new(), wake)
    }

    /// [`Dependencies::register`], with the `readyExpr`s each dependency must satisfy.
    pub fn register_with(
        &self,
        app: &str,
        depends_on: Vec<String>,
        ready_exprs: ReadyExprs,
        wake: Wake,
    ) -> Registration {
        let token = {
            let mut graph = self.lock();
            graph.next_token += 1;
            let token = graph.next_token;
            graph.edges.insert(app.to_string(), depends_on.clone());
            graph.ready_exprs.insert(app.to_string(), ready_exprs);
            let node = Node {
                token,
                wake,
                waiting: None,
            };
            graph.nodes.insert(app.to_string(), node);
            token
        };
        self.wake_waiting(Change::Graph);
        Registration {
            dependencies: self.clone(),
            app: app.to_string(),
            depends_on,
            token,
        }
    }

    /// The registered apps that depend on `app` (an App's deletion waits for them).
    pub fn dependents(&self, app: &str) -> Vec<String> {
        let graph = self.lock();
        let found = graph
            .edges
            .iter()
            .filter(|(_, deps)| deps.iter().any(|d| d == app));
        found.map(|(dependent, _)| display(dependent)).collect()
    }

    /// Wakes the waiting apps `change` may let go: those whose dependencies are all
    /// ready now (after a status change, of one of them when known), or those on a
    /// cycle (after a change of the graph). One still waiting whose reasons changed
    /// has its status say the new ones (no pass runs for that).
    fn wake_waiting(&self, change: Change<'_>) {
        let mut wakes: Vec<Wake> = Vec::new();
        let mut still: Vec<(String, Gate)> = Vec::new();
        {
            let mut graph = self.lock();
            let Graph {
                edges,
                nodes,
                ready_exprs,
                ..
            } = &mut *graph;
            for (app, node) in nodes.iter_mut() {
                let deps = edges.get(app).map(Vec::as_slice).unwrap_or_default();
                let concerned = match (&node.waiting, change) {
                    (Some(Waiting::Cycle), Change::Graph) => {
                        wakes.push(node.wake.clone());
                        continue;
                    }
                    (Some(Waiting::Dependencies(_)), Change::Status(changed)) => {
                        deps.iter().any(|d| d == changed)
                    }
                    (Some(Waiting::Dependencies(_)), Change::Statuses) => true,
                    _ => false,
                };
                if !concerned {
                    continue;
                }
                let pending = self.pending(app, deps, ready_exprs.get(app));
                if pending.is_empty() {
                    wakes.push(node.wake.clone());
                    continue;
                }
                let message = waiting_for(&pending);
                if node.waiting.as_ref() != Some(&Waiting::Dependencies(message.clone())) {
                    node.waiting = Some(Waiting::Dependencies(message.clone()));
                    still.push((app.clone(), Gate::Waiting(message)));
                }
            }
        }
        wakes.iter().for_each(|wake| wake());
        for (app, gate) in &still {
            report(&self.statuses, app, gate);
        }
    }

    /// The dependencies of `app` (`deps`) that are not ready, each with why: not
    /// ready by [`readiness`], or its `readyExpr` does not hold.
    fn pending(&self, app: &str, deps: &[String], exprs: Option<&ReadyExprs>) -> Vec<String> {
        // Read before any dependency's: the statuses' lock is not taken twice.
        let own = exprs
            .filter(|e| !e.is_empty())
            .map(|_| self.statuses.with(app, as_json).unwrap_or_default());
        deps.iter()
            .filter_map(|dep| {
                let standing = self.statuses.with(dep, |status| {
                    readiness(status)?;
                    match (exprs.and_then(|e| e.get(dep)), &own) {
                        (Some(expr), Some(own)) => ready_expr(expr, &as_json(status), own),
                        _ => Ok(()),
                    }
                });
                let why = standing.unwrap_or_else(|| Err("not found".into())).err()?;
                Some(format!("{} ({why})", display(dep)))
            })
            .collect()
    }

    /// Follows the status feed for the service's life: a change of an app's status
    /// wakes its waiting dependents once all their dependencies are ready.
    pub fn spawn_waker(&self, cancel: CancellationToken) {
        let mut feed = self.statuses.subscribe();
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let changed = tokio::select! {
                    _ = cancel.cancelled() => return,
                    changed = feed.recv() => changed,
                };
                match changed {
                    Ok(Some(app)) => this.wake_waiting(Change::Status(&app)),
                    // Fell behind: some changes are unknown, so every waiting app looks.
                    Err(RecvError::Lagged(_)) => this.wake_waiting(Change::Statuses),
                    Ok(None) | Err(RecvError::Closed) => return,
                }
            }
        });
    }
}

/// One app's place in the graph; dropping it takes the app out (unless a newer
/// registration of the same app replaced it).
pub struct Registration {
    dependencies: Dependencies,
    app: String,
    depends_on: Vec<String>,
    token: u64,
}

impl Registration {
    /// Whether a pass of the app may go on now. Marks it waiting (to be woken) if not.
    pub fn gate(&self) -> Gate {
        if self.depends_on.is_empty() {
            return Gate::Open;
        }
        let deps = &self.dependencies;
        let mut graph = deps.lock();
        let gate = match find_cycle(&graph.edges, &self.app) {
            Some(chain) => Gate::Cycle(format!("a dependency cycle: {}", render_chain(&chain))),
            None => match deps.pending(
                &self.app,
                &self.depends_on,
                graph.ready_exprs.get(&self.app),
            ) {
                pending if pending.is_empty() => Gate::Open,
                pending => Gate::Waiting(waiting_for(&pending)),
            },
        };
        if let Some(node) = graph
            .nodes
            .get_mut(&self.app)
            .filter(|n| n.token == self.token)
        {
            node.waiting = match &gate {
                Gate::Open => None,
                Gate::Waiting(message) => Some(Waiting::Dependencies(message.clone())),
                Gate::Cycle(_) => Some(Waiting::Cycle),
            };
        }
        gate
    }

    /// Checks the gate and, when closed, says so in the app's status: why it waits,
    /// and that automation does not act. Returns whether the pass must stop here.
    pub fn hold(&self, statuses: &Statuses) -> bool {
        report(statuses, &self.app, &self.gate())
    }
}

/// `waiting for a (why), b (why)`.
fn waiting_for(pending: &[String]) -> String {
    format!("waiting for {}", pending.join(", "))
}

/// Says in `app`'s status why its passes wait, if they do (and returns whether).
fn report(statuses: &Statuses, app: &str, gate: &Gate) -> bool {
    let (reason, message, stalled) = match gate {
        Gate::Open => return false,
        Gate::Waiting(message) => (DEPENDENCY_NOT_READY, message, ConditionStatus::False),
        Gate::Cycle(message) => (DEPENDENCY_CYCLE, message, ConditionStatus::True),
    };
    statuses.update(app, |s| {
        let now = Utc::now();
        s.set_condition(
            ConditionType::Ready,
            ConditionStatus::False,
            reason,
            message,
            now,
        );
        s.set_condition(ConditionType::Stalled, stalled, reason, message, now);
        s.automation = Automation {
            acting: false,
            reason: Some(message.clone()),
        };
    });
    true
}

impl Drop for Registration {
    fn drop(&mut self) {
        let removed = {
            let mut graph = self.dependencies.lock();
            let current = graph
                .nodes
                .get(&self.app)
                .is_some_and(|n| n.token == self.token);
            if current {
                graph.nodes.remove(&self.app);
                graph.edges.remove(&self.app);
                graph.ready_exprs.remove(&self.app);
            }
            current
        };
        if removed {
            self.dependencies.wake_waiting(Change::Graph);
        }
    }
}

/// Whether an app is ready for those that depend on it: its last pass succeeded
/// (`Ready=True`) at the revision it is at now, leaving it Synced and Healthy (Flux
/// asks the same of a `dependsOn` Kustomization). If not, why not.
pub fn readiness(status: &AppStatus) -> Result<(), String> {
    let ready = status
        .conditions
        .iter()
        .find(|c| c.kind == ConditionType::Ready);
    match ready {
        Some(c) if c.status == ConditionStatus::True => {}
        Some(c) => return Err(format!("not Ready: {}", c.reason)),
        None => return Err("no pass has finished yet".into()),
    }
    let Some(revision) = &status.revision else {
        return Err("no revision yet".into());
    };
    // A rolled-back app is ready at the revision it is pinned to.
    let wanted = status
        .pin
        .as_ref()
        .map_or(&revision.sha, |pin| &pin.revision);
    if status.applied_revision.as_ref() != Some(wanted) {
        let short: String = wanted.chars().take(12).collect();
        return Err(format!("not yet applied at {short}"));
    }
    if status.sync != SyncStatus::Synced {
        return Err(status.sync.as_str().to_string());
    }
    if status.health != Health::Healthy {
        return Err(status.health.as_str().to_string());
    }
    Ok(())
}

/// A status as the status API shows it, for a `readyExpr`.
fn as_json(status: &AppStatus) -> serde_json::Value {
    serde_json::to_value(status).unwrap_or_default()
}

/// Whether a dependency's `readyExpr` holds (Flux's `dependsOn[].readyExpr`, evaluated
/// in addition to [`readiness`]): `dep` is the dependency's status and `self` the
/// dependent's, both as the status API returns them. If not, why not, naming it.
pub fn ready_expr(
    expr: &Predicate,
    dep: &serde_json::Value,
    own: &serde_json::Value,
) -> Result<(), String> {
    match expr.holds(&[("dep", dep), ("self", own)]) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("readyExpr is false: {}", expr.source())),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use tether_core::report::status::RevisionInfo;
    use tether_core::report::status::reason;

    fn counter() -> (Arc<AtomicUsize>, Wake) {
        let count = Arc::new(AtomicUsize::new(0));
        let wake = {
            let count = count.clone();
            Arc::new(move || {
                count.fetch_add(1, Ordering::SeqCst);
            })
        };
        (count, wake)
    }

    /// `app`'s status after a pass at `sha` that succeeded, Synced and Healthy.
    fn ready(statuses: &Statuses, app: &str, sha: &str) {
        statuses.update(app, |s| {
            let now = Utc::now();
            s.revision = Some(RevisionInfo {
                sha: sha.into(),
                subject: String::new(),
            });
            s.set_condition(
                ConditionType::Ready,
                ConditionStatus::True,
                reason::SUCCEEDED,
                "",
                now,
            );
            s.applied_revision = Some(sha.into());
            s.sync = SyncStatus::Synced;
            s.health = Health::Healthy;
        });
    }

    #[test]
    fn an_app_is_ready_only_synced_and_healthy_at_its_current_revision() {
        let statuses = Statuses::default();
        ready(&statuses, "db", "aaa");
        let check = || statuses.with("db", readiness).expect("known");
        assert_eq!(check(), Ok(()));
        // A new commit: the pass at it has not applied it yet.
        statuses.update("db", |s| {
            s.revision.as_mut().unwrap().sha = "bbbbbbbbbbbbbbbb".into()
        });
        assert_eq!(check(), Err("not yet applied at bbbbbbbbbbbb".into()));
        ready(&statuses, "db", "bbbbbbbbbbbbbbbb");
        statuses.update("db", |s| s.health = Health::Progressing);
        assert_eq!(check(), Err("Progressing".into()));
        statuses.update("db", |s| {
            s.set_condition(
                ConditionType::Ready,
                ConditionStatus::False,
                "ApplyFailed",
                "x",
                Utc::now(),
            )
        });
        assert_eq!(check(), Err("not Ready: ApplyFailed".into()));
        assert_eq!(
            readiness(&AppStatus::new("new")),
            Err("no pass has finished yet".into())
        );
    }

    #[test]
    fn a_ready_expr_holds_the_dependent_until_it_is_true_and_names_itself() {
        let statuses = Statuses::default();
        let deps = Dependencies::new(statuses.clone());
        ready(&statuses, "db", "aaa");
        ready(&statuses, "web", "aaa");
        // Flux's example: the dependency is at the revision the dependent is at.
        let source = "dep.appliedRevision == self.revision.sha && dep.health == 'Healthy'";
        let expr = Predicate::compile("readyExpr", source).expect("compiles");
        let exprs: ReadyExprs = [("db".to_string(), expr)].into();
        let web = deps.register_with("web", vec!["db".into()], exprs, Arc::new(|| {}));
        assert_eq!(web.gate(), Gate::Open);
        statuses.update("web", |s| s.revision.as_mut().unwrap().sha = "bbb".into());
        assert_eq!(
            web.gate(),
            Gate::Waiting(format!("waiting for db (readyExpr is false: {source})"))
        );
        // An expression that cannot be evaluated waits too, and says why.
        let broken = Predicate::compile("readyExpr", "dep.nope == 1").expect("compiles");
        let exprs: ReadyExprs = [("db".to_string(), broken)].into();
        let api = deps.register_with("api", vec!["db".into()], exprs, Arc::new(|| {}));
        let Gate::Waiting(message) = api.gate() else {
            panic!("api waits");
        };
        assert!(
            message.starts_with("waiting for db (readyExpr (dep.nope == 1)"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_dependency_becoming_ready_wakes_its_waiting_dependents_at_once() {
        let statuses = Statuses::default();
        let deps = Dependencies::new(statuses.clone());
        deps.spawn_waker(CancellationToken::new());
        let (woken, wake) = counter();
        let (_, noop) = counter();
        let _db = deps.register("db", Vec::new(), noop.clone());
        let web = deps.register("web", vec!["db".into(), "team-a.cache".into()], wake);
        let Gate::Waiting(message) = web.gate() else {
            panic!("web waits");
        };
        assert_eq!(
            message,
            "waiting for db (not found), team-a/cache (not found)"
        );
        assert!(web.hold(&statuses));
        let status = statuses.get("web").expect("a status");
        let condition = status
            .conditions
            .iter()
            .find(|c| c.kind == ConditionType::Ready)
            .unwrap();
        assert_eq!(
            (condition.reason.as_str(), condition.message.as_str()),
            (DEPENDENCY_NOT_READY, message.as_str())
        );
        // One ready of two: not woken, but its status says what it still waits for.
        ready(&statuses, "db", "aaa");
        let still = "waiting for team-a/cache (not found)";
        for _ in 0..100 {
            let now = statuses
                .with("web", |s| s.automation.reason.clone())
                .flatten();
            if now.as_deref() == Some(still) {
                break;
            }
            tokio::task::yield_now().await;
        }
        let reason = statuses
            .with("web", |s| s.automation.reason.clone())
            .flatten();
        assert_eq!(reason.as_deref(), Some(still));
        assert_eq!(woken.load(Ordering::SeqCst), 0);
        ready(&statuses, "team-a.cache", "ccc");
        for _ in 0..100 {
            if woken.load(Ordering::SeqCst) > 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert_eq!(web.gate(), Gate::Open);
        assert!(!web.hold(&statuses));
        assert_eq!(deps.dependents("team-a.cache"), ["web"]);
        drop(web);
        assert!(deps.dependents("db").is_empty());
    }

    #[test]
    fn apps_on_a_cycle_stall_naming_it_and_breaking_it_wakes_them() {
        let statuses = Statuses::default();
        let deps = Dependencies::new(statuses.clone());
        let (woken, wake) = counter();
        let a = deps.register("team-a.a", vec!["team-a.b".into()], wake);
        let b = deps.register("team-a.b", vec!["team-a.a".into()], Arc::new(|| {}));
        assert_eq!(
            a.gate(),
            Gate::Cycle("a dependency cycle: team-a/a → team-a/b → team-a/a".into())
        );
        assert!(a.hold(&statuses));
        let status = statuses.get("team-a.a").expect("a status");
        let stalled = status
            .conditions
            .iter()
            .find(|c| c.kind == ConditionType::Stalled)
            .unwrap();
        assert_eq!(
            (stalled.status, stalled.reason.as_str()),
            (ConditionStatus::True, DEPENDENCY_CYCLE)
        );
        // b's spec changes (its worker restarts without the edge back): a looks again.
        drop(b);
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        let _b = deps.register("team-a.b", Vec::new(), Arc::new(|| {}));
        assert!(matches!(a.gate(), Gate::Waiting(_)));
    }

    #[test]
    fn a_replaced_registration_is_not_removed_by_the_old_one() {
        let deps = Dependencies::new(Statuses::default());
        let old = deps.register("web", vec!["db".into()], Arc::new(|| {}));
        let _new = deps.register("web", vec!["db".into()], Arc::new(|| {}));
        drop(old);
        assert_eq!(deps.dependents("db"), ["web"]);
    }
}
