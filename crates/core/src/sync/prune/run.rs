//! Carrying prune out: weigh what each delete takes with it, check the guards, and
//! delete what the app owns, each object only in the incarnation that was judged
//! (a UID precondition), in reverse apply order.

use serde_json::Value;

use crate::cluster::{Cluster, ClusterError, Resolved};
use tether_diff::diff::Status;
use tether_diff::manifest::{ObjectId, crd_scope};
use tether_schema::ownership::APP_LABEL;

use super::super::annotations::ignores_extraneous;
use super::super::decide::server_message;
use super::super::inventory::{Entry, Inventory};
use super::super::item::namespace_of;
use super::super::observe::Candidate;
use super::super::plan::prune_order;
use super::super::report::{Action, ObjectResult, SyncReport};
use super::super::stage::ObjectFailure;
use super::super::{SyncError, SyncOptions};
use super::{Refusal, Verdict, guard, namespace_use};

/// A candidate judged, with what deleting it takes along.
struct Judged {
    id: ObjectId,
    kind: Resolved,
    live: Option<Value>,
    verdict: Verdict,
    /// Objects deleted with it (a Namespace's contents, a CRD's custom resources).
    cascades: usize,
    /// Why it may not be deleted whatever the guards say.
    refused: Option<String>,
}

/// What prune did, beyond the objects it reported.
#[derive(Debug, Default)]
pub(in crate::sync) struct Pruned {
    /// The inventory entries to keep: protected, refused, or failed to delete.
    pub kept: Vec<Entry>,
    /// The guard that refused to prune, if one did (nothing was deleted).
    pub refused: Option<Refusal>,
    /// The deletes that failed.
    pub failed: Vec<ObjectFailure>,
}

/// Prunes the candidates the app owns, reporting each. In a dry run nothing is
/// deleted.
pub(in crate::sync) async fn run(
    cluster: &Cluster,
    candidates: Vec<Candidate>,
    inventory: &Inventory,
    desired: usize,
    options: &SyncOptions<'_>,
    report: &mut SyncReport,
) -> Result<Pruned, SyncError> {
    if candidates.is_empty() {
        return Ok(Pruned::default());
    }
    let (judged, orphans) = judge(cluster, candidates, inventory, options.app).await?;
    let refusal = if options.prune {
        let owned = inventory.objects.len() + orphans;
        guard(deletions(&judged), owned, desired, options.allow_mass_prune).err()
    } else {
        None
    };
    let mut kept = Vec::new();
    let mut failed = Vec::new();
    for j in judged {
        let (action, message) = match (&j.verdict, &j.refused) {
            (Verdict::Gone, _) => continue,
            (Verdict::NotOwned, _) => {
                let mut result = result(&j.id, Action::Skipped, None);
                result.message = format!("not pruned: not labelled {APP_LABEL}={}", options.app);
                report.objects.push(result);
                continue;
            }
            (Verdict::Protected(annotation), _) => (
                Action::Skipped,
                format!("not pruned: annotated {annotation}"),
            ),
            (Verdict::Delete, _) if !options.prune => (
                Action::Skipped,
                "no longer in the desired state; prune is off".to_string(),
            ),
            (Verdict::Delete, Some(why)) => (Action::Skipped, format!("not pruned: {why}")),
            (Verdict::Delete, None) if refusal.is_some() => {
                (Action::Skipped, "not pruned: prune refused".to_string())
            }
            (Verdict::Delete, None) if options.dry_run => (Action::Pruned, String::new()),
            (Verdict::Delete, None) => delete_judged(cluster, &j, &mut failed).await,
        };
        if action != Action::Pruned {
            kept.push(Entry::of(&j.id));
        }
        report.objects.push(pruned_result(&j, action, message));
    }
    Ok(Pruned {
        kept,
        refused: refusal,
        failed,
    })
}

/// Judges the candidates in prune order (those already gone, or of a kind no longer
/// served, drop out), weighing what deleting each takes along; with how many are
/// the app's but missing from its inventory (orphans the guard counts as owned).
async fn judge(
    cluster: &Cluster,
    candidates: Vec<Candidate>,
    inventory: &Inventory,
    app: &str,
) -> Result<(Vec<Judged>, usize), SyncError> {
    let mut ids: Vec<ObjectId> = candidates.iter().map(|c| c.id.clone()).collect();
    prune_order(&mut ids);
    let mut by_key: std::collections::HashMap<_, Candidate> =
        candidates.into_iter().map(|c| (c.id.key(), c)).collect();
    let mut judged = Vec::new();
    let mut orphans = 0;
    for id in ids {
        let Some(candidate) = by_key.remove(&id.key()) else {
            continue;
        };
        let Some(kind) = candidate.kind else {
            continue; // its kind is gone, and the object with it
        };
        if candidate.verdict == Verdict::Gone {
            continue;
        }
        let recorded = inventory.objects.contains(&Entry::of(&candidate.id));
        if !recorded && candidate.verdict != Verdict::NotOwned {
            orphans += 1;
        }
        let (cascades, refused) = if candidate.verdict == Verdict::Delete {
            weigh(cluster, &candidate.id, candidate.live.as_ref(), app).await?
        } else {
            (0, None)
        };
        judged.push(Judged {
            id: candidate.id,
            kind,
            live: candidate.live,
            verdict: candidate.verdict,
            cascades,
            refused,
        });
    }
    Ok((judged, orphans))
}

/// What the guard counts: what would really be deleted, cascades included. A
/// Namespace of forty objects is forty deletions, not one. The app's own objects in
/// it that are candidates too are in both counts; each is one deletion (issue #12:
/// Git dropping one Namespace of three with its contents was refused as a mass
/// prune).
fn deletions(judged: &[Judged]) -> usize {
    let deleted = |j: &&Judged| j.verdict == Verdict::Delete && j.refused.is_none();
    let emptied: std::collections::HashSet<&str> = judged
        .iter()
        .filter(deleted)
        .filter(|j| j.id.group.is_empty() && j.id.kind == "Namespace")
        .map(|j| j.id.name.as_str())
        .collect();
    let counted_twice = judged
        .iter()
        .filter(deleted)
        .filter(|j| j.kind.namespaced)
        .filter(|j| {
            j.id.namespace
                .as_deref()
                .is_some_and(|ns| emptied.contains(ns))
        })
        .count();
    judged
        .iter()
        .filter(deleted)
        .map(|j| 1 + j.cascades)
        .sum::<usize>()
        .saturating_sub(counted_twice)
}

/// Deletes a judged object in the incarnation judged (its UID); a failure is
/// noted in `failed` too.
async fn delete_judged(
    cluster: &Cluster,
    j: &Judged,
    failed: &mut Vec<ObjectFailure>,
) -> (Action, String) {
    let uid = j
        .live
        .as_ref()
        .and_then(|l| l.pointer("/metadata/uid"))
        .and_then(Value::as_str);
    match delete(cluster, j, uid).await {
        Ok(()) => (Action::Pruned, String::new()),
        Err(err) => {
            let cause = format!("prune failed: {}", server_message(&j.id, &err));
            failed.push(ObjectFailure {
                id: j.id.clone(),
                cause: cause.clone(),
            });
            (Action::Failed, cause)
        }
    }
}

/// The report's entry for a judged object. Argo CD's IgnoreExtraneous: what is kept
/// is no drift, and says why.
fn pruned_result(j: &Judged, action: Action, message: String) -> ObjectResult {
    let ignored = action != Action::Pruned && j.live.as_ref().is_some_and(ignores_extraneous);
    let mut result = result(&j.id, action, (!ignored).then_some(Status::Extra));
    result.message = if ignored {
        format!(
            "{message} (extraneous, ignored: argocd.argoproj.io/compare-options: IgnoreExtraneous)"
        )
    } else {
        message
    };
    result
}

/// Deletes a judged object. When its version stopped being served during this pass
/// (the sync just changed its CRD), it is deleted through a version still served.
async fn delete(cluster: &Cluster, j: &Judged, uid: Option<&str>) -> Result<(), ClusterError> {
    let namespace = namespace_of(&j.kind, &j.id);
    match cluster.delete(&j.kind, namespace, &j.id.name, uid).await {
        Err(err) if err.is_not_found() => {
            match cluster.resolve_group_kind(&j.id.group, &j.id.kind).await? {
                Some(served) if served.resource.version != j.kind.resource.version => {
                    cluster
                        .delete(&served, namespace_of(&served, &j.id), &j.id.name, uid)
                        .await
                }
                _ => Err(err),
            }
        }
        other => other,
    }
}

fn result(id: &ObjectId, action: Action, drift: Option<Status>) -> ObjectResult {
    ObjectResult {
        id: id.clone(),
        action,
        drift,
        health: None,
        message: String::new(),
        changes: Vec::new(),
        views: None,
        lineage: Default::default(),
    }
}

/// What deleting an object takes with it, and why it may not be deleted at all: a
/// Namespace holding objects of another app or of no app is refused.
async fn weigh(
    cluster: &Cluster,
    id: &ObjectId,
    live: Option<&Value>,
    app: &str,
) -> Result<(usize, Option<String>), ClusterError> {
    if id.group.is_empty() && id.kind == "Namespace" {
        let mut objects = Vec::new();
        for kind in cluster.namespaced_kinds().await? {
            // A kind that cannot be listed (no verb, no permission) holds nothing we
            // could see; what we cannot see we cannot weigh either.
            if let Ok(listed) = cluster.list(&kind, Some(&id.name), "").await {
                objects.extend(listed);
            }
        }
        let usage = namespace_use(app, &objects);
        let refused = (!usage.foreign.is_empty()).then(|| {
            const SHOWN: usize = 3;
            let mut named: Vec<String> = usage.foreign.iter().take(SHOWN).cloned().collect();
            if usage.foreign.len() > SHOWN {
                named.push(format!("and {} more", usage.foreign.len() - SHOWN));
            }
            format!(
                "the namespace still holds objects that are not this app's: {}",
                named.join(", ")
            )
        });
        return Ok((usage.cascades, refused));
    }
    if id.group == "apiextensions.k8s.io" && id.kind == "CustomResourceDefinition" {
        let Some((gk, _)) = live.and_then(crd_scope) else {
            return Ok((0, None));
        };
        let Some(kind) = cluster.resolve_group_kind(&gk.group, &gk.kind).await? else {
            return Ok((0, None));
        };
        let resources = cluster.list(&kind, None, "").await.map(|l| l.len());
        return Ok((resources.unwrap_or(0), None));
    }
    Ok((0, None))
}
