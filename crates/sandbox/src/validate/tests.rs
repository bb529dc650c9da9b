use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kube-apiserver-v1.36/errors")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Replays a recorded 422: the request body, namespaced by its URL, must produce the
/// recorded causes and message.
fn replay_invalid(name: &str) {
    let f = fixture(name);
    let mut body = f["request"]["body"].clone();
    body["metadata"]["namespace"] = json!("fixtures");
    let errors = validate("", "ConfigMap", &body, true);
    let expected = &f["response"]["body"];
    assert_eq!(f["response"]["status"], 422);
    let causes = serde_json::to_value(&errors).expect("causes serialise");
    assert_eq!(causes, expected["details"]["causes"], "{name}");
    let object_name = body["metadata"]["name"].as_str().unwrap_or("");
    assert_eq!(
        invalid_message(&qualified_kind("", "ConfigMap"), object_name, &errors),
        expected["message"].as_str().unwrap_or(""),
        "{name}"
    );
    // The serialised cause keeps the real field order: reason, message, field.
    let text = serde_json::to_string(&errors[0]).expect("cause serialises");
    assert!(text.starts_with("{\"reason\":"), "{text}");
}

#[test]
fn recorded_bad_name_is_reproduced() {
    replay_invalid("invalid-field-value.json");
}

#[test]
fn recorded_missing_name_is_reproduced() {
    replay_invalid("invalid-missing-name.json");
}

fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn meta_obj(kind: &str, name: &str) -> Value {
    json!({"kind": kind, "metadata": {"name": name, "namespace": "ns"}})
}

#[test]
fn names_follow_the_kind_rules() {
    assert!(validate("", "ConfigMap", &meta_obj("ConfigMap", "a.b-c"), true).is_empty());
    // Namespaces are labels: no dots.
    let ns = json!({"metadata": {"name": "a.b"}});
    assert_eq!(
        messages(&validate("", "Namespace", &ns, false)),
        ["metadata.name: Invalid value: \"a.b\": must not contain dots"]
    );
    let ns = json!({"metadata": {"name": "A"}});
    assert_eq!(
        messages(&validate("", "Namespace", &ns, false)),
        [
            "metadata.name: Invalid value: \"A\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        ]
    );
    // Services are DNS-1035 labels: no leading digit.
    let svc =
        json!({"metadata": {"name": "1web", "namespace": "ns"}, "spec": {"ports": [{"port": 80}]}});
    assert_eq!(
        messages(&validate("", "Service", &svc, true)),
        [
            "metadata.name: Invalid value: \"1web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        ]
    );
    // RBAC names are path segments: colons are fine, slashes are not.
    let role = json!({"metadata": {"name": "system:viewer"}, "rules": []});
    assert!(validate("rbac.authorization.k8s.io", "ClusterRole", &role, false).is_empty());
    let role = json!({"metadata": {"name": "a/b%"}, "rules": []});
    assert_eq!(
        messages(&validate(
            "rbac.authorization.k8s.io",
            "ClusterRole",
            &role,
            false
        )),
        [
            "metadata.name: Invalid value: \"a/b%\": may not contain '/'",
            "metadata.name: Invalid value: \"a/b%\": may not contain '%'"
        ]
    );
    let long = "a".repeat(254);
    assert_eq!(
        messages(&validate(
            "",
            "ConfigMap",
            &meta_obj("ConfigMap", &long),
            true
        ))[0],
        format!("metadata.name: Invalid value: \"{long}\": must be no more than 253 characters")
    );
}

#[test]
fn generate_name_may_end_with_a_dash() {
    let obj = json!({"metadata": {"generateName": "web-", "name": "web-x7k2p", "namespace": "ns"}});
    assert!(validate("", "ConfigMap", &obj, true).is_empty());
    let obj = json!({"metadata": {"generateName": "Web-", "name": "web-x7k2p", "namespace": "ns"}});
    let errs = validate("", "ConfigMap", &obj, true);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field, "metadata.generateName");
}

#[test]
fn namespace_presence_follows_the_scope() {
    let obj = json!({"metadata": {"name": "x"}});
    assert_eq!(
        messages(&validate("", "ConfigMap", &obj, true)),
        ["metadata.namespace: Required value"]
    );
    let obj = json!({"metadata": {"name": "x", "namespace": "ns"}});
    assert_eq!(
        messages(&validate("", "Namespace", &obj, false)),
        ["metadata.namespace: Forbidden: not allowed on this type"]
    );
}

#[test]
fn labels_and_annotations() {
    let obj = json!({"metadata": {"name": "x", "namespace": "ns", "labels": {"example.com/ok": "v", "bad key": "v", "k": "-bad"}}});
    assert_eq!(
        messages(&validate("", "ConfigMap", &obj, true)),
        [
            "metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "metadata.labels: Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ]
    );
    let obj =
        json!({"metadata": {"name": "x", "namespace": "ns", "labels": {"a/b/c": "", "/x": "y"}}});
    let msgs = messages(&validate("", "ConfigMap", &obj, true));
    assert_eq!(
        msgs[0],
        "metadata.labels: Invalid value: \"/x\": prefix part must be non-empty"
    );
    assert!(
        msgs[1].contains("a qualified name must consist of"),
        "{}",
        msgs[1]
    );
    assert!(
        msgs[1]
            .ends_with("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
    );

    // Annotation keys ignore case; their total size is capped at 256 KiB.
    let big = "x".repeat(ANNOTATIONS_MAX_BYTES);
    let obj = json!({"metadata": {"name": "x", "namespace": "ns", "annotations": {"Example.COM/Key": "v", "k": big}}});
    assert_eq!(
        messages(&validate("", "ConfigMap", &obj, true)),
        ["metadata.annotations: Too long: may not be more than 262144 bytes"]
    );
}

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"}, "spec": spec})
}

fn good_template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": {"restartPolicy": "Always", "containers": [{"name": "web", "image": "nginx"}]}})
}

#[test]
fn workloads_need_a_matching_selector() {
    let ok = deployment(
        json!({"selector": {"matchLabels": {"app": "web"}}, "template": good_template()}),
    );
    assert!(validate("apps", "Deployment", &ok, true).is_empty());

    let missing = deployment(json!({"template": good_template()}));
    let errs = validate("apps", "Deployment", &missing, true);
    assert_eq!(
        invalid_message(&qualified_kind("apps", "Deployment"), "web", &errs),
        "Deployment.apps \"web\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`]"
    );

    let empty = deployment(json!({"selector": {}, "template": good_template()}));
    assert_eq!(
        messages(&validate("apps", "Deployment", &empty, true)),
        [
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
        ]
    );

    let exprs = deployment(
        json!({"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}, "template": good_template()}),
    );
    assert!(validate("apps", "Deployment", &exprs, true).is_empty());
    let exprs = deployment(
        json!({"selector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, "template": good_template()}),
    );
    assert_eq!(validate("apps", "Deployment", &exprs, true).len(), 1);

    let ds = json!({"metadata": {"name": "d", "namespace": "ns"}, "spec": {"selector": {}, "template": good_template()}});
    assert_eq!(
        messages(&validate("apps", "DaemonSet", &ds, true)),
        [
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for daemonset"
        ]
    );
    let sts = json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"app": "db"}}, "template": good_template()}});
    assert_eq!(
        messages(&validate("apps", "StatefulSet", &sts, true)),
        [
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
        ]
    );
}

#[test]
fn workload_templates_restart_always_and_need_containers() {
    let mut template = good_template();
    template["spec"]["restartPolicy"] = json!("Never");
    template["spec"]["containers"] = json!([]);
    let d = deployment(
        json!({"replicas": -1, "selector": {"matchLabels": {"app": "web"}}, "template": template}),
    );
    assert_eq!(
        messages(&validate("apps", "Deployment", &d, true)),
        [
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.spec.containers: Required value",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ]
    );
    let d = deployment(
        json!({"selector": {"matchLabels": {"app": "web"}}, "template": good_template(),
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}}),
    );
    assert_eq!(
        messages(&validate("apps", "Deployment", &d, true)),
        [
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0"
        ]
    );
}

#[test]
fn containers_volumes_and_ports() {
    let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
    "restartPolicy": "Sometimes",
    "dnsPolicy": "ClusterFirst",
    "volumes": [{"name": "data"}, {"name": "data"}],
    "containers": [
        {"name": "a", "image": "x", "ports": [{"containerPort": 70000, "protocol": "HTTP"}, {"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}],
         "volumeMounts": [{"name": "config", "mountPath": "/c"}, {"name": "data"}],
         "livenessProbe": {"periodSeconds": 3}},
        {"name": "a"},
        {"image": "y"},
    ]}});
    assert_eq!(
        messages(&validate("", "Pod", &pod, true)),
        [
            "spec.volumes[1].name: Duplicate value: \"data\"",
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "spec.containers[0].ports[2].name: Duplicate value: \"http\"",
            "spec.containers[0].volumeMounts[0].name: Not found: \"config\"",
            "spec.containers[0].volumeMounts[1].mountPath: Required value",
            "spec.containers[0].livenessProbe: Required value: must specify a handler type",
            "spec.containers[1].name: Duplicate value: \"a\"",
            "spec.containers[1].image: Required value",
            "spec.containers[2].name: Required value",
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        ]
    );
}

#[test]
fn jobs_and_cron_jobs() {
    let job = json!({"metadata": {"name": "j", "namespace": "ns"}, "spec": {"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "x"}]}}}});
    assert_eq!(
        messages(&validate("batch", "Job", &job, true)),
        [
            "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
        ]
    );
    let long = "j".repeat(64);
    let job = json!({"metadata": {"name": long, "namespace": "ns"}, "spec": {"template": {"metadata": {"labels": {"job-name": long}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
    assert_eq!(
        messages(&validate("batch", "Job", &job, true)),
        [format!(
            "spec.template.labels: Invalid value: \"{long}\": must be no more than 63 characters"
        )]
    );
    let cron_name = "c".repeat(53);
    let cron = json!({"metadata": {"name": cron_name, "namespace": "ns"}, "spec": {"concurrencyPolicy": "Sometimes", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "x"}]}}}}}});
    assert_eq!(
        messages(&validate("batch", "CronJob", &cron, true)),
        [
            format!("metadata.name: Invalid value: \"{cron_name}\": must be no more than 52 characters"),
            "spec.schedule: Required value".to_string(),
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"".to_string(),
        ]
    );
}

#[test]
fn services() {
    let svc = |spec: Value| json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": spec});
    assert_eq!(
        messages(&validate(
            "",
            "Service",
            &svc(json!({"type": "ClusterIP"})),
            true
        )),
        ["spec.ports: Required value"]
    );
    assert!(validate("", "Service", &svc(json!({"clusterIP": "None"})), true).is_empty());
    assert_eq!(
        messages(&validate(
            "",
            "Service",
            &svc(json!({
                "type": "Magic",
                "sessionAffinity": "Sticky",
                "ports": [{"port": 0, "targetPort": "Http_Port"}, {"name": "b", "port": 80, "nodePort": 30001}],
            })),
            true
        )),
        [
            "spec.type: Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            "spec.ports[0].name: Required value",
            "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[0].targetPort: Invalid value: \"Http_Port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            "spec.sessionAffinity: Unsupported value: \"Sticky\": supported values: \"ClientIP\", \"None\"",
        ]
    );
    assert_eq!(
        messages(&validate(
            "",
            "Service",
            &svc(json!({"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30001}]})),
            true
        )),
        ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
    );
    assert_eq!(
        messages(&validate(
            "",
            "Service",
            &svc(json!({"type": "ExternalName", "clusterIP": "10.96.1.1"})),
            true
        )),
        [
            "spec.clusterIP: Forbidden: may not be set for ExternalName services",
            "spec.externalName: Required value",
        ]
    );
    assert_eq!(
        messages(&validate(
            "",
            "Service",
            &svc(
                json!({"clusterIP": "1.2.3.4", "clusterIPs": ["1.2.3.4"], "ports": [{"port": 80}]})
            ),
            true
        )),
        [
            "spec.clusterIPs: Invalid value: []string{\"1.2.3.4\"}: failed to allocate IP 1.2.3.4: the provided IP (1.2.3.4) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        ]
    );
    assert_eq!(
        messages(&validate(
            "",
            "Service",
            &svc(json!({"clusterIP": "nope", "ports": [{"port": 80}]})),
            true
        )),
        [
            "spec.clusterIPs[0]: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        ]
    );
}

#[test]
fn config_maps_and_secrets() {
    let cm = json!({"metadata": {"name": "c", "namespace": "ns"}, "data": {"ok.key": "v", "bad key": "v", "..x": "v", "dup": "v"}, "binaryData": {"dup": "eA=="}});
    assert_eq!(
        messages(&validate("", "ConfigMap", &cm, true)),
        [
            "data[..x]: Invalid value: \"..x\": must not start with '..'",
            "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            "data[dup]: Invalid value: \"dup\": duplicate of key present in binaryData",
        ]
    );
    let big = json!({"metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "x".repeat(MAX_DATA_BYTES + 1)}});
    assert_eq!(
        messages(&validate("", "ConfigMap", &big, true)),
        [": Too long: may not be more than 1048576 bytes"]
    );
    let tls = json!({"metadata": {"name": "t", "namespace": "ns"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
    assert_eq!(
        messages(&validate("", "Secret", &tls, true)),
        ["data[tls.key]: Required value"]
    );
    let token = json!({"metadata": {"name": "t", "namespace": "ns"}, "type": "kubernetes.io/service-account-token"});
    assert_eq!(
        messages(&validate("", "Secret", &token, true)),
        ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
    );
}

#[test]
fn pvc_ingress_rbac_hpa_lease_crd() {
    let pvc = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"accessModes": ["ReadWriteSometimes"]}});
    assert_eq!(
        messages(&validate("", "PersistentVolumeClaim", &pvc, true)),
        [
            "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
            "spec.resources[storage]: Required value",
        ]
    );
    let ing = json!({"metadata": {"name": "i", "namespace": "ns"}, "spec": {"rules": [{"host": "*.example.com", "http": {"paths": [{"path": "x", "pathType": "Prefix"}, {"path": "/"}]}}]}});
    assert_eq!(
        messages(&validate("networking.k8s.io", "Ingress", &ing, true)),
        [
            "spec.rules[0].http.paths[0].path: Invalid value: \"x\": must be an absolute path",
            "spec.rules[0].http.paths[1].pathType: Required value: pathType must be specified",
        ]
    );
    let role = json!({"metadata": {"name": "r", "namespace": "ns"}, "rules": [{"verbs": []}, {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
    assert_eq!(
        messages(&validate("rbac.authorization.k8s.io", "Role", &role, true)),
        [
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[0].resources: Required value: resource rules must supply at least one resource",
            "rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
        ]
    );
    let crb = json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}, "subjects": [{"kind": "ServiceAccount", "name": "app"}, {"kind": "Robot", "name": "r"}]});
    assert_eq!(
        messages(&validate(
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            &crb,
            false
        )),
        [
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
            "subjects[0].namespace: Required value",
            "subjects[1].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
        ]
    );
    let hpa = json!({"metadata": {"name": "h", "namespace": "ns"}, "spec": {"scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 3, "maxReplicas": 2}});
    assert_eq!(
        messages(&validate(
            "autoscaling",
            "HorizontalPodAutoscaler",
            &hpa,
            true
        )),
        [
            "spec.scaleTargetRef.name: Required value",
            "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
        ]
    );
    let lease =
        json!({"metadata": {"name": "l", "namespace": "ns"}, "spec": {"leaseDurationSeconds": 0}});
    assert_eq!(
        messages(&validate("coordination.k8s.io", "Lease", &lease, true)),
        ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
    );
    let crd = json!({"metadata": {"name": "widgets.example.org"}, "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"}, "versions": [{"name": "v1", "storage": true}]}});
    assert_eq!(
        messages(&validate(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &crd,
            false
        )),
        [
            "metadata.name: Invalid value: \"widgets.example.org\": must be spec.names.plural+\".\"+spec.group"
        ]
    );
}

#[test]
fn every_recorded_apply_object_is_valid_once_defaulted() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kube-apiserver-v1.36/apply");
    for entry in std::fs::read_dir(&dir).expect("apply fixtures exist") {
        let path = entry.expect("readable dir").path();
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let f: Value = serde_json::from_str(&text).expect("JSON fixture");
        let body = &f["response"]["body"];
        if body["kind"] == "Status" {
            continue;
        }
        let api_version = body["apiVersion"].as_str().unwrap_or("");
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        let kind = body["kind"].as_str().unwrap_or("");
        let namespaced = body["metadata"].get("namespace").is_some();
        let errs = validate(group, kind, body, namespaced);
        assert!(errs.is_empty(), "{}: {:?}", path.display(), messages(&errs));
    }
}

#[test]
fn updates_keep_immutable_fields() {
    let old = deployment(
        json!({"selector": {"matchLabels": {"app": "web"}}, "template": good_template()}),
    );
    let mut new = old.clone();
    new["spec"]["selector"]["matchLabels"]["app"] = json!("web2");
    let errs = validate_update("apps", "Deployment", &old, &new);
    assert_eq!(
        invalid_message(&qualified_kind("apps", "Deployment"), "web", &errs),
        "Deployment.apps \"web\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
    );
    let mut scaled = old.clone();
    scaled["spec"]["replicas"] = json!(5);
    assert!(validate_update("apps", "Deployment", &old, &scaled).is_empty());

    let mut renamed = old.clone();
    renamed["metadata"]["name"] = json!("other");
    assert_eq!(
        messages(&validate_update("apps", "Deployment", &old, &renamed)),
        ["metadata.name: Invalid value: \"other\": field is immutable"]
    );

    let sts = json!({"metadata": {"name": "s"}, "spec": {"serviceName": "a", "replicas": 1}});
    let mut sts2 = sts.clone();
    sts2["spec"]["replicas"] = json!(3);
    assert!(validate_update("apps", "StatefulSet", &sts, &sts2).is_empty());
    sts2["spec"]["serviceName"] = json!("b");
    assert_eq!(
        messages(&validate_update("apps", "StatefulSet", &sts, &sts2)),
        [
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
        ]
    );
}

#[test]
fn update_rules_of_core_and_rbac_kinds() {
    let svc = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.1.1", "clusterIPs": ["10.96.1.1"]}});
    let svc2 = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.1.2", "clusterIPs": ["10.96.1.2"]}});
    assert_eq!(
        messages(&validate_update("", "Service", &svc, &svc2)),
        ["spec.clusterIPs[0]: Invalid value: []string{\"10.96.1.2\"}: may not change once set"]
    );
    assert!(validate_update("", "Service", &svc, &svc).is_empty());

    let cm = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}});
    let cm2 = json!({"metadata": {"name": "c"}, "data": {"a": "2"}});
    assert_eq!(
        messages(&validate_update("", "ConfigMap", &cm, &cm2)),
        [
            "immutable: Forbidden: field is immutable when `immutable` is set",
            "data: Forbidden: field is immutable when `immutable` is set",
        ]
    );
    let mutable = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
    assert!(validate_update("", "ConfigMap", &mutable, &cm2).is_empty());

    let secret = json!({"metadata": {"name": "s"}, "type": "Opaque"});
    let secret2 = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls"});
    assert_eq!(
        messages(&validate_update("", "Secret", &secret, &secret2)),
        ["type: Invalid value: \"kubernetes.io/tls\": field is immutable"]
    );

    let pvc = json!({"metadata": {"name": "p"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let mut grown = pvc.clone();
    grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    assert!(validate_update("", "PersistentVolumeClaim", &pvc, &grown).is_empty());
    grown["spec"]["accessModes"] = json!(["ReadWriteMany"]);
    assert_eq!(
        messages(&validate_update("", "PersistentVolumeClaim", &pvc, &grown)),
        [
            "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
        ]
    );

    let rb = json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "a"}});
    let rb2 = json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}});
    assert_eq!(
        messages(&validate_update(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            &rb,
            &rb2
        )),
        [
            "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
        ]
    );

    let job = json!({"metadata": {"name": "j"}, "spec": {"completionMode": "NonIndexed", "selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {"containers": [{"name": "c", "image": "x:1"}]}}}});
    let mut job2 = job.clone();
    job2["spec"]["template"]["spec"]["containers"][0]["image"] = json!("x:2");
    let errs = validate_update("batch", "Job", &job, &job2);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field, "spec.template");

    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}});
    let mut pod2 = pod.clone();
    pod2["spec"]["containers"][0]["image"] = json!("x:2");
    assert!(validate_update("", "Pod", &pod, &pod2).is_empty());
    pod2["spec"]["containers"][0]["command"] = json!(["sh"]);
    assert_eq!(
        validate_update("", "Pod", &pod, &pod2)[0].reason,
        FieldErrorReason::Forbidden
    );
}

#[test]
fn messages_quote_like_go_and_join_distinct_errors() {
    assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
    let e = FieldError::required("x", "");
    assert_eq!(
        invalid_message("ConfigMap", "n", &[e.clone(), e.clone()]),
        "ConfigMap \"n\" is invalid: x: Required value"
    );
    assert_eq!(
        invalid_message("ConfigMap", "n", &[]),
        "ConfigMap \"n\" is invalid"
    );
    assert_eq!(
        FieldErrorReason::NotSupported.as_str(),
        "FieldValueNotSupported"
    );
    assert_eq!(
        FieldError::too_long("f", 1).message,
        "Too long: may not be more than 1 byte"
    );
    assert_eq!(qualified_kind("apps", "Deployment"), "Deployment.apps");
}
