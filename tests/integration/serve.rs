//! `tether serve` as a process against the sandbox and a real `git daemon`: the first
//! sync, live drift healed, a webhook-triggered update, prune after a file leaves Git,
//! backoff against a failing API server and recovery, a deny window and suspend
//! holding changes back, SIGHUP reloads (valid and invalid), two replicas with leader
//! election, and SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::notify::Recorder;
use crate::support::{GitDaemon, GitRepo, HttpGit, POLL_TIMEOUT, TestSandbox, eventually};

mod api;
mod failures;
mod heal;

/// Long enough that only webhooks and live changes move an app during a test.
const POLL: &str = "1h";
const WEBHOOK_SECRET: &str = "test-webhook-secret";

pub(crate) fn configmap(name: &str, namespace: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: \"{value}\"\n"
    )
}

/// A `tether serve` process, killed on drop if a test fails before stopping it.
pub(crate) struct Serve {
    child: tokio::process::Child,
    pub(crate) url: String,
    config: PathBuf,
    log: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        // A failed test shows what the service said: its log goes with the test's
        // temporary folder.
        if std::thread::panicking() {
            eprintln!("--- tether serve's log ---\n{}", self.log());
        }
    }
}

impl Serve {
    pub(crate) async fn start(
        sandbox: &TestSandbox,
        name: &str,
        config: &str,
        extra: &[&str],
    ) -> Serve {
        Serve::start_with_env(sandbox, name, config, extra, &[]).await
    }

    /// [`Serve::start`], with these environment variables set for the process.
    pub(crate) async fn start_with_env(
        sandbox: &TestSandbox,
        name: &str,
        config: &str,
        extra: &[&str],
        env: &[(&str, String)],
    ) -> Serve {
        Serve::spawn(sandbox, name, config, extra, env, &sandbox.kubeconfig).await
    }

    /// [`Serve::start`], acting as `user` (in `system:masters`): the sandbox's audit
    /// tells its requests from the test's own.
    pub(crate) async fn start_as(
        sandbox: &TestSandbox,
        name: &str,
        config: &str,
        user: &str,
    ) -> Serve {
        Serve::spawn(
            sandbox,
            name,
            config,
            &[],
            &[],
            &sandbox.kubeconfig_as(user),
        )
        .await
    }

    async fn spawn(
        sandbox: &TestSandbox,
        name: &str,
        config: &str,
        extra: &[&str],
        env: &[(&str, String)],
        kubeconfig: &Path,
    ) -> Serve {
        let dir = sandbox.dir.path();
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, config).expect("write config");
        let log = dir.join(format!("{name}.log"));
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
            .arg("serve")
            .arg("--config")
            .arg(&path)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(extra)
            .env("TETHER_CACHE_DIR", dir.join(format!("{name}-cache")))
            .env("RUST_LOG", "info")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("tether serve starts");
        // The configuration asks for port 0 and the service logs the address it
        // bound: no other process can be on it, as one could on a port probed first.
        let deadline = tokio::time::Instant::now() + POLL_TIMEOUT;
        let address = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(address) = bound_address(&text) {
                break address;
            }
            if let Some(status) = child.try_wait().expect("wait") {
                panic!("tether serve exited ({status}) before it listened:\n{text}");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "tether serve did not listen in time:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let serve = Serve {
            child,
            url: format!("http://{address}"),
            config: path,
            log,
        };
        eventually("tether serve answers /healthz", || async {
            reqwest::get(format!("{}/healthz", serve.url))
                .await
                .ok()
                .filter(|r| r.status().is_success())
        })
        .await;
        serve
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) async fn status(&self, app: &str) -> Value {
        get_json(format!("{}/api/v1/apps/{app}", self.url)).await
    }

    /// Waits until `check` holds for the app's status.
    pub(crate) async fn wait_status(
        &self,
        app: &str,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        eventually(what, || async {
            let status = self.status(app).await;
            check(&status).then_some(status)
        })
        .await
    }

    /// A signed push notification for `repo`'s main branch.
    pub(crate) async fn push(&self, repo: &str) -> reqwest::StatusCode {
        let body = json!({"repository": repo, "ref": "refs/heads/main"}).to_string();
        let mut mac = Hmac::<Sha256>::new_from_slice(WEBHOOK_SECRET.as_bytes()).expect("key");
        mac.update(body.as_bytes());
        let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        reqwest::Client::new()
            .post(format!("{}/webhooks/generic", self.url))
            .header("x-signature", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("webhook delivered")
            .status()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    pub(crate) fn signal(&self, signal: &str) {
        let pid = self.pid().to_string();
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    }

    /// SIGTERM, then the exit code (bounded wait).
    pub(crate) async fn stop(mut self) -> Option<i32> {
        self.signal("TERM");
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("tether serve stops after SIGTERM")
            .expect("wait");
        status.code()
    }
}

/// The address in the service's `tether serving listen=ADDRESS` log line.
fn bound_address(log: &str) -> Option<String> {
    log.lines()
        .find(|l| l.contains("tether serving"))?
        .split_whitespace()
        .find_map(|word| word.strip_prefix("listen="))
        .map(str::to_string)
}

/// The origin repository served by a git daemon (or git's smart HTTP), and its URL.
pub(crate) struct Origin {
    pub(crate) repo: GitRepo,
    _daemon: Option<GitDaemon>,
    _http: Option<HttpGit>,
    pub(crate) url: String,
}

/// A repository of `files` served by `git daemon` (`git://`), for configuration-file apps.
pub(crate) fn origin(sandbox: &TestSandbox, files: &[(&str, &str)]) -> Origin {
    let root = sandbox.dir.path().join("srv");
    let repo = origin_repo(&root, files);
    let daemon = GitDaemon::start(&root);
    let url = daemon.url("apps.git");
    Origin {
        repo,
        _daemon: Some(daemon),
        _http: None,
        url,
    }
}

/// A repository of `files` served over smart HTTP (`http://`): what App objects may
/// name (issue #24: no `git://`, no local paths for tenants).
pub(crate) fn origin_http(sandbox: &TestSandbox, files: &[(&str, &str)]) -> Origin {
    let root = sandbox.dir.path().join("srv");
    let repo = origin_repo(&root, files);
    let http = HttpGit::start(&root, None);
    let url = http.url("apps.git");
    Origin {
        repo,
        _daemon: None,
        _http: Some(http),
        url,
    }
}

fn origin_repo(root: &Path, files: &[(&str, &str)]) -> GitRepo {
    let repo = GitRepo::init(root.join("apps.git"));
    for (path, content) in files {
        repo.write(path, content);
    }
    repo.commit("first");
    repo
}

fn secret_file(dir: &Path) -> String {
    let path = dir.join("webhook-secret");
    std::fs::write(&path, WEBHOOK_SECRET).expect("write secret");
    path.display().to_string()
}

/// The server section: port 0, so the service takes a port no one else holds (and
/// logs it, for [`Serve::start`]).
pub(crate) fn server_section(dir: &Path) -> String {
    format!(
        "server:\n  listen: 127.0.0.1:0\n  webhooks:\n    generic: {{secretFile: {}}}\n",
        secret_file(dir)
    )
}

/// [`server_section`] with an API token: `token` written to the file `api-token` in
/// `dir`, which `server.apiToken` names.
pub(crate) fn server_section_with_token(dir: &Path, token: &str) -> String {
    let file = dir.join("api-token");
    std::fs::write(&file, token).expect("write the token");
    format!(
        "{}  apiToken: {{secretFile: {}}}\n",
        server_section(dir),
        file.display()
    )
}

/// Which object answers to a ConfigMap's name: its uid, and whether it is only
/// marked for deletion.
struct Identity {
    uid: String,
    deleting: bool,
}

async fn identity(sandbox: &TestSandbox, name: &str, namespace: &str) -> Option<Identity> {
    let out = sandbox
        .kubectl(&["get", "cm", name, "-n", namespace, "-o", "json"])
        .await;
    if out.code != 0 {
        return None;
    }
    let object: Value = serde_json::from_str(&out.stdout).expect("kubectl prints JSON");
    Some(Identity {
        uid: object["metadata"]["uid"]
            .as_str()
            .expect("an object has a uid")
            .to_string(),
        deleting: !object["metadata"]["deletionTimestamp"].is_null(),
    })
}

/// The value at `key` of the ConfigMap `namespace/name`, as kubectl's jsonpath reads
/// it (empty for a key it lacks); None while the ConfigMap is not there.
pub(crate) async fn cm_value(
    sandbox: &TestSandbox,
    name: &str,
    namespace: &str,
    key: &str,
) -> Option<String> {
    let jsonpath = format!("jsonpath={{.data.{key}}}");
    let out = sandbox
        .kubectl(&["get", "cm", name, "-n", namespace, "-o", &jsonpath])
        .await;
    (out.code == 0).then_some(out.stdout)
}

/// The value at `key` of the ConfigMap `namespace/name` (see [`cm_value`]).
pub(crate) async fn data_key(sandbox: &TestSandbox, name: &str, namespace: &str) -> Option<String> {
    cm_value(sandbox, name, namespace, "key").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_syncs_heals_follows_webhooks_and_prunes() {
    let (sandbox, origin) = with_origin(
        "live",
        &[
            ("apps/web/config.yaml", &configmap("web", "live", "v1")),
            ("apps/web/extra.yaml", &configmap("extra", "live", "x")),
        ],
    )
    .await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: web\n  source: {{repo: \"{}\", ref: main, path: apps/web, interval: {POLL}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "web", &config, &[]).await;

    // First sync.
    let status = serve.wait_synced("web").await;
    assert_eq!(status["health"], "Healthy", "{status}");
    assert_eq!(
        status["revision"]["sha"],
        crate::support::git(&origin.repo.dir, &["rev-parse", "HEAD"])
    );
    assert_eq!(
        data_key(&sandbox, "web", "live").await.as_deref(),
        Some("v1")
    );

    // Live drift is healed: an edited field, then a deleted object.
    sandbox
        .kubectl_merge_patch("cm", "web", "live", r#"{"data":{"key":"tampered"}}"#)
        .await;
    eventually("the edit is healed", || async {
        (data_key(&sandbox, "web", "live").await.as_deref() == Some("v1")).then_some(())
    })
    .await;
    let deleted = identity(&sandbox, "web", "live")
        .await
        .expect("web exists before it is deleted");
    sandbox
        .kubectl(&["delete", "cm", "web", "-n", "live"])
        .await
        .ok();
    // Back means a new object: one merely marked for deletion still answers a get.
    eventually("the deleted object is back", || async {
        identity(&sandbox, "web", "live")
            .await
            .filter(|now| now.uid != deleted.uid && !now.deleting)
    })
    .await;

    // A webhook brings a new revision at once (the poll is an hour away).
    origin
        .repo
        .write("apps/web/config.yaml", &configmap("web", "live", "v2"));
    let sha = origin.repo.commit("v2");
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);
    eventually("the webhook's revision is applied", || async {
        (data_key(&sandbox, "web", "live").await.as_deref() == Some("v2")).then_some(())
    })
    .await;
    serve.wait_synced_at("web", sha.as_str()).await;

    // A file removed from Git is pruned.
    origin.repo.remove("apps/web/extra.yaml");
    origin.repo.commit("drop extra");
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);
    eventually("the removed object is pruned", || async {
        data_key(&sandbox, "extra", "live")
            .await
            .is_none()
            .then_some(())
    })
    .await;

    // The HTTP surface.
    manual_sync(&serve.url, "web").await;
    let missing = reqwest::get(format!("{}/api/v1/apps/nope", serve.url))
        .await
        .expect("answer");
    assert_eq!(missing.status(), reqwest::StatusCode::NOT_FOUND);
    let ready = reqwest::get(format!("{}/readyz", serve.url))
        .await
        .expect("readyz");
    assert_eq!(ready.status(), reqwest::StatusCode::OK);
    let metrics = get_text(format!("{}/metrics", serve.url)).await;
    for series in [
        "tether_reconcile_passes_total{app=\"web\",result=\"Succeeded\"}",
        "tether_app_sync_status{app=\"web\",status=\"Synced\"} 1",
        "tether_webhook_events_total{provider=\"generic\",outcome=\"accepted\"}",
        "tether_git_fetch_duration_seconds_count",
        "tether_api_requests_total{verb=\"PATCH\",code=\"200\"}",
    ] {
        assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    }
    let listed: Value = get_json(format!("{}/api/v1/apps", serve.url)).await;
    assert_eq!(listed["apps"][0]["name"], "web");

    // `tether status` prints it.
    let out = serve.tether_status(&[]).await;
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(table.contains("web") && table.contains("Synced"), "{table}");

    let log = serve.log();
    assert_eq!(serve.stop().await, Some(0), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_suspend_backoff_and_reload_hold_or_release_changes() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespaces(&["held", "frozen", "flaky"]).await;
    let origin = origin(
        &sandbox,
        &[
            ("held/cm.yaml", &configmap("held", "held", "1")),
            ("frozen/cm.yaml", &configmap("frozen", "frozen", "1")),
            ("flaky/cm.yaml", &configmap("flaky", "flaky", "1")),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let app = |name: &str, extra: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{}\", ref: main, path: {name}, interval: {POLL}}}\n  destination: {{namespace: {name}}}\n  sync: {{automated: true}}\n{extra}",
            origin.url
        )
    };
    // A deny window that is always open: it fires every minute and lasts an hour.
    let deny = "  syncWindows:\n  - {kind: deny, schedule: \"* * * * *\", duration: 1h}\n";
    let config = |frozen: bool| {
        format!(
            "{server}apps:\n{}{}{}",
            app("held", deny),
            app("frozen", if frozen { "  suspend: true\n" } else { "" }),
            app("flaky", ""),
        )
    };
    let serve = Serve::start(&sandbox, "policies", &config(true), &[]).await;

    let held = serve
        .wait_status("held", "held reports its drift", |s| {
            s["sync"] == "OutOfSync"
        })
        .await;
    assert_eq!(held["automation"]["acting"], false);
    assert!(
        held["automation"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("deny window")),
        "{held}"
    );
    assert_eq!(held["drifted"][0]["status"], "Missing", "{held}");
    let frozen = serve
        .wait_status("frozen", "frozen reports its drift", |s| {
            s["sync"] == "OutOfSync"
        })
        .await;
    assert!(
        frozen["automation"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("suspended (suspend: true)")),
        "{frozen}"
    );
    // Only the file lifts the file's `suspend`: the API refuses a Resume and says where.
    let resume = reqwest::Client::new()
        .post(format!("{}/api/v1/apps/frozen/resume", serve.url))
        .send()
        .await
        .expect("the API answers");
    assert_eq!(resume.status(), reqwest::StatusCode::CONFLICT);
    let body: Value = resume.json().await.expect("JSON");
    assert_eq!(
        body["error"],
        "frozen is suspended by the configuration file (`suspend: true`); resume it there"
    );
    serve.wait_synced("flaky").await;
    assert_eq!(data_key(&sandbox, "held", "held").await, None);
    assert_eq!(data_key(&sandbox, "frozen", "frozen").await, None);

    // The API server refuses everything: the pass fails and is retried with backoff.
    sandbox.sandbox.set_fail_rate(1.0);
    origin
        .repo
        .write("flaky/cm.yaml", &configmap("flaky", "flaky", "2"));
    origin.repo.commit("flaky 2");
    serve.push(&origin.url).await;
    let failing = serve
        .wait_status("flaky", "flaky's pass fails", |s| {
            s["lastPass"]["result"] == "Failed"
        })
        .await;
    assert!(failing["nextAttempt"].is_string(), "{failing}");
    assert!(failing["lastPass"]["error"].is_string(), "{failing}");
    // It recovers once the server does.
    sandbox.sandbox.set_fail_rate(0.0);
    eventually("flaky recovers", || async {
        (data_key(&sandbox, "flaky", "flaky").await.as_deref() == Some("2")).then_some(())
    })
    .await;

    // An invalid configuration is refused and the running one kept.
    std::fs::write(&serve.config, "apps: [{name: Bad_Name}]\n").expect("write");
    serve.signal("HUP");
    eventually("the refusal is logged", || async {
        serve
            .log()
            .contains("new configuration refused")
            .then_some(())
    })
    .await;
    assert_eq!(serve.status("flaky").await["name"], "flaky");
    // A valid one is taken: frozen is no longer suspended.
    std::fs::write(&serve.config, config(false)).expect("write");
    serve.signal("HUP");
    eventually("frozen syncs after the reload", || async {
        data_key(&sandbox, "frozen", "frozen").await
    })
    .await;
    assert_eq!(data_key(&sandbox, "held", "held").await, None);
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_replicas_only_the_leader_writes_and_the_other_takes_over() {
    let (sandbox, origin) =
        with_origin("team", &[("team/cm.yaml", &configmap("team", "team", "1"))]).await;
    let config = |dir: &Path| {
        let server = server_section(dir);
        format!(
            "{server}leaderElection: {{enabled: true, leaseDuration: 2s, renewDeadline: 1500ms, retryPeriod: 200ms}}\napps:\n- name: team\n  source: {{repo: \"{}\", ref: main, path: team, interval: {POLL}}}\n  destination: {{namespace: team}}\n  sync: {{automated: true, selfHeal: true}}\n",
            origin.url
        )
    };
    let first = Serve::start(
        &sandbox,
        "first",
        &config(sandbox.dir.path()),
        &["--leader-elect"],
    )
    .await;
    eventually("the first replica syncs", || async {
        data_key(&sandbox, "team", "team").await
    })
    .await;
    let second = Serve::start(
        &sandbox,
        "second",
        &config(sandbox.dir.path()),
        &["--leader-elect"],
    )
    .await;
    let follower = second
        .wait_status("team", "the follower reports", |s| {
            s["lastPass"].is_object()
        })
        .await;
    assert_eq!(follower["automation"]["acting"], false, "{follower}");
    assert!(
        follower["automation"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("not the leader")),
        "{follower}"
    );

    // The leader stops (releasing its Lease): the follower takes over and heals.
    assert_eq!(first.stop().await, Some(0));
    sandbox
        .kubectl_merge_patch("cm", "team", "team", r#"{"data":{"key":"drift"}}"#)
        .await;
    eventually("the new leader heals the drift", || async {
        (data_key(&sandbox, "team", "team").await.as_deref() == Some("1")).then_some(())
    })
    .await;
    assert_eq!(second.stop().await, Some(0));
}

/// `tether serve` with `config` (written as `file` in the sandbox's directory), which
/// must refuse it: its exit code (2 for a bad configuration) and what it printed.
pub(crate) async fn refused(
    sandbox: &TestSandbox,
    file: &str,
    config: &str,
) -> (Option<i32>, String) {
    let path = sandbox.write_file(file, config);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["serve", "--config", &path])
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .output()
        .await
        .expect("tether serve runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `tether serve` run to its end (a configuration or start-up error), its output kept.
async fn serve_once(sandbox: &TestSandbox, config: &Path) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["serve", "--config"])
        .arg(config)
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .env("TETHER_CACHE_DIR", sandbox.dir.path().join("once-cache"))
        .env("RUST_LOG", "info")
        .output()
        .await
        .expect("tether serve runs")
}

/// A sandbox with the namespace `namespace`, and a repository served by `git daemon`
/// holding `files` ([`origin`]): where most tests of a served app begin.
pub(crate) async fn with_origin(namespace: &str, files: &[(&str, &str)]) -> (TestSandbox, Origin) {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace(namespace).await;
    let origin = origin(&sandbox, files);
    (sandbox, origin)
}

/// Files of owned strings as the Git helpers ([`origin`], [`origin_http`]) take them.
pub(crate) fn borrowed(files: &[(String, String)]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect()
}

/// `tether ARGS --server URL FLAG FILE`: a client of the service at `url` with its
/// credential (`--kubeconfig` or `--token-file`), none from the environment; its exit
/// code and what it printed (stdout, then stderr).
pub(crate) async fn tether_client(
    url: &str,
    args: &[&str],
    (flag, file): (&str, &Path),
) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(args)
        .args(["--server", url, flag])
        .arg(file)
        .env_remove("TETHER_API_TOKEN")
        .output()
        .await
        .expect("tether runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// The body of `GET url` as text (whatever the status), failing the test (naming the
/// URL) if there is none.
pub(crate) async fn get_text(url: String) -> String {
    reqwest::get(&url)
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .text()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// The body of `GET url` as JSON, failing the test (naming the URL) if it is not.
pub(crate) async fn get_json(url: String) -> Value {
    let text = get_text(url.clone()).await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: not JSON ({e}): {text}"))
}

/// The body of `GET url` as text, or None while the service does not answer: for
/// polls.
pub(crate) async fn try_get_text(url: String) -> Option<String> {
    reqwest::get(url).await.ok()?.text().await.ok()
}

/// The body of `GET url` as JSON, or None while the service does not answer with
/// JSON: for polls.
pub(crate) async fn try_get_json(url: String) -> Option<Value> {
    reqwest::get(url).await.ok()?.json().await.ok()
}

/// Asks the service at `url` for a manual sync of `app` (`POST /api/v1/apps/{app}/sync`),
/// failing the test unless it is accepted.
pub(crate) async fn manual_sync(url: &str, app: &str) -> reqwest::Response {
    let answer = reqwest::Client::new()
        .post(format!("{url}/api/v1/apps/{app}/sync"))
        .send()
        .await
        .expect("the status API answers");
    assert_eq!(
        answer.status(),
        reqwest::StatusCode::ACCEPTED,
        "manual sync of {app}"
    );
    answer
}

/// The waits every test of a served app repeats, on `tether_testkit`'s predicates.
impl Serve {
    /// `tether status --server URL [extra]` against this service: what it printed and
    /// how it ended.
    pub(crate) async fn tether_status(&self, extra: &[&str]) -> std::process::Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
            .args(["status", "--server", &self.url])
            .args(extra)
            .output()
            .await
            .expect("tether status runs")
    }

    /// Waits until `app`'s status, as JSON text, contains `needle`; returns that text.
    pub(crate) async fn wait_status_text(&self, app: &str, what: &str, needle: &str) -> String {
        self.wait_status(app, what, |s| s.to_string().contains(needle))
            .await
            .to_string()
    }

    /// Waits until `app` is Synced at a revision starting with `prefix` (a chart's
    /// `name@version@`); returns its status.
    pub(crate) async fn wait_synced_from(&self, app: &str, prefix: &str) -> Value {
        let what = format!("{app} is Synced at {prefix}…");
        self.wait_status(app, &what, |s| {
            tether_testkit::serve::synced_at(s, |r| r.starts_with(prefix))
        })
        .await
    }

    /// Waits until `app`'s source fails (`source.ready` false); returns its status.
    pub(crate) async fn wait_source_failed(&self, app: &str) -> Value {
        let what = format!("{app}'s source fails");
        self.wait_status(app, &what, |s| s["source"]["ready"] == false)
            .await
    }

    /// Waits until `app` is Synced; returns its status.
    pub(crate) async fn wait_synced(&self, app: &str) -> Value {
        let what = format!("{app} is Synced");
        self.wait_status(app, &what, tether_testkit::serve::synced)
            .await
    }

    /// Waits until `app` is Synced and Healthy; returns its status.
    pub(crate) async fn wait_healthy(&self, app: &str) -> Value {
        let what = format!("{app} is Synced and Healthy");
        self.wait_status(app, &what, tether_testkit::serve::synced_and_healthy)
            .await
    }

    /// Waits until `app` is Synced at `revision`; returns its status.
    pub(crate) async fn wait_synced_at(&self, app: &str, revision: &str) -> Value {
        let what = format!("{app} is Synced at {revision}");
        self.wait_status(app, &what, |s| {
            tether_testkit::serve::synced_at(s, |r| r == revision)
        })
        .await
    }
}
