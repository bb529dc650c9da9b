//! Issue #24, the source stage against hostile tenants, repositories and networks: a
//! private repository served with basic auth by git's real smart-HTTP server, read by
//! one tenant with its credentials and tried by two others; trees `git fsck` refuses
//! and a Git bomb, built with git's own plumbing; a failing host polled every
//! millisecond; a removed source; a server that redirects credentials elsewhere.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tether_core::source::{
    Auth, BudgetKind, CacheOptions, PollConfig, RevisionBudget, SecretRef, Source, SourceCache,
    SourceError, SourceWatcher, Triggers,
};
use tokio_util::sync::CancellationToken;

use crate::support::{GitRepo, HttpGit, git};

const RIGHT: &str = "team-a-s3cret";

/// A private repository `srv/app` with `deploy/cm.yaml` on `main`.
fn private_repo(root: &Path) -> (GitRepo, String) {
    let repo = GitRepo::init(root.join("srv/app"));
    repo.write(
        "deploy/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: private, namespace: team-a}\n",
    );
    let sha = repo.commit("team-a's private manifests");
    (repo, sha)
}

fn basic(user: &str, password: &str) -> Auth {
    Auth::Basic {
        username: user.into(),
        password: SecretRef::Inline(password.into()),
    }
}

/// The host's log lines after the first `seen`.
fn new_requests(http: &HttpGit, seen: usize) -> Vec<String> {
    http.requests().into_iter().skip(seen).collect()
}

/// Finding 2: clones are shared only by one scheme and one set of credentials, and a
/// revision is served to a source only once its own credentials fetched it. Team A
/// reads its private repository; team B (no credentials) and team C (a wrong password)
/// try the same URL, by branch and by team A's commit SHA, in the same cache: they get
/// nothing, and the Git server saw their own refused requests. An App cannot name the
/// cache itself (`file://…`), whose folder names say nothing of the URL anyway.
#[tokio::test]
async fn a_private_repository_is_read_only_with_its_own_credentials() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_repo, sha) = private_repo(dir.path());
    let http = HttpGit::start_with(
        &dir.path().join("srv"),
        &[("GIT_HOST_AUTH", &format!("team-a:{RIGHT}"))],
        true,
    );
    let cache = SourceCache::open(dir.path().join("cache")).expect("cache");
    let url = http.url("app");

    let team_a = Source::new(&url, "main", "deploy").with_auth(basic("team-a", RIGHT));
    let revision = cache.sync(&team_a).await.expect("team A fetches");
    assert_eq!(revision.sha, sha);
    assert_eq!(cache.read_files(&team_a, &revision).expect("read").len(), 1);
    assert!(
        http.requests()
            .iter()
            .any(|l| l.contains("auth=user:team-a status=200")),
        "{:?}",
        http.requests()
    );

    let tenants = [
        ("team B, no credentials", Auth::None, "auth=none status=401"),
        (
            "team C, a wrong password",
            basic("team-c", "guessed"),
            "auth=refused:team-c status=401",
        ),
    ];
    for (who, auth, logged) in tenants {
        for reference in ["main", sha.as_str()] {
            let seen = http.requests().len();
            let source = Source::new(&url, reference, "deploy").with_auth(auth.clone());
            let err = cache
                .sync(&source)
                .await
                .expect_err(&format!("{who} by {reference}"));
            assert!(
                matches!(err, SourceError::AuthRefused { .. }),
                "{who} by {reference}: {err:?}"
            );
            assert!(cache.last_good(&source).is_none(), "{who}");
            let err = cache
                .read_files(&source, &revision)
                .expect_err("team A's revision is not theirs");
            assert!(
                matches!(err, SourceError::NotVerified { .. }),
                "{who}: {err:?}"
            );
            // Their own requests, every one refused (the first of each is the
            // unauthenticated one HTTP's challenge starts with).
            let requests = new_requests(&http, seen);
            assert!(
                requests.iter().any(|l| l.contains(logged))
                    && requests.iter().all(|l| l.ends_with("status=401")),
                "{who} by {reference}: the server saw {requests:?}"
            );
        }
    }

    // Clone folders are named by a keyed hash: nothing in them says which URL.
    let names: Vec<String> = std::fs::read_dir(cache.root())
        .expect("ls cache")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(!names.is_empty());
    for name in &names {
        assert!(
            !name.contains("127") && !name.contains("app") && name.len() == 32,
            "a folder name says nothing of the URL: {name}"
        );
    }
    // An App may not name the cache (or any local path) at all.
    let clone = cache.root().join(&names[0]);
    for repo in [
        format!("file://{}", clone.display()),
        clone.display().to_string(),
    ] {
        let spec = serde_json::json!({"source": {"repo": repo, "ref": sha, "path": "deploy"}});
        let err = tether_controller::config::app_from_spec("team-b.steal", &spec)
            .expect_err("a local repository")
            .to_string();
        assert!(
            err.contains("spec.source.repo") && err.contains("https://"),
            "{err}"
        );
    }
}

/// Runs git with `input` on stdin; its trimmed stdout.
fn git_stdin(dir: &Path, args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("feed git");
    let out = child.wait_with_output().expect("git runs");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A tree object written as is (no check of its names, as `git mktree` would not
/// allow every one): `(mode, name, id)` entries, sorted as git sorts them.
fn raw_tree(repo: &Path, entries: &[(&str, &[u8], &str)]) -> String {
    let mut sorted = entries.to_vec();
    let key = |mode: &str, name: &[u8]| {
        let mut k = name.to_vec();
        if mode == "40000" {
            k.push(b'/');
        }
        k
    };
    sorted.sort_by_key(|(mode, name, _)| key(mode, name));
    let mut bytes = Vec::new();
    for (mode, name, id) in sorted {
        bytes.extend_from_slice(mode.as_bytes());
        bytes.push(b' ');
        bytes.extend_from_slice(name);
        bytes.push(0);
        bytes.extend_from_slice(&hex::decode(id).expect("hex id"));
    }
    git_stdin(
        repo,
        &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
        &bytes,
    )
}

fn blob(repo: &Path, content: &[u8]) -> String {
    git_stdin(repo, &["hash-object", "-w", "--stdin"], content)
}

/// Points `main` at a commit of `tree`.
fn commit_tree(repo: &Path, tree: &str) -> String {
    let sha = git(repo, &["commit-tree", tree, "-m", "hostile"]);
    git(repo, &["update-ref", "refs/heads/main", &sha]);
    sha
}

/// Finding 3: a tree entry named `..` (here `app/..` climbing to the test's own
/// folder) is refused while reading, naming the path, and `tether diff --repo`
/// renders nothing: no file appears outside.
#[tokio::test]
async fn a_tree_entry_named_dotdot_is_refused_and_writes_nothing_outside() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = GitRepo::init(dir.path().join("hostile"));
    repo.commit("empty");
    let target = dir.path().join("escaped");
    let payload = blob(
        &repo.dir,
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pwned}\n",
    );
    let mut tree = raw_tree(&repo.dir, &[("100644", b"pwned.yaml", &payload)]);
    let components: Vec<String> = target
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    for name in components.iter().rev() {
        tree = raw_tree(&repo.dir, &[("40000", name.as_bytes(), &tree)]);
    }
    // More `..` than any temp folder is deep: from wherever it is joined, `/`.
    for _ in 0..32 {
        tree = raw_tree(&repo.dir, &[("40000", b"..", &tree)]);
    }
    let kustomization = blob(&repo.dir, b"resources: [cm.yaml]\n");
    let cm = blob(
        &repo.dir,
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n",
    );
    let app = raw_tree(
        &repo.dir,
        &[
            ("40000", b"..", &tree),
            ("100644", b"cm.yaml", &cm),
            ("100644", b"kustomization.yaml", &kustomization),
        ],
    );
    let root = raw_tree(&repo.dir, &[("40000", b"app", &app)]);
    commit_tree(&repo.dir, &root);

    let live = dir.path().join("live");
    std::fs::create_dir_all(&live).expect("mkdir live");
    let out = Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["diff", "--repo"])
        .arg(format!("file://{}", repo.dir.display()))
        .args(["--path", "app", "--live"])
        .arg(&live)
        .env("TETHER_CACHE_DIR", dir.path().join("cache"))
        .output()
        .expect("tether diff runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tree entry \"app/..\" refused"),
        "the error names the path: {stderr}"
    );
    assert!(!target.exists(), "a file was written outside: {target:?}");

    // The source stage alone says the same, for every spelling git fsck refuses.
    let cache = SourceCache::open(dir.path().join("cache2")).expect("cache");
    for name in [&b".GIT"[..], b"git~1", b".git. ", b"."] {
        let inner = raw_tree(&repo.dir, &[("100644", b"config", &cm)]);
        let app = raw_tree(
            &repo.dir,
            &[("40000", name, &inner), ("100644", b"cm.yaml", &cm)],
        );
        commit_tree(&repo.dir, &raw_tree(&repo.dir, &[("40000", b"app", &app)]));
        let source = Source::new(format!("file://{}", repo.dir.display()), "main", "app");
        let revision = cache.sync(&source).await.expect("sync");
        match cache.read_files(&source, &revision) {
            Err(SourceError::UnsafeEntry { path, .. }) => {
                assert_eq!(path, format!("app/{}", String::from_utf8_lossy(name)));
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(name)),
        }
    }
}

/// A Git bomb: one 1 MiB blob referenced 512 times through three levels of eight
/// entries (a few KB of repository).
fn git_bomb(repo: &Path) {
    let blob = blob(repo, &vec![b'a'; 1024 * 1024]);
    let names: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
    let mut tree = raw_tree(
        repo,
        &names
            .iter()
            .map(|n| ("100644", n.as_bytes(), blob.as_str()))
            .collect::<Vec<_>>(),
    );
    for _ in 0..2 {
        tree = raw_tree(
            repo,
            &names
                .iter()
                .map(|n| ("40000", n.as_bytes(), tree.as_str()))
                .collect::<Vec<_>>(),
        );
    }
    let root = raw_tree(repo, &[("40000", b"app", &tree)]);
    commit_tree(repo, &root);
}

/// Finding 8: a read spends a budget while it reads, so a Git bomb stops at the first
/// budget it exhausts, with an error naming the path, the budget and the limit.
#[tokio::test]
async fn a_git_bomb_stops_at_the_revision_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = GitRepo::init(dir.path().join("bomb"));
    git_bomb(&repo.dir);
    let url = format!("file://{}", repo.dir.display());
    let source = Source::new(&url, "main", "app");
    for (budget, kind, limit) in [
        (
            RevisionBudget::default(),
            BudgetKind::Bytes,
            32 * 1024 * 1024,
        ),
        (
            RevisionBudget {
                files: 10,
                ..RevisionBudget::default()
            },
            BudgetKind::Files,
            10,
        ),
        (
            RevisionBudget {
                objects: 20,
                ..RevisionBudget::default()
            },
            BudgetKind::Objects,
            20,
        ),
    ] {
        let options = CacheOptions {
            budget,
            ..CacheOptions::default()
        };
        let cache_dir: PathBuf = dir.path().join(format!("cache-{kind}"));
        let cache = SourceCache::open_with(cache_dir, options).expect("cache");
        let revision = cache.sync(&source).await.expect("sync");
        let err = cache
            .read_files(&source, &revision)
            .expect_err("the bomb is refused");
        match &err {
            SourceError::RevisionTooLarge {
                root,
                at,
                kind: k,
                limit: l,
            } => {
                assert_eq!((root.as_str(), *k, *l), ("app", kind, limit), "{err}");
                assert!(at.starts_with("app/f"), "{err}");
            }
            other => panic!("expected RevisionTooLarge, got {other:?}"),
        }
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("sources.budget."), "{err}");
    }
}

/// Counts the requests a failing Git host (every answer a 503) receives while a
/// watcher polls it with `config` for `window`.
async fn requests_to_a_failing_host(config: PollConfig, window: Duration) -> usize {
    let dir = tempfile::tempdir().expect("tempdir");
    let http = HttpGit::start_with(dir.path(), &[("GIT_HOST_STATUS", "503")], true);
    let cache = SourceCache::open(dir.path().join("cache")).expect("cache");
    let source = Source::new(http.url("app"), "main", "deploy");
    let shutdown = CancellationToken::new();
    let (_rx, handle) = SourceWatcher::spawn(
        cache,
        source.clone(),
        config,
        Triggers::new().register(&source),
        shutdown.clone(),
    );
    tokio::time::sleep(window).await;
    shutdown.cancel();
    handle.await.expect("the watcher stops");
    http.requests().len()
}

/// Finding 7: an app polling every millisecond is held to the minimum interval, and a
/// failing host is retried with a growing wait.
#[tokio::test]
async fn an_app_polling_every_millisecond_sends_a_bounded_number_of_requests() {
    let config = tether_controller::config::Config::parse(
        "apps:\n- name: eager\n  source: {repo: \"https://h.example/r.git\", interval: 1ms}\n",
        "tether.yaml",
    )
    .expect("an interval below the minimum is accepted");
    let poll = config.apps[0].poll_config(&config.sources);
    // The default minimum (10 s): one attempt in two seconds, not two thousand.
    let requests = requests_to_a_failing_host(poll.clone(), Duration::from_secs(2)).await;
    assert!(requests <= 2, "{requests} requests in 2 s");

    // Lowered to 50 ms: attempts at 0, 50, 150, 350, 750 and 1550 ms (± jitter), the
    // wait doubling after each failure; 40 without the backoff.
    let lowered = PollConfig {
        min_interval: Duration::from_millis(50),
        ..poll
    };
    let requests = requests_to_a_failing_host(lowered, Duration::from_secs(2)).await;
    assert!((3..=8).contains(&requests), "{requests} requests in 2 s");
}

/// Whether any clone is left under the cache root (its key file aside).
fn clones(cache: &SourceCache) -> Vec<String> {
    std::fs::read_dir(cache.root())
        .expect("ls cache")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect()
}

fn has_series(source: &Source) -> bool {
    let labels = format!(
        "{{url=\"{}\",ref=\"{}\",path=\"{}\"}}",
        tether_core::source::redact(&source.url),
        source.reference,
        source.path
    );
    tether_core::metrics::METRICS
        .render()
        .lines()
        .any(|l| l.starts_with("tether_source_") && l.contains(&labels))
}

/// Finding 8 (the rest): a removed app's source leaves no clone, status or
/// `tether_source_*` series behind; one still watched by another app keeps them.
#[tokio::test]
async fn a_forgotten_source_releases_its_clone_status_and_series() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = GitRepo::init(dir.path().join("forgotten-origin"));
    repo.write("deploy/cm.yaml", "kind: ConfigMap\n");
    repo.commit("first");
    let cache = SourceCache::open(dir.path().join("cache")).expect("cache");
    let source = Source::new(format!("file://{}", repo.dir.display()), "main", "deploy");
    let watch = || {
        let shutdown = CancellationToken::new();
        let (rx, handle) = SourceWatcher::spawn(
            cache.clone(),
            source.clone(),
            PollConfig::default(),
            Triggers::new().register(&source),
            shutdown.clone(),
        );
        (rx, handle, shutdown)
    };
    let (mut first, first_task, stop_first) = watch();
    let (_second, second_task, stop_second) = watch();
    first
        .wait_for(|s| s.status.ready)
        .await
        .expect("the watcher syncs");
    assert_eq!(clones(&cache).len(), 1);
    assert!(has_series(&source));

    stop_first.cancel();
    first_task.await.expect("stops");
    assert_eq!(clones(&cache).len(), 1, "the other app still reads it");
    assert!(cache.status(&source).ready);

    stop_second.cancel();
    second_task.await.expect("stops");
    assert_eq!(clones(&cache), Vec::<String>::new());
    assert_eq!(cache.status(&source), Default::default());
    assert!(
        !has_series(&source),
        "{}",
        tether_core::metrics::METRICS.render()
    );
}

/// The Git credential callback gives credentials only to the scheme, host and port of
/// the source's URL: a server that redirects to another port gets none.
#[tokio::test]
async fn credentials_never_follow_a_redirect_to_another_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_repo, _sha) = private_repo(dir.path());
    let elsewhere = HttpGit::start_with(
        &dir.path().join("srv"),
        &[("GIT_HOST_AUTH", "collector:x")],
        true,
    );
    let base = format!("http://127.0.0.1:{}", elsewhere.port);
    let front = HttpGit::start_with(
        &dir.path().join("srv"),
        &[("GIT_HOST_REDIRECT", &base)],
        true,
    );
    let cache = SourceCache::open(dir.path().join("cache")).expect("cache");
    let source = Source::new(front.url("app"), "main", "deploy").with_auth(basic("team-a", RIGHT));
    let err = cache.sync(&source).await.expect_err("nothing is fetched");
    assert!(
        front.requests().iter().any(|l| l.contains("status=302")),
        "{:?}",
        front.requests()
    );
    // libgit2 followed the redirect, was challenged there, and asked for credentials:
    // none were given.
    let asked = elsewhere.requests();
    assert!(
        !asked.is_empty() && asked.iter().all(|l| l.contains("auth=none")),
        "credentials reached the other server: {asked:?}"
    );
    assert!(
        matches!(err, SourceError::CredentialsWithheld { .. }),
        "{err:?}"
    );
    assert!(!err.to_string().contains(RIGHT), "{err}");
}
