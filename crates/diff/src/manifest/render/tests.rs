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

/// The errors of rendering `repo` at `app` with the default renderers.
fn app_errors(repo: &[(String, Vec<u8>)]) -> Vec<String> {
    render_errors(repo, "app", &Renderers::default())
}

/// The errors of rendering `repo` at `path` with `renderers`.
fn render_errors(repo: &[(String, Vec<u8>)], path: &str, renderers: &Renderers) -> Vec<String> {
    errors(render_tree(repo, path, renderers, &ParseOptions::default()))
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
    let errs = render_errors(&repo, "", &Renderers::default());
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
    let errs = app_errors(&remote);
    assert!(errs[0].contains("remote base"), "{errs:?}");
    assert!(
        errs[0].starts_with("app/kustomization.yaml: resources names"),
        "{errs:?}"
    );

    let outside = files(&[
        ("app/kustomization.yaml", "resources:\n  - ../../../etc\n"),
        ("app/cm.yaml", CM_A),
    ]);
    let errs = app_errors(&outside);
    assert!(errs[0].contains("outside the repository"), "{errs:?}");

    let absolute = files(&[(
        "app/kustomization.yaml",
        "configMapGenerator:\n  - name: x\n    files:\n      - key=/etc/passwd\n",
    )]);
    let errs = app_errors(&absolute);
    assert!(errs[0].contains("outside the repository"), "{errs:?}");
}

#[test]
fn a_missing_renderer_and_a_failing_build_name_the_kustomization() {
    let repo = files(&[("app/kustomization.yaml", BASE_K), ("app/cm.yaml", CM_A)]);
    let missing = Renderers {
        kustomize: KustomizeCommand::standalone("tether-no-such-kustomize"),
        ..Renderers::default()
    };
    let errs = render_errors(&repo, "app", &missing);
    assert_eq!(
        errs,
        [
            "app: `tether-no-such-kustomize` is not installed (not found on PATH); it renders this path"
        ]
    );

    // A resource without a name: kustomize itself refuses it.
    let broken = files(&[
        ("app/kustomization.yaml", "resources:\n  - cm.yaml\n"),
        ("app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\n"),
    ]);
    let errs = app_errors(&broken);
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
pub(super) fn installed_helm() -> String {
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
    let errs = render_errors(&repo, "web", &missing);
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
        render_errors(&repo, "charts/web", &escaping),
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

/// Issue #24, finding 5: every spelling kustomize fetches over the network, in every
/// field that names a file or a base, is refused naming the file and the entry.
#[test]
fn remote_references_are_refused_by_a_positive_rule_in_every_field() {
    let remote = [
        "deploy@host:org/repo.git",
        "git::git@github.com:org/repo//base",
        "GIT@github.com:org/repo.git",
        "github.com:org/repo",
        "github.com/org/repo/base?ref=v1",
        "GitHub.com/org/repo",
        "gh:org/repo",
        "https://github.com/org/repo//base",
        "ssh://git@host/org/repo.git",
        "http://127.0.0.1:9/base",
    ];
    let fields = [
        ("resources", "resources:\n  - '{}'\n"),
        ("components", "components:\n  - '{}'\n"),
        ("bases", "bases:\n  - '{}'\n"),
        ("transformers", "transformers:\n  - '{}'\n"),
        ("patches", "patches:\n  - path: '{}'\n"),
        (
            "configMapGenerator",
            "configMapGenerator:\n  - name: x\n    files:\n      - 'key={}'\n",
        ),
        ("helmCharts", "helmCharts:\n  - name: web\n    repo: '{}'\n"),
        ("openapi", "openapi:\n  path: '{}'\n"),
    ];
    for (field, template) in fields {
        for reference in remote {
            let text = template.replace("{}", reference);
            // A folder of that name in the tree does not make it a path: kustomize
            // still reads `github.com/org/repo` as GitHub.
            let repo = files(&[
                ("app/kustomization.yaml", text.as_str()),
                ("app/github.com/org/repo/kustomization.yaml", BASE_K),
                ("app/github.com/org/repo/cm.yaml", CM_A),
            ]);
            let errs = app_errors(&repo);
            assert_eq!(
                errs,
                [format!(
                    "app/kustomization.yaml: {field} names the remote base {reference:?}; remote bases are refused unless allowed"
                )],
                "{field}: {reference}"
            );
        }
    }
}

#[test]
fn only_paths_naming_something_inside_the_revision_are_accepted() {
    let refused = [
        ("/etc/kubernetes", "outside the repository"),
        ("../../../etc", "outside the repository"),
        ("file:///etc/kubernetes", "outside the repository"),
        ("git::file:///srv/repo", "outside the repository"),
        ("nowhere", "no file or directory of the repository"),
    ];
    for (reference, why) in refused {
        let repo = files(&[(
            "app/kustomization.yaml",
            &format!("resources:\n  - '{reference}'\n"),
        )]);
        for allow_remote_bases in [false, true] {
            let renderers = Renderers {
                allow_remote_bases,
                ..Renderers::default()
            };
            let errs = render_errors(&repo, "app", &renderers);
            assert_eq!(
                errs,
                [format!(
                    "app/kustomization.yaml: resources names {reference:?}, which is {why}"
                )],
            );
        }
    }
    let repo = files(&[
        (
            "app/kustomization.yaml",
            "resources:\n  - ./cm.yaml\n  - ../base\n",
        ),
        ("app/cm.yaml", CM_A),
        ("base/kustomization.yaml", BASE_K),
        ("base/cm.yaml", CM_B),
    ]);
    let set = render_tree(
        &repo,
        "app",
        &Renderers::default(),
        &ParseOptions::default(),
    )
    .expect("local paths build");
    assert_eq!(names(&set), ["a", "b"]);
}

/// Issue #24, finding 3: a tree entry `..` would have the private copy written
/// outside its folder; the copy refuses it whatever the source let through.
#[test]
fn a_path_leaving_the_render_folder_is_refused_and_nothing_written() {
    let outside = tempfile::tempdir().expect("tempdir");
    let root = outside.path().join("copy");
    fs::create_dir(&root).expect("mkdir");
    let at = Location::file("app");
    for key in [
        "app/../../escaped.yaml",
        "/escaped.yaml",
        "../escaped.yaml",
        "",
    ] {
        let err = write_in_copy(
            &root,
            key,
            b"x",
            &at,
            &Renderers::default(),
            &mut Vec::new(),
        )
        .expect_err(key);
        assert_eq!(
            err.to_string(),
            format!(
                "app: the revision's path {key:?} leads outside the folder it is copied to for rendering"
            )
        );
    }
    assert!(!outside.path().join("escaped.yaml").exists());
    write_in_copy(
        &root,
        "app/./cm.yaml",
        b"x",
        &at,
        &Renderers::default(),
        &mut Vec::new(),
    )
    .expect("inside");
    assert!(root.join("app/cm.yaml").is_file());

    // Through both private copies, deep enough to reach `/` from any temp folder.
    let escape = format!(
        "{}tmp/tether-escape-{}",
        "../".repeat(32),
        std::process::id()
    );
    let target = Path::new("/tmp").join(format!("tether-escape-{}", std::process::id()));
    for (marker, text) in [
        ("kustomization.yaml", BASE_K),
        (CHART_FILE, "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
    ] {
        let marker_path = format!("app/{marker}");
        let escaping = format!("app/{escape}");
        let repo = files(&[
            (marker_path.as_str(), text),
            ("app/cm.yaml", CM_A),
            (escaping.as_str(), CM_B),
        ]);
        let errs = app_errors(&repo);
        assert_eq!(
            errs,
            [format!(
                "app: the revision's path {escaping:?} leads outside the folder it is copied to for rendering"
            )]
        );
        assert!(!target.exists(), "{marker}: wrote {}", target.display());
    }
}

/// Issue #24, finding 6: a renderer that hangs is stopped at the render timeout,
/// and the error says so.
#[test]
fn a_renderer_that_hangs_is_stopped_at_the_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hang = dir.path().join("kustomize-hang");
    fs::write(&hang, "#!/bin/sh\nsleep 300\n").expect("write");
    fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let renderers = Renderers {
        kustomize: KustomizeCommand::standalone(&hang.display().to_string()),
        timeout: Duration::from_millis(300),
        ..Renderers::default()
    };
    let repo = files(&[("app/kustomization.yaml", BASE_K), ("app/cm.yaml", CM_A)]);
    let err =
        render_tree(&repo, "app", &renderers, &ParseOptions::default()).expect_err("times out");
    assert!(err.is_retryable(), "{err}");
    assert_eq!(
        err.0[0].to_string(),
        format!(
            "app: `{}` was stopped after 300ms (the render timeout), with every process it started",
            hang.display()
        )
    );
}

/// Issue #24 (redaction) and #31: a real kustomize error keeps its words and loses
/// the Secret's value, printed bare as a node's contents.
#[test]
fn a_kustomize_error_shows_what_failed_and_no_secret_value() {
    let repo = files(&[
        (
            "app/kustomization.yaml",
            "resources:\n  - secret.yaml\nreplacements:\n  - source: {kind: Secret, fieldPath: stringData.token}\n    targets:\n      - select: {kind: Secret}\n        fieldPaths: [stringData.token.deeper]\n",
        ),
        (
            "app/secret.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  token: hunter2-in-git\n",
        ),
    ]);
    let errs = app_errors(&repo);
    assert_eq!(
        errs,
        [
            "app: kustomize build failed: unable to find field \"stringData.token.deeper\" in replacement target: wrong node kind: expected MappingNode but got ScalarNode: node contents: ***"
        ]
    );
}

/// Issue #27: a chart's `secrets.yaml` values file, encrypted with SOPS, is decrypted
/// into the private copy before the chart renders (the helm-secrets layout).
#[test]
fn a_charts_sops_encrypted_values_file_is_decrypted_before_it_renders() {
    use age::secrecy::ExposeSecret;
    let identity = age::x25519::Identity::generate();
    let mut recipients = tether_sops::Recipients::new();
    recipients
        .add_age(&identity.to_public().to_string())
        .expect("a recipient");
    let rule = tether_sops::Rule::EncryptedRegex("^password$".into());
    let values = serde_json::json!({"password": "chart-plain-Qw8"});
    let secrets = tether_sops::encrypt(
        tether_sops::Format::Yaml,
        vec![values],
        &rule,
        false,
        &recipients,
    )
    .expect("encrypts");
    let mut keys = tether_sops::Keys::new();
    keys.add_age("test", identity.to_string().expose_secret())
        .expect("an identity");
    let repo: Vec<(String, Vec<u8>)> = [
        ("web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
        ("web/values.yaml", "password: chart\n"),
        (
            "web/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  password: {{ .Values.password }}\n",
        ),
    ]
    .into_iter()
    .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
    .chain([("web/secrets.yaml".to_string(), secrets)])
    .collect();
    let renderers = Renderers {
        sops: super::SopsKeys::new(keys),
        ..helm_with(&["secrets.yaml"])
    };
    let set = render_tree(&repo, "web", &renderers, &ParseOptions::default()).expect("renders");
    assert_eq!(set.objects[0].object["data"]["password"], "chart-plain-Qw8");
    // The same chart on disk: the values file is given to helm decrypted, from a copy.
    let tmp = tempfile::tempdir().expect("tempdir");
    for (path, bytes) in &repo {
        let target = tmp.path().join(path);
        fs::create_dir_all(target.parent().expect("a parent")).expect("mkdir");
        fs::write(target, bytes).expect("write");
    }
    let chart = tmp.path().join("web");
    let set = super::super::render_dir(&chart, &renderers, &ParseOptions::default())
        .expect("renders on disk");
    assert_eq!(set.objects[0].object["data"]["password"], "chart-plain-Qw8");
    assert!(
        fs::read_to_string(chart.join("secrets.yaml"))
            .expect("kept")
            .contains("ENC[AES256_GCM,"),
        "the work tree keeps the ciphertext"
    );

    let errs = render_errors(&repo, "web", &helm_with(&["secrets.yaml"]));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("web/secrets.yaml"), "{errs:?}");
}

/// Flux's order with Argo CD's value files (issue #26): chart defaults < value files <
/// `valuesFrom` in order < inline values < `--set`; a Secret's value a template
/// fails on is masked in the error.
#[test]
fn values_from_sit_between_the_files_and_the_inline_values_and_a_secrets_never_shows() {
    let repo = files(&[
        (
            "web/Chart.yaml",
            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
        ),
        (
            "web/values.yaml",
            "a: chart\nb: chart\nc: chart\nd: chart\ne: chart\n",
        ),
        ("web/prod.yaml", "b: file\nc: file\nd: file\ne: file\n"),
        (
            "web/templates/cm.yaml",
            "{{ if .Values.password }}{{ fail (printf \"cannot use %s\" .Values.password) }}{{ end }}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata: {{ toJson .Values }}\n",
        ),
    ]);
    let layer = |origin: &str, json: &str, secret: bool| ValuesLayer {
        origin: origin.into(),
        json: json.into(),
        secret,
    };
    let mut renderers = helm_with(&["prod.yaml"]);
    renderers.helm.values_from = vec![
        layer(
            "ConfigMap shop/one",
            r#"{"c": "one", "d": "one", "e": "one"}"#,
            false,
        ),
        layer("Secret shop/two", r#"{"d": "two", "e": "two"}"#, true),
    ];
    renderers.helm.values = Some("e: inline\n".into());
    let set = render_tree(&repo, "web", &renderers, &ParseOptions::default()).expect("renders");
    assert_eq!(
        set.objects[0].object["data"],
        serde_json::json!({"a": "chart", "b": "file", "c": "one", "d": "two", "e": "inline"})
    );

    renderers.helm.values_from[1] = layer(
        "Secret shop/two",
        r#"{"password": "s3cret-from-a-secret"}"#,
        true,
    );
    let errs = render_errors(&repo, "web", &renderers).join("\n");
    assert!(errs.contains("cannot use"), "{errs}");
    assert!(!errs.contains("s3cret-from-a-secret"), "{errs}");
    let shown = format!("{:?}", renderers.helm);
    assert!(
        !shown.contains("s3cret") && shown.contains("one"),
        "{shown}"
    );
}

/// Flux's `postRenderers[].kustomize` (issue #26): a strategic merge patch and a JSON
/// 6902 patch by target, an image override and labels, applied by Kustomize to the
/// chart's output before it is parsed; a target selecting nothing is named.
#[test]
fn post_renderers_patch_the_charts_output_and_a_target_selecting_nothing_is_named() {
    let repo = files(&[
        (
            "web/Chart.yaml",
            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
        ),
        (
            "web/templates/deploy.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n",
        ),
        (
            "web/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: b\n",
        ),
    ]);
    let mut renderers = helm_with(&[]);
    renderers.post_renderers = vec![serde_json::json!({
        "patches": [
            {"patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n",
             "target": {"kind": "Deployment", "name": "web"}},
            {"patch": "- op: add\n  path: /data/patched\n  value: \"yes\"\n",
             "target": {"version": "v1", "kind": "ConfigMap"}},
        ],
        "images": [{"name": "nginx", "newName": "registry.example.com/nginx", "newTag": "1.27"}],
        "labels": [{"pairs": {"team": "shop"}}],
    })];
    let set = render_tree(&repo, "web", &renderers, &ParseOptions::default()).expect("renders");
    let by_kind = |kind: &str| {
        set.objects
            .iter()
            .find(|m| m.id.kind == kind)
            .map(|m| m.object.clone())
            .expect(kind)
    };
    let deploy = by_kind("Deployment");
    assert_eq!(deploy["spec"]["replicas"], 3);
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/nginx:1.27"
    );
    assert_eq!(deploy["metadata"]["labels"]["team"], "shop");
    assert_eq!(by_kind("ConfigMap")["data"]["patched"], "yes");

    renderers.post_renderers[0]["patches"][1]["target"]["name"] = "nope".into();
    let errs = render_errors(&repo, "web", &renderers);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("web: postRenderers[0].kustomize.patches[1]: target ")
            && errs[0].contains("\"name\":\"nope\"")
            && errs[0].ends_with("selects no object the chart rendered"),
        "{errs:?}"
    );
}
