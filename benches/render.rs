//! Render figures (issue #14): a Kustomize app of 200 objects (a base and an
//! overlay) and a Helm chart of 100 objects (templates ranging over values, inline
//! values and a values file), each in a real Git repository, rendered by the render
//! stage a `tether serve` pass uses (`RenderCache::manifests` around `read_revision`).
//!
//! Cold (a new commit): the split of the render stage's time between materialize
//! (reading the commit's files out of Git, the same `SourceCache` calls
//! `read_revision` makes), build (the renderer process, as timed by a wrapper that
//! also counts every process started) and parse (the rest: the private copy the
//! renderer reads, and parsing its output with the manifest reader). Warm (the same
//! commit again): renderer processes started (target 0) and the render stage's time
//! (target < 5 ms).
//!
//! `cargo bench --bench render [-- --quick]` prints a table, writes
//! `target/bench-results/render.json`, and exits non-zero when it printed a FAIL.
//! Kustomize is `kubectl kustomize` from PATH (tether's default); Helm is `TETHER_HELM`,
//! else the one `.ci/install-helm` installs, else `helm` from PATH.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tether_core::source::{Source, SourceCache};
use tether_core::sync::desired::RenderCache;
use tether_diff::manifest::{HelmInputs, KustomizeCommand, Renderers};
use tether_testkit::figures::{median, ms};

#[path = "shared/render_stage.rs"]
mod render_stage;
use render_stage::stage;
use tether_testkit::git::git;
use tether_testkit::render::{counting_wrapper, helm_program, processes};

/// Objects of the Kustomize app: per index one ConfigMap, and every other index a
/// Service and a Deployment.
const KUSTOMIZE_OBJECTS: usize = 200;
/// Objects of the chart: as many ConfigMaps as Services.
const HELM_OBJECTS: usize = 100;
/// The warm render stage's budget.
const WARM_TARGET: Duration = Duration::from_millis(5);

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// The repository: `shop/base` + `shop/overlays/production` (Kustomize) and
/// `charts/web` with `values/production.yaml` beside it (Helm), one commit.
fn repository(root: &Path) {
    let mut resources = Vec::new();
    let mut count = 0;
    for i in 0.. {
        if count == KUSTOMIZE_OBJECTS {
            break;
        }
        let mut doc = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-{i}\ndata:\n  index: \"{i}\"\n  mode: base\n"
        );
        count += 1;
        if i % 2 == 0 && count + 2 <= KUSTOMIZE_OBJECTS {
            let _ = write!(
                doc,
                "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: app-{i}\nspec:\n  selector: {{app: app-{i}}}\n  ports: [{{name: http, port: 80, targetPort: 8080}}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: app-{i}}}}}\n  template:\n    metadata: {{labels: {{app: app-{i}}}}}\n    spec:\n      containers: [{{name: app, image: \"nginx:1.25\"}}]\n"
            );
            count += 2;
        }
        let file = format!("app-{i}.yaml");
        write(root, &format!("shop/base/{file}"), &doc);
        resources.push(file);
    }
    let list: String = resources.iter().map(|r| format!("  - {r}\n")).collect();
    write(
        root,
        "shop/base/kustomization.yaml",
        &format!("resources:\n{list}"),
    );
    write(
        root,
        "shop/overlays/production/kustomization.yaml",
        "resources:\n  - ../../base\nnamePrefix: prod-\nnamespace: shop\nlabels:\n  - pairs: {environment: production}\npatches:\n  - path: replicas.yaml\n    target: {kind: Deployment}\n",
    );
    write(
        root,
        "shop/overlays/production/replicas.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: any\nspec:\n  replicas: 3\n",
    );

    let half = HELM_OBJECTS / 2;
    write(
        root,
        "charts/web/Chart.yaml",
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    );
    write(
        root,
        "charts/web/values.yaml",
        &format!("count: {half}\ncolor: blue\nport: 80\n"),
    );
    write(
        root,
        "charts/web/templates/configmaps.yaml",
        "{{- range $i := until (int .Values.count) }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ $.Release.Name }}-config-{{ $i }}\ndata:\n  index: {{ $i | quote }}\n  color: {{ $.Values.color | quote }}\n  tier: {{ $.Values.tier | default \"none\" | quote }}\n{{- end }}\n",
    );
    write(
        root,
        "charts/web/templates/services.yaml",
        "{{- range $i := until (int .Values.count) }}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {{ $.Release.Name }}-svc-{{ $i }}\nspec:\n  selector: {app: {{ $.Release.Name }}-{{ $i }}}\n  ports: [{name: http, port: {{ $.Values.port }}, targetPort: 8080}]\n{{- end }}\n",
    );
    write(root, "values/production.yaml", "color: green\n");
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "apps"]);
}

/// One app's figures.
struct Figures {
    objects: usize,
    materialize: Duration,
    build: Duration,
    parse: Duration,
    cold: Duration,
    cold_processes: usize,
    warm: Duration,
    warm_processes: usize,
}

async fn measure(
    sources: &SourceCache,
    source: &Source,
    renderers: &Renderers,
    log: &Path,
    cold_runs: usize,
    warm_runs: usize,
) -> Figures {
    let revision = sources.sync(source).await.expect("fetch");
    let mut colds = Vec::new();
    let mut builds = Vec::new();
    let mut materializes = Vec::new();
    let mut objects = 0;
    let mut cold_processes = 0;
    let mut cache = RenderCache::default();
    for _ in 0..cold_runs {
        // What read_revision reads out of Git, timed on its own: both apps need the
        // whole tree (the overlay's base, the chart's values file beside it).
        let started = Instant::now();
        let at_path = sources.read_files(source, &revision).expect("read");
        let whole = sources.read_path(source, &revision, "").expect("read");
        materializes.push(started.elapsed());
        drop((at_path, whole));

        cache = RenderCache::default();
        let (before, before_ns) = processes(log);
        let started = Instant::now();
        let set = stage(&mut cache, sources, source, &revision, renderers).await;
        colds.push(started.elapsed());
        let (after, after_ns) = processes(log);
        cold_processes = after - before;
        builds.push(after_ns - before_ns);
        objects = set.objects.len();
    }
    let (before, _) = processes(log);
    let mut warms = Vec::new();
    for _ in 0..warm_runs {
        let started = Instant::now();
        let set = stage(&mut cache, sources, source, &revision, renderers).await;
        warms.push(started.elapsed());
        assert_eq!(set.objects.len(), objects, "the warm pass read another set");
    }
    let (after, _) = processes(log);
    let cold = median(&colds);
    let build = median(&builds);
    let materialize = median(&materializes);
    Figures {
        objects,
        materialize,
        build,
        parse: cold.saturating_sub(materialize + build),
        cold,
        cold_processes,
        warm: median(&warms),
        warm_processes: after - before,
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let (cold_runs, warm_runs) = if quick { (1, 10) } else { (5, 100) };
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    repository(&repo);
    let url = format!("file://{}", repo.display());
    let sources = SourceCache::open(tmp.path().join("cache")).expect("cache");

    let log = tmp.path().join("processes.log");
    let kubectl = counting_wrapper(tmp.path(), "kubectl", "kubectl", &log);
    let helm = counting_wrapper(tmp.path(), "helm", &helm_program(), &log);
    let kustomize = Renderers {
        kustomize: KustomizeCommand {
            program: kubectl.display().to_string(),
            args: KustomizeCommand::kubectl().args,
        },
        release: "shop".into(),
        ..Renderers::default()
    };
    let chart = Renderers {
        helm: HelmInputs {
            program: Some(helm.display().to_string()),
            namespace: "web".into(),
            value_files: vec!["../../values/production.yaml".into()],
            values: Some("tier: frontend\n".into()),
            ..HelmInputs::default()
        },
        release: "web".into(),
        ..Renderers::default()
    };
    let k_source = Source::new(url.clone(), "main", "shop/overlays/production");
    let h_source = Source::new(url, "main", "charts/web");
    let k = measure(&sources, &k_source, &kustomize, &log, cold_runs, warm_runs).await;
    let h = measure(&sources, &h_source, &chart, &log, cold_runs, warm_runs).await;

    let mut failed = false;
    println!(
        "render stage from Git (medians; cold runs: {cold_runs}, warm runs: {warm_runs}{})",
        if quick { ", --quick" } else { "" }
    );
    println!(
        "{:<28} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "app", "objects", "materialize", "build", "parse", "cold", "processes", "warm", "verdict"
    );
    for (name, f) in [("kustomize (base + overlay)", &k), ("helm chart", &h)] {
        let ok = f.warm_processes == 0 && f.warm < WARM_TARGET && f.cold_processes == 1;
        failed |= !ok;
        println!(
            "{:<28} {:>8} {:>10.1}ms {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>5} / {:<2} {:>8.3}ms {:>8}",
            name,
            f.objects,
            ms(f.materialize),
            ms(f.build),
            ms(f.parse),
            ms(f.cold),
            f.cold_processes,
            f.warm_processes,
            ms(f.warm),
            if ok { "ok" } else { "FAIL" }
        );
    }
    println!(
        "processes: renderer processes of one cold render / of all warm renders (target 1 / 0); warm target < {} ms",
        WARM_TARGET.as_millis()
    );
    assert_eq!(k.objects, KUSTOMIZE_OBJECTS, "the overlay's objects");
    assert_eq!(h.objects, HELM_OBJECTS, "the chart's objects");

    let figures = |f: &Figures| {
        json!({
            "objects": f.objects,
            "cold_materialize_ms": ms(f.materialize),
            "cold_build_ms": ms(f.build),
            "cold_parse_ms": ms(f.parse),
            "cold_ms": ms(f.cold),
            "cold_renderer_processes": f.cold_processes,
            "warm_ms": ms(f.warm),
            "warm_renderer_processes": f.warm_processes,
        })
    };
    let results = json!({
        "quick": quick,
        "cold_runs": cold_runs,
        "warm_runs": warm_runs,
        "warm_target_ms": ms(WARM_TARGET),
        "kustomize": figures(&k),
        "helm": figures(&h),
        "failed": failed,
    });
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), "render.json", &results);
    if failed {
        std::process::exit(1);
    }
}
