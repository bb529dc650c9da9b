//! Chart dependencies of a Git chart (issue #26): a Helm repository served over HTTP
//! by the test (archives packaged and indexed by Helm's own SDK through the stand-in),
//! a chart in Git depending on it (a range, an alias, a condition) and on a `file://`
//! chart of the same repository; synced and diffed by the real binary against the
//! sandbox; the failure paths each named, nothing applied; a second read served from
//! the digest cache without a request; the SSRF guard refusing a loopback repository.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tether_testkit::assert_contains;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use tether_core::outbound::OutboundPolicy;
use tether_core::source::{Source, SourceCache};
use tether_core::sync::desired::{DesiredError, DesiredInput, ReadOptions, read_desired};
use tether_diff::manifest::{HelmInputs, Renderers};

use crate::support::{GitDaemon, GitRepo, TestSandbox, json, resource_fields, run_ok, tether};

/// A Helm repository: a folder of archives and their `index.yaml`, served over HTTP
/// on loopback, counting the requests it answers.
pub(crate) struct HelmRepo {
    pub(crate) dir: PathBuf,
    pub(crate) url: String,
    requests: Arc<AtomicUsize>,
    archives: Arc<AtomicUsize>,
    authorizations: Authorizations,
    _server: tokio::task::JoinHandle<()>,
}

/// The `Authorization` headers a repository was sent, in order.
type Authorizations = Arc<parking_lot::Mutex<Vec<String>>>;

/// What the repository serves from: its folder, its counters, and the
/// `Authorization` header it requires, if any.
type RepoState = (
    PathBuf,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    Option<Arc<String>>,
    Authorizations,
);

async fn serve_file(
    State((dir, count, archives, login, seen)): State<RepoState>,
    UrlPath(name): UrlPath<String>,
    headers: axum::http::HeaderMap,
) -> Result<Vec<u8>, StatusCode> {
    count.fetch_add(1, Ordering::SeqCst);
    if let Some(given) = headers.get("authorization").and_then(|h| h.to_str().ok()) {
        seen.lock().push(given.to_string());
    }
    if let Some(login) = login {
        let given = headers.get("authorization").and_then(|h| h.to_str().ok());
        if given != Some(login.as_str()) {
            return Err(StatusCode::UNAUTHORIZED);
        }
    }
    if name.ends_with(".tgz") {
        archives.fetch_add(1, Ordering::SeqCst);
    }
    if name.contains('/') || name.starts_with('.') {
        return Err(StatusCode::NOT_FOUND);
    }
    std::fs::read(dir.join(name)).map_err(|_| StatusCode::NOT_FOUND)
}

impl HelmRepo {
    pub(crate) async fn start(dir: PathBuf) -> HelmRepo {
        HelmRepo::serve(dir, None).await
    }

    /// A repository answering only requests with this `Authorization` header.
    pub(crate) async fn start_with_login(dir: PathBuf, authorization: String) -> HelmRepo {
        HelmRepo::serve(dir, Some(Arc::new(authorization))).await
    }

    async fn serve(dir: PathBuf, login: Option<Arc<String>>) -> HelmRepo {
        std::fs::create_dir_all(&dir).expect("mkdir");
        let requests = Arc::new(AtomicUsize::new(0));
        let archives = Arc::new(AtomicUsize::new(0));
        let authorizations = Authorizations::default();
        let state = (
            dir.clone(),
            requests.clone(),
            archives.clone(),
            login,
            authorizations.clone(),
        );
        let app = axum::Router::new()
            .route("/{name}", axum::routing::get(serve_file))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        HelmRepo {
            dir,
            url,
            requests,
            archives,
            authorizations,
            _server: server,
        }
    }

    /// The `Authorization` headers sent to the repository so far.
    pub(crate) fn authorizations(&self) -> Vec<String> {
        self.authorizations.lock().clone()
    }

    /// Packages the chart folder `chart` into the repository and indexes it again,
    /// both with Helm's own SDK.
    pub(crate) fn publish(&self, chart: &Path) {
        run_helm(&["package", path(chart), "-d", path(&self.dir)]);
        run_helm(&["repo", "index", path(&self.dir)]);
    }

    pub(crate) fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Chart archives served so far.
    pub(crate) fn archives(&self) -> usize {
        self.archives.load(Ordering::SeqCst)
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

pub(crate) fn run_helm(args: &[&str]) {
    run_ok(std::process::Command::new(crate::chart::helm()).args(args));
}

/// The chart folder `chart` archived by `tar` into `into` as `NAME-VERSION.tgz`
/// (`version` is the Chart.yaml's): unlike `helm package`, it does not insist that
/// dependencies be vendored, so the archive's are fetched by whoever renders it.
pub(crate) fn tar_chart(chart: &Path, version: &str, into: &Path) -> PathBuf {
    std::fs::create_dir_all(into).expect("mkdir");
    let name = chart.file_name().and_then(|n| n.to_str()).expect("a name");
    let archive = into.join(format!("{name}-{version}.tgz"));
    let status = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(chart.parent().expect("a parent"))
        .arg(name)
        .status()
        .expect("tar runs");
    assert!(status.success(), "tar {}", chart.display());
    archive
}

/// A chart folder `name` at `version` under `root`, rendering one ConfigMap named
/// after the release, the chart's name (an alias's, when aliased) and its version.
fn sub_chart(root: &Path, name: &str, version: &str) -> PathBuf {
    let chart = format!("apiVersion: v2\nname: {name}\nversion: {version}\n");
    crate::charts_source::write_chart(
        root.join(format!("{name}-{version}")).join(name),
        &[
            ("Chart.yaml", &chart),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}-{{ .Chart.Version | replace \".\" \"-\" }}\ndata:\n  from: repo\n",
            ),
        ],
    )
}

/// The umbrella chart's Chart.yaml: `sub` from the repository by a range, again under
/// an alias behind a condition, and `lib` from the same revision.
fn umbrella(repo_url: &str, range: &str) -> String {
    format!(
        "apiVersion: v2\nname: web\nversion: 1.0.0\ndependencies:\n\
         - name: sub\n  version: \"{range}\"\n  repository: {repo_url}\n\
         - name: sub\n  version: \"{range}\"\n  repository: {repo_url}\n  alias: extra\n  condition: extra.enabled\n\
         - name: lib\n  version: 0.1.0\n  repository: file://../lib\n"
    )
}

const LIB_CHART: &str = "apiVersion: v2\nname: lib\nversion: 0.1.0\n";
const LIB_CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-lib\ndata:\n  from: file\n";
const WEB_CM: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-web\n";

/// A Helm repository holding `sub` 0.1.0 and 0.1.1, and a Git repository holding the
/// umbrella chart `apps/web` (with `extra.enabled: false`) and `apps/lib`.
async fn fixture(sandbox: &TestSandbox, range: &str) -> (HelmRepo, GitRepo, GitDaemon, String) {
    let root = sandbox.dir.path();
    let charts = HelmRepo::start(root.join("helm-repo")).await;
    for version in ["0.1.0", "0.1.1"] {
        charts.publish(&sub_chart(&root.join("build"), "sub", version));
    }
    let git_root = root.join("srv");
    let repo = GitRepo::init(git_root.join("apps.git"));
    repo.write("apps/web/Chart.yaml", &umbrella(&charts.url, range));
    repo.write("apps/web/values.yaml", "extra:\n  enabled: false\n");
    repo.write("apps/web/templates/cm.yaml", WEB_CM);
    repo.write("apps/lib/Chart.yaml", LIB_CHART);
    repo.write("apps/lib/templates/cm.yaml", LIB_CM);
    repo.commit("umbrella chart");
    let daemon = GitDaemon::start(&git_root);
    let url = daemon.url("apps.git");
    (charts, repo, daemon, url)
}

fn args<'a>(url: &'a str, helm: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--repo", url, "--ref", "main", "--path", "apps/web", "--app", "web", "--helm", helm,
    ];
    args.extend_from_slice(extra);
    args
}

async fn config_maps(sandbox: &TestSandbox) -> Vec<String> {
    let listed = sandbox
        .kubectl_json(&["get", "configmaps", "-n", "default", "-o", "json"])
        .await;
    let mut names: Vec<String> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .filter(|n| n.starts_with("web-"))
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_git_chart_with_dependencies_from_a_helm_repository_and_file_syncs_and_diffs_clean() {
    let sandbox = TestSandbox::start().await;
    let (charts, _repo, _daemon, url) = fixture(&sandbox, "~0.1").await;
    let helm = crate::chart::helm();
    let helm = path(&helm);

    let synced = tether(&sandbox, "sync", &args(&url, helm, &[])).await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    // The newest version of the range, the file:// chart, the chart's own; not the
    // aliased copy, whose condition is false.
    assert_eq!(
        config_maps(&sandbox).await,
        ["web-lib", "web-sub-0-1-1", "web-web"]
    );
    assert!(charts.requests() >= 2, "index.yaml and one archive");

    let diff = tether(&sandbox, "diff", &args(&url, helm, &["-o", "json"])).await;
    assert_eq!(diff.code, Some(0), "in sync after the sync: {diff:?}");

    // The condition turned on: the alias renders the same chart under its own name.
    let on = tether(
        &sandbox,
        "diff",
        &args(&url, helm, &["--set", "extra.enabled=true", "-o", "json"]),
    )
    .await;
    assert_eq!(on.code, Some(1), "{on:?}");
    let report = json(&on);
    let missing = resource_fields(&report, "name", |r| r["status"] == "Missing");
    assert_eq!(missing, ["web-extra-0-1-1"], "{report}");
}

#[tokio::test]
async fn dependency_failures_name_the_repository_chart_and_version_and_apply_nothing() {
    let sandbox = TestSandbox::start().await;
    let (charts, repo, _daemon, url) = fixture(&sandbox, "~9.0").await;
    let helm = crate::chart::helm();
    let helm = path(&helm);
    let run = |extra: &'static [&'static str]| {
        let (sandbox, url) = (&sandbox, url.clone());
        async move { tether(sandbox, "sync", &args(&url, helm, extra)).await }
    };

    let unknown = run(&[]).await;
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(
        unknown.stderr.contains(&format!(
            "{}: chart sub has no version matching \"~9.0\" (versions: 0.1.1, 0.1.0)",
            charts.url
        )),
        "{}",
        unknown.stderr
    );

    // An archive changed after it was indexed: its digest no longer matches.
    repo.write("apps/web/Chart.yaml", &umbrella(&charts.url, "0.1.0"));
    repo.commit("exact");
    let tampered = charts.dir.join("sub-0.1.0.tgz");
    let other = sub_chart(&sandbox.dir.path().join("evil"), "sub", "0.1.0");
    std::fs::write(other.join("templates/extra.yaml"), LIB_CM).expect("write");
    run_helm(&[
        "package",
        path(&other),
        "-d",
        path(&sandbox.dir.path().join("evil")),
    ]);
    std::fs::copy(sandbox.dir.path().join("evil/sub-0.1.0.tgz"), &tampered).expect("copy");
    let mismatch = run(&[]).await;
    assert_eq!(mismatch.code, Some(2), "{mismatch:?}");
    assert!(
        mismatch.stderr.contains(&format!(
            "{}: sub-0.1.0: the archive's digest is sha256:",
            charts.url
        )) && mismatch.stderr.contains("index.yaml says sha256:"),
        "{}",
        mismatch.stderr
    );

    // A file:// dependency leaving the repository.
    repo.write(
        "apps/web/Chart.yaml",
        "apiVersion: v2\nname: web\nversion: 1.0.0\ndependencies:\n- {name: lib, version: 0.1.0, repository: 'file://../../../etc'}\n",
    );
    repo.commit("escape");
    let escape = run(&[]).await;
    assert_eq!(escape.code, Some(2), "{escape:?}");
    assert!(
        escape
            .stderr
            .contains("apps/web: dependency lib: file://../../../etc leaves the repository"),
        "{}",
        escape.stderr
    );

    // A Chart.lock that does not list a dependency.
    repo.write("apps/web/Chart.yaml", &umbrella(&charts.url, "0.1.1"));
    repo.write(
        "apps/web/Chart.lock",
        "dependencies:\n- {name: lib, version: 0.1.0, repository: 'file://../lib'}\n",
    );
    repo.commit("lock without sub");
    let unlisted = run(&[]).await;
    assert_eq!(unlisted.code, Some(2), "{unlisted:?}");
    assert_contains(&unlisted.stderr, "is missing from Chart.lock");

    assert!(
        config_maps(&sandbox).await.is_empty(),
        "applied from a revision whose dependencies failed"
    );
}

/// `read_desired` as `tether serve` calls it, twice on one source cache.
async fn read(cache: &SourceCache, source: &Source) -> Result<Vec<String>, DesiredError> {
    let helm = crate::chart::helm();
    let renderers = Renderers {
        helm: HelmInputs {
            program: Some(path(&helm).to_string()),
            namespace: "default".into(),
            ..HelmInputs::default()
        },
        release: "web".into(),
        ..Renderers::default()
    };
    let read = ReadOptions {
        app: Some("web"),
        default_namespace: "default",
        scopes: None,
        renderers: &renderers,
    };
    let desired = read_desired(
        DesiredInput::Git {
            cache,
            source,
            verify: None,
        },
        &read,
    )
    .await?;
    let mut names: Vec<String> = desired
        .manifests
        .objects
        .iter()
        .map(|m| m.id.name.clone())
        .collect();
    names.sort();
    Ok(names)
}

#[tokio::test]
async fn a_locked_dependency_is_fetched_once_then_served_from_the_digest_cache() {
    let sandbox = TestSandbox::start().await;
    let (charts, repo, _daemon, _url) = fixture(&sandbox, "0.1.0").await;
    repo.write(
        "apps/web/Chart.lock",
        &format!(
            "dependencies:\n- {{name: sub, version: 0.1.0, repository: '{}'}}\n\
             - {{name: lib, version: 0.1.0, repository: 'file://../lib'}}\n",
            charts.url
        ),
    );
    repo.commit("locked");
    let cache = SourceCache::open(sandbox.dir.path().join("cache")).expect("cache");
    let source = Source::new(path(&repo.dir), "main", "apps/web");

    let cold = read(&cache, &source).await.expect("cold read");
    assert_eq!(cold, ["web-lib", "web-sub-0-1-0", "web-web"]);
    let after_cold = charts.requests();
    assert_eq!(after_cold, 2, "index.yaml and the archive");

    // A new commit (a new render), the same locked version: no request at all.
    repo.write(
        "apps/web/templates/more.yaml",
        &WEB_CM.replace("-web", "-more"),
    );
    repo.commit("more");
    let warm = read(&cache, &source).await.expect("warm read");
    assert_eq!(warm, ["web-lib", "web-more", "web-sub-0-1-0", "web-web"]);
    assert_eq!(
        charts.requests(),
        after_cold,
        "served from the digest cache"
    );
    assert_eq!(cache.charts().requests(), 2);

    // Guarded as `tether serve` guards it: a loopback repository is refused, by name.
    let guarded = SourceCache::open(sandbox.dir.path().join("guarded")).expect("cache");
    guarded.charts().guard(Arc::new(OutboundPolicy::default()));
    let refused = read(&guarded, &source).await.expect_err("loopback refused");
    assert!(
        refused
            .to_string()
            .contains("a loopback address an App may not reach"),
        "{refused}"
    );
    assert_eq!(charts.requests(), after_cold, "no request reached it");
}
