use serde_json::json;
use tether_core::source::{FileKind, SourceFile};

use super::*;

const REPO: &str = "https://git.example/platform.git";

fn appset(template_spec: Value, generators: Value, deletion: &str) -> AppSet {
    AppSet::from_object(&json!({
        "metadata": {"namespace": "team-a", "name": "teams", "uid": "set-uid", "generation": 2},
        "spec": {
            "generators": generators,
            "template": {"metadata": {"name": "{{path.basename}}", "labels": {"team": "{{path.basename}}"}}, "spec": template_spec},
            "syncPolicy": {"deletion": deletion},
        },
    }))
    .expect("an AppSet")
}

fn teams_spec() -> Value {
    json!({"source": {"repo": REPO, "path": "{{path}}"}, "destination": {"namespace": "{{path.basename}}"}})
}

fn dirs() -> Value {
    json!([{"git": {"repo": REPO, "directories": [{"path": "teams/*"}]}}])
}

fn facts(teams: &[&str]) -> Facts {
    let files = teams
        .iter()
        .map(|t| SourceFile {
            path: format!("teams/{t}/app.yaml"),
            bytes: b"x".to_vec(),
            kind: FileKind::Regular,
        })
        .collect();
    Facts {
        trees: HashMap::from([(
            GitRef {
                repo: REPO.into(),
                revision: "HEAD".into(),
                secret: None,
            },
            files,
        )]),
        clusters: vec![ClusterSecret {
            name: "edge".into(),
            labels: BTreeMap::new(),
        }],
    }
}

fn live(desired: &DesiredApp) -> LiveApp {
    let mut object = desired.object.clone();
    object["metadata"]["uid"] = json!(format!("uid-{}", desired.name));
    object["metadata"]["finalizers"] = json!(["tether.dev/finalizer"]);
    object["status"] = json!({"sync": "Synced"});
    LiveApp::from_object(&object).expect("an App")
}

#[test]
fn each_directory_becomes_an_owned_labelled_app_of_the_appsets_namespace() {
    let set = appset(teams_spec(), dirs(), "orphan");
    assert_eq!(set.deletion, Deletion::Orphan);
    assert_eq!(
        set.git_refs(),
        [GitRef {
            repo: REPO.into(),
            revision: "HEAD".into(),
            secret: None,
        }]
    );
    let apps = set.desired(&facts(&["a", "b"])).expect("renders");
    assert_eq!(
        apps.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let a = &apps[0].object;
    assert_eq!(a["metadata"]["namespace"], "team-a");
    assert_eq!(
        a["metadata"]["labels"],
        json!({"team": "a", APPSET_LABEL: "teams"})
    );
    assert_eq!(
        a["metadata"]["ownerReferences"],
        json!([{"apiVersion": "tether.dev/v1alpha1", "kind": "AppSet", "name": "teams", "uid": "set-uid", "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(a["spec"]["source"]["path"], "teams/a");
    assert_eq!(a["spec"]["destination"]["namespace"], "a");
    assert_eq!(a["spec"]["deletionPolicy"], "Orphan");
}

#[test]
fn a_clusters_app_syncs_to_its_secret_unless_the_template_says_where() {
    let spec = json!({"source": {"repo": REPO}, "destination": {"namespace": "web"}});
    let mut set = appset(spec, json!([{"clusters": {}}]), "orphan");
    set.template["metadata"]["name"] = json!("web-{{name}}");
    set.template["metadata"]["labels"] = json!({});
    let apps = set.desired(&facts(&[])).expect("renders");
    assert_eq!(apps[0].name, "web-edge");
    assert_eq!(
        apps[0].object["spec"]["destination"],
        json!({"namespace": "web", "kubeConfig": {"secretRef": {"name": "edge"}}})
    );
}

#[test]
fn a_template_that_renders_an_invalid_app_names_the_parameter_set() {
    let spec =
        json!({"source": {"repo": REPO, "path": "{{path}}", "interval": "{{path.basename}}"}});
    let err = appset(spec, dirs(), "orphan")
        .desired(&facts(&["a"]))
        .expect_err("invalid");
    assert_eq!(err.reason(), "TemplateInvalid");
    let message = err.to_string();
    assert!(
        message.starts_with("parameter set directory teams/a: App team-a/a: spec.source.interval"),
        "{message}"
    );

    let spec = json!({"source": {"repo": REPO, "path": "{{path.nme}}"}});
    let err = appset(spec, dirs(), "orphan")
        .desired(&facts(&["a"]))
        .expect_err("unknown parameter");
    assert!(
        err.to_string()
            .contains("spec.template.spec.source.path: unknown parameter {{path.nme}}"),
        "{err}"
    );

    let mut set = appset(teams_spec(), dirs(), "orphan");
    set.template["metadata"]["name"] = json!("App_{{path.basename}}");
    let err = set
        .desired(&facts(&["a"]))
        .expect_err("bad name")
        .to_string();
    assert!(
        err.contains("metadata.name \"App_a\" is not a valid name"),
        "{err}"
    );

    // What an App may not say, an AppSet may not stamp (issue #24's keys).
    let spec = json!({"source": {"repo": REPO}, "destination": {"context": "prod"}});
    let err = appset(spec, dirs(), "orphan")
        .desired(&facts(&["a"]))
        .expect_err("tether's context");
    assert!(
        err.to_string().contains("spec.destination.context"),
        "{err}"
    );
}

#[test]
fn two_parameter_sets_rendering_one_name_is_an_error_naming_both() {
    let mut set = appset(teams_spec(), dirs(), "orphan");
    set.template["metadata"]["name"] = json!("same");
    let err = set.desired(&facts(&["a", "b"])).expect_err("duplicate");
    assert_eq!(err.reason(), "DuplicateName");
    assert_eq!(
        err.to_string(),
        "parameter sets directory teams/a and directory teams/b both render App \"same\""
    );
}

#[test]
fn a_bad_appset_is_named_by_its_field() {
    let base = json!({"metadata": {"namespace": "t", "name": "s"}, "spec": {
        "generators": [{"list": {"elements": []}}],
        "template": {"metadata": {"name": "x"}, "spec": {}},
    }});
    assert!(AppSet::from_object(&base).is_ok());
    let cases = [
        (
            "/spec/generators",
            json!([]),
            "spec.generators: needs at least one generator",
        ),
        (
            "/spec/generators",
            json!([{"lst": {}}]),
            "spec.generators[0]",
        ),
        (
            "/spec/template/metadata",
            json!({"name": "x", "namespace": "other"}),
            "spec.template.metadata.namespace: ",
        ),
        (
            "/spec/template",
            json!({"spec": {}}),
            "spec.template: needs metadata.name",
        ),
        (
            "/spec/syncPolicy",
            json!({"deletion": "cascade"}),
            "spec.syncPolicy.deletion: \"cascade\"",
        ),
    ];
    for (pointer, value, expected) in cases {
        let mut object = base.clone();
        match object.pointer_mut(pointer) {
            Some(at) => *at = value,
            None => object["spec"]["syncPolicy"] = value,
        }
        let err = AppSet::from_object(&object).expect_err("refused");
        assert_eq!(err.reason(), "SpecInvalid");
        assert!(err.to_string().starts_with(expected), "{pointer}: {err}");
    }
}

#[test]
fn the_plan_creates_the_missing_updates_the_drifted_and_leaves_the_rest() {
    let set = appset(teams_spec(), dirs(), "orphan");
    let apps = set.desired(&facts(&["a", "b", "c"])).expect("renders");
    let mut drifted = live(&apps[1]);
    drifted.object["spec"]["destination"]["namespace"] = json!("elsewhere");
    let existing = [live(&apps[0]), drifted];
    let changes = plan(&set, apps.clone(), &existing).expect("plans");
    let applied: Vec<&str> = changes
        .iter()
        .map(|c| match c {
            Change::Apply(app) => app.name.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(applied, ["b", "c"]);
    // In step: nothing to write.
    let existing: Vec<LiveApp> = apps.iter().map(live).collect();
    assert_eq!(plan(&set, apps, &existing).expect("plans"), []);
}

#[test]
fn a_suspension_through_the_api_is_kept_unless_the_template_sets_one() {
    let set = appset(teams_spec(), dirs(), "orphan");
    let apps = set.desired(&facts(&["a"])).expect("renders");
    let mut suspended = live(&apps[0]);
    suspended.object["spec"]["suspend"] = json!(true);
    assert_eq!(plan(&set, apps, &[suspended.clone()]).expect("plans"), []);

    let mut spec = teams_spec();
    spec["suspend"] = json!(false);
    let set = appset(spec, dirs(), "orphan");
    let apps = set.desired(&facts(&["a"])).expect("renders");
    let changes = plan(&set, apps, &[suspended]).expect("plans");
    match changes.as_slice() {
        [Change::Apply(app)] => assert_eq!(app.object["spec"]["suspend"], false),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_gone_parameter_set_orphans_or_deletes_its_app_per_policy() {
    for (policy, expected) in [("orphan", "orphan"), ("delete", "delete")] {
        let set = appset(teams_spec(), dirs(), policy);
        let before = set.desired(&facts(&["a", "b"])).expect("renders");
        let mut b = live(&before[1]);
        b.object["metadata"]["ownerReferences"]
            .as_array_mut()
            .expect("refs")
            .push(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "other"}));
        let existing = [live(&before[0]), b];
        let after = set.desired(&facts(&["a"])).expect("renders");
        let changes = plan(&set, after, &existing).expect("plans");
        match (expected, &changes[..]) {
            ("orphan", [Change::Orphan { name, owners }]) => {
                assert_eq!(name, "b");
                assert_eq!(
                    owners,
                    &[
                        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "other"})
                    ]
                );
            }
            ("delete", [Change::Delete { name, uid }]) => {
                assert_eq!((name.as_str(), uid.as_str()), ("b", "uid-b"))
            }
            _ => panic!("{policy}: {changes:?}"),
        }
    }
}

#[test]
fn an_app_another_owner_controls_is_not_taken_and_an_unowned_one_is_adopted() {
    let set = appset(teams_spec(), dirs(), "orphan");
    let apps = set.desired(&facts(&["a"])).expect("renders");
    let mut other = live(&apps[0]);
    other.object["metadata"]["ownerReferences"][0]["uid"] = json!("another-set");
    other.object["metadata"]["ownerReferences"][0]["name"] = json!("platform");
    let other = LiveApp::from_object(&other.object).expect("an App");
    let err = plan(&set, apps.clone(), &[other]).expect_err("taken");
    assert_eq!(err.reason(), "AppTaken");
    assert_eq!(
        err.to_string(),
        "App \"a\" (directory teams/a) exists and is controlled by AppSet platform, not by this AppSet"
    );
    let mut orphan = live(&apps[0]);
    orphan.object["metadata"]["ownerReferences"] = json!([]);
    let orphan = LiveApp::from_object(&orphan.object).expect("an App");
    assert!(
        matches!(&plan(&set, apps, &[orphan]).expect("plans")[..], [Change::Apply(a)] if a.name == "a")
    );
}
