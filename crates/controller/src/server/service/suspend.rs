//! Suspend and Resume from the API (the dashboard's button), kept in the cluster so a
//! restart and every replica see them, as the app's own definition would:
//!
//! - an App object (`apps.tether.dev`) gets `spec.suspend`, server-side applied as
//!   field manager `tether`; its watch then restarts the worker with it, as for any
//!   spec change, and `kubectl get app -o yaml` shows it;
//! - an app of the configuration file, whose definition tether cannot write, is named
//!   in the ConfigMap [`SUSPENDED_CONFIGMAP`] in the inventory namespace (a key per
//!   app, the value when and how), written with JSON merge patches so replicas never
//!   undo each other's keys. One watch of that one object tells every replica, at
//!   its start and at each change; a steady state costs no request.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use chrono::{SecondsFormat, Utc};
use futures::StreamExt;
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::config::{APP_GROUP, APP_KIND, APP_VERSION};
use tether_core::cluster::objects::Watched;
use tether_core::cluster::{Cluster, ClusterError, Resolved};
use tether_schema::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

/// The ConfigMap naming the configuration file's apps suspended from the API.
pub const SUSPENDED_CONFIGMAP: &str = "tether-suspended";

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
    namespace: String,
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
            cluster,
            namespace,
            recorded: Arc::default(),
        }
    }

    /// Whether the cluster records `app` (a configuration file's) as suspended.
    pub(super) fn is_recorded(&self, app: &str) -> bool {
        self.recorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(app)
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
                self.record_in_configmap(app, suspended)
                    .await
                    .map_err(|source| SuspendError::Write {
                        target: format!("ConfigMap {}/{SUSPENDED_CONFIGMAP}", self.namespace),
                        source,
                    })?;
                let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
                if suspended {
                    recorded.insert(app.to_string());
                } else {
                    recorded.remove(app);
                }
            }
        }
        Ok(())
    }

    /// Sets or removes the app's key in [`SUSPENDED_CONFIGMAP`], making it the first
    /// time.
    async fn record_in_configmap(&self, app: &str, suspended: bool) -> Result<(), ClusterError> {
        let kind = self.configmaps().await?;
        let value = suspended.then(|| {
            format!(
                "suspended from the API at {}",
                Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
            )
        });
        let patch = json!({"data": {app: value}});
        let patch_it = || {
            self.cluster
                .merge_patch(&kind, Some(&self.namespace), SUSPENDED_CONFIGMAP, &patch)
        };
        match patch_it().await {
            Ok(_) => Ok(()),
            // Nothing to resume from.
            Err(err) if err.is_not_found() && !suspended => Ok(()),
            Err(err) if err.is_not_found() => {
                self.cluster.ensure_namespace(&self.namespace).await?;
                let configmap = json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "namespace": self.namespace,
                        "name": SUSPENDED_CONFIGMAP,
                        "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
                    },
                    "data": {app: value},
                });
                match self.cluster.create(&kind, &configmap).await {
                    Ok(_) => Ok(()),
                    // Another replica made it meanwhile: add the key to its.
                    Err(ClusterError::Api { code: 409, .. }) => patch_it().await.map(|_| ()),
                    Err(err) => Err(err),
                }
            }
            Err(err) => Err(err),
        }
    }

    async fn configmaps(&self) -> Result<Resolved, ClusterError> {
        self.cluster
            .resolve(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
            .await?
            .ok_or_else(|| ClusterError::Config("the cluster serves no ConfigMaps".into()))
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
        let this = self.clone();
        let (listed, first_list) = oneshot::channel();
        tokio::spawn(async move {
            let mut listed = Some(listed);
            let kind = match this.configmaps().await {
                Ok(kind) => kind,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot follow suspensions recorded in the cluster");
                    return;
                }
            };
            let stream = this.cluster.watch_objects(
                &kind,
                Some(&this.namespace),
                Some(&format!("metadata.name={SUSPENDED_CONFIGMAP}")),
            );
            futures::pin_mut!(stream);
            loop {
                let seen = tokio::select! {
                    _ = cancel.cancelled() => return,
                    seen = stream.next() => seen,
                };
                let now: HashSet<String> = match seen {
                    None => return,
                    Some(Watched::Listed(objects)) => {
                        objects.iter().flat_map(suspended_in).collect()
                    }
                    Some(Watched::Applied(object)) => suspended_in(&object).collect(),
                    Some(Watched::Deleted(_)) => HashSet::new(),
                };
                let flips: Vec<(String, bool)> = {
                    let mut recorded = this.recorded.lock().unwrap_or_else(|p| p.into_inner());
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
                if let Some(listed) = listed.take() {
                    let _ = listed.send(());
                }
            }
        });
        first_list
    }
}

/// The apps a [`SUSPENDED_CONFIGMAP`] names (a key with a value).
fn suspended_in(configmap: &Value) -> impl Iterator<Item = String> + '_ {
    configmap["data"]
        .as_object()
        .into_iter()
        .flat_map(|data| data.keys().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_objects_identity_names_it_and_a_files_app_names_none() {
        assert_eq!(app_object("team-a.web"), Some(("team-a", "web")));
        assert_eq!(app_object("web"), None);
    }

    #[test]
    fn every_key_of_the_configmap_is_a_suspended_app() {
        let configmap =
            json!({"data": {"web": "suspended from the API at 2026-11-24T05:00:00Z", "api": "x"}});
        let mut apps: Vec<String> = suspended_in(&configmap).collect();
        apps.sort();
        assert_eq!(apps, ["api", "web"]);
        assert_eq!(suspended_in(&json!({})).count(), 0);
    }
}
