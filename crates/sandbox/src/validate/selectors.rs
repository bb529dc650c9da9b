//! Label selectors: their labels, whether they match a template, and the immutable
//! selector rule on update.

use serde_json::{Map, Value};

use super::go_format::go_label_selector;
use super::meta::validate_labels;
use super::{FieldError, IMMUTABLE_MSG, sorted, str_at, strings};

pub(super) fn validate_selector_labels(
    selector: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(s) = selector {
        validate_labels(s.get("matchLabels"), &format!("{path}.matchLabels"), errs);
    }
}

pub(super) fn selector_size(selector: &Value) -> usize {
    let labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map_or(0, Map::len);
    let exprs = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    labels + exprs
}

/// `LabelSelectorAsSelector(selector).Matches(labels)`: a missing selector matches
/// nothing, an empty one everything.
pub(super) fn selector_matches(selector: Option<&Value>, labels: Option<&Value>) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    let labels = labels.and_then(Value::as_object);
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let labels_ok = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    let exprs_ok = exprs.into_iter().flatten().all(|e| {
        let key = str_at(e, "key");
        let values = strings(e.get("values"));
        let current = label(key);
        match str_at(e, "operator") {
            "In" => current.is_some_and(|c| values.iter().any(|v| v == c)),
            "NotIn" => current.is_none_or(|c| !values.iter().any(|v| v == c)),
            "Exists" => current.is_some(),
            "DoesNotExist" => current.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

pub(super) fn immutable_selector(old: &Value, new: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let old_sel = old.get("selector").filter(|s| !s.is_null());
    let new_sel = new.get("selector").filter(|s| !s.is_null());
    if normalized_selector(old_sel) != normalized_selector(new_sel) {
        errs.push(FieldError::invalid(
            path,
            &go_label_selector(new_sel),
            IMMUTABLE_MSG,
        ));
    }
}

/// Selectors compared as Go's semantic equality does: empty maps and lists equal
/// missing ones.
/// A selector's labels (sorted) and expressions.
pub(super) type SelectorKey = (Vec<(String, String)>, Vec<Value>);

pub(super) fn normalized_selector(s: Option<&Value>) -> Option<SelectorKey> {
    let s = s?;
    let labels = s
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            sorted(m)
                .into_iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let exprs = s
        .get("matchExpressions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Some((labels, exprs))
}
