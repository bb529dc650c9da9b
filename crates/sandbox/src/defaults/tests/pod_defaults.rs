//! The defaults and admission of Pods (and the pod templates of workloads): image
//! pull policy, requests and QoS class, probes, volumes, the service account alias.

use super::*;

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}, "spec": spec, "status": {"phase": "Pending"}})
}

#[test]
fn image_pull_policy_follows_the_tag() {
    let cases = [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("localhost:5000/nginx", "Always"),
        ("localhost:5000/nginx:1.0", "IfNotPresent"),
        ("nginx@sha256:abc", "IfNotPresent"),
        ("nginx:latest@sha256:abc", "Always"),
    ];
    for (image, policy) in cases {
        let p = defaulted(
            "",
            "Pod",
            pod(json!({"containers": [{"name": "c", "image": image}]})),
        );
        assert_eq!(
            p["spec"]["containers"][0]["imagePullPolicy"], policy,
            "{image}"
        );
    }
    let p = defaulted(
        "",
        "Pod",
        pod(json!({"containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Never"}]})),
    );
    assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Never");
}

#[test]
fn pods_get_admission_defaults_on_create() {
    let p = defaulted(
        "",
        "Pod",
        pod(
            json!({"containers": [{"name": "debug", "image": "busybox:latest", "command": ["sleep", "3600"]}]}),
        ),
    );
    let spec = &p["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    assert_eq!(spec["enableServiceLinks"], true);
    assert_eq!(spec["priority"], 0);
    assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(
        spec["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );
    let volume = &spec["volumes"][0];
    let volume_name = volume["name"].as_str().unwrap_or("");
    assert!(volume_name.starts_with("kube-api-access-"), "{volume_name}");
    assert_eq!(volume_name.len(), "kube-api-access-".len() + 5);
    assert_eq!(volume["projected"]["defaultMode"], 420);
    assert_eq!(
        volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3607
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": volume_name, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );
    let c = &spec["containers"][0];
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["resources"], json!({}));
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(
        p["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
}

#[test]
fn pod_admission_respects_what_the_pod_says() {
    let p = defaulted(
        "",
        "Pod",
        pod(json!({
            "automountServiceAccountToken": false,
            "serviceAccountName": "app",
            "priorityClassName": "system-node-critical",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "x:1"}],
        })),
    );
    let spec = &p["spec"];
    assert_eq!(spec["serviceAccount"], "app");
    assert!(spec.get("volumes").is_none());
    assert!(spec["containers"][0].get("volumeMounts").is_none());
    assert_eq!(spec["priority"], 2_000_001_000);
    assert_eq!(spec["tolerations"], json!([{"operator": "Exists"}]));

    // On update, nothing is admitted again.
    let mut updated = pod(json!({"containers": [{"name": "c", "image": "x:1"}]}));
    let old = updated.clone();
    Defaulter::new().default_object("", "Pod", &mut updated, Some(&old));
    assert!(updated["spec"].get("tolerations").is_none());
    assert!(updated["spec"].get("serviceAccountName").is_none());
}

#[test]
fn pod_requests_default_to_limits_and_set_the_qos_class() {
    let p = defaulted(
        "",
        "Pod",
        pod(
            json!({"containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"cpu": "1", "memory": "1024Mi"}}}]}),
        ),
    );
    let resources = &p["spec"]["containers"][0]["resources"];
    assert_eq!(resources["limits"], json!({"cpu": "1", "memory": "1Gi"}));
    assert_eq!(resources["requests"], json!({"cpu": "1", "memory": "1Gi"}));
    assert_eq!(p["status"]["qosClass"], "Guaranteed");

    let p = defaulted(
        "",
        "Pod",
        pod(
            json!({"containers": [{"name": "c", "image": "x:1", "resources": {"requests": {"cpu": "0.5"}}}]}),
        ),
    );
    assert_eq!(
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "500m"
    );
    assert_eq!(p["status"]["qosClass"], "Burstable");
}

#[test]
fn probes_handlers_and_env_refs_are_completed() {
    let p = defaulted(
        "",
        "Pod",
        pod(json!({"hostNetwork": true, "containers": [{
            "name": "c", "image": "x:1",
            "ports": [{"containerPort": 8080}],
            "livenessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 0},
            "startupProbe": {"grpc": {"port": 9000}, "failureThreshold": 30},
            "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}},
            "env": [
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            ],
        }]})),
    );
    let c = &p["spec"]["containers"][0];
    assert_eq!(
        c["ports"][0],
        json!({"containerPort": 8080, "protocol": "TCP", "hostPort": 8080})
    );
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(c["startupProbe"]["failureThreshold"], 30);
    assert_eq!(c["startupProbe"]["grpc"]["service"], "");
    assert_eq!(
        c["lifecycle"]["preStop"]["httpGet"],
        json!({"port": 80, "path": "/stop", "scheme": "HTTP"})
    );
    assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(c["env"][1]["valueFrom"]["resourceFieldRef"]["divisor"], "0");
}

#[test]
fn volumes_get_their_source_defaults() {
    let p = defaulted(
        "apps",
        "Deployment",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "x:1"}],
            "volumes": [
                {"name": "scratch"},
                {"name": "s", "secret": {"secretName": "s"}},
                {"name": "c", "configMap": {"name": "c", "defaultMode": 256}},
                {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                {"name": "h", "hostPath": {"path": "/x"}},
                {"name": "e", "emptyDir": {"sizeLimit": "1024Mi"}},
                {"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
            ],
        }}}}),
    );
    let v = &p["spec"]["template"]["spec"]["volumes"];
    assert_eq!(v[0], json!({"name": "scratch", "emptyDir": {}}));
    assert_eq!(v[1]["secret"]["defaultMode"], 420);
    assert_eq!(v[2]["configMap"]["defaultMode"], 256);
    assert_eq!(v[3]["downwardAPI"]["defaultMode"], 420);
    assert_eq!(
        v[3]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(v[4]["projected"]["defaultMode"], 420);
    assert_eq!(
        v[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3600
    );
    assert_eq!(v[5]["hostPath"]["type"], "");
    assert_eq!(v[6]["emptyDir"]["sizeLimit"], "1Gi");
    assert_eq!(
        v[7]["ephemeral"]["volumeClaimTemplate"]["spec"]["volumeMode"],
        "Filesystem"
    );
    // Templates are not Pods: no admission, no enableServiceLinks.
    let spec = &p["spec"]["template"]["spec"];
    assert!(spec.get("enableServiceLinks").is_none());
    assert!(spec.get("tolerations").is_none());
    assert_eq!(p["spec"]["template"]["metadata"], json!({}));
}

#[test]
fn service_account_alias_fills_and_mirrors_the_name() {
    let mut spec = serde_json::Map::new();
    spec.insert("serviceAccount".into(), json!("legacy"));
    default_pod_spec(&mut spec);
    assert_eq!(spec["serviceAccountName"], "legacy");
    let mut spec = serde_json::Map::new();
    spec.insert("serviceAccount".into(), json!("legacy"));
    spec.insert("serviceAccountName".into(), json!("new"));
    default_pod_spec(&mut spec);
    assert_eq!(spec["serviceAccount"], "new");
}
