//! The server around the objects: status and scale subresources, the token, injected
//! faults and latency, CRDs in discovery, generation, Secret stringData.

use super::*;

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
