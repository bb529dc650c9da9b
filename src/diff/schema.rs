//! What the comparison needs to know about a kind's structure: which lists merge by
//! key, and which scalars are quantities or int-or-string. [`SchemaLookup`] is the seam
//! where the full OpenAPI schemas (`crate::schema`) plug in; [`BuiltinSchemas`] is the
//! fallback that knows the built-in kinds' lists by field name.

use std::borrow::Cow;

use crate::manifest::ObjectId;

/// How a list is merged (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType<'s> {
    /// Replaced as a whole; items compared by position.
    Atomic,
    /// Scalars, each present or not; order does not matter.
    Set,
    /// Objects addressed by these key fields (`x-kubernetes-list-map-keys`).
    Map(Cow<'s, [&'s str]>),
}

/// How a scalar field's value is normalised by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarFormat {
    Plain,
    /// `resource.Quantity`: compared by value.
    Quantity,
    /// `intstr.IntOrString`: `8080` and `"8080"` are the same.
    IntOrString,
}

/// Structural knowledge about kinds. `path` holds the field names from the object's
/// root, list positions left out (`["spec", "template", "spec", "containers"]`).
pub trait SchemaLookup: Sync {
    /// `None` when the list is unknown: it is then compared as atomic.
    fn list_type(&self, ty: &ObjectId, path: &[&str]) -> Option<ListType<'_>>;
    fn scalar_format(&self, ty: &ObjectId, path: &[&str]) -> ScalarFormat;
}

/// The built-in kinds' merge keys, by field name, as recorded in
/// `shared/fixtures/kube-apiserver-v1.36/openapi-v3/` (`x-kubernetes-list-map-keys`).
/// Field names are unambiguous across the built-in kinds except `ports`, whose key
/// depends on whether it belongs to a container or a Service. Custom resources that
/// embed a pod template get the same keys, which is what their CRDs declare too.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinSchemas;

const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

fn builtin_list_keys(path: &[&str]) -> Option<&'static [&'static str]> {
    let (last, parent) = match path {
        [.., parent, last] => (*last, Some(*parent)),
        [last] => (*last, None),
        [] => return None,
    };
    Some(match last {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates"
        | "claims" => &["name"],
        "ports" if parent.is_some_and(|p| CONTAINER_LISTS.contains(&p)) => {
            &["containerPort", "protocol"]
        }
        "ports" if path == ["spec", "ports"] => &["port", "protocol"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "hostAliases" => &["ip"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        "ownerReferences" => &["uid"],
        "conditions" => &["type"],
        "x-kubernetes-validations" => &["rule"],
        "secrets" if path == ["secrets"] => &["name"],
        _ => return None,
    })
}

/// Set-typed lists of the built-in kinds (`x-kubernetes-list-type: set`).
fn builtin_is_set(path: &[&str]) -> bool {
    matches!(path, ["metadata", "finalizers"])
}

/// Maps whose values are quantities: container resources, PVC requests, quotas,
/// limit ranges, pod overhead.
const QUANTITY_MAPS: &[&str] = &[
    "limits",
    "requests",
    "hard",
    "capacity",
    "allocatable",
    "overhead",
    "max",
    "min",
    "default",
    "defaultRequest",
    "maxLimitRequestRatio",
];

/// int-or-string fields of the built-in kinds.
const INT_OR_STRING: &[&str] = &["targetPort", "maxSurge", "maxUnavailable", "minAvailable"];

impl SchemaLookup for BuiltinSchemas {
    fn list_type(&self, _ty: &ObjectId, path: &[&str]) -> Option<ListType<'_>> {
        if let Some(keys) = builtin_list_keys(path) {
            return Some(ListType::Map(Cow::Borrowed(keys)));
        }
        builtin_is_set(path).then_some(ListType::Set)
    }

    fn scalar_format(&self, ty: &ObjectId, path: &[&str]) -> ScalarFormat {
        let (last, parent) = match path {
            [.., parent, last] => (*last, *parent),
            _ => return ScalarFormat::Plain,
        };
        if INT_OR_STRING.contains(&last) {
            return ScalarFormat::IntOrString;
        }
        // Probe and lifecycle handler ports (`httpGet.port`, `tcpSocket.port`) and
        // NetworkPolicy ports accept a number or a named port.
        if last == "port"
            && (matches!(parent, "httpGet" | "tcpSocket") || ty.kind == "NetworkPolicy")
        {
            return ScalarFormat::IntOrString;
        }
        let is_limit_range = ty.kind == "LimitRange";
        let quantity_parent = match parent {
            "max" | "min" | "default" | "defaultRequest" | "maxLimitRequestRatio" => is_limit_range,
            p => QUANTITY_MAPS.contains(&p),
        };
        if quantity_parent || last == "sizeLimit" {
            ScalarFormat::Quantity
        } else {
            ScalarFormat::Plain
        }
    }
}
