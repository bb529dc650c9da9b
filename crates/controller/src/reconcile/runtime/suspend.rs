//! Suspend and Resume from the API (the dashboard's button), kept in the cluster so a
//! restart and every replica see them, as the app's own definition would:
//!
//! - an App object (`apps.tether.dev`) gets `spec.suspend`, server-side applied as
//!   field manager `tether`; its watch then restarts the worker with it, as for any
//!   spec change, and `kubectl get app -o yaml` shows it;
//! - an app of the configuration file, whose definition tether cannot write, is named
//!   in the ConfigMap [`SUSPENDED_CONFIGMAP`] in the inventory namespace (a key per
//!   app, the value when and how: see `ledger`).

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{SecondsFormat, Utc};
use kube::core::GroupVersionKind;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::ledger::Ledger;
use crate::config::{APP_GROUP, APP_KIND, APP_VERSION};
use tether_core::cluster::{Cluster, ClusterError};

pub use tether_schema::ownership::SUSPENDED_CONFIGMAP;

/// Why a Suspend or Resume could not be recorded; nothing changed then.
#[derive(Debug, thiserror::Error)]
pub enum SuspendError {
    /// The configuration file says `suspend: true`: only the file can resume the app,
    /// and a Resume from the API would be a promise the next pass breaks.
    #[error("{0} is suspended by the configuration file (`suspend: true`); resume it there")]
    Declared(String),
    /// The cluster does not serve the kind that records it (the App CRD is gone):
    /// needs a change.
    #[error("the cluster does not serve {0}")]
    NotServed(&'static str),
    /// The write was refused or failed; a retry can help when the cluster error
    /// says so ([`ClusterError::is_retryable`]).
    #[error("cannot record the suspension in {target}: {source}")]
    Write {
        target: String,
        #[source]
        source: ClusterError,
    },
}

/// The apps suspended from the API, as the cluster records them, and how to record
/// a change.
#[derive(Clone)]
pub(super) struct Suspensions {
    cluster: Arc<Cluster>,
    /// Where the configuration file's apps are recorded.
    ledger: Ledger,
    /// The configuration file's apps named in [`SUSPENDED_CONFIGMAP`], as last seen.
    recorded: Arc<Mutex<HashSet<String>>>,
}

/// Where an app is defined, which says where its suspension is recorded.
fn app_object(app: &str) -> Option<(&str, &str)> {
    // An App's identity is `<namespace>.<name>`; a file's app name has no dot.
    app.split_once('.')
}

impl Suspensions {
    pub(super) fn new(cluster: Arc<Cluster>, namespace: String) -> Suspensions {
        Suspensions {
            ledger: Ledger::new(cluster.clone(), namespace, SUSPENDED_CONFIGMAP),
            cluster,
            recorded: Arc::default(),
        }
    }

    /// Whether the cluster records `app` (a configuration file's) as suspended.
    pub(super) fn is_recorded(&self, app: &str) -> bool {
        self.recorded.lock().contains(app)
    }

    /// Records the app as suspended or not. Nothing is changed in memory until the
    /// cluster has it.
    pub(super) async fn record(&self, app: &str, suspended: bool) -> Result<(), SuspendError> {
        match app_object(app) {
            Some((namespace, name)) => {
                let target = || format!("App {namespace}/{name}");
                let gvk = GroupVersionKind::gvk(APP_GROUP, APP_VERSION, APP_KIND);
                let kind = self
                    .cluster
                    .resolve(&gvk)
                    .await
                    .map_err(|source| SuspendError::Write {
                        target: target(),
                        source,
                    })?
                    .ok_or(SuspendError::NotServed("apps.tether.dev"))?;
                let body = json!({
                    "apiVersion": format!("{APP_GROUP}/{APP_VERSION}"),
                    "kind": APP_KIND,
                    "metadata": {"namespace": namespace, "name": name},
                    "spec": {"suspend": suspended},
                });
                // Forced: the button says what the person wants now, over whoever
                // wrote the field before.
                self.cluster
                    .apply(&kind, &body, true)
                    .await
                    .map_err(|source| SuspendError::Write {
                        target: target(),
                        source,
                    })?;
            }
            None => {
                let value = suspended.then(|| {
                    format!(
                        "suspended from the API at {}",
                        Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
                    )
                });
                self.ledger
                    .set(app, value)
                    .await
                    .map_err(|source| SuspendError::Write {
                        target: self.ledger.target(),
                        source,
                    })?;
                let mut recorded = self.recorded.lock();
                if suspended {
                    recorded.insert(app.to_string());
                } else {
                    recorded.remove(app);
                }
            }
        }
        Ok(())
    }

    /// Follows [`SUSPENDED_CONFIGMAP`]; `changed` hears each app whose recorded
    /// suspension changed (its new value), the first list included. The answer
    /// comes once that first list is in (or the watch could not start), so workers
    /// started after it never act on an app the cluster holds suspended.
    pub(super) fn spawn_watch(
        &self,
        changed: impl Fn(&str, bool) + Send + 'static,
        cancel: CancellationToken,
    ) -> oneshot::Receiver<()> {
        let recorded = self.recorded.clone();
        self.ledger.spawn_watch(
            move |data| {
                // Every key with a value is a suspended app.
                let now: HashSet<String> = data.into_keys().collect();
                let flips: Vec<(String, bool)> = {
                    let mut recorded = recorded.lock();
                    let flips = recorded
                        .symmetric_difference(&now)
                        .map(|app| (app.clone(), now.contains(app)))
                        .collect();
                    *recorded = now;
                    flips
                };
                for (app, suspended) in flips {
                    changed(&app, suspended);
                }
            },
            cancel,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_objects_identity_names_it_and_a_files_app_names_none() {
        assert_eq!(app_object("team-a.web"), Some(("team-a", "web")));
        assert_eq!(app_object("web"), None);
    }
}
