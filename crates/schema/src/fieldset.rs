//! Sets of field paths (what a manager owns) and their FieldsV1 JSON form: server-side
//! apply tracks ownership with them, and the diff stage ignores what a named manager
//! owns.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::{Node, PathElement};

/// A trie of field paths. A path is a *member* when it is owned itself (a leaf, an
/// atomic value, a list item, a map entry); interior paths only lead to members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

/// A FieldsV1 document that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid FieldsV1 key {key:?}")]
pub struct FieldsV1Error {
    pub(crate) key: String,
}

impl FieldSet {
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// No member anywhere.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    /// Makes `path` a member. The empty path is not a field and is ignored.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is a member.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether `path` is a member or has members below it.
    pub fn has_prefix(&self, path: &[PathElement]) -> bool {
        match path {
            [] => !self.is_empty(),
            [first, rest @ ..] => {
                (rest.is_empty() && self.members.contains(first))
                    || self.children.get(first).is_some_and(|c| c.has_prefix(rest))
            }
        }
    }

    /// The members below `element` (not `element` itself).
    pub fn child(&self, element: &PathElement) -> Option<&FieldSet> {
        self.children.get(element)
    }

    /// Whether `element` (one step down) is a member.
    pub fn has_member(&self, element: &PathElement) -> bool {
        self.members.contains(element)
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Members of `self` that are not members of `other` (membership only: a member
    /// of `other` does not remove what lies below it in `self`).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for m in &self.members {
            if !other.members.contains(m) {
                out.members.insert(m.clone());
            }
        }
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(pe.clone(), rest);
            }
        }
        out
    }

    /// Members of both.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for m in &self.members {
            if other.members.contains(m) {
                out.members.insert(m.clone());
            }
        }
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(pe.clone(), both);
                }
            }
        }
        out
    }

    /// `self` without the top-level field `name` and everything below it.
    pub fn without_top_field(&self, name: &str) -> FieldSet {
        let pe = PathElement::Field(name.to_string());
        let mut out = self.clone();
        out.members.remove(&pe);
        out.children.remove(&pe);
        out
    }

    /// All members, in FieldsV1 order (at each level, members before what lies below).
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        for m in &self.members {
            prefix.push(m.clone());
            out.push(prefix.clone());
            prefix.pop();
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// Also makes members of the declared struct fields that lead to members (a set
    /// owning `spec.replicas` then owns `spec` too, but not a map key or list item on
    /// the way). Pruning compares sets in this form, so removing a manager's last
    /// field below a struct field removes the struct field as well.
    pub fn with_named_fields(&self, node: Node<'_>) -> FieldSet {
        let mut out = FieldSet {
            members: self.members.clone(),
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            let child_node = match pe {
                PathElement::Field(name) => {
                    if node.declares(name) {
                        out.members.insert(pe.clone());
                    }
                    node.field(name)
                }
                _ => node.items(),
            };
            let child = match child_node {
                Some(n) => child.with_named_fields(n),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), child);
        }
        out
    }

    /// The FieldsV1 JSON form: `{"f:spec": {"f:replicas": {}}}`, `"."` for a member
    /// that also has members below it, keys in the API server's order.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        self.write_fields_v1(&mut map);
        Value::Object(map)
    }

    fn write_fields_v1(&self, out: &mut Map<String, Value>) {
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(self.children.keys());
        for pe in keys {
            let mut inner = Map::new();
            let child = self.children.get(pe).filter(|c| !c.is_empty());
            if let Some(child) = child {
                if self.members.contains(pe) {
                    inner.insert(".".to_string(), Value::Object(Map::new()));
                }
                child.write_fields_v1(&mut inner);
            } else if !self.members.contains(pe) {
                continue;
            }
            out.insert(pe.to_fields_v1(), Value::Object(inner));
        }
    }

    /// Reads the FieldsV1 JSON form.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, FieldsV1Error> {
        let mut out = FieldSet::new();
        let Value::Object(map) = value else {
            return Err(FieldsV1Error {
                key: value.to_string(),
            });
        };
        for (key, inner) in map {
            if key == "." {
                continue;
            }
            let pe = PathElement::from_fields_v1(key)
                .ok_or_else(|| FieldsV1Error { key: key.clone() })?;
            let Value::Object(inner_map) = inner else {
                return Err(FieldsV1Error { key: key.clone() });
            };
            if inner_map.is_empty() || inner_map.contains_key(".") {
                out.members.insert(pe.clone());
            }
            let child = FieldSet::from_fields_v1(inner)?;
            if !child.is_empty() {
                out.children.insert(pe, child);
            }
        }
        Ok(out)
    }
}
