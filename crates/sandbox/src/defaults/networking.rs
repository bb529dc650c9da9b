//! Networking defaults: Services (types, ports, session affinity, IP families,
//! traffic policies) with the clusterIP and nodePort allocators, and NetworkPolicies.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use super::{Allocations, Defaulter, Obj, array, child, is_unset, set_ptr, set_str, str_of};

impl Defaulter {
    /// Gives back the clusterIPs and nodePorts `obj` holds that `keep` does not: call it
    /// with the deleted Service (`keep` None), with a written object whose write failed
    /// or was a dry run (`keep` = the stored object), or with the old object after a
    /// successful update (`keep` = the new one).
    pub(crate) fn release(&self, obj: &Value, keep: Option<&Value>) {
        let (ips, ports) = service_allocations(obj);
        let (keep_ips, keep_ports) = keep.map(service_allocations).unwrap_or_default();
        let mut alloc = self.lock();
        for ip in ips.difference(&keep_ips) {
            if *ip != u32::from(KUBERNETES_SERVICE_IP) {
                alloc.cluster_ips.remove(ip);
            }
        }
        for port in ports.difference(&keep_ports) {
            alloc.node_ports.remove(port);
        }
    }

    pub(super) fn lock(&self) -> parking_lot::MutexGuard<'_, Allocations> {
        // The allocation sets stay consistent even if a holder panicked.
        self.alloc.lock()
    }

    pub(super) fn allocate_ip(&self) -> Option<Ipv4Addr> {
        let base = u32::from(SERVICE_CIDR.0);
        let size = 1u32 << (32 - SERVICE_CIDR.1);
        let mut alloc = self.lock();
        // The network and broadcast addresses are never handed out.
        let candidate = (STATIC_IP_BAND..size - 1)
            .chain(1..STATIC_IP_BAND)
            .map(|offset| base + offset)
            .find(|ip| !alloc.cluster_ips.contains(ip))?;
        alloc.cluster_ips.insert(candidate);
        Some(Ipv4Addr::from(candidate))
    }

    pub(super) fn allocate_port(&self) -> Option<u16> {
        let (lo, hi) = NODE_PORT_RANGE;
        let mut alloc = self.lock();
        let candidate = (lo + STATIC_PORT_BAND..=hi)
            .chain(lo..lo + STATIC_PORT_BAND)
            .find(|p| !alloc.node_ports.contains(p))?;
        alloc.node_ports.insert(candidate);
        Some(candidate)
    }

    pub(super) fn default_service(&self, o: &mut Obj, old: Option<&Value>) {
        let old_spec = old.and_then(|v| v.get("spec"));
        let new_type = o
            .get("spec")
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .unwrap_or("ClusterIP");
        // Load-balancer status only means something for a LoadBalancer.
        if old.is_some()
            && new_type != "LoadBalancer"
            && let Some(status) = child(o, "status")
        {
            status.insert("loadBalancer".into(), json!({}));
        }
        let Some(spec) = child(o, "spec") else {
            return;
        };
        set_str(spec, "sessionAffinity", "None");
        if str_of(spec, "sessionAffinity") == "None" {
            spec.remove("sessionAffinityConfig");
        } else if str_of(spec, "sessionAffinity") == "ClientIP" {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"));
            if is_unset(timeout) {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": CLIENT_IP_AFFINITY_SECONDS}}),
                );
            }
        }
        set_str(spec, "type", "ClusterIP");
        let ty = str_of(spec, "type").to_string();
        if let Some(ports) = array(spec, "ports") {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                set_str(port, "protocol", "TCP");
                let target_unset = match port.get("targetPort") {
                    None | Some(Value::Null) => true,
                    Some(Value::Number(n)) => n.as_i64() == Some(0),
                    Some(Value::String(s)) => s.is_empty(),
                    _ => false,
                };
                if target_unset && let Some(p) = port.get("port").cloned() {
                    port.insert("targetPort".into(), p);
                }
            }
        }
        let external = ty == "NodePort"
            || ty == "LoadBalancer"
            || spec
                .get("externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
        if external {
            set_str(spec, "externalTrafficPolicy", "Cluster");
        }
        if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
            set_ptr(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        if ty == "LoadBalancer" {
            set_ptr(spec, "allocateLoadBalancerNodePorts", json!(true));
        }
        if let Some(old_spec) = old_spec {
            drop_type_dependent_fields(spec, old_spec);
        }
        if ty == "ExternalName" {
            return;
        }
        self.default_cluster_ips(spec, old_spec);
        self.default_node_ports(spec, &ty, old_spec);
    }

    pub(super) fn default_cluster_ips(&self, spec: &mut Obj, old_spec: Option<&Value>) {
        // On update an unset clusterIP keeps the stored one, as the registry's
        // patchAllocatedValues does.
        let old_type = old_spec.map(|s| s.get("type").and_then(Value::as_str).unwrap_or(""));
        if str_of(spec, "clusterIP").is_empty()
            && let Some(old) = old_spec
            && old_type != Some("ExternalName")
        {
            for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                if is_unset(spec.get(key))
                    && let Some(v) = old.get(key)
                {
                    spec.insert(key.into(), v.clone());
                }
            }
        }
        let ips = crate::strings(spec.get("clusterIPs"));
        let mut primary = str_of(spec, "clusterIP").to_string();
        if primary.is_empty()
            && let Some(first) = ips.first()
        {
            primary = first.clone();
        }
        if primary.is_empty() {
            match self.allocate_ip() {
                Some(ip) => primary = ip.to_string(),
                None => return,
            }
        } else if let Ok(ip) = primary.parse::<Ipv4Addr>() {
            self.lock().cluster_ips.insert(u32::from(ip));
        }
        spec.insert("clusterIP".into(), json!(primary));
        if ips.is_empty() {
            spec.insert("clusterIPs".into(), json!([primary]));
        }
        let headless = primary == "None";
        let selectorless = spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
        if headless && selectorless {
            set_ptr(spec, "ipFamilyPolicy", json!("RequireDualStack"));
        } else {
            set_ptr(spec, "ipFamilyPolicy", json!("SingleStack"));
        }
        if spec
            .get("ipFamilies")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec.insert("ipFamilies".into(), json!(["IPv4"]));
        }
    }

    pub(super) fn default_node_ports(&self, spec: &mut Obj, ty: &str, old_spec: Option<&Value>) {
        let wants_ports = ty == "NodePort"
            || (ty == "LoadBalancer"
                && spec
                    .get("allocateLoadBalancerNodePorts")
                    .and_then(Value::as_bool)
                    .unwrap_or(true));
        if !wants_ports {
            return;
        }
        // Stored nodePorts carry over by port name, unless the new spec already uses
        // that number elsewhere.
        let old_ports: Vec<(String, u16)> = old_spec
            .and_then(|s| s.get("ports"))
            .and_then(Value::as_array)
            .map(|ports| {
                ports
                    .iter()
                    .filter_map(|p| {
                        let np = p.get("nodePort")?.as_u64()?;
                        let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                        Some((name.to_string(), u16::try_from(np).ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let Some(ports) = array(spec, "ports") else {
            return;
        };
        let in_use: BTreeSet<u16> = ports
            .iter()
            .filter_map(|p| p.get("nodePort")?.as_u64())
            .filter_map(|n| u16::try_from(n).ok())
            .filter(|n| *n != 0)
            .collect();
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            let current = port.get("nodePort").and_then(Value::as_u64).unwrap_or(0);
            if current != 0 {
                if let Ok(p) = u16::try_from(current) {
                    self.lock().node_ports.insert(p);
                }
                continue;
            }
            let name = str_of(port, "name").to_string();
            let carried = old_ports
                .iter()
                .find(|(n, p)| *n == name && !in_use.contains(p))
                .map(|(_, p)| *p);
            if let Some(p) = carried.or_else(|| self.allocate_port()) {
                port.insert("nodePort".into(), json!(p));
            }
        }
        if ty == "LoadBalancer" && str_of(spec, "externalTrafficPolicy") == "Local" {
            let current = spec
                .get("healthCheckNodePort")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if current == 0 {
                let carried = old_spec
                    .and_then(|s| s.get("healthCheckNodePort"))
                    .and_then(Value::as_u64)
                    .filter(|p| *p != 0);
                let port = carried.or_else(|| self.allocate_port().map(u64::from));
                if let Some(p) = port {
                    spec.insert("healthCheckNodePort".into(), json!(p));
                }
            }
        }
    }
}

/// The Service CIDR the sandbox allocates from: kube-apiserver's default
/// `--service-cluster-ip-range` in kubeadm and kind clusters.
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);

/// The `kubernetes` Service's address: always the first host of the Service CIDR.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// kube-apiserver's default `--service-node-port-range`.
pub const NODE_PORT_RANGE: (u16, u16) = (30000, 32767);

/// Addresses below this offset are left to clusterIPs users ask for by hand: the real
/// allocator (KEP-3070) keeps min(max(16, size/16), 256) addresses at the bottom of the
/// range for static use, 256 for a /12.
pub(super) const STATIC_IP_BAND: u32 = 256;

/// The same rule applied to node ports: min(max(16, 2768/16), 128) = 128.
pub(super) const STATIC_PORT_BAND: u16 = 128;

/// `v1.DefaultClientIPServiceAffinitySeconds`: three hours.
pub(super) const CLIENT_IP_AFFINITY_SECONDS: i64 = 10800;

/// The service strategy's `dropTypeDependentFields`: on a type change, values the
/// server allocated or defaulted for the old type go when the user left them as they
/// were (a changed value is the user's and stays, for validation to judge).
pub(super) fn drop_type_dependent_fields(spec: &mut Obj, old: &Value) {
    let old_type = old
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let new_type = str_of(spec, "type").to_string();
    let same = |spec: &Obj, key: &str| spec.get(key) == old.get(key);
    let needs_ip = |t: &str| t != "ExternalName";
    if needs_ip(old_type) && !needs_ip(&new_type) {
        if same(spec, "clusterIP") && same(spec, "clusterIPs") {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
        for key in ["ipFamilies", "ipFamilyPolicy"] {
            if same(spec, key) {
                spec.remove(key);
            }
        }
    }
    let allocates = |t: &str, s: Option<&Value>| {
        t == "NodePort"
            || (t == "LoadBalancer"
                && s.and_then(|s| s.get("allocateLoadBalancerNodePorts"))
                    .and_then(Value::as_bool)
                    .unwrap_or(true))
    };
    let node_ports = |ports: Option<&Value>| -> Vec<Option<Value>> {
        ports
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| p.get("nodePort").cloned())
            .collect()
    };
    let new_allocates = allocates(&new_type, Some(&Value::Object(spec.clone())));
    if allocates(old_type, Some(old))
        && !new_allocates
        && node_ports(spec.get("ports")) == node_ports(old.get("ports"))
        && let Some(ports) = array(spec, "ports")
    {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.remove("nodePort");
        }
    }
    let local_lb = |t: &str, s: &Value| {
        t == "LoadBalancer"
            && s.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
    };
    if local_lb(old_type, old)
        && !local_lb(&new_type, &Value::Object(spec.clone()))
        && same(spec, "healthCheckNodePort")
    {
        spec.remove("healthCheckNodePort");
    }
    if old_type == "LoadBalancer" && new_type != "LoadBalancer" {
        for key in ["allocateLoadBalancerNodePorts", "loadBalancerClass"] {
            if same(spec, key) {
                spec.remove(key);
            }
        }
    }
    let external = |t: &str, s: &Value| {
        t == "NodePort"
            || t == "LoadBalancer"
            || s.get("externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
    };
    if external(old_type, old)
        && !external(&new_type, &Value::Object(spec.clone()))
        && same(spec, "externalTrafficPolicy")
    {
        spec.remove("externalTrafficPolicy");
    }
}

pub(super) fn service_allocations(obj: &Value) -> (BTreeSet<u32>, BTreeSet<u16>) {
    let spec = obj.get("spec");
    let mut ips = BTreeSet::new();
    let mut ports = BTreeSet::new();
    let Some(spec) = spec else {
        return (ips, ports);
    };
    let listed = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(spec.get("clusterIP"));
    for ip in listed.filter_map(Value::as_str) {
        if let Ok(addr) = ip.parse::<Ipv4Addr>() {
            ips.insert(u32::from(addr));
        }
    }
    let node_ports = spec
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort"))
        .chain(spec.get("healthCheckNodePort"));
    for p in node_ports.filter_map(Value::as_u64) {
        if let Ok(port) = u16::try_from(p)
            && port != 0
        {
            ports.insert(port);
        }
    }
    (ips, ports)
}

pub(super) fn default_network_policy(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    let empty = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty {
        let has_egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if has_egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
    for direction in ["ingress", "egress"] {
        if let Some(rules) = array(spec, direction) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(ports) = array(rule, "ports") {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        set_ptr(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}
