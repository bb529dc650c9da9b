//! `tether diff --base` with live objects (issue #29): each rendered app's head is
//! also compared with the cluster (the sandbox API server, by the observe path every
//! sync takes) or a `--live` snapshot, so the report says both what the pull request
//! changes and what merging it does live, in its own section of every format.

use std::path::Path;
use tether_testkit::assert_contains;

use serde_json::Value;

use crate::preview::{SECRET_BASE, SECRET_HEAD, junit, pull_request, web};
use crate::support::{Run, TestSandbox};

/// `tether diff --base` in the checkout `dir`.
async fn in_checkout(dir: &Path, args: &[&str]) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg("diff")
        .args(args)
        .current_dir(dir)
        .output()
        .await
        .expect("tether runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn no_secret_value(run: &Run) {
    for value in [SECRET_BASE, SECRET_HEAD] {
        assert!(!run.stdout.contains(value), "{}", run.stdout);
        assert!(!run.stderr.contains(value), "{}", run.stderr);
    }
}

/// The `live` section's resources that differ: `(kind, status)`.
fn live_drift(report: &Value, app: &str) -> Vec<(String, String)> {
    let app = report["apps"]
        .as_array()
        .and_then(|apps| apps.iter().find(|a| a["name"] == app))
        .unwrap_or_else(|| panic!("no app {app} in {report:#}"));
    app["live"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("no live section in {app:#}"))
        .iter()
        .filter(|r| r["status"] != "InSync")
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().to_string(),
                r["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_head_is_compared_with_the_cluster_in_the_same_run() {
    let sandbox = TestSandbox::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    // The cluster runs the base: the Deployment at nginx:1.25, no Secret yet.
    sandbox.kubectl(&["create", "namespace", "shop"]).await.ok();
    let live = web("nginx:1.25", "1.0.0", SECRET_BASE);
    let deployment = live.split("---").next().expect("the Deployment");
    sandbox
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(deployment))
        .await
        .ok();
    let kubeconfig = sandbox.kubeconfig.display().to_string();
    let args = [
        "--base",
        &base,
        "--path",
        "apps/web",
        "--app",
        "web",
        "--namespace",
        "shop",
        "--kubeconfig",
        &kubeconfig,
    ];
    let json = in_checkout(&repo.dir, &[&args[..], &["-o", "json"]].concat()).await;
    assert_eq!(json.code, Some(1), "{}", json.stderr);
    no_secret_value(&json);
    let report: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(
        live_drift(&report, "web"),
        [
            ("Deployment".to_string(), "Modified".to_string()),
            ("Secret".to_string(), "Missing".to_string())
        ]
    );
    let changes = report["apps"][0]["live"]["resources"][0]["changes"].clone();
    let image = changes
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["path"].as_str().is_some_and(|p| p.ends_with(".image")))
        })
        .unwrap_or_else(|| panic!("no image change in {changes:#}"));
    assert_eq!(
        (image["live"].as_str(), image["desired"].as_str()),
        (Some("nginx:1.25"), Some("nginx:1.27")),
        "{image:#}"
    );

    let markdown = in_checkout(&repo.dir, &[&args[..], &["-o", "markdown"]].concat()).await;
    no_secret_value(&markdown);
    assert!(
        markdown
            .stdout
            .contains("#### head vs live: merging changes 2 object(s) in the cluster"),
        "{}",
        markdown.stdout
    );
    let text = in_checkout(&repo.dir, &[&args[..], &["--color", "never"]].concat()).await;
    no_secret_value(&text);
    assert!(
        text.stdout.contains(
            "app web: head vs live: merging changes 2 object(s) in the cluster\nModified: "
        ),
        "{}",
        text.stdout
    );

    // Once the head is applied, merging changes nothing live.
    let head = web("nginx:1.27", "1.1.0", SECRET_HEAD);
    sandbox
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(&head))
        .await
        .ok();
    let synced = in_checkout(&repo.dir, &[&args[..], &["-o", "json"]].concat()).await;
    let report: Value = serde_json::from_str(&synced.stdout).expect("JSON");
    assert_eq!(live_drift(&report, "web"), []);
    assert_eq!(
        synced.code,
        Some(1),
        "the pull request still changes the app: {}",
        synced.stderr
    );
}

#[tokio::test]
async fn a_snapshot_stands_in_for_the_cluster_and_unrendered_apps_get_no_live_section() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    let snapshot = tmp.path().join("live.yaml");
    std::fs::write(&snapshot, web("nginx:1.25", "1.0.0", SECRET_BASE)).expect("snapshot");
    let snap = snapshot.display().to_string();
    let run = in_checkout(
        &repo.dir,
        &[
            "--base",
            &base,
            "--config",
            "tether.yaml",
            "--live",
            &snap,
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    no_secret_value(&run);
    let report: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(
        live_drift(&report, "web"),
        [
            ("Deployment".to_string(), "Modified".to_string()),
            ("Secret".to_string(), "Modified".to_string())
        ]
    );
    let app = |name: &str| {
        report["apps"]
            .as_array()
            .and_then(|apps| apps.iter().find(|a| a["name"] == name))
            .cloned()
            .unwrap_or_default()
    };
    assert!(app("api")["live"].is_null(), "api was not rendered");
    assert!(app("broken")["live"].is_null(), "broken failed to render");
    assert!(!app("crds")["live"].is_null(), "crds was rendered");

    // Without --base, --live and --config do not combine.
    let both = in_checkout(&repo.dir, &["--config", "tether.yaml", "--live", &snap]).await;
    assert_eq!(both.code, Some(2));
    assert_contains(&both.stderr, "--live with --config needs --base");
}

/// Issue #29: the JUnit report carries the head-vs-live section too, as one more
/// suite per rendered app, its cases as `tether diff -o junit` has them.
#[tokio::test]
async fn the_junit_report_has_a_head_vs_live_suite_per_rendered_app() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    let snapshot = tmp.path().join("live.yaml");
    std::fs::write(&snapshot, web("nginx:1.25", "1.0.0", SECRET_BASE)).expect("snapshot");
    let snap = snapshot.display().to_string();
    let args = ["--base", &base, "--config", "tether.yaml", "--live", &snap];
    let run = in_checkout(&repo.dir, &[&args[..], &["-o", "junit"]].concat()).await;
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    no_secret_value(&run);
    let (suites, cases) = junit(&run.stdout);
    assert_eq!(
        suites,
        [
            "web",
            "web: head vs live",
            "shop",
            "shop: head vs live",
            "crds",
            "crds: head vs live",
            "api",
            "broken"
        ]
    );
    let live: Vec<(&str, &str)> = cases
        .iter()
        .filter(|c| c.suite == "web: head vs live")
        .filter_map(|c| {
            let (kind, message, _) = c.outcome.as_ref()?;
            assert_eq!(kind, "failure");
            Some((
                c.class.as_str(),
                message.split(':').next().unwrap_or_default(),
            ))
        })
        .collect();
    assert_eq!(
        live,
        [("Deployment.apps", "Modified"), ("Secret", "Modified")]
    );
}
