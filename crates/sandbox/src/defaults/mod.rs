//! Server-side defaulting for the sandbox: what a real kube-apiserver fills in on every
//! write, so a diff against the sandbox sees the same defaults a cluster would report.
//!
//! The values come from kube-apiserver 1.36 (`pkg/apis/*/v1/defaults.go`, the registry
//! strategies' `PrepareForCreate`/`PrepareForUpdate`, the built-in admission plugins
//! `ServiceAccount`, `Priority`, `DefaultTolerationSeconds` and
//! `StorageObjectInUseProtection`, and the Service IP/port allocators), checked field by
//! field against the answers recorded in `tests/fixtures/kube-apiserver-v1.36/apply/`.
//!
//! Handlers call, on every write: [`initial_status`] (create only: the real server
//! resets `status`), then [`Defaulter::default_object`], then the validation of
//! [`super::validate`]. `metadata.uid` and `metadata.name` (after `generateName`) must be
//! set before `default_object`, as the real server fills them first: the Job selector
//! and the Pod token volume are derived from them.
//!
//! | kind | defaults applied |
//! |---|---|
//! | every pod template (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob `jobTemplate`, ReplicationController, PodTemplate) and Pod | `metadata: {}`; `restartPolicy: Always`, `dnsPolicy: ClusterFirst`, `schedulerName: default-scheduler`, `terminationGracePeriodSeconds: 30`, `securityContext: {}`; `serviceAccount` mirrors `serviceAccountName`; with `hostNetwork`, ports' `hostPort` = `containerPort` |
//! | containers, init and ephemeral containers | `imagePullPolicy` `Always` for `:latest` or no tag (and no digest), else `IfNotPresent`; `terminationMessagePath: /dev/termination-log`, `terminationMessagePolicy: File`; `resources: {}`; ports' `protocol: TCP`; probes' `timeoutSeconds: 1`, `periodSeconds: 10`, `successThreshold: 1`, `failureThreshold: 3`; `httpGet` `path: /`, `scheme: HTTP` (probes and lifecycle hooks); `grpc.service: ""`; env `fieldRef.apiVersion: v1`, `resourceFieldRef.divisor: "0"` |
//! | volumes | no source: `emptyDir: {}`; `configMap`/`secret`/`downwardAPI`/`projected` `defaultMode: 420`; projected `serviceAccountToken.expirationSeconds: 3600`; `hostPath.type: ""`; ephemeral claim templates `volumeMode: Filesystem` |
//! | Pod only | `enableServiceLinks: true`; requests default to limits; on create: `serviceAccountName: default`, the `kube-api-access-xxxxx` token volume and its mounts (unless `automountServiceAccountToken: false`), `priority` (0, or the `system-*` classes) and `preemptionPolicy: PreemptLowerPriority`, the `not-ready`/`unreachable` `NoExecute` tolerations for 300 s; `status.qosClass` |
//! | every built-in kind | explicit `null` members outside `status` removed, as Go's decoding drops them (`creationTimestamp: null` in templates) |
//! | resource quantities | canonical form (`1024Mi` → `1Gi`, `0.5` → `500m`), requests/limits rounded up to milli-units |
//! | Namespace | label `kubernetes.io/metadata.name`; on create `spec.finalizers` gets `kubernetes`; on update finalizers are kept from the stored object |
//! | Secret | `type: Opaque`; `stringData` merged into `data` (base64) and removed |
//! | Service | `type: ClusterIP`, `sessionAffinity: None` (`ClientIP` gets `timeoutSeconds: 10800`), ports' `protocol: TCP` and `targetPort` = `port`; `clusterIP`/`clusterIPs` allocated from 10.96.0.0/12 (kept on update); `ipFamilies: [IPv4]`, `ipFamilyPolicy: SingleStack` (`RequireDualStack` for headless without selector); `internalTrafficPolicy: Cluster`; NodePort/LoadBalancer: `externalTrafficPolicy: Cluster`, `nodePort` allocated from 30000-32767 (kept on update, by port name); LoadBalancer: `allocateLoadBalancerNodePorts: true`, `healthCheckNodePort` for `externalTrafficPolicy: Local`; on a type change, the allocated or defaulted values the new type does not use are dropped (`dropTypeDependentFields`) |
//! | LimitRange | `Container` items: `default` from `max`, `defaultRequest` from `default`, else `min` |
//! | PersistentVolumeClaim | `volumeMode: Filesystem`; on create finalizer `kubernetes.io/pvc-protection` |
//! | PersistentVolume | `persistentVolumeReclaimPolicy: Retain`, `volumeMode: Filesystem`; on create finalizer `kubernetes.io/pv-protection` |
//! | Deployment | `replicas: 1`, `strategy: RollingUpdate` 25%/25%, `revisionHistoryLimit: 10`, `progressDeadlineSeconds: 600` |
//! | StatefulSet | `replicas: 1`, `podManagementPolicy: OrderedReady`, `updateStrategy: RollingUpdate` with `partition: 0`, `revisionHistoryLimit: 10`, `persistentVolumeClaimRetentionPolicy` `Retain`/`Retain`; `volumeClaimTemplates` get `apiVersion`/`kind`, `volumeMode` and `status.phase: Pending` |
//! | DaemonSet | `updateStrategy: RollingUpdate` (`maxUnavailable: 1`, `maxSurge: 0`), `revisionHistoryLimit: 10`; annotation `deprecated.daemonset.template.generation` (1, +1 when the template changes) |
//! | ReplicaSet, ReplicationController | `replicas: 1`; RC: `selector` and labels from the template labels |
//! | Job | `parallelism`/`completions: 1`, `backoffLimit: 6` (MaxInt32 with `backoffLimitPerIndex`), `completionMode: NonIndexed`, `suspend: false`, `manualSelector: false`, `podReplacementPolicy: TerminatingOrFailed` (`Failed` with `podFailurePolicy`); on create the `controller-uid`/`job-name` labels and selector; object labels from the template when empty |
//! | CronJob | `concurrencyPolicy: Allow`, `suspend: false`, `successfulJobsHistoryLimit: 3`, `failedJobsHistoryLimit: 1`, `jobTemplate.metadata: {}` |
//! | NetworkPolicy | `policyTypes: [Ingress]` (+ `Egress` when egress rules exist); ports' `protocol: TCP` |
//! | IngressClass | `parameters.scope: Cluster` |
//! | RoleBinding, ClusterRoleBinding | `roleRef.apiGroup` and User/Group subjects' `apiGroup: rbac.authorization.k8s.io` |
//! | HorizontalPodAutoscaler | `minReplicas: 1`; no metrics: CPU at 80% utilisation; a given `behavior` is completed with the scale-up/scale-down defaults |
//! | PriorityClass | `preemptionPolicy: PreemptLowerPriority` |
//! | StorageClass | `reclaimPolicy: Delete`, `volumeBindingMode: Immediate` |
//! | CustomResourceDefinition | `scope: Namespaced`, `names.singular`, `names.listKind`, `conversion.strategy: None`, webhook service `port: 443`, `status.storedVersions` |
//! | custom resources | fields the CRD's structural schema does not declare pruned ([`prune_custom_resource`]), then its `default`s applied ([`default_custom_resource`]) |
//!
//! Not reproduced: allocation errors (a requested clusterIP or nodePort already taken is
//! accepted, not refused), the ServiceAccount admission's refusal when the account does
//! not exist (it needs storage: a handler check), PriorityClasses other than the
//! built-in `system-*` ones, LimitRange defaults, and dual-stack clusters.

use std::collections::BTreeSet;

use parking_lot::Mutex;
use serde_json::{Map, Value, json};

pub use crd::{crd_established_status, default_custom_resource, prune_custom_resource};
pub use networking::KUBERNETES_SERVICE_IP;

use tether_schema::canonical_quantity;

use self::core::{default_limit_range, default_namespace, default_pvc_spec, default_secret};
use crd::default_crd;
use networking::default_network_policy;
use pods::{default_pod, default_pod_template, default_template_at};
use rbac::default_role_binding;
use workloads::{
    default_cron_job, default_daemon_set, default_deployment, default_hpa, default_job,
    default_replication_controller, default_stateful_set,
};

mod core;
mod crd;
mod networking;
mod pods;
mod rbac;
mod workloads;

type Obj = Map<String, Value>;

/// Groups whose kinds the real server decodes into Go types, where an explicit `null`
/// is the zero value and disappears (`creationTimestamp: null` in the templates
/// `kubectl create --dry-run` prints). CRDs are left out: their schemas may hold
/// `default: null` on purpose; custom resources keep what their schema allows.
const BUILT_IN_GROUPS: [&str; 10] = [
    "",
    "apps",
    "batch",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "policy",
    "autoscaling",
    "coordination.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
];

/// Applies the real API server's defaults on writes; holds the Service allocators.
///
/// Allocation is first-free from the dynamic band, so it is deterministic for tests;
/// `release` gives addresses and ports back when a Service is deleted or a write fails.
pub(crate) struct Defaulter {
    alloc: Mutex<Allocations>,
}

#[derive(Default)]
struct Allocations {
    cluster_ips: BTreeSet<u32>,
    node_ports: BTreeSet<u16>,
}

impl Default for Defaulter {
    fn default() -> Self {
        Self::new()
    }
}

impl Defaulter {
    /// A defaulter whose only allocation is 10.96.0.1, the `kubernetes` Service.
    pub(crate) fn new() -> Self {
        let mut alloc = Allocations::default();
        alloc.cluster_ips.insert(u32::from(KUBERNETES_SERVICE_IP));
        Self {
            alloc: Mutex::new(alloc),
        }
    }

    /// Fills in what the real API server defaults on a write of `obj` (a full object,
    /// `apiVersion`/`kind` set). `old` is the stored object on update: allocated
    /// clusterIPs and nodePorts, Namespace finalizers and DaemonSet template
    /// generations carry over from it; create-only admission (Pod service account,
    /// tolerations, priority; PVC protection; Job selector) runs only without it.
    pub(crate) fn default_object(
        &self,
        group: &str,
        kind: &str,
        obj: &mut Value,
        old: Option<&Value>,
    ) {
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        if BUILT_IN_GROUPS.contains(&group) {
            drop_nulls(o);
        }
        match (group, kind) {
            ("", "Namespace") => default_namespace(o, old),
            ("", "Secret") => default_secret(o),
            ("", "Service") => self.default_service(o, old),
            ("", "Pod") => default_pod(o, old.is_none()),
            ("", "PodTemplate") => {
                if let Some(t) = child(o, "template") {
                    default_pod_template(t);
                }
            }
            ("", "ReplicationController") => default_replication_controller(o),
            ("", "PersistentVolumeClaim") => {
                if let Some(spec) = child(o, "spec") {
                    default_pvc_spec(spec);
                }
                if old.is_none() {
                    add_finalizer(o, "kubernetes.io/pvc-protection");
                }
            }
            ("", "PersistentVolume") => {
                if let Some(spec) = child(o, "spec") {
                    set_str(spec, "persistentVolumeReclaimPolicy", "Retain");
                    set_str(spec, "volumeMode", "Filesystem");
                    canonicalize_quantities(spec, "capacity", false);
                }
                if old.is_none() {
                    add_finalizer(o, "kubernetes.io/pv-protection");
                }
            }
            ("", "LimitRange") => default_limit_range(o),
            ("", "ResourceQuota") => {
                if let Some(spec) = child(o, "spec") {
                    canonicalize_quantities(spec, "hard", false);
                }
            }
            ("apps", "Deployment") => default_deployment(o),
            ("apps", "StatefulSet") => default_stateful_set(o),
            ("apps", "DaemonSet") => default_daemon_set(o, old),
            ("apps", "ReplicaSet") => {
                if let Some(spec) = child(o, "spec") {
                    set_ptr(spec, "replicas", json!(1));
                    default_template_at(spec);
                }
            }
            ("batch", "Job") => default_job(o, old.is_none()),
            ("batch", "CronJob") => default_cron_job(o),
            ("networking.k8s.io", "NetworkPolicy") => default_network_policy(o),
            ("networking.k8s.io", "IngressClass") => {
                if let Some(params) = child(o, "spec").and_then(|s| child(s, "parameters")) {
                    set_str(params, "scope", "Cluster");
                }
            }
            ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
                default_role_binding(o)
            }
            ("autoscaling", "HorizontalPodAutoscaler") => default_hpa(o),
            ("scheduling.k8s.io", "PriorityClass") => {
                set_str(o, "preemptionPolicy", "PreemptLowerPriority");
            }
            ("storage.k8s.io", "StorageClass") => {
                set_str(o, "reclaimPolicy", "Delete");
                set_str(o, "volumeBindingMode", "Immediate");
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => default_crd(o),
            _ => {}
        }
    }
}

/// What `status` a freshly created object of this kind gets: the real server resets
/// status on create to the zero value of the kind's status type (as Go serialises it)
/// plus what `PrepareForCreate` sets. `None` when the kind has no status, or for custom
/// resources, whose status the handler drops when the CRD has a status subresource.
///
/// For a Pod, `default_object` then adds `qosClass`; for a CRD, `storedVersions`.
pub(crate) fn initial_status(group: &str, kind: &str) -> Option<Value> {
    let status = match (group, kind) {
        ("", "Namespace") => json!({"phase": "Active"}),
        ("", "Service") => json!({"loadBalancer": {}}),
        ("", "PersistentVolumeClaim" | "PersistentVolume") => json!({"phase": "Pending"}),
        ("", "Pod") => json!({"phase": "Pending"}),
        ("", "ReplicationController") => json!({"replicas": 0}),
        ("", "ResourceQuota") => json!({}),
        ("apps", "Deployment") => json!({}),
        ("apps", "ReplicaSet") => json!({"replicas": 0}),
        ("apps", "StatefulSet") => json!({"replicas": 0, "availableReplicas": 0}),
        ("apps", "DaemonSet") => json!({
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        }),
        ("batch", "Job" | "CronJob") => json!({}),
        ("networking.k8s.io", "Ingress") => json!({"loadBalancer": {}}),
        ("policy", "PodDisruptionBudget") => json!({
            "disruptionsAllowed": 0,
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "expectedPods": 0,
        }),
        ("autoscaling", "HorizontalPodAutoscaler") => {
            json!({"desiredReplicas": 0, "currentMetrics": null})
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => json!({
            "conditions": null,
            "acceptedNames": {"plural": "", "kind": ""},
        }),
        _ => return None,
    };
    Some(status)
}

/// Whether the kind tracks `metadata.generation` (set to 1 on create, bumped when the
/// spec changes): the kinds whose strategy sets it, as the `generation` in the
/// recorded apply answers shows. Custom resources always do.
pub(crate) fn tracks_generation(group: &str, kind: &str, is_custom: bool) -> bool {
    if is_custom {
        return true;
    }
    matches!(
        (group, kind),
        ("", "Pod" | "ReplicationController")
            | (
                "apps",
                "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
            )
            | ("batch", "Job" | "CronJob")
            | ("networking.k8s.io", "Ingress" | "NetworkPolicy")
            | ("policy", "PodDisruptionBudget")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration"
                    | "MutatingWebhookConfiguration"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            )
            | (
                "flowcontrol.apiserver.k8s.io",
                "FlowSchema" | "PriorityLevelConfiguration"
            )
    )
}

fn add_finalizer(o: &mut Obj, finalizer: &str) {
    let Some(meta) = ensure_obj(o, "metadata") else {
        return;
    };
    let list = meta
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if list.is_null() {
        *list = Value::Array(Vec::new());
    }
    if let Some(l) = list.as_array_mut()
        && !l.iter().any(|f| f == finalizer)
    {
        l.push(json!(finalizer));
    }
}

// ---- quantities ----

/// Rewrites every quantity of the map at `holder[key]` in canonical form; a
/// `ResourceList` (`round_to_milli`) is first rounded up to milli-units, as
/// `SetDefaults_ResourceList` does.
fn canonicalize_quantities(holder: &mut Obj, key: &str, round_to_milli: bool) {
    if let Some(list) = child(holder, key) {
        let scale = round_to_milli.then_some(-3);
        let keys: Vec<String> = list.keys().cloned().collect();
        for k in keys {
            canonicalize_value(list, &k, scale);
        }
    }
}

/// Rewrites the quantity at `holder[key]` (a string, or a number as YAML may give) in
/// canonical form; a value that does not parse is left for validation to report.
fn canonicalize_value(holder: &mut Obj, key: &str, scale: Option<i32>) {
    let Some(value) = holder.get_mut(key) else {
        return;
    };
    let text = match &*value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return,
    };
    if let Some(canonical) = canonical_quantity(&text, scale) {
        *value = json!(canonical);
    }
}

// ---- JSON helpers: Go's "unset" is absent, null, or the zero value ----

fn is_unset(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

fn is_empty_str(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// Defaults a pointer field: only absent or null counts as unset.
fn set_ptr(m: &mut Obj, key: &str, value: Value) {
    if is_unset(m.get(key)) {
        m.insert(key.to_string(), value);
    }
}

/// Defaults a string field: the empty string counts as unset too.
fn set_str(m: &mut Obj, key: &str, value: &str) {
    if is_empty_str(m.get(key)) {
        m.insert(key.to_string(), json!(value));
    }
}

/// Defaults an integer field that is not a pointer: zero counts as unset.
fn set_nonzero(m: &mut Obj, key: &str, value: i64) {
    let unset = match m.get(key) {
        None | Some(Value::Null) => true,
        Some(v) => v.as_i64() == Some(0),
    };
    if unset {
        m.insert(key.to_string(), json!(value));
    }
}

fn str_of<'a>(m: &'a Obj, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or("")
}

fn child<'a>(m: &'a mut Obj, key: &str) -> Option<&'a mut Obj> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

fn array<'a>(m: &'a mut Obj, key: &str) -> Option<&'a mut Vec<Value>> {
    m.get_mut(key).and_then(Value::as_array_mut)
}

/// The object at `key`, created empty when absent or null; None when the field holds
/// something else (invalid input that validation reports; defaulting leaves it).
fn ensure_obj<'a>(m: &'a mut Obj, key: &str) -> Option<&'a mut Obj> {
    if is_unset(m.get(key)) {
        m.insert(key.to_string(), Value::Object(Map::new()));
    }
    child(m, key)
}

/// Removes `null` members everywhere but in `status`, which the server writes itself
/// (and where Go prints some nil lists as `null`).
fn drop_nulls(o: &mut Obj) {
    o.retain(|_, v| !v.is_null());
    for (key, value) in o.iter_mut() {
        if key != "status" {
            drop_nulls_in(value);
        }
    }
}

fn drop_nulls_in(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.retain(|_, v| !v.is_null());
            for value in o.values_mut() {
                drop_nulls_in(value);
            }
        }
        Value::Array(items) => {
            for item in items {
                drop_nulls_in(item);
            }
        }
        _ => {}
    }
}

fn sort_keys(m: &mut Obj) {
    let mut entries: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    m.extend(entries);
}

#[cfg(test)]
mod tests;
