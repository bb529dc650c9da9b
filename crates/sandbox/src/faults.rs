//! Fault injection and request accounting, for reliability and efficiency tests:
//! `--fail-rate` answers a share of requests with 500, 503 or 429, `--latency-ms`
//! delays every answer, and counters record each request by verb and resource so a
//! test can assert exactly how many reads and writes a client made.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng as _;

use super::status::ApiError;

/// Settable while the sandbox runs (from tests in-process, or `PUT /sandbox/faults`).
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// The failure rate in millionths, so it can live in an atomic.
    fail_ppm: AtomicU64,
    latency_ms: AtomicU64,
}

impl Faults {
    pub(crate) fn set_fail_rate(&self, rate: f64) {
        let ppm = (rate.clamp(0.0, 1.0) * 1_000_000.0).round() as u64;
        self.fail_ppm.store(ppm, Ordering::Relaxed);
    }

    pub(crate) fn fail_rate(&self) -> f64 {
        self.fail_ppm.load(Ordering::Relaxed) as f64 / 1_000_000.0
    }

    pub(crate) fn set_latency(&self, latency: Duration) {
        self.latency_ms
            .store(latency.as_millis() as u64, Ordering::Relaxed);
    }

    pub(crate) fn latency(&self) -> Duration {
        Duration::from_millis(self.latency_ms.load(Ordering::Relaxed))
    }

    /// Draws whether this request fails, and how.
    pub(crate) fn draw(&self) -> Option<ApiError> {
        let ppm = self.fail_ppm.load(Ordering::Relaxed);
        if ppm == 0 {
            return None;
        }
        let mut rng = rand::rng();
        if rng.random_range(0..1_000_000) >= ppm {
            return None;
        }
        Some(match rng.random_range(0..3) {
            0 => ApiError::Internal("injected fault: internal error".into()),
            1 => ApiError::ServiceUnavailable(
                "injected fault: the server is currently unable to handle the request".into(),
            ),
            _ => ApiError::TooManyRequests(
                "injected fault: too many requests, please try again later".into(),
            ),
        })
    }
}

/// Requests counted by (verb, resource), e.g. ("patch", "apps/deployments"), and the
/// time spent answering them.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    counts: Mutex<BTreeMap<(String, String), u64>>,
    /// Every request that reached RBAC, by the user it ran as (after impersonation),
    /// allowed or refused, as kube-apiserver's audit log records it: how a test tells
    /// replicas apart when each impersonates a user of its own, and proves which
    /// identity acted for a tenant. The last [`MAX_RECORDED_REQUESTS`], so a long-running sandbox stays
    /// bounded.
    audit: Mutex<VecDeque<UserRequest>>,
    serving_nanos: AtomicU64,
    /// Open watches, by the `timeoutSeconds` each runs for.
    open_watches: Mutex<BTreeMap<u64, u64>>,
    /// Watches the server ended at their `timeoutSeconds`: each is one the client
    /// establishes again (a `watch` request) if it still wants the events.
    watch_timeouts: AtomicU64,
    /// Requests other than watches being answered now, and the most at once since
    /// the reset: what a client's bounds on concurrency look like from the server.
    in_flight: AtomicU64,
    peak_in_flight: AtomicU64,
}

/// One request being answered, counted in [`Counters`] until dropped.
pub(crate) struct InFlight<'a>(&'a Counters);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Watches as the server holds and ends them (see [`Counters::watches`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchCounts {
    /// Open now, by the `timeoutSeconds` each runs for.
    pub open: BTreeMap<u64, u64>,
    /// Ended at their timeout since the counters were reset.
    pub timed_out: u64,
}

impl WatchCounts {
    /// How many watches the open ones end per hour at their timeouts, each then
    /// established again: the steady cost of keeping them.
    pub fn reestablished_per_hour(&self) -> f64 {
        self.open
            .iter()
            .filter(|(timeout, _)| **timeout > 0)
            .map(|(timeout, n)| *n as f64 * 3600.0 / *timeout as f64)
            .sum()
    }
}

impl Counters {
    pub(crate) fn record(&self, verb: &str, resource: &str) {
        let mut counts = self.counts.lock();
        *counts
            .entry((verb.to_string(), resource.to_string()))
            .or_default() += 1;
    }

    pub(crate) fn record_request(&self, request: UserRequest) {
        let mut audit = self.audit.lock();
        if audit.len() >= MAX_RECORDED_REQUESTS {
            audit.pop_front();
        }
        audit.push_back(request);
    }

    /// The requests recorded so far, oldest first.
    pub(crate) fn audit(&self) -> Vec<UserRequest> {
        self.audit.lock().iter().cloned().collect()
    }

    /// Counts a request (not a watch) in flight until the guard is dropped.
    pub(crate) fn enter(&self) -> InFlight<'_> {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::Relaxed);
        InFlight(self)
    }

    /// The most requests (watches aside) answered at once since the reset.
    pub(crate) fn peak_in_flight(&self) -> u64 {
        self.peak_in_flight.load(Ordering::Relaxed)
    }

    pub(crate) fn add_serving_time(&self, spent: Duration) {
        let nanos = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        self.serving_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The time spent answering requests other than watches, summed.
    pub(crate) fn serving_time(&self) -> Duration {
        Duration::from_nanos(self.serving_nanos.load(Ordering::Relaxed))
    }

    /// A watch opened for `timeout`.
    pub(crate) fn watch_opened(&self, timeout: Duration) {
        let mut open = self.open_watches.lock();
        *open.entry(timeout.as_secs()).or_default() += 1;
    }

    /// A watch opened for `timeout` ended: at that timeout, or otherwise (the client
    /// left, it fell behind, the server stopped).
    pub(crate) fn watch_closed(&self, timeout: Duration, timed_out: bool) {
        let mut open = self.open_watches.lock();
        if let Some(n) = open.get_mut(&timeout.as_secs()) {
            *n -= 1;
            if *n == 0 {
                open.remove(&timeout.as_secs());
            }
        }
        if timed_out {
            self.watch_timeouts.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn watches(&self) -> WatchCounts {
        WatchCounts {
            open: self.open_watches.lock().clone(),
            timed_out: self.watch_timeouts.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn snapshot(&self) -> RequestCounts {
        RequestCounts(self.counts.lock().clone())
    }

    /// Starts the peak again from the requests in flight now.
    pub(crate) fn reset_peak_in_flight(&self) {
        self.peak_in_flight
            .store(self.in_flight.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub(crate) fn reset(&self) {
        self.counts.lock().clear();
        self.audit.lock().clear();
        self.serving_nanos.store(0, Ordering::Relaxed);
        self.reset_peak_in_flight();
        // Open watches are a state, not a count since the reset.
        self.watch_timeouts.store(0, Ordering::Relaxed);
    }
}

/// Requests kept by [`Counters`]' audit: a test's whole story (a few thousand
/// requests), in about 4 MB at most however long the sandbox runs.
pub(crate) const MAX_RECORDED_REQUESTS: usize = 20_000;

/// One request as the audit records it: who, which verb, which path, whether it was
/// a dry run (which changes nothing) and whether RBAC allowed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRequest {
    pub user: String,
    pub verb: String,
    pub path: String,
    pub dry_run: bool,
    pub allowed: bool,
}

impl UserRequest {
    /// A write RBAC allowed that was not a dry run.
    pub fn is_write(&self) -> bool {
        self.allowed && WRITE_VERBS.contains(&self.verb.as_str()) && !self.dry_run
    }
}

/// A snapshot of the request counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts(pub BTreeMap<(String, String), u64>);

/// The verbs that change state.
pub const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

impl RequestCounts {
    /// Requests of one verb on one resource (`"apps/deployments"`, `"configmaps"`).
    pub fn get(&self, verb: &str, resource: &str) -> u64 {
        self.0
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Requests of one verb, on any resource.
    pub fn verb(&self, verb: &str) -> u64 {
        self.0
            .iter()
            .filter(|((v, _), _)| v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every write request, on any resource.
    pub fn writes(&self) -> u64 {
        WRITE_VERBS.iter().map(|v| self.verb(v)).sum()
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn to_json(&self) -> serde_json::Value {
        let requests: Vec<_> = self
            .0
            .iter()
            .map(|((verb, resource), count)| serde_json::json!({"verb": verb, "resource": resource, "count": count}))
            .collect();
        serde_json::json!({"requests": requests, "writes": self.writes(), "total": self.total()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_rate_bounds() {
        let faults = Faults::default();
        assert!((0..1000).all(|_| faults.draw().is_none()));
        faults.set_fail_rate(1.0);
        assert!((0..1000).all(|_| faults.draw().is_some()));
        faults.set_fail_rate(7.0);
        assert_eq!(faults.fail_rate(), 1.0);
    }

    #[test]
    fn injected_faults_are_retryable_codes() {
        let faults = Faults::default();
        faults.set_fail_rate(1.0);
        for _ in 0..100 {
            let code = faults.draw().unwrap().code().as_u16();
            assert!([500, 503, 429].contains(&code), "{code}");
        }
    }

    #[test]
    fn counters_sum_by_verb_and_writes() {
        let counters = Counters::default();
        counters.record("get", "configmaps");
        counters.record("patch", "apps/deployments");
        counters.record("patch", "apps/deployments");
        counters.record("delete", "configmaps");
        let counts = counters.snapshot();
        assert_eq!(counts.get("patch", "apps/deployments"), 2);
        assert_eq!(counts.verb("get"), 1);
        assert_eq!(counts.writes(), 3);
        let request = |user: &str, verb: &str, dry_run: bool, allowed: bool| UserRequest {
            user: user.into(),
            verb: verb.into(),
            path: "/api/v1/namespaces/a/configmaps/x".into(),
            dry_run,
            allowed,
        };
        counters.record_request(request("replica-a", "patch", false, true));
        counters.record_request(request("replica-a", "patch", true, true));
        counters.record_request(request("replica-b", "get", false, true));
        counters.record_request(request("replica-b", "delete", false, false));
        let audit = counters.audit();
        assert_eq!(audit.len(), 4);
        assert_eq!(audit[0].user, "replica-a");
        let writes: Vec<bool> = audit.iter().map(UserRequest::is_write).collect();
        assert_eq!(
            writes,
            [true, false, false, false],
            "dry runs, reads and refusals change nothing"
        );
        counters.reset();
        assert_eq!(counters.snapshot().total(), 0);
        assert!(counters.audit().is_empty());
    }

    #[test]
    fn requests_in_flight_keep_their_peak_until_a_reset_to_those_still_open() {
        let counters = Counters::default();
        let first = counters.enter();
        let second = counters.enter();
        drop(second);
        let third = counters.enter();
        assert_eq!(counters.peak_in_flight(), 2);
        drop(third);
        counters.reset();
        // One is still being answered.
        assert_eq!(counters.peak_in_flight(), 1);
        drop(first);
        let _fourth = counters.enter();
        assert_eq!(counters.peak_in_flight(), 1);
    }

    #[test]
    fn watches_are_counted_open_by_timeout_and_ended_at_it() {
        let counters = Counters::default();
        let kube_rs = Duration::from_secs(290);
        counters.watch_opened(kube_rs);
        counters.watch_opened(kube_rs);
        counters.watch_opened(Duration::from_secs(1800));
        counters.watch_closed(kube_rs, true);
        let watches = counters.watches();
        assert_eq!(watches.open, BTreeMap::from([(290, 1), (1800, 1)]));
        assert_eq!(watches.timed_out, 1);
        assert!((watches.reestablished_per_hour() - (3600.0 / 290.0 + 2.0)).abs() < 1e-9);
        // Left by the client: not a timeout.
        counters.watch_closed(kube_rs, false);
        counters.reset();
        let watches = counters.watches();
        assert_eq!(watches.open, BTreeMap::from([(1800, 1)]));
        assert_eq!(watches.timed_out, 0);
    }
}
