//! When a worker wakes next on its own, and what it owes: the resync, the retry after
//! a failure (with its backoff), a stall that waits for new inputs, a manual sync still
//! owed, the next sync window change and the moment a failing source turns stale. One
//! value ([`Schedule`]) instead of flags spread over the worker; its deadline is a pure
//! function of it ([`Schedule::next_wake`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};

use super::Worker;
use crate::reconcile::backoff::Backoff;

/// A manual sync asked for (the API, the dashboard, a rollback) and not yet done:
/// shared by the worker and its handle, kept until a pass may act on it.
#[derive(Debug, Clone, Default)]
pub(super) struct ManualSync(Arc<AtomicBool>);

impl ManualSync {
    /// Asks for one (coalesced with any other request).
    pub(super) fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether one is owed.
    pub(super) fn owed(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Takes the request for the pass about to run: whether there was one.
    pub(super) fn take(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}

/// What a worker owes and when it wakes without being told.
#[derive(Debug)]
pub(super) struct Schedule {
    /// The next full pass nothing else asked for (`resyncInterval` after the last).
    next_resync: Instant,
    /// The next attempt after a failed pass, backing off.
    retry_at: Option<Instant>,
    backoff: Backoff,
    /// A revision that cannot be synced (invalid manifests): not retried until the
    /// source moves.
    stalled_on: Option<String>,
    /// A manual sync still owed.
    pub(super) manual: ManualSync,
}

impl Schedule {
    pub(super) fn new(resync_interval: Duration, manual: ManualSync) -> Schedule {
        Schedule {
            next_resync: Instant::now() + resync_interval,
            retry_at: None,
            backoff: Backoff::new(),
            stalled_on: None,
            manual,
        }
    }

    /// When the worker wakes on its own: the resync, the next sync window change, and
    /// for an app held `here` the retry and the staleness. An app another replica
    /// holds has no retry or staleness to act on here: its pass returns at once and
    /// moves neither deadline, so one that had passed would wake the loop again at
    /// once, forever (a core spent on a replica that lost the shard of an app whose
    /// last pass failed).
    pub(super) fn next_wake(
        &self,
        window_change: Option<Instant>,
        stale_at: Option<Instant>,
        here: bool,
    ) -> Instant {
        [
            Some(self.next_resync),
            self.retry_at.filter(|_| here),
            window_change,
            stale_at.filter(|_| here),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(self.next_resync)
    }

    /// A full pass ran: the next resync is `interval` from `now`.
    pub(super) fn passed(&mut self, now: Instant, interval: Duration) {
        self.next_resync = now + interval;
    }

    /// Whether a retry is still ahead at `now` (live changes and resyncs wait for it).
    pub(super) fn backing_off(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|at| at > now)
    }

    /// Nothing failed or stalled: a heal or an unchanged commit may stand for a pass.
    pub(super) fn settled(&self) -> bool {
        self.retry_at.is_none() && self.stalled_on.is_none()
    }

    /// The next attempt, for the status.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Whether revision `id` stalled (and waits for new inputs or a manual sync).
    pub(super) fn stalled_at(&self, id: &str) -> bool {
        self.stalled_on.as_deref() == Some(id)
    }

    /// A pass is about to try again: the stall, if any, is over.
    pub(super) fn unstall(&mut self) {
        self.stalled_on = None;
    }

    /// A pass succeeded: no retry pending, the backoff starts over.
    pub(super) fn succeeded(&mut self) {
        self.backoff.reset();
        self.retry_at = None;
    }

    /// A pass failed and may succeed later: the next attempt, backing off from `now`.
    pub(super) fn failed(&mut self, now: Instant) {
        self.retry_at = Some(now + self.backoff.next_delay());
    }

    /// A pass failed at revision `id` in a way retrying cannot fix.
    pub(super) fn stalled(&mut self, id: String) {
        self.stalled_on = Some(id);
        self.retry_at = None;
    }
}

impl Worker {
    /// When the failing source turns stale, if it has not been announced yet: a pass
    /// then runs even if nothing else wakes the worker.
    pub(super) fn stale_at(&self) -> Option<Instant> {
        if self.stale_reported {
            return None;
        }
        let since = self.source.borrow().status.failing_since?;
        let at = since + TimeDelta::from_std(self.config.source.stale_after).ok()?;
        let wait = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        Some(Instant::now() + wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(t0: Instant) -> Schedule {
        let mut s = Schedule::new(Duration::ZERO, ManualSync::default());
        s.passed(t0, Duration::from_secs(300));
        s
    }

    #[test]
    fn the_next_wake_is_the_earliest_deadline_and_an_app_held_elsewhere_ignores_retry_and_staleness()
     {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut s = schedule(t0);
        assert_eq!(s.next_wake(None, None, true), at(300));
        assert_eq!(s.next_wake(Some(at(60)), None, true), at(60));
        assert_eq!(s.next_wake(None, Some(at(30)), true), at(30));
        s.failed(t0);
        let retry = s.retry_at().expect("a retry after a failure");
        assert!(retry > t0 && retry < at(300));
        assert_eq!(s.next_wake(None, None, true), retry);
        // Held by another replica: only the resync and the window wake it.
        assert_eq!(s.next_wake(None, Some(at(30)), false), at(300));
        assert_eq!(s.next_wake(Some(at(90)), Some(at(30)), false), at(90));
    }

    #[test]
    fn a_failure_backs_off_a_stall_waits_and_a_success_settles() {
        let t0 = Instant::now();
        let mut s = schedule(t0);
        assert!(s.settled() && !s.backing_off(t0));
        s.failed(t0);
        assert!(!s.settled() && s.backing_off(t0));
        s.succeeded();
        assert!(s.settled() && s.retry_at().is_none());
        s.failed(t0);
        s.stalled("abc".into());
        assert!(s.stalled_at("abc") && !s.stalled_at("def"));
        assert!(s.retry_at().is_none(), "a stall is not retried");
        assert!(!s.settled());
        s.unstall();
        assert!(s.settled());
    }

    #[test]
    fn a_manual_sync_is_owed_until_taken_and_can_be_owed_again() {
        let manual = ManualSync::default();
        let handle = manual.clone();
        assert!(!manual.owed());
        handle.request();
        assert!(manual.owed());
        assert!(manual.take());
        assert!(!manual.owed() && !manual.take());
        manual.request();
        assert!(handle.owed());
    }
}
