//! The per-object sync options an object's annotations ask for, read once before a
//! pass decides anything: tether's own `tether.dev/*`, and those of Argo CD and Flux,
//! so a repository written for either moves to tether without edits. tether's own
//! annotation wins where both are set. Pure: objects in, options out.
//!
//! Argo CD matches its options exactly (`HasAnnotationOption`: comma-separated items,
//! trimmed, case-sensitive); Flux matches its values case-insensitively and reads
//! labels as well as annotations (`AnyInMetadata`). Each is read here the way its own
//! controller reads it, so an object means the same thing to tether as it did there.

use serde_json::Value;

use tether_schema::ownership::{
    ARGOCD_COMPARE_OPTIONS_ANNOTATION, ARGOCD_SYNC_OPTIONS_ANNOTATION, ARGOCD_SYNC_WAVE_ANNOTATION,
    FLUX_FORCE_ANNOTATION, FLUX_PRUNE_ANNOTATION, FLUX_RECONCILE_ANNOTATION, FLUX_SSA_ANNOTATION,
    HELM_HOOK_WEIGHT_ANNOTATION, PRUNE_ANNOTATION, PRUNE_DISABLED, SYNC_WAVE_ANNOTATION,
};

/// How a desired object is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Server-side apply, forced unless the sync says `--no-force` (the default).
    /// Also Flux's `ssa: Merge`: Flux documents that the manifest's fields are always
    /// overridden and only fields other tools added are kept, which server-side apply
    /// does for every object tether writes.
    Apply,
    /// `create` when missing, a full `replace` (PUT) when changed (Argo CD
    /// `Replace=true`, which runs `kubectl create` / `kubectl replace`).
    Replace,
    /// Created when missing, never updated (Flux `ssa: IfNotPresent`).
    IfNotPresent,
}

/// What a desired object's annotations ask of a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub write: Write,
    /// Delete and recreate on an immutable-field change, as `--replace-immutable`
    /// does for every object (Flux `force: enabled`).
    pub recreate_immutable: bool,
    /// A kind neither served nor defined by a CRD of the revision is skipped, not a
    /// validation failure (Argo CD `SkipDryRunOnMissingResource=true`).
    pub skip_missing_kind: bool,
    /// Why the object is not reconciled at all, when it is not: compared and
    /// reported, never applied or pruned (Flux `reconcile: disabled`, `ssa: Ignore`).
    pub not_reconciled: Option<&'static str>,
}

impl Options {
    /// The options a desired object asks for.
    pub fn of(object: &Value) -> Options {
        let flux_ssa = flux_value(object, FLUX_SSA_ANNOTATION);
        // The most careful wins where options disagree: writing once beats
        // replacing, which beats a gentler apply (`ssa: Ignore`, never writing, is
        // `not_reconciled`, which beats them all).
        let write = if flux_ssa.as_deref() == Some("ifnotpresent") {
            Write::IfNotPresent
        } else if has_argocd_option(object, ARGOCD_SYNC_OPTIONS_ANNOTATION, "Replace=true") {
            Write::Replace
        } else {
            Write::Apply
        };
        Options {
            write,
            recreate_immutable: flux_value(object, FLUX_FORCE_ANNOTATION).as_deref()
                == Some("enabled"),
            skip_missing_kind: has_argocd_option(
                object,
                ARGOCD_SYNC_OPTIONS_ANNOTATION,
                "SkipDryRunOnMissingResource=true",
            ),
            not_reconciled: not_reconciled(object),
        }
    }
}

/// Why an object (desired or live) is left alone entirely, if it is: Flux's
/// `reconcile: disabled` and `ssa: Ignore`, which Flux also honours when set on the
/// object in the cluster (`kubectl annotate`).
pub fn not_reconciled(object: &Value) -> Option<&'static str> {
    if flux_value(object, FLUX_RECONCILE_ANNOTATION).as_deref() == Some("disabled") {
        return Some("kustomize.toolkit.fluxcd.io/reconcile: disabled");
    }
    if flux_value(object, FLUX_SSA_ANNOTATION).as_deref() == Some("ignore") {
        return Some("kustomize.toolkit.fluxcd.io/ssa: Ignore");
    }
    None
}

/// Why a live object may not be pruned, naming the annotation that says so; None
/// when it may. `tether.dev/prune` decides alone when set (`disabled` keeps the
/// object; any other value lets prune delete it, whatever Argo CD or Flux say).
pub fn prune_protection(live: &Value) -> Option<&'static str> {
    if let Some(value) = annotation(live, PRUNE_ANNOTATION) {
        return (value.as_str() == Some(PRUNE_DISABLED)).then_some("tether.dev/prune: disabled");
    }
    // `Delete=false` keeps an object when its app is deleted; tether deletes an app's
    // objects only by pruning, so it keeps them from prune too. `confirm` asks for a
    // person's approval tether has no way to give: the object is kept.
    const ARGOCD: [&str; 4] = [
        "Prune=false",
        "Delete=false",
        "Prune=confirm",
        "Delete=confirm",
    ];
    for option in ARGOCD {
        if has_argocd_option(live, ARGOCD_SYNC_OPTIONS_ANNOTATION, option) {
            return Some(match option {
                "Prune=false" => "argocd.argoproj.io/sync-options: Prune=false",
                "Delete=false" => "argocd.argoproj.io/sync-options: Delete=false",
                "Prune=confirm" => "argocd.argoproj.io/sync-options: Prune=confirm",
                _ => "argocd.argoproj.io/sync-options: Delete=confirm",
            });
        }
    }
    if flux_value(live, FLUX_PRUNE_ANNOTATION).as_deref() == Some("disabled") {
        return Some("kustomize.toolkit.fluxcd.io/prune: disabled");
    }
    not_reconciled(live)
}

/// Whether a live object Git no longer has is left out of the app's sync status
/// (Argo CD `compare-options: IgnoreExtraneous`). It is still pruned when prune is
/// on, as Argo CD prunes it; only its standing as drift is ignored.
pub fn ignores_extraneous(live: &Value) -> bool {
    has_argocd_option(live, ARGOCD_COMPARE_OPTIONS_ANNOTATION, "IgnoreExtraneous")
}

/// The annotation that sets an object's wave and its raw value: tether's own when
/// present, else Argo CD's, else Helm's hook weight (Argo CD's own fallback).
pub fn sync_wave(object: &Value) -> Option<(&'static str, &Value)> {
    [
        SYNC_WAVE_ANNOTATION,
        ARGOCD_SYNC_WAVE_ANNOTATION,
        HELM_HOOK_WEIGHT_ANNOTATION,
    ]
    .into_iter()
    .find_map(|name| annotation(object, name).map(|value| (name, value)))
}

fn annotation<'v>(object: &'v Value, name: &str) -> Option<&'v Value> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(name))
}

/// Whether an Argo CD option list holds `option`, as Argo CD compares it.
fn has_argocd_option(object: &Value, name: &str, option: &str) -> bool {
    annotation(object, name)
        .and_then(Value::as_str)
        .is_some_and(|list| list.split(',').any(|item| item.trim() == option))
}

/// A Flux switch's value, lower-cased, from the annotations or else the labels.
fn flux_value(object: &Value, name: &str) -> Option<String> {
    ["/metadata/annotations", "/metadata/labels"]
        .into_iter()
        .filter_map(|at| object.pointer(at).and_then(|m| m.get(name)))
        .filter_map(Value::as_str)
        .find(|v| !v.is_empty())
        .map(str::to_ascii_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn annotated(annotations: Value) -> Value {
        json!({"metadata": {"name": "x", "annotations": annotations}})
    }

    #[test]
    fn argo_cd_options_are_matched_item_by_item_and_exactly() {
        let replace =
            annotated(json!({ARGOCD_SYNC_OPTIONS_ANNOTATION: "Validate=false, Replace=true"}));
        assert_eq!(Options::of(&replace).write, Write::Replace);
        // Argo CD compares items exactly: a different case is not the option.
        let lower = annotated(json!({ARGOCD_SYNC_OPTIONS_ANNOTATION: "replace=true"}));
        assert_eq!(Options::of(&lower).write, Write::Apply);
        let skip = annotated(
            json!({ARGOCD_SYNC_OPTIONS_ANNOTATION: "ServerSideApply=true,SkipDryRunOnMissingResource=true"}),
        );
        assert!(Options::of(&skip).skip_missing_kind);
        assert_eq!(Options::of(&skip).write, Write::Apply);
        let extraneous = annotated(json!({ARGOCD_COMPARE_OPTIONS_ANNOTATION: "IgnoreExtraneous"}));
        assert!(ignores_extraneous(&extraneous));
        assert!(!ignores_extraneous(&annotated(json!({}))));
    }

    #[test]
    fn flux_values_are_case_insensitive_and_read_from_labels_too() {
        let merge = annotated(json!({FLUX_SSA_ANNOTATION: "Merge"}));
        assert_eq!(Options::of(&merge).write, Write::Apply);
        let ignore = annotated(json!({FLUX_SSA_ANNOTATION: "IGNORE"}));
        assert!(Options::of(&ignore).not_reconciled.is_some());
        let labelled = json!({"metadata": {"labels": {FLUX_SSA_ANNOTATION: "IfNotPresent"}}});
        assert_eq!(Options::of(&labelled).write, Write::IfNotPresent);
        let force = annotated(json!({FLUX_FORCE_ANNOTATION: "Enabled"}));
        assert!(Options::of(&force).recreate_immutable);
        let off = annotated(json!({FLUX_RECONCILE_ANNOTATION: "disabled"}));
        assert_eq!(
            Options::of(&off).not_reconciled,
            Some("kustomize.toolkit.fluxcd.io/reconcile: disabled")
        );
        let ignore = annotated(json!({FLUX_SSA_ANNOTATION: "ignore"}));
        assert_eq!(
            Options::of(&ignore).not_reconciled,
            Some("kustomize.toolkit.fluxcd.io/ssa: Ignore")
        );
    }

    #[test]
    fn the_most_careful_write_wins_when_options_disagree() {
        let both = annotated(json!({
            ARGOCD_SYNC_OPTIONS_ANNOTATION: "Replace=true",
            FLUX_SSA_ANNOTATION: "IfNotPresent",
        }));
        assert_eq!(Options::of(&both).write, Write::IfNotPresent);
        let replace_merge = annotated(json!({
            ARGOCD_SYNC_OPTIONS_ANNOTATION: "Replace=true",
            FLUX_SSA_ANNOTATION: "Merge",
        }));
        assert_eq!(Options::of(&replace_merge).write, Write::Replace);
    }

    #[test]
    fn prune_protection_names_its_annotation_and_tethers_own_wins() {
        let argo = annotated(json!({ARGOCD_SYNC_OPTIONS_ANNOTATION: "Delete=false"}));
        assert_eq!(
            prune_protection(&argo),
            Some("argocd.argoproj.io/sync-options: Delete=false")
        );
        let flux = annotated(json!({FLUX_PRUNE_ANNOTATION: "Disabled"}));
        assert_eq!(
            prune_protection(&flux),
            Some("kustomize.toolkit.fluxcd.io/prune: disabled")
        );
        let paused = annotated(json!({FLUX_RECONCILE_ANNOTATION: "disabled"}));
        assert!(prune_protection(&paused).is_some());
        // tether's own annotation decides alone, either way.
        let enabled = annotated(json!({
            PRUNE_ANNOTATION: "enabled",
            ARGOCD_SYNC_OPTIONS_ANNOTATION: "Prune=false",
            FLUX_PRUNE_ANNOTATION: "disabled",
        }));
        assert_eq!(prune_protection(&enabled), None);
        let disabled = annotated(json!({PRUNE_ANNOTATION: PRUNE_DISABLED}));
        assert_eq!(
            prune_protection(&disabled),
            Some("tether.dev/prune: disabled")
        );
        assert_eq!(prune_protection(&annotated(json!({}))), None);
    }

    #[test]
    fn tethers_wave_wins_over_argo_cds() {
        let both = annotated(json!({SYNC_WAVE_ANNOTATION: "2", ARGOCD_SYNC_WAVE_ANNOTATION: "-5"}));
        assert_eq!(sync_wave(&both), Some((SYNC_WAVE_ANNOTATION, &json!("2"))));
        let argo = annotated(json!({ARGOCD_SYNC_WAVE_ANNOTATION: "-5"}));
        assert_eq!(
            sync_wave(&argo),
            Some((ARGOCD_SYNC_WAVE_ANNOTATION, &json!("-5")))
        );
        assert_eq!(sync_wave(&annotated(json!({}))), None);
        let helm =
            annotated(json!({HELM_HOOK_WEIGHT_ANNOTATION: "3", ARGOCD_SYNC_WAVE_ANNOTATION: "1"}));
        assert_eq!(
            sync_wave(&helm),
            Some((ARGOCD_SYNC_WAVE_ANNOTATION, &json!("1")))
        );
        let weight = annotated(json!({HELM_HOOK_WEIGHT_ANNOTATION: "-2"}));
        assert_eq!(
            sync_wave(&weight),
            Some((HELM_HOOK_WEIGHT_ANNOTATION, &json!("-2")))
        );
    }
}
