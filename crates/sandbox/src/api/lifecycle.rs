//! Deletion: finalizers, propagation policies, the garbage collector's cascade and
//! the namespace controller, done at once as the sandbox has no controller manager.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};

use super::commit::conflict;
use super::read::Filter;
use super::write::parse_json;
use super::{Reply, Request, State, Target, is_dry_run, now};
use crate::conversion;
use crate::registry::ResourceType;
use crate::status::{self, ApiError};
use crate::store::{ObjectKey, Stored};

/// The field manager the garbage collector writes as (it runs in kube-controller-manager).
const GARBAGE_COLLECTOR: &str = "kube-controller-manager";

impl State {
    pub(super) fn delete(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let stored = self.stored(target)?;
        let options: Value = if request.body.is_empty() {
            json!({})
        } else {
            parse_json(&request.body)?
        };
        let policy = request
            .query
            .get("propagationPolicy")
            .cloned()
            .or_else(|| options["propagationPolicy"].as_str().map(str::to_string));
        let dry_run = is_dry_run(&request.query)
            || options["dryRun"].as_array().is_some_and(|d| !d.is_empty());
        if let Some(uid) = options
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
        {
            if uid != stored.uid {
                return Err(conflict(
                    &target.resource,
                    target.name.as_deref().unwrap_or_default(),
                ));
            }
        }
        self.delete_object(
            &target.resource,
            &target.key(),
            stored,
            policy.as_deref(),
            dry_run,
        )
        .map(|(code, value)| Reply::Json(code, conversion::answer(&target.resource, value)))
    }

    /// Deletes one object: at once, or by marking it with a deletionTimestamp while
    /// finalizers hold it.
    pub(super) fn delete_object(
        &self,
        resource: &Arc<ResourceType>,
        key: &ObjectKey,
        stored: Arc<Stored>,
        policy: Option<&str>,
        dry_run: bool,
    ) -> Result<(StatusCode, Value), ApiError> {
        let mut object = stored.value();
        let already_deleting = object.pointer("/metadata/deletionTimestamp").is_some();
        let mut finalizers = finalizers_of(&object);
        if already_deleting {
            return Ok((StatusCode::OK, object));
        }
        match policy {
            Some("Foreground") => finalizers.push("foregroundDeletion".into()),
            Some("Orphan") => finalizers.push("orphan".into()),
            _ => {}
        }
        let is_namespace = resource.is("", "Namespace");
        if finalizers.is_empty() && !is_namespace {
            if !dry_run {
                self.store
                    .remove(&resource.key(), key, stored.resource_version)
                    .map_err(|_| conflict(resource, &key.1))?;
                self.after_delete(
                    resource,
                    &object,
                    Some("Background") == policy || policy.is_none(),
                );
            }
            return Ok((
                StatusCode::OK,
                status::deleted(&resource.plural, &key.1, &stored.uid),
            ));
        }
        let metadata = object["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::Internal("stored object without metadata".into()))?;
        metadata.insert("deletionTimestamp".into(), now().into());
        metadata.insert("deletionGracePeriodSeconds".into(), 0.into());
        // kube-apiserver's markAsDeleting bumps the generation of an object that
        // tracks one (recorded in the fixtures' delete/delete-with-propagation: 6 → 7).
        if let Some(generation) = metadata.get("generation").and_then(Value::as_i64) {
            if generation > 0 {
                metadata.insert("generation".into(), (generation + 1).into());
            }
        }
        if !finalizers.is_empty() {
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        if is_namespace {
            object["status"]["phase"] = "Terminating".into();
        }
        if dry_run {
            return Ok((StatusCode::OK, object));
        }
        let mut marked = object.clone();
        self.store
            .put(
                &resource.key(),
                key,
                Some(stored.resource_version),
                &mut marked,
            )
            .map_err(|_| conflict(resource, &key.1))?;
        // What the garbage collector and the namespace controller do next, at once: the
        // sandbox has no dependents waiting on foreground deletion beyond those it
        // deletes here, and a namespace's content goes with it.
        if is_namespace {
            self.finish_namespace(&key.1);
        } else {
            self.finish_gc_finalizers(resource, key, &marked);
        }
        Ok((StatusCode::OK, marked))
    }

    /// After an object is gone: cascade to its dependents, and stop serving a CRD's
    /// resources when the CRD goes.
    pub(super) fn after_delete(&self, resource: &Arc<ResourceType>, object: &Value, cascade: bool) {
        self.defaulter.release(object, None);
        let uid = object
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if cascade && !uid.is_empty() {
            for (dep_resource, dep_key) in self.store.dependents(uid) {
                let dep_type = self
                    .registry()
                    .all_types()
                    .into_iter()
                    .find(|t| t.key() == dep_resource);
                let (Some(dep_type), Some(dep)) =
                    (dep_type, self.store.get(&dep_resource, &dep_key))
                else {
                    continue;
                };
                let _ = self.delete_object(&dep_type, &dep_key, dep, Some("Background"), false);
            }
        }
        if resource.is("apiextensions.k8s.io", "CustomResourceDefinition") {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if let Some(removed) = self.registry_mut().remove_custom(name) {
                if let Some(first) = removed.types.first() {
                    self.store.drop_resource(&first.key());
                }
            }
        }
    }

    /// Completes `foregroundDeletion` and `orphan`: deletes (or orphans) dependents, then
    /// removes the finalizer, which deletes the object when no other finalizer holds it.
    pub(super) fn finish_gc_finalizers(
        &self,
        resource: &Arc<ResourceType>,
        key: &ObjectKey,
        object: &Value,
    ) {
        let finalizers = finalizers_of(object);
        if !finalizers
            .iter()
            .any(|f| f == "foregroundDeletion" || f == "orphan")
        {
            return;
        }
        if finalizers.iter().any(|f| f == "foregroundDeletion") {
            self.after_delete(resource, object, true);
        }
        if finalizers.iter().any(|f| f == "orphan") {
            self.orphan_dependents(object);
        }
        let remaining: Vec<&String> = finalizers
            .iter()
            .filter(|f| *f != "foregroundDeletion" && *f != "orphan")
            .collect();
        let Some(stored) = self.store.get(&resource.key(), key) else {
            return;
        };
        if remaining.is_empty() {
            if self
                .store
                .remove(&resource.key(), key, stored.resource_version)
                .is_ok()
            {
                self.after_delete(resource, object, false);
            }
        } else {
            let mut object = stored.value();
            object["metadata"]["finalizers"] = json!(remaining);
            let _ = self.store.put(
                &resource.key(),
                key,
                Some(stored.resource_version),
                &mut object,
            );
        }
    }

    /// What the garbage collector's `orphanDependents` does: removes the owner's
    /// reference from each dependent (as kube-controller-manager), so they outlive it
    /// and a new owner may adopt them.
    fn orphan_dependents(&self, owner: &Value) {
        let Some(uid) = owner.pointer("/metadata/uid").and_then(Value::as_str) else {
            return;
        };
        let types = self.registry().all_types();
        for (dep_resource, dep_key) in self.store.dependents(uid) {
            let (Some(dep_type), Some(dep)) = (
                types.iter().find(|t| t.key() == dep_resource),
                self.store.get(&dep_resource, &dep_key),
            ) else {
                continue;
            };
            let mut value = dep.value();
            let Some(metadata) = value["metadata"].as_object_mut() else {
                continue;
            };
            let kept: Vec<Value> = metadata
                .get("ownerReferences")
                .and_then(Value::as_array)
                .map(|refs| refs.iter().filter(|r| r["uid"] != uid).cloned().collect())
                .unwrap_or_default();
            if kept.is_empty() {
                metadata.remove("ownerReferences");
            } else {
                metadata.insert("ownerReferences".into(), kept.into());
            }
            if let Err(err) = self.write_as_controller(
                dep_type,
                &dep_key,
                Some(dep),
                value,
                GARBAGE_COLLECTOR,
                None,
            ) {
                tracing::debug!(name = %dep_key.1, error = %err, "cannot orphan a dependent");
            }
        }
    }

    /// What the namespace controller does: delete everything in the namespace, then the
    /// namespace itself.
    pub(super) fn finish_namespace(&self, namespace: &str) {
        let types = self.registry().all_types();
        for (resource, key) in self.store.keys_in_namespace(namespace) {
            let Some(resource_type) = types.iter().find(|t| t.key() == resource) else {
                continue;
            };
            if let Some(stored) = self.store.get(&resource, &key) {
                let _ = self.delete_object(resource_type, &key, stored, Some("Background"), false);
                // Objects held by their own finalizers stay until those are removed, as in
                // a real cluster; the namespace goes regardless.
            }
        }
        let Some(namespaces) = types.iter().find(|t| t.is("", "Namespace")).cloned() else {
            return;
        };
        let key = (String::new(), namespace.to_string());
        if let Some(stored) = self.store.get(&namespaces.key(), &key) {
            let _ = self
                .store
                .remove(&namespaces.key(), &key, stored.resource_version);
        }
    }

    pub(super) fn delete_collection(
        &self,
        target: &Target,
        request: &Request,
    ) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(&target.resource, &request.query)?;
        let dry_run = is_dry_run(&request.query);
        let (rv, items) = self
            .store
            .list(&target.resource.key(), target.namespace.as_deref());
        let mut deleted = Vec::new();
        for (key, stored) in items.into_iter().filter(|(k, s)| filter.matches(k, s)) {
            let value = stored.value();
            self.delete_object(&target.resource, &key, stored, None, dry_run)?;
            deleted.push(conversion::answer(&target.resource, value));
        }
        Ok(Reply::ok(json!({
            "kind": target.resource.list_kind(),
            "apiVersion": target.resource.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": deleted,
        })))
    }
}

/// The finalizers an object names.
fn finalizers_of(object: &Value) -> Vec<String> {
    crate::strings(object.pointer("/metadata/finalizers"))
}
