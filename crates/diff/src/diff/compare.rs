//! The comparison itself: one walk over desired and live that records what differs,
//! allocating only when something does (the steady state is "nothing differs").

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::fields::key_value_eq;
use super::path::{FieldPath, Segment};
use super::schema::{self, ListType, ScalarFormat, SchemaLookup};
use super::{Change, Mode};
use crate::manifest::ObjectId;
use tether_schema::{ListType as NodeListType, Node, same_quantity};

/// Metadata the server owns and writes itself: never drift.
pub const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The annotation `kubectl apply` (client-side) keeps its last input in. It holds a
/// copy of the whole object, Secret data included, so it is never compared or shown.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether a field at this position is server-owned (status, server metadata).
pub(crate) fn is_server_owned(names: &[&str], key: &str) -> bool {
    match names {
        [] => key == "status",
        ["metadata"] => SERVER_METADATA.contains(&key),
        ["metadata", "annotations"] => key == LAST_APPLIED,
        _ => false,
    }
}

/// Values the API server drops when empty (`omitempty`): absent on the live side,
/// they are not drift offline.
pub(crate) fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// Where the comparison stands in the kind's schema. Resolved lazily: most fields
/// are equal scalars that never need their schema, so nodes are looked up only for
/// lists and for scalars that differ.
#[derive(Clone, Copy)]
enum At<'s> {
    /// The lookup has no nodes: ask it by path (`names`).
    Path,
    /// The schema node at `names[..depth]` (`None`: untyped there, below a field the
    /// schema does not know); the names below `depth` are not looked up yet.
    Node {
        node: Option<Node<'s>>,
        depth: usize,
    },
}

/// The key fields of a keyed list, as either kind of lookup gives them.
enum Keys<'s> {
    Path(Cow<'s, [&'s str]>),
    Node(&'s [String]),
}

impl Keys<'_> {
    fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        let (a, b) = match self {
            Keys::Path(keys) => (Some(keys.iter().copied()), None),
            Keys::Node(keys) => (None, Some(keys.iter().map(String::as_str))),
        };
        a.into_iter().flatten().chain(b.into_iter().flatten())
    }
}

/// How a list compares, as [`ListType`] but with keys from either lookup.
enum Merge<'s> {
    Set,
    Map(Keys<'s>),
    /// Atomic, or unknown: items compared by position.
    Positional,
}

#[derive(Clone, Copy)]
enum Seg<'a, 's> {
    Field(&'a str),
    Index(usize),
    /// A keyed list item; the key names are looked up again (for the list at
    /// `names[..names_len]`, schema position `at`) only when a change is recorded.
    Key {
        item: &'a Value,
        names_len: usize,
        at: At<'s>,
    },
}

pub(crate) struct Comparer<'a, 's> {
    mode: Mode,
    schema: &'s dyn SchemaLookup,
    ty: &'s ObjectId,
    names: Vec<&'a str>,
    path: Vec<Seg<'a, 's>>,
    pub(crate) changes: Vec<Change>,
}

/// Objects up to this many fields are searched by scanning, not hashing.
const SMALL_OBJECT: usize = 8;

/// `item.get(key)` for list items, which are mostly small (an env var, a port, a
/// volume mount): comparing a few short keys is cheaper than hashing one, and keyed
/// lists ask for every pair of items.
fn item_field<'v>(item: &'v Value, key: &str) -> Option<&'v Value> {
    let map = item.as_object()?;
    if map.len() <= SMALL_OBJECT {
        map.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        map.get(key)
    }
}

fn keys_match(d: &Value, l: &Value, keys: &Keys<'_>) -> bool {
    let mut any = false;
    for k in keys.iter() {
        match (item_field(d, k), item_field(l, k)) {
            (Some(a), Some(b)) => {
                if !key_value_eq(a, b) {
                    return false;
                }
                any = true;
            }
            (Some(_), None) => return false,
            // A key field the desired item leaves out is defaulted by the server
            // (a port's protocol): match on the ones it names.
            (None, _) => {}
        }
    }
    any
}

/// `lm.get(key)`, trying first the live entry that follows the one found last: live
/// objects mostly keep the desired keys in the same order (the server's own, or the
/// same manifest's), and comparing one key is cheaper than hashing it.
fn same_order_get<'a>(
    in_order: &mut serde_json::map::Iter<'a>,
    lm: &'a Map<String, Value>,
    key: &str,
) -> Option<&'a Value> {
    match in_order.clone().next() {
        Some((next_key, value)) if next_key == key => {
            in_order.next();
            Some(value)
        }
        _ => lm.get(key),
    }
}

/// Whether every item of a list is an object naming one of the key fields: only
/// then is the list compared by key.
fn all_keyed(items: &[Value], keys: &Keys<'_>) -> bool {
    items
        .iter()
        .all(|i| i.is_object() && keys.iter().any(|k| item_field(i, k).is_some()))
}

impl<'a, 's> Comparer<'a, 's> {
    pub(crate) fn new(mode: Mode, schema: &'s dyn SchemaLookup, ty: &'s ObjectId) -> Self {
        Comparer {
            mode,
            schema,
            ty,
            names: Vec::with_capacity(16),
            path: Vec::with_capacity(16),
            changes: Vec::new(),
        }
    }

    fn offline(&self) -> bool {
        self.mode == Mode::Offline
    }

    fn root(&self) -> At<'s> {
        match self.schema.root(self.ty) {
            Some(node) => At::Node {
                node: Some(node),
                depth: 0,
            },
            None => At::Path,
        }
    }

    /// `at` stepped down to the end of `names`.
    fn resolve(at: At<'s>, names: &[&str]) -> At<'s> {
        match at {
            At::Path => At::Path,
            At::Node { node, depth } => At::Node {
                node: node.and_then(|node| {
                    names
                        .get(depth..)
                        .unwrap_or_default()
                        .iter()
                        .try_fold(node, |n, name| schema::child(n, name))
                }),
                depth: names.len(),
            },
        }
    }

    fn merge(&self, at: At<'s>, names: &[&str]) -> Merge<'s> {
        match Self::resolve(at, names) {
            At::Path => match self.schema.list_type(self.ty, names) {
                Some(ListType::Map(keys)) => Merge::Map(Keys::Path(keys)),
                Some(ListType::Set) => Merge::Set,
                Some(ListType::Atomic) | None => Merge::Positional,
            },
            At::Node { node, .. } => match node.and_then(|n| n.list_type()) {
                Some(NodeListType::Map { keys }) => Merge::Map(Keys::Node(keys)),
                Some(NodeListType::Set) => Merge::Set,
                Some(NodeListType::Atomic) | None => Merge::Positional,
            },
        }
    }

    fn scalar_format(&self, at: At<'s>) -> ScalarFormat {
        match Self::resolve(at, &self.names) {
            At::Path => self.schema.scalar_format(self.ty, &self.names),
            At::Node { node, .. } => schema::node_scalar_format(node),
        }
    }

    /// Records every difference between `d` and `l` in `changes`.
    pub(crate) fn compare(&mut self, d: &'a Value, l: &'a Value) {
        let root = self.root();
        self.compare_at(d, l, root);
    }

    fn compare_at(&mut self, d: &'a Value, l: &'a Value, at: At<'s>) {
        match (d, l) {
            (Value::Object(dm), Value::Object(lm)) => self.compare_maps(dm, lm, at),
            (Value::Array(da), Value::Array(la)) => self.compare_lists(d, l, da, la, at),
            _ => {
                if !self.scalar_eq(d, l, at) {
                    self.record(Some(d), Some(l));
                }
            }
        }
    }

    fn compare_maps(&mut self, dm: &'a Map<String, Value>, lm: &'a Map<String, Value>, at: At<'s>) {
        let mut in_order = lm.iter();
        for (k, dv) in dm {
            if is_server_owned(&self.names, k) {
                continue;
            }
            self.names.push(k);
            self.path.push(Seg::Field(k));
            match same_order_get(&mut in_order, lm, k) {
                Some(lv) => self.compare_at(dv, lv, at),
                None => {
                    if !(self.offline() && is_empty_value(dv)) {
                        self.record(Some(dv), None);
                    }
                }
            }
            self.names.pop();
            self.path.pop();
        }
        if self.offline() {
            return; // live-only fields may be server defaults
        }
        for (k, lv) in lm {
            if dm.contains_key(k) || is_server_owned(&self.names, k) {
                continue;
            }
            self.names.push(k);
            self.path.push(Seg::Field(k));
            self.record(None, Some(lv));
            self.names.pop();
            self.path.pop();
        }
    }

    fn compare_lists(
        &mut self,
        d: &'a Value,
        l: &'a Value,
        da: &'a [Value],
        la: &'a [Value],
        at: At<'s>,
    ) {
        // Resolved once here, for the items below too.
        let at = Self::resolve(at, &self.names);
        match self.merge(at, &self.names) {
            Merge::Map(keys) if all_keyed(da, &keys) => {
                self.compare_keyed(da, la, &keys, at);
            }
            Merge::Set => {
                let contains = |xs: &[Value], ys: &[Value]| {
                    xs.iter().all(|x| ys.iter().any(|y| key_value_eq(x, y)))
                };
                let equal = contains(da, la) && (self.offline() || contains(la, da));
                if !equal {
                    self.record(Some(d), Some(l));
                }
            }
            _ => {
                if da.len() == la.len() {
                    for (i, (di, li)) in da.iter().zip(la).enumerate() {
                        self.path.push(Seg::Index(i));
                        self.compare_at(di, li, at);
                        self.path.pop();
                    }
                } else {
                    self.record(Some(d), Some(l));
                }
            }
        }
    }

    fn compare_keyed(&mut self, da: &'a [Value], la: &'a [Value], keys: &Keys<'_>, at: At<'s>) {
        let names_len = self.names.len();
        let mut matched = if self.offline() {
            Vec::new()
        } else {
            vec![false; la.len()]
        };
        for di in da {
            self.path.push(Seg::Key {
                item: di,
                names_len,
                at,
            });
            match la.iter().position(|li| keys_match(di, li, keys)) {
                Some(j) => {
                    if let Some(m) = matched.get_mut(j) {
                        *m = true;
                    }
                    self.compare_at(di, &la[j], at);
                }
                None => self.record(Some(di), None),
            }
            self.path.pop();
        }
        for (j, li) in la.iter().enumerate() {
            if matched.get(j) == Some(&false) {
                self.path.push(Seg::Key {
                    item: li,
                    names_len,
                    at,
                });
                self.record(None, Some(li));
                self.path.pop();
            }
        }
    }

    /// Scalars equal once the server's normalisation is accounted for.
    fn scalar_eq(&self, d: &Value, l: &Value, at: At<'s>) -> bool {
        if d == l {
            return true;
        }
        if self.offline() && d.is_null() {
            return true; // null in an applied manifest means "not set by me"
        }
        match (d, l) {
            (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => true,
            (Value::String(_) | Value::Number(_), Value::String(_) | Value::Number(_)) => {
                match self.scalar_format(at) {
                    ScalarFormat::Quantity => same_quantity(d, l),
                    ScalarFormat::IntOrString => scalar_text(d) == scalar_text(l),
                    ScalarFormat::Plain => false,
                }
            }
            _ => false,
        }
    }

    fn record(&mut self, desired: Option<&Value>, live: Option<&Value>) {
        let path = self.materialize();
        self.changes.push(Change {
            path,
            desired: desired.cloned(),
            live: live.cloned(),
            changed_by: None,
        });
    }

    fn materialize(&self) -> FieldPath {
        let mut out = Vec::with_capacity(self.path.len());
        for seg in &self.path {
            out.push(match *seg {
                Seg::Field(f) => Segment::Field(f.to_string()),
                Seg::Index(i) => Segment::Index(i),
                Seg::Key {
                    item,
                    names_len,
                    at,
                } => {
                    let keys = match self.merge(at, &self.names[..names_len]) {
                        Merge::Map(keys) => keys,
                        _ => Keys::Node(&[]),
                    };
                    Segment::Key(
                        keys.iter()
                            .filter_map(|k| item.get(k).map(|v| (k.to_string(), v.clone())))
                            .collect(),
                    )
                }
            });
        }
        FieldPath(out)
    }

    /// The live object as the comparison saw it, for rendering: offline, only what
    /// the desired object names (in its order), and values that compare equal taken
    /// from the desired side so a text diff shows exactly the recorded changes.
    pub(crate) fn project(&mut self, d: &'a Value, l: &'a Value) -> Value {
        let root = self.root();
        self.project_at(d, l, root)
    }

    fn project_at(&mut self, d: &'a Value, l: &'a Value, at: At<'s>) -> Value {
        match (d, l) {
            (Value::Object(dm), Value::Object(lm)) => {
                let mut out = Map::new();
                for (k, dv) in dm {
                    if is_server_owned(&self.names, k) {
                        continue;
                    }
                    self.names.push(k);
                    match lm.get(k) {
                        Some(lv) => {
                            let value = self.project_at(dv, lv, at);
                            out.insert(k.clone(), value);
                        }
                        None if self.offline() && is_empty_value(dv) => {
                            out.insert(k.clone(), dv.clone());
                        }
                        None => {}
                    }
                    self.names.pop();
                }
                if !self.offline() {
                    for (k, lv) in lm {
                        if !dm.contains_key(k) && !is_server_owned(&self.names, k) {
                            out.insert(k.clone(), lv.clone());
                        }
                    }
                }
                Value::Object(out)
            }
            (Value::Array(da), Value::Array(la)) => {
                let at = Self::resolve(at, &self.names);
                self.project_list(l, da, la, at)
            }
            _ if self.scalar_eq(d, l, at) => d.clone(),
            _ => l.clone(),
        }
    }

    fn project_list(
        &mut self,
        l: &'a Value,
        da: &'a [Value],
        la: &'a [Value],
        at: At<'s>,
    ) -> Value {
        match self.merge(at, &self.names) {
            Merge::Map(keys) if all_keyed(da, &keys) => {
                let mut out = Vec::with_capacity(la.len());
                let mut used = vec![false; la.len()];
                for di in da {
                    if let Some(j) = la.iter().position(|li| keys_match(di, li, &keys)) {
                        used[j] = true;
                        out.push(self.project_at(di, &la[j], at));
                    }
                }
                if !self.offline() {
                    out.extend(
                        la.iter()
                            .zip(&used)
                            .filter(|(_, u)| !**u)
                            .map(|(li, _)| li.clone()),
                    );
                }
                Value::Array(out)
            }
            Merge::Set => l.clone(),
            _ if da.len() == la.len() => Value::Array(
                da.iter()
                    .zip(la)
                    .map(|(di, li)| self.project_at(di, li, at))
                    .collect(),
            ),
            _ => l.clone(),
        }
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
