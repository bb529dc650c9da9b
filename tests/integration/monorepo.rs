//! Monorepos (issue #28) through `tether serve`, the sandbox and a real `git daemon`:
//! four apps of one repository (a plain directory, two Kustomize overlays of one
//! shared base outside their paths, a Helm chart with a values file). A
//! commit re-renders and re-checks only the apps whose inputs (the Git ids of what
//! their render reads) changed, seen in `tether_renders_total`, in the passes and in
//! the sandbox's audit; the others report the new revision without a pass, and a
//! live change of theirs is still healed.

use std::collections::BTreeMap;

use crate::serve::{Serve, cm_value, configmap, get_text, origin, server_section};
use crate::support::{TestSandbox, eventually};

/// Every app: (name, path, namespace).
const APPS: &[(&str, &str, &str)] = &[
    ("plain", "apps/plain", "mono-plain"),
    ("front", "apps/front", "mono-front"),
    ("back", "apps/back", "mono-back"),
    ("web", "charts/web", "mono-web"),
];

const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
const CHART_CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-cfg\ndata:\n  color: {{ .Values.color | quote }}\n";

fn overlay(namespace: &str) -> String {
    format!("namespace: {namespace}\nresources:\n- ../../shared/base\n")
}

fn files() -> Vec<(&'static str, String)> {
    vec![
        ("README.md", "# platform\n".into()),
        (
            "apps/plain/cm.yaml",
            configmap("plain", "mono-plain", "one"),
        ),
        ("apps/front/kustomization.yaml", overlay("mono-front")),
        ("apps/back/kustomization.yaml", overlay("mono-back")),
        (
            "shared/base/kustomization.yaml",
            "resources:\n- cm.yaml\n".into(),
        ),
        ("shared/base/cm.yaml", shared("one")),
        ("charts/web/Chart.yaml", CHART.into()),
        ("charts/web/templates/cm.yaml", CHART_CM.into()),
        ("charts/web/prod.yaml", "color: blue\n".into()),
    ]
}

fn shared(value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  key: \"{value}\"\n"
    )
}

fn config(server: &str, url: &str) -> String {
    let mut apps = String::new();
    for (name, path, namespace) in APPS {
        let helm = match *name {
            "web" => ", helm: {valueFiles: [prod.yaml]}",
            _ => "",
        };
        apps.push_str(&format!(
            "- name: {name}\n  source: {{repo: \"{url}\", ref: main, path: {path}, interval: 1h{helm}}}\n  destination: {{namespace: {namespace}}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n"
        ));
    }
    format!("{server}resyncInterval: 1h\napps:\n{apps}")
}

/// The value of each app's series of a counter (`tether_<name>_total{app=...}`).
async fn per_app(serve: &Serve, counter: &str) -> BTreeMap<String, u64> {
    let names: Vec<&str> = APPS.iter().map(|(name, ..)| *name).collect();
    counters(serve, counter, &names).await
}

/// The value of a counter's series (`tether_<counter>_total{app=...}`) for each of
/// `apps` (0 for an app without one yet).
pub(crate) async fn counters(serve: &Serve, counter: &str, apps: &[&str]) -> BTreeMap<String, u64> {
    let text = get_text(format!("{}/metrics", serve.url)).await;
    let mut found = BTreeMap::new();
    for name in apps {
        let prefix = format!("tether_{counter}_total{{app=\"{name}\"");
        let sum: u64 = text
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        found.insert(name.to_string(), sum);
    }
    found
}

/// How much each app's series grew between two readings.
pub(crate) fn grown(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> Vec<(String, u64)> {
    after
        .iter()
        .map(|(app, n)| (app.clone(), n - before.get(app).copied().unwrap_or(0)))
        .collect()
}

pub(crate) fn counts(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(a, n)| (a.to_string(), *n)).collect()
}

/// Waits until every app reports `sha` as its revision, Synced.
async fn all_at(serve: &Serve, sha: &str) {
    for (name, ..) in APPS {
        serve.wait_synced_at(name, sha).await;
    }
}

/// The namespaces of the apps other than `changed` that the audit shows requests for.
fn touched(sandbox: &TestSandbox, changed: &[&str]) -> Vec<String> {
    let audit = sandbox.sandbox.audit();
    APPS.iter()
        .filter(|(name, ..)| !changed.contains(name))
        .map(|(.., namespace)| *namespace)
        .filter(|namespace| {
            audit
                .iter()
                .any(|r| r.path.contains(&format!("/namespaces/{namespace}/")))
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_re_renders_only_the_apps_whose_inputs_changed() {
    let sandbox = TestSandbox::start().await;
    for (.., namespace) in APPS {
        sandbox.namespace(namespace).await;
    }
    let files = files();
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
    let origin = origin(&sandbox, &borrowed);
    let helm = crate::chart::helm();
    let bin = helm.parent().expect("helm's folder");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start_with_env(
        &sandbox,
        "monorepo",
        &config(&server, &origin.url),
        &[],
        &[("PATH", path)],
    )
    .await;
    let first = crate::support::git(&origin.repo.dir, &["rev-parse", "HEAD"]);
    all_at(&serve, first.trim()).await;
    assert_eq!(
        cm_value(&sandbox, "web-cfg", "mono-web", "color")
            .await
            .as_deref(),
        Some("blue")
    );

    // One app's own directory: it alone renders and is checked against the cluster.
    let renders = per_app(&serve, "renders").await;
    let passes = per_app(&serve, "reconcile_passes").await;
    sandbox.sandbox.reset_requests();
    origin.repo.write(
        "apps/plain/cm.yaml",
        &configmap("plain", "mono-plain", "two"),
    );
    let second = origin.repo.commit("plain: two");
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);
    all_at(&serve, &second).await;
    eventually("plain is applied", || async {
        (cm_value(&sandbox, "plain", "mono-plain", "key")
            .await
            .as_deref()
            == Some("two"))
        .then_some(())
    })
    .await;
    let after = per_app(&serve, "renders").await;
    assert_eq!(
        grown(&renders, &after),
        counts(&[("back", 0), ("front", 0), ("plain", 1), ("web", 0)])
    );
    // Passes and heals of the others: none (plain's own apply may wake a heal of it).
    let mut passed = grown(&passes, &per_app(&serve, "reconcile_passes").await);
    passed.retain(|(app, n)| app != "plain" || *n == 0);
    assert_eq!(passed, counts(&[("back", 0), ("front", 0), ("web", 0)]));
    assert_eq!(touched(&sandbox, &["plain"]), Vec::<String>::new());

    // The shared base: both overlays render, the others do not.
    let renders = after;
    sandbox.sandbox.reset_requests();
    origin.repo.write("shared/base/cm.yaml", &shared("two"));
    let third = origin.repo.commit("base: two");
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);
    all_at(&serve, &third).await;
    for namespace in ["mono-front", "mono-back"] {
        eventually("the base is applied", || async {
            (cm_value(&sandbox, "shared", namespace, "key")
                .await
                .as_deref()
                == Some("two"))
            .then_some(())
        })
        .await;
    }
    let after = per_app(&serve, "renders").await;
    assert_eq!(
        grown(&renders, &after),
        counts(&[("back", 1), ("front", 1), ("plain", 0), ("web", 0)])
    );
    assert_eq!(touched(&sandbox, &["front", "back"]), Vec::<String>::new());

    // The chart's values file: the chart alone.
    let renders = after;
    origin.repo.write("charts/web/prod.yaml", "color: green\n");
    let fourth = origin.repo.commit("web: green");
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);
    all_at(&serve, &fourth).await;
    eventually("the chart's new value is applied", || async {
        (cm_value(&sandbox, "web-cfg", "mono-web", "color")
            .await
            .as_deref()
            == Some("green"))
        .then_some(())
    })
    .await;
    let after = per_app(&serve, "renders").await;
    assert_eq!(
        grown(&renders, &after),
        counts(&[("back", 0), ("front", 0), ("plain", 0), ("web", 1)])
    );

    // An unrelated file: nothing renders, no pass runs, every app reports the commit.
    let (renders, passes) = (after, per_app(&serve, "reconcile_passes").await);
    let unchanged = per_app(&serve, "unchanged_commits").await;
    sandbox.sandbox.reset_requests();
    origin
        .repo
        .write("README.md", "# platform\n\nNow with docs.\n");
    let fifth = origin.repo.commit("docs");
    assert_eq!(serve.push(&origin.url).await, reqwest::StatusCode::ACCEPTED);
    all_at(&serve, &fifth).await;
    let none = counts(&[("back", 0), ("front", 0), ("plain", 0), ("web", 0)]);
    assert_eq!(grown(&renders, &per_app(&serve, "renders").await), none);
    assert_eq!(
        grown(&passes, &per_app(&serve, "reconcile_passes").await),
        none
    );
    assert_eq!(
        grown(&unchanged, &per_app(&serve, "unchanged_commits").await),
        counts(&[("back", 1), ("front", 1), ("plain", 1), ("web", 1)])
    );
    assert_eq!(touched(&sandbox, &[]), Vec::<String>::new());
    // Applied at the new commit too: the objects are what it renders (`dependsOn`
    // reads this), though no pass ran.
    let status = serve.status("front").await;
    assert_eq!(status["revision"]["sha"], fifth, "{status}");
    assert_eq!(status["appliedRevision"], fifth, "{status}");

    // A live change of an app that took the commit without a pass is still healed.
    sandbox
        .kubectl_merge_patch(
            "cm",
            "shared",
            "mono-front",
            "{\"data\":{\"key\":\"edited\"}}",
        )
        .await;
    eventually("the live edit is healed", || async {
        (cm_value(&sandbox, "shared", "mono-front", "key")
            .await
            .as_deref()
            == Some("two"))
        .then_some(())
    })
    .await;
    assert_eq!(
        grown(&renders, &per_app(&serve, "renders").await),
        none,
        "a heal renders nothing"
    );
    serve.stop().await;
}
