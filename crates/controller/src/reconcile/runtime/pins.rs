//! Rollback pins kept in the cluster (issue #30), so a restart and every replica
//! keep an app where a person rolled it back: the ConfigMap [`PINNED_CONFIGMAP`] in
//! the inventory namespace holds a key per pinned app (the configuration file's and
//! App objects alike: tether may not write a tenant's App, and one record serves
//! both), its value the pin as JSON (who, when, why, the revision). See `ledger`.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::ledger::Ledger;
use tether_core::cluster::{Cluster, ClusterError};
use tether_core::report::status::Pin;

pub use tether_schema::ownership::PINNED_CONFIGMAP;

/// Why a rollback or an unpin could not be recorded; nothing changed then.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The write was refused or failed; a retry can help when the cluster error
    /// says so ([`ClusterError::is_retryable`]).
    #[error("cannot record the pin in {target}: {source}")]
    Write {
        target: String,
        #[source]
        source: ClusterError,
    },
}

/// The pins, as the cluster records them, and how to record a change.
#[derive(Clone)]
pub(super) struct Pins {
    ledger: Ledger,
    /// Each pinned app's pin, as last seen.
    recorded: Arc<Mutex<HashMap<String, Pin>>>,
}

impl Pins {
    pub(super) fn new(cluster: Arc<Cluster>, namespace: String) -> Pins {
        Pins {
            ledger: Ledger::new(cluster, namespace, PINNED_CONFIGMAP),
            recorded: Arc::default(),
        }
    }

    /// The pin the cluster records for `app`.
    pub(super) fn get(&self, app: &str) -> Option<Pin> {
        self.recorded.lock().get(app).cloned()
    }

    /// Records the app's pin (None: unpinned). Nothing is changed in memory until the
    /// cluster has it.
    pub(super) async fn record(&self, app: &str, pin: Option<&Pin>) -> Result<(), PinError> {
        let value = pin.map(|pin| serde_json::to_string(pin).unwrap_or_default());
        self.ledger
            .set(app, value)
            .await
            .map_err(|source| PinError::Write {
                target: self.ledger.target(),
                source,
            })?;
        match pin {
            Some(pin) => self.recorded.lock().insert(app.to_string(), pin.clone()),
            None => self.recorded.lock().remove(app),
        };
        Ok(())
    }

    /// Follows [`PINNED_CONFIGMAP`]; `changed` hears each app whose pin changed (its
    /// new pin), the first list included. The answer comes once that first list is
    /// in, so workers started after it start pinned.
    pub(super) fn spawn_watch(
        &self,
        changed: impl Fn(&str, Option<Pin>) + Send + 'static,
        cancel: CancellationToken,
    ) -> oneshot::Receiver<()> {
        let recorded = self.recorded.clone();
        self.ledger.spawn_watch(
            move |data| {
                let now = parse(data);
                let changes: Vec<(String, Option<Pin>)> = {
                    let mut recorded = recorded.lock();
                    let changes = recorded
                        .keys()
                        .chain(now.keys())
                        .filter(|app| recorded.get(*app) != now.get(*app))
                        .map(|app| (app.clone(), now.get(app).cloned()))
                        .collect();
                    *recorded = now;
                    changes
                };
                for (app, pin) in changes {
                    changed(&app, pin);
                }
            },
            cancel,
        )
    }
}

/// The pins a [`PINNED_CONFIGMAP`]'s data holds; a value that is no pin (written by
/// hand) is logged and left out: the app follows Git.
fn parse(data: impl IntoIterator<Item = (String, String)>) -> HashMap<String, Pin> {
    data.into_iter()
        .filter_map(|(app, value)| match serde_json::from_str::<Pin>(&value) {
            Ok(pin) => Some((app, pin)),
            Err(err) => {
                tracing::warn!(app, configmap = PINNED_CONFIGMAP, error = %err, "not a pin: ignored");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_reads_back_as_written_and_a_hand_written_value_is_ignored() {
        let pin = Pin {
            revision: "ab".repeat(20),
            subject: "good".into(),
            by: "alice".into(),
            at: chrono::Utc::now(),
            reason: "bad release".into(),
            until_git_moves_from: Some("cd".repeat(20)),
        };
        let json = serde_json::to_string(&pin).expect("json");
        let pins = parse([
            ("web".to_string(), json),
            ("api".to_string(), "pinned please".to_string()),
        ]);
        assert_eq!(pins.len(), 1);
        assert_eq!(pins.get("web"), Some(&pin));
    }
}
