//! The annotations of Argo CD and Flux repositories (issue #14, part 3), each honoured
//! by `tether sync` and `tether diff` run as processes against the sandbox, and
//! checked with `kubectl`: Argo CD's sync-wave, sync-options (`Prune=false`,
//! `Delete=false`, `Replace=true`, `ServerSideApply=true`,
//! `SkipDryRunOnMissingResource=true`) and `compare-options: IgnoreExtraneous`; Flux's
//! `prune: disabled`, `ssa: IfNotPresent|Ignore|Merge`, `force: enabled` and
//! `reconcile: disabled`; and tether's own annotation winning where both are set.

use std::path::Path;

use serde_json::Value;

use crate::support::{
    TestSandbox, app_dir, app_report, resource, resource_fields, tether_app as run,
};

/// A ConfigMap in `default` with `annotations` (YAML lines under `annotations:`) and
/// one data key.
fn configmap(name: &str, annotations: &[(&str, &str)], value: &str) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n"
    );
    if !annotations.is_empty() {
        text.push_str("  annotations:\n");
        for (key, val) in annotations {
            text.push_str(&format!("    {key}: \"{val}\"\n"));
        }
    }
    text.push_str(&format!("data:\n  key: \"{value}\"\n"));
    text
}

/// Syncs and requires exit 0.
async fn sync_ok(sandbox: &TestSandbox, dir: &Path, app: &str, extra: &[&str]) -> Value {
    app_report(sandbox, "sync", dir, app, extra, 0).await
}

fn action<'r>(report: &'r Value, object: &str) -> &'r str {
    resource(report, object)["action"]
        .as_str()
        .unwrap_or_default()
}

fn message<'r>(report: &'r Value, object: &str) -> &'r str {
    resource(report, object)["message"]
        .as_str()
        .unwrap_or_default()
}

/// A ConfigMap in `default` as JSON, or None when the server says it does not exist.
async fn live(sandbox: &TestSandbox, name: &str) -> Option<Value> {
    let out = sandbox
        .kubectl(&["get", "cm", name, "-o", "json", "--show-managed-fields"])
        .await;
    if out.code != 0 {
        assert!(out.stderr.contains("(NotFound)"), "{}", out.stderr);
        return None;
    }
    Some(serde_json::from_str(&out.stdout).expect("JSON"))
}

async fn data(sandbox: &TestSandbox, name: &str, key: &str) -> Option<String> {
    live(sandbox, name)
        .await
        .and_then(|cm| cm["data"][key].as_str().map(str::to_string))
}

/// Applies `yaml` as another field manager, as a person or controller would.
async fn apply_as(sandbox: &TestSandbox, manager: &str, file: &str, yaml: &str) {
    let path = sandbox.write_file(file, yaml);
    sandbox
        .kubectl(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager",
            manager,
            "-f",
            &path,
        ])
        .await
        .ok();
}

fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_sync_waves_order_the_apply_and_tethers_wave_wins() {
    let sandbox = TestSandbox::start().await;
    let dir = app_dir(
        &sandbox,
        "waves",
        &[
            // Written last but Argo CD's wave -1 applies it first.
            (
                "a.yaml",
                configmap(
                    "late-tether",
                    &[
                        ("tether.dev/sync-wave", "1"),
                        ("argocd.argoproj.io/sync-wave", "-5"),
                    ],
                    "1",
                ),
            ),
            ("b.yaml", configmap("middle", &[], "1")),
            (
                "c.yaml",
                configmap("early-argo", &[("argocd.argoproj.io/sync-wave", "-1")], "1"),
            ),
        ],
    );
    sync_ok(&sandbox, &dir, "waves", &[]).await;
    let mut versions = Vec::new();
    for name in ["early-argo", "middle", "late-tether"] {
        versions.push(resource_version(
            &live(&sandbox, name).await.expect("created"),
        ));
    }
    assert!(
        versions[0] < versions[1] && versions[1] < versions[2],
        "applied out of wave order: {versions:?}"
    );

    let bad = app_dir(
        &sandbox,
        "waves-bad",
        &[(
            "a.yaml",
            configmap("soon", &[("argocd.argoproj.io/sync-wave", "soon")], "1"),
        )],
    );
    let refused = run(&sandbox, "sync", &bad, "waves-bad", &[]).await;
    assert_eq!(
        refused.code,
        Some(2),
        "{}{}",
        refused.stdout,
        refused.stderr
    );
    assert!(
        refused
            .stderr
            .contains("annotation argocd.argoproj.io/sync-wave: \"soon\" is not an integer"),
        "{}",
        refused.stderr
    );
    assert_eq!(live(&sandbox, "soon").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_and_flux_prune_protections_keep_objects_and_tethers_own_wins() {
    let sandbox = TestSandbox::start().await;
    let kept = configmap("kept", &[], "1");
    let protected = [
        ("no-prune", "argocd.argoproj.io/sync-options", "Prune=false"),
        (
            "no-delete",
            "argocd.argoproj.io/sync-options",
            "ServerSideApply=true, Delete=false",
        ),
        (
            "flux-no-prune",
            "kustomize.toolkit.fluxcd.io/prune",
            "disabled",
        ),
    ];
    let mut files: Vec<(String, String)> = protected
        .iter()
        .map(|(name, key, value)| {
            (
                format!("{name}.yaml"),
                configmap(name, &[(key, value)], "1"),
            )
        })
        .collect();
    // tether.dev/prune set to anything but `disabled` overrules Argo CD's Prune=false.
    let overruled = [
        ("tether.dev/prune", "enabled"),
        ("argocd.argoproj.io/sync-options", "Prune=false"),
    ];
    files.push((
        "overruled.yaml".into(),
        configmap("overruled", &overruled, "1"),
    ));
    files.push(("kept.yaml".into(), kept.clone()));
    let named: Vec<(&str, String)> = files.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
    let dir = app_dir(&sandbox, "protect", &named);
    sync_ok(&sandbox, &dir, "protect", &[]).await;

    let dir = app_dir(&sandbox, "protect", &[("kept.yaml", kept)]);
    let report = sync_ok(&sandbox, &dir, "protect", &["--prune"]).await;
    for (name, key, value) in protected {
        let object = format!("ConfigMap/{name}");
        assert_eq!(action(&report, &object), "skipped", "{report}");
        let option = value
            .split(',')
            .map(str::trim)
            .find(|o| !o.starts_with("ServerSideApply"))
            .unwrap_or(value);
        assert_eq!(
            message(&report, &object),
            format!("not pruned: annotated {key}: {option}")
        );
        assert!(live(&sandbox, name).await.is_some(), "{name} was pruned");
    }
    assert_eq!(action(&report, "ConfigMap/overruled"), "pruned", "{report}");
    assert_eq!(live(&sandbox, "overruled").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_replace_true_creates_and_replaces_where_server_side_apply_merges() {
    let sandbox = TestSandbox::start().await;
    let files = |value: &str| {
        vec![
            (
                "r.yaml",
                configmap(
                    "replaced",
                    &[("argocd.argoproj.io/sync-options", "Replace=true")],
                    value,
                ),
            ),
            // ServerSideApply=true is what tether always does: accepted, no change.
            (
                "s.yaml",
                configmap(
                    "applied",
                    &[("argocd.argoproj.io/sync-options", "ServerSideApply=true")],
                    value,
                ),
            ),
        ]
    };
    let dir = app_dir(&sandbox, "replace", &files("1"));
    let first = sync_ok(&sandbox, &dir, "replace", &[]).await;
    assert_eq!(action(&first, "ConfigMap/replaced"), "created");
    let operation = |cm: &Value| {
        cm["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["manager"] == "tether")
            .map(|e| e["operation"].as_str().unwrap_or_default().to_string())
    };
    // Created with a POST (kubectl create), not an apply.
    let replaced = live(&sandbox, "replaced").await.expect("created");
    assert_eq!(
        operation(&replaced).as_deref(),
        Some("Update"),
        "{replaced}"
    );
    assert_eq!(replaced["metadata"]["labels"]["tether.dev/app"], "replace");
    let applied = live(&sandbox, "applied").await.expect("created");
    assert_eq!(operation(&applied).as_deref(), Some("Apply"), "{applied}");

    // Someone adds a key to both; Git changes the value of `key`.
    for name in ["replaced", "applied"] {
        let theirs = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  other: theirs\n"
        );
        apply_as(&sandbox, "someone-else", &format!("{name}.yaml"), &theirs).await;
    }
    let dir = app_dir(&sandbox, "replace", &files("2"));
    let second = sync_ok(&sandbox, &dir, "replace", &[]).await;
    assert_eq!(
        action(&second, "ConfigMap/replaced"),
        "configured",
        "{second}"
    );
    assert_eq!(
        action(&second, "ConfigMap/applied"),
        "configured",
        "{second}"
    );
    // A replace writes the whole object: the other key is gone. An apply merges.
    assert_eq!(
        data(&sandbox, "replaced", "key").await.as_deref(),
        Some("2")
    );
    assert_eq!(data(&sandbox, "replaced", "other").await, None);
    assert_eq!(data(&sandbox, "applied", "key").await.as_deref(), Some("2"));
    assert_eq!(
        data(&sandbox, "applied", "other").await.as_deref(),
        Some("theirs")
    );
    // In sync afterwards: nothing is written again.
    let third = sync_ok(&sandbox, &dir, "replace", &[]).await;
    assert_eq!(action(&third, "ConfigMap/replaced"), "unchanged", "{third}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_dry_run_on_missing_resource_skips_an_unserved_kind_instead_of_failing() {
    let sandbox = TestSandbox::start().await;
    let widget = |annotations: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: default\n{annotations}spec:\n  size: 1\n"
        )
    };
    let skip =
        "  annotations:\n    argocd.argoproj.io/sync-options: SkipDryRunOnMissingResource=true\n";

    // Without the option, an unserved kind fails validation and nothing is applied.
    let dir = app_dir(
        &sandbox,
        "missing",
        &[
            ("cm.yaml", configmap("beside", &[], "1")),
            ("g.yaml", widget("")),
        ],
    );
    let refused = run(&sandbox, "sync", &dir, "missing", &[]).await;
    assert_eq!(
        refused.code,
        Some(1),
        "{}{}",
        refused.stdout,
        refused.stderr
    );
    let refused: Value = serde_json::from_str(&refused.stdout).expect("JSON");
    assert_eq!(action(&refused, "Gadget/g1"), "failed");
    assert_eq!(live(&sandbox, "beside").await, None);

    // With it, the object is skipped with a reason and the rest is applied.
    let dir = app_dir(
        &sandbox,
        "missing",
        &[
            ("cm.yaml", configmap("beside", &[], "1")),
            ("g.yaml", widget(skip)),
        ],
    );
    let report = sync_ok(&sandbox, &dir, "missing", &[]).await;
    assert_eq!(action(&report, "Gadget/g1"), "skipped", "{report}");
    assert!(
        message(&report, "Gadget/g1").contains("does not serve example.com/v1/Gadget")
            && message(&report, "Gadget/g1").contains("SkipDryRunOnMissingResource=true"),
        "{report}"
    );
    assert_eq!(action(&report, "ConfigMap/beside"), "created");
    // It is still missing, and a diff says so.
    let diff = run(&sandbox, "diff", &dir, "missing", &[]).await;
    assert_eq!(diff.code, Some(1), "{}{}", diff.stdout, diff.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_extraneous_is_not_drift_and_is_pruned_only_with_prune() {
    let sandbox = TestSandbox::start().await;
    let stay = [
        ("a.yaml", configmap("stay-a", &[], "1")),
        ("b.yaml", configmap("stay-b", &[], "1")),
    ];
    let mut all = stay.to_vec();
    all.push((
        "x.yaml",
        configmap(
            "generated",
            &[("argocd.argoproj.io/compare-options", "IgnoreExtraneous")],
            "1",
        ),
    ));
    all.push(("y.yaml", configmap("plain", &[], "1")));
    let dir = app_dir(&sandbox, "extraneous", &all);
    sync_ok(&sandbox, &dir, "extraneous", &[]).await;

    // Only the annotated object leaves Git: no drift, the app is in sync.
    let mut without_x = stay.to_vec();
    without_x.push(("y.yaml", configmap("plain", &[], "1")));
    let dir = app_dir(&sandbox, "extraneous", &without_x);
    let diff = run(&sandbox, "diff", &dir, "extraneous", &[]).await;
    assert_eq!(diff.code, Some(0), "{}{}", diff.stdout, diff.stderr);
    let report = sync_ok(&sandbox, &dir, "extraneous", &[]).await;
    assert_eq!(action(&report, "ConfigMap/generated"), "skipped");
    assert!(
        message(&report, "ConfigMap/generated").contains("IgnoreExtraneous"),
        "{report}"
    );
    assert!(live(&sandbox, "generated").await.is_some());

    // An object without it is drift when it leaves Git.
    let dir = app_dir(&sandbox, "extraneous", &stay);
    let diff = app_report(&sandbox, "diff", &dir, "extraneous", &[], 1).await;
    let extra = resource_fields(&diff, "name", |r| r["status"] == "Extra");
    assert_eq!(extra, ["plain"], "{diff}");

    // Asked to prune, tether prunes it as Argo CD does.
    let report = sync_ok(&sandbox, &dir, "extraneous", &["--prune"]).await;
    assert_eq!(action(&report, "ConfigMap/generated"), "pruned", "{report}");
    assert_eq!(live(&sandbox, "generated").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_ssa_if_not_present_creates_once_and_never_updates() {
    let sandbox = TestSandbox::start().await;
    let once = |value: &str| {
        configmap(
            "seed",
            &[("kustomize.toolkit.fluxcd.io/ssa", "IfNotPresent")],
            value,
        )
    };
    let dir = app_dir(&sandbox, "once", &[("s.yaml", once("1"))]);
    let created = sync_ok(&sandbox, &dir, "once", &[]).await;
    assert_eq!(action(&created, "ConfigMap/seed"), "created");

    sandbox
        .kubectl_merge_patch("cm", "seed", "default", r#"{"data":{"key":"edited"}}"#)
        .await;
    let dir = app_dir(&sandbox, "once", &[("s.yaml", once("2"))]);
    let report = sync_ok(&sandbox, &dir, "once", &[]).await;
    assert_eq!(action(&report, "ConfigMap/seed"), "skipped", "{report}");
    assert!(
        message(&report, "ConfigMap/seed").contains("IfNotPresent"),
        "{report}"
    );
    assert_eq!(
        data(&sandbox, "seed", "key").await.as_deref(),
        Some("edited")
    );
    let diff = run(&sandbox, "diff", &dir, "once", &[]).await;
    assert_eq!(diff.code, Some(0), "{}{}", diff.stdout, diff.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_ssa_merge_overrides_the_manifests_fields_and_keeps_what_others_added() {
    let sandbox = TestSandbox::start().await;
    let theirs = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: default\ndata:\n  key: theirs\n  other: kept\n";
    apply_as(&sandbox, "someone-else", "theirs.yaml", theirs).await;
    let merge = [("kustomize.toolkit.fluxcd.io/ssa", "Merge")];

    // As Flux documents it: the fields the manifest sets are always overridden...
    let dir = app_dir(
        &sandbox,
        "merge",
        &[("m.yaml", configmap("shared", &merge, "ours"))],
    );
    let report = sync_ok(&sandbox, &dir, "merge", &[]).await;
    assert_eq!(
        action(&report, "ConfigMap/shared"),
        "configured",
        "{report}"
    );
    assert_eq!(
        data(&sandbox, "shared", "key").await.as_deref(),
        Some("ours")
    );
    // ...and the fields other tools added, which the manifest does not set, stay.
    assert_eq!(
        data(&sandbox, "shared", "other").await.as_deref(),
        Some("kept")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_force_enabled_recreates_an_object_on_an_immutable_change() {
    let sandbox = TestSandbox::start().await;
    let deployment = |selector: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n    kustomize.toolkit.fluxcd.io/force: enabled\nspec:\n  selector: {{matchLabels: {{app: {selector}}}}}\n  template:\n    metadata: {{labels: {{app: {selector}}}}}\n    spec:\n      containers: [{{name: app, image: nginx}}]\n"
        )
    };
    let dir = app_dir(&sandbox, "force", &[("d.yaml", deployment("one"))]);
    sync_ok(&sandbox, &dir, "force", &[]).await;
    let dir = app_dir(&sandbox, "force", &[("d.yaml", deployment("two"))]);
    // No --replace-immutable: the annotation asks for it, for this object.
    let report = sync_ok(&sandbox, &dir, "force", &[]).await;
    assert_eq!(action(&report, "Deployment/web"), "replaced", "{report}");
    let selector = sandbox
        .kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.selector.matchLabels.app}",
        ])
        .await
        .ok();
    assert_eq!(selector.stdout, "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_reconcile_disabled_and_ssa_ignore_are_reported_never_applied_nor_pruned() {
    let sandbox = TestSandbox::start().await;
    let base = [
        ("a.yaml", configmap("anchor-a", &[], "1")),
        ("b.yaml", configmap("anchor-b", &[], "1")),
        ("p.yaml", configmap("paused-live", &[], "1")),
    ];
    let dir = app_dir(&sandbox, "paused", &base);
    sync_ok(&sandbox, &dir, "paused", &[]).await;

    // In Git: never created, reported as skipped and as drift.
    let mut files = base.to_vec();
    files.push((
        "r.yaml",
        configmap(
            "paused-git",
            &[("kustomize.toolkit.fluxcd.io/reconcile", "disabled")],
            "1",
        ),
    ));
    files.push((
        "i.yaml",
        configmap(
            "ignored",
            &[("kustomize.toolkit.fluxcd.io/ssa", "Ignore")],
            "1",
        ),
    ));
    let dir = app_dir(&sandbox, "paused", &files);
    let report = sync_ok(&sandbox, &dir, "paused", &[]).await;
    assert_eq!(
        action(&report, "ConfigMap/paused-git"),
        "skipped",
        "{report}"
    );
    assert_eq!(
        message(&report, "ConfigMap/paused-git"),
        "not applied: annotated kustomize.toolkit.fluxcd.io/reconcile: disabled"
    );
    assert_eq!(action(&report, "ConfigMap/ignored"), "skipped", "{report}");
    assert_eq!(
        message(&report, "ConfigMap/ignored"),
        "not applied: annotated kustomize.toolkit.fluxcd.io/ssa: Ignore"
    );
    assert_eq!(live(&sandbox, "paused-git").await, None);
    assert_eq!(live(&sandbox, "ignored").await, None);
    let diff = run(&sandbox, "diff", &dir, "paused", &[]).await;
    assert_eq!(
        diff.code,
        Some(1),
        "reported as drift: {}{}",
        diff.stdout,
        diff.stderr
    );

    // Set on the live object (kubectl annotate): changes there are not corrected...
    sandbox
        .kubectl(&[
            "annotate",
            "cm",
            "paused-live",
            "kustomize.toolkit.fluxcd.io/reconcile=disabled",
        ])
        .await
        .ok();
    sandbox
        .kubectl_merge_patch(
            "cm",
            "paused-live",
            "default",
            r#"{"data":{"key":"by-hand"}}"#,
        )
        .await;
    let dir = app_dir(&sandbox, "paused", &base);
    let report = sync_ok(&sandbox, &dir, "paused", &[]).await;
    assert_eq!(
        action(&report, "ConfigMap/paused-live"),
        "skipped",
        "{report}"
    );
    assert_eq!(
        data(&sandbox, "paused-live", "key").await.as_deref(),
        Some("by-hand")
    );
    // ...and it is not pruned when it leaves Git.
    let dir = app_dir(&sandbox, "paused", &base[..2]);
    let report = sync_ok(&sandbox, &dir, "paused", &["--prune"]).await;
    assert_eq!(
        action(&report, "ConfigMap/paused-live"),
        "skipped",
        "{report}"
    );
    assert_eq!(
        message(&report, "ConfigMap/paused-live"),
        "not pruned: annotated kustomize.toolkit.fluxcd.io/reconcile: disabled"
    );
    assert!(live(&sandbox, "paused-live").await.is_some());
}
