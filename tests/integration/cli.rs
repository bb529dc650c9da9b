//! The `tether` binary as users run it: the sandbox as a process (ready line,
//! kubeconfig, clean stop on SIGTERM), `tether source`, exit codes and `--help`.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::git;

const TETHER: &str = env!("CARGO_BIN_EXE_tether");

fn tether(args: &[&str]) -> std::process::Output {
    Command::new(TETHER)
        .args(args)
        .output()
        .expect("the tether binary runs")
}

#[test]
fn every_command_has_help() {
    for command in [
        &["--help"][..],
        &["sandbox", "--help"],
        &["source", "--help"],
    ] {
        let out = tether(command);
        assert!(out.status.success(), "{command:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage:"), "{command:?}: {text}");
    }
}

#[test]
fn sandbox_process_prints_ready_serves_kubectl_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("nested").join("kubeconfig");
    let mut child = Command::new(TETHER)
        .args(["sandbox", "--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the sandbox starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("a line on stdout");
    let url = line
        .trim()
        .strip_prefix("ready https://127.0.0.1:")
        .map(str::to_string);
    assert!(
        url.is_some(),
        "expected `ready https://127.0.0.1:PORT`, got {line:?}"
    );

    let kubectl = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "namespaces", "-o", "name"])
        .output()
        .expect("kubectl runs");
    assert!(
        kubectl.status.success(),
        "{}",
        String::from_utf8_lossy(&kubectl.stderr)
    );
    let namespaces = String::from_utf8_lossy(&kubectl.stdout);
    assert!(namespaces.contains("namespace/default"), "{namespaces}");
    let context = std::fs::read_to_string(&kubeconfig).expect("kubeconfig written");
    assert!(context.contains("current-context: tether-sandbox"));

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs")
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the sandbox did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status:?}");
    let mut rest = String::new();
    stdout.read_line(&mut rest).expect("stdout closes");
    assert_eq!(rest, "", "exactly one line on stdout");
}

#[test]
fn sandbox_refuses_a_fail_rate_outside_zero_to_one() {
    let out = tether(&["sandbox", "--kubeconfig", "/dev/null", "--fail-rate", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not between 0.0 and 1.0"));
}

#[test]
fn source_command_shows_the_revision_and_files_and_exits_2_on_a_missing_ref() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("apps/web")).expect("mkdir");
    std::fs::write(
        repo.join("apps/web/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
    )
    .expect("write");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "Add the web app"]);
    let cache = dir.path().join("cache");
    let repo_url = format!("file://{}", repo.display());
    let common = [
        "--repo",
        repo_url.as_str(),
        "--path",
        "apps/web",
        "--cache-dir",
        cache.to_str().expect("utf-8"),
    ];

    let out = tether(&[&["source", "--ref", "main", "-o", "json"][..], &common[..]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(report["revision"]["subject"], "Add the web app");
    assert_eq!(report["revision"]["sha"].as_str().map(str::len), Some(40));
    assert_eq!(report["files"][0]["path"], "apps/web/cm.yaml");

    let out = tether(&[&["source", "--ref", "no-such-branch"][..], &common[..]].concat());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no-such-branch"), "{stderr}");
}
