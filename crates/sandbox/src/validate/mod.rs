//! Server-side validation for the sandbox: what a real kube-apiserver refuses with
//! `422 Invalid` before storing an object, with the same field paths, reasons and
//! messages, so a dry run against the sandbox fails where a cluster's would.
//!
//! Messages follow `k8s.io/apimachinery/pkg/util/validation` and the registry
//! validations of kube-apiserver 1.36 (`pkg/apis/*/validation`); the recorded answers in
//! `tests/fixtures/kube-apiserver-v1.36/errors/` pin the exact wording. Values are shown
//! as Go's `%q`/`%#v` print them (`map[string]string{"app":"web"}`,
//! `v1.LabelSelector{…}`), since clients match on those strings.
//!
//! Covered: object metadata (name per kind, generateName, namespace, labels,
//! annotations, finalizers); pod specs wherever they appear (containers and their
//! names, images, ports, probes' handlers, volumes and mounts, restart and DNS
//! policies); workload selectors and template labels; Job and CronJob specs; Service
//! ports, types and clusterIPs; ConfigMap and Secret keys, sizes and typed-secret keys;
//! PVC access modes and storage; Ingress path types; RBAC rules, roleRefs and subjects;
//! HPA bounds; Lease durations; CRD names. Updates: immutable fields
//! ([`validate_update`]). Not covered: label-selector expressions' operators, resource
//! quantities' syntax, cron schedule syntax, the full pod-update diff the real server
//! prints.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;
use serde::ser::SerializeStruct;
use serde_json::{Map, Value};

use crate::strings;

use self::core::{validate_config_map, validate_pvc_spec, validate_secret, validate_service};
use crd::validate_crd;
pub(crate) use go_format::go_quote;
use go_format::go_string_slice;
use meta::{name_rule, validate_object_meta};
use networking::validate_ingress;
use pods::{validate_pod_spec, validate_pod_template};
use rbac::{validate_binding, validate_rules};
use selectors::immutable_selector;
use workloads::{validate_cron_job, validate_hpa, validate_job_spec, validate_workload};

mod cel;
mod core;
mod crd;
pub(crate) mod custom;
pub(crate) mod events;
mod formats;
mod go_format;
mod meta;
mod names;
mod networking;
mod pods;
mod rbac;
mod selectors;
mod workloads;

/// `validation.DNS1123SubdomainMaxLength`.
const SUBDOMAIN_MAX: usize = 253;
/// `validation.DNS1123LabelMaxLength`, also the label value and name-part limit.
const LABEL_MAX: usize = 63;
/// `apimachineryvalidation.TotalAnnotationSizeLimitB`: 256 KiB over all annotations.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;
/// `core.MaxSecretSize`: 1 MiB of ConfigMap or Secret data.
const MAX_DATA_BYTES: usize = 1024 * 1024;
/// A CronJob's name leaves 11 characters for the Job suffix: 63 - 11.
const CRON_JOB_NAME_MAX: usize = 52;
/// The service CIDR the sandbox allocates from (see `defaults`).
const SERVICE_CIDR_TEXT: &str = "10.96.0.0/12";

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const CONFIG_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const PORT_RANGE_MSG: &str = "must be between 1 and 65535, inclusive";
const IMMUTABLE_MSG: &str = "field is immutable";
const SELECTOR_MISMATCH_MSG: &str = "`selector` does not match template `labels`";

/// Why a field was refused: Go's `field.ErrorType`, serialised as the Status cause
/// `reason` (`FieldValueRequired`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldErrorReason {
    Required,
    Invalid,
    NotSupported,
    Duplicate,
    Forbidden,
    TooLong,
    TooMany,
    NotFound,
    /// A value of the wrong type or format (`field.TypeInvalid`): read `Invalid value`.
    TypeInvalid,
}

impl FieldErrorReason {
    /// The `reason` of a Status cause.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::NotFound => "FieldValueNotFound",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// How the message of such an error starts (`ErrorType.String()`).
    fn label(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Duplicate => "Duplicate value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::NotFound => "Not found",
        }
    }
}

impl Serialize for FieldErrorReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One refused field. `message` is what a Status cause carries (Go's
/// `ErrorBody()`, e.g. `Invalid value: "Bad_Name": a lowercase RFC 1123 …`); the
/// whole error reads `field: message`. Serialises as a Status cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub(crate) reason: FieldErrorReason,
    pub(crate) message: String,
}

impl Serialize for FieldError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("StatusCause", 3)?;
        st.serialize_field("reason", &self.reason)?;
        st.serialize_field("message", &self.message)?;
        st.serialize_field("field", &self.field)?;
        st.end()
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// One Invalid error at `path` for each of `messages` about `value`.
fn invalid_each(path: &str, value: &str, messages: Vec<String>, errs: &mut Vec<FieldError>) {
    errs.extend(
        messages
            .iter()
            .map(|msg| FieldError::invalid_str(path, value, msg)),
    );
}

/// An optional enum field: empty, or one of `supported` (in the order the API server
/// lists them in its message).
fn supported_unless_empty(path: &str, value: &str, supported: &[&str], errs: &mut Vec<FieldError>) {
    if !value.is_empty() && !supported.contains(&value) {
        errs.push(FieldError::not_supported(path, value, supported));
    }
}

impl FieldError {
    fn new(field: &str, reason: FieldErrorReason, value: Option<&str>, detail: &str) -> Self {
        let mut message = reason.label().to_string();
        if let Some(v) = value {
            message.push_str(": ");
            message.push_str(v);
        }
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        Self {
            field: field.to_string(),
            reason,
            message,
        }
    }

    /// `field.Required`: `Required value[: detail]`.
    pub(crate) fn required(field: &str, detail: &str) -> Self {
        Self::new(field, FieldErrorReason::Required, None, detail)
    }

    /// `field.Invalid` with a value already rendered as Go prints it (see
    /// [`go_quote`] for strings).
    pub(crate) fn invalid(field: &str, rendered_value: &str, detail: &str) -> Self {
        Self::new(
            field,
            FieldErrorReason::Invalid,
            Some(rendered_value),
            detail,
        )
    }

    /// `field.Invalid` of a string value.
    pub(crate) fn invalid_str(field: &str, value: &str, detail: &str) -> Self {
        Self::invalid(field, &go_quote(value), detail)
    }

    /// `field.NotSupported`: `Unsupported value: "x": supported values: "a", "b"`.
    pub(crate) fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        Self::not_supported_rendered(field, &go_quote(value), supported)
    }

    /// `field.NotSupported` of a value already rendered (`3`, `true`, `"x"`).
    pub(crate) fn not_supported_rendered(
        field: &str,
        rendered_value: &str,
        supported: &[&str],
    ) -> Self {
        let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = format!("supported values: {}", list.join(", "));
        Self::new(
            field,
            FieldErrorReason::NotSupported,
            Some(rendered_value),
            &detail,
        )
    }

    /// `field.TypeInvalid`: `Invalid value: "string": <detail>`, reason
    /// `FieldValueTypeInvalid`.
    pub(crate) fn type_invalid(field: &str, rendered_value: &str, detail: &str) -> Self {
        Self::new(
            field,
            FieldErrorReason::TypeInvalid,
            Some(rendered_value),
            detail,
        )
    }

    /// `field.TooMany`: `Too many: 4: must have at most 3 items`.
    pub(crate) fn too_many(field: &str, actual: usize, max: usize) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        Self::new(
            field,
            FieldErrorReason::TooMany,
            Some(&actual.to_string()),
            &format!("must have at most {max} {unit}"),
        )
    }

    /// `field.Duplicate` with a rendered value.
    pub(crate) fn duplicate(field: &str, rendered_value: &str) -> Self {
        Self::new(field, FieldErrorReason::Duplicate, Some(rendered_value), "")
    }

    /// `field.Forbidden`: `Forbidden: detail`.
    pub(crate) fn forbidden(field: &str, detail: &str) -> Self {
        Self::new(field, FieldErrorReason::Forbidden, None, detail)
    }

    /// `field.TooLong`: `Too long: may not be more than N bytes`.
    pub(crate) fn too_long(field: &str, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            field,
            FieldErrorReason::TooLong,
            None,
            &format!("may not be more than {max} {unit}"),
        )
    }

    /// `field.NotFound` with a rendered value.
    pub(crate) fn not_found(field: &str, rendered_value: &str) -> Self {
        Self::new(field, FieldErrorReason::NotFound, Some(rendered_value), "")
    }
}

/// The kind as the real server names it in messages: `ConfigMap` for the core group,
/// `Deployment.apps` otherwise (`schema.GroupKind.String()`).
pub(crate) fn qualified_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// The message the real server builds from errors (`errors.NewInvalid`):
/// `ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: …`, several errors
/// joined as `[a, b]` with duplicates dropped. `kind` is the qualified kind
/// ([`qualified_kind`]: `Deployment.apps` outside the core group).
pub(crate) fn invalid_message(kind: &str, name: &str, errors: &[FieldError]) -> String {
    let head = format!("{kind} {} is invalid", go_quote(name));
    let mut seen = BTreeSet::new();
    let unique: Vec<String> = errors
        .iter()
        .map(ToString::to_string)
        .filter(|m| seen.insert(m.clone()))
        .collect();
    match unique.len() {
        0 => head,
        1 => format!("{head}: {}", unique[0]),
        _ => format!("{head}: [{}]", unique.join(", ")),
    }
}

/// Validates an object as the real server would before storing it. `namespaced` says
/// whether the kind is namespaced (the handler sets `metadata.namespace` from the path
/// and generates the name from `generateName` first, as the real server does). Run it
/// on the defaulted object: several checks rely on defaults (a Job's restartPolicy).
/// Returns every error found, in the real server's order.
pub(crate) fn validate(group: &str, kind: &str, obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    validate_object_meta(
        meta,
        namespaced,
        name_rule(group, kind),
        "metadata",
        &mut errs,
    );
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    match (group, kind) {
        ("", "Pod") => validate_pod_spec(spec, "spec", &mut errs),
        ("", "PodTemplate") => validate_pod_template(
            obj.get("template").unwrap_or(&Value::Null),
            "template",
            &mut errs,
        ),
        ("", "ConfigMap") => validate_config_map(obj, &mut errs),
        ("", "Secret") => validate_secret(obj, &mut errs),
        ("", "Service") => validate_service(spec, &mut errs),
        ("", "PersistentVolumeClaim") => validate_pvc_spec(spec, "spec", &mut errs),
        ("", "ReplicationController") => {
            validate_nonnegative(spec.get("replicas"), "spec.replicas", &mut errs);
            validate_pod_template(
                spec.get("template").unwrap_or(&Value::Null),
                "spec.template",
                &mut errs,
            );
        }
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            validate_workload(kind, spec, &mut errs)
        }
        ("batch", "Job") => validate_job_spec(spec, "spec", &mut errs),
        ("batch", "CronJob") => validate_cron_job(obj, &mut errs),
        ("networking.k8s.io", "Ingress") => validate_ingress(spec, &mut errs),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            validate_rules(obj, kind == "Role", &mut errs)
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            validate_binding(obj, kind == "ClusterRoleBinding", &mut errs)
        }
        ("autoscaling", "HorizontalPodAutoscaler") => validate_hpa(spec, &mut errs),
        ("coordination.k8s.io", "Lease") => {
            if let Some(d) = spec.get("leaseDurationSeconds").and_then(Value::as_i64)
                && d <= 0
            {
                errs.push(FieldError::invalid(
                    "spec.leaseDurationSeconds",
                    &d.to_string(),
                    "must be greater than 0",
                ));
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => validate_crd(obj, &mut errs),
        _ => {}
    }
    errs
}

/// Immutable fields on update, with the real messages: object identity, workload
/// selectors, StatefulSet spec outside its mutable fields, Job selector and template,
/// Service clusterIP, PVC spec except `resources.requests`, ConfigMap and Secret data
/// when `immutable: true`, Secret type, binding roleRefs, CRD group and scope, Pod spec
/// outside its mutable fields. Both objects are the defaulted ones.
pub(crate) fn validate_update(
    group: &str,
    kind: &str,
    old: &Value,
    new: &Value,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in ["name", "namespace", "uid"] {
        let old_v = old["metadata"]
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_v = new["metadata"]
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("");
        // An update without a uid is matched by name; only a different one is refused.
        if old_v != new_v && !(key == "uid" && new_v.is_empty()) {
            errs.push(FieldError::invalid_str(
                &format!("metadata.{key}"),
                new_v,
                IMMUTABLE_MSG,
            ));
        }
    }
    let old_spec = old.get("spec").unwrap_or(&Value::Null);
    let new_spec = new.get("spec").unwrap_or(&Value::Null);
    match (group, kind) {
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") => {
            immutable_selector(old_spec, new_spec, "spec.selector", &mut errs)
        }
        ("apps", "StatefulSet") => {
            let mutable = [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "revisionHistoryLimit",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ];
            if without(old_spec, &mutable) != without(new_spec, &mutable) {
                errs.push(FieldError::forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
        }
        ("batch", "Job") => {
            immutable_selector(old_spec, new_spec, "spec.selector", &mut errs);
            if old_spec.get("template") != new_spec.get("template") {
                errs.push(FieldError::invalid(
                    "spec.template",
                    "core.PodTemplateSpec{…}",
                    IMMUTABLE_MSG,
                ));
            }
            if old_spec.get("completionMode") != new_spec.get("completionMode") {
                errs.push(FieldError::invalid_str(
                    "spec.completionMode",
                    str_at(new_spec, "completionMode"),
                    IMMUTABLE_MSG,
                ));
            }
        }
        ("", "Service") => {
            let old_ip = str_at(old_spec, "clusterIP");
            let new_ip = str_at(new_spec, "clusterIP");
            let external = str_at(old_spec, "type") == "ExternalName"
                || str_at(new_spec, "type") == "ExternalName";
            if !external && !old_ip.is_empty() && old_ip != new_ip {
                let ips = strings(new_spec.get("clusterIPs"));
                errs.push(FieldError::invalid(
                    "spec.clusterIPs[0]",
                    &go_string_slice(&ips),
                    "may not change once set",
                ));
            }
        }
        ("", "PersistentVolumeClaim") => {
            let mutable = ["resources", "volumeAttributesClassName", "volumeName"];
            let requests_only = |spec: &Value| {
                let mut v = without(spec, &mutable);
                if let Some(limits) = spec.get("resources").and_then(|r| r.get("limits"))
                    && let Some(o) = v.as_object_mut()
                {
                    o.insert("limits".into(), limits.clone());
                }
                v
            };
            if requests_only(old_spec) != requests_only(new_spec) {
                errs.push(FieldError::forbidden(
                    "spec",
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
                ));
            }
        }
        ("", "ConfigMap" | "Secret") => {
            if kind == "Secret" && old.get("type") != new.get("type") {
                errs.push(FieldError::invalid_str(
                    "type",
                    new.get("type").and_then(Value::as_str).unwrap_or(""),
                    IMMUTABLE_MSG,
                ));
            }
            if old.get("immutable").and_then(Value::as_bool) == Some(true) {
                let msg = "field is immutable when `immutable` is set";
                if new.get("immutable").and_then(Value::as_bool) != Some(true) {
                    errs.push(FieldError::forbidden("immutable", msg));
                }
                let fields: &[&str] = if kind == "Secret" {
                    &["data"]
                } else {
                    &["data", "binaryData"]
                };
                for field in fields {
                    if non_empty(old.get(*field)) != non_empty(new.get(*field)) {
                        errs.push(FieldError::forbidden(field, msg));
                    }
                }
            }
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding")
            if old.get("roleRef") != new.get("roleRef") =>
        {
            let r = new.get("roleRef").unwrap_or(&Value::Null);
            let rendered = format!(
                "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                go_quote(str_at(r, "apiGroup")),
                go_quote(str_at(r, "kind")),
                go_quote(str_at(r, "name"))
            );
            errs.push(FieldError::invalid(
                "roleRef",
                &rendered,
                "cannot change roleRef",
            ));
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            for key in ["group", "scope"] {
                if old_spec.get(key) != new_spec.get(key) {
                    errs.push(FieldError::invalid_str(
                        &format!("spec.{key}"),
                        str_at(new_spec, key),
                        IMMUTABLE_MSG,
                    ));
                }
            }
        }
        ("", "Pod") if pod_spec_for_update(old_spec) != pod_spec_for_update(new_spec) => {
            errs.push(FieldError::forbidden(
                    "spec",
                    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                ));
        }
        _ => {}
    }
    errs
}

// ---- shared checks ----

fn validate_nonnegative(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = v.and_then(Value::as_i64)
        && n < 0
    {
        errs.push(FieldError::invalid(
            path,
            &n.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

fn is_zero_intstr(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        Some(Value::String(s)) => s == "0%" || s == "0",
        _ => false,
    }
}

fn without(v: &Value, keys: &[&str]) -> Value {
    let mut copy = v.clone();
    if let Some(o) = copy.as_object_mut() {
        for k in keys {
            o.remove(*k);
        }
    }
    copy
}

/// The parts of a pod spec an update may not change, with the mutable ones removed.
fn pod_spec_for_update(spec: &Value) -> Value {
    let mut copy = without(
        spec,
        &[
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
        ],
    );
    for list in ["containers", "initContainers"] {
        if let Some(cs) = copy.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                c.remove("image");
            }
        }
    }
    copy
}

fn non_empty(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| match v {
        Value::Null => false,
        Value::Object(o) => !o.is_empty(),
        _ => true,
    })
}

// ---- JSON access ----

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Map entries in key order, as the real server reports them (Go iterates maps in
/// random order; sorted is the stable choice).
fn sorted(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

#[cfg(test)]
mod tests;
