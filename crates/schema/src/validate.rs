//! Type checking of an object against its schema: what the API server rejects when
//! it decodes a body (a string where an integer goes) and, for
//! `fieldValidation=Strict`, the fields it does not know.

use std::fmt;

use serde_json::Value;

use super::{ListType, Node, NodeKind, PathElement, ScalarType, render_path};

/// What is wrong with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// The value's JSON type is not the one the schema declares.
    WrongType {
        /// OpenAPI type name expected: `integer`, `string`, `object`, `array`, …
        expected: &'static str,
        /// JSON type name of the value found: `string`, `number`, `object`, …
        found: &'static str,
    },
    /// The schema does not declare this field.
    Unknown,
}

/// One field that does not fit the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Kubernetes' form of the path: `spec.template.spec.containers[0].image`.
    pub field: String,
    /// The path as server-side apply names it, list items by key or value:
    /// `.spec.template.spec.containers[name="web"].image`.
    pub apply_path: String,
    pub(crate) kind: FieldErrorKind,
}

impl FieldError {
    /// The cause message as the API server words it: `Invalid value: "string":
    /// spec.replicas in body must be of type integer: "string"`, or
    /// `unknown field "spec.foo"`.
    pub fn message(&self) -> String {
        match &self.kind {
            FieldErrorKind::WrongType { expected, found } => format!(
                "Invalid value: \"{found}\": {} in body must be of type {expected}: \"{found}\"",
                self.field
            ),
            FieldErrorKind::Unknown => format!("unknown field \"{}\"", self.field),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            FieldErrorKind::WrongType { .. } => write!(f, "{}: {}", self.field, self.message()),
            FieldErrorKind::Unknown => f.write_str(&self.message()),
        }
    }
}

/// The outcome of [`super::Schema::validate`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validation {
    /// Values of the wrong type: always an error.
    pub type_errors: Vec<FieldError>,
    /// Undeclared fields: an error only under `fieldValidation=Strict`, a warning
    /// otherwise (and dropped from the stored object).
    pub unknown_fields: Vec<FieldError>,
}

pub(super) fn validate(root: Node<'_>, obj: &Value) -> Validation {
    let mut out = Validation::default();
    let mut at = At {
        path: String::new(),
        elements: Vec::new(),
    };
    walk(root, obj, &mut at, &mut out);
    out
}

/// Where the walk is, in both of the API server's spellings.
struct At {
    path: String,
    elements: Vec<PathElement>,
}

impl At {
    fn error(&self, kind: FieldErrorKind) -> FieldError {
        FieldError {
            field: self.path.clone(),
            apply_path: render_path(&self.elements),
            kind,
        }
    }
}

/// How server-side apply addresses item `i` of a list of this type.
fn item_element(list_type: &ListType, i: usize, item: &Value) -> PathElement {
    match list_type {
        ListType::Map { keys } => PathElement::key(
            keys.iter()
                .filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone())))
                .collect(),
        ),
        ListType::Set => PathElement::Value(item.clone()),
        ListType::Atomic => PathElement::Index(i),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn scalar_fits(ty: ScalarType, v: &Value) -> bool {
    match ty {
        ScalarType::String => v.is_string(),
        ScalarType::Integer => v.is_i64() || v.is_u64(),
        ScalarType::Number => v.is_number(),
        ScalarType::Boolean => v.is_boolean(),
        ScalarType::IntOrString => v.is_string() || v.is_i64() || v.is_u64(),
        ScalarType::StringOrNumber => v.is_string() || v.is_number(),
    }
}

fn scalar_name(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::String => "string",
        ScalarType::Integer => "integer",
        ScalarType::Number => "number",
        ScalarType::Boolean => "boolean",
        ScalarType::IntOrString => "integer-or-string",
        ScalarType::StringOrNumber => "string-or-number",
    }
}

fn walk(node: Node<'_>, value: &Value, at: &mut At, out: &mut Validation) {
    // null decodes to the zero value of any type.
    if value.is_null() {
        return;
    }
    let wrong = |expected: &'static str, out: &mut Validation, at: &At| {
        out.type_errors.push(at.error(FieldErrorKind::WrongType {
            expected,
            found: json_type(value),
        }));
    };
    match node.kind() {
        NodeKind::Untyped => {}
        NodeKind::Scalar(ty) => {
            if !scalar_fits(ty, value) {
                wrong(scalar_name(ty), out, at);
            }
        }
        NodeKind::List(list_type) => {
            let Value::Array(items) = value else {
                return wrong("array", out, at);
            };
            let Some(item_node) = node.items() else {
                return;
            };
            for (i, item) in items.iter().enumerate() {
                let len = at.path.len();
                at.path.push_str(&format!("[{i}]"));
                at.elements.push(item_element(list_type, i, item));
                walk(item_node, item, at, out);
                at.elements.pop();
                at.path.truncate(len);
            }
        }
        NodeKind::Struct { .. } | NodeKind::Map { .. } => {
            let Value::Object(map) = value else {
                return wrong("object", out, at);
            };
            for (key, child) in map {
                let len = at.path.len();
                if !at.path.is_empty() {
                    at.path.push('.');
                }
                at.path.push_str(key);
                at.elements.push(PathElement::Field(key.clone()));
                match node.field(key) {
                    Some(child_node) => walk(child_node, child, at, out),
                    None => out.unknown_fields.push(at.error(FieldErrorKind::Unknown)),
                }
                at.elements.pop();
                at.path.truncate(len);
            }
        }
    }
}

/// Drops the fields `node` does not declare, as decoding into the kind's Go type does.
pub(super) fn prune(node: Node<'_>, value: &mut Value) {
    match (node.kind(), value) {
        (NodeKind::List(_), Value::Array(items)) => {
            if let Some(item_node) = node.items() {
                items.iter_mut().for_each(|item| prune(item_node, item));
            }
        }
        (NodeKind::Struct { .. } | NodeKind::Map { .. }, Value::Object(map)) => {
            map.retain(|key, _| node.field(key).is_some());
            for (key, child) in map.iter_mut() {
                if let Some(child_node) = node.field(key) {
                    prune(child_node, child);
                }
            }
        }
        _ => {}
    }
}
