//! Value files from other Git repositories (issue #26, Argo CD's multi-source
//! `$values`), through `tether serve` against the sandbox: a chart of a Helm
//! repository served on loopback takes `$values/envs/prod.yaml` from a Git repository
//! (git daemon for the configuration file, smart HTTP for App objects), merged in its
//! place among the value files; a commit to the values repository is a new revision
//! (its commit in the app's revision), taken at the next poll or at once on a push
//! webhook; a missing file, a repository that cannot be fetched, an unknown source
//! name, a path leaving the repository and another tenant's private repository fail
//! by name and apply nothing.

use std::path::{Path, PathBuf};

use crate::app_crd::{app, app_sandbox, apply_app};
use crate::charts_deps::HelmRepo;
use crate::charts_source::serve_with_helm;
use crate::monorepo::counters;
use crate::serve::server_section;
use crate::substitute::data;
use crate::support::{GitDaemon, GitRepo, HttpGit, TestSandbox, eventually};

/// Chart `web` 1.0.0: a ConfigMap of three values, with a values file of its own.
fn chart(root: &Path) -> PathBuf {
    crate::charts_source::write_chart(
        root.join("web"),
        &[
            ("Chart.yaml", crate::chart_values::WEB_CHART),
            (
                "values.yaml",
                "greeting: chart\ncolor: chart\nsize: chart\n",
            ),
            ("values-big.yaml", "size: big\ncolor: chart-file\n"),
            ("templates/cm.yaml", crate::chart_values::WEB_VALUES_CM),
        ],
    )
}

/// A Git repository `name` under `root` holding `envs/prod.yaml`, and a symlink
/// `envs/escape.yaml` out of the repository.
fn values_repo(root: &Path, name: &str, prod: &str) -> GitRepo {
    let repo = GitRepo::init(root.join(name));
    repo.write("envs/prod.yaml", prod);
    repo.write("README.md", "values\n");
    std::os::unix::fs::symlink("../../../etc/hostname", repo.dir.join("envs/escape.yaml"))
        .expect("symlink");
    repo.commit("values");
    repo
}

/// The status's revision (`chart@version@digest+values@<commit>`).
fn revision(status: &serde_json::Value) -> String {
    status["revision"]["sha"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_files_of_another_git_repository_sync_follow_its_commits_and_fail_by_name() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("multi").await;
    let root = sandbox.dir.path();
    let charts = HelmRepo::start(root.join("charts")).await;
    charts.publish(&chart(&root.join("build")));
    let srv = root.join("srv");
    let pushed = values_repo(&srv, "pushed.git", "greeting: from-git\ncolor: from-git\n");
    let polled = values_repo(&srv, "polled.git", "greeting: polled-1\n");
    // A Git chart whose `$own/…` file is of its own repository.
    let own = values_repo(&srv, "own.git", "greeting: own-repo\n");
    let built = chart(&root.join("own-build"));
    for file in [
        "Chart.yaml",
        "values.yaml",
        "values-big.yaml",
        "templates/cm.yaml",
    ] {
        let text = std::fs::read_to_string(built.join(file)).expect("chart file");
        own.write(&format!("chart/{file}"), &text);
    }
    let own_sha = own.commit("a chart");
    let daemon = GitDaemon::start(&srv);

    // Chart values < the chart's own file < `$values` < inline: the files in order.
    let entry = |name: &str, interval: &str, files: &str, repo: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{}\", chart: web, version: \"1.0.0\", interval: {interval}, helm: {{releaseName: {name}, valueFiles: [{files}], values: {{color: inline}}, valueSources: [{{name: values, repo: \"{repo}\", ref: main}}]}}}}\n  destination: {{namespace: multi}}\n  sync: {{automated: true}}\n",
            charts.url
        )
    };
    let ownrepo = format!(
        "- name: ownrepo\n  source: {{repo: \"{0}\", path: chart, interval: 1h, helm: {{valueFiles: [\"$own/envs/prod.yaml\"], valueSources: [{{name: own, repo: \"{0}\"}}]}}}}\n  destination: {{namespace: multi}}\n  sync: {{automated: true}}\n",
        daemon.url("own.git")
    );
    let config = format!(
        "resyncInterval: 1s\nsources: {{minInterval: 100ms}}\n{}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps:\n{}{}{}{}{}{}",
        server_section(root),
        entry(
            "web",
            "1h",
            "values-big.yaml, \"$values/envs/prod.yaml\"",
            &daemon.url("pushed.git")
        ),
        entry(
            "polled",
            "200ms",
            "\"$values/envs/prod.yaml\"",
            &daemon.url("polled.git")
        ),
        entry(
            "missing",
            "1h",
            "\"$values/envs/absent.yaml\"",
            &daemon.url("pushed.git")
        ),
        entry(
            "unreachable",
            "1h",
            "\"$values/envs/prod.yaml\"",
            &daemon.url("nowhere.git")
        ),
        entry(
            "escape",
            "1h",
            "\"$values/envs/escape.yaml\"",
            &daemon.url("pushed.git")
        ),
        ownrepo,
    );
    let serve = serve_with_helm(&sandbox, "charts-multisource", &config).await;

    let first = pushed_sha(&pushed);
    let synced = serve
        .wait_status("web", "web is Synced", |s| {
            s["sync"] == "Synced" || s["lastPass"]["error"].is_string()
        })
        .await;
    assert_eq!(synced["sync"], "Synced", "{synced}");
    assert_eq!(
        data(&sandbox, "cm", "web", "multi").await,
        serde_json::json!({"greeting": "from-git", "color": "inline", "size": "big"})
    );
    let shown = revision(&synced);
    assert!(
        shown.starts_with("web@1.0.0@sha256:")
            && shown.ends_with(&format!("+values@{}", &first[..12])),
        "{shown}"
    );

    // A Git chart reads `$own/…` of its own repository; both commits in the revision.
    let ownrepo = serve
        .wait_status("ownrepo", "ownrepo is Synced", |s| s["sync"] == "Synced")
        .await;
    assert_eq!(
        revision(&ownrepo),
        format!("{own_sha}+own@{}", &own_sha[..12])
    );
    assert_eq!(
        data(&sandbox, "cm", "ownrepo", "multi").await["greeting"],
        "own-repo"
    );

    // Warm passes (a resync each second) with nothing new render nothing.
    let renders = counters(&serve, "renders", &["web"]).await["web"];
    let passes = counters(&serve, "reconcile_passes", &["web"]).await["web"];
    eventually("two more passes of web", || async {
        (counters(&serve, "reconcile_passes", &["web"]).await["web"] >= passes + 2).then_some(())
    })
    .await;
    assert_eq!(
        counters(&serve, "renders", &["web"]).await["web"],
        renders,
        "a pass with nothing new rendered"
    );

    // A commit to the values repository, announced by its push webhook.
    pushed.write("envs/prod.yaml", "greeting: pushed\n");
    let second = pushed.commit("pushed values");
    assert!(serve.push(&daemon.url("pushed.git")).await.is_success());
    eventually("the pushed values applied", || async {
        (data(&sandbox, "cm", "web", "multi").await["greeting"] == "pushed").then_some(())
    })
    .await;
    let moved = serve
        .wait_status("web", "the pushed commit in the revision", |s| {
            revision(s).ends_with(&format!("+values@{}", &second[..12])) && s["sync"] == "Synced"
        })
        .await;
    assert!(revision(&moved).starts_with("web@1.0.0@sha256:"), "{moved}");

    // Another, found by polling alone.
    eventually("polled's first values applied", || async {
        (data(&sandbox, "cm", "polled", "multi").await["greeting"] == "polled-1").then_some(())
    })
    .await;
    polled.write("envs/prod.yaml", "greeting: polled-2\n");
    polled.commit("polled values");
    eventually("polled's new values applied", || async {
        (data(&sandbox, "cm", "polled", "multi").await["greeting"] == "polled-2").then_some(())
    })
    .await;

    // Each failure is named, and applies nothing: a file missing from the values
    // repository (with its repository, revision and path), a repository that cannot
    // be fetched (the source's failure, retried), a value file that is a symlink out
    // of the repository.
    for (name, reason, says) in [
        (
            "missing",
            "ValuesFailed",
            ["has no file \\\"envs/absent.yaml\\\" at ", "pushed.git"],
        ),
        (
            "unreachable",
            "SourceFailed",
            ["no revision fetched yet", "nowhere.git"],
        ),
        (
            "escape",
            "ValuesFailed",
            ["envs/escape.yaml", "leaves the repository"],
        ),
    ] {
        let status = serve
            .wait_status_text(name, &format!("{name} reported"), reason)
            .await;
        assert!(says.iter().all(|s| status.contains(s)), "{name}: {status}");
    }
    for name in ["missing", "unreachable", "escape"] {
        assert!(
            data(&sandbox, "cm", name, "multi").await.is_null(),
            "{name} applied"
        );
    }
}

/// The commit `repo`'s main branch is at.
fn pushed_sha(repo: &GitRepo) -> String {
    crate::support::git(&repo.dir, &["rev-parse", "HEAD"])
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_object_takes_value_files_of_its_repositories_and_no_other_tenants() {
    let sandbox = app_sandbox(&["multi-app", "team-m"]).await;
    sandbox.trusted_service_account("team-m", "deployer").await;
    let root = sandbox.dir.path();
    let charts = HelmRepo::start(root.join("charts")).await;
    charts.publish(&chart(&root.join("build")));
    let public = root.join("public");
    values_repo(&public, "values.git", "greeting: tenant-values\n");
    let http = HttpGit::start(&public, None);
    // Another tenant's repository: its host wants credentials team-m does not hold.
    let private = root.join("private");
    values_repo(&private, "secret.git", "greeting: not-yours\n");
    let guarded = HttpGit::start(&private, Some("other:pw-0f-another-tenant"));
    let config = format!(
        "{}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps: []\n",
        server_section(root)
    );
    let serve = serve_with_helm(&sandbox, "charts-multisource-app", &config).await;

    let spec = |release: &str, files: &str, repo: &str| {
        format!(
            "  serviceAccountName: deployer\n  source:\n    repo: \"{}\"\n    chart: web\n    version: \"1.0.0\"\n    interval: 1h\n    helm:\n      releaseName: {release}\n      valueFiles: [{files}]\n      valueSources:\n      - {{name: values, repo: \"{repo}\"}}\n  destination: {{namespace: multi-app}}\n  sync: {{automated: true}}\n",
            charts.url
        )
    };
    apply_app(
        &sandbox,
        "web",
        "team-m",
        &spec("web", "\"$values/envs/prod.yaml\"", &http.url("values.git")),
    )
    .await;
    let synced = serve
        .wait_status("team-m.web", "the App's first pass", |s| {
            s["sync"] == "Synced" || s["lastPass"]["error"].is_string()
        })
        .await;
    assert_eq!(synced["sync"], "Synced", "{synced}");
    assert!(revision(&synced).contains("+values@"), "{synced}");
    assert_eq!(
        data(&sandbox, "cm", "web", "multi-app").await["greeting"],
        "tenant-values"
    );

    // Another tenant's private repository: its host refuses this tenant.
    apply_app(
        &sandbox,
        "theirs",
        "team-m",
        &spec(
            "theirs",
            "\"$values/envs/prod.yaml\"",
            &guarded.url("secret.git"),
        ),
    )
    .await;
    let refused = serve
        .wait_status_text(
            "team-m.theirs",
            "the private repository refused",
            "no revision fetched yet",
        )
        .await;
    assert!(refused.contains("secret.git"), "{refused}");
    assert!(!refused.contains("pw-0f-another-tenant"), "{refused}");

    // Refused before anything runs, naming the field and the rule: a local
    // repository (tether's own files), an unknown source name, a path out of the
    // repository.
    let local = format!("file://{}", public.join("values.git").display());
    for (name, files, repo, says) in [
        (
            "local",
            "\"$values/envs/prod.yaml\"",
            local.as_str(),
            "spec.source.helm.valueSources[0].repo: an App's repository must be",
        ),
        (
            "unknown",
            "\"$vals/envs/prod.yaml\"",
            http.url("values.git").as_str(),
            "spec.source.helm.valueFiles[0]: \"$vals/envs/prod.yaml\" names the value source \"vals\"",
        ),
        (
            "escape",
            "\"$values/../srv/x.yaml\"",
            http.url("values.git").as_str(),
            "spec.source.helm.valueFiles[0]: \"$values/../srv/x.yaml\" must be $NAME/path",
        ),
    ] {
        apply_app(&sandbox, name, "team-m", &spec(name, files, repo)).await;
        let message = eventually(&format!("{name} refused"), || async {
            let object = app(&sandbox, name, "team-m").await;
            object["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .filter(|c| c["reason"] == "SpecInvalid")
                .and_then(|c| c["message"].as_str().map(str::to_string))
        })
        .await;
        assert!(message.contains(says), "{name}: {message}");
    }
    for name in ["theirs", "local", "unknown", "escape"] {
        assert!(
            data(&sandbox, "cm", name, "multi-app").await.is_null(),
            "{name} applied"
        );
    }
}
