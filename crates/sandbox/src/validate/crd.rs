//! CustomResourceDefinitions: names, group and versions.

use serde_json::Value;

use super::{FieldError, str_at, supported_unless_empty};

pub(super) fn validate_crd(obj: &Value, errs: &mut Vec<FieldError>) {
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
    supported_unless_empty("spec.scope", scope, &["Cluster", "Namespaced"], errs);
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
