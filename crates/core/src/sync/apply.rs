//! Act: write the objects that drifted, step by step in the planned order, validating
//! what could not be dry-run before (its CRD or Namespace is created by this sync)
//! as soon as it can be, and waiting where later steps depend on earlier ones (CRDs
//! Established, waves Healthy with `--wait`).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::cluster::{Cluster, Resolved};
use tether_diff::diff::{DiffOptions, Drift, diff_object};
use tether_diff::manifest::crd_scope;

use super::SyncOptions;
use super::annotations::Write;
use super::decide::{describe_changes, dry_run_all, refused, server_message};
use super::health::{self, Assessment, Health};
use super::item::{Item, Latest, Plan, gvk_of, is_crd, is_namespace, namespace_of};
use super::plan::Step;
use super::report::Action;
use super::stage::WaitFailure;

/// How long a CRD created by a sync may take to become Established and served.
const CRD_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a sync looks again at something it waits for (a CRD, a deletion, health).
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How long `--replace-immutable` waits for the old object to be gone.
const REPLACE_TIMEOUT: Duration = Duration::from_secs(60);

/// What a sync's writes have made so far that its deferred objects may wait for:
/// Namespaces created and kinds served by the CRDs it applied. One sync applies in
/// more than one call (the Namespaces and CRDs its PreSync hooks need come first).
#[derive(Debug, Default)]
pub(super) struct Made {
    namespaces: HashSet<String>,
    served: HashSet<GroupVersionKind>,
}

/// Applies the steps in order; stops at the first step with a failure (the objects
/// that failed are marked so). Returns why waiting for health failed, if it did.
pub(super) async fn apply_steps(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    steps: &[Step],
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
    started: Instant,
    made: &mut Made,
) -> Result<(), WaitFailure> {
    let Made {
        namespaces: created_namespaces,
        served,
    } = made;
    for (n, step) in steps.iter().enumerate() {
        // Deferred objects whose CRD or Namespace now exists are validated before
        // anything that depends on them is written.
        if !validate_deferred(
            cluster,
            items,
            created_namespaces,
            served,
            diff_options,
            options,
        )
        .await
        {
            return Ok(());
        }
        let results = write_step(cluster, items, step, options).await;
        let mut failed = false;
        for (i, executed, took) in results {
            failed |= !record_write(
                &mut items[i],
                executed,
                took,
                diff_options,
                created_namespaces,
            );
        }
        if let Some(progress) = options.progress {
            let done = items.iter().filter(|i| i.result.is_some()).count();
            progress(done, items.len());
        }
        if failed {
            return Ok(());
        }
        // CRDs this step wrote; an unchanged one is already established and served.
        let crds: Vec<usize> = step
            .objects
            .iter()
            .copied()
            .filter(|&i| is_crd(&items[i].manifest.id))
            .filter(|&i| {
                matches!(
                    items[i].result,
                    Some((Action::Created | Action::Configured | Action::Replaced, _))
                )
            })
            .collect();
        if !crds.is_empty() {
            match wait_for_crds(cluster, items, &crds).await {
                Some(kinds) => served.extend(kinds),
                None => return Ok(()),
            }
        }
        let wave_done = steps.get(n + 1).is_none_or(|next| next.wave != step.wave);
        if let (Some(timeout), true) = (options.wait, wave_done) {
            let wave: Vec<usize> = steps
                .iter()
                .filter(|s| s.wave == step.wave)
                .flat_map(|s| s.objects.iter().copied())
                .collect();
            wait_healthy(cluster, items, &wave, started + timeout, &options.health).await?;
        }
    }
    // What the last step made (the Namespaces and CRDs PreSync hooks need come in a
    // call of their own) lets its deferred objects be validated before anything else
    // runs; a refusal marks them failed.
    validate_deferred(
        cluster,
        items,
        created_namespaces,
        served,
        diff_options,
        options,
    )
    .await;
    Ok(())
}

/// Writes a step's objects not yet decided, as many at once as the options allow;
/// each result comes with how long its write took.
async fn write_step(
    cluster: &Cluster,
    items: &[Item<'_>],
    step: &Step,
    options: &SyncOptions<'_>,
) -> Vec<(usize, Executed, Duration)> {
    let writes: Vec<_> = step
        .objects
        .iter()
        .copied()
        .filter(|&i| items[i].result.is_none())
        .map(|i| {
            let item = &items[i];
            async move {
                let started = Instant::now();
                let executed = execute(cluster, item, options).await;
                (i, executed, started.elapsed())
            }
        })
        .collect();
    futures::stream::iter(writes)
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await
}

/// Takes a write's result into its item: the action and message, its answer as the
/// latest live copy, and what it changed when it was applied without a dry run.
/// False when the write failed.
fn record_write(
    item: &mut Item<'_>,
    executed: Executed,
    took: Duration,
    diff_options: &DiffOptions<'_>,
    created_namespaces: &mut HashSet<String>,
) -> bool {
    match executed {
        Ok((mut action, answer)) => {
            if answer.is_some() {
                // An answer means a request went out (Unchanged and the like
                // send none).
                item.written_in = Some(took);
            }
            if item.undecided
                && let Some(answer) = &answer
            {
                // Applied without a dry run: what it changed is its answer
                // against the live copy it was planned from.
                let diff = diff_object(
                    &item.manifest.id,
                    Some(answer),
                    item.live.as_ref(),
                    diff_options,
                );
                if item.live.is_some() {
                    item.plan = match &diff.drift {
                        Drift::InSync => Plan::Unchanged,
                        drift => Plan::Configure(describe_changes(drift)),
                    };
                    if item.plan == Plan::Unchanged {
                        action = Action::Unchanged;
                    }
                }
                item.diff = diff.drift.is_drift().then_some(diff);
            }
            if let Some(answer) = answer {
                item.latest = Latest::Fresh(answer);
            }
            let message = match &item.plan {
                Plan::Configure(m) | Plan::Replace(m) | Plan::Conflict(m) | Plan::Skip(m) => {
                    m.clone()
                }
                _ => String::new(),
            };
            let message = match action {
                Action::Conflict => format!("labelled for app {message:?}: not applied"),
                _ => message,
            };
            item.result = Some((action, message));
            let id = &item.manifest.id;
            if is_namespace(id) {
                created_namespaces.insert(id.name.clone());
            }
            true
        }
        Err(message) => {
            item.result = Some((Action::Failed, message));
            false
        }
    }
}

/// What the report says of a Namespace deleted again by [`undo_namespaces`].
const UNDONE: &str = "created to validate the objects in it, deleted: one of them was refused";

/// Deletes the Namespaces this pass created, once an object in one was refused in its
/// dry run (which could not run before its Namespace existed), when they are all the
/// pass wrote: so a refusal still leaves nothing of the revision written. Each is
/// deleted in the incarnation the pass created (a UID precondition). False, undoing
/// nothing, when the pass wrote anything else (an earlier wave): the report then says
/// what was written.
pub(super) async fn undo_namespaces(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    made: &mut Made,
) -> bool {
    let only_namespaces = items
        .iter()
        .filter(|i| i.result.as_ref().is_some_and(|(action, _)| action.writes()))
        .all(|i| is_namespace(&i.manifest.id) && matches!(i.result, Some((Action::Created, _))));
    if !only_namespaces {
        return false;
    }
    for item in items.iter_mut() {
        let manifest = item.manifest;
        let id = &manifest.id;
        if !(is_namespace(id) && matches!(item.result, Some((Action::Created, _)))) {
            continue;
        }
        let Some(kind) = &item.kind else { continue };
        let uid = item
            .latest()
            .and_then(|l| l.pointer("/metadata/uid"))
            .and_then(Value::as_str);
        item.result = Some(match cluster.delete(kind, None, &id.name, uid).await {
            Ok(()) => {
                made.namespaces.remove(&id.name);
                item.latest = Latest::Gone;
                (Action::Skipped, UNDONE.to_string())
            }
            Err(err) => (
                Action::Created,
                format!(
                    "created to validate the objects in it; deleting it after one was refused failed: {}",
                    server_message(id, &err)
                ),
            ),
        });
    }
    true
}

/// Dry-runs the deferred objects whose prerequisites now exist; false when any is
/// refused (they are marked failed, and nothing more is applied).
async fn validate_deferred(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    namespaces: &HashSet<String>,
    served: &HashSet<GroupVersionKind>,
    diff_options: &DiffOptions<'_>,
    options: &SyncOptions<'_>,
) -> bool {
    let mut ready = Vec::new();
    for (i, item) in items.iter_mut().enumerate() {
        let Plan::Deferred(need) = &item.plan else {
            continue;
        };
        let kind_met = need.kind.as_ref().is_none_or(|gvk| served.contains(gvk));
        let namespace_met = need
            .namespace
            .as_ref()
            .is_none_or(|ns| namespaces.contains(ns));
        if !(kind_met && namespace_met) {
            continue;
        }
        if item.kind.is_none() {
            item.plan = match cluster.resolve(&gvk_of(&item.manifest.id)).await {
                Ok(Some(kind)) => {
                    item.kind = Some(kind);
                    Plan::Create
                }
                Ok(None) => Plan::Failed("the kind is still not served".into()),
                Err(err) => refused(&item.manifest.id, &err),
            };
            if let Plan::Failed(message) | Plan::Unavailable(message) = &item.plan {
                item.result = Some((Action::Failed, message.clone()));
                continue;
            }
        }
        ready.push(i);
    }
    dry_run_all(cluster, items, ready.clone(), diff_options, options).await;
    let mut ok = true;
    for i in ready {
        if let Plan::Failed(message) | Plan::Unavailable(message) = &items[i].plan {
            ok = false;
            items[i].result = Some((Action::Failed, message.clone()));
        }
    }
    ok
}

/// What writing one object did and the server's answer, or why it failed.
type Executed = Result<(Action, Option<Value>), String>;

/// Writes one object as planned.
async fn execute(cluster: &Cluster, item: &Item<'_>, options: &SyncOptions<'_>) -> Executed {
    let id = &item.manifest.id;
    if let Plan::Skip(_) = item.plan {
        // Left alone, whether or not its kind is served.
        return Ok((Action::Skipped, None));
    }
    let Some(kind) = &item.kind else {
        return Err("the kind is not served".into());
    };
    let action = match &item.plan {
        Plan::Unchanged => return Ok((Action::Unchanged, None)),
        Plan::Conflict(_) => return Ok((Action::Conflict, None)),
        Plan::Skip(_) => return Ok((Action::Skipped, None)),
        Plan::Create => Action::Created,
        Plan::Configure(..) => Action::Configured,
        Plan::Replace(_) => {
            let namespace = namespace_of(kind, id);
            let uid = item
                .live
                .as_ref()
                .and_then(|l| l.pointer("/metadata/uid"))
                .and_then(Value::as_str);
            cluster
                .delete(kind, namespace, &id.name, uid)
                .await
                .map_err(|e| server_message(id, &e))?;
            wait_gone(cluster, kind, namespace, &id.name).await?;
            Action::Replaced
        }
        Plan::Deferred(_) | Plan::Failed(_) | Plan::Unavailable(_) => {
            return Err("not validated".into());
        }
    };
    let written = match (item.options.write, action) {
        // Argo CD's Replace=true: `kubectl create` when missing, `kubectl replace`
        // when changed; the replace is of the object as compared (its
        // resourceVersion), so a change made since is not overwritten unseen.
        (Write::Replace, Action::Configured) => {
            let mut object = item.manifest.object.clone();
            let version = item
                .live
                .as_ref()
                .and_then(|l| l.pointer("/metadata/resourceVersion"))
                .cloned();
            if let (Some(metadata), Some(version)) = (object.get_mut("metadata"), version)
                && let Some(metadata) = metadata.as_object_mut()
            {
                metadata.insert("resourceVersion".into(), version);
            }
            cluster.replace(kind, &object).await
        }
        (Write::Replace, _) => cluster.create(kind, &item.manifest.object).await,
        _ => {
            cluster
                .apply(kind, &item.manifest.object, options.force)
                .await
        }
    };
    match written {
        Ok(answer) => Ok((action, Some(answer))),
        Err(err) => Err(server_message(id, &err)),
    }
}

pub(super) async fn wait_gone(
    cluster: &Cluster,
    kind: &Resolved,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + REPLACE_TIMEOUT;
    loop {
        match cluster.get(kind, namespace, name).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) if Instant::now() < deadline => tokio::time::sleep(POLL_INTERVAL).await,
            Ok(Some(_)) => {
                return Err(format!(
                    "the old object was not deleted within {}s",
                    REPLACE_TIMEOUT.as_secs()
                ));
            }
            Err(err) => return Err(err.to_string()),
        }
    }
}

/// Waits until the CRDs just applied are Established and their kinds served; returns
/// the kinds now served, or None (the CRD marked failed) when one is not in time.
async fn wait_for_crds(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    crds: &[usize],
) -> Option<Vec<GroupVersionKind>> {
    let deadline = Instant::now() + CRD_READY_TIMEOUT;
    let mut served = Vec::new();
    for &i in crds {
        let item = &items[i];
        let Some(kind) = item.kind.clone() else {
            continue;
        };
        let name = item.manifest.id.name.clone();
        let kinds = defined_kinds(&item.manifest.object);
        loop {
            let established = match cluster.get(&kind, None, &name).await {
                Ok(Some(crd)) => {
                    let ok = health::assess(&items[i].manifest.id, &crd).health == Health::Healthy;
                    items[i].latest = Latest::Fresh(crd);
                    ok
                }
                _ => false,
            };
            let mut all_served = established;
            if established {
                for gvk in &kinds {
                    all_served &= matches!(cluster.resolve(gvk).await, Ok(Some(_)));
                }
            }
            if all_served {
                served.extend(kinds);
                break;
            }
            if Instant::now() >= deadline {
                items[i].result = Some((
                    Action::Failed,
                    format!(
                        "applied, but not established and served within {}s",
                        CRD_READY_TIMEOUT.as_secs()
                    ),
                ));
                return None;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
    Some(served)
}

/// Waits until every object of a wave is Healthy; fails on Degraded or at the
/// deadline.
pub(super) async fn wait_healthy(
    cluster: &Cluster,
    items: &mut [Item<'_>],
    wave: &[usize],
    deadline: Instant,
    judge: &health::Judge<'_>,
) -> Result<(), WaitFailure> {
    loop {
        let mut pending = None;
        for &i in wave {
            let item = &items[i];
            let Some(kind) = &item.kind else { continue };
            if matches!(item.plan, Plan::Conflict(_) | Plan::Skip(_)) {
                // Another app's object (its health is that app's concern), or one
                // its annotations keep tether from writing.
                continue;
            }
            let id = &item.manifest.id;
            let live = cluster
                .get(kind, namespace_of(kind, id), &id.name)
                .await
                .map_err(|e| WaitFailure::Unreadable {
                    id: id.clone(),
                    cause: e.to_string(),
                })?;
            let assessment = match &live {
                Some(live) => judge.assess(id, live),
                None => Assessment::missing(),
            };
            items[i].latest = live.map_or(Latest::Gone, Latest::Fresh);
            match assessment.health {
                Health::Healthy => {}
                Health::Degraded => {
                    return Err(WaitFailure::Degraded {
                        id: id.clone(),
                        message: assessment.message,
                    });
                }
                _ => pending = pending.or(Some((id.clone(), assessment))),
            }
        }
        let Some((id, assessment)) = pending else {
            return Ok(());
        };
        if Instant::now() >= deadline {
            return Err(WaitFailure::TimedOut {
                id,
                health: assessment.health,
                message: assessment.message,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The kinds (one per served version) a CRD object defines.
fn defined_kinds(crd: &Value) -> Vec<GroupVersionKind> {
    let Some((gk, _)) = crd_scope(crd) else {
        return Vec::new();
    };
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|versions| {
            versions
                .iter()
                .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
                .filter_map(|v| v.get("name").and_then(Value::as_str))
                .map(|version| GroupVersionKind::gvk(&gk.group, version, &gk.kind))
                .collect()
        })
        .unwrap_or_default()
}
