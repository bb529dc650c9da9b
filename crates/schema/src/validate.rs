//! Type checking of an object against its schema: what the API server rejects when
//! it decodes a body (a string where an integer goes) and, for
//! `fieldValidation=Strict`, the fields it does not know.

use std::fmt;

use serde_json::Value;

use super::{Node, NodeKind, ScalarType};

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
    pub kind: FieldErrorKind,
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

impl Validation {
    /// Neither type errors nor unknown fields.
    pub fn is_clean(&self) -> bool {
        self.type_errors.is_empty() && self.unknown_fields.is_empty()
    }
}

pub(super) fn validate(root: Node<'_>, obj: &Value) -> Validation {
    let mut out = Validation::default();
    walk(root, obj, &mut String::new(), &mut out);
    out
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

fn walk(node: Node<'_>, value: &Value, path: &mut String, out: &mut Validation) {
    // null decodes to the zero value of any type.
    if value.is_null() {
        return;
    }
    let wrong = |expected: &'static str, out: &mut Validation, path: &str| {
        out.type_errors.push(FieldError {
            field: path.to_string(),
            kind: FieldErrorKind::WrongType {
                expected,
                found: json_type(value),
            },
        });
    };
    match node.kind() {
        NodeKind::Untyped => {}
        NodeKind::Scalar(ty) => {
            if !scalar_fits(ty, value) {
                wrong(scalar_name(ty), out, path);
            }
        }
        NodeKind::List(_) => {
            let Value::Array(items) = value else {
                return wrong("array", out, path);
            };
            let Some(item_node) = node.items() else {
                return;
            };
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item_node, item, path, out);
                path.truncate(len);
            }
        }
        NodeKind::Struct { .. } | NodeKind::Map { .. } => {
            let Value::Object(map) = value else {
                return wrong("object", out, path);
            };
            for (key, child) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match node.field(key) {
                    Some(child_node) => walk(child_node, child, path, out),
                    None => out.unknown_fields.push(FieldError {
                        field: path.clone(),
                        kind: FieldErrorKind::Unknown,
                    }),
                }
                path.truncate(len);
            }
        }
    }
}
