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

    let mut out_spec = scale_spec(spec);
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
        .map(|m| metric_to_v1(m, Half::Spec))
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
            Value::Array(
                current
                    .iter()
                    .map(|m| metric_to_v1(m, Half::Status))
                    .collect(),
            ),
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
        Some(Value::Array(other)) => other.iter().map(|m| metric_to_v2(m, Half::Spec)).collect(),
        _ => Vec::new(),
    };
    // The CPU target follows the carried metrics (upstream appends it).
    if let Some(target) = cpu_target {
        metrics.push(cpu(target.clone()));
    }
    if metrics.is_empty() {
        metrics.push(cpu(json!(DEFAULT_CPU_UTILIZATION)));
    }

    let mut out_spec = scale_spec(spec);
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
        Some(Value::Array(carried)) => Value::Array(
            carried
                .iter()
                .map(|m| metric_to_v2(m, Half::Status))
                .collect(),
        ),
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

/// The spec fields both versions share, as Go writes them.
fn scale_spec(spec: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "scaleTargetRef".into(),
        spec.get("scaleTargetRef")
            .cloned()
            .unwrap_or_else(|| json!({"kind": "", "name": ""})),
    );
    copy(spec, &mut out, "minReplicas");
    out.insert(
        "maxReplicas".into(),
        spec.get("maxReplicas").cloned().unwrap_or(json!(0)),
    );
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
fn fields<K: Into<String>>(pairs: Vec<(K, Option<Value>)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .filter_map(|(k, v)| v.filter(|v| !v.is_null()).map(|v| (k.into(), v)))
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

/// Which half of a metric a conversion carries: the spec's targets or the status's current
/// values. The two share one shape but for their word and for which quantities Go writes
/// even when zero.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Half {
    Spec,
    Status,
}

impl Half {
    /// v1's field prefix and v2's field: `target` or `current`.
    fn word(self) -> &'static str {
        match self {
            Half::Spec => "target",
            Half::Status => "current",
        }
    }

    /// A Resource metric's average and an External metric's value: pointers in the spec,
    /// `resource.Quantity` values (written even when zero) in the status.
    fn value_or_pointer(self, value: &Value, pointer: &str) -> Option<Value> {
        match self {
            Half::Spec => at(value, pointer),
            Half::Status => quantity(value, pointer),
        }
    }
}

/// An autoscaling/v2 `MetricSpec` or `MetricStatus` in autoscaling/v1's (v2beta1-shaped)
/// one.
pub(super) fn metric_to_v1(metric: &Value, half: Half) -> Value {
    let kind = metric["type"].as_str().unwrap_or_default();
    let word = half.word();
    let key = |name: &str| name.to_string();
    // `targetValue` from `/target/value`, `currentAverageValue` from `/current/averageValue`.
    let prefixed = |name: &str| format!("{word}{name}");
    let pointer = |name: &str| format!("/{word}/{name}");
    let source = match kind {
        "Object" => metric.get("object").map(|o| {
            let pairs = vec![
                (key("target"), Some(described_object(o, "/describedObject"))),
                (key("metricName"), Some(name(o, "/metric/name"))),
                (prefixed("Value"), quantity(o, &pointer("value"))),
                (key("selector"), at(o, "/metric/selector")),
                (key("averageValue"), at(o, &pointer("averageValue"))),
            ];
            ("object", fields(pairs))
        }),
        "Pods" => metric.get("pods").map(|p| {
            let pairs = vec![
                (key("metricName"), Some(name(p, "/metric/name"))),
                (
                    prefixed("AverageValue"),
                    quantity(p, &pointer("averageValue")),
                ),
                (key("selector"), at(p, "/metric/selector")),
            ];
            ("pods", fields(pairs))
        }),
        "Resource" | "ContainerResource" => {
            let source = resource_source(kind);
            metric.get(source).map(|r| {
                let mut pairs = vec![
                    (key("name"), Some(name(r, "/name"))),
                    (
                        prefixed("AverageUtilization"),
                        at(r, &pointer("averageUtilization")),
                    ),
                    (
                        prefixed("AverageValue"),
                        half.value_or_pointer(r, &pointer("averageValue")),
                    ),
                ];
                if source == "containerResource" {
                    pairs.push((key("container"), Some(name(r, "/container"))));
                }
                (source, fields(pairs))
            })
        }
        "External" => metric.get("external").map(|e| {
            let pairs = vec![
                (key("metricName"), Some(name(e, "/metric/name"))),
                (key("metricSelector"), at(e, "/metric/selector")),
                (
                    prefixed("Value"),
                    half.value_or_pointer(e, &pointer("value")),
                ),
                (prefixed("AverageValue"), at(e, &pointer("averageValue"))),
            ];
            ("external", fields(pairs))
        }),
        _ => None,
    };
    typed(kind, source)
}

/// autoscaling/v1's `MetricSpec` or `MetricStatus` back in autoscaling/v2; a spec's target
/// type is chosen as upstream chooses it.
pub(super) fn metric_to_v2(metric: &Value, half: Half) -> Value {
    let kind = metric["type"].as_str().unwrap_or_default();
    let word = half.word();
    // `/targetValue`, `/currentAverageValue`, ...
    let pointer = |name: &str| format!("/{word}{name}");
    let identifier = |m: &Value, name_at: &str, selector: &str| {
        fields(vec![
            ("name", Some(name(m, name_at))),
            ("selector", at(m, selector)),
        ])
    };
    // A `MetricTarget` names its type; a `MetricValueStatus` has none.
    let value =
        |kind: &str, value: Option<Value>, average: Option<Value>, utilization: Option<Value>| {
            let target_type = (half == Half::Spec).then(|| json!(kind));
            fields(vec![
                ("type", target_type),
                ("value", value),
                ("averageValue", average),
                ("averageUtilization", utilization),
            ])
        };
    let source = match kind {
        "Object" => metric.get("object").map(|o| {
            let average = at(o, "/averageValue");
            let kind = if average.is_some() {
                "AverageValue"
            } else {
                "Value"
            };
            let value = value(kind, quantity(o, &pointer("Value")), average, None);
            let metric = identifier(o, "/metricName", "/selector");
            let described = described_object(o, "/target");
            // Each in Go's field order.
            let source = match half {
                Half::Spec => {
                    json!({"describedObject": described, "target": value, "metric": metric})
                }
                Half::Status => {
                    json!({"metric": metric, "current": value, "describedObject": described})
                }
            };
            ("object", source)
        }),
        "Pods" => metric.get("pods").map(|p| {
            let mut source = json!({"metric": identifier(p, "/metricName", "/selector")});
            source[word] = value(
                "AverageValue",
                None,
                quantity(p, &pointer("AverageValue")),
                None,
            );
            ("pods", source)
        }),
        "Resource" | "ContainerResource" => {
            let name_of = resource_source(kind);
            metric.get(name_of).map(|r| {
                let utilization = at(r, &pointer("AverageUtilization"));
                let kind = if utilization.is_some() {
                    "Utilization"
                } else {
                    "AverageValue"
                };
                let average = half.value_or_pointer(r, &pointer("AverageValue"));
                let mut source = json!({"name": name(r, "/name")});
                source[word] = value(kind, None, average, utilization);
                if name_of == "containerResource" {
                    source["container"] = name(r, "/container");
                }
                (name_of, source)
            })
        }
        "External" => metric.get("external").map(|e| {
            let amount = half.value_or_pointer(e, &pointer("Value"));
            let kind = if amount.is_some() {
                "Value"
            } else {
                "AverageValue"
            };
            let mut source = json!({"metric": identifier(e, "/metricName", "/metricSelector")});
            source[word] = value(kind, amount, at(e, &pointer("AverageValue")), None);
            ("external", source)
        }),
        _ => None,
    };
    typed(kind, source)
}

/// The source field of a Resource or ContainerResource metric.
fn resource_source(kind: &str) -> &'static str {
    if kind == "Resource" {
        "resource"
    } else {
        "containerResource"
    }
}

/// A name Go writes even when empty.
fn name(value: &Value, pointer: &str) -> Value {
    at(value, pointer).unwrap_or_else(|| json!(""))
}

/// An object reference Go writes even when empty.
fn described_object(value: &Value, pointer: &str) -> Value {
    at(value, pointer).unwrap_or_else(|| json!({"kind": "", "name": ""}))
}

/// A metric of `kind` with its source, if it has one.
fn typed(kind: &str, source: Option<(&str, Value)>) -> Value {
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
