//! The task around the pure core: it reads the Lease, writes the next record and waits,
//! stepping down when it cannot renew in time.

use super::*;

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

pub(super) struct Runner {
    pub(super) cluster: Arc<Cluster>,
    pub(super) config: LeaderConfig,
    pub(super) state: Arc<watch::Sender<State>>,
    pub(super) stop: CancellationToken,
    pub(super) let_go: CancellationToken,
    pub(super) kind: Option<Resolved>,
    pub(super) observed: Option<Observation>,
    /// The Lease as last read or written: its resourceVersion makes writes optimistic.
    pub(super) lease: Option<Value>,
    /// When the last successful acquire or renew started; Some while leading.
    pub(super) last_renew: Option<Instant>,
}

impl Runner {
    pub(super) async fn run(mut self) {
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
            .ok_or_else(|| ClusterError::NotServed("Namespaces"))?;
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
pub(super) fn with_record(lease: &Value, record: &LeaseRecord) -> Value {
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
