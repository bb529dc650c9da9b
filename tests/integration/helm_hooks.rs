//! Helm hooks of the most installed charts (issue #31), rendered with Helm and run by
//! `tether sync` against the sandbox, whose simulated Job controller, as a cluster's,
//! never starts a Job whose ServiceAccount does not exist. cert-manager's
//! `startupapicheck` and ingress-nginx's `admission-create` run with a ServiceAccount
//! and RBAC that are hooks themselves (`before-hook-creation,hook-succeeded`): they
//! must live until every hook of the phase succeeded, then go, last created first, as
//! Helm deletes them. A hook that never finishes fails the sync at the phase's
//! deadline, naming it, and the SyncFail hooks run.

use std::path::Path;
use std::time::Duration;

use crate::hooks::{resource_version, sandbox};
use crate::support::{Run, TestSandbox, app_dir, json, tether};
use serde_json::Value;

/// The delete policy both charts give every hook.
const POLICY: &str = "before-hook-creation,hook-succeeded";

/// A hook's metadata: `kind` and `name` (in `default` unless cluster-scoped), with
/// Helm's hook annotations; `weight` is left out when None, as ingress-nginx does.
fn hook_meta(
    api_version: &str,
    kind: &str,
    name: &str,
    hook: &str,
    weight: Option<i32>,
    namespaced: bool,
) -> String {
    let mut text = format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n");
    if namespaced {
        text.push_str("  namespace: {{ .Release.Namespace }}\n");
    }
    text.push_str(&format!(
        "  annotations:\n    helm.sh/hook: {hook}\n    helm.sh/hook-delete-policy: {POLICY}\n"
    ));
    if let Some(weight) = weight {
        text.push_str(&format!("    helm.sh/hook-weight: \"{weight}\"\n"));
    }
    text
}

/// A ServiceAccount, a Role and a RoleBinding granting it the Role, as hooks; with
/// `cluster`, a ClusterRole and ClusterRoleBinding too (ingress-nginx patches its
/// webhook configuration, which is cluster-scoped).
fn hook_rbac(name: &str, hook: &str, weight: Option<i32>, cluster: bool) -> Vec<(String, String)> {
    let rbac = "rbac.authorization.k8s.io/v1";
    let subject = format!(
        "subjects:\n- kind: ServiceAccount\n  name: {name}\n  namespace: {{{{ .Release.Namespace }}}}\n"
    );
    let mut files = vec![
        (
            "serviceaccount.yaml".to_string(),
            hook_meta("v1", "ServiceAccount", name, hook, weight, true),
        ),
        (
            "role.yaml".to_string(),
            hook_meta(rbac, "Role", name, hook, weight, true)
                + "rules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get, create]\n",
        ),
        (
            "rolebinding.yaml".to_string(),
            hook_meta(rbac, "RoleBinding", name, hook, weight, true)
                + &format!(
                    "roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\n"
                )
                + &subject,
        ),
    ];
    if cluster {
        files.push((
            "clusterrole.yaml".to_string(),
            hook_meta(rbac, "ClusterRole", name, hook, weight, false)
                + "rules:\n- apiGroups: [admissionregistration.k8s.io]\n  resources: [validatingwebhookconfigurations]\n  verbs: [get, update]\n",
        ));
        files.push((
            "clusterrolebinding.yaml".to_string(),
            hook_meta(rbac, "ClusterRoleBinding", name, hook, weight, false)
                + &format!("roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {name}}}\n")
                + &subject,
        ));
    }
    files
}

/// A hook Job running as `account`.
fn hook_job(name: &str, hook: &str, weight: Option<i32>, account: &str) -> String {
    hook_meta("batch/v1", "Job", name, hook, weight, true)
        + &format!(
            "spec:\n  backoffLimit: 0\n  template:\n    spec:\n      serviceAccountName: {account}\n      restartPolicy: Never\n      containers: [{{name: run, image: \"busybox:1.36\"}}]\n"
        )
}

/// A chart named `name`: Chart.yaml, an app ConfigMap, and `templates` (file, text).
fn chart(name: &str, templates: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut files = vec![
        (
            "Chart.yaml".to_string(),
            format!("apiVersion: v2\nname: {name}\nversion: 1.0.0\n"),
        ),
        (
            "templates/settings.yaml".to_string(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {{ .Release.Namespace }}\ndata: {key: \"1\"}\n".to_string(),
        ),
    ];
    files.extend(
        templates
            .into_iter()
            .map(|(file, text)| (format!("templates/{file}"), text)),
    );
    files
}

/// `tether sync` of the chart in `dir` as `app`, rendered with Helm, with `extra` flags.
async fn sync(sandbox: &TestSandbox, dir: &Path, app: &str, extra: &[&str]) -> Run {
    let helm = crate::chart::helm();
    let mut args = vec![
        "--path",
        dir.to_str().expect("utf-8"),
        "--app",
        app,
        "--helm",
        helm.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    tether(sandbox, "sync", &args).await
}

/// The report's hooks as `(phase, kind, name, action, deleted)`, in the order run.
fn hooks(report: &Value) -> Vec<(String, String, String, String, bool)> {
    let kinds = report["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| h["kind"].as_str().unwrap_or_default().to_string());
    crate::hooks::hooks(report)
        .into_iter()
        .zip(kinds)
        .map(|((phase, name, action, deleted), kind)| (phase, kind, name, action, deleted))
        .collect()
}

/// The names of the objects of a resource (`jobs`, `serviceaccounts`, …) in `default`.
async fn names(sandbox: &TestSandbox, resource: &str) -> Vec<String> {
    let out = sandbox
        .kubectl(&["get", resource, "-n", "default", "-o", "name"])
        .await
        .ok()
        .stdout;
    out.lines().map(str::to_string).collect()
}

/// The resourceVersion at which `name` of the collection at `path` was deleted, and
/// for a Job the one at which it was first Complete, from the sandbox's history
/// since `since`.
async fn history(sandbox: &TestSandbox, path: &str, name: &str, since: u64) -> (u64, Option<u64>) {
    let named =
        |e: &Value| e.pointer("/object/metadata/name").and_then(Value::as_str) == Some(name);
    let events = sandbox
        .watch_until(
            &format!("{path}?watch=1&resourceVersion={since}"),
            Duration::from_secs(10),
            |events| events.iter().any(|e| e["type"] == "DELETED" && named(e)),
        )
        .await;
    let version = |e: &Value| {
        e.pointer("/object/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.parse::<u64>().ok())
            .expect("a resourceVersion")
    };
    let deleted = events
        .iter()
        .find(|e| e["type"] == "DELETED" && named(e))
        .map(version)
        .expect("deleted");
    let complete = events
        .iter()
        .filter(|e| e["type"] == "MODIFIED" && named(e))
        .find(|e| {
            e.pointer("/object/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Complete" && c["status"] == "True")
                })
        })
        .map(version);
    (deleted, complete)
}

/// Regression (issue #31): tether deleted each `hook-succeeded` hook as soon as it
/// was Healthy, so the ServiceAccount was gone when the Job's pods were created and
/// `startupapicheck` never started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_managers_startupapicheck_runs_with_its_rbac_hooks_deleted_after_it_last_first() {
    let sandbox = sandbox().await;
    let name = "cert-manager-startupapicheck";
    let mut templates = hook_rbac(name, "post-install", Some(-5), false);
    templates.push((
        "job.yaml".to_string(),
        hook_job(name, "post-install", Some(1), name),
    ));
    let dir = app_dir(&sandbox, "cert-manager", &chart("cert-manager", templates));
    let before = resource_version(&sandbox).await;
    let out = sync(
        &sandbox,
        &dir,
        "cert-manager",
        &["-o", "json", "--hook-timeout", "30s"],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let report = json(&out);
    let done = |kind: &str| {
        (
            "PostSync".to_string(),
            kind.to_string(),
            name.to_string(),
            "succeeded".to_string(),
            true,
        )
    };
    // Weight -5 (by kind order: the ServiceAccount, then RBAC) before the Job's 1.
    assert_eq!(
        hooks(&report),
        [
            done("ServiceAccount"),
            done("Role"),
            done("RoleBinding"),
            done("Job")
        ],
        "{report}"
    );

    // From the sandbox's history: the Job completed, then the hooks were deleted in
    // reverse order of creation (the Job first, the ServiceAccount last).
    let (job_deleted, completed) = history(
        &sandbox,
        "/apis/batch/v1/namespaces/default/jobs",
        name,
        before,
    )
    .await;
    let completed = completed.expect("the Job completed");
    let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default";
    let (binding_deleted, _) =
        history(&sandbox, &format!("{rbac}/rolebindings"), name, before).await;
    let (role_deleted, _) = history(&sandbox, &format!("{rbac}/roles"), name, before).await;
    let (account_deleted, _) = history(
        &sandbox,
        "/api/v1/namespaces/default/serviceaccounts",
        name,
        before,
    )
    .await;
    assert!(
        completed < job_deleted
            && job_deleted < binding_deleted
            && binding_deleted < role_deleted
            && role_deleted < account_deleted,
        "completed {completed}, deleted: job {job_deleted}, rolebinding {binding_deleted}, role {role_deleted}, serviceaccount {account_deleted}"
    );
    assert!(names(&sandbox, "jobs").await.is_empty());
    assert!(names(&sandbox, "serviceaccounts").await.is_empty());

    // An upgrade runs them again, from nothing left behind.
    let again = sync(
        &sandbox,
        &dir,
        "cert-manager",
        &["-o", "json", "--hook-timeout", "30s"],
    )
    .await;
    assert_eq!(again.code, Some(0), "{}{}", again.stdout, again.stderr);
    assert_eq!(hooks(&json(&again)).len(), 4);
}

/// Regression (issue #31): ingress-nginx's RBAC hooks run in both phases (pre- and
/// post-install); its `admission-create` Job (pre-install) needs them, and so does
/// `admission-patch` (post-install), created again after the PreSync phase
/// deleted them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_nginxs_admission_jobs_run_in_both_phases_with_their_rbac_hooks() {
    let sandbox = sandbox().await;
    let name = "ingress-nginx-admission";
    let mut templates = hook_rbac(
        name,
        "pre-install,pre-upgrade,post-install,post-upgrade",
        None,
        true,
    );
    templates.push((
        "job-createSecret.yaml".to_string(),
        hook_job(
            "ingress-nginx-admission-create",
            "pre-install,pre-upgrade",
            None,
            name,
        ),
    ));
    templates.push((
        "job-patchWebhook.yaml".to_string(),
        hook_job(
            "ingress-nginx-admission-patch",
            "post-install,post-upgrade",
            None,
            name,
        ),
    ));
    let dir = app_dir(
        &sandbox,
        "ingress-nginx",
        &chart("ingress-nginx", templates),
    );
    for pass in ["install", "upgrade"] {
        let out = sync(
            &sandbox,
            &dir,
            "ingress-nginx",
            &["-o", "json", "--hook-timeout", "30s"],
        )
        .await;
        assert_eq!(out.code, Some(0), "{pass}: {}{}", out.stdout, out.stderr);
        let report = json(&out);
        let ran = hooks(&report);
        for phase in ["PreSync", "PostSync"] {
            let of_phase: Vec<_> = ran.iter().filter(|h| h.0 == phase).collect();
            // Five RBAC hooks and the phase's Job, which runs last (kind order).
            assert_eq!(of_phase.len(), 6, "{pass} {phase}: {report}");
            assert_eq!(of_phase[5].1, "Job", "{pass} {phase}: {report}");
            assert!(
                of_phase.iter().all(|h| h.3 == "succeeded" && h.4),
                "{pass} {phase}: {report}"
            );
        }
        assert!(names(&sandbox, "jobs").await.is_empty(), "{pass}");
        assert!(
            names(&sandbox, "serviceaccounts").await.is_empty(),
            "{pass}"
        );
        // The app's own object was applied between the phases.
        sandbox
            .kubectl(&["get", "cm", "settings", "-n", "default"])
            .await
            .ok();
    }
}

/// Regression (issue #31): a hook that never finished held `tether sync` with no
/// deadline of its own. Its phase now fails at `--hook-timeout`, the report names
/// it, and the SyncFail hooks run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_never_finishes_fails_the_sync_at_the_phase_deadline_and_sync_fail_runs() {
    let sandbox = sandbox().await;
    let templates = vec![
        (
            // Its ServiceAccount is in no template: the Job never starts.
            "job.yaml".to_string(),
            hook_job("smoke-test", "post-install", None, "nobody"),
        ),
        (
            "notify.yaml".to_string(),
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: notify-\n  namespace: default\n  annotations:\n    argocd.argoproj.io/hook: SyncFail\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: run, image: \"busybox:1.36\"}]\n".to_string(),
        ),
    ];
    let dir = app_dir(&sandbox, "stuck", &chart("stuck", templates));
    let out = sync(
        &sandbox,
        &dir,
        "stuck",
        &["-o", "json", "--hook-timeout", "2s"],
    )
    .await;
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    let report = json(&out);
    let ran = hooks(&report);
    assert_eq!(ran.len(), 2, "{report}");
    assert_eq!(
        ran[0],
        (
            "PostSync".into(),
            "Job".into(),
            "smoke-test".into(),
            "failed".into(),
            false
        ),
        "{report}"
    );
    let message = report["hooks"][0]["message"].as_str().unwrap_or_default();
    assert_eq!(
        message,
        "did not finish within the PostSync phase's hook timeout of 2s (--hook-timeout, sync.hookTimeout)"
    );
    assert_eq!(
        (ran[1].0.as_str(), ran[1].3.as_str()),
        ("SyncFail", "succeeded"),
        "{report}"
    );

    // The text report names the hook and why.
    let text = sync(&sandbox, &dir, "stuck", &["--hook-timeout", "1s"]).await;
    assert_eq!(text.code, Some(1), "{}{}", text.stdout, text.stderr);
    let all = format!("{}{}", text.stdout, text.stderr);
    assert!(
        all.contains("smoke-test") && all.contains("hook timeout of 1s"),
        "{all}"
    );
}
