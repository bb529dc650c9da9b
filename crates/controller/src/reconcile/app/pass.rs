//! The pass: what a wake does. A full pass (inputs read, revision verified, synced
//! or dry-run), a heal of the objects that changed live, a new commit taken without
//! a pass when it renders what is applied, and nothing at all while another replica
//! holds the app.

use std::collections::HashSet;
use std::time::Instant;

use chrono::Utc;
use tether_core::metrics::METRICS;
use tether_core::report::status::{Automation, RevisionInfo, SyncStatus};
use tether_core::source::Revision;
use tether_core::sync::health::{Health, Judge};
use tether_core::sync::{HookRuns, SyncOptions, heal, sync};
use tether_diff::manifest::ObjectKey;
use tether_schema::ownership::is_hook;

use super::outcome::Found;
use super::{PASS_DEADLINE, Worker};
use crate::reconcile::decryption;
use crate::reconcile::depends::Gate;
use crate::reconcile::pass::PassError;
use crate::reconcile::pin;
use crate::reconcile::trust::Check;
use crate::reconcile::values;
use crate::reconcile::variables;

impl Worker {
    pub(super) async fn pass(&mut self) {
        let started = Instant::now();
        if self.elsewhere() {
            return;
        }
        let state = self.source.borrow_and_update().clone();
        let name = self.config.name.clone();
        self.observe_source(&state.status, state.revision.as_ref());
        let Some(head) = state.revision else {
            self.record_unfetched(&state.status, started);
            return;
        };
        // Git's head is the status's revision; a pin holding the app elsewhere says so.
        let (revision, holding) = self.pinning.target(&head);
        let pin_set = self.pinning.get().is_some();
        let shown = self.value_sources.shown(&head.sha);
        self.shared.statuses.update(&name, |s| {
            s.revision = Some(RevisionInfo {
                sha: shown,
                subject: head.subject.clone(),
            });
            pin::show(s, holding.as_ref(), pin_set, Utc::now());
        });
        if self.dependencies.hold(&self.shared.statuses) {
            return;
        }
        if !self.read_inputs(&revision, started).await {
            return;
        }
        if holding.is_none() {
            self.identify(&revision).await;
        }
        // A stalled revision waits for new inputs or new variables, or for a person
        // asking again.
        let manual = self.schedule.manual.owed();
        if self.schedule.stalled_at(&self.revision_id(&revision.sha)) && !manual {
            return;
        }
        self.schedule.unstall();
        let revision = match holding {
            // A pin holds an earlier applied revision, verified when it was applied.
            Some(_) => revision,
            None => {
                let check = Check {
                    cluster: &self.shared.cluster,
                    sources: &self.shared.sources,
                    statuses: &self.shared.statuses,
                    app: &self.config,
                    applied: self.inventory.as_ref().and_then(|i| i.revision.as_deref()),
                };
                match self.trust.check(&revision, check).await {
                    Ok(trusted) => trusted,
                    Err(err) => return self.record_pass(&revision, started, Err((err, 0))),
                }
            }
        };
        let outcome = match tokio::time::timeout(PASS_DEADLINE, self.sync_revision(&revision)).await
        {
            Ok(outcome) => outcome,
            Err(_) => {
                // What the pass wrote is covered by the inventory it recorded first.
                self.inventory = None;
                Err((PassError::TimedOut(PASS_DEADLINE), 0))
            }
        };
        self.record_pass(&revision, started, outcome);
    }

    /// Reads what a pass renders with besides Git (post-build variables, SOPS keys,
    /// chart values); a failure to read them is the pass's outcome.
    async fn read_inputs(&mut self, revision: &Revision, started: Instant) -> bool {
        match variables::read(
            &self.shared.cluster,
            &self.config,
            &self.shared.inventory_namespace,
        )
        .await
        {
            Ok(read) => self.variables = read,
            Err(err) => {
                self.record_pass(revision, started, Err((PassError::Variables(err), 0)));
                return false;
            }
        }
        match decryption::read(
            &self.shared.cluster,
            &self.config,
            &self.shared.inventory_namespace,
            self.keys.as_ref(),
        )
        .await
        {
            Ok(read) => self.keys = read,
            Err(err) => {
                self.record_pass(revision, started, Err((PassError::Decryption(err), 0)));
                return false;
            }
        }
        let read = values::read(
            &self.shared.cluster,
            &self.config,
            &self.shared.inventory_namespace,
        );
        match read.await {
            Ok(read) => self.values = read,
            Err(err) => {
                self.record_pass(revision, started, Err((PassError::Values(err), 0)));
                return false;
            }
        }
        // A value source's first fetch wakes the app: until then there is nothing
        // to render with, and nothing failed.
        if self.value_sources.pending() {
            return false;
        }
        match self
            .value_sources
            .read(&self.shared.sources, &self.config)
            .await
        {
            Ok(files) => self.ref_values = files,
            Err(err) => {
                self.record_pass(revision, started, Err((PassError::RefValues(err), 0)));
                return false;
            }
        }
        true
    }

    /// Syncs (or dry-runs) the app at `sha`. Returns what it found, for
    /// [`Worker::record_pass`] to write with the pass's record; a failure before the
    /// sync reported carries how many objects changed before it.
    pub(super) async fn sync_revision(
        &mut self,
        revision: &Revision,
    ) -> Result<Found, (PassError, usize)> {
        let sha = revision.sha.as_str();
        let desired = self.desired(revision).await.map_err(|e| (e, 0))?;
        self.watch_kinds(&desired).await;
        let id = self.revision_id(sha);
        let automation = self.automation(&id);
        let acting = automation.acting;
        let manual = self.schedule.manual.take();
        let options = self.sync_options(&id, acting);
        let pass = sync(&self.shared.cluster, &desired, Some(sha), &options);
        let report = if acting {
            match self.leadership.while_leading(pass).await {
                Some(report) => report,
                None => {
                    // The dropped pass may have written the inventory: read it next time.
                    // A manual sync it carried is still owed, as to any follower.
                    self.inventory = None;
                    if manual {
                        self.schedule.manual.request();
                    }
                    return Err((PassError::LeadershipLost, 0));
                }
            }
        } else {
            pass.await
        };
        let report = report.map_err(|err| {
            // What the failed pass wrote is unknown: read the inventory next time.
            self.inventory = None;
            (PassError::from(err), 0)
        })?;
        if manual && !acting {
            // Asked for but not allowed: keep the request until it may act.
            self.schedule.manual.request();
        }
        self.inventory = Some(report.inventory.clone());
        if acting && !report.failed() {
            self.synced_revision = Some(id);
            self.synced_hooks = desired.objects.iter().any(|m| is_hook(&m.object));
        }
        Ok(Found {
            changed: if acting { report.written() } else { 0 },
            report,
            automation: Some(automation),
            acting,
        })
    }

    /// How a pass at revision `id` ([`variables::revision_id`]) syncs.
    pub(super) fn sync_options(&self, id: &str, acting: bool) -> SyncOptions<'_> {
        SyncOptions {
            inventory_namespace: &self.shared.inventory_namespace,
            force: self.config.sync.force,
            prune: self.config.sync.prune,
            allow_mass_prune: self.config.sync.allow_mass_prune,
            dry_run: !acting,
            rules: &self.rules,
            // A tenant reads as itself: the cache, filled with tether's identity,
            // only wakes its worker (Flux likewise reads uncached when impersonating).
            live: match self.shared.cluster.service_account() {
                Some(_) => None,
                None => Some(&self.shared.cache),
            },
            inventory: self.inventory.as_ref(),
            hooks: HookRuns::WhenWriting,
            hook_timeout: self.config.sync.hook_timeout,
            // Applied in full at this revision: a heal skips the dry run.
            validated: acting && self.synced_revision.as_deref() == Some(id),
            health: Judge::new(&self.config.health_checks, &self.shared.health_rules),
            ..SyncOptions::new(&self.config.name)
        }
    }

    /// A pass over the app's objects in `changed` alone (a heal), when that is all a
    /// full pass would find to do: the revision is the one applied in full (Git's
    /// side is validated, rendered and kept), automation may act, no hook runs with a
    /// writing pass, nothing is backing off or stalled, the source has not moved, the
    /// objects are Git's (not prune candidates) and their live state comes from the
    /// watch cache. Each is decided as a full pass decides it and written only if it
    /// drifted: a heal costs one apply per drifted object, a controller's status
    /// change none, and neither reads the app's other objects. Their results update
    /// the app's status (drift, health); the resync interval's full pass still looks
    /// at everything. Returns false when a full pass must run instead.
    pub(super) async fn heal_pass(&mut self, changed: &HashSet<ObjectKey>) -> bool {
        let started = Instant::now();
        if self.source.has_changed().unwrap_or(true) {
            return false;
        }
        let Some(head) = self.applicable_revision() else {
            return false;
        };
        let (revision, _) = self.pinning.target(&head);
        let sha = revision.sha.as_str();
        let id = self.revision_id(sha);
        let eligible = self.synced_revision.as_deref() == Some(id.as_str())
            && !self.synced_hooks
            && self.schedule.settled()
            && self.inventory.is_some()
            && self.shared.cluster.service_account().is_none()
            && !self.schedule.manual.owed()
            && self.automation(&id).acting
            && self.dependencies.gate() == Gate::Open;
        if !eligible {
            return false;
        }
        let Some(desired) = self.rendered.select(&id, changed) else {
            return false;
        };
        if desired.is_empty() {
            // Not one of Git's objects (a prune candidate): the full pass decides.
            return false;
        }
        let Ok(_permit) = self.shared.heals.clone().acquire_owned().await else {
            return false;
        };
        let options = self.sync_options(&id, true);
        let healing = heal(&self.shared.cluster, &desired, Some(sha), &options);
        let Some(healed) = self.leadership.while_leading(healing).await else {
            // The full pass that follows sees who leads now, and reads the inventory.
            self.inventory = None;
            return false;
        };
        let outcome = match healed {
            Ok(report) => Ok(Found {
                changed: report.written(),
                report,
                automation: None,
                acting: true,
            }),
            Err(err) => {
                // What the heal wrote of the inventory is unknown: read it next time.
                self.inventory = None;
                Err((PassError::from(err), 0))
            }
        };
        self.record_pass(&revision, started, outcome);
        true
    }

    /// Takes the source's new commit without a pass when nothing the app's render
    /// reads changed since the revision applied in full, and nothing else is owed
    /// (no retry, stall, manual sync, pin or signature check): the status shows the
    /// new `revision` (and, Synced, the same `appliedRevision`: the objects applied
    /// are what it renders), the commit status is posted for it, and neither a
    /// render nor a request to the cluster is made. The inventory keeps the commit
    /// whose render was applied until the next full pass (a resync, a live change, a
    /// manual sync) writes the new one. Returns false when a pass must run.
    pub(super) async fn unchanged_commit(&mut self) -> bool {
        let owed = self.trust.enabled()
            || self.pinning.get().is_some()
            || !self.schedule.settled()
            || self.schedule.manual.owed()
            || self.held_elsewhere();
        let Some(applied) = self.synced_revision.clone().filter(|_| !owed) else {
            return false;
        };
        let state = self.source.borrow_and_update().clone();
        let Some(head) = state.revision else {
            return false;
        };
        // Only a new commit: a change of the source's standing alone (a failed fetch)
        // takes its pass, as before.
        if self
            .identity
            .as_ref()
            .is_none_or(|known| known.sha == head.sha)
        {
            return false;
        }
        self.identify(&head).await;
        if self.revision_id(&head.sha) != applied {
            return false;
        }
        self.observe_source(&state.status, Some(&head));
        let (mut synced, mut health) = (false, Health::Unknown);
        let shown = self.value_sources.shown(&head.sha);
        self.shared.statuses.update(&self.config.name, |s| {
            s.revision = Some(RevisionInfo {
                sha: shown,
                subject: head.subject.clone(),
            });
            synced = s.sync == SyncStatus::Synced;
            health = s.health;
            // What is applied is what the new commit renders: applied at it, as its
            // dependents (`dependsOn`) and a rollback's history see it.
            if synced {
                s.record_applied(&head.sha, &head.subject, Utc::now());
            }
        });
        METRICS.unchanged_commit(&self.config.name);
        self.post_pass_status(&head.sha, false, synced, health);
        true
    }

    /// Whether another replica's shard holds this app: it reconciles and reports it,
    /// so this one reads nothing (no manifests, no dry runs, no watches) and only
    /// says who does. Its status API forwards to that replica (`server`).
    pub(super) fn elsewhere(&mut self) -> bool {
        if !self.held_elsewhere() {
            return false;
        }
        // What the owner writes meanwhile is read afresh if the shard comes back, and
        // the app's state is the owner's to export: one series per app, fleet-wide.
        self.inventory = None;
        METRICS.forget_app(&self.config.name);
        drop(self.source.borrow_and_update());
        let reason = self.automation("").reason;
        self.shared.statuses.update(&self.config.name, |s| {
            s.sync = SyncStatus::Unknown;
            s.automation = Automation {
                acting: false,
                reason,
            };
        });
        true
    }

    /// Whether another replica's shard holds this app (see [`Worker::elsewhere`]).
    pub(super) fn held_elsewhere(&self) -> bool {
        self.shared
            .ownership
            .owner(&self.config.name)
            .is_some_and(|owner| !owner.local)
    }
}
