use serde_json::{Value, json};

use super::*;
use tether_diff::manifest::{ManifestErrors, ParseOptions, parse_files};

fn read(yaml: &str) -> Result<ManifestSet, ManifestErrors> {
    parse_files(&[("hooks.yaml", yaml.as_bytes())], &ParseOptions::default())
}

const APP_AND_HOOKS: &str = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
apiVersion: batch/v1
kind: Job
metadata:
  generateName: migrate-
  annotations:
    argocd.argoproj.io/hook: PreSync
    argocd.argoproj.io/hook-delete-policy: HookSucceeded, HookFailed
spec: {}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: smoke
  annotations:
    tether.dev/hook: PostSync,SyncFail
    argocd.argoproj.io/hook: PreSync
spec: {}
";

#[test]
fn hooks_are_split_from_the_app_objects_with_their_phases_and_policies() {
    let set = read(APP_AND_HOOKS).expect("reads");
    let (app, hooks) = split(&set).expect("valid hooks");
    let names: Vec<&str> = app.objects.iter().map(|m| m.id.name.as_str()).collect();
    assert_eq!(names, ["settings"]);
    assert_eq!(hooks.len(), 2);
    // A generateName hook is named by its prefix.
    assert_eq!(hooks[0].manifest.id.name, "migrate-");
    assert_eq!(hooks[0].phases, [Phase::PreSync]);
    assert_eq!(
        hooks[0].delete,
        [DeletePolicy::HookSucceeded, DeletePolicy::HookFailed]
    );
    // tether's annotation wins over Argo CD's; the default policy is
    // BeforeHookCreation.
    assert_eq!(hooks[1].phases, [Phase::PostSync, Phase::SyncFail]);
    assert_eq!(hooks[1].delete, [DeletePolicy::BeforeHookCreation]);
}

#[test]
fn a_set_without_hooks_is_borrowed_as_is() {
    let set = read("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n").expect("reads");
    let (app, hooks) = split(&set).expect("no hooks");
    assert!(matches!(app, Cow::Borrowed(_)));
    assert!(hooks.is_empty());
}

#[test]
fn generate_name_is_refused_for_an_object_that_is_not_a_hook() {
    let err = read("apiVersion: batch/v1\nkind: Job\nmetadata: {generateName: run-}\n")
        .expect_err("an app object needs a name");
    assert_eq!(
        err.to_string(),
        "1 manifest error\n  hooks.yaml, document 1, line 1: missing metadata.name"
    );
}

#[test]
fn unknown_phases_delete_policies_and_waves_are_each_refused() {
    let set = read(
        "\
apiVersion: batch/v1
kind: Job
metadata:
  name: a
  annotations:
    tether.dev/hook: PreDelete
    tether.dev/hook-delete-policy: Never
    tether.dev/sync-wave: soon
",
    )
    .expect("reads");
    let errors = split(&set).expect_err("refused");
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "Job.batch default/a: annotation tether.dev/hook: \"PreDelete\" is not one of PreSync, Sync, PostSync, SyncFail, Skip",
            "Job.batch default/a: annotation tether.dev/hook-delete-policy: \"Never\" is not one of BeforeHookCreation, HookSucceeded, HookFailed",
            "Job.batch default/a: annotation tether.dev/sync-wave: \"soon\" is not an integer",
        ]
    );
}

#[test]
fn skip_is_a_hook_that_never_runs() {
    let set = read(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {argocd.argoproj.io/hook: Skip}}\n",
    )
    .expect("reads");
    let (app, hooks) = split(&set).expect("valid");
    assert!(app.is_empty());
    assert!(hooks[0].phases.is_empty());
}

fn id(group: &str, kind: &str) -> ObjectId {
    ObjectId {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: Some("ns".into()),
        name: "h".into(),
    }
}

fn with_status(status: Value) -> Value {
    json!({"metadata": {"name": "h"}, "status": status})
}

#[test]
fn a_job_is_done_when_complete_or_failed_and_a_pod_by_its_phase() {
    let job = id("batch", "Job");
    let cond = |kind: &str| {
        with_status(
            json!({"conditions": [{"type": kind, "status": "True", "message": "BackoffLimitExceeded"}]}),
        )
    };
    assert_eq!(done(&job, &with_status(json!({}))), None);
    assert_eq!(done(&job, &cond("Complete")), Some(Ok(())));
    assert!(matches!(done(&job, &cond("Failed")), Some(Err(_))));
    let pod = id("", "Pod");
    assert_eq!(done(&pod, &with_status(json!({"phase": "Running"}))), None);
    assert_eq!(
        done(&pod, &with_status(json!({"phase": "Succeeded"}))),
        Some(Ok(()))
    );
    assert_eq!(
        done(
            &pod,
            &with_status(json!({"phase": "Failed", "message": "exit 1"}))
        ),
        Some(Err("exit 1".into()))
    );
}

#[test]
fn helm_hooks_are_mapped_as_argo_cd_maps_them_and_argo_cds_annotation_wins() {
    let set = read(
        "\
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: hook-succeeded,before-hook-creation
    helm.sh/hook-weight: \"-1\"
spec: {}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: notify
  annotations:
    helm.sh/hook: post-install
spec: {}
---
apiVersion: v1
kind: Pod
metadata:
  name: chart-test
  annotations:
    helm.sh/hook: test
    helm.sh/hook-delete-policy: hook-failed
spec: {}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: both
  annotations:
    helm.sh/hook: pre-install
    helm.sh/hook-delete-policy: hook-failed
    argocd.argoproj.io/hook: PostSync
spec: {}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
  annotations:
    helm.sh/hook: crd-install
spec: {}
",
    )
    .expect("reads");
    let (app, hooks) = split(&set).expect("valid hooks");
    // Helm 2's crd-install marks an ordinary object, as Argo CD reads it.
    let names: Vec<&str> = app.objects.iter().map(|m| m.id.name.as_str()).collect();
    assert_eq!(names, ["widgets.example.com"]);
    let by_name = |name: &str| {
        hooks
            .iter()
            .find(|h| h.manifest.id.name == name)
            .unwrap_or_else(|| panic!("hook {name}"))
    };
    let migrate = by_name("migrate");
    assert_eq!(migrate.phases, [Phase::PreSync]);
    assert_eq!(
        migrate.delete,
        [
            DeletePolicy::HookSucceeded,
            DeletePolicy::BeforeHookCreation
        ]
    );
    assert_eq!(
        wave_of(&migrate.manifest.id, &migrate.manifest.object),
        Ok(-1)
    );
    let notify = by_name("notify");
    assert_eq!(notify.phases, [Phase::PostSync]);
    assert_eq!(notify.delete, [DeletePolicy::BeforeHookCreation]);
    // A Helm type Argo CD has no phase for is a hook that never runs.
    let test = by_name("chart-test");
    assert!(test.phases.is_empty());
    assert_eq!(test.delete, [DeletePolicy::HookFailed]);
    // Argo CD's phase wins over Helm's; Helm's delete policy still applies when Argo
    // CD's is not set.
    let both = by_name("both");
    assert_eq!(both.phases, [Phase::PostSync]);
    assert_eq!(both.delete, [DeletePolicy::HookFailed]);
}

#[test]
fn a_phase_runs_by_weight_then_kind_then_name_so_a_jobs_rbac_hooks_come_first() {
    // cert-manager's startupapicheck layout, listed as a chart renders it (by file).
    let hook = |kind: &str, api: &str, name: &str, weight: i32| {
        format!(
            "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n  annotations:\n    helm.sh/hook: post-install\n    helm.sh/hook-weight: \"{weight}\"\n"
        )
    };
    let rbac = "rbac.authorization.k8s.io/v1";
    let text = [
        hook("Job", "batch/v1", "startupapicheck", 1),
        hook("RoleBinding", rbac, "startupapicheck", -5),
        hook("Role", rbac, "startupapicheck", -5),
        hook("ServiceAccount", "v1", "b", -5),
        hook("ServiceAccount", "v1", "a", -5),
    ]
    .join("---\n");
    let set = read(&text).expect("reads");
    let (_, hooks) = split(&set).expect("valid");
    let steps = super::super::plan::plan(std::iter::empty(), hooks.iter().map(Hook::planned))
        .expect("valid waves");
    let order: Vec<Vec<String>> = steps
        .iter()
        .filter(|step| step.phase == Phase::PostSync)
        .map(|step| {
            step.objects
                .iter()
                .map(|&h| {
                    let id = &hooks[h].manifest.id;
                    format!("{}/{}", id.kind, id.name)
                })
                .collect()
        })
        .collect();
    assert_eq!(
        order,
        [
            vec!["ServiceAccount/a", "ServiceAccount/b"],
            vec!["Role/startupapicheck"],
            vec!["RoleBinding/startupapicheck"],
            vec!["Job/startupapicheck"],
        ]
    );
    assert!(!steps.iter().any(|step| step.phase == Phase::PreSync));
}
