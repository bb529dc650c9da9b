//! Pods and pod templates: the pod spec, containers, probes, volumes, and the
//! create-time admission plugins (ServiceAccount, Priority, DefaultTolerationSeconds).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::core::default_pvc_spec;
use super::{
    Obj, array, canonical_quantity, canonicalize_quantities, canonicalize_value, child, ensure_obj,
    is_empty_str, set_nonzero, set_ptr, set_str, str_of,
};

/// `v1.DefaultTerminationGracePeriodSeconds`.
pub(super) const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;

/// Mode 0644: `ConfigMapVolumeSourceDefaultMode` and its siblings.
pub(super) const VOLUME_DEFAULT_MODE: i64 = 420;

/// `DefaultTolerationSeconds` admission plugin: `--default-not-ready-toleration-seconds`
/// and `--default-unreachable-toleration-seconds`.
pub(super) const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The ServiceAccount admission plugin's token lifetime: one hour plus seven seconds, so
/// kubelet can tell an admission-made projection from a user's.
pub(super) const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// The characters of `utilrand.String`, which names the token volume.
pub(super) const RAND_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

pub(super) fn default_pod(o: &mut Obj, create: bool) {
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
pub(super) fn admit_pod(spec: &mut Obj, meta: &Value) {
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

pub(super) const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

pub(super) fn mount_service_account_token(spec: &mut Obj, meta: &Value) {
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
pub(super) fn token_volume_suffix(meta: &Value) -> String {
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

pub(super) fn default_requests_from_limits(c: &mut Obj) {
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
pub(super) fn qos_class(spec: &Obj) -> &'static str {
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

/// Defaults `spec.template` of a workload.
pub(super) fn default_template_at(spec: &mut Obj) {
    if let Some(template) = child(spec, "template") {
        default_pod_template(template);
    }
}

pub(super) fn default_pod_template(template: &mut Obj) {
    ensure_obj(template, "metadata");
    if let Some(spec) = child(template, "spec") {
        default_pod_spec(spec);
    }
}

pub(super) fn default_pod_spec(spec: &mut Obj) {
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

pub(super) fn default_container(c: &mut Obj, host_network: bool) {
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

pub(super) fn default_handler(h: &mut Obj) {
    if let Some(get) = child(h, "httpGet") {
        set_str(get, "path", "/");
        set_str(get, "scheme", "HTTP");
    }
    if let Some(grpc) = child(h, "grpc") {
        set_ptr(grpc, "service", json!(""));
    }
}

pub(super) fn default_field_refs(holder: &mut Obj) {
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
pub(super) fn image_tag_is_latest(image: &str) -> bool {
    if image.contains('@') {
        let before_digest = image.split('@').next().unwrap_or("");
        return tag_of(before_digest) == Some("latest");
    }
    match tag_of(image) {
        None => !image.is_empty(),
        Some(tag) => tag == "latest",
    }
}

pub(super) fn tag_of(image: &str) -> Option<&str> {
    let last_segment = image.rsplit('/').next().unwrap_or(image);
    last_segment.split_once(':').map(|(_, tag)| tag)
}

pub(super) const VOLUME_SOURCES_WITH_MODE: [&str; 4] =
    ["configMap", "secret", "downwardAPI", "projected"];

pub(super) fn default_volume(v: &mut Obj) {
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
