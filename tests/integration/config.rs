//! The service configuration read from files on disk, then used for real: its app's
//! source fetched from a real git repository, its webhook secrets (read from files)
//! checking deliveries to the real webhook router.

use std::path::Path;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tether_controller::config::{Config, ConfigError};
use tether_core::source::{SourceCache, Triggers, WebhookState, webhook_router};
use tower::ServiceExt;

use crate::support::git;

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

async fn post(
    router: &axum::Router,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> StatusCode {
    let mut req = Request::post(path).header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    router
        .clone()
        .oneshot(req.body(Body::from(body.to_vec())).expect("request"))
        .await
        .expect("response")
        .status()
}

#[tokio::test]
async fn a_config_file_drives_a_real_fetch_and_checks_webhooks_with_its_secrets() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    write(
        &repo.join("apps/web/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
    );
    write(&repo.join("apps/other/cm.yaml"), "kind: ConfigMap\n");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "web"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);

    // Mounted secrets end with a newline; the signature is over the value without it.
    let secrets = tmp.path().join("secrets");
    write(&secrets.join("github"), "gh-secret\n");
    write(&secrets.join("generic"), "generic-secret\n");
    let repo_url = format!("file://{}", repo.display());
    let config_path = tmp.path().join("tether.yaml");
    write(
        &config_path,
        &format!(
            "server:\n  webhooks:\n    github: {{secretFile: {gh}}}\n    generic: {{secretFile: {ge}}}\n\
             apps:\n- name: web\n  source:\n    repo: \"{repo_url}\"\n    ref: main\n    path: apps/web\n    interval: 30s\n",
            gh = secrets.join("github").display(),
            ge = secrets.join("generic").display(),
        ),
    );

    let config = Config::load(&config_path).expect("config loads");
    let app = config.app("web").expect("app web");
    let source = app.source();
    let cache = SourceCache::open(tmp.path().join("cache")).expect("cache");
    let revision = cache.sync(&source).await.expect("fetch");
    assert_eq!(revision.sha, head);
    let files = cache.read_files(&source, &revision).expect("files");
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["apps/web/cm.yaml"]);

    let triggers = Triggers::new();
    triggers.register(&source);
    let webhooks = config.server.webhook_config().expect("secrets read");
    let router = webhook_router(WebhookState::new(webhooks, triggers));

    let push =
        serde_json::to_vec(&serde_json::json!({"repository": repo_url, "ref": "refs/heads/main"}))
            .expect("json");
    let signed =
        |secret: &str| vec![("x-signature", format!("sha256={}", hmac_hex(secret, &push)))];
    assert_eq!(
        post(
            &router,
            "/webhooks/generic",
            &signed("generic-secret"),
            &push
        )
        .await,
        StatusCode::ACCEPTED,
        "a push signed with the configured secret wakes the app's source"
    );
    assert_eq!(
        post(
            &router,
            "/webhooks/generic",
            &signed("generic-secret\n"),
            &push
        )
        .await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post(&router, "/webhooks/generic", &signed("gh-secret"), &push).await,
        StatusCode::UNAUTHORIZED,
        "each provider has its own secret"
    );
    // No secret configured for GitLab and unsigned deliveries not allowed.
    let gitlab = [
        ("x-gitlab-event", "Push Hook".to_string()),
        ("x-gitlab-token", "gh-secret".to_string()),
    ];
    assert_eq!(
        post(&router, "/webhooks/gitlab", &gitlab, &push).await,
        StatusCode::UNAUTHORIZED
    );

    // A secret that is not mounted is an error at start-up naming the file.
    std::fs::remove_file(secrets.join("github")).expect("rm");
    let err = config.server.webhook_config().expect_err("missing secret");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "server.webhooks.github.secretFile: cannot read {}",
            secrets.join("github").display()
        )),
        "{message}"
    );
    assert!(!message.contains("gh-secret"), "{message}");
}

#[test]
fn a_bad_file_names_itself_the_line_and_every_field() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("tether.yaml");
    write(
        &path,
        "apps:\n- name: a\n  source: {repo: r}\n- name: b\n  source:\n    repo: r\n    interval: 1x\n  syncWindows:\n  - {kind: deny, schedule: '0 22 * * *', duration: 8h, timeZone: Europe/Berlln}\n",
    );
    let err = Config::load(&path).expect_err("invalid");
    assert!(matches!(err, ConfigError::Invalid { .. }));
    let shown = path.display();
    assert_eq!(
        err.to_string(),
        format!(
            "{shown}:7: apps[1].source.interval: \"1x\" is not a duration (like 30s, 1m, 1h30m or 500ms)\n\
             {shown}:9: apps[1].syncWindows[0].timeZone: \"Europe/Berlln\" is not an IANA time zone (like Europe/Berlin or UTC)"
        )
    );

    write(
        &path,
        "apps:\n- name: a\n  source: {repo: r, branch: main}\n",
    );
    let err = Config::load(&path).expect_err("unknown key");
    assert_eq!(
        err.to_string(),
        format!(
            "{shown}:3: apps[0].source.branch: unknown field `branch`, expected one of repo, ref, path, interval, staleAfter, credentials, helm, chart, version, verify, oci, tag, digest, dependencyCredentials"
        )
    );
}

/// Parsing, checking and resolving live in separate modules; a problem found by any of
/// them still names the file, the line of the value at fault and its field path, top
/// to bottom, with the problems that have no line (a resolved block) last.
#[test]
fn problems_from_every_section_keep_their_lines() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("tether.yaml");
    write(
        &path,
        "server:\n  listen: \"0.0.0.0:8080\"\n  shutdownTimeout: 0s\nconcurrency: 0\n\
         leaderElection:\n  renewDeadline: 20s\napps:\n- name: web\n  source: {repo: r, interval: 1x}\n\
         \x20 ignoreDifferences:\n  - {kind: Deployment, jsonPointers: [spec/replicas]}\n\
         \x20 syncWindows:\n  - {kind: sometimes, schedule: '0 22 * * *', duration: 1h}\n\
         \x20 notifications:\n  - {type: slack, url: \"https://hooks.slack.com/x\"}\n",
    );
    let err = Config::load(&path).expect_err("invalid");
    let shown = path.display();
    let lines: Vec<String> = err.to_string().lines().map(str::to_string).collect();
    assert_eq!(
        lines,
        [
            format!(
                "{shown}:2: server.listen: 0.0.0.0:8080 is reachable from other hosts and \
                 server.apiToken is not set: the status API could be used by anyone to trigger \
                 syncs and read drifted values; set server.apiToken, listen on 127.0.0.1, or set \
                 server.insecureOpenAPI: true on a trusted network"
            ),
            format!("{shown}:3: server.shutdownTimeout: \"0s\" must be positive"),
            format!("{shown}:4: concurrency: 0 must be at least 1"),
            format!(
                "{shown}:6: leaderElection.renewDeadline: renewDeadline (20s) must be shorter \
                 than leaseDuration (15s, the default)"
            ),
            format!(
                "{shown}:9: apps[0].source.interval: \"1x\" is not a duration (like 30s, 1m, \
                 1h30m or 500ms)"
            ),
            format!(
                "{shown}:11: apps[0].ignoreDifferences[0].jsonPointers[0]: \"spec/replicas\" is \
                 not a JSON pointer to a field (RFC 6901: like /spec/replicas)"
            ),
            format!(
                "{shown}:13: apps[0].syncWindows[0].kind: \"sometimes\" is not a window kind \
                 (allow or deny)"
            ),
            format!(
                "{shown}: apps[0]: notifications[0]: a Slack webhook URL is a secret; give it \
                 with urlEnv or urlFile"
            ),
        ]
    );
}
