//! Source stage figures on a generated repository of 10,000 files and 1,000 commits,
//! served by a real `git daemon` on loopback:
//!
//! 1. incremental fetch of one new commit + reading a 100-file path, tether vs
//!    `git fetch` + `git ls-tree -r` + `git cat-file --batch` on the same repository
//!    (targets: median < 100 ms and within 1.5× of git);
//! 2. webhook received → new revision resolved (target: median < 300 ms).
//!
//! Prints a table and writes `target/bench-results/source.json`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tether_core::source::{
    PollConfig, Provider, Source, SourceCache, SourceWatcher, Triggers, WebhookConfig,
    WebhookSecret, WebhookState, webhook_router,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use tether_testkit::figures::{median, ms};
use tether_testkit::git::{GitDaemon, fast_import};

const FILES: usize = 10_000;
const DIRS: usize = 100;
const COMMITS: usize = 1_000;
const RUNS: usize = 15;
const READ_DIR: &str = "apps/d042";
const SECRET: &str = "bench-secret";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn manifest(dir: usize, file: usize, version: usize) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d{dir:03}-f{file:03}\n  namespace: bench\ndata:\n  version: \"{version}\"\n  payload: \"{}\"\n",
        "x".repeat(200)
    )
}

fn inline(out: &mut Vec<u8>, path: &str, content: &str) {
    writeln!(out, "M 100644 inline {path}\ndata {}", content.len()).expect("write");
    out.extend_from_slice(content.as_bytes());
    out.push(b'\n');
}

/// A commit on main; `from_stored_tip` continues the branch as stored in the repository
/// (needed by a new fast-import process, which does not read existing branches).
fn commit_header(out: &mut Vec<u8>, n: usize, from_stored_tip: bool) {
    let msg = format!("commit {n}");
    writeln!(
        out,
        "commit refs/heads/main\ncommitter Bench <bench@example.com> {} +0000\ndata {}\n{msg}",
        1_700_000_000 + n,
        msg.len()
    )
    .expect("write");
    if from_stored_tip {
        writeln!(out, "from refs/heads/main^0").expect("write");
    }
}

fn generate(repo: &Path) {
    let mut s = Vec::new();
    commit_header(&mut s, 0, false);
    for f in 0..FILES {
        let (d, i) = (f / (FILES / DIRS), f % (FILES / DIRS));
        inline(
            &mut s,
            &format!("apps/d{d:03}/f{i:03}.yaml"),
            &manifest(d, i, 0),
        );
    }
    for n in 1..COMMITS {
        // Within one stream fast-import chains commits on the branch's own tip.
        commit_header(&mut s, n, false);
        for k in 0..3 {
            let f = (n * 37 + k * 1013) % FILES;
            let (d, i) = (f / (FILES / DIRS), f % (FILES / DIRS));
            inline(
                &mut s,
                &format!("apps/d{d:03}/f{i:03}.yaml"),
                &manifest(d, i, n),
            );
        }
    }
    fast_import(repo, &s);
}

fn add_commit(repo: &Path, n: usize) -> String {
    let mut s = Vec::new();
    commit_header(&mut s, n, true);
    inline(
        &mut s,
        &format!("{READ_DIR}/f000.yaml"),
        &manifest(42, 0, n),
    );
    fast_import(repo, &s);
    git(repo, &["rev-parse", "refs/heads/main"])
}

/// git's own answer: fetch, list the path, read its blobs.
fn git_fetch_and_read(clone: &Path) -> usize {
    git(
        clone,
        &["fetch", "-q", "origin", "+refs/heads/*:refs/heads/*"],
    );
    let listing = git(clone, &["ls-tree", "-r", "refs/heads/main", READ_DIR]);
    let ids: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let mut child = Command::new("git")
        .args(["cat-file", "--batch"])
        .current_dir(clone)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat-file");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = ids.join("\n") + "\n";
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("cat-file output");
    let _ = writer.join();
    assert!(out.stdout.len() > 100 * 200);
    ids.len()
}

async fn post_webhook(port: u16, body: &[u8]) -> u16 {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("hmac");
    mac.update(body);
    let sig = hex::encode(mac.finalize().into_bytes());
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let head = format!(
        "POST /webhooks/generic HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nx-signature: sha256={sig}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut resp = Vec::new();
    stream.read_to_end(&mut resp).await.expect("read");
    let text = String::from_utf8_lossy(&resp);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let tmp = tempfile::tempdir().expect("tempdir");
    let srv = tmp.path().join("srv");
    let repo = srv.join("app.git");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "--bare", "-b", "main"]);

    let t = Instant::now();
    generate(&repo);
    let gen_ms = ms(t.elapsed());
    let files = git(&repo, &["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .count();
    let commits: usize = git(&repo, &["rev-list", "--count", "main"])
        .parse()
        .expect("count");
    println!("generated {files} files, {commits} commits in {gen_ms:.0} ms");

    let daemon = GitDaemon::start(&srv);
    let url = daemon.url("app.git");

    // tether: first clone.
    let cache = SourceCache::open(tmp.path().join("cache")).expect("cache");
    let source = Source::new(url.clone(), "main", READ_DIR);
    let t = Instant::now();
    let rev = rt.block_on(cache.sync(&source)).expect("clone");
    let clone_ms = ms(t.elapsed());
    let read = cache.read_files(&source, &rev).expect("read");
    assert_eq!(read.len(), FILES / DIRS);

    // git: first clone.
    let git_clone = tmp.path().join("git-clone");
    let t = Instant::now();
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &url,
            &git_clone.display().to_string(),
        ],
    );
    let git_clone_ms = ms(t.elapsed());

    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for run in 0..RUNS {
        let sha = add_commit(&repo, COMMITS + run);
        let measure_ours = || {
            let t = Instant::now();
            let rev = rt.block_on(cache.sync(&source)).expect("sync");
            let files = cache.read_files(&source, &rev).expect("read");
            let d = ms(t.elapsed());
            assert_eq!(rev.sha, sha);
            assert_eq!(files.len(), FILES / DIRS);
            d
        };
        let measure_git = || {
            let t = Instant::now();
            let n = git_fetch_and_read(&git_clone);
            assert_eq!(n, FILES / DIRS);
            ms(t.elapsed())
        };
        // Alternate who goes first so neither always meets a warm server.
        if run % 2 == 0 {
            ours.push(measure_ours());
            theirs.push(measure_git());
        } else {
            theirs.push(measure_git());
            ours.push(measure_ours());
        }
    }
    let ours_med = median(&ours);
    let git_med = median(&theirs);

    // Webhook → revision, through a real HTTP port and a watcher.
    let webhook = rt.block_on(async {
        let triggers = Triggers::new();
        let trigger = triggers.register(&source);
        let shutdown = CancellationToken::new();
        let (mut rx, handle) = SourceWatcher::spawn(
            cache.clone(),
            source.clone(),
            PollConfig {
                interval: Duration::from_secs(3600),
                ..PollConfig::default()
            },
            trigger,
            shutdown.clone(),
        );
        rx.wait_for(|s| s.syncs >= 1).await.expect("first sync");
        let config =
            WebhookConfig::default().with_secret(Provider::Generic, WebhookSecret::new(SECRET));
        let app = webhook_router(WebhookState::new(config, triggers));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let hport = listener.local_addr().expect("addr").port();
        let server_shutdown = shutdown.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { server_shutdown.cancelled().await })
                .await
        });
        let body =
            serde_json::to_vec(&serde_json::json!({ "repository": url, "ref": "refs/heads/main" }))
                .expect("json");
        let mut times = Vec::new();
        for run in 0..RUNS {
            let sha = add_commit(&repo, COMMITS + RUNS + run);
            let t = Instant::now();
            let code = post_webhook(hport, &body).await;
            assert_eq!(code, 202);
            rx.wait_for(|s| s.revision.as_ref().is_some_and(|r| r.sha == sha))
                .await
                .expect("revision");
            times.push(ms(t.elapsed()));
        }
        shutdown.cancel();
        let _ = handle.await;
        let _ = server.await;
        times
    });
    let webhook_med = median(&webhook);

    let ratio = ours_med / git_med;
    println!();
    println!(
        "{:<58} {:>10} {:>10}",
        "measurement (10,000 files, 1,000 commits)", "median ms", "target"
    );
    println!(
        "{:<58} {:>10.1} {:>10}",
        "first clone, tether (libgit2)", clone_ms, "-"
    );
    println!(
        "{:<58} {:>10.1} {:>10}",
        "first clone, git clone --bare", git_clone_ms, "-"
    );
    println!(
        "{:<58} {:>10.1} {:>10}",
        "fetch 1 commit + read 100 files, tether", ours_med, "< 100"
    );
    println!(
        "{:<58} {:>10.1} {:>10}",
        "git fetch + ls-tree -r + cat-file --batch", git_med, "-"
    );
    println!(
        "{:<58} {:>10.2} {:>10}",
        "ratio tether / git", ratio, "<= 1.5"
    );
    println!(
        "{:<58} {:>10.1} {:>10}",
        "webhook received -> new revision (git daemon)", webhook_med, "< 300"
    );
    let pass_fetch = ours_med < 100.0 && ratio <= 1.5;
    let pass_webhook = webhook_med < 300.0;
    println!(
        "\nfetch+read target {}; webhook target {}",
        if pass_fetch { "met" } else { "MISSED" },
        if pass_webhook { "met" } else { "MISSED" }
    );

    let out = serde_json::json!({
        "repository": { "files": files, "commits": commits, "generate_ms": gen_ms },
        "runs": RUNS,
        "clone_ms": { "tether": clone_ms, "git": git_clone_ms },
        "fetch_one_commit_and_read_100_files_ms": {
            "tether_median": ours_med,
            "git_median": git_med,
            "ratio": ratio,
            "tether_samples": ours,
            "git_samples": theirs,
            "target": "tether median < 100 ms and <= 1.5x git",
            "met": pass_fetch,
        },
        "webhook_to_revision_ms": {
            "median": webhook_med,
            "samples": webhook,
            "target": "< 300 ms",
            "met": pass_webhook,
        },
    });
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("bench-results");
    std::fs::create_dir_all(&dir).expect("mkdir bench-results");
    let path = dir.join("source.json");
    std::fs::write(&path, serde_json::to_string_pretty(&out).expect("json"))
        .expect("write results");
    println!("wrote {}", path.display());
}
