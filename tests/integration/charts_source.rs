//! A chart of a Helm repository as an app's whole source (issue #26), served by
//! `tether serve` against the sandbox: the repository is a folder packaged and
//! indexed by Helm's own SDK, served over HTTP on loopback. The newest version of
//! the app's range is synced with its inline values and reported as the revision
//! (`chart@version@digest`); a version published later is picked up at the next poll
//! and the old one pruned; an App object takes a chart the same way; an unknown
//! version and a digest mismatch fail the source, by name, and apply nothing.

use std::path::{Path, PathBuf};

use crate::app_crd::{app_sandbox, apply_app, exists};
use crate::charts_deps::HelmRepo;
use crate::serve::{Serve, server_section};
use crate::support::TestSandbox;

/// The chart folder `dir` (with its `templates/`) holding `files` (relative path,
/// text); returns `dir`.
pub(crate) fn write_chart(dir: PathBuf, files: &[(&str, &str)]) -> PathBuf {
    std::fs::create_dir_all(dir.join("templates")).expect("mkdir");
    for (file, text) in files {
        std::fs::write(dir.join(file), text).expect("write");
    }
    dir
}

/// A chart folder `name` at `version`: one ConfigMap named after the release and the
/// version, holding the `greeting` value.
pub(crate) fn chart(root: &Path, name: &str, version: &str) -> PathBuf {
    let chart = format!("apiVersion: v2\nname: {name}\nversion: {version}\n");
    write_chart(
        root.join(format!("{name}-{version}")).join(name),
        &[
            ("Chart.yaml", &chart),
            ("values.yaml", "greeting: default\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version | replace \".\" \"-\" }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
            ),
        ],
    )
}

/// The ConfigMaps of namespace `charts`, by name, with their greeting.
async fn config_maps(sandbox: &TestSandbox) -> Vec<(String, String)> {
    let listed = sandbox
        .kubectl_json(&["get", "configmaps", "-n", "charts", "-o", "json"])
        .await;
    let mut found: Vec<(String, String)> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["metadata"]["name"] != "kube-root-ca.crt")
        // The App object's, checked on their own.
        .filter(|i| {
            !i["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .starts_with("shop-")
        })
        .map(|i| {
            let name = i["metadata"]["name"].as_str().unwrap_or("").to_string();
            let greeting = i["data"]["greeting"].as_str().unwrap_or("").to_string();
            (name, greeting)
        })
        .collect();
    found.sort();
    found
}

/// `tether serve` of `config` with Helm's stand-in first on its PATH.
pub(crate) async fn serve_with_helm(sandbox: &TestSandbox, name: &str, config: &str) -> Serve {
    Serve::start_with_env(sandbox, name, config, &[], &[("PATH", path_with_helm())]).await
}

/// `PATH` with Helm's stand-in first, as an operator's machine has `helm`.
pub(crate) fn path_with_helm() -> String {
    let helm = crate::chart::helm();
    let bin = helm.parent().expect("helm's folder");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// One app of the configuration: chart `chart` of `repo` at `version`, polled often.
fn app(name: &str, repo: &str, chart: &str, version: &str) -> String {
    format!(
        "- name: {name}\n  source: {{repo: \"{repo}\", chart: {chart}, version: \"{version}\", interval: 200ms, helm: {{values: {{greeting: hello}}}}}}\n  destination: {{namespace: charts}}\n  sync: {{automated: true, prune: true}}\n"
    )
}

#[tokio::test]
async fn a_chart_from_a_helm_repository_syncs_follows_its_range_and_fails_clearly() {
    let sandbox = app_sandbox(&["charts", "team"]).await;
    sandbox.trusted_service_account("team", "deployer").await;
    let root = sandbox.dir.path();
    let build = root.join("build");
    let repo = HelmRepo::start(root.join("repo")).await;
    repo.publish(&chart(&build, "web", "1.0.0"));
    repo.publish(&chart(&build, "web", "2.0.0"));
    // A repository whose index.yaml says another digest than its archive has.
    let tampered = HelmRepo::start(root.join("tampered")).await;
    tampered.publish(&chart(&build, "bad", "1.0.0"));
    let index = tampered.dir.join("index.yaml");
    let text = std::fs::read_to_string(&index).expect("index.yaml");
    let forged: String = text
        .lines()
        .map(|l| match l.split_once("digest: ") {
            Some((indent, _)) => format!("{indent}digest: {}\n", "0".repeat(64)),
            None => format!("{l}\n"),
        })
        .collect();
    assert_ne!(forged, text, "index.yaml lists digests");
    std::fs::write(&index, forged).expect("write index.yaml");

    let server = server_section(root);
    let config = format!(
        "sources: {{minInterval: 100ms}}\n{server}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps:\n{}{}{}",
        app("web", &repo.url, "web", "~1.0"),
        app("missing", &repo.url, "web", "~9.0"),
        app("bad", &tampered.url, "bad", "1.0.0"),
    );
    let serve = serve_with_helm(&sandbox, "chart-source", &config).await;

    // The newest version of the range (not 2.0.0), with the app's values.
    let synced = serve.wait_synced_from("web", "web@1.0.0@sha256:").await;
    assert_eq!(synced["source"]["ready"], true, "{synced}");
    assert_eq!(
        config_maps(&sandbox).await,
        [("web-1-0-0".to_string(), "hello".to_string())]
    );

    // A version published within the range is taken at the next poll; the old
    // version's object is pruned.
    repo.publish(&chart(&build, "web", "1.0.1"));
    let moved = serve.wait_synced_from("web", "web@1.0.1@sha256:").await;
    assert_eq!(moved["revision"]["subject"], "chart web 1.0.1", "{moved}");
    crate::support::eventually("web-1-0-0 is pruned", || async {
        (config_maps(&sandbox).await == [("web-1-0-1".to_string(), "hello".to_string())])
            .then_some(())
    })
    .await;

    // The same chart as an App object: the version from the digest cache.
    let archives = repo.archives();
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", chart: web, version: \"1.0.1\", helm: {{releaseName: shop}}}}\n  destination: {{namespace: charts}}\n  sync: {{automated: true}}\n",
        repo.url
    );
    apply_app(&sandbox, "shop", "team", &spec).await;
    crate::app_crd::wait_app_synced(&sandbox, "shop", "team", |r| {
        r.starts_with("web@1.0.1@sha256:")
    })
    .await;
    assert!(exists(&sandbox, "cm", "shop-1-0-1", "charts").await);
    assert_eq!(repo.archives(), archives, "1.0.1 was fetched before");

    // Steady state: each poll reads index.yaml, and no archive again.
    let archives = repo.archives();
    let requests = repo.requests();
    crate::support::eventually("two more polls", || async {
        (repo.requests() >= requests + 2).then_some(())
    })
    .await;
    assert_eq!(repo.archives(), archives, "an archive fetched twice");

    let missing = serve.wait_source_failed("missing").await;
    assert_eq!(
        missing["source"]["reason"], "ChartVersionNotFound",
        "{missing}"
    );
    let message = missing["source"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&repo.url)
            && message.contains("chart web has no version matching \"~9.0\"")
            && message.contains("2.0.0, 1.0.1, 1.0.0"),
        "{missing}"
    );

    let bad = serve.wait_source_failed("bad").await;
    assert_eq!(bad["source"]["reason"], "DigestMismatch", "{bad}");
    assert!(
        bad["source"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("bad-1.0.0: the archive's digest is sha256:")),
        "{bad}"
    );
    assert!(
        config_maps(&sandbox)
            .await
            .iter()
            .all(|(name, _)| !name.starts_with("missing-") && !name.starts_with("bad-")),
        "nothing of a failed chart source is applied"
    );
    assert_eq!(serve.stop().await, Some(0));
}
