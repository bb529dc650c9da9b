//! The Git source stage against real git: local paths, a real `git daemon`, git's real
//! smart-HTTP server (`git http-backend` behind a CGI host), black-holed hosts that
//! accept and never answer, and credentials pasted into URLs. Webhooks are in
//! `webhooks.rs`.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use parking_lot::Mutex;
use tether_core::source::{
    Auth, CredentialsSecret, DEFAULT_READ_TIMEOUT, FileKind, GitTimeouts, PollConfig, SecretRef,
    Source, SourceCache, SourceError, SourceWatcher, TimeoutKind, Triggers, WebhookState,
    webhook_router,
};
use tokio_util::sync::CancellationToken;

use crate::support::{GitDaemon, HttpGit, git};
use crate::webhooks::{headers_for, post, signed_config};

mod credentials;
mod polling;
mod timeouts;

// ---------------------------------------------------------------------------------
// Real git, real servers
// ---------------------------------------------------------------------------------

/// A repository to serve, with `deploy/` and `other/` directories on branch `main`.
struct Origin {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
}

impl Origin {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("srv");
        let repo = root.join("app");
        std::fs::create_dir_all(&repo).expect("mkdir");
        git(&repo, &["init", "-q", "-b", "main"]);
        let o = Origin {
            _tmp: tmp,
            root,
            repo,
        };
        o.write("deploy/app.yaml", "kind: ConfigMap\nmetadata: {name: v1}\n");
        o.write("deploy/nested/svc.yaml", "kind: Service\n");
        o.write("other/readme.txt", "not under deploy\n");
        o.commit("first");
        o
    }

    fn write(&self, rel: &str, content: &str) {
        let p = self.repo.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }

    fn commit(&self, subject: &str) -> String {
        git(&self.repo, &["add", "-A"]);
        git(
            &self.repo,
            &["commit", "-q", "--allow-empty", "-m", subject],
        );
        git(&self.repo, &["rev-parse", "HEAD"])
    }

    fn file_url(&self) -> String {
        format!("file://{}", self.repo.display())
    }
}

fn cache() -> (tempfile::TempDir, SourceCache) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = SourceCache::open(dir.path().join("cache")).expect("open cache");
    (dir, cache)
}

fn file_paths(files: &[tether_core::source::SourceFile]) -> Vec<&str> {
    files.iter().map(|f| f.path.as_str()).collect()
}

// ---------------------------------------------------------------------------------
// Protocols
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn file_urls_and_plain_paths_share_one_clone_and_read_one_revision() {
    let origin = Origin::new();
    let (_d, cache) = cache();
    let by_url = Source::new(origin.file_url(), "main", "deploy");
    let by_path = Source::new(origin.repo.display().to_string(), "main", "other");

    let rev1 = cache.sync(&by_url).await.expect("sync file://");
    assert_eq!(rev1.subject, "first");
    assert_eq!(rev1.sha, git(&origin.repo, &["rev-parse", "HEAD"]));
    let files = cache.read_files(&by_url, &rev1).expect("read");
    assert_eq!(
        file_paths(&files),
        ["deploy/app.yaml", "deploy/nested/svc.yaml"]
    );
    assert_eq!(files[0].bytes, b"kind: ConfigMap\nmetadata: {name: v1}\n");
    assert_eq!(files[0].kind, FileKind::Regular);

    let other = cache.sync(&by_path).await.expect("sync plain path");
    assert_eq!(other, rev1);
    assert_eq!(
        file_paths(&cache.read_files(&by_path, &other).expect("read")),
        ["other/readme.txt"]
    );
    // Both spellings of the repository use one clone (beside the cache's key file).
    let clones: Vec<_> = std::fs::read_dir(cache.root())
        .expect("ls cache")
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert_eq!(clones.len(), 1, "{clones:?}");

    // A new commit is a new revision; the old revision still reads its own files.
    origin.write("deploy/app.yaml", "kind: ConfigMap\nmetadata: {name: v2}\n");
    origin.write("deploy/added.yaml", "kind: Secret\n");
    let sha2 = origin.commit("second");
    let rev2 = cache.sync(&by_url).await.expect("sync again");
    assert_eq!(rev2.sha, sha2);
    let new_files = cache.read_files(&by_url, &rev2).expect("read v2");
    assert_eq!(
        file_paths(&new_files),
        [
            "deploy/added.yaml",
            "deploy/app.yaml",
            "deploy/nested/svc.yaml"
        ]
    );
    let old_files = cache
        .read_files(&by_url, &rev1)
        .expect("read v1 after fetch");
    assert_eq!(
        old_files, files,
        "revision X never sees a file of revision Y"
    );
    assert!(cache.status(&by_url).ready);
}

#[tokio::test]
async fn git_daemon_serves_incremental_fetches() {
    let origin = Origin::new();
    let daemon = GitDaemon::start(&origin.root);
    let (_d, cache) = cache();
    let source = Source::new(daemon.url("app"), "main", "deploy");
    let rev1 = cache.sync(&source).await.expect("clone over git://");
    assert_eq!(rev1.sha, git(&origin.repo, &["rev-parse", "HEAD"]));

    origin.write("deploy/app.yaml", "changed\n");
    let sha2 = origin.commit("over the daemon");
    let rev2 = cache.sync(&source).await.expect("fetch over git://");
    assert_eq!(rev2.sha, sha2);
    assert_eq!(rev2.subject, "over the daemon");
    let files = cache.read_files(&source, &rev2).expect("read");
    assert_eq!(files[0].bytes, b"changed\n");

    // The cheap check: nothing moved, then something did.
    assert!(!cache.remote_moved(&source).await.expect("ls-remote"));
    origin.commit("third");
    assert!(cache.remote_moved(&source).await.expect("ls-remote"));
}

/// Apps of one repository share its clone: one app's source fetching a new commit
/// must not hide it from another's cheap check (which then never synced it).
#[tokio::test]
async fn a_commit_fetched_for_one_source_still_moves_another_of_its_repository() {
    let origin = Origin::new();
    origin.write("other/app.yaml", "other\n");
    origin.commit("a second app");
    let daemon = GitDaemon::start(&origin.root);
    let (_d, cache) = cache();
    let first = Source::new(daemon.url("app"), "main", "deploy");
    let second = Source::new(daemon.url("app"), "main", "other");
    assert!(
        cache.remote_moved(&second).await.expect("ls-remote"),
        "never synced"
    );
    cache.sync(&first).await.expect("first");
    cache.sync(&second).await.expect("second");
    assert!(!cache.remote_moved(&second).await.expect("ls-remote"));

    let sha = origin.commit("for both");
    cache.sync(&first).await.expect("the first fetches it");
    assert!(!cache.remote_moved(&first).await.expect("ls-remote"));
    assert!(
        cache.remote_moved(&second).await.expect("ls-remote"),
        "the second has not taken it yet"
    );
    assert_eq!(cache.sync(&second).await.expect("second").sha, sha);
    assert!(!cache.remote_moved(&second).await.expect("ls-remote"));
}

#[tokio::test]
async fn smart_http_without_auth() {
    let origin = Origin::new();
    let http = HttpGit::start(&origin.root, None);
    let (_d, cache) = cache();
    let source = Source::new(http.url("app"), "main", "");
    let rev = cache.sync(&source).await.expect("anonymous http");
    let files = cache.read_files(&source, &rev).expect("read root");
    assert_eq!(
        file_paths(&files),
        [
            "deploy/app.yaml",
            "deploy/nested/svc.yaml",
            "other/readme.txt"
        ]
    );
}

#[tokio::test]
async fn ssh_reports_missing_key_and_known_hosts_clearly() {
    let (dir, cache) = cache();
    let key = dir.path().join("id_ed25519");
    let known = dir.path().join("known_hosts");
    let url = "ssh://git@127.0.0.1:1/org/app.git";

    let no_key = Source::new(url, "main", "").with_auth(Auth::SshKey {
        private_key: key.clone(),
        known_hosts: known.clone(),
        passphrase: None,
        username: None,
    });
    let err = cache.sync(&no_key).await.expect_err("missing key");
    assert!(matches!(err, SourceError::Credentials { .. }), "{err:?}");
    assert!(err.to_string().contains("id_ed25519"), "{err}");

    std::fs::write(&key, "not really a key").expect("write key");
    let err = cache.sync(&no_key).await.expect_err("missing known_hosts");
    assert!(err.to_string().contains("known_hosts"), "{err}");

    let scp_like = Source::new("git@127.0.0.1:org/app.git", "main", "");
    let err = cache.sync(&scp_like).await.expect_err("ssh without a key");
    assert!(matches!(err, SourceError::Credentials { .. }), "{err:?}");

    // With both files present, nothing listening is an unreachable remote.
    std::fs::write(&known, "").expect("write known_hosts");
    let err = cache
        .sync(&no_key)
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(err, SourceError::Unreachable { .. }), "{err:?}");
    assert!(err.is_retryable());
}

// ---------------------------------------------------------------------------------
// References, paths, files
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn tags_shas_and_missing_refs_and_paths() {
    let origin = Origin::new();
    let first = git(&origin.repo, &["rev-parse", "HEAD"]);
    git(&origin.repo, &["tag", "-a", "v1.0", "-m", "release"]);
    git(&origin.repo, &["tag", "light"]);
    origin.write("deploy/app.yaml", "v2\n");
    let second = origin.commit("second");
    let (_d, cache) = cache();

    let tag = Source::new(origin.file_url(), "v1.0", "deploy");
    assert_eq!(cache.sync(&tag).await.expect("annotated tag").sha, first);
    let light = Source::new(origin.file_url(), "refs/tags/light", "deploy");
    assert_eq!(
        cache.sync(&light).await.expect("lightweight tag").sha,
        first
    );
    let pinned = Source::new(origin.file_url(), first.clone(), "deploy");
    assert_eq!(cache.sync(&pinned).await.expect("sha").sha, first);
    let full = Source::new(origin.file_url(), "refs/heads/main", "deploy");
    assert_eq!(cache.sync(&full).await.expect("full ref").sha, second);
    let head = Source::new(origin.file_url(), "HEAD", "deploy");
    assert_eq!(cache.sync(&head).await.expect("default branch").sha, second);
    assert!(!cache.remote_moved(&head).await.expect("ls-remote HEAD"));

    let missing = Source::new(origin.file_url(), "no-such-branch", "deploy");
    let err = cache.sync(&missing).await.expect_err("missing ref");
    assert!(matches!(err, SourceError::RefMissing { .. }), "{err:?}");
    assert_eq!(cache.status(&missing).reason, Some("RefNotFound"));
    let missing_sha = Source::new(origin.file_url(), "0".repeat(40), "deploy");
    let err = cache.sync(&missing_sha).await.expect_err("missing sha");
    assert!(matches!(err, SourceError::RefMissing { .. }), "{err:?}");

    // The path disappears in a later commit: the last good revision stays in use.
    let source = Source::new(origin.file_url(), "main", "other");
    let good = cache.sync(&source).await.expect("path exists");
    git(&origin.repo, &["rm", "-q", "-r", "other"]);
    origin.commit("remove other");
    let err = cache.sync(&source).await.expect_err("path gone");
    assert!(matches!(err, SourceError::PathMissing { .. }), "{err:?}");
    let status = cache.status(&source);
    assert!(!status.ready);
    assert_eq!(status.reason, Some("PathNotFound"));
    assert_eq!(status.last_good.as_ref(), Some(&good));
    assert_eq!(
        cache.read_files(&source, &good).expect("last good").len(),
        1
    );

    let climbing = Source::new(origin.file_url(), "main", "deploy/../../etc");
    let err = cache.sync(&climbing).await.expect_err("..");
    assert!(matches!(err, SourceError::OutsideRoot { .. }), "{err:?}");
}

#[tokio::test]
async fn a_deleted_branch_is_a_missing_ref_after_fetch() {
    let origin = Origin::new();
    git(&origin.repo, &["branch", "feature"]);
    let (_d, cache) = cache();
    let source = Source::new(origin.file_url(), "feature", "deploy");
    let good = cache.sync(&source).await.expect("branch exists");
    git(&origin.repo, &["branch", "-D", "feature"]);
    let err = cache.sync(&source).await.expect_err("branch deleted");
    assert!(matches!(err, SourceError::RefMissing { .. }), "{err:?}");
    assert_eq!(cache.last_good(&source), Some(good));
}

#[tokio::test]
async fn symlinks_inside_are_reported_and_outside_refused_and_big_files_refused() {
    let origin = Origin::new();
    std::os::unix::fs::symlink("app.yaml", origin.repo.join("deploy/alias.yaml")).expect("symlink");
    std::os::unix::fs::symlink("nested", origin.repo.join("deploy/dir-link")).expect("symlink");
    origin.commit("links");
    let (_d, cache) = cache();
    let source = Source::new(origin.file_url(), "main", "deploy");
    let rev = cache.sync(&source).await.expect("sync");
    let files = cache.read_files(&source, &rev).expect("read");
    let alias = files
        .iter()
        .find(|f| f.path == "deploy/alias.yaml")
        .expect("alias listed");
    assert_eq!(
        alias.kind,
        FileKind::Symlink {
            target: "deploy/app.yaml".into()
        }
    );
    assert_eq!(alias.bytes, b"kind: ConfigMap\nmetadata: {name: v1}\n");
    let dir_link = files
        .iter()
        .find(|f| f.path == "deploy/dir-link")
        .expect("dir link listed");
    assert!(dir_link.bytes.is_empty());

    std::os::unix::fs::symlink(
        "../other/readme.txt",
        origin.repo.join("deploy/escape.yaml"),
    )
    .expect("symlink");
    origin.commit("escape");
    let rev = cache.sync(&source).await.expect("sync");
    let err = cache
        .read_files(&source, &rev)
        .expect_err("escaping symlink");
    match &err {
        SourceError::OutsideRoot { file, .. } => assert_eq!(file, "deploy/escape.yaml"),
        other => panic!("expected OutsideRoot, got {other:?}"),
    }
    // The same link is fine when the root is the whole repository.
    let whole = Source::new(origin.file_url(), "main", "");
    let rev = cache.sync(&whole).await.expect("sync root");
    let files = cache.read_files(&whole, &rev).expect("read root");
    assert!(
        files
            .iter()
            .any(|f| f.path == "deploy/escape.yaml" && f.bytes == b"not under deploy\n")
    );

    std::fs::remove_file(origin.repo.join("deploy/escape.yaml")).expect("rm");
    let big = vec![b'x'; 9 * 1024 * 1024];
    std::fs::write(origin.repo.join("deploy/huge.yaml"), big).expect("write big");
    origin.commit("huge");
    let rev = cache.sync(&source).await.expect("sync");
    let err = cache.read_files(&source, &rev).expect_err("too large");
    match &err {
        SourceError::FileTooLarge { file, size, .. } => {
            assert_eq!(file, "deploy/huge.yaml");
            assert_eq!(*size, 9 * 1024 * 1024);
        }
        other => panic!("expected FileTooLarge, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------
// Failures keep the last good revision
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn the_remote_disappearing_keeps_the_last_good_revision() {
    let origin = Origin::new();
    let mut daemon = GitDaemon::start(&origin.root);
    let (_d, cache) = cache();
    let source = Source::new(daemon.url("app"), "main", "deploy");
    let good = cache.sync(&source).await.expect("first fetch");
    daemon.stop();

    let err = cache.sync(&source).await.expect_err("daemon gone");
    assert!(matches!(err, SourceError::Unreachable { .. }), "{err:?}");
    assert!(err.is_retryable());
    let status = cache.status(&source);
    assert!(!status.ready);
    assert_eq!(status.reason, Some("RemoteUnreachable"));
    assert_eq!(status.last_good.as_ref(), Some(&good));
    let files = cache
        .read_files(&source, &good)
        .expect("last good still reads");
    assert_eq!(
        files.len(),
        2,
        "a failed fetch is never an empty repository"
    );

    // A local remote that vanishes is the same story.
    let local = Source::new(origin.file_url(), "main", "deploy");
    let good = cache.sync(&local).await.expect("local fetch");
    let moved = origin.root.join("moved-away");
    std::fs::rename(&origin.repo, &moved).expect("move repo away");
    let err = cache.sync(&local).await.expect_err("repo gone");
    assert!(matches!(err, SourceError::Unreachable { .. }), "{err:?}");
    assert_eq!(cache.last_good(&local), Some(good.clone()));
    assert_eq!(
        cache.read_files(&local, &good).expect("still reads").len(),
        2
    );
}

fn clone_dir(cache: &SourceCache) -> PathBuf {
    std::fs::read_dir(cache.root())
        .expect("ls cache")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("HEAD").exists())
        .expect("one clone")
}

fn remove_objects(clone: &Path) {
    for entry in std::fs::read_dir(clone.join("objects"))
        .expect("ls objects")
        .filter_map(Result::ok)
    {
        let name = entry.file_name();
        if name == "info" {
            continue;
        }
        std::fs::remove_dir_all(entry.path()).expect("rm objects");
    }
    std::fs::create_dir_all(clone.join("objects/pack")).expect("mkdir pack");
}

#[tokio::test]
async fn a_corrupt_cache_is_repaired_by_recloning() {
    let origin = Origin::new();
    let (_d, cache) = cache();
    let source = Source::new(origin.file_url(), "main", "deploy");
    let good = cache.sync(&source).await.expect("first");

    // Objects lost: the next sync re-clones and resolves the same revision.
    remove_objects(&clone_dir(&cache));
    let err = cache
        .read_files(&source, &good)
        .expect_err("objects are gone");
    assert!(matches!(err, SourceError::CacheCorrupt { .. }), "{err:?}");
    assert_eq!(cache.sync(&source).await.expect("repaired"), good);
    assert_eq!(
        cache.read_files(&source, &good).expect("reads again").len(),
        2
    );

    // Objects lost while the remote also moved: the fetch may bring the new commit on
    // top of the damage, in which case the read finds it and the next sync repairs.
    remove_objects(&clone_dir(&cache));
    origin.write("deploy/app.yaml", "after corruption\n");
    let sha = origin.commit("after corruption");
    let rev = cache.sync(&source).await.expect("synced");
    assert_eq!(rev.sha, sha);
    let files = match cache.read_files(&source, &rev) {
        Ok(files) => files,
        Err(SourceError::CacheCorrupt { .. }) => {
            assert_eq!(cache.sync(&source).await.expect("repaired").sha, sha);
            cache.read_files(&source, &rev).expect("reads after repair")
        }
        Err(other) => panic!("expected CacheCorrupt, got {other:?}"),
    };
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].bytes, b"after corruption\n");

    // An unreadable repository (garbage HEAD and config).
    let clone = clone_dir(&cache);
    std::fs::write(clone.join("HEAD"), "garbage").expect("write");
    std::fs::write(clone.join("config"), "[[[not a config").expect("write");
    assert_eq!(cache.sync(&source).await.expect("repaired").sha, sha);
    assert!(cache.status(&source).ready);
}

#[tokio::test]
async fn a_corrupt_cache_with_the_remote_gone_keeps_the_old_clone() {
    let origin = Origin::new();
    let (_d, cache) = cache();
    let source = Source::new(origin.file_url(), "main", "deploy");
    cache.sync(&source).await.expect("first");
    let clone = clone_dir(&cache);
    remove_objects(&clone);
    std::fs::rename(&origin.repo, origin.root.join("gone")).expect("move away");
    let err = cache
        .sync(&source)
        .await
        .expect_err("cannot repair without the remote");
    assert!(matches!(err, SourceError::Unreachable { .. }), "{err:?}");
    assert!(
        clone.join("HEAD").exists(),
        "the failed repair did not delete the clone"
    );
    assert!(!cache.status(&source).ready);
}

// ---------------------------------------------------------------------------------
// Timeouts: a black-holed host costs one failed sync, never a lock held forever
// ---------------------------------------------------------------------------------

/// A host that accepts TCP connections and never says a word (a firewall black hole, a
/// hung server). Dropping it closes every connection, which ends any fetch still
/// blocked on one.
struct BlackHole {
    port: u16,
    stop: Arc<AtomicBool>,
    accepted: Arc<Mutex<Vec<TcpStream>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BlackHole {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, accepted) = (stop.clone(), accepted.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => accepted.lock().push(stream),
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        BlackHole {
            port,
            stop,
            accepted,
            thread: Some(thread),
        }
    }

    fn connections(&self) -> usize {
        self.accepted.lock().len()
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.accepted.lock().clear();
    }
}

/// Generous: the machine running the tests may be busy, and the point is "seconds,
/// not forever".
const SLACK: Duration = Duration::from_secs(10);
