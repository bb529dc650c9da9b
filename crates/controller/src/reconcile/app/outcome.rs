//! The one place a pass's outcome is recorded: the app's status and conditions,
//! the metrics, the notifications and the commit status; and the source's standing.

use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use tether_core::metrics::METRICS;
use tether_core::report::commit_status::{CommitState, StatusReport};
use tether_core::report::drift::Summary;
use tether_core::report::notify::{Event, EventKind, EventRevision};
use tether_core::report::status::{
    AppStatus, Automation, ConditionStatus, ConditionType, PassInfo, PassResult, SourceInfo,
    SyncStatus, reason,
};
use tether_core::source::{Revision, SourceStatus};
use tether_core::sync::SyncReport;
use tether_core::sync::health::Health;

use super::Worker;
use crate::reconcile::pass::PassError;

/// What a pass that got as far as a sync (or a heal) found: written in the same
/// status update as the pass's record, so no reader sees a verdict without the
/// pass that made it.
pub(super) struct Found {
    pub(super) report: SyncReport,
    /// A full pass's automation standing; a heal (`None`) keeps the last one and
    /// records only the objects it looked at.
    pub(super) automation: Option<Automation>,
    /// Whether the pass could write (else it was a dry run).
    pub(super) acting: bool,
    /// How many objects it changed.
    pub(super) changed: usize,
}

impl Found {
    /// The report's failure, if any.
    fn error(&self) -> Option<PassError> {
        self.report.failure().map(PassError::from)
    }

    /// Takes the report into the status: the whole app's state after a sync, the
    /// objects it looked at after a heal.
    fn write(&self, s: &mut AppStatus, now: DateTime<Utc>) {
        match &self.automation {
            Some(automation) => {
                s.record_sync(&self.report, now);
                s.automation = automation.clone();
            }
            None => s.record_heal(&self.report, now),
        }
    }
}

impl Worker {
    /// Records how a pass (or a heal) ended, in one status update: what it found,
    /// the result, the error, the backoff and the conditions; then the metrics, the
    /// notifications and the commit status.
    pub(super) fn record_pass(
        &mut self,
        revision: &Revision,
        started: Instant,
        ended: Result<Found, (PassError, usize)>,
    ) {
        let name = self.config.name.clone();
        let took = started.elapsed();
        let now = Utc::now();
        let (outcome, found) = match ended {
            Ok(found) => match found.error() {
                Some(err) => (Err((err, found.changed)), Some(found)),
                None => (Ok(found.changed), Some(found)),
            },
            Err(failed) => (Err(failed), None),
        };
        let (result, error, changed) = match outcome {
            Ok(changed) => {
                self.schedule.succeeded();
                (PassResult::Succeeded, None, changed)
            }
            Err((err, changed)) if err.is_retryable() => {
                self.schedule.failed(Instant::now());
                (PassResult::Failed, Some(err), changed)
            }
            Err((err, changed)) => {
                let id = self.revision_id(&revision.sha);
                self.schedule.stalled(id);
                (PassResult::Stalled, Some(err), changed)
            }
        };
        METRICS.pass(&name, result.as_str(), took);
        let retry_at = self.schedule.retry_at();
        let (mut synced, mut health) = (false, Health::Unknown);
        self.shared.statuses.update(&name, |s| {
            if let Some(found) = &found {
                found.write(s, now);
                synced = s.sync == SyncStatus::Synced;
                health = s.health;
            }
            s.last_pass = Some(PassInfo {
                finished_at: now,
                duration_ms: took.as_millis() as u64,
                result,
                error: error.as_ref().map(ToString::to_string),
                changed,
            });
            s.next_attempt = retry_at.map(|at| now + (at - Instant::now()));
            set_pass_conditions(s, revision, result, error.as_ref(), now);
            if result != PassResult::Succeeded && s.last_pass.is_some() && s.drifted.is_empty() {
                s.sync = SyncStatus::Unknown;
            }
            METRICS.app_state(&s.name, s.drifted.len(), s.sync.as_str(), s.health.as_str());
        });
        if let Some(found) = &found {
            let report = &found.report;
            self.announce(&revision.sha, report, health, found.acting, synced, changed);
        }
        if let Some(err) = &error {
            self.announce_failure(revision, result, err);
        }
    }

    /// A failed pass told to the log, the notification channels and the commit's
    /// status.
    fn announce_failure(&self, revision: &Revision, result: PassResult, err: &PassError) {
        let name = &self.config.name;
        tracing::warn!(app = %name, result = result.as_str(), reason = err.reason(), error = %err, "pass failed");
        self.notify(Event {
            app: name.clone(),
            kind: EventKind::SyncFailed,
            revision: Some(EventRevision::from(revision)),
            reason: Some(err.reason().to_string()),
            summary: Summary::default(),
            objects: Vec::new(),
        });
        self.post_status(
            &revision.sha,
            CommitState::Failure,
            err.reason().to_string(),
        );
    }

    /// Records a pass whose source never fetched: the app says why (a missing
    /// credentials Secret, an unreachable host) instead of "first pass running".
    /// The watcher retries it at each poll; the same failure is recorded once.
    pub(super) fn record_unfetched(&self, status: &SourceStatus, started: Instant) {
        let name = &self.config.name;
        let tried = status.message.is_some();
        let failed = status
            .message
            .as_ref()
            .filter(|_| !status.ready)
            .map(|m| PassError::Source(m.clone()));
        let result = if status.retryable {
            PassResult::Failed
        } else {
            PassResult::Stalled
        };
        self.shared.statuses.update(name, |s| {
            s.sync = SyncStatus::Unknown;
            if !tried {
                let message = "the source has not been fetched yet";
                s.set_condition(
                    ConditionType::SourceReady,
                    ConditionStatus::False,
                    reason::FETCH_FAILED,
                    message,
                    Utc::now(),
                );
            }
            let Some(err) = &failed else {
                return;
            };
            let message = err.to_string();
            if s.last_pass.as_ref().and_then(|p| p.error.as_ref()) == Some(&message) {
                return;
            }
            let now = Utc::now();
            s.last_pass = Some(PassInfo {
                finished_at: now,
                duration_ms: started.elapsed().as_millis() as u64,
                result,
                error: Some(message.clone()),
                changed: 0,
            });
            s.set_condition(
                ConditionType::Ready,
                ConditionStatus::False,
                err.reason(),
                &message,
                now,
            );
            match result {
                PassResult::Stalled => s.set_condition(
                    ConditionType::Stalled,
                    ConditionStatus::True,
                    err.reason(),
                    &message,
                    now,
                ),
                _ => s.set_condition(
                    ConditionType::Stalled,
                    ConditionStatus::False,
                    reason::RETRYING,
                    "",
                    now,
                ),
            }
        });
    }

    /// Shows the source's standing: ready, or failing since when (the condition's
    /// transition time) and whether that is stale. A failing source keeps serving its
    /// last good revision, visibly. Staleness is announced once per failure.
    pub(super) fn observe_source(&mut self, status: &SourceStatus, revision: Option<&Revision>) {
        let tried = status.ready || status.message.is_some();
        if !tried {
            return;
        }
        let now = Utc::now();
        let stale = is_stale(status, self.config.source.stale_after, now);
        let reason = status.reason.unwrap_or(reason::FETCH_FAILED);
        self.shared.statuses.update(&self.config.name, |s| {
            s.source = Some(SourceInfo {
                ready: status.ready,
                reason: status.reason.map(str::to_string),
                message: status.message.clone(),
                last_success: status.last_success,
                failing_since: status.failing_since,
                stale,
            });
            if status.ready {
                s.set_condition(
                    ConditionType::SourceReady,
                    ConditionStatus::True,
                    reason::FETCHED,
                    "",
                    now,
                );
            } else if let Some(message) = &status.message {
                match status.failing_since {
                    Some(since) => {
                        let at = since.to_rfc3339_opts(SecondsFormat::Secs, true);
                        let message = format!("{message} (since {at})");
                        s.set_condition_since(
                            ConditionType::SourceReady,
                            ConditionStatus::False,
                            reason,
                            &message,
                            since,
                        );
                    }
                    None => s.set_condition(
                        ConditionType::SourceReady,
                        ConditionStatus::False,
                        reason,
                        message,
                        now,
                    ),
                }
            }
        });
        if status.ready {
            self.stale_reported = false;
        } else if stale && !self.stale_reported {
            self.stale_reported = true;
            tracing::warn!(
                app = %self.config.name,
                reason,
                failing_since = ?status.failing_since,
                "source stale: still at the last good revision"
            );
            self.notify(Event {
                app: self.config.name.clone(),
                kind: EventKind::SourceStale,
                revision: revision.map(EventRevision::from),
                reason: Some(reason.to_string()),
                summary: Summary::default(),
                objects: Vec::new(),
            });
        }
    }

    /// Tells people what this pass found: notifications on transitions, the commit
    /// status on every pass (the reporter posts only changes).
    pub(super) fn announce(
        &mut self,
        sha: &str,
        report: &SyncReport,
        health: Health,
        acting: bool,
        synced: bool,
        changed: usize,
    ) {
        let revision = self.source.borrow().revision.clone();
        let revision = revision.as_ref().filter(|r| r.sha == sha);
        let event = |kind, reason: Option<&str>| {
            Event::from_sync(&self.config.name, kind, revision, reason, report)
        };
        if acting && changed > 0 {
            self.notify(event(EventKind::DriftCorrected, None));
            self.drift_reported = false;
        } else if !acting && report.changed() {
            if !self.drift_reported {
                self.notify(event(EventKind::DriftDetected, Some("OutOfSync")));
                self.drift_reported = true;
            }
        } else if synced {
            self.drift_reported = false;
        }
        if health == Health::Degraded && self.last_health != Some(Health::Degraded) {
            self.notify(event(EventKind::HealthDegraded, Some("Degraded")));
        }
        self.last_health = Some(health);
        self.post_pass_status(sha, report.failed(), synced, health);
    }

    /// The commit status of a pass's outcome at `sha`.
    pub(super) fn post_pass_status(&self, sha: &str, failed: bool, synced: bool, health: Health) {
        let state = CommitState::from_pass(failed, synced, health);
        let description = if failed {
            "sync failed".to_string()
        } else if synced {
            format!("Synced, {health}")
        } else {
            "OutOfSync".to_string()
        };
        self.post_status(sha, state, description);
    }

    pub(super) fn notify(&self, event: Event) {
        if !self.channels.is_empty() {
            self.shared.notifier.notify(&self.channels, event);
        }
    }

    pub(super) fn post_status(&self, sha: &str, state: CommitState, description: String) {
        if let Some(target) = &self.status_target {
            self.shared.commit_statuses.report(StatusReport {
                target: target.clone(),
                sha: sha.to_string(),
                state,
                description,
            });
        }
    }
}

/// Whether the source has failed for at least `stale_after`.
fn is_stale(status: &SourceStatus, stale_after: Duration, now: chrono::DateTime<Utc>) -> bool {
    !status.ready
        && status
            .failing_since
            .and_then(|since| (now - since).to_std().ok())
            .is_some_and(|age| age >= stale_after)
}

/// The Ready and Stalled conditions after a pass: Ready says whether it succeeded;
/// Stalled whether it failed in a way only a change fixes (else it is retrying). A
/// successful pass of a synced app records its revision as applied.
fn set_pass_conditions(
    s: &mut AppStatus,
    revision: &Revision,
    result: PassResult,
    error: Option<&PassError>,
    now: DateTime<Utc>,
) {
    let message = error.map(ToString::to_string).unwrap_or_default();
    match error {
        None => {
            s.set_condition(
                ConditionType::Ready,
                ConditionStatus::True,
                reason::SUCCEEDED,
                "",
                now,
            );
            s.set_condition(
                ConditionType::Stalled,
                ConditionStatus::False,
                reason::SUCCEEDED,
                "",
                now,
            );
            if s.sync == SyncStatus::Synced {
                s.record_applied(&revision.sha, &revision.subject, now);
            }
        }
        Some(err) => {
            s.set_condition(
                ConditionType::Ready,
                ConditionStatus::False,
                err.reason(),
                &message,
                now,
            );
            if result == PassResult::Stalled {
                s.set_condition(
                    ConditionType::Stalled,
                    ConditionStatus::True,
                    err.reason(),
                    &message,
                    now,
                );
            } else {
                s.set_condition(
                    ConditionType::Stalled,
                    ConditionStatus::False,
                    reason::RETRYING,
                    "",
                    now,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    #[test]
    fn a_source_is_stale_only_once_it_has_failed_for_stale_after() {
        let now = Utc::now();
        let failing = |minutes: i64| SourceStatus {
            ready: false,
            reason: Some("FetchFailed"),
            message: Some("connection refused".into()),
            failing_since: Some(now - TimeDelta::minutes(minutes)),
            ..SourceStatus::default()
        };
        let ten = Duration::from_secs(600);
        assert!(!is_stale(&failing(9), ten, now));
        assert!(is_stale(&failing(10), ten, now));
        assert!(is_stale(&failing(60), ten, now));
        // A clock that moved back is not a failure of ten minutes.
        assert!(!is_stale(&failing(-5), ten, now));
        let ready = SourceStatus {
            ready: true,
            ..SourceStatus::default()
        };
        assert!(!is_stale(&ready, ten, now));
    }
}
