//! The web dashboard (issue #17) in a real headless Chromium, driven over WebDriver:
//! against `tether serve` on the sandbox, the apps view shows the quickstart's app
//! Synced/Healthy, a `kubectl scale` turns it OutOfSync live (no reload), the app
//! view shows the drifted field with both values and the manager that changed it, a
//! wrong token is refused and Sync with the right one brings it back; the app view's
//! tree follows ownerReferences (Deployment → ReplicaSet → Pods) and answers the
//! keyboard; closing the token prompt abandons what asked for it; a Suspend outlives
//! a restart (a ConfigMap for a file's app, `spec.suspend` for an App); and with a
//! thousand apps, the page's weight and first paint.
//!
//! `docs/screenshots.sh` (`TETHER_SCREENSHOTS=docs cargo test --test integration
//! dashboard::`) rewrites the README's pictures from the page as it is:
//! `docs/dashboard-apps.png` (a thousand apps), `docs/dashboard-app.png` (an app
//! with drift), `docs/dashboard-tree.png` (its objects' tree), in the light theme,
//! and `docs/dashboard-app-dark.png`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether_sandbox::SandboxOptions;

use crate::dashboard_load::{FIGURES, NoWorkers, many_app_statuses};
use crate::serve::{Origin, Serve, origin, origin_http};
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

/// Where a screenshot goes: the test's scratch directory, or with
/// `TETHER_SCREENSHOTS=docs` the README's own pictures in `docs/`.
fn screenshot_path(name: &str) -> std::path::PathBuf {
    const IN_DOCS: [&str; 4] = [
        "dashboard-apps.png",
        "dashboard-app.png",
        "dashboard-app-dark.png",
        "dashboard-tree.png",
    ];
    let dir = match std::env::var("TETHER_SCREENSHOTS").as_deref() {
        Ok("docs") if IN_DOCS.contains(&name) => {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
        }
        _ => std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
    };
    dir.join(name)
}

/// The quickstart's app in a Git repository, and a configuration serving it with
/// the API token (selfHeal off: a live change is reported, and stays until someone
/// syncs).
fn quickstart(sandbox: &TestSandbox) -> (Origin, String) {
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
    let origin = origin(sandbox, &files);
    let token_file = sandbox.dir.path().join("api-token");
    std::fs::write(&token_file, TOKEN).expect("write the token");
    let config = format!(
        "server:\n  listen: 127.0.0.1:0\n  apiToken: {{secretFile: {}}}\napps:\n- name: {APP}\n  source: {{repo: \"{}\", ref: main, path: apps/hello, interval: 1h}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true, prune: true, selfHeal: false}}\n",
        token_file.display(),
        origin.url
    );
    (origin, config)
}

/// Pods of the Deployment's current ReplicaSet, Running and Ready, as the ReplicaSet
/// controller and the kubelet would make them: the sandbox's controllers make the
/// ReplicaSet, not Pods. Returns the ReplicaSet's name.
async fn make_pods(
    sandbox: &TestSandbox,
    namespace: &str,
    deployment: &str,
    count: usize,
) -> String {
    let rs = crate::support::eventually("the Deployment's ReplicaSet", || async {
        let out = sandbox
            .kubectl(&["get", "replicasets", "-n", namespace, "-o", "json"])
            .await
            .ok();
        let list: Value = serde_json::from_str(&out.stdout).ok()?;
        list["items"]
            .as_array()?
            .iter()
            .find(|rs| {
                rs["metadata"]["ownerReferences"][0]["name"] == deployment
                    && rs["spec"]["replicas"].as_i64().unwrap_or(0) > 0
            })
            .cloned()
    })
    .await;
    let name = rs["metadata"]["name"].as_str().expect("a name").to_string();
    for i in 0..count {
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": format!("{name}-{i}"),
                "namespace": namespace,
                "labels": rs["spec"]["selector"]["matchLabels"],
                "ownerReferences": [{
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": name,
                    "uid": rs["metadata"]["uid"],
                    "controller": true,
                    "blockOwnerDeletion": true,
                }],
            },
            "spec": {"containers": [{"name": "web", "image": "nginxinc/nginx-unprivileged:1.27"}]},
        });
        sandbox
            .kubectl_with_stdin(&["apply", "-f", "-"], Some(&pod.to_string()))
            .await
            .ok();
        sandbox
            .kubectl(&[
                "patch",
                "pod",
                &format!("{name}-{i}"),
                "-n",
                namespace,
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
            ])
            .await
            .ok();
    }
    name
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

/// The quickstart's app served by `tether serve` on a sandbox whose controllers run,
/// once it is Synced and Healthy, with its configuration (the origin repository lives
/// as long as it is kept).
async fn quickstart_served(name: &str) -> (TestSandbox, Origin, String, Serve) {
    let sandbox = TestSandbox::start_with(SandboxOptions {
        simulate_controllers: Some(Duration::from_millis(50)),
        ..SandboxOptions::default()
    })
    .await;
    sandbox.namespace(NAMESPACE).await;
    let (origin, config) = quickstart(&sandbox);
    let serve = Serve::start(&sandbox, name, &config, &[]).await;
    crate::support::eventually("hello is Synced and Healthy", || async {
        let s = api_status(&serve).await;
        (s["sync"] == "Synced" && s["health"] == "Healthy").then_some(())
    })
    .await;
    (sandbox, origin, config, serve)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_drift_live_with_its_author_and_syncs_with_a_token() {
    let (sandbox, _origin, _config, serve) = quickstart_served("dashboard").await;
    // For the app view's tree (and its screenshot).
    make_pods(&sandbox, NAMESPACE, "hello-web", 2).await;

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
        .screenshot(&screenshot_path("dashboard-apps-quickstart.png"))
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
    // Dark, as the system asks.
    let background = "return getComputedStyle(document.body).backgroundColor";
    assert_eq!(
        browser.eval(background, json!([])).await,
        "rgb(255, 255, 255)"
    );
    browser.color_scheme("dark").await;
    assert_eq!(browser.eval(background, json!([])).await, "rgb(13, 17, 23)");
    browser
        .screenshot(&screenshot_path("dashboard-app-dark.png"))
        .await;
    browser.color_scheme("light").await;

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

/// The items of the app view's tree, in order, as `items`:
/// `[level, key, expanded, shown, text]`.
const TREE_ITEMS: &str = "const items = [...document.querySelectorAll('#object-tree [role=treeitem]')]\
     .map(i => [Number(i.getAttribute('aria-level')), i.dataset.key, i.getAttribute('aria-expanded'), \
       !i.closest('[hidden]'), i.querySelector('.node').innerText.replace(/\\s+/g, ' ').trim()]);";

async fn configmap_data(sandbox: &TestSandbox, name: &str) -> Option<Value> {
    let out = sandbox
        .kubectl(&[
            "get",
            "configmap",
            name,
            "-n",
            "tether-system",
            "-o",
            "json",
        ])
        .await;
    let object: Value = serde_json::from_str(&out.stdout).ok()?;
    Some(object["data"].clone())
}

/// Issue #17's last items: the tree of what the app's controllers made, by
/// ownerReferences, as an accessible tree; closing the token prompt leaves the page as
/// it was (with a notice) instead of on "Loading…"; a Suspend is recorded in the
/// cluster, so a restarted `tether serve` still holds the app, and Resume clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_view_shows_its_tree_and_a_suspend_outlives_a_restart() {
    let (sandbox, _origin, config, serve) = quickstart_served("dashboard-tree").await;
    let rs = make_pods(&sandbox, NAMESPACE, "hello-web", 2).await;
    // Each object of the app carries its uid (and owners, where it has them).
    let status = api_status(&serve).await;
    let deployment = status["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["kind"] == "Deployment"))
        .cloned()
        .expect("the Deployment in the status");
    assert!(
        deployment["uid"].as_str().is_some_and(|u| !u.is_empty()),
        "{deployment}"
    );

    let browser = Browser::start().await;
    browser.goto(&format!("{}/#/apps/{APP}", serve.url)).await;
    // Closing the prompt without a token: not "Loading…" for ever, but what the page
    // needs, a notice, and no second prompt from the live stream.
    browser
        .wait_for(
            "the token prompt",
            "return document.getElementById('token-dialog').open",
            json!([]),
        )
        .await;
    browser.click("#token-cancel").await;
    let main = browser
        .wait_for(
            "the page after the prompt closed",
            "const m = document.getElementById('main').innerText; \
             return !document.getElementById('token-dialog').open && !m.includes('Loading') && m",
            json!([]),
        )
        .await;
    assert!(
        main.as_str().unwrap().contains("API token needed"),
        "{main}"
    );
    let notice = browser
        .eval(
            "return document.getElementById('notice').textContent",
            json!([]),
        )
        .await;
    assert!(
        notice.as_str().unwrap().contains("No API token given"),
        "{notice}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        browser
            .eval(
                "return document.getElementById('token-dialog').open",
                json!([])
            )
            .await,
        false,
        "closed means closed: nothing asks again by itself"
    );
    assert_eq!(
        browser
            .eval(
                "return document.getElementById('live').textContent",
                json!([])
            )
            .await,
        "paused: no API token"
    );
    browser.click("#token-again").await;
    browser.type_into("#token-input", TOKEN).await;
    browser.click("#token-save").await;

    // The tree: kinds, the app's objects, and below the Deployment its ReplicaSet and
    // the ReplicaSet's Pods, with their health.
    let deployment_key = format!("Deployment/{NAMESPACE}/hello-web");
    let items = browser
        .wait_for(
            "the Pods in the tree",
            &format!(
                "{TREE_ITEMS} return items.filter(i => i[4].includes('Pod ')).length === 2 && items"
            ),
            json!([]),
        )
        .await;
    println!("dashboard tree: {items}");
    let items: Vec<(u64, String, Value, bool, String)> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i[0].as_u64().unwrap(),
                i[1].as_str().unwrap().to_string(),
                i[2].clone(),
                i[3].as_bool().unwrap(),
                i[4].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let at = items
        .iter()
        .position(|i| i.1 == deployment_key)
        .expect("the Deployment in the tree");
    assert_eq!(items[at].0, 2, "kinds first, then the app's objects");
    assert!(
        items[at].4.starts_with("InSync Healthy Deployment"),
        "{:?}",
        items[at]
    );
    let replica_set = &items[at + 1];
    assert_eq!(replica_set.0, 3);
    assert!(
        replica_set
            .4
            .contains(&format!("ReplicaSet {NAMESPACE}/{rs}")),
        "{replica_set:?}"
    );
    assert!(
        !replica_set.4.contains("InSync"),
        "no standing: not the app's own"
    );
    for (i, pod) in items[at + 2..at + 4].iter().enumerate() {
        assert_eq!(pod.0, 4);
        assert_eq!(pod.4, format!("Healthy Pod {NAMESPACE}/{rs}-{i}"));
    }
    for kind in ["ConfigMap", "Deployment", "Service"] {
        assert!(
            items
                .iter()
                .any(|i| i.0 == 1 && i.1 == format!("kind:{kind}")),
            "{kind}"
        );
    }
    browser
        .eval(
            "document.querySelector('#objects').closest('section').scrollIntoView()",
            json!([]),
        )
        .await;
    browser
        .screenshot(&screenshot_path("dashboard-tree.png"))
        .await;
    let roles = browser
        .eval(
            "const t = document.getElementById('object-tree'); \
             return [t.getAttribute('role'), t.getAttribute('aria-label'), \
               t.querySelectorAll('[role=treeitem][tabindex=\"0\"]').length]",
            json!([]),
        )
        .await;
    assert_eq!(
        roles,
        json!(["tree", "Objects of hello, by kind and owner", 1])
    );

    // The keyboard: Left folds the Deployment, Right unfolds it, Right again enters
    // it, Down walks to the first Pod, Home goes back to the top.
    browser
        .eval(
            "document.querySelector(`[data-key=\"${arguments[0]}\"]`).focus()",
            json!([deployment_key]),
        )
        .await;
    let focused = "return document.activeElement.dataset.key";
    let expanded = "return document.querySelector(`[data-key=\"${arguments[0]}\"]`).getAttribute('aria-expanded')";
    browser.keys("\u{E012}").await; // ArrowLeft
    assert_eq!(
        browser.eval(expanded, json!([deployment_key])).await,
        "false"
    );
    let hidden = browser
        .eval(
            "return [...document.querySelectorAll('#object-tree [role=treeitem]')]\
               .filter(i => i.closest('[hidden]')).length",
            json!([]),
        )
        .await;
    assert_eq!(hidden, 3, "the ReplicaSet and its Pods are folded away");
    browser.keys("\u{E014}").await; // ArrowRight
    assert_eq!(
        browser.eval(expanded, json!([deployment_key])).await,
        "true"
    );
    browser.keys("\u{E014}").await;
    let rs_key = browser.eval(focused, json!([])).await;
    browser.keys("\u{E015}").await; // ArrowDown
    let pod_key = browser.eval(focused, json!([])).await;
    assert_ne!(rs_key, pod_key);
    assert!(
        items
            .iter()
            .any(|i| Value::String(i.1.clone()) == pod_key && i.0 == 4),
        "{pod_key}"
    );
    browser.keys("\u{E011}").await; // Home
    assert_eq!(browser.eval(focused, json!([])).await, "kind:ConfigMap");
    assert_eq!(
        browser
            .eval("return document.activeElement.tabIndex", json!([]))
            .await,
        0,
        "the focused item is the tree's one tab stop"
    );

    // An action whose token prompt is closed is abandoned: the view stays.
    browser
        .eval("sessionStorage.removeItem('tether.apiToken')", json!([]))
        .await;
    browser.click("#sync").await;
    browser
        .wait_for(
            "the token prompt for Sync",
            "return document.getElementById('token-dialog').open",
            json!([]),
        )
        .await;
    browser.keys("\u{E00C}").await; // Escape closes a modal dialog
    let notice = browser
        .wait_for(
            "the sync abandoned",
            "const n = document.getElementById('notice').textContent; return n.includes('sync cancelled') && n",
            json!([]),
        )
        .await;
    println!("dashboard: {notice}");
    assert!(
        browser
            .eval(
                "return document.querySelector('main h1').innerText",
                json!([])
            )
            .await
            .as_str()
            .unwrap()
            .starts_with(APP),
        "the app view stays"
    );
    assert_eq!(
        browser
            .eval("return document.getElementById('sync').disabled", json!([]))
            .await,
        false
    );
    browser
        .eval(
            "sessionStorage.setItem('tether.apiToken', arguments[0])",
            json!([TOKEN]),
        )
        .await;

    // Suspend: recorded in the cluster, so a new process holds the app too.
    browser.click("#suspend").await;
    browser
        .wait_for(
            "the app suspended",
            "const b = document.getElementById('suspend'); return b && b.textContent === 'Resume'",
            json!([]),
        )
        .await;
    let recorded = configmap_data(
        &sandbox,
        tether_controller::server::service::SUSPENDED_CONFIGMAP,
    )
    .await;
    assert!(
        recorded.as_ref().is_some_and(|d| d[APP]
            .as_str()
            .is_some_and(|v| v.starts_with("suspended from the API at "))),
        "{recorded:?}"
    );
    assert_eq!(serve.stop().await, Some(0));
    let serve = Serve::start(&sandbox, "dashboard-tree-again", &config, &[]).await;
    let reason = "suspended from the API: drift is reported, not corrected";
    crate::support::eventually("still suspended after the restart", || async {
        let s = api_status(&serve).await;
        (s["automation"]["reason"] == reason && s["lastPass"].is_object()).then_some(())
    })
    .await;
    // A new origin (another port): the token is asked for again.
    browser.goto(&format!("{}/#/apps/{APP}", serve.url)).await;
    browser
        .wait_for(
            "the token prompt",
            "return document.getElementById('token-dialog').open",
            json!([]),
        )
        .await;
    browser.type_into("#token-input", TOKEN).await;
    browser.click("#token-save").await;
    let said = browser
        .wait_for(
            "the page says suspended",
            "const b = document.getElementById('suspend'); \
             return b && b.textContent === 'Resume' && document.querySelector('dl.summary').innerText",
            json!([]),
        )
        .await;
    assert!(said.as_str().unwrap().contains(reason), "{said}");

    // Resume clears the record.
    browser.click("#suspend").await;
    browser
        .wait_for(
            "the app resumed",
            "const b = document.getElementById('suspend'); return b && b.textContent === 'Suspend'",
            json!([]),
        )
        .await;
    let recorded = configmap_data(
        &sandbox,
        tether_controller::server::service::SUSPENDED_CONFIGMAP,
    )
    .await;
    assert!(
        recorded.as_ref().is_some_and(|d| d.get(APP).is_none()),
        "{recorded:?}"
    );
    assert_ne!(api_status(&serve).await["automation"]["reason"], reason);
    assert_eq!(serve.stop().await, Some(0));
    drop(browser);
}

/// An App's Suspend from the API is its own `spec.suspend` (server-side applied as
/// `tether`): `kubectl get` shows it, a restarted service holds it, and Resume
/// clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_suspend_from_the_api_is_its_spec_and_outlives_a_restart() {
    let sandbox = TestSandbox::start().await;
    for ns in ["team-s", "live-s"] {
        sandbox.namespace(ns).await;
    }
    sandbox
        .kubectl_with_stdin(
            &["apply", "-f", "-"],
            Some(tether_controller::config::APP_CRD_YAML),
        )
        .await
        .ok();
    let origin = origin_http(
        &sandbox,
        &[(
            "apps/web/cm.yaml",
            &crate::serve::configmap("web", "live-s", "v1"),
        )],
    );
    let token_file = sandbox.dir.path().join("api-token");
    std::fs::write(&token_file, TOKEN).expect("write the token");
    let config = format!(
        "server:\n  listen: 127.0.0.1:0\n  apiToken: {{secretFile: {}}}\napps: []\n",
        token_file.display()
    );
    sandbox.trusted_service_account("team-s", "deployer").await;
    let app = format!(
        "apiVersion: tether.dev/v1alpha1\nkind: App\nmetadata:\n  name: web\n  namespace: team-s\nspec:\n  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: apps/web, interval: 1h}}\n  destination: {{namespace: live-s}}\n  sync: {{automated: true}}\n",
        origin.url
    );
    sandbox
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(&app))
        .await
        .ok();
    let serve = Serve::start(&sandbox, "dashboard-app-suspend", &config, &[]).await;
    let id = "team-s.web";
    let status = |serve: &Serve| {
        let url = format!("{}/api/v1/apps/{id}", serve.url);
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .expect("the status API answers")
                .json::<Value>()
                .await
                .unwrap_or(Value::Null)
        }
    };
    crate::support::eventually("the App synced", || async {
        (status(&serve).await["sync"] == "Synced").then_some(())
    })
    .await;
    let answer = |serve: &Serve, action: &str| {
        let url = format!("{}/api/v1/apps/{id}/{action}", serve.url);
        async move {
            reqwest::Client::new()
                .post(url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .expect("the API answers")
        }
    };
    let post = |serve: &Serve, action: &str| {
        let answer = answer(serve, action);
        async move { answer.await.status() }
    };
    // A cluster that fails every write: refused, said why, and nothing changed.
    sandbox.sandbox.set_fail_rate(1.0);
    let refused = answer(&serve, "suspend").await;
    sandbox.sandbox.set_fail_rate(0.0);
    assert_eq!(refused.status(), reqwest::StatusCode::BAD_GATEWAY);
    let body: Value = refused.json().await.expect("JSON");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("cannot record the suspension in App team-s/web: ")),
        "{body}"
    );
    let reason = status(&serve).await["automation"]["reason"].clone();
    assert!(
        !reason.as_str().unwrap_or_default().starts_with("suspended"),
        "{reason}"
    );
    assert_eq!(post(&serve, "suspend").await, reqwest::StatusCode::OK);
    let spec_suspend = || async {
        let out = sandbox
            .kubectl(&[
                "get",
                "tapp",
                "web",
                "-n",
                "team-s",
                "-o",
                "json",
                "--show-managed-fields",
            ])
            .await
            .ok();
        let object: Value = serde_json::from_str(&out.stdout).expect("JSON");
        let by_tether = object["metadata"]["managedFields"]
            .as_array()
            .is_some_and(|m| {
                m.iter().any(|f| {
                    f["manager"] == "tether"
                        && f["operation"] == "Apply"
                        && f["fieldsV1"]["f:spec"].get("f:suspend").is_some()
                })
            });
        (object["spec"]["suspend"].clone(), by_tether)
    };
    assert_eq!(spec_suspend().await, (json!(true), true));
    assert_eq!(serve.stop().await, Some(0));
    let serve = Serve::start(&sandbox, "dashboard-app-suspend-again", &config, &[]).await;
    crate::support::eventually("the App still suspended", || async {
        let s = status(&serve).await;
        let reason = s["automation"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (s["lastPass"].is_object() && reason.starts_with("suspended (spec.suspend: true)"))
            .then_some(())
    })
    .await;
    assert_eq!(post(&serve, "resume").await, reqwest::StatusCode::OK);
    assert_eq!(spec_suspend().await, (json!(false), true));
    crate::support::eventually("the App no longer suspended", || async {
        let s = status(&serve).await;
        let reason = s["automation"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (s["lastPass"].is_object() && !reason.starts_with("suspended")).then_some(())
    })
    .await;
    assert_eq!(serve.stop().await, Some(0));
}

/// The tree is read as the app's ServiceAccount: what its Role may not list is named
/// in `errors` (the rest is shown), and reads within a moment share one LIST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_is_read_as_the_apps_service_account_and_shared_for_a_moment() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("t1").await;
    sandbox.namespace("tether-system").await;
    // Deployments and ReplicaSets, not Pods.
    let rbac = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: t1\n---\n\
        apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: deployer\n  namespace: t1\n\
        rules:\n- apiGroups: [apps]\n  resources: [deployments, replicasets]\n  verbs: [get, list, watch, patch]\n---\n\
        apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: deployer\n  namespace: t1\n\
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}\n\
        subjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: t1\n";
    sandbox
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(rbac))
        .await
        .ok();
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: t1\n\
        spec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n\
        \x20   metadata:\n      labels: {app: web}\n    spec:\n      containers:\n\
        \x20     - name: web\n        image: nginx:1.27\n";
    let origin = origin(&sandbox, &[("web/web.yaml", deployment)]);
    let config = format!(
        "{}apps:\n- name: web\n  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: web, interval: 1h}}\n  destination: {{namespace: t1}}\n  sync: {{automated: true}}\n",
        crate::serve::server_section(sandbox.dir.path()),
        origin.url
    );
    let serve = Serve::start(&sandbox, "dashboard-tenant-tree", &config, &[]).await;
    serve
        .wait_status("web", "web Synced", |s| s["sync"] == "Synced")
        .await;
    let rs = make_pods(&sandbox, "t1", "web", 1).await;
    let tree = || async {
        reqwest::get(format!("{}/api/v1/apps/web/tree", serve.url))
            .await
            .expect("the tree answers")
            .json::<Value>()
            .await
            .expect("JSON")
    };
    sandbox.sandbox.reset_requests();
    let first = tree().await;
    let root = &first["roots"][0];
    assert_eq!(
        (&root["kind"], &root["managed"], &root["status"]),
        (&json!("Deployment"), &json!(true), &json!("InSync")),
        "{first}"
    );
    let child = &root["children"][0];
    assert_eq!(
        (&child["kind"], &child["name"], &child["managed"]),
        (&json!("ReplicaSet"), &json!(rs), &json!(false)),
        "{first}"
    );
    assert_eq!(
        child["children"],
        json!([]),
        "the Pods are not the tenant's to list"
    );
    let errors = first["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{first}");
    let error = errors[0].as_str().unwrap();
    assert!(
        error.starts_with("cannot list Pod objects in t1: ")
            && error.contains("system:serviceaccount:t1:deployer")
            && error.contains("forbidden"),
        "{error}"
    );
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("list", "apps/replicasets"), 1, "{counts:?}");

    // Within the moment: the same answer, no request.
    sandbox.sandbox.reset_requests();
    assert_eq!(tree().await, first);
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("list", "apps/replicasets"), 0, "{counts:?}");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    tree().await;
    let counts = sandbox.sandbox.requests();
    assert_eq!(counts.get("list", "apps/replicasets"), 1, "{counts:?}");
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_apps_fit_the_page_budget() {
    let statuses = many_app_statuses(1000);
    let router = tether_controller::server::router(
        statuses,
        Arc::new(NoWorkers),
        axum::Router::new(),
        tether_controller::server::guard::Access::default(),
        None,
    );
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
        .screenshot(&screenshot_path("dashboard-apps.png"))
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
