//! The ReplicaSet a Deployment's pod template makes (`getNewReplicaSet`): its name's
//! hash, its revision, the annotations it copies.

use serde_json::{Map, Value, json};

use super::status::{max_surge, replicas_of};
use super::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
};

pub(super) fn revision_of(object: &Value) -> Option<u64> {
    object
        .pointer("/metadata/annotations")?
        .get(REVISION_ANNOTATION)?
        .as_str()?
        .parse()
        .ok()
}

/// The ReplicaSet the Deployment wants for its current template
/// (`getNewReplicaSet`): all replicas, the revision, owned by the Deployment.
pub(super) fn new_replica_set(deployment: &Value, uid: &str, hash: &str, revision: u64) -> Value {
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
pub(super) fn copied_annotations(deployment: &Value) -> Map<String, Value> {
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
pub(super) fn updated_replica_set(existing: &Value, desired: &Value) -> Value {
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
pub(super) fn pod_template_hash(template: &Value, collision_count: Option<&Value>) -> String {
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
pub(super) fn write_sorted(value: &Value, out: &mut String) {
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
