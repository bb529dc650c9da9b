//! The walk over a SOPS tree (`sops.Tree.Decrypt`): every leaf the rules encrypt is
//! opened with its path (`a:b:c:`, list items under their list's path) as additional
//! data, and every leaf, clear or not, feeds the MAC in document order as SOPS writes
//! it (`ToBytes`: `True`/`False`, Go's shortest float form). The MAC is then checked
//! against the stored one, itself encrypted under `lastmodified`.

use serde_json::{Number, Value};
use sha2::{Digest, Sha512};

use crate::cipher::{self, CipherError, Opened, ValueType};
use crate::error::SopsError;
use crate::metadata::Metadata;

/// One file's decryption in progress: its data key, its rules and the running MAC.
pub(crate) struct Walk<'a> {
    pub file: &'a str,
    pub key: &'a [u8],
    pub metadata: &'a Metadata,
    mac: Sha512,
}

impl<'a> Walk<'a> {
    pub fn new(file: &'a str, key: &'a [u8], metadata: &'a Metadata) -> Self {
        Walk {
            file,
            key,
            metadata,
            mac: Sha512::new(),
        }
    }

    /// Decrypts every encrypted leaf under `value` in place.
    pub fn tree(&mut self, value: &mut Value) -> Result<(), SopsError> {
        visit(value, &mut Vec::new(), &mut |leaf, path| {
            self.leaf(leaf, path)
        })
    }

    fn leaf(&mut self, leaf: &mut Value, path: &[String]) -> Result<(), SopsError> {
        let encrypted = self.metadata.rules.encrypts(path);
        let feeds_mac = encrypted || !self.metadata.rules.mac_only_encrypted;
        if !encrypted {
            if feeds_mac {
                self.mac.update(go_bytes(leaf));
            }
            return Ok(());
        }
        match leaf {
            // SOPS leaves empty strings and nulls as they are (`aes.Cipher.Encrypt`).
            Value::Null => Ok(()),
            Value::String(s) if s.is_empty() => Ok(()),
            Value::String(s) => {
                let opened = self.open(s, path)?;
                self.mac.update(&opened.bytes);
                *leaf = typed(opened).map_err(|reason| self.value_error(path, reason))?;
                Ok(())
            }
            _ => Err(self.value_error(path, "a clear value where the rules say encrypted")),
        }
    }

    /// Opens one value at `path` and feeds it to the MAC: for formats whose leaf is
    /// bytes, not a typed value (the binary store's `data`).
    pub fn raw(&mut self, value: &str, path: &[String]) -> Result<Vec<u8>, SopsError> {
        let opened = self.open(value, path)?;
        self.mac.update(&opened.bytes);
        Ok(opened.bytes)
    }

    fn open(&self, value: &str, path: &[String]) -> Result<Opened, SopsError> {
        let aad: String = path.iter().map(|k| format!("{k}:")).collect();
        cipher::decrypt(value, self.key, &aad)
            .map_err(|e: CipherError| self.value_error(path, e.reason()))
    }

    fn value_error(&self, path: &[String], reason: &'static str) -> SopsError {
        SopsError::Value {
            file: self.file.to_string(),
            path: path.join(":"),
            reason,
        }
    }

    /// Checks the MAC over everything walked against the stored one.
    pub fn verify(self) -> Result<(), SopsError> {
        let file = self.file.to_string();
        let stored = self
            .metadata
            .mac
            .as_deref()
            .ok_or_else(|| SopsError::MacMissing { file: file.clone() })?;
        let opened =
            cipher::decrypt(stored, self.key, &self.metadata.lastmodified).map_err(|e| {
                SopsError::Value {
                    file: file.clone(),
                    path: "sops:mac".to_string(),
                    reason: e.reason(),
                }
            })?;
        let computed = hex::encode_upper(self.mac.finalize());
        if opened.bytes != computed.as_bytes() {
            return Err(SopsError::MacMismatch { file });
        }
        Ok(())
    }
}

/// Calls `f` on every leaf under `value` with its path, in document order: map keys
/// extend the path, list items keep their list's (`sops.TreeBranch.walkBranch`).
pub(crate) fn visit<F>(
    value: &mut Value,
    path: &mut Vec<String>,
    f: &mut F,
) -> Result<(), SopsError>
where
    F: FnMut(&mut Value, &[String]) -> Result<(), SopsError>,
{
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                path.push(key.clone());
                visit(child, path, f)?;
                path.pop();
            }
        }
        Value::Array(items) => {
            for item in items {
                visit(item, path, f)?;
            }
        }
        leaf => f(leaf, path)?,
    }
    Ok(())
}

/// A leaf's bytes as Go's `sops.ToBytes` writes them.
pub(crate) fn go_bytes(leaf: &Value) -> Vec<u8> {
    match leaf {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Bool(true) => b"True".to_vec(),
        Value::Bool(false) => b"False".to_vec(),
        Value::Number(n) if n.is_f64() => go_float(n.as_f64().unwrap_or_default()).into_bytes(),
        Value::Number(n) => n.to_string().into_bytes(),
        Value::Null | Value::Array(_) | Value::Object(_) => Vec::new(),
    }
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)`: the shortest digits that read back, no
/// exponent; Rust's `Display` for `f64` is the same.
fn go_float(f: f64) -> String {
    f.to_string()
}

/// The decrypted bytes as the value they were, by their `type:`.
fn typed(opened: Opened) -> Result<Value, &'static str> {
    let text = String::from_utf8(opened.bytes).map_err(|_| "not UTF-8")?;
    Ok(match opened.kind {
        ValueType::Str | ValueType::Bytes | ValueType::Comment => Value::String(text),
        ValueType::Int => Value::Number(text.parse::<i64>().map_err(|_| "not an int")?.into()),
        ValueType::Float => {
            let f: f64 = text.parse().map_err(|_| "not a float")?;
            Value::Number(Number::from_f64(f).ok_or("not a finite float")?)
        }
        // Go's strconv.ParseBool, which SOPS reads booleans with.
        ValueType::Bool => Value::Bool(match text.as_str() {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
            "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
            _ => return Err("not a bool"),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_leaves_hash_as_go_writes_them() {
        assert_eq!(go_bytes(&Value::Bool(true)), b"True");
        assert_eq!(go_bytes(&serde_json::json!(25.4)), b"25.4");
        assert_eq!(
            go_bytes(&serde_json::json!(1e21)),
            b"1000000000000000000000"
        );
        assert_eq!(go_bytes(&serde_json::json!(-3)), b"-3");
        assert_eq!(go_float(0.1 + 0.2), "0.30000000000000004");
    }
}
