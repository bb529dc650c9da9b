//! From the watch caches to the workers: which app an object change concerns (every
//! app when the dispatcher fell behind), and, with shards, which shards' objects a
//! cache keeps as this replica gains and loses them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Registry;
use crate::reconcile::leader::Leadership;
use tether_core::cluster::cache::Cache;

/// How long a sharded cache keeps the objects of a shard after losing it, in lease
/// durations (60 s with the default 15 s lease). A shard lost because a renewal missed
/// its deadline (an API server slow under load) usually comes back within a few retry
/// periods; dropping it at once would cost a full list per kind on its return, more
/// load on the server that was already late, and so more lost renewals (seen at 100,000
/// objects on a loaded machine). A shard handed to another replica frees its memory
/// this much later.
pub(super) const CACHE_LINGER_LEASES: u32 = 4;

/// The shards a cache keeps: those held, and those lost less than `linger` ago (their
/// loss times in `lost`, updated here); with when the next of these runs out.
fn kept_shards(
    held: &BTreeSet<u32>,
    lost: &mut BTreeMap<u32, Instant>,
    previous: &BTreeSet<u32>,
    now: Instant,
    linger: Duration,
) -> (BTreeSet<u32>, Option<Instant>) {
    for shard in previous.difference(held) {
        lost.entry(*shard).or_insert(now);
    }
    lost.retain(|shard, at| !held.contains(shard) && now.saturating_duration_since(*at) < linger);
    let kept = held.iter().chain(lost.keys()).copied().collect();
    let next = lost.values().map(|at| *at + linger).min();
    (kept, next)
}

/// Tells a sharded cache which shards this replica holds, as they come and go: it
/// keeps only their apps' objects (and, for `linger`, a lost shard's).
pub(super) fn spawn_holder(
    cache: Cache,
    mut seats: Vec<Leadership>,
    linger: Duration,
    cancel: CancellationToken,
) {
    if seats.is_empty() {
        return;
    }
    let held = |seats: &[Leadership]| -> BTreeSet<u32> {
        (0u32..)
            .zip(seats)
            .filter(|(_, seat)| seat.is_leader())
            .map(|(shard, _)| shard)
            .collect()
    };
    // Before any watch starts: a first list with no shard held would be thrown away.
    let mut previous = held(&seats);
    cache.hold(&previous);
    tokio::spawn(async move {
        let mut lost = BTreeMap::new();
        let mut expiry: Option<Instant> = None;
        loop {
            let changes = seats.iter_mut().map(|seat| Box::pin(seat.changed()));
            let expired = async {
                match expiry {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = futures::future::select_all(changes) => {}
                () = expired => {}
            }
            let now = held(&seats);
            let (kept, next) = kept_shards(&now, &mut lost, &previous, Instant::now(), linger);
            cache.hold(&kept);
            previous = now;
            expiry = next;
        }
    });
}

/// Tells the app whose object changed which one did.
pub(super) fn spawn_dispatcher(cache: Cache, apps: Arc<Registry>, cancel: CancellationToken) {
    let mut events = cache.subscribe();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => return,
                event = events.recv() => event,
            };
            match event {
                Ok(changed) => {
                    let Some(app) = changed.app else { continue };
                    let running = apps.running.lock();
                    if let Some(r) = running.get(&app) {
                        r.handle.object_changed(changed.key);
                    }
                }
                // Fell behind: some changes are unknown, so every app takes a pass.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    let running = apps.running.lock();
                    running.values().for_each(|r| r.handle.wake());
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_shard_is_kept_for_the_linger_then_dropped_and_a_return_cancels_it() {
        let linger = Duration::from_secs(60);
        let t0 = Instant::now();
        let set = |s: &[u32]| s.iter().copied().collect::<BTreeSet<u32>>();
        let mut lost = BTreeMap::new();
        // Shard 1 lost: still kept, until t0 + linger.
        let (kept, next) = kept_shards(&set(&[0]), &mut lost, &set(&[0, 1]), t0, linger);
        assert_eq!(kept, set(&[0, 1]));
        assert_eq!(next, Some(t0 + linger));
        // Later, nothing changed but time: kept until then, dropped after.
        let at = t0 + Duration::from_secs(59);
        let (kept, _) = kept_shards(&set(&[0]), &mut lost, &set(&[0]), at, linger);
        assert_eq!(kept, set(&[0, 1]));
        let (kept, next) = kept_shards(&set(&[0]), &mut lost, &set(&[0]), t0 + linger, linger);
        assert_eq!(kept, set(&[0]));
        assert_eq!(next, None);
        // Lost and back within the linger: held, nothing pending.
        let (_, _) = kept_shards(&set(&[]), &mut lost, &set(&[0]), t0, linger);
        let (kept, next) = kept_shards(
            &set(&[0]),
            &mut lost,
            &set(&[]),
            t0 + Duration::from_secs(5),
            linger,
        );
        assert_eq!(kept, set(&[0]));
        assert_eq!(next, None);
        assert!(lost.is_empty());
    }
}
