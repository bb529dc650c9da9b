use serde_json::{Value, json};

use super::*;
use tether_schema::ownership::APP_LABEL;

fn id(group: &str, kind: &str) -> ObjectId {
    ObjectId {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: Some("ns".into()),
        name: "x".into(),
    }
}

fn run(ty: &ObjectId, mode: Mode, rules: &[IgnoreRule], d: Value, l: Value) -> Drift {
    let mask = MaskKey::new([7; 32]);
    let schemas = OpenApiSchemas::new([ty], []);
    let opts = DiffOptions {
        mode,
        rules,
        schema: &schemas,
        mask: &mask,
    };
    diff(ty, Some(&d), Some(&l), &opts)
}

/// Offline options without ignore rules.
fn offline<'a>(schema: &'a dyn SchemaLookup, mask: &'a MaskKey) -> DiffOptions<'a> {
    DiffOptions {
        mode: Mode::Offline,
        rules: &[],
        schema,
        mask,
    }
}

/// One core-group object of `kind` compared offline, views included.
fn offline_object(kind: &str, d: &Value, l: &Value) -> ObjectDiff {
    let mask = MaskKey::new([1; 32]);
    let ty = id("", kind);
    let schemas = OpenApiSchemas::new([&ty], []);
    diff_object(&ty, Some(d), Some(l), &offline(&schemas, &mask))
}

fn paths(d: &Drift) -> Vec<String> {
    d.changes().iter().map(|c| c.path.to_string()).collect()
}

#[test]
fn live_only_fields_are_not_drift_offline_but_are_online() {
    let ty = id("apps", "Deployment");
    let d = json!({"spec": {"replicas": 2}});
    let l = json!({"spec": {"replicas": 2, "revisionHistoryLimit": 10}, "status": {"ready": 1}});
    assert_eq!(
        run(&ty, Mode::Offline, &[], d.clone(), l.clone()),
        Drift::InSync
    );
    let online = run(&ty, Mode::Online, &[], d, l);
    assert_eq!(paths(&online), vec!["spec.revisionHistoryLimit"]);
    assert_eq!(online.changes()[0].desired, None);
    assert_eq!(online.changes()[0].live, Some(json!(10)));
}

#[test]
fn server_metadata_and_status_never_count() {
    let ty = id("", "ConfigMap");
    let d = json!({"metadata": {"name": "a", "uid": "1", "resourceVersion": "5", "annotations": {LAST_APPLIED: "{}"}}, "status": 1});
    let l = json!({"metadata": {"name": "a", "uid": "2", "resourceVersion": "9", "generation": 3, "annotations": {LAST_APPLIED: "{\"x\":1}"}}, "status": 2});
    assert_eq!(run(&ty, Mode::Online, &[], d, l), Drift::InSync);
}

#[test]
fn keyed_lists_match_by_key_whatever_the_order() {
    let ty = id("apps", "Deployment");
    let d = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.26"}, {"name": "side", "image": "busybox"}]}}}});
    let l = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "side", "image": "busybox", "imagePullPolicy": "Always"}, {"name": "web", "image": "nginx:1.25"}]}}}});
    let drift = run(&ty, Mode::Offline, &[], d, l);
    assert_eq!(
        paths(&drift),
        vec!["spec.template.spec.containers[name=web].image"]
    );
}

#[test]
fn container_ports_match_without_the_defaulted_protocol() {
    let ty = id("apps", "Deployment");
    let d = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]}}}});
    let l = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP", "name": "web"}]}]}}}});
    assert_eq!(
        paths(&run(&ty, Mode::Offline, &[], d, l)),
        vec!["spec.template.spec.containers[name=a].ports[containerPort=80].name"]
    );
}

#[test]
fn missing_keyed_item_is_reported_by_key() {
    let ty = id("apps", "Deployment");
    let env = |items: Value| json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "env": items}]}}}});
    let d = env(json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]));
    let l = env(json!([{"name": "A", "value": "1"}]));
    let drift = run(&ty, Mode::Offline, &[], d, l);
    assert_eq!(
        paths(&drift),
        vec!["spec.template.spec.containers[name=a].env[name=B]"]
    );
    assert_eq!(drift.changes()[0].live, None);
}

#[test]
fn quantities_and_int_or_string_compare_by_value() {
    let ty = id("apps", "Deployment");
    let d = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": "1"}}, "template": {"spec": {"containers": [
        {"name": "a", "resources": {"limits": {"cpu": "1000m", "memory": "1Gi"}, "requests": {"cpu": 0.5}}}]}}}});
    let l = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 1}}, "template": {"spec": {"containers": [
        {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1024Mi"}, "requests": {"cpu": "500m"}}}]}}}});
    assert_eq!(run(&ty, Mode::Offline, &[], d, l), Drift::InSync);
    let service = id("", "Service");
    let d = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
    let l = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": "8080"}]}});
    assert_eq!(run(&service, Mode::Offline, &[], d, l), Drift::InSync);
}

#[test]
fn plain_strings_are_not_quantities() {
    let ty = id("", "ConfigMap");
    let d = json!({"data": {"version": "1.0"}});
    let l = json!({"data": {"version": "1"}});
    assert_eq!(
        paths(&run(&ty, Mode::Offline, &[], d, l)),
        vec!["data.version"]
    );
}

#[test]
fn null_and_absent_are_distinguished() {
    let ty = id("", "ConfigMap");
    // Desired null or empty: not set by us; absent live is in sync offline.
    assert_eq!(
        run(
            &ty,
            Mode::Offline,
            &[],
            json!({"a": null, "b": {}}),
            json!({})
        ),
        Drift::InSync
    );
    // A live null against a desired value: the live side is an explicit null.
    let drift = run(
        &ty,
        Mode::Offline,
        &[],
        json!({"a": "x"}),
        json!({"a": null}),
    );
    assert_eq!(drift.changes()[0].live, Some(Value::Null));
    let drift = run(&ty, Mode::Offline, &[], json!({"a": "x"}), json!({}));
    assert_eq!(drift.changes()[0].live, None);
    // Online, a null the server kept differs from an absent field.
    let drift = run(&ty, Mode::Online, &[], json!({"a": null}), json!({}));
    assert_eq!(drift.changes()[0].desired, Some(Value::Null));
}

#[test]
fn atomic_lists_compare_by_position() {
    let ty = id("", "Pod");
    let d = json!({"args": ["a", "b"]});
    assert_eq!(
        paths(&run(
            &ty,
            Mode::Offline,
            &[],
            d.clone(),
            json!({"args": ["a", "c"]})
        )),
        vec!["args[1]"]
    );
    assert_eq!(
        paths(&run(&ty, Mode::Offline, &[], d, json!({"args": ["a"]}))),
        vec!["args"]
    );
}

#[test]
fn secret_values_are_masked_but_compared() {
    let ty = id("", "Secret");
    let d = json!({"stringData": {"password": "hunter2"}, "data": {"user": "YWRtaW4="}});
    let same = json!({"data": {"password": "aHVudGVyMg==", "user": "YWRtaW4="}});
    assert_eq!(run(&ty, Mode::Offline, &[], d.clone(), same), Drift::InSync);
    let changed = json!({"data": {"password": "b2xk", "user": "YWRtaW4="}});
    let drift = run(&ty, Mode::Offline, &[], d, changed);
    assert_eq!(paths(&drift), vec!["data.password"]);
    let text = serde_json::to_string(&drift.changes()).unwrap_or_default();
    for secret in ["hunter2", "aHVudGVyMg==", "b2xk"] {
        assert!(!text.contains(secret), "{text}");
    }
    assert_ne!(drift.changes()[0].desired, drift.changes()[0].live);
}

#[test]
fn ignore_rules_by_pointer_and_selector() {
    let ty = id("apps", "Deployment");
    let rule = IgnoreRule {
        kind: Some("Deployment".into()),
        json_pointers: vec!["/spec/replicas".into()],
        ..IgnoreRule::default()
    };
    let other = IgnoreRule {
        kind: Some("StatefulSet".into()),
        json_pointers: vec!["/spec/paused".into()],
        ..IgnoreRule::default()
    };
    let d = json!({"spec": {"replicas": 2, "paused": false}});
    let l = json!({"spec": {"replicas": 5, "paused": true}});
    assert_eq!(
        paths(&run(&ty, Mode::Offline, &[rule, other], d, l)),
        vec!["spec.paused"]
    );
}

#[test]
fn ignore_rules_by_field_manager() {
    let ty = id("apps", "Deployment");
    let rule = IgnoreRule {
        managers: vec!["kube-controller-manager".into()],
        ..IgnoreRule::default()
    };
    let d = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": "a"}]}}}});
    let l = json!({"metadata": {"managedFields": [
        {"manager": "tether", "fieldsV1": {"f:spec": {"f:template": {}}}},
        {"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
        "spec": {"replicas": 7, "template": {"spec": {"containers": [{"name": "web", "image": "b"}]}}}});
    let drift = run(&ty, Mode::Offline, &[rule], d, l);
    assert_eq!(
        paths(&drift),
        vec!["spec.template.spec.containers[name=web].image"]
    );
}

#[test]
fn sets_ignore_order_and_offline_extra_members() {
    let ty = id("", "ConfigMap");
    let d = json!({"metadata": {"finalizers": ["a", "b"]}});
    assert_eq!(
        run(
            &ty,
            Mode::Offline,
            &[],
            d.clone(),
            json!({"metadata": {"finalizers": ["b", "c", "a"]}})
        ),
        Drift::InSync
    );
    assert_eq!(
        paths(&run(
            &ty,
            Mode::Online,
            &[],
            d,
            json!({"metadata": {"finalizers": ["b", "c", "a"]}})
        )),
        vec!["metadata.finalizers"]
    );
}

#[test]
fn sets_report_missing_and_extra_by_ownership() {
    let mask = MaskKey::new([1; 32]);
    let schemas = OpenApiSchemas::new([&id("", "ConfigMap")], []);
    let opts = offline(&schemas, &mask);
    let mk = |name: &str| ObjectId {
        name: name.into(),
        ..id("", "ConfigMap")
    };
    let (a, b, c, e) = (mk("a"), mk("b"), mk("c"), mk("e"));
    let obj = json!({"data": {"k": "v"}});
    let owned = json!({"metadata": {"labels": {APP_LABEL: "shop"}}});
    let desired = vec![(&a, &obj), (&b, &obj)];
    let live = vec![(&a, &obj), (&c, &owned), (&e, &obj)];
    let out = diff_sets(
        desired.clone(),
        live.clone(),
        ExtraPolicy::OwnedBy("shop"),
        &opts,
    );
    let got: Vec<_> = out
        .iter()
        .map(|o| (o.id.name.as_str(), o.drift.status()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", Status::InSync),
            ("b", Status::Missing),
            ("c", Status::Extra)
        ]
    );
    let out = diff_sets(desired, live, ExtraPolicy::Ignore, &opts);
    assert_eq!(out.len(), 2);
}

#[test]
fn views_project_live_onto_desired_and_mask_secrets() {
    let d = json!({"kind": "Secret", "data": {"p": "c2VjcmV0"}, "type": "Opaque"});
    let l = json!({"kind": "Secret", "data": {"p": "b3RoZXI="}, "type": "Opaque", "immutable": false,
        "metadata": {"uid": "1"}});
    let o = offline_object("Secret", &d, &l);
    let live = o.live.unwrap_or_default();
    assert_eq!(live.get("immutable"), None);
    assert_eq!(live.get("metadata").and_then(|m| m.get("uid")), None);
    let text = format!("{:?}{:?}", o.desired, live);
    assert!(!text.contains("c2VjcmV0") && !text.contains("b3RoZXI="));
}

#[test]
fn only_drifted_objects_carry_views() {
    let d = json!({"kind": "ConfigMap", "data": {"a": "1"}});
    let l = json!({"kind": "ConfigMap", "data": {"a": "1"}, "metadata": {"uid": "1"}});
    let same = offline_object("ConfigMap", &d, &l);
    assert_eq!(
        (same.drift, same.desired, same.live),
        (Drift::InSync, None, None)
    );
    let l = json!({"kind": "ConfigMap", "data": {"a": "2"}});
    let changed = offline_object("ConfigMap", &d, &l);
    assert_eq!(
        changed.live,
        Some(json!({"kind": "ConfigMap", "data": {"a": "2"}}))
    );
    assert_eq!(changed.desired, Some(d));
}

/// A Deployment as tether applied it: `tether` owns the replicas and the container's
/// image, the server defaulted the rest.
fn applied_deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "live", "managedFields": [{
            "manager": "tether", "operation": "Apply", "apiVersion": "apps/v1",
            "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}
        }]},
        "spec": {"replicas": replicas, "progressDeadlineSeconds": 600, "template": {"spec": {
            "containers": [{"name": "web", "image": image, "imagePullPolicy": "IfNotPresent"}]}}}
    })
}

fn desired_deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "live"}, "spec": spec})
}

#[test]
fn an_apply_of_what_is_there_is_known_unchanged_without_asking_the_server() {
    let ty = id("apps", "Deployment");
    let schemas = OpenApiSchemas::new([&ty], []);
    let live = applied_deployment(2, "nginx:1");
    let same = desired_deployment(
        json!({"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}),
    );
    assert!(unchanged_by_apply(&ty, &same, &live, "tether", &schemas));
    // A changed value needs the server.
    let changed = desired_deployment(
        json!({"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}),
    );
    assert!(!unchanged_by_apply(
        &ty, &changed, &live, "tether", &schemas
    ));
    // A field tether owns and no longer sets would be removed by the apply.
    let dropped = desired_deployment(
        json!({"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}),
    );
    assert!(!unchanged_by_apply(
        &ty, &dropped, &live, "tether", &schemas
    ));
    // Nothing owned by this manager: only the server can say what an apply changes.
    assert!(!unchanged_by_apply(
        &ty,
        &same,
        &live,
        "someone-else",
        &schemas
    ));
    let mut deleting = live.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(!unchanged_by_apply(
        &ty, &same, &deleting, "tether", &schemas
    ));
}

/// A lookup that answers by path only (no schema nodes), as any other
/// [`SchemaLookup`] implementation would.
struct ByPath(OpenApiSchemas);

impl SchemaLookup for ByPath {
    fn list_type(&self, ty: &ObjectId, path: &[&str]) -> Option<ListType<'_>> {
        self.0.list_type(ty, path)
    }
    fn scalar_format(&self, ty: &ObjectId, path: &[&str]) -> ScalarFormat {
        self.0.scalar_format(ty, path)
    }
}

#[test]
fn walking_the_schema_nodes_answers_as_lookups_by_path() {
    let ty = id("apps", "Deployment");
    let d = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.26", "resources": {"limits": {"cpu": "1"}},
         "ports": [{"containerPort": 80}, {"containerPort": 81, "protocol": "UDP"}],
         "args": ["a", "b"], "readinessProbe": {"httpGet": {"port": 8080}}},
        {"name": "gone", "image": "busybox"}]}}}});
    let l = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.25", "resources": {"limits": {"cpu": "1000m"}},
         "ports": [{"containerPort": 81, "protocol": "TCP"}, {"containerPort": 80, "protocol": "TCP"}],
         "args": ["b", "a"], "readinessProbe": {"httpGet": {"port": "8080"}}},
        {"name": "extra", "image": "x"}]}}}});
    let nodes = OpenApiSchemas::new([&ty], []);
    let by_path = ByPath(nodes.clone());
    let mask = MaskKey::new([7; 32]);
    for mode in [Mode::Offline, Mode::Online] {
        let opts = |schema| DiffOptions {
            mode,
            rules: &[],
            schema,
            mask: &mask,
        };
        let walked = diff_object(&ty, Some(&d), Some(&l), &opts(&nodes));
        let asked = diff_object(&ty, Some(&d), Some(&l), &opts(&by_path));
        assert_eq!(walked, asked, "{mode:?}");
        assert!(!walked.drift.changes().is_empty());
    }
    let offline = run(&ty, Mode::Offline, &[], d, l);
    assert_eq!(
        paths(&offline),
        vec![
            "spec.replicas",
            "spec.template.spec.containers[name=web].image",
            "spec.template.spec.containers[name=web].ports[containerPort=81,protocol=UDP]",
            "spec.template.spec.containers[name=web].args[0]",
            "spec.template.spec.containers[name=web].args[1]",
            "spec.template.spec.containers[name=gone]",
        ]
    );
}

#[test]
fn large_sets_compare_on_threads_in_desired_order() {
    let mask = MaskKey::new([1; 32]);
    let ty = id("", "ConfigMap");
    let schemas = OpenApiSchemas::new([&ty], []);
    let opts = offline(&schemas, &mask);
    // Enough objects for several threads; names descend so that no sort hides order.
    let n = 3 * PARALLEL_DIFF_MIN_OBJECTS + 1;
    let ids: Vec<ObjectId> = (0..n)
        .map(|i| ObjectId {
            name: format!("cm-{:05}", n - i),
            ..ty.clone()
        })
        .collect();
    let objs: Vec<Value> = (0..n).map(|i| json!({"data": {"k": i}})).collect();
    let lives: Vec<Value> = (0..n)
        .map(|i| json!({"data": {"k": if i % 7 == 0 { i + 1 } else { i }}}))
        .collect();
    let desired: Vec<_> = ids.iter().zip(&objs).collect();
    // Every third object is not live.
    let live: Vec<_> = ids
        .iter()
        .zip(&lives)
        .enumerate()
        .filter(|(i, _)| i % 3 != 1)
        .map(|(_, pair)| pair)
        .collect();
    let out = diff_sets(desired.clone(), live, ExtraPolicy::Ignore, &opts);
    assert_eq!(out.len(), n);
    for (i, o) in out.iter().enumerate() {
        let l = (i % 3 != 1).then(|| &lives[i]);
        assert_eq!(
            o,
            &diff_object(&ids[i], Some(&objs[i]), l, &opts),
            "object {i}"
        );
    }
    let statuses: std::collections::BTreeSet<_> = out.iter().map(|o| o.drift.status()).collect();
    assert_eq!(
        statuses,
        [Status::InSync, Status::Modified, Status::Missing].into()
    );
}
