//! `healthCheckExprs` (issue #28): CEL health rules for custom resources, at the top
//! of the file (every app) and in an app or App (that app; its rule for a kind wins).
//! Flux's field of the same name, entry for entry: `apiVersion`, `kind`, `current`,
//! and optional `inProgress` and `failed`. The expressions are compiled here, once,
//! when the configuration loads: a syntax error is a problem naming the rule's place,
//! the expression and the position in it, and nothing is applied.

use serde::Deserialize;
use tether_core::sync::health::{HealthRules, RuleSpec};

use super::check::{Checker, line_of};
use super::raw::S;

/// One entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHealthCheck {
    pub api_version: String,
    pub kind: String,
    pub current: String,
    #[serde(default)]
    pub in_progress: Option<String>,
    #[serde(default)]
    pub failed: Option<String>,
}

/// The rules of `entries` (at `path`, e.g. `apps[2].healthCheckExprs`), compiled; a
/// rule that does not compile is reported and the layer left empty.
pub(super) fn resolve_health_checks(
    entries: &[S<RawHealthCheck>],
    path: &str,
    check: &mut Checker,
) -> HealthRules {
    let specs: Vec<RuleSpec> = entries
        .iter()
        .map(|e| RuleSpec {
            api_version: e.value.api_version.trim().to_string(),
            kind: e.value.kind.trim().to_string(),
            current: e.value.current.clone(),
            in_progress: e.value.in_progress.clone(),
            failed: e.value.failed.clone(),
        })
        .collect();
    match HealthRules::compile(&specs) {
        Ok(rules) => rules,
        Err(errors) => {
            for (i, err) in errors {
                check.report(
                    format!("{path}[{i}]"),
                    line_of(&entries[i]),
                    format!("rule for {}: {err}", specs[i].name()),
                );
            }
            HealthRules::default()
        }
    }
}
