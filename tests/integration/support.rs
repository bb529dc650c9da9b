//! Helpers shared by the integration tests: a sandbox started in-process with its
//! kubeconfig in a temporary directory, the real `kubectl` run against it, and a raw
//! HTTPS client that trusts the sandbox's CA and sends its token.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Once;
use std::time::Duration;

use base64::Engine as _;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tether_sandbox::{Sandbox, SandboxOptions};
use tokio::io::AsyncWriteExt as _;

/// How long one kubectl invocation may take before the test fails.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a poll for a condition waits before the test fails.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(10);

static INIT: Once = Once::new();

/// Installs the process-wide rustls crypto provider, once, before any TLS client.
pub fn init() {
    INIT.call_once(|| {
        // Another test binary module may have installed it already: that is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A sandbox for one test, with its kubeconfig written to a temporary directory.
pub struct TestSandbox {
    pub sandbox: Sandbox,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub http: reqwest::Client,
}

/// What a kubectl run printed and how it ended.
#[derive(Debug)]
pub struct KubectlOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl KubectlOutput {
    /// Panics with both outputs unless kubectl exited 0.
    #[track_caller]
    pub fn ok(self) -> KubectlOutput {
        assert_eq!(
            self.code, 0,
            "kubectl failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// One answer of the raw client: status code, content type and body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "answer is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl TestSandbox {
    pub async fn start() -> TestSandbox {
        TestSandbox::start_with(SandboxOptions::default()).await
    }

    pub async fn start_with(options: SandboxOptions) -> TestSandbox {
        init();
        let sandbox = Sandbox::start(options).await.expect("the sandbox starts");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        sandbox
            .write_kubeconfig(&kubeconfig)
            .expect("the kubeconfig is written");
        let http = http_client(sandbox.kubeconfig());
        TestSandbox {
            sandbox,
            dir,
            kubeconfig,
            http,
        }
    }

    pub fn url(&self) -> &str {
        self.sandbox.url()
    }

    /// Runs kubectl against this sandbox. A missing kubectl fails the test: these
    /// tests exist to prove kubectl works with the sandbox.
    pub async fn kubectl(&self, args: &[&str]) -> KubectlOutput {
        self.kubectl_with_stdin(args, None).await
    }

    pub async fn kubectl_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> KubectlOutput {
        self.kubectl_with_env(args, stdin, &[]).await
    }

    /// Runs kubectl with extra environment variables (`KUBE_EDITOR` for `kubectl edit`).
    pub async fn kubectl_with_env(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
    ) -> KubectlOutput {
        let mut command = tokio::process::Command::new("kubectl");
        command.envs(env.iter().copied());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            // No user cache or config outside the test's directory.
            .env("HOME", self.dir.path())
            .env("KUBECACHEDIR", self.dir.path().join("cache"))
            .env_remove("KUBECONFIG")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl (it must be on PATH): {e}"));
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("kubectl's stdin");
            pipe.write_all(input.as_bytes())
                .await
                .expect("kubectl reads its stdin");
            drop(pipe);
        }
        let output = tokio::time::timeout(KUBECTL_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in {KUBECTL_TIMEOUT:?}"))
            .expect("kubectl runs");
        KubectlOutput {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Writes `content` to a file in the test's directory and returns its path.
    pub fn write_file(&self, name: &str, content: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).expect("the file is written");
        path.to_string_lossy().into_owned()
    }

    /// A request with the sandbox's token.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url()))
            .bearer_auth(self.sandbox.token())
    }

    /// Sends a request and reads the whole answer.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Answer {
        let mut request = self.request(method, path);
        if let Some(content_type) = content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        read(request).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, None, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send(
            Method::POST,
            path,
            Some("application/json"),
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Answer {
        self.send(
            Method::PUT,
            path,
            Some("application/json"),
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub async fn patch(&self, path: &str, content_type: &str, body: &str) -> Answer {
        self.send(
            Method::PATCH,
            path,
            Some(content_type),
            Some(body.as_bytes().to_vec()),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.send(Method::DELETE, path, None, None).await
    }

    /// Creates a namespace and fails the test if it cannot.
    pub async fn namespace(&self, name: &str) {
        let answer = self
            .post(
                "/api/v1/namespaces",
                &serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text());
    }

    /// The sandbox's kubeconfig, impersonating `user` (in `system:masters`, so as
    /// allowed as the admin): the sandbox's audit records each request with it.
    pub fn kubeconfig_as(&self, user: &str) -> PathBuf {
        let text = std::fs::read_to_string(&self.kubeconfig).expect("the kubeconfig");
        let impersonating = text.replacen(
            "\ncontexts:",
            &format!("\n    as: {user}\n    as-groups:\n    - system:masters\ncontexts:"),
            1,
        );
        assert_ne!(impersonating, text, "the kubeconfig has a user to extend");
        let path = self.dir.path().join(format!("kubeconfig-{user}"));
        std::fs::write(&path, impersonating).expect("write the kubeconfig");
        path
    }

    /// The ServiceAccount `namespace/name`, allowed everything by a ClusterRole of `*`
    /// rules: what an App acts as in a single-team install, whose operator trusts every
    /// App author with the whole cluster (README, Tenancy and other clusters).
    pub async fn trusted_service_account(&self, namespace: &str, name: &str) {
        let role = format!("trusted-{namespace}-{name}");
        let yaml = format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {namespace}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {role}\n\
             rules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {role}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\n\
             subjects:\n- kind: ServiceAccount\n  name: {name}\n  namespace: {namespace}\n"
        );
        self.kubectl_with_stdin(&["apply", "-f", "-"], Some(&yaml))
            .await
            .ok();
    }

    /// Opens a watch and returns its events until `done` says so (or the stream ends),
    /// failing the test if that takes longer than `timeout`.
    pub async fn watch_until(
        &self,
        path: &str,
        timeout: Duration,
        mut done: impl FnMut(&[Value]) -> bool,
    ) -> Vec<Value> {
        let mut response = self
            .request(Method::GET, path)
            .send()
            .await
            .expect("the watch is sent");
        assert_eq!(response.status(), StatusCode::OK, "watch {path}");
        let mut events = Vec::new();
        let mut pending = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done(&events) {
                return events;
            }
            let chunk = tokio::time::timeout_at(deadline, response.chunk())
                .await
                .unwrap_or_else(|_| panic!("watch {path} timed out; events so far: {events:?}"))
                .expect("the watch stream reads");
            let Some(chunk) = chunk else {
                return events;
            };
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                events.push(serde_json::from_slice(&line).expect("a watch event is JSON"));
            }
        }
    }
}

/// Sends a request and reads the whole answer.
pub async fn read(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.expect("the request is answered");
    let status = response.status();
    let headers = response.headers().clone();
    let content_type = headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response.bytes().await.expect("the body reads").to_vec();
    Answer {
        status,
        content_type,
        headers,
        body,
    }
}

/// A client that trusts only the CA in `kubeconfig` (and sends no credentials itself).
pub fn http_client(kubeconfig: &str) -> reqwest::Client {
    init();
    let config: Value = serde_saphyr::from_str(kubeconfig).expect("the kubeconfig is YAML");
    let ca = config
        .pointer("/clusters/0/cluster/certificate-authority-data")
        .and_then(Value::as_str)
        .expect("the kubeconfig embeds the CA");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .expect("the CA is base64");
    let certificate = reqwest::Certificate::from_pem(&pem).expect("the CA is PEM");
    reqwest::Client::builder()
        .tls_certs_only([certificate])
        .build()
        .expect("a TLS client")
}

/// Polls `check` until it returns Some, failing the test after [`POLL_TIMEOUT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + POLL_TIMEOUT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The event types of a watch, in order.
pub fn event_types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// How a `tether` process ended and what it printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `tether <command> --kubeconfig <sandbox> <args>` as a process; async, so an
/// in-process sandbox keeps serving while it runs.
pub async fn tether(sandbox: &TestSandbox, command: &str, args: &[&str]) -> Run {
    tether_with_env(sandbox, command, args, &[]).await
}

/// [`tether`], with these environment variables set for the process.
pub async fn tether_with_env(
    sandbox: &TestSandbox,
    command: &str,
    args: &[&str],
    env: &[(&str, String)],
) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg(command)
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .args(args)
        .env("TETHER_CACHE_DIR", sandbox.dir.path().join("git-cache"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .await
        .expect("tether runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

// ---------------------------------------------------------------------------------
// Apps as a user writes them: a directory of manifests and `tether <command> --app`

/// A fresh directory `name` under the sandbox's temporary directory, holding `files`
/// (relative path, content).
pub fn app_dir<F: AsRef<str>, C: AsRef<str>>(
    sandbox: &TestSandbox,
    name: &str,
    files: &[(F, C)],
) -> PathBuf {
    let dir = sandbox.dir.path().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (file, content) in files {
        let path = dir.join(file.as_ref());
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, content.as_ref()).expect("write a manifest");
    }
    dir
}

/// `tether <command> --path DIR --app APP -o json [extra]` against the sandbox.
pub async fn tether_app(
    sandbox: &TestSandbox,
    command: &str,
    dir: &Path,
    app: &str,
    extra: &[&str],
) -> Run {
    let dir = dir.to_str().expect("utf-8");
    let mut args = vec!["--path", dir, "--app", app, "-o", "json"];
    args.extend_from_slice(extra);
    tether(sandbox, command, &args).await
}

/// `tether sync --path DIR --app APP -o json [extra]`.
pub async fn sync_app(sandbox: &TestSandbox, dir: &Path, app: &str, extra: &[&str]) -> Run {
    tether_app(sandbox, "sync", dir, app, extra).await
}

/// What a run printed on stdout, as JSON; a test fails showing both streams when it
/// is not.
pub fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\nstderr: {}", run.stdout, run.stderr))
}

/// A JSON report's entry (`resources`) for `Kind/name`.
pub fn resource<'r>(report: &'r Value, object: &str) -> &'r Value {
    report["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| {
            format!(
                "{}/{}",
                r["kind"].as_str().unwrap_or_default(),
                r["name"].as_str().unwrap_or_default()
            ) == object
        })
        .unwrap_or_else(|| panic!("{object} not in the report: {report}"))
}

/// The action `tether sync -o json` reports for `Kind/name`.
pub fn action_of(report: &Value, object: &str) -> String {
    resource(report, object)["action"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------------------------
// Real git servers and repositories: the test kit's, shared with the benches.

pub use tether_testkit::git::{GitDaemon, GitRepo, HttpGit, git};

// ---------------------------------------------------------------------------------
// App objects and their conditions, as the serve-facing tests read them.

impl TestSandbox {
    /// `kubectl apply -f -` of `yaml`, failing the test with kubectl's output unless it
    /// succeeds.
    pub async fn kubectl_apply(&self, yaml: &str) -> KubectlOutput {
        self.kubectl_with_stdin(&["apply", "-f", "-"], Some(yaml))
            .await
            .ok()
    }

    /// `kubectl patch KIND NAME -n NAMESPACE --type=merge -p PATCH`: a hand edit of a
    /// live object, failing the test with kubectl's output unless it succeeds.
    pub async fn kubectl_merge_patch(
        &self,
        kind: &str,
        name: &str,
        namespace: &str,
        patch: &str,
    ) -> KubectlOutput {
        self.kubectl(&[
            "patch",
            kind,
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            patch,
        ])
        .await
        .ok()
    }

    /// Applies the CustomResourceDefinition in `file` (server-side, as large CRDs need)
    /// and waits until `crd/NAME` is Established, failing the test unless both succeed.
    pub async fn apply_crd(&self, file: &str, name: &str) {
        self.kubectl(&["apply", "--server-side", "-f", file])
            .await
            .ok();
        self.kubectl(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{name}"),
            "--timeout=10s",
        ])
        .await
        .ok();
    }

    /// Runs kubectl (`-o json` among `args`), failing the test unless it succeeds and
    /// prints JSON; what it printed.
    pub async fn kubectl_json(&self, args: &[&str]) -> Value {
        let out = self.kubectl(args).await.ok();
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("kubectl {args:?} printed no JSON ({e}):\n{}", out.stdout))
    }

    /// `kubectl get KIND NAME -n NAMESPACE -o json --show-managed-fields`: the object
    /// with who wrote which field, failing the test unless kubectl succeeds.
    pub async fn get_with_managers(&self, kind: &str, name: &str, namespace: &str) -> Value {
        self.kubectl_json(&[
            "get",
            kind,
            name,
            "-n",
            namespace,
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await
    }

    /// Creates the namespaces `names`, failing the test if one cannot be.
    pub async fn namespaces(&self, names: &[&str]) {
        for name in names {
            self.namespace(name).await;
        }
    }
}

/// What `tether <command> --path DIR --app APP -o json [extra]` reported, failing the
/// test (showing both streams) unless it exited with `code`.
pub async fn app_report(
    sandbox: &TestSandbox,
    command: &str,
    dir: &Path,
    app: &str,
    extra: &[&str],
    code: i32,
) -> Value {
    let run = tether_app(sandbox, command, dir, app, extra).await;
    assert_eq!(run.code, Some(code), "{}{}", run.stdout, run.stderr);
    json(&run)
}

/// The `field` of each entry of a report's `resources` that `keep` keeps, in order.
pub fn resource_fields<'r>(
    report: &'r Value,
    field: &str,
    keep: impl Fn(&Value) -> bool,
) -> Vec<&'r str> {
    report["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| keep(r))
        .filter_map(|r| r[field].as_str())
        .collect()
}

/// Runs `command` (a tool the test needs: helm, gpg, python3) to its end, failing the
/// test with the command line and its stderr unless it succeeds; its output.
#[track_caller]
pub fn run_ok(command: &mut std::process::Command) -> std::process::Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?} does not run: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// How a process the test ran itself ended and what it printed.
impl From<std::process::Output> for Run {
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// The condition of type `kind` in `status` (an App object's `status`, or an app's
/// status as tether's status API answers it); `null` while it has none, as a poll
/// reads it.
pub fn find_condition<'s>(status: &'s Value, kind: &str) -> &'s Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// [`find_condition`], failing the test (showing the status) when there is none.
#[track_caller]
pub fn condition<'s>(status: &'s Value, kind: &str) -> &'s Value {
    match find_condition(status, kind) {
        Value::Null => panic!("no {kind} condition: {status}"),
        found => found,
    }
}
