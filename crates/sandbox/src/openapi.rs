//! `/openapi/v3`: the recorded OpenAPI v3 documents of the built-in group versions, and
//! one generated from each CRD's schema. kubectl's `apply` fetches them.

use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha512};

use super::registry::Registry;

/// The built-in documents, by their path under `/openapi/v3/`.
const DOCUMENTS: &[(&str, &str)] = &[
    (
        "api/v1",
        include_str!("../../../assets/openapi-v3/api_v1.json"),
    ),
    (
        "apis/apps/v1",
        include_str!("../../../assets/openapi-v3/apis_apps_v1.json"),
    ),
    (
        "apis/batch/v1",
        include_str!("../../../assets/openapi-v3/apis_batch_v1.json"),
    ),
    (
        "apis/autoscaling/v2",
        include_str!("../../../assets/openapi-v3/apis_autoscaling_v2.json"),
    ),
    // Not recorded: derived from the recorded documents and upstream's published
    // schemas by `assets/openapi-v3/derive.py`.
    (
        "apis/autoscaling/v1",
        include_str!("../../../assets/openapi-v3/apis_autoscaling_v1.json"),
    ),
    (
        "apis/events.k8s.io/v1",
        include_str!("../../../assets/openapi-v3/apis_events.k8s.io_v1.json"),
    ),
    (
        "apis/networking.k8s.io/v1",
        include_str!("../../../assets/openapi-v3/apis_networking.k8s.io_v1.json"),
    ),
    (
        "apis/policy/v1",
        include_str!("../../../assets/openapi-v3/apis_policy_v1.json"),
    ),
    (
        "apis/rbac.authorization.k8s.io/v1",
        include_str!("../../../assets/openapi-v3/apis_rbac.authorization.k8s.io_v1.json"),
    ),
    (
        "apis/coordination.k8s.io/v1",
        include_str!("../../../assets/openapi-v3/apis_coordination.k8s.io_v1.json"),
    ),
    (
        "apis/apiextensions.k8s.io/v1",
        include_str!("../../../assets/openapi-v3/apis_apiextensions.k8s.io_v1.json"),
    ),
];

/// The recorded built-in documents, by path: the protobuf codec's tests check every
/// kind they define.
#[cfg(test)]
pub(crate) fn builtin_documents() -> &'static [(&'static str, &'static str)] {
    DOCUMENTS
}

/// `GET /openapi/v3`: every document with a content hash, as kube-apiserver lists them
/// (clients cache documents by that hash).
pub(crate) fn index(registry: &Registry) -> Value {
    // Hashing 4 MB of built-in documents takes a while; they never change.
    static BUILTIN: OnceLock<Vec<(String, Value)>> = OnceLock::new();
    let builtin = BUILTIN.get_or_init(|| {
        DOCUMENTS
            .iter()
            .map(|(path, document)| (path.to_string(), entry(path, document.as_bytes())))
            .collect()
    });
    let mut paths: serde_json::Map<String, Value> = builtin.iter().cloned().collect();
    for (group, version) in registry.custom_group_versions() {
        let path = format!("apis/{group}/{version}");
        let document = custom_document(registry, &group, &version);
        paths.insert(path.clone(), entry(&path, &document));
    }
    json!({ "paths": paths })
}

fn entry(path: &str, document: &[u8]) -> Value {
    let hash = hex::encode_upper(Sha512::digest(document));
    json!({ "serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}") })
}

/// `GET /openapi/v3/{path}`.
pub(crate) fn document(registry: &Registry, path: &str) -> Option<Bytes> {
    if let Some((_, document)) = DOCUMENTS.iter().find(|(p, _)| *p == path) {
        return Some(Bytes::from_static(document.as_bytes()));
    }
    let rest = path.strip_prefix("apis/")?;
    let (group, version) = rest.split_once('/')?;
    let types = registry.custom_types(group, version);
    if types.is_empty() {
        return None;
    }
    Some(Bytes::from(custom_document(registry, group, version)))
}

/// An OpenAPI v3 document for the CRD-served kinds of one group version, their schema
/// as the CRD declares it, tagged with `x-kubernetes-group-version-kind`.
fn custom_document(registry: &Registry, group: &str, version: &str) -> Vec<u8> {
    let mut schemas = serde_json::Map::new();
    let mut paths = serde_json::Map::new();
    let reversed_group: Vec<&str> = group.split('.').rev().collect();
    for resource in registry.custom_types(group, version) {
        let mut schema = registry
            .custom_schema(group, version, &resource.kind)
            .cloned()
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.insert("apiVersion".into(), json!({"type": "string"}));
            properties.insert("kind".into(), json!({"type": "string"}));
            properties.insert(
                "metadata".into(),
                json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]}),
            );
        }
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": group, "version": version, "kind": resource.kind}]);
        let name = format!("{}.{version}.{}", reversed_group.join("."), resource.kind);
        let gvk = json!({"group": group, "version": version, "kind": resource.kind});
        let collection = if resource.namespaced {
            format!(
                "/apis/{group}/{version}/namespaces/{{namespace}}/{}",
                resource.plural
            )
        } else {
            format!("/apis/{group}/{version}/{}", resource.plural)
        };
        // kubectl finds a kind's operations, and the query parameters they accept
        // (fieldValidation, dryRun, fieldManager, force), through these paths.
        let operation = |action: &str, params: &[&str]| {
            let parameters: Vec<Value> = params
                .iter()
                .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
                .collect();
            json!({
                "parameters": parameters,
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let writes = ["dryRun", "fieldManager", "fieldValidation"];
        paths.insert(
            collection.clone(),
            json!({"get": operation("list", &[]), "post": operation("post", &writes)}),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation("get", &[]),
                "put": operation("put", &writes),
                "patch": operation("patch", &["dryRun", "fieldManager", "fieldValidation", "force"]),
                "delete": operation("delete", &["dryRun"]),
            }),
        );
        schemas.insert(name, schema);
    }
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    let document = json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    });
    serde_json::to_vec(&document).unwrap_or_default()
}
