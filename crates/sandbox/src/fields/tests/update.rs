//! Field ownership of the writes that are not applies: creates, updates and
//! strategic merge patches (what they own, what they leave), subresource writes, and
//! Go's zero values on create.

use super::*;
use crate::fields::smp::PatchError;

fn update_opts<'a>(manager: &'a str, api_version: &'a str) -> UpdateOptions<'a> {
    UpdateOptions {
        manager,
        api_version,
        now: T18,
        reset_fields: &["status"],
        subresource: "",
    }
}

fn server_fields(obj: &mut Value, from: &Value) {
    for key in ["uid", "resourceVersion", "creationTimestamp", "namespace"] {
        if let Some(v) = from["metadata"].get(key) {
            obj["metadata"][key] = v.clone();
        }
    }
}

#[test]
fn a_create_owns_every_field_it_sets() {
    let fx = fixture("delete/create-with-finalizer.json");
    let want = response(&fx);
    let mut obj = request_body(&fx);
    server_fields(&mut obj, &want);
    let schema = schema_of(&obj);
    record_update(&schema, None, &mut obj, &update_opts("Python-urllib", "v1"));
    assert_same_json(managed(&obj), managed(&want), "managedFields");

    let watch = fixture("watch/create-modify-delete.json");
    let events = response(&watch);
    let added = &events[0]["object"];
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "watched", "namespace": "fixtures"}, "data": {"a": "1"}});
    record_update(&schema, None, &mut obj, &update_opts("Python-urllib", "v1"));
    assert_same_json(managed(&obj), managed(added), "ADDED");
    let old = obj.clone();
    obj["data"]["a"] = json!("2");
    record_update(
        &schema,
        Some(&old),
        &mut obj,
        &update_opts("Python-urllib", "v1"),
    );
    assert_same_json(managed(&obj), managed(&events[1]["object"]), "MODIFIED");
}

#[test]
fn updates_after_applies_take_only_what_they_change() {
    let schema = schema_of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
    let steps = [
        (
            "ssa/get-after-dry-run.json",
            "generation/label-merge-patch.json",
        ),
        (
            "generation/label-merge-patch.json",
            "generation/spec-merge-patch.json",
        ),
    ];
    for (before, step) in steps {
        let old = response(&fixture(before));
        let fx = fixture(step);
        let mut new = old.clone();
        json_patch::merge(&mut new, &request_body(&fx));
        record_update(
            &schema,
            Some(&old),
            &mut new,
            &update_opts("Python-urllib", "apps/v1"),
        );
        assert_same_json(managed(&new), managed(&response(&fx)), step);
    }
    let cm = Schemas::builtin()
        .get("", "v1", "ConfigMap")
        .expect("ConfigMap");
    let old = response(&fixture("ssa/field-removed-when-manager-omits-it.json"));
    let fx = fixture("patch/json-patch.json");
    let mut new = old.clone();
    new["data"]["added"] = json!("x");
    record_update(
        &cm,
        Some(&old),
        &mut new,
        &update_opts("Python-urllib", "v1"),
    );
    assert_same_json(managed(&new), managed(&response(&fx)), "json patch");
}

#[test]
fn strategic_merge_patch_merges_containers_by_name() {
    let old = response(&fixture("generation/spec-merge-patch.json"));
    let fx = fixture("patch/strategic-merge-patch.json");
    let schema = schema_of(&old);
    let mut new = strategic_merge_patch(&schema, &old, &request_body(&fx)).expect("patch");
    let want = response(&fx);
    assert_eq!(new["spec"], want["spec"]);
    record_update(
        &schema,
        Some(&old),
        &mut new,
        &update_opts("Python-urllib", "apps/v1"),
    );
    assert_same_json(managed(&new), managed(&want), "managedFields");
}

#[test]
fn a_no_op_update_records_nothing_and_removals_leave_every_owner() {
    let schema = Schemas::builtin()
        .get("", "v1", "ConfigMap")
        .expect("ConfigMap");
    let live = apply(
        &schema,
        None,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}),
        &opts("tether", false, "v1", T18),
    )
    .expect("apply");
    let mut same = live.clone();
    record_update(
        &schema,
        Some(&live),
        &mut same,
        &update_opts("kubectl", "v1"),
    );
    assert_eq!(managed(&same), managed(&live));
    let mut fewer = live.clone();
    fewer["data"].as_object_mut().expect("data").remove("a");
    record_update(
        &schema,
        Some(&live),
        &mut fewer,
        &update_opts("kubectl", "v1"),
    );
    let entries = managed(&fewer).as_array().expect("entries");
    assert_eq!(
        entries.len(),
        1,
        "a removal alone gives the updater nothing"
    );
    assert_eq!(entries[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    let mut none = live.clone();
    none.as_object_mut().expect("obj").remove("data");
    record_update(
        &schema,
        Some(&live),
        &mut none,
        &update_opts("kubectl", "v1"),
    );
    assert!(none["metadata"].get("managedFields").is_none());
}

#[test]
fn strategic_merge_patch_directives() {
    let schema = schema_of(&json!({"apiVersion": "v1", "kind": "Pod"}));
    let pod = json!({
        "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1", "args": ["1", "2"], "env": [{"name": "E", "value": "1"}]},
                {"name": "b", "image": "b:1"}
            ],
            "volumes": [{"name": "v", "emptyDir": {}}]
        }
    });
    let patch = |p: Value| strategic_merge_patch(&schema, &pod, &p).expect("patch");

    let got = patch(json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}));
    assert_eq!(got["spec"]["containers"].as_array().map(Vec::len), Some(1));

    let got = patch(
        json!({"spec": {"containers": [{"name": "c", "image": "c"}, {"$patch": "replace"}]}}),
    );
    assert_eq!(
        got["spec"]["containers"],
        json!([{"name": "c", "image": "c"}])
    );

    let got = patch(json!({"spec": {"containers": [{"name": "a", "args": ["3"]}]}}));
    assert_eq!(
        got["spec"]["containers"][0]["args"],
        json!(["3"]),
        "args has no merge strategy"
    );
    assert_eq!(got["spec"]["containers"][0]["image"], "a:1");

    let got =
        patch(json!({"metadata": {"labels": {"a": null, "c": "3"}, "finalizers": ["z", "x"]}}));
    assert_eq!(got["metadata"]["labels"], json!({"b": "2", "c": "3"}));
    assert_eq!(got["metadata"]["finalizers"], json!(["x", "y", "z"]));

    let got = patch(json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}));
    assert_eq!(got["metadata"]["finalizers"], json!(["y"]));

    let got = patch(json!({"spec": {
        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
        "containers": [{"name": "a", "image": "a:2"}]}}));
    assert_eq!(got["spec"]["containers"][0]["name"], "b");
    assert_eq!(got["spec"]["containers"][1]["image"], "a:2");

    let got = patch(
        json!({"spec": {"volumes": [{"name": "v", "configMap": {"name": "cm"},
        "$retainKeys": ["name", "configMap"]}]}}),
    );
    assert_eq!(
        got["spec"]["volumes"],
        json!([{"name": "v", "configMap": {"name": "cm"}}])
    );

    let got = patch(json!({"metadata": {"labels": {"$patch": "replace", "z": "9"}}}));
    assert_eq!(got["metadata"]["labels"], json!({"z": "9"}));

    let got = patch(
        json!({"spec": {"containers": [{"name": "a", "env": [{"name": "F", "value": "2"}]}]}}),
    );
    assert_eq!(
        got["spec"]["containers"][0]["env"].as_array().map(Vec::len),
        Some(2)
    );
}

#[test]
fn strategic_merge_patch_errors() {
    let schema = schema_of(&json!({"apiVersion": "v1", "kind": "Pod"}));
    let pod = json!({"spec": {"containers": [{"name": "a"}]}});
    let err = strategic_merge_patch(
        &schema,
        &pod,
        &json!({"spec": {"containers": [{"image": "x"}]}}),
    )
    .expect_err("no merge key");
    assert_eq!(
        err.to_string(),
        "map: {\"image\":\"x\"} does not contain declared merge key: name"
    );
    assert_eq!(
        strategic_merge_patch(&schema, &pod, &json!([1])),
        Err(PatchError::NotAnObject)
    );
    assert_eq!(
        strategic_merge_patch(&schema, &pod, &json!({"spec": {"$patch": "explode"}})),
        Err(PatchError::UnknownDirective("explode".into()))
    );
    assert!(matches!(
        strategic_merge_patch(&schema, &pod, &json!({"$retainKeys": "spec"})),
        Err(PatchError::InvalidDirective { .. })
    ));
}

#[test]
fn subresource_writes_keep_their_own_entries() {
    let schema = schema_of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
    let live = response(&fixture("apply/deployment-web.json"));
    let mut new = live.clone();
    new["status"] = json!({"replicas": 1, "readyReplicas": 1});
    record_update(
        &schema,
        Some(&live),
        &mut new,
        &UpdateOptions {
            manager: "kube-controller-manager",
            api_version: "apps/v1",
            now: T18,
            reset_fields: &[],
            subresource: "status",
        },
    );
    let entries = managed(&new).as_array().expect("entries");
    assert_eq!(entries.len(), 2);
    assert_same_json(
        &entries[1],
        &json!({
            "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
            "time": T18, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:readyReplicas": {}, "f:replicas": {}}},
            "subresource": "status"
        }),
        "status entry",
    );
    // The main resource ignores status: the same change there records nothing.
    let mut main = live.clone();
    main["status"] = json!({"replicas": 1});
    record_update(
        &schema,
        Some(&live),
        &mut main,
        &update_opts("kubectl", "apps/v1"),
    );
    assert_eq!(managed(&main), managed(&live));
}

#[test]
fn a_manager_that_loses_every_field_is_dropped() {
    let schema = Schemas::builtin()
        .get("", "v1", "ConfigMap")
        .expect("ConfigMap");
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let mut created = live.clone();
    record_update(
        &schema,
        None,
        &mut created,
        &update_opts("kubectl-create", "v1"),
    );
    assert_eq!(
        managed(&created)[0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}})
    );
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}});
    let got = apply(
        &schema,
        Some(&created),
        &config,
        &opts("tether", true, "v1", T18),
    )
    .expect("apply");
    let entries = managed(&got).as_array().expect("entries");
    // kubectl-create keeps only the map it created; its key moved to tether.
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["fieldsV1"], json!({"f:data": {}}));
    let mut emptied = got.clone();
    emptied.as_object_mut().expect("obj").remove("data");
    record_update(
        &schema,
        Some(&got),
        &mut emptied,
        &update_opts("kubectl-edit", "v1"),
    );
    assert!(
        emptied["metadata"].get("managedFields").is_none(),
        "{emptied}"
    );
}

#[test]
fn a_custom_resource_created_by_an_update_owns_its_top_level_objects() {
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
    let schema = schema_of(&widget);
    let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}}, "spec": {"color": "red", "size": 1}});
    record_update(
        &schema,
        None,
        &mut obj,
        &update_opts("kubectl-create", "example.com/v1"),
    );
    assert_same_json(
        &managed(&obj)[0]["fieldsV1"],
        &json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                "f:spec": {".": {}, "f:color": {}, "f:size": {}}}),
        "widget",
    );
}

/// A created Deployment starts from Go zero values: its non-pointer structs and
/// required lists exist before the create, so they are not owned themselves, while
/// everything the create brings (pointers, maps, list items) is.
#[test]
fn a_created_deployment_owns_fields_like_kubectl_create() {
    let mut obj = response(&fixture("apply/deployment-web.json"));
    obj["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("managedFields");
    let schema = schema_of(&obj);
    record_update(
        &schema,
        None,
        &mut obj,
        &update_opts("kubectl-create", "apps/v1"),
    );
    let fields = &managed(&obj)[0]["fieldsV1"];
    let spec = &fields["f:spec"];
    assert!(spec.get(".").is_none());
    assert_eq!(
        spec["f:strategy"],
        json!({"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}})
    );
    let pod = &spec["f:template"]["f:spec"];
    assert!(pod.get(".").is_none());
    assert!(
        pod["f:containers"].get(".").is_none(),
        "containers is required"
    );
    assert_eq!(pod["f:securityContext"], json!({}));
    let sidecar = &pod["f:containers"]["k:{\"name\":\"sidecar\"}"];
    assert_eq!(sidecar["."], json!({}));
    assert_eq!(sidecar["f:resources"], json!({}));
    assert_eq!(sidecar["f:imagePullPolicy"], json!({}));
    assert_eq!(fields["f:metadata"]["f:labels"]["."], json!({}));
    assert!(fields.get("f:status").is_none());
}
