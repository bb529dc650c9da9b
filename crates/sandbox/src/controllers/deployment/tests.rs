//! Unit tests of the simulated Deployment controller: what one pass computes.

use super::status::{condition, fenceposts, max_unavailable};
use super::*;

const NOW: &str = "2026-11-01T00:00:00Z";

fn deployment(image: &str, replicas: i64) -> Value {
    json!({
        "metadata": {"name": "web", "namespace": "default", "generation": 3},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    })
}

/// The ReplicaSet of `deployment` after `passes` passes of the ReplicaSet controller.
fn replica_set_after(deployment: &Value, passes: usize) -> Value {
    let hash = pod_template_hash(&deployment["spec"]["template"], None);
    let mut rs = new_replica_set(deployment, "uid-1", &hash, 1);
    rs["metadata"]["generation"] = json!(1);
    for _ in 0..passes {
        let status = replica_set_status(&rs, has_broken_image(&rs));
        rs["status"] = status;
    }
    rs
}

#[test]
fn the_replica_set_carries_the_hash_owner_and_revision() {
    let d = deployment("nginx:1.25", 2);
    let rs = replica_set_after(&d, 0);
    let hash = rs["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
    assert_eq!(
        rs["spec"]["selector"]["matchLabels"][POD_TEMPLATE_HASH_LABEL],
        hash.as_str()
    );
    assert_eq!(
        rs["spec"]["template"]["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL],
        hash.as_str()
    );
    assert_eq!(rs["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
    assert_eq!(rs["metadata"]["annotations"][REVISION_ANNOTATION], "1");
    // 2 replicas, 25% surge rounded up: 3 at most.
    assert_eq!(rs["metadata"]["annotations"][MAX_REPLICAS_ANNOTATION], "3");
}

#[test]
fn the_hash_changes_with_the_template_only() {
    let a = deployment("nginx:1.25", 2);
    let mut reordered = json!({"spec": a["spec"]["template"]["spec"], "metadata": a["spec"]["template"]["metadata"]});
    let b = deployment("nginx:1.26", 2);
    let hash = pod_template_hash(&a["spec"]["template"], None);
    assert_eq!(hash, pod_template_hash(&reordered, None));
    assert_ne!(hash, pod_template_hash(&b["spec"]["template"], None));
    assert_ne!(
        hash,
        pod_template_hash(&a["spec"]["template"], Some(&json!(1)))
    );
    assert!(hash.bytes().all(|c| b"456789bcdf".contains(&c)), "{hash}");
    reordered["metadata"]["labels"]["tier"] = json!("front");
    assert_ne!(hash, pod_template_hash(&reordered, None));
}

#[test]
fn pods_are_made_first_and_ready_one_pass_later() {
    let d = deployment("nginx:1.25", 2);
    let made = replica_set_after(&d, 1);
    assert_eq!(made["status"]["replicas"], 2);
    assert_eq!(made["status"].get("readyReplicas"), None);
    let ready = replica_set_after(&d, 2);
    assert_eq!(ready["status"]["readyReplicas"], 2);
    assert_eq!(ready["status"]["availableReplicas"], 2);
    assert_eq!(replica_set_after(&d, 3)["status"], ready["status"]);
}

#[test]
fn a_rolled_out_deployment_is_available_and_complete() {
    let d = deployment("nginx:1.25", 2);
    let rs = replica_set_after(&d, 2);
    let status = deployment_status(&d, Some(&rs), std::slice::from_ref(&rs), NOW);
    assert_eq!(status["observedGeneration"], 3);
    assert_eq!(status["replicas"], 2);
    assert_eq!(status["updatedReplicas"], 2);
    assert_eq!(status["readyReplicas"], 2);
    assert_eq!(status["availableReplicas"], 2);
    assert_eq!(status.get("unavailableReplicas"), None);
    let conditions = &status["conditions"];
    assert_eq!(conditions[0]["type"], "Available");
    assert_eq!(conditions[0]["reason"], "MinimumReplicasAvailable");
    assert_eq!(
        conditions[0]["message"],
        "Deployment has minimum availability."
    );
    assert_eq!(conditions[1]["type"], "Progressing");
    assert_eq!(conditions[1]["reason"], "NewReplicaSetAvailable");
    let name = rs["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        conditions[1]["message"],
        format!("ReplicaSet \"{name}\" has successfully progressed.")
    );
}

#[test]
fn a_rollout_in_progress_says_so() {
    let d = deployment("nginx:1.25", 2);
    let rs = replica_set_after(&d, 1);
    let status = deployment_status(&d, Some(&rs), std::slice::from_ref(&rs), NOW);
    assert_eq!(status["unavailableReplicas"], 2);
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(
        status["conditions"][0]["reason"],
        "MinimumReplicasUnavailable"
    );
    assert_eq!(status["conditions"][1]["reason"], "ReplicaSetUpdated");
    let name = rs["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        status["conditions"][1]["message"],
        format!("ReplicaSet \"{name}\" is progressing.")
    );
}

#[test]
fn broken_images_never_become_ready() {
    let d = deployment("nginx:1.25-broken", 2);
    let rs = replica_set_after(&d, 5);
    assert_eq!(rs["status"].get("readyReplicas"), None);
    let status = deployment_status(&d, Some(&rs), std::slice::from_ref(&rs), NOW);
    assert_eq!(status.get("readyReplicas"), None);
    assert_eq!(status["conditions"][1]["status"], "False");
    assert_eq!(
        status["conditions"][1]["reason"],
        "ProgressDeadlineExceeded"
    );
}

#[test]
fn a_second_pass_computes_the_same_status() {
    let mut d = deployment("nginx:1.25", 2);
    let rs = replica_set_after(&d, 2);
    let first = deployment_status(&d, Some(&rs), std::slice::from_ref(&rs), NOW);
    d["status"] = first.clone();
    let later = deployment_status(
        &d,
        Some(&rs),
        std::slice::from_ref(&rs),
        "2026-11-02T00:00:00Z",
    );
    assert_eq!(later, first);
}

#[test]
fn a_changed_reason_keeps_the_transition_time_while_the_status_holds() {
    let current = json!([{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
        "message": "m", "lastUpdateTime": "t0", "lastTransitionTime": "t0"}]);
    let next = condition(
        Some(&current),
        "Progressing",
        "True",
        "NewReplicaSetAvailable",
        "n",
        "t1",
    );
    assert_eq!(next["lastTransitionTime"], "t0");
    assert_eq!(next["lastUpdateTime"], "t1");
    let flipped = condition(
        Some(&current),
        "Progressing",
        "False",
        "ProgressDeadlineExceeded",
        "n",
        "t1",
    );
    assert_eq!(flipped["lastTransitionTime"], "t1");
}

#[test]
fn surge_rounds_up_and_unavailability_down() {
    let mut d = deployment("nginx", 10);
    assert_eq!(fenceposts(&d), (3, 2));
    d["spec"]["strategy"]["rollingUpdate"] = json!({"maxSurge": 0, "maxUnavailable": "0%"});
    assert_eq!(fenceposts(&d), (0, 1));
    d["spec"]["strategy"] = json!({"type": "Recreate"});
    assert_eq!(fenceposts(&d), (0, 0));
    assert_eq!(max_unavailable(&deployment("nginx", 0)), 0);
}

#[test]
fn the_replica_set_carries_the_deployments_annotations_but_the_controllers_own() {
    let mut d = deployment("nginx:1.25", 2);
    d["metadata"]["annotations"] = json!({
        "kubernetes.io/change-cause": "kubectl set image",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        REVISION_ANNOTATION: "7",
    });
    let rs = new_replica_set(&d, "uid-1", "abc", 8);
    let annotations = &rs["metadata"]["annotations"];
    assert_eq!(
        annotations["kubernetes.io/change-cause"],
        "kubectl set image"
    );
    assert!(
        annotations
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none()
    );
    assert_eq!(annotations[REVISION_ANNOTATION], "8");
}

#[test]
fn a_replica_set_current_again_keeps_its_old_revisions() {
    let d = deployment("nginx:1.25", 2);
    let old = new_replica_set(&d, "uid-1", "abc", 1);
    // A rollback makes revision 1's ReplicaSet current as revision 3.
    let rolled_back = updated_replica_set(&old, &new_replica_set(&d, "uid-1", "abc", 3));
    assert_eq!(
        rolled_back["metadata"]["annotations"][REVISION_ANNOTATION],
        "3"
    );
    assert_eq!(
        rolled_back["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION],
        "1"
    );
    let again = updated_replica_set(&rolled_back, &new_replica_set(&d, "uid-1", "abc", 5));
    assert_eq!(
        again["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION],
        "1,3"
    );
    // A revision never goes down.
    let lower = updated_replica_set(&again, &new_replica_set(&d, "uid-1", "abc", 2));
    assert_eq!(lower["metadata"]["annotations"][REVISION_ANNOTATION], "5");
}

#[test]
fn a_paused_deployment_reports_it_in_progressing() {
    let mut d = deployment("nginx:1.25", 2);
    d["spec"]["paused"] = json!(true);
    let rs = replica_set_after(&d, 2);
    let status = deployment_status(&d, None, &[rs], NOW);
    let progressing = &status["conditions"][1];
    assert_eq!(progressing["type"], "Progressing");
    assert_eq!(progressing["status"], "Unknown");
    assert_eq!(progressing["reason"], "DeploymentPaused");
    assert!(
        status.get("updatedReplicas").is_none(),
        "no ReplicaSet of the new template"
    );
    assert_eq!(status["conditions"][0]["status"], "True", "still available");
}

/// Issue #31: a pass waiting for another's end yields the thread it runs on, which the
/// API's requests need. On one thread, a blocking wait would hang here for good (the
/// watchdog turns that into a failure); on the sandbox's two, requests stalled behind
/// a burst of passes for seconds.
#[test]
fn a_pass_waiting_for_its_turn_leaves_the_thread_to_others() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let queue = Arc::new(Queue::default());
            let turn = queue.running.lock().await;
            let ran = Arc::new(AtomicBool::new(false));
            let waiting = tokio::spawn({
                let (queue, ran) = (queue.clone(), ran.clone());
                async move {
                    queue
                        .one_at_a_time(|| ran.store(true, Ordering::SeqCst))
                        .await
                }
            });
            // The waiting pass gets the thread, and must give it back.
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert!(!ran.load(Ordering::SeqCst), "a pass ran during another");
            drop(turn);
            waiting.await.expect("the pass ends");
            assert!(
                ran.load(Ordering::SeqCst),
                "the pass ran once its turn came"
            );
        });
        let _ = done.send(());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("a pass waiting for its turn held the only thread");
}
