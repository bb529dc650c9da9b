//! An app's `postBuild:` block, Flux's `spec.postBuild` under the same names: the
//! variables post-build substitution fills `${var}` placeholders with, inline
//! (`substitute`) and from ConfigMaps and Secrets (`substituteFrom`), and whether an
//! undefined one is an error (`strict`). Parsed and checked here; the ConfigMaps and
//! Secrets are read at each pass (`reconcile::variables`), in the App's namespace, or
//! for an entry of the file in the inventory namespace (tether's own).

use std::collections::BTreeMap;

use serde_json::Value;

use super::check::{Checker, dns1123_subdomain, line_of};
use super::raw::RawPostBuild;
use tether_diff::manifest::substitute::Substitution;

/// Flux's default is lenient (an undefined variable becomes ""), unless its
/// `StrictPostBuildSubstitutions` feature gate is on; tether is strict unless told,
/// as the issue asks: a placeholder reaching the cluster empty is a silent outage.
pub const DEFAULT_STRICT: bool = true;

/// `postBuild:` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostBuildConfig {
    /// Inline variables, checked by name; applied before `substitute_from`.
    pub substitute: BTreeMap<String, String>,
    /// Read at each pass, in order: a later source's variable wins.
    pub substitute_from: Vec<VariablesFrom>,
    /// An undefined variable without a default fails the revision ([`DEFAULT_STRICT`]).
    pub strict: bool,
}

/// One `substituteFrom` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariablesFrom {
    pub kind: VariablesKind,
    pub name: String,
    /// A missing object is skipped rather than failing the pass (Flux's `optional`).
    pub optional: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VariablesKind {
    ConfigMap,
    Secret,
}

impl VariablesKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VariablesKind::ConfigMap => "ConfigMap",
            VariablesKind::Secret => "Secret",
        }
    }
}

impl PostBuildConfig {
    /// The inline variables as a substitution, to which the sources' are added.
    pub fn inline(&self) -> Substitution {
        let mut substitution = Substitution::new(self.strict);
        for (name, value) in &self.substitute {
            // Names were checked when the configuration loaded.
            let _ = substitution.define(name, value, "postBuild.substitute");
        }
        substitution
    }
}

/// Checks `postBuild` at `path` (`apps[0].postBuild`), reporting every problem.
pub(super) fn resolve_post_build(
    raw: &RawPostBuild,
    path: &str,
    check: &mut Checker,
) -> PostBuildConfig {
    let mut probe = Substitution::new(true);
    let mut substitute = BTreeMap::new();
    for (name, value) in &raw.substitute {
        let place = format!("{path}.substitute.{name}");
        if let Err(err) = probe.define(name, "", &place) {
            check.report(place.clone(), line_of(value), err.to_string());
        }
        let text = match &value.value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                check.report(place, line_of(value), "must be a string");
                continue;
            }
        };
        substitute.insert(name.clone(), text);
    }
    let substitute_from = raw
        .substitute_from
        .iter()
        .enumerate()
        .filter_map(|(i, from)| {
            let place = format!("{path}.substituteFrom[{i}]");
            let kind = match from.value.kind.value.as_str() {
                "ConfigMap" => VariablesKind::ConfigMap,
                "Secret" => VariablesKind::Secret,
                _ => {
                    check.report(
                        format!("{place}.kind"),
                        line_of(&from.value.kind),
                        "must be ConfigMap or Secret",
                    );
                    return None;
                }
            };
            if let Err(message) = dns1123_subdomain(&from.value.name.value) {
                check.report(format!("{place}.name"), line_of(&from.value.name), message);
            }
            Some(VariablesFrom {
                kind,
                name: from.value.name.value.clone(),
                optional: from.value.optional,
            })
        })
        .collect();
    PostBuildConfig {
        substitute,
        substitute_from,
        strict: raw.strict.unwrap_or(DEFAULT_STRICT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn post_build_is_checked_naming_each_bad_field() {
        let text = "apps:\n- name: a\n  source: {repo: r}\n  postBuild:\n    substitute: {ok: x, bad-name: y, m: [1]}\n    substituteFrom: [{kind: Pod, name: x}, {kind: Secret, name: Bad_Name}]\n";
        let err = Config::parse(text, "t").unwrap_err().to_string();
        for want in [
            "apps[0].postBuild.substitute.bad-name",
            "apps[0].postBuild.substitute.m",
            "apps[0].postBuild.substituteFrom[0].kind",
            "apps[0].postBuild.substituteFrom[1].name",
        ] {
            assert!(err.contains(want), "{want}: {err}");
        }
        assert!(!err.contains("apps[0].postBuild.substitute.ok"), "{err}");
    }

    #[test]
    fn post_build_resolves_with_fluxs_names_and_strict_by_default() {
        let text = "apps:\n- name: a\n  source: {repo: r}\n  postBuild:\n    substitute: {n: 3, on: true, s: x}\n    substituteFrom: [{kind: ConfigMap, name: vars, optional: true}, {kind: Secret, name: keys}]\n";
        let config = Config::parse(text, "t").expect("valid");
        let post_build = config.apps[0].post_build.clone().expect("postBuild");
        assert_eq!(post_build.substitute["n"], "3");
        assert_eq!(post_build.substitute["on"], "true");
        assert!(post_build.strict);
        assert_eq!(
            post_build.substitute_from,
            [
                VariablesFrom {
                    kind: VariablesKind::ConfigMap,
                    name: "vars".into(),
                    optional: true
                },
                VariablesFrom {
                    kind: VariablesKind::Secret,
                    name: "keys".into(),
                    optional: false
                },
            ]
        );
        let lax = "apps:\n- name: a\n  source: {repo: r}\n  postBuild: {strict: false}\n";
        let config = Config::parse(lax, "t").expect("valid");
        assert!(
            !config.apps[0]
                .post_build
                .as_ref()
                .expect("postBuild")
                .strict
        );
        let none = Config::parse("apps:\n- name: a\n  source: {repo: r}\n", "t").expect("valid");
        assert_eq!(none.apps[0].post_build, None);
    }
}
