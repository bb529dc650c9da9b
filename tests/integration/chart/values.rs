//! The chart's values and what it is built from: values it cannot honour are refused,
//! a changed configuration restarts the pods, every documented variant renders and
//! lints clean, the generated token survives upgrades; the image and its Dockerfile.

use super::*;

#[test]
fn values_the_chart_cannot_honour_are_refused_naming_the_field() {
    for (values, expected) in [
        (
            "replicaCount: 3\nleaderElection: {enabled: false}\n",
            "replicaCount > 1 needs leaderElection.enabled or shards > 1",
        ),
        ("shards: 0\n", "shards must be at least 1"),
        (
            "shards: 2\nconfig:\n  shards: 3\n",
            "config.shards is set by the chart: set shards",
        ),
        (
            "rbac: {scope: everywhere}\n",
            "rbac.scope must be cluster or namespaced",
        ),
        (
            "webhookSecrets:\n  github: {key: github}\n",
            "webhookSecrets.github.existingSecret is required",
        ),
        (
            "webhookSecrets:\n  svn: {existingSecret: hooks}\n",
            "webhookSecrets.svn: unknown provider",
        ),
        (
            "apiToken: {generate: false}\n",
            "apiToken: without existingSecret or generate: true the status API has no token",
        ),
        (
            "apiToken: {value: t0ken}\n",
            "apiToken.value: the token is never inlined",
        ),
        (
            "config:\n  server: {shutdownTimeout: 10s}\n",
            "config.server.shutdownTimeout is set by the chart",
        ),
        (
            "terminationGracePeriodSeconds: 5\n",
            "terminationGracePeriodSeconds must be at least 6",
        ),
        (
            "config:\n  server: {listen: \"127.0.0.1:9000\"}\n",
            "config.server.listen is set by the chart",
        ),
        (
            "git:\n  credentials: {existingSecret: git}\n",
            "git.credentials.existingSecret is set: name at least one of",
        ),
        (
            "serviceAccount: {create: false}\n",
            "serviceAccount.name is required",
        ),
    ] {
        let error = render_fails(values);
        assert!(error.contains(expected), "{values:?}: {error}");
    }
}

#[test]
fn a_changed_config_changes_the_pod_template_so_the_pods_restart() {
    let checksum = |values: &str| {
        render("tether-system", values).one("Deployment")["spec"]["template"]["metadata"]
            ["annotations"]["checksum/config"]
            .as_str()
            .expect("a config checksum")
            .to_string()
    };
    assert_eq!(checksum(""), checksum(""));
    assert_ne!(checksum(""), checksum("config:\n  concurrency: 8\n"));
}

/// Regression (issue #31): the chart's default image, `ghcr.io/tether/tether`, did not
/// exist. It has none now: a render without one stops and says how to get one.
#[test]
fn the_chart_names_no_image_of_its_own_and_says_how_to_build_one() {
    let err = render_fails("image: {repository: \"\"}\n");
    assert!(
        err.contains("image.repository is required")
            && err.contains("Dockerfile")
            && err.contains("docker build"),
        "{err}"
    );
    let rendered = render("tether-system", "");
    let deployment = rendered.one("Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("{IMAGE}:0.1.0")
    );
}

/// The image cannot be built here; what can be checked is that its build context has
/// what the build reads, and that it runs as the user the chart expects.
#[test]
fn the_dockerfile_copies_what_the_build_reads_and_runs_as_the_charts_user() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("Dockerfile");
    let ignored: Vec<String> = std::fs::read_to_string(root.join(".dockerignore"))
        .expect(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .map(|l| l.trim_end_matches('/').to_string())
        .collect();
    assert!(ignored.iter().any(|p| p == "target"), "target/ stays out");

    let mut copied = Vec::new();
    for line in dockerfile.lines() {
        let Some(rest) = line.strip_prefix("COPY ") else {
            continue;
        };
        if rest.starts_with("--from") {
            continue;
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        for source in &words[..words.len() - 1] {
            assert!(root.join(source).exists(), "COPY {source}: not in the repo");
            assert!(
                !ignored
                    .iter()
                    .any(|p| source == p || source.starts_with(&format!("{p}/"))),
                "COPY {source} is excluded by .dockerignore"
            );
            copied.push(source.to_string());
        }
    }
    // Every target path Cargo.toml names is in the context (cargo refuses a manifest
    // whose targets are missing), and so are the default bench and test directories.
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let mut needed: Vec<String> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("path = \""))
        .map(|p| p.trim_end_matches('"').to_string())
        .collect();
    // The workspace's crates, and the App and AppSet CRDs the binary embeds (`tether crd`).
    needed.extend(
        [
            "Cargo.lock",
            "benches",
            "assets",
            "crates",
            "charts/tether/crds/app.yaml",
            "charts/tether/crds/appset.yaml",
        ]
        .map(String::from),
    );
    for path in needed {
        assert!(
            copied
                .iter()
                .any(|c| path == *c || path.starts_with(&format!("{c}/"))),
            "{path} is not copied into the build"
        );
    }

    let values: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml"),
    )
    .expect("values.yaml is YAML");
    let uid = values["securityContext"]["runAsUser"]
        .as_i64()
        .expect("a uid");
    let gid = values["securityContext"]["runAsGroup"]
        .as_i64()
        .expect("a gid");
    let user = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("USER "))
        .next_back()
        .expect("the image sets a USER");
    assert_eq!(user.trim(), format!("{uid}:{gid}"));
    assert!(uid > 0);
    // The chart passes arguments only, so the image's entrypoint runs them.
    assert!(dockerfile.contains("ENTRYPOINT [\"/usr/local/bin/tether\"]"));
    let rendered = render("tether-system", "");
    assert!(rendered.container()["command"].is_null());
}

/// The `yaml` blocks of the chart's README, in order.
fn readme_values() -> Vec<String> {
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).expect("README.md");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```yaml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_variant_the_readme_documents_renders_and_lints_clean() {
    let variants = readme_values();
    assert!(variants.len() >= 5, "the README's variants: {variants:?}");
    for values in variants {
        let rendered = render("tether-system", &values);
        assert!(rendered.all("Deployment").len() == 1, "{values}");
        let lint = run_helm(&["lint", "--strict", "-n", "tether-system"], &values);
        assert!(
            lint.success,
            "helm lint --strict with {values}: {}{}",
            lint.stdout, lint.stderr
        );
    }
}

/// Issue #12: the generated token is drawn once. Without a cluster (`helm template`)
/// each render draws anew; against a cluster where the release's Secret exists (what
/// `helm upgrade` sees) the chart keeps the token it finds, so clients holding it keep
/// working.
#[tokio::test]
async fn the_generated_api_token_is_kept_across_upgrades() {
    let first = generated_token(&render("tether-system", ""));
    let again = generated_token(&render("tether-system", ""));
    assert_ne!(first, again, "no cluster, nothing to keep: a new token");

    let sandbox = TestSandbox::start().await;
    sandbox.namespace("tether-system").await;
    let fresh = generated_token(&render_on(&sandbox, "tether-system", "").await);
    assert_eq!(fresh.len(), 48, "a first install draws a token");
    // The Secret as the first install left it: Helm's ownership marks, the token.
    let installed = sandbox.write_file(
        "installed.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {FULLNAME}-api-token\n  namespace: tether-system\n  labels: {{app.kubernetes.io/managed-by: Helm}}\n  annotations: {{meta.helm.sh/release-name: {RELEASE}, meta.helm.sh/release-namespace: tether-system}}\nstringData: {{token: {first}}}\n"
        ),
    );
    sandbox
        .kubectl(&["apply", "--server-side", "-f", &installed])
        .await
        .ok();
    for _ in 0..2 {
        let upgraded = render_on(&sandbox, "tether-system", "config:\n  concurrency: 8\n").await;
        assert_eq!(generated_token(&upgraded), first);
    }
    // A token of your own replaces the generated Secret.
    let own = render_on(
        &sandbox,
        "tether-system",
        "apiToken: {existingSecret: tether-api}\n",
    )
    .await;
    assert!(own.all("Secret").is_empty());
    assert!(!own.text.contains(&first));
}

/// Issue #12: an API without a token only when asked for: no Secret, the choice in the
/// config (tether warns at start), and the config loads as tether loads it.
#[test]
fn an_open_api_is_rendered_only_when_asked_for() {
    let rendered = render(
        "tether-system",
        "apiToken: {generate: false}\nconfig:\n  server: {insecureOpenAPI: true}\n",
    );
    assert!(rendered.all("Secret").is_empty());
    let config = rendered.config();
    assert_eq!(config["server"]["insecureOpenAPI"], true);
    assert!(config["server"]["apiToken"].is_null(), "{config}");
    let pod = &rendered.one("Deployment")["spec"]["template"]["spec"];
    assert!(mounted_secret_files(pod).is_empty());
}

/// tether's stop budget follows the pod's grace period, 5s below it.
#[test]
fn the_shutdown_budget_follows_the_grace_period() {
    let rendered = render("tether-system", "terminationGracePeriodSeconds: 60\n");
    assert_eq!(
        rendered.one("Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        60
    );
    assert_eq!(rendered.config()["server"]["shutdownTimeout"], "55s");
}
