//! Fleets (issue #28) through `tether serve`, the sandbox and a real `git daemon`:
//! `dependsOn` holds a chain of three apps (a CRD, an operator, custom resources of
//! the CRD) until each dependency is Synced and Healthy, says in the status API and
//! `tether status` which one it waits for, and wakes each dependent when its
//! dependency becomes ready, in order (asserted from status times, not timing).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::serve::{Serve, configmap, origin, server_section};
use crate::support::TestSandbox;

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.fleets.example.com}\nspec:\n  group: fleets.example.com\n  scope: Namespaced\n  names: {plural: widgets, singular: widget, kind: Widget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";

const WIDGET: &str = "apiVersion: fleets.example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: fleet}\nspec: {size: 3}\n";

/// Three apps, `crds` ← `ops` ← `crs`; `crds` suspended (so not Synced) or not. Polls
/// and resyncs are an hour apart: only the dependency wake can move a dependent.
fn chain(server: &str, url: &str, suspended: bool) -> String {
    let app = |name: &str, depends: &str, suspend: bool| {
        format!(
            "- name: {name}\n  source: {{repo: \"{url}\", ref: main, path: {name}, interval: 1h}}\n  destination: {{namespace: fleet}}\n  sync: {{automated: true, prune: true}}\n  suspend: {suspend}\n{depends}"
        )
    };
    format!(
        "{server}resyncInterval: 1h\napps:\n{}{}{}",
        app("crds", "", suspended),
        app("ops", "  dependsOn: [crds]\n", false),
        app("crs", "  dependsOn: [ops]\n", false),
    )
}

fn condition<'s>(status: &'s Value, kind: &str) -> &'s Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} condition: {status}"))
}

fn time(value: &Value) -> DateTime<Utc> {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a time: {value}"));
    DateTime::parse_from_rfc3339(text)
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

/// When the app's first pass (after its wait) finished: the oldest of its history.
fn first_pass(status: &Value) -> DateTime<Utc> {
    let history = status["history"].as_array().expect("history");
    time(&history.last().expect("a pass")["finishedAt"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_three_waits_says_why_and_wakes_in_dependency_order() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("fleet").await;
    let origin = origin(
        &sandbox,
        &[
            ("crds/crd.yaml", CRD),
            ("ops/operator.yaml", &configmap("operator", "fleet", "1")),
            ("crs/widget.yaml", WIDGET),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "fleets", &chain(&server, &origin.url, true), &[]).await;

    // crds passes without acting (suspended: its CRD is not applied, so it is not
    // Synced); ops waits for it, crs for ops, and neither reads or writes anything.
    let ops = serve
        .wait_status("ops", "ops waits for crds", |s| {
            s["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["reason"] == "DependencyNotReady")
            })
        })
        .await;
    let message = condition(&ops, "Ready")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.starts_with("waiting for crds ("), "{ops}");
    assert_eq!(ops["automation"]["acting"], false, "{ops}");
    assert!(
        ops["lastPass"].is_null(),
        "a waiting app runs no pass: {ops}"
    );
    let crs = serve
        .wait_status("crs", "crs waits for ops", |s| {
            s["conditions"].as_array().is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["type"] == "Ready"
                        && c["message"] == "waiting for ops (not Ready: DependencyNotReady)"
                })
            })
        })
        .await;
    assert!(crs["lastPass"].is_null(), "{crs}");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["status", "--server", &serve.url])
        .output()
        .await
        .expect("tether status runs");
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("crs "))
        .expect("a crs row");
    assert!(
        row.ends_with("waiting for ops (not Ready: DependencyNotReady)"),
        "{table}"
    );
    let absent = sandbox
        .kubectl(&["get", "cm", "operator", "-n", "fleet"])
        .await;
    assert_ne!(absent.code, 0, "ops applied nothing while waiting");

    // crds may act now (a reload restarts it alone): once it is Synced and Healthy,
    // ops wakes at once, then crs, whose Widget the CRD now serves.
    let path = sandbox.dir.path().join("fleets.yaml");
    std::fs::write(&path, chain(&server, &origin.url, false)).expect("write config");
    serve.signal("HUP");
    let crs = serve
        .wait_status("crs", "crs syncs after ops", |s| {
            s["sync"] == "Synced" && s["health"] == "Healthy"
        })
        .await;
    let ops = serve.status("ops").await;
    let crds = serve.status("crds").await;
    sandbox
        .kubectl(&["get", "widget", "w1", "-n", "fleet"])
        .await
        .ok();
    let crds_synced = time(&condition(&crds, "Synced")["lastTransitionTime"]);
    let ops_synced = time(&condition(&ops, "Synced")["lastTransitionTime"]);
    assert!(
        first_pass(&ops) >= crds_synced,
        "ops ran before crds was Synced:\n{crds}\n{ops}"
    );
    assert!(
        first_pass(&crs) >= ops_synced,
        "crs ran before ops was Synced:\n{ops}\n{crs}"
    );
    assert_eq!(condition(&crs, "Ready")["status"], "True", "{crs}");
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_with_a_dependency_cycle_is_refused_naming_the_chain() {
    let sandbox = TestSandbox::start().await;
    let server = server_section(sandbox.dir.path());
    let app = |name: &str, on: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"https://git.example/r.git\"}}\n  dependsOn: [{on}]\n"
        )
    };
    let config = format!(
        "{server}apps:\n{}{}{}",
        app("a", "b"),
        app("b", "c"),
        app("c", "a")
    );
    let path = sandbox.write_file("cycle.yaml", &config);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["serve", "--config", &path])
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .output()
        .await
        .expect("tether serve runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("apps[0].dependsOn: a dependency cycle: a → b → c → a"),
        "{stderr}"
    );
}
