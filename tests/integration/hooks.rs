//! Sync hooks as Argo CD runs them (issue #14, part 2), run by `tether sync` as a
//! process against the sandbox, whose simulated controllers complete Jobs and fail
//! those whose image ends in `-broken`: PreSync then PostSync in order around the
//! app's objects, delete policies, a failed PreSync hook applying nothing, SyncFail,
//! `generateName` for hooks only, and hooks kept out of the inventory and the diff.

use std::time::Duration;

use serde_json::Value;
use tether_sandbox::SandboxOptions;

use crate::serve::get_text;
use crate::support::{TestSandbox, app_dir, app_report, json, resource_fields, tether, tether_app};

/// A sandbox whose simulated controllers complete Jobs.
pub(crate) async fn sandbox() -> TestSandbox {
    TestSandbox::start_with(SandboxOptions {
        simulate_controllers: Some(Duration::from_millis(50)),
        ..SandboxOptions::default()
    })
    .await
}

/// A Job in `default`: `name` is `name: x` or `generateName: x-`; `annotations` as
/// `key: value` pairs.
fn job(name: &str, annotations: &[(&str, &str)], image: &str) -> String {
    let mut text =
        format!("apiVersion: batch/v1\nkind: Job\nmetadata:\n  {name}\n  namespace: default\n");
    if !annotations.is_empty() {
        text.push_str("  annotations:\n");
        for (key, value) in annotations {
            text.push_str(&format!("    {key}: \"{value}\"\n"));
        }
    }
    text.push_str(&format!(
        "spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{{name: run, image: \"{image}\"}}]\n"
    ));
    text
}

fn configmap(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  key: \"{value}\"\n"
    )
}

/// The report's hooks as `(phase, name, action, deleted)`, in the order they ran.
pub(crate) fn hooks(report: &Value) -> Vec<(String, String, String, bool)> {
    report["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            let text = |k: &str| h[k].as_str().unwrap_or_default().to_string();
            (
                text("phase"),
                text("name"),
                text("action"),
                h["deleted"].as_bool().unwrap_or_default(),
            )
        })
        .collect()
}

/// The Jobs in `default`, by name, with their uid.
async fn jobs(sandbox: &TestSandbox) -> Vec<(String, String)> {
    let list = sandbox
        .kubectl_json(&["get", "jobs", "-n", "default", "-o", "json"])
        .await;
    let mut out: Vec<(String, String)> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            (
                j.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                j.pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The sandbox's current resourceVersion (one counter for every kind, as etcd's).
pub(crate) async fn resource_version(sandbox: &TestSandbox) -> u64 {
    let list = sandbox
        .get("/api/v1/namespaces/default/configmaps")
        .await
        .json();
    list.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .expect("a list resourceVersion")
}

fn version_of(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .expect("a resourceVersion")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_sync_and_post_sync_jobs_run_in_order_with_their_delete_policies() {
    let sandbox = sandbox().await;
    let files = |value: &str| {
        vec![
            ("settings.yaml", configmap("settings", value)),
            (
                "migrate.yaml",
                job(
                    "generateName: migrate-",
                    &[("argocd.argoproj.io/hook", "PreSync")],
                    "busybox:1.36",
                ),
            ),
            (
                "seed.yaml",
                job(
                    "name: seed",
                    &[("tether.dev/hook", "PreSync")],
                    "busybox:1.36",
                ),
            ),
            (
                "smoke.yaml",
                job(
                    "name: smoke",
                    &[
                        ("argocd.argoproj.io/hook", "PostSync"),
                        ("argocd.argoproj.io/hook-delete-policy", "HookSucceeded"),
                    ],
                    "busybox:1.36",
                ),
            ),
        ]
    };
    let dir = app_dir(&sandbox, "hooked", &files("1"));
    let before = resource_version(&sandbox).await;
    let report = app_report(&sandbox, "sync", &dir, "hooked", &[], 0).await;
    let ran = hooks(&report);
    assert_eq!(ran.len(), 3, "{report}");
    assert_eq!(ran[0].0, "PreSync");
    assert!(
        ran[0].1.starts_with("migrate-") && ran[0].1.len() > "migrate-".len(),
        "{ran:?}"
    );
    assert_eq!((ran[1].0.as_str(), ran[1].1.as_str()), ("PreSync", "seed"));
    assert_eq!(
        ran[2],
        ("PostSync".into(), "smoke".into(), "succeeded".into(), true)
    );
    assert!(ran.iter().all(|h| h.2 == "succeeded"), "{ran:?}");
    // Hooks are not app objects: only the ConfigMap is in the report's resources.
    let resources = resource_fields(&report, "name", |_| true);
    assert_eq!(resources, ["settings"]);

    // Creation order, from the sandbox's own history: the PreSync Jobs, then the
    // app's ConfigMap, then the PostSync Job.
    let events = sandbox
        .watch_until(
            &format!("/apis/batch/v1/namespaces/default/jobs?watch=1&resourceVersion={before}"),
            Duration::from_secs(10),
            |events| events.iter().filter(|e| e["type"] == "ADDED").count() >= 3,
        )
        .await;
    let added: Vec<(String, u64)> = events
        .iter()
        .filter(|e| e["type"] == "ADDED")
        .map(|e| {
            let name = e
                .pointer("/object/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            (name.to_string(), version_of(&e["object"]))
        })
        .collect();
    let settings = sandbox
        .kubectl_json(&["get", "cm", "settings", "-o", "json"])
        .await;
    let applied = version_of(&settings);
    assert!(
        added[0].0.starts_with("migrate-") && added[0].1 < applied,
        "{added:?} {applied}"
    );
    assert!(
        added[1].0 == "seed" && added[1].1 < applied,
        "{added:?} {applied}"
    );
    assert!(
        added[2].0 == "smoke" && added[2].1 > applied,
        "{added:?} {applied}"
    );

    // HookSucceeded deleted smoke; the PreSync Jobs stay until their next run.
    let first = jobs(&sandbox).await;
    let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 2, "{first:?}");
    assert!(
        names[0].starts_with("migrate-") && names[1] == "seed",
        "{first:?}"
    );

    // Hooks are neither in the inventory nor in the diff.
    let inventory = sandbox
        .kubectl(&[
            "get",
            "cm",
            "tether-inventory-hooked",
            "-n",
            "tether-system",
            "-o",
            "jsonpath={.data.objects}",
        ])
        .await
        .ok()
        .stdout;
    assert!(
        inventory.contains("\"settings\"") && !inventory.contains("Job"),
        "{inventory}"
    );
    let diff = app_report(&sandbox, "diff", &dir, "hooked", &[], 0).await;
    let kinds = resource_fields(&diff, "kind", |_| true);
    assert_eq!(kinds, ["ConfigMap"], "{diff}");

    // The next sync: BeforeHookCreation replaces each PreSync Job (a new instance of
    // the generateName hook, a new uid for the named one); nothing is pruned.
    let dir = app_dir(&sandbox, "hooked", &files("2"));
    let report = app_report(&sandbox, "sync", &dir, "hooked", &[], 0).await;
    assert_eq!(report["summary"]["pruned"], 0, "{report}");
    let second = jobs(&sandbox).await;
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(
        second[0].0.starts_with("migrate-") && second[0].0 != first[0].0,
        "{first:?} {second:?}"
    );
    assert_eq!(second[1].0, "seed");
    assert_ne!(second[1].1, first[1].1, "seed was created again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pre_sync_hook_applies_nothing_and_sync_fail_runs() {
    let sandbox = sandbox().await;
    let dir = app_dir(
        &sandbox,
        "failing",
        &[
            ("settings.yaml", configmap("settings", "1")),
            (
                "migrate.yaml",
                job(
                    "name: migrate",
                    &[
                        ("tether.dev/hook", "PreSync"),
                        ("tether.dev/hook-delete-policy", "HookSucceeded"),
                    ],
                    "busybox:1.36-broken",
                ),
            ),
            (
                "notify.yaml",
                job(
                    "generateName: notify-",
                    &[("argocd.argoproj.io/hook", "SyncFail")],
                    "busybox:1.36",
                ),
            ),
        ],
    );
    let report = app_report(&sandbox, "sync", &dir, "failing", &[], 1).await;
    let ran = hooks(&report);
    assert_eq!(ran.len(), 2, "{report}");
    assert_eq!(
        ran[0],
        ("PreSync".into(), "migrate".into(), "failed".into(), false)
    );
    assert_eq!(
        (ran[1].0.as_str(), ran[1].2.as_str()),
        ("SyncFail", "succeeded")
    );
    assert!(ran[1].1.starts_with("notify-"), "{ran:?}");
    assert_eq!(report["resources"][0]["action"], "skipped", "{report}");
    let missing = sandbox.kubectl(&["get", "cm", "settings"]).await;
    assert!(missing.stderr.contains("NotFound"), "{missing:?}");
    // HookSucceeded only: the failed instance is kept for a person to read.
    let names: Vec<String> = jobs(&sandbox).await.into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[0], "migrate");
    assert!(names[1].starts_with("notify-"), "{names:?}");
}

/// A PreSync hook in a namespace the same revision creates (issue #25): the Namespace
/// is applied before the hook runs, as Argo CD's CreateNamespace makes it; before, the
/// hook failed with `namespaces "migrations" not found` at every sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_sync_hook_runs_in_a_namespace_the_revision_creates() {
    let sandbox = sandbox().await;
    let in_migrations = |text: String| text.replace("namespace: default", "namespace: migrations");
    let dir = app_dir(
        &sandbox,
        "fresh",
        &[
            (
                "namespace.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: migrations\n".to_string(),
            ),
            ("settings.yaml", in_migrations(configmap("settings", "1"))),
            (
                "migrate.yaml",
                in_migrations(job(
                    "name: migrate",
                    &[("argocd.argoproj.io/hook", "PreSync")],
                    "busybox:1.36",
                )),
            ),
        ],
    );
    let report = app_report(&sandbox, "sync", &dir, "fresh", &[], 0).await;
    assert_eq!(
        hooks(&report),
        vec![(
            "PreSync".into(),
            "migrate".into(),
            "succeeded".into(),
            false
        )],
        "{report}"
    );
    let actions: Vec<(&str, &str)> = report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default(),
                r["action"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        actions.contains(&("Namespace", "created")) && actions.contains(&("ConfigMap", "created")),
        "{report}"
    );
    sandbox
        .kubectl(&["get", "job", "migrate", "-n", "migrations"])
        .await
        .ok();
    sandbox
        .kubectl(&["get", "configmap", "settings", "-n", "migrations"])
        .await
        .ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_failed_policy_deletes_a_failed_sync_hook() {
    let sandbox = sandbox().await;
    let dir = app_dir(
        &sandbox,
        "checked",
        &[
            ("settings.yaml", configmap("settings", "1")),
            (
                "check.yaml",
                job(
                    "name: check",
                    &[
                        ("tether.dev/hook", "Sync"),
                        ("argocd.argoproj.io/hook", "PreSync"),
                        ("tether.dev/hook-delete-policy", "HookFailed"),
                    ],
                    "busybox:1.36-broken",
                ),
            ),
        ],
    );
    let report = app_report(&sandbox, "sync", &dir, "checked", &[], 1).await;
    // tether's annotation wins: a Sync hook, run after the app's objects.
    assert_eq!(
        hooks(&report),
        [("Sync".into(), "check".into(), "failed".into(), true)]
    );
    assert_eq!(report["resources"][0]["action"], "created", "{report}");
    assert!(jobs(&sandbox).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_name_is_accepted_only_for_hooks() {
    let sandbox = sandbox().await;
    let dir = app_dir(
        &sandbox,
        "unnamed",
        &[("run.yaml", job("generateName: run-", &[], "busybox:1.36"))],
    );
    for command in ["diff", "sync"] {
        let out = tether_app(&sandbox, command, &dir, "unnamed", &[]).await;
        assert_eq!(out.code, Some(2), "{command}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr
                .contains("run.yaml, document 1, line 1: missing metadata.name"),
            "{command}: {}",
            out.stderr
        );
    }
    assert!(jobs(&sandbox).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charts_helm_hooks_run_as_argo_cd_maps_them() {
    let sandbox = sandbox().await;
    let helm_job = |name: &str, hook: &str, policy: Option<&str>| {
        let mut annotations = vec![("helm.sh/hook", hook)];
        if let Some(policy) = policy {
            annotations.push(("helm.sh/hook-delete-policy", policy));
        }
        job(&format!("name: {name}"), &annotations, "busybox:1.36")
    };
    let files = [
        (
            "Chart.yaml",
            "apiVersion: v2\nname: hooked\nversion: 0.1.0\n".to_string(),
        ),
        ("templates/settings.yaml", configmap("settings", "1")),
        (
            "templates/migrate.yaml",
            helm_job("migrate", "pre-install,pre-upgrade", Some("hook-succeeded")),
        ),
        (
            "templates/notify.yaml",
            helm_job("notify", "post-install", None),
        ),
        // Argo CD runs no Helm test hook, and neither does tether.
        ("templates/test.yaml", helm_job("chart-test", "test", None)),
    ];
    let dir = app_dir(&sandbox, "chart", &files);
    let helm = crate::chart::helm();
    let out = tether(
        &sandbox,
        "sync",
        &[
            "--path",
            dir.to_str().expect("utf-8"),
            "--app",
            "hooked",
            "--helm",
            helm.to_str().expect("utf-8"),
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let report = json(&out);
    let ran: Vec<(String, String, String, bool)> = hooks(&report)
        .into_iter()
        .filter(|h| h.2 != "skipped")
        .collect();
    assert_eq!(
        ran,
        [
            ("PreSync".into(), "migrate".into(), "succeeded".into(), true),
            (
                "PostSync".into(),
                "notify".into(),
                "succeeded".into(),
                false
            ),
        ],
        "{report}"
    );
    // hook-succeeded deleted migrate; the test hook was never created.
    let names: Vec<String> = jobs(&sandbox).await.into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["notify"]);
    let resources = resource_fields(&report, "name", |_| true);
    assert_eq!(resources, ["settings"], "{report}");
}

/// The uid of the Job `name` in `default`, if it exists.
async fn job_uid(sandbox: &TestSandbox, name: &str) -> Option<String> {
    jobs(sandbox)
        .await
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, uid)| uid)
}

/// The count of the app's succeeded passes, from `tether serve`'s metrics.
async fn passes(serve: &crate::serve::Serve, app: &str) -> u64 {
    let text = get_text(format!("{}/metrics", serve.url)).await;
    let series = format!("tether_reconcile_passes_total{{app=\"{app}\",result=\"Succeeded\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_hooks_only_on_a_pass_that_writes() {
    let sandbox = sandbox().await;
    let origin = crate::serve::origin(
        &sandbox,
        &[
            ("apps/hooked/settings.yaml", &configmap("settings", "1")),
            (
                "apps/hooked/migrate.yaml",
                &job(
                    "name: migrate",
                    &[("argocd.argoproj.io/hook", "PreSync")],
                    "busybox:1.36",
                ),
            ),
        ],
    );
    let server = crate::serve::server_section(sandbox.dir.path());
    // A resync every second, so passes with nothing to do follow one another.
    let config = format!(
        "{server}resyncInterval: 1s\napps:\n- name: hooked\n  source: {{repo: \"{}\", ref: main, path: apps/hooked, interval: 1h}}\n  destination: {{namespace: default}}\n  sync: {{automated: true, selfHeal: true}}\n",
        origin.url
    );
    let serve = crate::serve::Serve::start(&sandbox, "hooked", &config, &[]).await;
    serve.wait_synced("hooked").await;
    let first = crate::support::eventually("the PreSync Job ran", || async {
        job_uid(&sandbox, "migrate").await
    })
    .await;

    // Passes with no drift write nothing, so they run no hook.
    let before = passes(&serve, "hooked").await;
    crate::support::eventually("two more passes", || async {
        (passes(&serve, "hooked").await >= before + 2).then_some(())
    })
    .await;
    assert_eq!(
        job_uid(&sandbox, "migrate").await.as_deref(),
        Some(first.as_str()),
        "a pass without drift ran the hook again:\n{}",
        serve.log()
    );

    // A pass that writes (healing an edit) runs it again: a new instance.
    sandbox
        .kubectl_merge_patch(
            "cm",
            "settings",
            "default",
            r#"{"data":{"key":"tampered"}}"#,
        )
        .await;
    crate::support::eventually("the healing pass ran the hook again", || async {
        job_uid(&sandbox, "migrate")
            .await
            .filter(|uid| *uid != first)
    })
    .await;
    let log = serve.log();
    assert_eq!(serve.stop().await, Some(0), "{log}");
}

/// Issue #25: the CRDs a revision creates exist before its PreSync hooks, as its
/// Namespaces do (the plan hoists both to the top of PreSync): a PreSync hook that is
/// a resource of the revision's own CRD runs instead of failing as an unserved kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_sync_hook_of_a_kind_the_revision_defines_runs() {
    let sandbox = sandbox().await;
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: migrations.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: migrations, singular: migration, kind: Migration}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec: {type: object, properties: {to: {type: string}}}\n";
    let hook = "apiVersion: example.com/v1\nkind: Migration\nmetadata:\n  name: schema\n  namespace: default\n  annotations:\n    argocd.argoproj.io/hook: PreSync\nspec:\n  to: \"2\"\n";
    let dir = app_dir(
        &sandbox,
        "defined",
        &[
            ("crd.yaml", crd.to_string()),
            ("migration.yaml", hook.to_string()),
            ("settings.yaml", configmap("settings", "1")),
        ],
    );
    let report = app_report(&sandbox, "sync", &dir, "defined", &[], 0).await;
    assert_eq!(
        hooks(&report),
        vec![("PreSync".into(), "schema".into(), "succeeded".into(), false)],
        "{report}"
    );
    sandbox
        .kubectl(&["get", "migrations.example.com", "schema", "-n", "default"])
        .await
        .ok();
    sandbox
        .kubectl(&["get", "configmap", "settings", "-n", "default"])
        .await
        .ok();
}
