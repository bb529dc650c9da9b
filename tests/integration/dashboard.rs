//! The web dashboard (issue #17) in a real headless Chromium, driven over WebDriver:
//! against `tether serve` on the sandbox, the apps view shows the quickstart's app
//! Synced/Healthy, a `kubectl scale` turns it OutOfSync live (no reload), the app
//! view shows the drifted field with both values and the manager that changed it, a
//! wrong token is refused and Sync with the right one brings it back; and with a
//! thousand apps, the page's weight and first paint.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether::sandbox::SandboxOptions;

use crate::dashboard_load::{FIGURES, NoWorkers, many_app_statuses};
use crate::serve::{Serve, origin};
use crate::support::TestSandbox;
use crate::webdriver::Browser;

const TOKEN: &str = "dashboard-t0ken";
const APP: &str = "hello";
const NAMESPACE: &str = "hello";

/// The dashboard's figures (issue #17): what a thousand apps may cost the browser.
const BYTES_BUDGET: f64 = 200.0 * 1024.0;
/// First paint must be under 300 ms; the test allows more so a loaded machine does
/// not fail it, and prints the figure (`benches/dashboard.rs` reports it properly).
const PAINT_ALLOWANCE_MS: f64 = 2500.0;
/// An event reaches the page within a second of the status changing; allowed more
/// here for the same reason.
const LIVE_ALLOWANCE: Duration = Duration::from_secs(3);

fn screenshot_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// The text of the apps view's cell `column` (1-based, after the name) for `app`.
const CELL: &str = "const row = document.querySelector(`tr[data-app=\"${arguments[0]}\"]`); \
     return row ? row.children[arguments[1]].innerText.trim() : null;";

async fn api_status(serve: &Serve) -> Value {
    reqwest::Client::new()
        .get(format!("{}/api/v1/apps/{APP}", serve.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the status API answers")
        .json()
        .await
        .expect("status is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_drift_live_with_its_author_and_syncs_with_a_token() {
    let sandbox = TestSandbox::start_with(SandboxOptions {
        simulate_controllers: Some(Duration::from_millis(50)),
        ..SandboxOptions::default()
    })
    .await;
    sandbox.namespace(NAMESPACE).await;
    let plain = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/apps/plain");
    let files: Vec<(String, String)> = ["configmap.yaml", "deployment.yaml", "service.yaml"]
        .iter()
        .map(|f| {
            (
                format!("apps/hello/{f}"),
                std::fs::read_to_string(plain.join(f)).expect("the quickstart's app"),
            )
        })
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let origin = origin(&sandbox, &files);
    let dir = sandbox.dir.path();
    let token_file = dir.join("api-token");
    std::fs::write(&token_file, TOKEN).expect("write the token");
    // selfHeal off: a live change is reported, and stays until someone syncs.
    let config = format!(
        "server:\n  listen: 127.0.0.1:0\n  apiToken: {{secretFile: {}}}\napps:\n- name: {APP}\n  source: {{repo: \"{}\", ref: main, path: apps/hello, interval: 1h}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true, prune: true, selfHeal: false}}\n",
        token_file.display(),
        origin.url
    );
    let serve = Serve::start(&sandbox, "dashboard", &config, &[]).await;
    crate::support::eventually("hello is Synced and Healthy", || async {
        let s = api_status(&serve).await;
        (s["sync"] == "Synced" && s["health"] == "Healthy").then_some(())
    })
    .await;

    let browser = Browser::start().await;
    browser.goto(&format!("{}/", serve.url)).await;

    // The API needs the token: the page asks for it, and a wrong one is refused.
    browser
        .wait_for(
            "the token prompt",
            "return document.getElementById('token-dialog').open",
            json!([]),
        )
        .await;
    browser.type_into("#token-input", "not-the-token").await;
    browser.click("#token-save").await;
    let refused = browser
        .wait_for(
            "the wrong token refused",
            "const m = document.getElementById('token-message'); \
             return document.getElementById('token-dialog').open && m.classList.contains('error') && m.textContent",
            json!([]),
        )
        .await;
    assert!(refused.as_str().unwrap().contains("refused"), "{refused}");
    let rows = browser
        .eval(
            "return document.querySelectorAll('tr[data-app]').length",
            json!([]),
        )
        .await;
    assert_eq!(rows, 0, "nothing is shown without the token");
    browser.type_into("#token-input", TOKEN).await;
    browser.click("#token-save").await;

    // The apps view: the quickstart's app, Synced and Healthy.
    let sync = browser.wait_for("hello's row", CELL, json!([APP, 1])).await;
    assert_eq!(sync, "Synced");
    assert_eq!(browser.eval(CELL, json!([APP, 2])).await, "Healthy");
    let revision = browser.eval(CELL, json!([APP, 3])).await;
    assert!(revision.as_str().unwrap().contains("first"), "{revision}");
    browser
        .wait_for(
            "the live stream connected",
            "return document.getElementById('live').textContent === 'live'",
            json!([]),
        )
        .await;
    browser
        .screenshot(&screenshot_path("dashboard-apps.png"))
        .await;
    // Marks this page load: a reload would lose it.
    browser.eval("window.__sameLoad = true", json!([])).await;

    // A live change: the row turns OutOfSync without a reload, within the allowance
    // of the status changing.
    sandbox
        .kubectl(&[
            "scale",
            "deployment",
            "hello-web",
            "-n",
            NAMESPACE,
            "--replicas=5",
        ])
        .await
        .ok();
    let mut status_at = None;
    let mut page_at = None;
    let deadline = Instant::now() + crate::webdriver::PAGE_TIMEOUT;
    while page_at.is_none() || status_at.is_none() {
        assert!(Instant::now() < deadline, "the drift did not show in time");
        if status_at.is_none() && api_status(&serve).await["sync"] == "OutOfSync" {
            status_at = Some(Instant::now());
        }
        if page_at.is_none() && browser.eval(CELL, json!([APP, 1])).await == "OutOfSync" {
            page_at = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status_at, page_at) = (status_at.unwrap_or_else(Instant::now), page_at.unwrap());
    let lag = page_at.saturating_duration_since(status_at);
    println!("dashboard: the page showed OutOfSync {lag:?} after the status API did");
    assert!(lag < LIVE_ALLOWANCE, "the event took {lag:?}");
    assert_eq!(
        browser
            .eval("return window.__sameLoad === true", json!([]))
            .await,
        true,
        "the page changed without a reload"
    );
    assert_eq!(browser.eval(CELL, json!([APP, 5])).await, "1");

    // Keyboard: the app's link, then Enter, opens the app view.
    browser
        .eval(
            "document.querySelector(`tr[data-app=\"${arguments[0]}\"] a`).focus()",
            json!([APP]),
        )
        .await;
    browser.keys("\u{E007}").await;
    let change = browser
        .wait_for(
            "the drifted field",
            "const row = [...document.querySelectorAll('#drift tbody tr')]\
               .find(r => r.querySelector('th').innerText.trim() === 'spec.replicas'); \
             return row ? [...row.children].map(c => c.innerText.trim()) : null",
            json!([]),
        )
        .await;
    let cells: Vec<&str> = change
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(&cells[..3], ["spec.replicas", "5", "2"], "{change}");
    // kubectl 1.32 scales through the scale subresource as field manager `kubectl`
    // (its user agent: `kubectl scale` sets no --field-manager).
    let manager = cells[3];
    println!("dashboard: spec.replicas {manager}");
    assert!(manager.starts_with("kubectl (Update) at "), "{manager}");
    let api = api_status(&serve).await;
    let by = &api["drifted"][0]["changes"][0]["changedBy"];
    assert_eq!(by["manager"], "kubectl", "{api}");
    assert_eq!(by["operation"], "Update", "{api}");
    let diff = browser
        .eval(
            "return document.querySelector('#drift pre.diff').innerText",
            json!([]),
        )
        .await;
    // The object's unified diff, live to desired, as `tether diff` prints it.
    let diff = diff.as_str().unwrap();
    assert!(diff.starts_with("--- live/Deployment"), "{diff}");
    assert!(
        diff.lines()
            .any(|l| l.starts_with('-') && l.trim_start_matches('-').trim() == "replicas: 5")
            && diff
                .lines()
                .any(|l| l.starts_with('+') && l.trim_start_matches('+').trim() == "replicas: 2"),
        "{diff}"
    );
    let api_diff = api["drifted"][0]["diff"]
        .as_str()
        .expect("the status has the diff");
    assert_eq!(api_diff.trim_end(), diff.trim_end());
    browser
        .screenshot(&screenshot_path("dashboard-app.png"))
        .await;

    // Suspend and resume from the page.
    browser.click("#suspend").await;
    browser
        .wait_for(
            "the app suspended",
            "const b = document.getElementById('suspend'); return b && b.textContent === 'Resume'",
            json!([]),
        )
        .await;
    assert_eq!(
        api_status(&serve).await["automation"]["reason"],
        "suspended from the API: drift is reported, not corrected"
    );
    browser.click("#suspend").await;
    browser
        .wait_for(
            "the app resumed",
            "const b = document.getElementById('suspend'); return b && b.textContent === 'Suspend'",
            json!([]),
        )
        .await;

    // Sync with the token: applied, and the page shows it.
    browser.click("#sync").await;
    browser
        .wait_for(
            "the app Synced again",
            "const h = document.querySelector('main h1'); \
             return h && h.innerText.includes('Synced') && !h.innerText.includes('OutOfSync') \
               && document.getElementById('drift-count').textContent === '0'",
            json!([]),
        )
        .await;
    let replicas = sandbox
        .kubectl(&[
            "get",
            "deployment",
            "hello-web",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .await
        .ok();
    assert_eq!(replicas.stdout, "2");
    let history = browser
        .eval(
            "return document.querySelectorAll('#history tbody tr').length",
            json!([]),
        )
        .await;
    assert!(history.as_u64().unwrap() >= 2, "passes listed: {history}");
    assert!(
        !serve.log().contains(TOKEN),
        "the token appears in no log line"
    );
    // The page's event stream is still open: a stop does not wait it out.
    let stopping = Instant::now();
    assert_eq!(serve.stop().await, Some(0));
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "stopping took {:?} with the dashboard open",
        stopping.elapsed()
    );
    drop(browser);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_apps_fit_the_page_budget() {
    let statuses = many_app_statuses(1000);
    let router = tether::server::router(statuses, Arc::new(NoWorkers), axum::Router::new(), None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let browser = Browser::start().await;
    browser.goto(&format!("http://{address}/")).await;
    browser
        .wait_for(
            "the app list",
            "return performance.getEntriesByName('apps-rendered').length > 0",
            json!([]),
        )
        .await;
    let figures = browser.eval(FIGURES, json!([])).await;
    browser
        .screenshot(&screenshot_path("dashboard-apps-1000.png"))
        .await;
    println!("dashboard with 1,000 apps: {figures}");
    assert_eq!(figures["rows"], 1000, "{figures}");
    let transferred = figures["transferred"].as_f64().unwrap();
    let decoded = figures["decoded"].as_f64().unwrap();
    assert!(transferred > 0.0 && decoded > 0.0, "{figures}");
    assert!(transferred < BYTES_BUDGET, "{figures}");
    let paint = figures["firstContentfulPaint"]
        .as_f64()
        .or_else(|| figures["firstPaint"].as_f64())
        .expect("a paint entry");
    assert!(paint < PAINT_ALLOWANCE_MS, "{figures}");

    // Search and filter narrow the list.
    browser.type_into("#search", "service-0421").await;
    browser
        .wait_for(
            "one app left",
            "return document.querySelectorAll('#app-rows tr[data-app]').length === 1",
            json!([]),
        )
        .await;
    browser
        .eval(
            "const s = document.getElementById('search'); s.value = ''; \
             s.dispatchEvent(new Event('input')); \
             const f = document.getElementById('filter'); f.value = 'OutOfSync'; \
             f.dispatchEvent(new Event('change'))",
            json!([]),
        )
        .await;
    let shown = browser
        .wait_for(
            "the out-of-sync apps",
            "const n = document.querySelectorAll('#app-rows tr[data-app]').length; return n < 1000 && n",
            json!([]),
        )
        .await;
    assert_eq!(shown, 100);
    let client = reqwest::Client::new();
    let bogus = client
        .get(format!("http://{address}/api/v1/apps?view=bogus"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(bogus.status(), reqwest::StatusCode::BAD_REQUEST);
    for action in ["sync", "suspend", "resume"] {
        let unknown = client
            .post(format!("http://{address}/api/v1/apps/nope/{action}"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(unknown.status(), reqwest::StatusCode::NOT_FOUND, "{action}");
    }
    // Every control has a label a screen reader can name.
    let unlabelled = browser
        .eval(
            "return [...document.querySelectorAll('input, select, button')]\
               .filter(e => !(e.labels?.length || e.getAttribute('aria-label') || e.textContent.trim()))\
               .map(e => e.outerHTML)",
            json!([]),
        )
        .await;
    assert_eq!(unlabelled, json!([]));
    drop(browser);
    server.abort();
}

/// "Who changed it" outside the dashboard too: `tether diff` in every format names the
/// field manager of a field edited behind Git's back (`kubectl patch` writes as
/// `kubectl-patch`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tether_diff_names_the_manager_that_changed_each_field() {
    use crate::support::{app_dir, json as run_json, sync_app, tether_app};
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("who").await;
    let dir = app_dir(
        &sandbox,
        "who",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: who\ndata:\n  level: info\n",
        )],
    );
    let synced = sync_app(&sandbox, &dir, "who", &[]).await;
    assert_eq!(synced.code, Some(0), "{synced:?}");
    let in_sync = tether_app(&sandbox, "diff", &dir, "who", &[]).await;
    assert_eq!(in_sync.code, Some(0), "{in_sync:?}");
    sandbox
        .kubectl(&[
            "patch",
            "configmap",
            "settings",
            "-n",
            "who",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"level":"debug"}}"#,
        ])
        .await
        .ok();

    let drift = tether_app(&sandbox, "diff", &dir, "who", &[]).await;
    assert_eq!(drift.code, Some(1), "{drift:?}");
    let report = run_json(&drift);
    let change = &report["resources"][0]["changes"][0];
    assert_eq!(change["path"], "data.level", "{report}");
    assert_eq!(change["live"], "debug");
    assert_eq!(change["changedBy"]["manager"], "kubectl-patch", "{report}");
    assert_eq!(change["changedBy"]["operation"], "Update");
    let time = change["changedBy"]["time"].as_str().expect("a time");
    assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{time}");

    let dir_arg = dir.to_str().expect("utf-8");
    for format in ["text", "markdown"] {
        let run = crate::support::tether(
            &sandbox,
            "diff",
            &["--path", dir_arg, "--app", "who", "-o", format],
        )
        .await;
        assert_eq!(run.code, Some(1), "{run:?}");
        assert!(
            run.stdout
                .contains(&format!("changed by kubectl-patch (Update) at {time}")),
            "-o {format}:\n{}",
            run.stdout
        );
    }
}
