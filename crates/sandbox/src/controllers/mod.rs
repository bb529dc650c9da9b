//! Simulated controllers. The Deployment controller ([`deployment`]) always runs, as
//! in every cluster. With `--simulate-controllers`, after a short delay the other
//! workloads report status as healthy controllers would, Jobs complete, LoadBalancer
//! Services get an address and claims are bound. A container image whose tag ends in
//! [`BROKEN_IMAGE_SUFFIX`] never becomes ready, so degraded health can be tested.
//! A Job whose pods name a ServiceAccount that does not exist never starts, as on a
//! cluster, where the ServiceAccount admission refuses the Job controller's pods
//! (`error looking up service account`): a Helm hook Job whose ServiceAccount hook
//! was deleted too early hangs here as it does there.
//!
//! Like real controllers they are level-triggered: each change of a watched object
//! schedules a pass that computes the status the object should have now and writes it
//! only if it differs.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

pub(crate) mod deployment;
pub(crate) mod events;

use super::api::State;
use super::store::{EventType, ObjectKey, ResourceKey};

/// An image tag ending in this never becomes ready (`nginx:1.25-broken`).
pub(crate) const BROKEN_IMAGE_SUFFIX: &str = "-broken";

/// The field manager simulated controllers write status as.
const MANAGER: &str = "kube-controller-manager";

/// The kinds simulated, by resource. Deployments, and the ReplicaSets they own, are
/// the Deployment controller's.
const SIMULATED: &[(&str, &str)] = &[
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("apps", "replicasets"),
    ("batch", "jobs"),
    ("", "services"),
    ("", "persistentvolumeclaims"),
];

pub(crate) async fn run(state: Arc<State>, delay: Duration, shutdown: CancellationToken) {
    let mut events = state.store.subscribe();
    resync(&state, delay);
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = shutdown.cancelled() => return,
        };
        match event {
            Ok(event)
                if event.event_type != EventType::Deleted && is_simulated(&event.resource) =>
            {
                schedule(
                    state.clone(),
                    event.resource.clone(),
                    event.key.clone(),
                    delay,
                );
            }
            Ok(_) => {}
            // Missed events: look at everything again, as a controller re-lists.
            Err(RecvError::Lagged(_)) => resync(&state, delay),
            Err(RecvError::Closed) => return,
        }
    }
}

fn is_simulated(resource: &ResourceKey) -> bool {
    SIMULATED
        .iter()
        .any(|(g, r)| resource.group == *g && resource.resource == *r)
}

fn resync(state: &Arc<State>, delay: Duration) {
    for (group, resource) in SIMULATED {
        let key = ResourceKey {
            group: group.to_string(),
            resource: resource.to_string(),
        };
        let (_, items) = state.store.list(&key, None);
        for (object_key, _) in items {
            schedule(state.clone(), key.clone(), object_key, delay);
        }
    }
}

fn schedule(state: Arc<State>, resource: ResourceKey, key: ObjectKey, delay: Duration) {
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let types = state.registry().all_types();
        let Some(resource_type) = types.iter().find(|t| t.key() == resource && !t.custom) else {
            return;
        };
        // The object this pass computed from, when it changed its status: only the pass
        // that writes an outcome records it.
        let mut changed = None;
        let result = state.update_status(resource_type, &key, MANAGER, |object| {
            if missing_service_account(&state, &resource, &key, object) {
                return None;
            }
            let status = desired_status(&resource, object)?;
            if object.get("status") != Some(&status) {
                changed = Some(object.clone());
            }
            Some(status)
        });
        if let Err(err) = result {
            tracing::debug!(resource = %resource.resource, name = %key.1, error = %err, "simulated controller could not write status");
            return;
        }
        if let (Some(before), Some(after)) = (changed, state.store.get(&resource, &key)) {
            record_outcome(&state, &resource, &before, &after.value());
        }
    });
}

/// Whether `object` is a Job whose pod template names a ServiceAccount (other than
/// `default`, which the sandbox does not create) that does not exist in its
/// namespace. The Job then waits: the simulation looks again when the Job changes,
/// not when the ServiceAccount appears (a cluster's Job controller retries).
fn missing_service_account(
    state: &State,
    resource: &ResourceKey,
    key: &ObjectKey,
    object: &Value,
) -> bool {
    if resource.group != "batch" || resource.resource != "jobs" {
        return false;
    }
    let named = object
        .pointer("/spec/template/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty() && *name != "default");
    let Some(name) = named else {
        return false;
    };
    let accounts = ResourceKey {
        group: String::new(),
        resource: "serviceaccounts".to_string(),
    };
    state
        .store
        .get(&accounts, &(key.0.clone(), name.to_string()))
        .is_none()
}

/// The Event a controller records when a workload reaches an end: the Job controller's
/// `Completed` and `BackoffLimitExceeded` (`pkg/controller/job`), once, when the status
/// first says so.
fn record_outcome(state: &State, resource: &ResourceKey, before: &Value, after: &Value) {
    if resource.group != "batch" || resource.resource != "jobs" {
        return;
    }
    let finished = |job: &Value, kind: &str| {
        job.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
    };
    let (event_type, reason, message) =
        if finished(after, "Complete") && !finished(before, "Complete") {
            (events::EventType::Normal, "Completed", "Job completed")
        } else if finished(after, "Failed") && !finished(before, "Failed") {
            (
                events::EventType::Warning,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
        } else {
            return;
        };
    events::record(
        state,
        events::Record {
            object: after,
            event_type,
            reason,
            message: message.to_string(),
            component: "job-controller",
            manager: MANAGER,
        },
    );
}

/// The status a healthy (or, for broken images, failing) controller reports now.
fn desired_status(resource: &ResourceKey, object: &Value) -> Option<Value> {
    let generation = object
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let replicas = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let broken = has_broken_image(object);
    let ready = if broken { 0 } else { replicas };
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let current = object.get("status").cloned().unwrap_or(json!({}));
    let mut status = match resource.resource.as_str() {
        "statefulsets" => json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "readyReplicas": ready,
            "currentReplicas": replicas,
            "updatedReplicas": replicas,
            "availableReplicas": ready,
            "collisionCount": 0,
        }),
        "replicasets" if deployment::controller_name(object, "Deployment").is_some() => {
            return None;
        }
        "replicasets" => json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
        }),
        // One simulated node schedules one pod of each DaemonSet.
        "daemonsets" => json!({
            "observedGeneration": generation,
            "currentNumberScheduled": 1,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 1,
            "numberReady": if broken { 0 } else { 1 },
            "updatedNumberScheduled": 1,
            "numberAvailable": if broken { 0 } else { 1 },
        }),
        "jobs" => {
            if current.get("completionTime").is_some() || current.get("failed").is_some() {
                return None;
            }
            // Kubernetes' defaults: a backoff limit of 6, one completion.
            let spec = |field: &str, default: i64| {
                object
                    .pointer(&format!("/spec/{field}"))
                    .and_then(Value::as_i64)
                    .unwrap_or(default)
            };
            if broken {
                let backoff = spec("backoffLimit", 6);
                json!({
                    "startTime": now,
                    "failed": backoff + 1,
                    "conditions": [
                        condition("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", &now),
                        condition("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", &now),
                    ],
                })
            } else {
                let completions = spec("completions", 1);
                json!({
                    "startTime": now,
                    "completionTime": now,
                    "succeeded": completions,
                    "conditions": [
                        condition("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods", &now),
                        condition("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods", &now),
                    ],
                })
            }
        }
        "services" => {
            if object.pointer("/spec/type").and_then(Value::as_str) != Some("LoadBalancer") {
                return None;
            }
            // TEST-NET-1 (RFC 5737): an address that is never routed.
            json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10", "ipMode": "VIP"}]}})
        }
        "persistentvolumeclaims" => json!({
            "phase": "Bound",
            "accessModes": object.pointer("/spec/accessModes").cloned().unwrap_or(json!(["ReadWriteOnce"])),
            "capacity": {"storage": object.pointer("/spec/resources/requests/storage").cloned().unwrap_or(json!("1Gi"))},
        }),
        _ => return None,
    };
    // Keep condition timestamps when nothing else changed, so a pass is a no-op.
    if let (Some(old), Some(new)) = (current.get("conditions"), status.get_mut("conditions")) {
        if same_conditions(old, new) {
            *new = old.clone();
        }
    }
    if let (Some(old), Some(new)) = (current.get("startTime"), status.get_mut("startTime")) {
        *new = old.clone();
    }
    Some(status)
}

fn condition(kind: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    })
}

fn same_conditions(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Vec<(Value, Value, Value)> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|c| (c["type"].clone(), c["status"].clone(), c["reason"].clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) == strip(new)
}

fn has_broken_image(object: &Value) -> bool {
    let spec = object
        .pointer("/spec/template/spec")
        .or_else(|| object.pointer("/spec/jobTemplate/spec/template/spec"));
    let Some(spec) = spec else { return false };
    ["containers", "initContainers"].iter().any(|field| {
        spec[field].as_array().is_some_and(|containers| {
            containers
                .iter()
                .filter_map(|c| c["image"].as_str())
                .any(|image| image.ends_with(BROKEN_IMAGE_SUFFIX))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(group: &str, resource: &str) -> ResourceKey {
        ResourceKey {
            group: group.into(),
            resource: resource.into(),
        }
    }

    fn workload(image: &str) -> Value {
        json!({"metadata": {"generation": 3}, "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": image}]}}}})
    }

    #[test]
    fn healthy_stateful_sets_report_every_replica_ready() {
        let status = desired_status(&key("apps", "statefulsets"), &workload("nginx:1.25")).unwrap();
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(status["readyReplicas"], 2);
        assert_eq!(status["availableReplicas"], 2);
    }

    #[test]
    fn broken_images_never_become_ready() {
        let status =
            desired_status(&key("apps", "statefulsets"), &workload("nginx:1.25-broken")).unwrap();
        assert_eq!(status["readyReplicas"], 0);
        let job = json!({"spec": {"backoffLimit": 2, "template": {"spec": {"containers": [{"name": "x", "image": "busybox-broken"}]}}}});
        let status = desired_status(&key("batch", "jobs"), &job).unwrap();
        assert_eq!(status["failed"], 3);
        assert_eq!(status["conditions"][1]["type"], "Failed");
    }

    #[test]
    fn a_second_pass_computes_the_same_status() {
        let mut object = workload("nginx:1.25");
        let resource = key("apps", "statefulsets");
        let first = desired_status(&resource, &object).unwrap();
        object["status"] = first.clone();
        assert_eq!(desired_status(&resource, &object).unwrap(), first);
    }

    #[test]
    fn deployments_and_their_replica_sets_are_left_to_the_deployment_controller() {
        assert!(!is_simulated(&key("apps", "deployments")));
        let mut owned = workload("nginx:1.25");
        owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u", "controller": true}]);
        assert!(desired_status(&key("apps", "replicasets"), &owned).is_none());
        let standalone = workload("nginx:1.25");
        assert!(desired_status(&key("apps", "replicasets"), &standalone).is_some());
    }

    #[test]
    fn only_load_balancers_get_an_address() {
        let services = key("", "services");
        assert!(desired_status(&services, &json!({"spec": {"type": "ClusterIP"}})).is_none());
        let status = desired_status(&services, &json!({"spec": {"type": "LoadBalancer"}})).unwrap();
        assert_eq!(status["loadBalancer"]["ingress"][0]["ip"], "192.0.2.10");
    }
}
