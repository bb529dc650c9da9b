//! `tether diff --base` (issue #29): a real Git repository with a base and a head
//! commit, plain, Kustomize and CRD apps, compared by the real binary with the real
//! `kubectl kustomize`. What a pull request changes is shown, what it does not touch
//! is not rendered, a Secret's value never appears, and one broken app does not stop
//! the others.

use std::path::Path;
use tether_testkit::assert_contains;

use serde_json::Value;

use crate::support::{GitRepo, git};

/// The remote the configuration's apps name: the checkout's `origin`.
const ORIGIN: &str = "https://git.example.com/shop/deploy.git";

/// A Secret value of the base and of the head: neither may reach any output.
pub(crate) const SECRET_BASE: &str = "hunter2-base-value";
pub(crate) const SECRET_HEAD: &str = "hunter2-head-value";

pub(crate) fn web(image: &str, chart: &str, password: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {{app: web, helm.sh/chart: web-{chart}}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
        - name: web
          image: {image}
---
apiVersion: v1
kind: Secret
metadata:
  name: web-db
  namespace: shop
stringData:
  password: {password}
  user: web
"
    )
}

fn crd(extra_field: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {{type: integer}}{extra_field}
"
    )
}

fn shop_overlay(colour: &str) -> String {
    format!(
        "resources: [../../bases/shop]
namespace: shop
configMapGenerator:
  - name: shop-config
    literals: [colour={colour}]
"
    )
}

const SHOP_BASE: &str = "resources: [deployment.yaml]\n";
const SHOP_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  selector: {matchLabels: {app: shop}}
  template:
    metadata:
      labels: {app: shop}
    spec:
      containers:
        - name: shop
          image: shop:1
          envFrom: [{configMapRef: {name: shop-config}}]
";

const API: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: api
  namespace: shop
data: {mode: steady}
";

const CONFIG: &str = "apps:
  - name: web
    source: {repo: \"https://git.example.com/shop/deploy.git\", path: apps/web}
    destination: {namespace: shop}
  - name: shop
    source: {repo: \"https://git.example.com/shop/deploy.git\", path: apps/shop}
    destination: {namespace: shop}
  - name: crds
    source: {repo: \"https://git.example.com/shop/deploy.git\", path: apps/crds}
    destination: {namespace: shop}
  - name: api
    source: {repo: \"https://git.example.com/shop/deploy.git\", path: apps/api}
    destination: {namespace: shop}
  - name: broken
    source: {repo: \"https://git.example.com/shop/deploy.git\", path: apps/broken}
    destination: {namespace: shop}
  - name: elsewhere
    source: {repo: \"https://git.example.com/other/repo.git\", path: apps/web}
    destination: {namespace: shop}
";

/// The repository of the "done when": a base commit, and a head commit that
/// bumps an image (and the chart label), changes a Secret, a generated ConfigMap's
/// content and a CRD, breaks one overlay and leaves `api` alone.
pub(crate) fn pull_request(dir: &Path) -> (GitRepo, String) {
    let repo = GitRepo::init(dir.to_path_buf());
    git(dir, &["remote", "add", "origin", ORIGIN]);
    repo.write("tether.yaml", CONFIG);
    repo.write(
        "apps/web/web.yaml",
        &web("nginx:1.25", "1.0.0", SECRET_BASE),
    );
    repo.write("bases/shop/kustomization.yaml", SHOP_BASE);
    repo.write("bases/shop/deployment.yaml", SHOP_DEPLOYMENT);
    repo.write("apps/shop/kustomization.yaml", &shop_overlay("blue"));
    repo.write("apps/crds/crd.yaml", &crd(""));
    repo.write("apps/api/api.yaml", API);
    repo.write("apps/broken/kustomization.yaml", "resources: [cm.yaml]\n");
    repo.write("apps/broken/cm.yaml", API);
    let base = repo.commit("base");
    repo.write(
        "apps/web/web.yaml",
        &web("nginx:1.27", "1.1.0", SECRET_HEAD),
    );
    repo.write("apps/shop/kustomization.yaml", &shop_overlay("green"));
    repo.write(
        "apps/crds/crd.yaml",
        &crd("\n                colour: {type: string}"),
    );
    repo.write(
        "apps/broken/kustomization.yaml",
        "resources: [cm.yaml, missing.yaml]\n",
    );
    repo.commit("head");
    (repo, base)
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn tether_in(dir: &Path, args: &[&str]) -> Run {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg("diff")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("tether runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn app<'v>(report: &'v Value, name: &str) -> &'v Value {
    report["apps"]
        .as_array()
        .and_then(|apps| apps.iter().find(|a| a["name"] == name))
        .unwrap_or_else(|| panic!("no app {name} in {report:#}"))
}

fn resource<'v>(app: &'v Value, kind: &str) -> &'v Value {
    app["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|o| o["kind"] == kind))
        .unwrap_or_else(|| panic!("no {kind} in {app:#}"))
}

fn no_secret_value(run: &Run) {
    for value in [SECRET_BASE, SECRET_HEAD] {
        assert!(!run.stdout.contains(value), "{}", run.stdout);
        assert!(!run.stderr.contains(value), "{}", run.stderr);
    }
}

#[test]
fn a_pull_request_shows_what_it_changes_in_every_app_it_touches() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    let run = tether_in(
        &repo.dir,
        &["--base", &base, "--config", "tether.yaml", "-o", "json"],
    );
    no_secret_value(&run);
    assert_eq!(run.code, Some(1), "changes found: {}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).expect("JSON");

    // Only the apps of this repository; `api` is not rendered at all: 2 renders for
    // each of web, shop, crds and broken (whose head fails).
    let names: Vec<&str> = report["apps"]
        .as_array()
        .expect("apps")
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names, ["web", "shop", "crds", "api", "broken"]);
    assert_eq!(report["renders"], 8, "{report:#}");
    assert_eq!(app(&report, "api")["status"], "Unchanged");
    assert_eq!(app(&report, "api")["rendered"], false);
    assert_eq!(
        report["summary"]["apps"],
        serde_json::json!({"changed": 3, "unchanged": 1, "failed": 1})
    );

    // The image bump, per container, and the chart label filtered, not shown.
    let images = report["images"].as_array().expect("images");
    assert_eq!(images.len(), 1, "{report:#}");
    assert_eq!(images[0]["container"], "web");
    assert_eq!(images[0]["from"], "nginx:1.25");
    assert_eq!(images[0]["to"], "nginx:1.27");
    let web = app(&report, "web");
    assert_eq!(web["filtered"], 1, "{web:#}");
    let deployment = resource(web, "Deployment");
    assert_eq!(deployment["status"], "Changed");
    let paths: Vec<String> = deployment["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| c["path"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(paths.iter().all(|p| !p.contains("helm.sh")), "{paths:?}");

    // The Secret: changed, by key name only.
    assert_eq!(resource(web, "Secret")["status"], "Changed");
    assert_eq!(
        report["secrets"],
        serde_json::json!([{"app": "web", "object": "Secret shop/web-db", "keys": ["password"]}])
    );

    // The generated ConfigMap is one changed object under its new name, not a
    // removal and an addition.
    let shop = app(&report, "shop");
    assert_eq!(
        shop["summary"],
        serde_json::json!({"added": 0, "removed": 0, "changed": 2}),
        "{shop:#}"
    );
    let config_map = resource(shop, "ConfigMap");
    assert_eq!(config_map["status"], "Changed");
    assert!(
        config_map["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("shop-config-")),
        "{config_map:#}"
    );

    // The CRD's schema change is called out.
    assert_eq!(report["crds"][0]["name"], "widgets.example.com");
    assert_eq!(report["crds"][0]["app"], "crds");

    // The broken overlay is reported, and did not stop the others.
    let broken = app(&report, "broken");
    assert_eq!(broken["status"], "Failed");
    assert_eq!(broken["side"], "head");
    assert!(
        broken["error"]
            .as_str()
            .is_some_and(|e| e.contains("missing.yaml")),
        "{broken:#}"
    );
}

#[test]
fn a_render_failure_fails_the_job_only_when_asked() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    let run = tether_in(
        &repo.dir,
        &[
            "--base",
            &base,
            "--config",
            "tether.yaml",
            "--fail-on-error",
        ],
    );
    no_secret_value(&run);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_contains(&run.stderr, "render failed for app(s) broken");
    // The report is written all the same.
    assert!(
        run.stdout.contains(
            "image: app web Deployment.apps shop/web container web: nginx:1.25 → nginx:1.27"
        ),
        "{}",
        run.stdout
    );
    assert_contains(&run.stdout, "app api: unchanged (not rendered)");
}

/// An overlay whose base changed is rendered again though its own folder did not
/// change; untouched apps are not, and a change with nothing in it exits 0.
#[test]
fn an_app_is_rendered_when_a_base_it_uses_changes_and_only_then() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, _) = pull_request(tmp.path());
    // A kustomization that does not resolve may read anything: repaired first, so
    // that only what the next commit touches is rendered.
    repo.write("apps/broken/kustomization.yaml", "resources: [cm.yaml]\n");
    let before = repo.commit("repair the broken overlay");
    repo.write(
        "bases/shop/deployment.yaml",
        &SHOP_DEPLOYMENT.replace("shop:1", "shop:2"),
    );
    repo.commit("bump the shop base");
    let run = tether_in(
        &repo.dir,
        &["--base", &before, "--config", "tether.yaml", "-o", "json"],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["renders"], 2, "only shop: {report:#}");
    assert_eq!(app(&report, "shop")["status"], "Changed");
    for name in ["web", "crds", "api", "broken"] {
        assert_eq!(app(&report, name)["rendered"], false, "{name}");
    }
    assert_eq!(report["images"][0]["to"], "shop:2");

    // Nothing changed: nothing rendered, exit 0.
    let run = tether_in(&repo.dir, &["--base", "HEAD", "--path", "apps/web"]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_contains(&run.stdout, "app web: unchanged (not rendered)");
}

#[test]
fn the_markdown_comment_fits_its_limit_and_says_what_it_left_out() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    let args = ["--base", &base, "--config", "tether.yaml", "-o", "markdown"];
    let full = tether_in(&repo.dir, &args);
    no_secret_value(&full);
    // The marker names what is previewed: the same on every run.
    let marker = full.stdout.lines().last().unwrap_or_default().to_string();
    assert!(marker.starts_with("<!-- tether-preview id="), "{marker}");
    assert_eq!(
        tether_in(&repo.dir, &args).stdout.lines().last(),
        Some(marker.as_str())
    );
    assert!(full.stdout.contains("<details><summary><b>web</b>"));
    assert!(!full.stdout.contains("left out"), "{}", full.stdout);
    let limit = full.stdout.len() / 2;
    let cut = tether_in(
        &repo.dir,
        &[&args[..], &["--markdown-limit", &limit.to_string()]].concat(),
    );
    no_secret_value(&cut);
    assert!(cut.stdout.len() <= limit, "{} > {limit}", cut.stdout.len());
    assert!(cut.stdout.contains("left out"), "{}", cut.stdout);
    // The summary is never cut: every image change is still there.
    assert!(cut.stdout.contains("`nginx:1.25` → `nginx:1.27`"));
    assert!(cut.stdout.ends_with(&format!("{marker}\n")));

    // The artifact holds every app's report whole.
    let dir = tmp.path().join("artifact");
    let dir_arg = dir.display().to_string();
    let limit = limit.to_string();
    let run = tether_in(
        &repo.dir,
        &[
            &args[..],
            &["--markdown-limit", &limit, "--output-dir", &dir_arg],
        ]
        .concat(),
    );
    assert_eq!(run.stdout, cut.stdout, "stdout is the comment either way");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect(name);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("the directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["broken.md", "crds.md", "index.md", "shop.md", "web.md"]
    );
    assert!(read("web.md").contains("+        image: nginx:1.27"));
    assert!(!read("web.md").contains("left out"));
    assert!(read("index.md").contains("- [web](web.md): "));
    assert!(read("index.md").contains("- api: unchanged"));
    for file in &files {
        for value in [SECRET_BASE, SECRET_HEAD] {
            assert!(!read(file).contains(value), "{file}");
        }
    }
}

#[test]
fn outside_a_git_checkout_the_error_says_so() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tether_in(tmp.path(), &["--base", "main", "--path", "."]);
    assert_eq!(run.code, Some(2));
    assert_contains(&run.stderr, "is in no Git repository");
}

/// One test case of a JUnit report: its suite, class, name, and the kind and
/// message of its outcome (`failure`, `error`, `skipped`; none when it passed).
#[derive(Debug)]
pub(crate) struct Case {
    pub suite: String,
    pub class: String,
    pub name: String,
    pub outcome: Option<(String, String, String)>,
}

/// Parses a JUnit report, checks that every count (`tests`, `failures`, `errors`,
/// `skipped`) of each suite and of the whole agrees with its test cases, and returns
/// the suites' names in order and the cases.
pub(crate) fn junit(text: &str) -> (Vec<String>, Vec<Case>) {
    let doc = roxmltree::Document::parse(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites", "{text}");
    let count = |node: roxmltree::Node, what: &str| -> usize {
        node.attribute(what)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{what} of {node:?}"))
    };
    let (mut suites, mut cases) = (Vec::new(), Vec::new());
    for suite in root.children().filter(|n| n.has_tag_name("testsuite")) {
        let name = suite.attribute("name").unwrap_or_default().to_string();
        let mine: Vec<Case> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .map(|case| Case {
                suite: name.clone(),
                class: case.attribute("classname").unwrap_or_default().to_string(),
                name: case.attribute("name").unwrap_or_default().to_string(),
                outcome: case.children().find(|n| n.is_element()).map(|o| {
                    (
                        o.tag_name().name().to_string(),
                        o.attribute("message").unwrap_or_default().to_string(),
                        o.text().unwrap_or_default().to_string(),
                    )
                }),
            })
            .collect();
        let with = |kind: &str| {
            mine.iter()
                .filter(|c| c.outcome.as_ref().is_some_and(|o| o.0 == kind))
                .count()
        };
        assert_eq!(count(suite, "tests"), mine.len(), "{name}");
        for (attribute, kind) in [
            ("failures", "failure"),
            ("errors", "error"),
            ("skipped", "skipped"),
        ] {
            assert_eq!(count(suite, attribute), with(kind), "{name}: {kind}");
        }
        suites.push(name);
        cases.extend(mine);
    }
    let all = |what: &str| {
        root.children()
            .filter(|n| n.has_tag_name("testsuite"))
            .map(|s| count(s, what))
            .sum::<usize>()
    };
    for what in ["tests", "failures", "errors", "skipped"] {
        assert_eq!(count(root, what), all(what), "{what} of the whole report");
    }
    (suites, cases)
}

/// Issue #29: `-o junit` with `--base` (it was refused): a suite per app, a failure
/// per object the pull request adds, removes or changes (a Secret by key name only),
/// the broken render an error, the untouched app skipped.
#[test]
fn the_junit_report_has_a_suite_per_app_and_a_failure_per_changed_object() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    let run = tether_in(
        &repo.dir,
        &["--base", &base, "--config", "tether.yaml", "-o", "junit"],
    );
    no_secret_value(&run);
    assert_eq!(run.code, Some(1), "changes found: {}", run.stderr);
    let (suites, cases) = junit(&run.stdout);
    assert_eq!(suites, ["web", "shop", "crds", "api", "broken"]);
    let case = |suite: &str, class: &str| {
        cases
            .iter()
            .find(|c| c.suite == suite && c.class == class)
            .unwrap_or_else(|| panic!("no {class} in {suite}: {cases:#?}"))
    };
    let outcome = |c: &Case| c.outcome.clone().unwrap_or_default();

    let deployment = outcome(case("web", "Deployment.apps"));
    assert_eq!(deployment.0, "failure");
    assert!(deployment.1.starts_with("Changed: "), "{deployment:?}");
    assert!(deployment.1.contains("image"), "{deployment:?}");
    assert!(deployment.2.contains("nginx:1.27"), "{deployment:?}");
    assert!(
        !deployment.1.contains("helm.sh"),
        "the chart label is filtered"
    );
    let secret = case("web", "Secret");
    assert_eq!(secret.name, "shop/web-db");
    assert_eq!(
        outcome(secret),
        ("failure".into(), "Changed: keys password".into(), "".into())
    );
    // The generated ConfigMap is one changed object, not a removal and an addition.
    let config_maps: Vec<_> = cases
        .iter()
        .filter(|c| c.suite == "shop" && c.class == "ConfigMap")
        .collect();
    assert_eq!(config_maps.len(), 1, "{config_maps:#?}");
    assert!(outcome(config_maps[0]).1.starts_with("Changed: "));
    let crd = outcome(case(
        "crds",
        "CustomResourceDefinition.apiextensions.k8s.io",
    ));
    assert!(crd.1.starts_with("Changed: "), "{crd:?}");

    let api = outcome(case("api", "api"));
    assert_eq!(api.0, "skipped");
    let broken = outcome(case("broken", "broken"));
    assert_eq!(
        (broken.0.as_str(), broken.1.as_str()),
        ("error", "render failed at head")
    );
    assert!(broken.2.contains("missing.yaml"), "{broken:?}");
}

/// The composite action's `tether diff --base` step, run as GitHub Actions runs it
/// (bash, `-e -o pipefail`) in a checkout whose `origin/main` is the base, with the
/// runner's variables `env`: returns the exit code, the step's outputs and the
/// Markdown it kept.
pub(crate) fn run_action_step(
    repo: &Path,
    fail_on_error: &str,
    env: &[(&str, String)],
) -> (Option<i32>, String, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ci/tether-preview/action.yml");
    let text = std::fs::read_to_string(&path).expect("the action");
    let action: Value = serde_saphyr::from_str(&text).expect("the action is YAML");
    let step = action["runs"]["steps"]
        .as_array()
        .and_then(|steps| steps.iter().find(|s| s["id"] == "preview"))
        .expect("the preview step");
    let script = step["run"].as_str().expect("a script");
    let temp = tempfile::tempdir().expect("tempdir");
    let outputs = temp.path().join("github-output");
    std::fs::write(&outputs, "").expect("touch");
    let bin = Path::new(env!("CARGO_BIN_EXE_tether"))
        .parent()
        .expect("the binary's directory");
    let out = std::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(repo)
        .env("BASE", "origin/main")
        .env("CONFIG", "tether.yaml")
        .env("FAIL_ON_ERROR", fail_on_error)
        .env("RUNNER_TEMP", temp.path())
        .env("GITHUB_OUTPUT", &outputs)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env_remove("TETHER_COMMENT_TOKEN")
        .env_remove("GITEA_ACTIONS")
        .env_remove("FORGEJO_ACTIONS")
        .env_remove("GITHUB_EVENT_PATH")
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .expect("bash runs");
    let markdown = std::fs::read_to_string(temp.path().join("preview.md")).unwrap_or_default();
    (
        out.status.code(),
        std::fs::read_to_string(&outputs).expect("outputs"),
        markdown,
    )
}

/// The comparison itself, pure: matching, noise and Secrets without Git or a binary.
mod compare {
    use serde_json::json;
    use tether_diff::diff::Drift;
    use tether_diff::manifest::{Manifest, Origin};

    use serde_json::Value;
    use tether_core::sync::preview::{NoiseFilter, compare_revisions, secret_keys};
    use tether_diff::manifest::{ManifestSet, ObjectId};

    fn set(objects: Vec<Value>) -> ManifestSet {
        ManifestSet {
            objects: objects
                .into_iter()
                .map(|object| Manifest {
                    id: ObjectId::of(&object).expect("identity"),
                    object,
                    origin: Origin {
                        file: "f.yaml".into(),
                        document: 1,
                        line: 1,
                        item: None,
                    },
                })
                .collect(),
            ..ManifestSet::default()
        }
    }

    fn config_map(name: &str, colour: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "shop"}, "data": {"colour": colour}})
    }

    fn deployment(chart: &str, checksum: &str, replicas: u32) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "shop", "labels": {"helm.sh/chart": chart}},
               "spec": {"replicas": replicas, "template": {"metadata": {
                   "annotations": {"checksum/config": checksum}}}}})
    }

    #[test]
    fn a_generated_config_map_is_matched_by_its_name_without_the_hash() {
        let base = set(vec![config_map("shop-config-5t8f7k2m9b", "blue")]);
        let head = set(vec![config_map("shop-config-gh4dbc6kk8", "green")]);
        let c = compare_revisions(&base, &head, &NoiseFilter::default());
        assert_eq!(c.objects.len(), 1, "{:?}", c.objects);
        assert_eq!(c.objects[0].id.name, "shop-config-gh4dbc6kk8");
        let paths: Vec<String> = c.objects[0]
            .drift
            .changes()
            .iter()
            .map(|ch| ch.path.to_string())
            .collect();
        assert_eq!(paths, ["metadata.name", "data.colour"]);
        // A name that merely ends in ten letters of another alphabet is no hash.
        let base = set(vec![config_map("shop-config-abcdefghij", "blue")]);
        let head = set(vec![config_map("shop-config-gh4dbc6kk8", "blue")]);
        let c = compare_revisions(&base, &head, &NoiseFilter::default());
        let verdicts: Vec<_> = c.objects.iter().map(|o| o.drift.status()).collect();
        assert_eq!(
            verdicts,
            [
                tether_diff::diff::Status::Missing,
                tether_diff::diff::Status::Extra
            ]
        );
    }

    #[test]
    fn chart_labels_and_checksums_are_filtered_and_counted() {
        let base = set(vec![deployment("web-1.0.0", "aaa", 2)]);
        let head = set(vec![deployment("web-1.1.0", "bbb", 2)]);
        let c = compare_revisions(&base, &head, &NoiseFilter::default());
        assert_eq!(c.objects[0].drift, Drift::InSync);
        assert_eq!(c.filtered, 2);
        // Without the filter both show, and a real change shows with it on.
        let none = NoiseFilter {
            labels: Vec::new(),
            annotations: Vec::new(),
        };
        assert_eq!(
            compare_revisions(&base, &head, &none).objects[0]
                .drift
                .changes()
                .len(),
            2
        );
        let head = set(vec![deployment("web-1.1.0", "bbb", 3)]);
        let c = compare_revisions(&base, &head, &NoiseFilter::default());
        assert_eq!(c.objects[0].drift.changes().len(), 1);
        assert_eq!(
            c.objects[0].drift.changes()[0].path.to_string(),
            "spec.replicas"
        );
    }

    #[test]
    fn a_secret_change_names_its_keys_and_never_its_values() {
        let secret = |password: &str| {
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "db", "namespace": "shop"},
                   "stringData": {"password": password, "user": "web"}})
        };
        let base = set(vec![secret("old-value-1")]);
        let head = set(vec![secret("new-value-2")]);
        let c = compare_revisions(&base, &head, &NoiseFilter::default());
        assert_eq!(secret_keys(&c.objects[0]), ["password"]);
        let shown = format!("{:?}", c.objects);
        for value in [
            "old-value-1",
            "new-value-2",
            "b2xkLXZhbHVlLTE=",
            "bmV3LXZhbHVlLTI=",
        ] {
            assert!(!shown.contains(value), "{value} in {shown}");
        }
    }
}

/// Issue #26: a preview renders without a cluster; a chart calling `lookup` is said
/// to have had its lookups answer nothing, so a generated value's change is not taken
/// for real.
#[test]
fn a_chart_calling_lookup_is_said_to_have_rendered_its_lookups_empty() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = GitRepo::init(tmp.path().to_path_buf());
    let template = |colour: &str| {
        format!(
            "{{{{- $found := lookup \"v1\" \"Secret\" .Release.Namespace \"admin\" }}}}\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: admin\ndata:\n\
             \x20 found: {{{{ $found | toJson | quote }}}}\n  colour: {colour}\n"
        )
    };
    repo.write(
        "chart/Chart.yaml",
        "apiVersion: v2\nname: grafana\nversion: 0.1.0\n",
    );
    repo.write("chart/templates/cm.yaml", &template("red"));
    let base = repo.commit("base");
    repo.write("chart/templates/cm.yaml", &template("blue"));
    repo.commit("head");
    let helm = crate::chart::helm();
    let helm = helm.to_str().expect("utf-8");
    let run = tether_in(
        &repo.dir,
        &["--base", &base, "--path", "chart", "--helm", helm],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "app chart: chart chart calls lookup; rendered without a cluster (a preview), \
             its lookups answered nothing"
        ),
        "{}",
        run.stderr
    );
}
