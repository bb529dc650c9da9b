//! What the cache remembers per source: its status, the clone it synced with, and the
//! revisions its own credentials fetched or listed there. A revision is read for a
//! source only if that source resolved it itself: a commit another source brought
//! into a clone is not enough. Sources held by a watcher ([`super::SourceHold`]) are
//! forgotten when the last holder lets go, with their metric series and, when no
//! other source uses it, their clone.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Utc};
use parking_lot::Mutex;

use super::clone_key::CloneKey;
use super::url::redact;
use super::{Revision, Source, SourceError};

/// Revisions remembered per source as fetched with its own credentials: the ones a
/// pass may still be reading after the watcher moved on. A source moves one revision
/// per sync; a pass reads the one it was handed a moment ago.
const VERIFIED_PER_SOURCE: usize = 16;

/// The state of one source, as status conditions report it.
///
/// A failing source keeps serving its last good revision, so the failure must show
/// elsewhere: `last_success` says how old that revision's confirmation is, and
/// `failing_since` how long the source has been failing (a `Stale` condition, an
/// alert on `time() - tether_source_last_success_timestamp_seconds`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceStatus {
    /// `Ready=True` after the last sync succeeded.
    pub ready: bool,
    /// Why not ready (`SourceError::reason`), when not.
    pub reason: Option<&'static str>,
    /// The last error's message, when not ready. Credentials in it are redacted.
    pub message: Option<String>,
    /// Whether the last error is worth retrying unchanged.
    pub retryable: bool,
    /// The last revision that synced successfully: what stays in use after a failure.
    pub last_good: Option<Revision>,
    /// When the last sync succeeded (the remote answered and the reference and path
    /// resolved); `None` until one has.
    pub last_success: Option<DateTime<Utc>>,
    /// When the first failure after the last success happened: set by the first failed
    /// sync, kept by the ones after it, cleared by the next success. `None` while
    /// ready.
    pub failing_since: Option<DateTime<Utc>>,
}

#[derive(Debug, Default)]
struct Record {
    status: SourceStatus,
    /// The clone the last successful sync used.
    clone: Option<CloneKey>,
    /// Revisions resolved there for this source, newest last.
    verified: VecDeque<String>,
    /// Watchers holding the source; at zero (after at least one) it is forgotten.
    holders: usize,
}

/// What forgetting a source leaves to clean up.
#[derive(Debug, Default)]
pub(crate) struct Forgotten {
    /// Its clone, which no other source uses.
    pub(crate) clone: Option<CloneKey>,
    /// Its `tether_source_last_success_timestamp_seconds` labels, which no other source
    /// shares: (redacted URL, ref, path).
    pub(crate) series: Option<(String, String, String)>,
    /// Its repository's `tether_git_fetch_*` label, which no other source shares.
    pub(crate) repo: Option<String>,
}

/// Every source's record.
#[derive(Debug, Default)]
pub(crate) struct Records {
    map: Mutex<HashMap<Source, Record>>,
}

impl Records {
    pub(crate) fn status(&self, source: &Source) -> SourceStatus {
        self.map
            .lock()
            .get(source)
            .map(|r| r.status.clone())
            .unwrap_or_default()
    }

    /// Whether this source itself resolved `sha` in the clone `key`.
    pub(crate) fn verified_in(&self, source: &Source, key: &CloneKey, sha: &str) -> bool {
        self.map.lock().get(source).is_some_and(|r| {
            r.clone.as_ref() == Some(key) && r.verified.iter().any(|s| s.eq_ignore_ascii_case(sha))
        })
    }

    /// The clone to read `sha` from for this source, or why not.
    pub(crate) fn clone_for(&self, source: &Source, sha: &str) -> Result<CloneKey, SourceError> {
        let map = self.map.lock();
        map.get(source)
            .filter(|r| r.verified.iter().any(|s| s == sha))
            .and_then(|r| r.clone.clone())
            .ok_or_else(|| SourceError::NotVerified {
                url: source.url.clone(),
                sha: sha.to_string(),
            })
    }

    /// The clone this source last synced and the revision it resolved there: what
    /// an earlier revision must be an ancestor of to be read (see
    /// [`super::SourceCache::earlier`]).
    pub(crate) fn head(&self, source: &Source) -> Option<(CloneKey, String)> {
        let map = self.map.lock();
        let record = map.get(source)?;
        Some((
            record.clone.clone()?,
            record.status.last_good.as_ref()?.sha.clone(),
        ))
    }

    /// Remembers `sha` as resolved for this source in `key` (an ancestor of its head
    /// there), if that is still the clone it uses.
    pub(crate) fn verify(&self, source: &Source, key: &CloneKey, sha: &str) {
        let mut map = self.map.lock();
        let Some(record) = map
            .get_mut(source)
            .filter(|r| r.clone.as_ref() == Some(key))
        else {
            return;
        };
        remember(record, sha);
    }

    /// Record a sync's outcome. A success in another clone than before (rotated
    /// credentials) forgets what was verified in the old one, and returns the old
    /// clone when no source uses it any more.
    pub(crate) fn record(
        &self,
        source: &Source,
        result: &Result<(Revision, Option<CloneKey>), SourceError>,
    ) -> Option<CloneKey> {
        let mut map = self.map.lock();
        let record = map.entry(source.clone()).or_default();
        let status = &mut record.status;
        let now = Utc::now();
        match result {
            Ok((revision, key)) => {
                status.ready = true;
                status.reason = None;
                status.message = None;
                status.retryable = false;
                status.last_good = Some(revision.clone());
                status.last_success = Some(now);
                status.failing_since = None;
                crate::metrics::METRICS.source_success(
                    &redact(&source.url),
                    &source.reference,
                    &source.path,
                    now,
                );
                // A chart source (no clone) keeps none.
                let replaced = match key
                    .as_ref()
                    .and_then(|key| record.clone.replace(key.clone()))
                {
                    Some(old) if Some(&old) != key.as_ref() => {
                        record.verified.clear();
                        Some(old)
                    }
                    _ => None,
                };
                remember(record, &revision.sha);
                replaced.filter(|old| !map.values().any(|r| r.clone.as_ref() == Some(old)))
            }
            // Not logged here: the caller reports the error it gets back (the service's
            // poller logs it, the CLI prints it), so it is said once.
            Err(e) => {
                status.ready = false;
                status.reason = Some(e.reason());
                status.message = Some(e.to_string());
                status.retryable = e.is_retryable();
                status.failing_since.get_or_insert(now);
                None
            }
        }
    }

    /// One more watcher holds `source`.
    pub(crate) fn hold(&self, source: &Source) {
        self.map.lock().entry(source.clone()).or_default().holders += 1;
    }

    /// A watcher lets go of `source`; the last one forgets it, and says what no other
    /// source shares.
    pub(crate) fn release(&self, source: &Source) -> Forgotten {
        let mut map = self.map.lock();
        let Some(record) = map.get_mut(source) else {
            return Forgotten::default();
        };
        record.holders = record.holders.saturating_sub(1);
        if record.holders > 0 {
            return Forgotten::default();
        }
        let Some(record) = map.remove(source) else {
            return Forgotten::default();
        };
        let url = redact(&source.url);
        let host_path = source.repo_key().host_path;
        let series_shared = map.keys().any(|s| {
            s.reference == source.reference && s.path == source.path && redact(&s.url) == url
        });
        let repo_shared = map.keys().any(|s| s.repo_key().host_path == host_path);
        Forgotten {
            clone: record
                .clone
                .filter(|key| !map.values().any(|r| r.clone.as_ref() == Some(key))),
            series: (!series_shared).then(|| (url, source.reference.clone(), source.path.clone())),
            repo: (!repo_shared).then_some(host_path),
        }
    }
}

/// Adds `sha` to the revisions verified for a source, keeping the last
/// [`VERIFIED_PER_SOURCE`].
fn remember(record: &mut Record, sha: &str) {
    if !record.verified.iter().any(|s| s == sha) {
        record.verified.push_back(sha.to_string());
    }
    while record.verified.len() > VERIFIED_PER_SOURCE {
        record.verified.pop_front();
    }
}
