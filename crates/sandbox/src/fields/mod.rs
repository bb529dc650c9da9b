//! Field ownership for the sandbox's writes: server-side apply (merge, conflicts,
//! pruning of fields a manager stopped applying), the `managedFields` that every
//! write updates, and strategic merge patch. Pure functions of values and a
//! [`Schema`]; the HTTP handlers call them and own storage, defaulting and errors on
//! the wire.
//!
//! The behaviour follows the API server's (kubernetes-sigs/structured-merge-diff and
//! apimachinery's field manager), checked against the recorded answers in
//! `fixtures/kube-apiserver-v1.36/`.

mod smp;
mod walk;

use std::fmt;

use serde_json::{Map, Value};

pub use smp::strategic_merge_patch;
pub use tether_schema::FieldSet;

use tether_schema::{Node, PathElement, Schema, render_path};
use walk::{compare, field_set, merge, remove_members};

/// `metadata.managedFields[].operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One entry of `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManagedFieldsEntry {
    pub(crate) manager: String,
    pub(crate) operation: Operation,
    pub(crate) api_version: String,
    /// RFC 3339, seconds.
    pub(crate) time: String,
    /// Empty for the main resource.
    pub(crate) subresource: String,
    pub(crate) fields: FieldSet,
}

impl ManagedFieldsEntry {
    /// The API server keeps one entry per applier (whatever its apiVersion) and one
    /// per updater and apiVersion.
    fn same_owner(&self, manager: &str, op: Operation, api_version: &str, sub: &str) -> bool {
        self.manager == manager
            && self.operation == op
            && self.subresource == sub
            && (op == Operation::Apply || self.api_version == api_version)
    }

    /// The JSON form, fields in the API server's order.
    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), Value::String(self.manager.clone()));
        m.insert(
            "operation".into(),
            Value::String(self.operation.as_str().into()),
        );
        m.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        m.insert("time".into(), Value::String(self.time.clone()));
        m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert(
                "subresource".into(),
                Value::String(self.subresource.clone()),
            );
        }
        Value::Object(m)
    }

    /// Reads one entry; `None` when it is not a FieldsV1 entry this engine can read.
    pub(crate) fn from_json(v: &Value) -> Option<ManagedFieldsEntry> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let operation = match v.get("operation").and_then(Value::as_str)? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        let fields = match v.get("fieldsV1") {
            Some(f) => FieldSet::from_fields_v1(f).ok()?,
            None => FieldSet::new(),
        };
        Some(ManagedFieldsEntry {
            manager: s("manager"),
            operation,
            api_version: s("apiVersion"),
            time: s("time"),
            subresource: s("subresource"),
            fields,
        })
    }

    /// How conflict messages name this manager: `"tether"`, or for an updater
    /// `"kubectl-edit" using apps/v1`.
    pub(crate) fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }
}

/// Reads `metadata.managedFields` of an object (entries it cannot read are dropped,
/// as the API server resets managed fields it cannot decode).
pub(crate) fn managed_fields(obj: &Value) -> Vec<ManagedFieldsEntry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(ManagedFieldsEntry::from_json)
                .collect()
        })
        .unwrap_or_default()
}

/// The API server's order: by operation (Apply first), time, manager, apiVersion,
/// subresource.
fn sort_entries(entries: &mut [ManagedFieldsEntry]) {
    entries.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| a.time.cmp(&b.time))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
}

fn write_managed_fields(obj: &mut Value, mut entries: Vec<ManagedFieldsEntry>) {
    entries.retain(|e| !e.fields.is_empty());
    sort_entries(&mut entries);
    let Some(obj) = obj.as_object_mut() else {
        return;
    };
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(ManagedFieldsEntry::to_json).collect()),
        );
    }
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    out
}

/// Paths no manager ever owns: identity and bookkeeping the server sets itself.
fn stripped(set: &FieldSet) -> FieldSet {
    let mut strip = FieldSet::new();
    let f = |s: &str| PathElement::Field(s.to_string());
    strip.insert(&[f("apiVersion")]);
    strip.insert(&[f("kind")]);
    strip.insert(&[f("metadata")]);
    for name in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        strip.insert(&[f("metadata"), f(name)]);
    }
    set.difference(&strip)
}

fn without_fields(set: &FieldSet, reset_fields: &[&str]) -> FieldSet {
    reset_fields
        .iter()
        .fold(set.clone(), |acc, name| acc.without_top_field(name))
}

/// How a server-side apply is made.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ApplyOptions<'a> {
    /// `fieldManager`.
    pub(crate) manager: &'a str,
    /// `force=true`: take conflicting fields from their owners.
    pub(crate) force: bool,
    /// The apiVersion the object is applied at (recorded in the entry).
    pub(crate) api_version: &'a str,
    /// Now, RFC 3339 to the second (`2026-11-21T21:02:15Z`).
    pub(crate) now: &'a str,
    /// Top-level fields this endpoint does not write: ignored in the config and
    /// kept from live (`"status"` for the main resource, everything else for a
    /// status subresource is the handler's business).
    pub(crate) reset_fields: &'a [&'a str],
    /// Empty for the main resource, `"status"` or `"scale"` for a subresource.
    pub(crate) subresource: &'a str,
}

/// A field another manager owns and the apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conflict {
    /// The owner's name, as in `managedFields[].manager`.
    pub(crate) manager: String,
    /// How the status message names the owner: `"tether"` (quoted), or
    /// `"kubectl-edit" using apps/v1` for an updater.
    pub(crate) manager_description: String,
    /// The field in the API server's form:
    /// `.spec.template.spec.containers[name="web"].image`.
    pub(crate) field: String,
}

impl Conflict {
    /// The cause message: `conflict with "tether"`.
    pub(crate) fn message(&self) -> String {
        format!("conflict with {}", self.manager_description)
    }
}

/// Why an apply did not happen.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ApplyError {
    /// Other managers own fields the apply would change (409 `Conflict`, causes
    /// `FieldManagerConflict`). Retrying cannot help; applying with force or
    /// dropping the fields can.
    #[error("{}", conflicts_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The configuration cannot be merged (a keyed list item without its key, a
    /// duplicate key, a body that is not an object). A client error.
    #[error("{0}")]
    Invalid(String),
}

/// The status message of a conflict, worded as the API server words it.
fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager_description, only.field
        );
    }
    let mut owners: Vec<&str> = conflicts
        .iter()
        .map(|c| c.manager_description.as_str())
        .collect();
    owners.sort();
    owners.dedup();
    let mut lines = Vec::new();
    for owner in owners {
        lines.push(format!("conflicts with {owner}:"));
        for c in conflicts.iter().filter(|c| c.manager_description == owner) {
            lines.push(format!("- {}", c.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Server-side apply of `config` by `opts.manager` onto `live` (`None`: the object
/// does not exist yet and is created from `config`).
///
/// Returns the merged object with its updated `metadata.managedFields`, before
/// defaulting (the handler defaults it). Field sets come from `config` itself.
/// Fields the manager applied last time and omits now are removed unless another
/// manager owns them; fields another manager owns and the apply would change are
/// conflicts, or with `force` become the applier's.
pub(crate) fn apply(
    schema: &Schema,
    live: Option<&Value>,
    config: &Value,
    opts: &ApplyOptions<'_>,
) -> Result<Value, ApplyError> {
    let root = schema.root();
    let Value::Object(config_map) = config else {
        return Err(ApplyError::Invalid(
            "the applied configuration is not an object".into(),
        ));
    };
    let mut config_map = config_map.clone();
    for name in opts.reset_fields {
        config_map.remove(*name);
    }
    if let Some(meta) = config_map
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    {
        meta.remove("managedFields");
    }
    let config = Value::Object(config_map);

    let applied = field_set(root, &config)
        .map_err(|e| ApplyError::Invalid(format!("{}: {}", e.path, e.message)))?;
    let applied = without_fields(&stripped(&applied), opts.reset_fields);

    let mut entries = live.map(managed_fields).unwrap_or_default();
    let base = live
        .map(without_managed_fields)
        .unwrap_or_else(|| Value::Object(Map::new()));
    let mut merged = merge(root, Some(&base), &config);
    for name in opts.reset_fields {
        match base.get(*name) {
            Some(v) => {
                if let Some(m) = merged.as_object_mut() {
                    m.insert((*name).to_string(), v.clone());
                }
            }
            None => {
                if let Some(m) = merged.as_object_mut() {
                    m.remove(*name);
                }
            }
        }
    }

    let own = entries.iter().position(|e| {
        e.same_owner(
            opts.manager,
            Operation::Apply,
            opts.api_version,
            opts.subresource,
        )
    });
    let last = own.map(|i| entries[i].fields.clone());
    let previous_time = own.map(|i| entries[i].time.clone());
    if let Some(i) = own {
        entries.remove(i);
    }

    if let Some(last) = last {
        prune(root, &mut merged, &last, &applied, &entries);
    }

    let cmp = compare(root, &base, &merged);
    let changed = without_fields(&cmp.added.union(&cmp.modified), opts.reset_fields);
    let removed = without_fields(&cmp.removed, opts.reset_fields);

    let mut conflicts = Vec::new();
    let mut taken = Vec::with_capacity(entries.len());
    for entry in &entries {
        let theirs = entry.fields.intersection(&changed);
        for path in theirs.paths() {
            conflicts.push(Conflict {
                manager: entry.manager.clone(),
                manager_description: entry.describe(),
                field: render_path(&path),
            });
        }
        taken.push(theirs);
    }
    if !opts.force && !conflicts.is_empty() {
        conflicts.sort_by(|a, b| a.manager_description.cmp(&b.manager_description));
        return Err(ApplyError::Conflicts(conflicts));
    }
    for (entry, theirs) in entries.iter_mut().zip(taken) {
        entry.fields = entry.fields.difference(&theirs).difference(&removed);
    }

    let object_changed = merged != base;
    let time = match previous_time {
        Some(t) if !object_changed => t,
        _ => opts.now.to_string(),
    };
    entries.push(ManagedFieldsEntry {
        manager: opts.manager.to_string(),
        operation: Operation::Apply,
        api_version: opts.api_version.to_string(),
        time,
        subresource: opts.subresource.to_string(),
        fields: applied,
    });
    write_managed_fields(&mut merged, entries);
    Ok(merged)
}

/// Removes what the applier owned last time, applies no more, and nobody else owns.
fn prune(
    root: Node<'_>,
    merged: &mut Value,
    last: &FieldSet,
    applied: &FieldSet,
    others: &[ManagedFieldsEntry],
) {
    let mut owned = others
        .iter()
        .fold(applied.clone(), |acc, e| acc.union(&e.fields));
    // Identity fields are never removed, though no manager owns them.
    let f = |s: &str| PathElement::Field(s.to_string());
    for top in ["apiVersion", "kind", "metadata"] {
        owned.insert(&[f(top)]);
    }
    let owned = owned.with_named_fields(root);
    let gone = last.with_named_fields(root).difference(&owned);
    if !gone.is_empty() {
        remove_members(root, merged, &gone);
    }
}

/// How a non-apply write (create, update, patch) is recorded.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UpdateOptions<'a> {
    /// `fieldManager`, or the client's user agent up to the first `/` as the API
    /// server defaults it (`kubectl`, `Python-urllib`).
    pub(crate) manager: &'a str,
    pub(crate) api_version: &'a str,
    /// Now, RFC 3339 to the second.
    pub(crate) now: &'a str,
    /// Top-level fields this endpoint does not write (`"status"` for the main
    /// resource of a kind with a status subresource).
    pub(crate) reset_fields: &'a [&'a str],
    /// Empty for the main resource, `"status"` or `"scale"` for a subresource.
    pub(crate) subresource: &'a str,
}

/// Records a non-apply write in `new`'s `metadata.managedFields`: the fields it added
/// or changed become `opts.manager`'s (operation `Update`) and leave other managers;
/// removed fields leave everyone; managers left with nothing are dropped.
///
/// `old` is the stored object (`None` on create); `new` is the object about to be
/// stored, already defaulted (updaters own the defaults they cause, as on a real
/// server). A client that sends `managedFields` different from the stored ones sets
/// them; otherwise the stored ones are carried over.
pub(crate) fn record_update(
    schema: &Schema,
    old: Option<&Value>,
    new: &mut Value,
    opts: &UpdateOptions<'_>,
) {
    let root = schema.root();
    let stored = old.map(managed_fields).unwrap_or_default();
    let sent = managed_fields(new);
    let sent_any = new.pointer("/metadata/managedFields").is_some();
    let mut entries = if sent_any && sent != stored {
        sent
    } else {
        stored
    };

    let base = match old {
        Some(o) => without_managed_fields(o),
        None => schema.zero_object(),
    };
    let current = without_managed_fields(new);
    let cmp = compare(root, &base, &current);
    let changed = without_fields(&cmp.added.union(&cmp.modified), opts.reset_fields);
    let removed = without_fields(&cmp.removed, opts.reset_fields);
    let contributed = stripped(&changed);

    let own = entries.iter().position(|e| {
        e.same_owner(
            opts.manager,
            Operation::Update,
            opts.api_version,
            opts.subresource,
        )
    });
    for (i, entry) in entries.iter_mut().enumerate() {
        if Some(i) != own {
            entry.fields = entry.fields.difference(&changed);
        }
        entry.fields = entry.fields.difference(&removed);
    }
    if !contributed.is_empty() {
        match own {
            Some(i) => {
                let entry = &mut entries[i];
                entry.fields = entry.fields.union(&contributed);
                entry.time = opts.now.to_string();
            }
            None => entries.push(ManagedFieldsEntry {
                manager: opts.manager.to_string(),
                operation: Operation::Update,
                api_version: opts.api_version.to_string(),
                time: opts.now.to_string(),
                subresource: opts.subresource.to_string(),
                fields: contributed,
            }),
        }
    }
    write_managed_fields(new, entries);
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests;
