//! The variables of a pass's post-build substitution: an app's inline `postBuild`
//! variables, then each `substituteFrom` ConfigMap's and Secret's data in order (a
//! later one wins, as in Flux), read at the start of every pass with the app's own
//! identity. Their digest joins the revision's identity ([`revision_id`]): a changed
//! variable is a new desired state (rendered again, applied even with self-heal off),
//! and a revision stalled on an undefined variable is tried again once one is defined.
//! Values may be a Secret's: no error names one.

use serde_json::Value;

use crate::config::{AppConfig, VariablesFrom, VariablesKind};
use kube::core::GroupVersionKind;
use tether_core::cluster::{Cluster, ClusterError};
use tether_diff::manifest::substitute::Substitution;

/// Why the variables could not be read. Each is worth retrying: the object may be
/// created or fixed, which moves no source, so only a later pass sees it.
#[derive(Debug, thiserror::Error)]
pub enum VariablesError {
    #[error(
        "postBuild.substituteFrom[{index}]: {kind} {namespace}/{name} not found (set optional: true if it may be absent)"
    )]
    Missing {
        index: usize,
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("postBuild.substituteFrom[{index}]: {kind} {namespace}/{name}: {message}")]
    Invalid {
        index: usize,
        kind: &'static str,
        namespace: String,
        name: String,
        message: String,
    },
    #[error("postBuild.substituteFrom[{index}]: reading {kind} {namespace}/{name}: {source}")]
    Cluster {
        index: usize,
        kind: &'static str,
        namespace: String,
        name: String,
        /// Boxed: keeps the error small enough to return by value.
        #[source]
        source: Box<ClusterError>,
    },
}

/// The pass's substitution, None when the app has no `postBuild`. The ConfigMaps
/// and Secrets are the App's namespace's, or for an entry of the configuration file
/// those of `inventory_namespace` (tether's own), as its other Secrets are.
pub async fn read(
    cluster: &Cluster,
    app: &AppConfig,
    inventory_namespace: &str,
) -> Result<Option<Substitution>, VariablesError> {
    let Some(post_build) = &app.post_build else {
        return Ok(None);
    };
    let namespace = app
        .tenant_namespace
        .as_deref()
        .unwrap_or(inventory_namespace);
    let mut substitution = post_build.inline();
    for (index, from) in post_build.substitute_from.iter().enumerate() {
        let place = Place {
            index,
            kind: from.kind.as_str(),
            namespace,
            name: &from.name,
        };
        let Some(data) = read_data(cluster, from, &place).await? else {
            if from.optional {
                continue;
            }
            return Err(place.missing());
        };
        let origin = format!("{} {namespace}/{}", place.kind, from.name);
        for (key, value) in data {
            substitution
                .define(&key, &value, &origin)
                .map_err(|e| place.invalid(e.to_string()))?;
        }
    }
    Ok(Some(substitution))
}

/// The identity of what a pass renders: the commit, and the variables' digest when
/// the app substitutes (`<sha>+vars.<digest>`).
pub fn revision_id(sha: &str, variables: Option<&Substitution>) -> String {
    match variables {
        Some(v) => format!("{sha}+vars.{}", v.digest()),
        None => sha.to_string(),
    }
}

/// The commit a [`revision_id`] names.
pub fn revision_sha(id: &str) -> &str {
    id.split_once('+').map_or(id, |(sha, _)| sha)
}

/// Which `substituteFrom` entry an error is about.
struct Place<'a> {
    index: usize,
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
}

impl Place<'_> {
    fn missing(&self) -> VariablesError {
        VariablesError::Missing {
            index: self.index,
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
        }
    }

    fn invalid(&self, message: String) -> VariablesError {
        VariablesError::Invalid {
            index: self.index,
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            message,
        }
    }

    fn cluster(&self, source: ClusterError) -> VariablesError {
        VariablesError::Cluster {
            index: self.index,
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            source: Box::new(source),
        }
    }
}

/// The object's `data` as text, or None when it does not exist.
async fn read_data(
    cluster: &Cluster,
    from: &VariablesFrom,
    place: &Place<'_>,
) -> Result<Option<Vec<(String, String)>>, VariablesError> {
    let Some(data) = object_data(cluster, from.kind, place.namespace, place.name)
        .await
        .map_err(|e| place.cluster(e))?
    else {
        return Ok(None);
    };
    data.into_iter()
        .map(|(key, bytes)| match String::from_utf8(bytes) {
            Ok(text) => Ok((key, text)),
            Err(_) => Err(place.invalid(format!("key {key} is not UTF-8 text"))),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A ConfigMap's `data` or a Secret's (decoded), read with the app's identity, or
/// None when it does not exist: what `substituteFrom` and `valuesFrom` read.
pub(crate) async fn object_data(
    cluster: &Cluster,
    kind: VariablesKind,
    namespace: &str,
    name: &str,
) -> Result<Option<Vec<(String, Vec<u8>)>>, ClusterError> {
    match kind {
        VariablesKind::Secret => Ok(cluster
            .secret_data(namespace, name)
            .await?
            .map(|data| data.into_iter().collect())),
        VariablesKind::ConfigMap => {
            let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
            let kind = cluster
                .resolve(&gvk)
                .await?
                .ok_or_else(|| ClusterError::NotServed("ConfigMaps"))?;
            let object = cluster.get(&kind, Some(namespace), name).await?;
            Ok(object.map(|o| {
                o.get("data")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().unwrap_or_default().as_bytes().to_vec(),
                        )
                    })
                    .collect()
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_id_names_its_commit_and_variables() {
        let sha = "a".repeat(40);
        assert_eq!(revision_id(&sha, None), sha);
        let mut vars = Substitution::new(true);
        vars.define("cluster", "prod", "t").unwrap();
        let id = revision_id(&sha, Some(&vars));
        assert!(id.starts_with(&format!("{sha}+vars.")), "{id}");
        assert_eq!(revision_sha(&id), sha);
        assert_eq!(revision_sha(&sha), sha);
        vars.define("cluster", "dev", "t").unwrap();
        assert_ne!(revision_id(&sha, Some(&vars)), id);
    }
}
