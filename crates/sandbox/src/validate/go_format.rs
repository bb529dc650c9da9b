//! Values printed as Go's `%q` and `%#v` print them, since clients match on the
//! messages that quote them.

use serde_json::Value;

use super::{sorted, str_at, strings};

/// A string as Go's `%q` prints it.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A `map[string]string` as `%#v` prints it: keys sorted, `(nil)` when absent.
pub(super) fn go_string_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".to_string(),
        Some(m) => {
            let items: Vec<String> = sorted(m)
                .into_iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or(""))))
                .collect();
            format!("map[string]string{{{}}}", items.join(", "))
        }
    }
}

pub(super) fn go_string_slice(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// A `*metav1.LabelSelector` as a field error prints it (dereferenced, `%#v`).
pub(super) fn go_label_selector(v: Option<&Value>) -> String {
    let Some(s) = v else {
        return "null".to_string();
    };
    let labels = go_string_map(s.get("matchLabels").filter(|l| !l.is_null()));
    let exprs = match s.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match e.get("values").and_then(Value::as_array) {
                        None => "[]string(nil)".to_string(),
                        Some(_) => go_string_slice(&strings(e.get("values"))),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        go_quote(str_at(e, "key")),
                        go_quote(str_at(e, "operator")),
                        values
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

/// An `*intstr.IntOrString` as `%#v` prints it.
pub(super) fn go_intstr(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            n.as_i64().unwrap_or(0)
        ),
        Some(Value::String(s)) => {
            format!(
                "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
                go_quote(s)
            )
        }
        _ => "null".to_string(),
    }
}
