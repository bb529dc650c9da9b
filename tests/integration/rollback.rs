//! Rollback that holds (issue #30) against `tether serve` as a process, the sandbox,
//! real git over HTTP and the real `kubectl`: a user RBAC lets patch team-a's App
//! rolls it back to a revision it was applied at; it stays there through new commits
//! and a `kubectl` edit (healed to the pinned revision) until unpinned with `tether
//! unpin` (it then follows Git's head), or, rolled back with `--until-git-moves`,
//! until Git's head moves; a pin survives a restart of tether. A viewer is refused with what they
//! lack; a revision never applied is refused; each action is an Event naming the user.
//! Guards argoproj/argo-cd#9570 (a rollback undone by the next auto-sync).

use reqwest::StatusCode;
use serde_json::{Value, json};
use tether_testkit::assert_contains;

use crate::app_crd::{apply_app, install_crd};
use crate::people::{APP_ROLES, RBAC, action_notes, token};
use crate::serve::{
    Origin, Serve, configmap, origin_http, server_section_with_token, tether_client,
};
use crate::support::{TestSandbox, eventually};

const API_TOKEN: &str = "operator-break-glass";
const APP: &str = "team-a.web";
const OPERATOR: &str = "system:serviceaccount:team-a:operator";

async fn call(serve: &Serve, path: &str, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", serve.url);
    let request = match body {
        Some(body) => client.post(url).json(&body),
        None => client.get(url),
    };
    let answer = request.bearer_auth(token).send().await.expect("an answer");
    let status = answer.status();
    let text = answer.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The app's status, once `check` holds for it.
async fn status_when(serve: &Serve, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let (code, status) = call(serve, &format!("/api/v1/apps/{APP}"), API_TOKEN, None).await;
        (code == StatusCode::OK && check(&status)).then_some(status)
    })
    .await
}

async fn live_value(sandbox: &TestSandbox) -> String {
    let jsonpath = "jsonpath={.data.key}";
    let out = sandbox
        .kubectl(&["get", "cm", "web", "-n", "live", "-o", jsonpath])
        .await;
    out.stdout
}

async fn live_becomes(sandbox: &TestSandbox, value: &str) {
    eventually(&format!("the live ConfigMap holds {value:?}"), || async {
        (live_value(sandbox).await == value).then_some(())
    })
    .await;
}

/// Commits `value` to the app's folder, tells tether, and waits until its status
/// shows Git's head there (a pass ran at it, whatever it synced).
async fn commit(serve: &Serve, origin: &Origin, value: &str) -> String {
    origin
        .repo
        .write("apps/web/config.yaml", &configmap("web", "live", value));
    let sha = origin.repo.commit(value);
    assert!(serve.push(&origin.url).await.is_success());
    status_when(serve, &format!("Git's head {value} is seen"), |s| {
        s["revision"]["sha"] == sha.as_str()
    })
    .await;
    sha
}

fn pinned_condition(status: &Value) -> Option<(String, String)> {
    let conditions = status["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "Pinned")?;
    Some((c["status"].as_str()?.into(), c["reason"].as_str()?.into()))
}

/// `tether rollback|unpin ARGS --server URL --token-file FILE`.
async fn cli(serve: &Serve, token_file: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    tether_client(&serve.url, args, ("--token-file", token_file)).await
}

async fn start(sandbox: &TestSandbox, config: &str) -> Serve {
    let serve = Serve::start(sandbox, "rollback", config, &[]).await;
    status_when(&serve, "the app runs", |s| s["name"] == APP).await;
    serve
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_holds_through_commits_edits_and_restarts_until_unpinned() {
    let sandbox = TestSandbox::start().await;
    for namespace in ["team-a", "live"] {
        sandbox.namespace(namespace).await;
    }
    install_crd(&sandbox).await;
    sandbox.trusted_service_account("team-a", "deployer").await;
    sandbox.kubectl_apply(APP_ROLES).await;
    sandbox.kubectl_apply(RBAC).await;
    let origin = origin_http(
        &sandbox,
        &[("apps/web/config.yaml", &configmap("web", "live", "one"))],
    );
    let dir = sandbox.dir.path();
    let server = server_section_with_token(dir, API_TOKEN);
    let config = format!("{server}apps: []\n");
    let mut serve = start_app(&sandbox, &origin, &config).await;
    live_becomes(&sandbox, "one").await;
    let first = status_when(&serve, "the first commit is applied", |s| {
        s["appliedRevisions"]
            .as_array()
            .is_some_and(|a| a.len() == 1)
    })
    .await["appliedRevisions"][0]["sha"]
        .as_str()
        .expect("a sha")
        .to_string();
    let second = commit(&serve, &origin, "two").await;
    live_becomes(&sandbox, "two").await;

    // A viewer may not roll back; nobody may roll back to a revision never applied.
    let viewer = token(&sandbox, "viewer").await;
    let operator = token(&sandbox, "operator").await;
    let rollback = format!("/api/v1/apps/{APP}/rollback");
    let back_to_first = json!({"revision": &first[..12], "reason": "two breaks checkout"});
    let (code, refused) = call(&serve, &rollback, &viewer, Some(back_to_first.clone())).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(
        refused["error"],
        "system:serviceaccount:team-a:viewer may view app \"team-a.web\" but not roll back it: needs patch on apps.tether.dev in team-a"
    );
    let never = json!({"revision": "0123456789abcdef0123456789abcdef01234567"});
    let (code, refused) = call(&serve, &rollback, &operator, Some(never)).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("is not one app \"team-a.web\" was applied at")),
        "{refused}"
    );
    assert_eq!(live_value(&sandbox).await, "two");

    // The operator rolls back: the first commit is applied again, and held.
    let (code, answer) = call(&serve, &rollback, &operator, Some(back_to_first)).await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    live_becomes(&sandbox, "one").await;
    let pinned = status_when(&serve, "the app shows its pin", |s| {
        pinned_condition(s) == Some(("True".into(), "RolledBack".into()))
    })
    .await;
    assert_eq!(pinned["pin"]["revision"], first.as_str());
    assert_eq!(pinned["pin"]["by"], OPERATOR);
    assert_eq!(pinned["pin"]["reason"], "two breaks checkout");
    // New commits are seen, not applied.
    let third = commit(&serve, &origin, "three").await;
    status_when(&serve, "a pass at the new head ends pinned", |s| {
        s["lastPass"]["result"] == "Succeeded" && s["pin"]["revision"] == first.as_str()
    })
    .await;
    assert_eq!(live_value(&sandbox).await, "one");
    // A hand edit is healed toward the pinned revision, not Git's head.
    let edit = r#"{"data":{"key":"edited"}}"#;
    sandbox.kubectl_merge_patch("cm", "web", "live", edit).await;
    live_becomes(&sandbox, "one").await;

    // `tether unpin` with the operator's own token: Git's head is applied again.
    let operator_file = dir.join("operator-token");
    std::fs::write(&operator_file, &operator).expect("write the token");
    let (code, out) = cli(&serve, &operator_file, &["unpin", APP]).await;
    assert_eq!(code, Some(0), "{out}");
    live_becomes(&sandbox, "three").await;
    let unpinned = status_when(&serve, "the pin is gone", |s| {
        pinned_condition(s) == Some(("False".into(), "Unpinned".into()))
    })
    .await;
    assert!(unpinned.get("pin").is_none(), "{unpinned}");

    // `tether rollback --until-git-moves`: held until the next commit, which wins.
    let (code, out) = cli(
        &serve,
        &operator_file,
        &[
            "rollback",
            APP,
            &second,
            "--until-git-moves",
            "--reason",
            "try two",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("until Git's head moves"), "{out}");
    live_becomes(&sandbox, "two").await;
    assert_ne!(third, second);
    commit(&serve, &origin, "four").await;
    live_becomes(&sandbox, "four").await;
    status_when(&serve, "the pin let go as Git moved", |s| {
        pinned_condition(s) == Some(("False".into(), "GitMoved".into()))
    })
    .await;
    // Rolled back again (the first commit is still in the applied history), a
    // restarted tether keeps the pin: the ConfigMap tether-pins holds it.
    let again = json!({"revision": first});
    let (code, answer) = call(&serve, &rollback, &operator, Some(again)).await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    live_becomes(&sandbox, "one").await;
    // The app's recent actions name who took them (newest first).
    let recent = status_when(&serve, "the recent actions are listed", |s| {
        s["actions"].as_array().is_some_and(|a| a.len() == 4)
    })
    .await;
    let recent: Vec<(&str, &str)> = recent["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter_map(|a| Some((a["action"].as_str()?, a["by"].as_str()?)))
        .collect();
    assert_eq!(
        recent,
        [
            ("roll back", OPERATOR),
            ("roll back", OPERATOR),
            ("unpin", OPERATOR),
            ("roll back", OPERATOR)
        ]
    );
    assert_eq!(serve.stop().await, Some(0));
    serve = start(&sandbox, &config).await;
    status_when(&serve, "the restarted app is still pinned", |s| {
        s["pin"]["revision"] == first.as_str() && s["lastPass"]["result"] == "Succeeded"
    })
    .await;
    assert_eq!(live_value(&sandbox).await, "one");
    // The viewer's CLI is refused with what they lack, and exits 2.
    let viewer_file = dir.join("viewer-token");
    std::fs::write(&viewer_file, &viewer).expect("write the token");
    let (code, out) = cli(&serve, &viewer_file, &["unpin", APP]).await;
    assert_eq!(code, Some(2), "{out}");
    assert_contains(&out, "needs patch on apps.tether.dev in team-a");

    // Each action is an Event on the App naming the operator.
    let notes = action_notes(&sandbox, 4).await;
    assert_eq!(
        notes,
        ["roll back", "roll back", "roll back", "unpin"]
            .map(|action| format!("{action} by {OPERATOR} through tether's API"))
    );
    let log = serve.log();
    for secret in [&viewer, &operator] {
        assert!(!log.contains(secret.as_str()), "a token was logged");
    }
}

/// Starts tether and the App `team-a/web` it follows (auto-sync, self-heal).
async fn start_app(sandbox: &TestSandbox, origin: &Origin, config: &str) -> Serve {
    let serve = Serve::start(sandbox, "rollback", config, &[]).await;
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: apps/web, interval: 1h}}\n  destination: {{namespace: live}}\n  sync: {{automated: true, selfHeal: true}}\n",
        origin.url
    );
    apply_app(sandbox, "web", "team-a", &spec).await;
    status_when(&serve, "the app runs", |s| s["name"] == APP).await;
    serve
}
