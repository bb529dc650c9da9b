//! The comparison itself: one walk over desired and live that records what differs,
//! allocating only when something does (the steady state is "nothing differs").

use serde_json::{Map, Value};

use super::fields::key_value_eq;
use super::path::{FieldPath, Segment};
use super::quantity::same_quantity;
use super::schema::{ListType, ScalarFormat, SchemaLookup};
use super::{Change, Mode};
use crate::manifest::ObjectId;

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

#[derive(Clone, Copy)]
enum Seg<'a> {
    Field(&'a str),
    Index(usize),
    /// A keyed list item; the key names are looked up again (for the list at
    /// `names[..names_len]`) only when a change is recorded.
    Key {
        item: &'a Value,
        names_len: usize,
    },
}

pub(crate) struct Comparer<'a, 's> {
    mode: Mode,
    schema: &'s dyn SchemaLookup,
    ty: &'s ObjectId,
    names: Vec<&'a str>,
    path: Vec<Seg<'a>>,
    pub(crate) changes: Vec<Change>,
}

fn keys_match(d: &Value, l: &Value, keys: &[&str]) -> bool {
    let mut any = false;
    for k in keys {
        match (d.get(*k), l.get(*k)) {
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

    pub(crate) fn compare(&mut self, d: &'a Value, l: &'a Value) {
        match (d, l) {
            (Value::Object(dm), Value::Object(lm)) => self.compare_maps(dm, lm),
            (Value::Array(da), Value::Array(la)) => self.compare_lists(d, l, da, la),
            _ => {
                if !self.scalar_eq(d, l) {
                    self.record(Some(d), Some(l));
                }
            }
        }
    }

    fn compare_maps(&mut self, dm: &'a Map<String, Value>, lm: &'a Map<String, Value>) {
        for (k, dv) in dm {
            if is_server_owned(&self.names, k) {
                continue;
            }
            self.names.push(k);
            self.path.push(Seg::Field(k));
            match lm.get(k) {
                Some(lv) => self.compare(dv, lv),
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

    fn compare_lists(&mut self, d: &'a Value, l: &'a Value, da: &'a [Value], la: &'a [Value]) {
        let schema = self.schema;
        match schema.list_type(self.ty, &self.names) {
            Some(ListType::Map(keys))
                if da
                    .iter()
                    .all(|i| i.is_object() && keys.iter().any(|k| i.get(*k).is_some())) =>
            {
                self.compare_keyed(da, la, &keys);
            }
            Some(ListType::Set) => {
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
                        self.compare(di, li);
                        self.path.pop();
                    }
                } else {
                    self.record(Some(d), Some(l));
                }
            }
        }
    }

    fn compare_keyed(&mut self, da: &'a [Value], la: &'a [Value], keys: &[&str]) {
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
            });
            match la.iter().position(|li| keys_match(di, li, keys)) {
                Some(j) => {
                    if let Some(m) = matched.get_mut(j) {
                        *m = true;
                    }
                    self.compare(di, &la[j]);
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
                });
                self.record(None, Some(li));
                self.path.pop();
            }
        }
    }

    /// Scalars equal once the server's normalisation is accounted for.
    fn scalar_eq(&self, d: &Value, l: &Value) -> bool {
        if d == l {
            return true;
        }
        if self.offline() && d.is_null() {
            return true; // null in an applied manifest means "not set by me"
        }
        match (d, l) {
            (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => true,
            (Value::String(_) | Value::Number(_), Value::String(_) | Value::Number(_)) => {
                match self.schema.scalar_format(self.ty, &self.names) {
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
        });
    }

    fn materialize(&self) -> FieldPath {
        let mut out = Vec::with_capacity(self.path.len());
        for seg in &self.path {
            out.push(match *seg {
                Seg::Field(f) => Segment::Field(f.to_string()),
                Seg::Index(i) => Segment::Index(i),
                Seg::Key { item, names_len } => {
                    let keys = match self.schema.list_type(self.ty, &self.names[..names_len]) {
                        Some(ListType::Map(keys)) => keys,
                        _ => std::borrow::Cow::Borrowed(&[][..]),
                    };
                    Segment::Key(
                        keys.iter()
                            .filter_map(|k| item.get(*k).map(|v| ((*k).to_string(), v.clone())))
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
                            out.insert(k.clone(), self.project(dv, lv));
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
                let schema = self.schema;
                match schema.list_type(self.ty, &self.names) {
                    Some(ListType::Map(keys))
                        if da
                            .iter()
                            .all(|i| i.is_object() && keys.iter().any(|k| i.get(*k).is_some())) =>
                    {
                        let mut out = Vec::with_capacity(la.len());
                        let mut used = vec![false; la.len()];
                        for di in da {
                            if let Some(j) = la.iter().position(|li| keys_match(di, li, &keys)) {
                                used[j] = true;
                                out.push(self.project(di, &la[j]));
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
                    Some(ListType::Set) => l.clone(),
                    _ if da.len() == la.len() => Value::Array(
                        da.iter()
                            .zip(la)
                            .map(|(di, li)| self.project(di, li))
                            .collect(),
                    ),
                    _ => l.clone(),
                }
            }
            _ if self.scalar_eq(d, l) => d.clone(),
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
