//! Process-wide Prometheus metrics. Each stage records what it alone sees (the source
//! its fetches, the webhook receiver its deliveries, the cluster client its requests,
//! the loop its passes); `server` renders them at `/metrics`.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// Every metric tether exports.
pub struct Metrics {
    registry: Registry,
    passes: Family<Labels, Counter>,
    pass_duration: Family<Labels, Histogram>,
    drifted: Family<Labels, Gauge>,
    sync_status: Family<Labels, Gauge>,
    health: Family<Labels, Gauge>,
    git_fetch_duration: Family<Labels, Histogram>,
    git_fetch_failures: Family<Labels, Counter>,
    /// The reasons each repository's `git_fetch_failures` has a series for, so that a
    /// forgotten repository's series can all be removed.
    git_fetch_failure_reasons: Mutex<HashMap<String, BTreeSet<String>>>,
    source_last_success: Family<Labels, Gauge<f64, AtomicU64>>,
    webhook_events: Family<Labels, Counter>,
    api_requests: Family<Labels, Counter>,
    shard_owned: Family<Labels, Gauge>,
    renders: Family<Labels, Counter>,
    unchanged_commits: Family<Labels, Counter>,
}

/// Seconds, from 5 ms to about 80 s: a pass of an app in sync takes milliseconds, a
/// cold sync of a large app or a slow fetch tens of seconds.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("tether");
        let passes = Family::<Labels, Counter>::default();
        registry.register(
            "reconcile_passes",
            "Reconcile passes by app and result",
            passes.clone(),
        );
        let pass_duration =
            Family::<Labels, Histogram>::new_with_constructor(duration_histogram as fn() -> _);
        registry.register(
            "reconcile_duration_seconds",
            "Duration of reconcile passes by app and result",
            pass_duration.clone(),
        );
        let drifted = Family::<Labels, Gauge>::default();
        registry.register(
            "drifted_objects",
            "Objects that differ from Git, by app",
            drifted.clone(),
        );
        let sync_status = Family::<Labels, Gauge>::default();
        registry.register(
            "app_sync_status",
            "1 for the app's current sync status (Synced, OutOfSync, Unknown)",
            sync_status.clone(),
        );
        let health = Family::<Labels, Gauge>::default();
        registry.register(
            "app_health",
            "1 for the app's current health",
            health.clone(),
        );
        let git_fetch_duration =
            Family::<Labels, Histogram>::new_with_constructor(duration_histogram as fn() -> _);
        registry.register(
            "git_fetch_duration_seconds",
            "Duration of Git fetches by repository",
            git_fetch_duration.clone(),
        );
        let git_fetch_failures = Family::<Labels, Counter>::default();
        registry.register(
            "git_fetch_failures",
            "Failed Git fetches by repository and reason",
            git_fetch_failures.clone(),
        );
        let source_last_success = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "source_last_success_timestamp_seconds",
            "Unix time of the last successful sync of a Git source, by redacted URL, ref \
             and path; a failing source keeps its last good revision, so alert on its age",
            source_last_success.clone(),
        );
        let webhook_events = Family::<Labels, Counter>::default();
        registry.register(
            "webhook_events",
            "Webhook deliveries by provider and outcome",
            webhook_events.clone(),
        );
        let api_requests = Family::<Labels, Counter>::default();
        registry.register(
            "api_requests",
            "Kubernetes API requests by verb and status code",
            api_requests.clone(),
        );
        let shard_owned = Family::<Labels, Gauge>::default();
        registry.register(
            "shard_owned",
            "1 for each shard whose Lease this replica holds (shards: N), 0 for the others",
            shard_owned.clone(),
        );
        let renders = Family::<Labels, Counter>::default();
        registry.register(
            "renders",
            "Renders of an app's manifests (a pass whose inputs were rendered before renders none)",
            renders.clone(),
        );
        let unchanged_commits = Family::<Labels, Counter>::default();
        registry.register(
            "unchanged_commits",
            "New commits an app took without a pass: nothing its render reads changed",
            unchanged_commits.clone(),
        );
        Metrics {
            registry,
            passes,
            pass_duration,
            drifted,
            sync_status,
            health,
            git_fetch_duration,
            git_fetch_failures,
            git_fetch_failure_reasons: Mutex::default(),
            source_last_success,
            webhook_events,
            api_requests,
            shard_owned,
            renders,
            unchanged_commits,
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// [`Metrics::render`], with the gauges this service keeps itself rather than in
    /// the process-wide registry (several services can share a process, as replicas
    /// in tests do): `tether_cache_objects`, the objects its watch caches hold.
    pub fn render_with(&self, cache_objects: usize) -> String {
        let mut own = Registry::with_prefix("tether");
        let gauge = Gauge::<i64>::default();
        gauge.set(i64::try_from(cache_objects).unwrap_or(i64::MAX));
        own.register(
            "cache_objects",
            "Objects held in this replica's watch caches (with shards: its apps' only)",
            gauge,
        );
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.registry);
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &own);
        let _ = prometheus_client::encoding::text::encode_eof(&mut out);
        out
    }

    /// Whether this replica holds `shard`'s Lease.
    pub fn shard_owned(&self, shard: u32, owned: bool) {
        self.shard_owned
            .get_or_create(&vec![("shard", shard.to_string())])
            .set(i64::from(owned));
    }

    pub fn pass(&self, app: &str, result: &str, took: Duration) {
        let labels = vec![("app", app.to_string()), ("result", result.to_string())];
        self.passes.get_or_create(&labels).inc();
        self.pass_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// The app's state after a pass: one gauge set to 1 per family, the others to 0.
    pub fn app_state(&self, app: &str, drifted: usize, sync: &str, health: &str) {
        self.drifted
            .get_or_create(&vec![("app", app.to_string())])
            .set(drifted as i64);
        for status in ["Synced", "OutOfSync", "Unknown"] {
            let labels = vec![("app", app.to_string()), ("status", status.to_string())];
            self.sync_status
                .get_or_create(&labels)
                .set(i64::from(status == sync));
        }
        for h in ["Healthy", "Progressing", "Degraded", "Missing", "Unknown"] {
            let labels = vec![("app", app.to_string()), ("health", h.to_string())];
            self.health
                .get_or_create(&labels)
                .set(i64::from(h == health));
        }
    }

    /// The app's manifests were rendered.
    pub fn rendered(&self, app: &str) {
        self.renders
            .get_or_create(&vec![("app", app.to_string())])
            .inc();
    }

    /// The app took a new commit without a pass (its inputs were unchanged).
    pub fn unchanged_commit(&self, app: &str) {
        self.unchanged_commits
            .get_or_create(&vec![("app", app.to_string())])
            .inc();
    }

    /// Drops an app's series (the app was removed from the configuration).
    pub fn forget_app(&self, app: &str) {
        self.drifted.remove(&vec![("app", app.to_string())]);
        for status in ["Synced", "OutOfSync", "Unknown"] {
            self.sync_status.remove(&vec![
                ("app", app.to_string()),
                ("status", status.to_string()),
            ]);
        }
        for h in ["Healthy", "Progressing", "Degraded", "Missing", "Unknown"] {
            self.health
                .remove(&vec![("app", app.to_string()), ("health", h.to_string())]);
        }
    }

    pub fn git_fetch(&self, repo: &str, took: Duration, failure: Option<&str>) {
        let labels = vec![("repo", repo.to_string())];
        self.git_fetch_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if let Some(reason) = failure {
            self.git_fetch_failure_reasons
                .lock()
                .entry(repo.to_string())
                .or_default()
                .insert(reason.to_string());
            self.git_fetch_failures
                .get_or_create(&vec![
                    ("repo", repo.to_string()),
                    ("reason", reason.to_string()),
                ])
                .inc();
        }
    }

    /// A Git source synced at `at`. `url` must already be redacted (a label is printed
    /// as is at `/metrics`).
    pub fn source_success(
        &self,
        url: &str,
        reference: &str,
        path: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) {
        let labels = vec![
            ("url", url.to_string()),
            ("ref", reference.to_string()),
            ("path", path.to_string()),
        ];
        let seconds = at.timestamp_millis() as f64 / 1000.0;
        self.source_last_success.get_or_create(&labels).set(seconds);
    }

    /// Drops a source's `source_last_success` series (no source of that URL, ref and
    /// path is left). `url` is redacted, as it was given to [`Metrics::source_success`].
    pub fn forget_source(&self, url: &str, reference: &str, path: &str) {
        self.source_last_success.remove(&vec![
            ("url", url.to_string()),
            ("ref", reference.to_string()),
            ("path", path.to_string()),
        ]);
    }

    /// Drops a repository's `git_fetch_*` series (no source of it is left).
    pub fn forget_repo(&self, repo: &str) {
        self.git_fetch_duration
            .remove(&vec![("repo", repo.to_string())]);
        let reasons = self
            .git_fetch_failure_reasons
            .lock()
            .remove(repo)
            .unwrap_or_default();
        for reason in reasons {
            self.git_fetch_failures
                .remove(&vec![("repo", repo.to_string()), ("reason", reason)]);
        }
    }

    pub fn webhook(&self, provider: &str, outcome: &str) {
        self.webhook_events
            .get_or_create(&vec![
                ("provider", provider.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
    }

    pub fn api_request(&self, verb: &str, code: u16) {
        self.api_requests
            .get_or_create(&vec![
                ("verb", verb.to_string()),
                ("code", code.to_string()),
            ])
            .inc();
    }
}

/// The process's metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_gauge_is_rendered_before_the_end_of_the_exposition() {
        let text = Metrics::new().render_with(1234);
        assert!(text.contains("\ntether_cache_objects 1234\n"), "{text}");
        assert!(text.contains("# TYPE tether_cache_objects gauge"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    }

    #[test]
    fn renders_prometheus_text_with_labels() {
        let metrics = Metrics::new();
        metrics.pass("web", "Succeeded", Duration::from_millis(12));
        metrics.app_state("web", 2, "OutOfSync", "Healthy");
        metrics.api_request("PATCH", 200);
        let text = metrics.render();
        assert!(
            text.contains("tether_reconcile_passes_total{app=\"web\",result=\"Succeeded\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tether_drifted_objects{app=\"web\"} 2"),
            "{text}"
        );
        assert!(text.contains("tether_app_sync_status{app=\"web\",status=\"OutOfSync\"} 1"));
        assert!(text.contains("tether_app_sync_status{app=\"web\",status=\"Synced\"} 0"));
        assert!(text.contains("tether_api_requests_total{verb=\"PATCH\",code=\"200\"} 1"));
        assert!(text.contains("tether_reconcile_duration_seconds_bucket"));
        let at = chrono::DateTime::from_timestamp(1_700_000_000, 500_000_000).expect("time");
        metrics.source_success("https://***@h/r.git", "main", "deploy", at);
        let text = metrics.render();
        assert!(
            text.contains(
                "# TYPE tether_source_last_success_timestamp_seconds gauge\n\
                 tether_source_last_success_timestamp_seconds\
                 {url=\"https://***@h/r.git\",ref=\"main\",path=\"deploy\"} 1700000000.5"
            ),
            "{text}"
        );
        metrics.shard_owned(0, true);
        metrics.shard_owned(2, false);
        let text = metrics.render();
        assert!(text.contains("tether_shard_owned{shard=\"0\"} 1"), "{text}");
        assert!(text.contains("tether_shard_owned{shard=\"2\"} 0"), "{text}");
        metrics.shard_owned(0, false);
        assert!(
            metrics
                .render()
                .contains("tether_shard_owned{shard=\"0\"} 0")
        );
        metrics.forget_app("web");
        assert!(
            !metrics
                .render()
                .contains("tether_drifted_objects{app=\"web\"}")
        );
    }
}
