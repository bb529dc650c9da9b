//! The `tether` binary as users run it: the sandbox as a process (ready line,
//! kubeconfig, clean stop on SIGTERM), `tether source`, exit codes and `--help`.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tether_testkit::assert_contains;

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

/// An API server that accepts connections and never answers (a black-holed address
/// behind a load balancer that still completes the TCP handshake). Its connections are
/// held open for as long as the test process runs.
fn black_hole() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            held.push(stream);
        }
    });
    port
}

/// A kubeconfig for `https://127.0.0.1:{port}` (no CA: the handshake never starts).
fn kubeconfig_for(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hole\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: me\n  user: {{token: t}}\ncontexts:\n- name: hole\n  context: {{cluster: hole, user: me}}\ncurrent-context: hole\n"
        ),
    )
    .expect("write kubeconfig");
    path
}

/// Issue #12: an API server that never answers held `tether diff` for 30 s per request
/// with no way to say less; `--request-timeout` (kubectl's flag) bounds each request,
/// and the error says no answer came.
#[test]
fn a_silent_api_server_fails_diff_and_sync_within_the_request_timeout() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = dir.path().join("app");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    std::fs::write(
        manifests.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: default}\n",
    )
    .expect("write");
    let kubeconfig = kubeconfig_for(dir.path(), black_hole());
    let kubeconfig = kubeconfig.to_str().expect("utf-8");
    let path = manifests.to_str().expect("utf-8");
    for command in [
        &["diff", "--path", path][..],
        &["sync", "--path", path, "--app", "web"][..],
    ] {
        let started = Instant::now();
        let out = tether(
            &[
                command,
                &["--kubeconfig", kubeconfig, "--request-timeout", "2s"],
            ]
            .concat(),
        );
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
        assert!(
            stderr.contains("no answer within 2s"),
            "{command:?}: {stderr}"
        );
        // The first request (discovery) waits its two seconds and fails the command:
        // a server that does not answer is not asked again kind by kind. The default
        // would have held it for half a minute.
        assert!(took >= TIMEOUT, "{command:?} gave up early: {took:?}");
        assert!(
            took < TIMEOUT + Duration::from_secs(2),
            "{command:?} took {took:?}: {stderr}"
        );
    }
    let refused = tether(&["diff", "--path", path, "--request-timeout", "soon"]);
    assert_eq!(refused.status.code(), Some(2));
    assert_contains(
        &String::from_utf8_lossy(&refused.stderr),
        "\"soon\" is not a duration",
    );
}

/// `tether sandbox` as a process, killed (by its PID) when dropped.
struct SandboxProcess {
    child: std::process::Child,
    kubeconfig: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl SandboxProcess {
    fn start(extra: &[&str]) -> SandboxProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(TETHER)
            .args(["sandbox", "--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the sandbox starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("a line on stdout");
        assert!(line.starts_with("ready "), "{line:?}");
        SandboxProcess {
            child,
            kubeconfig,
            _dir: dir,
        }
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        use std::io::Write as _;
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(stdin.unwrap_or_default().as_bytes())
            .expect("kubectl reads stdin");
        drop(pipe);
        let out = child.wait_with_output().expect("kubectl ends");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The revision the Deployment controller wrote on `web`, if it has.
    fn revision(&self) -> String {
        let out = self.kubectl(
            &[
                "get",
                "deployment",
                "web",
                "-o",
                r"jsonpath={.metadata.annotations.deployment\.kubernetes\.io/revision}",
            ],
            None,
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for SandboxProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: nginx}]}\n";

/// `--deployment-delay-ms N` sets how soon the sandbox's Deployment controller acts
/// (it writes the revision annotation and a ReplicaSet); 0 turns it off.
#[test]
fn the_sandbox_deployment_controller_acts_after_its_delay_or_not_at_all() {
    const DELAY: Duration = Duration::from_secs(3);
    let delayed = SandboxProcess::start(&["--deployment-delay-ms", "3000"]);
    let created = Instant::now();
    delayed.kubectl(&["apply", "-f", "-"], Some(DEPLOYMENT));
    let early = delayed.revision();
    let checked = created.elapsed();
    if checked < DELAY {
        assert_eq!(early, "", "the controller acted after {checked:?}");
    }
    let deadline = Instant::now() + DELAY + Duration::from_secs(10);
    while delayed.revision() != "1" {
        assert!(Instant::now() < deadline, "the controller never acted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(created.elapsed() >= DELAY, "acted before its delay");

    // Off: as long as the delayed one took, and longer, nothing writes.
    let off = SandboxProcess::start(&["--deployment-delay-ms", "0"]);
    off.kubectl(&["apply", "-f", "-"], Some(DEPLOYMENT));
    std::thread::sleep(DELAY + Duration::from_secs(1));
    assert_eq!(off.revision(), "");
    let sets = off.kubectl(&["get", "replicasets", "-o", "name"], None);
    assert_eq!(String::from_utf8_lossy(&sets.stdout), "");
}
