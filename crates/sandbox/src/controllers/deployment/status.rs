//! Replica arithmetic (surge, unavailability, proportional scaling) and the statuses
//! the ReplicaSet and Deployment controllers write.

use serde_json::{Map, Value, json};

use super::is_paused;
use crate::controllers::has_broken_image;

pub(super) fn replicas_of(object: &Value) -> i64 {
    object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// `maxSurge` and `maxUnavailable` resolved against the replica count
/// (`deploymentutil.ResolveFenceposts`): surge rounds up, unavailability down, and both
/// zero means one may be unavailable. A Recreate Deployment has neither.
pub(super) fn fenceposts(deployment: &Value) -> (i64, i64) {
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

pub(super) fn max_surge(deployment: &Value) -> i64 {
    fenceposts(deployment).0
}

/// `deploymentutil.MaxUnavailable`: never more than the replicas.
pub(super) fn max_unavailable(deployment: &Value) -> i64 {
    let replicas = replicas_of(deployment);
    if replicas == 0 {
        return 0;
    }
    fenceposts(deployment).1.min(replicas)
}

/// An int-or-percent against `total` (`intstr.GetScaledValueFromIntOrPercent`).
pub(super) fn scaled(value: &Value, total: i64, round_up: bool) -> i64 {
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
pub(super) fn replica_set_status(rs: &Value, broken: bool) -> Value {
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
pub(super) fn deployment_status(
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

pub(super) fn insert_nonzero(status: &mut Map<String, Value>, field: &str, value: i64) {
    if value != 0 {
        status.insert(field.into(), value.into());
    }
}

/// A condition as `SetDeploymentCondition` keeps it: unchanged when status, reason and
/// message are; a new `lastUpdateTime` otherwise, and a new `lastTransitionTime` only
/// when the status flips.
pub(super) fn condition(
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
