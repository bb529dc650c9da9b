//! Version conversion: a kind served in a version other than the one it is stored in is
//! converted on every read and write, as kube-apiserver converts through its internal
//! type. autoscaling/v1 HorizontalPodAutoscalers are stored as autoscaling/v2, and
//! events.k8s.io/v1 Events are core/v1 Events (one etcd prefix, renamed fields).
//!
//! What v1 cannot say of a v2 HPA (other metrics, behavior, conditions, every current
//! metric) travels in the annotations kube-apiserver uses for it, so a read-modify-write
//! through v1 loses nothing; a write in any version drops those annotations before the
//! object is stored (`pkg/apis/autoscaling/v1/conversion.go`, `v2/conversion.go`).
//! Events map field for field (`pkg/apis/events/v1/conversion.go`). Both directions
//! write fields as Go's JSON encoder writes the versioned types: zero structs as `{}`,
//! zero times as `null`, and the order of the struct's fields.

use serde_json::Value;

use super::registry::{ResourceType, storage_version};

mod event;
mod hpa;

pub(crate) use event::{event_to_core, event_to_events};
use hpa::drop_round_trip_annotations;
pub(crate) use hpa::{hpa_v1_to_v2, hpa_v2_to_v1};

/// Whether objects of `resource` are served as stored.
pub(crate) fn served_as_stored(resource: &ResourceType) -> bool {
    storage_version(&resource.group, &resource.version, &resource.kind).is_none()
}

/// A stored object as a write or delete answers it in `resource`'s version; a `Status`
/// stays as it is.
pub(crate) fn answer(resource: &ResourceType, value: Value) -> Value {
    if served_as_stored(resource) || value["kind"] != resource.kind.as_str() {
        return value;
    }
    to_served(resource, value)
}

fn group_version_kind(resource: &ResourceType) -> (&str, &str, &str) {
    (&resource.group, &resource.version, &resource.kind)
}

/// An object as written in `resource`'s version, in its storage version.
pub(crate) fn to_storage(resource: &ResourceType, object: Value) -> Value {
    match group_version_kind(resource) {
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => hpa_v1_to_v2(object),
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => {
            let mut object = object;
            drop_round_trip_annotations(&mut object);
            object
        }
        ("events.k8s.io", "v1", "Event") => event_to_core(object),
        _ => object,
    }
}

/// A stored object as served in `resource`'s version.
pub(crate) fn to_served(resource: &ResourceType, object: Value) -> Value {
    match group_version_kind(resource) {
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => hpa_v2_to_v1(object),
        ("events.k8s.io", "v1", "Event") => event_to_events(object),
        _ => object,
    }
}

#[cfg(test)]
mod tests;
