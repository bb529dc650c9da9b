//! Which kinds live in a namespace: a built-in table of the Kubernetes kinds, the CRDs
//! of the same set, and (online) whatever discovery says, in that order of trust.

use serde_json::Value;

use super::GroupKind;

/// Whether objects of a kind live in a namespace or in the whole cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// Cluster-scoped built-in kinds, as `kubectl api-resources --namespaced=false` lists
/// them on Kubernetes 1.36 (the recorded discovery in
/// `shared/fixtures/kube-apiserver-v1.36/discovery/`), plus the stable kinds of groups
/// that server did not serve.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
];

/// Namespaced built-in kinds: listed so that a kind missing from both tables is known
/// to be unknown (a CRD) rather than silently namespaced.
const NAMESPACED: &[(&str, &str)] = &[
    ("", "Binding"),
    ("", "ConfigMap"),
    ("", "Endpoints"),
    ("", "Event"),
    ("", "LimitRange"),
    ("", "PersistentVolumeClaim"),
    ("", "Pod"),
    ("", "PodTemplate"),
    ("", "ReplicationController"),
    ("", "ResourceQuota"),
    ("", "Secret"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("apps", "ControllerRevision"),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("batch", "CronJob"),
    ("batch", "Job"),
    ("coordination.k8s.io", "Lease"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("events.k8s.io", "Event"),
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("policy", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("resource.k8s.io", "ResourceClaim"),
    ("resource.k8s.io", "ResourceClaimTemplate"),
    ("storage.k8s.io", "CSIStorageCapacity"),
];

/// The scope of a built-in kind, or `None` for a kind Kubernetes does not ship.
pub fn builtin_scope(gk: &GroupKind) -> Option<Scope> {
    let key = (gk.group.as_str(), gk.kind.as_str());
    if CLUSTER_SCOPED.contains(&key) {
        Some(Scope::Cluster)
    } else if NAMESPACED.contains(&key) {
        Some(Scope::Namespaced)
    } else {
        None
    }
}

/// The kind a CustomResourceDefinition object declares, with its scope.
pub fn crd_scope(object: &Value) -> Option<(GroupKind, Scope)> {
    let spec = object.get("spec")?;
    let group = spec.get("group")?.as_str()?;
    let kind = spec.get("names")?.get("kind")?.as_str()?;
    let scope = match spec.get("scope")?.as_str()? {
        "Cluster" => Scope::Cluster,
        _ => Scope::Namespaced,
    };
    Some((
        GroupKind {
            group: group.to_string(),
            kind: kind.to_string(),
        },
        scope,
    ))
}
