//! Core kinds: ConfigMap and Secret keys and sizes, Service ports, types and
//! clusterIPs, PersistentVolumeClaim access modes and storage.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::Value;

use super::go_format::go_string_slice;
use super::meta::validate_labels;
use super::names::{config_key_errors, label_errors, port_name_errors, subdomain_errors};
use super::pods::{unique_name, validate_protocol};
use super::{
    FieldError, MAX_DATA_BYTES, PORT_RANGE_MSG, SERVICE_CIDR_TEXT, invalid_each, sorted, str_at,
    strings, supported_unless_empty,
};

pub(super) fn validate_config_map(obj: &Value, errs: &mut Vec<FieldError>) {
    let data = obj.get("data").and_then(Value::as_object);
    let binary = obj.get("binaryData").and_then(Value::as_object);
    let mut total = 0;
    if let Some(data) = data {
        for (key, value) in sorted(data) {
            let path = format!("data[{key}]");
            invalid_each(&path, key, config_key_errors(key), errs);
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
            invalid_each(
                &format!("binaryData[{key}]"),
                key,
                config_key_errors(key),
                errs,
            );
            // Stored base64: the decoded size is three quarters of the text.
            total += value.as_str().map_or(0, |s| s.len() / 4 * 3);
        }
    }
    if total > MAX_DATA_BYTES {
        errs.push(FieldError::too_long("", MAX_DATA_BYTES));
    }
}

pub(super) fn validate_secret(obj: &Value, errs: &mut Vec<FieldError>) {
    let data = obj.get("data").and_then(Value::as_object);
    let mut total = 0;
    if let Some(data) = data {
        for (key, value) in sorted(data) {
            invalid_each(&format!("data[{key}]"), key, config_key_errors(key), errs);
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

pub(super) const SERVICE_TYPES: [&str; 4] =
    ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

pub(super) fn validate_service(spec: &Value, errs: &mut Vec<FieldError>) {
    let ty = str_at(spec, "type");
    let cluster_ip = str_at(spec, "clusterIP");
    let headless = cluster_ip == "None";
    supported_unless_empty("spec.type", ty, &SERVICE_TYPES, errs);
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
            invalid_each(
                "spec.externalName",
                external,
                subdomain_errors(external.trim_end_matches('.')),
                errs,
            );
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
            let problems = label_errors(name);
            unique_name(&format!("{path}.name"), name, problems, &mut names, errs);
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
                invalid_each(&format!("{path}.targetPort"), s, port_name_errors(s), errs);
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
    supported_unless_empty(
        "spec.sessionAffinity",
        affinity,
        &["ClientIP", "None"],
        errs,
    );
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

pub(super) fn in_service_cidr(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let n = u32::from(v4);
            let base = u32::from(std::net::Ipv4Addr::new(10, 96, 0, 0));
            n & 0xfff0_0000 == base
        }
        IpAddr::V6(_) => false,
    }
}

pub(super) const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

pub(super) fn validate_pvc_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
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
