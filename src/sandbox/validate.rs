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
use std::net::IpAddr;

use serde::Serialize;
use serde::ser::SerializeStruct;
use serde_json::{Map, Value};

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
pub enum FieldErrorReason {
    Required,
    Invalid,
    NotSupported,
    Duplicate,
    Forbidden,
    TooLong,
    NotFound,
}

impl FieldErrorReason {
    /// The `reason` of a Status cause.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::NotFound => "FieldValueNotFound",
        }
    }

    /// How the message of such an error starts (`ErrorType.String()`).
    fn label(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Duplicate => "Duplicate value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
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
    pub reason: FieldErrorReason,
    pub message: String,
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
    pub fn required(field: &str, detail: &str) -> Self {
        Self::new(field, FieldErrorReason::Required, None, detail)
    }

    /// `field.Invalid` with a value already rendered as Go prints it (see
    /// [`go_quote`] for strings).
    pub fn invalid(field: &str, rendered_value: &str, detail: &str) -> Self {
        Self::new(
            field,
            FieldErrorReason::Invalid,
            Some(rendered_value),
            detail,
        )
    }

    /// `field.Invalid` of a string value.
    pub fn invalid_str(field: &str, value: &str, detail: &str) -> Self {
        Self::invalid(field, &go_quote(value), detail)
    }

    /// `field.NotSupported`: `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = format!("supported values: {}", list.join(", "));
        Self::new(
            field,
            FieldErrorReason::NotSupported,
            Some(&go_quote(value)),
            &detail,
        )
    }

    /// `field.Duplicate` with a rendered value.
    pub fn duplicate(field: &str, rendered_value: &str) -> Self {
        Self::new(field, FieldErrorReason::Duplicate, Some(rendered_value), "")
    }

    /// `field.Forbidden`: `Forbidden: detail`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self::new(field, FieldErrorReason::Forbidden, None, detail)
    }

    /// `field.TooLong`: `Too long: may not be more than N bytes`.
    pub fn too_long(field: &str, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            field,
            FieldErrorReason::TooLong,
            None,
            &format!("may not be more than {max} {unit}"),
        )
    }

    /// `field.NotFound` with a rendered value.
    pub fn not_found(field: &str, rendered_value: &str) -> Self {
        Self::new(field, FieldErrorReason::NotFound, Some(rendered_value), "")
    }
}

/// The kind as the real server names it in messages: `ConfigMap` for the core group,
/// `Deployment.apps` otherwise (`schema.GroupKind.String()`).
pub fn qualified_kind(group: &str, kind: &str) -> String {
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
pub fn invalid_message(kind: &str, name: &str, errors: &[FieldError]) -> String {
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
pub fn validate(group: &str, kind: &str, obj: &Value, namespaced: bool) -> Vec<FieldError> {
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
pub fn validate_update(group: &str, kind: &str, old: &Value, new: &Value) -> Vec<FieldError> {
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

// ---- metadata ----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameRule {
    Subdomain,
    Label,
    Dns1035Label,
    PathSegment,
}

fn name_rule(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace") => NameRule::Label,
        ("", "Service") => NameRule::Dns1035Label,
        ("", "PersistentVolume") | ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

fn name_errors(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    // A generateName prefix may end in a dash: mask it as `maskTrailingDash` does.
    let masked;
    let name = if prefix && name.len() > 1 && name.ends_with('-') {
        masked = format!("{}a", &name[..name.len() - 2]);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::Subdomain => subdomain_errors(name),
        NameRule::Label => label_errors(name),
        NameRule::Dns1035Label => dns1035_errors(name),
        NameRule::PathSegment => path_segment_errors(name, prefix),
    }
}

fn validate_object_meta(
    meta: &Value,
    namespaced: bool,
    rule: NameRule,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let generate_name = str_at(meta, "generateName");
    if !generate_name.is_empty() {
        for msg in name_errors(rule, generate_name, true) {
            errs.push(FieldError::invalid_str(
                &format!("{path}.generateName"),
                generate_name,
                &msg,
            ));
        }
    }
    let name = str_at(meta, "name");
    if name.is_empty() {
        errs.push(FieldError::required(
            &format!("{path}.name"),
            "name or generateName is required",
        ));
    } else {
        for msg in name_errors(rule, name, false) {
            errs.push(FieldError::invalid_str(&format!("{path}.name"), name, &msg));
        }
    }
    let namespace = str_at(meta, "namespace");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(&format!("{path}.namespace"), ""));
        } else {
            for msg in label_errors(namespace) {
                errs.push(FieldError::invalid_str(
                    &format!("{path}.namespace"),
                    namespace,
                    &msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            &format!("{path}.namespace"),
            "not allowed on this type",
        ));
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(
            &format!("{path}.generation"),
            &g.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    validate_labels(meta.get("labels"), &format!("{path}.labels"), errs);
    validate_annotations(
        meta.get("annotations"),
        &format!("{path}.annotations"),
        errs,
    );
    for f in strings(meta.get("finalizers")) {
        for msg in qualified_name_errors(&f) {
            errs.push(FieldError::invalid_str(
                &format!("{path}.finalizers"),
                &f,
                &msg,
            ));
        }
    }
}

fn validate_labels(labels: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(labels) = labels.and_then(Value::as_object) else {
        return;
    };
    for (key, value) in sorted(labels) {
        for msg in qualified_name_errors(key) {
            errs.push(FieldError::invalid_str(path, key, &msg));
        }
        let value = value.as_str().unwrap_or("");
        for msg in label_value_errors(value) {
            errs.push(FieldError::invalid_str(path, value, &msg));
        }
    }
}

fn validate_annotations(annotations: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(annotations) = annotations.and_then(Value::as_object) else {
        return;
    };
    let mut total = 0;
    for (key, value) in sorted(annotations) {
        // Annotation keys are qualified names whose case does not matter.
        for msg in qualified_name_errors(&key.to_lowercase()) {
            errs.push(FieldError::invalid_str(path, key, &msg));
        }
        total += key.len() + value.as_str().map_or(0, str::len);
    }
    if total > ANNOTATIONS_MAX_BYTES {
        errs.push(FieldError::too_long(path, ANNOTATIONS_MAX_BYTES));
    }
}

// ---- pod specs ----

const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
const DNS_POLICIES: [&str; 4] = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

fn validate_pod_template(template: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let meta = template.get("metadata").unwrap_or(&Value::Null);
    validate_labels(meta.get("labels"), &format!("{path}.labels"), errs);
    validate_annotations(
        meta.get("annotations"),
        &format!("{path}.annotations"),
        errs,
    );
    validate_pod_spec(
        template.get("spec").unwrap_or(&Value::Null),
        &format!("{path}.spec"),
        errs,
    );
}

fn validate_pod_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let volumes: Vec<&Value> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let mut volume_names = BTreeSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let vpath = format!("{path}.volumes[{i}]");
        let name = str_at(v, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&format!("{vpath}.name"), ""));
        } else {
            for msg in label_errors(name) {
                errs.push(FieldError::invalid_str(
                    &format!("{vpath}.name"),
                    name,
                    &msg,
                ));
            }
            if !volume_names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(
                    &format!("{vpath}.name"),
                    &go_quote(name),
                ));
            }
        }
    }
    // Containers first, then init containers, whose names must differ from all.
    let mut container_names = BTreeSet::new();
    match spec.get("containers").and_then(Value::as_array) {
        Some(list) if !list.is_empty() => {
            for (i, c) in list.iter().enumerate() {
                validate_container(
                    c,
                    &format!("{path}.containers[{i}]"),
                    &volume_names,
                    &mut container_names,
                    errs,
                );
            }
        }
        _ => errs.push(FieldError::required(&format!("{path}.containers"), "")),
    }
    if let Some(init) = spec.get("initContainers").and_then(Value::as_array) {
        for (i, c) in init.iter().enumerate() {
            validate_container(
                c,
                &format!("{path}.initContainers[{i}]"),
                &volume_names,
                &mut container_names,
                errs,
            );
        }
    }
    let restart = str_at(spec, "restartPolicy");
    if !restart.is_empty() && !RESTART_POLICIES.contains(&restart) {
        errs.push(FieldError::not_supported(
            &format!("{path}.restartPolicy"),
            restart,
            &RESTART_POLICIES,
        ));
    }
    let dns = str_at(spec, "dnsPolicy");
    if !dns.is_empty() && !DNS_POLICIES.contains(&dns) {
        errs.push(FieldError::not_supported(
            &format!("{path}.dnsPolicy"),
            dns,
            &DNS_POLICIES,
        ));
    }
    if let Some(grace) = spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        && grace < 0
    {
        errs.push(FieldError::invalid(
            &format!("{path}.terminationGracePeriodSeconds"),
            &grace.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

fn validate_container(
    c: &Value,
    path: &str,
    volumes: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let name = str_at(c, "name");
    if name.is_empty() {
        errs.push(FieldError::required(&format!("{path}.name"), ""));
    } else {
        for msg in label_errors(name) {
            errs.push(FieldError::invalid_str(&format!("{path}.name"), name, &msg));
        }
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(
                &format!("{path}.name"),
                &go_quote(name),
            ));
        }
    }
    let image = str_at(c, "image");
    if image.is_empty() {
        errs.push(FieldError::required(&format!("{path}.image"), ""));
    } else if image.trim() != image {
        errs.push(FieldError::invalid_str(
            &format!("{path}.image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    let mut port_names = BTreeSet::new();
    if let Some(ports) = c.get("ports").and_then(Value::as_array) {
        for (i, p) in ports.iter().enumerate() {
            let ppath = format!("{path}.ports[{i}]");
            let port_name = str_at(p, "name");
            if !port_name.is_empty() {
                for msg in port_name_errors(port_name) {
                    errs.push(FieldError::invalid_str(
                        &format!("{ppath}.name"),
                        port_name,
                        &msg,
                    ));
                }
                if !port_names.insert(port_name.to_string()) {
                    errs.push(FieldError::duplicate(
                        &format!("{ppath}.name"),
                        &go_quote(port_name),
                    ));
                }
            }
            match p.get("containerPort").and_then(Value::as_i64) {
                None | Some(0) => {
                    errs.push(FieldError::required(&format!("{ppath}.containerPort"), ""))
                }
                Some(n) if !(1..=65535).contains(&n) => errs.push(FieldError::invalid(
                    &format!("{ppath}.containerPort"),
                    &n.to_string(),
                    PORT_RANGE_MSG,
                )),
                _ => {}
            }
            if let Some(host) = p.get("hostPort").and_then(Value::as_i64)
                && host != 0
                && !(1..=65535).contains(&host)
            {
                errs.push(FieldError::invalid(
                    &format!("{ppath}.hostPort"),
                    &host.to_string(),
                    PORT_RANGE_MSG,
                ));
            }
            validate_protocol(p, &format!("{ppath}.protocol"), errs);
        }
    }
    if let Some(mounts) = c.get("volumeMounts").and_then(Value::as_array) {
        for (i, m) in mounts.iter().enumerate() {
            let mpath = format!("{path}.volumeMounts[{i}]");
            let volume = str_at(m, "name");
            if volume.is_empty() {
                errs.push(FieldError::required(&format!("{mpath}.name"), ""));
            } else if !volumes.contains(volume) {
                errs.push(FieldError::not_found(
                    &format!("{mpath}.name"),
                    &go_quote(volume),
                ));
            }
            if str_at(m, "mountPath").is_empty() {
                errs.push(FieldError::required(&format!("{mpath}.mountPath"), ""));
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get(probe).filter(|p| p.is_object()) {
            let handlers = ["exec", "httpGet", "tcpSocket", "grpc"]
                .iter()
                .filter(|h| p.get(**h).is_some_and(|v| !v.is_null()))
                .count();
            let ppath = format!("{path}.{probe}");
            if handlers == 0 {
                errs.push(FieldError::required(&ppath, "must specify a handler type"));
            } else if handlers > 1 {
                errs.push(FieldError::forbidden(
                    &ppath,
                    "may not specify more than 1 handler type",
                ));
            }
            if probe != "readinessProbe"
                && probe != "startupProbe"
                && p.get("successThreshold")
                    .and_then(Value::as_i64)
                    .unwrap_or(1)
                    != 1
            {
                let v = p
                    .get("successThreshold")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                errs.push(FieldError::invalid(
                    &format!("{ppath}.successThreshold"),
                    &v.to_string(),
                    "must be 1",
                ));
            }
        }
    }
}

fn validate_protocol(holder: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match holder.get("protocol").and_then(Value::as_str) {
        None => {}
        Some("") => errs.push(FieldError::required(path, "")),
        Some(p) if !PROTOCOLS.contains(&p) => {
            errs.push(FieldError::not_supported(path, p, &PROTOCOLS))
        }
        _ => {}
    }
}

// ---- workloads ----

fn validate_workload(kind: &str, spec: &Value, errs: &mut Vec<FieldError>) {
    let selector = spec.get("selector").filter(|s| !s.is_null());
    validate_nonnegative(spec.get("replicas"), "spec.replicas", errs);
    validate_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds", errs);
    let empty_msg = match kind {
        "StatefulSet" => "empty selector is invalid for statefulset",
        "DaemonSet" => "empty selector is invalid for daemonset",
        // ReplicaSet's validation reuses the Deployment wording.
        _ => "empty selector is invalid for deployment",
    };
    let template = spec.get("template").unwrap_or(&Value::Null);
    let template_labels = template.get("metadata").and_then(|m| m.get("labels"));
    let mismatch = || {
        FieldError::invalid(
            "spec.template.metadata.labels",
            &go_string_map(template_labels),
            SELECTOR_MISMATCH_MSG,
        )
    };
    let is_empty_selector = selector.is_some_and(|s| selector_size(s) == 0);
    if kind == "DaemonSet" {
        validate_selector_labels(selector, "spec.selector", errs);
        if !selector_matches(selector, template_labels) {
            errs.push(mismatch());
        }
        if is_empty_selector {
            errs.push(FieldError::invalid(
                "spec.selector",
                &go_label_selector(selector),
                empty_msg,
            ));
        }
    } else {
        match selector {
            None => errs.push(FieldError::required("spec.selector", "")),
            Some(_) => {
                validate_selector_labels(selector, "spec.selector", errs);
                if is_empty_selector {
                    errs.push(FieldError::invalid(
                        "spec.selector",
                        &go_label_selector(selector),
                        empty_msg,
                    ));
                }
            }
        }
        // An empty selector selects everything; a missing one selects nothing.
        if !is_empty_selector && !selector_matches(selector, template_labels) {
            errs.push(mismatch());
        }
    }
    validate_pod_template(template, "spec.template", errs);
    let restart = template
        .get("spec")
        .map(|s| str_at(s, "restartPolicy"))
        .unwrap_or("");
    if restart != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            restart,
            &["Always"],
        ));
    }
    if kind == "StatefulSet" {
        let policy = str_at(spec, "podManagementPolicy");
        if !policy.is_empty() && policy != "OrderedReady" && policy != "Parallel" {
            errs.push(FieldError::invalid_str(
                "spec.podManagementPolicy",
                policy,
                "must be 'OrderedReady' or 'Parallel'",
            ));
        }
    }
    if kind == "Deployment" {
        let strategy = spec.get("strategy").unwrap_or(&Value::Null);
        let ty = str_at(strategy, "type");
        if !ty.is_empty() && ty != "RollingUpdate" && ty != "Recreate" {
            errs.push(FieldError::not_supported(
                "spec.strategy.type",
                ty,
                &["Recreate", "RollingUpdate"],
            ));
        }
        if ty == "Recreate" && strategy.get("rollingUpdate").is_some_and(|r| !r.is_null()) {
            errs.push(FieldError::forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            ));
        }
        if let Some(rolling) = strategy.get("rollingUpdate")
            && is_zero_intstr(rolling.get("maxUnavailable"))
            && is_zero_intstr(rolling.get("maxSurge"))
        {
            errs.push(FieldError::invalid(
                "spec.strategy.rollingUpdate.maxUnavailable",
                &go_intstr(rolling.get("maxUnavailable")),
                "may not be 0 when `maxSurge` is 0",
            ));
        }
    }
}

fn validate_job_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
    ] {
        validate_nonnegative(spec.get(key), &format!("{path}.{key}"), errs);
    }
    let template = spec.get("template").unwrap_or(&Value::Null);
    validate_pod_template(template, &format!("{path}.template"), errs);
    let restart = template
        .get("spec")
        .map(|s| str_at(s, "restartPolicy"))
        .unwrap_or("");
    if restart != "OnFailure" && restart != "Never" {
        errs.push(FieldError::not_supported(
            &format!("{path}.template.spec.restartPolicy"),
            restart,
            &["OnFailure", "Never"],
        ));
    }
    let mode = str_at(spec, "completionMode");
    if !mode.is_empty() && mode != "NonIndexed" && mode != "Indexed" {
        errs.push(FieldError::not_supported(
            &format!("{path}.completionMode"),
            mode,
            &["NonIndexed", "Indexed"],
        ));
    }
}

fn validate_cron_job(obj: &Value, errs: &mut Vec<FieldError>) {
    let name = obj["metadata"]
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.len() > CRON_JOB_NAME_MAX {
        errs.push(FieldError::invalid_str(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if str_at(spec, "schedule").is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    }
    let policy = str_at(spec, "concurrencyPolicy");
    if !policy.is_empty() && !["Allow", "Forbid", "Replace"].contains(&policy) {
        errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            policy,
            &["Allow", "Forbid", "Replace"],
        ));
    }
    for key in [
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
        "startingDeadlineSeconds",
    ] {
        validate_nonnegative(spec.get(key), &format!("spec.{key}"), errs);
    }
    let job_spec = spec
        .get("jobTemplate")
        .and_then(|t| t.get("spec"))
        .unwrap_or(&Value::Null);
    validate_job_spec(job_spec, "spec.jobTemplate.spec", errs);
}

// ---- core kinds ----

fn validate_config_map(obj: &Value, errs: &mut Vec<FieldError>) {
    let data = obj.get("data").and_then(Value::as_object);
    let binary = obj.get("binaryData").and_then(Value::as_object);
    let mut total = 0;
    if let Some(data) = data {
        for (key, value) in sorted(data) {
            let path = format!("data[{key}]");
            for msg in config_key_errors(key) {
                errs.push(FieldError::invalid_str(&path, key, &msg));
            }
            if binary.is_some_and(|b| b.contains_key(key)) {
                errs.push(FieldError::invalid_str(
                    &path,
                    key,
                    "duplicate of key present in binaryData",
                ));
            }
            total += value.as_str().map_or(0, str::len);
        }
    }
    if let Some(binary) = binary {
        for (key, value) in sorted(binary) {
            for msg in config_key_errors(key) {
                errs.push(FieldError::invalid_str(
                    &format!("binaryData[{key}]"),
                    key,
                    &msg,
                ));
            }
            // Stored base64: the decoded size is three quarters of the text.
            total += value.as_str().map_or(0, |s| s.len() / 4 * 3);
        }
    }
    if total > MAX_DATA_BYTES {
        errs.push(FieldError::too_long("", MAX_DATA_BYTES));
    }
}

fn validate_secret(obj: &Value, errs: &mut Vec<FieldError>) {
    let data = obj.get("data").and_then(Value::as_object);
    let mut total = 0;
    if let Some(data) = data {
        for (key, value) in sorted(data) {
            for msg in config_key_errors(key) {
                errs.push(FieldError::invalid_str(&format!("data[{key}]"), key, &msg));
            }
            total += value.as_str().map_or(0, |s| s.len() / 4 * 3);
        }
    }
    if total > MAX_DATA_BYTES {
        errs.push(FieldError::too_long("data", MAX_DATA_BYTES));
    }
    let has = |key: &str| data.is_some_and(|d| d.contains_key(key));
    let required_keys: &[&str] = match obj.get("type").and_then(Value::as_str).unwrap_or("") {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        _ => &[],
    };
    for key in required_keys {
        if !has(key) {
            errs.push(FieldError::required(&format!("data[{key}]"), ""));
        }
    }
    if obj.get("type").and_then(Value::as_str) == Some("kubernetes.io/service-account-token") {
        let account = obj["metadata"]
            .get("annotations")
            .and_then(|a| a.get("kubernetes.io/service-account.name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if account.is_empty() {
            errs.push(FieldError::required(
                "metadata.annotations[kubernetes.io/service-account.name]",
                "",
            ));
        }
    }
}

const SERVICE_TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

fn validate_service(spec: &Value, errs: &mut Vec<FieldError>) {
    let ty = str_at(spec, "type");
    let cluster_ip = str_at(spec, "clusterIP");
    let headless = cluster_ip == "None";
    if !ty.is_empty() && !SERVICE_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported("spec.type", ty, &SERVICE_TYPES));
    }
    if ty == "ExternalName" {
        if !cluster_ip.is_empty() {
            errs.push(FieldError::forbidden(
                "spec.clusterIP",
                "may not be set for ExternalName services",
            ));
        }
        let external = str_at(spec, "externalName");
        if external.is_empty() {
            errs.push(FieldError::required("spec.externalName", ""));
        } else {
            for msg in subdomain_errors(external.trim_end_matches('.')) {
                errs.push(FieldError::invalid_str("spec.externalName", external, &msg));
            }
        }
    }
    let ports = spec
        .get("ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if ports.is_empty() && !headless && ty != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    let mut names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        let name = str_at(p, "name");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(&format!("{path}.name"), ""));
        } else if !name.is_empty() {
            for msg in label_errors(name) {
                errs.push(FieldError::invalid_str(&format!("{path}.name"), name, &msg));
            }
            if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(
                    &format!("{path}.name"),
                    &go_quote(name),
                ));
            }
        }
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&port) {
            errs.push(FieldError::invalid(
                &format!("{path}.port"),
                &port.to_string(),
                PORT_RANGE_MSG,
            ));
        }
        validate_protocol(p, &format!("{path}.protocol"), errs);
        match p.get("targetPort") {
            Some(Value::Number(n)) => {
                let n = n.as_i64().unwrap_or(0);
                if !(1..=65535).contains(&n) {
                    errs.push(FieldError::invalid(
                        &format!("{path}.targetPort"),
                        &n.to_string(),
                        PORT_RANGE_MSG,
                    ));
                }
            }
            Some(Value::String(s)) => {
                for msg in port_name_errors(s) {
                    errs.push(FieldError::invalid_str(
                        &format!("{path}.targetPort"),
                        s,
                        &msg,
                    ));
                }
            }
            _ => {}
        }
        if ty == "ClusterIP"
            && p.get("nodePort")
                .and_then(Value::as_i64)
                .is_some_and(|n| n != 0)
        {
            errs.push(FieldError::forbidden(
                &format!("{path}.nodePort"),
                "may not be used when `type` is 'ClusterIP'",
            ));
        }
    }
    let affinity = str_at(spec, "sessionAffinity");
    if !affinity.is_empty() && affinity != "None" && affinity != "ClientIP" {
        errs.push(FieldError::not_supported(
            "spec.sessionAffinity",
            affinity,
            &["ClientIP", "None"],
        ));
    }
    validate_labels(spec.get("selector"), "spec.selector", errs);
    if !cluster_ip.is_empty() && !headless && ty != "ExternalName" {
        match cluster_ip.parse::<IpAddr>() {
            Err(_) => errs.push(FieldError::invalid_str(
                "spec.clusterIPs[0]",
                cluster_ip,
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            )),
            Ok(ip) if !in_service_cidr(ip) => {
                let ips = strings(spec.get("clusterIPs"));
                errs.push(FieldError::invalid(
                    "spec.clusterIPs",
                    &go_string_slice(&ips),
                    &format!(
                        "failed to allocate IP {cluster_ip}: the provided IP ({cluster_ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR_TEXT}"
                    ),
                ));
            }
            _ => {}
        }
    }
}

fn in_service_cidr(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let n = u32::from(v4);
            let base = u32::from(std::net::Ipv4Addr::new(10, 96, 0, 0));
            n & 0xfff0_0000 == base
        }
        IpAddr::V6(_) => false,
    }
}

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

fn validate_pvc_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let modes = strings(spec.get("accessModes"));
    if modes.is_empty() {
        errs.push(FieldError::required(
            &format!("{path}.accessModes"),
            "at least 1 access mode is required",
        ));
    }
    for mode in &modes {
        if !ACCESS_MODES.contains(&mode.as_str()) {
            errs.push(FieldError::not_supported(
                &format!("{path}.accessModes"),
                mode,
                &ACCESS_MODES,
            ));
        }
    }
    let storage = spec
        .get("resources")
        .and_then(|r| r.get("requests"))
        .and_then(|r| r.get("storage"));
    if storage.is_none() {
        errs.push(FieldError::required(
            &format!("{path}.resources[storage]"),
            "",
        ));
    }
}

// ---- other groups ----

const PATH_TYPES: [&str; 3] = ["Exact", "ImplementationSpecific", "Prefix"];

fn validate_ingress(spec: &Value, errs: &mut Vec<FieldError>) {
    let rules = spec.get("rules").and_then(Value::as_array);
    let has_default = spec.get("defaultBackend").is_some_and(|b| !b.is_null());
    if rules.is_none_or(Vec::is_empty) && !has_default {
        errs.push(FieldError::invalid(
            "spec.rules",
            "[]networking.IngressRule(nil)",
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let host = str_at(rule, "host");
        if !host.is_empty() {
            let checked = host.strip_prefix("*.").unwrap_or(host);
            for msg in subdomain_errors(checked) {
                errs.push(FieldError::invalid_str(
                    &format!("spec.rules[{i}].host"),
                    host,
                    &msg,
                ));
            }
        }
        let paths = rule
            .get("http")
            .and_then(|h| h.get("paths"))
            .and_then(Value::as_array);
        for (j, p) in paths.into_iter().flatten().enumerate() {
            let ppath = format!("spec.rules[{i}].http.paths[{j}]");
            let path_type = str_at(p, "pathType");
            if path_type.is_empty() {
                errs.push(FieldError::required(
                    &format!("{ppath}.pathType"),
                    "pathType must be specified",
                ));
            } else if !PATH_TYPES.contains(&path_type) {
                errs.push(FieldError::not_supported(
                    &format!("{ppath}.pathType"),
                    path_type,
                    &PATH_TYPES,
                ));
            }
            let url_path = str_at(p, "path");
            if (path_type == "Exact" || path_type == "Prefix") && !url_path.starts_with('/') {
                errs.push(FieldError::invalid_str(
                    &format!("{ppath}.path"),
                    url_path,
                    "must be an absolute path",
                ));
            }
        }
    }
}

fn validate_rules(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    let rules = obj.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let path = format!("rules[{i}]");
        if strings(rule.get("verbs")).is_empty() {
            errs.push(FieldError::required(
                &format!("{path}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = strings(rule.get("nonResourceURLs"));
        if !urls.is_empty() {
            if namespaced {
                errs.push(FieldError::invalid(
                    &format!("{path}.nonResourceURLs"),
                    &go_string_slice(&urls),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            continue;
        }
        if rule
            .get("apiGroups")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            errs.push(FieldError::required(
                &format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if strings(rule.get("resources")).is_empty() {
            errs.push(FieldError::required(
                &format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

fn validate_binding(obj: &Value, cluster: bool, errs: &mut Vec<FieldError>) {
    let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
    let api_group = str_at(role_ref, "apiGroup");
    if api_group != "rbac.authorization.k8s.io" {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            api_group,
            &["rbac.authorization.k8s.io"],
        ));
    }
    let kind = str_at(role_ref, "kind");
    let kinds: &[&str] = if cluster {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    if !kinds.contains(&kind) {
        errs.push(FieldError::not_supported("roleRef.kind", kind, kinds));
    }
    let name = str_at(role_ref, "name");
    if name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for msg in path_segment_errors(name, false) {
            errs.push(FieldError::invalid_str("roleRef.name", name, &msg));
        }
    }
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, s) in subjects.into_iter().flatten().enumerate() {
        let path = format!("subjects[{i}]");
        let sname = str_at(s, "name");
        if sname.is_empty() {
            errs.push(FieldError::required(&format!("{path}.name"), ""));
        }
        match str_at(s, "kind") {
            "ServiceAccount" => {
                if !sname.is_empty() {
                    for msg in subdomain_errors(sname) {
                        errs.push(FieldError::invalid_str(
                            &format!("{path}.name"),
                            sname,
                            &msg,
                        ));
                    }
                }
                if cluster && str_at(s, "namespace").is_empty() {
                    errs.push(FieldError::required(&format!("{path}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                let group = str_at(s, "apiGroup");
                if group != "rbac.authorization.k8s.io" {
                    errs.push(FieldError::not_supported(
                        &format!("{path}.apiGroup"),
                        group,
                        &["rbac.authorization.k8s.io"],
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                &format!("{path}.kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}

fn validate_hpa(spec: &Value, errs: &mut Vec<FieldError>) {
    let target = spec.get("scaleTargetRef").unwrap_or(&Value::Null);
    for key in ["kind", "name"] {
        if str_at(target, key).is_empty() {
            errs.push(FieldError::required(
                &format!("spec.scaleTargetRef.{key}"),
                "",
            ));
        }
    }
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    if let Some(m) = min
        && m < 1
    {
        errs.push(FieldError::invalid(
            "spec.minReplicas",
            &m.to_string(),
            "must be greater than or equal to 1",
        ));
    }
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than 0",
        ));
    }
    if let Some(m) = min
        && max < m
    {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than or equal to `minReplicas`",
        ));
    }
}

fn validate_crd(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let names = spec.get("names").unwrap_or(&Value::Null);
    let group = str_at(spec, "group");
    let plural = str_at(names, "plural");
    let name = obj["metadata"]
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !name.is_empty() && name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid_str(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid_str(
            "spec.group",
            group,
            "should be a domain with at least one dot",
        ));
    }
    let scope = str_at(spec, "scope");
    if !scope.is_empty() && scope != "Cluster" && scope != "Namespaced" {
        errs.push(FieldError::not_supported(
            "spec.scope",
            scope,
            &["Cluster", "Namespaced"],
        ));
    }
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    }
    if str_at(names, "kind").is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    let versions = spec.get("versions").and_then(Value::as_array);
    match versions {
        None => errs.push(FieldError::required("spec.versions", "")),
        Some(vs) if vs.is_empty() => errs.push(FieldError::required("spec.versions", "")),
        Some(vs) => {
            let storage = vs
                .iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .count();
            if storage != 1 {
                errs.push(FieldError::invalid(
                    "spec.versions",
                    "[]apiextensions.CustomResourceDefinitionVersion{…}",
                    "must have exactly one version marked as storage version",
                ));
            }
        }
    }
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

fn validate_selector_labels(selector: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(s) = selector {
        validate_labels(s.get("matchLabels"), &format!("{path}.matchLabels"), errs);
    }
}

fn selector_size(selector: &Value) -> usize {
    let labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map_or(0, Map::len);
    let exprs = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    labels + exprs
}

/// `LabelSelectorAsSelector(selector).Matches(labels)`: a missing selector matches
/// nothing, an empty one everything.
fn selector_matches(selector: Option<&Value>, labels: Option<&Value>) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    let labels = labels.and_then(Value::as_object);
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let labels_ok = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    let exprs_ok = exprs.into_iter().flatten().all(|e| {
        let key = str_at(e, "key");
        let values = strings(e.get("values"));
        let current = label(key);
        match str_at(e, "operator") {
            "In" => current.is_some_and(|c| values.iter().any(|v| v == c)),
            "NotIn" => current.is_none_or(|c| !values.iter().any(|v| v == c)),
            "Exists" => current.is_some(),
            "DoesNotExist" => current.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

fn is_zero_intstr(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        Some(Value::String(s)) => s == "0%" || s == "0",
        _ => false,
    }
}

fn immutable_selector(old: &Value, new: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let old_sel = old.get("selector").filter(|s| !s.is_null());
    let new_sel = new.get("selector").filter(|s| !s.is_null());
    if normalized_selector(old_sel) != normalized_selector(new_sel) {
        errs.push(FieldError::invalid(
            path,
            &go_label_selector(new_sel),
            IMMUTABLE_MSG,
        ));
    }
}

/// Selectors compared as Go's semantic equality does: empty maps and lists equal
/// missing ones.
/// A selector's labels (sorted) and expressions.
type SelectorKey = (Vec<(String, String)>, Vec<Value>);

fn normalized_selector(s: Option<&Value>) -> Option<SelectorKey> {
    let s = s?;
    let labels = s
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            sorted(m)
                .into_iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let exprs = s
        .get("matchExpressions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Some((labels, exprs))
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

// ---- name and key syntax (k8s.io/apimachinery/pkg/util/validation) ----

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `RegexError`: the message, examples and the regular expression used.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_subdomain(s: &str) -> bool {
    s.split('.').all(is_label)
}

fn subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        errs.push(max_len_error(SUBDOMAIN_MAX));
    }
    if !is_subdomain(s) {
        errs.push(regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

fn label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
    }
    if !is_label(s) {
        if is_subdomain(s) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(LABEL_MSG, LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

fn dns1035_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
    }
    if !(is_label(s) && s.as_bytes()[0].is_ascii_lowercase()) {
        errs.push(regex_error(
            DNS1035_MSG,
            DNS1035_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

fn path_segment_errors(s: &str, prefix: bool) -> Vec<String> {
    if !prefix && (s == "." || s == "..") {
        return vec![format!("may not be '{s}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| s.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `IsQualifiedName`: an optional DNS subdomain prefix and `/`, then a name part.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for msg in subdomain_errors(prefix) {
                    errs.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_MSG, QUALIFIED_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_MAX {
        errs.push(format!("name part {}", max_len_error(LABEL_MAX)));
    }
    if !is_qualified_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_MSG,
                QUALIFIED_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
    }
    if !value.is_empty() && !is_qualified_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

fn config_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > SUBDOMAIN_MAX {
        errs.push(max_len_error(SUBDOMAIN_MAX));
    }
    let chars_ok = !key.is_empty()
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !chars_ok {
        errs.push(regex_error(
            CONFIG_KEY_MSG,
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if key == "." {
        errs.push("must not be '.'".to_string());
    } else if key == ".." {
        errs.push("must not be '..'".to_string());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// `IsValidPortName` (IANA_SVC_NAME): at most 15 lower-case letters, digits and
/// non-adjacent dashes, with at least one letter.
fn port_name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push(max_len_error(15));
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !name.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens (--)".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

// ---- Go value rendering ----

/// A string as Go's `%q` prints it.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A `map[string]string` as `%#v` prints it: keys sorted, `(nil)` when absent.
fn go_string_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".to_string(),
        Some(m) => {
            let items: Vec<String> = sorted(m)
                .into_iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or(""))))
                .collect();
            format!("map[string]string{{{}}}", items.join(", "))
        }
    }
}

fn go_string_slice(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// A `*metav1.LabelSelector` as a field error prints it (dereferenced, `%#v`).
fn go_label_selector(v: Option<&Value>) -> String {
    let Some(s) = v else {
        return "null".to_string();
    };
    let labels = go_string_map(s.get("matchLabels").filter(|l| !l.is_null()));
    let exprs = match s.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match e.get("values").and_then(Value::as_array) {
                        None => "[]string(nil)".to_string(),
                        Some(_) => go_string_slice(&strings(e.get("values"))),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        go_quote(str_at(e, "key")),
                        go_quote(str_at(e, "operator")),
                        values
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

/// An `*intstr.IntOrString` as `%#v` prints it.
fn go_intstr(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            n.as_i64().unwrap_or(0)
        ),
        Some(Value::String(s)) => {
            format!(
                "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
                go_quote(s)
            )
        }
        _ => "null".to_string(),
    }
}

// ---- JSON access ----

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
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
