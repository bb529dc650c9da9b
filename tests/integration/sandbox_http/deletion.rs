//! Deletion over HTTP: finalizers, a plain delete's Status, foreground deletion of
//! dependents, a namespace taking its objects, deletecollection; and a dry run that
//! stores nothing.

use super::*;

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
