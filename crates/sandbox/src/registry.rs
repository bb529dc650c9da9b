//! What the sandbox serves: the built-in resources (from discovery documents recorded
//! from a real kube-apiserver 1.36) and the resources of the CRDs created at run time.
//! Discovery answers are rendered from here.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::store::ResourceKey;

/// The group versions built in, with their recorded discovery documents.
const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "",
        "v1",
        include_str!("../../../assets/discovery/api_v1.json"),
    ),
    (
        "apps",
        "v1",
        include_str!("../../../assets/discovery/apis_apps_v1.json"),
    ),
    (
        "batch",
        "v1",
        include_str!("../../../assets/discovery/apis_batch_v1.json"),
    ),
    (
        "autoscaling",
        "v2",
        include_str!("../../../assets/discovery/apis_autoscaling_v2.json"),
    ),
    // Not recorded as resource lists either: written from the recorded aggregated
    // discovery. Both kinds are stored in another version (see `conversion`).
    (
        "autoscaling",
        "v1",
        include_str!("../../../assets/discovery/apis_autoscaling_v1.json"),
    ),
    (
        "events.k8s.io",
        "v1",
        include_str!("../../../assets/discovery/apis_events.k8s.io_v1.json"),
    ),
    (
        "networking.k8s.io",
        "v1",
        include_str!("../../../assets/discovery/apis_networking.k8s.io_v1.json"),
    ),
    (
        "policy",
        "v1",
        include_str!("../../../assets/discovery/apis_policy_v1.json"),
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        include_str!("../../../assets/discovery/apis_rbac.authorization.k8s.io_v1.json"),
    ),
    (
        "coordination.k8s.io",
        "v1",
        include_str!("../../../assets/discovery/apis_coordination.k8s.io_v1.json"),
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        include_str!("../../../assets/discovery/apis_apiextensions.k8s.io_v1.json"),
    ),
    // Not recorded as resource lists: written from the recorded aggregated discovery
    // (`aggregated-apis.json`), which lists the same resources. Reviews are answered,
    // never stored (see `api::access_review`).
    (
        "authorization.k8s.io",
        "v1",
        include_str!("../../../assets/discovery/apis_authorization.k8s.io_v1.json"),
    ),
    (
        "authentication.k8s.io",
        "v1",
        include_str!("../../../assets/discovery/apis_authentication.k8s.io_v1.json"),
    ),
];

const GROUP_LIST: &str = include_str!("../../../assets/discovery/apis.json");

/// Aggregated discovery (`apidiscovery.k8s.io/v2`), which kubectl asks for first.
const AGGREGATED_LEGACY: &str = include_str!("../../../assets/discovery/aggregated-api.json");
const AGGREGATED_GROUPS: &str = include_str!("../../../assets/discovery/aggregated-apis.json");

/// The content type of an aggregated discovery answer; clients that do not see it fall
/// back to one request per group version.
pub(crate) const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// One resource the sandbox serves, in one version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResourceType {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) namespaced: bool,
    pub(crate) verbs: Vec<String>,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) has_status: bool,
    pub(crate) has_scale: bool,
    /// Served for a CustomResourceDefinition.
    pub(crate) custom: bool,
}

/// The group and version a served kind is stored in, when it is not its own.
pub(crate) fn storage_version(
    group: &str,
    version: &str,
    kind: &str,
) -> Option<(&'static str, &'static str)> {
    match (group, version, kind) {
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => Some(("autoscaling", "v2")),
        ("events.k8s.io", "v1", "Event") => Some(("", "v1")),
        _ => None,
    }
}

/// The group whose storage a resource shares: events.k8s.io Events are core Events.
pub(crate) fn storage_group<'a>(group: &'a str, plural: &str) -> &'a str {
    match (group, plural) {
        ("events.k8s.io", "events") => "",
        _ => group,
    }
}

impl ResourceType {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Where its objects are stored: events.k8s.io Events share core Events' storage.
    pub(crate) fn key(&self) -> ResourceKey {
        ResourceKey {
            group: storage_group(&self.group, &self.plural).to_string(),
            resource: self.plural.clone(),
        }
    }

    pub(crate) fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub(crate) fn is(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }

    /// The short names and categories both discovery documents list, when there are any.
    fn add_names(&self, entry: &mut Value) {
        if !self.short_names.is_empty() {
            entry["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            entry["categories"] = json!(self.categories);
        }
    }

    /// The `APIResourceDiscovery` of this resource in aggregated discovery.
    fn aggregated_entry(&self) -> Value {
        let mut entry = json!({
            "resource": self.plural,
            "responseKind": {"group": "", "version": "", "kind": self.kind},
            "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": self.singular,
            "verbs": self.verbs,
        });
        self.add_names(&mut entry);
        let mut subresources = Vec::new();
        if self.has_scale {
            subresources.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
        }
        if self.has_status {
            subresources.push(json!({"subresource": "status", "responseKind": {"group": "", "version": "", "kind": self.kind}, "verbs": ["get", "patch", "update"]}));
        }
        if !subresources.is_empty() {
            entry["subresources"] = json!(subresources);
        }
        entry
    }

    /// The `APIResource` entries of this resource in an `APIResourceList`.
    fn discovery_entries(&self) -> Vec<Value> {
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": self.verbs,
        });
        self.add_names(&mut main);
        let mut entries = vec![main];
        if self.has_status {
            entries.push(json!({"name": format!("{}/status", self.plural), "singularName": "", "namespaced": self.namespaced, "kind": self.kind, "verbs": ["get", "patch", "update"]}));
        }
        if self.has_scale {
            entries.push(json!({"name": format!("{}/scale", self.plural), "singularName": "", "namespaced": self.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        entries
    }
}

/// The resources of one CRD, as created: every served version.
#[derive(Debug, Clone)]
pub(crate) struct CustomResource {
    pub(crate) types: Vec<Arc<ResourceType>>,
    /// The storage-independent schemas, by version, for OpenAPI documents and apply.
    pub(crate) schemas: BTreeMap<String, Value>,
    /// The `additionalPrinterColumns` of each version that declares them, for Tables.
    pub(crate) printer_columns: BTreeMap<String, Value>,
}

#[derive(Debug, Clone)]
pub(crate) struct Registry {
    builtin_documents: BTreeMap<(String, String), Value>,
    builtin: Vec<Arc<ResourceType>>,
    /// CRDs by their name (`<plural>.<group>`).
    custom: BTreeMap<String, CustomResource>,
}

impl Registry {
    pub(crate) fn builtin() -> Registry {
        let mut builtin_documents = BTreeMap::new();
        let mut builtin = Vec::new();
        for (group, version, document) in BUILTIN {
            let document: Value = serde_json::from_str(document).unwrap_or(Value::Null);
            builtin.extend(types_from_document(group, version, &document));
            builtin_documents.insert((group.to_string(), version.to_string()), document);
        }
        Registry {
            builtin_documents,
            builtin,
            custom: BTreeMap::new(),
        }
    }

    /// Every resource type served, built-in and custom.
    pub(crate) fn all_types(&self) -> Vec<Arc<ResourceType>> {
        self.all().cloned().collect()
    }

    fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.builtin
            .iter()
            .chain(self.custom.values().flat_map(|c| c.types.iter()))
    }

    /// The resource served at `/{group}/{version}/{plural}`.
    pub(crate) fn find(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceType>> {
        self.served(group, version, plural).cloned()
    }

    fn served(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        self.all()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// Whether a resource is served for a custom resource definition (None: not served),
    /// without copying it out: asked of every request that names protobuf.
    pub(crate) fn is_custom(&self, group: &str, version: &str, plural: &str) -> Option<bool> {
        self.served(group, version, plural).map(|t| t.custom)
    }

    /// The resource of a kind, in a version.
    pub(crate) fn by_kind(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Option<Arc<ResourceType>> {
        self.all()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .cloned()
    }

    /// The schema a CRD declares for one of its versions.
    pub(crate) fn custom_schema(&self, group: &str, version: &str, kind: &str) -> Option<&Value> {
        self.custom
            .values()
            .find(|c| c.types.iter().any(|t| t.group == group && t.kind == kind))?
            .schemas
            .get(version)
    }

    /// The printer columns a CRD declares for the version a resource is served in.
    pub(crate) fn printer_columns(&self, resource: &ResourceType) -> Option<Value> {
        if !resource.custom {
            return None;
        }
        self.custom
            .values()
            .find(|c| c.types.iter().any(|t| **t == *resource))?
            .printer_columns
            .get(&resource.version)
            .cloned()
    }

    /// Serves a CRD's resources (replacing what an earlier version of it served).
    pub(crate) fn add_custom(&mut self, crd_name: &str, resource: CustomResource) {
        self.custom.insert(crd_name.to_string(), resource);
    }

    /// Stops serving a CRD's resources; returns what it served.
    pub(crate) fn remove_custom(&mut self, crd_name: &str) -> Option<CustomResource> {
        self.custom.remove(crd_name)
    }

    /// `GET /api`.
    pub(crate) fn api_versions(server_address: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        })
    }

    /// `GET /api/v1` or `GET /apis/{group}/{version}`.
    pub(crate) fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        if let Some(document) = self
            .builtin_documents
            .get(&(group.to_string(), version.to_string()))
        {
            return Some(document.clone());
        }
        let types: Vec<_> = self
            .custom
            .values()
            .flat_map(|c| c.types.iter())
            .filter(|t| t.group == group && t.version == version)
            .collect();
        if types.is_empty() {
            return None;
        }
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": api_version,
            "resources": types.iter().flat_map(|t| t.discovery_entries()).collect::<Vec<_>>(),
        }))
    }

    /// `GET /apis`: the recorded group list, narrowed to the groups served here, plus
    /// the groups of CRDs.
    pub(crate) fn group_list(&self) -> Value {
        let recorded: Value = serde_json::from_str(GROUP_LIST).unwrap_or(Value::Null);
        let mut groups: Vec<Value> = recorded["groups"]
            .as_array()
            .map(|groups| {
                groups
                    .iter()
                    .filter(|g| {
                        let name = g["name"].as_str().unwrap_or_default();
                        self.builtin.iter().any(|t| t.group == name)
                    })
                    .map(|g| self.narrow_group(g))
                    .collect()
            })
            .unwrap_or_default();
        let mut custom_groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for t in self.custom.values().flat_map(|c| c.types.iter()) {
            let versions = custom_groups.entry(&t.group).or_default();
            if !versions.contains(&t.version.as_str()) {
                versions.push(&t.version);
            }
        }
        for (group, versions) in custom_groups {
            if self.builtin.iter().any(|t| t.group == group) {
                continue;
            }
            groups.push(group_document(group, &versions));
        }
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `GET /api` or `GET /apis` as an `APIGroupDiscoveryList`: the recorded built-in
    /// groups narrowed to those served here, plus the groups of CRDs.
    pub(crate) fn aggregated(&self, legacy: bool) -> Value {
        let recorded: Value = serde_json::from_str(if legacy {
            AGGREGATED_LEGACY
        } else {
            AGGREGATED_GROUPS
        })
        .unwrap_or(Value::Null);
        let mut items: Vec<Value> = recorded["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| {
                        let group = if legacy {
                            ""
                        } else {
                            item["metadata"]["name"].as_str().unwrap_or_default()
                        };
                        let mut item = item.clone();
                        let versions = item.get_mut("versions")?.as_array_mut()?;
                        versions.retain(|v| {
                            let version = v["version"].as_str().unwrap_or_default().to_string();
                            self.builtin_documents
                                .contains_key(&(group.to_string(), version))
                        });
                        (!versions.is_empty()).then_some(item)
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !legacy {
            let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<&ResourceType>>> = BTreeMap::new();
            for t in self.custom.values().flat_map(|c| c.types.iter()) {
                groups
                    .entry(&t.group)
                    .or_default()
                    .entry(&t.version)
                    .or_default()
                    .push(t);
            }
            for (group, versions) in groups {
                let versions: Vec<Value> = versions
                    .into_iter()
                    .map(|(version, types)| {
                        json!({
                            "version": version,
                            "resources": types.iter().map(|t| t.aggregated_entry()).collect::<Vec<_>>(),
                            "freshness": "Current",
                        })
                    })
                    .collect();
                items.push(json!({"metadata": {"name": group}, "versions": versions}));
            }
        }
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
    }

    /// Keeps only the versions of a recorded group that are served here.
    fn narrow_group(&self, group: &Value) -> Value {
        let name = group["name"].as_str().unwrap_or_default();
        let mut group = group.clone();
        if let Some(versions) = group.get_mut("versions").and_then(Value::as_array_mut) {
            versions.retain(|v| {
                self.builtin_documents.contains_key(&(
                    name.to_string(),
                    v["version"].as_str().unwrap_or_default().to_string(),
                ))
            });
            if let Some(first) = versions.first().cloned() {
                group["preferredVersion"] = first;
            }
        }
        group
    }

    /// `GET /apis/{group}`.
    pub(crate) fn group(&self, group: &str) -> Option<Value> {
        let list = self.group_list();
        let mut found = list["groups"]
            .as_array()?
            .iter()
            .find(|g| g["name"] == group)?
            .clone();
        let object = found.as_object_mut()?;
        let mut with_kind = serde_json::Map::new();
        with_kind.insert("kind".into(), "APIGroup".into());
        with_kind.insert("apiVersion".into(), "v1".into());
        with_kind.extend(std::mem::take(object));
        Some(Value::Object(with_kind))
    }

    /// The group versions served, for the OpenAPI index.
    pub(crate) fn custom_group_versions(&self) -> Vec<(String, String)> {
        let mut gvs: Vec<(String, String)> = self
            .custom
            .values()
            .flat_map(|c| c.types.iter())
            .map(|t| (t.group.clone(), t.version.clone()))
            .collect();
        gvs.sort();
        gvs.dedup();
        gvs
    }

    /// The CRD-served types of one group version.
    pub(crate) fn custom_types(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.custom
            .values()
            .flat_map(|c| c.types.iter())
            .filter(|t| t.group == group && t.version == version)
            .cloned()
            .collect()
    }
}

fn group_document(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions.first().cloned().unwrap_or(Value::Null)})
}

/// Reads the resources of a recorded `APIResourceList`, folding `x/status` and
/// `x/scale` entries into their main resource.
fn types_from_document(group: &str, version: &str, document: &Value) -> Vec<Arc<ResourceType>> {
    let resources = document["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = resources
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    resources
        .iter()
        .filter(|r| r["name"].as_str().is_some_and(|n| !n.contains('/')))
        .map(|r| {
            let plural = r["name"].as_str().unwrap_or_default().to_string();
            let strings = |field: &str| crate::strings(r.get(field));
            Arc::new(ResourceType {
                group: group.to_string(),
                version: version.to_string(),
                kind: r["kind"].as_str().unwrap_or_default().to_string(),
                singular: r["singularName"].as_str().unwrap_or_default().to_string(),
                namespaced: r["namespaced"].as_bool().unwrap_or(false),
                verbs: strings("verbs"),
                short_names: strings("shortNames"),
                categories: strings("categories"),
                has_status: names.contains(&format!("{plural}/status").as_str()),
                has_scale: names.contains(&format!("{plural}/scale").as_str()),
                custom: false,
                plural,
            })
        })
        .collect()
}

/// The resource types a CRD object declares (every served version).
pub(crate) fn custom_resource_of(crd: &Value) -> Option<CustomResource> {
    let spec = crd.get("spec")?;
    let group = spec["group"].as_str()?;
    let names = &spec["names"];
    let plural = names["plural"].as_str()?;
    let kind = names["kind"].as_str()?;
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let strings = |value: &Value| crate::strings(Some(value));
    let mut types = Vec::new();
    let mut schemas = BTreeMap::new();
    let mut printer_columns = BTreeMap::new();
    for version in spec["versions"].as_array()? {
        if version["served"].as_bool() != Some(true) {
            continue;
        }
        let name = version["name"].as_str()?;
        let subresources = &version["subresources"];
        types.push(Arc::new(ResourceType {
            group: group.to_string(),
            version: name.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
            singular: singular.clone(),
            namespaced,
            verbs: [
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "create",
                "update",
                "watch",
            ]
            .map(str::to_string)
            .to_vec(),
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            has_status: subresources.get("status").is_some(),
            has_scale: subresources.get("scale").is_some(),
            custom: true,
        }));
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            schemas.insert(name.to_string(), schema.clone());
        }
        if let Some(columns) = version.get("additionalPrinterColumns") {
            printer_columns.insert(name.to_string(), columns.clone());
        }
    }
    Some(CustomResource {
        types,
        schemas,
        printer_columns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_resources_fold_subresources() {
        let registry = Registry::builtin();
        let deployments = registry
            .find("apps", "v1", "deployments")
            .expect("deployments are served");
        assert_eq!(deployments.kind, "Deployment");
        assert!(deployments.namespaced && deployments.has_status && deployments.has_scale);
        assert_eq!(deployments.short_names, ["deploy"]);
        let namespaces = registry
            .by_kind("", "v1", "Namespace")
            .expect("namespaces are served");
        assert!(!namespaces.namespaced && namespaces.has_status && !namespaces.has_scale);
        assert!(registry.find("apps", "v1", "deployments/status").is_none());
    }

    #[test]
    fn group_list_only_names_served_groups() {
        let registry = Registry::builtin();
        let groups = registry.group_list();
        let names: Vec<&str> = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"apps") && names.contains(&"apiextensions.k8s.io"));
        assert!(
            !names.contains(&"storage.k8s.io"),
            "no documents are served for storage.k8s.io"
        );
        let autoscaling = registry.group("autoscaling").unwrap();
        assert_eq!(autoscaling["kind"], "APIGroup");
        assert_eq!(autoscaling["versions"].as_array().unwrap().len(), 2);
        assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
    }

    #[test]
    fn aggregated_discovery_narrows_to_served_groups_and_adds_crds() {
        let mut registry = Registry::builtin();
        let legacy = registry.aggregated(true);
        assert_eq!(legacy["items"][0]["versions"][0]["version"], "v1");
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        registry.add_custom("widgets.example.com", custom_resource_of(&crd).unwrap());
        let groups = registry.aggregated(false);
        let names: Vec<&str> = groups["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"apps") && names.contains(&"example.com"));
        assert!(!names.contains(&"storage.k8s.io"));
        let widgets =
            &groups["items"].as_array().unwrap().last().unwrap()["versions"][0]["resources"][0];
        assert_eq!(widgets["resource"], "widgets");
        assert_eq!(widgets["scope"], "Namespaced");
    }

    #[test]
    fn crds_serve_every_served_version_and_leave_when_removed() {
        let crd = json!({"spec": {"group": "example.com", "scope": "Cluster",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1alpha1", "served": false, "storage": false}]}});
        let mut registry = Registry::builtin();
        registry.add_custom("widgets.example.com", custom_resource_of(&crd).unwrap());
        let v1 = registry.find("example.com", "v1", "widgets").unwrap();
        assert!(!v1.namespaced && v1.has_status && v1.custom);
        assert!(registry.find("example.com", "v1beta1", "widgets").is_some());
        assert!(
            registry
                .find("example.com", "v1alpha1", "widgets")
                .is_none()
        );
        let list = registry.resource_list("example.com", "v1").unwrap();
        assert_eq!(
            list["resources"].as_array().unwrap().len(),
            2,
            "main resource and status"
        );
        assert!(registry.group("example.com").is_some());
        registry.remove_custom("widgets.example.com");
        assert!(registry.find("example.com", "v1", "widgets").is_none());
        assert!(registry.group("example.com").is_none());
    }

    #[test]
    fn only_the_two_kinds_are_stored_elsewhere() {
        assert_eq!(
            storage_version("autoscaling", "v1", "HorizontalPodAutoscaler"),
            Some(("autoscaling", "v2"))
        );
        assert_eq!(
            storage_version("events.k8s.io", "v1", "Event"),
            Some(("", "v1"))
        );
        assert_eq!(
            storage_version("autoscaling", "v2", "HorizontalPodAutoscaler"),
            None
        );
        assert_eq!(storage_version("", "v1", "Event"), None);
        assert_eq!(storage_group("events.k8s.io", "events"), "");
        assert_eq!(
            storage_group("autoscaling", "horizontalpodautoscalers"),
            "autoscaling"
        );
    }
}
