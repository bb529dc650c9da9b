//! The sandbox's API over raw HTTPS: every verb, the error codes a client must handle,
//! watch semantics, subresources, deletion with finalizers and garbage collection,
//! dry runs, CRDs in discovery, and the fault injection and counters other tests rely
//! on. Each test has its own sandbox and namespace.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestSandbox, event_types, eventually};

mod deletion;
mod deployments;
mod server;

const CM: &str = "application/merge-patch+json";

fn configmap(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}})
}

const WIDGET_CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}},
      "subresources": {"status": {}}}]}}"#;

/// Item names of a list answer, in order.
fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|i| {
            i["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("a resourceVersion in {object}"))
}

#[track_caller]
fn assert_status(answer: &crate::support::Answer, code: u16, reason: &str) -> Value {
    assert_eq!(answer.status.as_u16(), code, "{}", answer.text());
    let status = answer.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], reason, "{status}");
    assert_eq!(status["code"], code);
    status
}

async fn with_configmaps(ns: &str, maps: &[(&str, Value)]) -> TestSandbox {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace(ns).await;
    for (name, labels) in maps {
        let answer = sandbox
            .post(
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                &configmap(name, labels.clone()),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text());
    }
    sandbox
}

#[tokio::test]
async fn get_and_list_select_by_labels_and_fields() {
    let sandbox = with_configmaps(
        "h-select",
        &[
            ("a", json!({"app": "web", "tier": "front"})),
            ("b", json!({"app": "web", "tier": "back"})),
            ("c", json!({"app": "db"})),
            ("d", json!({})),
        ],
    )
    .await;
    let got = sandbox
        .get("/api/v1/namespaces/h-select/configmaps/a")
        .await;
    assert_eq!(got.status, StatusCode::OK);
    let got = got.json();
    assert_eq!(
        (got["kind"].as_str(), got["apiVersion"].as_str()),
        (Some("ConfigMap"), Some("v1"))
    );
    assert_eq!(got["data"]["k"], "v");

    for (selector, expected) in [
        ("app=web", vec!["a", "b"]),
        ("app!=web", vec!["c", "d"]),
        ("tier in (front,back)", vec!["a", "b"]),
        ("tier notin (front)", vec!["b", "c", "d"]),
        ("tier", vec!["a", "b"]),
        ("!tier", vec!["c", "d"]),
        ("app=web,tier=back", vec!["b"]),
    ] {
        let encoded: String = url::form_urlencoded::byte_serialize(selector.as_bytes()).collect();
        let list = sandbox.request(
            Method::GET,
            &format!("/api/v1/namespaces/h-select/configmaps?labelSelector={encoded}"),
        );
        let list = crate::support::read(list).await;
        assert_eq!(list.status, StatusCode::OK, "{selector}: {}", list.text());
        assert_eq!(names(&list.json()), expected, "{selector}");
    }

    let list = sandbox
        .get("/api/v1/namespaces/h-select/configmaps?fieldSelector=metadata.name%3Db")
        .await
        .json();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(names(&list), ["b"]);
    // Across namespaces, narrowed by the namespace field.
    let list = sandbox
        .get("/api/v1/configmaps?fieldSelector=metadata.namespace%3Dh-select")
        .await
        .json();
    assert_eq!(names(&list), ["a", "b", "c", "d"]);
    // Built-in list items carry no kind, as kube-apiserver's JSON lists.
    assert!(list["items"][0].get("kind").is_none());

    let bad = sandbox
        .get("/api/v1/namespaces/h-select/configmaps?labelSelector=in%20in%20in")
        .await;
    assert_status(&bad, 400, "BadRequest");
}

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let maps: Vec<(&str, Value)> = ["p1", "p2", "p3", "p4", "p5"]
        .into_iter()
        .map(|n| (n, json!({})))
        .collect();
    let sandbox = with_configmaps("h-pages", &maps).await;
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let mut path = "/api/v1/namespaces/h-pages/configmaps?limit=2".to_string();
        if !token.is_empty() {
            path.push_str(&format!("&continue={token}"));
        }
        let page = sandbox.get(&path).await.json();
        seen.extend(names(&page));
        pages.push((
            names(&page).len(),
            page["metadata"]["remainingItemCount"].as_u64(),
        ));
        match page["metadata"]["continue"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_string(),
            _ => break,
        }
    }
    assert_eq!(seen, ["p1", "p2", "p3", "p4", "p5"]);
    assert_eq!(pages, [(2, Some(3)), (2, Some(1)), (1, None)]);
    let bad = sandbox
        .get("/api/v1/namespaces/h-pages/configmaps?limit=2&continue=garbage")
        .await;
    assert_status(&bad, 400, "BadRequest");
}

#[tokio::test]
async fn watch_sees_added_modified_deleted_in_order() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-watch").await;
    sandbox.namespace("h-other").await;
    let list = sandbox
        .get("/api/v1/namespaces/h-watch/configmaps")
        .await
        .json();
    let from = rv(&list);
    let path = format!("/api/v1/namespaces/h-watch/configmaps?watch=true&resourceVersion={from}");
    let watch = sandbox.watch_until(&path, Duration::from_secs(10), |events| events.len() >= 3);
    let writes = async {
        eventually("the watch to start", || async {
            (sandbox.sandbox.requests().get("watch", "configmaps") > 0).then_some(())
        })
        .await;
        let cm = configmap("w", json!({}));
        // Another namespace's change must not reach this watch.
        sandbox
            .post("/api/v1/namespaces/h-other/configmaps", &cm)
            .await;
        sandbox
            .post("/api/v1/namespaces/h-watch/configmaps", &cm)
            .await;
        sandbox
            .patch(
                "/api/v1/namespaces/h-watch/configmaps/w",
                CM,
                r#"{"data":{"k":"2"}}"#,
            )
            .await;
        sandbox
            .delete("/api/v1/namespaces/h-watch/configmaps/w")
            .await;
    };
    let (events, ()) = tokio::join!(watch, writes);
    assert_eq!(event_types(&events), ["ADDED", "MODIFIED", "DELETED"]);
    let versions: Vec<u64> = events.iter().map(|e| rv(&e["object"])).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    assert!(
        events
            .iter()
            .all(|e| e["object"]["metadata"]["namespace"] == "h-watch")
    );
    assert_eq!(events[1]["object"]["data"]["k"], "2");
    assert_eq!(events[2]["object"]["kind"], "ConfigMap");
}

#[tokio::test]
async fn watch_from_a_resource_version_replays_later_changes_only() {
    let sandbox = with_configmaps("h-replay", &[("a", json!({}))]).await;
    let a = sandbox
        .get("/api/v1/namespaces/h-replay/configmaps/a")
        .await
        .json();
    sandbox
        .patch(
            "/api/v1/namespaces/h-replay/configmaps/a",
            CM,
            r#"{"data":{"k":"2"}}"#,
        )
        .await;
    sandbox
        .post(
            "/api/v1/namespaces/h-replay/configmaps",
            &configmap("b", json!({})),
        )
        .await;
    let path = format!(
        "/api/v1/namespaces/h-replay/configmaps?watch=1&resourceVersion={}&timeoutSeconds=1",
        rv(&a)
    );
    let events = sandbox
        .watch_until(&path, Duration::from_secs(5), |_| false)
        .await;
    assert_eq!(event_types(&events), ["MODIFIED", "ADDED"]);
    assert_eq!(events[0]["object"]["metadata"]["name"], "a");
    assert_eq!(events[1]["object"]["metadata"]["name"], "b");

    // Without a resourceVersion, a watch starts with the current objects as ADDED.
    let events = sandbox
        .watch_until(
            "/api/v1/namespaces/h-replay/configmaps?watch=1",
            Duration::from_secs(5),
            |events| events.len() >= 2,
        )
        .await;
    assert_eq!(event_types(&events), ["ADDED", "ADDED"]);
}

#[tokio::test]
async fn a_watch_with_bookmarks_ends_with_a_bookmark() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-bookmark").await;
    let from = rv(&sandbox
        .get("/api/v1/namespaces/h-bookmark/configmaps")
        .await
        .json());
    let path = format!(
        "/api/v1/namespaces/h-bookmark/configmaps?watch=1&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=1"
    );
    let watch = sandbox.watch_until(&path, Duration::from_secs(5), |_| false);
    let write = async {
        eventually("the watch to start", || async {
            (sandbox.sandbox.requests().get("watch", "configmaps") > 0).then_some(())
        })
        .await;
        sandbox
            .post(
                "/api/v1/namespaces/h-bookmark/configmaps",
                &configmap("x", json!({})),
            )
            .await
            .json()
    };
    let started = Instant::now();
    let (events, created) = tokio::join!(watch, write);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the watch ends at its timeout"
    );
    assert_eq!(event_types(&events), ["ADDED", "BOOKMARK"]);
    let bookmark = &events[1]["object"];
    assert_eq!(bookmark["kind"], "ConfigMap");
    assert_eq!(rv(bookmark), rv(&created));
    // Counted as a watch the server ended at its timeout (one a client re-establishes).
    eventually("the watch is counted as ended at its timeout", || async {
        let watches = sandbox.sandbox.watches();
        (watches.timed_out == 1 && watches.open.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_watch_from_an_expired_resource_version_gets_410() {
    let sandbox = with_configmaps("h-expired", &[("first", json!({}))]).await;
    let first = sandbox
        .get("/api/v1/namespaces/h-expired/configmaps/first")
        .await
        .json();
    for name in ["b", "c", "d"] {
        sandbox
            .post(
                "/api/v1/namespaces/h-expired/configmaps",
                &configmap(name, json!({})),
            )
            .await;
    }
    sandbox.sandbox.set_watch_history_limit(2);
    let path = format!(
        "/api/v1/namespaces/h-expired/configmaps?watch=1&resourceVersion={}",
        rv(&first)
    );
    let events = sandbox
        .watch_until(&path, Duration::from_secs(5), |_| false)
        .await;
    assert_eq!(event_types(&events), ["ERROR"]);
    let status = &events[0]["object"];
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 410);
    assert_eq!(status["reason"], "Expired");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("too old resource version"),
        "{status}"
    );
}

#[tokio::test]
async fn create_answers_201_and_each_refusal_with_its_code() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-create").await;
    let path = "/api/v1/namespaces/h-create/configmaps";
    let created = sandbox.post(path, &configmap("c", json!({}))).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let created = created.json();
    assert_eq!(created["metadata"]["namespace"], "h-create");
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36)
    );
    assert!(created["metadata"]["creationTimestamp"].is_string());

    let again = sandbox.post(path, &configmap("c", json!({}))).await;
    let status = assert_status(&again, 409, "AlreadyExists");
    assert_eq!(status["message"], "configmaps \"c\" already exists");
    assert_eq!(
        status["details"],
        json!({"name": "c", "kind": "configmaps"})
    );

    let nowhere = sandbox
        .post(
            "/api/v1/namespaces/nope/configmaps",
            &configmap("c", json!({})),
        )
        .await;
    let status = assert_status(&nowhere, 404, "NotFound");
    assert_eq!(status["message"], "namespaces \"nope\" not found");

    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    let status = assert_status(&sandbox.post(path, &secret).await, 400, "BadRequest");
    assert_eq!(
        status["message"],
        "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"
    );

    let nameless = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
    let status = assert_status(&sandbox.post(path, &nameless).await, 422, "Invalid");
    assert_eq!(status["details"]["causes"][0]["field"], "metadata.name");

    // generateName makes a name.
    let generated =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}});
    let generated = sandbox.post(path, &generated).await;
    assert_eq!(generated.status, StatusCode::CREATED);
    let name = generated.json()["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let status = assert_status(
        &sandbox
            .post("/api/v1/namespaces/h-create/configmaps/c", &json!({"x": 1}))
            .await,
        405,
        "MethodNotAllowed",
    );
    assert_eq!(
        status["message"],
        "the server does not allow this method on the requested resource"
    );
    let unknown = sandbox
        .get("/apis/example.com/v1/namespaces/h-create/gadgets")
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.text(), "404 page not found\n");
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_a_conflict() {
    let sandbox = with_configmaps("h-update", &[("u", json!({}))]).await;
    let path = "/api/v1/namespaces/h-update/configmaps/u";
    let live = sandbox.get(path).await.json();
    let mut changed = live.clone();
    changed["data"]["k"] = "2".into();
    let updated = sandbox.put(path, &changed).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text());
    let updated = updated.json();
    assert!(rv(&updated) > rv(&live));
    assert_eq!(updated["data"]["k"], "2");

    changed["data"]["k"] = "3".into();
    let stale = sandbox.put(path, &changed).await;
    let status = assert_status(&stale, 409, "Conflict");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on configmaps \"u\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(sandbox.get(path).await.json()["data"]["k"], "2");

    let missing = sandbox
        .put(
            "/api/v1/namespaces/h-update/configmaps/none",
            &configmap("none", json!({})),
        )
        .await;
    assert_status(&missing, 404, "NotFound");
}

#[tokio::test]
async fn patch_types_and_an_unknown_content_type() {
    let sandbox = with_configmaps("h-patch", &[("p", json!({"app": "web"}))]).await;
    let path = "/api/v1/namespaces/h-patch/configmaps/p";
    let merged = sandbox.patch(path, CM, r#"{"data":{"m":"1"}}"#).await;
    assert_eq!(merged.status, StatusCode::OK, "{}", merged.text());
    assert_eq!(merged.json()["data"], json!({"k": "v", "m": "1"}));

    let json_patched = sandbox
        .patch(
            path,
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/data/k"},{"op":"add","path":"/data/j","value":"2"}]"#,
        )
        .await;
    assert_eq!(
        json_patched.status,
        StatusCode::OK,
        "{}",
        json_patched.text()
    );
    assert_eq!(json_patched.json()["data"], json!({"m": "1", "j": "2"}));

    let strategic = sandbox
        .patch(
            path,
            "application/strategic-merge-patch+json",
            r#"{"data":{"s":"3"}}"#,
        )
        .await;
    assert_eq!(strategic.status, StatusCode::OK, "{}", strategic.text());
    assert_eq!(
        strategic.json()["data"],
        json!({"m": "1", "j": "2", "s": "3"})
    );

    let applied = sandbox
        .patch(
            "/api/v1/namespaces/h-patch/configmaps/applied?fieldManager=test",
            "application/apply-patch+yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: b\n",
        )
        .await;
    assert_eq!(applied.status, StatusCode::CREATED, "{}", applied.text());
    let reapplied = sandbox
        .patch(
            "/api/v1/namespaces/h-patch/configmaps/applied?fieldManager=test",
            "application/apply-patch+yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: c\n",
        )
        .await;
    assert_eq!(reapplied.status, StatusCode::OK, "{}", reapplied.text());
    assert_eq!(reapplied.json()["data"]["a"], "c");
    let no_manager = sandbox
        .patch(
            "/api/v1/namespaces/h-patch/configmaps/applied",
            "application/apply-patch+yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n",
        )
        .await;
    assert_status(&no_manager, 422, "Invalid");

    let unknown = sandbox
        .patch(path, "application/x-unknown", r#"{"data":{}}"#)
        .await;
    let status = assert_status(&unknown, 415, "UnsupportedMediaType");
    assert_eq!(status["message"], "415: Unsupported Media Type");
    let failed_test = sandbox
        .patch(
            path,
            "application/json-patch+json",
            r#"[{"op":"test","path":"/data/m","value":"nope"}]"#,
        )
        .await;
    assert!(
        failed_test.status.is_client_error(),
        "{}",
        failed_test.text()
    );
    assert_eq!(sandbox.get(path).await.json()["data"]["m"], "1");
}
