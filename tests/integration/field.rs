//! Field reliability (issue #12): what broke against real clusters, each reproduced
//! against the sandbox. A sync killed halfway leaves no orphans; a stale inventory
//! never hides what another replica recorded; two apps claiming one object conflict
//! instead of taking it from each other; a Namespace another app still uses is never
//! pruned with its contents; an object recorded under a version the server stopped
//! serving is still pruned.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tether_testkit::assert_contains;

use serde_json::Value;
use tether_core::cluster::Cluster;
use tether_core::sync::desired::label_for_app;
use tether_core::sync::inventory::{Entry, Inventory};
use tether_core::sync::{Action, SyncOptions, sync};
use tether_diff::manifest::{ParseOptions, read_dir};

use crate::support::{TestSandbox, action_of, app_dir, eventually, json, sync_app, tether};

fn configmap(namespace: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: \"{value}\"\n"
    )
}

fn namespace(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
}

/// `namespace/name` of every ConfigMap labelled for `app`, in every namespace.
async fn labelled_configmaps(sandbox: &TestSandbox, app: &str) -> BTreeSet<String> {
    let list = sandbox
        .get(&format!(
            "/api/v1/configmaps?labelSelector=tether.dev%2Fapp%3D{app}"
        ))
        .await
        .json();
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|cm| cm.pointer("/metadata/deletionTimestamp").is_none())
        .map(|cm| {
            format!(
                "{}/{}",
                cm["metadata"]["namespace"].as_str().unwrap_or_default(),
                cm["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Regression for issue #12, finding 1: `tether sync` killed with SIGKILL part way,
/// then Git drops part of the set: the next `sync --prune` leaves no object labelled
/// for the app outside the desired set. The inventory used to be written only after
/// applying, so everything the killed sync created was owned by no inventory.
#[tokio::test]
async fn a_sync_killed_part_way_leaves_no_orphans() {
    let sandbox = TestSandbox::start().await;
    let mut files: Vec<(String, String)> = vec![
        ("ns-a.yaml".into(), namespace("crash-a")),
        ("ns-b.yaml".into(), namespace("crash-b")),
    ];
    for i in 0..30 {
        let ns = ["default", "crash-a", "crash-b"][i % 3];
        files.push((
            format!("cm-{i:02}.yaml"),
            configmap(ns, &format!("cm-{i:02}"), "1"),
        ));
    }
    let dir = app_dir(&sandbox, "crash", &files);
    // Slow enough that the kill lands while objects are being written.
    sandbox.sandbox.set_latency(Duration::from_millis(40));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["sync", "--app", "crash"])
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .args(["--concurrency", "2", "--path"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tether sync starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let created = labelled_configmaps(&sandbox, "crash").await.len();
        if created >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "the sync never created anything");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the sync finished before it could be killed: slow the sandbox down"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().await.expect("SIGKILL");
    sandbox.sandbox.set_latency(Duration::ZERO);
    let written = labelled_configmaps(&sandbox, "crash").await;
    assert!(written.len() < 30, "killed too late: {}", written.len());

    // Git drops namespace crash-b and everything in it, and two ConfigMaps elsewhere.
    let kept: Vec<(String, String)> = files
        .iter()
        .filter(|(name, content)| {
            !content.contains("crash-b") && name != "cm-00.yaml" && name != "cm-01.yaml"
        })
        .cloned()
        .collect();
    let dir = app_dir(&sandbox, "crash", &kept);
    let run = sync_app(&sandbox, &dir, "crash", &["--prune"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);

    let expected: BTreeSet<String> = kept
        .iter()
        .filter(|(_, content)| content.contains("kind: ConfigMap"))
        .map(|(name, content)| {
            let ns = content
                .lines()
                .find_map(|l| l.trim().strip_prefix("namespace: "))
                .expect("namespace");
            format!("{ns}/{}", name.trim_end_matches(".yaml"))
        })
        .collect();
    assert_eq!(labelled_configmaps(&sandbox, "crash").await, expected);
    let ns = sandbox.get("/api/v1/namespaces/crash-b").await;
    assert!(
        ns.status == reqwest::StatusCode::NOT_FOUND
            || ns.json().pointer("/metadata/deletionTimestamp").is_some(),
        "namespace crash-b survived: {}",
        ns.text()
    );
}

/// Regression for issue #12, finding 4: a replica that followed kept the inventory it
/// read at its first pass; leading later, it pruned from that frozen copy, so objects
/// the old leader had added were never pruned and were erased from the inventory.
#[tokio::test]
async fn a_stale_inventory_never_hides_what_another_replica_recorded() {
    let sandbox = TestSandbox::start().await;
    let files: Vec<(String, String)> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| (format!("{n}.yaml"), configmap("default", n, "1")))
        .collect();
    // The old leader synced all four.
    let dir = app_dir(&sandbox, "takeover", &files);
    let run = sync_app(&sandbox, &dir, "takeover", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);

    // The new leader's copy of the inventory is from before b, c and d were added;
    // Git now wants a, b and c.
    let dir = app_dir(&sandbox, "takeover", &files[..3]);
    let mut desired = read_dir(&dir, &ParseOptions::default()).expect("manifests");
    label_for_app(&mut desired, "takeover");
    let stale = Inventory {
        revision: None,
        objects: [Entry::of(&desired.objects[0].id)].into_iter().collect(),
    };
    let cluster = Cluster::connect(Some(&sandbox.kubeconfig), None)
        .await
        .expect("cluster");
    let options = SyncOptions {
        prune: true,
        inventory: Some(&stale),
        ..SyncOptions::new("takeover")
    };
    let report = sync(&cluster, &desired, None, &options)
        .await
        .expect("sync");
    let pruned: Vec<String> = report
        .objects
        .iter()
        .filter(|o| o.action == Action::Pruned)
        .map(|o| o.id.name.clone())
        .collect();
    assert_eq!(pruned, vec!["d".to_string()]);
    assert_eq!(
        labelled_configmaps(&sandbox, "takeover").await,
        ["default/a", "default/b", "default/c"]
            .into_iter()
            .map(String::from)
            .collect()
    );
    let names: Vec<&str> = report
        .inventory
        .objects
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
}

/// Regression for issue #12, finding 6: with one field manager for every app, an
/// object two apps claimed flip-flopped between them. Now the second app reports a
/// Conflict (exit 1) and leaves the object alone until the first lets go.
#[tokio::test]
async fn two_apps_claiming_one_object_conflict_until_one_lets_go() {
    let sandbox = TestSandbox::start().await;
    let first = app_dir(
        &sandbox,
        "first",
        &[
            ("shared.yaml", configmap("default", "shared", "first")),
            ("own.yaml", configmap("default", "first-own", "1")),
        ],
    );
    let run = sync_app(&sandbox, &first, "first", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);

    let second = app_dir(
        &sandbox,
        "second",
        &[
            ("shared.yaml", configmap("default", "shared", "second")),
            ("own.yaml", configmap("default", "second-own", "1")),
        ],
    );
    let run = sync_app(&sandbox, &second, "second", &[]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let report = json(&run);
    assert_eq!(action_of(&report, "ConfigMap/shared"), "conflict");
    // The rest of the app is applied: a conflict is not an invalid revision.
    assert_eq!(action_of(&report, "ConfigMap/second-own"), "created");
    let shared = sandbox
        .get("/api/v1/namespaces/default/configmaps/shared")
        .await
        .json();
    assert_eq!(shared["data"]["key"], "first");
    assert_eq!(shared["metadata"]["labels"]["tether.dev/app"], "first");

    // `tether diff` says the same, with the owner.
    let dir = second.to_str().expect("utf-8");
    let run = tether(
        &sandbox,
        "diff",
        &["--path", dir, "--app", "second", "-o", "json"],
    )
    .await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let diff = json(&run);
    let resource = diff["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "shared")
        .expect("shared in the diff")
        .clone();
    assert_eq!(resource["status"], "Conflict");
    assert_eq!(resource["owner"], "first");
    assert_eq!(diff["summary"]["Conflict"], 1);

    // The first app lets go (prunes it); the second then creates its own.
    let first = app_dir(
        &sandbox,
        "first",
        &[("own.yaml", configmap("default", "first-own", "1"))],
    );
    let run = sync_app(&sandbox, &first, "first", &["--prune"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(action_of(&json(&run), "ConfigMap/shared"), "pruned");
    let run = sync_app(&sandbox, &second, "second", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let shared = sandbox
        .get("/api/v1/namespaces/default/configmaps/shared")
        .await
        .json();
    assert_eq!(shared["data"]["key"], "second");
    assert_eq!(shared["metadata"]["labels"]["tether.dev/app"], "second");
}

/// Regression for issue #12, finding 6: an app that dropped a Namespace deleted it
/// with everything in it, another app's objects included, and the mass-prune guard
/// counted it as one object.
#[tokio::test]
async fn a_namespace_another_app_still_uses_is_not_pruned() {
    let sandbox = TestSandbox::start().await;
    let infra = app_dir(
        &sandbox,
        "infra",
        &[
            ("ns.yaml", namespace("team")),
            ("cm.yaml", configmap("team", "infra-settings", "1")),
            ("keep-1.yaml", configmap("default", "infra-1", "1")),
            ("keep-2.yaml", configmap("default", "infra-2", "1")),
            ("keep-3.yaml", configmap("default", "infra-3", "1")),
        ],
    );
    let run = sync_app(&sandbox, &infra, "infra", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let web = app_dir(
        &sandbox,
        "web",
        &[("cm.yaml", configmap("team", "web-settings", "1"))],
    );
    let run = sync_app(&sandbox, &web, "web", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);

    // infra drops the namespace and its own object in it.
    let infra = app_dir(
        &sandbox,
        "infra",
        &[
            ("keep-1.yaml", configmap("default", "infra-1", "1")),
            ("keep-2.yaml", configmap("default", "infra-2", "1")),
            ("keep-3.yaml", configmap("default", "infra-3", "1")),
        ],
    );
    let run = sync_app(&sandbox, &infra, "infra", &["--prune"]).await;
    let report = json(&run);
    assert_eq!(action_of(&report, "ConfigMap/infra-settings"), "pruned");
    assert_eq!(action_of(&report, "Namespace/team"), "skipped");
    let message = report["resources"]
        .as_array()
        .expect("objects")
        .iter()
        .find(|o| o["kind"] == "Namespace")
        .and_then(|o| o["message"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("web-settings") && message.contains("web"),
        "{message}"
    );
    let ns = sandbox.get("/api/v1/namespaces/team").await;
    assert_eq!(ns.status, reqwest::StatusCode::OK);
    assert!(ns.json().pointer("/metadata/deletionTimestamp").is_none());
    assert_eq!(
        sandbox
            .get("/api/v1/namespaces/team/configmaps/web-settings")
            .await
            .status,
        reqwest::StatusCode::OK
    );

    // Once web is gone, infra's next prune takes the namespace.
    let empty_web = app_dir(&sandbox, "web", &[] as &[(&str, &str)]);
    let run = sync_app(
        &sandbox,
        &empty_web,
        "web",
        &["--prune", "--allow-mass-prune"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let run = sync_app(&sandbox, &infra, "infra", &["--prune"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(action_of(&json(&run), "Namespace/team"), "pruned");
}

/// Regression for issue #12 (found by `benches/field.rs`): Git dropping one Namespace
/// of three with its contents was refused as a mass prune, because the guard counted
/// the app's objects in the Namespace twice: once each as candidates, and again as
/// what deleting the Namespace takes with it. A third of the app is not more than half;
/// two thirds still are.
#[tokio::test]
async fn dropping_a_namespace_with_its_contents_counts_each_deletion_once() {
    let sandbox = TestSandbox::start().await;
    let set = |namespaces: &[&str]| -> Vec<(String, String)> {
        let mut files = Vec::new();
        for ns in namespaces {
            files.push((format!("{ns}.yaml"), namespace(ns)));
            for i in 0..3 {
                files.push((
                    format!("{ns}-{i}.yaml"),
                    configmap(ns, &format!("cm-{i}"), "1"),
                ));
            }
        }
        files
    };
    let dir = app_dir(&sandbox, "drop", &set(&["drop-a", "drop-b", "drop-c"]));
    let run = sync_app(&sandbox, &dir, "drop", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);

    // Two Namespaces of three, 8 of the app's 12 objects: refused.
    let dir = app_dir(&sandbox, "drop", &set(&["drop-a"]));
    let run = sync_app(&sandbox, &dir, "drop", &["--prune"]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let refused = json(&run)["pruneRefused"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_contains(&refused, "refusing to prune 8 of the app's 12 objects");

    // One Namespace of three, 4 of 12: pruned, contents and all.
    let dir = app_dir(&sandbox, "drop", &set(&["drop-a", "drop-b"]));
    let run = sync_app(&sandbox, &dir, "drop", &["--prune"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let report = json(&run);
    assert_eq!(report["pruneRefused"], Value::Null, "{report}");
    assert_eq!(action_of(&report, "Namespace/drop-c"), "pruned");
    assert_eq!(
        sandbox.get("/api/v1/namespaces/drop-c").await.status,
        reqwest::StatusCode::NOT_FOUND
    );
    assert_eq!(
        labelled_configmaps(&sandbox, "drop").await,
        ["drop-a", "drop-b"]
            .iter()
            .flat_map(|ns| (0..3).map(move |i| format!("{ns}/cm-{i}")))
            .collect()
    );
}

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: {name}\n        image: {image}\n"
    )
}

/// Regression for issue #12, finding 2: `tether diff` right after a sync reported
/// `metadata.annotations` of a Deployment as Modified: the Deployment controller
/// writes `deployment.kubernetes.io/revision` a few milliseconds after each change, and
/// the diff compared a dry-run answer with a live copy read at another
/// resourceVersion. Each round syncs a new image and diffs at once, in-process, so the
/// diff runs while the sandbox's controller is still writing.
#[tokio::test]
async fn a_diff_right_after_a_sync_sees_no_drift_while_controllers_write() {
    let sandbox = TestSandbox::start().await;
    let cluster = Cluster::connect(Some(&sandbox.kubeconfig), None)
        .await
        .expect("cluster");
    for round in 0..10 {
        let image = format!("nginx:1.{}", 20 + round);
        let dir = app_dir(
            &sandbox,
            "race",
            &[
                ("web.yaml", deployment("web", &image)),
                ("api.yaml", deployment("api", &image)),
            ],
        );
        let mut desired = read_dir(&dir, &ParseOptions::default()).expect("manifests");
        label_for_app(&mut desired, "race");
        let options = SyncOptions::new("race");
        let report = sync(&cluster, &desired, None, &options)
            .await
            .expect("sync");
        assert!(!report.failed(), "round {round}: {report:?}");
        let observed = tether_core::sync::observe(&cluster, &desired, &report.inventory, &options)
            .await
            .expect("observe");
        let drifted: Vec<String> = observed
            .drift()
            .expect("drift")
            .iter()
            .filter(|d| d.drift.is_drift())
            .map(|d| format!("{}: {:?}", d.id, d.drift))
            .collect();
        assert!(drifted.is_empty(), "round {round}: {drifted:?}");
    }
    // The controller was writing all along: it catches up with the last change (a
    // change it had not acted on yet when the next came is folded into one revision).
    eventually("the controller to catch up", || async {
        let live = sandbox
            .get("/apis/apps/v1/namespaces/default/deployments/web")
            .await
            .json();
        let revision: u64 = live["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
            .as_str()?
            .parse()
            .ok()?;
        let caught_up = live["status"]["observedGeneration"] == live["metadata"]["generation"];
        (caught_up && revision >= 2).then_some(())
    })
    .await;
}

fn gadget_crd(versions: &[(&str, bool, bool)]) -> String {
    let mut yaml = String::from(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: gadgets, singular: gadget, kind: Gadget}\n  versions:\n",
    );
    for (name, served, storage) in versions {
        yaml.push_str(&format!(
            "  - name: {name}\n    served: {served}\n    storage: {storage}\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec: {{type: object, properties: {{size: {{type: integer}}}}}}\n"
        ));
    }
    yaml
}

fn gadget(version: &str, name: &str) -> String {
    format!(
        "apiVersion: example.com/{version}\nkind: Gadget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  size: 1\n"
    )
}

/// Regression for issue #12, finding 6: an inventory entry recorded as
/// `example.com/v1alpha1` was dropped without being deleted once the CRD stopped
/// serving `v1alpha1`. It is now found, and pruned, through the version still served.
#[tokio::test]
async fn an_object_recorded_under_a_version_no_longer_served_is_still_pruned() {
    let sandbox = TestSandbox::start().await;
    let dir = app_dir(
        &sandbox,
        "gadgets",
        &[
            ("crd.yaml", gadget_crd(&[("v1alpha1", true, true)])),
            ("old.yaml", gadget("v1alpha1", "old")),
            ("kept.yaml", gadget("v1alpha1", "kept")),
            ("a.yaml", configmap("default", "gadget-a", "1")),
            ("b.yaml", configmap("default", "gadget-b", "1")),
        ],
    );
    let run = sync_app(&sandbox, &dir, "gadgets", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);

    // The CRD moves to v1 and stops serving v1alpha1; Git drops `old`.
    let dir = app_dir(
        &sandbox,
        "gadgets",
        &[
            (
                "crd.yaml",
                gadget_crd(&[("v1alpha1", false, false), ("v1", true, true)]),
            ),
            ("kept.yaml", gadget("v1", "kept")),
            ("a.yaml", configmap("default", "gadget-a", "1")),
            ("b.yaml", configmap("default", "gadget-b", "1")),
        ],
    );
    let run = sync_app(&sandbox, &dir, "gadgets", &["--prune"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(action_of(&json(&run), "Gadget/old"), "pruned");
    assert_eq!(
        sandbox
            .get("/apis/example.com/v1/namespaces/default/gadgets/old")
            .await
            .status,
        reqwest::StatusCode::NOT_FOUND
    );
    assert_eq!(
        sandbox
            .get("/apis/example.com/v1/namespaces/default/gadgets/kept")
            .await
            .status,
        reqwest::StatusCode::OK
    );
}

/// Regression for issue #12 (faults): with the control plane failing one request in
/// five (429, 500, 503), a cold sync of 20 objects makes about 70 requests, so without
/// retries an attempt almost never saw them all pass and the app never converged.
/// Requests answered "busy or failing" are now sent again, a few times, backing off.
#[tokio::test]
async fn a_sync_converges_while_the_api_server_fails_one_request_in_five() {
    let sandbox = TestSandbox::start().await;
    let files: Vec<(String, String)> = (0..20)
        .map(|i| {
            let name = format!("flaky-{i:02}");
            (format!("{name}.yaml"), configmap("default", &name, "1"))
        })
        .collect();
    let dir = app_dir(&sandbox, "flaky", &files);
    sandbox.sandbox.set_fail_rate(0.2);
    // One in 3,000 requests still fails after its retries: a second run covers that.
    let mut runs = Vec::new();
    for _ in 0..3 {
        let run = sync_app(&sandbox, &dir, "flaky", &[]).await;
        let done = run.code == Some(0);
        runs.push(run);
        if done {
            break;
        }
    }
    sandbox.sandbox.set_fail_rate(0.0);
    let last = runs.last().expect("a run");
    assert_eq!(
        last.code,
        Some(0),
        "{} runs, last:\n{}{}",
        runs.len(),
        last.stdout,
        last.stderr
    );
    assert_eq!(labelled_configmaps(&sandbox, "flaky").await.len(), 20);
}
