//! When to sync: a poll per source at an interval with jitter, woken early by webhooks.
//!
//! A poll first asks the remote where the reference points (one `ls-remote`) and skips
//! the fetch when nothing moved. No source polls more often than a minimum interval,
//! and a failing one backs off exponentially, so a tenant's `interval: 1ms` or a dead
//! host costs a Git server a few requests a minute. A webhook skips that check (the provider just told us
//! it moved) and waits a short window first, so a burst of deliveries for one push
//! (GitHub sends `push` and `pull_request` for a merge) costs one fetch.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{RepoKey, Revision, Source, SourceCache, SourceStatus, normalize_repo_url};

/// Poll interval when none is configured: Argo CD's default
/// (`timeout.reconciliation: 180s`), which webhooks make a safety net rather than the
/// main trigger.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(180);

/// The shortest interval a source is polled at, whatever it asks for: the figure
/// (#24: `interval: 1ms` sent 585 requests in 10 s). Flux's and Argo CD's documented
/// intervals are a minute and more; webhooks, not polls, are the fast path. Lowered only
/// for tests (`sources.minInterval` in the configuration).
pub const DEFAULT_MIN_POLL_INTERVAL: Duration = Duration::from_secs(10);

/// The longest wait between retries of a failing source, unless its own interval is
/// longer: the loop's backoff cap (DESIGN.md: "capped at five minutes"; kube-rs's
/// default backoff stops growing there too).
pub const MAX_FAILURE_BACKOFF: Duration = Duration::from_secs(5 * 60);

/// ±10% jitter keeps many sources (or replicas) polling one server from firing together.
pub const DEFAULT_POLL_JITTER: f64 = 0.1;

/// Wait after a webhook before fetching, so deliveries for the same push that arrive
/// together are answered by one fetch. Providers send them within milliseconds; this is
/// well under the 1 s budget for noticing a merge.
pub const DEFAULT_COALESCE_WINDOW: Duration = Duration::from_millis(25);

/// How one source is polled.
#[derive(Debug, Clone, PartialEq)]
pub struct PollConfig {
    /// Mean time between polls (never less than `min_interval`).
    pub interval: Duration,
    /// The floor of `interval` ([`DEFAULT_MIN_POLL_INTERVAL`]).
    pub min_interval: Duration,
    /// Fraction of `interval` by which each wait is randomly shortened or lengthened.
    pub jitter: f64,
    /// Wait after a webhook before fetching, to coalesce a burst.
    pub coalesce: Duration,
}

impl Default for PollConfig {
    fn default() -> Self {
        PollConfig {
            interval: DEFAULT_POLL_INTERVAL,
            min_interval: DEFAULT_MIN_POLL_INTERVAL,
            jitter: DEFAULT_POLL_JITTER,
            coalesce: DEFAULT_COALESCE_WINDOW,
        }
    }
}

impl PollConfig {
    /// The interval polls actually use: the configured one, at least `min_interval`.
    pub fn effective_interval(&self) -> Duration {
        self.interval.max(self.min_interval)
    }

    /// The next wait: `interval × (1 ± jitter)`.
    pub fn next_wait(&self) -> Duration {
        self.jittered(self.effective_interval())
    }

    /// The wait after `failures` failed syncs in a row (at least one): the interval,
    /// doubled for each failure after the first, capped at [`MAX_FAILURE_BACKOFF`] or
    /// the interval when that is longer, with the same jitter. A success starts over.
    pub fn retry_wait(&self, failures: u32) -> Duration {
        let interval = self.effective_interval();
        let cap = interval.max(MAX_FAILURE_BACKOFF);
        let doublings = failures.saturating_sub(1).min(31);
        let wait = interval.saturating_mul(1u32 << doublings).min(cap);
        self.jittered(wait)
    }

    /// The wait before the next poll after `failures` failed syncs in a row (0: the
    /// last one succeeded).
    pub fn wait_after(&self, failures: u32) -> Duration {
        match failures {
            0 => self.next_wait(),
            n => self.retry_wait(n),
        }
    }

    fn jittered(&self, wait: Duration) -> Duration {
        let j = self.jitter.clamp(0.0, 1.0);
        if j == 0.0 {
            return wait;
        }
        let factor = rand::rng().random_range((1.0 - j)..=(1.0 + j));
        wait.mul_f64(factor)
    }
}

/// A source's wake-up signal. Firing it many times before the watcher wakes counts
/// once (a generation counter in a `watch` channel).
#[derive(Debug, Clone)]
pub struct Trigger {
    tx: Arc<watch::Sender<u64>>,
}

impl Trigger {
    fn new() -> Self {
        Trigger {
            tx: Arc::new(watch::channel(0).0),
        }
    }

    /// Ask for a sync now.
    pub fn fire(&self) {
        self.tx.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// How many times this trigger has fired: which sources a webhook woke, without
    /// the webhook's answer naming them.
    pub fn fired(&self) -> u64 {
        *self.tx.borrow()
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }
}

/// A pushed reference, as a webhook names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushedRef {
    /// `refs/heads/<name>`.
    Branch(String),
    /// `refs/tags/<name>`.
    Tag(String),
}

impl PushedRef {
    /// From a full ref name; a bare name is taken as a branch.
    pub fn parse(name: &str) -> Self {
        if let Some(b) = name.strip_prefix("refs/heads/") {
            PushedRef::Branch(b.to_string())
        } else if let Some(t) = name.strip_prefix("refs/tags/") {
            PushedRef::Tag(t.to_string())
        } else {
            PushedRef::Branch(name.to_string())
        }
    }

    /// The full ref name: `refs/heads/<name>` or `refs/tags/<name>`.
    pub fn full_name(&self) -> String {
        match self {
            PushedRef::Branch(b) => format!("refs/heads/{b}"),
            PushedRef::Tag(t) => format!("refs/tags/{t}"),
        }
    }

    /// Does a source following `reference` follow this ref? A bare reference may name
    /// a branch or a tag (sync tries branches first, then tags).
    fn matches(&self, reference: &str) -> bool {
        // A source following the default branch cannot tell from a push which branch
        // that is: any branch push wakes it, and its sync finds out whether HEAD moved.
        if super::refs::follows_default_branch(reference) {
            return matches!(self, PushedRef::Branch(_));
        }
        match self {
            PushedRef::Branch(b) => {
                reference == b || reference.strip_prefix("refs/heads/") == Some(b)
            }
            PushedRef::Tag(t) => reference == t || reference.strip_prefix("refs/tags/") == Some(t),
        }
    }
}

/// How a webhook names the repository that moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushedRepo {
    /// Any URL of the repository: https or ssh clone URL, or its web page. Matches
    /// sources whose URL normalizes to the same host and path ([`normalize_repo_url`]).
    Url(String),
    /// A Bitbucket Server / Data Center repository by project key and slug, which is
    /// all its push payloads usually carry. Matches a source whose URL path is
    /// `<project>/<slug>` (ssh, `ssh://git@host:7999/prj/repo.git`) or ends in
    /// `scm/<project>/<slug>` (http, `https://host[/context]/scm/PRJ/repo.git`), on any
    /// host (the payload names none); project keys compare case-insensitively, as
    /// Bitbucket itself treats them.
    ProjectSlug { project: String, slug: String },
}

impl PushedRepo {
    fn matches(&self, key: &RepoKey) -> bool {
        match self {
            PushedRepo::Url(url) => normalize_repo_url(url).host_path == key.host_path,
            PushedRepo::ProjectSlug { project, slug } => {
                // host_path is lowercase, without `.git`: `host/scm/prj/repo`.
                let mut segments: Vec<&str> = key.host_path.split('/').skip(1).collect();
                let (Some(s), Some(p)) = (segments.pop(), segments.pop()) else {
                    return false;
                };
                let slug = slug.strip_suffix(".git").unwrap_or(slug);
                s.eq_ignore_ascii_case(slug)
                    && p.eq_ignore_ascii_case(project)
                    && segments.last().is_none_or(|prefix| *prefix == "scm")
            }
        }
    }
}

/// Every source that can be woken, with its trigger. Shared by the webhook receivers
/// (which fire) and the watchers (which wait).
#[derive(Debug, Clone, Default)]
pub struct Triggers {
    inner: Arc<Mutex<Vec<(Source, Trigger)>>>,
}

impl Triggers {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The trigger of `source`, registering it on first use.
    pub fn register(&self, source: &Source) -> Trigger {
        let mut inner = self.inner.lock();
        if let Some((_, t)) = inner.iter().find(|(s, _)| s == source) {
            return t.clone();
        }
        let t = Trigger::new();
        inner.push((source.clone(), t.clone()));
        t
    }

    /// Forget a source (an app was deleted).
    pub fn unregister(&self, source: &Source) {
        {
            let mut inner = self.inner.lock();
            inner.retain(|(s, _)| s != source);
        }
    }

    /// Fire every source of a repository (named by any of `repo_urls`) following the
    /// pushed ref; return the sources fired. Pinned sources never move and never match.
    pub fn push(&self, repo_urls: &[String], pushed: &PushedRef) -> Vec<Source> {
        let repos: Vec<PushedRepo> = repo_urls
            .iter()
            .filter(|u| !u.is_empty())
            .map(|u| PushedRepo::Url(u.clone()))
            .collect();
        self.push_to(&repos, pushed)
    }

    /// Like [`Triggers::push`], for a repository named any way a webhook names one.
    pub fn push_to(&self, repos: &[PushedRepo], pushed: &PushedRef) -> Vec<Source> {
        let inner = self.inner.lock();
        let mut fired = Vec::new();
        for (source, trigger) in inner.iter() {
            if source.is_pinned() || !pushed.matches(&source.reference) {
                continue;
            }
            let key = source.repo_key();
            if repos.iter().any(|r| r.matches(&key)) {
                trigger.fire();
                fired.push(source.clone());
            }
        }
        fired
    }
}

/// What a watcher publishes after every sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceState {
    /// The revision to use: the last good one (unchanged by a failed sync).
    pub revision: Option<Revision>,
    /// Readiness, the reason when not ready, and staleness: when the source last
    /// synced (`last_success`) and since when it fails (`failing_since`).
    pub status: SourceStatus,
    /// Syncs attempted so far (a poll whose check found nothing new is not one).
    pub syncs: u64,
}

/// Keeps one source synced: at start, at every poll where the remote moved, and after
/// webhooks.
pub struct SourceWatcher;

/// Resolves when `held` changes; never, once nothing can change it any more.
async fn held_changed(held: &mut watch::Receiver<bool>) {
    if held.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl SourceWatcher {
    /// Spawn the watcher task. It stops when `shutdown` is cancelled.
    pub fn spawn(
        cache: SourceCache,
        source: Source,
        config: PollConfig,
        trigger: Trigger,
        shutdown: CancellationToken,
    ) -> (watch::Receiver<SourceState>, JoinHandle<()>) {
        // Always wanted: the receiver keeps `true` after its sender is gone.
        let held = watch::channel(true).1;
        Self::spawn_while(cache, source, config, trigger, held, shutdown)
    }

    /// Spawn the watcher task, fetching only while `held` is true: a replica fetches
    /// nothing for an app another replica's shard holds (issue #18). Becoming held
    /// syncs at once, without waiting a poll interval; webhooks and polls while not
    /// held are left to the holder. It stops when `shutdown` is cancelled.
    pub fn spawn_while(
        cache: SourceCache,
        source: Source,
        config: PollConfig,
        trigger: Trigger,
        mut held: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) -> (watch::Receiver<SourceState>, JoinHandle<()>) {
        let (tx, rx) = watch::channel(SourceState::default());
        let handle = tokio::spawn(async move {
            // For as long as this task runs: when it ends (its app removed), the cache
            // forgets the source, its clone and its metric series.
            let _hold = cache.hold(&source);
            let mut wake = trigger.subscribe();
            wake.borrow_and_update();
            let mut syncs = 0u64;
            let mut failures = 0u32;
            let mut run_sync = true;
            loop {
                if !*held.borrow_and_update() {
                    // Idle: another replica holds the app; resume at once when it
                    // comes back. What was fetched is withdrawn meanwhile, so a pass
                    // on its return waits for a fresh fetch instead of applying a
                    // revision the holder may have moved past.
                    tx.send_if_modified(|state| {
                        let stale =
                            state.revision.is_some() || state.status != SourceStatus::default();
                        *state = SourceState {
                            syncs,
                            ..SourceState::default()
                        };
                        stale
                    });
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = held_changed(&mut held) => {}
                    }
                    run_sync = true;
                    continue;
                }
                if run_sync {
                    // Pushes seen from here on are covered by this sync.
                    wake.borrow_and_update();
                    syncs += 1;
                    // Boxed, as an app's pass is: the fetch's state lives only while it runs.
                    let result = Box::pin(cache.sync(&source)).await;
                    match &result {
                        Ok(_) => failures = 0,
                        Err(e) => {
                            failures = failures.saturating_add(1);
                            tracing::warn!(source = %source, reason = e.reason(), error = %e, failures, "source sync failed; keeping the last good revision");
                        }
                    }
                    let status = cache.status(&source);
                    tx.send_replace(SourceState {
                        revision: status.last_good.clone(),
                        status,
                        syncs,
                    });
                }
                // A push that arrived during the sync may be newer than what it fetched.
                if wake.has_changed().unwrap_or(false) {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(config.coalesce) => {}
                    }
                    run_sync = true;
                    continue;
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    changed = wake.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(config.coalesce) => {}
                        }
                        run_sync = true;
                    }
                    _ = held_changed(&mut held) => {
                        // Lost (idle at the top of the loop), or lost and held again:
                        // then what moved meanwhile is fetched at once.
                        run_sync = true;
                    }
                    _ = tokio::time::sleep(config.wait_after(failures)) => {
                        // A failing source retries its sync at once (the check would
                        // only double its requests); else the cheap check, and on its
                        // error a sync, so the status says why.
                        run_sync = failures > 0
                            || !cache.status(&source).ready
                            || !matches!(cache.remote_moved(&source).await, Ok(false));
                    }
                }
            }
        });
        (rx, handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_bounds() {
        let c = PollConfig {
            interval: Duration::from_secs(100),
            jitter: 0.1,
            coalesce: Duration::ZERO,
            ..PollConfig::default()
        };
        for _ in 0..200 {
            let w = c.next_wait();
            assert!(
                w >= Duration::from_secs(90) && w <= Duration::from_secs(110),
                "{w:?}"
            );
        }
        let fixed = PollConfig { jitter: 0.0, ..c };
        assert_eq!(fixed.next_wait(), Duration::from_secs(100));
    }

    #[test]
    fn no_source_polls_below_the_minimum_interval() {
        let c = PollConfig {
            interval: Duration::from_millis(1),
            jitter: 0.0,
            ..PollConfig::default()
        };
        assert_eq!(c.next_wait(), DEFAULT_MIN_POLL_INTERVAL);
        let lowered = PollConfig {
            min_interval: Duration::from_millis(50),
            ..c
        };
        assert_eq!(lowered.next_wait(), Duration::from_millis(50));
    }

    #[test]
    fn failures_back_off_exponentially_up_to_the_cap() {
        let c = PollConfig {
            interval: Duration::from_millis(1),
            jitter: 0.0,
            ..PollConfig::default()
        };
        let waits: Vec<u64> = (1..=8).map(|n| c.retry_wait(n).as_secs()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(c.retry_wait(u32::MAX), MAX_FAILURE_BACKOFF);
        // An interval longer than the cap is the cap: a failing source is retried no
        // less often than a healthy one is polled.
        let hourly = PollConfig {
            interval: Duration::from_secs(3600),
            ..c
        };
        assert_eq!(hourly.retry_wait(1), Duration::from_secs(3600));
        assert_eq!(hourly.retry_wait(5), Duration::from_secs(3600));
        let jittered = PollConfig { jitter: 0.1, ..c };
        for _ in 0..100 {
            let w = jittered.retry_wait(3);
            assert!(
                w >= Duration::from_secs(36) && w <= Duration::from_secs(44),
                "{w:?}"
            );
        }
    }

    /// The sources a push of `reference` to `urls` wakes.
    fn pushed(triggers: &Triggers, urls: &[String], reference: &str) -> Vec<Source> {
        triggers.push(urls, &PushedRef::parse(reference))
    }

    #[test]
    fn pushes_match_by_repository_and_ref() {
        let triggers = Triggers::new();
        let main = Source::new("git@github.com:org/app.git", "main", "deploy");
        let tag = Source::new("https://github.com/org/app", "v1.0", "deploy");
        let pinned = Source::new(
            "https://github.com/org/app",
            "0123456789abcdef0123456789abcdef01234567",
            "",
        );
        let other = Source::new("https://github.com/org/other", "main", "");
        for s in [&main, &tag, &pinned, &other] {
            triggers.register(s);
        }
        let urls = vec!["https://github.com/Org/App.git".to_string()];
        assert_eq!(
            pushed(&triggers, &urls, "refs/heads/main"),
            vec![main.clone()]
        );
        assert_eq!(pushed(&triggers, &urls, "refs/tags/v1.0"), vec![tag]);
        assert!(pushed(&triggers, &urls, "refs/heads/dev").is_empty());
        let ssh = vec!["ssh://git@github.com/org/other.git".to_string()];
        assert_eq!(pushed(&triggers, &ssh, "main"), vec![other]);
    }

    #[test]
    fn a_source_following_head_wakes_on_any_branch_push() {
        let triggers = Triggers::new();
        let head = Source::new("https://git.example.com/team/app", "HEAD", "");
        triggers.register(&head);
        let urls = vec!["git@git.example.com:team/app.git".to_string()];
        assert_eq!(pushed(&triggers, &urls, "refs/heads/trunk"), vec![head]);
        assert!(pushed(&triggers, &urls, "refs/tags/v1").is_empty());
    }

    #[test]
    fn bitbucket_server_pushes_match_by_project_key_and_slug() {
        let triggers = Triggers::new();
        let http = Source::new("https://bb.example.com/scm/PLAT/deploy.git", "main", "");
        let ssh = Source::new("ssh://git@bb.example.com:7999/plat/deploy.git", "main", "");
        let context = Source::new(
            "https://bb.example.com/bitbucket/scm/plat/deploy",
            "main",
            "",
        );
        let other_project = Source::new("https://bb.example.com/scm/web/deploy.git", "main", "");
        let not_scm = Source::new("https://gh.example.com/x/plat/deploy.git", "main", "");
        for s in [&http, &ssh, &context, &other_project, &not_scm] {
            triggers.register(s);
        }
        let repo = PushedRepo::ProjectSlug {
            project: "Plat".into(),
            slug: "deploy".into(),
        };
        let fired = triggers.push_to(&[repo], &PushedRef::parse("refs/heads/main"));
        assert_eq!(fired, vec![http.clone(), ssh, context]);
        assert_eq!(triggers.register(&http).fired(), 1);
        assert_eq!(triggers.register(&other_project).fired(), 0);
    }

    #[test]
    fn a_burst_of_fires_is_seen_once() {
        let t = Trigger::new();
        let mut rx = t.subscribe();
        rx.borrow_and_update();
        for _ in 0..10 {
            t.fire();
        }
        assert!(rx.has_changed().unwrap_or(false));
        rx.borrow_and_update();
        assert!(!rx.has_changed().unwrap_or(true));
    }
}
