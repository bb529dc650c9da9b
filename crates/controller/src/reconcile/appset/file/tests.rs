use std::collections::HashMap;

use tether_core::source::{FileKind, SourceFile};

use super::*;
use crate::config::{Config, ConfigError};

const REPO: &str = "https://git.example/platform.git";

fn tree(dirs: &[&str]) -> Facts {
    let files = dirs
        .iter()
        .map(|d| SourceFile {
            path: format!("{d}/deploy.yaml"),
            bytes: b"kind: ConfigMap".to_vec(),
            kind: FileKind::Regular,
        })
        .collect();
    let git = GitRef {
        repo: REPO.into(),
        revision: "HEAD".into(),
        secret: None,
    };
    Facts {
        trees: HashMap::from([(git, files)]),
        clusters: Vec::new(),
    }
}

/// A file with one listed app and a `teams/*` appSet whose template is `spec`.
fn file(listed: &str, spec: &str) -> String {
    format!(
        "apps:
  - name: {listed}
    source: {{repo: {REPO}, path: base}}
    destination: {{namespace: base}}
appSets:
  - name: teams
    generators:
      - git: {{repo: {REPO}, directories: [{{path: 'teams/*'}}]}}
    syncPolicy: {{deletion: delete}}
    template:
      metadata: {{name: 'team-{{{{path.basename}}}}'}}
      spec: {spec}
"
    )
}

const GOOD: &str = "{source: {repo: https://git.example/platform.git, path: '{{path}}'}, destination: {namespace: '{{path.basename}}'}}";

fn parse(text: &str, facts: &Facts) -> (Result<Config, ConfigError>, Reads) {
    let mut reads = Reads::default();
    let config = Config::parse_with(text, "tether.yaml", &mut |ns, item| {
        generate(ns, item, facts, &mut reads)
    });
    (config, reads)
}

#[test]
fn a_git_directories_app_set_stamps_one_app_per_directory_resolved_as_a_listed_one() {
    let (config, reads) = parse(
        &file("base", GOOD),
        &tree(&["teams/a", "teams/b", "other/c"]),
    );
    let config = config.expect("valid");
    let names: Vec<&str> = config.apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["base", "team-a", "team-b"]);
    let b = config.app("team-b").expect("generated");
    assert_eq!(b.source.path, "teams/b");
    assert_eq!(b.destination.namespace, "b");
    assert_eq!(config.generated.len(), 2);
    assert_eq!(config.generated[1].app_set, "teams");
    assert_eq!(config.generated[1].origin, "directory teams/b");
    assert!(config.generated[1].prune, "syncPolicy.deletion: delete");
    assert_eq!(reads.git.len(), 1);
    assert_eq!(reads.clusters, None);
}

#[test]
fn a_tree_not_fetched_yet_is_an_error_and_names_what_to_fetch() {
    let (config, reads) = parse(&file("base", GOOD), &Facts::default());
    let err = config.expect_err("not fetched").to_string();
    assert!(
        err.contains("appSets[0] (teams)") && err.contains("not fetched"),
        "{err}"
    );
    assert_eq!(reads.git[0].repo, REPO);
}

#[test]
fn a_template_that_renders_an_invalid_app_names_the_app_set_and_the_parameter_set() {
    let unknown = GOOD.replace("{{path}}", "{{nmae}}");
    let (config, _) = parse(&file("base", &unknown), &tree(&["teams/a"]));
    let err = config.expect_err("unknown parameter").to_string();
    assert!(
        err.contains("appSets[0] (teams)")
            && err.contains("parameter set directory teams/a")
            && err.contains("template.spec.source.path: unknown parameter {{nmae}}"),
        "{err}"
    );
    let bad_interval = GOOD.replace("path: '{{path}}'", "path: '{{path}}', interval: soon");
    let (config, _) = parse(&file("base", &bad_interval), &tree(&["teams/a"]));
    let err = config.expect_err("bad interval").to_string();
    assert!(
        err.contains(
            "appSets[0] (teams), parameter set directory teams/a: template.spec.source.interval"
        ),
        "{err}"
    );
    let unknown_key = GOOD.replace("path: '{{path}}'", "path: '{{path}}', branchh: main");
    let (config, _) = parse(&file("base", &unknown_key), &tree(&["teams/a"]));
    let err = config.expect_err("unknown key").to_string();
    assert!(
        err.contains("template.spec.source") && err.contains("branchh"),
        "{err}"
    );
}

#[test]
fn a_generated_app_named_as_a_listed_one_is_an_error_naming_both() {
    let (config, _) = parse(&file("team-a", GOOD), &tree(&["teams/a"]));
    let err = config.expect_err("collision").to_string();
    assert!(
        err.contains("\"team-a\" is also the name of apps[0]")
            && err.contains("parameter set directory teams/a"),
        "{err}"
    );
}

#[test]
fn an_item_is_checked_by_the_crds_reader_with_its_own_field_names() {
    let text = file("base", GOOD).replace("deletion: delete", "deletion: sometimes");
    let (config, _) = parse(&text, &tree(&["teams/a"]));
    let err = config.expect_err("bad policy").to_string();
    assert!(
        err.contains("appSets[0] (teams)") && err.contains("syncPolicy.deletion"),
        "{err}"
    );
    assert!(!err.contains("spec.syncPolicy"), "{err}");
    let text = file("base", GOOD).replace("    syncPolicy", "    labels: {a: b}\n    syncPolicy");
    let err = parse(&text, &tree(&["teams/a"]))
        .0
        .expect_err("unknown key")
        .to_string();
    assert!(err.contains("labels: unknown key"), "{err}");
    // Without a generator, as `tether sync --config` reads the file: no app generated.
    let config = Config::parse(&file("base", GOOD), "tether.yaml").expect("valid");
    assert_eq!(config.apps.len(), 1);
}

#[test]
fn two_app_sets_rendering_one_name_is_an_error_naming_both_parameter_sets() {
    let text = format!(
        "{}  - name: again
    generators:
      - list: {{elements: [{{team: a}}]}}
    template:
      metadata: {{name: 'team-{{{{team}}}}'}}
      spec: {GOOD_LIST}
",
        file("base", GOOD)
    );
    let (config, _) = parse(&text, &tree(&["teams/a"]));
    let err = config.expect_err("collision").to_string();
    assert!(
        err.contains(
            "appSets[1] (again), parameter set list element 0: template.spec.name: \"team-a\" is also the name of appSets[0] (teams) parameter set directory teams/a"
        ),
        "{err}"
    );
}

const GOOD_LIST: &str = "{source: {repo: https://git.example/platform.git, path: x}}";
