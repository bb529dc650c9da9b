//! The reading commands: `kubectl wait`, `get --watch`, `get` with the columns of
//! kube-apiserver's printers, events at either version, and `describe`.

use super::*;
use tether_testkit::assert_contains;

#[tokio::test]
async fn wait_for_a_condition_a_jsonpath_and_a_deletion() {
    let (sandbox, _) = deployed("kc-wait").await;
    let available = sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "-n",
            "kc-wait",
            "--timeout=20s",
        ])
        .await
        .ok();
    assert_eq!(available.stdout.trim(), "deployment.apps/web condition met");
    sandbox
        .kubectl(&["scale", "deployment/web", "-n", "kc-wait", "--replicas=3"])
        .await
        .ok();
    let ready = sandbox
        .kubectl(&[
            "wait",
            "--for=jsonpath={.status.readyReplicas}=3",
            "deployment/web",
            "-n",
            "kc-wait",
            "--timeout=20s",
        ])
        .await
        .ok();
    assert_eq!(ready.stdout.trim(), "deployment.apps/web condition met");
    // A condition that never comes: kubectl gives up with exit code 1.
    let never = sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Paused",
            "deployment/web",
            "-n",
            "kc-wait",
            "--timeout=1s",
        ])
        .await;
    assert_eq!(never.code, 1, "{never:?}");

    sandbox.sandbox.reset_requests();
    let wait = sandbox.kubectl(&[
        "wait",
        "--for=delete",
        "deployment/web",
        "-n",
        "kc-wait",
        "--timeout=20s",
    ]);
    let delete = async {
        eventually("kubectl's watch of the Deployment", || async {
            (sandbox.sandbox.requests().get("watch", "apps/deployments") > 0).then_some(())
        })
        .await;
        sandbox
            .kubectl(&["delete", "deployment", "web", "-n", "kc-wait"])
            .await
            .ok()
    };
    let (waited, deleted) = tokio::join!(wait, delete);
    assert_eq!(deleted.stdout.trim(), "deployment.apps \"web\" deleted");
    let waited = waited.ok();
    assert_eq!(waited.stdout.trim(), "deployment.apps/web condition met");
}

/// Runs `kubectl get -w` and returns the lines it prints until `done` holds, then
/// stops it: a watch never ends by itself.
async fn watch_lines(
    sandbox: &TestSandbox,
    args: &[&str],
    change: impl std::future::Future<Output = ()>,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .args(args)
        .env("HOME", sandbox.dir.path())
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs");
    let mut stdout = BufReader::new(child.stdout.take().expect("kubectl's stdout")).lines();
    let mut lines = Vec::new();
    let read = async {
        while !done(&lines) {
            match stdout.next_line().await.expect("kubectl's stdout reads") {
                Some(line) => lines.push(line),
                None => break,
            }
        }
    };
    let ((), ()) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(read, change)
    })
    .await
    .unwrap_or_else(|_| panic!("kubectl get -w printed only {lines:?}"));
    child.kill().await.expect("kubectl get -w stops");
    lines
}

#[tokio::test]
async fn get_watch_prints_a_row_for_each_change() {
    let (sandbox, _) = deployed("kc-watch").await;
    // `rollout status` watched too; count only the watch of `get -w`.
    sandbox.sandbox.reset_requests();
    let change = async {
        eventually("kubectl's watch of Deployments", || async {
            (sandbox.sandbox.requests().get("watch", "apps/deployments") > 0).then_some(())
        })
        .await;
        sandbox
            .kubectl(&["scale", "deployment/web", "-n", "kc-watch", "--replicas=3"])
            .await
            .ok();
    };
    let lines = watch_lines(
        &sandbox,
        &["get", "deployments", "-n", "kc-watch", "-w"],
        change,
        |lines| {
            lines
                .iter()
                .any(|l| l.starts_with("web") && l.contains("3/3"))
        },
    )
    .await;
    let table = rows(&lines.join("\n"));
    assert_eq!(
        table[0],
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{lines:?}"
    );
    assert_eq!(table[1][..4], ["web", "2/2", "2", "2"], "{lines:?}");
    assert_eq!(
        table.iter().filter(|r| r[0] == "NAME").count(),
        1,
        "one header for the whole watch: {lines:?}"
    );
}

#[tokio::test]
async fn get_prints_the_columns_of_kube_apiservers_printers() {
    let (sandbox, _) = deployed("kc-table").await;
    let out = sandbox
        .kubectl(&[
            "get",
            "deployments,replicasets",
            "-n",
            "kc-table",
            "-o",
            "wide",
        ])
        .await
        .ok();
    let table = rows(&out.stdout);
    assert_eq!(
        table[0],
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(table[1][..4], ["deployment.apps/web", "2/2", "2", "2"]);
    assert_eq!(table[1][5..], ["web", "nginx:1.25", "app=web"]);
    assert_eq!(
        table[2][..5],
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    );
    assert!(table[3][0].starts_with("replicaset.apps/web-"), "{table:?}");
    assert_eq!(table[3][1..4], ["2", "2", "2"]);
    let namespaces = sandbox
        .kubectl(&["get", "namespace", "kc-table"])
        .await
        .ok();
    assert_eq!(rows(&namespaces.stdout)[1][..2], ["kc-table", "Active"]);
    // --sort-by asks for each row's whole object and sorts by a field of it (lists
    // come in name order, so the sort is by data).
    for (name, rank) in [("a", "3"), ("b", "1"), ("c", "2")] {
        let file = sandbox.write_file(
            &format!("{name}.yaml"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: kc-table}}\ndata: {{rank: \"{rank}\"}}\n"),
        );
        sandbox.kubectl(&["apply", "-f", &file]).await.ok();
    }
    let sorted = sandbox
        .kubectl(&[
            "get",
            "configmaps",
            "-n",
            "kc-table",
            "--sort-by=.data.rank",
        ])
        .await
        .ok();
    let names: Vec<String> = rows(&sorted.stdout)[1..]
        .iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(names, ["b", "c", "a"]);
    assert_eq!(rows(&sorted.stdout)[0], ["NAME", "DATA", "AGE"]);
}

#[tokio::test]
async fn get_events_lists_what_the_deployment_controller_did() {
    let (sandbox, _) = deployed("kc-events").await;
    sandbox
        .kubectl(&["scale", "deployment/web", "-n", "kc-events", "--replicas=5"])
        .await
        .ok();
    rolled_out(&sandbox, "kc-events").await;
    let out = sandbox
        .kubectl(&["get", "events", "-n", "kc-events"])
        .await
        .ok();
    let table = rows(&out.stdout);
    assert_eq!(
        table[0],
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    let messages: Vec<&str> = table[1..].iter().map(|r| r[4].as_str()).collect();
    let rs = replica_sets(&sandbox, "kc-events").await;
    let rs_name = rs[0]["metadata"]["name"].as_str().expect("a ReplicaSet");
    assert_eq!(
        messages,
        [
            format!("Scaled up replica set {rs_name} to 2"),
            format!("Scaled up replica set {rs_name} to 5 from 2"),
        ]
    );
    assert!(
        table[1..]
            .iter()
            .all(|r| r[1] == "Normal" && r[2] == "ScalingReplicaSet" && r[3] == "deployment/web")
    );
    // The Events as stored: the recorder's fields, pointing at the Deployment.
    let events = get_json(&sandbox, &["events", "-n", "kc-events"]).await;
    let event = &events["items"][0];
    let stored = deployment(&sandbox, "kc-events").await;
    assert_eq!(event["involvedObject"]["uid"], stored["metadata"]["uid"]);
    assert_eq!(event["source"]["component"], "deployment-controller");
    assert_eq!(event["reportingComponent"], "deployment-controller");
    assert_eq!(event["count"], 1);
    // Selected by the fields kubectl describe selects them by.
    let selected = get_json(
        &sandbox,
        &[
            "events",
            "-n",
            "kc-events",
            "--field-selector",
            "involvedObject.kind=Deployment,involvedObject.name=web,reason=ScalingReplicaSet",
        ],
    )
    .await;
    assert_eq!(selected["items"].as_array().map(Vec::len), Some(2));
    let unknown = sandbox
        .kubectl(&[
            "get",
            "events",
            "-n",
            "kc-events",
            "--field-selector",
            "involvedObject.color=red",
        ])
        .await;
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(unknown.stderr.contains("field label not supported"));
}

#[tokio::test]
async fn describe_shows_each_kind_and_its_events() {
    let sandbox = TestSandbox::start().await;
    for first in ["01-namespace.yaml", "20-crd.yaml"] {
        sandbox
            .kubectl(&[
                "apply",
                "--server-side",
                "-f",
                &format!("{FIXTURE_MANIFESTS}/{first}"),
            ])
            .await
            .ok();
    }
    sandbox
        .kubectl(&["apply", "--server-side", "-f", FIXTURE_MANIFESTS])
        .await
        .ok();
    rolled_out(&sandbox, "fixtures").await;
    let kinds = [
        ("configmap", "app-config"),
        ("secret", "app-secret"),
        ("serviceaccount", "app"),
        ("service", "web"),
        ("deployment", "web"),
        ("statefulset", "db"),
        ("daemonset", "agent"),
        ("job", "migrate"),
        ("cronjob", "backup"),
        ("ingress", "web"),
        ("networkpolicy", "deny-all"),
        ("role", "reader"),
        ("rolebinding", "reader"),
        ("clusterrole", "fixtures-viewer"),
        ("clusterrolebinding", "fixtures-viewer"),
        ("persistentvolumeclaim", "data"),
        ("poddisruptionbudget", "web"),
        ("horizontalpodautoscaler", "web"),
        ("lease", "leader"),
        ("pod", "debug"),
        ("widget", "w1"),
        ("namespace", "fixtures"),
        ("customresourcedefinition", "widgets.example.com"),
    ];
    for (kind, name) in kinds {
        let out = sandbox
            .kubectl(&["describe", kind, name, "-n", "fixtures"])
            .await;
        assert_eq!(out.code, 0, "describe {kind}: {out:?}");
        let first = out.stdout.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("Name:") && first.ends_with(name),
            "describe {kind}: {}",
            out.stdout
        );
    }
    let hpa = sandbox
        .kubectl(&["get", "hpa", "web", "-n", "fixtures"])
        .await
        .ok();
    let table = rows(&hpa.stdout);
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
        table[1][..5],
        ["web", "Deployment/web", "cpu: <unknown>/80%", "2", "10"]
    );
    let out = sandbox
        .kubectl(&["describe", "deployment", "web", "-n", "fixtures"])
        .await
        .ok();
    let rs = replica_sets(&sandbox, "fixtures").await;
    let rs_name = rs[0]["metadata"]["name"].as_str().expect("a ReplicaSet");
    assert!(
        out.stdout.contains(&format!(
            "NewReplicaSet:   {rs_name} (1/1 replicas created)"
        )),
        "{}",
        out.stdout
    );
    let events: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Events:"))
        .collect();
    assert!(
        events.iter().any(|l| l.contains("ScalingReplicaSet")
            && l.contains("deployment-controller")
            && l.contains(&format!("Scaled up replica set {rs_name} to 1"))),
        "{}",
        out.stdout
    );
    let out = sandbox
        .kubectl(&["describe", "replicaset", rs_name, "-n", "fixtures"])
        .await
        .ok();
    assert_contains(&out.stdout, "Controlled By:  Deployment/web");
}

/// core/v1 and events.k8s.io/v1 Events are one storage with renamed fields: an Event
/// written in either version reads back in the other, and kubectl's `get events`,
/// `get events.v1.events.k8s.io` and `describe` see both.
#[tokio::test]
async fn events_written_at_either_version_read_back_at_the_other() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("kc-ev").await;
    let config = sandbox
        .post(
            "/api/v1/namespaces/kc-ev/configmaps",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}),
        )
        .await
        .json();
    let uid = config["metadata"]["uid"].as_str().expect("a uid");
    let regarding = json!({"kind": "ConfigMap", "namespace": "kc-ev", "name": "settings", "uid": uid, "apiVersion": "v1"});

    // events.k8s.io/v1 → core/v1.
    let created = sandbox
        .post(
            "/apis/events.k8s.io/v1/namespaces/kc-ev/events",
            &json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "settings.new"},
                "eventTime": "2026-11-24T09:00:00.123456Z",
                "reportingController": "example.com/syncer",
                "reportingInstance": "syncer-0",
                "action": "Sync",
                "reason": "Synced",
                "regarding": regarding,
                "note": "settings synced from git",
                "type": "Normal"
            }),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let created = created.json();
    assert_eq!(created["apiVersion"], "events.k8s.io/v1");
    assert_eq!(created["note"], "settings synced from git");
    assert_eq!(created["deprecatedSource"], json!({}));
    let core = sandbox
        .get("/api/v1/namespaces/kc-ev/events/settings.new")
        .await
        .json();
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["involvedObject"], regarding);
    assert_eq!(core["message"], "settings synced from git");
    assert_eq!(core["reportingComponent"], "example.com/syncer");
    assert_eq!(core["reportingInstance"], "syncer-0");
    assert_eq!(core["eventTime"], "2026-11-24T09:00:00.123456Z");
    assert_eq!(core["source"], json!({}));
    assert_eq!(core["firstTimestamp"], Value::Null);
    assert!(core.get("note").is_none() && core.get("regarding").is_none());
    // Owned in the version it was written in, with that version's field names.
    let entry = &core["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "events.k8s.io/v1");
    assert!(entry["fieldsV1"].get("f:note").is_some(), "{entry}");
    assert_eq!(
        core["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "one object, not two"
    );

    // core/v1 → events.k8s.io/v1, as a recorder of the old API writes it.
    let written = sandbox
        .post(
            "/api/v1/namespaces/kc-ev/events",
            &json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "settings.old"},
                "involvedObject": regarding,
                "reason": "Drifted",
                "message": "settings changed outside git",
                "source": {"component": "tether", "host": "node-1"},
                "firstTimestamp": "2026-11-24T09:01:00Z",
                "lastTimestamp": "2026-11-24T09:02:00Z",
                "count": 3,
                "type": "Warning"
            }),
        )
        .await;
    assert_eq!(written.status, 201, "{}", written.text());
    let event = sandbox
        .get("/apis/events.k8s.io/v1/namespaces/kc-ev/events/settings.old")
        .await
        .json();
    assert_eq!(event["apiVersion"], "events.k8s.io/v1");
    assert_eq!(event["regarding"], regarding);
    assert_eq!(event["note"], "settings changed outside git");
    assert_eq!(
        event["deprecatedSource"],
        json!({"component": "tether", "host": "node-1"})
    );
    assert_eq!(event["deprecatedFirstTimestamp"], "2026-11-24T09:01:00Z");
    assert_eq!(event["deprecatedLastTimestamp"], "2026-11-24T09:02:00Z");
    assert_eq!(event["deprecatedCount"], 3);
    assert_eq!(event["eventTime"], Value::Null);
    assert!(event.get("message").is_none() && event.get("involvedObject").is_none());
    let listed = sandbox
        .get("/apis/events.k8s.io/v1/namespaces/kc-ev/events")
        .await
        .json();
    assert_eq!(listed["kind"], "EventList");
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(listed["items"][0]["note"], "settings synced from git");

    // events.k8s.io/v1 asks more of a new Event than core/v1 does.
    let refused = sandbox
        .post(
            "/apis/events.k8s.io/v1/namespaces/kc-ev/events",
            &json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "bad"},
                    "regarding": regarding, "note": "no time", "deprecatedCount": 1}),
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    let status = refused.json();
    assert_eq!(
        status["message"],
        "Event.events.k8s.io \"bad\" is invalid: [eventTime: Required value, type: Invalid value: \"\": has invalid value: , deprecatedCount: Invalid value: \"\": needs to be unset]"
    );

    // kubectl: both resources print kube-apiserver's Event columns.
    for resource in ["events", "events.v1.events.k8s.io"] {
        let out = sandbox
            .kubectl(&["get", resource, "-n", "kc-ev"])
            .await
            .ok();
        let table = rows(&out.stdout);
        assert_eq!(
            table[0],
            ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            "{resource}"
        );
        let reasons: Vec<(&str, &str, &str)> = table[1..]
            .iter()
            .map(|r| (r[1].as_str(), r[2].as_str(), r[4].as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("Normal", "Synced", "settings synced from git"),
                ("Warning", "Drifted", "settings changed outside git")
            ],
            "{resource}"
        );
        assert!(table[1..].iter().all(|r| r[3] == "configmap/settings"));
    }
    let yaml = sandbox
        .kubectl(&[
            "get",
            "events.v1.events.k8s.io",
            "settings.old",
            "-n",
            "kc-ev",
            "-o",
            "yaml",
        ])
        .await
        .ok();
    assert_contains(&yaml.stdout, "apiVersion: events.k8s.io/v1");
    assert_contains(&yaml.stdout, "note: settings changed outside git");

    // `describe` finds both by the core fields it selects on.
    let out = sandbox
        .kubectl(&["describe", "configmap", "settings", "-n", "kc-ev"])
        .await
        .ok();
    let events: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Events:"))
        .collect();
    assert!(
        events.iter().any(|l| l.contains("Synced")
            && l.contains("example.com/syncer")
            && l.contains("settings synced from git")),
        "{}",
        out.stdout
    );
    assert!(
        events
            .iter()
            .any(|l| l.contains("Drifted") && l.contains("(x3 over") && l.contains("tether")),
        "{}",
        out.stdout
    );

    // A delete at either version removes the one object.
    sandbox
        .kubectl(&[
            "delete",
            "events.v1.events.k8s.io",
            "settings.old",
            "-n",
            "kc-ev",
        ])
        .await
        .ok();
    assert_eq!(
        sandbox
            .get("/api/v1/namespaces/kc-ev/events/settings.old")
            .await
            .status,
        404
    );
}
