//! What `tether serve` tells the outside: commit statuses and notifications without
//! secret values, the status API behind its token, and an open API beyond loopback only
//! when asked for.

use super::*;
use tether_testkit::assert_contains;

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
    serve.wait_synced("shop").await;
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
    manual_sync(&serve.url, "shop").await;
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
    let (sandbox, origin) = with_origin(
        "guarded",
        &[("apps/web/config.yaml", &configmap("web", "guarded", "v1"))],
    )
    .await;
    let server = server_section_with_token(sandbox.dir.path(), &format!("{TOKEN}\n"));
    let token_file = sandbox.dir.path().join("api-token");
    let config = format!(
        "{server}apps:\n- name: web\n  source: {{repo: \"{}\", ref: main, path: apps/web, interval: {POLL}}}\n  destination: {{namespace: guarded}}\n  sync: {{automated: true}}\n",
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
    assert_contains(
        &String::from_utf8_lossy(&refused.stderr),
        "401 Unauthorized",
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
    assert_contains(
        &stderr,
        "server.insecureOpenAPI: the status API (/api/v1) can trigger syncs",
    );
    assert_contains(&stderr, &format!("cannot listen on 192.0.2.1:{port}"));
}
