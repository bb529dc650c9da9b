//! The write pipeline every change goes through, in the order kube-apiserver applies
//! it: server-owned metadata, status/spec split, default, validate, track field
//! ownership, bump generation, store.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{Map, Value, json};

use super::{
    FieldValidation, Request, State, Target, Warnings, field_manager, field_validation, is_dry_run,
    now,
};
use crate::conversion;
use crate::defaults;
use crate::fields::{self, UpdateOptions};
use crate::registry::{self, ResourceType};
use crate::status::{ApiError, Cause};
use crate::store::{ObjectKey, PutError, Stored};
use crate::validate;
use tether_schema::{Schema, Schemas, Validation};

impl State {
    /// Sets the object's namespace from the URL; refuses a different one in the body,
    /// and a namespace that does not exist.
    pub(super) fn place(&self, target: &Target, object: &mut Value) -> Result<String, ApiError> {
        let resource = &target.resource;
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        let metadata = object["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::BadRequest("metadata must be an object".into()))?;
        if !resource.namespaced {
            metadata.remove("namespace");
            return Ok(String::new());
        }
        let namespace = target.namespace.clone().unwrap_or_default();
        match metadata.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            _ => {
                metadata.insert("namespace".into(), namespace.clone().into());
            }
        }
        Ok(namespace)
    }

    pub(super) fn require_namespace(
        &self,
        resource: &ResourceType,
        namespace: &str,
    ) -> Result<(), ApiError> {
        if !resource.namespaced {
            return Ok(());
        }
        let key = crate::store::ResourceKey {
            group: String::new(),
            resource: "namespaces".into(),
        };
        match self
            .store
            .get(&key, &(String::new(), namespace.to_string()))
        {
            None => Err(ApiError::not_found("namespaces", namespace)),
            Some(ns) if ns.value().pointer("/metadata/deletionTimestamp").is_some() => {
                Err(ApiError::Forbidden(format!(
                    "{} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                    resource.plural
                )))
            }
            Some(_) => Ok(()),
        }
    }

    pub(super) fn schema_of(&self, resource: &ResourceType) -> Schema {
        if resource.custom {
            let registry = self.registry();
            return registry
                .custom_schema(&resource.group, &resource.version, &resource.kind)
                .map(Schema::from_openapi_v3)
                .unwrap_or_else(Schema::untyped);
        }
        Schemas::builtin()
            .get(&resource.group, &resource.version, &resource.kind)
            .unwrap_or_else(Schema::untyped)
    }

    /// The write pipeline shared by create, update, patch and apply, one named step per
    /// stage kube-apiserver runs.
    pub(super) fn commit(&self, mut write: Write) -> Result<(StatusCode, Value), ApiError> {
        // A kind served in a version it is not stored in goes through the pipeline in
        // its storage version, and is answered in the version it was written in.
        if let Some(storage) = self.storage_type(&write.resource) {
            if write.old.is_none() && write.resource.is("events.k8s.io", "Event") {
                let errors = validate::events::validate_create(&write.new);
                if !errors.is_empty() {
                    let name = write.key.1.clone();
                    return Err(ApiError::Invalid {
                        message: validate::invalid_message("Event.events.k8s.io", &name, &errors),
                        group: write.resource.group.clone(),
                        kind: write.resource.kind.clone(),
                        name,
                        causes: errors.iter().map(cause).collect(),
                    });
                }
            }
            let served = std::mem::replace(&mut write.resource, storage);
            let new = std::mem::take(&mut write.new);
            write.new = conversion::to_storage(&served, new);
            write.written_as = Some(served.clone());
            return self
                .commit(write)
                .map(|(code, value)| (code, conversion::answer(&served, value)));
        }
        let Write {
            resource,
            key,
            old,
            new,
            manager,
            ownership_tracked,
            dry_run,
            field_validation,
            patched,
            warnings,
            subresource,
            written_as,
        } = write;
        let old_value = old.as_ref().map(|s| s.value());
        let schema = self.schema_of(&resource);
        let mut new = conversion::to_storage(&resource, new);

        if old.is_none() {
            self.require_namespace(&resource, &key.0)?;
        }
        set_type(&resource, &mut new);
        set_server_metadata(&mut new, old_value.as_ref())?;
        if resource.has_status {
            split_status(
                &resource,
                subresource.as_deref(),
                &mut new,
                old_value.as_ref(),
            );
        }
        let checked = schema.validate(&new);
        if !checked.unknown_fields.is_empty() {
            let refused =
                undeclared_fields(&resource, &checked, field_validation, patched, &warnings);
            if let Some(refused) = refused {
                return Err(refused);
            }
            // A custom resource is pruned with its defaults; a built-in kind's object
            // drops what it cannot decode.
            if !resource.custom {
                schema.prune_undeclared(&mut new);
            }
        }
        self.apply_defaults(&resource, &mut new, old_value.as_ref());
        self.check_valid(&resource, &checked, &key.1, &new, old_value.as_ref())?;
        match (&written_as, ownership_tracked) {
            (_, true) => {}
            (Some(served), false) => {
                let old_served = old_value
                    .as_ref()
                    .map(|old| conversion::to_served(served, old.clone()));
                let mut new_served = conversion::to_served(served, new.clone());
                record_ownership(
                    served,
                    &self.schema_of(served),
                    &manager,
                    subresource.as_deref(),
                    old_served.as_ref(),
                    &mut new_served,
                );
                new["metadata"]["managedFields"] = new_served["metadata"]["managedFields"].take();
            }
            (None, false) => record_ownership(
                &resource,
                &schema,
                &manager,
                subresource.as_deref(),
                old_value.as_ref(),
                &mut new,
            ),
        }
        set_generation(&resource, &mut new, old_value.as_ref());
        order_object(&mut new);

        match (old, old_value) {
            (Some(old), Some(old_value)) => {
                self.store_update(&resource, &key, &old, &old_value, new, dry_run)
            }
            _ => self.store_created(&resource, &key, new, dry_run),
        }
    }

    /// The type a kind is stored as, when it is served in another version.
    fn storage_type(&self, resource: &ResourceType) -> Option<Arc<ResourceType>> {
        let (group, version) =
            registry::storage_version(&resource.group, &resource.version, &resource.kind)?;
        self.registry().by_kind(group, version, &resource.kind)
    }

    /// Defaults as the real server does: a custom resource is pruned to its CRD's
    /// structural schema and then defaulted from it; a built-in kind gets its kind's
    /// defaults (and Service allocations).
    fn apply_defaults(&self, resource: &ResourceType, new: &mut Value, old: Option<&Value>) {
        if !resource.custom {
            self.defaulter
                .default_object(&resource.group, &resource.kind, new, old);
            return;
        }
        let registry = self.registry();
        if let Some(schema) =
            registry.custom_schema(&resource.group, &resource.version, &resource.kind)
        {
            defaults::prune_custom_resource(schema, new);
            defaults::default_custom_resource(schema, new);
        }
    }

    /// Validation of the kind, of the update against the stored object, and of values
    /// against the schema: field types of a built-in kind (`checked`, before defaults),
    /// a custom resource against its CRD's structural schema and CEL rules. A refused
    /// write gives back what defaulting allocated for it.
    fn check_valid(
        &self,
        resource: &ResourceType,
        checked: &Validation,
        name: &str,
        new: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let mut errors =
            validate::validate(&resource.group, &resource.kind, new, resource.namespaced);
        if let Some(old) = old {
            errors.extend(validate::validate_update(
                &resource.group,
                &resource.kind,
                old,
                new,
            ));
        }
        if !resource.custom {
            errors.extend(checked.type_errors.iter().map(|e| validate::FieldError {
                field: e.field.clone(),
                reason: validate::FieldErrorReason::Invalid,
                message: e.message(),
            }));
        } else if let Some(custom) =
            self.registry()
                .custom_schema(&resource.group, &resource.version, &resource.kind)
        {
            validate::custom::validate(custom, new, &mut errors);
        }
        if !errors.is_empty() {
            self.defaulter.release(new, old);
            let kind = validate::qualified_kind(&resource.group, &resource.kind);
            return Err(ApiError::Invalid {
                message: validate::invalid_message(&kind, name, &errors),
                group: resource.group.clone(),
                kind: resource.kind.clone(),
                name: name.to_string(),
                causes: errors.iter().map(cause).collect(),
            });
        }
        Ok(())
    }

    /// Stores a new object (nothing on a dry run).
    fn store_created(
        &self,
        resource: &Arc<ResourceType>,
        key: &ObjectKey,
        mut new: Value,
        dry_run: bool,
    ) -> Result<(StatusCode, Value), ApiError> {
        if dry_run {
            self.defaulter.release(&new, None);
            return Ok((StatusCode::CREATED, new));
        }
        let stored = self
            .store
            .put(&resource.key(), key, None, &mut new)
            .map_err(|_| {
                self.defaulter.release(&new, None);
                ApiError::AlreadyExists {
                    plural: resource.plural.clone(),
                    name: key.1.clone(),
                }
            })?;
        self.after_write(resource, key, &stored);
        Ok((StatusCode::CREATED, new))
    }

    /// Stores a changed object over the version it was computed from: a write of what is
    /// already there changes nothing, not even the resourceVersion; an object being
    /// deleted goes once its last finalizer is removed.
    fn store_update(
        &self,
        resource: &Arc<ResourceType>,
        key: &ObjectKey,
        old: &Stored,
        old_value: &Value,
        mut new: Value,
        dry_run: bool,
    ) -> Result<(StatusCode, Value), ApiError> {
        let name = &key.1;
        if same_ignoring_timestamps(old_value, &new) {
            return Ok((StatusCode::OK, old_value.clone()));
        }
        new["metadata"]["resourceVersion"] = old.resource_version.to_string().into();
        if dry_run {
            self.defaulter.release(&new, Some(old_value));
            return Ok((StatusCode::OK, new));
        }
        let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
        let no_finalizers = new
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|f| f.is_empty());
        if deleting && no_finalizers {
            if let Some(metadata) = new["metadata"].as_object_mut() {
                metadata.remove("finalizers");
            }
            self.store
                .remove(&resource.key(), key, old.resource_version)
                .map_err(|_| conflict(resource, name))?;
            self.after_delete(resource, &new, true);
            return Ok((StatusCode::OK, new));
        }
        let stored = self
            .store
            .put(&resource.key(), key, Some(old.resource_version), &mut new)
            .map_err(|err| {
                self.defaulter.release(&new, Some(old_value));
                match err {
                    PutError::Gone => ApiError::not_found(&resource.plural, name),
                    _ => conflict(resource, name),
                }
            })?;
        // Addresses and ports the old object held and the new one does not are free.
        self.defaulter.release(old_value, Some(&new));
        self.after_write(resource, key, &stored);
        Ok((StatusCode::OK, new))
    }

    /// Writes `object` as an in-cluster controller does: an `Update` by `manager` through
    /// the same pipeline as a client's write, so the resourceVersion moves and
    /// managedFields record it. `old` is the stored version the object was computed from
    /// (a conflict if it changed since), None to create it; `subresource` is `status`
    /// for a status write. Writing what is already there changes nothing.
    pub(crate) fn write_as_controller(
        &self,
        resource: &Arc<ResourceType>,
        key: &ObjectKey,
        old: Option<Arc<Stored>>,
        object: Value,
        manager: &str,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        let mut write = Write::new(resource.clone(), key.clone(), old, object, manager);
        write.subresource = subresource.map(str::to_string);
        self.commit(write).map(|(_, written)| written)
    }

    /// Writes an object's status as a controller does, through the status subresource.
    /// `compute` sees the current object and returns the status it should have, or
    /// None to leave it alone; nothing is written when the status is already right.
    pub(crate) fn update_status(
        &self,
        resource: &Arc<ResourceType>,
        key: &ObjectKey,
        manager: &str,
        compute: impl FnOnce(&Value) -> Option<Value>,
    ) -> Result<(), ApiError> {
        let Some(stored) = self.store.get(&resource.key(), key) else {
            return Ok(());
        };
        let mut object = stored.value();
        let Some(status) = compute(&object) else {
            return Ok(());
        };
        if object.get("status") == Some(&status) {
            return Ok(());
        }
        object["status"] = status;
        self.write_as_controller(resource, key, Some(stored), object, manager, Some("status"))
            .map(|_| ())
    }

    /// What controllers that are part of the API server do right after a write: a CRD
    /// becomes Established and its resources are served.
    pub(super) fn after_write(
        &self,
        resource: &ResourceType,
        key: &ObjectKey,
        stored: &Arc<Stored>,
    ) {
        if !resource.is("apiextensions.k8s.io", "CustomResourceDefinition") {
            return;
        }
        let mut crd = stored.value();
        let Some(custom) = registry::custom_resource_of(&crd) else {
            return;
        };
        self.registry_mut().add_custom(&key.1, custom);
        let established = crd
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
        if established {
            return;
        }
        crd["status"] = defaults::crd_established_status(&crd, &now());
        let _ = self.store.put(
            &resource.key(),
            key,
            Some(stored.resource_version),
            &mut crd,
        );
    }
}

/// Server-owned metadata is the server's, whatever the request says: kept from the
/// stored object on update, set (uid, creationTimestamp) on create.
fn set_server_metadata(new: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
    let metadata = new["metadata"]
        .as_object_mut()
        .ok_or_else(|| ApiError::BadRequest("metadata must be an object".into()))?;
    metadata.remove("resourceVersion");
    match old {
        Some(old) => {
            for field in [
                "uid",
                "creationTimestamp",
                "generation",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ] {
                match old["metadata"].get(field) {
                    Some(value) => metadata.insert(field.into(), value.clone()),
                    None => metadata.remove(field),
                };
            }
        }
        None => {
            metadata.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
            metadata.insert("creationTimestamp".into(), now().into());
            for field in [
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                metadata.remove(field);
            }
        }
    }
    Ok(())
}

/// Status and spec each have their own endpoint where a status subresource exists: a
/// write to `status` keeps everything else stored, a write to the object keeps the
/// stored status, and a created object starts from its kind's initial status.
fn split_status(
    resource: &ResourceType,
    subresource: Option<&str>,
    new: &mut Value,
    old: Option<&Value>,
) {
    match (subresource, old) {
        (Some("status"), Some(old)) => {
            let status = new.get("status").cloned();
            let mut kept = old.clone();
            match status {
                Some(status) => kept["status"] = status,
                None => {
                    if let Some(o) = kept.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
            kept["metadata"]["managedFields"] = new["metadata"]
                .get("managedFields")
                .cloned()
                .unwrap_or(Value::Null);
            *new = kept;
        }
        (_, Some(old)) => match old.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        },
        (_, None) => match defaults::initial_status(&resource.group, &resource.kind) {
            Some(status) => new["status"] = status,
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        },
    }
}

/// Records the writer's fields in managedFields as an `Update` (server-side apply has
/// already recorded its own).
fn record_ownership(
    resource: &ResourceType,
    schema: &Schema,
    manager: &str,
    subresource: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
) {
    let reset: &[&str] = match subresource {
        None if resource.has_status => &["status"],
        _ => &[],
    };
    let options = UpdateOptions {
        manager,
        api_version: &resource.api_version(),
        now: &now(),
        reset_fields: reset,
        subresource: subresource.unwrap_or_default(),
    };
    fields::record_update(schema, old, new, &options);
}

/// `metadata.generation`: 1 on create, +1 on each spec change, for kinds that track it.
fn set_generation(resource: &ResourceType, new: &mut Value, old: Option<&Value>) {
    if !defaults::tracks_generation(&resource.group, &resource.kind, resource.custom) {
        return;
    }
    let generation = match old {
        None => 1,
        Some(old) => {
            let before = old["metadata"]["generation"].as_i64().unwrap_or(1);
            if spec_changed(old, new) {
                before + 1
            } else {
                before
            }
        }
    };
    new["metadata"]["generation"] = generation.into();
}

/// One write on its way through the pipeline.
pub(super) struct Write {
    pub(super) resource: Arc<ResourceType>,
    pub(super) key: ObjectKey,
    pub(super) old: Option<Arc<Stored>>,
    pub(super) new: Value,
    pub(super) manager: String,
    /// Server-side apply already recorded the manager's fields.
    pub(super) ownership_tracked: bool,
    pub(super) dry_run: bool,
    pub(super) field_validation: FieldValidation,
    /// The object is a patch's result, not a decoded body: a strict decoding error
    /// then reads without the decoder's "cannot be handled as" preamble.
    pub(super) patched: bool,
    /// Where the answer's warnings go.
    pub(super) warnings: Warnings,
    pub(super) subresource: Option<String>,
    /// The version the client wrote in, when the kind is stored in another: field
    /// ownership is recorded in it, as kube-apiserver's field manager records it.
    pub(super) written_as: Option<Arc<ResourceType>>,
}

impl Write {
    /// A write of `new` over `old` at the target, with the request's field manager,
    /// dry run and field validation.
    pub(super) fn for_request(
        target: &Target,
        old: Option<Arc<Stored>>,
        new: Value,
        request: &Request,
    ) -> Write {
        let mut write = Write::new(
            target.resource.clone(),
            target.key(),
            old,
            new,
            &field_manager(request),
        );
        write.dry_run = is_dry_run(&request.query);
        write.field_validation = field_validation(&request.query);
        write.warnings = request.warnings.clone();
        write.subresource = target.subresource.clone();
        write
    }

    pub(super) fn new(
        resource: Arc<ResourceType>,
        key: ObjectKey,
        old: Option<Arc<Stored>>,
        new: Value,
        manager: &str,
    ) -> Write {
        Write {
            resource,
            key,
            old,
            new,
            manager: manager.to_string(),
            ownership_tracked: false,
            written_as: None,
            dry_run: false,
            field_validation: FieldValidation::default(),
            patched: false,
            warnings: Warnings::default(),
            subresource: None,
        }
    }
}

/// Fields a write names that the kind's schema does not declare, as `fieldValidation`
/// says: the 400 kube-apiserver's strict decoder answers (`Widget in version "v1" cannot
/// be handled as a Widget: strict decoding error: unknown field "spec.x"`), a warning
/// each, or nothing.
fn undeclared_fields(
    resource: &ResourceType,
    checked: &Validation,
    directive: FieldValidation,
    patched: bool,
    warnings: &Warnings,
) -> Option<ApiError> {
    let messages = checked.unknown_fields.iter().map(|f| f.message());
    match directive {
        FieldValidation::Ignore => None,
        FieldValidation::Warn => {
            messages.for_each(|m| warnings.add(m));
            None
        }
        FieldValidation::Strict => {
            let strict = format!(
                "strict decoding error: {}",
                messages.collect::<Vec<_>>().join(", ")
            );
            let kind = &resource.kind;
            Some(ApiError::BadRequest(if patched {
                strict
            } else {
                format!(
                    "{kind} in version {} cannot be handled as a {kind}: {strict}",
                    validate::go_quote(&resource.version)
                )
            }))
        }
    }
}

/// A validation error as a `Status` cause.
pub(super) fn cause(error: &validate::FieldError) -> Cause {
    Cause {
        reason: error.reason.as_str().to_string(),
        message: error.message.clone(),
        field: error.field.clone(),
    }
}

pub(super) fn conflict(resource: &ResourceType, name: &str) -> ApiError {
    ApiError::Conflict {
        plural: resource.plural.clone(),
        name: name.to_string(),
        reason: "the object has been modified; please apply your changes to the latest version and try again".into(),
    }
}

pub(super) fn object_name(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

pub(super) fn set_type(resource: &ResourceType, object: &mut Value) {
    object["kind"] = resource.kind.clone().into();
    object["apiVersion"] = resource.api_version().into();
}

/// Orders keys as kube-apiserver writes them: kind, apiVersion, metadata, then the rest.
pub(super) fn order_object(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let mut ordered = Map::with_capacity(map.len());
    for key in ["kind", "apiVersion", "metadata"] {
        if let Some(value) = map.remove(key) {
            ordered.insert(key.into(), value);
        }
    }
    ordered.extend(std::mem::take(map));
    *map = ordered;
}

/// Whether anything outside metadata and status changed: what bumps `generation`.
pub(super) fn spec_changed(old: &Value, new: &Value) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return true;
    };
    let relevant = |map: &Map<String, Value>| -> Vec<(String, Value)> {
        map.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status" | "kind" | "apiVersion"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut a = relevant(old);
    let mut b = relevant(new);
    a.sort_by(|x, y| x.0.cmp(&y.0));
    b.sort_by(|x, y| x.0.cmp(&y.0));
    a != b
}

/// Equal but for managedFields timestamps and resourceVersion: such a write is a no-op.
pub(super) fn same_ignoring_timestamps(old: &Value, new: &Value) -> bool {
    let strip = |value: &Value| {
        let mut value = value.clone();
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
            if let Some(entries) = metadata
                .get_mut("managedFields")
                .and_then(Value::as_array_mut)
            {
                for entry in entries {
                    if let Some(entry) = entry.as_object_mut() {
                        entry.remove("time");
                    }
                }
            }
        }
        value
    };
    strip(old) == strip(new)
}
