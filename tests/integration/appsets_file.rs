//! `appSets` in the configuration file (issue #28) through `tether serve`, the sandbox
//! and a real `git daemon`: a `teams/*` Git-directories appSet stamps one file app per
//! directory and each syncs; a pushed directory (webhook) adds an app; a removed one
//! under `deletion: delete` has its objects pruned, under `orphan` keeps them; an
//! invalid template and a name taken by a listed app are configuration errors naming
//! the appSet and parameter set, with nothing applied.

use crate::app_crd::exists;
use crate::appsets::configmap;
use crate::serve::{Serve, refused, server_section, with_origin};
use crate::support::{TestSandbox, eventually};
use tether_testkit::assert_contains;

/// A Git-directories appSet over `dirs` of `url`, its apps syncing to `live`.
fn app_set(name: &str, url: &str, dirs: &str, deletion: &str, path: &str) -> String {
    format!(
        "  - name: {name}\n    generators:\n      - git: {{repo: \"{url}\", revision: main, directories: [{{path: '{dirs}'}}]}}\n\
         \x20   syncPolicy: {{deletion: {deletion}}}\n    template:\n      metadata: {{name: '{name}-{{{{path.basename}}}}'}}\n\
         \x20     spec:\n        source: {{repo: \"{url}\", ref: main, path: '{path}', interval: 1h}}\n\
         \x20       destination: {{namespace: live}}\n        sync: {{automated: true, prune: true}}\n"
    )
}

async fn applied(sandbox: &TestSandbox, names: &[&str]) {
    for name in names {
        eventually(&format!("ConfigMap {name} is applied"), || async {
            exists(sandbox, "cm", name, "live").await.then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_app_sets_stamp_apps_per_directory_follow_pushes_and_prune_per_policy() {
    let (sandbox, origin) = with_origin(
        "live",
        &[
            ("teams/a/cm.yaml", &configmap("a")),
            ("teams/b/cm.yaml", &configmap("b")),
            ("extras/p/cm.yaml", &configmap("p")),
            ("extras/q/cm.yaml", &configmap("q")),
        ],
    )
    .await;
    let server = server_section(sandbox.dir.path());
    let config = format!(
        "{server}resyncInterval: 1h\napps: []\nappSets:\n{}{}",
        app_set("team", &origin.url, "teams/*", "delete", "{{path}}"),
        app_set("extra", &origin.url, "extras/*", "orphan", "{{path}}"),
    );
    let serve = Serve::start(&sandbox, "filesets", &config, &[]).await;
    for app in ["team-a", "team-b", "extra-p", "extra-q"] {
        serve.wait_synced(app).await;
    }
    applied(&sandbox, &["a", "b", "p", "q"]).await;

    // A new directory, announced by webhook: a new app, through the reload path.
    origin.repo.write("teams/c/cm.yaml", &configmap("c"));
    origin.repo.commit("team c");
    assert!(serve.push(&origin.url).await.is_success());
    applied(&sandbox, &["c"]).await;
    let c = serve.status("team-c").await;
    assert_eq!(c["sync"], "Synced", "{c}");

    // Directories removed: team b's app goes and, under `delete`, its ConfigMap with
    // it; extra q's app goes too but, under `orphan`, leaves its ConfigMap.
    origin.repo.remove("teams/b/cm.yaml");
    origin.repo.remove("extras/q/cm.yaml");
    origin.repo.commit("no team b, no extra q");
    assert!(serve.push(&origin.url).await.is_success());
    eventually("team b's ConfigMap is pruned", || async {
        (!exists(&sandbox, "cm", "b", "live").await).then_some(())
    })
    .await;
    let gone = reqwest::get(format!("{}/api/v1/apps/extra-q", serve.url))
        .await
        .expect("status answers")
        .status();
    assert_eq!(
        gone,
        reqwest::StatusCode::NOT_FOUND,
        "extra-q is no longer an app"
    );
    assert!(
        exists(&sandbox, "cm", "q", "live").await,
        "an orphaned app's objects stay"
    );
    assert!(exists(&sandbox, "cm", "a", "live").await);
    let log = serve.log();
    assert!(
        log.contains("its parameter set is gone, its objects pruned") && log.contains("team-b"),
        "{log}"
    );
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_template_or_a_taken_name_is_refused_naming_the_app_set_and_nothing_applied() {
    let (sandbox, origin) = with_origin("live", &[("teams/a/cm.yaml", &configmap("a"))]).await;
    let server = server_section(sandbox.dir.path());

    let typo = format!(
        "{server}apps: []\nappSets:\n{}",
        app_set("team", &origin.url, "teams/*", "delete", "{{pth}}")
    );
    let (code, stderr) = refused(&sandbox, "typo.yaml", &typo).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert_contains(
        &stderr,
        "appSets[0] (team): parameter set directory teams/a: template.spec.source.path: unknown parameter {{pth}}",
    );

    let taken = format!(
        "{server}apps:\n  - name: team-a\n    source: {{repo: \"{}\", ref: main, path: teams/a}}\n    destination: {{namespace: live}}\nappSets:\n{}",
        origin.url,
        app_set("team", &origin.url, "teams/*", "delete", "{{path}}")
    );
    let (code, stderr) = refused(&sandbox, "taken.yaml", &taken).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("\"team-a\" is also the name of apps[0]")
            && stderr.contains("appSets[0] (team), parameter set directory teams/a"),
        "{stderr}"
    );
    assert!(
        !exists(&sandbox, "cm", "a", "live").await,
        "nothing applied"
    );
}
