//! Rollback that holds (issue #30): the revisions an app was applied at, which a
//! person may roll it back to, and the pin that keeps it there. A pinned app syncs
//! and heals toward the pinned revision whatever Git's head says, until someone
//! unpins it or, when asked at rollback, until Git's head moves past the one it was
//! at then (Argo CD's rollback is undone by its next auto-sync: argoproj/argo-cd#9570).

use std::collections::VecDeque;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::AppStatus;

/// How many applied revisions an app's status keeps (`appliedRevisions`): Argo CD's
/// default `revisionHistoryLimit`, the rollback targets its users are used to.
pub const APPLIED_HISTORY: usize = 10;

/// A revision the app was applied at in full (a pass that left it Synced).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedRevision {
    pub sha: String,
    pub subject: String,
    pub applied_at: DateTime<Utc>,
}

/// Why an app stays at an earlier revision: who pinned it, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The full commit SHA the app syncs at.
    pub revision: String,
    pub subject: String,
    pub by: String,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Git's head when the app was rolled back, when the pin lasts only until the
    /// head moves past it (`--until-git-moves`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_git_moves_from: Option<String>,
}

impl Pin {
    /// Whether the pin still holds with Git's head at `head`: always, unless it
    /// lasts only until Git moves and Git has.
    pub fn holds(&self, head: &str) -> bool {
        self.until_git_moves_from
            .as_deref()
            .is_none_or(|from| from == head)
    }

    /// The pin as a sentence: the `Pinned` condition's message.
    pub fn describe(&self) -> String {
        let short: String = self.revision.chars().take(12).collect();
        let at = self.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let why = match self.reason.as_str() {
            "" => String::new(),
            reason => format!(": {reason}"),
        };
        let until = match self.until_git_moves_from {
            Some(_) => "until Git's head moves",
            None => "until unpinned",
        };
        format!("pinned to {short} by {} at {at}{why} ({until})", self.by)
    }
}

impl AppStatus {
    /// Records that the app was applied in full at `sha`: it enters the front of
    /// `appliedRevisions` unless it is already there, which keeps the last
    /// [`APPLIED_HISTORY`] distinct revisions.
    pub fn record_applied(&mut self, sha: &str, subject: &str, now: DateTime<Utc>) {
        self.applied_revision = Some(sha.to_string());
        if self.applied_revisions.front().is_some_and(|r| r.sha == sha) {
            return;
        }
        push_applied(
            &mut self.applied_revisions,
            AppliedRevision {
                sha: sha.to_string(),
                subject: subject.to_string(),
                applied_at: now,
            },
        );
    }
}

/// The revision of `applied` (an app's `appliedRevisions`) that `wanted` names: its
/// full SHA or a prefix of at least [`MIN_PREFIX`] hex digits naming one only.
pub fn find_applied<'a>(
    applied: impl IntoIterator<Item = &'a AppliedRevision>,
    wanted: &str,
) -> Option<&'a AppliedRevision> {
    let wanted = wanted.trim().to_ascii_lowercase();
    if wanted.len() < MIN_PREFIX || !wanted.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut found = applied.into_iter().filter(|r| r.sha.starts_with(&wanted));
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// The shortest SHA prefix a rollback accepts: Git's own default abbreviation.
pub const MIN_PREFIX: usize = 7;

/// Puts `applied` first, dropping its older entry and what exceeds the bound.
fn push_applied(history: &mut VecDeque<AppliedRevision>, applied: AppliedRevision) {
    history.retain(|r| r.sha != applied.sha);
    history.push_front(applied);
    history.truncate(APPLIED_HISTORY);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(n: u8) -> String {
        format!("{n:02x}").repeat(20)
    }

    #[test]
    fn applied_revisions_are_distinct_newest_first_and_bounded() {
        let mut status = AppStatus::new("web");
        let now = Utc::now();
        for n in 0..12 {
            status.record_applied(&sha(n), &format!("commit {n}"), now);
            status.record_applied(&sha(n), &format!("commit {n}"), now);
        }
        assert_eq!(status.applied_revisions.len(), APPLIED_HISTORY);
        assert_eq!(status.applied_revisions[0].sha, sha(11));
        assert_eq!(status.applied_revision, Some(sha(11)));
        // Rolled back to an older one: it moves to the front, once.
        status.record_applied(&sha(5), "commit 5", now);
        assert_eq!(status.applied_revisions[0].sha, sha(5));
        assert_eq!(status.applied_revisions.len(), APPLIED_HISTORY);
        assert_eq!(
            status
                .applied_revisions
                .iter()
                .filter(|r| r.sha == sha(5))
                .count(),
            1
        );
    }

    #[test]
    fn a_rollback_names_an_applied_revision_by_sha_or_an_unambiguous_prefix() {
        let mut status = AppStatus::new("web");
        let now = Utc::now();
        let (a, b) = ("abcdef0123".repeat(4), "abcdef0987".repeat(4));
        status.record_applied(&a, "a", now);
        status.record_applied(&b, "b", now);
        let find = |wanted: &str| find_applied(&status.applied_revisions, wanted);
        assert_eq!(find(&a).map(|r| r.subject.as_str()), Some("a"));
        assert_eq!(find("ABCDEF01").map(|r| r.subject.as_str()), Some("a"));
        // Ambiguous, too short, not hex, or never applied: none.
        assert_eq!(find("abcdef0"), None);
        assert_eq!(find("abcd"), None);
        assert_eq!(find("main"), None);
        assert_eq!(find(&sha(9)), None);
    }

    #[test]
    fn a_pin_until_git_moves_lets_go_once_the_head_is_another() {
        let mut pin = Pin {
            revision: sha(1),
            subject: "good".into(),
            by: "alice".into(),
            at: Utc::now(),
            reason: "bad release".into(),
            until_git_moves_from: None,
        };
        assert!(pin.holds(&sha(2)) && pin.holds(&sha(3)));
        pin.until_git_moves_from = Some(sha(2));
        assert!(pin.holds(&sha(2)));
        assert!(!pin.holds(&sha(3)));
        assert!(
            pin.describe()
                .starts_with(&format!("pinned to {} by alice at ", &sha(1)[..12]))
        );
        assert!(
            pin.describe()
                .ends_with(": bad release (until Git's head moves)")
        );
    }
}
