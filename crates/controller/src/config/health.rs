//! `healthCheckExprs` (issue #28): CEL health rules for custom resources, at the top
//! of the file (every app) and in an app or App (that app; its rule for a kind wins).
//! Flux's field of the same name, entry for entry: `apiVersion`, `kind`, `current`,
//! and optional `inProgress` and `failed`. The expressions are compiled here, once,
//! when the configuration loads: a syntax error is a problem naming the rule's place,
//! the expression and the position in it, and nothing is applied.

use tether_core::sync::health::{HealthRules, RuleSpec};

use super::check::{Checker, line_of};
use super::raw::{RawHealthCheck, S};

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::config::{Config, app_from_spec};

    const APP: &str = "  source: {repo: https://git.example/r.git}\n";

    #[test]
    fn rules_load_for_every_app_and_per_app_and_a_bad_one_names_its_place() {
        let text = format!(
            "healthCheckExprs:\n- {{apiVersion: example.com/v1, kind: Gadget, current: \"true\"}}\n\
             apps:\n- name: web\n{APP}  healthCheckExprs:\n  - apiVersion: example.com/v1\n    kind: Gadget\n    current: \"status.phase == 'Running'\"\n"
        );
        let config = Config::parse(&text, "t.yaml").expect("valid");
        assert!(config.health_checks.get("example.com", "Gadget").is_some());
        assert!(
            config.apps[0]
                .health_checks
                .get("example.com", "Gadget")
                .is_some()
        );
        let bad = text.replace("current: \"true\"", "current: \"status.phase ==\"");
        let err = Config::parse(&bad, "t.yaml")
            .expect_err("refused")
            .to_string();
        assert!(
            err.starts_with(
                "t.yaml:2: healthCheckExprs[0]: rule for Gadget.example.com: current: line 1, column"
            ),
            "{err}"
        );
        // An App's rules go through the same code, named by their place in the App.
        let spec = json!({
            "source": {"repo": "https://git.example/r.git"},
            "healthCheckExprs": [{"apiVersion": "example.com/v1", "kind": "Gadget",
                                  "current": "true", "failed": "status.phase == )"}],
        });
        let err = app_from_spec("team-a.web", &spec)
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("spec.healthCheckExprs[0]: rule for Gadget.example.com: failed: line 1"),
            "{err}"
        );
        let spec = json!({
            "source": {"repo": "https://git.example/r.git"},
            "healthCheckExprs": [{"apiVersion": "example.com/v1", "kind": "Gadget"}],
        });
        let err = app_from_spec("team-a.web", &spec)
            .expect_err("refused")
            .to_string();
        assert!(err.contains("current"), "{err}");
    }
}
