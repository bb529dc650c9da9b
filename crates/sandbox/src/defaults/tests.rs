//! Defaults as kube-apiserver applies them, checked against every recorded answer, and
//! per kind (workloads, namespaces, Secrets, CRDs, custom resources, LimitRanges); Pods
//! and Services have their own files.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::pods::default_pod_spec;
use super::*;

mod pod_defaults;
mod service_defaults;

fn fixtures_dir(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kube-apiserver-v1.36")
        .join(sub)
}

fn read_json(path: &std::path::Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// Fixtures whose answer is not a stored object, with the reason.
const NOT_COMPARED: &[(&str, &str)] = &[(
    "pod-debug.json",
    "the real server refused it (403: the namespace had no `default` ServiceAccount \
     yet); Pod defaults are covered by the unit tests below",
)];

/// Server-assigned values that differ on every run (fixtures README).
fn strip_volatile(v: &mut Value) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            meta.remove(key);
        }
    }
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
        for key in ["clusterIP", "clusterIPs", "healthCheckNodePort"] {
            if let Some(x) = spec.get_mut(key) {
                *x = json!("<allocated>");
            }
        }
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports {
                if let Some(np) = p.get_mut("nodePort") {
                    *np = json!("<allocated>");
                }
            }
        }
    }
}

/// Runs what the sandbox's handler does on a create: status reset, defaults, and for a
/// custom resource the defaults of its CRD's schema.
fn simulate_create(defaulter: &Defaulter, request: &mut Value, uid: &Value, crd: &Value) {
    let api_version = request["apiVersion"].as_str().unwrap_or("").to_string();
    let kind = request["kind"].as_str().unwrap_or("").to_string();
    let group = group_of(&api_version).to_string();
    request["metadata"]["uid"] = uid.clone();
    if let Some(status) = initial_status(&group, &kind) {
        request["status"] = status;
    }
    defaulter.default_object(&group, &kind, request, None);
    if group == "example.com" {
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        prune_custom_resource(schema, request);
        default_custom_resource(schema, request);
    }
}

#[test]
fn every_recorded_apply_answer_is_reproduced() {
    let dir = fixtures_dir("apply");
    let crd = read_json(&dir.join("customresourcedefinition-widgets.example.com.json"));
    let crd_body = serde_saphyr::from_str::<Value>(crd["request"]["body"].as_str().unwrap_or(""))
        .expect("CRD request is YAML");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("apply fixtures exist")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    entries.sort();
    assert!(
        entries.len() >= 25,
        "expected every apply fixture, found {}",
        entries.len()
    );
    let defaulter = Defaulter::new();
    let mut compared = 0;
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let fixture = read_json(&path);
        let status = fixture["response"]["status"].as_u64().unwrap_or(0);
        if NOT_COMPARED.iter().any(|(n, _)| *n == name) {
            assert_ne!(
                status, 201,
                "{name} is listed as not compared but was stored"
            );
            continue;
        }
        assert_eq!(status, 201, "{name}: unexpected recorded status");
        let yaml = fixture["request"]["body"].as_str().unwrap_or("");
        let mut object: Value = serde_saphyr::from_str(yaml)
            .unwrap_or_else(|e| panic!("{name}: request body is not YAML: {e}"));
        let mut expected = fixture["response"]["body"].clone();
        let uid = expected["metadata"]["uid"].clone();
        simulate_create(&defaulter, &mut object, &uid, &crd_body);
        strip_volatile(&mut object);
        strip_volatile(&mut expected);
        assert_eq!(
            object,
            expected,
            "{name}: defaulted object differs from the recorded answer\n got: {}\nwant: {}",
            serde_json::to_string_pretty(&object).unwrap_or_default(),
            serde_json::to_string_pretty(&expected).unwrap_or_default()
        );
        compared += 1;
    }
    assert_eq!(compared, 24);
}

#[test]
fn every_kind_with_a_generation_in_the_fixtures_tracks_it() {
    let dir = fixtures_dir("apply");
    for entry in std::fs::read_dir(&dir).expect("apply fixtures exist") {
        let path = entry.expect("readable dir").path();
        let fixture = read_json(&path);
        let body = &fixture["response"]["body"];
        if body["kind"] == "Status" {
            continue;
        }
        let group = group_of(body["apiVersion"].as_str().unwrap_or(""));
        let kind = body["kind"].as_str().unwrap_or("");
        let is_custom = group == "example.com";
        let has_generation = body["metadata"].get("generation").is_some();
        assert_eq!(
            tracks_generation(group, kind, is_custom),
            has_generation,
            "{}",
            path.display()
        );
    }
    assert!(tracks_generation("", "Pod", false));
    assert!(!tracks_generation("", "ConfigMap", false));
}

fn defaulted(group: &str, kind: &str, mut obj: Value) -> Value {
    Defaulter::new().default_object(group, kind, &mut obj, None);
    obj
}

#[test]
fn namespaces_keep_their_finalizers_on_update() {
    let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}, "spec": {"finalizers": ["example.com/x"]}});
    Defaulter::new().default_object("", "Namespace", &mut ns, None);
    assert_eq!(
        ns["spec"]["finalizers"],
        json!(["example.com/x", "kubernetes"])
    );
    assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "a");
    let old = ns.clone();
    let mut update = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"kubernetes.io/metadata.name": "b"}}});
    Defaulter::new().default_object("", "Namespace", &mut update, Some(&old));
    assert_eq!(
        update["spec"]["finalizers"],
        json!(["example.com/x", "kubernetes"])
    );
    assert_eq!(
        update["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "a"
    );
}

#[test]
fn secrets_merge_string_data() {
    let s = defaulted(
        "",
        "Secret",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"a": "y", "b": "z"}, "type": "kubernetes.io/tls"}),
    );
    assert_eq!(s["data"], json!({"a": "eQ==", "b": "eg=="}));
    assert!(s.get("stringData").is_none());
    assert_eq!(s["type"], "kubernetes.io/tls");
}

#[test]
fn daemon_set_template_generation_counts_template_changes() {
    let d = Defaulter::new();
    let new_ds = |image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": image}]}}}})
    };
    let mut v1 = new_ds("x:1");
    d.default_object("apps", "DaemonSet", &mut v1, None);
    let mut same = new_ds("x:1");
    d.default_object("apps", "DaemonSet", &mut same, Some(&v1));
    assert_eq!(
        same["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "1"
    );
    let mut v2 = new_ds("x:2");
    d.default_object("apps", "DaemonSet", &mut v2, Some(&same));
    assert_eq!(
        v2["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "2"
    );
}

#[test]
fn workload_defaults_respect_given_values() {
    let dep = defaulted(
        "apps",
        "Deployment",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 0, "strategy": {"type": "Recreate"}}}),
    );
    assert_eq!(dep["spec"]["replicas"], 0);
    assert_eq!(dep["spec"]["strategy"], json!({"type": "Recreate"}));
    let sts = defaulted(
        "apps",
        "StatefulSet",
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"updateStrategy": {"type": "OnDelete"}}}),
    );
    assert_eq!(sts["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    assert_eq!(sts["spec"]["replicas"], 1);
    let rs = defaulted(
        "apps",
        "ReplicaSet",
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {}}),
    );
    assert_eq!(rs["spec"]["replicas"], 1);
    let rc = defaulted(
        "",
        "ReplicationController",
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "r"}, "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}}),
    );
    assert_eq!(rc["spec"]["selector"], json!({"a": "b"}));
    assert_eq!(rc["metadata"]["labels"], json!({"a": "b"}));
}

#[test]
fn job_variants() {
    let job = |spec: Value| {
        defaulted(
            "batch",
            "Job",
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u"}, "spec": spec}),
        )
    };
    let j = job(
        json!({"parallelism": 3, "backoffLimitPerIndex": 1, "completionMode": "Indexed", "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}, "template": {}}),
    );
    assert!(j["spec"].get("completions").is_none());
    assert_eq!(j["spec"]["backoffLimit"], 2147483647);
    assert_eq!(j["spec"]["podReplacementPolicy"], "Failed");
    assert_eq!(
        j["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
        "True"
    );
    let manual = job(
        json!({"manualSelector": true, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}}}),
    );
    assert_eq!(
        manual["spec"]["selector"],
        json!({"matchLabels": {"a": "b"}})
    );
    assert_eq!(manual["metadata"]["labels"], json!({"a": "b"}));
}

#[test]
fn other_kinds() {
    let np = defaulted(
        "networking.k8s.io",
        "NetworkPolicy",
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"}, "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}),
    );
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");

    let rb = defaulted(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "r"}, "roleRef": {"kind": "Role", "name": "x"}, "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]}),
    );
    assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    assert!(rb["subjects"][1].get("apiGroup").is_none());

    let hpa = defaulted(
        "autoscaling",
        "HorizontalPodAutoscaler",
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}, "spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
    );
    assert_eq!(hpa["spec"]["minReplicas"], 1);
    assert_eq!(
        hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    assert_eq!(
        hpa["spec"]["behavior"],
        json!({
            "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15}]},
            "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max", "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        })
    );

    let pvc = defaulted(
        "",
        "PersistentVolumeClaim",
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "p"}, "spec": {"resources": {"requests": {"storage": "2048Mi"}}}}),
    );
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "2Gi");
    assert_eq!(
        pvc["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );

    let pv = defaulted(
        "",
        "PersistentVolume",
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "p"}, "spec": {"capacity": {"storage": "1Gi"}}}),
    );
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(
        pv["metadata"]["finalizers"],
        json!(["kubernetes.io/pv-protection"])
    );

    let pc = defaulted(
        "scheduling.k8s.io",
        "PriorityClass",
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": 5}),
    );
    assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
    let sc = defaulted(
        "storage.k8s.io",
        "StorageClass",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "x"}),
    );
    assert_eq!(sc["reclaimPolicy"], "Delete");
    assert_eq!(sc["volumeBindingMode"], "Immediate");

    // Kinds without defaults are left alone.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
    assert_eq!(defaulted("", "ConfigMap", cm.clone()), cm);
    assert_eq!(initial_status("", "ConfigMap"), None);
}

#[test]
fn crds_get_names_conversion_and_established_status() {
    let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "names": {"plural": "gadgets", "kind": "Gadget"},
                 "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n"}}}},
                 "versions": [{"name": "v1", "served": true, "storage": false}, {"name": "v2", "served": true, "storage": true}]}});
    crd["status"] =
        initial_status("apiextensions.k8s.io", "CustomResourceDefinition").unwrap_or(Value::Null);
    Defaulter::new().default_object(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        &mut crd,
        None,
    );
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["singular"], "gadget");
    assert_eq!(crd["spec"]["names"]["listKind"], "GadgetList");
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
        443
    );
    assert_eq!(crd["status"]["storedVersions"], json!(["v2"]));
    let status = crd_established_status(&crd, "2026-11-21T21:02:16Z");
    assert_eq!(status["acceptedNames"]["listKind"], "GadgetList");
    assert_eq!(status["conditions"][1]["type"], "Established");
    assert_eq!(status["storedVersions"], json!(["v2"]));
}

#[test]
fn custom_resource_schema_defaults_reach_nested_values() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 1},
            "tier": {"type": "object", "default": {}, "properties": {"name": {"type": "string", "default": "gold"}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"weight": {"type": "integer", "default": 5}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"on": {"type": "boolean", "default": true}}}},
        }},
        "metadata": {"type": "object", "default": {"x": 1}},
    }});
    let mut cr = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"size": 3, "items": [{}, {"weight": 1}], "labels": {"a": {}}}});
    default_custom_resource(&schema, &mut cr);
    assert_eq!(
        cr["spec"],
        json!({"size": 3, "items": [{"weight": 5}, {"weight": 1}], "labels": {"a": {"on": true}}, "tier": {"name": "gold"}})
    );
    assert_eq!(cr["metadata"], json!({"name": "w"}));
}

/// Every object the real server answered with is already defaulted: defaulting it
/// again as an update must change nothing, or the sandbox would report drift on
/// objects it stored itself.
#[test]
fn defaulting_a_stored_object_again_changes_nothing() {
    let defaulter = Defaulter::new();
    let mut checked = 0;
    for sub in ["apply", "ssa", "generation", "patch", "status", "delete"] {
        for entry in std::fs::read_dir(fixtures_dir(sub)).expect("fixture folder exists") {
            let path = entry.expect("readable dir").path();
            let fixture = read_json(&path);
            let body = &fixture["response"]["body"];
            let kind = body["kind"].as_str().unwrap_or("");
            if !body.is_object() || kind == "Status" || kind.is_empty() {
                continue;
            }
            let group = group_of(body["apiVersion"].as_str().unwrap_or("")).to_string();
            let mut again = body.clone();
            defaulter.default_object(&group, kind, &mut again, Some(body));
            assert_eq!(&again, body, "{}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} stored objects found");
}

#[test]
fn explicit_nulls_of_built_in_kinds_disappear() {
    let d = defaulted(
        "apps",
        "Deployment",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "creationTimestamp": null},
               "spec": {"replicas": null, "strategy": {}, "template": {"metadata": {"creationTimestamp": null}, "spec": {"containers": [{"name": "c", "image": "x:1", "resources": {}}]}}},
               "status": {"conditions": null}}),
    );
    assert!(d["metadata"].get("creationTimestamp").is_none());
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["template"]["metadata"], json!({}));
    assert_eq!(d["status"], json!({"conditions": null}));
    // Custom resources keep what they were given.
    let mut cr = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"x": null}});
    Defaulter::new().default_object("example.com", "W", &mut cr, None);
    assert_eq!(cr["spec"], json!({"x": null}));
}

#[test]
fn custom_resources_lose_undeclared_fields() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
        }},
    }});
    let mut cr = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w", "labels": {"a": "b"}},
        "extra": 1,
        "spec": {"size": 2, "colour": "red",
                 "free": {"anything": {"goes": true}},
                 "tags": {"x": "y"},
                 "items": [{"a": "1", "b": "2"}],
                 "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"gone": 1}, "other": 2}}});
    prune_custom_resource(&schema, &mut cr);
    assert_eq!(
        cr,
        json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w", "labels": {"a": "b"}},
            "spec": {"size": 2,
                     "free": {"anything": {"goes": true}},
                     "tags": {"x": "y"},
                     "items": [{"a": "1"}],
                     "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}})
    );
}

#[test]
fn limit_ranges_fill_defaults_from_max_and_min() {
    let lr = defaulted(
        "",
        "LimitRange",
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2", "memory": "1024Mi"}, "min": {"cpu": "100m", "ephemeral-storage": "1Gi"}, "default": {"cpu": "1"}},
            {"type": "Pod", "max": {"cpu": "4"}},
        ]}}),
    );
    let container = &lr["spec"]["limits"][0];
    assert_eq!(container["default"], json!({"cpu": "1", "memory": "1Gi"}));
    assert_eq!(
        container["defaultRequest"],
        json!({"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"})
    );
    assert!(lr["spec"]["limits"][1].get("default").is_none());
}
