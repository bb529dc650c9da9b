//! Signed commits (issue #27) from the command line: `tether sync|diff --verify-key`
//! applies a revision only when its commit (or annotated tag) is signed by a trusted
//! key, checked by tether itself. Commits are signed by the real `gpg` and
//! `ssh-keygen -Y sign` through `git commit -S`; every refusal leaves the cluster as
//! it was and names the commit and the signer, never key material.

use std::path::Path;

use tether_testkit::git::{GitRepo, git};
use tether_testkit::signing::Signer;

use crate::support::{Run, TestSandbox, tether};

fn configmap(value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  value: {value}\n"
    )
}

fn repo(dir: &Path) -> (GitRepo, String) {
    let repo = GitRepo::init(dir.join("app-repo"));
    let url = format!("file://{}", repo.dir.display());
    (repo, url)
}

async fn sync(sandbox: &TestSandbox, url: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "--repo", url, "--path", "k8s", "--app", "signed", "-o", "json",
    ];
    args.extend_from_slice(extra);
    tether(sandbox, "sync", &args).await
}

async fn value(sandbox: &TestSandbox) -> String {
    let object = sandbox
        .kubectl_json(&[
            "get",
            "configmap",
            "settings",
            "-n",
            "default",
            "-o",
            "json",
        ])
        .await;
    object["data"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn refused(run: &Run, says: &[&str]) {
    assert_eq!(run.code, Some(2), "refused with exit 2: {run:?}");
    for text in says {
        assert!(run.stderr.contains(text), "{text:?} in {}", run.stderr);
    }
    assert!(!run.stderr.contains("PRIVATE"), "{}", run.stderr);
    assert!(
        !run.stderr.contains("AAAAC3Nza"),
        "no key material: {}",
        run.stderr
    );
}

/// Regression for #27: any commit on the branch was applied. A signed head syncs; an
/// unsigned commit on top is refused and changes nothing until a signed one follows.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_head_syncs_and_an_unsigned_one_on_top_is_refused_until_a_signed_one_follows() {
    let sandbox = TestSandbox::start().await;
    let alice = Signer::generate(sandbox.dir.path(), "alice");
    let (repo, url) = repo(sandbox.dir.path());
    let pgp = alice.pgp_public.to_str().expect("utf-8");
    let ssh = alice.allowed_signers.to_str().expect("utf-8");
    let keys = ["--verify-key", pgp, "--verify-key", ssh];

    repo.write("k8s/cm.yaml", &configmap("one"));
    alice.commit_pgp(&repo, "signed with gpg");
    let run = sync(&sandbox, &url, &keys).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(value(&sandbox).await, "one");

    repo.write("k8s/cm.yaml", &configmap("two"));
    let unsigned = repo.commit("unsigned");
    let run = sync(&sandbox, &url, &keys).await;
    refused(&run, &[&format!("commit {unsigned} is not signed")]);
    assert_eq!(value(&sandbox).await, "one", "nothing applied");
    let run = tether(
        &sandbox,
        "diff",
        &[
            "--repo",
            &url,
            "--path",
            "k8s",
            "--app",
            "signed",
            "--verify-key",
            pgp,
        ],
    )
    .await;
    refused(&run, &["is not signed"]);

    repo.write("k8s/cm.yaml", &configmap("three"));
    alice.commit_ssh(&repo, "signed with ssh");
    let run = sync(&sandbox, &url, &keys).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(value(&sandbox).await, "three");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_signed_by_a_key_not_trusted_is_refused_naming_its_signer() {
    let sandbox = TestSandbox::start().await;
    let alice = Signer::generate(sandbox.dir.path(), "alice");
    let mallory = Signer::generate(sandbox.dir.path(), "mallory");
    let (repo, url) = repo(sandbox.dir.path());
    repo.write("k8s/cm.yaml", &configmap("mallory"));
    let sha = mallory.commit_pgp(&repo, "signed by someone else");
    let pgp = alice.pgp_public.to_str().expect("utf-8");
    let run = sync(&sandbox, &url, &["--verify-key", pgp]).await;
    refused(
        &run,
        &[
            &format!("commit {sha}"),
            &mallory.fingerprint,
            "no trusted key",
        ],
    );
    let out = sandbox
        .kubectl(&["get", "configmap", "settings", "-n", "default"])
        .await;
    assert_ne!(out.code, 0, "nothing applied: {}", out.stdout);

    let ssh = alice.allowed_signers.to_str().expect("utf-8");
    mallory.commit_ssh(&repo, "ssh-signed by someone else");
    let run = sync(&sandbox, &url, &["--verify-key", ssh]).await;
    refused(&run, &["SHA256:", "no trusted key"]);
}

/// A signature over other content: the commit was rewritten (here its message)
/// after it was signed, keeping the `gpgsig` header.
#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_commit_is_refused() {
    let sandbox = TestSandbox::start().await;
    let alice = Signer::generate(sandbox.dir.path(), "alice");
    let (repo, url) = repo(sandbox.dir.path());
    repo.write("k8s/cm.yaml", &configmap("signed"));
    let signed = alice.commit_ssh(&repo, "what alice signed");
    let raw = git(&repo.dir, &["cat-file", "commit", &signed]);
    let forged = raw.replace("what alice signed", "what mallory wrote") + "\n";
    let path = repo.dir.join("forged");
    std::fs::write(&path, forged).expect("write");
    let forged = git(
        &repo.dir,
        &[
            "hash-object",
            "-t",
            "commit",
            "-w",
            path.to_str().expect("utf-8"),
        ],
    );
    git(&repo.dir, &["update-ref", "refs/heads/main", &forged]);
    let ssh = alice.allowed_signers.to_str().expect("utf-8");
    let run = sync(&sandbox, &url, &["--verify-key", ssh]).await;
    refused(&run, &[&format!("commit {forged}"), "not valid"]);
}

/// `all-since-last` checks every first-parent commit since the inventory's revision:
/// an unsigned commit in the middle is refused, though the head is signed.
#[tokio::test(flavor = "multi_thread")]
async fn all_since_last_refuses_an_unsigned_commit_in_the_middle() {
    let sandbox = TestSandbox::start().await;
    let alice = Signer::generate(sandbox.dir.path(), "alice");
    let (repo, url) = repo(sandbox.dir.path());
    let pgp = alice.pgp_public.to_str().expect("utf-8");
    let all = ["--verify-key", pgp, "--verify-mode", "all-since-last"];
    repo.write("k8s/cm.yaml", &configmap("one"));
    alice.commit_pgp(&repo, "one");
    assert_eq!(sync(&sandbox, &url, &all).await.code, Some(0));

    repo.write("k8s/cm.yaml", &configmap("two"));
    let middle = repo.commit("unsigned in the middle");
    repo.write("k8s/cm.yaml", &configmap("three"));
    alice.commit_pgp(&repo, "three");
    let run = sync(&sandbox, &url, &all).await;
    refused(&run, &[&format!("commit {middle} is not signed")]);
    assert_eq!(value(&sandbox).await, "one");
    // The head alone is signed: `head` takes it.
    let run = sync(&sandbox, &url, &["--verify-key", pgp]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(value(&sandbox).await, "three");
}

/// `--ref v1.2.3` names an annotated tag: its own signature is what is checked.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_tag_is_verified_by_the_tag_object_signature() {
    let sandbox = TestSandbox::start().await;
    let alice = Signer::generate(sandbox.dir.path(), "alice");
    let (repo, url) = repo(sandbox.dir.path());
    let pgp = alice.pgp_public.to_str().expect("utf-8");
    repo.write("k8s/cm.yaml", &configmap("tagged"));
    repo.commit("an unsigned commit, released by a signed tag");
    alice.tag_pgp(&repo, "v1.2.3");
    git(&repo.dir, &["tag", "-a", "v1.2.4", "-m", "unsigned tag"]);
    let run = sync(&sandbox, &url, &["--ref", "v1.2.3", "--verify-key", pgp]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(value(&sandbox).await, "tagged");
    let run = sync(&sandbox, &url, &["--ref", "v1.2.4", "--verify-key", pgp]).await;
    refused(&run, &["tag v1.2.4 is not signed"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_verify_key_that_holds_no_key_is_an_error_naming_the_file() {
    let sandbox = TestSandbox::start().await;
    let (repo, url) = repo(sandbox.dir.path());
    repo.write("k8s/cm.yaml", &configmap("one"));
    repo.commit("one");
    let bogus = sandbox.write_file("keys.txt", "# no signers here\n");
    let run = sync(&sandbox, &url, &["--verify-key", &bogus]).await;
    refused(&run, &["keys.txt", "holds neither"]);
}
