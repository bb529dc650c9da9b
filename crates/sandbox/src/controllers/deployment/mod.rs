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

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::{MANAGER, events, has_broken_image};
use crate::api::State;
use crate::registry::ResourceType;
use crate::selector::LabelSelector;
use crate::status::ApiError;
use crate::store::{Event, EventType, ObjectKey, Stored};

/// The Deployment's and its ReplicaSets' revision (`deploymentutil.RevisionAnnotation`).
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// The label that ties a ReplicaSet and its pods to one pod template.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
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
pub async fn run(state: Arc<State>, shutdown: CancellationToken) {
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
    if !lock(&queue.pending).insert(key.clone()) {
        return;
    }
    let (state, queue) = (state.clone(), queue.clone());
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        lock(&queue.pending).remove(&key);
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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

fn revision_of(object: &Value) -> Option<u64> {
    object
        .pointer("/metadata/annotations")?
        .get(REVISION_ANNOTATION)?
        .as_str()?
        .parse()
        .ok()
}

/// The ReplicaSet the Deployment wants for its current template
/// (`getNewReplicaSet`): all replicas, the revision, owned by the Deployment.
fn new_replica_set(deployment: &Value, uid: &str, hash: &str, revision: u64) -> Value {
    let spec = &deployment["spec"];
    let replicas = replicas_of(deployment);
    let mut template = spec["template"].clone();
    template["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL] = hash.into();
    let mut selector = spec["selector"].clone();
    selector["matchLabels"][POD_TEMPLATE_HASH_LABEL] = hash.into();
    let name = deployment["metadata"]["name"].as_str().unwrap_or_default();
    let mut rs_spec = json!({
        "replicas": replicas,
        "selector": selector,
        "template": template,
    });
    if let Some(min_ready) = spec
        .get("minReadySeconds")
        .filter(|m| m.as_i64() != Some(0))
    {
        rs_spec["minReadySeconds"] = min_ready.clone();
    }
    let mut annotations = copied_annotations(deployment);
    annotations.insert(
        DESIRED_REPLICAS_ANNOTATION.into(),
        replicas.to_string().into(),
    );
    annotations.insert(
        MAX_REPLICAS_ANNOTATION.into(),
        (replicas + max_surge(deployment)).to_string().into(),
    );
    annotations.insert(REVISION_ANNOTATION.into(), revision.to_string().into());
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{name}-{hash}"),
            "namespace": deployment["metadata"]["namespace"],
            "labels": template["metadata"]["labels"],
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": name,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": rs_spec,
    })
}

/// The Deployment's annotations a ReplicaSet of it carries
/// (`copyDeploymentAnnotationsToReplicaSet`): all but the controller's own and
/// kubectl's last-applied configuration. `kubernetes.io/change-cause` is how `kubectl
/// rollout history` learns why a revision was made.
fn copied_annotations(deployment: &Value) -> Map<String, Value> {
    const SKIPPED: &[&str] = &[
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION_ANNOTATION,
        REVISION_HISTORY_ANNOTATION,
        DESIRED_REPLICAS_ANNOTATION,
        MAX_REPLICAS_ANNOTATION,
        "deprecated.deployment.rollback.to",
    ];
    deployment
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|annotations| {
            annotations
                .iter()
                .filter(|(key, _)| !SKIPPED.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// An existing ReplicaSet of the current template, given the replica count and the
/// annotations of `desired` (`SetNewReplicaSetAnnotations`): its revision only ever
/// grows, and a ReplicaSet that becomes current again (a rollback) keeps the revisions
/// it had in `deployment.kubernetes.io/revision-history`. The rest (its status, others'
/// fields) stays.
fn updated_replica_set(existing: &Value, desired: &Value) -> Value {
    let mut updated = existing.clone();
    updated["spec"]["replicas"] = desired["spec"]["replicas"].clone();
    let old_revision = revision_of(existing);
    let Some(annotations) = desired
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    else {
        return updated;
    };
    for (key, value) in annotations {
        if key != REVISION_ANNOTATION {
            updated["metadata"]["annotations"][key] = value.clone();
        }
    }
    let new_revision = revision_of(desired).unwrap_or(0);
    if old_revision.is_none_or(|old| old < new_revision) {
        updated["metadata"]["annotations"][REVISION_ANNOTATION] = new_revision.to_string().into();
    }
    if let Some(old) = old_revision.filter(|old| *old < new_revision) {
        let history = existing
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(REVISION_HISTORY_ANNOTATION))
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty());
        let history = match history {
            Some(history) => format!("{history},{old}"),
            None => old.to_string(),
        };
        updated["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION] = history.into();
    }
    updated
}

/// The `pod-template-hash` of a pod template: FNV-32a of the template (and the
/// collision count, when there is one), written as `rand.SafeEncodeString` writes the
/// decimal number, as `controller.ComputeHash` does. The real hash prints the Go
/// struct; this one hashes the JSON with sorted keys, so the names differ from a real
/// cluster's but change exactly when the template does.
pub fn pod_template_hash(template: &Value, collision_count: Option<&Value>) -> String {
    const FNV_OFFSET: u32 = 0x811c_9dc5;
    const FNV_PRIME: u32 = 0x0100_0193;
    let mut text = String::new();
    write_sorted(template, &mut text);
    if let Some(count) = collision_count.and_then(Value::as_i64) {
        text.push_str(&count.to_string());
    }
    let hash = text.bytes().fold(FNV_OFFSET, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(FNV_PRIME)
    });
    // `rand.SafeEncodeString`: no vowels, no 0, 1 or 3, so a hash never spells a word.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// JSON with object keys sorted, whatever order the object holds them in.
fn write_sorted(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                write_sorted(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn replicas_of(object: &Value) -> i64 {
    object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// `maxSurge` and `maxUnavailable` resolved against the replica count
/// (`deploymentutil.ResolveFenceposts`): surge rounds up, unavailability down, and both
/// zero means one may be unavailable. A Recreate Deployment has neither.
fn fenceposts(deployment: &Value) -> (i64, i64) {
    let replicas = replicas_of(deployment);
    if deployment
        .pointer("/spec/strategy/type")
        .and_then(Value::as_str)
        == Some("Recreate")
    {
        return (0, 0);
    }
    let rolling = deployment.pointer("/spec/strategy/rollingUpdate");
    let field = |name: &str| {
        rolling
            .and_then(|r| r.get(name))
            .cloned()
            .unwrap_or(json!("25%"))
    };
    let surge = scaled(&field("maxSurge"), replicas, true);
    let unavailable = scaled(&field("maxUnavailable"), replicas, false);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn max_surge(deployment: &Value) -> i64 {
    fenceposts(deployment).0
}

/// `deploymentutil.MaxUnavailable`: never more than the replicas.
fn max_unavailable(deployment: &Value) -> i64 {
    let replicas = replicas_of(deployment);
    if replicas == 0 {
        return 0;
    }
    fenceposts(deployment).1.min(replicas)
}

/// An int-or-percent against `total` (`intstr.GetScaledValueFromIntOrPercent`).
fn scaled(value: &Value, total: i64, round_up: bool) -> i64 {
    if let Some(n) = value.as_i64() {
        return n;
    }
    let Some(percent) = value
        .as_str()
        .and_then(|s| s.strip_suffix('%'))
        .and_then(|p| p.parse::<i64>().ok())
    else {
        return 0;
    };
    let product = percent * total;
    if round_up {
        (product + 99).div_euclid(100)
    } else {
        product.div_euclid(100)
    }
}

/// What the ReplicaSet controller reports: once it has seen this generation and made
/// the pods, they are ready (unless the image is broken); until then, made but not
/// ready. A ReplicaSet scaled to 0 is settled at once.
fn replica_set_status(rs: &Value, broken: bool) -> Value {
    let replicas = replicas_of(rs);
    let generation = rs
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let current = |field: &str| {
        rs.pointer(&format!("/status/{field}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let settled = replicas == 0
        || (current("replicas") == replicas
            && rs.pointer("/status/observedGeneration") == Some(&generation));
    let ready = match (settled, broken) {
        (true, true) => 0,
        (true, false) => replicas,
        (false, _) => current("readyReplicas").min(replicas),
    };
    let mut status = Map::new();
    status.insert("replicas".into(), replicas.into());
    insert_nonzero(&mut status, "fullyLabeledReplicas", replicas);
    insert_nonzero(&mut status, "readyReplicas", ready);
    insert_nonzero(&mut status, "availableReplicas", ready);
    status.insert("observedGeneration".into(), generation);
    Value::Object(status)
}

/// The Deployment's status from its ReplicaSets' (`calculateStatus` and
/// `syncRolloutStatus`): counts left out when zero, as Go's `omitempty` leaves them.
fn deployment_status(
    deployment: &Value,
    new_rs: Option<&Value>,
    all: &[Value],
    now: &str,
) -> Value {
    let replicas = replicas_of(deployment);
    let sum = |path: &str| -> i64 {
        all.iter()
            .map(|rs| rs.pointer(path).and_then(Value::as_i64).unwrap_or(0))
            .sum()
    };
    let actual = sum("/status/replicas");
    let ready = sum("/status/readyReplicas");
    let available = sum("/status/availableReplicas");
    let unavailable = (sum("/spec/replicas") - available).max(0);
    let updated = new_rs
        .and_then(|rs| rs.pointer("/status/replicas"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let rs_name = new_rs
        .and_then(|rs| rs.pointer("/metadata/name"))
        .and_then(Value::as_str)
        .unwrap_or_default();

    let available_condition = if available >= replicas - max_unavailable(deployment) {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".to_string(),
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".to_string(),
        )
    };
    let complete = updated == replicas && actual == replicas && available == replicas;
    let progressing_condition = if is_paused(deployment) {
        // `checkPausedConditions`.
        (
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".to_string(),
        )
    } else if complete {
        (
            "True",
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
        )
    } else if new_rs.is_some_and(has_broken_image) {
        (
            "False",
            "ProgressDeadlineExceeded",
            format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
        )
    } else {
        (
            "True",
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{rs_name}\" is progressing."),
        )
    };

    let current = deployment.pointer("/status/conditions");
    let mut status = Map::new();
    status.insert(
        "observedGeneration".into(),
        deployment
            .pointer("/metadata/generation")
            .cloned()
            .unwrap_or(json!(1)),
    );
    insert_nonzero(&mut status, "replicas", actual);
    insert_nonzero(&mut status, "updatedReplicas", updated);
    insert_nonzero(&mut status, "readyReplicas", ready);
    insert_nonzero(&mut status, "availableReplicas", available);
    insert_nonzero(&mut status, "unavailableReplicas", unavailable);
    let conditions = [
        ("Available", available_condition),
        ("Progressing", progressing_condition),
    ]
    .into_iter()
    .map(|(kind, (state, reason, message))| condition(current, kind, state, reason, &message, now))
    .collect::<Vec<_>>();
    status.insert("conditions".into(), Value::Array(conditions));
    if let Some(collisions) = deployment.pointer("/status/collisionCount") {
        status.insert("collisionCount".into(), collisions.clone());
    }
    Value::Object(status)
}

fn insert_nonzero(status: &mut Map<String, Value>, field: &str, value: i64) {
    if value != 0 {
        status.insert(field.into(), value.into());
    }
}

/// A condition as `SetDeploymentCondition` keeps it: unchanged when status, reason and
/// message are; a new `lastUpdateTime` otherwise, and a new `lastTransitionTime` only
/// when the status flips.
fn condition(
    current: Option<&Value>,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) -> Value {
    let previous = current
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == kind));
    if let Some(previous) = previous {
        if previous["status"] == status
            && previous["reason"] == reason
            && previous["message"] == message
        {
            return previous.clone();
        }
    }
    let transition = previous
        .filter(|p| p["status"] == status)
        .and_then(|p| p.get("lastTransitionTime"))
        .cloned()
        .unwrap_or_else(|| now.into());
    json!({
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    })
}

#[cfg(test)]
mod tests;
