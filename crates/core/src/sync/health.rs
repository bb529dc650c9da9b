//! Whether an object does its job, read from its status the way its controller
//! reports it. Pure: a live object in, a verdict out.
//!
//! [`assess`] knows the built-in kinds and kstatus; [`Judge`] puts the CEL
//! rules of an app, of the configuration and of [`builtin`] in front of it.

pub mod builtin;
pub mod cel;
mod judge;

pub use cel::{HealthRules, RuleSpec};
pub use judge::Judge;

use serde::Serialize;
use serde_json::Value;

use tether_diff::manifest::ObjectId;

/// An object's or an app's health, from best to worst: an app is as healthy as its
/// least healthy object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Health {
    Healthy,
    Progressing,
    Degraded,
    /// Desired but not in the cluster.
    Missing,
    /// Could not be read.
    Unknown,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "Healthy",
            Health::Progressing => "Progressing",
            Health::Degraded => "Degraded",
            Health::Missing => "Missing",
            Health::Unknown => "Unknown",
        }
    }
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict with the reason a person needs when it is not Healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assessment {
    pub health: Health,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Assessment {
    fn healthy() -> Assessment {
        Assessment {
            health: Health::Healthy,
            message: String::new(),
        }
    }

    pub(crate) fn progressing(message: impl Into<String>) -> Assessment {
        Assessment {
            health: Health::Progressing,
            message: message.into(),
        }
    }

    fn degraded(message: impl Into<String>) -> Assessment {
        Assessment {
            health: Health::Degraded,
            message: message.into(),
        }
    }

    pub fn missing() -> Assessment {
        Assessment {
            health: Health::Missing,
            message: "not found in the cluster".into(),
        }
    }
}

/// The health of one live object.
pub fn assess(id: &ObjectId, live: &Value) -> Assessment {
    if live.pointer("/metadata/deletionTimestamp").is_some() {
        return Assessment::progressing("being deleted");
    }
    let status = live.get("status").unwrap_or(&Value::Null);
    match (id.group.as_str(), id.kind.as_str()) {
        ("apps", "Deployment") => deployment(live, status),
        ("apps", "StatefulSet") => stateful_set(live, status),
        ("apps", "DaemonSet") => daemon_set(live, status),
        ("batch", "Job") => job(status),
        ("", "PersistentVolumeClaim") => match str_at(status, "/phase") {
            Some("Bound") => Assessment::healthy(),
            Some("Lost") => Assessment::degraded("the claim lost its volume"),
            phase => Assessment::progressing(format!(
                "waiting for the claim to be bound (phase {})",
                phase.unwrap_or("unknown")
            )),
        },
        ("", "Service") if str_at(live, "/spec/type") == Some("LoadBalancer") => {
            match status
                .pointer("/loadBalancer/ingress")
                .and_then(Value::as_array)
            {
                Some(ingress) if !ingress.is_empty() => Assessment::healthy(),
                _ => Assessment::progressing("waiting for a load balancer address"),
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            if condition(status, "NamesAccepted").is_some_and(|c| is(c, "False")) {
                Assessment::degraded(condition_message(status, "NamesAccepted"))
            } else if condition(status, "Established").is_some_and(|c| is(c, "True")) {
                Assessment::healthy()
            } else {
                Assessment::progressing("waiting for the definition to be established")
            }
        }
        ("", "Namespace") => match str_at(status, "/phase") {
            Some("Terminating") => Assessment::progressing("namespace is terminating"),
            _ => Assessment::healthy(),
        },
        _ => match condition(status, "Ready") {
            Some(c) if is(c, "True") => Assessment::healthy(),
            Some(c) if is(c, "False") => Assessment::degraded(condition_message(status, "Ready")),
            Some(_) => Assessment::progressing(condition_message(status, "Ready")),
            None => Assessment::healthy(),
        },
    }
}

/// Whether the controller has seen the current spec; until then its status describes
/// an older one.
fn observed(live: &Value, status: &Value) -> bool {
    let generation = live.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = status.get("observedGeneration").and_then(Value::as_i64);
    match (generation, observed) {
        (Some(g), Some(o)) => o >= g,
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// `spec.replicas`, which the API server defaults to 1.
fn wanted_replicas(live: &Value) -> i64 {
    live.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn count(status: &Value, field: &str) -> i64 {
    status.get(field).and_then(Value::as_i64).unwrap_or(0)
}

fn deployment(live: &Value, status: &Value) -> Assessment {
    if live.pointer("/spec/paused") == Some(&Value::Bool(true)) {
        return Assessment::healthy();
    }
    if condition(status, "Progressing").is_some_and(|c| {
        c.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded")
    }) {
        return Assessment::degraded(condition_message(status, "Progressing"));
    }
    if !observed(live, status) {
        return Assessment::progressing("waiting for the rollout to be observed");
    }
    let wanted = wanted_replicas(live);
    let updated = count(status, "updatedReplicas");
    let total = count(status, "replicas");
    let available = count(status, "availableReplicas");
    if updated < wanted {
        Assessment::progressing(format!("{updated} of {wanted} replicas updated"))
    } else if total > updated {
        Assessment::progressing(format!(
            "{} old replicas pending termination",
            total - updated
        ))
    } else if available < updated {
        Assessment::progressing(format!(
            "{available} of {updated} updated replicas available"
        ))
    } else {
        Assessment::healthy()
    }
}

fn stateful_set(live: &Value, status: &Value) -> Assessment {
    if !observed(live, status) {
        return Assessment::progressing("waiting for the rollout to be observed");
    }
    let wanted = wanted_replicas(live);
    let ready = count(status, "readyReplicas");
    if ready < wanted {
        return Assessment::progressing(format!("{ready} of {wanted} replicas ready"));
    }
    let rolling = str_at(live, "/spec/updateStrategy/type") != Some("OnDelete");
    match (
        str_at(status, "/currentRevision"),
        str_at(status, "/updateRevision"),
    ) {
        (Some(current), Some(update)) if rolling && current != update => {
            Assessment::progressing("rolling update in progress")
        }
        _ => Assessment::healthy(),
    }
}

fn daemon_set(live: &Value, status: &Value) -> Assessment {
    if !observed(live, status) {
        return Assessment::progressing("waiting for the rollout to be observed");
    }
    let wanted = count(status, "desiredNumberScheduled");
    let updated = count(status, "updatedNumberScheduled");
    let available = count(status, "numberAvailable");
    if updated < wanted {
        Assessment::progressing(format!("{updated} of {wanted} pods updated"))
    } else if available < wanted {
        Assessment::progressing(format!("{available} of {wanted} pods available"))
    } else {
        Assessment::healthy()
    }
}

fn job(status: &Value) -> Assessment {
    if condition(status, "Failed").is_some_and(|c| is(c, "True")) {
        Assessment::degraded(condition_message(status, "Failed"))
    } else if condition(status, "Complete").is_some_and(|c| is(c, "True")) {
        Assessment::healthy()
    } else {
        Assessment::progressing("running")
    }
}

fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn condition<'v>(status: &'v Value, kind: &str) -> Option<&'v Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn is(condition: &Value, value: &str) -> bool {
    condition.get("status").and_then(Value::as_str) == Some(value)
}

/// `Reason: message` of a condition, for a person.
pub(crate) fn condition_message(status: &Value, kind: &str) -> String {
    let Some(c) = condition(status, kind) else {
        return String::new();
    };
    let reason = c.get("reason").and_then(Value::as_str).unwrap_or(kind);
    match c.get("message").and_then(Value::as_str) {
        Some(message) if !message.is_empty() => format!("{reason}: {message}"),
        _ => reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An object of `group` and `kind` (the CEL rules' tests use it too).
    pub(super) fn id(group: &str, kind: &str) -> ObjectId {
        ObjectId {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: "x".into(),
        }
    }

    fn health(group: &str, kind: &str, live: Value) -> Health {
        assess(&id(group, kind), &live).health
    }

    #[test]
    fn a_deployment_is_healthy_once_its_rollout_is_observed_and_available() {
        let spec = json!({"replicas": 2});
        let live =
            |status: Value| json!({"metadata": {"generation": 2}, "spec": spec, "status": status});
        assert_eq!(
            health("apps", "Deployment", live(json!({}))),
            Health::Progressing
        );
        let stale = json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(
            health("apps", "Deployment", live(stale)),
            Health::Progressing
        );
        let rolling = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2});
        let verdict = assess(&id("apps", "Deployment"), &live(rolling));
        assert_eq!(verdict.message, "1 old replicas pending termination");
        let done = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(health("apps", "Deployment", live(done)), Health::Healthy);
    }

    #[test]
    fn a_deployment_past_its_progress_deadline_is_degraded() {
        let live = json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                            "message": "ReplicaSet \"web-1\" has timed out progressing."}]}});
        let verdict = assess(&id("apps", "Deployment"), &live);
        assert_eq!(verdict.health, Health::Degraded);
        assert_eq!(
            verdict.message,
            "ProgressDeadlineExceeded: ReplicaSet \"web-1\" has timed out progressing."
        );
    }

    #[test]
    fn statefulsets_and_daemonsets_wait_for_ready_pods() {
        let sts = |ready: i64| {
            json!({"metadata": {"generation": 1}, "spec": {"replicas": 3},
                   "status": {"observedGeneration": 1, "readyReplicas": ready,
                              "currentRevision": "a", "updateRevision": "a"}})
        };
        assert_eq!(health("apps", "StatefulSet", sts(2)), Health::Progressing);
        assert_eq!(health("apps", "StatefulSet", sts(3)), Health::Healthy);
        let ds = |available: i64| {
            json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1,
                   "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": available}})
        };
        assert_eq!(health("apps", "DaemonSet", ds(1)), Health::Progressing);
        assert_eq!(health("apps", "DaemonSet", ds(2)), Health::Healthy);
    }

    /// Asserts each case's health, a failure naming its case.
    fn judge_all(cases: Vec<(&str, &str, Value, Health)>) {
        for (group, kind, live, expected) in cases {
            let got = health(group, kind, live.clone());
            assert_eq!(got, expected, "{group}/{kind} {live}");
        }
    }

    #[test]
    fn jobs_claims_load_balancers_and_crds_follow_their_status() {
        let cond = |t: &str, s: &str| json!({"status": {"conditions": [{"type": t, "status": s}]}});
        let pvc = |phase: &str| json!({"status": {"phase": phase}});
        let lb = |status: Value| json!({"spec": {"type": "LoadBalancer"}, "status": status});
        let (crd, ext) = ("CustomResourceDefinition", "apiextensions.k8s.io");
        judge_all(vec![
            ("batch", "Job", json!({}), Health::Progressing),
            ("batch", "Job", cond("Complete", "True"), Health::Healthy),
            ("batch", "Job", cond("Failed", "True"), Health::Degraded),
            (
                "",
                "PersistentVolumeClaim",
                pvc("Pending"),
                Health::Progressing,
            ),
            ("", "PersistentVolumeClaim", pvc("Bound"), Health::Healthy),
            ("", "PersistentVolumeClaim", pvc("Lost"), Health::Degraded),
            (
                "",
                "Service",
                lb(json!({"loadBalancer": {}})),
                Health::Progressing,
            ),
            (
                "",
                "Service",
                lb(json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}})),
                Health::Healthy,
            ),
            (
                "",
                "Service",
                json!({"spec": {"type": "ClusterIP"}}),
                Health::Healthy,
            ),
            (ext, crd, json!({}), Health::Progressing),
            (ext, crd, cond("Established", "True"), Health::Healthy),
            (ext, crd, cond("NamesAccepted", "False"), Health::Degraded),
        ]);
    }

    #[test]
    fn any_kind_with_a_ready_condition_is_judged_by_it() {
        let ready = |s: &str| json!({"status": {"conditions": [{"type": "Ready", "status": s, "reason": "Reconciling"}]}});
        let terminating = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}});
        judge_all(vec![
            ("example.com", "Widget", ready("True"), Health::Healthy),
            ("example.com", "Widget", ready("False"), Health::Degraded),
            (
                "example.com",
                "Widget",
                ready("Unknown"),
                Health::Progressing,
            ),
            ("", "ConfigMap", json!({"data": {}}), Health::Healthy),
            ("", "ConfigMap", terminating, Health::Progressing),
        ]);
    }

    #[test]
    fn an_app_is_as_healthy_as_its_worst_object() {
        let all = [Health::Healthy, Health::Degraded, Health::Progressing];
        assert_eq!(all.iter().max(), Some(&Health::Degraded));
        assert!(Health::Missing > Health::Degraded && Health::Unknown > Health::Missing);
    }
}
