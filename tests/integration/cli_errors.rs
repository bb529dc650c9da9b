//! Issue #31, "the CLI speaks for itself": the real binary's stderr and exit code when
//! something is wrong. Each failure is said once, in tether's words, with what to do;
//! no library's log line reaches a user at the default level.

use std::process::{Command, Output};
use tether_testkit::assert_contains;

use tether_sandbox::SandboxOptions;

use crate::support::HttpGit;
use crate::support::{self, TestSandbox};

const TETHER: &str = env!("CARGO_BIN_EXE_tether");

/// `tether ARGS` as a user runs it: no RUST_LOG, no cluster in the environment.
fn tether(args: &[&str], home: &std::path::Path) -> Output {
    Command::new(TETHER)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("TETHER_SERVER")
        .env_remove("TETHER_API_TOKEN")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("KUBECONFIG", home.join("no-such-kubeconfig"))
        .env("HOME", home)
        .env("TETHER_CACHE_DIR", home.join("git-cache"))
        .output()
        .expect("the tether binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The lines of `text` that begin with `error:`.
fn errors(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("error:")).count()
}

/// A directory with one ConfigMap, and an empty one.
fn dirs(home: &std::path::Path) -> (String, String) {
    let app = home.join("app");
    let empty = home.join("empty");
    std::fs::create_dir_all(&app).expect("mkdir");
    std::fs::create_dir_all(&empty).expect("mkdir");
    std::fs::write(
        app.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: default}\n",
    )
    .expect("write");
    let s = |p: std::path::PathBuf| p.to_str().expect("utf-8").to_string();
    (s(app), s(empty))
}

#[test]
fn a_missing_kubeconfig_hints_at_the_flags_that_name_a_cluster() {
    let home = tempfile::tempdir().expect("tempdir");
    let (app, _) = dirs(home.path());
    let out = tether(&["diff", "--path", &app], home.path());
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert_eq!(errors(&text), 1, "{text}");
    assert!(text.contains("hint: pass --kubeconfig FILE"), "{text}");
    assert!(
        text.contains("--live FILE|DIR"),
        "diff can go offline: {text}"
    );

    let out = tether(&["sync", "--path", &app, "--app", "web"], home.path());
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("hint: pass --kubeconfig FILE"), "{text}");
    assert!(!text.contains("--live"), "sync has no --live: {text}");
}

#[test]
fn status_says_it_could_not_connect_and_asks_whether_serve_runs_there() {
    let home = tempfile::tempdir().expect("tempdir");
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let server = format!("http://127.0.0.1:{port}");
    let out = tether(&["status", "--server", &server], home.path());
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert_contains(&text, &format!("could not connect to {server}"));
    assert!(text.to_lowercase().contains("connection refused"), "{text}");
    assert!(text.contains("is `tether serve` running there?"), "{text}");
    assert!(!text.contains("error sending request"), "{text}");
    assert_eq!(errors(&text), 1, "{text}");
}

#[test]
fn a_server_without_a_scheme_is_told_it_needs_http() {
    let home = tempfile::tempdir().expect("tempdir");
    for server in ["127.0.0.1:8080", "localhost:8080"] {
        let out = tether(&["status", "--server", server], home.path());
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{server}: {text}");
        assert!(
            text.contains(&format!("the URL needs a scheme: http://{server}")),
            "{server}: {text}"
        );
        assert!(!text.contains("builder error"), "{text}");
    }
}

#[test]
fn an_empty_path_is_an_error_unless_allowed() {
    let home = tempfile::tempdir().expect("tempdir");
    let (app, empty) = dirs(home.path());
    let out = tether(&["diff", "--path", &empty, "--live", &app], home.path());
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains(&format!("no manifests in {empty}")), "{text}");
    assert!(text.contains("--allow-empty"), "{text}");
    assert!(out.stdout.is_empty(), "no report for an error");

    let out = tether(
        &["diff", "--path", &empty, "--live", &empty, "--allow-empty"],
        home.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A Git host's 404 is a missing repository, not an unreachable remote, and it is
/// printed once (it was a WARN log line, then the same as `error:`).
#[test]
fn a_404_from_a_git_host_is_repository_not_found_printed_once() {
    let home = tempfile::tempdir().expect("tempdir");
    let root = home.path().join("repos");
    std::fs::create_dir_all(&root).expect("mkdir");
    let host = HttpGit::start(&root, None);
    let url = host.url("missing.git");
    let out = tether(&["source", "--repo", &url], home.path());
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("not found (HTTP 404)"), "{text}");
    assert!(text.contains("RepositoryNotFound"), "{text}");
    assert!(!text.contains("RemoteUnreachable"), "{text}");
    assert_eq!(text.lines().count(), 1, "said once: {text}");

    let (_, empty) = dirs(home.path());
    let out = tether(
        &["diff", "--repo", &url, "--path", ".", "--live", &empty],
        home.path(),
    );
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert_eq!(text.lines().count(), 1, "said once: {text}");
}

/// kube-rs logs `ERROR kube_client::client::builder: failed with status 500` for each
/// answer a retry then repeats; a user sees tether's one error instead.
#[tokio::test]
async fn library_log_lines_never_reach_stderr_at_the_default_level() {
    let sandbox = TestSandbox::start_with(SandboxOptions {
        fail_rate: 1.0,
        ..SandboxOptions::default()
    })
    .await;
    let (app, _) = dirs(sandbox.dir.path());
    let run = support::tether(&sandbox, "sync", &["--path", &app, "--app", "web"]).await;
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    for library in ["kube_client", "hyper", "rustls", "ERROR", "WARN"] {
        assert!(!run.stderr.contains(library), "{library}: {}", run.stderr);
    }
    assert_eq!(errors(&run.stderr), 1, "{}", run.stderr);
}
