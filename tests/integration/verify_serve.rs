//! Signed commits (issue #27) through `tether serve`: a file app (keys from files) and
//! an App object (keys from a Secret of its namespace) apply a signed head; an
//! unsigned commit pushed on top is refused and reported (`SourceVerified=False`
//! naming the commit), the cluster keeps the last verified revision (self-heal of it
//! continues) until a signed commit follows.

use serde_json::Value;
use tether_testkit::assert_contains;
use tether_testkit::signing::Signer;

use crate::app_crd::{app_sandbox, apply_app};
use crate::serve::{Serve, origin_http, server_section};
use crate::support::{TestSandbox, eventually};

fn configmap(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: live\ndata:\n  value: {value}\n"
    )
}

async fn value(sandbox: &TestSandbox, name: &str) -> String {
    let out = sandbox
        .kubectl(&["get", "cm", name, "-n", "live", "-o", "json"])
        .await;
    if out.code != 0 {
        return String::new();
    }
    let object: Value = serde_json::from_str(&out.stdout).expect("JSON");
    object["data"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn wait_value(sandbox: &TestSandbox, name: &str, want: &str) {
    eventually(&format!("{name} = {want}"), || async {
        (value(sandbox, name).await == want).then_some(())
    })
    .await;
}

/// The `SourceVerified` condition of an app's status.
fn verified(status: &Value) -> Option<(String, String)> {
    let condition = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "SourceVerified")?;
    Some((
        condition["status"].as_str()?.to_string(),
        condition["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    ))
}

/// Regression for #27 ("an unsigned commit pushed on top is refused and reported, and
/// nothing changes in the cluster until a signed one follows").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_commit_is_not_applied_by_serve_until_a_signed_one_follows() {
    let sandbox = app_sandbox(&["live", "team-s", "tether-system"]).await;
    sandbox.trusted_service_account("team-s", "deployer").await;
    let alice = Signer::generate(sandbox.dir.path(), "alice");
    let origin = origin_http(
        &sandbox,
        &[
            ("apps/file/cm.yaml", &configmap("file-cm", "one")),
            ("apps/object/cm.yaml", &configmap("object-cm", "one")),
        ],
    );
    alice.commit_pgp(&origin.repo, "signed one");

    let server = server_section(sandbox.dir.path());
    let config = format!(
        "resyncInterval: 1s\n{server}apps:\n- name: file\n  source:\n    repo: \"{}\"\n    ref: main\n    path: apps/file\n    interval: 1h\n    verify: {{keys: {{files: [\"{}\", \"{}\"]}}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true}}\n",
        origin.url,
        alice.pgp_public.display(),
        alice.allowed_signers.display(),
    );
    let serve = Serve::start(&sandbox, "verify", &config, &[]).await;
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: signers\n  namespace: team-s\nstringData:\n  alice.asc: |\n{}  allowed_signers: |\n{}",
        indent(&std::fs::read_to_string(&alice.pgp_public).expect("key")),
        indent(&std::fs::read_to_string(&alice.allowed_signers).expect("signers")),
    );
    sandbox.kubectl_apply(&secret).await;
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: apps/object, interval: 1h, verify: {{mode: all-since-last, keys: {{secretRef: {{name: signers}}}}}}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    apply_app(&sandbox, "object", "team-s", &spec).await;
    wait_value(&sandbox, "file-cm", "one").await;
    wait_value(&sandbox, "object-cm", "one").await;
    for app in ["file", "team-s.object"] {
        let status = serve
            .wait_status(app, "SourceVerified=True", |s| {
                verified(s).is_some_and(|(status, _)| status == "True")
            })
            .await;
        let (_, message) = verified(&status).expect("condition");
        assert!(message.contains(&alice.fingerprint), "{message}");
    }

    // An unsigned commit on top: refused, reported, nothing changes.
    origin
        .repo
        .write("apps/file/cm.yaml", &configmap("file-cm", "two"));
    origin
        .repo
        .write("apps/object/cm.yaml", &configmap("object-cm", "two"));
    let unsigned = origin.repo.commit("unsigned two");
    assert!(serve.push(&origin.url).await.is_success());
    for app in ["file", "team-s.object"] {
        let status = serve
            .wait_status(app, "SourceVerified=False", |s| {
                verified(s).is_some_and(|(status, _)| status == "False")
            })
            .await;
        let (_, message) = verified(&status).expect("condition");
        assert_contains(&message, &format!("commit {unsigned} is not signed"));
        assert!(message.contains("stays applied"), "{message}");
    }
    // The last verified revision is still healed.
    sandbox
        .kubectl_merge_patch("cm", "file-cm", "live", r#"{"data":{"value":"drifted"}}"#)
        .await;
    wait_value(&sandbox, "file-cm", "one").await;
    assert_eq!(value(&sandbox, "object-cm").await, "one");
    let table = serve.status("file").await.to_string();
    assert!(!table.contains("PRIVATE KEY"), "{table}");

    // A signed commit follows: applied (all-since-last: the unsigned one is in the
    // App's chain, so it stays refused until its keys say otherwise).
    origin
        .repo
        .write("apps/file/cm.yaml", &configmap("file-cm", "three"));
    origin
        .repo
        .write("apps/object/cm.yaml", &configmap("object-cm", "three"));
    let three = alice.commit_ssh(&origin.repo, "signed three");
    assert!(serve.push(&origin.url).await.is_success());
    wait_value(&sandbox, "file-cm", "three").await;
    serve
        .wait_status("file", "SourceVerified=True again", |s| {
            verified(s).is_some_and(|(status, m)| status == "True" && m.contains("SSH key"))
        })
        .await;
    let status = serve
        .wait_status("team-s.object", "the head three looked at", |s| {
            s["revision"]["sha"] == three.as_str()
        })
        .await;
    let (condition, message) = verified(&status).expect("condition");
    assert_eq!(condition, "False", "{message}");
    assert_contains(&message, &format!("commit {unsigned} is not signed"));
    assert_eq!(value(&sandbox, "object-cm").await, "one");
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}
