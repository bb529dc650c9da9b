//! A record tether keeps in the cluster for the configuration's apps and App objects
//! alike: a ConfigMap of tether's in the inventory namespace, a key per app (the
//! suspensions of the file's apps, every app's rollback pin). Written with JSON merge
//! patches, so replicas never undo each other's keys; one watch of that one object
//! tells every replica, at its start and at each change, and a steady state costs no
//! request.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use tether_core::cluster::objects::Watched;
use tether_core::cluster::{Cluster, ClusterError, Resolved};
use tether_schema::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

/// One ConfigMap of tether's: where it is and how to reach it.
#[derive(Clone)]
pub(super) struct Ledger {
    cluster: Arc<Cluster>,
    namespace: String,
    name: &'static str,
}

impl Ledger {
    pub(super) fn new(cluster: Arc<Cluster>, namespace: String, name: &'static str) -> Ledger {
        Ledger {
            cluster,
            namespace,
            name,
        }
    }

    /// The ConfigMap, as errors name it.
    pub(super) fn target(&self) -> String {
        format!("ConfigMap {}/{}", self.namespace, self.name)
    }

    /// Sets (`Some`) or removes (`None`) the app's key, making the ConfigMap the
    /// first time.
    pub(super) async fn set(&self, app: &str, value: Option<String>) -> Result<(), ClusterError> {
        let kind = self.configmaps().await?;
        let removing = value.is_none();
        let patch = json!({"data": {app: value}});
        let patch_it = || {
            self.cluster
                .merge_patch(&kind, Some(&self.namespace), self.name, &patch)
        };
        match patch_it().await {
            Ok(_) => Ok(()),
            // Nothing to remove.
            Err(err) if err.is_not_found() && removing => Ok(()),
            Err(err) if err.is_not_found() => {
                self.cluster.ensure_namespace(&self.namespace).await?;
                let configmap = json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "namespace": self.namespace,
                        "name": self.name,
                        "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
                    },
                    "data": patch["data"],
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
            .ok_or_else(|| ClusterError::NotServed("ConfigMaps"))
    }

    /// Follows the ConfigMap: `seen` gets its data (key → value; empty once it is
    /// deleted) at the first list and at each change. The answer comes once that
    /// first list is in (or the watch could not start), so workers started after it
    /// never miss what the cluster holds.
    pub(super) fn spawn_watch(
        &self,
        mut seen: impl FnMut(BTreeMap<String, String>) + Send + 'static,
        cancel: CancellationToken,
    ) -> oneshot::Receiver<()> {
        let this = self.clone();
        let (listed, first_list) = oneshot::channel();
        tokio::spawn(async move {
            let mut listed = Some(listed);
            let kind = match this.configmaps().await {
                Ok(kind) => kind,
                Err(err) => {
                    tracing::warn!(configmap = this.name, error = %err, "cannot follow a record tether keeps in the cluster");
                    return;
                }
            };
            let stream = this.cluster.watch_objects(
                &kind,
                Some(&this.namespace),
                Some(&format!("metadata.name={}", this.name)),
            );
            futures::pin_mut!(stream);
            loop {
                let event = tokio::select! {
                    _ = cancel.cancelled() => return,
                    event = stream.next() => event,
                };
                let data = match event {
                    None => return,
                    Some(Watched::Listed(objects)) => objects.iter().flat_map(data_of).collect(),
                    Some(Watched::Applied(object)) => data_of(&object).collect(),
                    Some(Watched::Deleted(_)) => BTreeMap::new(),
                };
                seen(data);
                if let Some(listed) = listed.take() {
                    let _ = listed.send(());
                }
            }
        });
        first_list
    }
}

/// A ConfigMap's keys with their (string) values.
fn data_of(configmap: &Value) -> impl Iterator<Item = (String, String)> + '_ {
    configmap["data"].as_object().into_iter().flat_map(|data| {
        data.iter()
            .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_the_configmap_is_an_app_with_its_value() {
        let configmap =
            json!({"data": {"web": "suspended from the API at 2026-11-24T05:00:00Z", "api": "x"}});
        let data: BTreeMap<String, String> = data_of(&configmap).collect();
        assert_eq!(data.keys().collect::<Vec<_>>(), ["api", "web"]);
        assert_eq!(data["api"], "x");
        assert_eq!(data_of(&json!({})).count(), 0);
    }
}
