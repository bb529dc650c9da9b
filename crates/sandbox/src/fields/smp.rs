//! Strategic merge patch (`application/strategic-merge-patch+json`): a JSON merge
//! patch in which lists with a patch merge key merge item by item, with the
//! `$patch`, `$retainKeys`, `$setElementOrder/…` and `$deleteFromPrimitiveList/…`
//! directives kubectl sends.

use serde_json::{Map, Value};

use tether_schema::{Node, PatchStrategy, Schema};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// A patch the API server would refuse (400 `BadRequest`); retrying cannot help.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    #[error("the patch is not a JSON object")]
    NotAnObject,
    #[error("unknown patch type: {0}")]
    UnknownDirective(String),
    #[error("invalid {directive}: {reason}")]
    InvalidDirective { directive: String, reason: String },
    /// A list item of a keyed list without its merge key, worded as the API server
    /// words it.
    #[error("map: {item} does not contain declared merge key: {key}")]
    MissingMergeKey { item: String, key: String },
}

/// Applies a strategic merge patch to `original`: objects merge key by key (`null`
/// deletes), lists with a patch merge key merge by it (containers by `name`, ports by
/// `containerPort`), lists that merge without a key are unions of scalars, and all
/// other lists are replaced.
pub fn strategic_merge_patch(
    schema: &Schema,
    original: &Value,
    patch: &Value,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::NotAnObject);
    };
    let empty = Map::new();
    let original = original.as_object().unwrap_or(&empty);
    match merge_object(schema.root(), original, patch)? {
        Some(out) => Ok(Value::Object(out)),
        None => Ok(Value::Object(Map::new())),
    }
}

fn patch_directive(patch: &Map<String, Value>) -> Result<Option<&str>, PatchError> {
    match patch.get(PATCH) {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "delete" | "merge") => {
            Ok(Some(s.as_str()))
        }
        Some(other) => Err(PatchError::UnknownDirective(match other {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        })),
    }
}

/// Merges `patch` into `original`; `None` when the patch deletes the object.
fn merge_object(
    node: Node<'_>,
    original: &Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    let empty = Map::new();
    let original = match patch_directive(patch)? {
        Some("delete") => return Ok(None),
        // Replace: the patch (cleaned of directives) is the new value.
        Some("replace") => &empty,
        _ => original,
    };
    let mut out = original.clone();
    let mut orders = Vec::new();
    let mut deletions = Vec::new();
    let mut retain: Option<Vec<String>> = None;
    for (key, value) in patch {
        if key == PATCH {
            continue;
        }
        if key == RETAIN_KEYS {
            let keys = value
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .ok_or_else(|| PatchError::InvalidDirective {
                    directive: RETAIN_KEYS.into(),
                    reason: "must be a list of field names".into(),
                })?;
            retain = Some(keys);
            continue;
        }
        let list = || {
            value
                .as_array()
                .ok_or_else(|| PatchError::InvalidDirective {
                    directive: key.clone(),
                    reason: "must be a list".into(),
                })
        };
        if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            orders.push((field.to_string(), list()?.clone()));
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            deletions.push((field.to_string(), list()?.clone()));
            continue;
        }
        if value.is_null() {
            out.remove(key);
            continue;
        }
        let child = node.field(key).unwrap_or_else(Node::untyped);
        let default_strategy = PatchStrategy::default();
        let strategy = node.field_patch_strategy(key).unwrap_or(&default_strategy);
        let merged = match (out.get(key), value) {
            (Some(Value::Object(o)), Value::Object(p))
                if child.is_object() && !strategy.replace =>
            {
                merge_object(child, o, p)?.map(Value::Object)
            }
            (_, Value::Object(p)) => merge_object(child, &empty, p)?.map(Value::Object),
            (Some(Value::Array(o)), Value::Array(p)) => {
                Some(Value::Array(merge_list(child, strategy, o, p)?))
            }
            (_, Value::Array(p)) => Some(Value::Array(merge_list(child, strategy, &[], p)?)),
            (_, v) => Some(v.clone()),
        };
        match merged {
            Some(v) => {
                out.insert(key.clone(), v);
            }
            None => {
                out.remove(key);
            }
        }
    }
    for (field, values) in deletions {
        if let Some(Value::Array(items)) = out.get_mut(&field) {
            items.retain(|item| !values.contains(item));
        }
    }
    for (field, order) in orders {
        let key = node
            .field_patch_strategy(&field)
            .and_then(|s| s.merge_key.clone());
        let server = match original.get(&field) {
            Some(Value::Array(server)) => server.clone(),
            _ => Vec::new(),
        };
        if let Some(Value::Array(items)) = out.get_mut(&field) {
            reorder(items, &order, key.as_deref(), &server);
        }
    }
    if let Some(keep) = retain {
        out.retain(|k, _| keep.iter().any(|r| r == k));
    }
    Ok(Some(out))
}

fn same_item(a: &Value, b: &Value, key: Option<&str>) -> bool {
    match key {
        Some(k) => a.get(k).is_some() && a.get(k) == b.get(k),
        None => a == b,
    }
}

/// Orders a merged list as `$setElementOrder` asks: the items it names in its order,
/// and the items only the server had interleaved among them where the server list
/// had them (an item only the server had goes before a named item it preceded).
fn reorder(items: &mut Vec<Value>, order: &[Value], key: Option<&str>, server: &[Value]) {
    let position = |list: &[Value], item: &Value| list.iter().position(|o| same_item(o, item, key));
    let mut named: Vec<(usize, Value)> = Vec::new();
    let mut server_only = Vec::new();
    for item in std::mem::take(items) {
        match position(order, &item) {
            Some(i) => named.push((i, item)),
            None => server_only.push(item),
        }
    }
    named.sort_by_key(|(i, _)| *i);
    let mut named = named.into_iter().map(|(_, item)| item).peekable();
    let mut server_only = server_only.into_iter().peekable();
    loop {
        let take_server = match (server_only.peek(), named.peek()) {
            (Some(s), Some(n)) => match (position(server, s), position(server, n)) {
                (Some(si), Some(ni)) => si < ni,
                _ => false,
            },
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_server {
            server_only.next()
        } else {
            named.next()
        };
        items.extend(next);
    }
}

fn merge_list(
    node: Node<'_>,
    strategy: &PatchStrategy,
    original: &[Value],
    patch: &[Value],
) -> Result<Vec<Value>, PatchError> {
    let item_node = node.items().unwrap_or_else(Node::untyped);
    let replace_all = patch.iter().any(|item| {
        item.as_object()
            .is_some_and(|m| m.get(PATCH).and_then(Value::as_str) == Some("replace"))
    });
    let base: &[Value] = if replace_all || !strategy.merge {
        &[]
    } else {
        original
    };
    let mut out = base.to_vec();
    for item in patch {
        match (item, strategy.merge_key.as_deref()) {
            (Value::Object(p), _) if p.get(PATCH).and_then(Value::as_str) == Some("replace") => {}
            (Value::Object(p), Some(key)) if strategy.merge && !replace_all => {
                let directive = patch_directive(p)?;
                let Some(id) = p.get(key) else {
                    return Err(PatchError::MissingMergeKey {
                        item: Value::Object(p.clone()).to_string(),
                        key: key.to_string(),
                    });
                };
                let pos = out.iter().position(|o| o.get(key) == Some(id));
                if directive == Some("delete") {
                    out.retain(|o| o.get(key) != Some(id));
                    continue;
                }
                let empty = Map::new();
                let orig = pos.and_then(|i| out[i].as_object()).unwrap_or(&empty);
                if let Some(merged) = merge_object(item_node, orig, p)? {
                    match pos {
                        Some(i) => out[i] = Value::Object(merged),
                        None => out.push(Value::Object(merged)),
                    }
                }
            }
            (Value::Object(p), _) => {
                if let Some(merged) = merge_object(item_node, &Map::new(), p)? {
                    out.push(Value::Object(merged));
                }
            }
            (v, _) if strategy.merge && !replace_all => {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            (v, _) => out.push(v.clone()),
        }
    }
    Ok(out)
}
