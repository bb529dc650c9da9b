use super::cells::{event_cells, hpa_targets, selector_text, service_external_ip, service_ports};
use super::*;

#[test]
fn ages_read_as_kubectl_prints_them() {
    let cases = [
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (47 * 3600, "47h"),
        (50 * 3600, "2d2h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
    ];
    for (seconds, text) in cases {
        assert_eq!(
            human_duration(chrono::TimeDelta::seconds(seconds)),
            text,
            "{seconds}s"
        );
    }
    assert_eq!(human_duration(chrono::TimeDelta::seconds(-5)), "<invalid>");
    assert_eq!(age_since(None, Utc::now()), "<unknown>");
}

#[test]
fn only_a_table_asked_for_first_is_a_table_request() {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            .parse()
            .unwrap(),
    );
    let query = HashMap::new();
    assert_eq!(
        requested(&headers, &query).unwrap().include,
        Include::Metadata
    );
    headers.insert(http::header::ACCEPT, "application/json".parse().unwrap());
    assert!(requested(&headers, &query).is_none());
}

#[test]
fn selectors_and_ports_print_as_kubectl_shows_them() {
    let selector = json!({"matchLabels": {"tier": "web", "app": "x"}, "matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "b"]}]});
    assert_eq!(
        selector_text(Some(&selector)),
        "app=x,tier=web,env in (a,b)"
    );
    let service = json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
    assert_eq!(service_ports(&service), "80:30080/TCP,53/UDP");
    assert_eq!(service_external_ip(&service), "<none>");
    let pending = json!({"spec": {"type": "LoadBalancer"}});
    assert_eq!(service_external_ip(&pending), "<pending>");
}

#[test]
fn autoscalers_show_each_metric_over_its_target() {
    let hpa = json!({"spec": {"metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
    ]}, "status": {"currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]}});
    assert_eq!(
        hpa_targets(&hpa),
        "cpu: 12%/80%, memory: <unknown>/500Mi + 1 more..."
    );
    assert_eq!(hpa_targets(&json!({"spec": {}})), "<none>");
}

#[test]
fn a_repeated_event_shows_its_count() {
    let now = Utc::now();
    let first = (now - chrono::TimeDelta::seconds(300)).to_rfc3339();
    let last = (now - chrono::TimeDelta::seconds(10)).to_rfc3339();
    let event = json!({"type": "Normal", "reason": "ScalingReplicaSet", "message": "Scaled up ",
        "involvedObject": {"kind": "Deployment", "name": "web"}, "source": {"component": "deployment-controller"},
        "firstTimestamp": first, "lastTimestamp": last, "count": 3});
    let cells = event_cells(&event, now);
    assert_eq!(cells[0], "10s");
    assert_eq!(cells[3], "deployment/web");
    assert_eq!(cells[6], "Scaled up");
    assert_eq!(cells[7], "5m");
    assert_eq!(cells[8], 3);
}

#[test]
fn custom_resources_print_their_columns() {
    let printer = Printer::Custom(vec![
        json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size"}),
        json!({"name": "Color", "type": "string", "jsonPath": ".spec.color"}),
    ]);
    let table = printer.table(
        &json!({"items": [{"metadata": {"name": "w1"}, "spec": {"size": 3}}]}),
        Include::None,
        true,
    );
    assert_eq!(table["rows"][0]["cells"], json!(["w1", 3, null]));
    assert_eq!(table["columnDefinitions"][1]["name"], "Size");
    assert!(table["rows"][0].get("object").is_none());
}

#[test]
fn json_paths_of_printer_columns_read_fields_indexes_and_filters() {
    let object = json!({"status": {"sync": "Synced", "conditions": [
        {"type": "Healthy", "message": "h"}, {"type": "Ready", "message": "all good"}]}});
    assert_eq!(json_path(&object, ".status.sync"), Some(json!("Synced")));
    assert_eq!(
        json_path(&object, r#".status.conditions[?(@.type=="Ready")].message"#),
        Some(json!("all good"))
    );
    assert_eq!(
        json_path(&object, ".status.conditions[0].type"),
        Some(json!("Healthy"))
    );
    assert_eq!(json_path(&object, ".status.health"), None);
    assert_eq!(
        json_path(&object, r#".status.conditions[?(@.type=="X")].message"#),
        None
    );
}
