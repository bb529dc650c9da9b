//! The plan of a sync: one ordered list of steps, as gitops-engine orders its sync
//! tasks. Each step has a phase (PreSync → Sync → PostSync, then SyncFail, run only
//! when the pass failed), a wave, and a kind rank (Namespaces, then CRDs, then
//! identities, RBAC, configuration, storage and Services, then workloads and
//! everything else), and is either objects to apply or hooks to run and wait for.
//! The pass walks the plan top to bottom (`pipeline`). Pure: objects in, steps out.
//!
//! Within a phase, the objects come before the hooks: the app's objects are all Sync
//! objects, and its Sync hooks run once every wave is applied (where Argo CD runs a
//! Sync hook among the objects of its wave). The Namespaces and CRDs a revision
//! creates move to the front of PreSync when it has PreSync hooks ([`hoist`]), as
//! Argo CD's `CreateNamespace` makes the namespace a PreSync task: a hook in a
//! namespace of the revision could never run otherwise.

use serde_json::Value;

use tether_diff::manifest::ObjectId;

use super::annotations::sync_wave;
use super::stage::Phase;

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

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Work {
    /// Apply the app's objects.
    Apply,
    /// Create hooks and wait for them to finish.
    RunHooks,
}

/// One group of objects or hooks handled together: the same phase, work, wave and
/// kind rank. Each step finishes before the next starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub phase: Phase,
    pub work: Work,
    pub wave: i64,
    pub rank: u8,
    /// Indices into the objects the plan was made from, in their original order
    /// ([`Work::Apply`]), or into its hooks, by name ([`Work::RunHooks`]).
    pub objects: Vec<usize>,
}

impl Step {
    /// Where the step goes in the plan, earliest first.
    fn key(&self) -> (Phase, Work, i64, u8) {
        (self.phase, self.work, self.wave, self.rank)
    }
}

/// The kinds a revision's PreSync hooks may need to exist (`kind_rank`): Namespaces
/// (0) and CRDs (1).
const FOUNDATION_RANK: u8 = 1;

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

/// The plan of a sync of `objects` (all Sync objects) and `hooks` (each with the
/// phases it runs in: one step entry per phase); every bad wave annotation is
/// reported.
pub fn plan<'a>(
    objects: impl IntoIterator<Item = (&'a ObjectId, &'a Value)>,
    hooks: impl IntoIterator<Item = (&'a ObjectId, &'a Value, &'a [Phase])>,
) -> Result<Vec<Step>, Vec<WaveError>> {
    let mut keyed = Vec::new();
    let mut errors = Vec::new();
    for (index, (id, object)) in objects.into_iter().enumerate() {
        match wave_of(id, object) {
            Ok(wave) => {
                let rank = kind_rank(&id.group, &id.kind);
                keyed.push(((Phase::Sync, Work::Apply, wave, rank), "", index));
            }
            Err(err) => errors.push(err),
        }
    }
    for (index, (id, object, phases)) in hooks.into_iter().enumerate() {
        match wave_of(id, object) {
            Ok(wave) => {
                let rank = kind_rank(&id.group, &id.kind);
                for &phase in phases {
                    let key = (phase, Work::RunHooks, wave, rank);
                    keyed.push((key, id.name.as_str(), index));
                }
            }
            Err(err) => errors.push(err),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // Stable: objects of one step keep the order they were written in (their names
    // are all ""); hooks go by name, as Argo CD and Helm order them.
    keyed.sort_by_key(|&(key, name, _)| (key, name));
    let mut steps: Vec<Step> = Vec::new();
    for ((phase, work, wave, rank), _, index) in keyed {
        match steps.last_mut() {
            Some(step) if step.key() == (phase, work, wave, rank) => step.objects.push(index),
            _ => steps.push(Step {
                phase,
                work,
                wave,
                rank,
                objects: vec![index],
            }),
        }
    }
    Ok(steps)
}

/// Moves the Namespaces and CRDs the revision creates (`created`, by object index)
/// to the front of the PreSync phase, in their waves, when the plan has PreSync
/// hooks: they exist before those hooks run. Without PreSync hooks the plan is left
/// as it is.
pub(super) fn hoist(steps: &mut Vec<Step>, created: impl Fn(usize) -> bool) {
    let pre_sync_hooks = steps
        .iter()
        .any(|s| s.phase == Phase::PreSync && s.work == Work::RunHooks);
    if !pre_sync_hooks {
        return;
    }
    let mut hoisted = Vec::new();
    for step in steps.iter_mut() {
        if step.phase != Phase::Sync || step.work != Work::Apply || step.rank > FOUNDATION_RANK {
            continue;
        }
        let (first, rest): (Vec<usize>, Vec<usize>) =
            step.objects.iter().copied().partition(|&i| created(i));
        step.objects = rest;
        if !first.is_empty() {
            hoisted.push(Step {
                phase: Phase::PreSync,
                objects: first,
                ..step.clone()
            });
        }
    }
    steps.retain(|s| !s.objects.is_empty());
    steps.extend(hoisted);
    // Stable: the hoisted steps keep their order, ahead of the PreSync hooks.
    steps.sort_by_key(Step::key);
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

    fn no_hooks<'a>() -> std::iter::Empty<(&'a ObjectId, &'a Value, &'a [Phase])> {
        std::iter::empty()
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
        let steps = plan(ids.iter().zip(&objects), no_hooks()).unwrap();
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
        let steps = plan(ids.iter().zip(&objects), no_hooks()).unwrap();
        let waves: Vec<(i64, Vec<usize>)> =
            steps.iter().map(|s| (s.wave, s.objects.clone())).collect();
        assert_eq!(waves, vec![(-1, vec![1]), (0, vec![2]), (2, vec![0])]);
    }

    #[test]
    fn every_bad_wave_is_reported() {
        let ids = [id("", "ConfigMap", "a"), id("", "ConfigMap", "b")];
        let objects = [with_wave(Some("first")), with_wave(Some("1.5"))];
        let errors = plan(ids.iter().zip(&objects), no_hooks()).unwrap_err();
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
        let steps = plan(ids.iter().zip(&objects), no_hooks()).unwrap();
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

    /// Each step as `phase work wave: kinds/names`, for a reader of the plan.
    fn outline(steps: &[Step], objects: &[ObjectId], hooks: &[ObjectId]) -> Vec<String> {
        steps
            .iter()
            .map(|s| {
                let of = match s.work {
                    Work::Apply => objects,
                    Work::RunHooks => hooks,
                };
                let names: Vec<String> = s
                    .objects
                    .iter()
                    .map(|&i| format!("{}/{}", of[i].kind, of[i].name))
                    .collect();
                format!(
                    "{} {:?} {}: {}",
                    s.phase.as_str(),
                    s.work,
                    s.wave,
                    names.join(" ")
                )
            })
            .collect()
    }

    #[test]
    fn the_plan_orders_phases_then_objects_before_hooks_then_waves_kinds_and_hook_names() {
        let objects = [
            id("apps", "Deployment", "web"),
            id("", "ConfigMap", "late"),
            id("", "Namespace", "ns"),
            id("", "ConfigMap", "conf"),
        ];
        let object_waves = [None, Some("2"), None, None].map(with_wave);
        let hooks = [
            id("batch", "Job", "smoke"),
            id("batch", "Job", "migrate"),
            id("", "ServiceAccount", "migrate"),
            id("batch", "Job", "notify"),
            id("batch", "Job", "announce"),
            id("batch", "Job", "cleanup"),
            id("batch", "Job", "seed"),
        ];
        let hook_waves = [None, Some("1"), None, None, Some("-1"), None, None].map(with_wave);
        let phases: [&[Phase]; 7] = [
            &[Phase::PostSync],
            &[Phase::PreSync],
            &[Phase::PreSync],
            &[Phase::PostSync, Phase::SyncFail],
            &[Phase::Sync],
            &[Phase::SyncFail],
            // Argo CD's Skip: no phase, never run.
            &[],
        ];
        let hook_entries = hooks
            .iter()
            .zip(&hook_waves)
            .zip(phases)
            .map(|((id, object), phases)| (id, object, phases));
        let steps = plan(objects.iter().zip(&object_waves), hook_entries).unwrap();
        assert_eq!(
            outline(&steps, &objects, &hooks),
            [
                "PreSync RunHooks 0: ServiceAccount/migrate",
                "PreSync RunHooks 1: Job/migrate",
                "Sync Apply 0: Namespace/ns",
                "Sync Apply 0: ConfigMap/conf",
                "Sync Apply 0: Deployment/web",
                "Sync Apply 2: ConfigMap/late",
                // A Sync hook of an earlier wave still runs once every wave is applied.
                "Sync RunHooks -1: Job/announce",
                "PostSync RunHooks 0: Job/notify Job/smoke",
                "SyncFail RunHooks 0: Job/cleanup Job/notify",
            ]
        );
    }

    #[test]
    fn namespaces_and_crds_the_revision_creates_go_before_presync_hooks() {
        let objects = [
            id("", "Namespace", "existing"),
            id("", "Namespace", "new"),
            id(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "widgets.example.com",
            ),
            id("", "ConfigMap", "conf"),
            id("", "Namespace", "later"),
        ];
        let waves = [None, None, None, None, Some("3")].map(with_wave);
        let hooks = [id("batch", "Job", "migrate")];
        let hook_object = with_wave(None);
        let pre_sync: &[Phase] = &[Phase::PreSync];
        let hook_entries = [(&hooks[0], &hook_object, pre_sync)];
        let created = |i: usize| objects[i].name != "existing";
        let mut steps = plan(objects.iter().zip(&waves), hook_entries).unwrap();
        hoist(&mut steps, created);
        assert_eq!(
            outline(&steps, &objects, &hooks),
            [
                "PreSync Apply 0: Namespace/new",
                "PreSync Apply 0: CustomResourceDefinition/widgets.example.com",
                "PreSync Apply 3: Namespace/later",
                "PreSync RunHooks 0: Job/migrate",
                "Sync Apply 0: Namespace/existing",
                "Sync Apply 0: ConfigMap/conf",
            ]
        );
        // Without PreSync hooks, nothing needs them early: the plan stays as it is.
        let mut steps = plan(objects.iter().zip(&waves), no_hooks()).unwrap();
        let before = steps.clone();
        hoist(&mut steps, created);
        assert_eq!(steps, before);
    }
}
