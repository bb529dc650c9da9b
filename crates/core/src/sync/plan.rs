//! The order objects are applied in: waves, and within a wave the kinds others depend
//! on first (Namespaces, then CRDs, then identities, RBAC, configuration, storage and
//! Services, then workloads and everything else). Pure: objects in, steps out.

use serde_json::Value;

use tether_diff::manifest::ObjectId;

use super::annotations::sync_wave;

/// Where a kind goes inside a wave, lowest first. Argo CD and Helm order kinds the
/// same way, for the same reason: what an object refers to exists before it does.
pub fn kind_rank(group: &str, kind: &str) -> u8 {
    match (group, kind) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        ("", "ServiceAccount") => 2,
        ("rbac.authorization.k8s.io", "ClusterRole" | "Role") => 3,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding" | "RoleBinding") => 4,
        ("", "ConfigMap" | "Secret") => 5,
        ("", "PersistentVolume" | "PersistentVolumeClaim") => 6,
        ("", "Service") => 7,
        _ => 8,
    }
}

/// One group of objects applied together: the same wave and kind rank. Each step
/// finishes before the next starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub wave: i64,
    pub rank: u8,
    /// Indices into the objects the plan was made from, in their original order.
    pub objects: Vec<usize>,
}

/// An object whose sync-wave annotation is not an integer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: annotation {annotation}: {value:?} is not an integer")]
pub struct WaveError {
    pub object: String,
    /// `tether.dev/sync-wave`, or Argo CD's `argocd.argoproj.io/sync-wave`.
    pub annotation: &'static str,
    pub value: String,
}

/// An object's wave: its annotation (tether's, else Argo CD's), or 0. Argo CD reads a
/// wave it cannot parse as 0; tether refuses it before anything is applied, whichever
/// annotation holds it, rather than apply in an order no one wrote.
pub fn wave_of(id: &ObjectId, object: &Value) -> Result<i64, WaveError> {
    let Some((annotation, raw)) = sync_wave(object) else {
        return Ok(0);
    };
    raw.as_str()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| WaveError {
            object: id.to_string(),
            annotation,
            value: raw.as_str().map_or_else(|| raw.to_string(), str::to_string),
        })
}

/// The steps that apply `objects` in order; every bad wave annotation is reported.
pub fn plan<'a>(
    objects: impl IntoIterator<Item = (&'a ObjectId, &'a Value)>,
) -> Result<Vec<Step>, Vec<WaveError>> {
    let mut keyed = Vec::new();
    let mut errors = Vec::new();
    for (index, (id, object)) in objects.into_iter().enumerate() {
        match wave_of(id, object) {
            Ok(wave) => keyed.push(((wave, kind_rank(&id.group, &id.kind)), index)),
            Err(err) => errors.push(err),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // Stable: objects of one step keep the order they were written in.
    keyed.sort_by_key(|(key, _)| *key);
    let mut steps: Vec<Step> = Vec::new();
    for ((wave, rank), index) in keyed {
        match steps.last_mut() {
            Some(step) if step.wave == wave && step.rank == rank => step.objects.push(index),
            _ => steps.push(Step {
                wave,
                rank,
                objects: vec![index],
            }),
        }
    }
    Ok(steps)
}

/// The order prune deletes in: the reverse of the apply order, so workloads go before
/// what they use, and cluster-scoped objects and Namespaces last (deleting a Namespace
/// deletes everything in it).
pub fn prune_order(ids: &mut [ObjectId]) {
    ids.sort_by_key(|id| {
        (
            id.namespace.is_none(),
            std::cmp::Reverse(kind_rank(&id.group, &id.kind)),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tether_schema::ownership::{ARGOCD_SYNC_WAVE_ANNOTATION, SYNC_WAVE_ANNOTATION};

    fn id(group: &str, kind: &str, name: &str) -> ObjectId {
        ObjectId {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: (kind != "Namespace" && kind != "CustomResourceDefinition")
                .then(|| "ns".to_string()),
            name: name.into(),
        }
    }

    fn with_wave(wave: Option<&str>) -> Value {
        match wave {
            Some(w) => json!({"metadata": {"annotations": {SYNC_WAVE_ANNOTATION: w}}}),
            None => json!({"metadata": {}}),
        }
    }

    #[test]
    fn kinds_others_depend_on_come_first_in_a_wave() {
        let ids = [
            id("apps", "Deployment", "web"),
            id("", "Service", "web"),
            id("", "ConfigMap", "conf"),
            id("example.com", "Widget", "w"),
            id(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "widgets.example.com",
            ),
            id("", "Namespace", "ns"),
            id("rbac.authorization.k8s.io", "RoleBinding", "rb"),
            id("rbac.authorization.k8s.io", "Role", "r"),
            id("", "ServiceAccount", "sa"),
        ];
        let objects: Vec<Value> = ids.iter().map(|_| with_wave(None)).collect();
        let steps = plan(ids.iter().zip(&objects)).unwrap();
        let order: Vec<&str> = steps
            .iter()
            .flat_map(|s| s.objects.iter().map(|&i| ids[i].kind.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                "Namespace",
                "CustomResourceDefinition",
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "ConfigMap",
                "Service",
                "Deployment",
                "Widget"
            ]
        );
        // Workloads and custom resources share the last rank: one step.
        assert_eq!(steps.last().unwrap().objects, vec![0, 3]);
    }

    #[test]
    fn waves_order_before_kinds_and_negative_waves_go_first() {
        let ids = [
            id("", "Namespace", "late"),
            id("apps", "Deployment", "early"),
            id("", "ConfigMap", "default"),
        ];
        let objects = [with_wave(Some("2")), with_wave(Some("-1")), with_wave(None)];
        let steps = plan(ids.iter().zip(&objects)).unwrap();
        let waves: Vec<(i64, Vec<usize>)> =
            steps.iter().map(|s| (s.wave, s.objects.clone())).collect();
        assert_eq!(waves, vec![(-1, vec![1]), (0, vec![2]), (2, vec![0])]);
    }

    #[test]
    fn every_bad_wave_is_reported() {
        let ids = [id("", "ConfigMap", "a"), id("", "ConfigMap", "b")];
        let objects = [with_wave(Some("first")), with_wave(Some("1.5"))];
        let errors = plan(ids.iter().zip(&objects)).unwrap_err();
        assert_eq!(errors.len(), 2);
        assert_eq!(
            errors[0].to_string(),
            "ConfigMap ns/a: annotation tether.dev/sync-wave: \"first\" is not an integer"
        );
        // Not a string at all: YAML `tether.dev/sync-wave: 1` would be rejected by the
        // API server; tether says so before it gets there.
        let numeric = json!({"metadata": {"annotations": {SYNC_WAVE_ANNOTATION: 1}}});
        assert!(wave_of(&ids[0], &numeric).is_err());
    }

    #[test]
    fn argo_cds_wave_is_read_and_tethers_wins_where_both_are_set() {
        let ids = [
            id("", "ConfigMap", "argo-late"),
            id("", "ConfigMap", "both"),
            id("", "ConfigMap", "default"),
        ];
        let objects = [
            json!({"metadata": {"annotations": {ARGOCD_SYNC_WAVE_ANNOTATION: "3"}}}),
            json!({"metadata": {"annotations": {
                ARGOCD_SYNC_WAVE_ANNOTATION: "5",
                SYNC_WAVE_ANNOTATION: "-1",
            }}}),
            with_wave(None),
        ];
        let steps = plan(ids.iter().zip(&objects)).unwrap();
        let waves: Vec<(i64, Vec<usize>)> =
            steps.iter().map(|s| (s.wave, s.objects.clone())).collect();
        assert_eq!(waves, vec![(-1, vec![1]), (0, vec![2]), (3, vec![0])]);
        let bad = json!({"metadata": {"annotations": {ARGOCD_SYNC_WAVE_ANNOTATION: "soon"}}});
        assert_eq!(
            wave_of(&ids[0], &bad).unwrap_err().to_string(),
            "ConfigMap ns/argo-late: annotation argocd.argoproj.io/sync-wave: \"soon\" is not an integer"
        );
    }

    #[test]
    fn prune_deletes_workloads_first_and_namespaces_last() {
        let mut ids = vec![
            id("", "Namespace", "ns"),
            id("", "ConfigMap", "conf"),
            id("apiextensions.k8s.io", "CustomResourceDefinition", "crd"),
            id("apps", "Deployment", "web"),
        ];
        prune_order(&mut ids);
        let kinds: Vec<&str> = ids.iter().map(|i| i.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "Deployment",
                "ConfigMap",
                "CustomResourceDefinition",
                "Namespace"
            ]
        );
    }
}
