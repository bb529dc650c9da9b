//! Issue #31's small fidelity items: the options of a write as kube-apiserver's handlers
//! check them. A `fieldValidation` other than Ignore, Warn or Strict is a 422 on the
//! options kind (`CreateOptions`, `UpdateOptions`, `PatchOptions`) before the body is
//! read; a key given twice in a server-side apply body is a 400 under Strict (the
//! strict YAML decoder's `key "a" already set in map`), a warning under Warn, and
//! under Ignore silently the last value, as kube-apiserver's apply patcher does.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Answer, TestSandbox};

const NAMESPACE: &str = "write-options";
const CONFIGMAPS: &str = "/api/v1/namespaces/write-options/configmaps";

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": NAMESPACE}, "data": {"a": "1"}})
}

/// Line 8 repeats `a`: yaml.v2 names the line of the second key.
fn repeated_key_body(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\ndata:\n  a: \"1\"\n  a: \"2\"\n"
    )
}

async fn apply(sandbox: &TestSandbox, name: &str, body: &str, query: &str) -> Answer {
    sandbox
        .patch(
            &format!("{CONFIGMAPS}/{name}?fieldManager=test{query}"),
            "application/apply-patch+yaml",
            body,
        )
        .await
}

fn warnings(answer: &Answer) -> Vec<String> {
    answer
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect()
}

#[track_caller]
fn assert_unsupported_field_validation(answer: &Answer, options: &str) {
    assert_eq!(answer.status, 422, "{options}: {}", answer.text());
    let status = answer.json();
    let detail = r#"Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn""#;
    assert_eq!(
        status["message"],
        format!(r#"{options}.meta.k8s.io "" is invalid: fieldValidation: {detail}"#)
    );
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["group"], "meta.k8s.io");
    assert_eq!(status["details"]["kind"], options);
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldValueNotSupported", "message": detail, "field": "fieldValidation"}])
    );
}

/// A bogus `fieldValidation` was taken for Warn; kube-apiserver refuses the write with
/// 422 on its options, and stores nothing.
#[tokio::test]
async fn issue31_a_bogus_field_validation_is_refused_with_422() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace(NAMESPACE).await;
    let body = configmap("bogus").to_string().into_bytes();
    let query = "?fieldValidation=Bogus";
    let create = sandbox
        .send(
            Method::POST,
            &format!("{CONFIGMAPS}{query}"),
            Some("application/json"),
            Some(body.clone()),
        )
        .await;
    assert_unsupported_field_validation(&create, "CreateOptions");
    assert_eq!(
        sandbox.get(&format!("{CONFIGMAPS}/bogus")).await.status,
        404
    );

    let applied = apply(
        &sandbox,
        "bogus",
        &configmap("bogus").to_string(),
        "&fieldValidation=Bogus",
    )
    .await;
    assert_unsupported_field_validation(&applied, "PatchOptions");
    assert_eq!(
        sandbox.get(&format!("{CONFIGMAPS}/bogus")).await.status,
        404
    );

    assert_eq!(
        sandbox.post(CONFIGMAPS, &configmap("bogus")).await.status,
        201
    );
    let mut changed = configmap("bogus");
    changed["data"]["a"] = json!("changed");
    let update = sandbox
        .send(
            Method::PUT,
            &format!("{CONFIGMAPS}/bogus{query}"),
            Some("application/json"),
            Some(changed.to_string().into_bytes()),
        )
        .await;
    assert_unsupported_field_validation(&update, "UpdateOptions");
    let stored = sandbox.get(&format!("{CONFIGMAPS}/bogus")).await.json();
    assert_eq!(stored["data"]["a"], "1", "the update was not written");

    // The three values kube-apiserver knows, and none, are accepted.
    for value in [
        "",
        "&fieldValidation=Ignore",
        "&fieldValidation=Warn",
        "&fieldValidation=Strict",
    ] {
        let answer = apply(&sandbox, "bogus", &configmap("bogus").to_string(), value).await;
        assert_eq!(answer.status, 200, "{value}: {}", answer.text());
    }
}

/// A key given twice in a server-side apply body was refused whatever `fieldValidation`
/// said (the sandbox's YAML decoder refused duplicates); kube-apiserver refuses it only
/// under Strict, warns under Warn, and keeps the last value.
#[tokio::test]
async fn issue31_a_repeated_key_in_server_side_apply_is_an_error_only_under_strict() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace(NAMESPACE).await;
    let strict = apply(
        &sandbox,
        "dup",
        &repeated_key_body("dup"),
        "&fieldValidation=Strict",
    )
    .await;
    assert_eq!(strict.status, 400, "{}", strict.text());
    let status = strict.json();
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 8: key \"a\" already set in map"
    );
    assert_eq!(sandbox.get(&format!("{CONFIGMAPS}/dup")).await.status, 404);

    // Warn, also the default: written with the last value, and a warning per key.
    for (name, query) in [("dup-warn", "&fieldValidation=Warn"), ("dup-default", "")] {
        let warned = apply(&sandbox, name, &repeated_key_body(name), query).await;
        assert_eq!(warned.status, 201, "{query}: {}", warned.text());
        assert_eq!(warned.json()["data"], json!({"a": "2"}));
        assert_eq!(
            warnings(&warned),
            [r#"299 - "line 8: key \"a\" already set in map""#],
            "{query}"
        );
    }

    let ignored = apply(
        &sandbox,
        "dup-ignore",
        &repeated_key_body("dup-ignore"),
        "&fieldValidation=Ignore",
    )
    .await;
    assert_eq!(ignored.status, 201, "{}", ignored.text());
    assert_eq!(ignored.json()["data"], json!({"a": "2"}));
    assert!(warnings(&ignored).is_empty());
}
