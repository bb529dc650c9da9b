//! Pull-request preview figures (issue #29): one repository of 300 apps (200
//! Kustomize overlays over their own bases, 100 Helm charts), listed in a `tether
//! serve` configuration, and a pull request touching 3 of them (two overlays and a
//! chart). `tether diff --base` is run as a CI job runs it, by the real binary in
//! the checkout: wall time, renders performed (target: 6, the two renders of each
//! changed app) and the process's peak memory (VmHWM, read from `/proc` while it
//! runs). Then, in a full run, a change touching every app (600 renders): time and
//! memory bounded by the report, not by the repository.
//!
//! `cargo bench --bench preview [-- --quick]` prints a table, writes
//! `target/bench-results/preview.json`, and exits non-zero when it printed a FAIL
//! (`--quick`, as `.ci/run` runs it in the dev profile: the renders only).
//! Kustomize is `kubectl kustomize` from PATH; Helm is `TETHER_HELM`, else the one
//! `.ci/install-helm` installs, else `helm` from PATH. `TETHER=path/to/tether`
//! measures another build of the binary (the one before a change, for a
//! before/after figure).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether_testkit::figures::{ms, verdict};
use tether_testkit::git::git;

const OVERLAYS: usize = 200;
const CHARTS: usize = 100;
/// The renders a pull request touching three apps needs: base and head of each.
const RENDERS_TARGET: u64 = 6;
/// Issue #29's target for the 3-app pull request (argocd-diff-preview: ~6.5 min).
const WALL_TARGET: Duration = Duration::from_secs(5);

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn overlay(i: usize, replicas: usize) -> String {
    format!(
        "resources: [../../bases/app-{i}]\nnamespace: team-{i}\npatches:\n  - target: {{kind: Deployment}}\n    patch: |\n      - op: replace\n        path: /spec/replicas\n        value: {replicas}\n"
    )
}

fn values(tag: &str) -> String {
    format!("image: nginx:{tag}\n")
}

/// The base commit: every app, its configuration, `origin` naming the repository.
fn repository(root: &Path) -> String {
    git(root, &["init", "-q", "-b", "main"]);
    git(
        root,
        &[
            "remote",
            "add",
            "origin",
            "https://git.example.com/fleet.git",
        ],
    );
    let mut config = String::from("apps:\n");
    for i in 0..OVERLAYS {
        write(
            root,
            &format!("bases/app-{i}/kustomization.yaml"),
            "resources: [deployment.yaml]\n",
        );
        write(
            root,
            &format!("bases/app-{i}/deployment.yaml"),
            &format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: app-{i}}}}}\n  template:\n    metadata: {{labels: {{app: app-{i}}}}}\n    spec:\n      containers: [{{name: app, image: \"nginx:1.25\"}}]\n"
            ),
        );
        write(
            root,
            &format!("apps/app-{i}/kustomization.yaml"),
            &overlay(i, 2),
        );
        config.push_str(&format!(
            "  - name: app-{i}\n    source: {{repo: \"https://git.example.com/fleet.git\", path: apps/app-{i}}}\n    destination: {{namespace: team-{i}}}\n"
        ));
    }
    for i in 0..CHARTS {
        write(
            root,
            &format!("charts/chart-{i}/Chart.yaml"),
            &format!("apiVersion: v2\nname: chart-{i}\nversion: 1.0.0\n"),
        );
        write(
            root,
            &format!("charts/chart-{i}/values.yaml"),
            &values("1.25"),
        );
        write(
            root,
            &format!("charts/chart-{i}/templates/config.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  image: {{ .Values.image }}\n",
        );
        config.push_str(&format!(
            "  - name: chart-{i}\n    source: {{repo: \"https://git.example.com/fleet.git\", path: charts/chart-{i}}}\n    destination: {{namespace: charts}}\n"
        ));
    }
    write(root, "tether.yaml", &config);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "base"]);
    git(root, &["rev-parse", "HEAD"])
}

/// A commit on top of `base` touching `overlays` overlays and `charts` charts.
fn pull_request(root: &Path, base: &str, branch: &str, overlays: usize, charts: usize) {
    git(root, &["checkout", "-q", "-B", branch, base]);
    for i in 0..overlays {
        write(
            root,
            &format!("apps/app-{i}/kustomization.yaml"),
            &overlay(i, 3),
        );
    }
    for i in 0..charts {
        write(
            root,
            &format!("charts/chart-{i}/values.yaml"),
            &values("1.27"),
        );
    }
    git(root, &["commit", "-q", "-am", branch]);
}

fn helm_dir() -> Option<PathBuf> {
    if let Some(helm) = std::env::var_os("TETHER_HELM") {
        return PathBuf::from(helm).parent().map(Path::to_path_buf);
    }
    let installed = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin");
    installed.join("helm").exists().then_some(installed)
}

struct Figures {
    wall: Duration,
    renders: u64,
    peak_mib: f64,
    changed_apps: u64,
}

/// The process's peak resident memory so far, in MiB; `None` once it has exited
/// (a zombie's status has no memory figures), unlike `tether_testkit::proc::proc_status`.
fn peak_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// The binary measured: `TETHER`, else the one cargo built with this bench.
fn binary() -> PathBuf {
    std::env::var_os("TETHER").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_tether")),
        PathBuf::from,
    )
}

/// One `tether diff --base` in the checkout, its peak memory read while it runs.
fn run(root: &Path, base: &str) -> Figures {
    let path = match helm_dir() {
        Some(dir) => format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        None => std::env::var("PATH").unwrap_or_default(),
    };
    let out_file = root.join("../preview.json");
    let started = Instant::now();
    let mut child = Command::new(binary())
        .args([
            "diff",
            "--base",
            base,
            "--config",
            "tether.yaml",
            "-o",
            "json",
        ])
        .current_dir(root)
        .env("PATH", path)
        // tether's info lines (one per render) are not the figures.
        .env("RUST_LOG", "warn")
        .stdout(std::fs::File::create(&out_file).expect("output file"))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("tether runs");
    let mut peak: f64 = 0.0;
    let status = loop {
        peak = peak.max(peak_mib(child.id()).unwrap_or(0.0));
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = started.elapsed();
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "tether diff --base failed: {status}"
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(&out_file).expect("output")).expect("JSON");
    Figures {
        wall,
        renders: report["renders"].as_u64().unwrap_or_default(),
        peak_mib: peak,
        changed_apps: report["summary"]["apps"]["changed"]
            .as_u64()
            .unwrap_or_default(),
    }
}

fn main() {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let runs = if quick { 1 } else { 5 };
    let temp = tempfile::tempdir().expect("tempdir");
    let root = temp.path().join("fleet");
    std::fs::create_dir_all(&root).expect("mkdir");
    let base = repository(&root);

    pull_request(&root, &base, "three", 2, 1);
    let three: Vec<Figures> = (0..runs).map(|_| run(&root, &base)).collect();
    // Every app: 600 renders, one per core at a time; minutes, so not in a quick run.
    let every = (!quick).then(|| {
        pull_request(&root, &base, "every", OVERLAYS, CHARTS);
        run(&root, &base)
    });

    let median = |figures: &[Figures]| {
        let mut walls: Vec<f64> = figures.iter().map(|f| ms(f.wall)).collect();
        walls.sort_by(f64::total_cmp);
        walls[walls.len() / 2]
    };
    let wall_three = median(&three);
    let first = &three[0];
    let renders_ok = three
        .iter()
        .all(|f| f.renders == RENDERS_TARGET && f.changed_apps == 3);
    // A quick run (dev profile, a loaded CI machine) holds the renders to their
    // target; the wall time is held to it in full runs.
    let wall_ok = quick || wall_three <= ms(WALL_TARGET);
    println!(
        "tether diff --base, {} apps ({OVERLAYS} overlays, {CHARTS} charts){}",
        OVERLAYS + CHARTS,
        if quick { ", --quick" } else { "" }
    );
    println!(
        "{:<28} {:>10} {:>8} {:>10} {:>8}",
        "pull request", "wall ms", "renders", "peak MiB", "verdict"
    );
    println!(
        "{:<28} {:>10.0} {:>8} {:>10.1} {:>8}",
        "3 apps (median)",
        wall_three,
        first.renders,
        three.iter().map(|f| f.peak_mib).fold(0.0, f64::max),
        verdict(renders_ok && wall_ok)
    );
    if let Some(every) = &every {
        println!(
            "{:<28} {:>10.0} {:>8} {:>10.1} {:>8}",
            "every app",
            ms(every.wall),
            every.renders,
            every.peak_mib,
            "-"
        );
    }
    let results = json!({
        "bench": "preview",
        "quick": quick,
        "binary": binary().display().to_string(),
        "apps": OVERLAYS + CHARTS,
        "three": {"wall_ms": wall_three, "renders": first.renders, "renders_target": RENDERS_TARGET,
                  "wall_target_ms": ms(WALL_TARGET),
                  "peak_mib": three.iter().map(|f| f.peak_mib).fold(0.0, f64::max)},
        "every": every.as_ref().map(|e| json!({"wall_ms": ms(e.wall), "renders": e.renders, "peak_mib": e.peak_mib})),
        "pass": renders_ok && wall_ok,
    });
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), "preview.json", &results);
    if !(renders_ok && wall_ok) {
        std::process::exit(1);
    }
}
