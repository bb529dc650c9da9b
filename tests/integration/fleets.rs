//! Fleets (issue #28) through `tether serve`, the sandbox and a real `git daemon`:
//! `dependsOn` holds a chain of three apps (a CRD, an operator, custom resources of
//! the CRD) until each dependency is Synced and Healthy, says in the status API and
//! `tether status` which one it waits for, and wakes each dependent when its
//! dependency becomes ready, in order (asserted from status times, not timing); App
//! objects depend across namespaces and are deleted in reverse order.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tether_testkit::assert_contains;

use crate::app_crd::{app, app_sandbox, app_yaml, exists};
use crate::serve::{Serve, configmap, origin_http, refused, server_section, with_origin};
use crate::support::{TestSandbox, condition, eventually};
use tether_testkit::serve::synced_and_healthy;

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

pub(crate) fn time(value: &Value) -> DateTime<Utc> {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a time: {value}"));
    DateTime::parse_from_rfc3339(text)
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

/// Waits until `app` says it waits for `dependency` (`DependencyNotReady`), and checks
/// that it has run no pass; its status.
pub(crate) async fn waits_for(serve: &Serve, app: &str, dependency: &str) -> Value {
    let status = serve
        .wait_status(app, &format!("{app} waits for {dependency}"), |s| {
            s["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["reason"] == "DependencyNotReady")
            })
        })
        .await;
    let message = condition(&status, "Ready")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.starts_with(&format!("waiting for {dependency} (")),
        "{status}"
    );
    assert!(
        status["lastPass"].is_null(),
        "a waiting app runs no pass: {status}"
    );
    status
}

/// When the app's first pass (after its wait) finished: the oldest of its history.
pub(crate) fn first_pass(status: &Value) -> DateTime<Utc> {
    let history = status["history"].as_array().expect("history");
    time(&history.last().expect("a pass")["finishedAt"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_three_waits_says_why_and_wakes_in_dependency_order() {
    let (sandbox, origin) = with_origin(
        "fleet",
        &[
            ("crds/crd.yaml", CRD),
            ("ops/operator.yaml", &configmap("operator", "fleet", "1")),
            ("crs/widget.yaml", WIDGET),
        ],
    )
    .await;
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "fleets", &chain(&server, &origin.url, true), &[]).await;

    // crds passes without acting (suspended: its CRD is not applied, so it is not
    // Synced); ops waits for it, crs for ops, and neither reads or writes anything.
    let ops = waits_for(&serve, "ops", "crds").await;
    assert_eq!(ops["automation"]["acting"], false, "{ops}");
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
    let out = serve.tether_status(&[]).await;
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
    // Synced and Healthy are written as the sync ends, its pass's record a moment
    // later: wait for the record the order is read from.
    let crs = serve
        .wait_status(
            "crs",
            "crs's first pass is recorded Synced and Healthy",
            |s| synced_and_healthy(s) && s["history"].as_array().is_some_and(|h| !h.is_empty()),
        )
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
    let (code, stderr) = refused(&sandbox, "cycle.yaml", &config).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert_contains(
        &stderr,
        "apps[0].dependsOn: a dependency cycle: a → b → c → a",
    );
}

/// An App of another namespace: waited for while it does not exist, then followed
/// (its readiness wakes the dependent); deleted while the dependent still runs, its
/// objects stay until the dependent's deletion is done (reverse order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_depend_across_namespaces_and_are_deleted_in_reverse_order() {
    let sandbox = app_sandbox(&["platform", "team-a", "live"]).await;
    sandbox
        .trusted_service_account("platform", "deployer")
        .await;
    sandbox.trusted_service_account("team-a", "deployer").await;
    let origin = origin_http(
        &sandbox,
        &[
            ("apps/db/cm.yaml", &configmap("db", "live", "1")),
            ("apps/web/cm.yaml", &configmap("web", "live", "1")),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "fleet-apps", &format!("{server}apps: []\n"), &[]).await;
    let spec = |path: &str, depends: &str| {
        format!(
            "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: {path}, interval: 1h}}\n  destination: {{namespace: live}}\n  sync: {{automated: true, prune: true, allowMassPrune: true}}\n  deletionPolicy: Prune\n{depends}",
            origin.url
        )
    };
    let apply = |yaml: String| {
        let sandbox = &sandbox;
        async move {
            sandbox.kubectl_apply(&yaml).await;
        }
    };
    apply(app_yaml(
        "web",
        "team-a",
        &spec("apps/web", "  dependsOn: [platform/db]\n"),
    ))
    .await;
    let waiting = eventually("web says it waits for platform/db", || async {
        let web = app(&sandbox, "web", "team-a").await;
        let ready = web["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?
            .clone();
        (ready["reason"] == "DependencyNotReady").then_some(ready)
    })
    .await;
    assert_eq!(
        waiting["message"], "waiting for platform/db (not found)",
        "{waiting}"
    );
    assert!(!exists(&sandbox, "cm", "web", "live").await);

    // The dependency appears and syncs: web follows without a poll or a resync.
    apply(app_yaml("db", "platform", &spec("apps/db", ""))).await;
    eventually("web syncs after db", || async {
        exists(&sandbox, "cm", "web", "live").await.then_some(())
    })
    .await;
    assert!(exists(&sandbox, "cm", "db", "live").await);

    // db deleted first: its objects wait for web's deletion.
    sandbox
        .kubectl(&["delete", "tapp", "db", "-n", "platform", "--wait=false"])
        .await
        .ok();
    eventually("db's deletion waits for web", || async {
        serve.log().contains("waiting for team-a/web").then_some(())
    })
    .await;
    assert!(exists(&sandbox, "cm", "db", "live").await);
    sandbox
        .kubectl(&["delete", "tapp", "web", "-n", "team-a", "--wait=false"])
        .await
        .ok();
    eventually("db's objects go once web's are gone", || async {
        let db = exists(&sandbox, "cm", "db", "live").await;
        let web = exists(&sandbox, "cm", "web", "live").await;
        if !db {
            assert!(!web, "db's objects were pruned before web's");
            return Some(());
        }
        None
    })
    .await;
    assert_eq!(serve.stop().await, Some(0));
}
