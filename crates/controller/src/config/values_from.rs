//! `source.helm.valuesFrom` (issue #26): Flux's `HelmRelease.spec.valuesFrom` under
//! the same names, for a chart in Git or of a Helm repository. Each entry names a
//! ConfigMap or Secret, the key holding a values document (`valuesKey`, Flux's
//! default `values.yaml`), or one value to set at `targetPath`. Checked here; the
//! objects are read at every pass with the app's identity (`reconcile::values`).

use super::check::{Checker, dns1123_subdomain, line_of};
use super::post_build::VariablesKind;
use super::raw::RawValuesFrom;

/// The key read when an entry names none: Flux's default.
pub const DEFAULT_VALUES_KEY: &str = "values.yaml";

/// A data key of a ConfigMap or Secret: at most this long (Kubernetes' limit).
const MAX_KEY_LEN: usize = 253;

/// One `valuesFrom` entry, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuesFrom {
    pub kind: VariablesKind,
    pub name: String,
    /// The data key holding the values ([`DEFAULT_VALUES_KEY`] when unset).
    pub values_key: String,
    /// Set the key's whole text as one value at this path (its keys, outermost
    /// first) instead of merging a document.
    pub target_path: Option<Vec<String>>,
    /// A missing object or key is skipped rather than failing the pass.
    pub optional: bool,
}

/// The keys of a dot-notation `targetPath` (`a.b.c`; `\.` is a dot inside a key).
/// List indexes (`a[0]`) are refused rather than read another way than Helm does.
pub fn target_path_keys(path: &str) -> Result<Vec<String>, String> {
    let mut keys = vec![String::new()];
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) => keys.last_mut().into_iter().for_each(|k| k.push(next)),
                None => return Err("ends with an escape".into()),
            },
            '.' => keys.push(String::new()),
            '[' | ']' => return Err("list indexes are not supported".into()),
            c => keys.last_mut().into_iter().for_each(|k| k.push(c)),
        }
    }
    if keys.iter().any(String::is_empty) {
        return Err("an empty key (a.b.c, with \\. for a dot inside a key)".into());
    }
    Ok(keys)
}

/// Checks `valuesFrom` at `path` (`apps[0].source.helm.valuesFrom`), reporting every
/// problem.
pub(super) fn resolve_values_from(
    raw: &[super::raw::S<RawValuesFrom>],
    path: &str,
    check: &mut Checker,
) -> Vec<ValuesFrom> {
    raw.iter()
        .enumerate()
        .filter_map(|(i, from)| {
            let place = format!("{path}[{i}]");
            let from = &from.value;
            let kind = match from.kind.value.as_str() {
                "ConfigMap" => VariablesKind::ConfigMap,
                "Secret" => VariablesKind::Secret,
                _ => {
                    check.report(
                        format!("{place}.kind"),
                        line_of(&from.kind),
                        "must be ConfigMap or Secret",
                    );
                    return None;
                }
            };
            if let Err(message) = dns1123_subdomain(&from.name.value) {
                check.report(format!("{place}.name"), line_of(&from.name), message);
            }
            let values_key = match &from.values_key {
                Some(key) => {
                    let valid = key
                        .value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
                    if key.value.is_empty() || key.value.len() > MAX_KEY_LEN || !valid {
                        check.report(
                            format!("{place}.valuesKey"),
                            line_of(key),
                            "must be a ConfigMap or Secret key: letters, digits, '-', '_', '.'",
                        );
                    }
                    key.value.clone()
                }
                None => DEFAULT_VALUES_KEY.to_string(),
            };
            let target_path = from.target_path.as_ref().and_then(|target| {
                target_path_keys(&target.value)
                    .map_err(|message| {
                        check.report(
                            format!("{place}.targetPath"),
                            line_of(target),
                            format!("{:?}: {message}", target.value),
                        )
                    })
                    .ok()
            });
            Some(ValuesFrom {
                kind,
                name: from.name.value.clone(),
                values_key,
                target_path,
                optional: from.optional,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn values_from_takes_fluxs_names_and_defaults() {
        let text = "apps:\n- name: a\n  source:\n    repo: r\n    helm:\n      valuesFrom:\n      - {kind: ConfigMap, name: common}\n      - {kind: Secret, name: db, valuesKey: prod.yaml, targetPath: 'db.pass\\.word', optional: true}\n";
        let config = Config::parse(text, "t").expect("valid");
        let from = &config.apps[0].source.helm.values_from;
        assert_eq!(
            from,
            &[
                ValuesFrom {
                    kind: VariablesKind::ConfigMap,
                    name: "common".into(),
                    values_key: DEFAULT_VALUES_KEY.into(),
                    target_path: None,
                    optional: false,
                },
                ValuesFrom {
                    kind: VariablesKind::Secret,
                    name: "db".into(),
                    values_key: "prod.yaml".into(),
                    target_path: Some(vec!["db".into(), "pass.word".into()]),
                    optional: true,
                },
            ]
        );
    }

    #[test]
    fn a_bad_values_from_entry_is_named_by_its_field() {
        let text = "apps:\n- name: a\n  source:\n    repo: r\n    helm:\n      valuesFrom:\n      - {kind: Pod, name: x}\n      - {kind: Secret, name: Bad_Name, valuesKey: 'a/b', targetPath: 'a..b'}\n      - {kind: ConfigMap, name: ok, targetPath: 'list[0]'}\n";
        let err = Config::parse(text, "t").unwrap_err().to_string();
        for want in [
            "apps[0].source.helm.valuesFrom[0].kind",
            "apps[0].source.helm.valuesFrom[1].name",
            "apps[0].source.helm.valuesFrom[1].valuesKey",
            "apps[0].source.helm.valuesFrom[1].targetPath",
            "list indexes are not supported",
        ] {
            assert!(err.contains(want), "{want}: {err}");
        }
    }
}
