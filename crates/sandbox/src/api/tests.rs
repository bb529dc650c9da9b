//! Unit tests of the API's routing, continue tokens and write checks.

use std::collections::HashMap;

use http::Method;
use serde_json::json;

use super::commit::spec_changed;
use super::read::{decode_continue, encode_continue};
use super::write::check_type;
use super::{resource_of, verb_of};
use crate::registry::Registry;

#[test]
fn counters_name_verbs_and_resources() {
    let q = HashMap::new();
    let watch: HashMap<String, String> = [("watch".to_string(), "1".to_string())].into();
    assert_eq!(
        verb_of(&Method::GET, "/api/v1/namespaces/a/configmaps/x", &q),
        "get"
    );
    assert_eq!(
        verb_of(&Method::GET, "/api/v1/namespaces/a/configmaps", &q),
        "list"
    );
    assert_eq!(
        verb_of(&Method::GET, "/apis/apps/v1/deployments", &watch),
        "watch"
    );
    assert_eq!(verb_of(&Method::GET, "/api/v1/namespaces/a", &q), "get");
    assert_eq!(
        verb_of(&Method::DELETE, "/api/v1/namespaces/a/configmaps", &q),
        "deletecollection"
    );
    assert_eq!(
        verb_of(
            &Method::PATCH,
            "/apis/apps/v1/namespaces/a/deployments/web/scale",
            &q
        ),
        "patch"
    );
    assert_eq!(
        resource_of("/apis/apps/v1/namespaces/a/deployments/web"),
        "apps/deployments"
    );
    assert_eq!(resource_of("/api/v1/namespaces/a"), "namespaces");
    assert_eq!(resource_of("/api/v1/namespaces/a/configmaps"), "configmaps");
    assert_eq!(resource_of("/apis/apps/v1"), "discovery");
}

#[test]
fn continue_tokens_round_trip_and_reject_garbage() {
    let key = ("ns".to_string(), "name".to_string());
    assert_eq!(
        decode_continue(&encode_continue(&key, 42)).unwrap(),
        (key, 42)
    );
    assert!(decode_continue("not-a-token").is_err());
}

#[test]
fn generation_ignores_metadata_and_status() {
    let old = json!({"metadata": {"labels": {}}, "spec": {"replicas": 1}, "status": {}});
    let relabelled = json!({"metadata": {"labels": {"x": "y"}}, "spec": {"replicas": 1}, "status": {"ready": 1}});
    let scaled = json!({"metadata": {}, "spec": {"replicas": 2}});
    assert!(!spec_changed(&old, &relabelled));
    assert!(spec_changed(&old, &scaled));
}

#[test]
fn kind_mismatch_reads_like_the_real_server() {
    let registry = Registry::builtin();
    let configmaps = registry.find("", "v1", "configmaps").unwrap();
    let err = check_type(&configmaps, &json!({"apiVersion": "v1", "kind": "Secret"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"
    );
}
