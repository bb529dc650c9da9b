//! Addresses of places in an object: a field, a list item by key, by value or by
//! index. Ordered and printed as the API server orders and prints them (FieldsV1
//! keys, conflict messages).

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

/// One step of a path into an object.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A struct field or map key: `f:<name>`, printed `.name`.
    Field(String),
    /// A list-map item by its key fields, sorted by name: `k:{…}`, printed
    /// `[name="web"]`.
    Key(Vec<(String, Value)>),
    /// A set item by its value: `v:<json>`, printed `[=value]`.
    Value(Value),
    /// An item of a list without identity, by position: `i:<n>`, printed `[n]`.
    Index(usize),
}

impl PathElement {
    /// A key element from unsorted key fields.
    pub(crate) fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The FieldsV1 form: `f:name`, `k:{"name":"web"}`, `v:"x"`, `i:0`.
    pub(crate) fn to_fields_v1(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut map = serde_json::Map::new();
                for (name, value) in fields {
                    map.insert(name.clone(), value.clone());
                }
                format!("k:{}", Value::Object(map))
            }
            PathElement::Value(v) => format!("v:{}", canonical_json(v)),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses one FieldsV1 key (not `.`).
    pub(crate) fn from_fields_v1(key: &str) -> Option<PathElement> {
        let (prefix, rest) = key.split_at_checked(2)?;
        match prefix {
            "f:" => Some(PathElement::Field(rest.to_string())),
            "k:" => {
                let Value::Object(map) = serde_json::from_str::<Value>(rest).ok()? else {
                    return None;
                };
                Some(PathElement::key(map.into_iter().collect()))
            }
            "v:" => serde_json::from_str(rest).ok().map(PathElement::Value),
            "i:" => rest.parse().ok().map(PathElement::Index),
            _ => None,
        }
    }
}

/// JSON with object keys sorted, so equal values print equally.
fn canonical_json(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical_json(&map[k])))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => {
            let body: Vec<String> = items.iter().map(canonical_json).collect();
            format!("[{}]", body.join(","))
        }
        other => other.to_string(),
    }
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={}", canonical_json(value)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", canonical_json(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Fields before keys before values before indices; within a kind, by name, by key
/// fields, by value, by position: the order FieldsV1 is written in.
impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.as_bytes().cmp(b.as_bytes()),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((an, av), (bn, bv)) in a.iter().zip(b.iter()) {
                    let c = an.cmp(bn).then_with(|| compare_values(av, bv));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// A total order on JSON values: numbers, then strings, booleans, lists, objects,
/// null; numbers compare numerically, lists and objects item by item.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i.cmp(&j),
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        },
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (i, j) in x.iter().zip(y.iter()) {
                let c = compare_values(i, j);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut xs: Vec<(&String, &Value)> = x.iter().collect();
            let mut ys: Vec<(&String, &Value)> = y.iter().collect();
            xs.sort_by(|p, q| p.0.cmp(q.0));
            ys.sort_by(|p, q| p.0.cmp(q.0));
            for ((xk, xv), (yk, yv)) in xs.iter().zip(ys.iter()) {
                let c = xk.cmp(yk).then_with(|| compare_values(xv, yv));
                if c != Ordering::Equal {
                    return c;
                }
            }
            xs.len().cmp(&ys.len())
        }
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => rank(a).cmp(&rank(b)),
    }
}

/// A path as the API server prints it in conflict messages:
/// `.spec.template.spec.containers[name="web"].image`.
pub fn render_path(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}
