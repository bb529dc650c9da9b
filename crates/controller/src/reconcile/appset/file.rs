//! The configuration file's `appSets` (issue #28): the same AppSet as the CRD's (one
//! parser of generators, one template stage), stamping file apps instead of App
//! objects. Pure: [`generate`] is the configuration's [`crate::config::Generate`]
//! for given generator inputs ([`Facts`]), and records what those inputs are
//! ([`Reads`]) so the service can fetch them and follow them.
//!
//! An item is the AppSet CRD's spec with a name: `name`, `generators`, `template`
//! (`metadata.name` and `spec`, the keys of an `apps` entry), `syncPolicy.deletion`.
//! Its generators read the inventory namespace's Secrets (Git credentials, cluster
//! kubeconfigs), as the file's apps do.

use serde_json::{Value, json};

use super::{AppSet, AppSetError, Deletion, Facts, GitRef};
use crate::config::Generated;

/// The keys of an `appSets` item.
const ITEM_KEYS: &[&str] = &["name", "generators", "template", "syncPolicy"];

/// What the file's AppSets read, collected as they are expanded.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reads {
    /// Every repository at every revision a Git generator names.
    pub git: Vec<GitRef>,
    /// The namespace whose cluster Secrets a `clusters` generator lists, if one does.
    pub clusters: Option<String>,
}

/// The apps one `appSets` item generates from `facts`; what it reads goes to `reads`
/// even when it fails (a tree not fetched yet is how the service learns to fetch it).
pub fn generate(
    namespace: &str,
    item: &Value,
    facts: &Facts,
    reads: &mut Reads,
) -> Result<Vec<Generated>, String> {
    let appset = parse(namespace, item)?;
    for git in appset.git_refs() {
        if !reads.git.contains(&git) {
            reads.git.push(git);
        }
    }
    if appset.reads_clusters() {
        reads.clusters = Some(namespace.to_string());
    }
    let sets = appset
        .parameter_sets(facts)
        .map_err(|e| respell(&e.to_string()))?;
    let prune = appset.deletion == Deletion::Delete;
    sets.iter()
        .map(|set| {
            let (name, _, spec) = appset.rendered(set).map_err(|e| respell(&e.to_string()))?;
            let Value::Object(mut entry) = spec else {
                return Err(respell(
                    &AppSetError::Template {
                        origin: set.origin.clone(),
                        message: "spec.template.spec: must be a mapping".into(),
                    }
                    .to_string(),
                ));
            };
            entry.insert("name".into(), Value::String(name));
            Ok(Generated {
                origin: set.origin.clone(),
                entry: Value::Object(entry),
                prune,
            })
        })
        .collect()
}

/// An item read as an AppSet by the CRD's own reader; errors name the item's field.
fn parse(namespace: &str, item: &Value) -> Result<AppSet, String> {
    let Value::Object(fields) = item else {
        return Err("must be a mapping (name, generators, template, syncPolicy)".into());
    };
    if let Some(unknown) = fields.keys().find(|k| !ITEM_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "{unknown}: unknown key (an item has {})",
            ITEM_KEYS.join(", ")
        ));
    }
    let name = match item["name"].as_str() {
        Some(name) if !name.is_empty() => name,
        _ => return Err("name: required".into()),
    };
    // A file app is its entry and a name: an App object's labels mean nothing here.
    if let Some(key) = item["template"]["metadata"]
        .as_object()
        .and_then(|m| m.keys().find(|k| *k != "name"))
    {
        return Err(format!(
            "template.metadata.{key}: a file app has only a name (labels and annotations are an App object's)"
        ));
    }
    let object = json!({
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "generators": item["generators"],
            "template": item["template"],
            "syncPolicy": item["syncPolicy"],
        },
    });
    AppSet::from_object(&object).map_err(|e| respell(&e.to_string()))
}

/// The CRD reader names fields under `spec.`; an item has them at its top.
fn respell(message: &str) -> String {
    ["generators", "template", "syncPolicy"]
        .iter()
        .fold(message.to_string(), |m, key| {
            m.replace(&format!("spec.{key}"), key)
        })
}

#[cfg(test)]
mod tests;
