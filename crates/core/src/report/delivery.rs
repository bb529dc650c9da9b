//! Outbound delivery shared by commit statuses and notifications: a bounded queue the
//! reconcile loop pushes into without waiting, one worker task that drains it, and a
//! POST with a per-attempt timeout and exponential backoff. Nothing here awaits in the
//! caller's path, so a slow or failing provider can delay a report, never a pass.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::outbound::{GuardedResolver, OutboundError, OutboundPolicy, Requester};

/// Attempts per delivery, the first included. Four attempts with the backoff below
/// span about 7 s of waiting: enough to ride out a provider's brief 5xx or a rolling
/// restart, short enough that a queued, newer result is not held back for long.
pub const DEFAULT_ATTEMPTS: u32 = 4;

/// How long one attempt may take. GitHub's and GitLab's status endpoints answer in
/// well under a second; 10 s is the timeout their own webhook senders use.
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// First wait between attempts, doubled after each failure (1 s, 2 s, 4 s).
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_secs(1);

/// Longest wait between attempts, whatever the doubling reaches.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Longest `Retry-After` honoured. GitHub's secondary rate limits ask for 60 s; a
/// longer wait is better spent giving up and posting the next, newer result.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Deliveries waiting at most. Commit statuses coalesce per app, so this bounds the
/// number of apps with a pending status; notifications past it drop the oldest.
pub const DEFAULT_QUEUE_CAPACITY: usize = 256;

/// How deliveries are attempted and queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryOptions {
    /// Attempts per delivery, the first included (at least 1).
    pub attempts: u32,
    /// Timeout of one attempt (connect, send, answer).
    pub attempt_timeout: Duration,
    /// First wait between attempts; doubled after each failure.
    pub initial_backoff: Duration,
    /// Cap on the doubled wait.
    pub max_backoff: Duration,
    /// Cap on a provider's `Retry-After`.
    pub max_retry_after: Duration,
    /// Deliveries waiting at most.
    pub queue_capacity: usize,
    /// Where Apps' deliveries may go besides public addresses.
    pub outbound: Arc<OutboundPolicy>,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        DeliveryOptions {
            attempts: DEFAULT_ATTEMPTS,
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            outbound: Arc::default(),
        }
    }
}

impl DeliveryOptions {
    /// The wait before attempt `next` (2 = the first retry), or the provider's
    /// `Retry-After` when it gave one.
    fn wait_before(&self, next: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(asked) = retry_after {
            return asked.min(self.max_retry_after);
        }
        let doublings = next.saturating_sub(2).min(16);
        self.initial_backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff)
    }
}

/// Counters of what the worker did, for logs, metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    /// Requests the provider accepted (2xx other than 203, a sign-in page's answer).
    pub delivered: u64,
    /// Reports not sent because nothing changed or a rate limit held them back.
    pub skipped: u64,
    /// Deliveries abandoned: retry budget spent, or an answer a retry cannot fix.
    pub failed: u64,
    /// Queued reports replaced by a newer one or pushed out of a full queue.
    pub dropped: u64,
    /// HTTP requests sent, retries included.
    pub requests: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    delivered: AtomicU64,
    skipped: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    requests: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> DeliveryStats {
        DeliveryStats {
            delivered: self.delivered.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
        }
    }
    pub(crate) fn delivered(&self) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn skipped(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }
    fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

/// How a queued job relates to the jobs already waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Replace the app's waiting job, if any: only the newest matters.
    ReplaceSameApp,
    /// Append; when the queue is full, push out the app's oldest waiting job, else the
    /// oldest job of all.
    Append,
}

struct QueueState<J> {
    jobs: VecDeque<(String, J)>,
    busy: bool,
    closed: bool,
}

/// The bounded queue between the caller and the worker.
pub(crate) struct Queue<J> {
    state: Mutex<QueueState<J>>,
    capacity: usize,
    work: Notify,
    idle: Notify,
    pub(crate) counters: Counters,
}

impl<J> Queue<J> {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Queue {
            state: Mutex::new(QueueState {
                jobs: VecDeque::new(),
                busy: false,
                closed: false,
            }),
            capacity: capacity.max(1),
            work: Notify::new(),
            idle: Notify::new(),
            counters: Counters::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, QueueState<J>> {
        // A panic while holding this lock leaves the queue itself consistent (every
        // change is one VecDeque call), so a poisoned lock is still usable.
        self.state.lock()
    }

    /// Queue a job for `app` without waiting. Returns false when the queue is closed.
    pub(crate) fn push(&self, app: &str, job: J, admission: Admission) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        match admission {
            Admission::ReplaceSameApp => {
                if let Some(slot) = state.jobs.iter_mut().find(|(a, _)| a == app) {
                    slot.1 = job;
                    self.counters.dropped();
                    return true;
                }
                if state.jobs.len() >= self.capacity {
                    state.jobs.pop_front();
                    self.counters.dropped();
                }
            }
            Admission::Append => {
                if state.jobs.len() >= self.capacity {
                    let same_app = state.jobs.iter().position(|(a, _)| a == app);
                    state.jobs.remove(same_app.unwrap_or(0));
                    self.counters.dropped();
                }
            }
        }
        state.jobs.push_back((app.to_string(), job));
        drop(state);
        self.work.notify_one();
        true
    }

    /// Wait until every job queued so far has been handled.
    pub(crate) async fn flush(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            {
                let state = self.lock();
                if state.jobs.is_empty() && !state.busy {
                    return;
                }
            }
            idle.await;
        }
    }

    /// Stop taking jobs; the worker drains what is queued, then ends.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.work.notify_one();
    }

    async fn next(&self) -> Option<(String, J)> {
        loop {
            let work = self.work.notified();
            tokio::pin!(work);
            work.as_mut().enable();
            {
                let mut state = self.lock();
                state.busy = false;
                if let Some(job) = state.jobs.pop_front() {
                    state.busy = true;
                    return Some(job);
                }
                self.idle.notify_waiters();
                if state.closed {
                    return None;
                }
            }
            work.await;
        }
    }
}

/// Spawn the worker on the current Tokio runtime: handles one job at a time, in queue
/// order, until the queue is closed and empty. One at a time keeps each app's reports
/// in order, and is what GitHub's REST API best practices ask of integrations ("make
/// requests serially instead of concurrently", to stay clear of secondary rate limits).
/// A provider that times out therefore delays the others' reports: a handle per
/// provider keeps them apart.
pub(crate) fn spawn_worker<J, F, Fut>(
    queue: Arc<Queue<J>>,
    mut handle: F,
) -> Result<JoinHandle<()>, DeliveryError>
where
    J: Send + 'static,
    F: FnMut(String, J) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| DeliveryError::Build("no Tokio runtime to run the worker on".into()))?;
    Ok(runtime.spawn(async move {
        while let Some((app, job)) = queue.next().await {
            handle(app, job).await;
        }
    }))
}

/// Held (behind an `Arc`) by every clone of a reporter handle: when the last one is
/// dropped without a shutdown, the queue closes and the worker ends after draining it.
pub(crate) struct CloseOnDrop<J>(pub(crate) Arc<Queue<J>>);

impl<J> Drop for CloseOnDrop<J> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Why a delivery was abandoned. Messages carry no URL (a Slack URL is a secret) and no
/// body.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The provider refused the request in a way a retry cannot fix (401, 403, 404,
    /// 422…): needs a change of configuration or token.
    #[error("rejected with HTTP {status}: {detail}")]
    Rejected { status: u16, detail: String },
    /// Every attempt failed with a retryable error.
    #[error("gave up after {attempts} attempts: {last}")]
    GaveUp { attempts: u32, last: String },
    /// The request could not be built (a header value with a newline, a bad URL).
    #[error("cannot build the request: {0}")]
    Build(String),
    /// An App's request to an address it may not reach: needs a change of the App or
    /// of `server.outbound.allowedNetworks`.
    #[error("refused: {0}")]
    Refused(#[from] OutboundError),
}

/// One request to be sent: a POST unless [`Post::with_method`] says otherwise (a
/// comment is listed with GET and edited with PATCH or PUT).
pub(crate) struct Post {
    /// Whose request it is: how far it may go.
    pub(crate) requester: Requester,
    pub(crate) method: reqwest::Method,
    pub(crate) url: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Post {
    pub(crate) fn new(
        requester: Requester,
        url: String,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Post {
        Post {
            requester,
            method: reqwest::Method::POST,
            url,
            headers,
            body,
        }
    }

    pub(crate) fn with_method(mut self, method: reqwest::Method) -> Post {
        self.method = method;
        self
    }
}

/// The outbound HTTP clients: the operator's, and the tenants' (whose resolver checks
/// every address it hands out, and which goes through no proxy: a proxy would resolve
/// the name itself, out of the check's sight). Neither follows redirects (a POST
/// turned into a GET on a 301 posts nothing, a redirect must not carry a token
/// elsewhere, and a tenant's must not lead to an address it may not reach).
pub(crate) struct Clients {
    open: reqwest::Client,
    guarded: reqwest::Client,
    policy: Arc<OutboundPolicy>,
}

impl Clients {
    pub(crate) fn new(options: &DeliveryOptions) -> Result<Clients, DeliveryError> {
        let builder = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("tether/", env!("CARGO_PKG_VERSION")))
        };
        let built = |b: reqwest::ClientBuilder| {
            b.build()
                .map_err(|e| DeliveryError::Build(e.without_url().to_string()))
        };
        let resolver = GuardedResolver::new(options.outbound.clone());
        Ok(Clients {
            open: built(builder())?,
            guarded: built(builder().no_proxy().dns_resolver(resolver))?,
            policy: options.outbound.clone(),
        })
    }

    /// The client for `post`, once an address in its URL is known to be allowed.
    fn for_post(&self, post: &Post) -> Result<&reqwest::Client, DeliveryError> {
        match post.requester {
            Requester::Operator => Ok(&self.open),
            Requester::Tenant => {
                self.policy.check_url(&post.url)?;
                Ok(&self.guarded)
            }
        }
    }
}

/// The policy's refusal behind a failed request, if that is why it failed.
fn refusal(e: &reqwest::Error) -> Option<OutboundError> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<OutboundError>() {
            return Some(refused.clone());
        }
        source = s.source();
    }
    None
}

/// Send `post`, retrying network errors, timeouts, 408, 429 and 5xx with backoff.
/// Returns the number of attempts it took.
pub(crate) async fn post_with_retry(
    clients: &Clients,
    options: &DeliveryOptions,
    counters: &Counters,
    post: &Post,
) -> Result<u32, DeliveryError> {
    send_with_retry(clients, options, counters, post)
        .await
        .map(|(attempts, _)| attempts)
}

/// [`post_with_retry`], keeping the provider's successful answer for the caller to
/// read (a listing's items and its next page).
pub(crate) async fn send_with_retry(
    clients: &Clients,
    options: &DeliveryOptions,
    counters: &Counters,
    post: &Post,
) -> Result<(u32, reqwest::Response), DeliveryError> {
    let client = clients.for_post(post)?;
    let attempts = options.attempts.max(1);
    let mut attempt = 1;
    loop {
        counters.request();
        let sent = client
            .request(post.method.clone(), &post.url)
            .headers(post.headers.clone())
            .body(post.body.clone())
            .timeout(options.attempt_timeout)
            .send()
            .await;
        let (last, retry_after) = match sent {
            Ok(answer) if answer.status() == StatusCode::NON_AUTHORITATIVE_INFORMATION => {
                return Err(DeliveryError::Rejected {
                    status: answer.status().as_u16(),
                    detail: NOT_THE_API.into(),
                });
            }
            Ok(answer) if answer.status().is_success() => return Ok((attempt, answer)),
            Ok(answer) => {
                let status = answer.status();
                let retry_after = retry_after(answer.headers());
                let detail = short_body(answer).await;
                if !retryable(status) {
                    return Err(DeliveryError::Rejected {
                        status: status.as_u16(),
                        detail,
                    });
                }
                (format!("HTTP {}: {detail}", status.as_u16()), retry_after)
            }
            Err(e) if e.is_builder() => {
                return Err(DeliveryError::Build(e.without_url().to_string()));
            }
            Err(e) => {
                if let Some(refused) = refusal(&e) {
                    return Err(DeliveryError::Refused(refused));
                }
                let last = if e.is_timeout() {
                    format!("no answer within {:?}", options.attempt_timeout)
                } else {
                    error_chain(&e.without_url())
                };
                (last, None)
            }
        };
        if attempt >= attempts {
            return Err(DeliveryError::GaveUp { attempts, last });
        }
        attempt += 1;
        let wait = options.wait_before(attempt, retry_after);
        tracing::debug!(attempt, ?wait, error = %last, "outbound delivery failed; retrying");
        tokio::time::sleep(wait).await;
    }
}

/// Why a 203 is no success: the answer is not the API's but a sign-in page's or a
/// proxy's. Azure DevOps answers a missing, expired or wrong personal access token with
/// its sign-in page and 203 Non-Authoritative Information, not 401; nothing was posted.
const NOT_THE_API: &str = "the answer is a sign-in page, not the API's (Azure DevOps answers a missing, expired or wrong personal access token this way): check the token";

fn retryable(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
}

/// `Retry-After` in seconds. The HTTP-date form is rare on APIs and would need a
/// date parser for a wait the backoff already approximates, so it is ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Longest part of a provider's error answer kept for the log.
const ERROR_BODY_CHARS: usize = 200;

/// The start of an error answer, on one line. Providers answer errors with a message
/// about the request (never a token), and it is what says why a status was refused.
async fn short_body(answer: reqwest::Response) -> String {
    let text = answer.text().await.unwrap_or_default();
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(ERROR_BODY_CHARS)
        .collect();
    one_line.trim().to_string()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_retry_after_wins() {
        let options = DeliveryOptions {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(60),
            ..DeliveryOptions::default()
        };
        let waits: Vec<_> = (2..=6).map(|n| options.wait_before(n, None)).collect();
        assert_eq!(
            waits,
            [1, 2, 4, 5, 5].map(Duration::from_secs).to_vec(),
            "1 s, doubled, capped at 5 s"
        );
        assert_eq!(
            options.wait_before(2, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(
            options.wait_before(2, Some(Duration::from_secs(3600))),
            Duration::from_secs(60),
            "a huge Retry-After is capped"
        );
    }

    #[test]
    fn retry_after_reads_seconds_only() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, "3".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn a_full_queue_coalesces_per_app() {
        let queue: Arc<Queue<u32>> = Queue::new(2);
        assert!(queue.push("a", 1, Admission::ReplaceSameApp));
        assert!(queue.push("b", 2, Admission::ReplaceSameApp));
        assert!(queue.push("a", 3, Admission::ReplaceSameApp));
        let jobs: Vec<_> = queue.lock().jobs.iter().cloned().collect();
        assert_eq!(jobs, [("a".to_string(), 3), ("b".to_string(), 2)]);

        let queue: Arc<Queue<u32>> = Queue::new(2);
        queue.push("a", 1, Admission::Append);
        queue.push("b", 2, Admission::Append);
        queue.push("b", 3, Admission::Append);
        let jobs: Vec<_> = queue.lock().jobs.iter().cloned().collect();
        assert_eq!(
            jobs,
            [("a".to_string(), 1), ("b".to_string(), 3)],
            "b's older event is pushed out, a's kept"
        );
        queue.push("c", 4, Admission::Append);
        let jobs: Vec<_> = queue.lock().jobs.iter().cloned().collect();
        assert_eq!(jobs, [("b".to_string(), 3), ("c".to_string(), 4)]);
        assert_eq!(queue.counters.snapshot().dropped, 2);

        queue.close();
        assert!(!queue.push("d", 5, Admission::Append), "closed");
    }
}
