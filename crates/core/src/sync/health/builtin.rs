//! The health rules tether ships (issue #28), in CEL like the rules people write:
//! for the custom resources platforms run most, whose controllers do not all report
//! kstatus's `Ready`. Compiled once, on first use; a configuration's or an app's rule
//! for the same kind replaces the one here. Each is checked against status objects
//! those projects publish (`builtin/tests.rs`, with the sources).
//!
//! Crossplane's composite resources and claims have kinds their users define, so
//! their rule is chosen by the object's shape (a `spec.crossplane` block, or a
//! composition reference) rather than by kind.

use std::sync::LazyLock;

use serde_json::Value;

use super::cel::{HealthRules, Rule, RuleSpec};

/// `status.conditions` has one of `kind` whose status is `status`.
fn condition(kind: &str, status: &str) -> String {
    format!(
        "has(status.conditions) && status.conditions.exists(c, c.type == '{kind}' && c.status == '{status}')"
    )
}

/// `status.phase` is one of `phases`.
fn phase(phases: &[&str]) -> String {
    let list: Vec<String> = phases.iter().map(|p| format!("'{p}'")).collect();
    format!("has(status.phase) && status.phase in [{}]", list.join(", "))
}

fn spec(
    api_version: &str,
    kind: &str,
    in_progress: Option<String>,
    failed: String,
    current: String,
) -> RuleSpec {
    RuleSpec {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        current,
        in_progress,
        failed: Some(failed),
    }
}

/// A kind that reports a `Ready` condition and nothing richer: not Healthy until
/// `Ready` is True (where kstatus alone would call an object without it Healthy).
fn ready(api_version: &str, kind: &str) -> RuleSpec {
    spec(
        api_version,
        kind,
        None,
        condition("Ready", "False"),
        condition("Ready", "True"),
    )
}

/// A Flux object: kstatus proper (`Reconciling` and `Stalled` besides `Ready`). A
/// retry after a failure is `Reconciling` with `Ready` False: Flux's verdict on the
/// last attempt is the failure, as Argo CD's HelmRelease check reads it.
fn flux(api_version: &str, kind: &str) -> RuleSpec {
    spec(
        api_version,
        kind,
        Some(format!(
            "{} && !({})",
            condition("Reconciling", "True"),
            condition("Ready", "False")
        )),
        format!(
            "{} || {}",
            condition("Stalled", "True"),
            condition("Ready", "False")
        ),
        condition("Ready", "True"),
    )
}

/// A Prometheus Operator workload: `Available` (True, Degraded or False) and
/// `Reconciled`, as the operator writes them since v0.62.
fn prometheus_operator(kind: &str) -> RuleSpec {
    spec(
        "monitoring.coreos.com/v1",
        kind,
        Some(condition("Available", "Degraded")),
        format!(
            "{} || {}",
            condition("Available", "False"),
            condition("Reconciled", "False")
        ),
        format!(
            "{} && {}",
            condition("Available", "True"),
            condition("Reconciled", "True")
        ),
    )
}

/// Every built-in rule by kind, as written.
pub fn specs() -> Vec<RuleSpec> {
    vec![
        // cert-manager: a Certificate being issued is Ready=False with Issuing=True.
        spec(
            "cert-manager.io/v1",
            "Certificate",
            Some(condition("Issuing", "True")),
            condition("Ready", "False"),
            condition("Ready", "True"),
        ),
        ready("cert-manager.io/v1", "Issuer"),
        ready("cert-manager.io/v1", "ClusterIssuer"),
        // Argo Rollouts writes its own verdict in `status.phase`; a paused rollout
        // waits for a person or an analysis, as Argo CD shows it (Suspended).
        spec(
            "argoproj.io/v1alpha1",
            "Rollout",
            Some(phase(&["Progressing", "Paused"])),
            phase(&["Degraded"]),
            phase(&["Healthy"]),
        ),
        ready("external-secrets.io/v1", "ExternalSecret"),
        ready("external-secrets.io/v1", "SecretStore"),
        ready("external-secrets.io/v1", "ClusterSecretStore"),
        // Sealed Secrets reports `Synced`, not `Ready` (Flux's CEL cheatsheet).
        spec(
            "bitnami.com/v1alpha1",
            "SealedSecret",
            None,
            condition("Synced", "False"),
            condition("Synced", "True"),
        ),
        flux("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
        flux("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
        flux("source.toolkit.fluxcd.io/v1", "GitRepository"),
        ready("keda.sh/v1alpha1", "ScaledObject"),
        prometheus_operator("Prometheus"),
        prometheus_operator("Alertmanager"),
    ]
}

/// The rule for Crossplane composite resources and claims: `Synced` False is a
/// failure to reconcile; Healthy only once both `Synced` and `Ready` are True.
fn composite_spec() -> RuleSpec {
    spec(
        "apiextensions.crossplane.io/v1",
        "Composite",
        None,
        condition("Synced", "False"),
        format!(
            "{} && {}",
            condition("Synced", "True"),
            condition("Ready", "True")
        ),
    )
}

static RULES: LazyLock<HealthRules> = LazyLock::new(|| {
    // Embedded and compiled in a unit test: a failure here is a bug in this file.
    HealthRules::compile(&specs()).expect("the built-in health rules compile")
});

static COMPOSITE: LazyLock<Rule> = LazyLock::new(|| {
    Rule::compile(&composite_spec()).expect("the built-in Crossplane rule compiles")
});

/// The built-in rules by kind.
pub fn rules() -> &'static HealthRules {
    &RULES
}

/// The Crossplane rule, when `live` is a composite resource (v1: a composition
/// reference or selector; v2: `spec.crossplane`) or a claim (`spec.resourceRef` and a
/// composition reference).
pub fn composite(live: &Value) -> Option<&'static Rule> {
    let spec = live.get("spec")?;
    let composite = ["crossplane", "compositionRef", "compositionSelector"]
        .iter()
        .any(|field| spec.get(field).is_some_and(Value::is_object));
    composite.then(|| &*COMPOSITE)
}

#[cfg(test)]
mod tests;
