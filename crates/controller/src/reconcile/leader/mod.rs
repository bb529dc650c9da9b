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

mod lease;
mod runner;

pub use lease::*;
use runner::Runner;

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

#[cfg(test)]
mod tests;
