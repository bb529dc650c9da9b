//! Field ownership of server-side apply, checked against the recorded SSA sequence of
//! kube-apiserver: field sets, conflicts and force, merges of keyed and set lists, the
//! `FieldsV1` encoding; the other writes are in `update`.

use serde_json::{Value, json};

use super::*;
use tether_schema::Schemas;

mod update;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/kube-apiserver-v1.36/"
);
/// The time of the recorded SSA sequence and later writes.
const T18: &str = "2026-11-21T21:02:18Z";

fn fixture(name: &str) -> Value {
    let path = format!("{FIXTURES}{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The request body of a fixture, YAML (apply) or JSON.
fn request_body(fx: &Value) -> Value {
    match &fx["request"]["body"] {
        Value::String(s) => serde_saphyr::from_str(s).expect("a YAML body"),
        other => other.clone(),
    }
}

fn response(fx: &Value) -> Value {
    fx["response"]["body"].clone()
}

fn schema_of(obj: &Value) -> Schema {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if let Some(s) = Schemas::builtin().get(group, version, kind) {
        return s;
    }
    assert_eq!(kind, "Widget", "only the CRD's kind is not built in");
    let crd = response(&fixture(
        "apply/customresourcedefinition-widgets.example.com.json",
    ));
    Schema::from_openapi_v3(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
}

fn opts<'a>(manager: &'a str, force: bool, api_version: &'a str, now: &'a str) -> ApplyOptions<'a> {
    ApplyOptions {
        manager,
        force,
        api_version,
        now,
        reset_fields: &["status"],
        subresource: "",
    }
}

fn managed(obj: &Value) -> &Value {
    &obj["metadata"]["managedFields"]
}

/// Compares as text, so key order counts as well.
fn assert_same_json(got: &Value, want: &Value, what: &str) {
    assert_eq!(
        serde_json::to_string_pretty(got).expect("json"),
        serde_json::to_string_pretty(want).expect("json"),
        "{what}"
    );
}

#[test]
fn applying_each_recorded_manifest_gives_the_recorded_field_set() {
    let mut seen = 0;
    let mut dir: Vec<_> = std::fs::read_dir(format!("{FIXTURES}apply"))
        .expect("apply fixtures")
        .map(|e| e.expect("entry").path())
        .collect();
    dir.sort();
    for file in dir {
        let name = format!(
            "apply/{}",
            file.file_name().and_then(|n| n.to_str()).expect("name")
        );
        let fx = fixture(&name);
        let want = response(&fx);
        let Some(want_entries) = want["metadata"]["managedFields"].as_array() else {
            // An apply the server refused has no object to compare.
            continue;
        };
        let config = request_body(&fx);
        let schema = schema_of(&config);
        let now = want_entries[0]["time"].as_str().expect("time");
        let api_version = config["apiVersion"].as_str().expect("apiVersion");
        let got = apply(
            &schema,
            None,
            &config,
            &opts("tether", true, api_version, now),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want_entry = want_entries[0].clone();
        // Widget was recorded with its keys sorted; the field order of an entry is
        // the typed one everywhere else.
        if config["kind"] == "Widget" {
            want_entry = json!({
                "manager": want_entry["manager"], "operation": want_entry["operation"],
                "apiVersion": want_entry["apiVersion"], "time": want_entry["time"],
                "fieldsType": want_entry["fieldsType"], "fieldsV1": want_entry["fieldsV1"],
            });
        }
        assert_same_json(&managed(&got)[0], &want_entry, &name);
        assert_eq!(managed(&got).as_array().map(Vec::len), Some(1), "{name}");
        seen += 1;
    }
    assert!(seen >= 20, "only {seen} apply fixtures compared");
}

#[test]
fn apply_to_nothing_creates_the_object_from_the_config() {
    let fx = fixture("apply/configmap-app-config.json");
    let config = request_body(&fx);
    let schema = schema_of(&config);
    let got = apply_by(&schema, None, &config, "tether", false).expect("apply");
    assert_eq!(got["data"], config["data"]);
    assert_eq!(got["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(got["metadata"]["name"], "app-config");
}

/// Replays the recorded SSA sequence, each step from the recorded state before it.
#[test]
fn a_second_manager_changing_an_owned_field_conflicts() {
    let (err, want) = try_replay(
        FIRST_APPLY,
        "ssa/conflict-without-force.json",
        "other",
        false,
    );
    let err = err.expect_err("a conflict");
    assert_eq!(err.to_string(), want["message"].as_str().expect("message"));
    let ApplyError::Conflicts(conflicts) = err else {
        panic!("not a conflict");
    };
    assert_eq!(conflicts.len(), 1);
    let cause = &want["details"]["causes"][0];
    assert_eq!(conflicts[0].field, cause["field"].as_str().expect("field"));
    assert_eq!(
        conflicts[0].message(),
        cause["message"].as_str().expect("msg")
    );
    assert_eq!(conflicts[0].manager, "tether");
}

/// `config` applied over `live` by `manager` at the recorded time, in the config's
/// apiVersion (`force`: taking the fields others own).
fn apply_by(
    schema: &Schema,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, ApplyError> {
    let api_version = config["apiVersion"].as_str().unwrap_or_default();
    apply(
        schema,
        live,
        config,
        &opts(manager, force, api_version, T18),
    )
}

/// A recorded step's config applied over the recorded state `before`: the answer
/// and the server's.
fn try_replay(
    before: &str,
    step: &str,
    manager: &str,
    force: bool,
) -> (Result<Value, ApplyError>, Value) {
    let live = response(&fixture(before));
    let fx = fixture(step);
    let config = request_body(&fx);
    let got = apply_by(&schema_of(&config), Some(&live), &config, manager, force);
    (got, response(&fx))
}

fn replay(before: &str, step: &str, manager: &str, force: bool) -> (Value, Value) {
    let (got, want) = try_replay(before, step, manager, force);
    (got.unwrap_or_else(|e| panic!("{step}: {e}")), want)
}

/// The recorded sequence's first apply, by tether.
const FIRST_APPLY: &str = "apply/deployment-web.json";

/// The recorded SSA sequence after [`FIRST_APPLY`]: each step's fixture, manager
/// and force.
const SSA_STEPS: [(&str, &str, bool); 4] = [
    // Force moves the conflicting field to the forcing manager.
    ("ssa/other-manager-forced.json", "other", true),
    // A manager setting an unowned field shares the object.
    ("ssa/other-manager-sets-replicas.json", "hpa-like", false),
    // Reapplying with force takes the field back.
    ("ssa/tether-reapplies.json", "tether", true),
    // A dry-run apply computes the same answer.
    ("ssa/dry-run.json", "tether", true),
];

#[test]
fn each_ssa_step_from_the_recorded_state_before_it_answers_as_the_server() {
    let mut before = FIRST_APPLY;
    for (step, manager, force) in SSA_STEPS {
        let (got, want) = replay(before, step, manager, force);
        assert_same_json(managed(&got), managed(&want), step);
        assert_eq!(got["spec"], want["spec"], "{step}");
        before = step;
    }
}

#[test]
fn a_field_the_manager_omits_is_removed() {
    let (got, want) = replay(
        "apply/configmap-app-config.json",
        "ssa/field-removed-when-manager-omits-it.json",
        "tether",
        true,
    );
    assert_same_json(managed(&got), managed(&want), "managedFields");
    assert_eq!(got["data"], want["data"]);
}

/// The same sequence, each step from this engine's own previous answer.
#[test]
fn the_ssa_sequence_chains_on_its_own_results() {
    let first = fixture("apply/deployment-web.json");
    let config = request_body(&first);
    let schema = schema_of(&config);
    let t15 = "2026-11-21T21:02:15Z";
    let mut live = apply(
        &schema,
        None,
        &config,
        &opts("tether", true, "apps/v1", t15),
    )
    .expect("create");
    for (step, manager, force) in SSA_STEPS {
        let fx = fixture(step);
        live = apply_by(&schema, Some(&live), &request_body(&fx), manager, force)
            .unwrap_or_else(|e| panic!("{step}: {e}"));
        assert_same_json(managed(&live), managed(&response(&fx)), step);
    }
    assert_eq!(live["spec"]["replicas"], 4);
}

#[test]
fn applying_the_live_value_is_no_conflict_and_keeps_the_time() {
    let live = response(&fixture("apply/deployment-web.json"));
    let config = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "fixtures"},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}
    });
    let schema = schema_of(&config);
    let got = apply_by(&schema, Some(&live), &config, "other", false).expect("no conflict");
    let entries = managed(&got).as_array().expect("entries");
    assert_eq!(entries.len(), 2);
    // Unchanged object: the tether entry is untouched, the new one shares the image.
    assert_eq!(entries[0], managed(&live)[0]);
    assert_eq!(
        entries[1]["fieldsV1"],
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    // Re-applying tether's own manifest changes nothing, not even its time.
    let again = apply_by(
        &schema,
        Some(&live),
        &request_body(&fixture("apply/deployment-web.json")),
        "tether",
        false,
    )
    .expect("re-apply");
    assert_eq!(managed(&again), managed(&live));
}

#[test]
fn conflicts_with_several_fields_and_updaters_are_worded_like_the_server() {
    let schema = schema_of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
    let mut live = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"a": "1"}},
        "spec": {"replicas": 1, "minReadySeconds": 1}
    });
    let created = live.clone();
    record_update(
        &schema,
        None,
        &mut live,
        &UpdateOptions {
            manager: "kubectl-edit",
            api_version: "apps/v1",
            now: T18,
            reset_fields: &["status"],
            subresource: "",
        },
    );
    assert_eq!(created["spec"], live["spec"]);
    let config = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"a": "2"}},
        "spec": {"replicas": 3, "minReadySeconds": 1}
    });
    let err = apply_by(&schema, Some(&live), &config, "tether", false).expect_err("conflicts");
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" using apps/v1:\n- .metadata.labels.a\n- .spec.replicas"
    );
    let forced = apply_by(&schema, Some(&live), &config, "tether", true).expect("forced");
    let entries = managed(&forced).as_array().expect("entries");
    assert_eq!(entries[0]["manager"], "tether");
    assert_eq!(entries[1]["manager"], "kubectl-edit");
    // The updater keeps the labels map it created and the field both set alike.
    assert_eq!(
        entries[1]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:minReadySeconds": {}}})
    );
}

#[test]
fn an_omitted_field_another_manager_owns_stays() {
    let schema = Schemas::builtin()
        .get("", "v1", "ConfigMap")
        .expect("ConfigMap");
    // ConfigMap `c` with `fields` besides its kind and name.
    let cm = |fields: Value| {
        let mut config =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        merge_json(&mut config, fields);
        config
    };
    let both = cm(json!({"data": {"a": "1", "b": "2"}}));
    let live = apply_by(&schema, None, &both, "first", false).expect("first");
    let only_b = cm(json!({"data": {"b": "2"}}));
    let live = apply_by(&schema, Some(&live), &only_b, "second", false).expect("second");
    let only_a = cm(json!({"data": {"a": "1"}}));
    let got = apply_by(&schema, Some(&live), &only_a, "first", false).expect("shrink");
    assert_eq!(got["data"], json!({"a": "1", "b": "2"}));
    let got = apply_by(&schema, Some(&got), &cm(json!({})), "second", false).expect("drops b");
    assert_eq!(got["data"], json!({"a": "1"}));
    // Dropping every label removes the labels map, not just its keys.
    let labels = cm(json!({"metadata": {"labels": {"x": "y"}}}));
    let labelled = apply_by(&schema, None, &labels, "first", false).expect("labelled");
    let bare = apply_by(&schema, Some(&labelled), &cm(json!({})), "first", false).expect("bare");
    assert_eq!(bare["metadata"], json!({"name": "c"}));
}

/// `patch` merged into `target`, objects key by key.
fn merge_json(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

#[test]
fn set_lists_are_owned_by_value_and_atomic_values_whole() {
    let schema = schema_of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
    let config = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["a/b", "c/d"], "annotations": {}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"spec": {"containers": [{"name": "c", "args": ["x"], "ports": []}]}}}
    });
    let got = apply_by(&schema, None, &config, "m", false).expect("apply");
    assert_same_json(
        &managed(&got)[0]["fieldsV1"],
        &json!({
            "f:metadata": {"f:annotations": {}, "f:finalizers": {"v:\"a/b\"": {}, "v:\"c/d\"": {}}},
            "f:spec": {"f:selector": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"c\"}": {".": {}, "f:args": {}, "f:name": {}}}}}}
        }),
        "fieldsV1",
    );
    // A second manager adding a finalizer merges into the set.
    let more = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["e/f"]}});
    let merged = apply_by(&schema, Some(&got), &more, "n", false).expect("apply");
    assert_eq!(
        merged["metadata"]["finalizers"],
        json!(["a/b", "c/d", "e/f"])
    );
}

#[test]
fn keyed_lists_merge_in_the_configs_order_and_keep_live_only_items() {
    let schema = schema_of(&json!({"apiVersion": "v1", "kind": "Pod"}));
    let c = |names: &[&str]| {
        let containers: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "image": n}))
            .collect();
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": containers}})
    };
    let live = apply_by(&schema, None, &c(&["a", "b", "c"]), "one", false).expect("one");
    let got = apply_by(&schema, Some(&live), &c(&["c", "d", "a"]), "two", true).expect("two");
    let names: Vec<&str> = got["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|x| x["name"].as_str().expect("name"))
        .collect();
    // Shared items follow the config; a live-only item keeps its place before them.
    assert_eq!(names, ["b", "c", "d", "a"]);
}

#[test]
fn configs_that_cannot_be_merged_are_invalid() {
    let schema = schema_of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
    let o = opts("m", false, "apps/v1", T18);
    // The recorded OpenAPI gives `name` a default of "", which keys the item.
    let unnamed = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
    let got = apply(&schema, None, &unnamed, &o).expect("keyed by the default");
    assert!(
        managed(&got)[0]["fieldsV1"]
            .to_string()
            .contains(r#"k:{\"name\":\"\"}"#),
        "{got}"
    );
    let crd = Schema::from_openapi_v3(&json!({"type": "object", "properties": {"spec": {
    "type": "object", "properties": {"items": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
        "items": {"type": "object", "properties": {"id": {"type": "string"}, "v": {"type": "string"}}}
    }}}}}));
    let missing_key = json!({"spec": {"items": [{"id": "a"}, {"v": "x"}]}});
    let err = apply(&crd, None, &missing_key, &o).expect_err("no id");
    assert_eq!(
        err.to_string(),
        ".spec.items: element 1: associative list with keys has an element that omits key field \"id\" (and doesn't have default value)"
    );
    let duplicate =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}});
    let err = apply(&schema, None, &duplicate, &o).expect_err("duplicate");
    assert!(
        matches!(&err, ApplyError::Invalid(m) if m.contains("duplicate entries for key [name=\"a\"]")),
        "{err}"
    );
    assert!(matches!(
        apply(&schema, None, &json!([1]), &o),
        Err(ApplyError::Invalid(_))
    ));
}

#[test]
fn apply_ignores_reset_fields_and_keeps_them_from_live() {
    let schema = schema_of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                      "status": {"replicas": 2}});
    let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                        "spec": {"paused": true}, "status": {"replicas": 9}});
    let got = apply_by(&schema, Some(&live), &config, "m", false).expect("apply");
    assert_eq!(got["status"], json!({"replicas": 2}));
    assert_eq!(
        managed(&got)[0]["fieldsV1"],
        json!({"f:spec": {"f:paused": {}}})
    );
}

#[test]
fn unknown_kinds_merge_maps_and_replace_lists() {
    let schema = Schema::untyped();
    let thing = |spec: Value| json!({"apiVersion": "x/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec});
    let first = thing(json!({"a": {"b": 1}, "list": [1, 2]}));
    let live = apply_by(&schema, None, &first, "m", false).expect("create");
    assert_same_json(
        &managed(&live)[0]["fieldsV1"],
        // Every key of an untyped object is a map entry, so owned itself.
        &json!({"f:spec": {".": {}, "f:a": {".": {}, "f:b": {}}, "f:list": {}}}),
        "untyped field set",
    );
    let second = thing(json!({"a": {"c": 2}, "list": [3]}));
    let got = apply_by(&schema, Some(&live), &second, "n", true).expect("merge");
    assert_eq!(got["spec"], json!({"a": {"b": 1, "c": 2}, "list": [3]}));
}

#[test]
fn fields_v1_round_trips_every_recorded_entry() {
    let mut count = 0;
    for dir in ["apply", "ssa", "generation", "patch", "delete"] {
        for entry in std::fs::read_dir(format!("{FIXTURES}{dir}")).expect("dir") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("read");
            let fx: Value = serde_json::from_str(&text).expect("json");
            let body = response(&fx);
            for e in body["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let set = FieldSet::from_fields_v1(&e["fieldsV1"]).expect("parse");
                assert_same_json(
                    &set.to_fields_v1(),
                    &e["fieldsV1"],
                    &path.display().to_string(),
                );
                count += 1;
            }
        }
    }
    assert!(count > 30);
    assert!(FieldSet::from_fields_v1(&json!({"x:1": {}})).is_err());
    assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
    assert!(FieldSet::from_fields_v1(&json!([])).is_err());
}

#[test]
fn field_set_operations() {
    let a =
        FieldSet::from_fields_v1(&json!({"f:spec": {"f:a": {}, "f:b": {"f:c": {}}}})).expect("a");
    let b =
        FieldSet::from_fields_v1(&json!({"f:spec": {"f:b": {"f:c": {}}, "f:d": {}}})).expect("b");
    assert_eq!(
        a.union(&b).to_fields_v1(),
        json!({"f:spec": {"f:a": {}, "f:b": {"f:c": {}}, "f:d": {}}})
    );
    assert_eq!(
        a.intersection(&b).to_fields_v1(),
        json!({"f:spec": {"f:b": {"f:c": {}}}})
    );
    assert_eq!(
        a.difference(&b).to_fields_v1(),
        json!({"f:spec": {"f:a": {}}})
    );
    assert!(a.difference(&a).is_empty());
    let p = |s: &str| PathElement::Field(s.into());
    assert!(a.contains(&[p("spec"), p("a")]));
    assert!(!a.contains(&[p("spec")]));
    assert!(a.has_prefix(&[p("spec")]));
    assert_eq!(a.paths().len(), 2);
}
