//! CEL health rules (issue #28) through `tether serve`, the sandbox and a real `git
//! daemon`: a custom resource whose CRD has a status subresource is judged by the
//! app's `healthCheckExprs` rule as `kubectl` writes its status (Progressing, then
//! Healthy, then Degraded with the controller's message in the status API and `tether
//! status`); a rule that does not compile refuses the configuration, naming the app,
//! the rule and the position in the expression.

use serde_json::Value;
use tether_testkit::assert_contains;

use crate::serve::{Serve, configmap, refused, server_section, with_origin};
use crate::support::{TestSandbox, app_dir, json, resource, sync_app};

pub(crate) const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.health.example.com}\nspec:\n  group: health.example.com\n  scope: Namespaced\n  names: {plural: gadgets, singular: gadget, kind: Gadget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    subresources: {status: {}}\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";

pub(crate) const GADGET: &str = "apiVersion: health.example.com/v1\nkind: Gadget\nmetadata: {name: g1, namespace: gadgets}\nspec: {size: 3}\n";

/// Gadgets report `status.phase`, which no built-in rule knows (kstatus alone would
/// call a Gadget without a `Ready` condition Healthy at once).
pub(crate) const RULES: &str = "  healthCheckExprs:\n  - apiVersion: health.example.com/v1\n    kind: Gadget\n    inProgress: \"!has(status.phase) || status.phase == 'Pending'\"\n    failed: \"status.phase == 'Failed'\"\n    current: \"status.phase == 'Running'\"\n";

/// `crds` applies the CRD; `gadgets` (waiting for it) applies a Gadget judged by its
/// rule. Resyncs every 2 s, so a status written by `kubectl` is judged again soon
/// whether or not the object's watch wakes the app.
fn config(server: &str, url: &str) -> String {
    let app = |name: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{url}\", ref: main, path: {name}, interval: 1h}}\n  destination: {{namespace: gadgets}}\n  sync: {{automated: true, prune: true}}\n"
        )
    };
    format!(
        "{server}resyncInterval: 2s\napps:\n{}{}  dependsOn: [crds]\n{RULES}",
        app("crds"),
        app("gadgets"),
    )
}

pub(crate) fn gadget(status: &Value) -> Option<&Value> {
    status["resources"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "Gadget" && r["name"] == "g1")
}

pub(crate) async fn set_status(sandbox: &TestSandbox, status: &str) {
    let out = sandbox
        .kubectl(&[
            "patch",
            "gadget",
            "g1",
            "-n",
            "gadgets",
            "--subresource=status",
            "--type=merge",
            "-p",
            &format!("{{\"status\": {status}}}"),
        ])
        .await;
    assert_eq!(out.code, 0, "kubectl patch --subresource=status: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_is_judged_by_its_apps_cel_rule() {
    let (sandbox, origin) = with_origin(
        "gadgets",
        &[("crds/crd.yaml", CRD), ("gadgets/gadget.yaml", GADGET)],
    )
    .await;
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "health", &config(&server, &origin.url), &[]).await;

    // No status yet: the rule's inProgress holds.
    let status = serve
        .wait_status("gadgets", "the Gadget is applied and Progressing", |s| {
            gadget(s).is_some_and(|g| g["health"] == "Progressing")
        })
        .await;
    let g = gadget(&status).expect("the Gadget");
    assert_eq!(
        g["healthMessage"], "inProgress (!has(status.phase) || status.phase == 'Pending') holds",
        "{status}"
    );
    assert_eq!(status["health"], "Progressing", "{status}");

    // Its controller (kubectl here) says it runs: Healthy, and so is the app.
    set_status(&sandbox, r#"{"phase": "Running"}"#).await;
    serve
        .wait_status("gadgets", "the app is Healthy", |s| {
            s["health"] == "Healthy" && gadget(s).is_some_and(|g| g["health"] == "Healthy")
        })
        .await;

    // It fails: Degraded, with the controller's own message and the rule that decided.
    set_status(&sandbox, r#"{"phase": "Failed", "message": "disk full"}"#).await;
    let status = serve
        .wait_status("gadgets", "the Gadget is Degraded", |s| {
            s["health"] == "Degraded"
        })
        .await;
    let g = gadget(&status).expect("the Gadget");
    assert_eq!(
        g["healthMessage"], "disk full [failed (status.phase == 'Failed') holds]",
        "{status}"
    );
    let out = serve.tether_status(&["--app", "gadgets"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_contains(
        &text,
        "Gadget/g1: disk full [failed (status.phase == 'Failed') holds]",
    );
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_that_does_not_compile_refuses_the_configuration_naming_the_app() {
    let sandbox = TestSandbox::start().await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: gadgets\n  source: {{repo: \"https://git.example/r.git\"}}\n{}",
        RULES.replace("status.phase == 'Failed'", "status.phase == ")
    );
    let (code, stderr) = refused(&sandbox, "bad-rule.yaml", &config).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "apps[0].healthCheckExprs[0]: rule for Gadget.health.example.com: failed: line 1, column"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_expr_holds_the_dependent_until_it_is_true() {
    let (sandbox, origin) = with_origin(
        "ready",
        &[
            ("db/cm.yaml", &configmap("db", "ready", "1")),
            ("web/cm.yaml", &configmap("web", "ready", "1")),
        ],
    )
    .await;
    let server = server_section(sandbox.dir.path());
    let expr = "dep.revision.subject.startsWith('release')";
    let app = |name: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{}\", ref: main, path: {name}, interval: 1h}}\n  destination: {{namespace: ready}}\n  sync: {{automated: true}}\n",
            origin.url
        )
    };
    let config = format!(
        "{server}resyncInterval: 1h\napps:\n{}{}  dependsOn:\n  - name: db\n    readyExpr: \"{expr}\"\n",
        app("db"),
        app("web")
    );
    let serve = Serve::start(&sandbox, "ready", &config, &[]).await;
    serve.wait_healthy("db").await;
    let waiting = format!("waiting for db (readyExpr is false: {expr})");
    let web = serve
        .wait_status("web", "web waits on its readyExpr", |s| {
            s["automation"]["reason"] == waiting.as_str()
        })
        .await;
    assert!(
        web["lastPass"].is_null(),
        "a waiting app runs no pass: {web}"
    );
    let absent = sandbox.kubectl(&["get", "cm", "web", "-n", "ready"]).await;
    assert_ne!(absent.code, 0, "web applied nothing while waiting");

    // A release commit: db passes at it, and its new status wakes web at once.
    origin
        .repo
        .write("db/cm.yaml", &configmap("db", "ready", "2"));
    origin.repo.commit("release 2");
    assert!(serve.push(&origin.url).await.is_success());
    serve.wait_healthy("web").await;
    let present = sandbox.kubectl(&["get", "cm", "web", "-n", "ready"]).await;
    assert_eq!(present.code, 0, "web applied its ConfigMap");
    assert_eq!(serve.stop().await, Some(0));
}

/// Regression (issue #28): `tether sync` judged a custom resource by the built-in rules
/// alone (kstatus calls a Gadget without conditions Healthy); with `--config` it uses
/// that file's rules, the app's (named by `--app`) before the top-level ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tether_sync_judges_health_by_the_cel_rules_of_its_configuration() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("gadgets").await;
    for yaml in [CRD, GADGET] {
        sandbox.kubectl_apply(yaml).await;
    }
    // Its operator (kubectl here) reports a failure.
    set_status(&sandbox, r#"{"phase": "Failed", "message": "disk full"}"#).await;
    let dir = app_dir(&sandbox, "gadgets", &[("gadget.yaml", GADGET)]);
    let server = server_section(sandbox.dir.path());
    // A top-level rule that would call it Healthy: the app's own rule wins.
    let config = sandbox.write_file(
        "sync.yaml",
        &format!(
            "{server}healthCheckExprs:\n- {{apiVersion: health.example.com/v1, kind: Gadget, current: \"true\"}}\napps:\n- name: gadgets\n  source: {{repo: \"https://git.example/r.git\"}}\n{RULES}"
        ),
    );
    let run = sync_app(&sandbox, &dir, "gadgets", &["--config", &config]).await;
    let report = json(&run);
    let g = resource(&report, "Gadget/g1");
    assert_eq!(g["health"], "Degraded", "{report}");
    assert_eq!(
        g["healthMessage"], "disk full [failed (status.phase == 'Failed') holds]",
        "{report}"
    );

    // A configuration that does not load: nothing is synced, and the error names it.
    let broken = sandbox.write_file("broken.yaml", "apps: [{name: x}]\n");
    let run = sync_app(&sandbox, &dir, "gadgets", &["--config", &broken]).await;
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("broken.yaml"), "{}", run.stderr);
}
