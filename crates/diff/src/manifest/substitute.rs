//! Post-build substitution, the last step of the render stage: `${var}` placeholders
//! in rendered objects filled from the app's variables, as Flux's kustomize-controller
//! does it (`spec.postBuild.substitute` / `substituteFrom`). Pure: the variables come
//! in resolved (inline, ConfigMaps, Secrets, CLI flags), nothing here reads a file or
//! a cluster.
//!
//! The rules are Flux's (its envsubst, with the `$var` form disabled):
//! - `${var}` is the variable's value; `${var:=default}` and `${var:-default}` give
//!   the default when the variable is unset or empty, `${var=default}` and
//!   `${var-default}` only when it is unset;
//! - `$$` is an escaped `$` (`$${var}` renders `${var}`); any other `$` is kept;
//! - a variable's name matches `^[_[:alpha:]][_[:alpha:][:digit:]]*$`;
//! - an object labelled or annotated `kustomize.toolkit.fluxcd.io/substitute: disabled`
//!   is left alone;
//! - Flux substitutes the object's YAML text and parses it again, so a placeholder
//!   that makes up a whole plain scalar takes the type of its value (`replicas:
//!   ${replicas}` with `3` is the number 3): the same is done here per string.
//!
//! Variable values may come from Secrets: no error, `Debug` or digest shows one.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Origin;
use super::error::{ManifestError, Problem};

/// The label or annotation that exempts an object, and the value that does it.
pub const DISABLE_KEY: &str = "kustomize.toolkit.fluxcd.io/substitute";
pub const DISABLE_VALUE: &str = "disabled";

/// Flux's rule for variable names (`varsubRegex` in fluxcd/pkg/kustomize).
pub const NAME_RULE: &str = "^[_[:alpha:]][_[:alpha:][:digit:]]*$";

/// An app's variables, resolved, and whether an undefined one is an error.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Substitution {
    vars: BTreeMap<String, String>,
    /// An undefined variable without a default fails the render (Flux's
    /// `--feature-gates=StrictPostBuildSubstitutions`; tether's default); without it,
    /// it becomes the empty string.
    pub strict: bool,
}

impl fmt::Debug for Substitution {
    /// Names only: a value may come from a Secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Substitution")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("strict", &self.strict)
            .finish()
    }
}

/// Why a variable could not be defined: names the variable and where it came from,
/// never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{from}: variable name {name:?} is invalid, it must match {NAME_RULE}")]
pub struct BadVariableName {
    pub name: String,
    pub from: String,
}

impl Substitution {
    pub fn new(strict: bool) -> Substitution {
        Substitution {
            vars: BTreeMap::new(),
            strict,
        }
    }

    /// Defines (or redefines: later sources win, as in Flux) `name`, read from `from`
    /// (`postBuild.substitute`, `ConfigMap ns/name`, `--var`), which the error names.
    pub fn define(&mut self, name: &str, value: &str, from: &str) -> Result<(), BadVariableName> {
        if !is_name(name) {
            return Err(BadVariableName {
                name: name.to_string(),
                from: from.to_string(),
            });
        }
        self.vars.insert(name.to_string(), value.to_string());
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// What the variables are, as a short digest: part of the revision's identity,
    /// so a changed variable is a new desired state. SHA-256 over names and values
    /// (a digest reveals no value), strictness included.
    pub fn digest(&self) -> String {
        let mut hash = Sha256::new();
        hash.update([u8::from(self.strict)]);
        for (name, value) in &self.vars {
            for part in [name, value] {
                hash.update((part.len() as u64).to_be_bytes());
                hash.update(part.as_bytes());
            }
        }
        hex::encode(&hash.finalize()[..DIGEST_BYTES])
    }

    /// Substitutes one rendered object in place, unless it opts out. The error names
    /// the object's place and identity and the variable or expression at fault.
    pub fn apply(&self, object: &mut Value, origin: &Origin) -> Result<(), ManifestError> {
        if is_disabled(object) {
            return Ok(());
        }
        self.walk(object).map_err(|problem| {
            let id = super::ObjectId::of(object).map(|id| id.to_string());
            ManifestError::Substitution {
                at: origin.location(),
                object: id.unwrap_or_else(|| "the object".into()),
                problem: Box::new(problem),
            }
        })
    }

    fn walk(&self, value: &mut Value) -> Result<(), Problem> {
        match value {
            Value::String(text) => {
                if let Some(expanded) = self.expand(text)? {
                    *value = retype(text, expanded);
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.walk(item)?;
                }
            }
            Value::Object(map) => {
                // Keys are YAML text too; renamed ones are reinserted in place order.
                if map.keys().any(|k| k.contains('$')) {
                    let old = std::mem::take(map);
                    for (key, item) in old {
                        let key = self.expand(&key)?.unwrap_or(key);
                        map.insert(key, item);
                    }
                }
                for item in map.values_mut() {
                    self.walk(item)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The text with its placeholders filled, or None when it holds none (and no
    /// `$$`), so untouched strings are not copied.
    fn expand(&self, text: &str) -> Result<Option<String>, Problem> {
        if !text.contains('$') {
            return Ok(None);
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        let mut changed = false;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if let Some(tail) = after.strip_prefix('$') {
                out.push('$');
                rest = tail;
                changed = true;
            } else if let Some(body) = after.strip_prefix('{') {
                let end = body.find('}').ok_or_else(|| Problem::Unterminated {
                    expression: clip(&rest[at..]),
                })?;
                out.push_str(&self.evaluate(&body[..end])?);
                rest = &body[end + 1..];
                changed = true;
            } else {
                out.push('$');
                rest = after;
            }
        }
        out.push_str(rest);
        Ok(changed.then_some(out))
    }

    /// One `${…}` body: a name, optionally an operator and a default.
    fn evaluate(&self, body: &str) -> Result<String, Problem> {
        let split = body
            .find(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
            .unwrap_or(body.len());
        let (name, op) = body.split_at(split);
        if !is_name(name) {
            return Err(Problem::BadExpression {
                expression: clip(&format!("${{{body}}}")),
            });
        }
        let value = self.vars.get(name);
        let (when_empty, default) = if op.is_empty() {
            (false, None)
        } else if let Some(d) = op.strip_prefix(":=").or_else(|| op.strip_prefix(":-")) {
            (true, Some(d))
        } else if let Some(d) = op.strip_prefix('=').or_else(|| op.strip_prefix('-')) {
            (false, Some(d))
        } else {
            return Err(Problem::BadExpression {
                expression: clip(&format!("${{{body}}}")),
            });
        };
        match (value, default) {
            (Some(v), Some(d)) if when_empty && v.is_empty() => Ok(d.to_string()),
            (Some(v), _) => Ok(v.clone()),
            (None, Some(d)) => Ok(d.to_string()),
            (None, None) if self.strict => Err(Problem::Undefined {
                name: name.to_string(),
            }),
            (None, None) => Ok(String::new()),
        }
    }
}

/// Bytes of SHA-256 the digest keeps: 12 hex digits, like a short commit id.
const DIGEST_BYTES: usize = 6;

/// Longest expression quoted in an error (placeholders are short; a runaway `${`
/// in a large string is not quoted whole).
const MAX_QUOTED: usize = 64;

fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Whether the object opts out by label or annotation.
fn is_disabled(object: &Value) -> bool {
    let Some(metadata) = object.get("metadata") else {
        return false;
    };
    ["labels", "annotations"].iter().any(|field| {
        metadata
            .get(field)
            .and_then(|m| m.get(DISABLE_KEY))
            .and_then(Value::as_str)
            == Some(DISABLE_VALUE)
    })
}

/// The value a substituted string has once Flux's YAML text is parsed again. A
/// single-line string that YAML would write plain (no `: `, ` #`, surrounding blanks)
/// is re-read as a plain scalar: a number, boolean or null becomes one, a quoted one
/// loses its quotes. Anything else stays the string it is.
fn retype(original: &str, expanded: String) -> Value {
    let plain = !original.contains('\n')
        && !original.contains(": ")
        && !original.contains(" #")
        && original.trim() == original;
    if !plain || expanded.contains('\n') || expanded.trim() != expanded {
        return Value::String(expanded);
    }
    if !may_read_as_other_than_a_string(&expanded) {
        return Value::String(expanded);
    }
    match super::yaml::resolve_plain(&expanded) {
        Some(v @ (Value::Number(_) | Value::Bool(_))) => v,
        Some(Value::Null) if !expanded.is_empty() && !expanded.starts_with('#') => Value::Null,
        Some(Value::String(s)) if expanded.starts_with(['"', '\'']) => Value::String(s),
        _ => Value::String(expanded),
    }
}

/// Whether a plain scalar can read as anything but a string: a number (digits,
/// signs, `.inf`), a quoted string, `~`, or a boolean or null word (YAML 1.1's
/// included, as kubectl reads it). Spares the YAML parser the usual `eu-west-1`.
fn may_read_as_other_than_a_string(text: &str) -> bool {
    match text.as_bytes().first() {
        Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'"' | b'\'' | b'~') => true,
        Some(_) => matches!(
            text.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        ),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> Substitution {
        let mut s = Substitution::new(true);
        for (k, v) in pairs {
            s.define(k, v, "test").unwrap();
        }
        s
    }

    fn origin() -> Origin {
        Origin {
            file: "app.yaml".into(),
            document: 2,
            line: 5,
            item: None,
        }
    }

    fn one(s: &Substitution, text: &str) -> Result<Option<String>, Problem> {
        s.expand(text)
    }

    #[test]
    fn placeholders_and_defaults_follow_fluxs_envsubst() {
        let s = vars(&[("cluster", "prod"), ("empty", "")]);
        let cases = [
            ("${cluster}", "prod"),
            ("eu-${cluster}-1", "eu-prod-1"),
            ("${missing:=two}", "two"),
            ("${missing:-two}", "two"),
            ("${missing=two}", "two"),
            ("${missing-two}", "two"),
            ("${empty:=x}", "x"),
            ("${empty:-x}", "x"),
            ("${empty=x}", ""),
            ("${empty-x}", ""),
            ("${cluster:=x}", "prod"),
            ("${missing:=}", ""),
            ("$${cluster}", "${cluster}"),
            ("$$", "$"),
            ("${cluster}${cluster}", "prodprod"),
        ];
        for (text, want) in cases {
            assert_eq!(one(&s, text).unwrap().as_deref(), Some(want), "{text}");
        }
        // The `$var` form, `$(VAR)` (Kubernetes' own expansion) and a lone `$` stay.
        for text in ["$cluster", "$(HOME)", "cost $5", "no dollar"] {
            assert_eq!(one(&s, text).unwrap(), None, "{text}");
        }
    }

    #[test]
    fn an_undefined_variable_is_an_error_only_when_strict() {
        let strict = vars(&[]);
        assert_eq!(
            one(&strict, "${nope}"),
            Err(Problem::Undefined {
                name: "nope".into()
            })
        );
        let lax = Substitution::new(false);
        assert_eq!(one(&lax, "a${nope}b").unwrap().as_deref(), Some("ab"));
    }

    #[test]
    fn malformed_placeholders_are_errors_quoting_only_the_manifest() {
        let s = vars(&[("a", "secret-value")]);
        for text in ["${a.b}", "${}", "${1a}", "${a^^}", "${a:0:2}"] {
            let err = one(&s, text).unwrap_err();
            assert!(matches!(err, Problem::BadExpression { .. }), "{text}");
            assert!(!err.to_string().contains("secret-value"));
        }
        assert!(matches!(
            one(&s, "x ${a"),
            Err(Problem::Unterminated { .. })
        ));
    }

    #[test]
    fn variable_names_follow_fluxs_rule() {
        let mut s = Substitution::new(true);
        for good in ["a", "_a", "A_1", "cluster_name"] {
            assert!(s.define(good, "v", "x").is_ok(), "{good}");
        }
        for bad in ["", "1a", "a-b", "a.b", "ä"] {
            let err = s.define(bad, "hidden", "ConfigMap apps/vars").unwrap_err();
            let text = err.to_string();
            assert!(text.contains("ConfigMap apps/vars") && !text.contains("hidden"));
        }
    }

    #[test]
    fn objects_are_substituted_in_keys_and_values_with_yaml_typing() {
        let s = vars(&[
            ("replicas", "3"),
            ("on", "true"),
            ("quoted", "\"1.0\""),
            ("name", "web"),
            ("key", "tier"),
        ]);
        let mut object = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "${name}", "labels": {"${key}": "${name}-x"}},
            "spec": {
                "replicas": "${replicas}",
                "paused": "${on}",
                "version": "${quoted}",
                "label": "v${replicas}",
                "note": "size: ${replicas}",
                "script": "echo ${name}\necho $$HOME",
                "list": ["${replicas:=1}", 7]
            }
        });
        s.apply(&mut object, &origin()).unwrap();
        assert_eq!(
            object,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"tier": "web-x"}},
                "spec": {
                    "replicas": 3,
                    "paused": true,
                    "version": "1.0",
                    "label": "v3",
                    "note": "size: 3",
                    "script": "echo web\necho $HOME",
                    "list": [3, 7]
                }
            })
        );
    }

    #[test]
    fn an_object_that_opts_out_is_left_alone() {
        let s = vars(&[]);
        for field in ["labels", "annotations"] {
            let mut object = json!({
                "kind": "ConfigMap",
                "metadata": {"name": "x", field: {DISABLE_KEY: DISABLE_VALUE}},
                "data": {"script": "${undefined} $$"}
            });
            let before = object.clone();
            s.apply(&mut object, &origin()).unwrap();
            assert_eq!(object, before);
        }
    }

    #[test]
    fn an_error_names_the_file_document_object_and_variable_never_a_value() {
        let s = vars(&[("token", "hunter2")]);
        let mut object = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db", "namespace": "apps"},
            "stringData": {"a": "${token}", "b": "${cluster}"}
        });
        let text = s.apply(&mut object, &origin()).unwrap_err().to_string();
        assert!(text.contains("app.yaml, document 2"), "{text}");
        assert!(text.contains("Secret apps/db"), "{text}");
        assert!(text.contains("\"cluster\""), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn the_parser_substitutes_before_identifying_and_collects_every_error() {
        let files = [(
            "a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg-${cluster}\ndata:\n  c: ${cluster}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  r: ${region}\n",
        )];
        let s = vars(&[("cluster", "prod")]);
        let opts = super::super::ParseOptions {
            substitute: Some(&s),
            ..Default::default()
        };
        let errors = super::super::parse_files(&files, &opts).unwrap_err();
        assert_eq!(errors.0.len(), 1, "{errors}");
        let text = errors.to_string();
        assert!(
            text.contains("a.yaml, document 2") && text.contains("\"region\""),
            "{text}"
        );
        assert!(text.contains("ConfigMap other"), "{text}");

        let s = vars(&[("cluster", "prod"), ("region", "eu")]);
        let opts = super::super::ParseOptions {
            substitute: Some(&s),
            ..Default::default()
        };
        let set = super::super::parse_files(&files, &opts).unwrap();
        let names: Vec<&str> = set.objects.iter().map(|m| m.id.name.as_str()).collect();
        assert_eq!(names, ["cfg-prod", "other"]);
        assert_eq!(set.objects[1].object["data"]["r"], "eu");
    }

    #[test]
    fn the_digest_changes_with_any_variable_and_shows_none() {
        let a = vars(&[("a", "1")]);
        let b = vars(&[("a", "2")]);
        let c = vars(&[("a", "1"), ("b", "")]);
        let mut lax = vars(&[("a", "1")]);
        lax.strict = false;
        let digests = [a.digest(), b.digest(), c.digest(), lax.digest()];
        for (i, d) in digests.iter().enumerate() {
            assert_eq!(d.len(), DIGEST_BYTES * 2);
            assert_eq!(digests.iter().filter(|e| *e == d).count(), 1, "{i}");
        }
        assert_eq!(a.digest(), vars(&[("a", "1")]).digest());
        // Names and values are framed: ("ab", "") differs from ("a", "b").
        assert_ne!(vars(&[("ab", "")]).digest(), vars(&[("a", "b")]).digest());
    }
}
