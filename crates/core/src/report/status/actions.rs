//! The last actions people took on an app through the API (issue #30: sync, suspend,
//! resume, roll back, unpin), with who and when, for the dashboard's app view. The
//! audit trail's Events and log lines are the record; this is its short memory, kept
//! by the replica that took each action, bounded per app.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AppStatus;

/// How many actions an app's status keeps (`actions`): a screenful, enough to see who
/// did what lately without growing with uptime.
pub const ACTION_HISTORY: usize = 20;

/// One action taken on the app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActionTaken {
    /// The word users know it by: sync, suspend, resume, roll back, unpin.
    pub action: String,
    pub by: String,
    pub at: DateTime<Utc>,
}

impl AppStatus {
    /// Remembers an action, newest first, keeping the last [`ACTION_HISTORY`].
    pub fn record_action(&mut self, action: &str, by: &str, at: DateTime<Utc>) {
        push_action(
            &mut self.actions,
            ActionTaken {
                action: action.to_string(),
                by: by.to_string(),
                at,
            },
        );
    }
}

fn push_action(actions: &mut VecDeque<ActionTaken>, taken: ActionTaken) {
    actions.push_front(taken);
    actions.truncate(ACTION_HISTORY);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_kept_newest_first_and_bounded() {
        let mut status = AppStatus::new("web");
        let now = Utc::now();
        for n in 0..25 {
            status.record_action("sync", &format!("user-{n}"), now);
        }
        status.record_action("roll back", "alice", now);
        assert_eq!(status.actions.len(), ACTION_HISTORY);
        assert_eq!(status.actions[0].action, "roll back");
        assert_eq!(status.actions[0].by, "alice");
        assert_eq!(status.actions[1].by, "user-24");
    }
}
