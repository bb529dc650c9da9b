//! Pure drift detection: desired × live × rules → drift. No I/O in here.
//!
//! [`diff`] gives the verdict for one object; [`diff_object`] adds the normalised,
//! masked views that reports render; [`diff_sets`] matches whole sets and finds what
//! is missing or extra. The same code serves both modes ([`Mode`]): offline, against
//! objects as written in Git, and online, against the API server's dry-run answer.

mod compare;
mod fields;
mod managers;
mod mask;
mod path;
mod schema;

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::manifest::{ObjectId, ObjectKey};
use tether_schema::ownership::owned_by;

pub use compare::{LAST_APPLIED, SERVER_METADATA};
pub use fields::owned_leaves;
pub use managers::{ChangedBy, changed_by};
pub use mask::{MaskKey, fold_string_data, is_secret, mask_secret_object};
pub use path::{FieldPath, Segment};
pub use schema::{ListType, OpenApiSchemas, ScalarFormat, SchemaLookup};
pub use tether_schema::{Quantity, same_quantity};

/// What "desired" means, and so what counts as drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Desired is the manifest as written; nobody filled in defaults. Fields only the
    /// live object has are not drift, and values the server would normalise compare
    /// equal.
    Offline,
    /// Desired is the API server's answer to a server-side-apply dry run: defaults
    /// and admission are in it, so every difference counts except server-owned
    /// metadata and status.
    Online,
}

/// One field that differs. `None` means absent, `Some(Value::Null)` an explicit null.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub path: FieldPath,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<Value>,
    /// The field manager that last wrote the live field, when `managedFields` tell.
    #[serde(rename = "changedBy", skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<ChangedBy>,
}

/// The verdict for one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Drift {
    InSync,
    Modified(Vec<Change>),
    /// Desired, not live: to create.
    Missing,
    /// Live and owned by the app, no longer desired: to prune.
    Extra,
    /// Desired, but live and labelled for another app (named): not this app's to
    /// change until that app lets go.
    Conflict(String),
}

/// [`Drift`] without its changes, as reports count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Status {
    InSync,
    Modified,
    Missing,
    Extra,
    Conflict,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::InSync,
        Status::Modified,
        Status::Missing,
        Status::Extra,
        Status::Conflict,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::InSync => "InSync",
            Status::Modified => "Modified",
            Status::Missing => "Missing",
            Status::Extra => "Extra",
            Status::Conflict => "Conflict",
        }
    }
}

impl Drift {
    pub fn status(&self) -> Status {
        match self {
            Drift::InSync => Status::InSync,
            Drift::Modified(_) => Status::Modified,
            Drift::Missing => Status::Missing,
            Drift::Extra => Status::Extra,
            Drift::Conflict(_) => Status::Conflict,
        }
    }

    pub fn changes(&self) -> &[Change] {
        match self {
            Drift::Modified(c) => c,
            _ => &[],
        }
    }

    pub fn is_drift(&self) -> bool {
        !matches!(self, Drift::InSync)
    }
}

/// An `ignoreDifferences` rule: fields that may differ without being drift. Each
/// selector left `None` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoreRule {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// RFC 6901 pointers (`/spec/replicas`), removed from both sides.
    pub json_pointers: Vec<String>,
    /// Field managers (`kube-controller-manager`, an HPA's): the fields they own in
    /// the live object's `managedFields` are removed from both sides.
    pub managers: Vec<String>,
}

impl IgnoreRule {
    pub fn matches(&self, id: &ObjectId) -> bool {
        let sel = |want: &Option<String>, have: &str| {
            want.as_deref().is_none_or(|w| w == "*" || w == have)
        };
        sel(&self.group, &id.group)
            && sel(&self.kind, &id.kind)
            && sel(&self.namespace, id.namespace.as_deref().unwrap_or(""))
            && sel(&self.name, &id.name)
    }
}

/// Everything a comparison depends on besides the two objects.
#[derive(Clone, Copy)]
pub struct DiffOptions<'a> {
    pub mode: Mode,
    pub rules: &'a [IgnoreRule],
    pub schema: &'a dyn SchemaLookup,
    pub mask: &'a MaskKey,
}

impl std::fmt::Debug for DiffOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiffOptions")
            .field("mode", &self.mode)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// Removes the field an RFC 6901 pointer names, if it exists.
pub fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    let target = if parent.is_empty() {
        Some(value)
    } else {
        value.pointer_mut(parent)
    };
    match target {
        Some(Value::Object(m)) => {
            m.shift_remove(&last);
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        _ => {}
    }
}

/// Applies the rules for `id`, and turns a Secret's `stringData` into the `data`
/// it becomes. Borrows when nothing applies (the common case).
fn prepare<'v>(
    id: &ObjectId,
    desired: &'v Value,
    live: &'v Value,
    rules: &[IgnoreRule],
) -> (Cow<'v, Value>, Cow<'v, Value>) {
    let mut d = Cow::Borrowed(desired);
    let mut l = Cow::Borrowed(live);
    if is_secret(id) && desired.get("stringData").is_some() {
        d = Cow::Owned(mask::fold_string_data(desired));
    }
    for rule in rules.iter().filter(|r| r.matches(id)) {
        for p in &rule.json_pointers {
            remove_pointer(d.to_mut(), p);
            remove_pointer(l.to_mut(), p);
        }
        if !rule.managers.is_empty() {
            let leaves: Vec<_> = fields::managed_by(live, &rule.managers)
                .into_iter()
                .flat_map(owned_leaves)
                .collect();
            for leaf in &leaves {
                fields::remove_owned(d.to_mut(), leaf);
                fields::remove_owned(l.to_mut(), leaf);
            }
        }
    }
    (d, l)
}

/// The verdict for one object. `desired` absent means the app no longer wants it
/// (the caller decides whether it is the app's to prune); `live` absent, that it
/// does not exist. Secret values in the changes are masked.
pub fn diff(
    id: &ObjectId,
    desired: Option<&Value>,
    live: Option<&Value>,
    opts: &DiffOptions<'_>,
) -> Drift {
    let (desired, live) = match (desired, live) {
        (Some(d), Some(l)) => (d, l),
        (Some(_), None) => return Drift::Missing,
        (None, Some(_)) => return Drift::Extra,
        (None, None) => return Drift::InSync,
    };
    let (d, l) = prepare(id, desired, live, opts.rules);
    let mut cmp = compare::Comparer::new(opts.mode, opts.schema, id);
    cmp.compare(&d, &l);
    let mut changes = cmp.changes;
    if changes.is_empty() {
        return Drift::InSync;
    }
    for c in &mut changes {
        c.changed_by = changed_by(live, &c.path);
    }
    if is_secret(id) {
        for c in &mut changes {
            mask::mask_change(c, opts.mask);
        }
    }
    Drift::Modified(changes)
}

/// Whether server-side applying `desired` as `manager` would leave `live` as it is,
/// decided without asking the server: every desired field already has its value
/// (quantities and int-or-strings as the server normalises them), and `manager` owns
/// no field that `desired` dropped (applying would remove it). Conservative: `false`
/// means "ask the server with a dry run", never "it differs".
pub fn unchanged_by_apply(
    id: &ObjectId,
    desired: &Value,
    live: &Value,
    manager: &str,
    schema: &dyn SchemaLookup,
) -> bool {
    if live.pointer("/metadata/deletionTimestamp").is_some() {
        return false;
    }
    let Some(owned) = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|entries| {
            entries.iter().find(|e| {
                e.get("manager").and_then(Value::as_str) == Some(manager)
                    && e.get("operation").and_then(Value::as_str) == Some("Apply")
                    && e.get("subresource").is_none()
            })
        })
    else {
        return false;
    };
    if owned.get("apiVersion") != desired.get("apiVersion") {
        return false;
    }
    let Some(fields) = owned.get("fieldsV1") else {
        return false;
    };
    if !owned_leaves(fields)
        .iter()
        .all(|leaf| fields::lookup(desired, leaf).is_some())
    {
        return false;
    }
    let (d, l) = prepare(id, desired, live, &[]);
    let mut cmp = compare::Comparer::new(Mode::Offline, schema, id);
    cmp.compare(&d, &l);
    cmp.changes.is_empty()
}

/// One object's comparison with what a report shows of it: the desired object and
/// the live one as compared (normalised, restricted to what the mode compares, Secret
/// values masked). The views never hold a plain Secret value, and only a drifted
/// object has them: reports show nothing of the others, and copying a large set that
/// is in sync would cost more than comparing it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectDiff {
    pub id: ObjectId,
    pub drift: Drift,
    pub desired: Option<Value>,
    pub live: Option<Value>,
}

/// The object without status, server-owned metadata and the last-applied copy.
pub fn normalized_view(value: &Value) -> Value {
    let mut v = value.clone();
    if let Some(m) = v.as_object_mut() {
        m.shift_remove("status");
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in SERVER_METADATA {
            meta.shift_remove(*k);
        }
        if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            ann.shift_remove(LAST_APPLIED);
            if ann.is_empty() {
                meta.shift_remove("annotations");
            }
        }
    }
    v
}

/// [`diff`] plus the views reports render.
pub fn diff_object(
    id: &ObjectId,
    desired: Option<&Value>,
    live: Option<&Value>,
    opts: &DiffOptions<'_>,
) -> ObjectDiff {
    let drift = diff(id, desired, live, opts);
    if !drift.is_drift() {
        return ObjectDiff {
            id: id.clone(),
            drift,
            desired: None,
            live: None,
        };
    }
    let secret = is_secret(id);
    let finish = |mut v: Value| {
        if secret {
            mask_secret_object(&mut v, opts.mask);
        }
        v
    };
    let (desired_view, live_view) = match (desired, live) {
        (Some(d), Some(l)) => {
            let (d, l) = prepare(id, d, l, opts.rules);
            let d = normalized_view(&d);
            let l = normalized_view(&l);
            let projected = compare::Comparer::new(opts.mode, opts.schema, id).project(&d, &l);
            (Some(finish(d)), Some(finish(projected)))
        }
        (Some(d), None) => {
            let d = if secret {
                mask::fold_string_data(d)
            } else {
                d.clone()
            };
            (Some(finish(normalized_view(&d))), None)
        }
        (None, Some(l)) => (None, Some(finish(normalized_view(l)))),
        (None, None) => (None, None),
    };
    ObjectDiff {
        id: id.clone(),
        drift,
        desired: desired_view,
        live: live_view,
    }
}

/// Which live objects without a desired counterpart are reported as [`Drift::Extra`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtraPolicy<'a> {
    /// None: with no app named, tether owns nothing it could prune.
    Ignore,
    /// Those labelled `tether.dev/app: <app>`.
    OwnedBy(&'a str),
    /// All of them (the live set is already the app's inventory).
    All,
}

/// Below this many objects one thread compares them in a few milliseconds (about
/// 20 µs an object, benches/diff.rs), less than starting more threads is worth.
const PARALLEL_DIFF_MIN_OBJECTS: usize = 256;

/// Most threads [`diff_sets`] compares on: the machines tether runs on have a few
/// cores, and comparing is cheap next to reading the objects.
const MAX_DIFF_THREADS: usize = 8;

/// [`diff_object`] of every (desired, live) pair, in order: on several threads when
/// there are many (each object is compared on its own, so the split changes nothing).
fn diff_pairs(
    pairs: &[(&ObjectId, &Value, Option<&Value>)],
    opts: &DiffOptions<'_>,
) -> Vec<ObjectDiff> {
    let one = |(id, d, l): &(&ObjectId, &Value, Option<&Value>)| diff_object(id, Some(d), *l, opts);
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_DIFF_THREADS);
    if threads == 1 || pairs.len() < PARALLEL_DIFF_MIN_OBJECTS {
        return pairs.iter().map(one).collect();
    }
    let chunk = pairs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = pairs
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(one).collect::<Vec<_>>()))
            .collect();
        let mut out = Vec::with_capacity(pairs.len());
        for handle in handles {
            match handle.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

/// Compares two sets of objects, matched by identity (group, kind, namespace, name;
/// the version is not part of it). Results come in desired order, then the extra
/// objects in identity order.
pub fn diff_sets<'v>(
    desired: impl IntoIterator<Item = (&'v ObjectId, &'v Value)>,
    live: impl IntoIterator<Item = (&'v ObjectId, &'v Value)>,
    extra: ExtraPolicy<'_>,
    opts: &DiffOptions<'_>,
) -> Vec<ObjectDiff> {
    let mut live: std::collections::HashMap<ObjectKey, (&ObjectId, &Value)> = live
        .into_iter()
        .map(|(id, v)| (id.key(), (id, v)))
        .collect();
    let pairs: Vec<(&ObjectId, &Value, Option<&Value>)> = desired
        .into_iter()
        .map(|(id, d)| (id, d, live.remove(&id.key()).map(|(_, v)| v)))
        .collect();
    let mut out = diff_pairs(&pairs, opts);
    let mut rest: Vec<_> = live
        .into_values()
        .filter(|(_, v)| match extra {
            ExtraPolicy::Ignore => false,
            ExtraPolicy::OwnedBy(app) => owned_by(v, app),
            ExtraPolicy::All => true,
        })
        .collect();
    rest.sort_by_key(|(id, _)| id.key());
    out.extend(
        rest.into_iter()
            .map(|(id, l)| diff_object(id, None, Some(l), opts)),
    );
    out
}

#[cfg(test)]
mod tests;
