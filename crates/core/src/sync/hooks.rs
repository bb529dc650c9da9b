//! Hooks: objects a sync runs at one point of the pass instead of keeping them, as
//! Argo CD runs its resource hooks (a schema migration before the rollout, a smoke
//! test after it). Not app objects: never diffed, recorded in the inventory, pruned
//! or counted in health.
//!
//! Phases, in the order a sync reaches them: `PreSync` after validation and before
//! anything is applied (one failing applies nothing else); `Sync` after the app's
//! objects are applied (every wave); `PostSync` once they are Healthy and pruned;
//! `SyncFail` when any of that failed. Each hook is a step of the sync's plan in each
//! of its phases (`plan`): within a phase, hooks run by wave, kind order and name; a
//! wave's hooks are created together and all finish before the next wave.
//! A hook is done when a Job is `Complete`, a Pod `Succeeded`, anything else Healthy;
//! a failed Job or Pod fails the phase, and so does a phase that outlives its
//! deadline. `HookSucceeded` instances are deleted only once every hook of the phase
//! succeeded, last created first, as Helm deletes them after the whole hook event: a
//! chart's Job runs with a ServiceAccount and RBAC that are hooks of an earlier
//! weight (cert-manager's `startupapicheck`, ingress-nginx's `admission-create`), and
//! they must outlive it.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{Cluster, Resolved};
use tether_diff::manifest::{Manifest, ManifestSet, ObjectId};
use tether_schema::duration::format_duration;
use tether_schema::ownership::{
    APP_LABEL, ARGOCD_HOOK_ANNOTATION, ARGOCD_HOOK_DELETE_POLICY_ANNOTATION, HELM_HOOK_ANNOTATION,
    HELM_HOOK_DELETE_POLICY_ANNOTATION, HOOK_ANNOTATION, HOOK_DELETE_POLICY_ANNOTATION, is_hook,
};

use super::apply::wait_gone;
use super::health::{self, Health};
use super::item::{gvk_of, namespace_of};
use super::plan::{Step, wave_of};
use super::report::{HookAction, HookResult};
use super::stage::Phase;

/// How long the hooks of one phase may run in all, from the first created to the
/// last finished, unless the sync sets another (`--hook-timeout`,
/// `sync.hookTimeout`): Helm's `--timeout` default, 5 minutes. Argo CD leaves hooks
/// unbounded, and a hook that never ends would then hold the sync for ever.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(300);
/// How often a running hook is looked at again.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// When a hook's instance is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletePolicy {
    /// The previous instance is deleted before the hook is created again.
    BeforeHookCreation,
    HookSucceeded,
    HookFailed,
}

impl DeletePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            DeletePolicy::BeforeHookCreation => "BeforeHookCreation",
            DeletePolicy::HookSucceeded => "HookSucceeded",
            DeletePolicy::HookFailed => "HookFailed",
        }
    }
}

/// One hook of the desired state.
#[derive(Debug, Clone)]
pub struct Hook<'m> {
    pub manifest: &'m Manifest,
    /// Empty for Argo CD's `Skip`: never applied.
    pub phases: Vec<Phase>,
    pub delete: Vec<DeletePolicy>,
}

impl<'m> Hook<'m> {
    /// What the plan orders it by: its identity, its object (for its wave) and its
    /// phases.
    pub fn planned(&self) -> (&'m ObjectId, &'m Value, &[Phase]) {
        (&self.manifest.id, &self.manifest.object, &self.phases)
    }
}

/// A hook annotation tether cannot honour; refused before anything is applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: annotation {annotation}: {value:?} is not {expected}")]
pub struct HookError {
    pub object: String,
    pub annotation: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// The app's objects and its hooks: the set without hooks (borrowed as is when it
/// has none, the common case), and every hook with its phases and delete policies.
/// Every bad hook annotation is reported.
pub fn split(
    desired: &ManifestSet,
) -> Result<(Cow<'_, ManifestSet>, Vec<Hook<'_>>), Vec<HookError>> {
    if !desired.objects.iter().any(|m| is_hook(&m.object)) {
        return Ok((Cow::Borrowed(desired), Vec::new()));
    }
    let mut objects = Vec::new();
    let mut hooks = Vec::new();
    let mut errors = Vec::new();
    for manifest in &desired.objects {
        if !is_hook(&manifest.object) {
            objects.push(manifest.clone());
            continue;
        }
        match parse(manifest) {
            Ok(hook) => hooks.push(hook),
            Err(mut errs) => errors.append(&mut errs),
        }
    }
    if errors.is_empty() {
        Ok((
            Cow::Owned(ManifestSet {
                objects,
                sealed: desired.sealed.clone(),
                empty_lookups: desired.empty_lookups.clone(),
            }),
            hooks,
        ))
    } else {
        Err(errors)
    }
}

/// A hook's phases and delete policies from its annotations, tether's winning, then
/// Argo CD's, then Helm's (mapped as Argo CD maps them).
fn parse(manifest: &Manifest) -> Result<Hook<'_>, Vec<HookError>> {
    let mut errors = Vec::new();
    let mut phases = Vec::new();
    let mut delete = Vec::new();
    if let Some((annotation, list)) =
        annotation(&manifest.object, [HOOK_ANNOTATION, ARGOCD_HOOK_ANNOTATION])
    {
        // Argo CD reads a comma-separated list: one object may run in several phases.
        for item in list.split(',').map(str::trim) {
            let phase = match item {
                "PreSync" => Phase::PreSync,
                "Sync" => Phase::Sync,
                "PostSync" => Phase::PostSync,
                "SyncFail" => Phase::SyncFail,
                "Skip" => continue,
                _ => {
                    errors.push(HookError {
                        object: manifest.id.to_string(),
                        annotation,
                        value: item.to_string(),
                        expected: "one of PreSync, Sync, PostSync, SyncFail, Skip",
                    });
                    continue;
                }
            };
            if !phases.contains(&phase) {
                phases.push(phase);
            }
        }
    } else if let Some(list) = text(&manifest.object, HELM_HOOK_ANNOTATION) {
        for phase in list.split(',').filter_map(|t| helm_phase(t.trim())) {
            if !phases.contains(&phase) {
                phases.push(phase);
            }
        }
    }
    if let Some((annotation, list)) = annotation(
        &manifest.object,
        [
            HOOK_DELETE_POLICY_ANNOTATION,
            ARGOCD_HOOK_DELETE_POLICY_ANNOTATION,
        ],
    ) {
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let policy = match item {
                "BeforeHookCreation" => DeletePolicy::BeforeHookCreation,
                "HookSucceeded" => DeletePolicy::HookSucceeded,
                "HookFailed" => DeletePolicy::HookFailed,
                _ => {
                    errors.push(HookError {
                        object: manifest.id.to_string(),
                        annotation,
                        value: item.to_string(),
                        expected: "one of BeforeHookCreation, HookSucceeded, HookFailed",
                    });
                    continue;
                }
            };
            delete.push(policy);
        }
    } else if let Some(list) = text(&manifest.object, HELM_HOOK_DELETE_POLICY_ANNOTATION) {
        delete.extend(list.split(',').filter_map(|p| helm_delete_policy(p.trim())));
    }
    if let Err(err) = wave_of(&manifest.id, &manifest.object) {
        errors.push(HookError {
            object: err.object,
            annotation: err.annotation,
            value: err.value,
            expected: "an integer",
        });
    }
    if delete.is_empty() {
        delete.push(DeletePolicy::BeforeHookCreation);
    }
    if errors.is_empty() {
        Ok(Hook {
            manifest,
            phases,
            delete,
        })
    } else {
        Err(errors)
    }
}

/// The phase a Helm hook type runs in, as Argo CD maps it: installs and upgrades are
/// both a sync. Helm's other types (`pre-delete`, `test`, `pre-rollback`, …) have no
/// phase: Argo CD never runs them, and neither does tether (the object is skipped).
fn helm_phase(helm_type: &str) -> Option<Phase> {
    match helm_type {
        "pre-install" | "pre-upgrade" => Some(Phase::PreSync),
        "post-install" | "post-upgrade" => Some(Phase::PostSync),
        _ => None,
    }
}

/// A Helm delete policy as Argo CD maps it; an unknown one is ignored, as there.
fn helm_delete_policy(policy: &str) -> Option<DeletePolicy> {
    match policy {
        "before-hook-creation" => Some(DeletePolicy::BeforeHookCreation),
        "hook-succeeded" => Some(DeletePolicy::HookSucceeded),
        "hook-failed" => Some(DeletePolicy::HookFailed),
        _ => None,
    }
}

fn text<'v>(object: &'v Value, name: &str) -> Option<&'v str> {
    object.pointer("/metadata/annotations")?.get(name)?.as_str()
}

/// The first of `names` the object is annotated with, and its text.
fn annotation<'v>(object: &'v Value, names: [&'static str; 2]) -> Option<(&'static str, &'v str)> {
    let annotations = object.pointer("/metadata/annotations")?;
    names
        .into_iter()
        .find_map(|name| Some((name, annotations.get(name)?.as_str()?)))
}

/// The hooks of one step of `phase` (indices into `hooks`) reported as not run,
/// with `why`.
pub(super) fn skipped(
    hooks: &[Hook<'_>],
    step: &[usize],
    phase: Phase,
    why: &str,
) -> Vec<HookResult> {
    step.iter()
        .map(|&h| HookResult {
            id: hooks[h].manifest.id.clone(),
            phase,
            action: HookAction::Skipped,
            message: why.to_string(),
            deleted: false,
        })
        .collect()
}

/// Runs the hooks of `phase`, wave by wave (the plan's steps of the phase, each
/// created together), until one fails or all succeeded, within `timeout` for the
/// whole phase. Hooks of a later wave are not run after a failure
/// (they are not reported). Once every hook succeeded, the `HookSucceeded` ones are
/// deleted, last created first; after a failure they are kept, as Helm keeps them.
pub(super) async fn run_phase(
    cluster: &Cluster,
    hooks: &[Hook<'_>],
    waves: &[Step],
    phase: Phase,
    app: &str,
    timeout: Duration,
) -> Vec<HookResult> {
    let deadline = Deadline {
        at: Instant::now() + timeout,
        timeout,
    };
    let mut results = Vec::new();
    // Succeeded instances with their place in `results`, in the order created.
    let mut succeeded = Vec::new();
    for wave in waves {
        let mut started = Vec::new();
        for hook in wave.objects.iter().map(|&h| &hooks[h]) {
            match create(cluster, hook, app).await {
                Ok(instance) => started.push((hook, instance)),
                Err(message) => results.push(HookResult {
                    id: hook.manifest.id.clone(),
                    phase,
                    action: HookAction::Failed,
                    message,
                    deleted: false,
                }),
            }
        }
        for (hook, instance) in started {
            let result = finish(cluster, hook, &instance, phase, &deadline).await;
            if result.action == HookAction::Succeeded {
                succeeded.push((hook, instance, results.len()));
            }
            results.push(result);
        }
        if results.iter().any(|r| r.action == HookAction::Failed) {
            return results;
        }
    }
    for (hook, instance, at) in succeeded.into_iter().rev() {
        if hook.delete.contains(&DeletePolicy::HookSucceeded) {
            delete(
                cluster,
                &instance,
                DeletePolicy::HookSucceeded,
                &mut results[at],
            )
            .await;
        }
    }
    results
}

/// When a phase's hooks must have finished, and the timeout it came from (for the
/// message).
struct Deadline {
    at: Instant,
    timeout: Duration,
}

/// A created hook instance: its kind as served and its identity.
struct Instance {
    kind: Resolved,
    id: ObjectId,
}

/// Deletes the previous instance (`BeforeHookCreation`) and creates the hook.
async fn create(cluster: &Cluster, hook: &Hook<'_>, app: &str) -> Result<Instance, String> {
    let id = &hook.manifest.id;
    let kind = match cluster.resolve(&gvk_of(id)).await {
        Ok(Some(kind)) => kind,
        Ok(None) => return Err("the kind is not served".into()),
        Err(err) => return Err(err.to_string()),
    };
    let namespace = namespace_of(&kind, id);
    if hook.delete.contains(&DeletePolicy::BeforeHookCreation) {
        for name in previous(cluster, hook, &kind, app).await? {
            cluster
                .delete(&kind, namespace, &name, None)
                .await
                .map_err(|e| format!("deleting the previous instance {name}: {e}"))?;
            wait_gone(cluster, &kind, namespace, &name).await?;
        }
    }
    let created = cluster
        .create(&kind, &hook.manifest.object)
        .await
        .map_err(|e| e.to_string())?;
    let name = created
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&id.name)
        .to_string();
    Ok(Instance {
        id: ObjectId { name, ..id.clone() },
        kind,
    })
}

/// The names of a hook's previous instances: the object of its name, or for a
/// `generateName` hook every object of the app made from the same prefix.
async fn previous(
    cluster: &Cluster,
    hook: &Hook<'_>,
    kind: &Resolved,
    app: &str,
) -> Result<Vec<String>, String> {
    let id = &hook.manifest.id;
    let namespace = namespace_of(kind, id);
    let named = hook
        .manifest
        .object
        .pointer("/metadata/name")
        .and_then(Value::as_str);
    if let Some(name) = named {
        return match cluster.get(kind, namespace, name).await {
            Ok(Some(_)) => Ok(vec![name.to_string()]),
            Ok(None) => Ok(Vec::new()),
            Err(err) => Err(err.to_string()),
        };
    }
    if app.is_empty() {
        return Ok(Vec::new());
    }
    let listed = cluster
        .list(kind, namespace, &format!("{APP_LABEL}={app}"))
        .await
        .map_err(|e| e.to_string())?;
    Ok(listed
        .iter()
        .filter(|o| is_hook(o))
        .filter(|o| o.pointer("/metadata/generateName").and_then(Value::as_str) == Some(&id.name))
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect())
}

/// Waits for a hook instance to finish; a failed one is deleted at once if its
/// policy says so (a succeeded one waits for the rest of its phase).
async fn finish(
    cluster: &Cluster,
    hook: &Hook<'_>,
    instance: &Instance,
    phase: Phase,
    deadline: &Deadline,
) -> HookResult {
    let namespace = namespace_of(&instance.kind, &instance.id);
    let outcome = loop {
        match cluster
            .get(&instance.kind, namespace, &instance.id.name)
            .await
        {
            Ok(Some(live)) => {
                if let Some(done) = done(&instance.id, &live) {
                    break done;
                }
            }
            Ok(None) => break Err("deleted before it finished".to_string()),
            Err(err) if err.is_retryable() => {}
            Err(err) => break Err(err.to_string()),
        }
        if Instant::now() >= deadline.at {
            break Err(format!(
                "did not finish within the {phase} phase's hook timeout of {} (--hook-timeout, sync.hookTimeout)",
                format_duration(deadline.timeout),
                phase = phase.as_str(),
            ));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    };
    let mut result = HookResult {
        id: instance.id.clone(),
        phase,
        action: HookAction::Succeeded,
        message: String::new(),
        deleted: false,
    };
    if let Err(why) = outcome {
        result.action = HookAction::Failed;
        result.message = why;
        if hook.delete.contains(&DeletePolicy::HookFailed) {
            delete(cluster, instance, DeletePolicy::HookFailed, &mut result).await;
        }
    }
    result
}

/// Deletes a hook instance as `policy` asks, noting the outcome in its result.
async fn delete(
    cluster: &Cluster,
    instance: &Instance,
    policy: DeletePolicy,
    result: &mut HookResult,
) {
    let namespace = namespace_of(&instance.kind, &instance.id);
    match cluster
        .delete(&instance.kind, namespace, &instance.id.name, None)
        .await
    {
        Ok(()) => result.deleted = true,
        Err(err) => {
            let note = format!("deleting it ({}): {err}", policy.as_str());
            result.message = if result.message.is_empty() {
                note
            } else {
                format!("{}; {note}", result.message)
            };
        }
    }
}

/// Whether a hook instance is done: Ok when it succeeded, Err (why) when it failed,
/// None while it runs.
pub fn done(id: &ObjectId, live: &Value) -> Option<Result<(), String>> {
    if id.group.is_empty() && id.kind == "Pod" {
        return match live.pointer("/status/phase").and_then(Value::as_str) {
            Some("Succeeded") => Some(Ok(())),
            Some("Failed") => Some(Err(live
                .pointer("/status/message")
                .and_then(Value::as_str)
                .unwrap_or("the pod failed")
                .to_string())),
            _ => None,
        };
    }
    let assessment = health::assess(id, live);
    match assessment.health {
        Health::Healthy => Some(Ok(())),
        Health::Degraded => Some(Err(if assessment.message.is_empty() {
            "failed".to_string()
        } else {
            assessment.message
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
