//! The render stage end to end: Kustomize overlays from a real `git daemon`, diffed
//! and synced against the sandbox by the real binary, and the path rules (dot
//! directories, base + overlays at a plain root) the same from Git as from disk.

use std::path::Path;

use serde_json::Value;

use crate::support::{GitDaemon, GitRepo, TestSandbox, json, tether};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/apps/kustomize");

/// A repository `name` holding `files` (and `extra`), committed and served by
/// `git daemon`; returns the repository, the daemon and its URL.
fn served_repo(
    sandbox: &TestSandbox,
    name: &str,
    files: &[(&str, String)],
    extra: &[(&str, &str)],
) -> (GitRepo, GitDaemon, String) {
    let root = sandbox.dir.path().join("srv");
    let repo = GitRepo::init(root.join(name));
    for (rel, text) in files {
        repo.write(rel, text);
    }
    for (rel, text) in extra {
        repo.write(rel, text);
    }
    repo.commit(name);
    let daemon = GitDaemon::start(&root);
    let url = daemon.url(name);
    (repo, daemon, url)
}

/// The Kustomize example (base + overlays/production), served.
fn example_repo(sandbox: &TestSandbox, extra: &[(&str, &str)]) -> (GitRepo, GitDaemon, String) {
    let files: Vec<(&str, String)> = [
        "base/kustomization.yaml",
        "base/deployment.yaml",
        "base/service.yaml",
        "overlays/production/kustomization.yaml",
    ]
    .into_iter()
    .map(|rel| {
        let text = std::fs::read_to_string(Path::new(EXAMPLE).join(rel)).expect("example file");
        (rel, text)
    })
    .collect();
    served_repo(sandbox, "shop.git", &files, extra)
}

#[tokio::test]
async fn a_kustomize_overlay_from_git_diffs_and_syncs() {
    let sandbox = TestSandbox::start().await;
    let (_repo, _daemon, url) = example_repo(&sandbox, &[]);
    let git = [
        "--repo",
        &url,
        "--ref",
        "main",
        "--path",
        "overlays/production",
    ];

    let before = tether(&sandbox, "diff", &[&git[..], &["-o", "json"]].concat()).await;
    assert_eq!(before.code, Some(1), "{before:?}");
    let report = json(&before);
    assert_eq!(report["summary"]["Missing"], 3, "{report}");

    let synced = tether(&sandbox, "sync", &[&git[..], &["--app", "shop"]].concat()).await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    let deployment = sandbox
        .kubectl(&["get", "deployment", "shop-api", "-o", "json"])
        .await
        .ok()
        .stdout;
    let deployment: Value = serde_json::from_str(&deployment).expect("JSON");
    // The overlay's own fields, which only a build of the overlay produces.
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["metadata"]["labels"]["environment"],
        "production"
    );

    let after = tether(&sandbox, "diff", &[&git[..], &["--app", "shop"]].concat()).await;
    assert_eq!(after.code, Some(0), "{after:?}");
}

#[tokio::test]
async fn base_and_overlays_at_the_root_are_refused_not_rendered_twice() {
    let sandbox = TestSandbox::start().await;
    let (_repo, _daemon, url) = example_repo(&sandbox, &[]);
    let run = tether(
        &sandbox,
        "diff",
        &["--repo", &url, "--ref", "main", "--path", "."],
    )
    .await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("base: this kustomization is also built by overlays/production"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("defined twice"), "{run:?}");
}

#[tokio::test]
async fn a_broken_kustomization_from_git_exits_2_naming_it_and_applies_nothing() {
    let sandbox = TestSandbox::start().await;
    let (_repo, _daemon, url) = example_repo(
        &sandbox,
        &[
            (
                "overlays/broken/kustomization.yaml",
                "resources:\n  - ../../base\n  - unnamed.yaml\n",
            ),
            // An object without a name: kustomize itself refuses it.
            (
                "overlays/broken/unnamed.yaml",
                "apiVersion: v1\nkind: ConfigMap\n",
            ),
        ],
    );
    let run = tether(
        &sandbox,
        "sync",
        &[
            "--repo",
            &url,
            "--ref",
            "main",
            "--path",
            "overlays/broken",
            "--app",
            "shop",
        ],
    )
    .await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("overlays/broken: kustomize build failed: "),
        "{run:?}"
    );
    let listed = sandbox
        .kubectl(&["get", "deployments,services,configmaps", "-o", "json"])
        .await
        .ok()
        .stdout;
    let listed: Value = serde_json::from_str(&listed).expect("JSON");
    let names: Vec<&str> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .filter(|n| n.starts_with("shop-api"))
        .collect();
    assert!(
        names.is_empty(),
        "applied from a revision that does not render: {names:?}"
    );
}

#[tokio::test]
async fn a_github_workflow_at_the_root_reads_the_same_from_git_and_disk() {
    let sandbox = TestSandbox::start().await;
    let root = sandbox.dir.path().join("srv");
    let repo = GitRepo::init(root.join("plain.git"));
    repo.write(
        ".github/workflows/ci.yml",
        "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps: [{run: make}]\n",
    );
    repo.write(
        "config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  a: \"1\"\n",
    );
    repo.commit("plain");
    let daemon = GitDaemon::start(&root);
    let url = daemon.url("plain.git");

    let from_git = tether(
        &sandbox,
        "diff",
        &["--repo", &url, "--ref", "main", "--path", ".", "-o", "json"],
    )
    .await;
    let dir = repo.dir.to_str().expect("utf-8");
    let from_disk = tether(&sandbox, "diff", &["--path", dir, "-o", "json"]).await;
    assert_eq!(from_git.code, Some(1), "{from_git:?}");
    assert_eq!(from_disk.code, Some(1), "{from_disk:?}");
    let (git, disk) = (json(&from_git), json(&from_disk));
    assert_eq!(git["resources"], disk["resources"]);
    assert_eq!(git["summary"]["Missing"], 1, "{git}");
}

const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
const CHART_VALUES: &str = "color: blue\nsize: small\nreplicas: 1\n";
const CHART_CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cfg\ndata:\n  color: {{ .Values.color | quote }}\n  size: {{ .Values.size | quote }}\n  replicas: {{ .Values.replicas | quote }}\n";

/// A chart `charts/web` (and a values file beside it), served.
fn chart_repo(sandbox: &TestSandbox, extra: &[(&str, &str)]) -> (GitRepo, GitDaemon, String) {
    let files = [
        ("charts/web/Chart.yaml", CHART.to_string()),
        ("charts/web/values.yaml", CHART_VALUES.to_string()),
        ("charts/web/templates/cm.yaml", CHART_CM.to_string()),
        ("charts/web/prod.yaml", "color: green\n".to_string()),
    ];
    served_repo(sandbox, "charts.git", &files, extra)
}

#[tokio::test]
async fn a_helm_chart_from_git_syncs_and_a_value_changed_in_git_changes_that_field() {
    let sandbox = TestSandbox::start().await;
    let (repo, _daemon, url) = chart_repo(&sandbox, &[]);
    let helm = crate::chart::helm();
    let helm = helm.to_str().expect("utf-8");
    let args = [
        "--repo",
        &url,
        "--ref",
        "main",
        "--path",
        "charts/web",
        "--app",
        "web",
        "--helm",
        helm,
        "--values",
        "prod.yaml",
        "--set",
        "size=large",
    ];
    let synced = tether(&sandbox, "sync", &args).await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    let cm = sandbox
        .kubectl(&["get", "configmap", "web-cfg", "-o", "json"])
        .await
        .ok()
        .stdout;
    let cm: Value = serde_json::from_str(&cm).expect("JSON");
    // The chart's default, the values file's and --set's, each where helm puts it.
    assert_eq!(
        cm["data"],
        serde_json::json!({"color": "green", "size": "large", "replicas": "1"})
    );

    repo.write("charts/web/prod.yaml", "color: red\n");
    repo.commit("red");
    let diff = tether(&sandbox, "diff", &[&args[..], &["-o", "json"]].concat()).await;
    assert_eq!(diff.code, Some(1), "{diff:?}");
    let report = json(&diff);
    let changed: Vec<(&str, &str)> = report["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["status"] != "InSync")
        .flat_map(|r| {
            r["changes"].as_array().into_iter().flatten().map(move |c| {
                (
                    r["name"].as_str().unwrap_or(""),
                    c["path"].as_str().unwrap_or(""),
                )
            })
        })
        .collect();
    assert_eq!(changed, [("web-cfg", "data.color")], "{report}");
}

#[tokio::test]
async fn a_chart_with_a_template_error_exits_2_naming_it_and_applies_nothing() {
    let sandbox = TestSandbox::start().await;
    let (_repo, _daemon, url) = chart_repo(
        &sandbox,
        &[(
            "charts/web/templates/deploy.yaml",
            "{{ required \"a tag is required\" .Values.tag }}\n",
        )],
    );
    let helm = crate::chart::helm();
    let run = tether(
        &sandbox,
        "sync",
        &[
            "--repo",
            &url,
            "--ref",
            "main",
            "--path",
            "charts/web",
            "--app",
            "web",
            "--helm",
            helm.to_str().expect("utf-8"),
        ],
    )
    .await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("charts/web: helm template failed: "),
        "{run:?}"
    );
    assert!(run.stderr.contains("a tag is required"), "{run:?}");
    let missing = sandbox.kubectl(&["get", "configmap", "web-cfg"]).await;
    assert_ne!(missing.code, 0, "applied from a chart that does not render");
}

/// A template that branches on what the destination cluster serves, as charts do to
/// pick an API version.
const CAPS_CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n  {{- if .Capabilities.APIVersions.Has \"apps/v1/Deployment\" }}\n  workload: deployment\n  {{- else }}\n  workload: none\n  {{- end }}\n  {{- if .Capabilities.APIVersions.Has \"widgets.example.com/v1\" }}\n  widgets: served\n  {{- end }}\n";

#[tokio::test]
async fn a_chart_sees_the_destination_clusters_version_and_api_versions() {
    let sandbox = TestSandbox::start().await;
    let files = [
        (
            "caps/Chart.yaml",
            "apiVersion: v2\nname: caps\nversion: 0.1.0\n".to_string(),
        ),
        ("caps/templates/cm.yaml", CAPS_CM.to_string()),
    ];
    let (_repo, _daemon, url) = served_repo(&sandbox, "caps.git", &files, &[]);
    let helm = crate::chart::helm();
    let args = [
        "--repo",
        &url,
        "--ref",
        "main",
        "--path",
        "caps",
        "--app",
        "caps",
        "--helm",
        helm.to_str().expect("utf-8"),
    ];
    let synced = tether(&sandbox, "sync", &args).await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    let cm = sandbox
        .kubectl(&["get", "configmap", "caps", "-o", "json"])
        .await
        .ok()
        .stdout;
    let cm: Value = serde_json::from_str(&cm).expect("JSON");
    let served = sandbox
        .kubectl(&["version", "-o", "json"])
        .await
        .ok()
        .stdout;
    let served: Value = serde_json::from_str(&served).expect("JSON");
    // The sandbox's own version (Helm's default is another), and a kind it serves
    // (Helm's default set names group versions only, never kinds); no CRD serves
    // widgets, so that branch stays out.
    assert_eq!(
        cm["data"],
        serde_json::json!({
            "kube": served["serverVersion"]["gitVersion"],
            "workload": "deployment",
        })
    );
}

#[tokio::test]
async fn a_values_file_elsewhere_in_the_repository_is_used_and_one_outside_it_refused() {
    let sandbox = TestSandbox::start().await;
    let (_repo, _daemon, url) = chart_repo(&sandbox, &[("values/web.yaml", "color: purple\n")]);
    let helm = crate::chart::helm();
    let sync = |values: &'static str| {
        let (sandbox, url, helm) = (&sandbox, url.clone(), helm.clone());
        async move {
            let args = [
                "--repo",
                &url,
                "--ref",
                "main",
                "--path",
                "charts/web",
                "--app",
                "web",
                "--helm",
                helm.to_str().expect("utf-8"),
                "--values",
                values,
            ];
            tether(sandbox, "sync", &args).await
        }
    };
    let escaping = sync("../../../web.yaml").await;
    assert_eq!(escaping.code, Some(2), "{escaping:?}");
    assert!(
        escaping
            .stderr
            .contains("valueFiles names \"../../../web.yaml\", which is outside the repository"),
        "{escaping:?}"
    );
    let synced = sync("../../values/web.yaml").await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    let cm = sandbox
        .kubectl(&["get", "configmap", "web-cfg", "-o", "json"])
        .await
        .ok()
        .stdout;
    let cm: Value = serde_json::from_str(&cm).expect("JSON");
    assert_eq!(cm["data"]["color"], "purple");
}
