//! Whether automation may correct drift now, and if not, why: shards, leadership,
//! suspension, sync windows, automated sync and self-heal.

use std::sync::atomic::Ordering;

use chrono::Utc;
use tether_core::report::status::Automation;

use super::Worker;
use crate::windows::{self, Verdict};

impl Worker {
    /// Whether automation may correct drift now at revision `id`, and if not, why.
    pub(super) fn automation(&self, id: &str) -> Automation {
        let blocked = |reason: String| Automation {
            acting: false,
            reason: Some(reason),
        };
        let leadership = &self.leadership;
        if let Some(owner) = self.shared.ownership.owner(&self.config.name)
            && !owner.local
        {
            let holder = owner.holder.as_deref().unwrap_or("no replica yet");
            return blocked(format!("shard {} is held by {holder}", owner.shard));
        }
        if !leadership.is_leader() {
            let leader = leadership
                .holder()
                .map(|h| format!(" (the leader is {h})"))
                .unwrap_or_default();
            return blocked(format!("this replica is not the leader{leader}"));
        }
        if self.config.suspend {
            // Named as its definition spells it: the file's key, or the App's spec.
            let field = match self.config.tenant_namespace {
                Some(_) => "spec.suspend",
                None => "suspend",
            };
            return blocked(format!(
                "suspended ({field}: true): drift is reported, not corrected"
            ));
        }
        if self.suspended.load(Ordering::SeqCst) {
            return blocked("suspended from the API: drift is reported, not corrected".into());
        }
        if let Verdict::Closed { reason } = windows::verdict(&self.config.sync_windows, Utc::now())
        {
            return blocked(format!("sync window: {reason}"));
        }
        let manual = self.schedule.manual.owed();
        if !self.config.sync.automated && !manual {
            return blocked("automated sync is off: drift is reported only".into());
        }
        let live_drift_only = self.synced_revision.as_deref() == Some(id);
        if live_drift_only && !self.config.sync.self_heal && !manual {
            return blocked("self-heal is off: live changes are reported, not corrected".into());
        }
        Automation {
            acting: true,
            reason: None,
        }
    }
}
