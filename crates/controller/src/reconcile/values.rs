//! The chart values a pass reads from outside the revision (issue #26): each
//! `source.helm.valuesFrom` ConfigMap's or Secret's key, in order, read at the start
//! of every pass with the app's own identity, as `postBuild.substituteFrom` is
//! (`super::variables`). The render stage merges them after the value files and
//! before the inline values (Flux's order, with Argo CD's value files first).
//! Their digest joins the revision's identity ([`revision_id`]): a changed value is
//! a new desired state, rendered again. A Secret's values never reach an error: a
//! document that does not parse is named with its place, not the parser's snippet.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::variables::object_data;
use crate::config::{AppConfig, ValuesFrom, VariablesKind};
use tether_core::cluster::{Cluster, ClusterError};
use tether_diff::manifest::ValuesLayer;

/// Bytes of SHA-256 in a revision's `+values.<digest>`: as many as the SOPS keys'
/// digest keeps, enough to tell one pass's values from the next.
const VALUES_DIGEST_BYTES: usize = 6;

/// Why the values could not be read. Each is worth retrying: the object may be
/// created or fixed, which moves no source, so only a later pass sees it.
#[derive(Debug, thiserror::Error)]
pub enum ValuesError {
    #[error(
        "source.helm.valuesFrom[{index}]: {kind} {namespace}/{name} not found (set optional: true if it may be absent)"
    )]
    Missing {
        index: usize,
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error(
        "source.helm.valuesFrom[{index}]: {kind} {namespace}/{name} has no key {key} (set valuesKey, or optional: true)"
    )]
    MissingKey {
        index: usize,
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
    },
    #[error("source.helm.valuesFrom[{index}]: {kind} {namespace}/{name} key {key}: {message}")]
    Invalid {
        index: usize,
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
        message: String,
    },
    #[error("source.helm.valuesFrom[{index}]: reading {kind} {namespace}/{name}: {source}")]
    Cluster {
        index: usize,
        kind: &'static str,
        namespace: String,
        name: String,
        /// Boxed: keeps the error small enough to return by value.
        #[source]
        source: Box<ClusterError>,
    },
}

/// The values of one pass, with their digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassValues {
    layers: Vec<ValuesLayer>,
    digest: String,
}

impl PassValues {
    /// The documents, in merge order, for the render stage.
    pub fn layers(&self) -> Vec<ValuesLayer> {
        self.layers.clone()
    }
}

/// The pass's values, None when the app has no `valuesFrom`. The ConfigMaps and
/// Secrets are the App's namespace's, or for an entry of the configuration file
/// those of `inventory_namespace` (tether's own), as its other Secrets are.
pub async fn read(
    cluster: &Cluster,
    app: &AppConfig,
    inventory_namespace: &str,
) -> Result<Option<PassValues>, ValuesError> {
    let entries = &app.source.helm.values_from;
    if entries.is_empty() {
        return Ok(None);
    }
    let namespace = app
        .tenant_namespace
        .as_deref()
        .unwrap_or(inventory_namespace);
    let mut layers = Vec::with_capacity(entries.len());
    for (index, from) in entries.iter().enumerate() {
        let place = Place {
            index,
            kind: from.kind.as_str(),
            namespace,
            name: &from.name,
        };
        let data = object_data(cluster, from.kind, namespace, &from.name)
            .await
            .map_err(|source| ValuesError::Cluster {
                index,
                kind: place.kind,
                namespace: namespace.to_string(),
                name: from.name.clone(),
                source: Box::new(source),
            })?;
        let Some(data) = data else {
            if from.optional {
                continue;
            }
            return Err(place.missing());
        };
        let Some((_, bytes)) = data.into_iter().find(|(k, _)| *k == from.values_key) else {
            if from.optional {
                continue;
            }
            return Err(place.missing_key(&from.values_key));
        };
        let origin = format!(
            "{} {namespace}/{} key {}",
            place.kind, from.name, from.values_key
        );
        let layer = layer(from, origin, &bytes)
            .map_err(|message| place.invalid(&from.values_key, message))?;
        layers.push(layer);
    }
    let digest = digest(&layers);
    Ok(Some(PassValues { layers, digest }))
}

/// The identity of what a pass renders with these values: `id` (the commit, the
/// variables and keys) and the values' digest (`+values.<digest>`).
pub fn revision_id(id: String, values: Option<&PassValues>) -> String {
    match values {
        Some(v) => format!("{id}+values.{}", v.digest),
        None => id,
    }
}

/// One key's text as a values document: a YAML mapping merged whole, or with
/// `targetPath` the text as one value at that path, typed as `helm --set` types it
/// unless quoted (Flux's reading). Pure.
pub fn layer(from: &ValuesFrom, origin: String, bytes: &[u8]) -> Result<ValuesLayer, String> {
    let secret = from.kind == VariablesKind::Secret;
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())?;
    let value = match &from.target_path {
        Some(keys) => keys.iter().rev().fold(set_value(text), |inner, key| {
            Value::Object(serde_json::Map::from_iter([(key.clone(), inner)]))
        }),
        None => document(text, secret)?,
    };
    Ok(ValuesLayer {
        origin,
        json: value.to_string(),
        secret,
    })
}

/// A values document: a mapping, or nothing (an empty file is no values, as helm
/// reads one). The parser's own message is shown for a ConfigMap only: for a Secret
/// it may quote the value it stopped at.
fn document(text: &str, secret: bool) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    match serde_saphyr::from_str_with_options::<Value>(text, options) {
        Ok(Value::Object(map)) => Ok(Value::Object(map)),
        Ok(Value::Null) => Ok(Value::Object(serde_json::Map::new())),
        Ok(_) => Err("is not a YAML mapping of values".into()),
        Err(_) if secret => {
            Err("is not YAML (the parser's message may quote the Secret: not shown)".into())
        }
        Err(e) => Err(format!("is not YAML: {e}")),
    }
}

/// `helm --set`'s typing of a value (`strvals.typedVal`): true, false, null and
/// integers without a leading zero are typed, anything else is text; quotes around
/// the whole text keep it text, without them (Flux's `ReplacePathValue`).
fn set_value(text: &str) -> Value {
    for quote in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(quote) && text.ends_with(quote) {
            return Value::String(text[1..text.len() - 1].to_string());
        }
    }
    match text.to_ascii_lowercase().as_str() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        "0" => return Value::from(0),
        _ => {}
    }
    if !text.starts_with('0')
        && let Ok(n) = text.parse::<i64>()
    {
        return Value::from(n);
    }
    Value::String(text.to_string())
}

/// A values file's text read from `origin` (a value file of another Git source,
/// `super::value_sources`) as a layer: a YAML mapping, or nothing. Pure.
pub fn values_document(origin: String, bytes: &[u8]) -> Result<ValuesLayer, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())?;
    Ok(ValuesLayer {
        origin,
        json: document(text, false)?.to_string(),
        secret: false,
    })
}

/// SHA-256 of every layer's origin and values, in order.
fn digest(layers: &[ValuesLayer]) -> String {
    let mut hash = Sha256::new();
    for layer in layers {
        for part in [layer.origin.as_str(), layer.json.as_str()] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
    }
    hex::encode(&hash.finalize()[..VALUES_DIGEST_BYTES])
}

/// Which `valuesFrom` entry an error is about.
struct Place<'a> {
    index: usize,
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
}

impl Place<'_> {
    fn missing(&self) -> ValuesError {
        ValuesError::Missing {
            index: self.index,
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
        }
    }

    fn missing_key(&self, key: &str) -> ValuesError {
        ValuesError::MissingKey {
            index: self.index,
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            key: key.to_string(),
        }
    }

    fn invalid(&self, key: &str, message: String) -> ValuesError {
        ValuesError::Invalid {
            index: self.index,
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            key: key.to_string(),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_VALUES_KEY;

    fn from(kind: VariablesKind, target: Option<&[&str]>) -> ValuesFrom {
        ValuesFrom {
            kind,
            name: "v".into(),
            values_key: DEFAULT_VALUES_KEY.into(),
            target_path: target.map(|t| t.iter().map(|k| k.to_string()).collect()),
            optional: false,
        }
    }

    fn json(from: &ValuesFrom, text: &str) -> Value {
        let layer = layer(from, "o".into(), text.as_bytes()).expect("a layer");
        serde_json::from_str(&layer.json).expect("JSON")
    }

    #[test]
    fn a_document_is_merged_whole_and_a_target_path_sets_one_typed_value() {
        let cm = from(VariablesKind::ConfigMap, None);
        assert_eq!(
            json(&cm, "a:\n  b: [1, x]\nc: true\n"),
            serde_json::json!({"a": {"b": [1, "x"]}, "c": true})
        );
        assert_eq!(json(&cm, "\n"), serde_json::json!({}));
        let at = from(VariablesKind::Secret, Some(&["db", "password"]));
        for (text, want) in [
            ("s3cret", serde_json::json!("s3cret")),
            ("42", serde_json::json!(42)),
            ("0042", serde_json::json!("0042")),
            ("TRUE", serde_json::json!(true)),
            ("null", Value::Null),
            ("\"42\"", serde_json::json!("42")),
            ("'true'", serde_json::json!("true")),
            ("a: b", serde_json::json!("a: b")),
        ] {
            assert_eq!(
                json(&at, text),
                serde_json::json!({"db": {"password": want}}),
                "{text}"
            );
        }
        assert!(layer(&at, "o".into(), b"x").expect("layer").secret);
    }

    #[test]
    fn values_that_do_not_parse_are_refused_without_quoting_a_secret() {
        let bad = "a: [unclosed s3cret-value\n";
        let cm = layer(
            &from(VariablesKind::ConfigMap, None),
            "o".into(),
            bad.as_bytes(),
        )
        .expect_err("not YAML");
        assert!(cm.starts_with("is not YAML: "), "{cm}");
        let secret = layer(
            &from(VariablesKind::Secret, None),
            "o".into(),
            bad.as_bytes(),
        )
        .expect_err("not YAML");
        assert!(!secret.contains("s3cret"), "{secret}");
        for (text, says) in [
            (&b"- a\n- b\n"[..], "not a YAML mapping"),
            (&[0xff], "UTF-8"),
        ] {
            let err = layer(&from(VariablesKind::ConfigMap, None), "o".into(), text)
                .map(|_| ())
                .expect_err(says);
            assert!(err.contains(says), "{says}: {err}");
        }
    }

    #[test]
    fn a_revision_id_changes_with_any_value() {
        let layers = |v: &str| {
            let layers = vec![ValuesLayer {
                origin: "ConfigMap a/b key values.yaml".into(),
                json: v.into(),
                secret: false,
            }];
            PassValues {
                digest: digest(&layers),
                layers,
            }
        };
        let id = revision_id("sha".into(), Some(&layers("{\"a\":1}")));
        assert!(id.starts_with("sha+values."), "{id}");
        assert_ne!(id, revision_id("sha".into(), Some(&layers("{\"a\":2}"))));
        assert_eq!(revision_id("sha".into(), None), "sha");
    }
}
