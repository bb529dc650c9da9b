//! The sandbox's Deployment controller over HTTP: revisions, ReplicaSets and status
//! after a spec change, a broken image never available, stopped and restarted.

use super::*;

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
