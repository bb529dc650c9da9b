//! Pod specs wherever they appear: containers, images, ports, probes, volumes and
//! mounts, restart and DNS policies.

use std::collections::BTreeSet;

use serde_json::Value;

use super::go_format::go_quote;
use super::meta::{validate_annotations, validate_labels};
use super::names::{label_errors, port_name_errors};
use super::{FieldError, PORT_RANGE_MSG, invalid_each, str_at, supported_unless_empty};

pub(super) const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];

pub(super) const DNS_POLICIES: [&str; 4] =
    ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];

pub(super) const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

pub(super) fn validate_pod_template(template: &Value, path: &str, errs: &mut Vec<FieldError>) {
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

pub(super) fn validate_pod_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
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
            let path = format!("{vpath}.name");
            unique_name(&path, name, label_errors(name), &mut volume_names, errs);
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
    supported_unless_empty(
        &format!("{path}.restartPolicy"),
        restart,
        &RESTART_POLICIES,
        errs,
    );
    let dns = str_at(spec, "dnsPolicy");
    supported_unless_empty(&format!("{path}.dnsPolicy"), dns, &DNS_POLICIES, errs);
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

pub(super) fn validate_container(
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
        unique_name(
            &format!("{path}.name"),
            name,
            label_errors(name),
            names,
            errs,
        );
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
                let problems = port_name_errors(port_name);
                let path = format!("{ppath}.name");
                unique_name(&path, port_name, problems, &mut port_names, errs);
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

pub(super) fn validate_protocol(holder: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match holder.get("protocol").and_then(Value::as_str) {
        None => {}
        Some("") => errs.push(FieldError::required(path, "")),
        Some(p) if !PROTOCOLS.contains(&p) => {
            errs.push(FieldError::not_supported(path, p, &PROTOCOLS))
        }
        _ => {}
    }
}

/// A name (of a volume, a container, a port) unique among its siblings' `names`,
/// each of `problems` (its format's) an Invalid error.
pub(super) fn unique_name(
    path: &str,
    name: &str,
    problems: Vec<String>,
    names: &mut BTreeSet<String>,
    errs: &mut Vec<FieldError>,
) {
    invalid_each(path, name, problems, errs);
    if !names.insert(name.to_string()) {
        errs.push(FieldError::duplicate(path, &go_quote(name)));
    }
}
