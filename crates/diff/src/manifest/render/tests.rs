use super::*;

fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    list.iter()
        .map(|(p, b)| (p.to_string(), b.as_bytes().to_vec()))
        .collect()
}

const CM_A: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n";
const CM_B: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n";
const WORKFLOW: &str = "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n";
const BASE_K: &str = "resources:\n  - cm.yaml\n";
const OVERLAY_K: &str = "resources:\n  - ../../base\nnamePrefix: prod-\n";

fn names(set: &ManifestSet) -> Vec<String> {
    set.objects.iter().map(|m| m.id.name.clone()).collect()
}

fn errors(result: Result<ManifestSet, ManifestErrors>) -> Vec<String> {
    match result {
        Ok(set) => panic!("expected errors, got {:?}", names(&set)),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn plain_tree_skips_dot_directories_and_other_files() {
    let repo = files(&[
        (".github/workflows/ci.yml", WORKFLOW),
        ("apps/.hidden/x.yaml", WORKFLOW),
        ("apps/a.yaml", CM_A),
        ("apps/README.md", "# not a manifest"),
        ("apps/sub/b.yml", CM_B),
    ]);
    let set = render_tree(&repo, "", &Renderers::default(), &ParseOptions::default())
        .expect("the root reads as plain files");
    assert_eq!(names(&set), ["a", "b"]);
    let set = render_tree(
        &repo,
        "apps/",
        &Renderers::default(),
        &ParseOptions::default(),
    )
    .expect("the path reads as plain files");
    assert_eq!(names(&set), ["a", "b"]);
    assert_eq!(set.objects[0].origin.file, "apps/a.yaml");
}

#[test]
fn a_kustomization_at_the_root_is_built_alone_with_files_from_elsewhere_in_the_tree() {
    let repo = files(&[
        ("base/kustomization.yaml", BASE_K),
        ("base/cm.yaml", CM_A),
        ("overlays/prod/kustomization.yaml", OVERLAY_K),
        // Not referenced: a plain read would pick it up, the build must not.
        ("overlays/prod/stray.yaml", CM_B),
    ]);
    assert!(needs_repository(
        &repo,
        "overlays/prod",
        &Renderers::default()
    ));
    let set = render_tree(
        &repo,
        "overlays/prod",
        &Renderers::default(),
        &ParseOptions::default(),
    )
    .expect("the overlay builds");
    assert_eq!(names(&set), ["prod-a"]);
}

#[test]
fn base_and_overlays_at_the_root_are_refused_instead_of_rendered_twice() {
    let repo = files(&[
        ("base/kustomization.yaml", BASE_K),
        ("base/cm.yaml", CM_A),
        ("overlays/prod/kustomization.yaml", OVERLAY_K),
    ]);
    let errs = errors(render_tree(
        &repo,
        "",
        &Renderers::default(),
        &ParseOptions::default(),
    ));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("base: this kustomization is also built by overlays/prod"));
}

#[test]
fn independent_kustomizations_below_a_plain_root_are_each_built() {
    let repo = files(&[
        ("one/kustomization.yaml", BASE_K),
        ("one/cm.yaml", CM_A),
        ("two/kustomization.yaml", BASE_K),
        ("two/cm.yaml", CM_B),
        (
            "top.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: top\n",
        ),
    ]);
    let set = render_tree(&repo, "", &Renderers::default(), &ParseOptions::default())
        .expect("both build");
    let mut got = names(&set);
    got.sort();
    assert_eq!(got, ["a", "b", "top"]);
}

#[test]
fn remote_bases_and_references_leaving_the_repository_are_refused() {
    let remote = files(&[(
        "app/kustomization.yaml",
        "resources:\n  - https://github.com/example/repo//base?ref=v1\n",
    )]);
    let errs = errors(render_tree(
        &remote,
        "app",
        &Renderers::default(),
        &ParseOptions::default(),
    ));
    assert!(errs[0].contains("remote base"), "{errs:?}");
    assert!(
        errs[0].starts_with("app/kustomization.yaml: resources names"),
        "{errs:?}"
    );

    let outside = files(&[
        ("app/kustomization.yaml", "resources:\n  - ../../../etc\n"),
        ("app/cm.yaml", CM_A),
    ]);
    let errs = errors(render_tree(
        &outside,
        "app",
        &Renderers::default(),
        &ParseOptions::default(),
    ));
    assert!(errs[0].contains("outside the repository"), "{errs:?}");

    let absolute = files(&[(
        "app/kustomization.yaml",
        "configMapGenerator:\n  - name: x\n    files:\n      - key=/etc/passwd\n",
    )]);
    let errs = errors(render_tree(
        &absolute,
        "app",
        &Renderers::default(),
        &ParseOptions::default(),
    ));
    assert!(errs[0].contains("outside the repository"), "{errs:?}");
}

#[test]
fn a_missing_renderer_and_a_failing_build_name_the_kustomization() {
    let repo = files(&[("app/kustomization.yaml", BASE_K), ("app/cm.yaml", CM_A)]);
    let missing = Renderers {
        kustomize: KustomizeCommand::standalone("tether-no-such-kustomize"),
        ..Renderers::default()
    };
    let errs = errors(render_tree(
        &repo,
        "app",
        &missing,
        &ParseOptions::default(),
    ));
    assert_eq!(
        errs,
        [
            "app: `tether-no-such-kustomize` is not installed (not found on PATH); it renders this path"
        ]
    );

    let broken = files(&[("app/kustomization.yaml", "resources:\n  - missing.yaml\n")]);
    let errs = errors(render_tree(
        &broken,
        "app",
        &Renderers::default(),
        &ParseOptions::default(),
    ));
    assert!(
        errs[0].starts_with("app: kustomize build failed: "),
        "{errs:?}"
    );
    assert_eq!(errs[0].lines().count(), 1, "only the first line: {errs:?}");
}

#[test]
fn a_directory_on_disk_reads_like_the_same_tree_from_git() {
    let repo = files(&[
        (".github/workflows/ci.yml", WORKFLOW),
        ("a.yaml", CM_A),
        ("base/kustomization.yaml", BASE_K),
        ("base/cm.yaml", CM_B),
    ]);
    let tmp = tempfile::tempdir().expect("tempdir");
    for (p, b) in &repo {
        let target = tmp.path().join(p);
        fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        fs::write(target, b).expect("write");
    }
    let from_git =
        render_tree(&repo, "", &Renderers::default(), &ParseOptions::default()).expect("tree");
    let from_disk =
        super::super::render_dir(tmp.path(), &Renderers::default(), &ParseOptions::default())
            .expect("disk");
    let objects = |s: &ManifestSet| -> Vec<serde_json::Value> {
        s.objects.iter().map(|m| m.object.clone()).collect()
    };
    assert_eq!(objects(&from_git), objects(&from_disk));
    assert_eq!(names(&from_disk), ["a", "b"]);
}

/// The helm `.ci/install-helm` installs (as `tests/integration/chart.rs` finds it).
fn installed_helm() -> String {
    let path = std::env::var("TETHER_HELM").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tools/bin/helm").to_string()
    });
    assert!(
        Path::new(&path).is_file(),
        "helm is not installed at {path}: run .ci/install-helm"
    );
    path
}

#[test]
fn a_chart_takes_values_files_then_inline_values_then_set() {
    let repo = files(&[
        (
            "web/Chart.yaml",
            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
        ),
        (
            "web/values.yaml",
            "a: chart\nb: chart\nc: chart\nd: chart\n",
        ),
        ("web/prod.yaml", "b: file\nc: file\nd: file\n"),
        (
            "web/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\ndata: {{ toJson .Values }}\n",
        ),
        (".github/workflows/ci.yml", "on: push\n"),
    ]);
    let renderers = Renderers {
        helm: HelmInputs {
            program: Some(installed_helm()),
            namespace: "shop".into(),
            value_files: vec!["prod.yaml".into()],
            values: Some("c: inline\nd: inline\n".into()),
            set: vec!["d=set".into()],
            ..HelmInputs::default()
        },
        release: "app".into(),
        ..Renderers::default()
    };
    let set = render_tree(&repo, "web", &renderers, &ParseOptions::default()).expect("renders");
    assert_eq!(set.len(), 1);
    let cm = &set.objects[0];
    assert_eq!(cm.id.to_string(), "ConfigMap shop/app");
    assert_eq!(cm.origin.file, "web/Chart.yaml");
    assert_eq!(
        cm.object["data"],
        serde_json::json!({"a": "chart", "b": "file", "c": "inline", "d": "set"})
    );

    let missing = Renderers {
        helm: HelmInputs {
            value_files: vec!["nope.yaml".into()],
            ..renderers.helm.clone()
        },
        ..renderers.clone()
    };
    let errs = errors(render_tree(
        &repo,
        "web",
        &missing,
        &ParseOptions::default(),
    ));
    assert_eq!(
        errs,
        ["web: the values file \"nope.yaml\" is not in the chart's revision"]
    );
}

/// A chart under `charts/web` of a repository whose values live in `values/`.
const VALUES_REPO: &[(&str, &str)] = &[
    (
        "charts/web/Chart.yaml",
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    ),
    ("charts/web/values.yaml", "color: chart\n"),
    (
        "charts/web/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: {{ .Values.color }}\n",
    ),
    ("values/prod.yaml", "color: prod\n"),
];

fn helm_with(value_files: &[&str]) -> Renderers {
    Renderers {
        helm: HelmInputs {
            program: Some(installed_helm()),
            namespace: "shop".into(),
            value_files: value_files.iter().map(|f| f.to_string()).collect(),
            ..HelmInputs::default()
        },
        release: "web".into(),
        ..Renderers::default()
    }
}

#[test]
fn a_values_file_anywhere_in_the_revision_is_read_and_one_outside_it_refused() {
    let repo = files(VALUES_REPO);
    let chart_only: Vec<(String, Vec<u8>)> = repo
        .iter()
        .filter(|(p, _)| p.starts_with("charts/web/"))
        .cloned()
        .collect();
    let prod = helm_with(&["../../values/prod.yaml"]);
    // The source reads the whole repository only when a values file lies outside.
    assert!(needs_repository(&chart_only, "charts/web", &prod));
    assert!(!needs_repository(
        &chart_only,
        "charts/web",
        &helm_with(&["values.yaml"])
    ));
    let set = render_tree(&repo, "charts/web", &prod, &ParseOptions::default()).expect("renders");
    assert_eq!(set.objects[0].object["data"]["color"], "prod");

    let escaping = helm_with(&["../../../etc/passwd"]);
    assert_eq!(
        errors(render_tree(
            &repo,
            "charts/web",
            &escaping,
            &ParseOptions::default()
        )),
        ["charts/web: valueFiles names \"../../../etc/passwd\", which is outside the repository"]
    );
}

#[test]
fn on_disk_a_values_file_in_the_work_tree_is_read_and_a_symlink_out_of_it_refused() {
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.yaml"), "color: stolen\n").expect("write");
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    for (rel, text) in VALUES_REPO {
        let path = repo.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    std::fs::create_dir(repo.join(".git")).expect("a work tree");
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        repo.join("values/linked.yaml"),
    )
    .expect("symlink");
    let chart = repo.join("charts/web");

    let render = |file: &str| {
        super::super::render_dir(&chart, &helm_with(&[file]), &ParseOptions::default())
    };
    let set = render("../../values/prod.yaml").expect("renders");
    assert_eq!(set.objects[0].object["data"]["color"], "prod");
    std::fs::write(tmp.path().join("beside.yaml"), "color: beside\n").expect("write");
    for file in ["../../values/linked.yaml", "../../../beside.yaml"] {
        assert_eq!(
            errors(render(file)),
            [format!(
                ".: valueFiles names {file:?}, which is outside the repository"
            )]
        );
    }
}
