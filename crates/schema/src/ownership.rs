//! The words every stage uses to say what tether owns: the labels and annotations it
//! puts on objects, the field manager it applies as, and where each app's inventory
//! lives. The bottom floor of the house: it imports nothing of the crate.

use serde_json::Value;

/// The label every object tether applies carries, with [`MANAGED_BY_VALUE`].
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "tether";
/// `MANAGED_BY_LABEL=MANAGED_BY_VALUE`, as a label selector.
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=tether";

/// The label that marks an object as owned by an app (see DESIGN.md, Ownership).
pub const APP_LABEL: &str = "tether.dev/app";

/// The field manager of every server-side apply tether makes.
pub const FIELD_MANAGER: &str = "tether";

/// The annotation that keeps an object from ever being pruned, and its value.
pub const PRUNE_ANNOTATION: &str = "tether.dev/prune";
pub const PRUNE_DISABLED: &str = "disabled";

/// The annotation that moves an object to an earlier or later wave (`"-1"`, `"5"`).
pub const SYNC_WAVE_ANNOTATION: &str = "tether.dev/sync-wave";

/// Argo CD's wave annotation, read when [`SYNC_WAVE_ANNOTATION`] is absent.
pub const ARGOCD_SYNC_WAVE_ANNOTATION: &str = "argocd.argoproj.io/sync-wave";
/// Argo CD's per-object sync options: comma-separated `Key=value` items.
pub const ARGOCD_SYNC_OPTIONS_ANNOTATION: &str = "argocd.argoproj.io/sync-options";
/// Argo CD's per-object compare options (`IgnoreExtraneous`).
pub const ARGOCD_COMPARE_OPTIONS_ANNOTATION: &str = "argocd.argoproj.io/compare-options";

/// Flux's prune switch (`disabled`), read from annotations or labels as Flux does.
pub const FLUX_PRUNE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/prune";
/// Flux's apply policy: `Override` (the default), `Merge`, `IfNotPresent`, `Ignore`.
pub const FLUX_SSA_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/ssa";
/// Flux's per-object recreate on an immutable-field change (`enabled`).
pub const FLUX_FORCE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/force";
/// Flux's switch that leaves an object alone (`disabled`).
pub const FLUX_RECONCILE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/reconcile";

/// The annotation that makes an object a hook, run at a phase of a sync rather than
/// kept as one of the app's objects: `PreSync`, `Sync`, `PostSync`, `SyncFail`.
pub const HOOK_ANNOTATION: &str = "tether.dev/hook";
/// Argo CD's hook annotation (same values), read when [`HOOK_ANNOTATION`] is absent.
pub const ARGOCD_HOOK_ANNOTATION: &str = "argocd.argoproj.io/hook";
/// When a hook's instance is deleted: `BeforeHookCreation` (the default),
/// `HookSucceeded`, `HookFailed`, comma-separated.
pub const HOOK_DELETE_POLICY_ANNOTATION: &str = "tether.dev/hook-delete-policy";
/// Argo CD's delete policy annotation, read when tether's is absent.
pub const ARGOCD_HOOK_DELETE_POLICY_ANNOTATION: &str = "argocd.argoproj.io/hook-delete-policy";
/// Helm's hook annotation, read when neither tether's nor Argo CD's is set, mapped to
/// phases as Argo CD maps it (`pre-install` → `PreSync`, …).
pub const HELM_HOOK_ANNOTATION: &str = "helm.sh/hook";
/// Helm's delete policy (`before-hook-creation`, `hook-succeeded`, `hook-failed`).
pub const HELM_HOOK_DELETE_POLICY_ANNOTATION: &str = "helm.sh/hook-delete-policy";
/// Helm's hook order, read as the wave when no wave annotation is set (as Argo CD does).
pub const HELM_HOOK_WEIGHT_ANNOTATION: &str = "helm.sh/hook-weight";
/// The one `helm.sh/hook` value that does not make a hook: Helm 2 marked CRDs with it,
/// and Argo CD applies them as ordinary objects.
const HELM_CRD_INSTALL: &str = "crd-install";

/// Where inventories live unless configuration says otherwise.
pub const DEFAULT_INVENTORY_NAMESPACE: &str = "tether-system";

/// The label naming the app an inventory ConfigMap belongs to. Not [`APP_LABEL`]:
/// the inventory is tether's record, not one of the app's objects.
pub const INVENTORY_LABEL: &str = "tether.dev/inventory";

/// An inventory ConfigMap's name is this prefix and the app's name.
pub const INVENTORY_PREFIX: &str = "tether-inventory-";

/// The longest app name whose inventory name still fits a DNS-1123 label (63).
pub const MAX_APP_NAME_LEN: usize = 63 - INVENTORY_PREFIX.len();

/// The ConfigMap name of an app's inventory.
pub fn inventory_name(app: &str) -> String {
    format!("{INVENTORY_PREFIX}{app}")
}

/// The ConfigMap, in the inventory namespace, naming the configuration file's apps
/// suspended from the API.
pub const SUSPENDED_CONFIGMAP: &str = "tether-suspended";

/// The ConfigMap, in the inventory namespace, holding the apps pinned to an earlier
/// revision by a rollback (issue #30): a key per app, the pin as JSON.
pub const PINNED_CONFIGMAP: &str = "tether-pins";

/// What tether's own record an object is (`Some`), which no app's manifests may
/// write: an inventory, the suspensions or the pins, in the inventory namespace. A tenant's
/// inventory is read and written as tether (see `cluster::tenancy`); Git writing it
/// would rewrite what tether prunes, so such an object is refused before a pass.
pub fn bookkeeping_of(
    group: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    inventory_namespace: &str,
) -> Option<&'static str> {
    if !group.is_empty() || kind != "ConfigMap" || namespace != Some(inventory_namespace) {
        return None;
    }
    if name.starts_with(INVENTORY_PREFIX) {
        Some("an app's inventory")
    } else if name == SUSPENDED_CONFIGMAP {
        Some("the apps suspended from the API")
    } else if name == PINNED_CONFIGMAP {
        Some("the apps pinned by a rollback")
    } else {
        None
    }
}

/// The app a live object is labelled for, if any.
pub fn app_of(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(APP_LABEL))
        .and_then(Value::as_str)
}

/// Whether a live object carries the app's ownership label.
pub fn owned_by(object: &Value, app: &str) -> bool {
    app_of(object) == Some(app)
}

/// Whether an object is annotated as a hook (tether's or Argo CD's annotation, any
/// value, or Helm's but `crd-install`, as Argo CD decides): hooks are not app
/// objects, and only they may name themselves by `metadata.generateName`.
pub fn is_hook(object: &Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| {
            a.contains_key(HOOK_ANNOTATION)
                || a.contains_key(ARGOCD_HOOK_ANNOTATION)
                || a.get(HELM_HOOK_ANNOTATION)
                    .is_some_and(|v| v.as_str() != Some(HELM_CRD_INSTALL))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_app_name_makes_a_63_character_inventory_name() {
        let name = "a".repeat(MAX_APP_NAME_LEN);
        assert_eq!(inventory_name(&name).len(), 63);
    }

    #[test]
    fn tethers_own_configmaps_are_its_bookkeeping_in_its_namespace_only() {
        let of = |group, kind, namespace, name| {
            bookkeeping_of(group, kind, namespace, name, "tether-system")
        };
        let inventory = Some("an app's inventory");
        assert_eq!(
            of(
                "",
                "ConfigMap",
                Some("tether-system"),
                "tether-inventory-web"
            ),
            inventory
        );
        assert_eq!(
            of(
                "",
                "ConfigMap",
                Some("tether-system"),
                "tether-inventory-t1.other"
            ),
            inventory
        );
        assert!(of("", "ConfigMap", Some("tether-system"), SUSPENDED_CONFIGMAP).is_some());
        assert!(of("", "ConfigMap", Some("tether-system"), PINNED_CONFIGMAP).is_some());
        assert_eq!(
            of("", "ConfigMap", Some("t1"), "tether-inventory-web"),
            None
        );
        assert_eq!(of("", "ConfigMap", Some("tether-system"), "settings"), None);
        assert_eq!(
            of("", "Secret", Some("tether-system"), "tether-inventory-web"),
            None
        );
        assert_eq!(
            of(
                "example.com",
                "ConfigMap",
                Some("tether-system"),
                "tether-inventory-web"
            ),
            None
        );
    }

    #[test]
    fn ownership_is_read_from_the_app_label_only() {
        let mine = serde_json::json!({"metadata": {"labels": {APP_LABEL: "web"}}});
        let other = serde_json::json!({"metadata": {"labels": {APP_LABEL: "api"}}});
        let unlabelled = serde_json::json!({"metadata": {"name": "x"}});
        assert!(owned_by(&mine, "web"));
        assert!(!owned_by(&other, "web"));
        assert_eq!(app_of(&other), Some("api"));
        assert_eq!(app_of(&unlabelled), None);
    }
}
