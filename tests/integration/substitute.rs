//! Post-build substitution (issue #27): `${var}` placeholders in Git filled from an
//! App's ConfigMaps and Secrets and a file app's inline variables, through `tether
//! serve` against the sandbox (a changed ConfigMap re-applies without a commit; a
//! missing one and an undefined variable stop the app, named); and from `--var` /
//! `--vars-file` for `tether sync` and `tether diff`. Substituted Secret values show
//! nowhere but in the cluster.

use base64::Engine;
use serde_json::Value;
use tether_testkit::assert_contains;

use crate::app_crd::{app_sandbox, apply_app};
use crate::serve::{Serve, origin_http, server_section};
use crate::support::{TestSandbox, app_dir, eventually, json, resource, tether_app};

/// A Secret value that must reach the cluster and nothing else.
const TOKEN: &str = "tok-Subst1tuted-s3cret";

const WEB: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  namespace: live
data:
  cluster: \"${cluster}\"
  size: \"n-${replicas:=2}\"
  literal: \"$${cluster}\"
---
apiVersion: v1
kind: Secret
metadata:
  name: web-token
  namespace: live
stringData:
  token: \"${token}\"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: script
  namespace: live
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  run: \"echo ${HOME}\"
";

fn one_key(name: &str, namespace: &str, key: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  {key}: \"{value}\"\n"
    )
}

pub(crate) async fn data(sandbox: &TestSandbox, kind: &str, name: &str, namespace: &str) -> Value {
    let out = sandbox
        .kubectl(&["get", kind, name, "-n", namespace, "-o", "json"])
        .await;
    if out.code != 0 {
        return Value::Null;
    }
    let object: Value = serde_json::from_str(&out.stdout).expect("kubectl prints JSON");
    object["data"].clone()
}

/// The "done when" for substitution: an App's `${cluster}` comes from a
/// ConfigMap of its namespace (absent first: VariablesFailed naming it), its token
/// from a Secret, and a changed ConfigMap is a new desired state; a file app takes
/// inline variables, overridden by an optional ConfigMap once it appears; a file
/// app with an undefined variable stalls, naming file, document and variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_from_configmaps_and_secrets_reach_the_cluster_and_follow_changes() {
    let sandbox = app_sandbox(&["live", "team-v", "plain", "tether-system"]).await;
    sandbox.trusted_service_account("team-v", "deployer").await;
    let origin = origin_http(
        &sandbox,
        &[
            ("apps/web/config.yaml", WEB),
            (
                "apps/plain/config.yaml",
                &one_key("plain", "plain", "cluster", "${cluster}"),
            ),
            (
                "apps/broken/config.yaml",
                &one_key("broken", "plain", "x", "${nope}"),
            ),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let entry = |name: &str, post_build: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{}\", ref: main, path: apps/{name}, interval: 1h}}\n  destination: {{namespace: plain}}\n  sync: {{automated: true}}\n  postBuild: {post_build}\n",
            origin.url
        )
    };
    let config = format!(
        "resyncInterval: 1s\n{server}apps:\n{}{}",
        entry(
            "plain",
            "{substitute: {cluster: file-inline}, substituteFrom: [{kind: ConfigMap, name: file-vars, optional: true}]}"
        ),
        entry("broken", "{substitute: {}}"),
    );
    let serve = Serve::start(&sandbox, "substitute", &config, &[]).await;

    // The file app: inline variables, then the optional ConfigMap once it exists.
    eventually("the file app's inline variable", || async {
        (data(&sandbox, "cm", "plain", "plain").await["cluster"] == "file-inline").then_some(())
    })
    .await;
    sandbox
        .kubectl_apply(&one_key("file-vars", "tether-system", "cluster", "file-cm"))
        .await;
    eventually("the file app's ConfigMap variable", || async {
        (data(&sandbox, "cm", "plain", "plain").await["cluster"] == "file-cm").then_some(())
    })
    .await;

    // An undefined variable stops the app before anything is applied.
    let status = serve
        .wait_status_text("broken", "the undefined variable reported", "\\\"nope\\\"")
        .await;
    assert!(status.contains("ManifestInvalid"), "{status}");
    assert_contains(&status, "apps/broken/config.yaml, document 1");
    assert!(data(&sandbox, "cm", "broken", "plain").await.is_null());

    // The App: its ConfigMap is missing at first.
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: apps/web, interval: 1h}}\n  destination: {{namespace: live}}\n  sync: {{automated: true}}\n  postBuild:\n    substituteFrom:\n    - {{kind: ConfigMap, name: cluster-vars}}\n    - {{kind: Secret, name: token-vars}}\n",
        origin.url
    );
    apply_app(&sandbox, "web", "team-v", &spec).await;
    let status = serve
        .wait_status_text(
            "team-v.web",
            "the missing ConfigMap reported",
            "VariablesFailed",
        )
        .await;
    assert_contains(&status, "ConfigMap team-v/cluster-vars not found");
    assert!(data(&sandbox, "cm", "web", "live").await.is_null());

    sandbox
        .kubectl_apply(&one_key("cluster-vars", "team-v", "cluster", "prod"))
        .await;
    sandbox.kubectl_apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token-vars\n  namespace: team-v\nstringData:\n  token: {TOKEN}\n"
        ),
    )
    .await;
    let web = eventually("the App's variables applied", || async {
        let d = data(&sandbox, "cm", "web", "live").await;
        (d["cluster"] == "prod").then_some(d)
    })
    .await;
    assert_eq!(web["size"], "n-2", "{web}");
    assert_eq!(web["literal"], "${cluster}", "{web}");
    assert_eq!(
        data(&sandbox, "cm", "script", "live").await["run"],
        "echo ${HOME}"
    );
    let token = data(&sandbox, "secret", "web-token", "live").await;
    assert_eq!(
        token["token"],
        base64::engine::general_purpose::STANDARD.encode(TOKEN)
    );

    // A changed ConfigMap is a new desired state: applied without a commit.
    sandbox
        .kubectl_apply(&one_key("cluster-vars", "team-v", "cluster", "dev"))
        .await;
    eventually("the changed variable applied", || async {
        (data(&sandbox, "cm", "web", "live").await["cluster"] == "dev").then_some(())
    })
    .await;

    let object = crate::app_crd::app(&sandbox, "web", "team-v")
        .await
        .to_string();
    let status = serve.status("team-v.web").await.to_string();
    let log = serve.log();
    for (what, shown) in [("App", &object), ("status API", &status), ("log", &log)] {
        assert!(!shown.contains(TOKEN), "{what} shows the token:\n{shown}");
    }
}

/// `--var` and `--vars-file` for the CLI: sync applies the substituted objects, diff
/// agrees with them and reports a changed variable as drift (a Secret's value masked),
/// an undefined variable and a malformed flag are errors (exit 2) naming what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_variables_render_sync_and_diff_and_bad_ones_are_named() {
    let sandbox = TestSandbox::start().await;
    let dir = app_dir(
        &sandbox,
        "vars-app",
        &[(
            "config.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ci\ndata:\n  cluster: \"${cluster}\"\n  region: \"${region:=eu}\"\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: ci-token\nstringData:\n  token: \"${token}\"\n",
        )],
    );
    let vars_file = sandbox.dir.path().join("ci.vars");
    std::fs::write(
        &vars_file,
        "# CI's variables\ncluster=from-file\ntoken=first-T0ken\n",
    )
    .expect("write vars");
    let file = vars_file.to_str().expect("utf-8");

    let run = tether_app(
        &sandbox,
        "sync",
        &dir,
        "vars",
        &["--vars-file", file, "--var", "cluster=ci"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let applied = data(&sandbox, "cm", "ci", "default").await;
    assert_eq!(applied["cluster"], "ci", "{applied}");
    assert_eq!(applied["region"], "eu", "{applied}");

    let same = tether_app(
        &sandbox,
        "diff",
        &dir,
        "vars",
        &["--vars-file", file, "--var", "cluster=ci"],
    )
    .await;
    assert_eq!(same.code, Some(0), "{same:?}");

    let changed = tether_app(
        &sandbox,
        "diff",
        &dir,
        "vars",
        &[
            "--vars-file",
            file,
            "--var",
            "cluster=other",
            "--var",
            "token=second-T0ken",
        ],
    )
    .await;
    assert_eq!(changed.code, Some(1), "{changed:?}");
    let report = json(&changed);
    assert_eq!(resource(&report, "ConfigMap/ci")["status"], "Modified");
    assert_eq!(resource(&report, "Secret/ci-token")["status"], "Modified");
    for token in ["first-T0ken", "second-T0ken"] {
        assert!(!changed.stdout.contains(token), "{}", changed.stdout);
        assert!(!changed.stderr.contains(token), "{}", changed.stderr);
    }

    let undefined = tether_app(&sandbox, "diff", &dir, "vars", &["--var", "token=x"]).await;
    assert_eq!(undefined.code, Some(2), "{undefined:?}");
    assert!(
        undefined.stderr.contains("config.yaml, document 1")
            && undefined.stderr.contains("\"cluster\""),
        "{}",
        undefined.stderr
    );

    for (flag, says) in [
        ("bad-name=1", "is invalid"),
        ("no-equals-sign", "NAME=VALUE"),
    ] {
        let bad = tether_app(&sandbox, "diff", &dir, "vars", &["--var", flag]).await;
        assert_eq!(bad.code, Some(2), "{bad:?}");
        assert!(bad.stderr.contains(says), "{}", bad.stderr);
    }
}
