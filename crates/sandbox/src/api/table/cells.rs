//! The cells of a row, as kube-apiserver's printers compute them for the kinds in
//! [`super::columns_of`].

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{age_since, human_duration};
use crate::registry::{self, ResourceType};

/// Where a workload keeps its pod template.
const POD_TEMPLATE: &str = "/spec/template/spec";

/// The names and the images of the containers of the pod template at `prefix`, each
/// joined with commas.
fn containers_and_images(o: &Value, prefix: &str) -> (String, String) {
    let containers = array_at(o, &format!("{prefix}/containers"));
    let join = |field: &str| {
        containers
            .iter()
            .filter_map(|c| c[field].as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    (join("name"), join("image"))
}

/// The items of the array at `pointer`; none when it is absent.
fn array_at<'a>(o: &'a Value, pointer: &str) -> &'a [Value] {
    o.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// `cells` followed by a workload's wide columns.
fn with_wide(mut cells: Vec<Value>, wide: [Value; 3]) -> Vec<Value> {
    cells.extend(wide);
    cells
}

/// The cells after Name, in [`columns_of`]'s order.
pub(super) fn builtin_cells(resource: &ResourceType, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let int = |path: &str| o.pointer(path).and_then(Value::as_i64).unwrap_or(0);
    let text = |path: &str| o.pointer(path).and_then(Value::as_str).unwrap_or_default();
    let or_none = |s: String| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s
        }
    };
    let age = age_since(
        o.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
        now,
    );
    let template = |prefix: &str| containers_and_images(o, prefix);
    // A workload's wide columns: its template's containers and images, its selector.
    let wide = |template_at: &str, selector_at: &str| -> [Value; 3] {
        let (containers, images) = template(template_at);
        let selector = selector_text(o.pointer(selector_at));
        [containers.into(), images.into(), selector.into()]
    };
    let group = registry::storage_group(&resource.group, &resource.plural);
    match (group, resource.kind.as_str()) {
        ("apps", "Deployment") => with_wide(
            vec![
                format!("{}/{}", int("/status/readyReplicas"), int("/spec/replicas")).into(),
                int("/status/updatedReplicas").into(),
                int("/status/availableReplicas").into(),
                age.into(),
            ],
            wide(POD_TEMPLATE, "/spec/selector"),
        ),
        ("apps", "ReplicaSet") => with_wide(
            vec![
                int("/spec/replicas").into(),
                int("/status/replicas").into(),
                int("/status/readyReplicas").into(),
                age.into(),
            ],
            wide(POD_TEMPLATE, "/spec/selector"),
        ),
        ("apps", "StatefulSet") => {
            let (containers, images) = template(POD_TEMPLATE);
            vec![
                format!("{}/{}", int("/status/readyReplicas"), int("/spec/replicas")).into(),
                age.into(),
                containers.into(),
                images.into(),
            ]
        }
        ("apps", "DaemonSet") => {
            let node_selector = o
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(labels_text)
                .unwrap_or_default();
            let cells = vec![
                int("/status/desiredNumberScheduled").into(),
                int("/status/currentNumberScheduled").into(),
                int("/status/numberReady").into(),
                int("/status/updatedNumberScheduled").into(),
                int("/status/numberAvailable").into(),
                or_none(node_selector).into(),
                age.into(),
            ];
            with_wide(cells, wide(POD_TEMPLATE, "/spec/selector"))
        }
        ("", "Pod") => {
            let statuses = array_at(o, "/status/containerStatuses");
            let total = o
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = statuses.iter().filter(|s| s["ready"] == true).count();
            let restarts: i64 = statuses
                .iter()
                .filter_map(|s| s["restartCount"].as_i64())
                .sum();
            let status = if o.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating".to_string()
            } else {
                let reason = text("/status/reason");
                if reason.is_empty() {
                    text("/status/phase").to_string()
                } else {
                    reason.to_string()
                }
            };
            vec![
                format!("{ready}/{total}").into(),
                status.into(),
                restarts.to_string().into(),
                age.into(),
                or_none(text("/status/podIP").to_string()).into(),
                or_none(text("/spec/nodeName").to_string()).into(),
                or_none(text("/status/nominatedNodeName").to_string()).into(),
                "<none>".into(),
            ]
        }
        ("", "Service") => vec![
            text("/spec/type").into(),
            or_none(text("/spec/clusterIP").to_string()).into(),
            service_external_ip(o).into(),
            service_ports(o).into(),
            age.into(),
            o.pointer("/spec/selector")
                .and_then(Value::as_object)
                .map(labels_text)
                .map(or_none)
                .unwrap_or_else(|| "<none>".into())
                .into(),
        ],
        ("", "ConfigMap") => {
            let count = |field: &str| {
                o.get(field)
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len())
            };
            vec![(count("data") + count("binaryData")).into(), age.into()]
        }
        ("", "Secret") => vec![
            text("/type").into(),
            o.get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())
                .into(),
            age.into(),
        ],
        ("", "Namespace") => vec![text("/status/phase").into(), age.into()],
        ("", "ServiceAccount") => vec![
            o.get("secrets")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
                .into(),
            age.into(),
        ],
        ("", "Event") => event_cells(o, now),
        ("batch", "Job") => job_cells(o, now, age),
        ("batch", "CronJob") => {
            let last = o
                .pointer("/status/lastScheduleTime")
                .and_then(Value::as_str)
                .map(|t| age_since(Some(t), now))
                .unwrap_or_else(|| "<none>".into());
            let cells = vec![
                text("/spec/schedule").into(),
                or_none(text("/spec/timeZone").to_string()).into(),
                // `printBoolPtr`: a word, not a JSON boolean.
                match o.pointer("/spec/suspend").and_then(Value::as_bool) {
                    Some(true) => "True",
                    Some(false) => "False",
                    None => "<unset>",
                }
                .into(),
                o.pointer("/status/active")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
                    .into(),
                last.into(),
                age.into(),
            ];
            let job = "/spec/jobTemplate/spec";
            with_wide(
                cells,
                wide(&format!("{job}/template/spec"), &format!("{job}/selector")),
            )
        }
        ("networking.k8s.io", "Ingress") => ingress_cells(o, age),
        ("rbac.authorization.k8s.io", _) => {
            let subjects = o
                .get("subjects")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let of_kind = |kind: &str| {
                subjects
                    .iter()
                    .filter(|s| s["kind"] == kind)
                    .map(|s| match (kind, s["namespace"].as_str()) {
                        ("ServiceAccount", Some(ns)) => {
                            format!("{ns}/{}", s["name"].as_str().unwrap_or_default())
                        }
                        _ => s["name"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            vec![
                format!("{}/{}", text("/roleRef/kind"), text("/roleRef/name")).into(),
                age.into(),
                of_kind("User").into(),
                of_kind("Group").into(),
                of_kind("ServiceAccount").into(),
            ]
        }
        ("policy", "PodDisruptionBudget") => {
            let int_or_string = |path: &str| match o.pointer(path) {
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) => s.clone(),
                _ => "N/A".to_string(),
            };
            vec![
                int_or_string("/spec/minAvailable").into(),
                int_or_string("/spec/maxUnavailable").into(),
                int("/status/disruptionsAllowed").into(),
                age.into(),
            ]
        }
        ("", "PersistentVolumeClaim") => {
            let modes = o
                .pointer("/status/accessModes")
                .and_then(Value::as_array)
                .map(|modes| {
                    modes
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|m| match m {
                            "ReadWriteOnce" => "RWO",
                            "ReadOnlyMany" => "ROX",
                            "ReadWriteMany" => "RWX",
                            "ReadWriteOncePod" => "RWOP",
                            other => other,
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let class = o
                .pointer("/spec/storageClassName")
                .and_then(Value::as_str)
                .unwrap_or("<unset>");
            vec![
                text("/status/phase").into(),
                text("/spec/volumeName").into(),
                text("/status/capacity/storage").into(),
                modes.into(),
                class.into(),
                o.pointer("/spec/volumeAttributesClassName")
                    .and_then(Value::as_str)
                    .unwrap_or("<unset>")
                    .into(),
                age.into(),
                text("/spec/volumeMode").into(),
            ]
        }
        ("coordination.k8s.io", "Lease") => vec![
            or_none(text("/spec/holderIdentity").to_string()).into(),
            age.into(),
        ],
        ("autoscaling", "HorizontalPodAutoscaler") => vec![
            format!(
                "{}/{}",
                text("/spec/scaleTargetRef/kind"),
                text("/spec/scaleTargetRef/name")
            )
            .into(),
            hpa_targets(o).into(),
            o.pointer("/spec/minReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .into(),
            int("/spec/maxReplicas").into(),
            int("/status/currentReplicas").into(),
            age.into(),
        ],
        _ => vec![age.into()],
    }
}

/// `formatHPAMetrics`: each metric's current value (`<unknown>` until measured) over
/// its target, two at most.
pub(super) fn hpa_targets(o: &Value) -> String {
    let specs = array_at(o, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = array_at(o, "/status/currentMetrics");
    let quantity = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let kind = spec["type"].as_str().unwrap_or_default();
            // The spec's and the status's field for the metric's source.
            let key = match kind {
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                "Pods" => "pods",
                "Object" => "object",
                "External" => "external",
                _ => return "<unknown type>".to_string(),
            };
            let source = &spec[key];
            let target = &source["target"];
            let status = statuses.get(i).map(|s| s[key]["current"].clone());
            let current = |field: &str| {
                quantity(status.as_ref().and_then(|s| s.get(field)))
                    .unwrap_or_else(|| "<unknown>".into())
            };
            match kind {
                "Resource" | "ContainerResource" => {
                    let name = source["name"].as_str().unwrap_or_default();
                    match quantity(target.get("averageValue")) {
                        Some(average) => format!("{name}: {}/{average}", current("averageValue")),
                        None => {
                            let now = status
                                .as_ref()
                                .and_then(|s| s["averageUtilization"].as_i64())
                                .map(|u| format!("{u}%"))
                                .unwrap_or_else(|| "<unknown>".into());
                            let wanted = target["averageUtilization"]
                                .as_i64()
                                .map(|u| format!("{u}%"))
                                .unwrap_or_else(|| "<auto>".into());
                            format!("{name}: {now}/{wanted}")
                        }
                    }
                }
                "Pods" => format!(
                    "{}/{}",
                    current("averageValue"),
                    quantity(target.get("averageValue")).unwrap_or_default()
                ),
                _ => match quantity(target.get("value")) {
                    Some(value) => format!("{}/{value}", current("value")),
                    None => format!(
                        "{}/{} (avg)",
                        current("averageValue"),
                        quantity(target.get("averageValue")).unwrap_or_default()
                    ),
                },
            }
        })
        .collect();
    const SHOWN: usize = 2;
    if list.len() > SHOWN {
        format!(
            "{} + {} more...",
            list[..SHOWN].join(", "),
            list.len() - SHOWN
        )
    } else {
        list.join(", ")
    }
}

/// `printEvent`: when it was last seen, its type and reason, `kind/name` of its object,
/// the message; in wide output also where from, when first seen and how often.
pub(super) fn event_cells(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let text = |path: &str| o.pointer(path).and_then(Value::as_str).unwrap_or_default();
    let first_time = o
        .pointer("/firstTimestamp")
        .and_then(Value::as_str)
        .or_else(|| o.pointer("/eventTime").and_then(Value::as_str));
    let last_time = o
        .pointer("/lastTimestamp")
        .and_then(Value::as_str)
        .or(first_time);
    let first = age_since(first_time, now);
    let count = o
        .get("count")
        .and_then(Value::as_i64)
        .filter(|c| *c > 0)
        .unwrap_or(1);
    let last = age_since(last_time, now);
    let mut source = text("/source/component").to_string();
    if source.is_empty() {
        source = text("/reportingComponent").to_string();
    }
    let host = text("/source/host");
    if !host.is_empty() {
        source = format!("{source}, {host}");
    }
    vec![
        last.into(),
        text("/type").into(),
        text("/reason").into(),
        format!(
            "{}/{}",
            text("/involvedObject/kind").to_lowercase(),
            text("/involvedObject/name")
        )
        .into(),
        text("/involvedObject/fieldPath").into(),
        source.into(),
        text("/message").trim().into(),
        first.into(),
        count.into(),
    ]
}

/// `printJob`: its state from the conditions, succeeded of completions, how long it
/// ran.
fn job_cells(o: &Value, now: DateTime<Utc>, age: String) -> Vec<Value> {
    let condition = |kind: &str| {
        o.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
    };
    let status = if condition("Complete") {
        "Complete"
    } else if condition("Failed") {
        "Failed"
    } else if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if condition("FailureTarget") {
        "FailureTarget"
    } else if condition("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if condition("Suspended") {
        "Suspended"
    } else {
        "Running"
    };
    let succeeded = o
        .pointer("/status/succeeded")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let completions = match o.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => {
            let parallelism = o
                .pointer("/spec/parallelism")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let time = |path: &str| {
        o.pointer(path)
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let duration = match (time("/status/startTime"), time("/status/completionTime")) {
        (Some(start), Some(end)) => human_duration(end - start),
        (Some(start), None) => human_duration(now - start),
        _ => String::new(),
    };
    let (containers, images) = containers_and_images(o, POD_TEMPLATE);
    vec![
        status.into(),
        completions.into(),
        duration.into(),
        age.into(),
        containers.into(),
        images.into(),
        selector_text(o.pointer("/spec/selector")).into(),
    ]
}

fn ingress_cells(o: &Value, age: String) -> Vec<Value> {
    let class = o
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let hosts: Vec<&str> = o
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().filter_map(|r| r["host"].as_str()).collect())
        .unwrap_or_default();
    let hosts = match hosts.len() {
        0 => "*".to_string(),
        1..=3 => hosts.join(","),
        n => format!("{} + {} more...", hosts[..3].join(","), n - 3),
    };
    let address = load_balancer_addresses(o.pointer("/status/loadBalancer/ingress"));
    let tls = o
        .pointer("/spec/tls")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    vec![
        class.into(),
        hosts.into(),
        address.into(),
        (if tls { "80, 443" } else { "80" }).into(),
        age.into(),
    ]
}

fn load_balancer_addresses(ingress: Option<&Value>) -> String {
    ingress
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| e["ip"].as_str().or_else(|| e["hostname"].as_str()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// `getServiceExternalIP`.
pub(super) fn service_external_ip(o: &Value) -> String {
    let external: Vec<&str> = o
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .map(|ips| ips.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match o.pointer("/spec/type").and_then(Value::as_str) {
        Some("ExternalName") => o
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        Some("LoadBalancer") => {
            let mut addresses = load_balancer_addresses(o.pointer("/status/loadBalancer/ingress"));
            if !external.is_empty() {
                if !addresses.is_empty() {
                    addresses.push(',');
                }
                addresses.push_str(&external.join(","));
            }
            if addresses.is_empty() {
                "<pending>".into()
            } else {
                addresses
            }
        }
        _ if !external.is_empty() => external.join(","),
        _ => "<none>".into(),
    }
}

/// `makePortString`: `port[:nodePort]/protocol`, comma-separated.
pub(super) fn service_ports(o: &Value) -> String {
    let ports = array_at(o, "/spec/ports");
    if ports.is_empty() {
        return "<none>".into();
    }
    ports
        .iter()
        .map(|p| {
            let port = p["port"].as_i64().unwrap_or(0);
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64().filter(|n| *n > 0) {
                Some(node_port) => format!("{port}:{node_port}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `labels.FormatLabels` of a map: `k=v` sorted by key.
fn labels_text(labels: &Map<String, Value>) -> String {
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// `metav1.FormatLabelSelector`.
pub(super) fn selector_text(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return "<none>".into();
    };
    let mut terms: Vec<String> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        let text = labels_text(labels);
        if !text.is_empty() {
            terms.push(text);
        }
    }
    for expression in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = expression["values"]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        terms.push(match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    if terms.is_empty() {
        "<none>".into()
    } else {
        terms.join(",")
    }
}
