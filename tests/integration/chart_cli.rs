//! `tether diff|sync --chart URL --version V --values f.yaml` (issue #26): a chart of
//! a Helm repository (`https://HOST/PATH/NAME`) and of an OCI registry
//! (`oci://HOST/PATH/NAME`), both on loopback, synced and diffed by the CLI with a
//! local values file; a version that is not there, a chart that is not there and a
//! URL that names no chart fail naming what was asked, with nothing applied.

use crate::chart::helm;
use crate::charts_deps::HelmRepo;
use crate::charts_oci::OciRegistry;
use crate::charts_source::chart;
use crate::support::{Run, TestSandbox, tether};

/// The ConfigMaps of namespace `cli-charts`, as `name=greeting`.
async fn greetings(sandbox: &TestSandbox) -> Vec<String> {
    let out = sandbox
        .kubectl(&[
            "get",
            "configmaps",
            "-n",
            "cli-charts",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.data.greeting}{\"\\n\"}{end}",
        ])
        .await
        .ok()
        .stdout;
    let mut names: Vec<String> = out
        .lines()
        .filter(|l| !l.starts_with("kube-root-ca"))
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

async fn run(
    sandbox: &TestSandbox,
    command: &str,
    url: &str,
    version: &str,
    extra: &[&str],
) -> Run {
    let helm = helm();
    let helm = helm.to_string_lossy();
    let mut args = vec![
        "--chart",
        url,
        "--version",
        version,
        "--namespace",
        "cli-charts",
    ];
    args.extend(["--helm", &helm]);
    args.extend_from_slice(extra);
    tether(sandbox, command, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_syncs_and_diffs_charts_of_a_helm_repository_and_a_registry_by_url() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("cli-charts").await;
    let root = sandbox.dir.path();
    let build = root.join("build");
    let repo = HelmRepo::start(root.join("repo")).await;
    repo.publish(&chart(&build, "web", "1.0.0"));
    repo.publish(&chart(&build, "web", "2.0.0"));
    let registry = OciRegistry::start(&root.join("registry")).await;
    registry.push(&chart(&build, "api", "0.1.0"), &build);
    let values = sandbox.write_file("prod.yaml", "greeting: from-a-local-file\n");

    // A Helm repository's chart, by URL, with a local values file.
    let web = format!("{}/web", repo.url);
    let synced = run(
        &sandbox,
        "sync",
        &web,
        "~1.0",
        &["--app", "web", "--values", &values],
    )
    .await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    assert_eq!(greetings(&sandbox).await, ["web-1-0-0=from-a-local-file"]);
    let clean = run(
        &sandbox,
        "diff",
        &web,
        "1.0.0",
        &["--app", "web", "--values", &values],
    )
    .await;
    assert_eq!(clean.code, Some(0), "in sync: {clean:?}");
    let newer = run(
        &sandbox,
        "diff",
        &web,
        ">=2",
        &["--app", "web", "--values", &values],
    )
    .await;
    assert_eq!(newer.code, Some(1), "2.0.0 differs: {newer:?}");
    assert!(newer.stdout.contains("web-2-0-0"), "{}", newer.stdout);

    // An OCI registry's chart, by URL; the release is the chart's name.
    let api = format!("{}/api", registry.url());
    let synced = run(&sandbox, "sync", &api, "0.1.0", &["--app", "api"]).await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    assert!(
        greetings(&sandbox)
            .await
            .contains(&"api-0-1-0=default".to_string())
    );

    // Failures name the repository, the chart and the version, and apply nothing.
    let before = greetings(&sandbox).await;
    let missing = run(&sandbox, "sync", &web, "9.9.9", &["--app", "web"]).await;
    assert_eq!(missing.code, Some(2), "{missing:?}");
    assert!(
        missing.stderr.contains(&repo.url)
            && missing.stderr.contains("9.9.9")
            && missing.stderr.contains("2.0.0"),
        "names the repository, the version and those there are: {}",
        missing.stderr
    );
    let unknown = format!("{}/nope", registry.url());
    let absent = run(&sandbox, "sync", &unknown, "0.1.0", &["--app", "nope"]).await;
    assert_eq!(absent.code, Some(2), "{absent:?}");
    assert!(
        absent.stderr.contains(&registry.url()) && absent.stderr.contains("nope"),
        "{}",
        absent.stderr
    );
    let not_a_chart = run(
        &sandbox,
        "diff",
        "git@example.com:org/repo",
        "1.0.0",
        &["--app", "x"],
    )
    .await;
    assert_eq!(not_a_chart.code, Some(2), "{not_a_chart:?}");
    assert!(
        not_a_chart
            .stderr
            .contains("--chart git@example.com:org/repo: not a chart URL"),
        "{}",
        not_a_chart.stderr
    );
    let bad_values = sandbox.write_file("list.yaml", "- a\n- b\n");
    let refused = run(
        &sandbox,
        "sync",
        &web,
        "1.0.0",
        &["--app", "web", "--values", &bad_values],
    )
    .await;
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("list.yaml: is not a YAML mapping of values"),
        "{}",
        refused.stderr
    );
    assert_eq!(greetings(&sandbox).await, before, "nothing applied");
}
