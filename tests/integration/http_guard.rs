//! Issue #24, findings 9 and 10, against `tether serve` as a process: the token-less
//! loopback API refuses a cross-site POST (a page's `text/plain` form, no preflight)
//! and a foreign `Host` (DNS rebinding) while the dashboard's own kind of request
//! still works; an App's notification to a loopback address is refused (the listener
//! gets nothing, the log says why) until the operator's allow-list lets it through.

use serde_json::Value;

use crate::app_crd::{SERVICE_ACCOUNT_T1, app_sandbox};
use crate::notify::Recorder;
use crate::serve::{Serve, configmap, origin_http, server_section, with_origin};
use crate::support::{TestSandbox, eventually};

const POLL: &str = "1h";

async fn automation_reason(serve: &Serve) -> String {
    serve.status("web").await["automation"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_post_and_a_rebound_host_are_refused_without_a_token() {
    let (sandbox, origin) = with_origin(
        "guarded",
        &[("apps/web/config.yaml", &configmap("web", "guarded", "v1"))],
    )
    .await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}apps:\n- name: web\n  source: {{repo: \"{}\", ref: main, path: apps/web, interval: {POLL}}}\n  destination: {{namespace: guarded}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    let serve = Serve::start(&sandbox, "guard", &config, &[]).await;
    serve.wait_synced("web").await;
    let client = reqwest::Client::new();
    let suspend = format!("{}/api/v1/apps/web/suspend", serve.url);

    // The page: a form-like POST from another site, which no browser preflights.
    let evil = client
        .post(&suspend)
        .header("origin", "http://evil.example")
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .await
        .expect("an answer");
    assert_eq!(evil.status(), reqwest::StatusCode::FORBIDDEN);
    let body: Value = evil.json().await.expect("JSON");
    assert_eq!(
        body["error"],
        "a cross-site request (Origin http://evil.example) may not change anything here"
    );
    // Same site, but not JSON: what a form on a rebound page would send.
    let form = client
        .post(&suspend)
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("a=b")
        .send()
        .await
        .expect("an answer");
    assert_eq!(form.status(), reqwest::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        !automation_reason(&serve).await.starts_with("suspended"),
        "a refused request suspended the app"
    );

    // DNS rebinding: the attacker's name now points at 127.0.0.1, its Host stays.
    for path in ["/api/v1/apps", "/api/v1/apps/web", "/api/v1/events"] {
        let rebound = client
            .get(format!("{}{path}", serve.url))
            .header("host", "rebind.attacker.example")
            .send()
            .await
            .expect("an answer");
        assert_eq!(rebound.status(), reqwest::StatusCode::FORBIDDEN, "{path}");
        let text = rebound.text().await.expect("a body");
        assert!(!text.contains("guarded"), "{path} leaked: {text}");
    }
    let rebound_post = client
        .post(&suspend)
        .header("host", "rebind.attacker.example:8080")
        .header("origin", "http://rebind.attacker.example:8080")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert_eq!(rebound_post.status(), reqwest::StatusCode::FORBIDDEN);
    assert!(!automation_reason(&serve).await.starts_with("suspended"));

    // What the dashboard sends from its own page works, and so does curl's bare POST.
    let host = serve.url.trim_start_matches("http://").to_string();
    let own = client
        .post(&suspend)
        .header("origin", format!("http://{host}"))
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert_eq!(own.status(), reqwest::StatusCode::OK);
    eventually("web is suspended", || async {
        automation_reason(&serve)
            .await
            .starts_with("suspended")
            .then_some(())
    })
    .await;
    let bare = client
        .post(format!("{}/api/v1/apps/web/resume", serve.url))
        .send()
        .await
        .expect("an answer");
    assert_eq!(bare.status(), reqwest::StatusCode::OK);
    let localhost = client
        .get(format!("{}/api/v1/apps", serve.url))
        .header("host", host.replacen("127.0.0.1", "localhost", 1))
        .send()
        .await
        .expect("an answer");
    assert_eq!(localhost.status(), reqwest::StatusCode::OK);
    assert!(serve.log().contains("refused an API request"));
}

/// An App in `t1` acting as a ServiceAccount with no rights: every pass fails, and
/// each failure is a `syncFailed` notification to `url`.
async fn failing_app(sandbox: &TestSandbox, repo: &str, url: &str) {
    let spec = format!(
        "apiVersion: tether.dev/v1alpha1\nkind: App\nmetadata:\n  name: web\n  namespace: t1\nspec:\n  serviceAccountName: deployer\n  source: {{repo: \"{repo}\", ref: main, path: web, interval: 1h}}\n  destination: {{namespace: t1}}\n  sync: {{automated: true}}\n  notifications:\n  - {{type: webhook, url: \"{url}\", events: [syncFailed], minInterval: 0s}}\n"
    );
    sandbox.kubectl_apply(&spec).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_notification_to_loopback_is_refused_unless_the_operator_allows_it() {
    let sandbox = app_sandbox(&["t1"]).await;
    sandbox.kubectl_apply(SERVICE_ACCOUNT_T1).await;
    let origin = origin_http(&sandbox, &[("web/cm.yaml", &configmap("web", "t1", "v1"))]);
    let internal = Recorder::start().await;
    let url = format!("{}/internal/admin/reset", internal.base);
    failing_app(&sandbox, &origin.url, &url).await;
    let server = server_section(sandbox.dir.path());

    let serve = Serve::start(&sandbox, "outbound", &format!("{server}apps: []\n"), &[]).await;
    eventually("the refused notification is logged", || async {
        let log = serve.log();
        (log.contains("notification not sent")
            && log.contains("a loopback address an App may not reach"))
        .then_some(())
    })
    .await;
    assert!(
        internal.seen().is_empty(),
        "the internal listener was reached: {:?}",
        internal.seen()
    );
    assert!(
        !serve.log().contains("/internal/admin/reset"),
        "the URL is logged"
    );
    drop(serve);

    // The operator lists the address: the same App's notification goes through.
    let allowed = format!("{server}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps: []\n");
    let serve = Serve::start(&sandbox, "outbound-allowed", &allowed, &[]).await;
    let seen = eventually("the allowed notification arrives", || async {
        internal.seen().into_iter().next()
    })
    .await;
    assert_eq!(seen.path, "/internal/admin/reset");
    assert_eq!(seen.json()["event"], "syncFailed", "{}", serve.log());
}
