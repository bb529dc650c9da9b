//! Schema-guided walks over objects: the field set of a value, the merge of an
//! applied configuration into a live object, the comparison of two versions, and the
//! removal of owned fields. The rules are structured-merge-diff's, the library the
//! API server uses for the same things.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use tether_schema::FieldSet;
use tether_schema::{ListType, Node, NodeKind, PathElement};

/// A value that cannot be addressed field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WalkError {
    /// Where, in the `.spec.containers` form.
    pub(crate) path: String,
    pub message: String,
}

fn path_string(path: &[PathElement]) -> String {
    tether_schema::render_path(path)
}

/// Item identities of a list, falling back to positions for items without one (a
/// stored object is taken as it is).
fn lenient_elements(list: Node<'_>, items: &[Value]) -> Vec<PathElement> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| list.item_element(i, item).unwrap_or(PathElement::Index(i)))
        .collect()
}

fn is_granular_list(node: Node<'_>) -> bool {
    matches!(
        node.kind(),
        NodeKind::List(ListType::Set | ListType::Map { .. })
    )
}

fn is_granular_object(node: Node<'_>) -> bool {
    matches!(
        node.kind(),
        NodeKind::Struct { atomic: false } | NodeKind::Map { atomic: false } | NodeKind::Untyped
    )
}

fn child_node<'a>(node: Node<'a>, key: &str) -> Node<'a> {
    // An undeclared field is walked as untyped; whether it may be there at all is
    // the validator's question, not the merge's.
    node.field(key).unwrap_or_else(Node::untyped)
}

/// The fields a value sets: what a manager owns after applying it.
pub(super) fn field_set(node: Node<'_>, value: &Value) -> Result<FieldSet, WalkError> {
    let mut set = FieldSet::new();
    let mut path = Vec::new();
    collect_fields(node, value, &mut path, &mut set)?;
    Ok(set)
}

fn collect_fields(
    node: Node<'_>,
    value: &Value,
    path: &mut Vec<PathElement>,
    set: &mut FieldSet,
) -> Result<(), WalkError> {
    match (value, node.kind()) {
        (Value::Array(items), NodeKind::List(ListType::Set | ListType::Map { .. })) => {
            let item_node = node.items().unwrap_or(node);
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let pe = node.item_element(i, item).map_err(|message| WalkError {
                    path: format!("{}: element {i}", path_string(path)),
                    message,
                })?;
                if !seen.insert(pe.clone()) {
                    return Err(WalkError {
                        path: path_string(path),
                        message: format!("duplicate entries for key {pe}"),
                    });
                }
                path.push(pe);
                collect_fields(item_node, item, path, set)?;
                set.insert(path);
                path.pop();
            }
        }
        (Value::Object(map), _) if is_granular_object(node) => {
            for (key, child) in map {
                let declared = node.declares(key);
                path.push(PathElement::Field(key.clone()));
                collect_fields(child_node(node, key), child, path, set)?;
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || !declared {
                    set.insert(path);
                }
                path.pop();
            }
        }
        _ => set.insert(path),
    }
    Ok(())
}

/// `config` merged into `live`: scalars and atomic values from `config`, objects key
/// by key, keyed lists item by item (live-only items keep their place).
pub(super) fn merge(node: Node<'_>, live: Option<&Value>, config: &Value) -> Value {
    match (live, config) {
        (Some(Value::Object(l)), Value::Object(c)) if is_granular_object(node) => {
            let mut out = l.clone();
            for (key, value) in c {
                if value.is_null() {
                    out.remove(key);
                    continue;
                }
                let merged = merge(child_node(node, key), l.get(key), value);
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(c)) if is_granular_list(node) => {
            Value::Array(merge_list(node, l, c))
        }
        (_, Value::Object(c)) if is_granular_object(node) => {
            // Nothing live to merge into: drop nulls the same way.
            let mut out = Map::new();
            for (key, value) in c {
                if !value.is_null() {
                    out.insert(key.clone(), merge(child_node(node, key), None, value));
                }
            }
            Value::Object(out)
        }
        _ => config.clone(),
    }
}

/// Merges keyed lists. Items both sides have are merged and ordered as the config
/// orders them; items only the live list has stay where they were.
fn merge_list(node: Node<'_>, live: &[Value], config: &[Value]) -> Vec<Value> {
    let item_node = node.items().unwrap_or(node);
    let lpes = lenient_elements(node, live);
    let rpes = lenient_elements(node, config);
    let mut lindex: BTreeMap<&PathElement, usize> = BTreeMap::new();
    for (i, pe) in lpes.iter().enumerate() {
        lindex.entry(pe).or_insert(i);
    }
    let mut rindex: BTreeMap<&PathElement, usize> = BTreeMap::new();
    for (i, pe) in rpes.iter().enumerate() {
        rindex.entry(pe).or_insert(i);
    }
    let shared: Vec<&PathElement> = rpes.iter().filter(|pe| lindex.contains_key(pe)).collect();
    let mut next_shared = 0usize;
    let mut merged: BTreeSet<&PathElement> = BTreeSet::new();
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let (mut li, mut ri) = (0usize, 0usize);
    let merge_item = |pe: &PathElement, r: usize| {
        let l = lindex.get(pe).map(|&i| &live[i]);
        merge(item_node, l, &config[r])
    };
    while li < lpes.len() || ri < rpes.len() {
        if li < lpes.len() && ri < rpes.len() {
            if lpes[li] == rpes[ri] {
                merged.insert(&lpes[li]);
                out.push(merge_item(&lpes[li], ri));
                li += 1;
                ri += 1;
                next_shared += 1;
                continue;
            }
            let wanted = shared.get(next_shared);
            if rindex.contains_key(&lpes[li]) && wanted.is_some_and(|w| **w != lpes[li]) {
                // A shared item, but the config puts another one first.
                li += 1;
                continue;
            }
        }
        if li < lpes.len() {
            if !rindex.contains_key(&lpes[li]) {
                out.push(live[li].clone());
                li += 1;
                continue;
            }
            if merged.contains(&lpes[li]) {
                li += 1;
                continue;
            }
        }
        if ri < rpes.len() {
            let pe = &rpes[ri];
            if merged.insert(pe) {
                out.push(merge_item(pe, ri));
            }
            if shared.get(next_shared).is_some_and(|w| *w == pe) {
                next_shared += 1;
            }
            ri += 1;
        }
    }
    out
}

/// What changed between two versions of an object, field by field.
#[derive(Debug, Default)]
pub(super) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) modified: FieldSet,
    pub(crate) removed: FieldSet,
}

pub(super) fn compare(node: Node<'_>, old: &Value, new: &Value) -> Comparison {
    let mut out = Comparison::default();
    let mut path = Vec::new();
    compare_at(node, Some(old), Some(new), &mut path, &mut out);
    out
}

fn empty_or_absent(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

fn compare_at(
    node: Node<'_>,
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) {
    if old.is_none() && new.is_none() {
        return;
    }
    let fits = |v: Option<&Value>, want_object: bool| match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(_)) => want_object,
        Some(Value::Array(_)) => !want_object,
        _ => false,
    };
    let leaf = (empty_or_absent(old) && empty_or_absent(new))
        || if is_granular_object(node) {
            !(fits(old, true) && fits(new, true))
        } else if is_granular_list(node) {
            !(fits(old, false) && fits(new, false))
        } else {
            true
        };
    if leaf {
        match (old, new) {
            (None, Some(_)) => out.added.insert(path),
            (Some(_), None) => out.removed.insert(path),
            (Some(a), Some(b)) if a != b => out.modified.insert(path),
            _ => {}
        }
        return;
    }
    if is_granular_object(node) {
        let empty = Map::new();
        let o = old.and_then(Value::as_object).unwrap_or(&empty);
        let n = new.and_then(Value::as_object).unwrap_or(&empty);
        for (key, ov) in o {
            path.push(PathElement::Field(key.clone()));
            compare_at(child_node(node, key), Some(ov), n.get(key), path, out);
            path.pop();
        }
        for (key, nv) in n {
            if !o.contains_key(key) {
                path.push(PathElement::Field(key.clone()));
                compare_at(child_node(node, key), None, Some(nv), path, out);
                path.pop();
            }
        }
    } else {
        let empty = Vec::new();
        let o = old.and_then(Value::as_array).unwrap_or(&empty);
        let n = new.and_then(Value::as_array).unwrap_or(&empty);
        let item_node = node.items().unwrap_or(node);
        let ope = lenient_elements(node, o);
        let npe = lenient_elements(node, n);
        let mut nindex: BTreeMap<&PathElement, usize> = BTreeMap::new();
        for (i, pe) in npe.iter().enumerate() {
            nindex.entry(pe).or_insert(i);
        }
        let mut oindex: BTreeMap<&PathElement, usize> = BTreeMap::new();
        for (i, pe) in ope.iter().enumerate() {
            if oindex.insert(pe, i).is_some() {
                continue;
            }
            path.push(pe.clone());
            let nv = nindex.get(pe).map(|&j| &n[j]);
            compare_at(item_node, Some(&o[i]), nv, path, out);
            path.pop();
        }
        for (j, pe) in npe.iter().enumerate() {
            if oindex.contains_key(pe) || nindex.get(pe) != Some(&j) {
                continue;
            }
            path.push(pe.clone());
            compare_at(item_node, None, Some(&n[j]), path, out);
            path.pop();
        }
    }
    match (old, new) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        _ => {}
    }
}

/// Removes from `value` every member of `set` (with all below it).
pub(super) fn remove_members(node: Node<'_>, value: &mut Value, set: &FieldSet) {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let pe = PathElement::Field(key.clone());
                if set.has_member(&pe) {
                    map.remove(&key);
                } else if let Some(child) = set.child(&pe)
                    && let Some(v) = map.get_mut(&key)
                {
                    remove_members(child_node(node, &key), v, child);
                }
            }
        }
        Value::Array(items) if is_granular_list(node) => {
            let item_node = node.items().unwrap_or(node);
            let pes = lenient_elements(node, items);
            let mut kept = Vec::with_capacity(items.len());
            for (mut item, pe) in std::mem::take(items).into_iter().zip(pes) {
                if set.has_member(&pe) {
                    continue;
                }
                if let Some(child) = set.child(&pe) {
                    remove_members(item_node, &mut item, child);
                }
                kept.push(item);
            }
            *items = kept;
        }
        _ => {}
    }
}
