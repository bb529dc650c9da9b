//! The defaults of Services: cluster addresses, ports, policies, each type's
//! fields, and what a change of type drops.

use super::*;

fn service(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": spec})
}

#[test]
fn services_get_addresses_ports_and_policies() {
    let d = Defaulter::new();
    let mut a = service(json!({"ports": [{"port": 80}]}));
    d.default_object("", "Service", &mut a, None);
    let mut b = service(
        json!({"type": "NodePort", "ports": [{"port": 80, "name": "http"}, {"port": 81, "name": "x", "nodePort": 30001}]}),
    );
    d.default_object("", "Service", &mut b, None);
    assert_eq!(a["spec"]["clusterIP"], "10.96.1.0");
    assert_eq!(a["spec"]["clusterIPs"], json!(["10.96.1.0"]));
    assert_eq!(a["spec"]["ports"][0]["targetPort"], 80);
    assert_eq!(a["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(a["spec"]["type"], "ClusterIP");
    assert_eq!(a["spec"]["ipFamilyPolicy"], "SingleStack");
    assert!(a["spec"].get("externalTrafficPolicy").is_none());
    assert_eq!(b["spec"]["clusterIP"], "10.96.1.1");
    assert_eq!(b["spec"]["ports"][0]["nodePort"], 30128);
    assert_eq!(b["spec"]["ports"][1]["nodePort"], 30001);
    assert_eq!(b["spec"]["externalTrafficPolicy"], "Cluster");

    // An update without the allocated values keeps them.
    let mut b2 = service(json!({"type": "NodePort", "ports": [{"port": 8080, "name": "http"}]}));
    d.default_object("", "Service", &mut b2, Some(&b));
    assert_eq!(b2["spec"]["clusterIP"], "10.96.1.1");
    assert_eq!(b2["spec"]["ports"][0]["nodePort"], 30128);
    // The dropped port goes back to the pool once the update is stored.
    d.release(&b, Some(&b2));
    let mut c = service(json!({"type": "NodePort", "ports": [{"port": 1, "nodePort": 30001}]}));
    d.default_object("", "Service", &mut c, None);
    assert_eq!(c["spec"]["ports"][0]["nodePort"], 30001);

    // Deleting gives the address back; the next Service gets it.
    d.release(&a, None);
    let mut e = service(json!({"ports": [{"port": 80}]}));
    d.default_object("", "Service", &mut e, None);
    assert_eq!(e["spec"]["clusterIP"], "10.96.1.0");
}

#[test]
fn headless_external_name_and_load_balancer_services() {
    let headless = defaulted(
        "",
        "Service",
        service(json!({"clusterIP": "None", "ports": [{"port": 80}]})),
    );
    assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
    let headless_selected = defaulted(
        "",
        "Service",
        service(json!({"clusterIP": "None", "selector": {"a": "b"}})),
    );
    assert_eq!(headless_selected["spec"]["ipFamilyPolicy"], "SingleStack");

    let external = defaulted(
        "",
        "Service",
        service(json!({"type": "ExternalName", "externalName": "example.com"})),
    );
    assert_eq!(
        external["spec"],
        json!({"type": "ExternalName", "externalName": "example.com", "sessionAffinity": "None"})
    );

    let lb = defaulted(
        "",
        "Service",
        service(
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "sessionAffinity": "ClientIP", "ports": [{"port": 443}]}),
        ),
    );
    assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
    assert!(lb["spec"]["healthCheckNodePort"].as_u64().is_some());
    assert_eq!(
        lb["spec"]["sessionAffinityConfig"],
        json!({"clientIP": {"timeoutSeconds": 10800}})
    );
    let lb_no_ports = defaulted(
        "",
        "Service",
        service(
            json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": [{"port": 443}]}),
        ),
    );
    assert!(lb_no_ports["spec"]["ports"][0].get("nodePort").is_none());
}

#[test]
fn kubernetes_service_address_is_never_allocated() {
    let d = Defaulter::new();
    d.release(&service(json!({"clusterIP": "10.96.0.1"})), None);
    let mut s = service(json!({"clusterIP": "10.96.0.1"}));
    d.default_object("", "Service", &mut s, None);
    assert_eq!(s["spec"]["clusterIP"], "10.96.0.1");
}

#[test]
fn changing_a_service_type_drops_what_the_old_type_needed() {
    let d = Defaulter::new();
    let mut lb = service(json!({"type": "LoadBalancer", "ports": [{"port": 443}]}));
    lb["status"] = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}});
    d.default_object("", "Service", &mut lb, None);
    assert!(lb["spec"]["ports"][0]["nodePort"].is_number());

    // An update that only changes the type, as a merge patch leaves it.
    let mut to_cluster_ip = lb.clone();
    to_cluster_ip["spec"]["type"] = json!("ClusterIP");
    d.default_object("", "Service", &mut to_cluster_ip, Some(&lb));
    let spec = &to_cluster_ip["spec"];
    assert!(spec["ports"][0].get("nodePort").is_none());
    assert!(spec.get("externalTrafficPolicy").is_none());
    assert!(spec.get("allocateLoadBalancerNodePorts").is_none());
    assert_eq!(spec["clusterIP"], lb["spec"]["clusterIP"]);
    assert_eq!(to_cluster_ip["status"], json!({"loadBalancer": {}}));
    d.release(&lb, Some(&to_cluster_ip));

    let mut to_external = to_cluster_ip.clone();
    to_external["spec"]["type"] = json!("ExternalName");
    to_external["spec"]["externalName"] = json!("example.com");
    d.default_object("", "Service", &mut to_external, Some(&to_cluster_ip));
    let spec = &to_external["spec"];
    for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        assert!(spec.get(key).is_none(), "{key} kept");
    }

    // A nodePort the user changed is theirs: it stays for validation to judge.
    let mut np = service(json!({"type": "NodePort", "ports": [{"port": 80}]}));
    d.default_object("", "Service", &mut np, None);
    let mut changed = np.clone();
    changed["spec"]["type"] = json!("ClusterIP");
    changed["spec"]["ports"][0]["nodePort"] = json!(30500);
    d.default_object("", "Service", &mut changed, Some(&np));
    assert_eq!(changed["spec"]["ports"][0]["nodePort"], 30500);
}
