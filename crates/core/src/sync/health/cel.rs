//! Health rules in CEL (issue #28): how a custom resource's controller says it is
//! done, for kinds the built-in verdicts of [`super::assess`] do not know. A rule is
//! Flux's `healthCheckExprs` entry: a group and kind, and `current`, `inProgress` and
//! `failed` expressions over the object. Rules are compiled once, when the
//! configuration loads; judging an object only evaluates them. Pure: no I/O, no clock.
//!
//! The verdict follows Flux's `StatusEvaluator` (fluxcd/pkg `runtime/cel`, RFC 0009):
//! an object whose `status.observedGeneration` differs from `metadata.generation` is
//! Progressing; then `inProgress` (Progressing), `failed` (Degraded) and `current`
//! (Healthy) are evaluated in that order, the first that holds deciding; when none
//! holds the object is Progressing. An expression that does not evaluate to a bool, or
//! fails to evaluate, makes the object Unknown with the error: like Flux, which keeps
//! waiting, a rule that cannot judge the object never calls it Healthy.
//!
//! Each top-level field of the object (`apiVersion`, `kind`, `metadata`, `spec`,
//! `status`, …) is a variable, as in Flux. `status` is bound to an empty map when the
//! object has none yet (a custom resource just created), so that `has(status.x)` and
//! `status.?x` read "not yet" rather than failing. The object is read in place, not
//! converted to CEL values ([`view`]): an evaluation touches only the fields it reads.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

use super::{Assessment, Health};

mod view;

/// One rule as written in the configuration or an App (Flux's `healthCheckExprs`
/// entry). `api_version` selects the group: the version is not compared, since the
/// API server serves every version of a kind with the same status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    pub api_version: String,
    pub kind: String,
    pub current: String,
    pub in_progress: Option<String>,
    pub failed: Option<String>,
}

impl RuleSpec {
    /// `Kind.group` (`Certificate.cert-manager.io`), as `kubectl` names a kind.
    pub fn name(&self) -> String {
        match group_of(&self.api_version) {
            "" => self.kind.clone(),
            group => format!("{}.{group}", self.kind),
        }
    }
}

/// Why a rule could not be compiled: a configuration error, never retryable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// `field` (`current`, `inProgress` or `failed`) is not valid CEL.
    #[error("{field}: line {line}, column {column}: {message}")]
    Syntax {
        field: &'static str,
        line: isize,
        column: isize,
        message: String,
    },
    #[error("current: an expression is required")]
    NoCurrent,
    #[error("kind: required")]
    NoKind,
    /// Two rules for one kind in one list: which one applies would be a guess.
    #[error("a second rule for {0}")]
    Duplicate(String),
}

/// A compiled expression and its source, for messages.
struct Expr {
    field: &'static str,
    source: String,
    program: ::cel::Program,
}

impl Expr {
    fn compile(field: &'static str, source: &str) -> Result<Expr, RuleError> {
        let program = ENV.compile(source).map_err(|errors| {
            let first = errors.errors.first();
            RuleError::Syntax {
                field,
                line: first.map_or(1, |e| e.pos.0),
                // Both 1-based, as the parser reports them (and editors count).
                column: first.map_or(1, |e| e.pos.1),
                message: first.map_or_else(|| errors.to_string(), |e| e.msg.clone()),
            }
        })?;
        Ok(Expr {
            field,
            source: source.to_string(),
            program,
        })
    }

    /// Whether the expression holds for the bound object; an evaluation error or a
    /// result other than a bool is an error naming the expression. The result is
    /// read where it lies, never converted: it may be a view of the object.
    fn holds(&self, context: &::cel::Context<'_, '_>) -> Result<bool, String> {
        match ::cel::Value::resolve_val(self.program.expression(), context) {
            Ok(value) => match value.downcast_ref::<::cel::common::types::CelBool>() {
                Some(b) => Ok(*b.inner()),
                None => Err(format!(
                    "{} ({}) evaluated to {}, not a bool",
                    self.field,
                    self.source,
                    value.get_type().name()
                )),
            },
            Err(err) => Err(format!("{} ({}): {err}", self.field, self.source)),
        }
    }
}

/// A compiled CEL expression that must hold (a `dependsOn` entry's `readyExpr`):
/// compiled once with the health rules' environment, evaluated with named values.
#[derive(Clone)]
pub struct Predicate {
    expr: Arc<Expr>,
}

impl Predicate {
    /// `field` names the expression in errors (`readyExpr`).
    pub fn compile(field: &'static str, source: &str) -> Result<Predicate, RuleError> {
        Ok(Predicate {
            expr: Arc::new(Expr::compile(field, source)?),
        })
    }

    pub fn source(&self) -> &str {
        &self.expr.source
    }

    /// Whether it holds with `bindings` as its variables; an error (a missing field,
    /// a result other than a bool) says why it could not tell.
    pub fn holds(&self, bindings: &[(&str, &Value)]) -> Result<bool, String> {
        let mut context = ::cel::Context::with_env(ENV.clone());
        for (name, value) in bindings {
            context.add_variable_as_val(*name, view::view(value));
        }
        self.expr.holds(&context)
    }
}

impl std::fmt::Debug for Predicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.expr.source)
    }
}

impl PartialEq for Predicate {
    fn eq(&self, other: &Self) -> bool {
        self.expr.source == other.expr.source
    }
}

impl Eq for Predicate {}

/// The CEL environment every rule is compiled and run in: the standard library with
/// its macros and optional fields (`status.?conditions`), and the strings extension
/// cel-go's Kubernetes environments have (`lowerAscii`, `split`, …).
static ENV: LazyLock<Arc<::cel::Env>> = LazyLock::new(|| {
    let mut env = ::cel::Env::stdlib();
    // The extension's functions are new names: adding them cannot clash.
    let _ = env.add_extension(::cel::extensions::strings);
    Arc::new(env)
});

/// A compiled rule.
pub struct Rule {
    spec: RuleSpec,
    group: String,
    /// In Flux's order of evaluation: inProgress, failed, current.
    exprs: Vec<(Expr, Health)>,
    /// The object's top-level fields the expressions read: only these are bound.
    variables: Vec<String>,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.spec.fmt(f)
    }
}

/// The group of an `apiVersion` (`cert-manager.io/v1` → `cert-manager.io`, `v1` → ``);
/// a bare group (`cert-manager.io`) is taken as one.
fn group_of(api_version: &str) -> &str {
    match api_version.split_once('/') {
        Some((group, _)) => group,
        None if api_version.contains('.') => api_version,
        None => "",
    }
}

impl Rule {
    pub fn compile(spec: &RuleSpec) -> Result<Rule, RuleError> {
        if spec.kind.trim().is_empty() {
            return Err(RuleError::NoKind);
        }
        if spec.current.trim().is_empty() {
            return Err(RuleError::NoCurrent);
        }
        let mut exprs = Vec::with_capacity(3);
        let optional = [
            (
                "inProgress",
                spec.in_progress.as_deref(),
                Health::Progressing,
            ),
            ("failed", spec.failed.as_deref(), Health::Degraded),
        ];
        for (field, source, health) in optional {
            if let Some(source) = source.filter(|s| !s.trim().is_empty()) {
                exprs.push((Expr::compile(field, source)?, health));
            }
        }
        exprs.push((Expr::compile("current", &spec.current)?, Health::Healthy));
        let mut variables: Vec<String> = Vec::new();
        for (expr, _) in &exprs {
            for name in expr.program.references().variables() {
                if !variables.iter().any(|v| v == name) {
                    variables.push(name.to_string());
                }
            }
        }
        Ok(Rule {
            group: group_of(&spec.api_version).to_string(),
            spec: spec.clone(),
            exprs,
            variables,
        })
    }

    /// `Kind.group` (`Certificate.cert-manager.io`).
    pub fn name(&self) -> String {
        self.spec.name()
    }

    /// The verdict of this rule on a live object (see the module's doc).
    pub fn assess(&self, live: &Value) -> Assessment {
        if let Some(waiting) = unobserved(live) {
            return Assessment::progressing(waiting);
        }
        let mut context = ::cel::Context::with_env(ENV.clone());
        for name in &self.variables {
            let value = match live.get(name) {
                Some(value) => value,
                None if name == "status" => &EMPTY_MAP,
                // An unbound variable: the expression that reads it fails as
                // "undeclared reference", naming it.
                None => continue,
            };
            context.add_variable_as_val(name.as_str(), view::view(value));
        }
        for (expr, health) in &self.exprs {
            match expr.holds(&context) {
                Ok(false) => {}
                Ok(true) => {
                    return Assessment {
                        health: *health,
                        message: verdict_message(expr, *health, live),
                    };
                }
                Err(err) => return self.unknown(err),
            }
        }
        Assessment::progressing(format!("waiting for current ({})", self.spec.current))
    }

    fn unknown(&self, why: String) -> Assessment {
        Assessment {
            health: Health::Unknown,
            message: format!("health rule for {}: {why}", self.name()),
        }
    }
}

static EMPTY_MAP: LazyLock<Value> = LazyLock::new(|| Value::Object(Default::default()));

/// Flux's first check: a status written for an older generation says nothing about
/// this one. Compared only when both are integers (Argo Rollouts writes a string).
fn unobserved(live: &Value) -> Option<String> {
    let generation = live.pointer("/metadata/generation")?.as_i64()?;
    let observed = live.pointer("/status/observedGeneration")?.as_i64()?;
    (observed != generation).then(|| {
        format!("waiting for the controller to observe generation {generation} (at {observed})")
    })
}

/// What a person reads next to the verdict: the controller's own words when it wrote
/// some (the `Ready` condition, else `status.message`, else the first condition that
/// is not True), and which expression decided.
fn verdict_message(expr: &Expr, health: Health, live: &Value) -> String {
    if health == Health::Healthy {
        return String::new();
    }
    let status = live.get("status").unwrap_or(&Value::Null);
    let message = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let not_true = || {
        status
            .get("conditions")?
            .as_array()?
            .iter()
            .filter(|c| c.get("status").and_then(Value::as_str) != Some("True"))
            .filter(|c| {
                c.get("message")
                    .and_then(Value::as_str)
                    .is_some_and(|m| !m.is_empty())
            })
            .find_map(|c| c.get("type").and_then(Value::as_str))
            .map(|kind| super::condition_message(status, kind))
    };
    let own = message(&super::condition_message(status, "Ready"))
        .or_else(|| {
            status
                .get("message")
                .and_then(Value::as_str)
                .and_then(message)
        })
        .or_else(not_true);
    match own {
        Some(own) => format!("{own} [{} ({}) holds]", expr.field, expr.source),
        None => format!("{} ({}) holds", expr.field, expr.source),
    }
}

/// One layer of rules (an app's, the configuration's, the built-ins), by group and
/// kind. Cheap to clone; equal when written the same.
#[derive(Clone, Default)]
pub struct HealthRules {
    /// group → kind → rule: looked up by `&str` without building a key per object.
    by_kind: Arc<HashMap<String, HashMap<String, Rule>>>,
}

impl HealthRules {
    /// Compiles every rule; the errors name the rule by its index in `specs`.
    pub fn compile(specs: &[RuleSpec]) -> Result<HealthRules, Vec<(usize, RuleError)>> {
        let mut by_kind: HashMap<String, HashMap<String, Rule>> = HashMap::new();
        let mut errors = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            match Rule::compile(spec) {
                Ok(rule) => {
                    let name = rule.name();
                    let kinds = by_kind.entry(rule.group.clone()).or_default();
                    if kinds.contains_key(&rule.spec.kind) {
                        errors.push((i, RuleError::Duplicate(name)));
                    } else {
                        kinds.insert(rule.spec.kind.clone(), rule);
                    }
                }
                Err(err) => errors.push((i, err)),
            }
        }
        if errors.is_empty() {
            Ok(HealthRules {
                by_kind: Arc::new(by_kind),
            })
        } else {
            Err(errors)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }

    pub fn get(&self, group: &str, kind: &str) -> Option<&Rule> {
        self.by_kind.get(group)?.get(kind)
    }

    /// The specs, sorted (for equality and display).
    fn specs(&self) -> Vec<&RuleSpec> {
        let mut specs: Vec<&RuleSpec> = self
            .by_kind
            .values()
            .flat_map(HashMap::values)
            .map(|r| &r.spec)
            .collect();
        specs.sort_by(|a, b| (&a.api_version, &a.kind).cmp(&(&b.api_version, &b.kind)));
        specs
    }
}

impl std::fmt::Debug for HealthRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.specs()).finish()
    }
}

impl PartialEq for HealthRules {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.by_kind, &other.by_kind) || self.specs() == other.specs()
    }
}

impl Eq for HealthRules {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use super::super::Judge;
    use super::super::tests::id;

    fn widget_rule(current: &str, in_progress: Option<&str>, failed: Option<&str>) -> RuleSpec {
        RuleSpec {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            current: current.into(),
            in_progress: in_progress.map(Into::into),
            failed: failed.map(Into::into),
        }
    }

    fn phase(phase: &str) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "generation": 2},
               "status": {"observedGeneration": 2, "phase": phase, "message": "disk full"}})
    }

    #[test]
    fn in_progress_then_failed_then_current_decide_and_none_is_progressing() {
        let spec = widget_rule(
            "status.phase == 'Ready'",
            Some("status.phase in ['Pending', 'Failed'] && status.message == 'waiting'"),
            Some("status.phase == 'Failed'"),
        );
        let rule = Rule::compile(&spec).expect("compiles");
        assert_eq!(rule.assess(&phase("Ready")).health, Health::Healthy);
        assert_eq!(rule.assess(&phase("Ready")).message, "");
        let failed = rule.assess(&phase("Failed"));
        assert_eq!(failed.health, Health::Degraded);
        assert_eq!(
            failed.message,
            "disk full [failed (status.phase == 'Failed') holds]"
        );
        let mut waiting = phase("Failed");
        waiting["status"]["message"] = json!("waiting");
        // inProgress is evaluated first: it wins over a failed that also holds.
        assert_eq!(rule.assess(&waiting).health, Health::Progressing);
        let other = rule.assess(&phase("Creating"));
        assert_eq!(other.health, Health::Progressing);
        assert_eq!(
            other.message,
            "waiting for current (status.phase == 'Ready')"
        );
    }

    #[test]
    fn a_status_of_an_older_generation_is_progressing_whatever_the_rule_says() {
        let rule = Rule::compile(&widget_rule("true", None, None)).unwrap();
        let mut stale = phase("Ready");
        stale["metadata"]["generation"] = json!(3);
        let verdict = rule.assess(&stale);
        assert_eq!(verdict.health, Health::Progressing);
        assert!(verdict.message.contains("generation 3"), "{verdict:?}");
        // Argo Rollouts writes observedGeneration as a string: not compared.
        stale["status"]["observedGeneration"] = json!("5d8f");
        assert_eq!(rule.assess(&stale).health, Health::Healthy);
    }

    #[test]
    fn an_expression_that_errs_or_is_not_a_bool_is_unknown_with_the_error() {
        let rule = Rule::compile(&widget_rule("status.phase", None, None)).unwrap();
        let verdict = rule.assess(&phase("Ready"));
        assert_eq!(verdict.health, Health::Unknown);
        assert!(
            verdict.message.starts_with(
                "health rule for Widget.example.com: current (status.phase) evaluated to"
            ),
            "{verdict:?}"
        );
        let rule = Rule::compile(&widget_rule("spec.replicas > 0", None, None)).unwrap();
        let verdict = rule.assess(&phase("Ready"));
        assert_eq!(verdict.health, Health::Unknown);
        assert!(verdict.message.contains("spec"), "{verdict:?}");
        let rule = Rule::compile(&widget_rule("status.nope == 1", None, None)).unwrap();
        assert_eq!(rule.assess(&phase("Ready")).health, Health::Unknown);
    }

    #[test]
    fn an_object_without_status_yet_reads_as_an_empty_status() {
        let rule = Rule::compile(&widget_rule(
            "has(status.phase) && status.phase == 'Ready'",
            None,
            Some("status.?phase.orValue('') == 'Failed'"),
        ))
        .unwrap();
        let fresh =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        assert_eq!(rule.assess(&fresh).health, Health::Progressing);
        assert_eq!(rule.assess(&phase("Failed")).health, Health::Degraded);
    }

    #[test]
    fn a_syntax_error_names_the_expression_and_its_position() {
        let err = Rule::compile(&widget_rule(
            "status.phase == 'Ready'",
            None,
            Some("status.phase =="),
        ))
        .unwrap_err();
        match &err {
            RuleError::Syntax {
                field,
                line,
                column,
                ..
            } => {
                assert_eq!((*field, *line), ("failed", 1));
                assert!(*column > 1, "{err}");
            }
            other => panic!("expected a syntax error, got {other:?}"),
        }
        assert!(
            err.to_string().starts_with("failed: line 1, column"),
            "{err}"
        );
        // `)` is the 17th character: columns count from 1, as editors do.
        let at = Rule::compile(&widget_rule("status.phase == )", None, None)).unwrap_err();
        assert!(
            at.to_string().starts_with("current: line 1, column 17: "),
            "{at}"
        );
        assert_eq!(
            Rule::compile(&widget_rule(" ", None, None)).unwrap_err(),
            RuleError::NoCurrent
        );
        let twice = [
            widget_rule("true", None, None),
            widget_rule("false", None, None),
        ];
        let errors = HealthRules::compile(&twice).unwrap_err();
        assert_eq!(
            errors,
            [(1, RuleError::Duplicate("Widget.example.com".into()))]
        );
    }

    #[test]
    fn an_apps_rule_wins_over_the_configurations_which_wins_over_the_built_ins() {
        let app = HealthRules::compile(&[widget_rule("false", None, None)]).unwrap();
        let global = HealthRules::compile(&[
            widget_rule("true", None, None),
            RuleSpec {
                api_version: "cert-manager.io/v1".into(),
                kind: "Certificate".into(),
                current: "true".into(),
                in_progress: None,
                failed: None,
            },
        ])
        .unwrap();
        let none = HealthRules::default();
        let widget = phase("Ready");
        let cert = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let judge = Judge::new(&app, &global);
        assert_eq!(
            judge.assess(&id("example.com", "Widget"), &widget).health,
            Health::Progressing
        );
        assert_eq!(
            judge
                .assess(&id("cert-manager.io", "Certificate"), &cert)
                .health,
            Health::Healthy
        );
        let judge = Judge::new(&none, &global);
        assert_eq!(
            judge.assess(&id("example.com", "Widget"), &widget).health,
            Health::Healthy
        );
        // The built-in Certificate rule, then kstatus for a kind no rule knows.
        let judge = Judge::default();
        assert_eq!(
            judge
                .assess(&id("cert-manager.io", "Certificate"), &cert)
                .health,
            Health::Degraded
        );
        assert_eq!(
            judge.assess(&id("example.com", "Widget"), &widget).health,
            Health::Healthy
        );
        assert_eq!(
            judge
                .assess(&id("example.com", "Widget"), &json!({"status": {}}))
                .health,
            Health::Healthy
        );
    }

    #[test]
    fn a_predicate_holds_over_its_bindings_and_says_why_it_cannot_tell() {
        let ready = Predicate::compile(
            "readyExpr",
            "dep.phase == 'Done' && self.wanted == dep.revision",
        )
        .expect("compiles");
        let dep = json!({"phase": "Done", "revision": "abc"});
        let me = json!({"wanted": "abc"});
        assert_eq!(ready.holds(&[("dep", &dep), ("self", &me)]), Ok(true));
        let other = json!({"wanted": "def"});
        assert_eq!(ready.holds(&[("dep", &dep), ("self", &other)]), Ok(false));
        let err = ready.holds(&[("self", &me)]).unwrap_err();
        assert!(err.starts_with("readyExpr (dep.phase"), "{err}");
        assert!(Predicate::compile("readyExpr", "dep.phase ==").is_err());
    }

    #[test]
    fn whole_numbers_are_ints_as_kubernetes_cel_reads_json() {
        let rule = Rule::compile(&widget_rule(
            "status.readyReplicas == 3 && status.readyReplicas == spec.replicas && status.ratio > 0.5 && status.big > 0u",
            None,
            None,
        ))
        .unwrap();
        let live = json!({"spec": {"replicas": 3},
                          "status": {"readyReplicas": 3, "ratio": 0.75, "big": u64::MAX}});
        assert_eq!(
            rule.assess(&live).health,
            Health::Healthy,
            "{:?}",
            rule.assess(&live)
        );
    }

    #[test]
    fn rules_are_equal_when_written_the_same() {
        let a = HealthRules::compile(&[widget_rule("true", None, None)]).unwrap();
        let b = HealthRules::compile(&[widget_rule("true", None, None)]).unwrap();
        let c = HealthRules::compile(&[widget_rule("false", None, None)]).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(group_of("cert-manager.io/v1"), "cert-manager.io");
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("keda.sh"), "keda.sh");
    }
}
