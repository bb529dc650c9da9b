//! Networking: Ingress rules and path types.

use serde_json::Value;

use super::names::subdomain_errors;
use super::{FieldError, invalid_each, str_at};

pub(super) const PATH_TYPES: [&str; 3] = ["Exact", "ImplementationSpecific", "Prefix"];

pub(super) fn validate_ingress(spec: &Value, errs: &mut Vec<FieldError>) {
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
            invalid_each(
                &format!("spec.rules[{i}].host"),
                host,
                subdomain_errors(checked),
                errs,
            );
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
