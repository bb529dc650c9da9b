//! Issue #26's "done when": an umbrella chart of the shape real platforms use, run by
//! `tether serve` against the sandbox. Its dependencies come from a Helm repository
//! over HTTP (a Bitnami-style `cache` chart carrying its own `common` library, twice:
//! once under an alias whose condition is off), from the CNCF distribution registry
//! (`metrics`, with a CRD in its `crds/` and a custom resource of it) and from
//! `file://` (`local`); the library chart `common` `define`s what the umbrella and
//! `local` `include`; the umbrella has a CRD in its own `crds/` and a resource of it.
//! Published (dependencies vendored as `helm dependency build` leaves them) to the
//! Helm repository for a configuration-file app and to the registry for an App
//! object; kept in Git without `charts/` for another configuration app and App object,
//! whose dependencies tether fetches. Each is synced, diffed clean right after by the
//! real `tether diff`, healed (an object deleted, another edited) and pruned (a new
//! version or values dropping an object).

use std::path::{Path, PathBuf};

use crate::app_crd::{app_yaml, exists, install_crd};
use crate::charts_deps::{HelmRepo, run_helm};
use crate::charts_oci::OciRegistry;
use crate::charts_source::{path_with_helm, serve_with_helm};
use crate::serve::{Serve, borrowed, origin, origin_http, server_section};
use crate::support::{Run, TestSandbox, eventually, tether_with_env};
use tether_testkit::serve::synced_at;

/// Where every release of these tests lands.
const NAMESPACE: &str = "platform";

/// The library chart, as Bitnami's `common` is: only `define`s, no objects.
const COMMON_CHART: &str = "apiVersion: v2\nname: common\nversion: 2.0.0\ntype: library\n";
const COMMON_HELPERS: &str = r#"{{- define "common.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "common.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
"#;

/// A ConfigMap named and labelled by the library, holding `key` from the values.
fn labelled_config_map(key: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ include \"common.fullname\" . }}}}\n  labels: {{{{- include \"common.labels\" . | nindent 4 }}}}\ndata:\n  {key}: {{{{ .Values.{key} | quote }}}}\n"
    )
}

const SERVICE_ACCOUNT: &str = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {{ include \"common.fullname\" . }}\n  labels: {{- include \"common.labels\" . | nindent 4 }}\n";

/// A namespaced CRD of `group` whose resources' `spec` holds `field` (a string).
fn crd(group: &str, kind: &str, plural: &str, field: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.{group}\nspec:\n  group: {group}\n  names: {{kind: {kind}, listKind: {kind}List, plural: {plural}, singular: {}}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              {field}: {{type: string}}\n",
        kind.to_ascii_lowercase()
    )
}

/// Writes `files` (paths from `root`).
fn write_tree(root: &Path, files: &[(String, String)]) {
    for (path, text) in files {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("mkdir");
        std::fs::write(file, text).expect("write");
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// The Bitnami-style `cache` chart at `version`, its `common` vendored in `charts/`
/// (as Bitnami publishes theirs); 1.0.x has a ServiceAccount, 1.1.0 does not.
fn cache_chart(build: &Path, version: &str, registry: &str) -> PathBuf {
    let dir = build.join(format!("cache-{version}")).join("cache");
    let mut files = vec![
        (
            "Chart.yaml".to_string(),
            format!(
                "apiVersion: v2\nname: cache\nversion: {version}\ndependencies:\n- {{name: common, version: 2.x.x, repository: \"{registry}\"}}\n"
            ),
        ),
        ("values.yaml".into(), "maxmemory: 64mb\n".into()),
        (
            "templates/configmap.yaml".into(),
            labelled_config_map("maxmemory"),
        ),
        ("charts/common/Chart.yaml".into(), COMMON_CHART.into()),
        (
            "charts/common/templates/_helpers.tpl".into(),
            COMMON_HELPERS.into(),
        ),
    ];
    if version.starts_with("1.0.") {
        files.push((
            "templates/serviceaccount.yaml".into(),
            SERVICE_ACCOUNT.into(),
        ));
    }
    write_tree(&dir, &files);
    dir
}

/// The `metrics` chart of the registry: a CRD in `crds/`, a resource of it.
fn metrics_chart(build: &Path) -> PathBuf {
    let dir = build.join("metrics-0.3.0").join("metrics");
    write_tree(
        &dir,
        &[
            (
                "Chart.yaml".into(),
                "apiVersion: v2\nname: metrics\nversion: 0.3.0\n".into(),
            ),
            (
                "crds/probes.yaml".into(),
                crd("monitoring.tether.test", "Probe", "probes", "interval"),
            ),
            ("values.yaml".into(), "interval: 30s\n".into()),
            (
                "templates/probe.yaml".into(),
                "apiVersion: monitoring.tether.test/v1\nkind: Probe\nmetadata:\n  name: {{ .Release.Name }}-probe\nspec:\n  interval: {{ .Values.interval | quote }}\n".into(),
            ),
        ],
    );
    dir
}

/// The Helm repository (`common`, `cache` 1.0.0 and 1.1.0) and the registry
/// (`metrics`) the umbrella's dependencies come from.
struct Parts {
    build: PathBuf,
    charts: HelmRepo,
    registry: OciRegistry,
    /// `metrics`' archive, as `helm dependency build` would fetch it.
    metrics: PathBuf,
}

impl Parts {
    async fn publish(sandbox: &TestSandbox) -> Parts {
        let root = sandbox.dir.path();
        let build = root.join("build");
        let charts = HelmRepo::start(root.join("helm-repo")).await;
        let registry = OciRegistry::start(&root.join("registry")).await;
        let common = build.join("common-2.0.0").join("common");
        write_tree(
            &common,
            &[
                ("Chart.yaml".into(), COMMON_CHART.into()),
                ("templates/_helpers.tpl".into(), COMMON_HELPERS.into()),
            ],
        );
        charts.publish(&common);
        for version in ["1.0.0", "1.1.0"] {
            charts.publish(&cache_chart(&build, version, &registry.url()));
        }
        let metrics = metrics_chart(&build);
        registry.push(&metrics, &build);
        let packaged = build.join("metrics-archive");
        run_helm(&["package", path(&metrics), "-d", path(&packaged)]);
        Parts {
            metrics: packaged.join("metrics-0.3.0.tgz"),
            build,
            charts,
            registry,
        }
    }

    /// The umbrella `platform` at `version` and its `file://` dependency `local`, as
    /// files under `root/`: `platform` depends on `cache` by `cache_range`.
    fn umbrella(&self, root: &str, version: &str, cache_range: &str) -> Vec<(String, String)> {
        let (http, oci) = (&self.charts.url, self.registry.url());
        let chart = format!(
            "apiVersion: v2\nname: platform\nversion: {version}\ndependencies:\n\
             - {{name: common, version: 2.0.0, repository: \"{http}\"}}\n\
             - {{name: cache, version: \"{cache_range}\", repository: \"{http}\"}}\n\
             - {{name: cache, version: \"{cache_range}\", repository: \"{http}\", alias: sessions, condition: sessions.enabled}}\n\
             - {{name: metrics, version: 0.3.0, repository: \"{oci}\"}}\n\
             - {{name: local, version: 0.1.0, repository: \"file://../local\"}}\n"
        );
        let files = [
            ("platform/Chart.yaml", chart),
            (
                "platform/values.yaml",
                "team: payments\nsessions: {enabled: false}\ncache: {maxmemory: 128mb}\nwidget: {enabled: true}\n".into(),
            ),
            (
                "platform/crds/widgets.yaml",
                crd("platform.tether.test", "Widget", "widgets", "size"),
            ),
            ("platform/templates/configmap.yaml", labelled_config_map("team")),
            (
                "platform/templates/widget.yaml",
                "{{- if .Values.widget.enabled }}\napiVersion: platform.tether.test/v1\nkind: Widget\nmetadata:\n  name: {{ .Release.Name }}-widget\nspec:\n  size: large\n{{- end }}\n".into(),
            ),
            (
                "local/Chart.yaml",
                "apiVersion: v2\nname: local\nversion: 0.1.0\n".into(),
            ),
            ("local/values.yaml", "owner: platform-team\n".into()),
            ("local/templates/configmap.yaml", labelled_config_map("owner")),
        ];
        files
            .into_iter()
            .map(|(p, t)| (format!("{root}/{p}"), t))
            .collect()
    }

    /// The umbrella at `version` with `cache` `cache_version`, its dependencies
    /// vendored as archives in `charts/`, as `helm dependency build` leaves them
    /// before `helm package`: the chart's folder.
    fn vendored(&self, version: &str, cache_version: &str) -> PathBuf {
        let root = self.build.join(format!("platform-{version}"));
        write_tree(&root, &self.umbrella("src", version, cache_version));
        let chart = root.join("src/platform");
        let vendor = chart.join("charts");
        std::fs::create_dir_all(&vendor).expect("mkdir");
        for archive in ["common-2.0.0.tgz", &format!("cache-{cache_version}.tgz")] {
            std::fs::copy(self.charts.dir.join(archive), vendor.join(archive)).expect("copy");
        }
        std::fs::copy(&self.metrics, vendor.join("metrics-0.3.0.tgz")).expect("copy");
        run_helm(&[
            "package",
            path(&root.join("src/local")),
            "-d",
            path(&vendor),
        ]);
        chart
    }
}

/// What a configuration file's app says about its source, and the apps section.
fn config(sandbox: &TestSandbox, apps: &str) -> String {
    format!(
        "sources: {{minInterval: 100ms}}\n{}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps:{apps}",
        server_section(sandbox.dir.path())
    )
}

/// A configuration app `name` whose `source` is given, synced and pruned.
fn config_app(name: &str, source: &str) -> String {
    format!(
        "\n- name: {name}\n  source: {{{source}, interval: 200ms}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n"
    )
}

/// An App object's spec whose `source` is given.
fn app_spec(source: &str, release: &str, values: &str) -> String {
    format!(
        "  serviceAccountName: deployer\n  source: {{{source}, interval: 200ms, helm: {{releaseName: {release}, values: {{{values}}}}}}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n"
    )
}

async fn start(sandbox: &TestSandbox) {
    sandbox.namespaces(&[NAMESPACE, "team"]).await;
    install_crd(sandbox).await;
    sandbox.trusted_service_account("team", "deployer").await;
}

/// `kubectl get` of one object of the platform namespace as JSON, if it exists.
async fn get(sandbox: &TestSandbox, kind: &str, name: &str) -> Option<serde_json::Value> {
    let out = sandbox
        .kubectl(&["get", kind, name, "-n", NAMESPACE, "-o", "json"])
        .await;
    (out.code == 0).then(|| serde_json::from_str(&out.stdout).expect("JSON"))
}

/// The objects release `release` of the umbrella renders, each checked: the library's
/// names and labels, the CRDs of both `crds/` folders and their resources, and not
/// the disabled alias.
async fn assert_rendered(sandbox: &TestSandbox, release: &str) {
    for crd in [
        "widgets.platform.tether.test",
        "probes.monitoring.tether.test",
    ] {
        assert!(
            sandbox.kubectl(&["get", "crd", crd]).await.code == 0,
            "CRD {crd} of a crds/ folder"
        );
    }
    let local = get(sandbox, "cm", &format!("{release}-local"))
        .await
        .expect("the file:// chart's ConfigMap");
    assert_eq!(local["data"]["owner"], "platform-team");
    assert_eq!(
        local["metadata"]["labels"]["helm.sh/chart"], "local-0.1.0",
        "the library's labels, included by the file:// chart"
    );
    let cache = get(sandbox, "cm", &format!("{release}-cache"))
        .await
        .expect("the HTTP repository's chart");
    assert_eq!(cache["data"]["maxmemory"], "128mb", "the umbrella's values");
    assert_eq!(
        cache["metadata"]["labels"]["app.kubernetes.io/instance"],
        release
    );
    let own = get(sandbox, "cm", &format!("{release}-platform"))
        .await
        .expect("the umbrella's own ConfigMap");
    assert_eq!(own["data"]["team"], "payments");
    let probe = get(
        sandbox,
        "probes.monitoring.tether.test",
        &format!("{release}-probe"),
    )
    .await
    .expect("the OCI chart's custom resource");
    assert_eq!(probe["spec"]["interval"], "30s");
    assert!(
        exists(
            sandbox,
            "widgets.platform.tether.test",
            &format!("{release}-widget"),
            NAMESPACE
        )
        .await
    );
    assert!(
        get(sandbox, "cm", &format!("{release}-sessions"))
            .await
            .is_none(),
        "the alias whose condition is off renders nothing"
    );
}

/// `tether diff` with Helm's stand-in on PATH, as an operator runs it.
async fn diff(sandbox: &TestSandbox, args: &[&str]) -> Run {
    tether_with_env(sandbox, "diff", args, &[("PATH", path_with_helm())]).await
}

/// Deletes the file:// chart's ConfigMap and edits the cache's by hand: both are
/// put back as the chart says.
async fn assert_heals(sandbox: &TestSandbox, release: &str) {
    let local = format!("{release}-local");
    let cache = format!("{release}-cache");
    sandbox
        .kubectl(&["delete", "cm", &local, "-n", NAMESPACE])
        .await
        .ok();
    sandbox
        .kubectl_merge_patch("cm", &cache, NAMESPACE, r#"{"data":{"maxmemory":"1gb"}}"#)
        .await;
    eventually("the deleted and the edited objects are healed", || async {
        let local = get(sandbox, "cm", &local).await?;
        let cache = get(sandbox, "cm", &cache).await?;
        (local["data"]["owner"] == "platform-team" && cache["data"]["maxmemory"] == "128mb")
            .then_some(())
    })
    .await;
}

/// Waits until `kind` `name` is gone from the platform namespace.
async fn assert_pruned(sandbox: &TestSandbox, kind: &str, name: &str) {
    eventually(&format!("{kind} {name} is pruned"), || async {
        get(sandbox, kind, name).await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_published_umbrella_chart_syncs_diffs_clean_heals_and_prunes_from_a_helm_repository() {
    let sandbox = TestSandbox::start().await;
    start(&sandbox).await;
    let parts = Parts::publish(&sandbox).await;
    parts.charts.publish(&parts.vendored("1.0.0", "1.0.0"));
    let source = format!(
        "repo: \"{}\", chart: platform, version: \"~1.0\"",
        parts.charts.url
    );
    let config = config(&sandbox, &config_app("platform", &source));
    let file = sandbox.write_file("umbrella.yaml", &config);
    let serve = serve_with_helm(&sandbox, "umbrella-helm", &config).await;

    serve
        .wait_synced_from("platform", "platform@1.0.0@sha256:")
        .await;
    assert_rendered(&sandbox, "platform").await;
    let clean = diff(&sandbox, &["--config", &file, "--app", "platform"]).await;
    assert_eq!(clean.code, Some(0), "in sync right after: {clean:?}");

    assert_heals(&sandbox, "platform").await;

    // Version 1.0.1 vendors cache 1.1.0, which has no ServiceAccount.
    assert!(
        get(&sandbox, "serviceaccount", "platform-cache")
            .await
            .is_some()
    );
    parts.charts.publish(&parts.vendored("1.0.1", "1.1.0"));
    serve
        .wait_synced_from("platform", "platform@1.0.1@sha256:")
        .await;
    assert_pruned(&sandbox, "serviceaccount", "platform-cache").await;
    let clean = diff(&sandbox, &["--config", &file, "--app", "platform"]).await;
    assert_eq!(clean.code, Some(0), "in sync after the prune: {clean:?}");
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test]
async fn a_published_umbrella_chart_syncs_heals_and_prunes_as_an_app_object_from_a_registry() {
    let sandbox = TestSandbox::start().await;
    start(&sandbox).await;
    let parts = Parts::publish(&sandbox).await;
    parts
        .registry
        .push(&parts.vendored("1.0.0", "1.0.0"), &parts.build);
    let serve = serve_with_helm(&sandbox, "umbrella-oci", &config(&sandbox, " []\n")).await;
    let source = format!(
        "repo: \"{}\", chart: platform, version: \"~1.0\"",
        parts.registry.url()
    );
    let apply = |values: &'static str| {
        let yaml = app_yaml("edge", "team", &app_spec(&source, "edge", values));
        let sandbox = &sandbox;
        async move {
            sandbox.kubectl_apply(&yaml).await;
        }
    };
    apply("").await;
    let (_, digest) = parts.registry.manifest("platform", "1.0.0").await;
    let want = format!("platform@1.0.0@{digest}");
    serve
        .wait_status("team.edge", "the App is Synced", |s| {
            synced_at(s, |r| r == want)
        })
        .await;
    assert_rendered(&sandbox, "edge").await;
    // No CLI flag names a registry's chart yet (`tether diff --chart` is to come): the
    // App's verdict at the pass after the sync, from the same observe path as `tether
    // diff`, says every object is in sync.
    serve
        .wait_status("team.edge", "every object is InSync", |s| {
            let resources = s["resources"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            s["drifted"] == serde_json::json!([])
                && resources.len() == 8
                && resources.iter().all(|r| r["status"] == "InSync")
        })
        .await;
    assert_heals(&sandbox, "edge").await;

    // Values that switch the umbrella's custom resource off: it is pruned.
    apply("widget: {enabled: false}").await;
    assert_pruned(&sandbox, "widgets.platform.tether.test", "edge-widget").await;
    assert!(get(&sandbox, "cm", "edge-platform").await.is_some());
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test]
async fn a_git_umbrella_chart_without_vendored_dependencies_syncs_diffs_clean_heals_and_prunes() {
    let sandbox = TestSandbox::start().await;
    start(&sandbox).await;
    let parts = Parts::publish(&sandbox).await;
    let files = parts.umbrella("stack", "1.0.0", "~1.0.0");
    let files = borrowed(&files);
    let git = origin(&sandbox, &files);
    let source = format!("repo: \"{}\", path: stack/platform", git.url);
    let config = config(&sandbox, &config_app("platform", &source));
    let file = sandbox.write_file("umbrella.yaml", &config);
    let serve = serve_with_helm(&sandbox, "umbrella-git", &config).await;

    serve.wait_synced("platform").await;
    assert_rendered(&sandbox, "platform").await;
    let clean = diff(&sandbox, &["--config", &file, "--app", "platform"]).await;
    assert_eq!(clean.code, Some(0), "in sync right after: {clean:?}");
    assert_heals(&sandbox, "platform").await;

    // A commit moving the dependency to cache 1.1: its ServiceAccount is pruned.
    let moved = parts.umbrella("stack", "1.0.0", "~1.1.0");
    git.repo.write("stack/platform/Chart.yaml", &moved[0].1);
    let head = git.repo.commit("cache 1.1");
    serve
        .wait_status("platform", "the new commit is Synced", |s| {
            synced_at(s, |r| r == head)
        })
        .await;
    assert_pruned(&sandbox, "serviceaccount", "platform-cache").await;
    let clean = diff(&sandbox, &["--config", &file, "--app", "platform"]).await;
    assert_eq!(clean.code, Some(0), "in sync after the prune: {clean:?}");
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test]
async fn a_git_umbrella_chart_without_vendored_dependencies_syncs_as_an_app_object() {
    let sandbox = TestSandbox::start().await;
    start(&sandbox).await;
    let parts = Parts::publish(&sandbox).await;
    let files = parts.umbrella("stack", "1.0.0", "~1.0.0");
    let files = borrowed(&files);
    let git = origin_http(&sandbox, &files);
    let serve: Serve =
        serve_with_helm(&sandbox, "umbrella-git-app", &config(&sandbox, " []\n")).await;
    let source = format!("repo: \"{}\", path: stack/platform", git.url);
    let apply = |values: &'static str| {
        let yaml = app_yaml("edge", "team", &app_spec(&source, "edge", values));
        let sandbox = &sandbox;
        async move {
            sandbox.kubectl_apply(&yaml).await;
        }
    };
    apply("").await;
    serve.wait_synced("team.edge").await;
    assert_rendered(&sandbox, "edge").await;
    let clean = diff(
        &sandbox,
        &[
            "--repo",
            &git.url,
            "--ref",
            "main",
            "--path",
            "stack/platform",
            "--release",
            "edge",
            "--app",
            "team.edge",
            "-n",
            NAMESPACE,
        ],
    )
    .await;
    assert_eq!(clean.code, Some(0), "in sync right after: {clean:?}");
    assert_heals(&sandbox, "edge").await;

    apply("widget: {enabled: false}").await;
    assert_pruned(&sandbox, "widgets.platform.tether.test", "edge-widget").await;
    assert_eq!(serve.stop().await, Some(0));
}
