//! Source stage guards against hostile repositories and failing hosts (issue #24):
//!
//! 1. a Git bomb (one 1 MiB blob referenced 512 times through three levels of eight
//!    entries: a few KB of repository) read by `tether diff --repo … --live DIR`: the
//!    wall time until it fails and the peak resident memory of the process (targets:
//!    fails, within 2 s, under 100 MB), next to a one-file repository's;
//! 2. a source with `interval: 1ms` polling a Git host whose every answer is a 503,
//!    with the default minimum interval and backoff: the requests it receives per
//!    minute (target ≤ 10 in every minute; the last minute shows the backoff).
//!
//! `cargo bench --bench source_guard [-- --quick]` prints a table, writes
//! `target/bench-results/source_guard.json`, and exits non-zero when it printed a FAIL.
//! `--quick` runs the bomb once and watches the failing host for 30 s (its rate is
//! then that half minute's count doubled: an upper bound, as the waits only grow).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use tether_core::source::{Source, SourceCache, SourceWatcher, Triggers};
use tether_testkit::figures::{ms, percentile, verdict};
use tether_testkit::git::{HttpGit, fast_import, git};
use tether_testkit::proc::run_measured;
use tokio_util::sync::CancellationToken;

const BOMB_BLOB_BYTES: usize = 1024 * 1024;
const BOMB_FANOUT: usize = 8;
const BOMB_TIME_TARGET: Duration = Duration::from_secs(2);
const BOMB_RSS_TARGET_MB: f64 = 100.0;
const REQUESTS_PER_MINUTE_TARGET: f64 = 10.0;

/// A repository whose `app/` is the bomb: 8 × 8 × 8 paths to one 1 MiB blob, written
/// with `git fast-import` (which stores the blob once).
fn bomb(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "main"]);
    let mut stream = Vec::new();
    writeln!(stream, "blob\nmark :1\ndata {BOMB_BLOB_BYTES}").expect("write");
    stream.extend(std::iter::repeat_n(b'a', BOMB_BLOB_BYTES));
    writeln!(
        stream,
        "\ncommit refs/heads/main\ncommitter Bench <bench@example.com> 1700000000 +0000\ndata 4\nbomb"
    )
    .expect("write");
    for a in 0..BOMB_FANOUT {
        for b in 0..BOMB_FANOUT {
            for c in 0..BOMB_FANOUT {
                writeln!(stream, "M 100644 :1 app/d{a}/d{b}/f{c}.yaml").expect("write");
            }
        }
    }
    stream.push(b'\n');
    fast_import(dir, &stream);
}

/// A repository whose `app/` holds one ConfigMap: the baseline.
fn plain(dir: &Path) {
    std::fs::create_dir_all(dir.join("app")).expect("mkdir");
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(
        dir.join("app/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: default}\n",
    )
    .expect("write");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "plain"]);
}

/// One `tether diff` of `repo`'s `app/`: wall time, peak RSS (MiB, from the child's own
/// rusage) and exit code.
fn diff_once(repo: &Path, live: &Path, cache: &Path) -> (Duration, f64, Option<i32>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tether"));
    command
        .args(["diff", "--repo"])
        .arg(format!("file://{}", repo.display()))
        .args(["--path", "app", "--live"])
        .arg(live)
        .env("TETHER_CACHE_DIR", cache)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let usage = run_measured(&mut command).expect("tether diff runs");
    (usage.wall, usage.peak_rss_mib, usage.code)
}

struct DiffFigures {
    time: Duration,
    rss_mib: f64,
    code: Option<i32>,
}

fn diff_figures(repo: &Path, work: &Path, runs: usize) -> DiffFigures {
    let live = work.join("live");
    std::fs::create_dir_all(&live).expect("mkdir live");
    let mut times = Vec::new();
    let mut rss = Vec::new();
    let mut code = None;
    for run in 0..runs {
        // A fresh cache each run: the clone is part of the cost.
        let (took, peak, exit) = diff_once(repo, &live, &work.join(format!("cache-{run}")));
        times.push(ms(took));
        rss.push(peak);
        code = exit;
    }
    DiffFigures {
        time: Duration::from_secs_f64(percentile(&times, 50.0) / 1000.0),
        rss_mib: rss.into_iter().fold(0.0, f64::max),
        code,
    }
}

/// Requests a failing host receives in each minute (or the one window of `--quick`)
/// from a source configured with `interval: 1ms` and the defaults of everything else.
async fn requests_per_window(work: &Path, windows: usize, window: Duration) -> Vec<usize> {
    let log = work.join("requests.log");
    let log_path = log.display().to_string();
    let host = HttpGit::start_with(
        work,
        &[
            ("GIT_HOST_STATUS", "503"),
            ("GIT_HOST_LOG", log_path.as_str()),
        ],
        false,
    );
    let config = tether_controller::config::Config::parse(
        &format!(
            "apps:\n- name: eager\n  source: {{repo: \"{}\", interval: 1ms}}\n",
            host.url("app.git")
        ),
        "bench.yaml",
    )
    .expect("config");
    let app = &config.apps[0];
    let cache = SourceCache::open(work.join("cache")).expect("cache");
    let source: Source = app.source();
    let shutdown = CancellationToken::new();
    let (_rx, task) = SourceWatcher::spawn(
        cache,
        source.clone(),
        app.poll_config(&config.sources),
        Triggers::new().register(&source),
        shutdown.clone(),
    );
    let count = || {
        std::fs::read_to_string(&log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let mut counts = Vec::new();
    let mut before = 0;
    for _ in 0..windows {
        tokio::time::sleep(window).await;
        let now = count();
        counts.push(now - before);
        before = now;
    }
    shutdown.cancel();
    task.await.expect("the watcher stops");
    counts
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let runs = if quick { 1 } else { 5 };
    let tmp = tempfile::tempdir().expect("tempdir");
    let bomb_repo = tmp.path().join("bomb");
    bomb(&bomb_repo);
    let plain_repo = tmp.path().join("plain");
    plain(&plain_repo);
    let packed_kib = dir_size(&bomb_repo.join(".git/objects")) as f64 / 1024.0;

    let bomb_figures = diff_figures(&bomb_repo, &tmp.path().join("bomb-work"), runs);
    let plain_figures = diff_figures(&plain_repo, &tmp.path().join("plain-work"), runs);
    let bomb_ok = bomb_figures.code == Some(2)
        && bomb_figures.time < BOMB_TIME_TARGET
        && bomb_figures.rss_mib < BOMB_RSS_TARGET_MB;

    let (windows, window) = if quick {
        (1, Duration::from_secs(30))
    } else {
        (3, Duration::from_secs(60))
    };
    let counts = requests_per_window(&tmp.path().join("host"), windows, window).await;
    let per_minute: Vec<f64> = counts
        .iter()
        .map(|&c| c as f64 * 60.0 / window.as_secs_f64())
        .collect();
    let requests_ok = per_minute.iter().all(|&r| r <= REQUESTS_PER_MINUTE_TARGET);

    println!(
        "source guards ({} run(s){})",
        runs,
        if quick { ", --quick" } else { "" }
    );
    println!(
        "{:<40} {:>10} {:>12} {:>6} {:>8}",
        "tether diff --repo … (app/)", "time", "peak RSS", "exit", "verdict"
    );
    println!(
        "{:<40} {:>8.0}ms {:>8.1} MiB {:>6} {:>8}",
        format!("Git bomb 512 × 1 MiB ({packed_kib:.0} KiB of objects)"),
        ms(bomb_figures.time),
        bomb_figures.rss_mib,
        bomb_figures.code.map_or("-".into(), |c| c.to_string()),
        verdict(bomb_ok)
    );
    println!(
        "{:<40} {:>8.0}ms {:>8.1} MiB {:>6} {:>8}",
        "one ConfigMap (baseline)",
        ms(plain_figures.time),
        plain_figures.rss_mib,
        plain_figures.code.map_or("-".into(), |c| c.to_string()),
        ""
    );
    println!(
        "targets: the bomb exits 2 within {} ms under {BOMB_RSS_TARGET_MB} MB",
        BOMB_TIME_TARGET.as_millis()
    );
    println!(
        "interval: 1ms against a failing host: requests per minute {:?} (target ≤ {REQUESTS_PER_MINUTE_TARGET} in each) {}",
        per_minute,
        verdict(requests_ok)
    );

    let results = json!({
        "quick": quick,
        "runs": runs,
        "bomb": {
            "objects_kib": packed_kib,
            "median_ms": ms(bomb_figures.time),
            "peak_rss_mib": bomb_figures.rss_mib,
            "exit_code": bomb_figures.code,
            "target_ms": ms(BOMB_TIME_TARGET),
            "target_rss_mb": BOMB_RSS_TARGET_MB,
        },
        "plain": {
            "median_ms": ms(plain_figures.time),
            "peak_rss_mib": plain_figures.rss_mib,
            "exit_code": plain_figures.code,
        },
        "failing_host": {
            "window_s": window.as_secs_f64(),
            "requests": counts,
            "requests_per_minute": per_minute,
            "target_per_minute": REQUESTS_PER_MINUTE_TARGET,
        },
        "failed": !(bomb_ok && requests_ok),
    });
    tether_testkit::figures::write_results(
        env!("CARGO_MANIFEST_DIR"),
        "source_guard.json",
        &results,
    );
    if !(bomb_ok && requests_ok) {
        std::process::exit(1);
    }
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}
