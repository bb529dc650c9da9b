//! The pure core of leader election: what a Lease record says, and what a replica
//! should do about it ([`observe`], [`decide`], [`next_record`]). No I/O, no clock but
//! the instants and times passed in.

use super::*;

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

/// How long a record holds, on our clock: its `leaseDurationSeconds`, capped at the
/// configured `lease_duration` (which also stands in for a missing or invalid one).
/// client-go trusts the record alone; here anyone allowed to write the Lease could
/// then stop every replica for as long as they liked (`leaseDurationSeconds: 3600`,
/// issue #24). Replicas share one configuration, so the cap costs nothing between them;
/// a shorter record (a release, a holder with a shorter lease) is still honoured.
pub fn held_for(record: &LeaseRecord, lease_duration: Duration) -> Duration {
    record
        .lease_duration_seconds
        .filter(|seconds| *seconds > 0)
        .map(|seconds| Duration::from_secs(seconds.unsigned_abs()))
        .map_or(lease_duration, |own| own.min(lease_duration))
}

/// client-go's `tryAcquireOrRenew`, as a pure function. `observed` is None when the
/// Lease does not exist; a record holds for [`held_for`] it and `lease_duration`.
pub fn decide(
    observed: Option<&Observation>,
    identity: &str,
    lease_duration: Duration,
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
    let expires = observed.since + held_for(&observed.record, lease_duration);
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
