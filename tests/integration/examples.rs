//! The examples users copy: the plain and kustomize app repositories render, apply into
//! a namespace of the sandbox and then diff clean; the GitHub Actions workflow's own
//! `tether diff` step is run as written, with its exit-code handling.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tether_testkit::assert_contains;

use serde_json::Value;

use crate::support::{TestSandbox, tether};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn plain_app() -> PathBuf {
    examples().join("apps/plain")
}

fn kustomize_overlay() -> PathBuf {
    examples().join("apps/kustomize/overlays/production")
}

fn utf8(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Syncs an app's directory into `namespace` as `app`, with `tether sync` (which
/// renders a kustomization itself).
async fn apply_app(sandbox: &TestSandbox, dir: &Path, app: &str, namespace: &str) {
    let run = tether(
        sandbox,
        "sync",
        &["--path", utf8(dir), "--app", app, "-n", namespace],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
}

/// Runs `tether diff` as a process (async: the in-process sandbox keeps serving).
async fn tether_diff(sandbox: &TestSandbox, args: &[&str]) -> (Option<i32>, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg("diff")
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .args(args)
        .output()
        .await
        .expect("tether runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn yaml_documents(text: &str) -> Vec<Value> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("YAML ({e}):\n{text}"));
    documents.into_iter().filter(Value::is_object).collect()
}

fn kustomize(dir: &Path) -> Vec<Value> {
    let out = std::process::Command::new("kubectl")
        .args(["kustomize", utf8(dir)])
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_documents(&String::from_utf8_lossy(&out.stdout))
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("a {kind} in {objects:?}"))
}

#[test]
fn the_plain_app_is_namespace_free() {
    let mut kinds = Vec::new();
    for entry in std::fs::read_dir(plain_app()).expect("examples/apps/plain") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).expect("read");
            for object in yaml_documents(&text) {
                assert!(
                    object["metadata"]["namespace"].is_null(),
                    "{} names a namespace",
                    path.display()
                );
                kinds.push(object["kind"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    kinds.sort();
    assert_eq!(kinds, ["ConfigMap", "Deployment", "Service"]);
}

#[test]
fn the_kustomize_overlay_scales_pins_and_labels_the_base() {
    let base = kustomize(&examples().join("apps/kustomize/base"));
    assert_eq!(find(&base, "Deployment")["spec"]["replicas"], 1);

    let objects = kustomize(&kustomize_overlay());
    assert_eq!(objects.len(), 3, "{objects:?}");
    for object in &objects {
        assert!(object["metadata"]["namespace"].is_null(), "{object}");
        assert_eq!(object["metadata"]["labels"]["environment"], "production");
        assert_eq!(
            object["metadata"]["labels"]["app.kubernetes.io/name"],
            "shop-api"
        );
    }
    let deployment = find(&objects, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "ghcr.io/example/shop-api:1.4.2");
    // The generated ConfigMap (merged by the overlay, name hashed) is the one the
    // Deployment reads.
    let config = find(&objects, "ConfigMap");
    assert_eq!(config["data"]["LOG_LEVEL"], "warn");
    assert_eq!(
        container["envFrom"][0]["configMapRef"]["name"],
        config["metadata"]["name"]
    );
    assert!(
        config["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("shop-api-")),
        "{config}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn both_apps_apply_into_any_namespace_and_then_diff_clean() {
    let sandbox = TestSandbox::start().await;
    for (app, name, namespace) in [
        (plain_app(), "hello", "demo"),
        (kustomize_overlay(), "shop", "shop"),
    ] {
        sandbox.namespace(namespace).await;
        let (code, stdout, stderr) = tether_diff(
            &sandbox,
            &[
                "--path",
                utf8(&app),
                "--app",
                name,
                "-n",
                namespace,
                "-o",
                "json",
            ],
        )
        .await;
        assert_eq!(code, Some(1), "{stdout}{stderr}");
        let report: Value = serde_json::from_str(&stdout).expect("JSON");
        assert_eq!(report["summary"]["Missing"], 3, "{stdout}");

        apply_app(&sandbox, &app, name, namespace).await;

        let (code, stdout, stderr) = tether_diff(
            &sandbox,
            &[
                "--path",
                utf8(&app),
                "--app",
                name,
                "-n",
                namespace,
                "-o",
                "json",
            ],
        )
        .await;
        assert_eq!(code, Some(0), "{stdout}{stderr}");
        let report: Value = serde_json::from_str(&stdout).expect("JSON");
        assert_eq!(report["summary"]["InSync"], 3, "{stdout}");
    }
    let out = sandbox
        .kubectl(&["get", "deployment", "hello-web", "-n", "demo", "-o", "json"])
        .await
        .ok();
    let live: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(live["spec"]["replicas"], 2);
    let out = sandbox
        .kubectl(&["get", "deployment", "shop-api", "-n", "shop", "-o", "json"])
        .await
        .ok();
    let live: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(live["spec"]["replicas"], 3);
}

/// The workflow file, parsed.
fn workflow() -> Value {
    let path = examples().join("ci/github-actions-diff.yaml");
    let text = std::fs::read_to_string(&path).expect("the workflow");
    serde_saphyr::from_str(&text).expect("the workflow is YAML")
}

/// The step with `id`, from the workflow's only job.
fn step<'a>(workflow: &'a Value, id: &str) -> &'a Value {
    let jobs = workflow["jobs"].as_object().expect("jobs");
    assert_eq!(jobs.len(), 1, "one job");
    let (_, job) = jobs.iter().next().expect("a job");
    job["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("a step with id {id}"))
}

/// What one run of the workflow's diff step left behind.
struct StepRun {
    code: Option<i32>,
    outputs: String,
    markdown: String,
    stderr: String,
}

/// Runs the workflow's `tether diff` step as GitHub Actions would (bash, `-e -o
/// pipefail`), with its environment pointed at the sandbox: the workflow's `env` keys
/// with the test's values, `RUNNER_TEMP` holding `kubeconfig`, and `tether` on PATH.
async fn run_diff_step(script: &str, env: &BTreeMap<String, String>, kubeconfig: &str) -> StepRun {
    let temp = tempfile::tempdir().expect("tempdir");
    std::fs::write(temp.path().join("kubeconfig"), kubeconfig).expect("write kubeconfig");
    let outputs = temp.path().join("github-output");
    std::fs::write(&outputs, "").expect("touch");
    let bin = Path::new(env!("CARGO_BIN_EXE_tether"))
        .parent()
        .expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = tokio::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .envs(env)
        .env("RUNNER_TEMP", temp.path())
        .env("GITHUB_OUTPUT", &outputs)
        .env("PATH", path)
        .output()
        .await
        .expect("bash runs");
    StepRun {
        code: out.status.code(),
        outputs: std::fs::read_to_string(&outputs).expect("outputs"),
        markdown: std::fs::read_to_string(temp.path().join("drift.md")).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_workflow_diff_step_reports_drift_without_failing_and_fails_on_errors() {
    let workflow = workflow();
    assert!(
        workflow["on"]["pull_request"].is_object(),
        "runs on pull requests"
    );
    assert_eq!(workflow["permissions"]["pull-requests"], "write");
    let diff = step(&workflow, "diff");
    let script = diff["run"].as_str().expect("the diff step runs a script");
    assert!(
        script.contains("tether diff") && script.contains("-o markdown"),
        "{script}"
    );
    // The comment step posts what the diff step wrote.
    let comment = step(&workflow, "comment");
    assert!(
        comment["with"]["script"]
            .as_str()
            .is_some_and(|s| s.contains("drift.md") && s.contains("createComment")),
        "{comment}"
    );

    // The workflow's env, with the values for this test: every variable it sets is
    // replaced, so nothing of the example's own repository leaks in.
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("demo").await;
    let mut env = BTreeMap::new();
    for key in workflow["env"].as_object().expect("workflow env").keys() {
        let value = match key.as_str() {
            "APP_NAME" => "hello".to_string(),
            "APP_PATH" => utf8(&plain_app()).to_string(),
            "APP_NAMESPACE" => "demo".to_string(),
            "TETHER_REPO" | "TETHER_REV" => String::new(),
            other => panic!("the test does not know the workflow's env {other}"),
        };
        env.insert(key.clone(), value);
    }
    let kubeconfig = sandbox.sandbox.kubeconfig().to_string();

    // Nothing applied yet: drift, which the step reports and does not fail on.
    let run = run_diff_step(script, &env, &kubeconfig).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.outputs.contains("exit-code=1"), "{}", run.outputs);
    assert!(
        run.markdown
            .starts_with("### tether diff: 3 of 3 objects drifted"),
        "{}",
        run.markdown
    );
    assert!(
        run.markdown
            .contains("| Deployment | demo | hello-web | Missing |")
    );

    apply_app(&sandbox, &plain_app(), "hello", "demo").await;
    let run = run_diff_step(script, &env, &kubeconfig).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.outputs.contains("exit-code=0"), "{}", run.outputs);
    assert!(
        run.markdown.starts_with("### tether diff: in sync"),
        "{}",
        run.markdown
    );

    // An unreachable cluster is an error: the step fails with tether's exit code.
    let unreachable = kubeconfig.replace(sandbox.url(), "https://127.0.0.1:1");
    assert_ne!(
        unreachable, kubeconfig,
        "the server URL is in the kubeconfig"
    );
    let run = run_diff_step(script, &env, &unreachable).await;
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.outputs.contains("exit-code=2"), "{}", run.outputs);
    assert!(run.stderr.contains("tether diff failed"), "{}", run.stderr);
}

/// Regression (issue #31): the workflow ran `cargo install tether --version 0.1.0`,
/// which installs crates.io's `tether`, another project. It now installs this one
/// from its Git repository at a pinned commit, and refuses to run unpinned.
#[tokio::test(flavor = "multi_thread")]
async fn the_workflow_installs_tether_from_its_own_repository_at_a_pinned_commit() {
    let workflow = workflow();
    let script = step(&workflow, "install")["run"]
        .as_str()
        .expect("the install step runs a script")
        .to_string();
    assert!(
        !script.contains("--version") && !script.contains("crates.io"),
        "{script}"
    );
    // `cargo` on PATH is a stand-in that prints what it was asked to do: the step
    // itself cannot fetch anything here.
    let bin = tempfile::tempdir().expect("tempdir");
    let cargo = bin.path().join("cargo");
    std::fs::write(&cargo, "#!/bin/sh\necho \"cargo $*\"\n").expect("write");
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let run = |rev: &str| {
        let path = format!(
            "{}:{}",
            bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let env = workflow["env"].clone();
        let script = script.clone();
        let rev = rev.to_string();
        async move {
            tokio::process::Command::new("bash")
                .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
                .env("PATH", path)
                .env(
                    "TETHER_REPO",
                    env["TETHER_REPO"].as_str().expect("TETHER_REPO"),
                )
                .env("TETHER_REV", rev)
                .output()
                .await
                .expect("bash runs")
        }
    };
    // As written, with its placeholder: refused before anything is installed.
    let placeholder = workflow["env"]["TETHER_REV"].as_str().expect("TETHER_REV");
    let out = run(placeholder).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_contains(
        &String::from_utf8_lossy(&out.stderr),
        "TETHER_REV must be the 40-hex commit",
    );
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let out = run(sha).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "cargo install --locked --git https://github.com/YOUR-ORG/tether --rev {sha} tether\n"
        )
    );
}

#[test]
fn the_example_configuration_loads_with_every_option() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config/tether.yaml");
    let config = tether_controller::config::Config::load(&path)
        .unwrap_or_else(|err| panic!("examples/config/tether.yaml does not load: {err}"));
    assert!(!config.apps.is_empty());
    let app = &config.apps[0];
    assert!(
        !app.sync_windows.is_empty(),
        "the example shows sync windows"
    );
    assert!(
        !app.ignore_differences.is_empty(),
        "the example shows ignoreDifferences"
    );
    assert!(
        config.server.api_token.is_some(),
        "the example shows the API token"
    );
}
