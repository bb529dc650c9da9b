//! An app's inventory: the objects it applied and the revision, kept in a ConfigMap
//! `tether-inventory-<app>` so prune knows what the app owns without listing every
//! kind in the cluster. The ConfigMap's shape is pure; [`read`] and [`write`] move it.
//!
//! Crash safety rests on one rule: before a pass writes an object, the inventory
//! already names it. A pass killed halfway leaves an inventory that covers all it
//! may have written, so the next pass can still prune it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use kube::core::GroupVersionKind;
use tether_diff::manifest::{ObjectId, ObjectKey};

use crate::cluster::{Cluster, ClusterError, Resolved};
use tether_diff::manifest::ManifestSet;
use tether_schema::ownership::{
    INVENTORY_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, bookkeeping_of, inventory_name,
};

/// One entry: enough to find the object again (apiVersion included, so the object is
/// addressed as it was applied even if the kind is later served by another version).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Entry {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl Entry {
    pub fn of(id: &ObjectId) -> Entry {
        Entry {
            api_version: id.api_version(),
            kind: id.kind.clone(),
            namespace: id.namespace.clone(),
            name: id.name.clone(),
        }
    }

    pub fn id(&self) -> ObjectId {
        let (group, version) = tether_diff::manifest::split_api_version(&self.api_version);
        ObjectId {
            group,
            version,
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    pub fn key(&self) -> ObjectKey {
        self.id().key()
    }
}

/// What an app owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// The revision last applied (a commit SHA), when the source is Git.
    pub revision: Option<String>,
    pub objects: BTreeSet<Entry>,
}

/// An inventory ConfigMap that does not hold what tether writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("inventory ConfigMap {namespace}/{name}: {reason}")]
pub struct InventoryError {
    pub namespace: String,
    pub name: String,
    pub reason: String,
}

impl Inventory {
    /// This inventory grown by every object of `desired`: what a pass may own once it
    /// has written, recorded before it writes.
    pub fn covering(&self, desired: &ManifestSet) -> Inventory {
        let mut covering = self.clone();
        covering
            .objects
            .extend(desired.objects.iter().map(|m| Entry::of(&m.id)));
        covering
    }

    /// The ConfigMap to apply for `app` in `namespace`.
    pub fn to_configmap(&self, app: &str, namespace: &str) -> Value {
        let objects: Vec<&Entry> = self.objects.iter().collect();
        let mut data = serde_json::Map::new();
        data.insert("app".into(), app.into());
        if let Some(revision) = &self.revision {
            data.insert("revision".into(), revision.as_str().into());
        }
        // One entry per line: readable with kubectl, and a diff of two inventories
        // shows exactly what changed.
        let lines: Vec<String> = objects
            .iter()
            .filter_map(|e| serde_json::to_string(e).ok())
            .collect();
        data.insert("objects".into(), lines.join("\n").into());
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": inventory_name(app),
                "namespace": namespace,
                "labels": {
                    MANAGED_BY_LABEL: MANAGED_BY_VALUE,
                    INVENTORY_LABEL: app,
                },
            },
            "data": data,
        })
    }

    /// Reads an inventory ConfigMap; every malformed line is an error (a guessed
    /// inventory could prune the wrong object).
    pub fn from_configmap(configmap: &Value) -> Result<Inventory, InventoryError> {
        let error = |reason: String| InventoryError {
            namespace: configmap
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            name: configmap
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            reason,
        };
        let data = configmap.get("data");
        let field = |name: &str| data.and_then(|d| d.get(name)).and_then(Value::as_str);
        let mut objects = BTreeSet::new();
        for (n, line) in field("objects").unwrap_or_default().lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let entry: Entry = serde_json::from_str(line)
                .map_err(|e| error(format!("data.objects line {}: {e}", n + 1)))?;
            objects.insert(entry);
        }
        Ok(Inventory {
            revision: field("revision").map(str::to_string),
            objects,
        })
    }
}

/// The desired objects that are tether's own records (see
/// [`tether_schema::ownership::bookkeeping_of`]), each said with the file and document that
/// wrote it: an app's manifests may not write them.
pub fn bookkeeping_in(desired: &ManifestSet, inventory_namespace: &str) -> Vec<String> {
    desired
        .objects
        .iter()
        .filter_map(|m| {
            let id = &m.id;
            let what = bookkeeping_of(
                &id.group,
                &id.kind,
                id.namespace.as_deref(),
                &id.name,
                inventory_namespace,
            )?;
            Some(format!(
                "{}: {id} is tether's own record ({what}); an app's manifests may not write it",
                m.origin.location()
            ))
        })
        .collect()
}

/// An app's inventory as stored in the cluster; empty when it has none yet.
pub async fn read(cluster: &Cluster, app: &str, namespace: &str) -> Result<Inventory, ReadError> {
    let cluster = cluster.for_bookkeeping(namespace, &inventory_name(app));
    let kind = configmap_kind(cluster).await?;
    match cluster
        .get(&kind, Some(namespace), &inventory_name(app))
        .await?
    {
        Some(configmap) => Ok(Inventory::from_configmap(&configmap)?),
        None => Ok(Inventory::default()),
    }
}

/// Why an inventory could not be read: the cluster, or a ConfigMap tether did not
/// write (nothing is pruned from a guess).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Invalid(#[from] InventoryError),
}

/// Writes the inventory, creating its namespace the first time.
pub async fn write(
    cluster: &Cluster,
    inventory: &Inventory,
    app: &str,
    namespace: &str,
) -> Result<(), ClusterError> {
    let cluster = cluster.for_bookkeeping(namespace, &inventory_name(app));
    let kind = configmap_kind(cluster).await?;
    let configmap = inventory.to_configmap(app, namespace);
    match cluster.apply(&kind, &configmap, true).await {
        Ok(_) => Ok(()),
        Err(err) if err.is_not_found() => {
            let gvk = GroupVersionKind::gvk("", "v1", "Namespace");
            let namespace_kind = cluster
                .resolve(&gvk)
                .await?
                .ok_or_else(|| ClusterError::NotServed("Namespaces"))?;
            let object = json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": namespace,
                    "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
                },
            });
            cluster.apply(&namespace_kind, &object, true).await?;
            cluster.apply(&kind, &configmap, true).await?;
            Ok(())
        }
        Err(err) => Err(err),
    }
}

/// Deletes the inventory (the app is gone and so is everything it held).
pub async fn remove(cluster: &Cluster, app: &str, namespace: &str) -> Result<(), ClusterError> {
    let name = inventory_name(app);
    let cluster = cluster.for_bookkeeping(namespace, &name);
    let kind = configmap_kind(cluster).await?;
    cluster.delete(&kind, Some(namespace), &name, None).await
}

async fn configmap_kind(cluster: &Cluster) -> Result<Resolved, ClusterError> {
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    cluster
        .resolve(&gvk)
        .await?
        .ok_or_else(|| ClusterError::NotServed("ConfigMaps"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Entry {
        Entry {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_string),
            name: name.into(),
        }
    }

    #[test]
    fn an_inventory_survives_its_configmap() {
        let inventory = Inventory {
            revision: Some("0123abcd".into()),
            objects: [
                entry("apps/v1", "Deployment", Some("live"), "web"),
                entry("v1", "Namespace", None, "live"),
            ]
            .into(),
        };
        let cm = inventory.to_configmap("web", "tether-system");
        assert_eq!(cm["metadata"]["name"], "tether-inventory-web");
        assert_eq!(cm["metadata"]["labels"][INVENTORY_LABEL], "web");
        assert_eq!(
            cm["data"]["objects"],
            "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"namespace\":\"live\",\"name\":\"web\"}\n\
             {\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"name\":\"live\"}"
        );
        assert_eq!(Inventory::from_configmap(&cm).unwrap(), inventory);
        let id = entry("apps/v1", "Deployment", Some("live"), "web").id();
        assert_eq!((id.group.as_str(), id.version.as_str()), ("apps", "v1"));
    }

    #[test]
    fn a_configmap_without_data_is_an_empty_inventory() {
        let cm = json!({"metadata": {"name": "tether-inventory-web"}});
        assert_eq!(
            Inventory::from_configmap(&cm).unwrap(),
            Inventory::default()
        );
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_it() {
        let cm = json!({"metadata": {"name": "tether-inventory-web", "namespace": "tether-system"},
                        "data": {"objects": "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"a\"}\nnot json"}});
        let err = Inventory::from_configmap(&cm).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "inventory ConfigMap tether-system/tether-inventory-web: data.objects line 2:"
            ),
            "{err}"
        );
    }
}
