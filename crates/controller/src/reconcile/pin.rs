//! Rollback that holds (issue #30), in the worker: the pin a person set (from the
//! API, kept in the cluster by the service) decides which revision a pass renders,
//! syncs and heals toward: the pinned one while the pin holds, Git's head otherwise.
//! Deciding it is a lock and a comparison per pass, nothing more.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use tether_core::report::status::{AppStatus, ConditionStatus, ConditionType, Pin, reason};
use tether_core::source::Revision;

/// The app's pin, shared by its handle (which sets it) and its worker (which reads it).
#[derive(Debug, Clone, Default)]
pub struct Pinning(Arc<Mutex<Option<Pin>>>);

impl Pinning {
    pub fn set(&self, pin: Option<Pin>) {
        *self.0.lock() = pin;
    }

    pub fn get(&self) -> Option<Pin> {
        self.0.lock().clone()
    }

    /// The revision a pass syncs with Git's head at `head`, and the pin that holds it
    /// there (None: Git's head, unpinned or let go because Git moved).
    pub fn target(&self, head: &Revision) -> (Revision, Option<Pin>) {
        match self.get().filter(|pin| pin.holds(&head.sha)) {
            Some(pin) => (
                Revision {
                    sha: pin.revision.clone(),
                    subject: pin.subject.clone(),
                },
                Some(pin),
            ),
            None => (head.clone(), None),
        }
    }
}

/// Shows the pin holding the app (or none) in its status: `pin` and the `Pinned`
/// condition, which appears with the first pin and then stays, False once let go.
pub fn show(status: &mut AppStatus, holding: Option<&Pin>, set: bool, now: DateTime<Utc>) {
    status.pin = holding.cloned();
    match holding {
        Some(pin) => status.set_condition(
            ConditionType::Pinned,
            ConditionStatus::True,
            reason::ROLLED_BACK,
            &pin.describe(),
            now,
        ),
        None if status
            .conditions
            .iter()
            .any(|c| c.kind == ConditionType::Pinned) =>
        {
            // A pin still set but not holding was let go by Git moving on.
            let (reason, message) = if set {
                (
                    reason::GIT_MOVED,
                    "Git's head moved past the rollback: following it again",
                )
            } else {
                (reason::UNPINNED, "following Git's head")
            };
            status.set_condition(
                ConditionType::Pinned,
                ConditionStatus::False,
                reason,
                message,
                now,
            );
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(n: u8) -> Revision {
        Revision {
            sha: format!("{n:02x}").repeat(20),
            subject: format!("commit {n}"),
        }
    }

    fn pin(to: &Revision, until_git_moves_from: Option<&Revision>) -> Pin {
        Pin {
            revision: to.sha.clone(),
            subject: to.subject.clone(),
            by: "alice".into(),
            at: Utc::now(),
            reason: String::new(),
            until_git_moves_from: until_git_moves_from.map(|r| r.sha.clone()),
        }
    }

    #[test]
    fn a_pinned_app_syncs_the_pinned_revision_until_unpinned_or_git_moves() {
        let (old, head, newer) = (revision(1), revision(2), revision(3));
        let pinning = Pinning::default();
        assert_eq!(pinning.target(&head), (head.clone(), None));
        pinning.set(Some(pin(&old, None)));
        assert_eq!(pinning.target(&newer).0, old);
        pinning.set(Some(pin(&old, Some(&head))));
        assert_eq!(pinning.target(&head).0, old);
        assert_eq!(pinning.target(&newer), (newer.clone(), None));
        pinning.set(None);
        assert_eq!(pinning.target(&head).0, head);
    }

    #[test]
    fn the_pinned_condition_appears_with_a_pin_and_says_why_it_went() {
        let now = Utc::now();
        let mut status = AppStatus::new("web");
        show(&mut status, None, false, now);
        assert!(status.conditions.is_empty());
        let held = pin(&revision(1), None);
        show(&mut status, Some(&held), true, now);
        assert_eq!(status.pin.as_ref(), Some(&held));
        let condition = |s: &AppStatus| {
            let c = s
                .conditions
                .iter()
                .find(|c| c.kind == ConditionType::Pinned)
                .expect("Pinned");
            (c.status, c.reason.clone())
        };
        assert_eq!(
            condition(&status),
            (ConditionStatus::True, "RolledBack".to_string())
        );
        show(&mut status, None, true, now);
        assert_eq!(
            condition(&status),
            (ConditionStatus::False, "GitMoved".to_string())
        );
        show(&mut status, None, false, now);
        assert_eq!(
            condition(&status),
            (ConditionStatus::False, "Unpinned".to_string())
        );
        assert_eq!(status.pin, None);
    }
}
