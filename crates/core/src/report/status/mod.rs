//! Where each app stands, as the status API shows it: sync status, health, revision,
//! its source (and how long it has been failing), the last pass, what drifts,
//! conditions, and why automation is not acting. The loop
//! writes it, the server reads it, `tether status` renders it (`table`).

mod actions;
mod condition;
mod pin;
mod table;

pub use actions::{ACTION_HISTORY, ActionTaken};
pub use condition::reason::{self, DEPENDENCY_NOT_READY};
pub use condition::{ConditionStatus, ConditionType};
pub use pin::{APPLIED_HISTORY, AppliedRevision, MIN_PREFIX, Pin, find_applied};
pub use table::render_table;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::RwLock;
use serde::Serialize;
use serde_json::Value;

use crate::sync::health::Health;
use crate::sync::{ObjectResult, OwnerReference, SyncReport};
use tokio::sync::broadcast;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SyncStatus {
    Synced,
    OutOfSync,
    Unknown,
}

impl SyncStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncStatus::Synced => "Synced",
            SyncStatus::OutOfSync => "OutOfSync",
            SyncStatus::Unknown => "Unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RevisionInfo {
    pub sha: String,
    pub subject: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PassResult {
    /// The pass ran to the end (whether or not it had to correct anything).
    Succeeded,
    /// It failed and is retried with backoff.
    Failed,
    /// It failed in a way no retry fixes; retried when the source or config changes.
    Stalled,
}

impl PassResult {
    pub fn as_str(self) -> &'static str {
        match self {
            PassResult::Succeeded => "Succeeded",
            PassResult::Failed => "Failed",
            PassResult::Stalled => "Stalled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassInfo {
    pub finished_at: DateTime<Utc>,
    pub duration_ms: u64,
    pub result: PassResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the pass wrote: created, configured, replaced and pruned objects.
    pub changed: usize,
}

/// The app's Git source as the last pass saw it. A failing source keeps serving its
/// last good revision, so this says how old that is: `lastSuccess`, and since when it
/// fails (`failingSince`); `stale` once that is longer than the app's
/// `source.staleAfter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceInfo {
    pub ready: bool,
    /// Why not ready (the source stage's reason: `FetchFailed`, `AuthFailed`…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The last error, credentials redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_success: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<DateTime<Utc>>,
    pub stale: bool,
}

/// Whether tether corrects drift for this app right now, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Automation {
    pub acting: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One object that differs from Git, with what differs (Secret values masked).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedObject {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// Missing (to create), Modified, Extra (to prune) or Failed.
    pub status: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Value>,
    /// The unified diff of the object, live to desired (as `tether diff` prints it).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub diff: String,
}

impl DriftedObject {
    /// An object the sync left differing from Git (see [`SyncReport::remaining_drift`]).
    pub fn of(object: &ObjectResult) -> DriftedObject {
        let status = object.standing();
        DriftedObject {
            api_version: object.id.api_version(),
            kind: object.id.kind.clone(),
            namespace: object.id.namespace.clone(),
            name: object.id.name.clone(),
            status,
            message: object.message.clone(),
            changes: object
                .changes
                .iter()
                .map(|c| {
                    let mut change = serde_json::json!({
                        "path": c.path.to_string(),
                        "desired": c.desired,
                        "live": c.live,
                    });
                    if let (Some(by), Some(map)) = (&c.changed_by, change.as_object_mut()) {
                        map.insert("changedBy".into(), serde_json::json!(by));
                    }
                    change
                })
                .collect(),
            diff: object
                .views
                .as_deref()
                .map(|views| crate::report::drift::unified_diff(views, false))
                .unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: ConditionType,
    pub status: ConditionStatus,
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub last_transition_time: DateTime<Utc>,
}

/// How many passes an app's status keeps (`history`): the dashboard shows the last
/// 50, enough to see a flapping app without growing with uptime.
pub const PASS_HISTORY: usize = 50;

/// How many status changes the change feed buffers for a slow reader before it
/// tells the reader it lagged (a reader then reloads every app).
const CHANGE_FEED: usize = 4096;

/// One object of the app as the last pass saw it: its standing against Git and its
/// health.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceState {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// InSync, Modified, Missing, Extra, Conflict or Failed.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub health_message: String,
    /// The live object's uid, when it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Its `metadata.ownerReferences`: the dashboard's tree follows them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
}

impl ResourceState {
    fn of(object: &ObjectResult) -> ResourceState {
        ResourceState {
            api_version: object.id.api_version(),
            kind: object.id.kind.clone(),
            namespace: object.id.namespace.clone(),
            name: object.id.name.clone(),
            status: object.standing(),
            health: object.health.as_ref().map(|h| h.health),
            health_message: object
                .health
                .as_ref()
                .map(|h| h.message.clone())
                .unwrap_or_default(),
            uid: object.lineage.uid.clone(),
            owner_references: object.lineage.owners.clone(),
        }
    }
}

/// One app's status.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    pub name: String,
    pub sync: SyncStatus,
    pub health: Health,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<RevisionInfo>,
    /// Absent until the source has been tried once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceInfo>,
    /// The revision of the last pass that succeeded with the app Synced: equal to
    /// `revision` when the live state is Git's at its current revision (what an app
    /// that `dependsOn` this one waits for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_revision: Option<String>,
    pub objects: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_pass: Option<PassInfo>,
    /// When a failed pass is tried again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt: Option<DateTime<Utc>>,
    pub automation: Automation,
    pub drifted: Vec<DriftedObject>,
    pub conditions: Vec<Condition>,
    /// Every object of the app, with its standing and health.
    pub resources: Vec<ResourceState>,
    /// The last [`PASS_HISTORY`] passes, newest first.
    pub history: VecDeque<PassInfo>,
    /// The last [`APPLIED_HISTORY`] revisions applied in full, newest first: what a
    /// rollback may go back to.
    pub applied_revisions: VecDeque<AppliedRevision>,
    /// The revision the app is held at by a rollback, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pin: Option<Pin>,
    /// The last [`ACTION_HISTORY`] actions people took through the API, newest first.
    pub actions: VecDeque<ActionTaken>,
    /// The provider's commit page without the SHA, when the repository URL names a
    /// known web host (credentials never included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_url_prefix: Option<String>,
}

impl AppStatus {
    pub fn new(name: &str) -> AppStatus {
        AppStatus {
            name: name.to_string(),
            sync: SyncStatus::Unknown,
            health: Health::Unknown,
            revision: None,
            source: None,
            applied_revision: None,
            objects: 0,
            last_pass: None,
            next_attempt: None,
            automation: Automation {
                acting: false,
                reason: Some("no pass has run yet".into()),
            },
            drifted: Vec::new(),
            conditions: Vec::new(),
            resources: Vec::new(),
            history: VecDeque::new(),
            applied_revisions: VecDeque::new(),
            pin: None,
            actions: VecDeque::new(),
            commit_url_prefix: None,
        }
    }

    /// Sets a condition; its transition time moves only when its status does.
    pub fn set_condition(
        &mut self,
        kind: ConditionType,
        status: ConditionStatus,
        reason: &str,
        message: &str,
        now: DateTime<Utc>,
    ) {
        match self.conditions.iter_mut().find(|c| c.kind == kind) {
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = now;
                }
                c.status = status;
                c.reason = reason.to_string();
                c.message = message.to_string();
            }
            None => self.conditions.push(Condition {
                kind,
                status,
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: now,
            }),
        }
    }

    /// Sets a condition whose transition is known to have happened at `since` (a
    /// source failing since its first failed fetch), whenever this pass saw it.
    pub fn set_condition_since(
        &mut self,
        kind: ConditionType,
        status: ConditionStatus,
        reason: &str,
        message: &str,
        since: DateTime<Utc>,
    ) {
        self.set_condition(kind, status, reason, message, since);
        if let Some(c) = self.conditions.iter_mut().find(|c| c.kind == kind) {
            c.last_transition_time = since;
        }
    }

    /// Takes in what a sync (or its dry run) found.
    pub fn record_sync(&mut self, report: &SyncReport, now: DateTime<Utc>) {
        self.objects = report.objects.iter().filter(|o| o.health.is_some()).count();
        self.health = report.health;
        self.drifted = report.remaining_drift().map(DriftedObject::of).collect();
        self.resources = report.objects.iter().map(ResourceState::of).collect();
        self.record_synced(report.failed(), now);
        self.record_health(report.health, now);
    }

    /// Takes in what a heal of some objects did (or found, when they needed no
    /// write): their entries change, the others' stay as the last sync recorded them,
    /// and the app is as healthy as its least healthy object.
    pub fn record_heal(&mut self, report: &SyncReport, now: DateTime<Utc>) {
        for object in &report.objects {
            let state = ResourceState::of(object);
            let same = |api_version: &str, kind: &str, namespace: &Option<String>, name: &str| {
                api_version == state.api_version
                    && kind == state.kind
                    && *namespace == state.namespace
                    && name == state.name
            };
            self.drifted
                .retain(|d| !same(&d.api_version, &d.kind, &d.namespace, &d.name));
            match self
                .resources
                .iter_mut()
                .find(|r| same(&r.api_version, &r.kind, &r.namespace, &r.name))
            {
                Some(known) => *known = state,
                None => self.resources.push(state),
            }
        }
        self.drifted
            .extend(report.remaining_drift().map(DriftedObject::of));
        self.record_synced(report.failed(), now);
        let health = self
            .resources
            .iter()
            .filter_map(|r| r.health)
            .max()
            .unwrap_or(Health::Healthy);
        self.record_health(health, now);
    }

    fn record_health(&mut self, health: Health, now: DateTime<Utc>) {
        self.health = health;
        let healthy = ConditionStatus::of(health == Health::Healthy);
        self.set_condition(ConditionType::Healthy, healthy, health.as_str(), "", now);
    }

    /// Synced when nothing is left drifted and the pass did not fail.
    fn record_synced(&mut self, failed: bool, now: DateTime<Utc>) {
        self.sync = if self.drifted.is_empty() && !failed {
            SyncStatus::Synced
        } else {
            SyncStatus::OutOfSync
        };
        let (status, reason, message) = match self.sync {
            SyncStatus::Synced => (ConditionStatus::True, reason::SYNCED, String::new()),
            _ => (
                ConditionStatus::False,
                reason::OUT_OF_SYNC,
                format!("{} objects differ from Git", self.drifted.len()),
            ),
        };
        self.set_condition(ConditionType::Synced, status, reason, &message, now);
    }
}

/// Every app's status, shared by the loop (which writes) and the server (which reads).
/// Each change is announced by app name on a feed ([`Statuses::subscribe`]) that the
/// server's event stream follows.
#[derive(Debug, Clone)]
pub struct Statuses {
    inner: Arc<RwLock<BTreeMap<String, AppStatus>>>,
    /// App names; `None` says the service is stopping and readers should end.
    changes: broadcast::Sender<Option<String>>,
}

impl Default for Statuses {
    fn default() -> Statuses {
        Statuses {
            inner: Arc::default(),
            changes: broadcast::channel(CHANGE_FEED).0,
        }
    }
}

impl Statuses {
    /// Changes the app's status; a new `last_pass` also enters its `history`.
    pub fn update(&self, name: &str, change: impl FnOnce(&mut AppStatus)) {
        {
            let mut all = self.inner.write();
            let status = all
                .entry(name.to_string())
                .or_insert_with(|| AppStatus::new(name));
            let before = status.last_pass.clone();
            change(status);
            if let Some(pass) = &status.last_pass
                && before.as_ref() != Some(pass)
            {
                status.history.push_front(pass.clone());
                status.history.truncate(PASS_HISTORY);
            }
        }
        // Nobody listening is fine: the feed is for whoever connects.
        let _ = self.changes.send(Some(name.to_string()));
    }

    pub fn remove(&self, name: &str) {
        self.inner.write().remove(name);
        let _ = self.changes.send(Some(name.to_string()));
    }

    /// The names of apps whose status changes from now on (a removed app too), then
    /// `None` once [`Statuses::close_feed`] is called.
    pub fn subscribe(&self) -> broadcast::Receiver<Option<String>> {
        self.changes.subscribe()
    }

    /// Tells every reader of the feed that the service is stopping, so long-lived
    /// streams end and the HTTP server's graceful stop need not wait them out.
    pub fn close_feed(&self) {
        let _ = self.changes.send(None);
    }

    /// Reads the app's status in place, without copying it.
    pub fn with<T>(&self, name: &str, read: impl FnOnce(&AppStatus) -> T) -> Option<T> {
        self.inner.read().get(name).map(read)
    }

    /// Maps every status in place, in name order.
    pub fn map_all<T>(&self, read: impl FnMut(&AppStatus) -> T) -> Vec<T> {
        self.inner.read().values().map(read).collect()
    }

    pub fn get(&self, name: &str) -> Option<AppStatus> {
        self.inner.read().get(name).cloned()
    }

    pub fn all(&self) -> Vec<AppStatus> {
        self.inner.read().values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::ConditionStatus::{False, True};
    use super::ConditionType::{SourceReady, Synced};
    use super::*;
    use crate::sync::Action;
    use crate::sync::health::Assessment;
    use tether_diff::diff::Status;
    use tether_diff::manifest::ObjectId;

    fn object(name: &str, action: Action, drift: Status, health: Health) -> ObjectResult {
        ObjectResult {
            id: ObjectId {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("web".into()),
                name: name.into(),
            },
            action,
            drift: Some(drift),
            health: Some(Assessment {
                health,
                message: String::new(),
            }),
            message: String::new(),
            changes: Vec::new(),
            views: None,
            lineage: Default::default(),
        }
    }

    fn report(objects: Vec<ObjectResult>) -> SyncReport {
        SyncReport {
            app: "web".into(),
            revision: None,
            dry_run: false,
            // As a sync reports it: the worst of its objects.
            health: objects
                .iter()
                .filter_map(|o| o.health.as_ref().map(|h| h.health))
                .max()
                .unwrap_or(Health::Healthy),
            objects,
            failure: None,
            inventory: Default::default(),
            hooks: Vec::new(),
        }
    }

    /// A heal reports only the objects it looked at: their entries change, the
    /// others' stay, and the app's sync and health follow from all of them.
    #[test]
    fn a_heal_changes_only_its_objects_entries_and_the_app_follows_them_all() {
        let now = DateTime::from_timestamp(1_000, 0).unwrap();
        let mut status = AppStatus::new("web");
        status.record_sync(
            &report(vec![
                object("a", Action::Unchanged, Status::InSync, Health::Healthy),
                object("b", Action::Unchanged, Status::InSync, Health::Progressing),
            ]),
            now,
        );
        assert_eq!(status.sync, SyncStatus::Synced);
        assert_eq!(status.health, Health::Progressing);

        // b became Healthy (a controller's status): no write, the app is Healthy.
        status.record_heal(
            &report(vec![object(
                "b",
                Action::Unchanged,
                Status::InSync,
                Health::Healthy,
            )]),
            now,
        );
        assert_eq!(status.health, Health::Healthy);
        assert_eq!(status.resources.len(), 2);
        assert_eq!(status.sync, SyncStatus::Synced);

        // a drifted and its heal was refused: it is drifted, the app OutOfSync.
        let mut refused = object("a", Action::Failed, Status::Modified, Health::Healthy);
        refused.message = "conflict".into();
        status.record_heal(&report(vec![refused]), now);
        assert_eq!(status.sync, SyncStatus::OutOfSync);
        assert_eq!(status.drifted.len(), 1);
        assert_eq!(status.drifted[0].name, "a");
        assert_eq!(status.resources[0].status, "Failed");
        assert_eq!(status.resources[1].status, "InSync");

        // Healed at the next attempt: nothing is left drifted.
        status.record_heal(
            &report(vec![object(
                "a",
                Action::Configured,
                Status::Modified,
                Health::Healthy,
            )]),
            now,
        );
        assert_eq!(status.sync, SyncStatus::Synced);
        assert!(status.drifted.is_empty());
        assert_eq!(status.resources.len(), 2);
    }

    /// App `web` with condition `ty` True (for `reason`) since the first of three
    /// instants a thousand seconds apart, and the instants.
    fn true_since_first(ty: ConditionType, reason: &str) -> (AppStatus, [DateTime<Utc>; 3]) {
        let times = [1_000, 2_000, 3_000].map(|at| DateTime::from_timestamp(at, 0).unwrap());
        let mut status = AppStatus::new("web");
        status.set_condition(ty, True, reason, "", times[0]);
        (status, times)
    }

    #[test]
    fn a_condition_moves_its_transition_time_only_when_its_status_changes() {
        let (mut status, [t0, t1, t2]) = true_since_first(Synced, "Synced");
        status.set_condition(Synced, True, "Synced", "", t1);
        assert_eq!(status.conditions[0].last_transition_time, t0);
        status.set_condition(Synced, False, "OutOfSync", "2 objects differ", t2);
        assert_eq!(status.conditions[0].last_transition_time, t2);
        assert_eq!(status.conditions[0].message, "2 objects differ");
    }

    #[test]
    fn a_condition_set_since_a_time_carries_that_time_even_when_already_false() {
        let (mut status, [_, t1, t2]) = true_since_first(SourceReady, "Fetched");
        status.set_condition_since(SourceReady, False, "FetchFailed", "refused", t1);
        assert_eq!(status.conditions[0].last_transition_time, t1);
        // A new failure streak the worker saw no success between: its own start.
        status.set_condition_since(SourceReady, False, "FetchFailed", "refused", t2);
        assert_eq!(status.conditions[0].last_transition_time, t2);
        assert_eq!(status.conditions[0].status, False);
    }

    #[test]
    fn passes_enter_the_history_newest_first_and_it_keeps_the_last_fifty() {
        let statuses = Statuses::default();
        let mut feed = statuses.subscribe();
        for n in 0..(PASS_HISTORY as i64 + 5) {
            statuses.update("web", |s| {
                s.last_pass = Some(PassInfo {
                    finished_at: DateTime::from_timestamp(1_000 + n, 0).unwrap(),
                    duration_ms: 10,
                    result: PassResult::Succeeded,
                    error: None,
                    changed: 0,
                })
            });
        }
        // A change that is not a pass leaves the history alone.
        statuses.update("web", |s| s.objects = 3);
        let history = statuses.with("web", |s| s.history.clone()).unwrap();
        assert_eq!(history.len(), PASS_HISTORY);
        assert_eq!(
            history[0].finished_at,
            DateTime::from_timestamp(1_000 + PASS_HISTORY as i64 + 4, 0).unwrap()
        );
        assert_eq!(feed.try_recv().unwrap().as_deref(), Some("web"));
        statuses.remove("web");
        let mut names = Vec::new();
        while let Ok(name) = feed.try_recv() {
            names.push(name);
        }
        assert_eq!(names.len(), PASS_HISTORY + 5 + 1);
        assert!(names.iter().all(|n| n.as_deref() == Some("web")));
        assert!(statuses.with("web", |_| ()).is_none());
        statuses.close_feed();
        assert_eq!(feed.try_recv().unwrap(), None);
    }

    #[test]
    fn a_drifted_secret_shows_its_diff_and_changes_without_its_values() {
        use crate::sync::Action;
        use tether_diff::diff::{DiffOptions, MaskKey, Mode, OpenApiSchemas, diff_object};
        use tether_diff::manifest::ObjectId;
        let id = ObjectId {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some("shop".into()),
            name: "db".into(),
        };
        let secret = |password: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "db", "namespace": "shop"},
                "stringData": {"password": password}})
        };
        let mask = MaskKey::new([3; 32]);
        let schemas = OpenApiSchemas::new([&id], []);
        let options = DiffOptions {
            mode: Mode::Offline,
            rules: &[],
            schema: &schemas,
            mask: &mask,
        };
        let views = diff_object(
            &id,
            Some(&secret("in-git-s3cret")),
            Some(&secret("live-s3cret")),
            &options,
        );
        let object = ObjectResult {
            id: id.clone(),
            action: Action::Configured,
            drift: Some(views.drift.status()),
            health: None,
            message: String::new(),
            changes: views.drift.changes().to_vec(),
            views: Some(Box::new(views)),
            lineage: Default::default(),
        };
        let drifted = DriftedObject::of(&object);
        assert!(
            drifted.diff.starts_with("--- live/Secret"),
            "{}",
            drifted.diff
        );
        assert!(drifted.diff.contains("<secret:"), "{}", drifted.diff);
        let json = serde_json::to_string(&drifted).unwrap();
        assert!(!json.contains("s3cret"), "{json}");
    }

    #[test]
    fn the_source_serializes_camel_case_and_leaves_out_what_is_unknown() {
        let mut status = AppStatus::new("web");
        assert!(
            serde_json::to_value(&status)
                .unwrap()
                .get("source")
                .is_none()
        );
        let since = DateTime::from_timestamp(1_000, 0).unwrap();
        status.source = Some(SourceInfo {
            ready: false,
            reason: Some("FetchFailed".into()),
            message: Some("connection refused".into()),
            last_success: None,
            failing_since: Some(since),
            stale: true,
        });
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            json["source"],
            serde_json::json!({
                "ready": false,
                "reason": "FetchFailed",
                "message": "connection refused",
                "failingSince": "1970-01-01T00:16:40Z",
                "stale": true,
            })
        );
    }
}
