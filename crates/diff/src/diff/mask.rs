//! Secret values, masked yet compared: each value becomes a short keyed hash
//! (`<secret:1a2b3c4d>`), so equal values look equal, a changed value shows as
//! changed, and neither the plain nor the base64 text ever reaches a report.

use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use super::Change;
use crate::manifest::ObjectId;

/// The key of the masking hash. Random per process in production, so a marker cannot
/// be matched against a dictionary of likely passwords; fixed in tests.
#[derive(Clone)]
pub struct MaskKey([u8; 32]);

impl std::fmt::Debug for MaskKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MaskKey(..)")
    }
}

impl MaskKey {
    pub fn new(key: [u8; 32]) -> MaskKey {
        MaskKey(key)
    }

    pub fn random() -> MaskKey {
        MaskKey(rand::random())
    }

    /// The marker shown in place of a value: 32 bits of HMAC-SHA256.
    pub fn marker(&self, value: &Value) -> Value {
        let bytes = match value {
            Value::String(s) => s.as_bytes().to_vec(),
            other => other.to_string().into_bytes(),
        };
        // HMAC accepts keys of any length, so this cannot fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            return Value::String("<secret>".to_string());
        };
        mac.update(&bytes);
        let tag = mac.finalize().into_bytes();
        Value::String(format!("<secret:{}>", hex::encode(&tag[..4])))
    }
}

/// Whether the object is a core Secret.
pub fn is_secret(id: &ObjectId) -> bool {
    id.group.is_empty() && id.kind == "Secret"
}

const SECRET_FIELDS: &[&str] = &["data", "stringData"];

fn mask_values(v: &mut Value, key: &MaskKey) {
    match v {
        Value::Object(m) => {
            for val in m.values_mut() {
                *val = key.marker(val);
            }
        }
        Value::Null => {}
        other => *other = key.marker(other),
    }
}

/// Masks every value of a Secret's `data` and `stringData`, in place.
pub fn mask_secret_object(object: &mut Value, key: &MaskKey) {
    if let Some(m) = object.as_object_mut() {
        for f in SECRET_FIELDS {
            if let Some(v) = m.get_mut(*f) {
                mask_values(v, key);
            }
        }
    }
}

/// Masks the values of a change inside a Secret's data.
pub(crate) fn mask_change(change: &mut Change, key: &MaskKey) {
    let Some(first) = change.path.first_field() else {
        return;
    };
    if !SECRET_FIELDS.contains(&first) {
        return;
    }
    let whole = change.path.0.len() == 1;
    for side in [&mut change.desired, &mut change.live]
        .into_iter()
        .flatten()
    {
        if whole {
            mask_values(side, key);
        } else if !side.is_null() {
            *side = key.marker(side);
        }
    }
}

/// A Secret with `stringData` folded into `data` (base64), as the API server stores it.
pub fn fold_string_data(secret: &Value) -> Value {
    let mut out = secret.clone();
    let Some(m) = out.as_object_mut() else {
        return out;
    };
    let Some(Value::Object(string_data)) = m.shift_remove("stringData") else {
        return out;
    };
    let data = m.entry("data").or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Some(data) = data.as_object_mut() {
        for (k, v) in string_data {
            let text = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            data.insert(k, Value::String(encoded));
        }
    }
    out
}
