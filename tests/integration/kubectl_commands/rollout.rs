//! `kubectl rollout` (status, history, restart, undo, pause and resume), a Job that
//! completes, and `kubectl autoscale`: the commands that follow a controller's work.

use super::*;
use tether_testkit::assert_contains;

#[tokio::test]
async fn rollout_status_history_restart_and_undo() {
    let (sandbox, _) = deployed("kc-rollout").await;
    sandbox
        .kubectl(&[
            "set",
            "image",
            "deployment/web",
            "-n",
            "kc-rollout",
            "web=nginx:1.26",
        ])
        .await
        .ok();
    rolled_out(&sandbox, "kc-rollout").await;
    let history = sandbox
        .kubectl(&["rollout", "history", "deployment/web", "-n", "kc-rollout"])
        .await
        .ok();
    assert_eq!(
        rows(&history.stdout)[1..],
        [
            vec!["REVISION".to_string(), "CHANGE-CAUSE".into()],
            vec!["1".into(), "<none>".into()],
            vec!["2".into(), "<none>".into()],
        ]
    );
    let revision = sandbox
        .kubectl(&[
            "rollout",
            "history",
            "deployment/web",
            "-n",
            "kc-rollout",
            "--revision=1",
        ])
        .await
        .ok();
    assert_contains(&revision.stdout, "nginx:1.25");

    let restart = sandbox
        .kubectl(&["rollout", "restart", "deployment/web", "-n", "kc-rollout"])
        .await
        .ok();
    assert_eq!(restart.stdout.trim(), "deployment.apps/web restarted");
    rolled_out(&sandbox, "kc-rollout").await;
    let stored = deployment(&sandbox, "kc-rollout").await;
    assert!(
        stored["spec"]["template"]["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/restartedAt")
            .is_some(),
        "{stored}"
    );
    assert_eq!(
        stored["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );

    let undo = sandbox
        .kubectl(&[
            "rollout",
            "undo",
            "deployment/web",
            "-n",
            "kc-rollout",
            "--to-revision=1",
        ])
        .await
        .ok();
    assert_eq!(undo.stdout.trim(), "deployment.apps/web rolled back");
    rolled_out(&sandbox, "kc-rollout").await;
    let stored = deployment(&sandbox, "kc-rollout").await;
    assert_eq!(container(&stored)["image"], "nginx:1.25");
    // Revision 1's ReplicaSet is current again, as revision 4.
    assert_eq!(
        stored["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "4"
    );
    // Why a revision was made, as the ReplicaSet copies it from the Deployment.
    sandbox
        .kubectl(&[
            "annotate",
            "deployment/web",
            "-n",
            "kc-rollout",
            "kubernetes.io/change-cause=rolled back to 1",
        ])
        .await
        .ok();
    let history = eventually("the change cause in the history", || async {
        let out = sandbox
            .kubectl(&["rollout", "history", "deployment/web", "-n", "kc-rollout"])
            .await
            .ok();
        out.stdout
            .contains("rolled back to 1")
            .then_some(out.stdout)
    })
    .await;
    let revisions: Vec<Vec<String>> = rows(&history)[2..].to_vec();
    assert_eq!(
        revisions,
        [
            vec!["2".to_string(), "<none>".into()],
            vec!["3".into(), "<none>".into()],
            vec!["4".into(), "rolled back to 1".into()],
        ]
    );
    let current = replica_sets(&sandbox, "kc-rollout")
        .await
        .into_iter()
        .find(|rs| rs["spec"]["replicas"] == 2)
        .expect("one ReplicaSet has the replicas");
    assert_eq!(
        current["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "4"
    );
    assert_eq!(
        current["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"],
        "1"
    );
    assert_eq!(
        current["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
}

#[tokio::test]
async fn a_job_completes_and_says_so_in_get_describe_and_events() {
    let sandbox = TestSandbox::start_with(tether_sandbox::SandboxOptions {
        simulate_controllers: Some(Duration::from_millis(50)),
        ..Default::default()
    })
    .await;
    sandbox.namespace("kc-job").await;
    let file = sandbox.write_file(
        "job.yaml",
        "apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: kc-job}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: migrate, image: busybox}
",
    );
    sandbox.kubectl(&["apply", "-f", &file]).await.ok();
    let out = sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Complete",
            "job/migrate",
            "-n",
            "kc-job",
            "--timeout=20s",
        ])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "job.batch/migrate condition met");
    let out = sandbox.kubectl(&["get", "jobs", "-n", "kc-job"]).await.ok();
    let table = rows(&out.stdout);
    assert_eq!(
        table[0],
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    );
    assert_eq!(table[1][..3], ["migrate", "Complete", "1/1"]);
    let out = sandbox
        .kubectl(&["describe", "job", "migrate", "-n", "kc-job"])
        .await
        .ok();
    let completed = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Events:"))
        .filter(|l| l.contains("Completed") && l.contains("job-controller"))
        .count();
    assert_eq!(completed, 1, "one Completed event: {}", out.stdout);
    let events = get_json(&sandbox, &["events", "-n", "kc-job"]).await;
    assert_eq!(events["items"][0]["reason"], "Completed");
    assert_eq!(events["items"][0]["involvedObject"]["kind"], "Job");
    assert_eq!(events["items"][0]["count"], 1);
}

#[tokio::test]
async fn rollout_pause_holds_a_template_change_until_resume() {
    let (sandbox, _) = deployed("kc-pause").await;
    let pause = sandbox
        .kubectl(&["rollout", "pause", "deployment/web", "-n", "kc-pause"])
        .await
        .ok();
    assert_eq!(pause.stdout.trim(), "deployment.apps/web paused");
    sandbox
        .kubectl(&[
            "set",
            "image",
            "deployment/web",
            "-n",
            "kc-pause",
            "web=nginx:1.26",
        ])
        .await
        .ok();
    sandbox
        .kubectl(&["scale", "deployment/web", "-n", "kc-pause", "--replicas=3"])
        .await
        .ok();
    // Paused: the one ReplicaSet is scaled, none is made for the new template.
    let paused = eventually("the paused condition and the scaled ReplicaSet", || async {
        let stored = deployment(&sandbox, "kc-pause").await;
        let progressing = stored["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Progressing")?
            .clone();
        (progressing["reason"] == "DeploymentPaused" && stored["status"]["readyReplicas"] == 3)
            .then_some(progressing)
    })
    .await;
    assert_eq!(paused["status"], "Unknown");
    assert_eq!(paused["message"], "Deployment is paused");
    let held = replica_sets(&sandbox, "kc-pause").await;
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        held[0]["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );

    let resume = sandbox
        .kubectl(&["rollout", "resume", "deployment/web", "-n", "kc-pause"])
        .await
        .ok();
    assert_eq!(resume.stdout.trim(), "deployment.apps/web resumed");
    rolled_out(&sandbox, "kc-pause").await;
    let sets = replica_sets(&sandbox, "kc-pause").await;
    let current = sets
        .iter()
        .find(|rs| rs["spec"]["replicas"] == 3)
        .expect("the new ReplicaSet has the replicas");
    assert_eq!(
        current["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.26"
    );
    assert_eq!(sets.len(), 2);
}

/// kubectl 1.32's `autoscale` writes autoscaling/v1 (`targetCPUUtilizationPercentage`);
/// kube-apiserver stores it as autoscaling/v2 and serves it in both versions.
#[tokio::test]
async fn autoscale_creates_an_hpa_served_at_autoscaling_v1_and_v2() {
    let (sandbox, _) = deployed("kc-hpa").await;
    let out = sandbox
        .kubectl(&[
            "autoscale",
            "deployment",
            "web",
            "-n",
            "kc-hpa",
            "--min=1",
            "--max=3",
            "--cpu-percent=50",
            "-v=6",
        ])
        .await
        .ok();
    assert_eq!(
        out.stdout.trim(),
        "horizontalpodautoscaler.autoscaling/web autoscaled"
    );
    assert!(
        out.stderr.contains(
            "POST https://127.0.0.1:"
        ) && out
            .stderr
            .contains("/apis/autoscaling/v1/namespaces/kc-hpa/horizontalpodautoscalers?fieldManager=kubectl-autoscale 201 Created"),
        "kubectl 1.32 creates at autoscaling/v1: {}",
        out.stderr
    );

    // `get hpa` reads the preferred version (v2) and prints kube-apiserver's columns.
    let out = sandbox.kubectl(&["get", "hpa", "-n", "kc-hpa"]).await.ok();
    let table = rows(&out.stdout);
    assert_eq!(
        table[0],
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    assert_eq!(
        table[1][..6],
        ["web", "Deployment/web", "cpu: <unknown>/50%", "1", "3", "0"]
    );
    // The same columns at v1: one printer for the stored object.
    let out = sandbox
        .kubectl(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "-n",
            "kc-hpa",
        ])
        .await
        .ok();
    assert_eq!(rows(&out.stdout)[1][..6], table[1][..6]);

    let out = sandbox
        .kubectl(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
            "-o",
            "yaml",
        ])
        .await
        .ok();
    assert_contains(&out.stdout, "apiVersion: autoscaling/v1");
    assert_contains(&out.stdout, "  targetCPUUtilizationPercentage: 50");
    assert!(!out.stdout.contains("metrics"), "{}", out.stdout);
    // The v1 schema is served for `explain`.
    let out = sandbox
        .kubectl(&["explain", "hpa.spec", "--api-version=autoscaling/v1"])
        .await
        .ok();
    assert_contains(&out.stdout, "targetCPUUtilizationPercentage");
    // kubectl expands a short name to its group's preferred version: `hpa.v1.autoscaling`
    // reads v2 (the discovery is the recorded one, so kube-apiserver sees the same).
    let out = sandbox
        .kubectl(&[
            "get",
            "hpa.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
            "-o",
            "yaml",
            "-v=6",
        ])
        .await
        .ok();
    assert!(
        out.stderr
            .contains("/apis/autoscaling/v2/namespaces/kc-hpa/horizontalpodautoscalers/web 200"),
        "{}",
        out.stderr
    );
    let v2 = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ],
    )
    .await;
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert_eq!(v2["spec"]["minReplicas"], 1);
    assert!(v2["metadata"].get("annotations").is_none());
    // Field ownership is recorded in the version kubectl wrote in.
    let shown = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-n",
            "kc-hpa",
            "--show-managed-fields",
        ],
    )
    .await;
    let entry = &shown["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "kubectl-autoscale");
    assert_eq!(entry["apiVersion"], "autoscaling/v1");
    assert_eq!(
        entry["fieldsV1"]["f:spec"]["f:targetCPUUtilizationPercentage"],
        json!({}),
        "{entry}"
    );

    // A v2 HPA with what v1 cannot say: a memory metric and a behavior.
    let file = sandbox.write_file(
        "hpa-v2.yaml",
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
  namespace: kc-hpa
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  - type: Resource
    resource: {name: memory, target: {type: AverageValue, averageValue: 500Mi}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 60}
",
    );
    sandbox.kubectl(&["replace", "-f", &file]).await.ok();
    let v1 = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ],
    )
    .await;
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    let annotations = &v1["metadata"]["annotations"];
    let carried: Value = serde_json::from_str(
        annotations["autoscaling.alpha.kubernetes.io/metrics"]
            .as_str()
            .expect("the memory metric travels in an annotation"),
    )
    .expect("JSON");
    assert_eq!(
        carried,
        json!([{"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "500Mi"}}])
    );
    let behavior: Value = serde_json::from_str(
        annotations["autoscaling.alpha.kubernetes.io/behavior"]
            .as_str()
            .expect("the behavior travels in an annotation"),
    )
    .expect("JSON");
    assert_eq!(behavior["ScaleDown"]["StabilizationWindowSeconds"], 60);

    // A read-modify-write through v1 keeps what v1 cannot say.
    let mut edited = v1.clone();
    edited["spec"]["maxReplicas"] = json!(5);
    let file = sandbox.write_file("hpa-v1.json", &edited.to_string());
    sandbox.kubectl(&["replace", "-f", &file]).await.ok();
    let v2 = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ],
    )
    .await;
    assert_eq!(v2["spec"]["maxReplicas"], 5);
    let metrics: Vec<&str> = v2["spec"]["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .filter_map(|m| m["resource"]["name"].as_str())
        .collect();
    assert_eq!(metrics, ["memory", "cpu"], "the carried metric comes first");
    assert_eq!(
        v2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        60
    );
    assert!(
        v2["metadata"].get("annotations").is_none(),
        "the carrying annotations are not stored: {}",
        v2["metadata"]
    );

    // A v1 merge patch changes the CPU target and leaves the memory metric alone.
    sandbox
        .kubectl(&[
            "patch",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
            "--type=merge",
            "-p",
            r#"{"spec":{"targetCPUUtilizationPercentage":70}}"#,
        ])
        .await
        .ok();
    let v2 = get_json(
        &sandbox,
        &[
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ],
    )
    .await;
    assert_eq!(
        v2["spec"]["metrics"][1]["resource"],
        json!({"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}})
    );
    assert_eq!(v2["spec"]["metrics"][0]["resource"]["name"], "memory");

    let out = sandbox
        .kubectl(&[
            "delete",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "kc-hpa",
        ])
        .await
        .ok();
    assert_eq!(
        out.stdout.trim(),
        "horizontalpodautoscaler.autoscaling \"web\" deleted"
    );
    let gone = sandbox
        .kubectl(&["get", "hpa", "web", "-n", "kc-hpa"])
        .await;
    assert_eq!(gone.code, 1, "{gone:?}");
}
