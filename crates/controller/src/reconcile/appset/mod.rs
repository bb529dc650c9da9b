//! AppSets (`appsets.tether.dev`, issue #28): Apps stamped from one template with the
//! parameter sets of generators. The pure core of the controller: an AppSet and what
//! its generators read go in ([`AppSet::desired`]), the Apps it wants come out, and
//! [`plan`] compares them with the Apps that exist. The runtime (`reconcile::runtime::
//! appsets`) fetches, lists and writes; nothing in here does I/O.
//!
//! A generated App lives in its AppSet's namespace, always: an AppSet is a tenant's
//! object, and an App's namespace is its tenant (`docs/tenancy.md`).

pub(crate) mod file;
pub(crate) mod generators;
pub(crate) mod template;

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use generators::Generator;
pub use generators::{
    CLUSTER_SECRET_LABEL, ClusterSecret, Facts, GeneratorError, GitRef, ParamSet,
};
pub use template::TemplateError;

use crate::config::{APP_GROUP, APP_KIND, APP_VERSION, AppObject, app_identity};

/// The CRD, as `charts/tether/crds/appset.yaml` ships it and `tether crd` prints it
/// after the App's.
pub const APPSET_CRD_YAML: &str = include_str!("../../../../../charts/tether/crds/appset.yaml");

pub const APPSET_KIND: &str = "AppSet";
pub const APPSET_PLURAL: &str = "appsets";

/// The label every generated App carries: its AppSet's name.
pub const APPSET_LABEL: &str = "tether.dev/appset";

/// `spec.deletionPolicy`'s default in the App CRD (`charts/tether/crds/app.yaml`).
const DEFAULT_DELETION_POLICY: &str = "Orphan";

/// What happens to a generated App whose parameter set is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Leave the App, no longer owned (the default, as Argo CD's
    /// `preserveResourcesOnDeletion`: a generator's hiccup never deletes a workload).
    Orphan,
    /// Delete the App; its own `deletionPolicy` says what becomes of its objects.
    Delete,
}

/// An AppSet, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct AppSet {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    pub generators: Vec<Generator>,
    /// `metadata` (name, labels, annotations) and `spec` of the Apps, with placeholders.
    pub template: Value,
    pub deletion: Deletion,
}

/// Why an AppSet wants no Apps this time. Each is shown on its status; nothing is
/// applied or deleted while there is one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AppSetError {
    /// The AppSet itself is wrong (a change is needed).
    #[error("{0}")]
    Spec(String),
    #[error("{0}")]
    Generator(#[from] GeneratorError),
    /// The template is no App for one parameter set (a change is needed).
    #[error("parameter set {origin}: {message}")]
    Template { origin: String, message: String },
    /// Two parameter sets render one App name (a change is needed).
    #[error("parameter sets {first} and {second} both render App {name:?}")]
    Duplicate {
        name: String,
        first: String,
        second: String,
    },
    /// An App of that name exists and is another owner's (a change is needed).
    #[error("App {name:?} ({origin}) exists and is controlled by {owner}, not by this AppSet")]
    Taken {
        name: String,
        origin: String,
        owner: String,
    },
}

impl AppSetError {
    /// The reason on the AppSet's Ready condition, named after the stage.
    pub fn reason(&self) -> &'static str {
        match self {
            AppSetError::Spec(_) => "SpecInvalid",
            AppSetError::Generator(e) if e.is_retryable() => "SourceNotReady",
            AppSetError::Generator(_) => "GeneratorFailed",
            AppSetError::Template { .. } => "TemplateInvalid",
            AppSetError::Duplicate { .. } => "DuplicateName",
            AppSetError::Taken { .. } => "AppTaken",
        }
    }

    /// Whether the next pass may succeed without a change.
    pub fn is_retryable(&self) -> bool {
        matches!(self, AppSetError::Generator(e) if e.is_retryable())
    }
}

/// One App an AppSet wants: the object to apply and the parameter set it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredApp {
    pub name: String,
    pub origin: String,
    /// The whole App object, as applied (owner reference and label included).
    pub object: Value,
}

/// An App that exists in the AppSet's namespace, as far as the plan cares.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveApp {
    pub name: String,
    pub uid: String,
    /// The `uid` of its controlling owner, if any.
    pub controller: Option<(String, String)>,
    pub object: Value,
}

impl LiveApp {
    pub fn from_object(object: &Value) -> Option<LiveApp> {
        let meta = object.get("metadata")?;
        let controller = meta["ownerReferences"].as_array().and_then(|refs| {
            refs.iter().find(|r| r["controller"] == true).map(|r| {
                (
                    r["uid"].as_str().unwrap_or_default().to_string(),
                    format!(
                        "{} {}",
                        r["kind"].as_str().unwrap_or_default(),
                        r["name"].as_str().unwrap_or_default()
                    ),
                )
            })
        });
        Some(LiveApp {
            name: meta["name"].as_str()?.to_string(),
            uid: meta["uid"].as_str().unwrap_or_default().to_string(),
            controller,
            object: object.clone(),
        })
    }
}

/// One write the plan asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Create or update (server-side apply).
    Apply(DesiredApp),
    /// Delete this incarnation of the App.
    Delete { name: String, uid: String },
    /// Drop the owner reference and the label; the App stays.
    Orphan { name: String, owners: Vec<Value> },
}

impl AppSet {
    /// Reads an AppSet object as the API server returns it; errors name the field.
    pub fn from_object(object: &Value) -> Result<AppSet, AppSetError> {
        let meta = &object["metadata"];
        let text = |key: &str| meta[key].as_str().unwrap_or_default().to_string();
        let (namespace, name) = (text("namespace"), text("name"));
        if namespace.is_empty() || name.is_empty() {
            return Err(AppSetError::Spec(
                "an AppSet needs metadata.namespace and metadata.name".into(),
            ));
        }
        let spec = &object["spec"];
        let generators = match spec["generators"].as_array() {
            Some(list) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, g)| Generator::parse(g, &format!("spec.generators[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| AppSetError::Spec(e.to_string()))?,
            _ => {
                return Err(AppSetError::Spec(
                    "spec.generators: needs at least one generator".into(),
                ));
            }
        };
        let template = spec["template"].clone();
        if !template["spec"].is_object() || !template["metadata"]["name"].is_string() {
            return Err(AppSetError::Spec(
                "spec.template: needs metadata.name and spec (an App's spec)".into(),
            ));
        }
        if template["metadata"].get("namespace").is_some() {
            return Err(AppSetError::Spec(
                "spec.template.metadata.namespace: an AppSet's Apps are in its own namespace"
                    .into(),
            ));
        }
        let deletion = match spec["syncPolicy"]["deletion"].as_str() {
            None | Some("orphan") => Deletion::Orphan,
            Some("delete") => Deletion::Delete,
            Some(other) => {
                return Err(AppSetError::Spec(format!(
                    "spec.syncPolicy.deletion: {other:?} is neither orphan nor delete"
                )));
            }
        };
        Ok(AppSet {
            uid: text("uid"),
            generation: meta["generation"].as_i64().unwrap_or(0),
            namespace,
            name,
            generators,
            template,
            deletion,
        })
    }

    /// `<namespace>.<name>`, as an App's identity: who writes for it (leader, shard).
    pub fn identity(&self) -> String {
        app_identity(&self.namespace, &self.name)
    }

    /// The repositories its generators read.
    pub fn git_refs(&self) -> Vec<GitRef> {
        let mut refs = Vec::new();
        self.generators.iter().for_each(|g| g.git_refs(&mut refs));
        refs
    }

    pub fn reads_clusters(&self) -> bool {
        self.generators.iter().any(Generator::reads_clusters)
    }

    /// Every parameter set of every generator, in order.
    pub fn parameter_sets(&self, facts: &Facts) -> Result<Vec<ParamSet>, AppSetError> {
        let mut sets = Vec::new();
        for g in &self.generators {
            sets.extend(g.generate(facts)?);
        }
        Ok(sets)
    }

    /// The Apps the AppSet wants, each checked as tether checks an App; all or none.
    pub fn desired(&self, facts: &Facts) -> Result<Vec<DesiredApp>, AppSetError> {
        let mut apps: Vec<DesiredApp> = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for set in self.parameter_sets(facts)? {
            let app = self.render(&set)?;
            if let Some(&i) = seen.get(&app.name) {
                return Err(AppSetError::Duplicate {
                    name: app.name,
                    first: apps[i].origin.clone(),
                    second: set.origin,
                });
            }
            seen.insert(app.name.clone(), apps.len());
            apps.push(app);
        }
        Ok(apps)
    }

    /// One App from one parameter set.
    fn render(&self, set: &ParamSet) -> Result<DesiredApp, AppSetError> {
        let invalid = |message: String| AppSetError::Template {
            origin: set.origin.clone(),
            message,
        };
        let (name, rendered, mut spec) = self.rendered(set)?;
        // The CRD's default, written out: the live App then equals what was applied,
        // and an unchanged App is never written again.
        if let Value::Object(s) = &mut spec {
            s.entry("deletionPolicy")
                .or_insert_with(|| DEFAULT_DELETION_POLICY.into());
        }
        let mut labels: BTreeMap<String, Value> = match &rendered["metadata"]["labels"] {
            Value::Object(map) => map.clone().into_iter().collect(),
            _ => BTreeMap::new(),
        };
        labels.insert(APPSET_LABEL.into(), self.name.clone().into());
        let mut metadata = json!({
            "name": name,
            "namespace": self.namespace,
            "labels": labels,
            "ownerReferences": [self.owner_reference()],
        });
        if let Some(annotations) = rendered["metadata"].get("annotations") {
            metadata["annotations"] = annotations.clone();
        }
        let object = json!({
            "apiVersion": format!("{APP_GROUP}/{APP_VERSION}"),
            "kind": APP_KIND,
            "metadata": metadata,
            "spec": spec,
        });
        // Checked by the code that reads Apps: what it would refuse is refused here.
        let read = AppObject::from_object(&object).map_err(&invalid)?;
        read.config.map_err(invalid)?;
        Ok(DesiredApp {
            name,
            origin: set.origin.clone(),
            object,
        })
    }

    /// The template rendered with one parameter set: the App's name (checked), its
    /// rendered metadata and its spec, sent to the set's cluster when it came from one.
    /// Shared by AppSet objects and the configuration file's `appSets`.
    fn rendered(&self, set: &ParamSet) -> Result<(String, Value, Value), AppSetError> {
        let invalid = |message: String| AppSetError::Template {
            origin: set.origin.clone(),
            message,
        };
        let rendered = template::render(&self.template, &set.values, "spec.template")
            .map_err(|e| invalid(e.to_string()))?;
        let name = rendered["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !is_dns_subdomain(&name) {
            return Err(invalid(format!(
                "metadata.name {name:?} is not a valid name (lower-case letters, digits, '-' and '.', at most 253)"
            )));
        }
        let mut spec = rendered["spec"].clone();
        // A cluster's App syncs to that cluster, unless the template says where.
        if let Some(secret) = &set.cluster {
            if spec.pointer("/destination/kubeConfig").is_none() {
                let destination = spec
                    .as_object_mut()
                    .map(|s| s.entry("destination").or_insert_with(|| json!({})));
                if let Some(Value::Object(d)) = destination {
                    d.insert("kubeConfig".into(), json!({"secretRef": {"name": secret}}));
                }
            }
        }
        Ok((name, rendered, spec))
    }

    /// The reference that makes the AppSet a generated App's controller.
    fn owner_reference(&self) -> Value {
        json!({
            "apiVersion": format!("{APP_GROUP}/{APP_VERSION}"),
            "kind": APPSET_KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }

    /// Whether `app` is this AppSet's (its controlling owner is this AppSet's uid).
    fn owns(&self, app: &LiveApp) -> bool {
        app.controller
            .as_ref()
            .is_some_and(|(uid, _)| *uid == self.uid)
    }
}

/// The writes that take the namespace's Apps (`live`) to `desired`: applies for what
/// is missing or drifted, deletions or orphanings for this AppSet's Apps no parameter
/// set wants any more. An App of that name controlled by another owner stops it all.
pub fn plan(
    appset: &AppSet,
    desired: Vec<DesiredApp>,
    live: &[LiveApp],
) -> Result<Vec<Change>, AppSetError> {
    let by_name: HashMap<&str, &LiveApp> = live.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut changes = Vec::new();
    let wanted: std::collections::HashSet<String> =
        desired.iter().map(|d| d.name.clone()).collect();
    for mut app in desired {
        let existing = by_name.get(app.name.as_str());
        if let Some(existing) = existing {
            keep_suspension(&mut app.object, &existing.object);
        }
        match existing {
            Some(existing) if !appset.owns(existing) => {
                if let Some((_, owner)) = &existing.controller {
                    return Err(AppSetError::Taken {
                        name: app.name,
                        origin: app.origin,
                        owner: owner.clone(),
                    });
                }
                // No controller: adopted (an App this AppSet orphaned earlier, or one
                // written by hand before it), as Argo CD's ApplicationSet does.
                changes.push(Change::Apply(app));
            }
            Some(existing) if !drifted(&app.object, &existing.object) => {}
            _ => changes.push(Change::Apply(app)),
        }
    }
    for app in live
        .iter()
        .filter(|a| appset.owns(a) && !wanted.contains(&a.name))
    {
        changes.push(match appset.deletion {
            Deletion::Delete => Change::Delete {
                name: app.name.clone(),
                uid: app.uid.clone(),
            },
            Deletion::Orphan => Change::Orphan {
                name: app.name.clone(),
                owners: app.object["metadata"]["ownerReferences"]
                    .as_array()
                    .map(|refs| {
                        refs.iter()
                            .filter(|r| r["uid"] != appset.uid.as_str())
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default(),
            },
        });
    }
    Ok(changes)
}

/// A generated App suspended (or resumed) through tether's API keeps its `spec.suspend`
/// (server-side applied as `tether`, the AppSet's own field manager, so an apply
/// without it would remove it) unless the template sets one: a person's Suspend is
/// neither drift nor undone by the AppSet's next pass.
fn keep_suspension(desired: &mut Value, live: &Value) {
    let Some(suspend) = live["spec"].get("suspend") else {
        return;
    };
    if let Value::Object(spec) = &mut desired["spec"] {
        spec.entry("suspend").or_insert_with(|| suspend.clone());
    }
}

/// Whether the live App differs from what would be applied: its spec, or a label,
/// annotation or owner reference the AppSet sets. Never write what has not drifted.
fn drifted(desired: &Value, live: &Value) -> bool {
    if desired["spec"] != live["spec"] {
        return true;
    }
    let subset = |key: &str| match (&desired["metadata"][key], &live["metadata"][key]) {
        (Value::Object(want), Value::Object(have)) => {
            want.iter().any(|(k, v)| have.get(k) != Some(v))
        }
        (Value::Object(want), _) => !want.is_empty(),
        _ => false,
    };
    let owners = |v: &Value| {
        v["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let owned = owners(desired).iter().all(|want| {
        owners(live)
            .iter()
            .any(|have| have["uid"] == want["uid"] && have["controller"] == true)
    });
    subset("labels") || subset("annotations") || !owned
}

/// A DNS-1123 subdomain, as Kubernetes wants an object's name.
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests;
