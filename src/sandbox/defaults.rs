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

mod quantity;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::{Mutex, PoisonError};

use base64::Engine as _;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub use quantity::canonical_quantity;

type Obj = Map<String, Value>;

/// The Service CIDR the sandbox allocates from: kube-apiserver's default
/// `--service-cluster-ip-range` in kubeadm and kind clusters.
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);
/// The `kubernetes` Service's address: always the first host of the Service CIDR.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// kube-apiserver's default `--service-node-port-range`.
pub const NODE_PORT_RANGE: (u16, u16) = (30000, 32767);
/// Addresses below this offset are left to clusterIPs users ask for by hand: the real
/// allocator (KEP-3070) keeps min(max(16, size/16), 256) addresses at the bottom of the
/// range for static use, 256 for a /12.
const STATIC_IP_BAND: u32 = 256;
/// The same rule applied to node ports: min(max(16, 2768/16), 128) = 128.
const STATIC_PORT_BAND: u16 = 128;
/// `v1.DefaultTerminationGracePeriodSeconds`.
const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// Mode 0644: `ConfigMapVolumeSourceDefaultMode` and its siblings.
const VOLUME_DEFAULT_MODE: i64 = 420;
/// `DefaultTolerationSeconds` admission plugin: `--default-not-ready-toleration-seconds`
/// and `--default-unreachable-toleration-seconds`.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;
/// The ServiceAccount admission plugin's token lifetime: one hour plus seven seconds, so
/// kubelet can tell an admission-made projection from a user's.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// `v1.DefaultClientIPServiceAffinitySeconds`: three hours.
const CLIENT_IP_AFFINITY_SECONDS: i64 = 10800;
/// The characters of `utilrand.String`, which names the token volume.
const RAND_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

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
pub struct Defaulter {
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
    pub fn new() -> Self {
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
    pub fn default_object(&self, group: &str, kind: &str, obj: &mut Value, old: Option<&Value>) {
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

    /// Gives back the clusterIPs and nodePorts `obj` holds that `keep` does not: call it
    /// with the deleted Service (`keep` None), with a written object whose write failed
    /// or was a dry run (`keep` = the stored object), or with the old object after a
    /// successful update (`keep` = the new one).
    pub fn release(&self, obj: &Value, keep: Option<&Value>) {
        let (ips, ports) = service_allocations(obj);
        let (keep_ips, keep_ports) = keep.map(service_allocations).unwrap_or_default();
        let mut alloc = self.lock();
        for ip in ips.difference(&keep_ips) {
            if *ip != u32::from(KUBERNETES_SERVICE_IP) {
                alloc.cluster_ips.remove(ip);
            }
        }
        for port in ports.difference(&keep_ports) {
            alloc.node_ports.remove(port);
        }
    }

    /// Marks the clusterIPs and nodePorts of a stored Service as taken, for a sandbox
    /// that loads objects it did not default itself (a snapshot).
    pub fn reserve(&self, obj: &Value) {
        let (ips, ports) = service_allocations(obj);
        let mut alloc = self.lock();
        alloc.cluster_ips.extend(ips);
        alloc.node_ports.extend(ports);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Allocations> {
        // The allocation sets stay consistent even if a holder panicked.
        self.alloc.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn allocate_ip(&self) -> Option<Ipv4Addr> {
        let base = u32::from(SERVICE_CIDR.0);
        let size = 1u32 << (32 - SERVICE_CIDR.1);
        let mut alloc = self.lock();
        // The network and broadcast addresses are never handed out.
        let candidate = (STATIC_IP_BAND..size - 1)
            .chain(1..STATIC_IP_BAND)
            .map(|offset| base + offset)
            .find(|ip| !alloc.cluster_ips.contains(ip))?;
        alloc.cluster_ips.insert(candidate);
        Some(Ipv4Addr::from(candidate))
    }

    fn allocate_port(&self) -> Option<u16> {
        let (lo, hi) = NODE_PORT_RANGE;
        let mut alloc = self.lock();
        let candidate = (lo + STATIC_PORT_BAND..=hi)
            .chain(lo..lo + STATIC_PORT_BAND)
            .find(|p| !alloc.node_ports.contains(p))?;
        alloc.node_ports.insert(candidate);
        Some(candidate)
    }

    fn default_service(&self, o: &mut Obj, old: Option<&Value>) {
        let old_spec = old.and_then(|v| v.get("spec"));
        let new_type = o
            .get("spec")
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .unwrap_or("ClusterIP");
        // Load-balancer status only means something for a LoadBalancer.
        if old.is_some()
            && new_type != "LoadBalancer"
            && let Some(status) = child(o, "status")
        {
            status.insert("loadBalancer".into(), json!({}));
        }
        let Some(spec) = child(o, "spec") else {
            return;
        };
        set_str(spec, "sessionAffinity", "None");
        if str_of(spec, "sessionAffinity") == "None" {
            spec.remove("sessionAffinityConfig");
        } else if str_of(spec, "sessionAffinity") == "ClientIP" {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"));
            if is_unset(timeout) {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": CLIENT_IP_AFFINITY_SECONDS}}),
                );
            }
        }
        set_str(spec, "type", "ClusterIP");
        let ty = str_of(spec, "type").to_string();
        if let Some(ports) = array(spec, "ports") {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                set_str(port, "protocol", "TCP");
                let target_unset = match port.get("targetPort") {
                    None | Some(Value::Null) => true,
                    Some(Value::Number(n)) => n.as_i64() == Some(0),
                    Some(Value::String(s)) => s.is_empty(),
                    _ => false,
                };
                if target_unset && let Some(p) = port.get("port").cloned() {
                    port.insert("targetPort".into(), p);
                }
            }
        }
        let external = ty == "NodePort"
            || ty == "LoadBalancer"
            || spec
                .get("externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
        if external {
            set_str(spec, "externalTrafficPolicy", "Cluster");
        }
        if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
            set_ptr(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        if ty == "LoadBalancer" {
            set_ptr(spec, "allocateLoadBalancerNodePorts", json!(true));
        }
        if let Some(old_spec) = old_spec {
            drop_type_dependent_fields(spec, old_spec);
        }
        if ty == "ExternalName" {
            return;
        }
        self.default_cluster_ips(spec, old_spec);
        self.default_node_ports(spec, &ty, old_spec);
    }

    fn default_cluster_ips(&self, spec: &mut Obj, old_spec: Option<&Value>) {
        // On update an unset clusterIP keeps the stored one, as the registry's
        // patchAllocatedValues does.
        let old_type = old_spec.map(|s| s.get("type").and_then(Value::as_str).unwrap_or(""));
        if str_of(spec, "clusterIP").is_empty()
            && let Some(old) = old_spec
            && old_type != Some("ExternalName")
        {
            for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                if is_unset(spec.get(key))
                    && let Some(v) = old.get(key)
                {
                    spec.insert(key.into(), v.clone());
                }
            }
        }
        let ips: Vec<String> = spec
            .get("clusterIPs")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let mut primary = str_of(spec, "clusterIP").to_string();
        if primary.is_empty()
            && let Some(first) = ips.first()
        {
            primary = first.clone();
        }
        if primary.is_empty() {
            match self.allocate_ip() {
                Some(ip) => primary = ip.to_string(),
                None => return,
            }
        } else if let Ok(ip) = primary.parse::<Ipv4Addr>() {
            self.lock().cluster_ips.insert(u32::from(ip));
        }
        spec.insert("clusterIP".into(), json!(primary));
        if ips.is_empty() {
            spec.insert("clusterIPs".into(), json!([primary]));
        }
        let headless = primary == "None";
        let selectorless = spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
        if headless && selectorless {
            set_ptr(spec, "ipFamilyPolicy", json!("RequireDualStack"));
        } else {
            set_ptr(spec, "ipFamilyPolicy", json!("SingleStack"));
        }
        if spec
            .get("ipFamilies")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec.insert("ipFamilies".into(), json!(["IPv4"]));
        }
    }

    fn default_node_ports(&self, spec: &mut Obj, ty: &str, old_spec: Option<&Value>) {
        let wants_ports = ty == "NodePort"
            || (ty == "LoadBalancer"
                && spec
                    .get("allocateLoadBalancerNodePorts")
                    .and_then(Value::as_bool)
                    .unwrap_or(true));
        if !wants_ports {
            return;
        }
        // Stored nodePorts carry over by port name, unless the new spec already uses
        // that number elsewhere.
        let old_ports: Vec<(String, u16)> = old_spec
            .and_then(|s| s.get("ports"))
            .and_then(Value::as_array)
            .map(|ports| {
                ports
                    .iter()
                    .filter_map(|p| {
                        let np = p.get("nodePort")?.as_u64()?;
                        let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                        Some((name.to_string(), u16::try_from(np).ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let Some(ports) = array(spec, "ports") else {
            return;
        };
        let in_use: BTreeSet<u16> = ports
            .iter()
            .filter_map(|p| p.get("nodePort")?.as_u64())
            .filter_map(|n| u16::try_from(n).ok())
            .filter(|n| *n != 0)
            .collect();
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            let current = port.get("nodePort").and_then(Value::as_u64).unwrap_or(0);
            if current != 0 {
                if let Ok(p) = u16::try_from(current) {
                    self.lock().node_ports.insert(p);
                }
                continue;
            }
            let name = str_of(port, "name").to_string();
            let carried = old_ports
                .iter()
                .find(|(n, p)| *n == name && !in_use.contains(p))
                .map(|(_, p)| *p);
            if let Some(p) = carried.or_else(|| self.allocate_port()) {
                port.insert("nodePort".into(), json!(p));
            }
        }
        if ty == "LoadBalancer" && str_of(spec, "externalTrafficPolicy") == "Local" {
            let current = spec
                .get("healthCheckNodePort")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if current == 0 {
                let carried = old_spec
                    .and_then(|s| s.get("healthCheckNodePort"))
                    .and_then(Value::as_u64)
                    .filter(|p| *p != 0);
                let port = carried.or_else(|| self.allocate_port().map(u64::from));
                if let Some(p) = port {
                    spec.insert("healthCheckNodePort".into(), json!(p));
                }
            }
        }
    }
}

/// The service strategy's `dropTypeDependentFields`: on a type change, values the
/// server allocated or defaulted for the old type go when the user left them as they
/// were (a changed value is the user's and stays, for validation to judge).
fn drop_type_dependent_fields(spec: &mut Obj, old: &Value) {
    let old_type = old
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let new_type = str_of(spec, "type").to_string();
    let same = |spec: &Obj, key: &str| spec.get(key) == old.get(key);
    let needs_ip = |t: &str| t != "ExternalName";
    if needs_ip(old_type) && !needs_ip(&new_type) {
        if same(spec, "clusterIP") && same(spec, "clusterIPs") {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
        for key in ["ipFamilies", "ipFamilyPolicy"] {
            if same(spec, key) {
                spec.remove(key);
            }
        }
    }
    let allocates = |t: &str, s: Option<&Value>| {
        t == "NodePort"
            || (t == "LoadBalancer"
                && s.and_then(|s| s.get("allocateLoadBalancerNodePorts"))
                    .and_then(Value::as_bool)
                    .unwrap_or(true))
    };
    let node_ports = |ports: Option<&Value>| -> Vec<Option<Value>> {
        ports
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| p.get("nodePort").cloned())
            .collect()
    };
    let new_allocates = allocates(&new_type, Some(&Value::Object(spec.clone())));
    if allocates(old_type, Some(old))
        && !new_allocates
        && node_ports(spec.get("ports")) == node_ports(old.get("ports"))
        && let Some(ports) = array(spec, "ports")
    {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.remove("nodePort");
        }
    }
    let local_lb = |t: &str, s: &Value| {
        t == "LoadBalancer"
            && s.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
    };
    if local_lb(old_type, old)
        && !local_lb(&new_type, &Value::Object(spec.clone()))
        && same(spec, "healthCheckNodePort")
    {
        spec.remove("healthCheckNodePort");
    }
    if old_type == "LoadBalancer" && new_type != "LoadBalancer" {
        for key in ["allocateLoadBalancerNodePorts", "loadBalancerClass"] {
            if same(spec, key) {
                spec.remove(key);
            }
        }
    }
    let external = |t: &str, s: &Value| {
        t == "NodePort"
            || t == "LoadBalancer"
            || s.get("externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
    };
    if external(old_type, old)
        && !external(&new_type, &Value::Object(spec.clone()))
        && same(spec, "externalTrafficPolicy")
    {
        spec.remove("externalTrafficPolicy");
    }
}

/// What `status` a freshly created object of this kind gets: the real server resets
/// status on create to the zero value of the kind's status type (as Go serialises it)
/// plus what `PrepareForCreate` sets. `None` when the kind has no status, or for custom
/// resources, whose status the handler drops when the CRD has a status subresource.
///
/// For a Pod, `default_object` then adds `qosClass`; for a CRD, `storedVersions`.
pub fn initial_status(group: &str, kind: &str) -> Option<Value> {
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
pub fn tracks_generation(group: &str, kind: &str, is_custom: bool) -> bool {
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

/// The status the apiextensions controllers inside kube-apiserver write to a CRD
/// shortly after it is created, once its names are free: `acceptedNames` copied from
/// the (defaulted) `spec.names`, and the `NamesAccepted` and `Established` conditions
/// at `now` (an RFC 3339 timestamp). The sandbox's simulated controllers apply it; the
/// create answer itself carries the bare status of [`initial_status`].
pub fn crd_established_status(crd: &Value, now: &str) -> Value {
    let mut status = crd.get("status").cloned().unwrap_or_else(|| json!({}));
    let names = crd
        .get("spec")
        .and_then(|s| s.get("names"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(s) = status.as_object_mut() {
        s.insert(
            "conditions".into(),
            json!([
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                },
                {
                    "type": "Established",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                },
            ]),
        );
        s.insert("acceptedNames".into(), names);
    }
    status
}

/// Applies the `default`s of a CRD version's `openAPIV3Schema` to a custom resource, as
/// the real server does on every write and read: a missing property whose schema has
/// a `default` gets it, recursively through properties, `items` and
/// `additionalProperties`. `apiVersion`, `kind` and `metadata` are never touched.
pub fn default_custom_resource(schema: &Value, obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, prop) in props {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        apply_schema_default(o, key, prop);
    }
}

/// Drops the fields of a custom resource its CRD version's `openAPIV3Schema` does not
/// declare, as the real server's structural pruning does on every write: unknown
/// properties go unless the schema says `x-kubernetes-preserve-unknown-fields: true`;
/// `apiVersion`, `kind` and `metadata` stay at the root and in embedded resources.
/// Call it before [`default_custom_resource`], as the server prunes then defaults.
pub fn prune_custom_resource(schema: &Value, obj: &mut Value) {
    prune(obj, schema, true);
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn prune(value: &mut Value, schema: &Value, is_resource: bool) {
    match value {
        Value::Object(o) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|s| s.is_object());
            let keeps_meta = is_resource
                || schema
                    .get("x-kubernetes-embedded-resource")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
            let preserve = preserves_unknown(schema);
            o.retain(|key, _| {
                (keeps_meta && matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
                    || props.is_some_and(|p| p.contains_key(key))
                    || extra.is_some()
                    || preserve
            });
            for (key, child_value) in o.iter_mut() {
                if keeps_meta && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(child_schema) = props.and_then(|p| p.get(key)).or(extra) {
                    prune(child_value, child_schema, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    prune(item, item_schema, false);
                }
            }
        }
        _ => {}
    }
}

fn apply_schema_default(parent: &mut Obj, key: &str, schema: &Value) {
    if is_unset(parent.get(key))
        && let Some(default) = schema.get("default")
    {
        parent.insert(key.to_string(), default.clone());
    }
    if let Some(value) = parent.get_mut(key) {
        apply_schema_defaults_within(value, schema);
    }
}

fn apply_schema_defaults_within(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(o) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (key, prop) in props {
                    apply_schema_default(o, key, prop);
                }
            }
            if let Some(extra) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for v in o.values_mut() {
                    apply_schema_defaults_within(v, extra);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_schema_defaults_within(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

// ---- kinds ----

fn default_namespace(o: &mut Obj, old: Option<&Value>) {
    let name = o
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !name.is_empty()
        && let Some(meta) = ensure_obj(o, "metadata")
        && let Some(labels) = ensure_obj(meta, "labels")
    {
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    match old {
        // Finalizers only change through the /finalize subresource.
        Some(old) => {
            let kept = old.get("spec").and_then(|s| s.get("finalizers")).cloned();
            if let Some(spec) = ensure_obj(o, "spec") {
                match kept {
                    Some(f) => {
                        spec.insert("finalizers".into(), f);
                    }
                    None => {
                        spec.remove("finalizers");
                    }
                }
            }
        }
        None => {
            if let Some(spec) = ensure_obj(o, "spec") {
                let finalizers = spec
                    .entry("finalizers")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if finalizers.is_null() {
                    *finalizers = Value::Array(Vec::new());
                }
                if let Some(list) = finalizers.as_array_mut()
                    && !list.iter().any(|f| f == "kubernetes")
                {
                    list.push(json!("kubernetes"));
                }
            }
        }
    }
}

fn default_secret(o: &mut Obj) {
    set_str(o, "type", "Opaque");
    // stringData is a write-only convenience: merged into data (its keys win), never
    // stored.
    if let Some(Value::Object(string_data)) = o.remove("stringData")
        && !string_data.is_empty()
        && let Some(data) = ensure_obj(o, "data")
    {
        for (key, value) in string_data {
            let text = value.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            data.insert(key, json!(encoded));
        }
    }
}

fn default_pod(o: &mut Obj, create: bool) {
    let meta = o.get("metadata").cloned().unwrap_or(Value::Null);
    let Some(spec) = child(o, "spec") else {
        return;
    };
    default_pod_spec(spec);
    for list in ["containers", "initContainers"] {
        if let Some(containers) = array(spec, list) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                default_requests_from_limits(c);
            }
        }
    }
    set_ptr(spec, "enableServiceLinks", json!(true));
    if create {
        admit_pod(spec, &meta);
    }
    let qos = qos_class(spec);
    if let Some(status) = child(o, "status")
        && is_empty_str(status.get("qosClass"))
    {
        status.insert("qosClass".into(), json!(qos));
    }
}

/// The create-time admission plugins that touch every Pod.
fn admit_pod(spec: &mut Obj, meta: &Value) {
    // ServiceAccount: the namespace's `default` account and its token volume.
    set_str(spec, "serviceAccountName", "default");
    let account = str_of(spec, "serviceAccountName").to_string();
    spec.insert("serviceAccount".into(), json!(account));
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if automount {
        mount_service_account_token(spec, meta);
    }
    // Priority: no class means priority 0 (no global default class in the sandbox).
    let priority = match str_of(spec, "priorityClassName") {
        "system-node-critical" => Some(2_000_001_000),
        "system-cluster-critical" => Some(2_000_000_000),
        "" => Some(0),
        _ => None,
    };
    if let Some(p) = priority {
        set_ptr(spec, "priority", json!(p));
        set_str(spec, "preemptionPolicy", "PreemptLowerPriority");
    }
    // DefaultTolerationSeconds.
    let tolerations = spec
        .entry("tolerations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if tolerations.is_null() {
        *tolerations = Value::Array(Vec::new());
    }
    if let Some(list) = tolerations.as_array_mut() {
        for key in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            let tolerated = list.iter().any(|t| {
                let k = t.get("key").and_then(Value::as_str).unwrap_or("");
                let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
                (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
            });
            if !tolerated {
                list.push(json!({
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }));
            }
        }
    }
}

const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn mount_service_account_token(spec: &mut Obj, meta: &Value) {
    let already_mounted = ["containers", "initContainers"].iter().any(|list| {
        spec.get(*list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("volumeMounts")?.as_array())
            .flatten()
            .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
    });
    if already_mounted {
        return;
    }
    let volume_name = format!("kube-api-access-{}", token_volume_suffix(meta));
    let volumes = spec
        .entry("volumes")
        .or_insert_with(|| Value::Array(Vec::new()));
    if volumes.is_null() {
        *volumes = Value::Array(Vec::new());
    }
    if let Some(list) = volumes.as_array_mut() {
        list.push(json!({
            "name": volume_name,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ],
                "defaultMode": VOLUME_DEFAULT_MODE,
            },
        }));
    }
    for list in ["containers", "initContainers"] {
        if let Some(containers) = array(spec, list) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                let mounts = c
                    .entry("volumeMounts")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if mounts.is_null() {
                    *mounts = Value::Array(Vec::new());
                }
                if let Some(m) = mounts.as_array_mut() {
                    m.push(json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}));
                }
            }
        }
    }
}

/// Five characters of `utilrand.String`'s alphabet, derived from the Pod's identity so
/// the sandbox stays deterministic.
fn token_volume_suffix(meta: &Value) -> String {
    let mut hasher = Sha256::new();
    for key in ["namespace", "name", "uid"] {
        hasher.update(
            meta.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .as_bytes(),
        );
        hasher.update([0]);
    }
    hasher
        .finalize()
        .iter()
        .take(5)
        .map(|b| char::from(RAND_ALPHABET[usize::from(*b) % RAND_ALPHABET.len()]))
        .collect()
}

fn default_requests_from_limits(c: &mut Obj) {
    let Some(resources) = child(c, "resources") else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    if let Some(requests) = ensure_obj(resources, "requests") {
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// `qos.GetPodQOS`: Guaranteed when every container limits and requests cpu and
/// memory equally, BestEffort when none asks for anything, Burstable otherwise.
fn qos_class(spec: &Obj) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| spec.get(*l)?.as_array())
        .flatten()
        .collect();
    let compute = |m: Option<&Value>| -> Vec<(String, String)> {
        m.and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| matches!(k.as_str(), "cpu" | "memory"))
                    .filter_map(|(k, v)| {
                        let q = canonical_quantity(v.as_str()?, None)?;
                        (q != "0").then(|| (k.clone(), q))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let resources = c.get("resources");
        let requests = compute(resources.and_then(|r| r.get("requests")));
        let limits = compute(resources.and_then(|r| r.get("limits")));
        if !requests.is_empty() || !limits.is_empty() {
            any = true;
        }
        let has = |list: &[(String, String)], k: &str| list.iter().any(|(n, _)| n == k);
        if !(has(&limits, "cpu") && has(&limits, "memory")) {
            guaranteed = false;
        }
        for (k, v) in &requests {
            if limits.iter().find(|(n, _)| n == k).map(|(_, l)| l) != Some(v) {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// `SetDefaults_LimitRangeItem`: for containers, a missing default limit is the max,
/// a missing default request the default limit, else the min.
fn default_limit_range(o: &mut Obj) {
    let Some(items) = child(o, "spec").and_then(|s| array(s, "limits")) else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        for key in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            canonicalize_quantities(item, key, false);
        }
        if str_of(item, "type") != "Container" {
            continue;
        }
        let max = item.get("max").and_then(Value::as_object).cloned();
        let min = item.get("min").and_then(Value::as_object).cloned();
        let Some(default) = ensure_obj(item, "default") else {
            continue;
        };
        for (k, v) in max.into_iter().flatten() {
            default.entry(k).or_insert(v);
        }
        let default = default.clone();
        let Some(request) = ensure_obj(item, "defaultRequest") else {
            continue;
        };
        for (k, v) in default.into_iter().chain(min.into_iter().flatten()) {
            request.entry(k).or_insert(v);
        }
    }
}

fn default_replication_controller(o: &mut Obj) {
    let template_labels = o
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = template_labels {
        if let Some(spec) = child(o, "spec")
            && spec
                .get("selector")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            spec.insert("selector".into(), labels.clone());
        }
        if let Some(meta) = ensure_obj(o, "metadata")
            && meta
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            meta.insert("labels".into(), labels);
        }
    }
    if let Some(spec) = child(o, "spec") {
        set_ptr(spec, "replicas", json!(1));
        default_template_at(spec);
    }
}

fn default_deployment(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_ptr(spec, "replicas", json!(1));
    if let Some(strategy) = ensure_obj(spec, "strategy") {
        set_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = ensure_obj(strategy, "rollingUpdate")
        {
            set_ptr(rolling, "maxUnavailable", json!("25%"));
            set_ptr(rolling, "maxSurge", json!("25%"));
        }
    }
    set_ptr(spec, "revisionHistoryLimit", json!(10));
    set_ptr(spec, "progressDeadlineSeconds", json!(600));
    default_template_at(spec);
}

fn default_stateful_set(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = ensure_obj(spec, "updateStrategy") {
        if is_empty_str(strategy.get("type")) {
            strategy.insert("type".into(), json!("RollingUpdate"));
            set_ptr(strategy, "rollingUpdate", json!({}));
        }
        if str_of(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = child(strategy, "rollingUpdate")
        {
            set_ptr(rolling, "partition", json!(0));
        }
    }
    if let Some(policy) = ensure_obj(spec, "persistentVolumeClaimRetentionPolicy") {
        set_str(policy, "whenDeleted", "Retain");
        set_str(policy, "whenScaled", "Retain");
    }
    set_ptr(spec, "replicas", json!(1));
    set_ptr(spec, "revisionHistoryLimit", json!(10));
    default_template_at(spec);
    if let Some(templates) = array(spec, "volumeClaimTemplates") {
        for t in templates.iter_mut().filter_map(Value::as_object_mut) {
            set_str(t, "apiVersion", "v1");
            set_str(t, "kind", "PersistentVolumeClaim");
            if let Some(pvc_spec) = child(t, "spec") {
                default_pvc_spec(pvc_spec);
            }
            if let Some(status) = ensure_obj(t, "status") {
                set_str(status, "phase", "Pending");
            }
        }
    }
}

const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

fn default_daemon_set(o: &mut Obj, old: Option<&Value>) {
    // The template generation lives in an annotation; the server owns it: 1 on create,
    // the stored value on update, plus one when the template changed.
    let generation = match old {
        None => 1,
        Some(old) => old
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(TEMPLATE_GENERATION_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(1),
    };
    if let Some(spec) = child(o, "spec") {
        if let Some(strategy) = ensure_obj(spec, "updateStrategy") {
            set_str(strategy, "type", "RollingUpdate");
            if str_of(strategy, "type") == "RollingUpdate"
                && let Some(rolling) = ensure_obj(strategy, "rollingUpdate")
            {
                set_ptr(rolling, "maxUnavailable", json!(1));
                set_ptr(rolling, "maxSurge", json!(0));
            }
        }
        set_ptr(spec, "revisionHistoryLimit", json!(10));
        default_template_at(spec);
    }
    let template_changed = old.is_some_and(|old| {
        let mut old_template = old
            .get("spec")
            .and_then(|s| s.get("template"))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(t) = old_template.as_object_mut() {
            default_pod_template(t);
        }
        o.get("spec").and_then(|s| s.get("template")) != Some(&old_template)
    });
    let generation = if template_changed {
        generation + 1
    } else {
        generation
    };
    if let Some(meta) = ensure_obj(o, "metadata")
        && let Some(annotations) = ensure_obj(meta, "annotations")
    {
        annotations.insert(
            TEMPLATE_GENERATION_ANNOTATION.into(),
            json!(generation.to_string()),
        );
    }
}

fn default_job(o: &mut Obj, create: bool) {
    let meta = o.get("metadata").cloned().unwrap_or(Value::Null);
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    let uid = meta.get("uid").and_then(Value::as_str).unwrap_or("");
    let Some(spec) = child(o, "spec") else {
        return;
    };
    if is_unset(spec.get("completions")) && is_unset(spec.get("parallelism")) {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    set_ptr(spec, "parallelism", json!(1));
    if is_unset(spec.get("backoffLimit")) {
        let limit = if is_unset(spec.get("backoffLimitPerIndex")) {
            6
        } else {
            i64::from(i32::MAX)
        };
        spec.insert("backoffLimit".into(), json!(limit));
    }
    set_ptr(spec, "completionMode", json!("NonIndexed"));
    set_ptr(spec, "suspend", json!(false));
    set_ptr(spec, "manualSelector", json!(false));
    let has_failure_policy = !is_unset(spec.get("podFailurePolicy"));
    if let Some(rules) = child(spec, "podFailurePolicy").and_then(|p| array(p, "rules")) {
        for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(patterns) = array(rule, "onPodConditions") {
                for p in patterns.iter_mut().filter_map(Value::as_object_mut) {
                    set_str(p, "status", "True");
                }
            }
        }
    }
    set_ptr(
        spec,
        "podReplacementPolicy",
        json!(if has_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    default_template_at(spec);
    let manual = spec
        .get("manualSelector")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if create && !manual {
        generate_job_selector(spec, name, uid);
    }
    // Read back from storage, a Job without labels shows its template's labels.
    let template_labels = spec
        .get("template")
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = template_labels
        && let Some(meta) = ensure_obj(o, "metadata")
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".into(), labels);
    }
}

/// The job strategy's `generateSelector`: the template is labelled with the job's name
/// and uid (legacy and prefixed keys) and selected by the uid.
fn generate_job_selector(spec: &mut Obj, name: &str, uid: &str) {
    if let Some(labels) = child(spec, "template")
        .and_then(|t| ensure_obj(t, "metadata"))
        .and_then(|m| ensure_obj(m, "labels"))
    {
        for key in ["job-name", "batch.kubernetes.io/job-name"] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        if !uid.is_empty() {
            for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
                labels.entry(key).or_insert_with(|| json!(uid));
            }
        }
        sort_keys(labels);
    }
    if !uid.is_empty()
        && let Some(match_labels) =
            ensure_obj(spec, "selector").and_then(|s| ensure_obj(s, "matchLabels"))
    {
        match_labels
            .entry("batch.kubernetes.io/controller-uid")
            .or_insert_with(|| json!(uid));
    }
}

fn default_cron_job(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_str(spec, "concurrencyPolicy", "Allow");
    set_ptr(spec, "suspend", json!(false));
    set_ptr(spec, "successfulJobsHistoryLimit", json!(3));
    set_ptr(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_template) = child(spec, "jobTemplate") {
        ensure_obj(job_template, "metadata");
        if let Some(job_spec) = child(job_template, "spec") {
            default_template_at(job_spec);
        }
    }
}

fn default_network_policy(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    let empty = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty {
        let has_egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if has_egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
    for direction in ["ingress", "egress"] {
        if let Some(rules) = array(spec, direction) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(ports) = array(rule, "ports") {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        set_ptr(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

fn default_role_binding(o: &mut Obj) {
    if let Some(role_ref) = child(o, "roleRef") {
        set_str(role_ref, "apiGroup", "rbac.authorization.k8s.io");
    }
    if let Some(subjects) = array(o, "subjects") {
        for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
            if matches!(str_of(s, "kind"), "User" | "Group") {
                set_str(s, "apiGroup", "rbac.authorization.k8s.io");
            }
        }
    }
}

fn default_hpa(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_ptr(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }]),
        );
    }
    if let Some(metrics) = array(spec, "metrics") {
        for m in metrics.iter_mut().filter_map(Value::as_object_mut) {
            for source in m.values_mut().filter_map(Value::as_object_mut) {
                for key in ["target", "current"] {
                    if let Some(target) = child(source, key) {
                        canonicalize_value(target, "value", None);
                        canonicalize_value(target, "averageValue", None);
                    }
                }
            }
        }
    }
    // A given behavior is completed with the defaults that reproduce the classic HPA.
    if let Some(behavior) = child(spec, "behavior") {
        let up = json!({
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        });
        let down = json!({
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        });
        for (key, defaults) in [("scaleUp", up), ("scaleDown", down)] {
            let mut rules = defaults;
            if let (Some(given), Some(r)) = (
                behavior.get(key).and_then(Value::as_object),
                rules.as_object_mut(),
            ) {
                for (k, v) in given {
                    if !v.is_null() {
                        r.insert(k.clone(), v.clone());
                    }
                }
            }
            behavior.insert(key.into(), rules);
        }
    }
}

fn default_crd(o: &mut Obj) {
    let storage_version = o
        .get("spec")
        .and_then(|s| s.get("versions"))
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .cloned();
    if let Some(spec) = child(o, "spec") {
        set_str(spec, "scope", "Namespaced");
        if let Some(names) = child(spec, "names") {
            let kind = str_of(names, "kind").to_string();
            set_str(names, "singular", &kind.to_lowercase());
            if !kind.is_empty() {
                set_str(names, "listKind", &format!("{kind}List"));
            }
        }
        set_ptr(spec, "conversion", json!({"strategy": "None"}));
        if let Some(service) = child(spec, "conversion")
            .and_then(|c| child(c, "webhook"))
            .and_then(|w| child(w, "clientConfig"))
            .and_then(|c| child(c, "service"))
        {
            set_ptr(service, "port", json!(443));
        }
    }
    if let Some(version) = storage_version
        && let Some(status) = child(o, "status")
    {
        let stored = status
            .entry("storedVersions")
            .or_insert_with(|| Value::Array(Vec::new()));
        if stored.is_null() {
            *stored = Value::Array(Vec::new());
        }
        if let Some(list) = stored.as_array_mut()
            && list.is_empty()
        {
            list.push(version);
        }
    }
}

// ---- pod templates and pod specs ----

/// Defaults `spec.template` of a workload.
fn default_template_at(spec: &mut Obj) {
    if let Some(template) = child(spec, "template") {
        default_pod_template(template);
    }
}

fn default_pod_template(template: &mut Obj) {
    ensure_obj(template, "metadata");
    if let Some(spec) = child(template, "spec") {
        default_pod_spec(spec);
    }
}

fn default_pod_spec(spec: &mut Obj) {
    set_str(spec, "dnsPolicy", "ClusterFirst");
    set_str(spec, "restartPolicy", "Always");
    set_ptr(spec, "securityContext", json!({}));
    set_ptr(
        spec,
        "terminationGracePeriodSeconds",
        json!(TERMINATION_GRACE_PERIOD_SECONDS),
    );
    set_str(spec, "schedulerName", "default-scheduler");
    // `serviceAccount` is the deprecated alias: it fills an empty
    // serviceAccountName, then always mirrors it.
    if is_empty_str(spec.get("serviceAccountName"))
        && let Some(alias) = spec
            .get("serviceAccount")
            .filter(|v| !is_empty_str(Some(v)))
    {
        let alias = alias.clone();
        spec.insert("serviceAccountName".into(), alias);
    }
    match spec.get("serviceAccountName").cloned() {
        Some(name) if !is_empty_str(Some(&name)) => {
            spec.insert("serviceAccount".into(), name);
        }
        _ => {
            spec.remove("serviceAccount");
        }
    }
    let host_network = spec
        .get("hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(containers) = array(spec, list) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                default_container(c, host_network && list != "ephemeralContainers");
            }
        }
    }
    if let Some(volumes) = array(spec, "volumes") {
        for v in volumes.iter_mut().filter_map(Value::as_object_mut) {
            default_volume(v);
        }
    }
    canonicalize_quantities(spec, "overhead", false);
    if let Some(resources) = child(spec, "resources") {
        canonicalize_quantities(resources, "limits", true);
        canonicalize_quantities(resources, "requests", true);
    }
}

fn default_container(c: &mut Obj, host_network: bool) {
    if is_empty_str(c.get("imagePullPolicy")) {
        let policy = if image_tag_is_latest(str_of(c, "image")) {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    set_str(c, "terminationMessagePath", "/dev/termination-log");
    set_str(c, "terminationMessagePolicy", "File");
    // ResourceRequirements is a struct, not a pointer: Go always serialises it.
    if let Some(resources) = ensure_obj(c, "resources") {
        canonicalize_quantities(resources, "limits", true);
        canonicalize_quantities(resources, "requests", true);
    }
    if let Some(ports) = array(c, "ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_str(p, "protocol", "TCP");
            if host_network
                && p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                && let Some(cp) = p.get("containerPort").cloned()
            {
                p.insert("hostPort".into(), cp);
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = child(c, probe) {
            set_nonzero(p, "timeoutSeconds", 1);
            set_nonzero(p, "periodSeconds", 10);
            set_nonzero(p, "successThreshold", 1);
            set_nonzero(p, "failureThreshold", 3);
            default_handler(p);
        }
    }
    if let Some(lifecycle) = child(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = child(lifecycle, hook) {
                default_handler(h);
            }
        }
    }
    if let Some(env) = array(c, "env") {
        for e in env.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(from) = child(e, "valueFrom") {
                default_field_refs(from);
            }
        }
    }
}

fn default_handler(h: &mut Obj) {
    if let Some(get) = child(h, "httpGet") {
        set_str(get, "path", "/");
        set_str(get, "scheme", "HTTP");
    }
    if let Some(grpc) = child(h, "grpc") {
        set_ptr(grpc, "service", json!(""));
    }
}

fn default_field_refs(holder: &mut Obj) {
    if let Some(field_ref) = child(holder, "fieldRef") {
        set_str(field_ref, "apiVersion", "v1");
    }
    if let Some(resource_ref) = child(holder, "resourceFieldRef") {
        // `divisor` is a Quantity struct: its zero value serialises as "0".
        set_ptr(resource_ref, "divisor", json!("0"));
        canonicalize_value(resource_ref, "divisor", None);
    }
}

/// `parsers.ParseImageName`: an image without tag and without digest means `latest`.
fn image_tag_is_latest(image: &str) -> bool {
    if image.contains('@') {
        let before_digest = image.split('@').next().unwrap_or("");
        return tag_of(before_digest) == Some("latest");
    }
    match tag_of(image) {
        None => !image.is_empty(),
        Some(tag) => tag == "latest",
    }
}

fn tag_of(image: &str) -> Option<&str> {
    let last_segment = image.rsplit('/').next().unwrap_or(image);
    last_segment.split_once(':').map(|(_, tag)| tag)
}

const VOLUME_SOURCES_WITH_MODE: [&str; 4] = ["configMap", "secret", "downwardAPI", "projected"];

fn default_volume(v: &mut Obj) {
    let has_source = v.iter().any(|(k, val)| k != "name" && !val.is_null());
    if !has_source {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in VOLUME_SOURCES_WITH_MODE {
        if let Some(s) = child(v, source) {
            set_ptr(s, "defaultMode", json!(VOLUME_DEFAULT_MODE));
        }
    }
    if let Some(items) = child(v, "downwardAPI").and_then(|d| array(d, "items")) {
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            default_field_refs(item);
        }
    }
    if let Some(sources) = child(v, "projected").and_then(|p| array(p, "sources")) {
        for s in sources.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(token) = child(s, "serviceAccountToken") {
                set_ptr(token, "expirationSeconds", json!(3600));
            }
            if let Some(items) = child(s, "downwardAPI").and_then(|d| array(d, "items")) {
                for item in items.iter_mut().filter_map(Value::as_object_mut) {
                    default_field_refs(item);
                }
            }
        }
    }
    if let Some(host_path) = child(v, "hostPath") {
        set_ptr(host_path, "type", json!(""));
    }
    if let Some(empty_dir) = child(v, "emptyDir") {
        canonicalize_value(empty_dir, "sizeLimit", None);
    }
    if let Some(iscsi) = child(v, "iscsi") {
        set_str(iscsi, "iscsiInterface", "default");
    }
    if let Some(rbd) = child(v, "rbd") {
        set_str(rbd, "pool", "rbd");
        set_str(rbd, "user", "admin");
        set_str(rbd, "keyring", "/etc/ceph/keyring");
    }
    if let Some(disk) = child(v, "azureDisk") {
        set_ptr(disk, "cachingMode", json!("ReadWrite"));
        set_ptr(disk, "fsType", json!("ext4"));
        set_ptr(disk, "readOnly", json!(false));
        set_ptr(disk, "kind", json!("Shared"));
    }
    if let Some(pvc_spec) = child(v, "ephemeral")
        .and_then(|e| child(e, "volumeClaimTemplate"))
        .and_then(|t| child(t, "spec"))
    {
        default_pvc_spec(pvc_spec);
    }
}

fn default_pvc_spec(spec: &mut Obj) {
    set_ptr(spec, "volumeMode", json!("Filesystem"));
    if let Some(resources) = child(spec, "resources") {
        canonicalize_quantities(resources, "requests", true);
        canonicalize_quantities(resources, "limits", true);
    }
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

fn service_allocations(obj: &Value) -> (BTreeSet<u32>, BTreeSet<u16>) {
    let spec = obj.get("spec");
    let mut ips = BTreeSet::new();
    let mut ports = BTreeSet::new();
    let Some(spec) = spec else {
        return (ips, ports);
    };
    let listed = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(spec.get("clusterIP"));
    for ip in listed.filter_map(Value::as_str) {
        if let Ok(addr) = ip.parse::<Ipv4Addr>() {
            ips.insert(u32::from(addr));
        }
    }
    let node_ports = spec
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort"))
        .chain(spec.get("healthCheckNodePort"));
    for p in node_ports.filter_map(Value::as_u64) {
        if let Ok(port) = u16::try_from(p)
            && port != 0
        {
            ports.insert(port);
        }
    }
    (ips, ports)
}

#[cfg(test)]
mod tests;
