//! When a worker wakes next without being told: the retry after a failure, and
//! the moment a failing source turns stale.

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use tether_core::report::status::PassResult;

use super::Worker;

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

    /// Schedules the next attempt after a failure.
    pub(super) fn retry(&mut self) -> PassResult {
        let delay = self.backoff.next_delay();
        self.retry_at = Some(Instant::now() + delay);
        PassResult::Failed
    }
}
