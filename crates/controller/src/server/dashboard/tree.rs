//! The app view's object tree (issue #17): the app's objects, and below them what
//! their controllers made, by `metadata.ownerReferences` (Deployment → ReplicaSet →
//! Pod, CronJob → Job → Pod, StatefulSet and DaemonSet → Pod).
//!
//! tether watches only the objects it applies, so the children are read on demand,
//! when a page opens an app: one LIST per child kind and namespace of the app's
//! objects, through the app's own cluster connection (its ServiceAccount when it
//! impersonates one), kept for [`TREE_TTL`]. A service nobody looks at makes no
//! request for it; a page open on an app makes at most three LISTs per namespace
//! every [`TREE_TTL`], whatever the number of tabs.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::GroupVersionKind;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;

use tether_core::cluster::Cluster;
use tether_core::report::status::ResourceState;
use tether_core::sync::Lineage;
use tether_core::sync::health::{self, Health};
use tether_diff::manifest::ObjectId;

/// How long a tree read from the cluster is served again: long enough that a page's
/// refreshes (one per status change of the app) and many tabs share one read, short
/// enough that a new Pod shows within a couple of seconds.
pub const TREE_TTL: Duration = Duration::from_secs(2);

/// The most children shown under one object: a Deployment of 2,000 replicas shows
/// the first of its Pods and how many more it has, and the page stays light.
pub const MAX_CHILDREN: usize = 100;

/// How deep ownership is followed below an app's objects (CronJob → Job → Pod).
const MAX_DEPTH: usize = 3;

/// The kinds a controller of each kind makes, as `(owner kind, child group, version,
/// kind)`; only these are listed.
const CHILD_KINDS: &[(&str, &str, &str, &str)] = &[
    ("Deployment", "apps", "v1", "ReplicaSet"),
    ("ReplicaSet", "", "v1", "Pod"),
    ("StatefulSet", "", "v1", "Pod"),
    ("DaemonSet", "", "v1", "Pod"),
    ("Job", "", "v1", "Pod"),
    ("CronJob", "batch", "v1", "Job"),
];

/// The child kinds, as `(group, version, kind)`, whose objects an owner of `kind`
/// makes.
pub fn child_kinds(kind: &str) -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    CHILD_KINDS
        .iter()
        .filter(move |(owner, ..)| *owner == kind)
        .map(|(_, g, v, k)| (*g, *v, *k))
}

/// The kinds listed for the app's objects, by namespace.
pub type ChildKinds = BTreeSet<(String, &'static str, &'static str, &'static str)>;

/// One object of the tree: one the app applies (`managed`, with its standing against
/// Git), or one a controller made for it (health only).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeNode {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    pub managed: bool,
    /// InSync, Modified, Missing…: for the app's own objects only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub health_message: String,
    pub children: Vec<TreeNode>,
    /// Children left out beyond [`MAX_CHILDREN`].
    #[serde(skip_serializing_if = "is_zero")]
    pub omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What `GET /api/v1/apps/{name}/tree` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectTree {
    pub roots: Vec<TreeNode>,
    /// What could not be read (a LIST refused to the app's ServiceAccount), so the
    /// page can say the tree is partial rather than show it as complete.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// An object a controller made, as the tree holds it before it is placed.
struct Listed {
    node: TreeNode,
    owners: Vec<String>,
}

fn listed(object: &Value) -> Option<Listed> {
    let id = ObjectId::of(object)?;
    let lineage = Lineage::of(object);
    let uid = lineage.uid?;
    // The controlling owner first: it is the parent when several are known.
    let mut owners = lineage.owners;
    owners.sort_by_key(|o| !o.controller);
    let assessed = child_health(&id, object);
    Some(Listed {
        owners: owners.into_iter().map(|o| o.uid).collect(),
        node: TreeNode {
            api_version: id.api_version(),
            kind: id.kind.clone(),
            namespace: id.namespace.clone(),
            name: id.name.clone(),
            uid: Some(uid),
            managed: false,
            status: None,
            health: Some(assessed.health),
            health_message: assessed.message,
            children: Vec::new(),
            omitted: 0,
        },
    })
}

/// The health of an object a controller made: a Pod by its phase and readiness, a
/// ReplicaSet by its ready replicas, the rest as the sync stage judges them.
pub fn child_health(id: &ObjectId, live: &Value) -> health::Assessment {
    let status = &live["status"];
    let assessment = |health, message: String| health::Assessment { health, message };
    match (id.group.as_str(), id.kind.as_str()) {
        _ if live.pointer("/metadata/deletionTimestamp").is_some() => {
            assessment(Health::Progressing, "being deleted".into())
        }
        ("", "Pod") => {
            let ready = status["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            match status["phase"].as_str() {
                Some("Running") if ready => assessment(Health::Healthy, String::new()),
                Some("Succeeded") => assessment(Health::Healthy, "completed".into()),
                Some("Failed") => assessment(
                    Health::Degraded,
                    status["message"]
                        .as_str()
                        .or(status["reason"].as_str())
                        .unwrap_or("failed")
                        .to_string(),
                ),
                Some("Running") => assessment(Health::Progressing, "running, not ready".into()),
                phase => assessment(
                    Health::Progressing,
                    format!("phase {}", phase.unwrap_or("unknown")),
                ),
            }
        }
        ("apps", "ReplicaSet") => {
            let want = live
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let ready = status["readyReplicas"].as_i64().unwrap_or(0);
            if ready >= want {
                assessment(Health::Healthy, format!("{ready}/{want} ready"))
            } else {
                assessment(Health::Progressing, format!("{ready}/{want} ready"))
            }
        }
        _ => health::assess(id, live),
    }
}

/// The tree of `resources` (the app's objects, as its last pass saw them) with the
/// `listed` objects their controllers made hung below their owners. A listed object
/// no known object owns is not the app's and is left out; so is one owned only
/// through a cycle.
pub fn build_tree(resources: &[ResourceState], listed_objects: &[Value]) -> Vec<TreeNode> {
    let managed_uids: HashSet<&str> = resources.iter().filter_map(|r| r.uid.as_deref()).collect();
    let mut below: HashMap<String, Vec<Listed>> = HashMap::new();
    let mut seen = HashSet::new();
    for object in listed_objects {
        let Some(entry) = listed(object) else {
            continue;
        };
        let uid = entry.node.uid.clone().unwrap_or_default();
        // Already in the tree as the app's own, or listed twice.
        if managed_uids.contains(uid.as_str()) || !seen.insert(uid) {
            continue;
        }
        if let Some(parent) = entry.owners.first().cloned() {
            below.entry(parent).or_default().push(entry);
        }
    }
    // The app's objects: below a managed owner when they have one.
    let mut managed_below: HashMap<String, Vec<TreeNode>> = HashMap::new();
    let mut roots = Vec::new();
    for r in resources {
        let node = TreeNode {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
            managed: true,
            status: Some(r.status),
            health: r.health,
            health_message: r.health_message.clone(),
            children: Vec::new(),
            omitted: 0,
        };
        // The controlling owner first, as for the rest; never itself.
        let mut owners: Vec<_> = r
            .owner_references
            .iter()
            .filter(|o| r.uid.as_ref() != Some(&o.uid) && managed_uids.contains(o.uid.as_str()))
            .collect();
        owners.sort_by_key(|o| !o.controller);
        let parent = owners.first();
        match parent {
            Some(owner) => managed_below
                .entry(owner.uid.clone())
                .or_default()
                .push(node),
            None => roots.push(node),
        }
    }
    let mut placed = HashSet::new();
    for root in &mut roots {
        attach(root, &mut managed_below, &mut below, &mut placed);
    }
    // The app's objects that own each other in a circle are shown all the same, at
    // the top.
    let stranded: Vec<TreeNode> = managed_below.drain().flat_map(|(_, nodes)| nodes).collect();
    for mut node in stranded {
        attach(&mut node, &mut managed_below, &mut below, &mut placed);
        roots.push(node);
    }
    roots
}

fn attach(
    node: &mut TreeNode,
    managed_below: &mut HashMap<String, Vec<TreeNode>>,
    below: &mut HashMap<String, Vec<Listed>>,
    placed: &mut HashSet<String>,
) {
    let Some(uid) = node.uid.clone() else { return };
    // Each object once: ownership that loops ends here.
    if !placed.insert(uid.clone()) {
        return;
    }
    let mut children = managed_below.remove(&uid).unwrap_or_default();
    let mut made: Vec<TreeNode> = below
        .remove(&uid)
        .unwrap_or_default()
        .into_iter()
        .map(|l| l.node)
        .collect();
    made.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    if made.len() > MAX_CHILDREN {
        node.omitted = made.len() - MAX_CHILDREN;
        made.truncate(MAX_CHILDREN);
    }
    children.extend(made);
    for child in &mut children {
        attach(child, managed_below, below, placed);
    }
    node.children = children;
}

/// Reads what the controllers of the app's objects made, through `cluster` (the
/// app's own connection), and builds the tree. Each round lists the child kinds of
/// the objects found so far, each kind once per namespace.
pub async fn read_tree(cluster: &Cluster, resources: &[ResourceState]) -> ObjectTree {
    let mut errors = Vec::new();
    let mut all: Vec<Value> = Vec::new();
    let mut listed_kinds: ChildKinds = BTreeSet::new();
    let mut known: HashSet<String> = resources.iter().filter_map(|r| r.uid.clone()).collect();
    // (kind, namespace) of the owners whose children are not listed yet.
    let mut frontier: Vec<(String, String)> = resources
        .iter()
        .filter(|r| r.uid.is_some())
        .filter_map(|r| Some((r.kind.clone(), r.namespace.clone()?)))
        .collect();
    for _ in 0..MAX_DEPTH {
        let wanted: ChildKinds = frontier
            .iter()
            .flat_map(|(kind, ns)| child_kinds(kind).map(move |(g, v, k)| (ns.clone(), g, v, k)))
            .filter(|w| !listed_kinds.contains(w))
            .collect();
        if wanted.is_empty() {
            break;
        }
        let lists = wanted.iter().map(|(ns, g, v, k)| async move {
            let gvk = GroupVersionKind::gvk(g, v, k);
            let kind = match cluster.resolve(&gvk).await {
                Ok(Some(kind)) => kind,
                Ok(None) => return Err(format!("the cluster serves no {k}")),
                Err(err) => return Err(format!("cannot list {k} objects in {ns}: {err}")),
            };
            cluster
                .list(&kind, Some(ns), "")
                .await
                .map_err(|err| format!("cannot list {k} objects in {ns}: {err}"))
        });
        let mut fresh = Vec::new();
        for result in futures::future::join_all(lists).await {
            match result {
                Ok(objects) => fresh.extend(objects),
                Err(err) => errors.push(err),
            }
        }
        listed_kinds.extend(wanted);
        // Owned by what is known, directly or through another fresh object.
        frontier.clear();
        let mut added = true;
        let mut pending: Vec<Value> = fresh;
        while added {
            added = false;
            let mut rest = Vec::new();
            for object in pending {
                let lineage = Lineage::of(&object);
                let owned = lineage.owners.iter().any(|o| known.contains(&o.uid));
                match (owned, lineage.uid) {
                    (true, Some(uid)) => {
                        known.insert(uid);
                        if let Some(ns) = object
                            .pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                        {
                            let kind = object["kind"].as_str().unwrap_or_default();
                            frontier.push((kind.to_string(), ns.to_string()));
                        }
                        all.push(object);
                        added = true;
                    }
                    _ => rest.push(object),
                }
            }
            pending = rest;
        }
    }
    ObjectTree {
        roots: build_tree(resources, &all),
        errors,
    }
}

/// A tree and when it was read.
type Read = (Instant, Arc<ObjectTree>);

/// Trees recently read, by app: many tabs and quick refreshes share one read.
#[derive(Clone, Default)]
pub struct TreeCache {
    trees: Arc<Mutex<HashMap<String, Read>>>,
}

impl TreeCache {
    /// The tree read within [`TREE_TTL`], if any.
    pub fn fresh(&self, app: &str) -> Option<Arc<ObjectTree>> {
        let trees = self.trees.lock();
        trees
            .get(app)
            .filter(|(at, _)| at.elapsed() < TREE_TTL)
            .map(|(_, tree)| tree.clone())
    }

    /// Keeps `tree` for `app`, and forgets trees that are stale.
    pub fn keep(&self, app: &str, tree: Arc<ObjectTree>) {
        let mut trees = self.trees.lock();
        trees.retain(|_, (at, _)| at.elapsed() < TREE_TTL);
        trees.insert(app.to_string(), (Instant::now(), tree));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use tether_core::sync::OwnerReference;

    fn resource(kind: &str, name: &str, uid: &str) -> ResourceState {
        ResourceState {
            api_version: if kind == "Deployment" || kind == "ReplicaSet" {
                "apps/v1".into()
            } else {
                "v1".into()
            },
            kind: kind.into(),
            namespace: Some("hello".into()),
            name: name.into(),
            status: "InSync",
            health: Some(Health::Healthy),
            health_message: String::new(),
            uid: Some(uid.into()),
            owner_references: Vec::new(),
        }
    }

    fn object(api_version: &str, kind: &str, name: &str, uid: &str, owner: &str) -> Value {
        json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": "hello",
                "uid": uid,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "X", "name": "x", "uid": owner, "controller": true}],
            },
        })
    }

    fn pod(name: &str, uid: &str, owner: &str, phase: &str, ready: bool) -> Value {
        let mut pod = object("v1", "Pod", name, uid, owner);
        pod["status"] = json!({
            "phase": phase,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        });
        pod
    }

    #[test]
    fn a_deployments_replica_set_and_pods_hang_below_it_and_strangers_are_left_out() {
        let resources = [
            resource("Deployment", "web", "d1"),
            resource("ConfigMap", "settings", "c1"),
        ];
        let mut rs = object("apps/v1", "ReplicaSet", "web-abc", "r1", "d1");
        rs["spec"] = json!({"replicas": 2});
        rs["status"] = json!({"readyReplicas": 1});
        let listed = [
            pod("web-abc-2", "p2", "r1", "Pending", false),
            pod("web-abc-1", "p1", "r1", "Running", true),
            rs,
            // Another app's ReplicaSet and its Pod, and a Pod of nobody.
            object("apps/v1", "ReplicaSet", "other", "r9", "d9"),
            pod("other-1", "p9", "r9", "Running", true),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lone", "namespace": "hello", "uid": "p0"}}),
        ];
        let roots = build_tree(&resources, &listed);
        assert_eq!(roots.len(), 2, "{roots:#?}");
        let web = &roots[0];
        assert!(web.managed);
        assert_eq!(web.children.len(), 1);
        let rs = &web.children[0];
        assert_eq!((rs.kind.as_str(), rs.managed), ("ReplicaSet", false));
        assert_eq!(rs.health, Some(Health::Progressing));
        assert_eq!(rs.health_message, "1/2 ready");
        let pods: Vec<(&str, Option<Health>)> = rs
            .children
            .iter()
            .map(|p| (p.name.as_str(), p.health))
            .collect();
        assert_eq!(
            pods,
            [
                ("web-abc-1", Some(Health::Healthy)),
                ("web-abc-2", Some(Health::Progressing))
            ]
        );
        assert!(roots[1].children.is_empty());
        let text = serde_json::to_string(&roots).unwrap();
        assert!(!text.contains("other") && !text.contains("lone"), "{text}");
    }

    #[test]
    fn a_managed_object_owned_by_another_managed_object_nests_and_cycles_end() {
        let mut job = resource("Job", "migrate", "j1");
        job.api_version = "batch/v1".into();
        job.owner_references = vec![OwnerReference {
            api_version: "batch/v1".into(),
            kind: "CronJob".into(),
            name: "nightly".into(),
            uid: "cj1".into(),
            controller: true,
        }];
        let mut cron = resource("CronJob", "nightly", "cj1");
        cron.api_version = "batch/v1".into();
        let listed = [
            pod("migrate-x", "p1", "j1", "Succeeded", false),
            // Two objects owning each other: placed once, never looped.
            object("v1", "Pod", "a", "ua", "ub"),
            object("v1", "Pod", "b", "ub", "ua"),
        ];
        let roots = build_tree(&[job, cron], &listed);
        assert_eq!(roots.len(), 1, "{roots:#?}");
        assert_eq!(roots[0].kind, "CronJob");
        let job = &roots[0].children[0];
        assert_eq!((job.kind.as_str(), job.managed), ("Job", true));
        assert_eq!(job.children[0].health, Some(Health::Healthy));
        assert_eq!(job.children[0].health_message, "completed");
    }

    #[test]
    fn the_apps_own_objects_owning_each_other_in_a_circle_are_all_shown() {
        let owned_by = |kind: &str, name: &str, uid: &str, owner: &str| {
            let mut r = resource(kind, name, uid);
            r.owner_references = vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "x".into(),
                uid: owner.into(),
                controller: false,
            }];
            r
        };
        let roots = build_tree(
            &[
                owned_by("ConfigMap", "a", "ua", "ub"),
                owned_by("ConfigMap", "b", "ub", "ua"),
            ],
            &[],
        );
        let mut names: Vec<&str> = roots.iter().map(|r| r.name.as_str()).collect();
        names.extend(
            roots
                .iter()
                .flat_map(|r| r.children.iter().map(|c| c.name.as_str())),
        );
        names.sort();
        assert_eq!(names, ["a", "b"], "{roots:#?}");
    }

    #[test]
    fn many_pods_are_cut_to_the_limit_and_counted() {
        let resources = [resource("StatefulSet", "db", "s1")];
        let listed: Vec<Value> = (0..MAX_CHILDREN + 5)
            .map(|i| {
                pod(
                    &format!("db-{i:03}"),
                    &format!("p{i}"),
                    "s1",
                    "Failed",
                    false,
                )
            })
            .collect();
        let roots = build_tree(&resources, &listed);
        assert_eq!(roots[0].children.len(), MAX_CHILDREN);
        assert_eq!(roots[0].omitted, 5);
        assert_eq!(roots[0].children[0].health, Some(Health::Degraded));
    }

    #[test]
    fn only_the_kinds_a_controller_makes_are_listed() {
        let kinds: Vec<_> = child_kinds("Deployment").collect();
        assert_eq!(kinds, [("apps", "v1", "ReplicaSet")]);
        assert_eq!(child_kinds("CronJob").count(), 1);
        assert_eq!(child_kinds("ConfigMap").count(), 0);
    }
}
