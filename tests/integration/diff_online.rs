//! `tether diff` against a cluster (the sandbox), as a user runs it after `kubectl
//! apply --server-side`: in sync exits 0, an edited field is reported alone (exit 1), a
//! deleted object is Missing, a malformed manifest exits 2 naming file and document,
//! and a Git source is read at its revision. Secrets never appear in any format.

use std::path::Path;
use tether_testkit::assert_contains;

use serde_json::Value;

use crate::support::{Run, TestSandbox, git, tether};

/// The recorded manifests: namespace, config, secret, RBAC, services, workloads.
const MANIFESTS: &[&str] = &[
    "01-namespace.yaml",
    "02-configmap.yaml",
    "03-secret.yaml",
    "04-serviceaccount.yaml",
    "05-service-clusterip.yaml",
    "08-deployment.yaml",
    "09-statefulset.yaml",
    "15-rbac.yaml",
    "18-hpa.yaml",
];

/// Objects in [`MANIFESTS`]: 15-rbac.yaml holds four (Role, RoleBinding, ClusterRole,
/// ClusterRoleBinding).
const OBJECTS: usize = 12;

fn manifests_dir(into: &Path) -> std::path::PathBuf {
    let from =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kube-apiserver-v1.36/manifests");
    let dir = into.join("manifests");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for name in MANIFESTS {
        std::fs::copy(from.join(name), dir.join(name)).expect("copy a manifest");
    }
    dir
}

/// Runs `tether diff` against the sandbox.
async fn tether_diff(sandbox: &TestSandbox, args: &[&str]) -> Run {
    tether(sandbox, "diff", args).await
}

fn drifted(report: &Value) -> Vec<(String, String, Vec<String>)> {
    report["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["status"] != "InSync")
        .map(|r| {
            let paths = r["changes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["path"].as_str().map(str::to_string))
                .collect();
            (
                format!(
                    "{}/{}",
                    r["kind"].as_str().unwrap_or_default(),
                    r["name"].as_str().unwrap_or_default()
                ),
                r["status"].as_str().unwrap_or_default().to_string(),
                paths,
            )
        })
        .collect()
}

#[tokio::test]
async fn after_kubectl_apply_diff_is_clean_then_reports_exactly_what_changed() {
    let sandbox = TestSandbox::start().await;
    let dir = manifests_dir(sandbox.dir.path());
    let dir_arg = dir.to_str().expect("utf-8");
    sandbox
        .kubectl(&["apply", "--server-side", "-f", dir_arg])
        .await
        .ok();

    let clean = tether_diff(&sandbox, &["--path", dir_arg, "-o", "json"]).await;
    assert_eq!(clean.code, Some(0), "{}{}", clean.stdout, clean.stderr);
    let report: Value = serde_json::from_str(&clean.stdout).expect("JSON report");
    assert_eq!(
        report["summary"]["InSync"], OBJECTS,
        "15-rbac.yaml holds three objects"
    );

    // One field of the manifests changed live: exactly that field is drift.
    sandbox
        .kubectl(&[
            "set",
            "image",
            "deployment/web",
            "-n",
            "fixtures",
            "web=nginx:1.26",
        ])
        .await
        .ok();
    let edited = tether_diff(&sandbox, &["--path", dir_arg, "-o", "json"]).await;
    assert_eq!(edited.code, Some(1), "{}", edited.stderr);
    let report: Value = serde_json::from_str(&edited.stdout).expect("JSON report");
    assert_eq!(
        drifted(&report),
        [(
            "Deployment/web".to_string(),
            "Modified".to_string(),
            vec!["spec.template.spec.containers[name=web].image".to_string()]
        )]
    );
    assert_eq!(report["resources"].as_array().map(Vec::len), Some(OBJECTS));

    // A field Git does not mention, set by someone else, is not drift (as with
    // `kubectl diff --server-side`): its owner keeps it.
    sandbox
        .kubectl(&[
            "patch",
            "deployment/web",
            "-n",
            "fixtures",
            "--type=merge",
            "-p",
            r#"{"spec":{"minReadySeconds":3}}"#,
        ])
        .await
        .ok();
    sandbox
        .kubectl(&["delete", "configmap/app-config", "-n", "fixtures"])
        .await
        .ok();
    let deleted = tether_diff(&sandbox, &["--path", dir_arg, "-o", "json"]).await;
    assert_eq!(deleted.code, Some(1));
    let report: Value = serde_json::from_str(&deleted.stdout).expect("JSON report");
    let found = drifted(&report);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found.contains(&(
            "ConfigMap/app-config".to_string(),
            "Missing".to_string(),
            vec![]
        )),
        "{found:?}"
    );
}

#[tokio::test]
async fn the_server_is_asked_so_defaults_are_never_drift() {
    let sandbox = TestSandbox::start().await;
    let dir = manifests_dir(sandbox.dir.path());
    let dir_arg = dir.to_str().expect("utf-8");
    sandbox
        .kubectl(&["apply", "--server-side", "-f", dir_arg])
        .await
        .ok();
    sandbox.sandbox.reset_requests();
    let run = tether_diff(&sandbox, &["--path", dir_arg]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.ends_with("0 modified, 0 missing, 0 extra\n"),
        "{}",
        run.stdout
    );
    // Every object was dry-run and nothing was written.
    let requests = sandbox.sandbox.requests();
    assert_eq!(requests.writes(), 0, "a diff writes nothing: {requests:?}");
    assert_eq!(
        requests.verb("dryrun:patch"),
        OBJECTS as u64,
        "one dry run per object: {requests:?}"
    );
}

#[tokio::test]
async fn a_malformed_manifest_exits_2_and_names_file_and_document() {
    let sandbox = TestSandbox::start().await;
    let dir = sandbox.dir.path().join("bad");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("app.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n",
    )
    .expect("write");
    let run = tether_diff(&sandbox, &["--path", dir.to_str().expect("utf-8")]).await;
    assert_eq!(run.code, Some(2), "{}", run.stdout);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("app.yaml") && run.stderr.contains("document 2"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn an_unreachable_cluster_is_an_error_not_drift() {
    let sandbox = TestSandbox::start().await;
    let dir = manifests_dir(sandbox.dir.path());
    sandbox.sandbox.set_fail_rate(1.0);
    let run = tether_diff(&sandbox, &["--path", dir.to_str().expect("utf-8")]).await;
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.is_empty());
}

#[tokio::test]
async fn secret_values_never_appear_in_any_format() {
    let sandbox = TestSandbox::start().await;
    let dir = manifests_dir(sandbox.dir.path());
    let dir_arg = dir.to_str().expect("utf-8");
    sandbox
        .kubectl(&["apply", "--server-side", "-f", dir_arg])
        .await
        .ok();
    // The live Secret now holds another password than Git's.
    sandbox
        .kubectl(&[
            "patch",
            "secret/app-secret",
            "-n",
            "fixtures",
            "--type=merge",
            "-p",
            r#"{"stringData":{"password":"hunter2-live"}}"#,
        ])
        .await
        .ok();
    let manifest = std::fs::read_to_string(dir.join("03-secret.yaml")).expect("read");
    let desired_plain = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("the manifest has a password");
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let forbidden = [
        desired_plain.clone(),
        b64(&desired_plain),
        "hunter2-live".to_string(),
        b64("hunter2-live"),
    ];
    for format in ["text", "json", "markdown", "junit"] {
        let run = tether_diff(
            &sandbox,
            &["--path", dir_arg, "-o", format, "--color", "always"],
        )
        .await;
        assert_eq!(run.code, Some(1), "{format}: {}", run.stderr);
        assert!(
            run.stdout.contains("app-secret"),
            "{format} names the Secret"
        );
        for value in &forbidden {
            assert!(
                !run.stdout.contains(value.as_str()),
                "{format} leaks a Secret value"
            );
            assert!(
                !run.stderr.contains(value.as_str()),
                "{format} leaks a Secret value on stderr"
            );
        }
    }
}

#[tokio::test]
async fn desired_state_from_git_reports_the_revision() {
    let sandbox = TestSandbox::start().await;
    let repo = sandbox.dir.path().join("repo");
    std::fs::create_dir_all(repo.join("apps")).expect("mkdir");
    let manifests = manifests_dir(sandbox.dir.path());
    for name in ["01-namespace.yaml", "02-configmap.yaml"] {
        std::fs::copy(manifests.join(name), repo.join("apps").join(name)).expect("copy");
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "Add the app"]);
    let repo_url = format!("file://{}", repo.display());
    let run = tether_diff(
        &sandbox,
        &[
            "--repo", &repo_url, "--ref", "main", "--path", "apps", "-o", "json",
        ],
    )
    .await;
    assert_eq!(run.code, Some(1), "nothing applied yet: {}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).expect("JSON report");
    assert_eq!(report["revision"].as_str().map(str::len), Some(40));
    assert_eq!(report["summary"]["Missing"], 2);

    sandbox
        .kubectl(&[
            "apply",
            "--server-side",
            "-f",
            repo.join("apps").to_str().expect("utf-8"),
        ])
        .await
        .ok();
    let run = tether_diff(
        &sandbox,
        &["--repo", &repo_url, "--ref", "main", "--path", "apps"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
}

/// With `--app`, objects the app's inventory owns that Git no longer has are Extra
/// (what `tether sync --prune` would delete); objects no longer labelled are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_objects_the_app_owns_and_git_dropped_are_extra() {
    let sandbox = TestSandbox::start().await;
    let dir = sandbox.dir.path().join("app");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cm = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\ndata: {{k: v}}\n"
        )
    };
    for name in ["kept", "dropped", "relabelled"] {
        std::fs::write(dir.join(format!("{name}.yaml")), cm(name)).expect("write");
    }
    let path = dir.to_str().expect("utf-8");
    let synced = tether(&sandbox, "sync", &["--path", path, "--app", "shop"]).await;
    assert_eq!(synced.code, Some(0), "{}{}", synced.stdout, synced.stderr);
    std::fs::remove_file(dir.join("dropped.yaml")).expect("rm");
    std::fs::remove_file(dir.join("relabelled.yaml")).expect("rm");
    sandbox
        .kubectl(&[
            "label",
            "cm",
            "relabelled",
            "tether.dev/app=other",
            "--overwrite",
        ])
        .await
        .ok();

    let run = tether_diff(&sandbox, &["--path", path, "--app", "shop", "-o", "json"]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(
        drifted(&report),
        vec![("ConfigMap/dropped".to_string(), "Extra".to_string(), vec![])]
    );
}

/// `tether diff --config` diffs the apps of a service configuration from their Git
/// sources, one report per app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apps_of_a_configuration_are_diffed_from_git() {
    let sandbox = TestSandbox::start().await;
    let repo = crate::support::GitRepo::init(sandbox.dir.path().join("repo"));
    repo.write(
        "web/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {k: v}\n",
    );
    repo.commit("web");
    let config = sandbox.dir.path().join("tether.yaml");
    std::fs::write(
        &config,
        format!(
            "apps:\n- name: web\n  source: {{repo: \"file://{}\", ref: main, path: web}}\n  destination: {{namespace: default}}\n",
            repo.dir.display()
        ),
    )
    .expect("write config");
    let config = config.to_str().expect("utf-8");

    let missing = tether_diff(&sandbox, &["--config", config, "-o", "json"]).await;
    assert_eq!(
        missing.code,
        Some(1),
        "{}{}",
        missing.stdout,
        missing.stderr
    );
    let report: Value = serde_json::from_str(&missing.stdout).expect("JSON");
    assert_eq!(report["apps"][0]["name"], "web");
    assert_eq!(report["apps"][0]["summary"]["Missing"], 1, "{report}");

    let url = format!("file://{}", repo.dir.display());
    let synced = tether(
        &sandbox,
        "sync",
        &[
            "--repo", &url, "--ref", "main", "--path", "web", "--app", "web",
        ],
    )
    .await;
    assert_eq!(synced.code, Some(0), "{}{}", synced.stdout, synced.stderr);
    let clean = tether_diff(&sandbox, &["--config", config, "--app", "web"]).await;
    assert_eq!(clean.code, Some(0), "{}{}", clean.stdout, clean.stderr);

    let unknown = tether_diff(&sandbox, &["--config", config, "--app", "nope"]).await;
    assert_eq!(unknown.code, Some(2));
    assert_contains(&unknown.stderr, "no app named \"nope\"");
}
