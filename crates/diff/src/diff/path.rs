//! Field paths as people read them: `spec.template.spec.containers[name=web].image`.
//! List items with a merge key are addressed by key, never by index, so a reordered
//! list does not move a change.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    /// A field of an object (or a key of a map).
    Field(String),
    /// The list item whose key fields have these values (those the item names).
    Key(Vec<(String, Value)>),
    /// An item of an atomic list, by position.
    Index(usize),
}

/// A path from the object's root to a field.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldPath(pub Vec<Segment>);

impl FieldPath {
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// The first field name, e.g. `data` for `data.password`.
    pub fn first_field(&self) -> Option<&str> {
        match self.0.first() {
            Some(Segment::Field(f)) => Some(f),
            _ => None,
        }
    }
}

/// A plain field name is printed bare; one with dots, brackets or spaces (labels such
/// as `app.kubernetes.io/name`) is quoted so the path stays unambiguous.
fn is_plain(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Segment::Field(name) if is_plain(name) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(name)?;
                }
                Segment::Field(name) => write!(f, "[{}]", Value::String(name.clone()))?,
                Segment::Key(pairs) => {
                    f.write_str("[")?;
                    for (j, (k, v)) in pairs.iter().enumerate() {
                        if j > 0 {
                            f.write_str(",")?;
                        }
                        write!(f, "{k}={}", scalar_text(v))?;
                    }
                    f.write_str("]")?;
                }
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

impl Serialize for FieldPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_keys_indices_and_quoted_names() {
        let p = FieldPath(vec![
            Segment::Field("spec".into()),
            Segment::Field("containers".into()),
            Segment::Key(vec![("name".into(), json!("web"))]),
            Segment::Field("ports".into()),
            Segment::Key(vec![
                ("containerPort".into(), json!(80)),
                ("protocol".into(), json!("TCP")),
            ]),
            Segment::Field("args".into()),
            Segment::Index(2),
        ]);
        assert_eq!(
            p.to_string(),
            "spec.containers[name=web].ports[containerPort=80,protocol=TCP].args[2]"
        );
        let q = FieldPath(vec![
            Segment::Field("metadata".into()),
            Segment::Field("labels".into()),
            Segment::Field("app.kubernetes.io/name".into()),
        ]);
        assert_eq!(q.to_string(), "metadata.labels[\"app.kubernetes.io/name\"]");
    }
}
