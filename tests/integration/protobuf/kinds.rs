//! Protobuf beyond the built-in reads: custom resources refuse it, each generator
//! stores what its JSON twin stores, the scale subresource and converted kinds speak it.

use super::*;
use tether_testkit::assert_contains;

#[tokio::test]
async fn custom_resources_refuse_protobuf_bodies_answer_json_and_406_protobuf_alone() {
    let sandbox = TestSandbox::start().await;
    let file = sandbox.write_file("crd.yaml", WIDGETS);
    sandbox.kubectl(&["apply", "-f", &file]).await.ok();
    sandbox.namespace("pb-cr").await;
    let path = "/apis/example.com/v1/namespaces/pb-cr/widgets";
    eventually("the Widget resource is served", || async {
        (sandbox.get(path).await.status == StatusCode::OK).then_some(())
    })
    .await;

    // A protobuf body for a custom resource: 415, as kube-apiserver answers.
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 1}});
    let mut body = b"k8s\x00".to_vec();
    body.extend_from_slice(widget.to_string().as_bytes());
    let refused = sandbox
        .send(Method::POST, path, Some(MEDIA_TYPE), Some(body))
        .await;
    assert_eq!(refused.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(refused.json()["reason"], "UnsupportedMediaType");

    // JSON is accepted, and a protobuf-first Accept that allows JSON gets JSON.
    assert_eq!(
        sandbox.post(path, &widget).await.status,
        StatusCode::CREATED
    );
    let answer = with_accept(
        &sandbox,
        &format!("{path}/w"),
        "application/vnd.kubernetes.protobuf, application/json",
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.content_type, "application/json");
    assert_eq!(answer.json()["spec"]["size"], 1);

    // Protobuf alone cannot be answered for a custom resource: 406 as a raw JSON
    // Status, for reads, lists, watches and writes alike, before anything is written.
    let not_acceptable = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure",
        "message": "only the following media types are accepted: application/json, \
                    application/yaml, application/vnd.kubernetes.protobuf",
        "reason": "NotAcceptable", "code": 406});
    for target in [
        format!("{path}/w"),
        path.to_string(),
        format!("{path}?watch=true"),
    ] {
        let refused = with_accept(&sandbox, &target, MEDIA_TYPE).await;
        assert_eq!(refused.status, StatusCode::NOT_ACCEPTABLE, "{target}");
        assert_eq!(refused.content_type, "application/json", "{target}");
        assert_eq!(refused.json(), not_acceptable, "{target}");
    }
    let second = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w2"}});
    let refused = read(
        sandbox
            .request(Method::POST, path)
            .header(reqwest::header::ACCEPT, MEDIA_TYPE)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(second.to_string()),
    )
    .await;
    assert_eq!(refused.status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(
        sandbox.get(&format!("{path}/w2")).await.status,
        StatusCode::NOT_FOUND,
        "a refused create writes nothing"
    );
    // A built-in kind asked for protobuf alone is answered in protobuf; one asked
    // for nothing the server speaks gets the same 406.
    let built_in = with_accept(&sandbox, "/api/v1/namespaces/pb-cr", MEDIA_TYPE).await;
    assert_eq!(built_in.status, StatusCode::OK);
    assert_eq!(built_in.content_type, MEDIA_TYPE);
    let text = with_accept(&sandbox, "/api/v1/namespaces/pb-cr", "text/plain").await;
    assert_eq!(text.status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(text.json()["reason"], "NotAcceptable");
}

/// An object as stored, without what the server makes up anew for each create (uid and
/// the labels made of it, resourceVersion, times, clusterIP, the token volume's random
/// name) and without the namespace, so that two creates can be compared.
fn comparable(sandbox_object: Value) -> Value {
    let mut object = sandbox_object;
    let mut generated: Vec<String> = Vec::new();
    generated.extend(object["metadata"]["uid"].as_str().map(String::from));
    generated.extend(object["spec"]["clusterIP"].as_str().map(String::from));
    for volume in object["spec"]["volumes"].as_array().into_iter().flatten() {
        generated.extend(
            volume["name"]
                .as_str()
                .filter(|n| n.starts_with("kube-api-access-"))
                .map(String::from),
        );
    }
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "namespace",
            "managedFields",
            "generation",
        ] {
            metadata.remove(key);
        }
    }
    if let Some(fields) = object.as_object_mut() {
        fields.remove("status");
    }
    let mut text = object.to_string();
    for value in generated {
        text = text.replace(&value, "<generated>");
    }
    serde_json::from_str(&text).expect("still JSON")
}

/// Every generator kubectl sends in protobuf stores exactly what the same object sent
/// as JSON (`--dry-run=client -o json | kubectl create -f -`) stores. (`kubectl run`
/// sends JSON in kubectl 1.32.)
#[tokio::test]
async fn each_generator_stores_what_its_json_twin_stores() {
    let sandbox = TestSandbox::start().await;
    // Nothing else writes to the Deployment between the two creates.
    sandbox.sandbox.set_deployment_controller_delay(None);
    sandbox.namespace("pb-proto").await;
    sandbox.namespace("pb-json").await;
    let generators: [(&[&str], &str); 11] = [
        (
            &["create", "deployment", "web", "--image=nginx", "--port=80"],
            "/apis/apps/v1/namespaces/NS/deployments/web",
        ),
        (
            &["create", "job", "j", "--image=busybox", "--", "echo", "hi"],
            "/apis/batch/v1/namespaces/NS/jobs/j",
        ),
        (
            &[
                "create",
                "cronjob",
                "c",
                "--image=busybox",
                "--schedule=*/5 * * * *",
            ],
            "/apis/batch/v1/namespaces/NS/cronjobs/c",
        ),
        (
            &["create", "serviceaccount", "sa"],
            "/api/v1/namespaces/NS/serviceaccounts/sa",
        ),
        (
            &["create", "role", "r", "--verb=get", "--resource=pods"],
            "/apis/rbac.authorization.k8s.io/v1/namespaces/NS/roles/r",
        ),
        (
            &[
                "create",
                "rolebinding",
                "rb",
                "--role=r",
                "--serviceaccount=x:sa",
            ],
            "/apis/rbac.authorization.k8s.io/v1/namespaces/NS/rolebindings/rb",
        ),
        (
            &["create", "service", "clusterip", "svc", "--tcp=80:8080"],
            "/api/v1/namespaces/NS/services/svc",
        ),
        (
            &["create", "quota", "q", "--hard=pods=10,cpu=2"],
            "/api/v1/namespaces/NS/resourcequotas/q",
        ),
        (
            &[
                "create",
                "poddisruptionbudget",
                "pdb",
                "--selector=app=web",
                "--min-available=1",
            ],
            "/apis/policy/v1/namespaces/NS/poddisruptionbudgets/pdb",
        ),
        (
            &["create", "ingress", "ing", "--rule=example.com/api=svc:80"],
            "/apis/networking.k8s.io/v1/namespaces/NS/ingresses/ing",
        ),
        (
            &["create", "configmap", "cm", "--from-literal=a=b"],
            "/api/v1/namespaces/NS/configmaps/cm",
        ),
    ];
    for (generator, path) in generators {
        let mut proto = vec!["-n", "pb-proto", "-v=8"];
        proto.extend_from_slice(generator);
        let out = sandbox.kubectl(&proto).await.ok();
        assert!(
            out.stderr.contains(SENT_PROTOBUF),
            "{generator:?} sent no protobuf"
        );

        let mut dry_run = vec!["-n", "pb-json", "--dry-run=client", "-o", "json"];
        dry_run.extend_from_slice(generator);
        let json = sandbox.kubectl(&dry_run).await.ok().stdout;
        sandbox
            .kubectl_with_stdin(&["create", "-n", "pb-json", "-f", "-"], Some(&json))
            .await
            .ok();

        let by_protobuf = comparable(stored(&sandbox, &path.replace("NS", "pb-proto")).await);
        let by_json = comparable(stored(&sandbox, &path.replace("NS", "pb-json")).await);
        assert_eq!(by_protobuf, by_json, "{generator:?}");
    }
}

/// `kubectl scale` goes through the `/scale` subresource, whose object is an
/// `autoscaling/v1` Scale whatever the group of the scaled kind: it must travel in
/// protobuf both ways, and a protobuf Scale written back must scale.
#[tokio::test]
async fn the_scale_subresource_speaks_protobuf_and_kubectl_scale_uses_it() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-scale").await;
    let created = sandbox
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "-n",
            "pb-scale",
            "--image=nginx:1.25",
            "--replicas=2",
        ])
        .await
        .ok();
    assert_eq!(created.stdout.trim(), "deployment.apps/web created");
    let path = "/apis/apps/v1/namespaces/pb-scale/deployments/web/scale";
    // The Deployment controller writes the status meanwhile: compare once it settled.
    eventually("the Deployment's status reaches its replicas", || async {
        let json = with_accept(&sandbox, path, "application/json").await.json();
        (json["status"]["replicas"] == 2).then_some(())
    })
    .await;

    // It may still write (each write moves the resourceVersion): compare a protobuf
    // read with the JSON reads on both sides of it once those two saw the same object.
    let (mut decoded, json) =
        eventually("a protobuf read between two equal JSON reads", || async {
            let before = with_accept(&sandbox, path, "application/json").await.json();
            let scale = with_accept(&sandbox, path, MEDIA_TYPE).await;
            assert_eq!(scale.status, StatusCode::OK, "{}", scale.text());
            assert_eq!(scale.content_type, MEDIA_TYPE);
            let after = with_accept(&sandbox, path, "application/json").await.json();
            let decoded = protobuf::decode_object(&scale.body).expect("a protobuf Scale");
            (before == after).then_some((decoded, after))
        })
        .await;
    assert_eq!(decoded["apiVersion"], "autoscaling/v1");
    assert_eq!(decoded["kind"], "Scale");
    assert_eq!(decoded["spec"]["replicas"], 2);
    assert_eq!(decoded, json);

    // A Scale of 0 written back in protobuf: the zero is a value, not "unset".
    decoded["spec"]["replicas"] = json!(0);
    let written = read(
        sandbox
            .request(Method::PUT, path)
            .header(reqwest::header::CONTENT_TYPE, MEDIA_TYPE)
            .header(reqwest::header::ACCEPT, MEDIA_TYPE)
            .body(protobuf::encode_object(&decoded).expect("encodes")),
    )
    .await;
    assert_eq!(written.status, StatusCode::OK, "{}", written.text());
    assert_eq!(written.content_type, MEDIA_TYPE);
    let answered = protobuf::decode_object(&written.body).expect("a protobuf Scale");
    assert_eq!(answered["spec"]["replicas"], 0);
    let deployment = stored(
        &sandbox,
        "/apis/apps/v1/namespaces/pb-scale/deployments/web",
    )
    .await;
    assert_eq!(deployment["spec"]["replicas"], 0);

    let out = sandbox
        .kubectl(&[
            "scale",
            "deployment/web",
            "-n",
            "pb-scale",
            "--replicas=3",
            "-v=8",
        ])
        .await
        .ok();
    assert_contains(&out.stdout, "deployment.apps/web scaled");
    assert_contains(&out.stderr, "/deployments/web/scale");
    let deployment = stored(
        &sandbox,
        "/apis/apps/v1/namespaces/pb-scale/deployments/web",
    )
    .await;
    assert_eq!(deployment["spec"]["replicas"], 3);
}

/// The kinds served in a version they are not stored in speak protobuf in the version
/// asked: a protobuf create at autoscaling/v1 (as `kubectl autoscale` sends it), v1
/// and v2 reads of the one object, an events.k8s.io list, and a watch at
/// events.k8s.io/v1 that sees an Event written at core/v1.
#[tokio::test]
async fn converted_kinds_speak_protobuf_in_the_version_asked() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("pb-conv").await;
    let hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}});
    let created = crate::support::read(
        sandbox
            .request(
                Method::POST,
                "/apis/autoscaling/v1/namespaces/pb-conv/horizontalpodautoscalers",
            )
            .header(reqwest::header::CONTENT_TYPE, MEDIA_TYPE)
            .header(reqwest::header::ACCEPT, MEDIA_TYPE)
            .body(protobuf::encode_object(&hpa).expect("encodes")),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    assert_eq!(created.content_type, MEDIA_TYPE);
    let answered = protobuf::decode_object(&created.body).expect("a protobuf HPA");
    assert_eq!(answered["apiVersion"], "autoscaling/v1");
    assert_eq!(answered["spec"]["targetCPUUtilizationPercentage"], 50);

    let v1 = with_accept(
        &sandbox,
        "/apis/autoscaling/v1/namespaces/pb-conv/horizontalpodautoscalers/web",
        MEDIA_TYPE,
    )
    .await;
    assert_eq!(v1.content_type, MEDIA_TYPE);
    let v1 = protobuf::decode_object(&v1.body).expect("a protobuf v1 HPA");
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    let json_v1 = stored(
        &sandbox,
        "/apis/autoscaling/v1/namespaces/pb-conv/horizontalpodautoscalers/web",
    )
    .await;
    assert_eq!(v1["spec"], json_v1["spec"]);
    let v2 = with_accept(
        &sandbox,
        "/apis/autoscaling/v2/namespaces/pb-conv/horizontalpodautoscalers",
        MEDIA_TYPE,
    )
    .await;
    let v2 = protobuf::decode_object(&v2.body).expect("a protobuf v2 list");
    assert_eq!(v2["kind"], "HorizontalPodAutoscalerList");
    assert_eq!(
        v2["items"][0]["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        50
    );
    let v1_list = with_accept(
        &sandbox,
        "/apis/autoscaling/v1/namespaces/pb-conv/horizontalpodautoscalers",
        MEDIA_TYPE,
    )
    .await;
    assert_eq!(v1_list.content_type, MEDIA_TYPE);
    let v1_list = protobuf::decode_object(&v1_list.body).expect("a protobuf v1 list");
    assert_eq!(v1_list["apiVersion"], "autoscaling/v1");
    assert_eq!(
        v1_list["items"][0]["spec"]["targetCPUUtilizationPercentage"],
        50
    );

    // A watch at events.k8s.io/v1, then an Event written at core/v1.
    let mut response = sandbox
        .request(
            Method::GET,
            "/apis/events.k8s.io/v1/namespaces/pb-conv/events?watch=true&timeoutSeconds=5",
        )
        .header(reqwest::header::ACCEPT, MEDIA_TYPE)
        .send()
        .await
        .expect("the watch opens");
    assert_eq!(
        response.headers()[reqwest::header::CONTENT_TYPE],
        WATCH_MEDIA_TYPE
    );
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
        "involvedObject": {"kind": "HorizontalPodAutoscaler", "name": "web", "namespace": "pb-conv"},
        "reason": "SuccessfulRescale", "message": "New size: 2", "type": "Normal",
        "source": {"component": "horizontal-pod-autoscaler"}, "count": 1,
        "firstTimestamp": "2026-11-24T09:00:00Z", "lastTimestamp": "2026-11-24T09:00:00Z"});
    let written = sandbox
        .send(
            Method::POST,
            "/api/v1/namespaces/pb-conv/events",
            Some(MEDIA_TYPE),
            Some(protobuf::encode_object(&event).expect("encodes")),
        )
        .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.text());
    let (event_type, object) = first_watch_frame(&mut response).await;
    assert_eq!(event_type, "ADDED");
    assert_eq!(object["apiVersion"], "events.k8s.io/v1");
    assert_eq!(object["note"], "New size: 2");
    assert_eq!(object["regarding"]["kind"], "HorizontalPodAutoscaler");
    assert_eq!(object["deprecatedCount"], 1);

    let list = with_accept(
        &sandbox,
        "/apis/events.k8s.io/v1/namespaces/pb-conv/events",
        MEDIA_TYPE,
    )
    .await;
    assert_eq!(list.content_type, MEDIA_TYPE);
    let list = protobuf::decode_object(&list.body).expect("a protobuf EventList");
    assert_eq!(list["kind"], "EventList");
    assert_eq!(list["apiVersion"], "events.k8s.io/v1");
    assert_eq!(
        list["items"][0]["deprecatedSource"]["component"],
        "horizontal-pod-autoscaler"
    );
}
