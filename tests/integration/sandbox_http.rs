//! The sandbox's API over raw HTTPS: every verb, the error codes a client must handle,
//! watch semantics, subresources, deletion with finalizers and garbage collection,
//! dry runs, CRDs in discovery, and the fault injection and counters other tests rely
//! on. Each test has its own sandbox and namespace.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestSandbox, event_types, eventually};

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

#[tokio::test]
async fn a_finalizer_holds_a_deleted_object_until_removed() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-final").await;
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    sandbox
        .post("/api/v1/namespaces/h-final/configmaps", &held)
        .await;
    let path = "/api/v1/namespaces/h-final/configmaps/held";
    let deleted = sandbox.delete(path).await;
    assert_eq!(deleted.status, StatusCode::OK);
    let deleted = deleted.json();
    assert!(
        deleted["metadata"]["deletionTimestamp"].is_string(),
        "{deleted}"
    );
    assert_eq!(
        deleted["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );
    let still = sandbox.get(path).await;
    assert_eq!(still.status, StatusCode::OK);
    assert!(still.json()["metadata"]["deletionTimestamp"].is_string());
    // Deleting again changes nothing.
    assert_eq!(sandbox.delete(path).await.status, StatusCode::OK);

    let released = sandbox
        .patch(path, CM, r#"{"metadata":{"finalizers":null}}"#)
        .await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.text());
    assert_status(&sandbox.get(path).await, 404, "NotFound");
    assert_status(&sandbox.delete(path).await, 404, "NotFound");
}

#[tokio::test]
async fn a_plain_delete_answers_a_success_status() {
    let sandbox = with_configmaps("h-plain", &[("gone", json!({}))]).await;
    let path = "/api/v1/namespaces/h-plain/configmaps/gone";
    let uid = sandbox.get(path).await.json()["metadata"]["uid"].clone();
    let answer = sandbox.delete(path).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "gone", "kind": "configmaps", "uid": uid}})
    );
}

#[tokio::test]
async fn foreground_deletion_takes_the_dependents_first() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-fg").await;
    let owner = sandbox
        .post(
            "/apis/apps/v1/namespaces/h-fg/deployments",
            &deployment("owner", 1),
        )
        .await;
    assert_eq!(owner.status, StatusCode::CREATED, "{}", owner.text());
    let owner = owner.json();
    let mut dependent = configmap("dependent", json!({}));
    dependent["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "Deployment",
        "name": "owner", "uid": owner["metadata"]["uid"]}]);
    sandbox
        .post("/api/v1/namespaces/h-fg/configmaps", &dependent)
        .await;
    let answer = sandbox
        .send(
            Method::DELETE,
            "/apis/apps/v1/namespaces/h-fg/deployments/owner",
            Some("application/json"),
            Some(
                br#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground"}"#
                    .to_vec(),
            ),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let marked = answer.json();
    assert_eq!(
        marked["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    for path in [
        "/apis/apps/v1/namespaces/h-fg/deployments/owner",
        "/api/v1/namespaces/h-fg/configmaps/dependent",
    ] {
        eventually(path, || async {
            (sandbox.get(path).await.status == StatusCode::NOT_FOUND).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_objects() {
    let sandbox = with_configmaps("h-ns", &[("one", json!({})), ("two", json!({}))]).await;
    sandbox.namespace("h-kept").await;
    sandbox
        .post(
            "/api/v1/namespaces/h-kept/configmaps",
            &configmap("one", json!({})),
        )
        .await;
    let answer = sandbox.delete("/api/v1/namespaces/h-ns").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    assert_eq!(answer.json()["status"]["phase"], "Terminating");
    eventually("the namespace to go", || async {
        (sandbox.get("/api/v1/namespaces/h-ns").await.status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    let list = sandbox.get("/api/v1/configmaps").await.json();
    let left: Vec<(String, String)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                i["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(left, [("h-kept".to_string(), "one".to_string())]);
    // Nothing new goes into a namespace that is gone.
    let refused = sandbox
        .post(
            "/api/v1/namespaces/h-ns/configmaps",
            &configmap("late", json!({})),
        )
        .await;
    assert_status(&refused, 404, "NotFound");
}

#[tokio::test]
async fn deletecollection_deletes_the_selected_objects() {
    let sandbox = with_configmaps(
        "h-coll",
        &[
            ("a", json!({"app": "web"})),
            ("b", json!({"app": "web"})),
            ("c", json!({"app": "db"})),
        ],
    )
    .await;
    let answer = sandbox
        .delete("/api/v1/namespaces/h-coll/configmaps?labelSelector=app%3Dweb")
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let deleted = answer.json();
    assert_eq!(deleted["kind"], "ConfigMapList");
    assert_eq!(names(&deleted), ["a", "b"]);
    let left = sandbox
        .get("/api/v1/namespaces/h-coll/configmaps")
        .await
        .json();
    assert_eq!(names(&left), ["c"]);
    assert_eq!(
        sandbox
            .sandbox
            .requests()
            .get("deletecollection", "configmaps"),
        1
    );
}

#[tokio::test]
async fn dry_run_stores_nothing() {
    let sandbox = with_configmaps("h-dry", &[("real", json!({}))]).await;
    let path = "/api/v1/namespaces/h-dry/configmaps/real";
    let before = sandbox
        .get("/api/v1/namespaces/h-dry/configmaps")
        .await
        .json();

    let created = sandbox
        .post(
            "/api/v1/namespaces/h-dry/configmaps?dryRun=All",
            &configmap("ghost", json!({})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    assert_eq!(created.json()["metadata"]["name"], "ghost");
    assert_status(
        &sandbox
            .get("/api/v1/namespaces/h-dry/configmaps/ghost")
            .await,
        404,
        "NotFound",
    );

    let mut changed = sandbox.get(path).await.json();
    changed["data"]["k"] = "updated".into();
    let updated = sandbox.put(&format!("{path}?dryRun=All"), &changed).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text());
    assert_eq!(updated.json()["data"]["k"], "updated");

    let patched = sandbox
        .patch(
            &format!("{path}?dryRun=All"),
            CM,
            r#"{"data":{"k":"patched"}}"#,
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    assert_eq!(patched.json()["data"]["k"], "patched");

    let deleted = sandbox.delete(&format!("{path}?dryRun=All")).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text());

    let after = sandbox
        .get("/api/v1/namespaces/h-dry/configmaps")
        .await
        .json();
    assert_eq!(names(&after), ["real"]);
    assert_eq!(after["items"][0]["data"]["k"], "v");
    assert_eq!(rv(&after), rv(&before), "no resourceVersion was spent");
}

#[tokio::test]
async fn the_status_subresource_and_the_main_resource_write_separately() {
    let sandbox = TestSandbox::start().await;
    // This test writes the Deployment's status itself: no controller may race it.
    sandbox.sandbox.set_deployment_controller_delay(None);
    sandbox.namespace("h-status").await;
    sandbox
        .post(
            "/apis/apps/v1/namespaces/h-status/deployments",
            &deployment("d", 1),
        )
        .await;
    let path = "/apis/apps/v1/namespaces/h-status/deployments/d";
    let mut live = sandbox.get(path).await.json();
    live["spec"]["replicas"] = 9.into();
    live["status"] = json!({"replicas": 5, "observedGeneration": 1});
    let written = sandbox.put(&format!("{path}/status"), &live).await;
    assert_eq!(written.status, StatusCode::OK, "{}", written.text());
    let got = sandbox.get(path).await.json();
    assert_eq!(got["status"]["replicas"], 5);
    assert_eq!(
        got["spec"]["replicas"], 1,
        "the status endpoint leaves spec alone"
    );

    let patched = sandbox
        .patch(
            path,
            CM,
            r#"{"spec":{"replicas":2},"status":{"replicas":0}}"#,
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    let got = sandbox.get(path).await.json();
    assert_eq!(got["spec"]["replicas"], 2);
    assert_eq!(
        got["status"]["replicas"], 5,
        "the main resource leaves status alone"
    );

    let status = sandbox.get(&format!("{path}/status")).await;
    assert_eq!(status.status, StatusCode::OK);
    assert_eq!(status.json()["status"]["replicas"], 5);
    let none = sandbox
        .get("/api/v1/namespaces/h-status/configmaps/x/status")
        .await;
    assert_eq!(
        none.status,
        StatusCode::NOT_FOUND,
        "configmaps have no status"
    );
}

#[tokio::test]
async fn the_scale_subresource_reads_and_patches_replicas() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-scale").await;
    sandbox
        .post(
            "/apis/apps/v1/namespaces/h-scale/deployments",
            &deployment("web", 2),
        )
        .await;
    let path = "/apis/apps/v1/namespaces/h-scale/deployments/web";
    let scale = sandbox.get(&format!("{path}/scale")).await;
    assert_eq!(scale.status, StatusCode::OK);
    let scale = scale.json();
    assert_eq!(
        (scale["kind"].as_str(), scale["apiVersion"].as_str()),
        (Some("Scale"), Some("autoscaling/v1"))
    );
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=web");
    assert_eq!(scale["metadata"]["name"], "web");

    let patched = sandbox
        .patch(&format!("{path}/scale"), CM, r#"{"spec":{"replicas":4}}"#)
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    assert_eq!(patched.json()["spec"]["replicas"], 4);
    assert_eq!(sandbox.get(path).await.json()["spec"]["replicas"], 4);
}

#[tokio::test]
async fn requests_without_the_token_are_unauthorized() {
    let sandbox = TestSandbox::start().await;
    let url = format!("{}/api/v1/namespaces", sandbox.url());
    for request in [
        sandbox.http.get(&url),
        sandbox.http.get(&url).bearer_auth("wrong-token"),
        sandbox.http.get(&url).basic_auth("admin", Some("admin")),
    ] {
        let answer = crate::support::read(request).await;
        let status = assert_status(&answer, 401, "Unauthorized");
        assert_eq!(status["message"], "Unauthorized");
    }
    assert_eq!(
        sandbox.get("/api/v1/namespaces").await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn injected_faults_are_retryable_and_counted_exactly() {
    let sandbox = TestSandbox::start().await;
    sandbox.sandbox.set_fail_rate(1.0);
    sandbox.sandbox.reset_requests();
    let mut codes = std::collections::BTreeSet::new();
    for _ in 0..30 {
        let answer = sandbox.get("/api/v1/namespaces/default/configmaps/x").await;
        let code = answer.status.as_u16();
        assert!([500, 503, 429].contains(&code), "{code}");
        let retry_after = answer.headers.get(reqwest::header::RETRY_AFTER);
        if code == 500 {
            assert!(retry_after.is_none());
        } else {
            assert_eq!(
                retry_after.and_then(|v| v.to_str().ok()),
                Some("1"),
                "{code}"
            );
        }
        assert_eq!(answer.json()["code"], code);
        codes.insert(code);
    }
    assert!(codes.len() > 1, "faults vary: {codes:?}");
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("get", "configmaps"), 30);
    assert_eq!(counts.total(), 30);
    assert_eq!(counts.writes(), 0);

    sandbox.sandbox.set_fail_rate(0.0);
    sandbox.sandbox.reset_requests();
    sandbox
        .post(
            "/api/v1/namespaces/default/configmaps",
            &configmap("x", json!({})),
        )
        .await;
    sandbox
        .patch(
            "/api/v1/namespaces/default/configmaps/x",
            CM,
            r#"{"data":{"k":"2"}}"#,
        )
        .await;
    assert_eq!(
        sandbox
            .get("/api/v1/namespaces/default/configmaps/x")
            .await
            .status,
        StatusCode::OK
    );
    let counts = sandbox.sandbox.requests();
    assert_eq!(
        (
            counts.get("create", "configmaps"),
            counts.get("patch", "configmaps"),
            counts.get("get", "configmaps")
        ),
        (1, 1, 1)
    );
    assert_eq!(counts.writes(), 2);
}

#[tokio::test]
async fn latency_delays_every_answer() {
    let sandbox = TestSandbox::start().await;
    // The property: an answer takes at least the latency set, and none is added once
    // it is zero. A latency far above what a request takes on a loaded machine keeps
    // the second half from failing on a slow scheduler instead of a kept delay.
    const LATENCY: Duration = Duration::from_secs(1);
    // A first request warms up the connection, so only latency is measured.
    sandbox.get("/api/v1/namespaces").await;
    sandbox.sandbox.set_latency(LATENCY);
    let started = Instant::now();
    assert_eq!(
        sandbox.get("/api/v1/namespaces").await.status,
        StatusCode::OK
    );
    assert!(started.elapsed() >= LATENCY, "{:?}", started.elapsed());
    sandbox.sandbox.set_latency(Duration::ZERO);
    let started = Instant::now();
    sandbox.get("/api/v1/namespaces").await;
    assert!(started.elapsed() < LATENCY, "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_crd_is_served_in_discovery_while_it_exists() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-crd").await;
    assert_eq!(
        sandbox.get("/apis/example.com/v1").await.status,
        StatusCode::NOT_FOUND
    );
    let crd: Value = serde_json::from_str(WIDGET_CRD).expect("the CRD is JSON");
    let created = sandbox
        .post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
    let established = eventually("the CRD to be Established", || async {
        let crd = sandbox.get(path).await.json();
        let conditions = crd["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
            .then_some(crd)
    })
    .await;
    assert_eq!(established["status"]["acceptedNames"]["kind"], "Widget");

    let resources = sandbox.get("/apis/example.com/v1").await.json();
    let served: Vec<&str> = resources["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(served, ["widgets", "widgets/status"]);
    assert_eq!(resources["resources"][0]["shortNames"], json!(["wd"]));
    let groups = sandbox.get("/apis").await.json();
    assert!(
        groups["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .any(|g| g["name"] == "example.com")
    );
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}});
    let answer = sandbox
        .post("/apis/example.com/v1/namespaces/h-crd/widgets", &widget)
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text());

    assert_eq!(sandbox.delete(path).await.status, StatusCode::OK);
    eventually("the CRD's resources to go", || async {
        (sandbox.get("/apis/example.com/v1").await.status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    let groups = sandbox.get("/apis").await.json();
    assert!(
        !groups["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .any(|g| g["name"] == "example.com")
    );
    let gone = sandbox
        .get("/apis/example.com/v1/namespaces/h-crd/widgets/w")
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn generation_counts_spec_changes_only() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-gen").await;
    let crd: Value = serde_json::from_str(WIDGET_CRD).expect("the CRD is JSON");
    sandbox
        .post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        )
        .await;
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "g"}, "spec": {"size": 1}});
    let created = sandbox
        .post("/apis/example.com/v1/namespaces/h-gen/widgets", &widget)
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    assert_eq!(created.json()["metadata"]["generation"], 1);
    let path = "/apis/example.com/v1/namespaces/h-gen/widgets/g";
    let generation = |answer: crate::support::Answer| {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
        answer.json()["metadata"]["generation"].as_i64()
    };
    let labelled = sandbox
        .patch(path, CM, r#"{"metadata":{"labels":{"x":"y"}}}"#)
        .await;
    assert_eq!(generation(labelled), Some(1), "metadata is not spec");
    let status = sandbox
        .patch(
            &format!("{path}/status"),
            CM,
            r#"{"status":{"ready":true}}"#,
        )
        .await;
    assert_eq!(generation(status), Some(1), "status is not spec");
    let resized = sandbox.patch(path, CM, r#"{"spec":{"size":2}}"#).await;
    assert_eq!(generation(resized), Some(2));
    let same = sandbox.patch(path, CM, r#"{"spec":{"size":2}}"#).await;
    assert_eq!(generation(same), Some(2), "an unchanged spec is no change");
}

#[tokio::test]
async fn secret_string_data_is_stored_as_data() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-secret").await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "stringData": {"password": "not-a-real-password"}});
    let created = sandbox
        .post("/api/v1/namespaces/h-secret/secrets", &secret)
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let stored = sandbox
        .get("/api/v1/namespaces/h-secret/secrets/s")
        .await
        .json();
    assert_eq!(
        stored["data"],
        json!({"password": "bm90LWEtcmVhbC1wYXNzd29yZA=="})
    );
    assert!(
        stored.get("stringData").is_none(),
        "stringData is write-only"
    );
}

/// The managedFields entries of `manager`, as (operation, subresource) pairs.
fn managed_by(object: &Value, manager: &str) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e["manager"] == manager)
                .map(|e| {
                    (
                        e["operation"].as_str().unwrap_or_default().to_string(),
                        e["subresource"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The Deployment once the controller has observed its current generation and rolled
/// it out.
async fn rolled_out(sandbox: &TestSandbox, path: &str, generation: i64) -> Value {
    eventually(
        "the deployment controller to roll the deployment out",
        || async {
            let deployment = sandbox.get(path).await.json();
            let status = &deployment["status"];
            let done = status["observedGeneration"] == generation
                && status["conditions"][1]["reason"] == "NewReplicaSetAvailable";
            done.then_some(deployment)
        },
    )
    .await
}

#[tokio::test]
async fn the_deployment_controller_writes_revision_replica_sets_and_status_after_a_spec_change() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-rollout").await;
    let path = "/apis/apps/v1/namespaces/h-rollout/deployments/web";
    let created = sandbox
        .post(
            "/apis/apps/v1/namespaces/h-rollout/deployments",
            &deployment("web", 2),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let created = created.json();
    assert_eq!(created["metadata"].get("annotations"), None);

    let first = rolled_out(&sandbox, path, 1).await;
    assert!(
        rv(&first) > rv(&created),
        "the controller's writes move the resourceVersion"
    );
    assert_eq!(
        first["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    let status = &first["status"];
    assert_eq!(status["replicas"], 2);
    assert_eq!(status["updatedReplicas"], 2);
    assert_eq!(status["readyReplicas"], 2);
    assert_eq!(status["availableReplicas"], 2);
    assert_eq!(status["conditions"][0]["type"], "Available");
    assert_eq!(
        status["conditions"][0]["reason"],
        "MinimumReplicasAvailable"
    );
    assert_eq!(
        status["conditions"][0]["message"],
        "Deployment has minimum availability."
    );
    let managers = managed_by(&first, "kube-controller-manager");
    assert!(
        managers.contains(&("Update".into(), String::new())),
        "the revision annotation is an Update: {managers:?}"
    );
    assert!(
        managers.contains(&("Update".into(), "status".into())),
        "the status is an Update of the status subresource: {managers:?}"
    );

    let replica_sets = sandbox
        .get("/apis/apps/v1/namespaces/h-rollout/replicasets")
        .await
        .json();
    let items = replica_sets["items"].as_array().expect("a list");
    assert_eq!(items.len(), 1, "{replica_sets}");
    let rs = &items[0];
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .expect("the pod-template-hash label");
    assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
    assert_eq!(
        rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
        hash
    );
    assert_eq!(
        rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"],
        hash
    );
    assert_eq!(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    let owner = &rs["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Deployment");
    assert_eq!(owner["uid"], created["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    assert_eq!(
        status["conditions"][1]["message"],
        format!("ReplicaSet \"web-{hash}\" has successfully progressed.")
    );

    // A new image is a new pod template: a new ReplicaSet and revision 2.
    let patched = sandbox
        .patch(
            path,
            CM,
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.26"}]}}}}"#,
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    let patched = patched.json();
    assert_eq!(patched["metadata"]["generation"], 2);
    let second = rolled_out(&sandbox, path, 2).await;
    assert!(rv(&second) > rv(&patched));
    assert_eq!(
        second["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let replica_sets = sandbox
        .get("/apis/apps/v1/namespaces/h-rollout/replicasets")
        .await
        .json();
    let mut by_revision: Vec<(String, i64)> = replica_sets["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|rs| {
            (
                rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                rs["spec"]["replicas"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    by_revision.sort();
    assert_eq!(
        by_revision,
        [("1".to_string(), 0), ("2".to_string(), 2)],
        "the old ReplicaSet is scaled to 0"
    );

    // Deleting the Deployment takes its ReplicaSets with it.
    let deleted = sandbox.delete(path).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text());
    eventually("the ReplicaSets to be collected", || async {
        let list = sandbox
            .get("/apis/apps/v1/namespaces/h-rollout/replicasets")
            .await
            .json();
        list["items"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_broken_image_never_becomes_available() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-broken").await;
    let mut broken = deployment("web", 1);
    broken["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.25-broken");
    let created = sandbox
        .post("/apis/apps/v1/namespaces/h-broken/deployments", &broken)
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let path = "/apis/apps/v1/namespaces/h-broken/deployments/web";
    let failed = eventually("the rollout to time out", || async {
        let deployment = sandbox.get(path).await.json();
        (deployment["status"]["conditions"][1]["reason"] == "ProgressDeadlineExceeded")
            .then_some(deployment)
    })
    .await;
    let status = &failed["status"];
    assert_eq!(status["conditions"][1]["status"], "False");
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(
        status["conditions"][0]["reason"],
        "MinimumReplicasUnavailable"
    );
    assert_eq!(status.get("readyReplicas"), None);
    assert_eq!(status["unavailableReplicas"], 1);
}

#[tokio::test]
async fn the_deployment_controller_can_be_stopped_and_restarted_over_http() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("h-ctl").await;
    let off = sandbox
        .put("/sandbox/controllers", &json!({"deploymentDelayMs": null}))
        .await;
    assert_eq!(off.json()["deploymentDelayMs"], Value::Null);
    let bad = sandbox
        .put(
            "/sandbox/controllers",
            &json!({"deploymentDelayMs": "soon"}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text());
    let created = sandbox
        .post(
            "/apis/apps/v1/namespaces/h-ctl/deployments",
            &deployment("web", 1),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let path = "/apis/apps/v1/namespaces/h-ctl/deployments/web";
    // Many times the default delay: a running controller would have written by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let untouched = sandbox.get(path).await.json();
    assert_eq!(
        rv(&untouched),
        rv(&created.json()),
        "nobody wrote: {untouched}"
    );

    let on = sandbox
        .put("/sandbox/controllers", &json!({"deploymentDelayMs": 5}))
        .await;
    assert_eq!(on.json()["deploymentDelayMs"], 5);
    // A change after the restart is acted on.
    sandbox.patch(path, CM, r#"{"spec":{"replicas":2}}"#).await;
    let deployment = rolled_out(&sandbox, path, 2).await;
    assert_eq!(deployment["status"]["availableReplicas"], 2);
}
