//! The scale subresource of Deployments, StatefulSets and ReplicaSets.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::commit::Write;
use super::{Reply, Request, State, Target, field_manager, is_dry_run};
use crate::status::ApiError;
use crate::store::Stored;

impl State {
    /// Writes through the scale subresource: only `spec.replicas` changes.
    pub(super) fn write_scale(
        &self,
        target: &Target,
        request: &Request,
        stored: &Arc<Stored>,
        scale: Value,
    ) -> Result<Reply, ApiError> {
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .ok_or_else(|| ApiError::BadRequest("spec.replicas is required in a Scale".into()))?;
        let mut object = stored.value();
        object["spec"]["replicas"] = replicas.into();
        let mut write = Write::new(
            target.resource.clone(),
            target.key(),
            Some(stored.clone()),
            object,
            &field_manager(request),
        );
        write.dry_run = is_dry_run(&request.query);
        let (_, written) = self.commit(write)?;
        Ok(Reply::ok(scale_of(&written)))
    }
}

/// The `Scale` of a Deployment, StatefulSet or ReplicaSet.
pub(super) fn scale_of(object: &Value) -> Value {
    let selector = object
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let metadata = &object["metadata"];
    let mut scale_metadata = Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = metadata.get(field) {
            scale_metadata.insert(field.into(), value.clone());
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_metadata,
        "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}
