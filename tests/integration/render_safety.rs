//! The render stage against a hostile repository (issue #24) and the renderer errors
//! users read (issue #31), with the real binary, real `git`, kubectl's kustomize
//! and helm: a `..` tree entry writes nothing outside the render folder, remote
//! bases are refused however they are spelt, a renderer that hangs is killed with
//! its children and frees the pass slot, and renderer errors show what failed but
//! no Secret value.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::serve::{Serve, configmap, server_section};
use crate::support::{
    GitDaemon, GitRepo, TestSandbox, app_dir, eventually, tether, tether_with_env,
};

/// Runs `git` in `dir` with `input` on its stdin; its trimmed stdout.
fn git_with_input(dir: &Path, args: &[&str], input: &str) -> String {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("git ends");
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Issue #24, finding 3: a repository whose tree holds `app/../../../escaped.yaml`
/// (a tree entry named `..`, which only `git mktree` writes) next to a
/// kustomization. Rendering it must write nothing outside tether's temp folder.
#[tokio::test]
async fn a_tree_entry_named_dot_dot_writes_nothing_outside_the_render_folder() {
    let sandbox = TestSandbox::start().await;
    let root = sandbox.dir.path();
    let repo = root.join("dotdot.git");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git_with_input(&repo, &["init", "-q", "--bare"], "");
    let blob = |text: &str| git_with_input(&repo, &["hash-object", "-w", "--stdin"], text);
    let tree = |entries: &str| git_with_input(&repo, &["mktree"], entries);
    let cm = blob(&configmap("escaped", "default", "x"));
    let kustomization = blob("resources:\n  - cm.yaml\n");
    let mut escaping = tree(&format!("100644 blob {cm}\tescaped.yaml\n"));
    for _ in 0..2 {
        escaping = tree(&format!("040000 tree {escaping}\t..\n"));
    }
    let app = tree(&format!(
        "040000 tree {escaping}\t..\n100644 blob {cm}\tcm.yaml\n100644 blob {kustomization}\tkustomization.yaml\n"
    ));
    let top = tree(&format!("040000 tree {app}\tapp\n"));
    let commit = git_with_input(
        &repo,
        &[
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "commit-tree",
            &top,
            "-m",
            "dot dot",
        ],
        "",
    );
    git_with_input(&repo, &["update-ref", "refs/heads/main", &commit], "");

    // tether's temp folders are made in TMPDIR: `<tmp>/tether-render-X/app/../../..`
    // is `<root>/deep`.
    let tmp = root.join("deep/er");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let url = format!("file://{}", repo.display());
    let run = tether_with_env(
        &sandbox,
        "diff",
        &["--repo", &url, "--ref", "main", "--path", "app"],
        &[("TMPDIR", tmp.display().to_string())],
    )
    .await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("app/.."), "names the path: {run:?}");
    let escaped = root.join("deep/escaped.yaml");
    assert!(!escaped.exists(), "wrote {}", escaped.display());
}

/// Issue #24, finding 5: the spellings that passed the old string check, refused
/// before kustomize runs, naming the kustomization and the entry.
#[tokio::test]
async fn remote_bases_spelt_every_way_are_refused_before_kustomize_runs() {
    let sandbox = TestSandbox::start().await;
    for (i, reference) in [
        "deploy@127.0.0.1:org/repo.git",
        "git::git@127.0.0.1:org/repo",
        "GIT@127.0.0.1:org/repo.git",
        "github.com:org/repo",
    ]
    .into_iter()
    .enumerate()
    {
        let dir = app_dir(
            &sandbox,
            &format!("remote-{i}"),
            &[
                (
                    "app/kustomization.yaml",
                    format!("resources:\n  - cm.yaml\n  - '{reference}'\n"),
                ),
                ("app/cm.yaml", configmap("local", "default", "x")),
            ],
        );
        let path = dir.join("app");
        let run = tether(&sandbox, "diff", &["--path", path.to_str().expect("utf-8")]).await;
        assert_eq!(run.code, Some(2), "{run:?}");
        assert!(
            run.stderr.contains(&format!(
                "app/kustomization.yaml: resources names the remote base {reference:?}"
            )),
            "{run:?}"
        );
        assert!(!run.stderr.contains("kustomize build failed"), "{run:?}");
    }
}

/// Whether `pid` still runs (a zombie has ended: it holds nothing and does nothing).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ")?.1.chars().next())
        .is_some_and(|state| state != 'Z' && state != 'X')
}

/// Issue #24, finding 6: with one pass slot, an app whose kustomize hangs (a `kubectl`
/// on PATH that starts a child and waits for it) is stopped at `renderTimeout`, its
/// child killed with it, the error says so, and the other app still syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_renderer_is_killed_with_its_children_and_frees_the_pass_slot() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("rt").await;
    let dir = sandbox.dir.path();
    let srv = dir.join("srv");
    let repo = GitRepo::init(srv.join("apps.git"));
    repo.write("hang/kustomization.yaml", "resources:\n  - cm.yaml\n");
    repo.write("hang/cm.yaml", &configmap("hang", "rt", "1"));
    repo.write("plain/cm.yaml", &configmap("plain", "rt", "1"));
    repo.commit("first");
    let daemon = GitDaemon::start(&srv);
    let url = daemon.url("apps.git");

    let shim = dir.join("shim");
    std::fs::create_dir_all(&shim).expect("mkdir");
    let children = dir.join("children");
    let kubectl = shim.join("kubectl");
    std::fs::write(
        &kubectl,
        format!(
            "#!/bin/sh\nsleep 300 &\necho $! >> {}\nwait\n",
            children.display()
        ),
    )
    .expect("write shim");
    std::fs::set_permissions(
        &kubectl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let path = format!(
        "{}:{}",
        shim.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let server = server_section(dir);
    let app = |name: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{url}\", ref: main, path: {name}, interval: 1h}}\n  destination: {{namespace: rt}}\n  sync: {{automated: true}}\n"
        )
    };
    let config = format!(
        "{server}concurrency: 1\nrenderTimeout: 1s\napps:\n{}{}",
        app("hang"),
        app("plain")
    );
    let serve =
        Serve::start_with_env(&sandbox, "render-timeout", &config, &[], &[("PATH", path)]).await;
    let hung = serve
        .wait_status("hang", "hang reports the render timeout", |s| {
            s["lastPass"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("was stopped after 1s (the render timeout)"))
        })
        .await;
    let error = hung["lastPass"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("hang: `kubectl`"), "{hung}");
    let first = std::fs::read_to_string(&children).expect("the shim ran");
    let first = first.lines().next().expect("a child pid");
    eventually("kustomize's child ends with it", || async {
        (!running(first)).then_some(())
    })
    .await;
    serve.wait_synced("plain").await;
}

/// A chart whose values hold a credential and whose templates fail.
fn failing_chart(sandbox: &TestSandbox, name: &str, template: &str) -> std::path::PathBuf {
    app_dir(
        sandbox,
        name,
        &[
            (
                "web/Chart.yaml",
                "apiVersion: v2\nname: web\nversion: 0.1.0\n",
            ),
            ("web/values.yaml", "auth:\n  password: hunter2-values\n"),
            ("web/templates/cm.yaml", template),
        ],
    )
    .join("web")
}

/// Issue #31: helm's error names the template, the value path and what failed (it
/// read `executing "…" at <"…">`), and issue #24: a credential from the values that
/// a template prints in its error is masked.
#[tokio::test]
async fn helm_errors_name_the_template_and_value_and_mask_credentials() {
    let sandbox = TestSandbox::start().await;
    let helm = crate::chart::helm();
    let helm = helm.to_str().expect("utf-8");
    let nil = failing_chart(
        &sandbox,
        "nil-chart",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  enabled: {{ .Values.prometheus.enabled | quote }}\n",
    );
    let run = tether(
        &sandbox,
        "diff",
        &["--path", nil.to_str().expect("utf-8"), "--helm", helm],
    )
    .await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains(
            "executing \"web/templates/cm.yaml\" at <.Values.prometheus.enabled>: nil pointer evaluating interface {}.enabled"
        ),
        "{run:?}"
    );

    let leaky = failing_chart(
        &sandbox,
        "leaky-chart",
        "{{ fail (printf \"cannot log in with %s\" .Values.auth.password) }}\n",
    );
    let run = tether(
        &sandbox,
        "diff",
        &["--path", leaky.to_str().expect("utf-8"), "--helm", helm],
    )
    .await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("cannot log in with ***"), "{run:?}");
    assert!(!run.stderr.contains("hunter2"), "{run:?}");
}
