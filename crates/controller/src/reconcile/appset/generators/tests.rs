use serde_json::json;
use tether_core::source::FileKind;

use super::*;

fn file(path: &str, text: &str) -> SourceFile {
    SourceFile {
        path: path.into(),
        bytes: text.as_bytes().to_vec(),
        kind: FileKind::Regular,
    }
}

fn repo() -> GitRef {
    GitRef {
        repo: "https://git.example/platform.git".into(),
        revision: "HEAD".into(),
        secret: None,
    }
}

fn facts(files: Vec<SourceFile>) -> Facts {
    Facts {
        trees: HashMap::from([(repo(), files)]),
        clusters: vec![
            ClusterSecret {
                name: "prod-eu".into(),
                labels: BTreeMap::from([
                    ("env".into(), "prod".into()),
                    ("region".into(), "eu".into()),
                ]),
            },
            ClusterSecret {
                name: "staging".into(),
                labels: BTreeMap::from([("env".into(), "staging".into())]),
            },
        ],
    }
}

fn generate(spec: Value, facts: &Facts) -> Result<Vec<ParamSet>, GeneratorError> {
    Generator::parse(&spec, "g")?.generate(facts)
}

fn origins(sets: &[ParamSet]) -> Vec<&str> {
    sets.iter().map(|s| s.origin.as_str()).collect()
}

#[test]
fn a_list_gives_each_element_flattened() {
    let sets = generate(
        json!({"list": {"elements": [{"name": "a", "values": {"replicas": 2, "tags": ["x"]}}, {"name": "b", "on": true}]}}),
        &Facts::default(),
    )
    .expect("generates");
    assert_eq!(origins(&sets), ["list element 0", "list element 1"]);
    assert_eq!(sets[0].values["values.replicas"], "2");
    assert_eq!(sets[0].values["values.tags[0]"], "x");
    assert_eq!(sets[1].values["on"], "true");
}

#[test]
fn git_directories_match_globs_and_leave_out_the_excluded() {
    let tree = vec![
        file("teams/a/deploy.yaml", "x"),
        file("teams/b/deploy.yaml", "x"),
        file("teams/Big_Team/deploy.yaml", "x"),
        file("teams/legacy/deploy.yaml", "x"),
        file("teams/a/nested/more.yaml", "x"),
        file("README.md", "x"),
    ];
    let sets = generate(
        json!({"git": {"repo": repo().repo, "directories": [{"path": "teams/*"}, {"path": "teams/legacy", "exclude": true}]}}),
        &facts(tree),
    )
    .expect("generates");
    assert_eq!(
        origins(&sets),
        [
            "directory teams/Big_Team",
            "directory teams/a",
            "directory teams/b"
        ]
    );
    let big = &sets[0].values;
    assert_eq!(big["path"], "teams/Big_Team");
    assert_eq!(big["path.basename"], "Big_Team");
    assert_eq!(big["path.basenameNormalized"], "big-team");
    assert_eq!(
        (big["path[0]"].as_str(), big["path[1]"].as_str()),
        ("teams", "Big_Team")
    );
}

#[test]
fn globs_keep_star_in_a_segment_and_let_double_star_cross() {
    assert!(glob_match("teams/*", "teams/a"));
    assert!(!glob_match("teams/*", "teams/a/b"));
    assert!(glob_match(
        "config/**/settings.yaml",
        "config/settings.yaml"
    ));
    assert!(glob_match(
        "config/**/settings.yaml",
        "config/a/b/settings.yaml"
    ));
    assert!(glob_match("env-?/[ab]*", "env-1/beta"));
    assert!(!glob_match("env-?/[ab]*", "env-12/beta"));
    assert!(!glob_match("env-?/[ab]*", "env-1/gamma"));
}

#[test]
fn git_files_give_each_file_or_each_item_of_a_list() {
    let tree = vec![
        file(
            "config/eu/settings.yaml",
            "cluster:\n  name: eu-1\nreplicas: 3\n",
        ),
        file(
            "config/us/settings.yaml",
            "[{\"cluster\": {\"name\": \"us-1\"}}, {\"cluster\": {\"name\": \"us-2\"}}]",
        ),
        file("config/us/other.yaml", "ignored: true"),
    ];
    let sets = generate(
        json!({"git": {"repo": repo().repo, "revision": "main", "files": [{"path": "config/**/settings.yaml"}]}}),
        &Facts {
            trees: HashMap::from([(GitRef { revision: "main".into(), ..repo() }, tree)]),
            ..Facts::default()
        },
    )
    .expect("generates");
    assert_eq!(
        origins(&sets),
        [
            "file config/eu/settings.yaml",
            "file config/us/settings.yaml item 0",
            "file config/us/settings.yaml item 1"
        ]
    );
    assert_eq!(sets[0].values["cluster.name"], "eu-1");
    assert_eq!(sets[0].values["replicas"], "3");
    assert_eq!(sets[0].values["path"], "config/eu");
    assert_eq!(sets[0].values["path.basename"], "eu");
    assert_eq!(sets[0].values["path.filename"], "settings.yaml");
    assert_eq!(sets[2].values["cluster.name"], "us-2");
}

#[test]
fn a_file_that_is_no_parameter_set_is_an_error_naming_it() {
    for (text, why) in [
        ("a: [", "is not JSON or YAML"),
        ("just text", "must hold a mapping"),
        ("[1, 2]", "item 0: must be a mapping"),
    ] {
        let err = generate(
            json!({"git": {"repo": repo().repo, "files": [{"path": "*.yaml"}]}}),
            &facts(vec![file("bad.yaml", text)]),
        )
        .expect_err("refused");
        let message = err.to_string();
        assert!(
            message.starts_with("https://git.example/platform.git: bad.yaml: "),
            "{message}"
        );
        assert!(message.contains(why), "{message}");
        assert!(!err.is_retryable());
    }
}

#[test]
fn a_tree_not_fetched_yet_is_retryable() {
    let err = generate(
        json!({"git": {"repo": "https://other.example/r.git", "directories": [{"path": "*"}]}}),
        &Facts::default(),
    )
    .expect_err("not fetched");
    assert!(err.is_retryable());
    assert_eq!(
        err.to_string(),
        "https://other.example/r.git@HEAD: not fetched yet"
    );
}

#[test]
fn clusters_are_selected_by_labels_and_name_their_secret() {
    let sets = generate(
        json!({"clusters": {"selector": {"matchLabels": {"env": "prod"}}}}),
        &facts(vec![]),
    )
    .expect("generates");
    assert_eq!(origins(&sets), ["cluster prod-eu"]);
    assert_eq!(sets[0].values["name"], "prod-eu");
    assert_eq!(sets[0].values["metadata.labels.region"], "eu");
    assert_eq!(sets[0].cluster.as_deref(), Some("prod-eu"));
    let all = generate(json!({"clusters": {}}), &facts(vec![])).expect("generates");
    assert_eq!(all.len(), 2);
}

#[test]
fn a_matrix_is_the_product_and_a_clash_of_parameters_is_an_error() {
    let tree = vec![file("teams/a/x.yaml", "x"), file("teams/b/x.yaml", "x")];
    let sets = generate(
        json!({"matrix": {"generators": [
            {"git": {"repo": repo().repo, "directories": [{"path": "teams/*"}]}},
            {"clusters": {}},
        ]}}),
        &facts(tree),
    )
    .expect("generates");
    assert_eq!(sets.len(), 4);
    assert_eq!(sets[0].origin, "directory teams/a × cluster prod-eu");
    assert_eq!(sets[0].values["path.basename"], "a");
    assert_eq!(sets[0].values["name"], "prod-eu");
    assert_eq!(sets[0].cluster.as_deref(), Some("prod-eu"));
    let err = generate(
        json!({"matrix": {"generators": [
            {"list": {"elements": [{"name": "x"}]}},
            {"clusters": {}},
        ]}}),
        &facts(vec![]),
    )
    .expect_err("clash");
    assert_eq!(
        err.to_string(),
        "matrix: list element 0 and cluster prod-eu both set parameter \"name\""
    );
}

#[test]
fn a_merge_overlays_the_base_sets_by_key() {
    let sets = generate(
        json!({"merge": {"mergeKeys": ["name"], "generators": [
            {"clusters": {}},
            {"list": {"elements": [{"name": "staging", "replicas": "1"}, {"name": "nowhere", "replicas": "9"}]}},
        ]}}),
        &facts(vec![]),
    )
    .expect("generates");
    assert_eq!(origins(&sets), ["cluster prod-eu", "cluster staging"]);
    assert_eq!(sets[0].values.get("replicas"), None);
    assert_eq!(sets[1].values["replicas"], "1");
}

#[test]
fn a_git_generator_reads_with_a_secret_of_its_namespace_only() {
    let g = Generator::parse(
        &json!({"git": {"repo": "https://h/r.git", "files": [{"path": "*.yaml"}],
                        "credentials": {"secretRef": {"name": "git-creds"}}}}),
        "g",
    )
    .expect("parses");
    let mut refs = Vec::new();
    g.git_refs(&mut refs);
    assert_eq!(refs[0].secret.as_deref(), Some("git-creds"));
    for credentials in [
        json!({"secretRef": {"name": "c", "namespace": "tether-system"}}),
        json!({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}),
    ] {
        let err = Generator::parse(
            &json!({"git": {"repo": "https://h/r.git", "files": [{"path": "*"}], "credentials": credentials}}),
            "g",
        )
        .expect_err("refused")
        .to_string();
        assert!(err.starts_with("g.git.credentials"), "{err}");
    }
}

#[test]
fn a_bad_generator_is_named_by_its_place() {
    let cases = [
        (
            json!({}),
            "g: needs exactly one of list, git, clusters, matrix, merge",
        ),
        (
            json!({"list": {"elements": []}, "clusters": {}}),
            "g: needs exactly one of",
        ),
        (
            json!({"git": {"repo": "r"}}),
            "g.git: needs exactly one of directories, files",
        ),
        (
            json!({"git": {"repo": "r", "directories": [{"path": "../up"}]}}),
            "g.git.directories: \"../up\"",
        ),
        (
            json!({"git": {"repo": "r", "directories": [{"path": "a", "exclude": true}]}}),
            "g.git.directories: needs a path",
        ),
        (
            json!({"matrix": {"generators": [{"clusters": {}}]}}),
            "g.matrix.generators: needs exactly two",
        ),
        (
            json!({"merge": {"mergeKeys": [], "generators": [{"clusters": {}}, {"clusters": {}}]}}),
            "g.merge.mergeKeys: ",
        ),
        (
            json!({"matrix": {"generators": [{"clusters": {}}, {"lists": {}}]}}),
            "g.matrix.generators[1]",
        ),
        (
            json!({"git": {"repo": "r", "directories": [{"paths": "a"}]}}),
            "g.git.directories[0]",
        ),
    ];
    for (spec, expected) in cases {
        let err = Generator::parse(&spec, "g")
            .expect_err("refused")
            .to_string();
        assert!(err.starts_with(expected), "{spec}: {err}");
    }
}
