//! The Deployment controller of kube-controller-manager, as the sandbox runs it: a few
//! milliseconds after a Deployment (or a ReplicaSet it owns) changes, it writes what
//! the real controller writes, in the same order, as field manager
//! `kube-controller-manager` (operation `Update`) through the API's own write path, so
//! resourceVersions move and managedFields record it:
//!
//! 1. the ReplicaSet `<name>-<pod-template-hash>` of the current pod template (created,
//!    or given the new revision and replica count), owned by the Deployment, with the
//!    `pod-template-hash` label on it, in its selector and in its template;
//! 2. older ReplicaSets scaled to 0;
//! 3. the Deployment's `deployment.kubernetes.io/revision` annotation (the highest
//!    older revision + 1: it moves when the pod template changes);
//! 4. each ReplicaSet's status, as the ReplicaSet controller reports its pods: first
//!    created but not ready, one pass later ready (never, for an image ending in
//!    [`super::BROKEN_IMAGE_SUFFIX`]);
//! 5. the Deployment's status through the status subresource: observedGeneration,
//!    replica counts and the `Available` and `Progressing` conditions with the real
//!    reasons and messages.
//!
//! Like the real controller it is level-triggered: a pass computes what should be from
//! what is and writes only what differs, so passes repeat harmlessly. Unlike it, there
//! are no pods: a rollout replaces all pods at once, and a broken image exceeds its
//! progress deadline at once instead of after `progressDeadlineSeconds`.

mod status;
mod template;

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::{MANAGER, events, has_broken_image};
use crate::api::State;
use crate::registry::ResourceType;
use crate::selector::LabelSelector;
use crate::status::ApiError;
use crate::store::{Event, EventType, ObjectKey, Stored};
use status::{deployment_status, replica_set_status, replicas_of};

use template::{new_replica_set, pod_template_hash, revision_of, updated_replica_set};

/// The Deployment's and its ReplicaSets' revision (`deploymentutil.RevisionAnnotation`).
pub(crate) const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// The label that ties a ReplicaSet and its pods to one pod template.
pub(crate) const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";

/// Passes waiting for their delay, by Deployment; one pass runs at a time.
#[derive(Default)]
struct Queue {
    pending: Mutex<HashSet<ObjectKey>>,
    /// Held for a pass. An async lock: a pass waiting for its turn must yield its
    /// worker thread. Waiting on a blocking lock took the sandbox's every worker while
    /// a burst of Deployments was created (one pass each), and the API's requests
    /// stalled behind controller passes for seconds (issue #31: 200 Deployments applied
    /// 16 at a time answered in bursts 1-4 s apart), which a real API server, whose
    /// controllers run in another process, never does.
    running: tokio::sync::Mutex<()>,
}

impl Queue {
    /// Runs `pass` once no other pass runs, yielding the thread while it waits.
    async fn one_at_a_time<T>(&self, pass: impl FnOnce() -> T) -> T {
        let _running = self.running.lock().await;
        pass()
    }
}

/// Runs the controller until `shutdown`.
pub(crate) async fn run(state: Arc<State>, shutdown: CancellationToken) {
    let queue = Arc::new(Queue::default());
    let mut events = state.store.subscribe();
    resync(&state, &queue);
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = shutdown.cancelled() => return,
        };
        match event {
            Ok(event) => {
                if let Some(key) = deployment_of(&event) {
                    schedule(&state, &queue, key);
                }
            }
            // Missed events: look at every Deployment again, as a controller re-lists.
            Err(RecvError::Lagged(_)) => resync(&state, &queue),
            Err(RecvError::Closed) => return,
        }
    }
}

/// The Deployment an event concerns: the Deployment itself (unless deleted), or the
/// controller of a ReplicaSet (deleted ones too: the controller recreates them).
fn deployment_of(event: &Event) -> Option<ObjectKey> {
    if event.resource.group != "apps" {
        return None;
    }
    match event.resource.resource.as_str() {
        "deployments" if event.event_type != EventType::Deleted => Some(event.key.clone()),
        "replicasets" => controller_name(&event.object.value(), "Deployment")
            .map(|name| (event.key.0.clone(), name)),
        _ => None,
    }
}

/// The name of the object's controller (the owner reference with `controller: true`)
/// when it is of `kind`.
pub(super) fn controller_name(object: &Value, kind: &str) -> Option<String> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true && r["kind"] == kind)
        .and_then(|r| r["name"].as_str())
        .map(str::to_string)
}

fn resync(state: &Arc<State>, queue: &Arc<Queue>) {
    let Some(deployments) = resource(state, "deployments") else {
        return;
    };
    let (_, items) = state.store.list(&deployments.key(), None);
    for (key, _) in items {
        schedule(state, queue, key);
    }
}

fn schedule(state: &Arc<State>, queue: &Arc<Queue>, key: ObjectKey) {
    let Some(delay) = state.deployment_controller.delay() else {
        return;
    };
    if !queue.pending.lock().insert(key.clone()) {
        return;
    }
    let (state, queue) = (state.clone(), queue.clone());
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        queue.pending.lock().remove(&key);
        let result = queue.one_at_a_time(|| sync(&state, &key)).await;
        match result {
            Ok(()) => {}
            // Someone wrote in between: the next pass starts from what they wrote.
            Err(ApiError::Conflict { .. }) => schedule(&state, &queue, key),
            Err(err) => {
                tracing::debug!(namespace = %key.0, name = %key.1, error = %err, "simulated deployment controller could not sync");
            }
        }
    });
}

fn resource(state: &State, plural: &str) -> Option<Arc<ResourceType>> {
    state.registry().find("apps", "v1", plural)
}

/// One pass over one Deployment: the steps of the module documentation, in order.
fn sync(state: &State, key: &ObjectKey) -> Result<(), ApiError> {
    let (Some(deployments), Some(replica_sets)) = (
        resource(state, "deployments"),
        resource(state, "replicasets"),
    ) else {
        return Ok(());
    };
    let Some(stored) = state.store.get(&deployments.key(), key) else {
        return Ok(());
    };
    let deployment = stored.value();
    if deployment.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(());
    }
    let Some(template) = deployment.pointer("/spec/template") else {
        return Ok(());
    };
    let namespace = &key.0;
    adopt_orphans(state, &replica_sets, &deployment, namespace, &stored.uid)?;
    let owned = owned_replica_sets(state, &replica_sets, namespace, &stored.uid);
    let hash = pod_template_hash(template, deployment.pointer("/status/collisionCount"));
    let new_name = format!("{}-{hash}", key.1);
    let revision = owned
        .iter()
        .filter(|(k, _)| k.1 != new_name)
        .filter_map(|(_, rs)| revision_of(&rs.value()))
        .max()
        .unwrap_or(0)
        + 1;

    // 1. The ReplicaSet of the current template.
    let new_key = (namespace.clone(), new_name);
    let existing = owned.iter().find(|(k, _)| *k == new_key).map(|(_, s)| s);
    if existing.is_none() && is_paused(&deployment) {
        // A paused Deployment rolls nothing out: its template waits for a resume, and
        // only the replica count is kept (`sync` rather than `rolloutRolling`).
        scale_active(state, &replica_sets, &deployment, &owned)?;
        return finish(state, &deployments, &replica_sets, key, &stored.uid, None);
    }
    let desired = new_replica_set(&deployment, &stored.uid, &hash, revision);
    let before = existing.map(|e| replicas_of(&e.value()));
    let wanted = match existing {
        Some(existing) => updated_replica_set(&existing.value(), &desired),
        None => desired,
    };
    let after = replicas_of(&wanted);
    // The Deployment takes the revision its ReplicaSet has (`SetDeploymentRevision`).
    let revision = revision_of(&wanted).unwrap_or(revision);
    state.write_as_controller(
        &replica_sets,
        &new_key,
        existing.cloned(),
        wanted,
        MANAGER,
        None,
    )?;
    match before {
        None if after > 0 => scaling_event(
            state,
            &deployment,
            format!("Scaled up replica set {} to {after}", new_key.1),
        ),
        Some(before) if before != after => {
            scaled_event(state, &deployment, &new_key.1, before, after)
        }
        _ => {}
    }

    // 2. Older ReplicaSets scaled to 0.
    for (old_key, old) in owned.iter().filter(|(k, _)| *k != new_key) {
        let mut value = old.value();
        let before = replicas_of(&value);
        if before != 0 {
            value["spec"]["replicas"] = json!(0);
            state.write_as_controller(
                &replica_sets,
                old_key,
                Some(old.clone()),
                value,
                MANAGER,
                None,
            )?;
            scaled_event(state, &deployment, &old_key.1, before, 0);
        }
    }

    // 3. The Deployment's revision.
    let stored = if revision_of(&deployment) == Some(revision) {
        stored
    } else {
        let mut annotated = deployment.clone();
        annotated["metadata"]["annotations"][REVISION_ANNOTATION] = revision.to_string().into();
        state.write_as_controller(&deployments, key, Some(stored), annotated, MANAGER, None)?;
        match state.store.get(&deployments.key(), key) {
            Some(stored) => stored,
            None => return Ok(()),
        }
    };

    finish(
        state,
        &deployments,
        &replica_sets,
        key,
        &stored.uid,
        Some(&new_key.1),
    )
}

/// Steps 4 and 5: the ReplicaSets' status, then the Deployment's from theirs.
/// `new_rs` names the ReplicaSet of the current template, None while a paused
/// Deployment has none.
fn finish(
    state: &State,
    deployments: &Arc<ResourceType>,
    replica_sets: &Arc<ResourceType>,
    key: &ObjectKey,
    uid: &str,
    new_rs: Option<&str>,
) -> Result<(), ApiError> {
    let namespace = &key.0;
    // 4. What the ReplicaSet controller reports of their pods.
    for (rs_key, _) in owned_replica_sets(state, replica_sets, namespace, uid) {
        state.update_status(replica_sets, &rs_key, MANAGER, |rs| {
            Some(replica_set_status(rs, has_broken_image(rs)))
        })?;
    }

    // 5. The Deployment's status, from its ReplicaSets'.
    let all: Vec<Value> = owned_replica_sets(state, replica_sets, namespace, uid)
        .into_iter()
        .map(|(_, rs)| rs.value())
        .collect();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    state.update_status(deployments, key, MANAGER, |deployment| {
        let new_rs = all.iter().find(|rs| {
            new_rs.is_some() && rs.pointer("/metadata/name").and_then(Value::as_str) == new_rs
        });
        Some(deployment_status(deployment, new_rs, &all, &now))
    })
}

fn is_paused(deployment: &Value) -> bool {
    deployment.pointer("/spec/paused").and_then(Value::as_bool) == Some(true)
}

/// A paused Deployment's scaling (`FindActiveOrLatest`, then `scaleReplicaSet`): the
/// one ReplicaSet with replicas (or the newest) takes the Deployment's replica count.
fn scale_active(
    state: &State,
    replica_sets: &Arc<ResourceType>,
    deployment: &Value,
    owned: &[(ObjectKey, Arc<Stored>)],
) -> Result<(), ApiError> {
    let active: Vec<&(ObjectKey, Arc<Stored>)> = owned
        .iter()
        .filter(|(_, rs)| replicas_of(&rs.value()) > 0)
        .collect();
    let target = match active.as_slice() {
        [one] => Some(*one),
        [] => owned
            .iter()
            .max_by_key(|(_, rs)| revision_of(&rs.value()).unwrap_or(0)),
        // Proportional scaling of several active ReplicaSets is not simulated: the
        // sandbox never leaves more than one active.
        _ => None,
    };
    let Some((rs_key, rs)) = target else {
        return Ok(());
    };
    let mut value = rs.value();
    let (from, to) = (replicas_of(&value), replicas_of(deployment));
    if from == to {
        return Ok(());
    }
    value["spec"]["replicas"] = json!(to);
    state.write_as_controller(replica_sets, rs_key, Some(rs.clone()), value, MANAGER, None)?;
    scaled_event(state, deployment, &rs_key.1, from, to);
    Ok(())
}

/// The component name the Deployment controller records Events as.
const COMPONENT: &str = "deployment-controller";

/// `ScalingReplicaSet`, as `scaleReplicaSet` reports a change of a ReplicaSet's size.
fn scaled_event(state: &State, deployment: &Value, rs_name: &str, from: i64, to: i64) {
    let direction = if to > from { "up" } else { "down" };
    scaling_event(
        state,
        deployment,
        format!("Scaled {direction} replica set {rs_name} to {to} from {from}"),
    );
}

fn scaling_event(state: &State, deployment: &Value, message: String) {
    events::record(
        state,
        events::Record {
            object: deployment,
            event_type: events::EventType::Normal,
            reason: "ScalingReplicaSet",
            message,
            component: COMPONENT,
            manager: MANAGER,
        },
    );
}

/// What `ClaimReplicaSets` does: a ReplicaSet without a controller whose labels the
/// Deployment's selector matches (one orphaned by `kubectl delete --cascade=orphan`)
/// becomes the Deployment's.
fn adopt_orphans(
    state: &State,
    replica_sets: &Arc<ResourceType>,
    deployment: &Value,
    namespace: &str,
    uid: &str,
) -> Result<(), ApiError> {
    let selector = deployment
        .pointer("/spec/selector")
        .and_then(LabelSelector::from_object)
        .filter(|s| !s.is_empty());
    let Some(selector) = selector else {
        return Ok(());
    };
    let (_, items) = state.store.list(&replica_sets.key(), Some(namespace));
    for (rs_key, rs) in items {
        if !selector.matches(&rs.labels) {
            continue;
        }
        let mut value = rs.value();
        let has_controller = value
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| refs.iter().any(|r| r["controller"] == true));
        if has_controller || value.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let reference = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": deployment["metadata"]["name"],
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true,
        });
        match value["metadata"]["ownerReferences"].as_array_mut() {
            Some(refs) => refs.push(reference),
            None => value["metadata"]["ownerReferences"] = json!([reference]),
        }
        state.write_as_controller(replica_sets, &rs_key, Some(rs), value, MANAGER, None)?;
    }
    Ok(())
}

/// The ReplicaSets in `namespace` whose controller is the object with `uid`.
fn owned_replica_sets(
    state: &State,
    replica_sets: &ResourceType,
    namespace: &str,
    uid: &str,
) -> Vec<(ObjectKey, Arc<Stored>)> {
    let (_, items) = state.store.list(&replica_sets.key(), Some(namespace));
    items
        .into_iter()
        .filter(|(_, rs)| rs.owners.iter().any(|owner| owner == uid))
        .filter(|(_, rs)| {
            rs.value()
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r["uid"] == uid && r["controller"] == true)
                })
        })
        .collect()
}

#[cfg(test)]
mod tests;
