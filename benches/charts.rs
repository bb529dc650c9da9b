//! Chart dependency figures (issue #26): a Git chart whose dependencies are not
//! vendored (a chart from a Helm repository served over HTTP on loopback, again under
//! an alias, and a `file://` chart of the same revision), read by the render stage a
//! `tether serve` pass uses (`RenderCache::manifests` around `read_revision`).
//!
//! Cold (a fresh process: empty chart cache): time to fetch and render, requests to
//! the repository, renderer processes. Warm (the same commit): requests and renderer
//! processes (target 0 / 0) and time (target < 5 ms). New commit with the same
//! Chart.lock: requests (target 0: the digest cache). N apps sharing the chart
//! version on one cache: requests (target: the cold pass's, once). The cache's bytes
//! against its bound. The repository's chart as an app's source (`Source::chart`):
//! cold sync + render (target 2 requests, 1 renderer), and a poll with nothing new
//! (target: `index.yaml` alone, no renderer).
//!
//! The same chart pushed (by Helm's SDK) to an OCI registry (Debian's
//! `docker-registry` on loopback) as an app's source: cold sync + render (target 3
//! requests: the tags, the manifest, the layer; 1 renderer) and a poll with nothing
//! new (target: the tags alone, no renderer).
//!
//! `cargo bench --bench charts [-- --quick]` prints a table, writes
//! `target/bench-results/charts.json`, and exits non-zero when it printed a FAIL.
//! Helm is `TETHER_HELM`, else the one `.ci/install-helm` installs, else `helm`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use serde_json::json;
use tether_core::source::charts::DEFAULT_CHART_CACHE_BYTES;
use tether_core::source::{Source, SourceCache};
use tether_core::sync::desired::RenderCache;
use tether_diff::manifest::{HelmInputs, Renderers};
use tether_testkit::figures::{ms, verdict};

#[path = "shared/render_stage.rs"]
mod render_stage;
use render_stage::stage;
use tether_testkit::git::git;
use tether_testkit::render::{counting_wrapper, helm_program, processes};

/// The warm render stage's budget.
const WARM_TARGET: Duration = Duration::from_millis(5);

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn run(program: &str, args: &[&str]) {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{program} {args:?}: {out:?}");
}

/// The repository folder: `sub` 0.1.0 (ten ConfigMaps), packaged and indexed by Helm.
fn helm_repository(root: &Path, helm: &str) -> PathBuf {
    let chart = root.join("build/sub");
    write(
        &chart,
        "Chart.yaml",
        "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
    );
    write(
        &chart,
        "templates/cms.yaml",
        "{{- range $i := until 10 }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ $.Release.Name }}-{{ $.Chart.Name }}-{{ $i }}\n{{- end }}\n",
    );
    let repo = root.join("helm-repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let (chart, repo_s) = (chart.display().to_string(), repo.display().to_string());
    run(helm, &["package", &chart, "-d", &repo_s]);
    run(helm, &["repo", "index", &repo_s]);
    repo
}

async fn serve_file(
    State((dir, count)): State<(PathBuf, Arc<AtomicUsize>)>,
    UrlPath(name): UrlPath<String>,
) -> Result<Vec<u8>, axum::http::StatusCode> {
    count.fetch_add(1, Ordering::SeqCst);
    if name.contains('/') || name.starts_with('.') {
        return Err(axum::http::StatusCode::NOT_FOUND);
    }
    std::fs::read(dir.join(name)).map_err(|_| axum::http::StatusCode::NOT_FOUND)
}

/// Serves `dir` on loopback; returns its URL and the request count.
async fn serve(dir: PathBuf) -> (String, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new()
        .route("/{name}", axum::routing::get(serve_file))
        .with_state((dir, count.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (url, count)
}

/// The Git repository: `apps/web` (its own template, `sub` twice, `lib` by file://)
/// with a Chart.lock, and `apps/lib`.
fn git_repository(root: &Path, repo_url: &str) -> PathBuf {
    let dir = root.join("git");
    write(
        &dir,
        "apps/web/Chart.yaml",
        &format!(
            "apiVersion: v2\nname: web\nversion: 1.0.0\ndependencies:\n\
             - {{name: sub, version: 0.1.0, repository: '{repo_url}'}}\n\
             - {{name: sub, version: 0.1.0, repository: '{repo_url}', alias: extra}}\n\
             - {{name: lib, version: 0.1.0, repository: 'file://../lib'}}\n"
        ),
    );
    write(
        &dir,
        "apps/web/Chart.lock",
        &format!(
            "dependencies:\n- {{name: sub, version: 0.1.0, repository: '{repo_url}'}}\n\
             - {{name: lib, version: 0.1.0, repository: 'file://../lib'}}\n"
        ),
    );
    write(
        &dir,
        "apps/web/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-web\n",
    );
    write(
        &dir,
        "apps/lib/Chart.yaml",
        "apiVersion: v2\nname: lib\nversion: 0.1.0\n",
    );
    write(
        &dir,
        "apps/lib/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-lib\n",
    );
    git(&dir, &["init", "-q", "-b", "main"]);
    commit(&dir, "chart");
    dir
}

fn commit(dir: &Path, subject: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", subject]);
}

/// A distribution registry on loopback storing under `root`, killed when dropped.
struct Registry(std::process::Child);

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a registry, pushes the Helm repository's `sub` archive to it with Helm's
/// SDK, and returns it with its `oci://` URL.
async fn oci_registry(root: &Path, helm: &str, archives: &Path) -> (Registry, String) {
    let host = format!("127.0.0.1:{}", tether_testkit::free_port());
    let config = root.join("registry.yml");
    let storage = root.join("registry");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\nhttp:\n  addr: {host}\n  secret: bench\n",
            storage.display()
        ),
    )
    .expect("write registry.yml");
    let child = std::process::Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("docker-registry runs (apt-get install docker-registry)");
    let registry = Registry(child);
    let ping = format!("http://{host}/v2/");
    for _ in 0..100 {
        if reqwest::get(&ping)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("oci://{host}/charts");
    let archive = archives.join("sub-0.1.0.tgz");
    run(
        helm,
        &["push", &archive.display().to_string(), &url, "--plain-http"],
    );
    (registry, url)
}

/// The OCI chart as an app's source on a fresh cache: (requests, renderers, time) of
/// the cold sync + render, and (requests, renderers) of a poll finding nothing new.
async fn oci_source(
    root: &Path,
    url: &str,
    renderers: &Renderers,
    log: &Path,
) -> ((u64, usize, Duration), (u64, usize)) {
    let sources = SourceCache::open(root.join("oci-source")).expect("cache");
    let source = Source::chart(url, "sub", "~0.1");
    let mut cache = RenderCache::default();
    let count = || (sources.charts().requests(), processes(log).0);
    let (r0, p0) = count();
    let started = Instant::now();
    let at = sources.sync(&source).await.expect("the OCI chart resolves");
    let objects = stage(&mut cache, &sources, &source, &at, renderers)
        .await
        .objects
        .len();
    let cold = started.elapsed();
    assert_eq!(objects, 10, "sub's ten ConfigMaps");
    let (r1, p1) = count();
    let polled = sources.sync(&source).await.expect("the OCI chart resolves");
    stage(&mut cache, &sources, &source, &polled, renderers).await;
    let (r2, p2) = count();
    ((r1 - r0, p1 - p0, cold), (r2 - r1, p2 - p1))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    // One TLS crypto provider for the process, as `tether` installs it (DESIGN.md).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let (warm_runs, apps) = if quick { (10, 10) } else { (100, 100) };
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("processes.log");
    let helm = counting_wrapper(tmp.path(), "helm", &helm_program(), &log);
    let repo_dir = helm_repository(tmp.path(), &helm_program());
    let (_registry, oci_url) = oci_registry(tmp.path(), &helm_program(), &repo_dir).await;
    let (repo_url, requests) = serve(repo_dir).await;
    let git_dir = git_repository(tmp.path(), &repo_url);
    let source = Source::new(git_dir.display().to_string(), "main", "apps/web");
    let renderers = Renderers {
        helm: HelmInputs {
            program: Some(helm.display().to_string()),
            namespace: "web".into(),
            ..HelmInputs::default()
        },
        release: "web".into(),
        ..Renderers::default()
    };
    let sources = SourceCache::open(tmp.path().join("cache")).expect("cache");
    let revision = sources.sync(&source).await.expect("fetch");
    let count = |log: &Path| (requests.load(Ordering::SeqCst), processes(log).0);

    // Cold: an empty chart cache.
    let mut cache = RenderCache::default();
    let (r0, p0) = count(&log);
    let started = Instant::now();
    let objects = stage(&mut cache, &sources, &source, &revision, &renderers)
        .await
        .objects
        .len();
    let cold = started.elapsed();
    let (r1, p1) = count(&log);
    assert_eq!(objects, 22, "web, lib, and sub twice (ten each)");

    // Warm: the same commit.
    let mut warms = Vec::new();
    for _ in 0..warm_runs {
        let started = Instant::now();
        stage(&mut cache, &sources, &source, &revision, &renderers).await;
        warms.push(started.elapsed());
    }
    warms.sort();
    let warm = warms[warms.len() / 2];
    let (r2, p2) = count(&log);

    // A new commit, the same lock: rendered again, fetched from the digest cache.
    write(
        &git_dir,
        "apps/web/templates/more.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: more\n",
    );
    commit(&git_dir, "more");
    let next = sources.sync(&source).await.expect("fetch");
    stage(&mut cache, &sources, &source, &next, &renderers).await;
    let (r3, _) = count(&log);

    // N apps sharing the chart version, on a fresh cache: the chart is fetched once.
    let shared = SourceCache::open(tmp.path().join("shared")).expect("cache");
    let revision = shared.sync(&source).await.expect("fetch");
    let (r4, _) = count(&log);
    for _ in 0..apps {
        stage(
            &mut RenderCache::default(),
            &shared,
            &source,
            &revision,
            &renderers,
        )
        .await;
    }
    let (r5, _) = count(&log);
    let cached = shared.charts().cached_bytes();

    // The repository's chart as an app's whole source, on a fresh cache: the cold
    // sync and render, then a poll that finds nothing new.
    let charts = SourceCache::open(tmp.path().join("chart-source")).expect("cache");
    let chart_source = Source::chart(&repo_url, "sub", "~0.1");
    let mut chart_cache = RenderCache::default();
    let (r6, p6) = count(&log);
    let started = Instant::now();
    let at = charts
        .sync(&chart_source)
        .await
        .expect("the chart resolves");
    let chart_objects = stage(&mut chart_cache, &charts, &chart_source, &at, &renderers)
        .await
        .objects
        .len();
    let chart_cold = started.elapsed();
    let (r7, p7) = count(&log);
    assert_eq!(chart_objects, 10, "sub's ten ConfigMaps");
    let polled = charts
        .sync(&chart_source)
        .await
        .expect("the chart resolves");
    stage(
        &mut chart_cache,
        &charts,
        &chart_source,
        &polled,
        &renderers,
    )
    .await;
    let (r8, p8) = count(&log);
    let (
        (oci_cold_requests, oci_cold_renderers, oci_cold),
        (oci_poll_requests, oci_poll_renderers),
    ) = oci_source(tmp.path(), &oci_url, &renderers, &log).await;

    let rows = [
        (
            "cold: requests / renderer processes",
            format!("{} / {}", r1 - r0, p1 - p0),
            r1 - r0 == 2 && p1 - p0 == 1,
        ),
        ("cold: fetch + render", format!("{:.1} ms", ms(cold)), true),
        (
            "warm: requests / renderer processes",
            format!("{} / {}", r2 - r1, p2 - p1),
            r2 == r1 && p2 == p1,
        ),
        (
            "warm: render stage (median)",
            format!("{:.3} ms", ms(warm)),
            warm < WARM_TARGET,
        ),
        (
            "new commit, same lock: requests",
            format!("{}", r3 - r2),
            r3 == r2,
        ),
        (
            "apps sharing the version: requests",
            format!("{} for {apps} apps", r5 - r4),
            r5 - r4 == 2,
        ),
        (
            "chart source, cold: requests / renderers",
            format!("{} / {}", r7 - r6, p7 - p6),
            r7 - r6 == 2 && p7 - p6 == 1,
        ),
        (
            "chart source, cold: fetch + render",
            format!("{:.1} ms", ms(chart_cold)),
            true,
        ),
        (
            "chart source, poll: requests / renderers",
            format!("{} / {}", r8 - r7, p8 - p7),
            r8 - r7 == 1 && p8 == p7,
        ),
        (
            "OCI chart source, cold: requests / renderers",
            format!("{oci_cold_requests} / {oci_cold_renderers}"),
            oci_cold_requests == 3 && oci_cold_renderers == 1,
        ),
        (
            "OCI chart source, cold: fetch + render",
            format!("{:.1} ms", ms(oci_cold)),
            true,
        ),
        (
            "OCI chart source, poll: requests / renderers",
            format!("{oci_poll_requests} / {oci_poll_renderers}"),
            oci_poll_requests == 1 && oci_poll_renderers == 0,
        ),
        (
            "chart cache: bytes / bound",
            format!("{cached} / {DEFAULT_CHART_CACHE_BYTES}"),
            cached <= DEFAULT_CHART_CACHE_BYTES,
        ),
    ];
    println!(
        "chart dependencies of a Git chart (warm runs: {warm_runs}, apps: {apps}{})",
        if quick { ", --quick" } else { "" }
    );
    let mut failed = false;
    for (what, figure, ok) in &rows {
        failed |= !ok;
        println!("{what:<40} {figure:>24} {:>6}", verdict(*ok));
    }
    let results = json!({
        "quick": quick,
        "cold_requests": r1 - r0,
        "cold_renderer_processes": p1 - p0,
        "cold_ms": ms(cold),
        "warm_requests": r2 - r1,
        "warm_renderer_processes": p2 - p1,
        "warm_ms": ms(warm),
        "warm_target_ms": ms(WARM_TARGET),
        "new_commit_requests": r3 - r2,
        "apps": apps,
        "apps_requests": r5 - r4,
        "chart_source_cold_requests": r7 - r6,
        "chart_source_cold_renderer_processes": p7 - p6,
        "chart_source_cold_ms": ms(chart_cold),
        "chart_source_poll_requests": r8 - r7,
        "chart_source_poll_renderer_processes": p8 - p7,
        "oci_source_cold_requests": oci_cold_requests,
        "oci_source_cold_renderer_processes": oci_cold_renderers,
        "oci_source_cold_ms": ms(oci_cold),
        "oci_source_poll_requests": oci_poll_requests,
        "oci_source_poll_renderer_processes": oci_poll_renderers,
        "cache_bytes": cached,
        "cache_bound_bytes": DEFAULT_CHART_CACHE_BYTES,
        "failed": failed,
    });
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), "charts.json", &results);
    if failed {
        std::process::exit(1);
    }
}
