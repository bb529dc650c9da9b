//! The App view of the dashboard: its object tree, a suspend from the page or the API
//! that is the App's spec and outlives a restart.

use super::*;

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
    browser.wait_token_prompt().await;
    browser.click("#token-cancel").await;
    let main = browser
        .wait_until(
            "the page after the prompt closed",
            "const m = document.getElementById('main').innerText; \
             return !document.getElementById('token-dialog').open && !m.includes('Loading') && m",
        )
        .await;
    assert!(
        main.as_str().unwrap().contains("API token needed"),
        "{main}"
    );
    let notice = browser
        .run("return document.getElementById('notice').textContent")
        .await;
    assert!(
        notice.as_str().unwrap().contains("No API token given"),
        "{notice}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        browser
            .run("return document.getElementById('token-dialog').open")
            .await,
        false,
        "closed means closed: nothing asks again by itself"
    );
    assert_eq!(
        browser
            .run("return document.getElementById('live').textContent")
            .await,
        "paused: no API token"
    );
    browser.click("#token-again").await;
    browser.enter_token(TOKEN).await;

    // The tree: kinds, the app's objects, and below the Deployment its ReplicaSet and
    // the ReplicaSet's Pods, with their health.
    let deployment_key = format!("Deployment/{NAMESPACE}/hello-web");
    let items = browser
        .wait_until(
            "the Pods in the tree",
            &format!(
                "{TREE_ITEMS} return items.filter(i => i[4].includes('Pod ')).length === 2 && items"
            ),
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
        .run("document.querySelector('#objects').closest('section').scrollIntoView()")
        .await;
    browser
        .screenshot(&screenshot_path("dashboard-tree.png"))
        .await;
    let roles = browser
        .run(
            "const t = document.getElementById('object-tree'); \
             return [t.getAttribute('role'), t.getAttribute('aria-label'), \
               t.querySelectorAll('[role=treeitem][tabindex=\"0\"]').length]",
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
        .run(
            "return [...document.querySelectorAll('#object-tree [role=treeitem]')]\
               .filter(i => i.closest('[hidden]')).length",
        )
        .await;
    assert_eq!(hidden, 3, "the ReplicaSet and its Pods are folded away");
    browser.keys("\u{E014}").await; // ArrowRight
    assert_eq!(
        browser.eval(expanded, json!([deployment_key])).await,
        "true"
    );
    browser.keys("\u{E014}").await;
    let rs_key = browser.run(focused).await;
    browser.keys("\u{E015}").await; // ArrowDown
    let pod_key = browser.run(focused).await;
    assert_ne!(rs_key, pod_key);
    assert!(
        items
            .iter()
            .any(|i| Value::String(i.1.clone()) == pod_key && i.0 == 4),
        "{pod_key}"
    );
    browser.keys("\u{E011}").await; // Home
    assert_eq!(browser.run(focused).await, "kind:ConfigMap");
    assert_eq!(
        browser.run("return document.activeElement.tabIndex").await,
        0,
        "the focused item is the tree's one tab stop"
    );

    // An action whose token prompt is closed is abandoned: the view stays.
    browser
        .run("sessionStorage.removeItem('tether.apiToken')")
        .await;
    browser.click("#sync").await;
    browser
        .wait_until(
            "the token prompt for Sync",
            "return document.getElementById('token-dialog').open",
        )
        .await;
    browser.keys("\u{E00C}").await; // Escape closes a modal dialog
    let notice = browser
        .wait_until("the sync abandoned", "const n = document.getElementById('notice').textContent; return n.includes('sync cancelled') && n")
        .await;
    println!("dashboard: {notice}");
    assert!(
        browser
            .run("return document.querySelector('main h1').innerText")
            .await
            .as_str()
            .unwrap()
            .starts_with(APP),
        "the app view stays"
    );
    assert_eq!(
        browser
            .run("return document.getElementById('sync').disabled")
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
        .wait_until(
            "the app suspended",
            "const b = document.getElementById('suspend'); return b && b.textContent === 'Resume'",
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
    browser.wait_token_prompt().await;
    browser.enter_token(TOKEN).await;
    let said = browser
        .wait_until("the page says suspended", "const b = document.getElementById('suspend'); \
             return b && b.textContent === 'Resume' && document.querySelector('dl.summary').innerText")
        .await;
    assert!(said.as_str().unwrap().contains(reason), "{said}");

    // Resume clears the record.
    browser.click("#suspend").await;
    browser
        .wait_until(
            "the app resumed",
            "const b = document.getElementById('suspend'); return b && b.textContent === 'Suspend'",
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
    sandbox.namespaces(&["team-s", "live-s"]).await;
    sandbox
        .kubectl_apply(tether_controller::config::APP_CRD_YAML)
        .await;
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
    sandbox.kubectl_apply(&app).await;
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
        let object = sandbox.get_with_managers("tapp", "web", "team-s").await;
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
