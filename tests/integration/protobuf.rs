//! Protobuf on the sandbox's wire (issue #15): the real `kubectl` sends built-in kinds
//! as `application/vnd.kubernetes.protobuf` and reads protobuf first; custom resources
//! stay JSON, as with kube-apiserver.

use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tether_sandbox::protobuf::{self, MEDIA_TYPE, WATCH_MEDIA_TYPE};
use tokio::io::AsyncReadExt as _;

use crate::support::{TestSandbox, eventually, read};

mod kinds;

/// What kubectl logs at `-v=8` for a protobuf request body and a protobuf answer.
const SENT_PROTOBUF: &str = "Content-Type: application/vnd.kubernetes.protobuf";

async fn stored(sandbox: &TestSandbox, path: &str) -> Value {
    let answer = sandbox.get(path).await;
    assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.text());
    answer.json()
}

#[tokio::test]
async fn kubectl_create_namespace_sends_protobuf() {
    let sandbox = TestSandbox::start().await;
    let out = sandbox
        .kubectl(&["create", "namespace", "demo", "-v=8"])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "namespace/demo created");
    assert!(out.stderr.contains(SENT_PROTOBUF), "{}", out.stderr);
    // kubectl reads the created object back from a protobuf answer, too.
    assert!(
        out.stderr
            .contains("Accept: application/vnd.kubernetes.protobuf"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches(SENT_PROTOBUF).count(),
        2,
        "a protobuf body and a protobuf answer: {}",
        out.stderr
    );
    let namespace = stored(&sandbox, "/api/v1/namespaces/demo").await;
    assert_eq!(namespace["metadata"]["name"], "demo");
    assert_eq!(namespace["status"]["phase"], "Active");
    // Go's zero values (generateName "", generation 0, an empty creationTimestamp) are
    // read as unset, not stored.
    assert!(namespace["metadata"].get("generateName").is_none());
    assert!(namespace["metadata"]["creationTimestamp"].is_string());
}

#[tokio::test]
async fn kubectl_create_deployment_stores_what_kube_apiserver_stores() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-deploy").await;
    let out = sandbox
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "-n",
            "pb-deploy",
        ])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "deployment.apps/web created");
    let deployment = stored(
        &sandbox,
        "/apis/apps/v1/namespaces/pb-deploy/deployments/web",
    )
    .await;
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(
        deployment["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "nginx");
    assert_eq!(container["image"], "nginx");
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(container["resources"], json!({}));
    assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(deployment["metadata"]["labels"], json!({"app": "web"}));
}

/// `replicas` is a Go pointer: a protobuf 0 is zero replicas, not "unset, default 1".
#[tokio::test]
async fn kubectl_create_deployment_with_zero_replicas_keeps_zero() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-zero").await;
    sandbox
        .kubectl(&[
            "create",
            "deployment",
            "idle",
            "--image=nginx",
            "--replicas=0",
            "-n",
            "pb-zero",
        ])
        .await
        .ok();
    let deployment = stored(
        &sandbox,
        "/apis/apps/v1/namespaces/pb-zero/deployments/idle",
    )
    .await;
    assert_eq!(deployment["spec"]["replicas"], 0);
    assert!(deployment["spec"].get("paused").is_none(), "{deployment}");
}

#[tokio::test]
async fn kubectl_create_configmap_and_secret() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-config").await;
    sandbox
        .kubectl(&[
            "create",
            "configmap",
            "settings",
            "--from-literal=level=info",
            "--from-literal=empty=",
            "-n",
            "pb-config",
        ])
        .await
        .ok();
    let config_map = stored(&sandbox, "/api/v1/namespaces/pb-config/configmaps/settings").await;
    assert_eq!(config_map["data"], json!({"level": "info", "empty": ""}));

    let out = sandbox
        .kubectl(&[
            "create",
            "secret",
            "generic",
            "token",
            "--from-literal=token=s3cr3t-value",
            "-n",
            "pb-config",
        ])
        .await;
    // Never print Secret data: only the verdicts.
    assert_eq!(out.code, 0, "kubectl create secret failed");
    assert_eq!(out.stdout.trim(), "secret/token created");
    let secret = stored(&sandbox, "/api/v1/namespaces/pb-config/secrets/token").await;
    let expected = base64::engine::general_purpose::STANDARD.encode("s3cr3t-value");
    assert!(
        secret["data"]["token"] == json!(expected),
        "the stored Secret holds the value sent, base64-encoded"
    );
    assert_eq!(secret["type"], "Opaque");
}

/// kubectl 1.32 reads `get -o yaml` (and `get -w`, as Tables) with `Accept:
/// application/json`: what a protobuf create stored reads back whole in JSON. Protobuf
/// reads are covered by the raw HTTP tests below.
#[tokio::test]
async fn kubectl_get_reads_what_a_protobuf_create_stored() {
    let sandbox = TestSandbox::start().await;
    sandbox.kubectl(&["create", "namespace", "demo"]).await.ok();
    let out = sandbox
        .kubectl(&["get", "ns", "demo", "-o", "yaml"])
        .await
        .ok();
    let namespace: Value = serde_saphyr::from_str(&out.stdout).expect("kubectl prints YAML");
    assert_eq!(namespace["metadata"]["name"], "demo");
    assert_eq!(namespace["kind"], "Namespace");
    assert_eq!(namespace["status"]["phase"], "Active");
    assert_eq!(
        namespace["spec"]["finalizers"],
        json!(["kubernetes"]),
        "{}",
        out.stdout
    );
}

/// `kubectl get -w` lists, then watches (in JSON, as Tables, from kubectl 1.32), and
/// prints a pod created once the watch is open.
#[tokio::test]
async fn kubectl_get_watch_sees_a_new_pod() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-watch").await;
    let mut watch = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .args(["get", "pods", "-w", "-n", "pb-watch", "-v=8"])
        .env("HOME", sandbox.dir.path())
        .env("KUBECACHEDIR", sandbox.dir.path().join("cache"))
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs");
    let mut stdout = watch.stdout.take().expect("kubectl's stdout");
    let mut stderr = watch.stderr.take().expect("kubectl's stderr");
    let logs = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    // Created only once the watch is open, so the pod arrives as a watch event.
    eventually("kubectl's watch on pods", || async {
        (sandbox.sandbox.requests().get("watch", "pods") > 0).then_some(())
    })
    .await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "watched"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let answer = sandbox.post("/api/v1/namespaces/pb-watch/pods", &pod).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text());
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !seen.contains("watched") {
        let read = tokio::time::timeout_at(deadline, stdout.read(&mut buffer))
            .await
            .unwrap_or_else(|_| panic!("the pod never showed; kubectl printed {seen:?}"))
            .expect("kubectl's stdout reads");
        if read == 0 {
            break;
        }
        seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    let _ = watch.kill().await;
    let logs = logs.await.unwrap_or_default();
    assert!(
        seen.contains("watched"),
        "kubectl printed {seen:?}; logs: {logs}"
    );
    assert!(logs.contains("watch=true"), "{logs}");
}

/// A protobuf `ConfigMap` body, as a Go client writes it.
fn config_map_body(name: &str) -> Vec<u8> {
    protobuf::encode_object(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"k": "v"}}))
    .expect("encodes")
}

async fn with_accept(sandbox: &TestSandbox, path: &str, accept: &str) -> crate::support::Answer {
    crate::support::read(
        sandbox
            .request(Method::GET, path)
            .header(reqwest::header::ACCEPT, accept),
    )
    .await
}

#[tokio::test]
async fn built_in_kinds_answer_protobuf_when_asked_first() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-raw").await;
    let created = sandbox
        .send(
            Method::POST,
            "/api/v1/namespaces/pb-raw/configmaps",
            Some(MEDIA_TYPE),
            Some(config_map_body("raw")),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    assert_eq!(created.content_type, "application/json");

    let accept = "application/vnd.kubernetes.protobuf, application/json";
    let object = with_accept(&sandbox, "/api/v1/namespaces/pb-raw/configmaps/raw", accept).await;
    assert_eq!(object.status, StatusCode::OK);
    assert_eq!(object.content_type, MEDIA_TYPE);
    let decoded = protobuf::decode_object(&object.body).expect("a protobuf ConfigMap");
    assert_eq!(decoded["data"], json!({"k": "v"}));
    assert_eq!(decoded["metadata"]["namespace"], "pb-raw");

    let list = with_accept(&sandbox, "/api/v1/namespaces/pb-raw/configmaps", accept).await;
    assert_eq!(list.content_type, MEDIA_TYPE);
    let decoded = protobuf::decode_object(&list.body).expect("a protobuf list");
    assert_eq!(decoded["kind"], "ConfigMapList");
    assert_eq!(decoded["items"][0]["metadata"]["name"], "raw");

    let missing = with_accept(
        &sandbox,
        "/api/v1/namespaces/pb-raw/configmaps/nope",
        accept,
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.content_type, MEDIA_TYPE);
    let status = protobuf::decode_object(&missing.body).expect("a protobuf Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["code"], 404);

    // JSON first is JSON.
    let json_first = with_accept(
        &sandbox,
        "/api/v1/namespaces/pb-raw/configmaps",
        "application/json, application/vnd.kubernetes.protobuf",
    )
    .await;
    assert_eq!(json_first.content_type, "application/json");
    assert_eq!(json_first.json()["kind"], "ConfigMapList");
}

/// Protobuf answers are written from the store's own encoding of each object (one per
/// resourceVersion): they must say what the JSON answers say, page for page, and a
/// changed object must answer its new version.
#[tokio::test]
async fn protobuf_reads_agree_with_json_reads_page_for_page() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-pages").await;
    let base = "/api/v1/namespaces/pb-pages/configmaps";
    for i in 0..5 {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "labels": {"odd": (i % 2 == 1).to_string()}},
            "data": {"i": i.to_string()}});
        assert_eq!(
            sandbox.post(base, &object).await.status,
            StatusCode::CREATED
        );
    }
    for query in ["", "?limit=2", "?labelSelector=odd%3Dtrue", "?limit=10"] {
        let path = format!("{base}{query}");
        let as_json = with_accept(&sandbox, &path, "application/json")
            .await
            .json();
        let answer = with_accept(&sandbox, &path, MEDIA_TYPE).await;
        assert_eq!(answer.content_type, MEDIA_TYPE, "{path}");
        let decoded = protobuf::decode_object(&answer.body).expect("a protobuf list");
        assert_eq!(decoded, as_json, "{path}");
    }
    // The next page, from the protobuf page's continue token.
    let first = protobuf::decode_object(
        &with_accept(&sandbox, &format!("{base}?limit=2"), MEDIA_TYPE)
            .await
            .body,
    )
    .expect("a page");
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token");
    let second = with_accept(
        &sandbox,
        &format!("{base}?limit=2&continue={token}"),
        MEDIA_TYPE,
    )
    .await;
    let second = protobuf::decode_object(&second.body).expect("a page");
    let names: Vec<&str> = second["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["cm-2", "cm-3"]);

    // Read in protobuf, changed, read again: the new version, not the first encoding.
    let path = format!("{base}/cm-0");
    let before = protobuf::decode_object(&with_accept(&sandbox, &path, MEDIA_TYPE).await.body)
        .expect("a ConfigMap");
    assert_eq!(before["data"]["i"], "0");
    let patched = read(
        sandbox
            .request(Method::PATCH, &path)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/merge-patch+json",
            )
            .body(r#"{"data":{"i":"changed"}}"#),
    )
    .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    let after = protobuf::decode_object(&with_accept(&sandbox, &path, MEDIA_TYPE).await.body)
        .expect("a ConfigMap");
    assert_eq!(after["data"]["i"], "changed");
    assert_eq!(
        after,
        with_accept(&sandbox, &path, "application/json")
            .await
            .json()
    );
}

#[tokio::test]
async fn a_garbled_protobuf_body_is_a_bad_request() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-bad").await;
    let answer = sandbox
        .send(
            Method::POST,
            "/api/v1/namespaces/pb-bad/configmaps",
            Some(MEDIA_TYPE),
            Some(b"k8s\x00\x0a\x40".to_vec()),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text());
    assert_eq!(answer.json()["reason"], "BadRequest");
}

#[tokio::test]
async fn protobuf_watch_frames_carry_enveloped_objects() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-frames").await;
    let mut response = sandbox
        .request(
            Method::GET,
            "/api/v1/namespaces/pb-frames/configmaps?watch=true&timeoutSeconds=5",
        )
        .header(reqwest::header::ACCEPT, MEDIA_TYPE)
        .send()
        .await
        .expect("the watch opens");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[reqwest::header::CONTENT_TYPE],
        WATCH_MEDIA_TYPE
    );
    let created = sandbox
        .send(
            Method::POST,
            "/api/v1/namespaces/pb-frames/configmaps",
            Some(MEDIA_TYPE),
            Some(config_map_body("framed")),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let (event_type, object) = first_watch_frame(&mut response).await;
    assert_eq!(event_type, "ADDED");
    assert_eq!(object["kind"], "ConfigMap");
    assert_eq!(object["metadata"]["name"], "framed");
    assert_eq!(object["data"], json!({"k": "v"}));
}

const WIDGETS: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

/// The first frame of a protobuf watch, read as its chunks arrive (10 s at most): its
/// event type and object.
async fn first_watch_frame(response: &mut reqwest::Response) -> (String, Value) {
    let mut pending = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok((event_type, object, _)) = protobuf::read_watch_frame(&pending) {
            return (event_type, object);
        }
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .expect("a frame arrives")
            .expect("the stream reads")
            .expect("the stream is open");
        pending.extend_from_slice(&chunk);
    }
}
