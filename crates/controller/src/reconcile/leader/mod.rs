//! Leadership: which replica of `tether serve --leader-elect` may write to the cluster,
//! decided over a `coordination.k8s.io/v1` Lease the way client-go's `leaderelection`
//! does it. Followers keep their caches warm and serve status; only the leader acts.
//!
//! Safety rests on three rules. Expiry is judged on the local clock, from the moment
//! this process last saw the record change, never from the timestamps another replica
//! wrote (clocks skew; elapsed time on one machine does not). A leader that cannot
//! renew within `renew_deadline` stops leading at once, and `renew_deadline` is shorter
//! than the lease, so it stops before anyone else may take over. Every write is
//! optimistic (the resourceVersion read), so two replicas never both win a race.
//!
//! The decision itself ([`observe`], [`decide`], [`next_record`]) is pure and unit-tested;
//! the task around it only reads, writes and waits.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use kube::core::GroupVersionKind;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::LeaderElectionConfig;
use tether_core::cluster::{Cluster, ClusterError, Resolved};
use tether_schema::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

/// `leaseDurationSeconds` written when the leader lets go: client-go's `release` writes
/// 1 (with no holder), so followers see an expired lease at their next retry.
pub const RELEASED_LEASE_DURATION_SECONDS: i64 = 1;

/// Upper bound on releasing the lease at shutdown. Past it the lease simply expires on
/// its own; holding up a SIGTERM longer than a kubelet's patience gains nothing.
pub const MAX_RELEASE_TIME: Duration = Duration::from_secs(5);

/// Reads and writes in one attempt: a 409 (another replica wrote first) or a missing
/// namespace costs one more round, and a record that keeps changing under us is left
/// to the next retry.
const MAX_ROUNDS_PER_ATTEMPT: usize = 3;

/// How to elect: which Lease, who we are, and the timings (client-go's names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderConfig {
    pub namespace: String,
    pub lease_name: String,
    /// Unique per process: see [`default_identity`].
    pub identity: String,
    /// How long followers wait, after they last saw the record change, before taking
    /// over. Written to the Lease rounded up to whole seconds.
    pub lease_duration: Duration,
    /// A leader that has not renewed for this long stops leading. Shorter than
    /// `lease_duration` (the configuration checks it).
    pub renew_deadline: Duration,
    /// Time between attempts, for leaders (renew) and followers (try to acquire).
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// The election the configuration file and `--leader-elect` describe, as `identity`.
    pub fn from_config(config: &LeaderElectionConfig, identity: String) -> LeaderConfig {
        LeaderConfig {
            namespace: config.namespace.clone(),
            lease_name: config.lease_name.clone(),
            identity,
            lease_duration: config.lease_duration,
            renew_deadline: config.renew_deadline,
            retry_period: config.retry_period,
        }
    }
}

/// An identity for this process: `POD_NAME` (the Helm chart sets it from the downward
/// API), else the hostname, plus a random suffix. The suffix is what client-go adds
/// too: two processes sharing a hostname (hostNetwork pods, a restarted container
/// whose predecessor still holds the lease) must never both believe they are the
/// holder.
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .or_else(hostname)
        .unwrap_or_else(|| "tether".to_string());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{base}_{}", &suffix[..8])
}

fn hostname() -> Option<String> {
    let from_env = std::env::var("HOSTNAME").ok();
    let from_kernel = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    from_env
        .or_else(from_kernel)
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
}

/// What one replica knows about leadership at a moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct State {
    known: bool,
    leader: bool,
    holder: Option<String>,
}

/// A cheap, cloneable view of leadership, updated by the [`Elector`].
#[derive(Debug, Clone)]
pub struct Leadership {
    state: watch::Receiver<State>,
}

impl Leadership {
    /// Whether this replica may write to the cluster now.
    pub fn is_leader(&self) -> bool {
        self.state.borrow().leader
    }

    /// Whether the first attempt to acquire or observe the lease has completed (for
    /// /readyz): until then, this replica cannot say who leads. It stays false while
    /// every attempt fails (the API server unreachable, no RBAC rights on Leases); the
    /// log says why.
    pub fn is_known(&self) -> bool {
        self.state.borrow().known
    }

    /// Who holds the lease, as last observed (this replica's identity when it leads).
    pub fn holder(&self) -> Option<String> {
        self.state.borrow().holder.clone()
    }

    /// Resolves on the next change of leadership, holder or knowledge. Once the
    /// elector is gone nothing can change any more, and this never resolves.
    pub async fn changed(&mut self) {
        if self.state.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Runs `work` while this replica leads: None, with `work` dropped (mid-request
    /// if need be), as soon as it stops leading. A pass may take longer than the
    /// margin between the renew deadline and the lease; without this, a leader that
    /// stepped down would keep writing beside its successor until the pass ended.
    pub async fn while_leading<F: Future>(&self, work: F) -> Option<F::Output> {
        let mut watched = self.clone();
        let lost = async move {
            while watched.is_leader() {
                watched.changed().await;
            }
        };
        // Checked first, so a replica that does not lead never starts the work.
        tokio::select! {
            biased;
            () = lost => None,
            output = work => Some(output),
        }
    }

    /// Always the leader: a single replica without `--leader-elect`.
    pub fn always() -> Leadership {
        let (_, state) = watch::channel(State {
            known: true,
            leader: true,
            holder: None,
        });
        Leadership { state }
    }
}

/// A leadership that outlives any one elector: a shard's, held by successive electors
/// as the shard comes and goes (`reconcile::shard`). Workers keep one [`Leadership`]
/// of it for their whole life; with no elector seated, it says "not leading" and who
/// was last seen holding the lease.
#[derive(Debug, Clone)]
pub struct Seat {
    state: Arc<watch::Sender<State>>,
}

impl Seat {
    /// Not leading, and already known: a shard nobody here holds is a fact, not a wait.
    pub fn new() -> Seat {
        let (sender, _) = watch::channel(State {
            known: true,
            leader: false,
            holder: None,
        });
        Seat {
            state: Arc::new(sender),
        }
    }

    pub fn leadership(&self) -> Leadership {
        Leadership {
            state: self.state.subscribe(),
        }
    }

    /// Stops leading at once, whatever the elector seated here does next (it is being
    /// dropped): the shards of a replica that goes away stop writing first.
    pub fn step_down(&self, why: &str) {
        step_down(&self.state, why);
    }

    /// Records who holds the lease while no elector of ours is seated. Never claims
    /// leadership, and never touches a seat whose elector leads.
    pub fn observe_holder(&self, holder: Option<String>) {
        self.state.send_if_modified(|state| {
            if state.leader || state.holder == holder {
                return false;
            }
            state.holder = holder;
            true
        });
    }
}

impl Default for Seat {
    fn default() -> Self {
        Seat::new()
    }
}

/// The election as a background task. [`Elector::release`] stops it cleanly; dropping
/// it without `release` stops it as a crash would: this replica stops leading at once,
/// and the lease is left to expire.
pub struct Elector {
    state: Arc<watch::Sender<State>>,
    stop: CancellationToken,
    /// Cancelled before `stop` by [`Elector::release`]: a stop without it is a crash,
    /// after which the task must not write the lease again.
    let_go: CancellationToken,
    task: Option<JoinHandle<()>>,
    release_time: Duration,
}

impl Elector {
    /// Starts electing. Must be called within a Tokio runtime.
    pub fn spawn(cluster: Arc<Cluster>, config: LeaderConfig) -> (Elector, Leadership) {
        let (sender, receiver) = watch::channel(State::default());
        let elector = Elector::spawn_into(cluster, config, Arc::new(sender), None);
        (elector, Leadership { state: receiver })
    }

    /// Starts electing for `seat`: its leadership follows this elector until it is
    /// released or dropped. `observed` is the Lease as the caller has watched it so
    /// far: an expiry it has already timed is not waited out a second time.
    pub fn spawn_seated(
        cluster: Arc<Cluster>,
        config: LeaderConfig,
        seat: &Seat,
        observed: Option<Observation>,
    ) -> Elector {
        Elector::spawn_into(cluster, config, seat.state.clone(), observed)
    }

    fn spawn_into(
        cluster: Arc<Cluster>,
        config: LeaderConfig,
        state: Arc<watch::Sender<State>>,
        observed: Option<Observation>,
    ) -> Elector {
        let stop = CancellationToken::new();
        let let_go = CancellationToken::new();
        let release_time = config.renew_deadline.min(MAX_RELEASE_TIME);
        let runner = Runner {
            cluster,
            config,
            state: state.clone(),
            stop: stop.clone(),
            let_go: let_go.clone(),
            kind: None,
            observed,
            lease: None,
            last_renew: None,
        };
        let task = tokio::spawn(runner.run());
        Elector {
            state,
            stop,
            let_go,
            task: Some(task),
            release_time,
        }
    }

    /// Another view of this elector's leadership.
    pub fn leadership(&self) -> Leadership {
        Leadership {
            state: self.state.subscribe(),
        }
    }

    /// Stops: steps down at once, releases the lease (no holder, a one-second duration)
    /// so a follower acquires it at its next retry, and waits for the task. Bounded by
    /// `min(renew_deadline, MAX_RELEASE_TIME)` plus the current request's cut-off.
    pub async fn release(mut self) {
        // Cancel first, then step down: the task checks the token under the same lock
        // before it claims leadership, so it cannot overwrite this step-down.
        self.let_go.cancel();
        self.stop.cancel();
        step_down(&self.state, "stopping");
        if let Some(task) = self.task.take() {
            join_within(task, self.release_time * 2, "the lease").await;
        }
    }
}

/// Waits for a releasing task at most `bound`: past it the task is aborted, and what
/// it held simply expires (a SIGTERM is not held up beyond a kubelet's patience).
pub(super) async fn join_within(mut task: JoinHandle<()>, bound: Duration, held: &str) {
    if tokio::time::timeout(bound, &mut task).await.is_err() {
        tracing::warn!("releasing {held} took longer than {bound:?}; left to expire instead");
        task.abort();
    }
}

impl Drop for Elector {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            // `stop` without `let_go`: the task may be mid-poll on another worker, and
            // would otherwise reach its release (handing the request to the connection
            // task) before the abort lands, ending the lease early.
            self.stop.cancel();
            task.abort();
            step_down(&self.state, "the elector was dropped");
        }
    }
}

fn step_down(state: &watch::Sender<State>, why: &str) {
    state.send_if_modified(|state| {
        if !state.leader && state.holder.is_none() {
            return false;
        }
        if state.leader {
            tracing::warn!(reason = why, "lost leadership");
        }
        state.leader = false;
        state.holder = None;
        true
    });
}

/// The part of a Lease's spec that leader election reads and writes (client-go's
/// `LeaderElectionRecord`). Two records are the same observation when these are equal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseRecord {
    /// None when the lease is held by nobody (absent or empty `holderIdentity`).
    pub holder: Option<String>,
    pub lease_duration_seconds: Option<i64>,
    pub acquire_time: Option<String>,
    pub renew_time: Option<String>,
    pub transitions: i64,
}

impl LeaseRecord {
    /// Reads the record from a Lease object.
    pub fn from_lease(lease: &Value) -> LeaseRecord {
        let spec = lease.get("spec");
        let text = |field: &str| {
            spec.and_then(|s| s.get(field))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let number = |field: &str| spec.and_then(|s| s.get(field)).and_then(Value::as_i64);
        LeaseRecord {
            holder: text("holderIdentity"),
            lease_duration_seconds: number("leaseDurationSeconds"),
            acquire_time: text("acquireTime"),
            renew_time: text("renewTime"),
            transitions: number("leaseTransitions").unwrap_or(0),
        }
    }

    /// Writes the record into a Lease spec, keeping the fields it does not own
    /// (`preferredHolder`, `strategy`).
    pub fn write_to(&self, spec: &mut Map<String, Value>) {
        let mut set = |field: &str, value: Option<Value>| match value {
            Some(value) => {
                spec.insert(field.to_string(), value);
            }
            None => {
                spec.remove(field);
            }
        };
        set("holderIdentity", self.holder.clone().map(Value::from));
        set(
            "leaseDurationSeconds",
            self.lease_duration_seconds.map(Value::from),
        );
        set("acquireTime", self.acquire_time.clone().map(Value::from));
        set("renewTime", self.renew_time.clone().map(Value::from));
        set("leaseTransitions", Some(Value::from(self.transitions)));
    }
}

/// A record, and when this process first saw it as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub record: LeaseRecord,
    pub since: Instant,
}

/// Folds a fresh read into what was observed: the clock restarts only when the record
/// changed. A holder that renews moves `renewTime`, so followers keep seeing changes; a
/// holder that died leaves the record still, and the clock runs out.
pub fn observe(previous: Option<&Observation>, record: LeaseRecord, now: Instant) -> Observation {
    match previous {
        Some(previous) if previous.record == record => previous.clone(),
        _ => Observation { record, since: now },
    }
}

/// What to do about the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No Lease exists: create it, holding it.
    Create,
    /// Held by nobody, or expired: take it over (a new holder: one more transition).
    Acquire,
    /// This replica holds it: renew it.
    Renew,
    /// Someone else holds it and it has not expired: wait, at the latest until `expires`.
    Follow { holder: String, expires: Instant },
}

/// client-go's `tryAcquireOrRenew`, as a pure function. `observed` is None when the
/// Lease does not exist; `default_duration` stands in for a record without a valid
/// `leaseDurationSeconds`.
pub fn decide(
    observed: Option<&Observation>,
    identity: &str,
    default_duration: Duration,
    now: Instant,
) -> Decision {
    let Some(observed) = observed else {
        return Decision::Create;
    };
    let Some(holder) = &observed.record.holder else {
        return Decision::Acquire;
    };
    if holder == identity {
        return Decision::Renew;
    }
    let duration = observed
        .record
        .lease_duration_seconds
        .filter(|seconds| *seconds > 0)
        .map(|seconds| Duration::from_secs(seconds.unsigned_abs()))
        .unwrap_or(default_duration);
    let expires = observed.since + duration;
    if expires <= now {
        Decision::Acquire
    } else {
        Decision::Follow {
            holder: holder.clone(),
            expires,
        }
    }
}

/// The record to write for a decision, or None when there is nothing to write.
/// `now` is the wall clock, for the timestamps other tools display.
pub fn next_record(
    decision: &Decision,
    previous: Option<&LeaseRecord>,
    identity: &str,
    lease_duration: Duration,
    now: DateTime<Utc>,
) -> Option<LeaseRecord> {
    let stamp = micro_time(now);
    let mut record = LeaseRecord {
        holder: Some(identity.to_string()),
        lease_duration_seconds: Some(lease_duration_seconds(lease_duration)),
        acquire_time: Some(stamp.clone()),
        renew_time: Some(stamp),
        transitions: 0,
    };
    match decision {
        Decision::Follow { .. } => return None,
        Decision::Create => {}
        Decision::Acquire => {
            record.transitions = previous.map_or(0, |p| p.transitions + 1);
        }
        Decision::Renew => {
            if let Some(previous) = previous {
                record.transitions = previous.transitions;
                record.acquire_time = previous.acquire_time.clone().or(record.acquire_time);
            }
        }
    }
    Some(record)
}

/// The record a leader writes when it lets go: no holder and a one-second lease, so a
/// follower acquires at its next retry (client-go's `release`).
pub fn released_record(previous: &LeaseRecord, now: DateTime<Utc>) -> LeaseRecord {
    let stamp = micro_time(now);
    LeaseRecord {
        holder: None,
        lease_duration_seconds: Some(RELEASED_LEASE_DURATION_SECONDS),
        acquire_time: Some(stamp.clone()),
        renew_time: Some(stamp),
        transitions: previous.transitions,
    }
}

/// `leaseDurationSeconds` for a duration: rounded up, at least one. client-go truncates,
/// which would let followers take over before a leader with a fractional lease and a
/// renew deadline between the two values had stepped down.
pub fn lease_duration_seconds(duration: Duration) -> i64 {
    let seconds = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    i64::try_from(seconds.max(1)).unwrap_or(i64::MAX)
}

/// A `metav1.MicroTime`: RFC 3339 in UTC with exactly six fractional digits.
pub fn micro_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Why an attempt failed. Every variant is logged and retried at the next period;
/// `retryable` says whether waiting can help or a person must act (RBAC, a cluster
/// without Leases).
#[derive(Debug, thiserror::Error)]
enum ElectError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("the cluster serves no {0}")]
    NotServed(&'static str),
    #[error("the Lease changed under every write of this attempt")]
    Contended,
}

impl ElectError {
    fn retryable(&self) -> bool {
        match self {
            ElectError::Cluster(err) => err.is_retryable(),
            ElectError::NotServed(_) => false,
            ElectError::Contended => true,
        }
    }
}

/// How an attempt ended.
enum Outcome {
    Leading,
    Following(String),
}

struct Runner {
    cluster: Arc<Cluster>,
    config: LeaderConfig,
    state: Arc<watch::Sender<State>>,
    stop: CancellationToken,
    let_go: CancellationToken,
    kind: Option<Resolved>,
    observed: Option<Observation>,
    /// The Lease as last read or written: its resourceVersion makes writes optimistic.
    lease: Option<Value>,
    /// When the last successful acquire or renew started; Some while leading.
    last_renew: Option<Instant>,
}

impl Runner {
    async fn run(mut self) {
        let stop = self.stop.clone();
        loop {
            let started = Instant::now();
            // A leader's attempt may not outlive its renew deadline; a follower's is cut
            // off after as long, so one hung request cannot stall the election.
            let deadline = self
                .renew_deadline()
                .unwrap_or(started + self.config.renew_deadline);
            let result = tokio::select! {
                _ = stop.cancelled() => break,
                result = tokio::time::timeout_at(deadline, self.attempt()) => result,
            };
            match result {
                Ok(Ok(Outcome::Leading)) => {
                    self.last_renew = Some(started);
                    self.publish(true, Some(self.config.identity.clone()));
                }
                Ok(Ok(Outcome::Following(holder))) => {
                    self.last_renew = None;
                    self.publish(false, Some(holder));
                }
                Ok(Err(err)) if err.retryable() => {
                    tracing::warn!(lease = %self.config.lease_name, error = %err, "leader election attempt failed");
                }
                Ok(Err(err)) => {
                    tracing::error!(lease = %self.config.lease_name, error = %err, "leader election cannot proceed until this is fixed");
                }
                Err(_) => {
                    tracing::warn!(lease = %self.config.lease_name, "leader election attempt timed out");
                }
            }
            self.check_renew_deadline();
            // Wake at the deadline too: stepping down must not wait for the next retry.
            let next = started + self.config.retry_period;
            let wake = self.renew_deadline().map_or(next, |d| d.min(next));
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep_until(wake) => {}
            }
            self.check_renew_deadline();
        }
        if self.let_go.is_cancelled() {
            self.release().await;
        }
    }

    fn renew_deadline(&self) -> Option<Instant> {
        self.last_renew.map(|at| at + self.config.renew_deadline)
    }

    fn check_renew_deadline(&mut self) {
        if self.renew_deadline().is_some_and(|d| d <= Instant::now()) {
            self.last_renew = None;
            let holder = self.observed.as_ref().and_then(|o| o.record.holder.clone());
            self.state.send_if_modified(|state| {
                let changed = state.leader;
                if changed {
                    tracing::warn!(
                        renew_deadline = ?self.config.renew_deadline,
                        "lost leadership: the lease could not be renewed in time"
                    );
                }
                state.leader = false;
                state.holder = holder;
                changed
            });
        }
    }

    /// Publishes what an attempt found, logging transitions. After `release` began,
    /// leadership is never claimed again (checked under the channel's lock).
    fn publish(&self, leader: bool, holder: Option<String>) {
        let stop = &self.stop;
        self.state.send_if_modified(|state| {
            if stop.is_cancelled() {
                return false;
            }
            let next = State {
                known: true,
                leader,
                holder,
            };
            if *state == next {
                return false;
            }
            if leader && !state.leader {
                tracing::info!(identity = %self.config.identity, "became leader");
            } else if !leader && state.leader {
                tracing::warn!(identity = %self.config.identity, "lost leadership");
            }
            if !leader && next.holder != state.holder {
                if let Some(holder) = &next.holder {
                    tracing::info!(leader = %holder, "leader is {holder}");
                }
            }
            *state = next;
            true
        });
    }

    /// One client-go `tryAcquireOrRenew`: read, decide, write.
    async fn attempt(&mut self) -> Result<Outcome, ElectError> {
        let kind = self.lease_kind().await?;
        let namespace = self.config.namespace.clone();
        for _ in 0..MAX_ROUNDS_PER_ATTEMPT {
            let live = self
                .cluster
                .get(&kind, Some(&namespace), &self.config.lease_name)
                .await?;
            self.observed = live.as_ref().map(|lease| {
                observe(
                    self.observed.as_ref(),
                    LeaseRecord::from_lease(lease),
                    Instant::now(),
                )
            });
            self.lease = live;
            let decision = decide(
                self.observed.as_ref(),
                &self.config.identity,
                self.config.lease_duration,
                Instant::now(),
            );
            if let Decision::Follow { holder, .. } = decision {
                return Ok(Outcome::Following(holder));
            }
            let previous = self.observed.as_ref().map(|o| &o.record);
            // Every decision but Follow (handled above) has a record to write.
            let Some(record) = next_record(
                &decision,
                previous,
                &self.config.identity,
                self.config.lease_duration,
                Utc::now(),
            ) else {
                continue;
            };
            let written = match &self.lease {
                None => self.create(&kind, &record).await,
                Some(lease) => {
                    self.cluster
                        .replace(&kind, &with_record(lease, &record))
                        .await
                }
            };
            match written {
                Ok(lease) => {
                    // client-go's observedTime: the moment of our own successful write.
                    self.observed = Some(Observation {
                        record: LeaseRecord::from_lease(&lease),
                        since: Instant::now(),
                    });
                    self.lease = Some(lease);
                    return Ok(Outcome::Leading);
                }
                // Another replica created or updated it first: read again and decide.
                Err(ClusterError::Api { code: 409, .. }) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(ElectError::Contended)
    }

    /// Creates the Lease, and its namespace when that is what is missing.
    async fn create(&self, kind: &Resolved, record: &LeaseRecord) -> Result<Value, ClusterError> {
        let mut spec = Map::new();
        record.write_to(&mut spec);
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.lease_name, "namespace": self.config.namespace},
            "spec": spec,
        });
        match self.cluster.create(kind, &lease).await {
            Err(err) if err.is_not_found() => {
                self.create_namespace().await?;
                self.cluster.create(kind, &lease).await
            }
            other => other,
        }
    }

    async fn create_namespace(&self) -> Result<(), ClusterError> {
        let gvk = GroupVersionKind::gvk("", "v1", "Namespace");
        let kind = self
            .cluster
            .resolve(&gvk)
            .await?
            .ok_or_else(|| ClusterError::Config("the cluster serves no Namespaces".into()))?;
        let namespace = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": self.config.namespace,
                "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
            },
        });
        match self.cluster.create(&kind, &namespace).await {
            Ok(_) => {
                tracing::info!(namespace = %self.config.namespace, "created the namespace of the leader Lease");
                Ok(())
            }
            Err(ClusterError::Api { code: 409, .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn lease_kind(&mut self) -> Result<Resolved, ElectError> {
        if let Some(kind) = &self.kind {
            return Ok(kind.clone());
        }
        let gvk = GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease");
        let kind = self
            .cluster
            .resolve(&gvk)
            .await?
            .ok_or(ElectError::NotServed("coordination.k8s.io/v1 Leases"))?;
        self.kind = Some(kind.clone());
        Ok(kind)
    }

    /// Lets go of the lease if the last record seen names this replica. Optimistic like
    /// every write: if the lease changed since, the 409 means it is not ours to release.
    async fn release(&mut self) {
        self.last_renew = None;
        step_down(&self.state, "stopping");
        let Some(kind) = self.kind.clone() else {
            return;
        };
        let bound = self.config.renew_deadline.min(MAX_RELEASE_TIME);
        let lease = &self.config.lease_name;
        match tokio::time::timeout(bound, self.let_go(&kind)).await {
            Ok(Ok(true)) => tracing::info!(lease = %lease, "released the lease"),
            Ok(Ok(false)) => {
                tracing::debug!(lease = %lease, "the lease is not ours; nothing to release")
            }
            Ok(Err(ClusterError::Api { code: 409, .. })) => {
                tracing::info!(lease = %lease, "the lease changed hands already; nothing to release")
            }
            Ok(Err(err)) => {
                tracing::warn!(lease = %lease, error = %err, "cannot release the lease; it will expire instead")
            }
            Err(_) => {
                tracing::warn!(lease = %lease, "releasing the lease timed out; it will expire instead")
            }
        }
    }

    /// Writes the released record while the Lease names this replica: over the Lease as
    /// last seen, else (not seen, seen held by another, or a 409) over a fresh read. A
    /// stop can cut an attempt short after its write landed, leaving the copy here
    /// stale; without the second look the lease would be left to expire. True when
    /// released, false when it is not ours.
    async fn let_go(&self, kind: &Resolved) -> Result<bool, ClusterError> {
        let identity = self.config.identity.as_str();
        let ours =
            |lease: &Value| LeaseRecord::from_lease(lease).holder.as_deref() == Some(identity);
        let write = |lease: &Value| {
            let record = LeaseRecord::from_lease(lease);
            with_record(lease, &released_record(&record, Utc::now()))
        };
        if let Some(lease) = self.lease.as_ref().filter(|l| ours(l)) {
            match self.cluster.replace(kind, &write(lease)).await {
                Ok(_) => return Ok(true),
                Err(ClusterError::Api { code: 409, .. }) => {}
                Err(err) => return Err(err),
            }
        }
        let namespace = self.config.namespace.as_str();
        match self
            .cluster
            .get(kind, Some(namespace), &self.config.lease_name)
            .await?
        {
            Some(lease) if ours(&lease) => {
                self.cluster.replace(kind, &write(&lease)).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The Lease with a new record, its metadata (resourceVersion included) kept.
fn with_record(lease: &Value, record: &LeaseRecord) -> Value {
    let mut lease = lease.clone();
    if let Some(object) = lease.as_object_mut() {
        let spec = object
            .entry("spec")
            .or_insert_with(|| Value::Object(Map::new()));
        if !spec.is_object() {
            *spec = Value::Object(Map::new());
        }
        if let Some(spec) = spec.as_object_mut() {
            record.write_to(spec);
        }
    }
    lease
}

#[cfg(test)]
mod tests;
