//! Shards: with `shards: N`, the apps of `tether serve` are split across its replicas,
//! and each app is written by the one replica holding its shard's Lease. It is the
//! leader's rule (only the holder writes; a pass stops writing the moment its lease is
//! lost) applied per shard, with the Lease logic of [`super::leader`] reused as is.
//!
//! How a shard finds its replica:
//! - **Assignment**: an app's shard is FNV-1a (64 bits) of its identity (`<namespace>.<name>`
//!   for App objects, the name for the file's apps) modulo N: the same number on every
//!   build and platform, so replicas of different versions agree ([`shard_of`]).
//! - **Membership**: each replica renews a Lease of its own, `tether-member-<identity>`
//!   (labelled `tether.dev/role: member`, with its status URL in an annotation). The
//!   live members are those whose member Lease tether wrote ([`member`]) and which
//!   changed within its lease duration, judged on the local clock as the elector judges
//!   the leader's. One left unchanged for [`MEMBER_GC_LEASES`] durations is deleted.
//! - **Balance**: from the live members every replica computes the same assignment,
//!   rendezvous hashing (highest random weight) capped at a fair share: each member gets
//!   `⌊N/M⌋` or `⌈N/M⌉` shards ([`assign`]). A replica starting first takes every shard,
//!   and hands the others' shares over as they join.
//! - **Ownership**: a replica runs an elector for `tether-shard-<i>` (in the leader
//!   election's namespace, with its timings) while shard i is assigned to it. Another
//!   replica's lease is taken only once it expired, as for the leader. A shard whose
//!   Lease stays unheld or expired a full lease duration beyond that is an orphan, and
//!   any replica takes it ([`orphaned`]); it is handed over again to its assignee.
//! - **Handover**: a replica holding a shard no longer assigned to it releases it: its
//!   seat stops leading first (the passes in flight drop their writes), then the Lease is
//!   written free with a one-second duration, and the assignee takes it at its next retry.
//!   A replica that dies leaves its Leases to expire: its shards move within the lease
//!   duration plus a retry period, when its member Lease expires with them.
//!
//! The choices ([`shard_of`], [`assign`], [`step`], [`orphaned`]) are pure and unit-tested;
//! the task around them reads the Leases once per retry period, renews its own member
//! Lease, and starts or releases electors.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use kube::core::GroupVersionKind;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::leader::{
    Decision, Elector, LeaderConfig, Leadership, LeaseRecord, MAX_RELEASE_TIME, Observation, Seat,
    decide, held_for, join_within, next_record, observe,
};
use member::text_at;
use tether_core::cluster::{Cluster, ClusterError, Resolved};
use tether_core::metrics::METRICS;
use tether_schema::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

pub(crate) mod member;

/// Shard `i`'s Lease is named this, then `i`.
pub const SHARD_LEASE_PREFIX: &str = "tether-shard-";

/// A replica's membership Lease is named this, then its identity made a DNS name.
pub const MEMBER_LEASE_PREFIX: &str = "tether-member-";

/// The label of membership Leases (with `app.kubernetes.io/managed-by: tether`).
pub const ROLE_LABEL: &str = "tether.dev/role";
/// See [`ROLE_LABEL`].
pub const MEMBER_ROLE: &str = "member";

/// Where a member answers the status API, for peers forwarding to it.
pub const STATUS_URL_ANNOTATION: &str = "tether.dev/status-url";

/// A member Lease unchanged for this many lease durations belongs to a replica that
/// will not come back (its identity carries a random suffix): a live peer deletes it.
/// Several durations, so a replica paused by its node for a moment is not swept.
pub const MEMBER_GC_LEASES: u32 = 4;

/// FNV-1a, 64 bits (offset basis and prime from the FNV reference): written out so the
/// shard of an app never depends on the standard library's hasher, which may change
/// between Rust releases.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// The shard of the app with identity `app`, among `shards` (at least one).
pub fn shard_of(app: &str, shards: u32) -> u32 {
    let shards = u64::from(shards.max(1));
    // The remainder is below `shards`, a u32.
    u32::try_from(fnv1a64(app.as_bytes()) % shards).unwrap_or(0)
}

/// The rendezvous weight of `member` for `shard`. FNV's low bits mix poorly for inputs
/// that differ only at the end, so the hash goes through SplitMix64's finalizer.
pub fn weight(shard: u32, member: &str) -> u64 {
    let mut key = Vec::with_capacity(member.len() + 5);
    key.extend_from_slice(&shard.to_be_bytes());
    key.push(0);
    key.extend_from_slice(member.as_bytes());
    let mut z = fnv1a64(&key);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Each member's fair share of `shards`: `⌊N/M⌋`, one more for the first `N mod M`
/// members in the order of their own hash (the same order on every replica).
pub fn fair_shares(shards: u32, members: &[String]) -> BTreeMap<String, u32> {
    let mut ordered: Vec<&String> = members.iter().collect();
    ordered.sort_by(|a, b| {
        let (ha, hb) = (fnv1a64(a.as_bytes()), fnv1a64(b.as_bytes()));
        hb.cmp(&ha).then_with(|| a.cmp(b))
    });
    ordered.dedup();
    let count = u32::try_from(ordered.len()).unwrap_or(u32::MAX).max(1);
    let (base, extra) = (shards / count, shards % count);
    ordered
        .into_iter()
        .enumerate()
        .map(|(i, member)| {
            let bonus = u32::from(u32::try_from(i).unwrap_or(u32::MAX) < extra);
            (member.clone(), base + bonus)
        })
        .collect()
}

/// Which member each shard goes to: rendezvous hashing capped at the fair share.
/// Every (shard, member) pair is taken in order of weight, highest first, and given
/// when the shard is still free and the member under its share. Every shard is given
/// (a free shard and a member under its share would have met), every member gets
/// exactly its share, and a member joining or leaving moves few shards besides its own.
/// None for every shard when there are no members.
pub fn assign(shards: u32, members: &[String]) -> Vec<Option<String>> {
    let mut left = fair_shares(shards, members);
    let mut pairs: Vec<(u64, u32, String)> = (0..shards)
        .flat_map(|shard| {
            left.keys()
                .map(move |m| (weight(shard, m), shard, m.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut owners: Vec<Option<String>> = vec![None; shards as usize];
    for (_, shard, member) in pairs {
        let slot = &mut owners[shard as usize];
        if slot.is_some() {
            continue;
        }
        if let Some(room) = left.get_mut(&member).filter(|n| **n > 0) {
            *room -= 1;
            *slot = Some(member);
        }
    }
    owners
}

/// What a replica does about one shard in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Holding it and it is ours: keep the elector running (it renews).
    Keep,
    /// Ours (or an orphan) and not held here: start an elector (it waits for expiry).
    Acquire,
    /// Held here and assigned elsewhere: stop writing, then free the Lease.
    Release,
    /// Someone else's: nothing to do.
    Wait,
}

/// The handover rule, as a pure function of what this replica knows.
pub fn step(holding: bool, assigned_here: bool, orphaned: bool) -> Step {
    match (holding, assigned_here) {
        (true, true) => Step::Keep,
        (true, false) => Step::Release,
        (false, true) => Step::Acquire,
        (false, false) if orphaned => Step::Acquire,
        (false, false) => Step::Wait,
    }
}

/// Whether a shard's Lease has been left alone long enough for anyone to take it: absent
/// or unheld for a full lease duration, or held and not renewed for its own duration
/// (capped at ours: [`held_for`]) plus a full lease duration. `observed` is the Lease as last seen (an absent Lease is
/// observed as the empty record), with when it was first seen so.
pub fn orphaned(observed: &Observation, lease_duration: Duration, now: Instant) -> bool {
    let quiet = now.saturating_duration_since(observed.since);
    match &observed.record.holder {
        None => quiet >= lease_duration,
        Some(_) => quiet >= held_for(&observed.record, lease_duration) + lease_duration,
    }
}

/// Whether a member's Lease is fresh: changed within its lease duration, or ours.
pub fn is_live(observed: &Observation, lease_duration: Duration, now: Instant) -> bool {
    // No identity is empty, so `decide` answers Follow exactly while it is fresh.
    matches!(
        decide(Some(observed), "", lease_duration, now),
        Decision::Follow { .. }
    )
}

/// The name of a member's Lease: its identity as a DNS-1123 subdomain (lowercase;
/// anything else but digits, '-' and '.' becomes '-'), at most 253 characters.
pub fn member_lease_name(identity: &str) -> String {
    let cleaned: String = identity
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect();
    let mut name = format!("{MEMBER_LEASE_PREFIX}{cleaned}");
    name.truncate(253);
    while name.ends_with(['-', '.']) {
        name.pop();
    }
    name
}

/// The name of shard `shard`'s Lease.
pub fn shard_lease_name(shard: u32) -> String {
    format!("{SHARD_LEASE_PREFIX}{shard}")
}

/// How to shard: how many shards, who we are, where the Leases live and their timings
/// (`lease_name` unused: each shard has its own), and the URL peers reach us at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    pub shards: u32,
    pub election: LeaderConfig,
    pub status_url: Option<String>,
}

/// Who holds what, as the last round saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// The first round finished: the holders below are known.
    pub known: bool,
    /// This replica's identity.
    pub me: String,
    /// Each shard's holder (None: unheld or expired).
    pub holders: Vec<Option<String>>,
    /// The live members and their status URLs.
    pub members: BTreeMap<String, Option<String>>,
}

/// Who answers for an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub shard: u32,
    /// The replica holding the shard, if any.
    pub holder: Option<String>,
    /// Where it answers the status API, when it published that.
    pub url: Option<String>,
    /// Whether that is this replica.
    pub local: bool,
}

/// Which leadership fences each app's writes: one for all (a single replica, or the
/// leader of `--leader-elect`), or its shard's.
#[derive(Debug, Clone)]
pub struct Ownership {
    whole: Leadership,
    shards: Option<Arc<Sharded>>,
}

#[derive(Debug)]
struct Sharded {
    seats: Vec<Leadership>,
    view: watch::Receiver<View>,
}

impl Ownership {
    /// One leadership for every app.
    pub fn whole(leadership: Leadership) -> Ownership {
        Ownership {
            whole: leadership,
            shards: None,
        }
    }

    /// The leadership that fences `app`'s writes.
    pub fn for_app(&self, app: &str) -> Leadership {
        match &self.shards {
            None => self.whole.clone(),
            Some(sharded) => {
                let shard = shard_of(app, sharded.count());
                sharded.seats[shard as usize].clone()
            }
        }
    }

    /// Whether this replica may write for `app` now.
    pub fn is_writer(&self, app: &str) -> bool {
        match &self.shards {
            None => self.whole.is_leader(),
            Some(sharded) => sharded.seats[shard_of(app, sharded.count()) as usize].is_leader(),
        }
    }

    /// The number of shards (1 without sharding).
    pub fn shards(&self) -> u32 {
        self.shards.as_ref().map_or(1, |s| s.count())
    }

    /// Each shard's leadership, by shard (whether this replica holds it, as it
    /// changes); None without sharding.
    pub fn shard_leaderships(&self) -> Option<Vec<Leadership>> {
        self.shards.as_ref().map(|s| s.seats.clone())
    }

    /// Whether this replica knows who may write (for /readyz).
    pub fn is_known(&self) -> bool {
        match &self.shards {
            None => self.whole.is_known(),
            Some(sharded) => sharded.view.borrow().known,
        }
    }

    /// Who answers for `app`; None without sharding (this replica answers for all).
    pub fn owner(&self, app: &str) -> Option<Owner> {
        let sharded = self.shards.as_ref()?;
        let shard = shard_of(app, sharded.count());
        let local = sharded.seats[shard as usize].is_leader();
        let view = sharded.view.borrow();
        let holder = if local {
            Some(view.me.clone())
        } else {
            view.holders.get(shard as usize).cloned().flatten()
        };
        let url = holder
            .as_ref()
            .and_then(|h| view.members.get(h).cloned().flatten());
        Some(Owner {
            shard,
            holder,
            url,
            local,
        })
    }
}

impl Sharded {
    fn count(&self) -> u32 {
        u32::try_from(self.seats.len()).unwrap_or(1)
    }
}

/// The shard manager as a background task. [`Sharding::release`] hands every shard
/// over and leaves the membership; dropping it without `release` is a crash: every
/// seat stops leading at once and the Leases are left to expire.
pub struct Sharding {
    stop: CancellationToken,
    let_go: CancellationToken,
    task: Option<JoinHandle<()>>,
    seats: Arc<Vec<Seat>>,
    bound: Duration,
}

impl Sharding {
    /// Starts the membership and the shards' electors. Must be called within a Tokio
    /// runtime.
    pub fn spawn(cluster: Arc<Cluster>, config: ShardConfig) -> (Sharding, Ownership) {
        let shards = config.shards.max(1);
        let seats: Arc<Vec<Seat>> = Arc::new((0..shards).map(|_| Seat::new()).collect());
        let (view_tx, view_rx) = watch::channel(View {
            me: config.election.identity.clone(),
            holders: vec![None; shards as usize],
            ..View::default()
        });
        let stop = CancellationToken::new();
        let let_go = CancellationToken::new();
        let bound = config.election.renew_deadline.min(MAX_RELEASE_TIME) * 2;
        for shard in 0..shards {
            METRICS.shard_owned(shard, false);
        }
        let manager = Manager {
            cluster,
            config,
            seats: seats.clone(),
            view: view_tx,
            kind: None,
            members: HashMap::new(),
            shard_leases: vec![None; shards as usize],
            electors: HashMap::new(),
            known: false,
            refused: HashMap::new(),
        };
        let task = tokio::spawn(manager.run(stop.clone(), let_go.clone()));
        let ownership = Ownership {
            whole: Leadership::always(),
            shards: Some(Arc::new(Sharded {
                seats: seats.iter().map(Seat::leadership).collect(),
                view: view_rx,
            })),
        };
        let sharding = Sharding {
            stop,
            let_go,
            task: Some(task),
            seats,
            bound,
        };
        (sharding, ownership)
    }

    /// Stops: every shard held is released (its writers stopped first), and the member
    /// Lease deleted so peers rebalance at their next round. Bounded like the leader's
    /// release; past it the Leases simply expire.
    pub async fn release(mut self) {
        self.let_go.cancel();
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            join_within(task, self.bound * 2, "the shards").await;
        }
    }
}

impl Drop for Sharding {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            // As the elector's drop: a crash, never a release.
            self.stop.cancel();
            task.abort();
            for (shard, seat) in (0u32..).zip(self.seats.iter()) {
                seat.step_down("the shard manager was dropped");
                METRICS.shard_owned(shard, false);
            }
        }
    }
}

/// Why a round failed; logged, and tried again at the next retry period.
#[derive(Debug, thiserror::Error)]
enum ShardError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("the cluster serves no coordination.k8s.io/v1 Leases")]
    NotServed,
}

struct Manager {
    cluster: Arc<Cluster>,
    config: ShardConfig,
    seats: Arc<Vec<Seat>>,
    view: watch::Sender<View>,
    kind: Option<Resolved>,
    /// Member Leases by name: the identity they hold, the observation, the URL, the uid.
    members: HashMap<String, Member>,
    /// Each shard's Lease as observed (an absent Lease observed as the empty record).
    shard_leases: Vec<Option<Observation>>,
    /// The electors running here, by shard.
    electors: HashMap<u32, Elector>,
    known: bool,
    /// Member Leases refused as not tether's: see [`member::log_refusal`].
    refused: HashMap<String, String>,
}

struct Member {
    observed: Observation,
    url: Option<String>,
    uid: Option<String>,
}

impl Manager {
    async fn run(mut self, stop: CancellationToken, let_go: CancellationToken) {
        let retry = self.config.election.retry_period;
        let deadline = self.config.election.renew_deadline;
        loop {
            let started = Instant::now();
            let round = tokio::select! {
                _ = stop.cancelled() => break,
                round = tokio::time::timeout(deadline, self.round()) => round,
            };
            match round {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(error = %err, "shard round failed"),
                Err(_) => tracing::warn!("shard round timed out"),
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep_until(started + retry) => {}
            }
        }
        if let_go.is_cancelled() {
            self.leave().await;
        }
    }

    /// One round: read every Lease, renew our membership, decide each shard, publish.
    async fn round(&mut self) -> Result<(), ShardError> {
        let kind = self.lease_kind().await?;
        let namespace = self.config.election.namespace.clone();
        let listed = match self.cluster.list(&kind, Some(&namespace), "").await {
            Ok(listed) => listed,
            // No namespace yet: no Leases either; the member Lease creates it.
            Err(err) if err.is_not_found() => Vec::new(),
            Err(err) => return Err(err.into()),
        };
        let now = Instant::now();
        let own_lease = self.observe_leases(listed, now);
        self.renew_membership(&kind, own_lease).await?;
        self.collect_members(&kind, now).await;
        let live = self.live_members(now);
        self.settle_shards(&live, now).await;
        self.known = true;
        self.publish(&live, now);
        Ok(())
    }

    /// Takes in the Leases listed: the shards' records and the trusted members'
    /// (a member Lease that cannot be trusted is refused, said once). Returns this
    /// replica's own member Lease, if listed.
    fn observe_leases(&mut self, listed: Vec<Value>, now: Instant) -> Option<Value> {
        let own_name = member_lease_name(&self.config.election.identity);
        let mut own_lease = None;
        let mut seen_members = HashMap::new();
        let mut seen_shards: Vec<LeaseRecord> = vec![LeaseRecord::default(); self.seats.len()];
        let names: HashSet<String> = listed
            .iter()
            .filter_map(|l| text_at(l, "/metadata/name"))
            .collect();
        for lease in listed {
            let Some(name) = lease.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            if name == own_name {
                own_lease = Some(lease.clone());
            }
            if let Some(shard) = name
                .strip_prefix(SHARD_LEASE_PREFIX)
                .and_then(|i| i.parse::<usize>().ok())
                .filter(|i| *i < seen_shards.len())
            {
                seen_shards[shard] = LeaseRecord::from_lease(&lease);
            } else if name.starts_with(MEMBER_LEASE_PREFIX) {
                let url = match member::trusted_member(&lease, name) {
                    Ok((_, url)) => url,
                    Err(err) => {
                        member::log_refusal(&mut self.refused, name, &lease, &err);
                        continue;
                    }
                };
                let previous = self.members.get(name).map(|m| &m.observed);
                let member = Member {
                    observed: observe(previous, LeaseRecord::from_lease(&lease), now),
                    url,
                    uid: text_at(&lease, "/metadata/uid"),
                };
                seen_members.insert(name.to_string(), member);
            }
        }
        self.members = seen_members;
        self.refused.retain(|name, _| names.contains(name));
        for (slot, record) in self.shard_leases.iter_mut().zip(seen_shards) {
            *slot = Some(observe(slot.as_ref(), record, now));
        }
        own_lease
    }

    /// The identities of the live members, this replica's included, sorted.
    fn live_members(&self, now: Instant) -> Vec<String> {
        let duration = self.config.election.lease_duration;
        let me = self.config.election.identity.clone();
        let mut live: Vec<String> = self
            .members
            .values()
            .filter(|m| is_live(&m.observed, duration, now))
            .filter_map(|m| m.observed.record.holder.clone())
            .collect();
        if !live.contains(&me) {
            live.push(me.clone());
        }
        live.sort();
        live.dedup();
        live
    }

    /// Acts on each shard's step given the `live` members: an elector started for a
    /// shard assigned here (or orphaned), one let go for a shard assigned elsewhere.
    async fn settle_shards(&mut self, live: &[String], now: Instant) {
        let duration = self.config.election.lease_duration;
        let me = self.config.election.identity.clone();
        let assigned = assign(self.config.shards, live);
        let mut releasing = Vec::new();
        for shard in 0..self.config.shards {
            let index = shard as usize;
            let holding = self.electors.contains_key(&shard);
            let here = assigned[index].as_deref() == Some(me.as_str());
            let orphan = self.shard_leases[index]
                .as_ref()
                .is_some_and(|o| orphaned(o, duration, now));
            match step(holding, here, orphan) {
                Step::Keep | Step::Wait => {}
                Step::Acquire => {
                    if orphan && !here {
                        tracing::info!(shard, "taking over an orphaned shard");
                    }
                    let mut election = self.config.election.clone();
                    election.lease_name = shard_lease_name(shard);
                    // An absent Lease is observed as the empty record: no history to pass.
                    let observed = self.shard_leases[index]
                        .clone()
                        .filter(|o| o.record != LeaseRecord::default());
                    let elector = Elector::spawn_seated(
                        self.cluster.clone(),
                        election,
                        &self.seats[index],
                        observed,
                    );
                    self.electors.insert(shard, elector);
                }
                Step::Release => {
                    if let Some(elector) = self.electors.remove(&shard) {
                        tracing::info!(shard, to = ?assigned[index], "the shard is assigned elsewhere: letting it go");
                        releasing.push(elector.release());
                    }
                }
            }
        }
        futures::future::join_all(releasing).await;
    }

    /// Creates or renews this replica's member Lease (and its namespace, when absent).
    async fn renew_membership(
        &mut self,
        kind: &Resolved,
        current: Option<Value>,
    ) -> Result<(), ShardError> {
        let identity = &self.config.election.identity;
        let duration = self.config.election.lease_duration;
        let name = member_lease_name(identity);
        let previous = current.as_ref().map(LeaseRecord::from_lease);
        let decision = if current.is_some() {
            Decision::Renew
        } else {
            Decision::Create
        };
        let Some(record) =
            next_record(&decision, previous.as_ref(), identity, duration, Utc::now())
        else {
            return Ok(());
        };
        let mut annotations = Map::new();
        if let Some(url) = &self.config.status_url {
            annotations.insert(STATUS_URL_ANNOTATION.into(), Value::from(url.clone()));
        }
        let written = match current {
            Some(mut lease) => {
                if let Some(spec) = lease
                    .as_object_mut()
                    .map(|o| o.entry("spec").or_insert_with(|| json!({})))
                    .and_then(Value::as_object_mut)
                {
                    record.write_to(spec);
                }
                self.cluster.replace(kind, &lease).await
            }
            None => {
                let mut spec = Map::new();
                record.write_to(&mut spec);
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": name,
                        "namespace": self.config.election.namespace,
                        "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, ROLE_LABEL: MEMBER_ROLE},
                        "annotations": annotations,
                    },
                    "spec": spec,
                });
                match self.cluster.create(kind, &lease).await {
                    Err(err) if err.is_not_found() => {
                        self.cluster
                            .ensure_namespace(&self.config.election.namespace)
                            .await?;
                        self.cluster.create(kind, &lease).await
                    }
                    other => other,
                }
            }
        };
        match written {
            Ok(lease) => {
                let observed = Observation {
                    record: LeaseRecord::from_lease(&lease),
                    since: Instant::now(),
                };
                let url = self.config.status_url.clone();
                let uid = text_at(&lease, "/metadata/uid");
                self.members.insert(name, Member { observed, url, uid });
                Ok(())
            }
            // Someone wrote it between our read and write (a GC racing a pause): next round.
            Err(ClusterError::Api { code: 409, .. }) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes member Leases left unchanged for [`MEMBER_GC_LEASES`] lease durations.
    /// Every live peer may try; the uid precondition and a 404 keep it harmless.
    async fn collect_members(&mut self, kind: &Resolved, now: Instant) {
        let after = self.config.election.lease_duration * MEMBER_GC_LEASES;
        let own = member_lease_name(&self.config.election.identity);
        let gone: Vec<(String, Option<String>)> = self
            .members
            .iter()
            .filter(|(name, _)| **name != own)
            .filter(|(_, m)| now.saturating_duration_since(m.observed.since) >= after)
            .map(|(name, m)| (name.clone(), m.uid.clone()))
            .collect();
        for (name, uid) in gone {
            let namespace = self.config.election.namespace.as_str();
            match self
                .cluster
                .delete(kind, Some(namespace), &name, uid.as_deref())
                .await
            {
                Ok(()) => tracing::info!(lease = %name, "deleted the Lease of a member long gone"),
                Err(err) if err.is_not_found() => {}
                Err(err) => {
                    tracing::debug!(lease = %name, error = %err, "cannot delete a stale member Lease")
                }
            }
            self.members.remove(&name);
        }
    }

    /// Publishes holders and members, the seats' holders where no elector of ours sits,
    /// and the metric.
    fn publish(&mut self, live: &[String], now: Instant) {
        let duration = self.config.election.lease_duration;
        let holders: Vec<Option<String>> = self
            .shard_leases
            .iter()
            .map(|o| {
                o.as_ref()
                    .filter(|o| {
                        matches!(decide(Some(o), "", duration, now), Decision::Follow { .. })
                    })
                    .and_then(|o| o.record.holder.clone())
            })
            .collect();
        for (shard, seat) in (0u32..).zip(self.seats.iter()) {
            if !self.electors.contains_key(&shard) {
                seat.observe_holder(holders[shard as usize].clone());
            }
            METRICS.shard_owned(shard, seat.leadership().is_leader());
        }
        let members: BTreeMap<String, Option<String>> = self
            .members
            .values()
            .filter_map(|m| {
                let holder = m.observed.record.holder.clone()?;
                live.contains(&holder).then(|| (holder, m.url.clone()))
            })
            .collect();
        let view = View {
            known: self.known,
            me: self.config.election.identity.clone(),
            holders,
            members,
        };
        self.view.send_if_modified(|current| {
            let changed = *current != view;
            *current = view;
            changed
        });
    }

    /// Leaving: every shard released (writers stopped first), then the member Lease
    /// deleted so peers count us out at their next round.
    async fn leave(&mut self) {
        let electors: Vec<Elector> = self.electors.drain().map(|(_, e)| e).collect();
        futures::future::join_all(electors.into_iter().map(Elector::release)).await;
        for shard in 0..self.config.shards {
            METRICS.shard_owned(shard, false);
        }
        let Some(kind) = self.kind.clone() else {
            return;
        };
        let name = member_lease_name(&self.config.election.identity);
        let namespace = self.config.election.namespace.clone();
        let bound = self.config.election.renew_deadline.min(MAX_RELEASE_TIME);
        match tokio::time::timeout(
            bound,
            self.cluster.delete(&kind, Some(&namespace), &name, None),
        )
        .await
        {
            Ok(Ok(())) => tracing::info!(lease = %name, "left the shard membership"),
            Ok(Err(err)) if err.is_not_found() => {}
            Ok(Err(err)) => {
                tracing::warn!(lease = %name, error = %err, "cannot delete the member Lease; it will expire instead")
            }
            Err(_) => {
                tracing::warn!(lease = %name, "deleting the member Lease timed out; it will expire instead")
            }
        }
    }

    async fn lease_kind(&mut self) -> Result<Resolved, ShardError> {
        if let Some(kind) = &self.kind {
            return Ok(kind.clone());
        }
        let gvk = GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease");
        let kind = self
            .cluster
            .resolve(&gvk)
            .await?
            .ok_or(ShardError::NotServed)?;
        self.kind = Some(kind.clone());
        Ok(kind)
    }
}

#[cfg(test)]
mod tests;
