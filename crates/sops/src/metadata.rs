//! The `sops` metadata block: who the data key is wrapped for, the MAC, and the rules
//! that say which leaves are encrypted. Read from the tree form every store reduces it
//! to (YAML and JSON carry it as a map; dotenv and INI flatten it, see `flat`).

use regex::Regex;
use serde_json::{Map, Value};

use crate::error::SopsError;

/// Where SOPS wrapped the data key.
pub(crate) enum Stanza {
    Age {
        recipient: String,
        enc: String,
    },
    Pgp {
        fingerprint: String,
        enc: String,
    },
    /// A cloud KMS or Vault key: named in errors, never opened by tether.
    Other {
        kind: &'static str,
        id: String,
    },
}

impl Stanza {
    /// How an error names this recipient.
    pub fn recipient(&self) -> String {
        match self {
            Stanza::Age { recipient, .. } => format!("age {recipient}"),
            Stanza::Pgp { fingerprint, .. } => format!("PGP {fingerprint}"),
            Stanza::Other { kind, id } => format!("{kind} {id}"),
        }
    }
}

/// The key lists SOPS may hold besides age and PGP (`stores/stores.go`), each with the
/// field naming its key.
const OTHER_KEY_LISTS: [(&str, &str, &str); 4] = [
    ("kms", "arn", "AWS KMS"),
    ("gcp_kms", "resource_id", "GCP KMS"),
    ("azure_kv", "vault_url", "Azure Key Vault"),
    ("hc_vault", "vault_address", "HashiCorp Vault"),
];

/// Which leaves are encrypted (`sops.Metadata`'s rules; at most one is set).
#[derive(Default)]
pub(crate) struct Rules {
    unencrypted_suffix: Option<String>,
    encrypted_suffix: Option<String>,
    unencrypted_regex: Option<Regex>,
    encrypted_regex: Option<Regex>,
    /// Only encrypted leaves feed the MAC.
    pub mac_only_encrypted: bool,
}

/// The suffix SOPS assumes when a file names no rule at all (`sops.DefaultUnencryptedSuffix`),
/// which old files rely on.
const DEFAULT_UNENCRYPTED_SUFFIX: &str = "_unencrypted";

impl Rules {
    /// Whether the leaf at `path` is encrypted: `shouldBeEncrypted` in sops.go, in its order.
    pub fn encrypts(&self, path: &[String]) -> bool {
        let mut encrypted = true;
        if let Some(suffix) = &self.unencrypted_suffix
            && path.iter().any(|k| k.ends_with(suffix.as_str()))
        {
            encrypted = false;
        }
        if let Some(suffix) = &self.encrypted_suffix {
            encrypted = path.iter().any(|k| k.ends_with(suffix.as_str()));
        }
        if let Some(regex) = &self.unencrypted_regex
            && path.iter().any(|k| regex.is_match(k))
        {
            encrypted = false;
        }
        if let Some(regex) = &self.encrypted_regex {
            encrypted = path.iter().any(|k| regex.is_match(k));
        }
        encrypted
    }
}

pub(crate) struct Metadata {
    pub stanzas: Vec<Stanza>,
    pub mac: Option<String>,
    pub lastmodified: String,
    pub rules: Rules,
}

impl Metadata {
    /// Reads the metadata map of `file`.
    pub fn parse(file: &str, sops: &Value) -> Result<Self, SopsError> {
        let bad = |field: &str, reason: &str| SopsError::Metadata {
            file: file.to_string(),
            field: field.to_string(),
            reason: reason.to_string(),
        };
        let map = sops.as_object().ok_or_else(|| bad("sops", "not a map"))?;
        let text = |field: &str| -> Option<String> {
            match map.get(field)? {
                Value::String(s) if !s.is_empty() => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            }
        };
        for field in ["unencrypted_comment_regex", "encrypted_comment_regex"] {
            if text(field).is_some() {
                return Err(SopsError::Unsupported {
                    file: file.to_string(),
                    what: format!("`{field}` (comments are not decrypted)"),
                });
            }
        }
        let regex = |field: &str| -> Result<Option<Regex>, SopsError> {
            text(field)
                .map(|r| Regex::new(&r).map_err(|e| bad(field, &e.to_string())))
                .transpose()
        };
        let mut rules = Rules {
            unencrypted_suffix: text("unencrypted_suffix"),
            encrypted_suffix: text("encrypted_suffix"),
            unencrypted_regex: regex("unencrypted_regex")?,
            encrypted_regex: regex("encrypted_regex")?,
            mac_only_encrypted: matches!(map.get("mac_only_encrypted"), Some(Value::Bool(true))),
        };
        if rules.unencrypted_suffix.is_none()
            && rules.encrypted_suffix.is_none()
            && rules.unencrypted_regex.is_none()
            && rules.encrypted_regex.is_none()
        {
            rules.unencrypted_suffix = Some(DEFAULT_UNENCRYPTED_SUFFIX.to_string());
        }
        let lastmodified = text("lastmodified").ok_or_else(|| bad("lastmodified", "missing"))?;
        Ok(Metadata {
            stanzas: stanzas(file, map)?,
            mac: text("mac"),
            lastmodified: rfc3339_seconds(&lastmodified),
            rules,
        })
    }
}

/// The stanzas of the top level and of `key_groups`. Several key groups mean Shamir
/// secret sharing of the data key, which tether does not do.
fn stanzas(file: &str, map: &Map<String, Value>) -> Result<Vec<Stanza>, SopsError> {
    let mut out = Vec::new();
    collect(file, map, &mut out)?;
    if let Some(Value::Array(groups)) = map.get("key_groups") {
        if groups.len() > 1 {
            return Err(SopsError::Unsupported {
                file: file.to_string(),
                what: format!("Shamir secret sharing over {} key groups", groups.len()),
            });
        }
        for group in groups.iter().filter_map(Value::as_object) {
            collect(file, group, &mut out)?;
        }
    }
    Ok(out)
}

fn collect(file: &str, map: &Map<String, Value>, out: &mut Vec<Stanza>) -> Result<(), SopsError> {
    let entries = |list: &str| -> Vec<&Map<String, Value>> {
        match map.get(list) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_object).collect(),
            _ => Vec::new(),
        }
    };
    let field = |entry: &Map<String, Value>, list: &str, name: &str| -> Result<String, SopsError> {
        match entry.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(SopsError::Metadata {
                file: file.to_string(),
                field: format!("{list}[].{name}"),
                reason: "missing".to_string(),
            }),
        }
    };
    for entry in entries("age") {
        out.push(Stanza::Age {
            recipient: field(entry, "age", "recipient")?,
            enc: field(entry, "age", "enc")?,
        });
    }
    for entry in entries("pgp") {
        out.push(Stanza::Pgp {
            fingerprint: field(entry, "pgp", "fp")?,
            enc: field(entry, "pgp", "enc")?,
        });
    }
    for (list, id, kind) in OTHER_KEY_LISTS {
        for entry in entries(list) {
            let id = entry.get(id).and_then(Value::as_str).unwrap_or_default();
            out.push(Stanza::Other {
                kind,
                id: if id.is_empty() {
                    "(unnamed)".to_string()
                } else {
                    id.to_string()
                },
            });
        }
    }
    Ok(())
}

/// The MAC's additional data is `lastmodified` as Go's `time.RFC3339` writes it, which
/// has no fractional seconds even when the stored string has them.
fn rfc3339_seconds(stored: &str) -> String {
    match stored.find('.') {
        Some(dot) if stored[..dot].contains('T') => {
            let zone = stored[dot..]
                .find(['Z', '+', '-'])
                .map_or("", |z| &stored[dot + z..]);
            format!("{}{zone}", &stored[..dot])
        }
        _ => stored.to_string(),
    }
}

/// Rebuilds the metadata map from dotenv's and INI's flat keys
/// (`pgp__list_0__map_enc` is `pgp[0].enc`; `stores/flatten.go`).
pub(crate) fn unflatten(flat: Vec<(String, String)>) -> Value {
    let mut root = Value::Object(Map::new());
    for (key, value) in flat {
        let mut node = &mut root;
        let mut parts = key.split("__").peekable();
        while let Some(part) = parts.next() {
            let last = parts.peek().is_none();
            if let Some(index) = part.strip_prefix("list_") {
                let index: usize = index.parse().unwrap_or(0);
                if !node.is_array() {
                    *node = Value::Array(Vec::new());
                }
                let items = node.as_array_mut().expect("just made an array");
                while items.len() <= index {
                    items.push(Value::Null);
                }
                node = &mut items[index];
            } else {
                let name = part.strip_prefix("map_").unwrap_or(part);
                if !node.is_object() {
                    *node = Value::Object(Map::new());
                }
                let map = node.as_object_mut().expect("just made a map");
                node = map.entry(name.to_string()).or_insert(Value::Null);
            }
            if last {
                *node = Value::String(value.clone());
            }
        }
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_keys_rebuild_lists_of_maps() {
        let flat = vec![
            ("pgp__list_0__map_fp".to_string(), "F1".to_string()),
            ("pgp__list_0__map_enc".to_string(), "E1".to_string()),
            ("pgp__list_1__map_fp".to_string(), "F2".to_string()),
            ("version".to_string(), "3.13.1".to_string()),
        ];
        assert_eq!(
            unflatten(flat),
            serde_json::json!({"pgp": [{"fp": "F1", "enc": "E1"}, {"fp": "F2"}], "version": "3.13.1"})
        );
    }

    #[test]
    fn lastmodified_loses_fractional_seconds_as_in_go() {
        assert_eq!(
            rfc3339_seconds("2016-03-16T23:34:46.123Z"),
            "2016-03-16T23:34:46Z"
        );
        assert_eq!(
            rfc3339_seconds("2016-03-16T23:34:46.5+02:00"),
            "2016-03-16T23:34:46+02:00"
        );
        assert_eq!(
            rfc3339_seconds("2016-03-16T23:34:46Z"),
            "2016-03-16T23:34:46Z"
        );
    }

    fn rules(field: &str, value: &str) -> Rules {
        let mut map = serde_json::json!({"lastmodified": "x"});
        map[field] = Value::String(value.to_string());
        Metadata::parse("f", &map).expect("parses").rules
    }

    #[test]
    fn each_rule_decides_as_sops_does() {
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let default = rules("version", "3");
        assert!(default.encrypts(&path(&["data", "password"])));
        assert!(!default.encrypts(&path(&["note_unencrypted", "x"])));
        let suffix = rules("encrypted_suffix", "_secret");
        assert!(suffix.encrypts(&path(&["db_secret", "x"])));
        assert!(!suffix.encrypts(&path(&["db", "x"])));
        let regex = rules("encrypted_regex", "^(data|stringData)$");
        assert!(regex.encrypts(&path(&["data", "token"])));
        assert!(!regex.encrypts(&path(&["metadata", "name"])));
        let clear = rules("unencrypted_regex", "^(metadata|kind)$");
        assert!(!clear.encrypts(&path(&["metadata", "name"])));
        assert!(clear.encrypts(&path(&["data", "token"])));
        let clear_suffix = rules("unencrypted_suffix", "_clear");
        assert!(clear_suffix.encrypts(&path(&["note_unencrypted"])));
    }
}
