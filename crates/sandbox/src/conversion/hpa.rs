//! HorizontalPodAutoscaler: autoscaling/v1 served from autoscaling/v2 storage, with what
//! v1 cannot say carried in annotations (`pkg/apis/autoscaling/v1/conversion.go`).

use serde_json::{Map, Value, json};

/// v2 metrics v1 has no field for, in autoscaling/v1's `MetricSpec` shape.
pub(crate) const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// Every current metric, in autoscaling/v1's `MetricStatus` shape.
pub(crate) const CURRENT_METRICS_ANNOTATION: &str =
    "autoscaling.alpha.kubernetes.io/current-metrics";
/// `status.conditions`.
pub(crate) const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// `spec.behavior`, written as the internal Go type (field names capitalised).
pub(crate) const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";

const ROUND_TRIP_ANNOTATIONS: [&str; 4] = [
    METRICS_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    CONDITIONS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
];

/// autoscaling/v1's implicit target when a v1 HPA names none (`DefaultCPUUtilization`).
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// autoscaling/v2 → autoscaling/v1.
pub(crate) fn hpa_v2_to_v1(object: Value) -> Value {
    let spec = &object["spec"];
    let status = &object["status"];
    let metrics = spec["metrics"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let current = status["currentMetrics"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let conditions = status["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();

    let mut out_spec = Map::new();
    out_spec.insert(
        "scaleTargetRef".into(),
        spec.get("scaleTargetRef")
            .cloned()
            .unwrap_or_else(|| json!({"kind": "", "name": ""})),
    );
    copy(spec, &mut out_spec, "minReplicas");
    out_spec.insert(
        "maxReplicas".into(),
        spec.get("maxReplicas").cloned().unwrap_or(json!(0)),
    );
    // The first CPU metric answers for v1, if it targets a utilization.
    if let Some(cpu) = metrics.iter().find(|m| is_cpu(m, "resource")) {
        if let Some(target) = cpu.pointer("/resource/target/averageUtilization") {
            out_spec.insert("targetCPUUtilizationPercentage".into(), target.clone());
        }
    }
    let other: Vec<Value> = metrics
        .iter()
        .filter(|m| {
            !(is_cpu(m, "resource") && m.pointer("/resource/target/averageUtilization").is_some())
        })
        .map(metric_spec_to_v1)
        .collect();

    let mut out_status = Map::new();
    copy(status, &mut out_status, "observedGeneration");
    copy(status, &mut out_status, "lastScaleTime");
    out_status.insert(
        "currentReplicas".into(),
        status.get("currentReplicas").cloned().unwrap_or(json!(0)),
    );
    out_status.insert(
        "desiredReplicas".into(),
        status.get("desiredReplicas").cloned().unwrap_or(json!(0)),
    );
    if let Some(utilization) = current
        .iter()
        .filter(|m| is_cpu(m, "resource"))
        .filter_map(|m| m.pointer("/resource/current/averageUtilization"))
        .next_back()
    {
        out_status.insert(
            "currentCPUUtilizationPercentage".into(),
            utilization.clone(),
        );
    }

    let mut metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut carried = Vec::new();
    if !other.is_empty() {
        carried.push((METRICS_ANNOTATION, Value::Array(other)));
    }
    if !current.is_empty() {
        carried.push((
            CURRENT_METRICS_ANNOTATION,
            Value::Array(current.iter().map(metric_status_to_v1).collect()),
        ));
    }
    if let Some(behavior) = spec.get("behavior").filter(|b| b.is_object()) {
        carried.push((BEHAVIOR_ANNOTATION, behavior_to_internal(behavior)));
    }
    if !conditions.is_empty() {
        carried.push((CONDITIONS_ANNOTATION, Value::Array(conditions.to_vec())));
    }
    set_annotations(&mut metadata, carried);

    json!({
        "kind": "HorizontalPodAutoscaler",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": out_spec,
        "status": out_status,
    })
}

/// autoscaling/v1 → autoscaling/v2. Annotations that do not parse are ignored, as
/// upstream ignores them.
pub(crate) fn hpa_v1_to_v2(object: Value) -> Value {
    let spec = &object["spec"];
    let status = &object["status"];
    let annotation = |key: &str| -> Option<Value> {
        object
            .pointer("/metadata/annotations")?
            .get(key)?
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
    };

    let cpu_target = spec
        .get("targetCPUUtilizationPercentage")
        .filter(|v| !v.is_null());
    let cpu = |utilization: Value| json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}});
    let mut metrics: Vec<Value> = match annotation(METRICS_ANNOTATION) {
        Some(Value::Array(other)) => other.iter().map(metric_spec_to_v2).collect(),
        _ => Vec::new(),
    };
    // The CPU target follows the carried metrics (upstream appends it).
    if let Some(target) = cpu_target {
        metrics.push(cpu(target.clone()));
    }
    if metrics.is_empty() {
        metrics.push(cpu(json!(DEFAULT_CPU_UTILIZATION)));
    }

    let mut out_spec = Map::new();
    out_spec.insert(
        "scaleTargetRef".into(),
        spec.get("scaleTargetRef")
            .cloned()
            .unwrap_or_else(|| json!({"kind": "", "name": ""})),
    );
    copy(spec, &mut out_spec, "minReplicas");
    out_spec.insert(
        "maxReplicas".into(),
        spec.get("maxReplicas").cloned().unwrap_or(json!(0)),
    );
    out_spec.insert("metrics".into(), Value::Array(metrics));
    if let Some(behavior) = annotation(BEHAVIOR_ANNOTATION).and_then(|b| behavior_from_internal(&b))
    {
        out_spec.insert("behavior".into(), behavior);
    }

    let mut out_status = Map::new();
    copy(status, &mut out_status, "observedGeneration");
    copy(status, &mut out_status, "lastScaleTime");
    if status["currentReplicas"].as_i64().is_some_and(|r| r != 0) {
        copy(status, &mut out_status, "currentReplicas");
    }
    out_status.insert(
        "desiredReplicas".into(),
        status.get("desiredReplicas").cloned().unwrap_or(json!(0)),
    );
    let current = match annotation(CURRENT_METRICS_ANNOTATION) {
        // The carried ones say more than the CPU figure: they win.
        Some(Value::Array(carried)) => {
            Value::Array(carried.iter().map(metric_status_to_v2).collect())
        }
        _ => match status
            .get("currentCPUUtilizationPercentage")
            .filter(|v| !v.is_null())
        {
            Some(utilization) => {
                json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": utilization}}}])
            }
            None => Value::Null,
        },
    };
    out_status.insert("currentMetrics".into(), current);
    if let Some(Value::Array(conditions)) = annotation(CONDITIONS_ANNOTATION) {
        if !conditions.is_empty() {
            out_status.insert("conditions".into(), Value::Array(conditions));
        }
    }

    let mut out = json!({
        "kind": "HorizontalPodAutoscaler",
        "apiVersion": "autoscaling/v2",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
        "spec": out_spec,
        "status": out_status,
    });
    drop_round_trip_annotations(&mut out);
    out
}

fn is_cpu(metric: &Value, source: &str) -> bool {
    metric["type"] == "Resource" && metric[source]["name"] == "cpu"
}

fn copy(from: &Value, to: &mut Map<String, Value>, key: &str) {
    if let Some(value) = from.get(key).filter(|v| !v.is_null()) {
        to.insert(key.into(), value.clone());
    }
}

/// Sets the carried annotations (as compact JSON strings), replacing earlier ones, keys
/// in Go's map order.
fn set_annotations(metadata: &mut Value, carried: Vec<(&str, Value)>) {
    let mut annotations: Vec<(String, Value)> = metadata["annotations"]
        .as_object()
        .map(|a| {
            a.iter()
                .filter(|(k, _)| !ROUND_TRIP_ANNOTATIONS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    for (key, value) in carried {
        annotations.push((key.to_string(), Value::String(value.to_string())));
    }
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if annotations.is_empty() {
        metadata.remove("annotations");
        return;
    }
    annotations.sort_by(|a, b| a.0.cmp(&b.0));
    metadata.insert(
        "annotations".into(),
        Value::Object(annotations.into_iter().collect()),
    );
}

pub(super) fn drop_round_trip_annotations(object: &mut Value) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if !ROUND_TRIP_ANNOTATIONS
        .iter()
        .any(|k| annotations.contains_key(*k))
    {
        return;
    }
    for key in ROUND_TRIP_ANNOTATIONS {
        annotations.remove(key);
    }
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
}

/// Builds an object of the present fields, in the given order.
fn fields(pairs: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .filter_map(|(k, v)| v.filter(|v| !v.is_null()).map(|v| (k.to_string(), v)))
            .collect(),
    )
}

fn at(value: &Value, pointer: &str) -> Option<Value> {
    value.pointer(pointer).filter(|v| !v.is_null()).cloned()
}

/// A resource.Quantity that Go writes even when zero.
fn quantity(value: &Value, pointer: &str) -> Option<Value> {
    Some(at(value, pointer).unwrap_or_else(|| json!("0")))
}

/// An autoscaling/v2 `MetricSpec` in autoscaling/v1's (v2beta1-shaped) `MetricSpec`.
pub(super) fn metric_spec_to_v1(metric: &Value) -> Value {
    let kind = metric["type"].as_str().unwrap_or_default();
    let source = match kind {
        "Object" => metric.get("object").map(|o| {
            (
                "object",
                fields(vec![
                    (
                        "target",
                        Some(
                            at(o, "/describedObject")
                                .unwrap_or_else(|| json!({"kind": "", "name": ""})),
                        ),
                    ),
                    (
                        "metricName",
                        Some(at(o, "/metric/name").unwrap_or_else(|| json!(""))),
                    ),
                    ("targetValue", quantity(o, "/target/value")),
                    ("selector", at(o, "/metric/selector")),
                    ("averageValue", at(o, "/target/averageValue")),
                ]),
            )
        }),
        "Pods" => metric.get("pods").map(|p| {
            (
                "pods",
                fields(vec![
                    (
                        "metricName",
                        Some(at(p, "/metric/name").unwrap_or_else(|| json!(""))),
                    ),
                    ("targetAverageValue", quantity(p, "/target/averageValue")),
                    ("selector", at(p, "/metric/selector")),
                ]),
            )
        }),
        "Resource" => metric.get("resource").map(|r| {
            (
                "resource",
                fields(vec![
                    ("name", Some(at(r, "/name").unwrap_or_else(|| json!("")))),
                    (
                        "targetAverageUtilization",
                        at(r, "/target/averageUtilization"),
                    ),
                    ("targetAverageValue", at(r, "/target/averageValue")),
                ]),
            )
        }),
        "ContainerResource" => metric.get("containerResource").map(|r| {
            (
                "containerResource",
                fields(vec![
                    ("name", Some(at(r, "/name").unwrap_or_else(|| json!("")))),
                    (
                        "targetAverageUtilization",
                        at(r, "/target/averageUtilization"),
                    ),
                    ("targetAverageValue", at(r, "/target/averageValue")),
                    (
                        "container",
                        Some(at(r, "/container").unwrap_or_else(|| json!(""))),
                    ),
                ]),
            )
        }),
        "External" => metric.get("external").map(|e| {
            (
                "external",
                fields(vec![
                    (
                        "metricName",
                        Some(at(e, "/metric/name").unwrap_or_else(|| json!(""))),
                    ),
                    ("metricSelector", at(e, "/metric/selector")),
                    ("targetValue", at(e, "/target/value")),
                    ("targetAverageValue", at(e, "/target/averageValue")),
                ]),
            )
        }),
        _ => None,
    };
    let mut out = json!({"type": kind});
    if let Some((name, source)) = source {
        out[name] = source;
    }
    out
}

/// autoscaling/v1's `MetricSpec` back in autoscaling/v2, the target's type chosen as
/// upstream chooses it.
pub(super) fn metric_spec_to_v2(metric: &Value) -> Value {
    let kind = metric["type"].as_str().unwrap_or_default();
    let identifier = |m: &Value, name: &str, selector: &str| {
        fields(vec![
            ("name", Some(at(m, name).unwrap_or_else(|| json!("")))),
            ("selector", at(m, selector)),
        ])
    };
    let target =
        |kind: &str, value: Option<Value>, average: Option<Value>, utilization: Option<Value>| {
            fields(vec![
                ("type", Some(json!(kind))),
                ("value", value),
                ("averageValue", average),
                ("averageUtilization", utilization),
            ])
        };
    let source = match kind {
        "Object" => metric.get("object").map(|o| {
            let average = at(o, "/averageValue");
            let kind = if average.is_some() { "AverageValue" } else { "Value" };
            ("object", json!({
                "describedObject": at(o, "/target").unwrap_or_else(|| json!({"kind": "", "name": ""})),
                "target": target(kind, quantity(o, "/targetValue"), average, None),
                "metric": identifier(o, "/metricName", "/selector"),
            }))
        }),
        "Pods" => metric.get("pods").map(|p| {
            ("pods", json!({
                "metric": identifier(p, "/metricName", "/selector"),
                "target": target("AverageValue", None, quantity(p, "/targetAverageValue"), None),
            }))
        }),
        "Resource" | "ContainerResource" => {
            let name = if kind == "Resource" { "resource" } else { "containerResource" };
            metric.get(name).map(|r| {
                let utilization = at(r, "/targetAverageUtilization");
                let kind = if utilization.is_some() { "Utilization" } else { "AverageValue" };
                let mut source = json!({
                    "name": at(r, "/name").unwrap_or_else(|| json!("")),
                    "target": target(kind, None, at(r, "/targetAverageValue"), utilization),
                });
                if name == "containerResource" {
                    source["container"] = at(r, "/container").unwrap_or_else(|| json!(""));
                }
                (name, source)
            })
        }
        "External" => metric.get("external").map(|e| {
            let value = at(e, "/targetValue");
            let kind = if value.is_some() { "Value" } else { "AverageValue" };
            ("external", json!({
                "metric": identifier(e, "/metricName", "/metricSelector"),
                "target": target(kind, value, at(e, "/targetAverageValue"), None),
            }))
        }),
        _ => None,
    };
    let mut out = json!({"type": kind});
    if let Some((name, source)) = source {
        out[name] = source;
    }
    out
}

/// An autoscaling/v2 `MetricStatus` in autoscaling/v1's `MetricStatus`.
pub(super) fn metric_status_to_v1(metric: &Value) -> Value {
    let kind = metric["type"].as_str().unwrap_or_default();
    let source = match kind {
        "Object" => metric.get("object").map(|o| {
            (
                "object",
                fields(vec![
                    (
                        "target",
                        Some(
                            at(o, "/describedObject")
                                .unwrap_or_else(|| json!({"kind": "", "name": ""})),
                        ),
                    ),
                    (
                        "metricName",
                        Some(at(o, "/metric/name").unwrap_or_else(|| json!(""))),
                    ),
                    ("currentValue", quantity(o, "/current/value")),
                    ("selector", at(o, "/metric/selector")),
                    ("averageValue", at(o, "/current/averageValue")),
                ]),
            )
        }),
        "Pods" => metric.get("pods").map(|p| {
            (
                "pods",
                fields(vec![
                    (
                        "metricName",
                        Some(at(p, "/metric/name").unwrap_or_else(|| json!(""))),
                    ),
                    ("currentAverageValue", quantity(p, "/current/averageValue")),
                    ("selector", at(p, "/metric/selector")),
                ]),
            )
        }),
        "Resource" => metric.get("resource").map(|r| {
            (
                "resource",
                fields(vec![
                    ("name", Some(at(r, "/name").unwrap_or_else(|| json!("")))),
                    (
                        "currentAverageUtilization",
                        at(r, "/current/averageUtilization"),
                    ),
                    ("currentAverageValue", quantity(r, "/current/averageValue")),
                ]),
            )
        }),
        "ContainerResource" => metric.get("containerResource").map(|r| {
            (
                "containerResource",
                fields(vec![
                    ("name", Some(at(r, "/name").unwrap_or_else(|| json!("")))),
                    (
                        "currentAverageUtilization",
                        at(r, "/current/averageUtilization"),
                    ),
                    ("currentAverageValue", quantity(r, "/current/averageValue")),
                    (
                        "container",
                        Some(at(r, "/container").unwrap_or_else(|| json!(""))),
                    ),
                ]),
            )
        }),
        "External" => metric.get("external").map(|e| {
            (
                "external",
                fields(vec![
                    (
                        "metricName",
                        Some(at(e, "/metric/name").unwrap_or_else(|| json!(""))),
                    ),
                    ("metricSelector", at(e, "/metric/selector")),
                    ("currentValue", quantity(e, "/current/value")),
                    ("currentAverageValue", at(e, "/current/averageValue")),
                ]),
            )
        }),
        _ => None,
    };
    let mut out = json!({"type": kind});
    if let Some((name, source)) = source {
        out[name] = source;
    }
    out
}

/// autoscaling/v1's `MetricStatus` back in autoscaling/v2.
pub(super) fn metric_status_to_v2(metric: &Value) -> Value {
    let kind = metric["type"].as_str().unwrap_or_default();
    let identifier = |m: &Value, name: &str, selector: &str| {
        fields(vec![
            ("name", Some(at(m, name).unwrap_or_else(|| json!("")))),
            ("selector", at(m, selector)),
        ])
    };
    let current = |value: Option<Value>, average: Option<Value>, utilization: Option<Value>| {
        fields(vec![
            ("value", value),
            ("averageValue", average),
            ("averageUtilization", utilization),
        ])
    };
    let source = match kind {
        "Object" => metric.get("object").map(|o| {
            ("object", json!({
                "metric": identifier(o, "/metricName", "/selector"),
                "current": current(quantity(o, "/currentValue"), at(o, "/averageValue"), None),
                "describedObject": at(o, "/target").unwrap_or_else(|| json!({"kind": "", "name": ""})),
            }))
        }),
        "Pods" => metric.get("pods").map(|p| {
            ("pods", json!({
                "metric": identifier(p, "/metricName", "/selector"),
                "current": current(None, quantity(p, "/currentAverageValue"), None),
            }))
        }),
        "Resource" | "ContainerResource" => {
            let name = if kind == "Resource" { "resource" } else { "containerResource" };
            metric.get(name).map(|r| {
                let mut source = json!({
                    "name": at(r, "/name").unwrap_or_else(|| json!("")),
                    "current": current(None, quantity(r, "/currentAverageValue"), at(r, "/currentAverageUtilization")),
                });
                if name == "containerResource" {
                    source["container"] = at(r, "/container").unwrap_or_else(|| json!(""));
                }
                (name, source)
            })
        }
        "External" => metric.get("external").map(|e| {
            ("external", json!({
                "metric": identifier(e, "/metricName", "/metricSelector"),
                "current": current(quantity(e, "/currentValue"), at(e, "/currentAverageValue"), None),
            }))
        }),
        _ => None,
    };
    let mut out = json!({"type": kind});
    if let Some((name, source)) = source {
        out[name] = source;
    }
    out
}

/// `spec.behavior` as kube-apiserver writes it into the annotation: the internal Go
/// type, which has no JSON tags, so its field names are capitalised and nil pointers
/// are `null`.
fn behavior_to_internal(behavior: &Value) -> Value {
    let rules = |rules: &Value| -> Value {
        if !rules.is_object() {
            return Value::Null;
        }
        let policies = rules["policies"].as_array().map(|policies| {
            policies
                .iter()
                .map(|p| json!({"Type": p["type"], "Value": p["value"], "PeriodSeconds": p["periodSeconds"]}))
                .collect::<Vec<_>>()
        });
        json!({
            "StabilizationWindowSeconds": rules["stabilizationWindowSeconds"],
            "SelectPolicy": rules["selectPolicy"],
            "Policies": policies,
            "Tolerance": rules["tolerance"],
        })
    };
    json!({"ScaleUp": rules(&behavior["scaleUp"]), "ScaleDown": rules(&behavior["scaleDown"])})
}

/// The annotation's behavior back in autoscaling/v2; Go's decoder matches field names
/// without regard to case. An empty behavior is no behavior.
fn behavior_from_internal(internal: &Value) -> Option<Value> {
    fn field<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
        object
            .as_object()?
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
            .filter(|v| !v.is_null())
    }
    let rules = |rules: &Value| -> Value {
        let policies = field(rules, "Policies")
            .and_then(Value::as_array)
            .map(|policies| {
                policies
                    .iter()
                    .map(|p| {
                        fields(vec![
                            ("type", field(p, "Type").cloned()),
                            ("value", field(p, "Value").cloned()),
                            ("periodSeconds", field(p, "PeriodSeconds").cloned()),
                        ])
                    })
                    .collect::<Vec<_>>()
            });
        fields(vec![
            (
                "stabilizationWindowSeconds",
                field(rules, "StabilizationWindowSeconds").cloned(),
            ),
            ("selectPolicy", field(rules, "SelectPolicy").cloned()),
            ("policies", policies.map(Value::Array)),
            ("tolerance", field(rules, "Tolerance").cloned()),
        ])
    };
    let behavior = fields(vec![
        ("scaleUp", field(internal, "ScaleUp").map(rules)),
        ("scaleDown", field(internal, "ScaleDown").map(rules)),
    ]);
    behavior
        .as_object()
        .is_some_and(|b| !b.is_empty())
        .then_some(behavior)
}
