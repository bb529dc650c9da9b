//! RBAC: rules, roleRefs and subjects of roles and bindings.

use serde_json::Value;

use super::go_format::go_string_slice;
use super::names::{path_segment_errors, subdomain_errors};
use super::{FieldError, invalid_each, str_at, strings};

pub(super) fn validate_rules(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
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

pub(super) fn validate_binding(obj: &Value, cluster: bool, errs: &mut Vec<FieldError>) {
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
        invalid_each("roleRef.name", name, path_segment_errors(name, false), errs);
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
                    invalid_each(
                        &format!("{path}.name"),
                        sname,
                        subdomain_errors(sname),
                        errs,
                    );
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
