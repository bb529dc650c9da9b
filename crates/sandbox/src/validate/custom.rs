//! Custom resources against their CRD version's structural schema, as kube-apiserver
//! validates them before storing (`apiextensions-apiserver/pkg/apiserver/validation`,
//! kube-openapi's validators): `type` and `nullable`, `x-kubernetes-int-or-string`,
//! `enum`, `required`, `pattern`, `format` (the formats kube-apiserver checks),
//! `minimum`/`maximum` (exclusive or not), `multipleOf`, `minLength`/`maxLength`,
//! `minItems`/`maxItems`, `minProperties`/`maxProperties`; then the CEL rules
//! ([`super::cel`]), whose errors kube-apiserver lists after the schema's.
//!
//! Messages are kube-openapi's (`spec.size in body should be greater than or equal to
//! 1`) turned into field errors the way `kubeOpenAPIResultToFieldErrors` does:
//! `Required value`, `Unsupported value: "x": supported values: "a", "b"`, `Too long: may
//! not be more than 5 bytes`, `Too many: 4: must have at most 3 items`, the type and
//! format errors as `FieldValueTypeInvalid`, the rest as `Invalid value`. The object
//! is validated pruned and defaulted, as the real server validates it: undeclared
//! fields are gone by then (see `defaults::prune_custom_resource`).

use regex::Regex;
use serde_json::{Map, Value};

use super::{FieldError, cel};

/// `apiVersion`, `kind` and `metadata` of a custom resource are checked as every
/// object's are (`validate_object_meta`), never against the CRD's schema.
const ROOT_META: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Checks `object` against `schema` (a CRD version's `openAPIV3Schema`), adding
/// kube-apiserver's errors in its order: the schema's, then the CEL rules'.
pub(crate) fn validate(schema: &Value, object: &Value, errs: &mut Vec<FieldError>) {
    let Some(map) = object.as_object() else {
        return;
    };
    check_object(schema, map, "", true, errs);
    cel::validate(schema, object, errs);
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Go's `%v` of a JSON number as kube-openapi prints bounds and values: `1`, `1.5`.
fn number_text(n: f64) -> String {
    format!("{n}")
}

/// The invalid value of an error, as `field.Error` prints it: strings quoted, numbers
/// and booleans bare.
fn rendered(value: &Value) -> String {
    match value {
        Value::String(s) => super::go_quote(s),
        Value::Number(_) | Value::Bool(_) => value.to_string(),
        other => super::go_quote(cel::type_name(other)),
    }
}

fn check(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if value.is_null() {
        // Nulls of non-nullable fields were pruned; one left is a list item or a map
        // value, and only `nullable` or an untyped schema allows it.
        if !nullable(schema) && declared_type(schema).is_some() {
            type_error(schema, value, path, errs);
        }
        return;
    }
    let typed = type_fits(schema, value);
    if !typed {
        type_error(schema, value, path, errs);
    }
    check_enum(schema, value, path, errs);
    if !typed {
        return;
    }
    match value {
        Value::String(text) => check_string(schema, text, path, errs),
        Value::Number(n) => check_number(schema, n.as_f64().unwrap_or_default(), value, path, errs),
        Value::Array(items) => {
            check_count(schema, "Items", items.len(), path, errs);
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(map) => check_object(schema, map, path, false, errs),
        Value::Bool(_) | Value::Null => {}
    }
}

fn nullable(schema: &Value) -> bool {
    schema["nullable"].as_bool() == Some(true)
}

/// The type a schema insists on: `integer,string` for `x-kubernetes-int-or-string`,
/// none for an untyped (preserved or embedded) node.
fn declared_type(schema: &Value) -> Option<&str> {
    if schema["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        return Some("integer,string");
    }
    schema["type"].as_str().filter(|t| !t.is_empty())
}

fn is_integer(value: &Value) -> bool {
    // kube-openapi takes 2.0 for an integer, as JSON does not tell them apart.
    value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn type_fits(schema: &Value, value: &Value) -> bool {
    match declared_type(schema) {
        None => true,
        Some("integer,string") => value.is_string() || is_integer(value),
        Some("string") => value.is_string(),
        Some("integer") => is_integer(value),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.is_array(),
        Some("object") => value.is_object(),
        Some(_) => true,
    }
}

/// `spec.size: Invalid value: "string": spec.size in body must be of type integer:
/// "string"` (`FieldValueTypeInvalid`).
fn type_error(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let expected = declared_type(schema).unwrap_or_default();
    errs.push(must_be_of_type(path, expected, cel::type_name(value)));
}

/// kube-openapi's `InvalidType`, of a value's type or of a string's format: `found`
/// is both the invalid value and the end of the message.
fn must_be_of_type(path: &str, expected: &str, found: &str) -> FieldError {
    let quoted = super::go_quote(found);
    FieldError::type_invalid(
        path,
        &quoted,
        &format!("{path} in body must be of type {expected}: {quoted}"),
    )
}

fn check_enum(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(allowed) = schema["enum"].as_array() else {
        return;
    };
    if allowed.iter().any(|a| a == value) {
        return;
    }
    // Each allowed value as a string: strings as they are, others as JSON.
    let allowed: Vec<String> = allowed
        .iter()
        .map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string))
        .collect();
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    errs.push(FieldError::not_supported_rendered(
        path,
        &rendered(value),
        &allowed,
    ));
}

fn check_string(schema: &Value, text: &str, path: &str, errs: &mut Vec<FieldError>) {
    let chars = text.chars().count();
    if let Some(max) = schema["maxLength"].as_u64()
        && chars as u64 > max
    {
        errs.push(FieldError::too_long(path, max as usize));
    }
    if let Some(min) = schema["minLength"].as_u64()
        && (chars as u64) < min
    {
        errs.push(FieldError::invalid_str(
            path,
            text,
            &format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        // A pattern that does not compile was refused with the CRD; none gets here.
        let matches = Regex::new(pattern).map_or(true, |re| re.is_match(text));
        if !matches {
            errs.push(FieldError::invalid_str(
                path,
                text,
                &format!("{path} in body should match '{pattern}'"),
            ));
        }
    }
    if let Some(format) = schema["format"].as_str()
        && !super::formats::conforms(format, text)
    {
        errs.push(must_be_of_type(path, format, text));
    }
}

fn check_number(schema: &Value, n: f64, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let mut fail = |detail: String| {
        errs.push(FieldError::invalid(
            path,
            &rendered(value),
            &format!("{path} in body {detail}"),
        ))
    };
    if let Some(min) = schema["minimum"].as_f64() {
        if schema["exclusiveMinimum"].as_bool() == Some(true) {
            if n <= min {
                fail(format!("should be greater than {}", number_text(min)));
            }
        } else if n < min {
            fail(format!(
                "should be greater than or equal to {}",
                number_text(min)
            ));
        }
    }
    if let Some(max) = schema["maximum"].as_f64() {
        if schema["exclusiveMaximum"].as_bool() == Some(true) {
            if n >= max {
                fail(format!("should be less than {}", number_text(max)));
            }
        } else if n > max {
            fail(format!(
                "should be less than or equal to {}",
                number_text(max)
            ));
        }
    }
    if let Some(factor) = schema["multipleOf"].as_f64()
        && factor > 0.0
        && (n / factor).fract() != 0.0
    {
        fail(format!("should be a multiple of {}", number_text(factor)));
    }
}

/// `minItems`/`maxItems` (`what` = `Items`) or `minProperties`/`maxProperties`
/// (`Properties`): too many is `Too many: 4: must have at most 3 items`, too few
/// kube-openapi's `should have at least 2 items` (or `properties`).
fn check_count(schema: &Value, what: &str, count: usize, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(max) = schema[format!("max{what}")].as_u64()
        && count as u64 > max
    {
        errs.push(FieldError::too_many(path, count, max as usize));
    }
    if let Some(min) = schema[format!("min{what}")].as_u64()
        && (count as u64) < min
    {
        errs.push(FieldError::invalid(
            path,
            &count.to_string(),
            &format!(
                "{path} in body should have at least {min} {}",
                what.to_lowercase()
            ),
        ));
    }
}

fn check_object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    is_root: bool,
    errs: &mut Vec<FieldError>,
) {
    check_count(schema, "Properties", map.len(), path, errs);
    for name in schema["required"].as_array().into_iter().flatten() {
        if let Some(name) = name.as_str()
            && !map.contains_key(name)
        {
            errs.push(FieldError::required(&child_path(path, name), ""));
        }
    }
    let props = schema["properties"].as_object();
    let extra = schema.get("additionalProperties").filter(|s| s.is_object());
    for (key, value) in map {
        if is_root && ROOT_META.contains(&key.as_str()) {
            continue;
        }
        // A key the schema does not declare is left only where it preserves unknown
        // fields: anything goes there.
        if let Some(child) = props.and_then(|p| p.get(key)).or(extra) {
            check(child, value, &child_path(path, key), errs);
        }
    }
}

#[cfg(test)]
mod tests;
