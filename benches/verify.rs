//! Signed-commit figures (issue #27): what checking one commit's signature costs
//! (OpenPGP ed25519 by `gpg`, SSH ed25519 by `ssh-keygen`, both through `git commit
//! -S`), and a warm pass: the same `all-since-last` check of a chain of commits again,
//! as `tether serve` runs it each pass, which must verify nothing (no new verdict).
//!
//! `cargo bench --bench verify [-- --quick]` prints a table, writes
//! `target/bench-results/verify.json`, and exits non-zero when it printed a FAIL.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use tether_core::source::signature::{ObjectKind, TrustedKeys, verify_object};
use tether_core::source::{Source, SourceCache, Verdicts, VerifyMode, VerifyPolicy};
use tether_testkit::figures::{median, ms, verdict, write_results};
use tether_testkit::git::{GitRepo, git};
use tether_testkit::signing::Signer;

/// Commits in the chain a warm pass checks again.
const CHAIN: usize = 40;

fn per_commit(raw: &[u8], keys: &TrustedKeys, runs: usize) -> Duration {
    let samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            verify_object(ObjectKind::Commit, raw, keys).expect("verifies");
            started.elapsed()
        })
        .collect();
    median(&samples)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let (runs, warm_runs) = if quick { (20, 5) } else { (200, 50) };
    let dir = tempfile::tempdir().expect("tempdir");
    let signer = Signer::generate(dir.path(), "bench");
    let repo = GitRepo::init(dir.path().join("repo"));
    repo.write(
        "k8s/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    );
    let root = signer.commit_pgp(&repo, "root");
    for i in 0..CHAIN {
        repo.write("k8s/n.txt", &i.to_string());
        if i % 2 == 0 {
            signer.commit_pgp(&repo, &format!("pgp {i}"));
        } else {
            signer.commit_ssh(&repo, &format!("ssh {i}"));
        }
    }
    let read = |path: &PathBuf| std::fs::read(path).expect("key");
    let (pgp_key, ssh_key) = (read(&signer.pgp_public), read(&signer.allowed_signers));
    let keys = TrustedKeys::from_entries([
        ("bench.asc", pgp_key.as_slice()),
        ("allowed_signers", ssh_key.as_slice()),
    ])
    .expect("keys");
    let raw = |rev: &str| git(&repo.dir, &["cat-file", "commit", rev]) + "\n";
    let pgp = per_commit(raw("HEAD~1").as_bytes(), &keys, runs);
    let ssh = per_commit(raw("HEAD").as_bytes(), &keys, runs);

    // The chain through the source stage, as a pass checks it: cold, then warm.
    let cache = SourceCache::open(dir.path().join("cache")).expect("cache");
    let source = Source::new(format!("file://{}", repo.dir.display()), "main", "k8s");
    let revision = cache.sync(&source).await.expect("sync");
    let policy = VerifyPolicy {
        mode: VerifyMode::AllSinceLast,
        keys,
    };
    let verdicts = Verdicts::default();
    let started = Instant::now();
    let cold = cache
        .verify(&source, &revision, &policy, Some(&root), &verdicts)
        .expect("the chain verifies");
    let cold_time = started.elapsed();
    let kept = verdicts.len();
    let warms: Vec<Duration> = (0..warm_runs)
        .map(|_| {
            let started = Instant::now();
            cache
                .verify(&source, &revision, &policy, Some(&root), &verdicts)
                .expect("warm");
            started.elapsed()
        })
        .collect();
    let warm = median(&warms);
    let new_verdicts = verdicts.len() - kept;
    let ok = new_verdicts == 0 && cold.checked == CHAIN && kept == CHAIN;
    println!(
        "Signed commits (medians; runs: {runs}, warm runs: {warm_runs}{})",
        if quick { ", --quick" } else { "" }
    );
    let row = |what: &str, value: String| println!("{what:<40} {value:>12}");
    row("OpenPGP (ed25519) per commit", format!("{:.3} ms", ms(pgp)));
    row("SSH (ed25519) per commit", format!("{:.3} ms", ms(ssh)));
    row(
        &format!("cold all-since-last, {CHAIN} commits"),
        format!("{:.2} ms", ms(cold_time)),
    );
    row("warm pass, same chain", format!("{:.3} ms", ms(warm)));
    println!(
        "{:<40} {:>12} {}",
        "signatures verified in warm passes",
        new_verdicts,
        verdict(ok)
    );
    let figures = json!({
        "quick": quick,
        "pgp_per_commit_ms": ms(pgp),
        "ssh_per_commit_ms": ms(ssh),
        "chain": CHAIN,
        "cold_chain_ms": ms(cold_time),
        "warm_ms": ms(warm),
        "warm_new_verdicts": new_verdicts,
        "ok": ok,
    });
    write_results(env!("CARGO_MANIFEST_DIR"), "verify.json", &figures);
    if !ok {
        std::process::exit(1);
    }
}
