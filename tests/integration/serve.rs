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
        reqwest::get(format!("{}/api/v1/apps/{app}", self.url))
            .await
            .expect("status answers")
            .json()
            .await
            .expect("status is JSON")
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

pub(crate) async fn data_key(sandbox: &TestSandbox, name: &str, namespace: &str) -> Option<String> {
    let out = sandbox
        .kubectl(&[
            "get",
            "cm",
            name,
            "-n",
            namespace,
            "-o",
            "jsonpath={.data.key}",
        ])
        .await;
    (out.code == 0).then_some(out.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_syncs_heals_follows_webhooks_and_prunes() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("live").await;
    let origin = origin(
        &sandbox,
        &[
            ("apps/web/config.yaml", &configmap("web", "live", "v1")),
            ("apps/web/extra.yaml", &configmap("extra", "live", "x")),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: web\n  source: {{repo: \"{}\", ref: main, path: apps/web, interval: {POLL}}}\n  destination: {{namespace: live}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "web", &config, &[]).await;

    // First sync.
    let status = serve
        .wait_status("web", "web is Synced", |s| s["sync"] == "Synced")
        .await;
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
        .kubectl(&[
            "patch",
            "cm",
            "web",
            "-n",
            "live",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"key":"tampered"}}"#,
        ])
        .await
        .ok();
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
    serve
        .wait_status("web", "the status shows the new revision", |s| {
            s["revision"]["sha"] == sha.as_str() && s["sync"] == "Synced"
        })
        .await;

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
    let sync = reqwest::Client::new()
        .post(format!("{}/api/v1/apps/web/sync", serve.url))
        .send()
        .await
        .expect("manual sync");
    assert_eq!(sync.status(), reqwest::StatusCode::ACCEPTED);
    let missing = reqwest::get(format!("{}/api/v1/apps/nope", serve.url))
        .await
        .expect("answer");
    assert_eq!(missing.status(), reqwest::StatusCode::NOT_FOUND);
    let ready = reqwest::get(format!("{}/readyz", serve.url))
        .await
        .expect("readyz");
    assert_eq!(ready.status(), reqwest::StatusCode::OK);
    let metrics = reqwest::get(format!("{}/metrics", serve.url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for series in [
        "tether_reconcile_passes_total{app=\"web\",result=\"Succeeded\"}",
        "tether_app_sync_status{app=\"web\",status=\"Synced\"} 1",
        "tether_webhook_events_total{provider=\"generic\",outcome=\"accepted\"}",
        "tether_git_fetch_duration_seconds_count",
        "tether_api_requests_total{verb=\"PATCH\",code=\"200\"}",
    ] {
        assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    }
    let listed: Value = reqwest::get(format!("{}/api/v1/apps", serve.url))
        .await
        .expect("apps")
        .json()
        .await
        .expect("JSON");
    assert_eq!(listed["apps"][0]["name"], "web");

    // `tether status` prints it.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["status", "--server", &serve.url])
        .output()
        .await
        .expect("tether status runs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(table.contains("web") && table.contains("Synced"), "{table}");

    let log = serve.log();
    assert_eq!(serve.stop().await, Some(0), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_suspend_backoff_and_reload_hold_or_release_changes() {
    let sandbox = TestSandbox::start().await;
    for ns in ["held", "frozen", "flaky"] {
        sandbox.namespace(ns).await;
    }
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
    serve
        .wait_status("flaky", "flaky is Synced", |s| s["sync"] == "Synced")
        .await;
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
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("team").await;
    let origin = origin(
        &sandbox,
        &[("team/cm.yaml", &configmap("team", "team", "1"))],
    );
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
        .kubectl(&[
            "patch",
            "cm",
            "team",
            "-n",
            "team",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"key":"drift"}}"#,
        ])
        .await
        .ok();
    eventually("the new leader heals the drift", || async {
        (data_key(&sandbox, "team", "team").await.as_deref() == Some("1")).then_some(())
    })
    .await;
    assert_eq!(second.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_posts_commit_statuses_and_notifies_without_secret_values() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("shop").await;
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: shop}\nstringData: {password: hunter2-do-not-print}\n";
    let origin = origin(
        &sandbox,
        &[
            ("shop/cm.yaml", &configmap("shop", "shop", "1")),
            ("shop/secret.yaml", secret),
        ],
    );
    let provider = Recorder::start().await;
    let hooks = Recorder::start().await;
    let token = sandbox.dir.path().join("token");
    std::fs::write(&token, "provider-token").expect("write token");
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: shop\n  source: {{repo: \"{}\", ref: main, path: shop, interval: {POLL}}}\n  destination: {{namespace: shop}}\n  sync: {{automated: true}}\n  commitStatus: {{provider: github, apiUrl: \"{}\", repository: org/apps, tokenFile: {}}}\n  notifications:\n  - {{type: webhook, url: \"{}/hook\", minInterval: 0s}}\n",
        origin.url,
        provider.base,
        token.display(),
        hooks.base,
    );
    let serve = Serve::start(&sandbox, "shop", &config, &[]).await;
    serve
        .wait_status("shop", "shop is Synced", |s| s["sync"] == "Synced")
        .await;
    let sha = crate::support::git(&origin.repo.dir, &["rev-parse", "HEAD"]);

    let posted = eventually("the commit status is posted", || async {
        provider
            .seen()
            .into_iter()
            .find(|r| r.path == format!("/repos/org/apps/statuses/{sha}"))
    })
    .await;
    assert_eq!(posted.header("authorization"), "Bearer provider-token");
    assert_eq!(posted.json()["state"], "success", "{}", posted.json());
    assert_eq!(posted.json()["context"], "tether/shop");

    let corrected = eventually("the drift-corrected notification arrives", || async {
        hooks
            .seen()
            .into_iter()
            .find(|r| r.json()["event"] == "driftCorrected")
    })
    .await;
    let body = corrected.json();
    assert_eq!(body["app"], "shop");
    assert_eq!(body["revision"]["sha"], sha.as_str());
    assert_eq!(body["summary"]["Missing"], 2, "{body}");
    // The Secret is in the event (so its absence below means masking, not omission)…
    assert!(
        body["objects"].as_array().is_some_and(|objects| objects
            .iter()
            .any(|o| o["kind"] == "Secret" && o["name"] == "creds" && o["namespace"] == "shop")),
        "the Secret is not in the event: {body}"
    );
    // …and its value is in no request, neither as written nor as the API stores it.
    let value = "hunter2-do-not-print";
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    for request in hooks.seen().iter().chain(provider.seen().iter()) {
        let text = String::from_utf8_lossy(&request.body);
        assert!(!text.contains(value), "a Secret value was sent: {text}");
        assert!(
            !text.contains(&encoded),
            "a Secret value was sent in base64: {text}"
        );
    }
    // In sync: the same result is not posted again. Wait for a pass after the manual
    // sync to have finished, then stop the service, which posts whatever it queued.
    let finished = |status: &Value| {
        status["lastPass"]["finishedAt"]
            .as_str()
            .map(str::to_string)
    };
    let last = finished(&serve.status("shop").await).expect("shop has passed once");
    let before = provider.seen().len();
    let sync = reqwest::Client::new()
        .post(format!("{}/api/v1/apps/shop/sync", serve.url))
        .send()
        .await
        .expect("manual sync");
    assert_eq!(sync.status(), reqwest::StatusCode::ACCEPTED);
    let passed = serve
        .wait_status("shop", "a pass after the manual sync", |s| {
            finished(s).is_some_and(|at| at != last)
        })
        .await;
    assert_eq!(passed["lastPass"]["result"], "Succeeded", "{passed}");
    assert_eq!(passed["sync"], "Synced", "{passed}");
    assert_eq!(serve.stop().await, Some(0));
    assert_eq!(provider.seen().len(), before, "{:?}", provider.seen());
}

/// With `server.apiToken`, the status API and manual syncs need the token, as a bearer
/// token; probes, metrics and (signed) webhooks do not. `tether status` sends it from
/// a file or TETHER_API_TOKEN, and the token appears in no log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_api_asks_for_the_configured_token() {
    const TOKEN: &str = "api-t0ken-value";
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("guarded").await;
    let origin = origin(
        &sandbox,
        &[("apps/web/config.yaml", &configmap("web", "guarded", "v1"))],
    );
    let dir = sandbox.dir.path();
    let token_file = dir.join("api-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write token");
    let server = server_section(dir);
    let config = format!(
        "{server}  apiToken: {{secretFile: {}}}\napps:\n- name: web\n  source: {{repo: \"{}\", ref: main, path: apps/web, interval: {POLL}}}\n  destination: {{namespace: guarded}}\n  sync: {{automated: true}}\n",
        token_file.display(),
        origin.url
    );
    let serve = Serve::start(&sandbox, "guarded", &config, &[]).await;
    let client = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, token: Option<&str>| {
        let mut request = client.request(method, format!("{}{path}", serve.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move { request.send().await.expect("an answer") }
    };

    for (method, path) in [
        (reqwest::Method::GET, "/api/v1/apps"),
        (reqwest::Method::GET, "/api/v1/apps/web"),
        (reqwest::Method::POST, "/api/v1/apps/web/sync"),
    ] {
        for token in [None, Some("wrong"), Some("api-t0ken-valu")] {
            let answer = call(method.clone(), path, token).await;
            assert_eq!(
                answer.status(),
                reqwest::StatusCode::UNAUTHORIZED,
                "{method} {path} with {token:?}"
            );
            assert_eq!(
                answer.headers()["www-authenticate"],
                r#"Bearer realm="tether""#
            );
        }
    }
    eventually(
        "the app syncs, and the status says so to the token",
        || async {
            let answer = call(reqwest::Method::GET, "/api/v1/apps/web", Some(TOKEN)).await;
            assert_eq!(answer.status(), reqwest::StatusCode::OK);
            let status: Value = answer.json().await.expect("JSON");
            (status["sync"] == "Synced").then_some(())
        },
    )
    .await;
    let sync = call(reqwest::Method::POST, "/api/v1/apps/web/sync", Some(TOKEN)).await;
    assert_eq!(sync.status(), reqwest::StatusCode::ACCEPTED);
    let unknown = call(reqwest::Method::GET, "/api/v1/apps/nope", Some(TOKEN)).await;
    assert_eq!(unknown.status(), reqwest::StatusCode::NOT_FOUND);
    for open in ["/healthz", "/readyz", "/metrics"] {
        let answer = call(reqwest::Method::GET, open, None).await;
        assert_eq!(answer.status(), reqwest::StatusCode::OK, "{open}");
    }
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);

    let status = |args: &[&str], env: Option<&str>| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"));
        command
            .args(["status", "--server", &serve.url])
            .args(args)
            .env_remove("TETHER_API_TOKEN");
        if let Some(token) = env {
            command.env("TETHER_API_TOKEN", token);
        }
        async move { command.output().await.expect("tether status runs") }
    };
    let refused = status(&[], None).await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("401 Unauthorized"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let from_file = status(&["--token-file", token_file.to_str().expect("utf-8")], None).await;
    assert_eq!(
        from_file.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&from_file.stderr)
    );
    assert!(String::from_utf8_lossy(&from_file.stdout).contains("Synced"));
    let from_env = status(&[], Some(TOKEN)).await;
    assert_eq!(from_env.status.code(), Some(0));
    let missing = status(&["--token-file", "/nonexistent/token"], None).await;
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/token"));

    let log = serve.log();
    assert!(!log.contains(TOKEN), "{log}");
    assert_eq!(serve.stop().await, Some(0), "{log}");
}

/// Issue #12: Kubernetes sends SIGKILL 30 s after SIGTERM, so a pass stuck on a slow
/// API server must not hold the stop: passes in flight get what `shutdownTimeout`
/// leaves after the reserve for notifications and the Lease, then are aborted, and
/// the process exits 0 within the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_slow_pass_stops_within_the_shutdown_budget() {
    const BUDGET: Duration = Duration::from_secs(4);
    const LATENCY: Duration = Duration::from_secs(2);
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("slow").await;
    let files: Vec<(String, String)> = (0..3)
        .map(|i| {
            (
                format!("slow/cm-{i}.yaml"),
                configmap(&format!("cm-{i}"), "slow", "1"),
            )
        })
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let origin = origin(&sandbox, &files);
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}  shutdownTimeout: 4s\napps:\n- name: slow\n  source: {{repo: \"{}\", ref: main, path: slow, interval: {POLL}}}\n  destination: {{namespace: slow}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let mut serve = Serve::start(&sandbox, "slow", &config, &[]).await;
    serve
        .wait_status("slow", "slow is Synced", |s| s["sync"] == "Synced")
        .await;

    // Every answer now takes LATENCY: the next pass (an inventory read, three dry
    // runs, three applies, an inventory write) needs several times the budget.
    sandbox.sandbox.set_latency(LATENCY);
    for i in 0..3 {
        origin.repo.write(
            &format!("slow/cm-{i}.yaml"),
            &configmap(&format!("cm-{i}"), "slow", "2"),
        );
    }
    origin.repo.commit("slow 2");
    sandbox.sandbox.reset_requests();
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);
    eventually("the pass sends its first dry run", || async {
        (sandbox.sandbox.requests().verb("dryrun:patch") > 0).then_some(())
    })
    .await;

    let sent = std::time::Instant::now();
    serve.signal("TERM");
    let status = tokio::time::timeout(BUDGET + Duration::from_secs(10), serve.child.wait())
        .await
        .expect("tether serve stops after SIGTERM")
        .expect("wait");
    let took = sent.elapsed();
    let log = serve.log();
    assert_eq!(status.code(), Some(0), "{log}");
    // The budget, plus the second the stop may overrun it, plus process exit.
    assert!(
        took < BUDGET + Duration::from_millis(1500),
        "stopped after {took:?}, budget {BUDGET:?}:\n{log}"
    );
    assert!(
        log.contains("pass did not finish in time; stopping it"),
        "a pass was in flight and was cut off:\n{log}"
    );
    // Cut off before it could apply everything.
    sandbox.sandbox.set_latency(Duration::ZERO);
    let mut applied = 0;
    for i in 0..3 {
        if data_key(&sandbox, &format!("cm-{i}"), "slow")
            .await
            .as_deref()
            == Some("2")
        {
            applied += 1;
        }
    }
    assert!(applied < 3, "the whole pass ran: {log}");
}

/// The Deployment `web` (2 replicas) in `namespace`, as the heal tests keep it in Git.
/// Heals skip the pass queue, but not without bound: an emptied namespace wakes every
/// app at once, and at most `concurrency × 4` heals (here 4) write at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_live_changes_heals_a_bounded_number_of_apps_at_once() {
    const APPS: usize = 12;
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("storm").await;
    let files: Vec<(String, String)> = (0..APPS)
        .map(|i| {
            let name = format!("storm-{i}");
            (format!("{name}/cm.yaml"), configmap(&name, "storm", "1"))
        })
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let origin = origin(&sandbox, &files);
    let server = server_section(sandbox.dir.path());
    let apps: String = (0..APPS)
        .map(|i| {
            format!(
                "- name: storm-{i}\n  source: {{repo: \"{}\", ref: main, path: storm-{i}, interval: {POLL}}}\n  destination: {{namespace: storm}}\n  sync: {{automated: true, selfHeal: true}}\n",
                origin.url
            )
        })
        .collect();
    let config = format!("{server}concurrency: 1\napps:\n{apps}");
    let serve = Serve::start(&sandbox, "storm", &config, &[]).await;
    for i in 0..APPS {
        let app = format!("storm-{i}");
        serve
            .wait_status(&app, "every app Synced", |s| s["sync"] == "Synced")
            .await;
    }

    // Every write takes 200 ms, so unbounded heals would all be in flight together.
    sandbox.sandbox.set_latency(Duration::from_millis(200));
    sandbox.sandbox.reset_requests();
    let emptied = sandbox
        .delete("/api/v1/namespaces/storm/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dtether")
        .await;
    assert!(emptied.status.is_success(), "{:?}", emptied.status);
    // The deletecollection's watch events wake the heals a moment before its own answer
    // leaves, so the peak starts again once it has; the heals are all still in their
    // 200 ms. Counted in-process, so this test's own reads do not add to the peak.
    sandbox.sandbox.reset_peak_in_flight();
    eventually("every app has written its heal", || async {
        let heals = sandbox
            .sandbox
            .writes()
            .iter()
            .filter(|w| w.verb == "patch" && w.path.contains("/configmaps/storm-"))
            .count();
        (heals == APPS).then_some(())
    })
    .await;
    let requests = sandbox.sandbox.requests();
    let log = serve.log();
    assert_eq!(
        requests.verb("dryrun:patch"),
        0,
        "healed, not passed: {requests:?}\n{log}"
    );
    let peak = sandbox.sandbox.peak_in_flight();
    assert!(peak <= 4, "{peak} requests at once: {requests:?}\n{log}");
    assert!(
        peak >= 2,
        "the heals ran one by one ({peak}): {requests:?}\n{log}"
    );
    sandbox.sandbox.set_latency(Duration::ZERO);
    for i in 0..APPS {
        let name = format!("storm-{i}");
        assert_eq!(
            data_key(&sandbox, &name, "storm").await.as_deref(),
            Some("1"),
            "{name}"
        );
    }
    sandbox.sandbox.set_latency(Duration::ZERO);
    assert_eq!(serve.stop().await, Some(0));
}

fn web_deployment(namespace: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {namespace}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n"
    )
}

/// Issue #18: a heal of a revision already applied in full costs one request, the
/// apply: the server validated that manifest when the revision was applied, so no dry
/// run precedes it, and the pass the heal's own write wakes writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaled_deployment_is_healed_with_one_apply_and_no_dry_run() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("heal").await;
    let origin = origin(&sandbox, &[("heal/web.yaml", &web_deployment("heal"))]);
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: heal\n  source: {{repo: \"{}\", ref: main, path: heal, interval: {POLL}}}\n  destination: {{namespace: heal}}\n  sync: {{automated: true, selfHeal: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "heal", &config, &[]).await;
    serve
        .wait_status("heal", "heal is Synced", |s| s["sync"] == "Synced")
        .await;
    let replicas = || async {
        let out = sandbox
            .kubectl(&[
                "get",
                "deployment",
                "web",
                "-n",
                "heal",
                "-o",
                "jsonpath={.spec.replicas}",
            ])
            .await;
        out.stdout.trim().to_string()
    };
    // The pass the first apply woke has run: nothing is pending.
    tokio::time::sleep(Duration::from_millis(500)).await;

    sandbox.sandbox.reset_requests();
    let scaled = sandbox
        .kubectl(&["scale", "deployment", "web", "-n", "heal", "--replicas=5"])
        .await;
    assert_eq!(scaled.code, 0, "{}", scaled.stderr);
    eventually("the scale is healed", || async {
        (replicas().await == "2").then_some(())
    })
    .await;
    // The pass the heal's own write wakes finds the app in sync.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requests = sandbox.sandbox.requests();
    let log = serve.log();
    assert_eq!(requests.verb("dryrun:patch"), 0, "{requests:?}\n{log}");
    // kubectl's scale, and the heal's apply; plus one apply for each the Deployment
    // controller's status write made conflict (the pass reads again and applies again).
    let conflicts = log.matches("the object has been modified").count() as u64;
    assert_eq!(
        requests.writes(),
        2 + conflicts,
        "one apply heals: {requests:?}\n{log}"
    );
    assert!(
        requests.get("patch", "apps/deployments") >= 1,
        "{requests:?}"
    );
    let status = serve
        .wait_status("heal", "heal is Synced again", |s| s["sync"] == "Synced")
        .await;
    assert_eq!(status["lastPass"]["result"], "Succeeded", "{status}");

    // A deleted one is recreated the same way: one apply, no dry run.
    let uid = || async {
        sandbox
            .kubectl(&[
                "get",
                "deployment",
                "web",
                "-n",
                "heal",
                "-o",
                "jsonpath={.metadata.uid}",
            ])
            .await
            .stdout
            .trim()
            .to_string()
    };
    let deleted = uid().await;
    sandbox.sandbox.reset_requests();
    let gone = sandbox
        .kubectl(&["delete", "deployment", "web", "-n", "heal", "--wait=false"])
        .await;
    assert_eq!(gone.code, 0, "{}", gone.stderr);
    eventually("the deleted Deployment is back", || async {
        let now = uid().await;
        (!now.is_empty() && now != deleted).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requests = sandbox.sandbox.requests();
    let log = serve.log();
    assert_eq!(requests.verb("dryrun:patch"), 0, "{requests:?}\n{log}");
    // kubectl's delete, and the heal's apply.
    assert_eq!(requests.writes(), 2, "{requests:?}\n{log}");
    assert_eq!(
        requests.get("delete", "apps/deployments"),
        1,
        "{requests:?}"
    );
}

/// Issue #18, the failure path of a heal without a dry run: without `force`, a field
/// another manager took (a `kubectl scale`) makes the apply a conflict. The heal is
/// reported failed and retried, and nothing is written meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heal_refused_as_a_conflict_is_reported_failed_and_writes_nothing() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("held").await;
    let origin = origin(&sandbox, &[("held/web.yaml", &web_deployment("held"))]);
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: held\n  source: {{repo: \"{}\", ref: main, path: held, interval: {POLL}}}\n  destination: {{namespace: held}}\n  sync: {{automated: true, selfHeal: true, force: false}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "held", &config, &[]).await;
    serve
        .wait_status("held", "held is Synced", |s| s["sync"] == "Synced")
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    sandbox.sandbox.reset_requests();
    let scaled = sandbox
        .kubectl(&["scale", "deployment", "web", "-n", "held", "--replicas=5"])
        .await;
    assert_eq!(scaled.code, 0, "{}", scaled.stderr);
    let status = serve
        .wait_status("held", "the heal fails", |s| {
            s["lastPass"]["result"] == "Failed"
        })
        .await;
    let error = status["lastPass"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("conflict"), "{status}");
    let replicas = sandbox
        .kubectl(&[
            "get",
            "deployment",
            "web",
            "-n",
            "held",
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .await;
    assert_eq!(replicas.stdout.trim(), "5");
    let requests = sandbox.sandbox.requests();
    // kubectl's scale only; the refused apply changed nothing.
    assert_eq!(requests.verb("dryrun:patch"), 0, "{requests:?}");
    assert!(
        requests.get("patch", "apps/deployments") <= 2,
        "{requests:?}"
    );
}

/// Issue #18: a heal starts on the watch event, without waiting behind other apps'
/// passes. With one pass at a time (`concurrency: 1`), another app's pass is stuck
/// in a slow render (a `kubectl` on PATH that sleeps before `kubectl kustomize`);
/// an edit of this app's ConfigMap is healed while that pass still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heal_does_not_wait_behind_a_slow_pass_of_another_app() {
    const RENDER_DELAY: Duration = Duration::from_secs(5);
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("quick").await;
    sandbox.namespace("slow").await;
    let dir = sandbox.dir.path();
    let origin = origin(
        &sandbox,
        &[("quick/cm.yaml", &configmap("cm", "quick", "git"))],
    );
    // The slow app has a repository of its own: its new commit moves it alone.
    let slow = GitRepo::init(dir.join("srv/slow.git"));
    slow.write("app/kustomization.yaml", "resources:\n  - cm.yaml\n");
    slow.write("app/cm.yaml", &configmap("cm", "slow", "1"));
    slow.commit("first");
    let slow_url = origin.url.replace("apps.git", "slow.git");

    let real = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl on PATH");
    let bin = dir.join("slow-bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let (marker, rendering) = (dir.join("render-slowly"), dir.join("rendering"));
    let script = bin.join("kubectl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = kustomize ] && [ -e '{marker}' ]; then\n  touch '{rendering}'\n  sleep {delay}\n  rm -f '{rendering}'\nfi\nexec '{real}' \"$@\"\n",
            marker = marker.display(),
            rendering = rendering.display(),
            delay = RENDER_DELAY.as_secs(),
            real = real.display(),
        ),
    )
    .expect("write the kubectl wrapper");
    let mut mode = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&script, mode).expect("chmod");
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");

    let server = server_section(dir);
    let config = format!(
        "{server}concurrency: 1\napps:\n- name: quick\n  source: {{repo: \"{}\", ref: main, path: quick, interval: {POLL}}}\n  destination: {{namespace: quick}}\n  sync: {{automated: true, selfHeal: true}}\n- name: slow\n  source: {{repo: \"{slow_url}\", ref: main, path: app, interval: {POLL}}}\n  destination: {{namespace: slow}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let path = path.to_string_lossy().into_owned();
    let serve = Serve::start_with_env(&sandbox, "wait", &config, &[], &[("PATH", path)]).await;
    for app in ["quick", "slow"] {
        serve
            .wait_status(app, "both apps are Synced", |s| s["sync"] == "Synced")
            .await;
    }

    // The slow app's next commit renders slowly, holding the only pass permit.
    std::fs::write(&marker, "").expect("marker");
    slow.write("app/cm.yaml", &configmap("cm", "slow", "2"));
    slow.commit("second");
    assert_eq!(serve.push(&slow_url).await, reqwest::StatusCode::ACCEPTED);
    eventually("the slow app's pass is rendering", || async {
        rendering.exists().then_some(())
    })
    .await;

    let began = std::time::Instant::now();
    let edited = sandbox
        .kubectl(&[
            "patch",
            "configmap",
            "cm",
            "-n",
            "quick",
            "--type=merge",
            "-p",
            r#"{"data":{"key":"edited"}}"#,
        ])
        .await;
    assert_eq!(edited.code, 0, "{}", edited.stderr);
    eventually("the edit is healed", || async {
        (data_key(&sandbox, "cm", "quick").await.as_deref() == Some("git")).then_some(())
    })
    .await;
    let took = began.elapsed();
    let log = serve.log();
    assert!(
        rendering.exists(),
        "healed in {took:?}, but only after the slow pass ended:\n{log}"
    );
    assert!(took < RENDER_DELAY / 2, "healed in {took:?}:\n{log}");

    // The slow pass itself completes, as it would have.
    std::fs::remove_file(&marker).expect("remove marker");
    eventually("the slow app's second commit is applied", || async {
        (data_key(&sandbox, "cm", "slow").await.as_deref() == Some("2")).then_some(())
    })
    .await;
    let status = serve.status("quick").await;
    assert_eq!(status["sync"], "Synced", "{status}");
}

/// Issue #18: a resync (a full pass with nothing changed) reads everything it needs
/// from the watch cache, the inventory as last written and the manifests kept for
/// the commit: over several resync intervals the app passes again and again, and
/// the API server sees no request but the open watches, and no write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_makes_no_request_and_no_write() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("still").await;
    let origin = origin(
        &sandbox,
        &[
            ("still/cm.yaml", &configmap("cm", "still", "git")),
            ("still/web.yaml", &web_deployment("still")),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}resyncInterval: 1s\napps:\n- name: still\n  source: {{repo: \"{}\", ref: main, path: still, interval: {POLL}}}\n  destination: {{namespace: still}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "still", &config, &[]).await;
    serve
        .wait_status("still", "still is Synced and Healthy", |s| {
            s["sync"] == "Synced" && s["health"] == "Healthy"
        })
        .await;
    // The Deployment controller's status writes settle.
    tokio::time::sleep(Duration::from_secs(1)).await;

    sandbox.sandbox.reset_requests();
    let before = serve.status("still").await["history"]
        .as_array()
        .map_or(0, Vec::len);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let status = serve.status("still").await;
    let after = status["history"].as_array().map_or(0, Vec::len);
    let requests = sandbox.sandbox.requests();
    let log = serve.log();
    assert!(
        after >= before + 2,
        "resyncs ran: {before} → {after}\n{log}"
    );
    assert_eq!(status["sync"], "Synced", "{status}");
    assert_eq!(status["lastPass"]["result"], "Succeeded", "{status}");
    assert_eq!(requests.writes(), 0, "{requests:?}\n{log}");
    assert_eq!(
        requests.total(),
        requests.verb("watch"),
        "only watches: {requests:?}\n{log}"
    );
}

/// Issue #12: without `server.apiToken` the status API (which triggers syncs and shows
/// drifted values) does not listen beyond loopback unless the file says the network
/// is trusted; the refusal is a configuration error (exit 2) naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_api_beyond_loopback_needs_insecure_open_api() {
    let sandbox = TestSandbox::start().await;
    let dir = sandbox.dir.path();
    // Never bound: the first file is refused before the bind, and the second names an
    // address no interface here has.
    let port = 18080;
    let path = dir.join("open.yaml");
    std::fs::write(
        &path,
        format!("server:\n  listen: \"0.0.0.0:{port}\"\napps: []\n"),
    )
    .expect("write config");
    let refused = serve_once(&sandbox, &path).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:2: server.listen: 0.0.0.0:{port} is reachable from other hosts and server.apiToken is not set",
            path.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("server.insecureOpenAPI: true"), "{stderr}");

    // Said on purpose, the configuration is accepted and the warning logged; the
    // service then goes on to bind. Tests listen on 127.0.0.1 only, so the address is
    // one no interface here has (TEST-NET-1, RFC 5737): the bind, not the
    // configuration, is what fails.
    std::fs::write(
        &path,
        format!("server:\n  listen: \"192.0.2.1:{port}\"\n  insecureOpenAPI: true\napps: []\n"),
    )
    .expect("write config");
    let allowed = serve_once(&sandbox, &path).await;
    let stderr = String::from_utf8_lossy(&allowed.stderr);
    assert!(!stderr.contains("server.listen:"), "{stderr}");
    assert!(
        stderr.contains("server.insecureOpenAPI: the status API (/api/v1) can trigger syncs"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("cannot listen on 192.0.2.1:{port}")),
        "{stderr}"
    );
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

/// Issue #12: a source that stops answering keeps the app at its last good revision,
/// and says so: `source.failingSince` (also SourceReady's lastTransitionTime and, as
/// `since …`, its message), STALE in `tether status`, and one `sourceStale`
/// notification once it has failed for `staleAfter`. When the Git host is back, the
/// app follows the commit it missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_source_shows_its_age_keeps_the_last_revision_and_recovers() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("stale").await;
    let root = sandbox.dir.path().join("srv");
    let repo = GitRepo::init(root.join("apps.git"));
    repo.write("stale/cm.yaml", &configmap("web", "stale", "1"));
    let first = repo.commit("first");
    let mut daemon = GitDaemon::start(&root);
    let url = daemon.url("apps.git");
    let hooks = Recorder::start().await;
    let server = server_section(sandbox.dir.path());
    // Polled every 100 ms (below the minimum interval, lowered for the test), so
    // failures (and the recovery, within the failures' backoff) are seen without webhooks.
    let config = format!(
        "sources: {{minInterval: 100ms}}\n{server}apps:\n- name: web\n  source: {{repo: \"{url}\", ref: main, path: stale, interval: 100ms, staleAfter: 2s}}\n  destination: {{namespace: stale}}\n  sync: {{automated: true}}\n  notifications:\n  - {{type: webhook, url: \"{}/hook\", events: [sourceStale], minInterval: 0s}}\n",
        hooks.base
    );
    let serve = Serve::start(&sandbox, "stale", &config, &[]).await;
    let synced = serve
        .wait_status("web", "web is Synced", |s| {
            s["sync"] == "Synced" && s["source"]["ready"] == true
        })
        .await;
    assert!(synced["source"]["lastSuccess"].is_string(), "{synced}");
    assert!(synced["source"].get("failingSince").is_none(), "{synced}");

    daemon.stop();
    let failing = serve
        .wait_status("web", "the source fails", |s| s["source"]["ready"] == false)
        .await;
    let source = &failing["source"];
    let since = source["failingSince"]
        .as_str()
        .unwrap_or_else(|| panic!("no failingSince: {failing}"))
        .to_string();
    assert!(source["reason"].is_string(), "{failing}");
    assert!(source["message"].is_string(), "{failing}");
    assert!(source["lastSuccess"].is_string(), "{failing}");
    let condition = failing["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == "SourceReady"))
        .unwrap_or_else(|| panic!("no SourceReady: {failing}"))
        .clone();
    assert_eq!(condition["status"], "False", "{condition}");
    assert_eq!(condition["reason"], source["reason"], "{failing}");
    let since_time = chrono::DateTime::parse_from_rfc3339(&since).expect("an RFC 3339 time");
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(
            condition["lastTransitionTime"].as_str().unwrap_or("")
        )
        .ok(),
        Some(since_time),
        "{condition}"
    );
    let shown = since_time
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert!(
        condition["message"]
            .as_str()
            .is_some_and(|m| m.ends_with(&format!("(since {shown})"))),
        "{condition}"
    );
    // The last good revision is still the one synced.
    assert_eq!(failing["revision"]["sha"], first.as_str(), "{failing}");
    assert_eq!(failing["sync"], "Synced", "{failing}");
    assert_eq!(
        data_key(&sandbox, "web", "stale").await.as_deref(),
        Some("1")
    );

    // Past staleAfter: stale, in the API, in `tether status`, and announced once.
    let stale = serve
        .wait_status("web", "the source is stale", |s| {
            s["source"]["stale"] == true
        })
        .await;
    assert_eq!(stale["source"]["failingSince"], since.as_str(), "{stale}");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["status", "--server", &serve.url])
        .output()
        .await
        .expect("tether status runs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|row| row.contains(" STALE ")),
        "{table}"
    );
    let announced = eventually("the sourceStale notification", || async {
        hooks
            .seen()
            .into_iter()
            .find(|r| r.json()["event"] == "sourceStale")
    })
    .await;
    let body = announced.json();
    assert_eq!(body["app"], "web", "{body}");
    assert_eq!(body["revision"]["sha"], first.as_str(), "{body}");
    assert_eq!(body["reason"], source["reason"], "{body}");
    // Two more failed polls, each followed by a pass, send nothing more.
    let finished = |s: &Value| s["lastPass"]["finishedAt"].as_str().map(str::to_string);
    let mut last = finished(&serve.status("web").await);
    for _ in 0..2 {
        let passed = serve
            .wait_status("web", "another pass while failing", |s| {
                finished(s) != last && s["source"]["ready"] == false
            })
            .await;
        last = finished(&passed);
    }
    assert_eq!(hooks.seen().len(), 1, "{:?}", hooks.seen());

    // The Git host comes back, with a commit made meanwhile.
    repo.write("stale/cm.yaml", &configmap("web", "stale", "2"));
    let second = repo.commit("second");
    daemon.restart();
    let recovered = serve
        .wait_status("web", "the app follows the missed commit", |s| {
            s["source"]["ready"] == true
                && s["revision"]["sha"] == second.as_str()
                && s["sync"] == "Synced"
        })
        .await;
    assert!(
        recovered["source"].get("failingSince").is_none(),
        "{recovered}"
    );
    assert_eq!(recovered["source"]["stale"], false, "{recovered}");
    assert!(
        recovered["conditions"].as_array().is_some_and(|all| all
            .iter()
            .any(|c| c["type"] == "SourceReady" && c["status"] == "True")),
        "{recovered}"
    );
    assert_eq!(
        data_key(&sandbox, "web", "stale").await.as_deref(),
        Some("2")
    );
    assert_eq!(serve.stop().await, Some(0));
}

/// The condition of `kind` in an app's status.
fn condition(status: &Value, kind: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} condition: {status}"))
        .clone()
}

/// Issue #12: an app stalled on a refusal a retry cannot fix (its namespace is missing)
/// is not retried by passes, but a manual sync retries it: once the cause is fixed in
/// the cluster (no new commit), `POST /api/v1/apps/{name}/sync` brings it to Synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_app_is_retried_by_a_manual_sync_after_the_cluster_is_fixed() {
    let sandbox = TestSandbox::start().await;
    let origin = origin(
        &sandbox,
        &[("later/cm.yaml", &configmap("web", "later", "1"))],
    );
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: web\n  source: {{repo: \"{}\", ref: main, path: later, interval: {POLL}}}\n  destination: {{namespace: later}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "stall", &config, &[]).await;
    let stalled = serve
        .wait_status("web", "web stalls", |s| {
            s["lastPass"]["result"] == "Stalled"
        })
        .await;
    let ready = condition(&stalled, "Ready");
    let stall = condition(&stalled, "Stalled");
    assert_eq!(ready["status"], "False", "{stalled}");
    assert_eq!(ready["reason"], "ValidationFailed", "{stalled}");
    assert_eq!(stall["status"], "True", "{stalled}");
    assert_eq!(stall["reason"], "ValidationFailed", "{stalled}");
    assert!(
        stall["message"]
            .as_str()
            .is_some_and(|m| m.contains("namespace \"later\" neither exists")),
        "{stalled}"
    );
    assert!(stalled.get("nextAttempt").is_none(), "{stalled}");

    // Fixed in the cluster; the revision is the same, so the stall holds until asked.
    sandbox.namespace("later").await;
    assert_eq!(data_key(&sandbox, "web", "later").await, None);
    let sync = reqwest::Client::new()
        .post(format!("{}/api/v1/apps/web/sync", serve.url))
        .send()
        .await
        .expect("manual sync");
    assert_eq!(sync.status(), reqwest::StatusCode::ACCEPTED);
    let synced = serve
        .wait_status("web", "web leaves Stalled and syncs", |s| {
            s["sync"] == "Synced" && s["lastPass"]["result"] == "Succeeded"
        })
        .await;
    assert_eq!(condition(&synced, "Ready")["status"], "True", "{synced}");
    assert_eq!(condition(&synced, "Stalled")["status"], "False", "{synced}");
    assert_eq!(
        data_key(&sandbox, "web", "later").await.as_deref(),
        Some("1")
    );
    assert_eq!(serve.stop().await, Some(0));
}

/// Issue #14: a Kustomize overlay from Git is served to Synced, rendered once for its
/// commit (a pass with no new commit runs no renderer), and a broken overlay stalls
/// with `ManifestInvalid` naming the path and kustomize's error, applying nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kustomize_overlay_is_served_rendered_once_per_commit_and_a_broken_one_stalls() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("shop").await;
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/apps/kustomize");
    let read = |rel: &str| std::fs::read_to_string(example.join(rel)).expect("example file");
    let files = [
        ("base/kustomization.yaml", read("base/kustomization.yaml")),
        ("base/deployment.yaml", read("base/deployment.yaml")),
        ("base/service.yaml", read("base/service.yaml")),
        (
            "overlays/production/kustomization.yaml",
            read("overlays/production/kustomization.yaml"),
        ),
        (
            "overlays/broken/kustomization.yaml",
            "resources:\n  - ../../base\n  - unnamed.yaml\n".to_string(),
        ),
        // An object without a name: kustomize itself refuses it.
        (
            "overlays/broken/unnamed.yaml",
            "apiVersion: v1\nkind: ConfigMap\n".to_string(),
        ),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let origin = origin(&sandbox, &files);
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: shop\n  source: {{repo: \"{url}\", ref: main, path: overlays/production, interval: {POLL}}}\n  destination: {{namespace: shop}}\n  sync: {{automated: true}}\n- name: broken\n  source: {{repo: \"{url}\", ref: main, path: overlays/broken, interval: {POLL}}}\n  destination: {{namespace: shop}}\n  sync: {{automated: true}}\n",
        url = origin.url
    );
    let serve = Serve::start(&sandbox, "kustomize", &config, &[]).await;
    let synced = serve
        .wait_status("shop", "shop is Synced", |s| s["sync"] == "Synced")
        .await;
    let first_pass = synced["lastPass"]["finishedAt"].clone();
    let rendered = |log: &str| {
        log.lines()
            .filter(|l| l.contains("rendered") && l.contains("overlays/production"))
            .count()
    };
    assert_eq!(rendered(&serve.log()), 1, "{}", serve.log());

    // Another pass at the same commit reads the parsed objects it kept.
    let sync = reqwest::Client::new()
        .post(format!("{}/api/v1/apps/shop/sync", serve.url))
        .send()
        .await
        .expect("manual sync");
    assert_eq!(sync.status(), reqwest::StatusCode::ACCEPTED);
    serve
        .wait_status("shop", "a second pass ran", |s| {
            s["lastPass"]["finishedAt"] != first_pass && s["lastPass"]["result"] == "Succeeded"
        })
        .await;
    assert_eq!(rendered(&serve.log()), 1, "{}", serve.log());

    let stalled = serve
        .wait_status("broken", "broken stalls", |s| {
            s["lastPass"]["result"] == "Stalled"
        })
        .await;
    let stall = condition(&stalled, "Stalled");
    assert_eq!(stall["reason"], "ManifestInvalid", "{stalled}");
    assert!(
        stall["message"]
            .as_str()
            .is_some_and(|m| m.contains("overlays/broken: kustomize build failed: ")),
        "{stalled}"
    );
    assert_eq!(stalled["sync"], "Unknown", "{stalled}");
    assert_eq!(serve.stop().await, Some(0));
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
