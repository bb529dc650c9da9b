//! Unit tests of version conversion: both directions of each kind, round trips, and
//! the annotations that carry what autoscaling/v1 cannot say.

use serde_json::{Value, json};

use super::hpa::{
    BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION, CURRENT_METRICS_ANNOTATION, METRICS_ANNOTATION,
};
use super::hpa::{Half, metric_to_v1, metric_to_v2};
use super::*;

fn annotation(object: &Value, key: &str) -> Value {
    let text = object["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no annotation {key} in {object}"));
    serde_json::from_str(text).expect("the annotation is JSON")
}

/// A v2 HPA with a CPU utilisation target and a target v1 cannot say.
fn full_v2() -> Value {
    json!({
        "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
        "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
            "minReplicas": 2, "maxReplicas": 10,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "100"}}},
                {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "jobs"}}}, "target": {"type": "Value", "value": "30"}}}
            ],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]},
                "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
            }
        },
        "status": {
            "observedGeneration": 3, "currentReplicas": 3, "desiredReplicas": 4,
            "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "120m", "averageUtilization": 72}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "90"}}}
            ],
            "conditions": [{"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-11-24T09:00:00Z", "reason": "SucceededRescale", "message": "ok"}]
        }
    })
}

#[test]
fn a_v2_hpa_reads_at_v1_with_its_cpu_target_and_the_rest_in_annotations() {
    let v1 = hpa_v2_to_v1(full_v2());
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(
        v1["spec"],
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
               "minReplicas": 2, "maxReplicas": 10, "targetCPUUtilizationPercentage": 60})
    );
    assert_eq!(
        v1["status"],
        json!({"observedGeneration": 3, "currentReplicas": 3, "desiredReplicas": 4, "currentCPUUtilizationPercentage": 72})
    );
    // The CPU target is v1's own field; the other metrics travel in v1's MetricSpec shape.
    assert_eq!(
        annotation(&v1, METRICS_ANNOTATION),
        json!([
            {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "100"}},
            {"type": "External", "external": {"metricName": "queue", "metricSelector": {"matchLabels": {"q": "jobs"}}, "targetValue": "30"}}
        ])
    );
    // Every current metric travels, the CPU one too (its raw value is more than v1 says).
    assert_eq!(
        annotation(&v1, CURRENT_METRICS_ANNOTATION),
        json!([
            {"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 72, "currentAverageValue": "120m"}},
            {"type": "Pods", "pods": {"metricName": "qps", "currentAverageValue": "90"}}
        ])
    );
    assert_eq!(
        annotation(&v1, BEHAVIOR_ANNOTATION)["ScaleUp"],
        json!({"StabilizationWindowSeconds": 0, "SelectPolicy": "Max", "Policies": [{"Type": "Pods", "Value": 4, "PeriodSeconds": 15}], "Tolerance": null})
    );
    assert_eq!(
        annotation(&v1, CONDITIONS_ANNOTATION)[0]["reason"],
        "SucceededRescale"
    );
    // The user's annotation stays, and the keys are in Go's map order.
    let keys: Vec<&String> = v1["metadata"]["annotations"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        keys,
        [
            BEHAVIOR_ANNOTATION,
            CONDITIONS_ANNOTATION,
            CURRENT_METRICS_ANNOTATION,
            METRICS_ANNOTATION,
            "team"
        ]
    );
}

#[test]
fn a_v2_hpa_round_trips_through_v1_unchanged() {
    let v2 = full_v2();
    let back = hpa_v1_to_v2(hpa_v2_to_v1(v2.clone()));
    // The CPU target follows the carried metrics, as upstream appends it.
    let mut expected = v2.clone();
    let metrics = expected["spec"]["metrics"].as_array_mut().unwrap();
    let cpu = metrics.remove(0);
    metrics.push(cpu);
    assert_eq!(back["spec"], expected["spec"]);
    assert_eq!(back["status"], expected["status"]);
    assert_eq!(
        back["metadata"],
        json!({"name": "web", "namespace": "default", "annotations": {"team": "a"}})
    );
}

#[test]
fn a_v1_hpa_stores_its_cpu_target_as_a_v2_metric() {
    let v1 = json!({
        "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"}, "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50},
        "status": {"currentReplicas": 0, "desiredReplicas": 0, "currentCPUUtilizationPercentage": 40}
    });
    let v2 = hpa_v1_to_v2(v1.clone());
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert!(v2["spec"].get("behavior").is_none());
    assert_eq!(
        v2["status"],
        json!({"desiredReplicas": 0, "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}]})
    );
    assert!(v2["metadata"].get("annotations").is_none());
    // And back: the same v1 object, nothing carried.
    let again = hpa_v2_to_v1(v2);
    assert_eq!(again["spec"], v1["spec"]);
    assert_eq!(again["status"]["currentCPUUtilizationPercentage"], 40);
    assert_eq!(
        annotation(&again, CURRENT_METRICS_ANNOTATION),
        json!([{"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 40, "currentAverageValue": "0"}}])
    );
}

#[test]
fn a_v1_hpa_without_a_target_gets_v1s_implicit_80_percent() {
    let v2 = hpa_v1_to_v2(
        json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 2}}),
    );
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    assert_eq!(v2["status"]["currentMetrics"], Value::Null);
}

#[test]
fn annotations_that_do_not_parse_are_ignored_and_dropped() {
    let v1 = json!({
        "metadata": {"name": "h", "annotations": {METRICS_ANNOTATION: "not json", BEHAVIOR_ANNOTATION: "{}", "keep": "me"}},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 2, "targetCPUUtilizationPercentage": 70}
    });
    let v2 = hpa_v1_to_v2(v1);
    assert_eq!(v2["spec"]["metrics"].as_array().unwrap().len(), 1);
    assert!(
        v2["spec"].get("behavior").is_none(),
        "an empty behavior is none"
    );
    assert_eq!(v2["metadata"]["annotations"], json!({"keep": "me"}));
}

#[test]
fn the_behavior_annotation_is_read_without_regard_to_case() {
    let v1 = json!({
        "metadata": {"name": "h", "annotations": {BEHAVIOR_ANNOTATION: "{\"scaleDown\":{\"stabilizationWindowSeconds\":60}}"}},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 2}
    });
    assert_eq!(
        hpa_v1_to_v2(v1)["spec"]["behavior"],
        json!({"scaleDown": {"stabilizationWindowSeconds": 60}})
    );
}

#[test]
fn every_metric_type_round_trips_through_v1s_shape() {
    // Compared as text: the fields come back in Go's order, which clients show.
    let round_trips = |list: &Value, half: Half| {
        for metric in list.as_array().unwrap() {
            let back = metric_to_v2(&metric_to_v1(metric, half), half);
            assert_eq!(back.to_string(), metric.to_string());
        }
    };
    let metrics = json!([
        {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s", "apiVersion": "v1"}, "target": {"type": "Value", "value": "10"}, "metric": {"name": "rps", "selector": {"matchLabels": {"a": "b"}}}}},
        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
        {"type": "ContainerResource", "containerResource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}, "container": "app"}},
        {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "30"}}}
    ]);
    round_trips(&metrics, Half::Spec);
    let statuses = json!([
        {"type": "Object", "object": {"metric": {"name": "rps"}, "current": {"value": "10"}, "describedObject": {"kind": "Service", "name": "s"}}},
        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "900"}}},
        {"type": "ContainerResource", "containerResource": {"name": "cpu", "current": {"averageValue": "200m", "averageUtilization": 40}, "container": "app"}},
        {"type": "External", "external": {"metric": {"name": "queue"}, "current": {"value": "3", "averageValue": "1"}}}
    ]);
    round_trips(&statuses, Half::Status);
}

#[test]
fn a_v2_write_drops_the_carried_annotations() {
    let resource = ResourceType {
        group: "autoscaling".into(),
        version: "v2".into(),
        kind: "HorizontalPodAutoscaler".into(),
        plural: "horizontalpodautoscalers".into(),
        singular: "horizontalpodautoscaler".into(),
        namespaced: true,
        verbs: Vec::new(),
        short_names: Vec::new(),
        categories: Vec::new(),
        has_status: true,
        has_scale: false,
        custom: false,
    };
    let mut v2 = full_v2();
    v2["metadata"]["annotations"][CONDITIONS_ANNOTATION] = json!("[]");
    let stored = to_storage(&resource, v2);
    assert_eq!(stored["metadata"]["annotations"], json!({"team": "a"}));
    assert!(served_as_stored(&resource));
}

fn core_event() -> Value {
    json!({
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Deployment", "namespace": "default", "name": "web", "uid": "u1", "apiVersion": "apps/v1"},
        "reason": "ScalingReplicaSet",
        "message": "Scaled up replica set web-1 to 1",
        "source": {"component": "deployment-controller"},
        "firstTimestamp": "2026-11-24T09:00:00Z",
        "lastTimestamp": "2026-11-24T09:01:00Z",
        "count": 2,
        "type": "Normal",
        "eventTime": null,
        "reportingComponent": "deployment-controller",
        "reportingInstance": ""
    })
}

#[test]
fn a_core_event_reads_at_events_k8s_io_with_renamed_fields() {
    let event = event_to_events(core_event());
    assert_eq!(
        event,
        json!({
            "kind": "Event", "apiVersion": "events.k8s.io/v1",
            "metadata": {"name": "web.1", "namespace": "default"},
            "eventTime": null,
            "reportingController": "deployment-controller",
            "reason": "ScalingReplicaSet",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web", "uid": "u1", "apiVersion": "apps/v1"},
            "note": "Scaled up replica set web-1 to 1",
            "type": "Normal",
            "deprecatedSource": {"component": "deployment-controller"},
            "deprecatedFirstTimestamp": "2026-11-24T09:00:00Z",
            "deprecatedLastTimestamp": "2026-11-24T09:01:00Z",
            "deprecatedCount": 2
        })
    );
    // Field order is the Go struct's: the JSON text shows it.
    let text = serde_json::to_string(&event).unwrap();
    assert!(text.find("\"eventTime\"") < text.find("\"regarding\""));
    assert!(text.find("\"note\"") < text.find("\"deprecatedSource\""));
    assert_eq!(event_to_core(event), core_event(), "and back, unchanged");
}

#[test]
fn an_events_k8s_io_event_is_stored_as_a_core_event() {
    let event = json!({
        "kind": "Event", "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "e1", "namespace": "default"},
        "eventTime": "2026-11-24T09:00:00.123456Z",
        "series": {"count": 3, "lastObservedTime": "2026-11-24T09:05:00.000000Z"},
        "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-0",
        "action": "Reconcile",
        "reason": "Synced",
        "regarding": {"kind": "ConfigMap", "name": "c", "namespace": "default"},
        "related": {"kind": "Secret", "name": "s", "namespace": "default"},
        "note": "synced c",
        "type": "Warning"
    });
    let core = event_to_core(event.clone());
    assert_eq!(
        core,
        json!({
            "kind": "Event", "apiVersion": "v1",
            "metadata": {"name": "e1", "namespace": "default"},
            "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"},
            "reason": "Synced",
            "message": "synced c",
            "source": {},
            "firstTimestamp": null,
            "lastTimestamp": null,
            "type": "Warning",
            "eventTime": "2026-11-24T09:00:00.123456Z",
            "series": {"count": 3, "lastObservedTime": "2026-11-24T09:05:00.000000Z"},
            "action": "Reconcile",
            "related": {"kind": "Secret", "name": "s", "namespace": "default"},
            "reportingComponent": "example.com/ctl",
            "reportingInstance": "ctl-0"
        })
    );
    let mut expected = event;
    expected["deprecatedSource"] = json!({});
    expected["deprecatedFirstTimestamp"] = Value::Null;
    expected["deprecatedLastTimestamp"] = Value::Null;
    let back = event_to_events(core);
    for (key, value) in expected.as_object().unwrap() {
        assert_eq!(&back[key], value, "{key} survives the round trip");
    }
}
