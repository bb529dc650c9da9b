//! The lookup endpoint is served for renders of charts only (issue #26): `tether
//! serve` syncing a directory and a kustomization binds no port and writes no
//! kubeconfig for them, as its log says; the same path holding a chart after a new
//! commit is rendered with one.

use crate::charts_source::serve_with_helm;
use crate::serve::{origin, server_section};
use crate::support::{TestSandbox, eventually};

/// The line `tether serve` logs each time it serves a chart's lookups.
const SERVED: &str = "serving a chart's lookups for one render";

const CONFIG_MAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  greeting: hello\n";

fn app(name: &str, repo: &str, path: &str) -> String {
    format!(
        "- name: {name}\n  source: {{repo: \"{repo}\", path: {path}, interval: 200ms}}\n  destination: {{namespace: scope}}\n  sync: {{automated: true}}\n"
    )
}

#[tokio::test]
async fn only_a_charts_render_serves_lookups() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("scope").await;
    let kustomized = CONFIG_MAP.replace("plain", "kust");
    let git = origin(
        &sandbox,
        &[
            ("plain/cm.yaml", CONFIG_MAP),
            ("kust/kustomization.yaml", "resources: [cm.yaml]\n"),
            ("kust/cm.yaml", &kustomized),
        ],
    );
    let config = format!(
        "sources: {{minInterval: 100ms}}\n{}apps:\n{}{}",
        server_section(sandbox.dir.path()),
        app("plain", &git.url, "plain"),
        app("kust", &git.url, "kust"),
    );
    let serve = serve_with_helm(&sandbox, "lookup-scope", &config).await;
    for name in ["plain", "kust"] {
        serve
            .wait_status(name, "the app is Synced", |s| s["sync"] == "Synced")
            .await;
    }
    assert_eq!(serve.log().matches(SERVED).count(), 0, "{}", serve.log());

    // The same path, now a chart: its render answers lookups.
    git.repo.write(
        "plain/Chart.yaml",
        "apiVersion: v2\nname: plain\nversion: 0.1.0\n",
    );
    git.repo.write("plain/templates/cm.yaml", CONFIG_MAP);
    let sha = git.repo.commit("plain is a chart now");
    serve
        .wait_status("plain", "the chart is Synced", |s| {
            s["sync"] == "Synced" && s["revision"]["sha"] == sha.as_str()
        })
        .await;
    eventually("the chart's render served lookups", || async {
        (serve.log().matches(SERVED).count() >= 1).then_some(())
    })
    .await;
    assert_eq!(serve.stop().await, Some(0));
}
