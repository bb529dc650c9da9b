use serde_json::{Value, json};

use super::*;

fn deployment() -> Schema {
    Schemas::builtin()
        .get("apps", "v1", "Deployment")
        .expect("Deployment is built in")
}

fn path<'a>(mut node: Node<'a>, steps: &[&str]) -> Node<'a> {
    for step in steps {
        node = if *step == "[]" {
            node.items().expect("a list")
        } else {
            node.field(step)
                .unwrap_or_else(|| panic!("no field {step}"))
        };
    }
    node
}

#[test]
fn builtin_deployment_has_the_merge_rules_of_the_real_server() {
    let schema = deployment();
    let pod = path(schema.root(), &["spec", "template", "spec"]);
    let containers = path(pod, &["containers"]);
    assert_eq!(
        containers.kind(),
        NodeKind::List(&ListType::Map {
            keys: vec!["name".into()]
        })
    );
    let ports = path(containers, &["[]", "ports"]);
    assert_eq!(
        ports.list_type(),
        Some(&ListType::Map {
            keys: vec!["containerPort".into(), "protocol".into()]
        })
    );
    assert_eq!(ports.key_default("protocol"), Some(&json!("TCP")));
    assert_eq!(ports.key_default("containerPort"), Some(&json!(0)));
    assert_eq!(
        path(schema.root(), &["spec", "selector"]).kind(),
        NodeKind::Struct { atomic: true }
    );
    let secret_ref = path(
        containers,
        &["[]", "env", "[]", "valueFrom", "secretKeyRef"],
    );
    assert_eq!(secret_ref.kind(), NodeKind::Struct { atomic: true });
    assert_eq!(
        path(containers, &["[]", "command"]).kind(),
        NodeKind::List(&ListType::Atomic)
    );
    assert_eq!(
        path(containers, &["[]", "readinessProbe", "httpGet", "port"]).kind(),
        NodeKind::Scalar(ScalarType::IntOrString)
    );
    assert_eq!(
        path(containers, &["[]", "resources", "limits"]).kind(),
        NodeKind::Map { atomic: false }
    );
    assert_eq!(
        path(containers, &["[]", "resources", "limits", "cpu"]).kind(),
        NodeKind::Scalar(ScalarType::StringOrNumber)
    );
    let meta = path(schema.root(), &["metadata"]);
    assert_eq!(
        path(meta, &["finalizers"]).kind(),
        NodeKind::List(&ListType::Set)
    );
    assert_eq!(
        path(meta, &["labels"]).kind(),
        NodeKind::Map { atomic: false }
    );
    assert!(meta.field("noSuchField").is_none());
    let strategy = pod.field_patch_strategy("containers").expect("a strategy");
    assert!(strategy.merge);
    assert_eq!(strategy.merge_key.as_deref(), Some("name"));
    let deploy_strategy = path(schema.root(), &["spec"])
        .field_patch_strategy("strategy")
        .expect("retainKeys on strategy");
    assert!(deploy_strategy.retain_keys);
}

#[test]
fn every_embedded_group_version_parses_and_serves_its_kinds() {
    let schemas = Schemas::builtin();
    let kinds = [
        ("", "v1", "ConfigMap"),
        ("", "v1", "Service"),
        ("", "v1", "Pod"),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        ("apps", "v1", "StatefulSet"),
        ("autoscaling", "v1", "HorizontalPodAutoscaler"),
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
        ("events.k8s.io", "v1", "Event"),
        ("batch", "v1", "CronJob"),
        ("coordination.k8s.io", "v1", "Lease"),
        ("networking.k8s.io", "v1", "Ingress"),
        ("policy", "v1", "PodDisruptionBudget"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    ];
    for (g, v, k) in kinds {
        let schema = schemas
            .get(g, v, k)
            .unwrap_or_else(|| panic!("{g}/{v} {k} missing"));
        assert!(schema.root().declares("metadata"), "{k}");
    }
    assert!(schemas.get("apps", "v1", "NoSuchKind").is_none());
    assert!(schemas.get("example.com", "v1", "Widget").is_none());
    assert!(schemas.get("apps", "v2", "Deployment").is_none());
}

/// Regression (issue #18, memory): a kind's schema holds what it reaches, not its whole
/// document; the first ConfigMap of `tether serve` converted all of the core group's
/// types and parsed its 1.6 MB document whole, megabytes for a few dozen types.
#[test]
fn a_kind_converts_only_the_types_it_reaches() {
    let schemas = Schemas::builtin();
    let cm = schemas.get("", "v1", "ConfigMap").expect("ConfigMap");
    let pod = schemas.get("", "v1", "Pod").expect("Pod");
    let doc = schemas.document("", "v1").expect("the core document");
    // ConfigMap: itself, ObjectMeta and what that holds (owner references, managed
    // fields, times): a few dozen types, where the document has hundreds of components
    // and a Pod alone reaches hundreds of types.
    assert!(doc.components.len() > 200, "{}", doc.components.len());
    assert!(cm.arena.types.len() < 60, "{}", cm.arena.types.len());
    assert!(pod.arena.types.len() > cm.arena.types.len());
    assert_eq!(
        path(cm.root(), &["data"]).kind(),
        NodeKind::Map { atomic: false }
    );
    assert_eq!(
        path(pod.root(), &["spec", "containers"]).kind(),
        NodeKind::List(&ListType::Map {
            keys: vec!["name".into()]
        })
    );
    // A kind is converted once: a second look shares the first one's arena.
    let again = schemas.get("", "v1", "ConfigMap").expect("ConfigMap");
    assert!(Arc::ptr_eq(&cm.arena, &again.arena));
    // A component that is no kind of this group version is not served as one.
    assert!(schemas.get("", "v1", "ObjectMeta").is_none());
    assert!(schemas.get("", "v1", "Deployment").is_none());
}

#[test]
fn recursive_types_resolve_without_looping() {
    let crd = Schemas::builtin()
        .get("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
        .expect("CRD schema");
    let versions = path(crd.root(), &["spec", "versions"]);
    assert_eq!(versions.kind(), NodeKind::List(&ListType::Atomic));
    let props = path(versions, &["[]", "schema", "openAPIV3Schema"]);
    // JSONSchemaProps → properties (a map of JSONSchemaProps) → … as deep as asked.
    let mut node = props;
    for _ in 0..50 {
        node = path(node, &["properties", "anything"]);
    }
    assert_eq!(node.kind(), NodeKind::Struct { atomic: false });
    assert_eq!(
        path(node, &["type"]).kind(),
        NodeKind::Scalar(ScalarType::String)
    );
}

#[test]
fn crd_schema_gets_object_meta_and_its_extensions() {
    let schema = Schema::from_openapi_v3(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer", "default": 1},
                    "port": {"x-kubernetes-int-or-string": true},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "selector": {
                        "type": "object",
                        "x-kubernetes-map-type": "atomic",
                        "properties": {"app": {"type": "string"}}
                    },
                    "items": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["id"],
                        "items": {"type": "object", "properties": {"id": {"type": "string"}}}
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "open": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"known": {"type": "boolean"}}
                    }
                }
            }
        }
    }));
    let root = schema.root();
    assert_eq!(
        path(root, &["metadata", "labels"]).kind(),
        NodeKind::Map { atomic: false }
    );
    assert_eq!(
        path(root, &["metadata", "finalizers"]).kind(),
        NodeKind::List(&ListType::Set)
    );
    let spec = path(root, &["spec"]);
    assert_eq!(spec.field_default("size"), Some(&json!(1)));
    assert_eq!(
        path(spec, &["port"]).kind(),
        NodeKind::Scalar(ScalarType::IntOrString)
    );
    assert_eq!(path(spec, &["extra"]).kind(), NodeKind::Untyped);
    assert_eq!(path(spec, &["extra", "a", "b"]).kind(), NodeKind::Untyped);
    assert_eq!(
        path(spec, &["selector"]).kind(),
        NodeKind::Struct { atomic: true }
    );
    assert_eq!(
        path(spec, &["items"]).kind(),
        NodeKind::List(&ListType::Map {
            keys: vec!["id".into()]
        })
    );
    assert_eq!(path(spec, &["tags"]).kind(), NodeKind::List(&ListType::Set));
    assert_eq!(path(spec, &["open", "whatever"]).kind(), NodeKind::Untyped);
    assert!(spec.field("undeclared").is_none());
}

#[test]
fn untyped_schema_merges_maps_and_keeps_lists_atomic() {
    let schema = Schema::untyped();
    let root = schema.root();
    assert_eq!(path(root, &["spec", "anything"]).kind(), NodeKind::Untyped);
    assert_eq!(
        path(root, &["metadata"]).kind(),
        NodeKind::Struct { atomic: false }
    );
    assert_eq!(
        path(root, &["metadata", "finalizers"]).kind(),
        NodeKind::List(&ListType::Set)
    );
    assert!(root.list_type().is_none());
}

#[test]
fn paths_render_as_in_conflict_messages() {
    let p = vec![
        PathElement::Field("spec".into()),
        PathElement::Field("template".into()),
        PathElement::Field("spec".into()),
        PathElement::Field("containers".into()),
        PathElement::key(vec![("name".into(), json!("web"))]),
        PathElement::Field("image".into()),
    ];
    assert_eq!(
        render_path(&p),
        ".spec.template.spec.containers[name=\"web\"].image"
    );
    let port = PathElement::key(vec![
        ("protocol".into(), json!("TCP")),
        ("containerPort".into(), json!(8080)),
    ]);
    assert_eq!(port.to_string(), "[containerPort=8080,protocol=\"TCP\"]");
    assert_eq!(
        port.to_fields_v1(),
        "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}"
    );
    assert_eq!(PathElement::Value(json!("a")).to_string(), "[=\"a\"]");
    assert_eq!(PathElement::Index(3).to_string(), "[3]");
}

#[test]
fn path_elements_round_trip_and_order_as_fields_v1() {
    for key in [
        "f:spec",
        "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}",
        "v:\"example.com/hold\"",
        "v:3",
        "i:2",
    ] {
        let pe = PathElement::from_fields_v1(key).expect(key);
        assert_eq!(pe.to_fields_v1(), key);
    }
    assert!(PathElement::from_fields_v1("x:1").is_none());
    assert!(PathElement::from_fields_v1("k:[1]").is_none());
    assert!(PathElement::from_fields_v1("").is_none());
    let mut v = [
        PathElement::Index(0),
        PathElement::Value(json!("b")),
        PathElement::key(vec![("name".into(), json!("web"))]),
        PathElement::Field("b".into()),
        PathElement::key(vec![("name".into(), json!("sidecar"))]),
        PathElement::Field("a".into()),
        PathElement::Value(json!(1)),
    ];
    v.sort();
    let keys: Vec<String> = v.iter().map(PathElement::to_fields_v1).collect();
    assert_eq!(
        keys,
        [
            "f:a",
            "f:b",
            "k:{\"name\":\"sidecar\"}",
            "k:{\"name\":\"web\"}",
            "v:1",
            "v:\"b\"",
            "i:0"
        ]
    );
}

#[test]
fn value_order_is_total_across_types() {
    use std::cmp::Ordering::*;
    assert_eq!(compare_values(&json!(2), &json!(10)), Less);
    assert_eq!(compare_values(&json!(1.5), &json!(1)), Greater);
    assert_eq!(compare_values(&json!(99), &json!("a")), Less);
    assert_eq!(compare_values(&json!("a"), &json!(true)), Less);
    assert_eq!(compare_values(&json!(true), &json!([1])), Less);
    assert_eq!(compare_values(&json!([1]), &json!({})), Less);
    assert_eq!(compare_values(&json!({}), &Value::Null), Less);
    assert_eq!(
        compare_values(&json!({"b": 1, "a": 2}), &json!({"a": 2, "b": 1})),
        Equal
    );
    assert_eq!(compare_values(&json!([1, 2]), &json!([1])), Greater);
}

#[test]
fn validate_reports_wrong_types_as_the_api_server_words_them() {
    let schema = deployment();
    let result = schema.validate(&json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": "abc",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [
                {"name": "web", "image": 5, "ports": [{"containerPort": 80}],
                 "readinessProbe": {"httpGet": {"port": "http"}},
                 "livenessProbe": {"httpGet": {"port": 8080}},
                 "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}},
                {"name": "x", "args": "not-a-list", "env": null}
            ]}}
        }
    }));
    let fields: Vec<&str> = result
        .type_errors
        .iter()
        .map(|e| e.field.as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.replicas",
            "spec.template.spec.containers[0].image",
            "spec.template.spec.containers[1].args"
        ]
    );
    assert_eq!(
        result.type_errors[0].message(),
        "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
    );
    assert_eq!(
        result.type_errors[1].kind,
        FieldErrorKind::WrongType {
            expected: "string",
            found: "integer"
        }
    );
    assert_eq!(
        result.type_errors[2].kind,
        FieldErrorKind::WrongType {
            expected: "array",
            found: "string"
        }
    );
    assert!(result.unknown_fields.is_empty());
    assert!(!result.type_errors.is_empty());
}

#[test]
fn validate_lists_unknown_fields_separately() {
    let schema = deployment();
    let result = schema.validate(&json!({
        "metadata": {"name": "web", "colour": "red"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "imagePullPolcy": "Always"}]}}},
        "extra": true
    }));
    assert!(result.type_errors.is_empty());
    let fields: Vec<&str> = result
        .unknown_fields
        .iter()
        .map(|e| e.field.as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "metadata.colour",
            "spec.template.spec.containers[0].imagePullPolcy",
            "extra"
        ]
    );
    assert_eq!(
        result.unknown_fields[0].message(),
        "unknown field \"metadata.colour\""
    );
    let clean =
        schema.validate(&json!({"spec": {"replicas": 2}, "metadata": {"labels": {"a": "b"}}}));
    assert!(clean.type_errors.is_empty() && clean.unknown_fields.is_empty());
}

#[test]
fn validate_accepts_anything_below_preserved_unknown_fields() {
    let schema = Schema::from_openapi_v3(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                       "size": {"type": "integer"}}
    }));
    let result =
        schema.validate(&json!({"spec": {"a": [1, {"b": null}]}, "size": 1.5, "other": 1}));
    assert_eq!(result.type_errors.len(), 1);
    assert_eq!(result.type_errors[0].field, "size");
    assert_eq!(result.unknown_fields.len(), 1);
    assert_eq!(result.unknown_fields[0].field, "other");
}

#[test]
fn zero_object_has_non_pointer_structs_and_required_lists() {
    let zero = deployment().zero_object();
    assert_eq!(zero["metadata"], json!({}));
    assert_eq!(zero["spec"]["template"]["metadata"], json!({}));
    assert_eq!(zero["spec"]["template"]["spec"]["containers"], Value::Null);
    assert_eq!(zero["spec"]["strategy"], json!({}));
    assert!(zero["spec"].get("replicas").is_none());
    let cm = Schemas::builtin()
        .get("", "v1", "ConfigMap")
        .expect("ConfigMap");
    assert_eq!(cm.zero_object(), json!({"metadata": {}}));
    let crd = Schema::from_openapi_v3(&json!({"type": "object", "properties": {
        "spec": {"type": "object", "default": {}, "properties": {"a": {"type": "string"}}}}}));
    assert_eq!(crd.zero_object(), json!({}));
    assert_eq!(Schema::untyped().zero_object(), json!({}));
}

#[test]
fn list_items_are_identified_as_the_server_identifies_them() {
    let schema = Schemas::builtin()
        .get("apps", "v1", "Deployment")
        .expect("Deployment");
    let containers = path(schema.root(), &["spec", "template", "spec", "containers"]);
    let ports = path(containers, &["[]", "ports"]);
    assert_eq!(
        ports
            .item_element(0, &json!({"containerPort": 80, "name": "http"}))
            .map(|pe| pe.to_string()),
        Ok("[containerPort=80,protocol=\"TCP\"]".to_string())
    );
    assert!(ports.item_element(0, &json!("80")).is_err());
    let finalizers = path(schema.root(), &["metadata", "finalizers"]);
    assert_eq!(
        finalizers.item_element(1, &json!("a/b")),
        Ok(PathElement::Value(json!("a/b")))
    );
    let command = path(containers, &["[]", "command"]);
    assert_eq!(
        command.item_element(2, &json!("sh")),
        Ok(PathElement::Index(2))
    );
    assert!(Schemas::builtin().get("", "v1", "Secret").is_some());
}
