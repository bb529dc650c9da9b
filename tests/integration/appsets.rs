//! AppSets (`appsets.tether.dev`, issue #28) through `tether serve` against the sandbox,
//! with real git over smart HTTP and the real `kubectl`: a Git-directories AppSet
//! stamps one App per `teams/*` directory and they sync; a pushed directory adds an
//! App, a removed one deletes or orphans its App per the AppSet's policy; a list ×
//! clusters matrix stamps an App per element and kubeconfig Secret, each syncing
//! through its Secret; an invalid template and a duplicate name are errors on the
//! AppSet's status with nothing created.

use serde_json::Value;

use crate::app_crd::{app_sandbox, exists, install_crd};
use crate::serve::{Serve, origin_http, server_section};
use crate::support::{TestSandbox, eventually};

/// Long enough that only webhooks and spec changes move an AppSet during a test.
const POLL: &str = "1h";

pub(crate) async fn get(sandbox: &TestSandbox, kind: &str, name: &str, namespace: &str) -> Value {
    sandbox
        .kubectl_json(&["get", kind, name, "-n", namespace, "-o", "json"])
        .await
}

/// The names of the Apps in `namespace`.
pub(crate) async fn apps(sandbox: &TestSandbox, namespace: &str) -> Vec<String> {
    let out = sandbox
        .kubectl(&[
            "get",
            "tapp",
            "-n",
            namespace,
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .await
        .ok();
    let mut names: Vec<String> = out.stdout.split_whitespace().map(str::to_string).collect();
    names.sort();
    names
}

/// The AppSet's Ready condition once it has one with this status.
pub(crate) async fn ready(
    sandbox: &TestSandbox,
    name: &str,
    namespace: &str,
    state: &str,
) -> Value {
    eventually(&format!("AppSet {name} Ready={state}"), || async {
        let object = get(sandbox, "appset", name, namespace).await;
        let condition = object["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .cloned()?;
        (condition["status"] == state).then_some(object)
    })
    .await
}

/// A ConfigMap without a namespace: the App's destination places it.
pub(crate) fn configmap(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  key: v\n")
}

fn teams_appset(url: &str, deletion: &str) -> String {
    format!(
        "apiVersion: tether.dev/v1alpha1\nkind: AppSet\nmetadata:\n  name: teams\n  namespace: platform\nspec:\n\
         \x20 generators:\n  - git:\n      repo: \"{url}\"\n      revision: main\n      directories:\n      - path: teams/*\n      - path: teams/legacy\n        exclude: true\n\
         \x20 template:\n    metadata:\n      name: 'team-{{{{path.basename}}}}'\n      labels: {{team: '{{{{path.basename}}}}'}}\n\
         \x20   spec:\n      serviceAccountName: deployer\n      source: {{repo: \"{url}\", ref: main, path: '{{{{path}}}}', interval: {POLL}}}\n\
         \x20     destination: {{namespace: live}}\n      sync: {{automated: true, prune: true}}\n      deletionPolicy: Prune\n\
         \x20 syncPolicy:\n    deletion: {deletion}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_directories_appset_stamps_an_app_per_team_and_follows_pushes() {
    let sandbox = app_sandbox(&["platform", "live"]).await;
    sandbox
        .trusted_service_account("platform", "deployer")
        .await;
    let origin = origin_http(
        &sandbox,
        &[
            ("teams/a/cm.yaml", &configmap("a")),
            ("teams/b/cm.yaml", &configmap("b")),
            ("teams/legacy/cm.yaml", &configmap("legacy")),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "appsets", &format!("{server}apps: []\n"), &[]).await;
    sandbox
        .kubectl_apply(&teams_appset(&origin.url, "delete"))
        .await;

    let appset = ready(&sandbox, "teams", "platform", "True").await;
    assert_eq!(appset["status"]["appCount"], 2, "{appset}");
    assert_eq!(
        appset["status"]["apps"][0]["parameters"],
        "directory teams/a"
    );
    assert_eq!(apps(&sandbox, "platform").await, ["team-a", "team-b"]);
    let a = get(&sandbox, "tapp", "team-a", "platform").await;
    assert_eq!(a["metadata"]["labels"]["tether.dev/appset"], "teams");
    assert_eq!(a["metadata"]["labels"]["team"], "a");
    let owner = &a["metadata"]["ownerReferences"][0];
    assert_eq!(
        (
            owner["kind"].as_str(),
            owner["name"].as_str(),
            owner["controller"].as_bool()
        ),
        (Some("AppSet"), Some("teams"), Some(true))
    );
    assert_eq!(owner["uid"], appset["metadata"]["uid"]);
    // They sync: each team's ConfigMap is applied by its own App.
    eventually("the teams' ConfigMaps are applied", || async {
        (exists(&sandbox, "cm", "a", "live").await && exists(&sandbox, "cm", "b", "live").await)
            .then_some(())
    })
    .await;
    assert!(!exists(&sandbox, "cm", "legacy", "live").await, "excluded");

    // A new directory, announced by webhook: a new App.
    origin.repo.write("teams/c/cm.yaml", &configmap("c"));
    origin.repo.commit("team c");
    assert!(serve.push(&origin.url).await.is_success());
    eventually("team c's App is generated and syncs", || async {
        exists(&sandbox, "cm", "c", "live").await.then_some(())
    })
    .await;
    assert_eq!(
        apps(&sandbox, "platform").await,
        ["team-a", "team-b", "team-c"]
    );

    // A directory removed under `deletion: delete`: its App goes, and with it (its
    // own deletionPolicy: Prune) its objects.
    origin.repo.remove("teams/b/cm.yaml");
    origin.repo.commit("no team b");
    assert!(serve.push(&origin.url).await.is_success());
    eventually("team b's App and ConfigMap are deleted", || async {
        (!exists(&sandbox, "tapp", "team-b", "platform").await
            && !exists(&sandbox, "cm", "b", "live").await)
            .then_some(())
    })
    .await;

    // Under `deletion: orphan` (the default) the App stays, owned by no one.
    sandbox
        .kubectl_apply(&teams_appset(&origin.url, "orphan"))
        .await;
    origin.repo.remove("teams/a/cm.yaml");
    origin.repo.commit("no team a");
    assert!(serve.push(&origin.url).await.is_success());
    let orphan = eventually("team a's App is orphaned", || async {
        let a = get(&sandbox, "tapp", "team-a", "platform").await;
        a["metadata"]["labels"]
            .get("tether.dev/appset")
            .is_none()
            .then_some(a)
    })
    .await;
    let owners = orphan["metadata"]["ownerReferences"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(owners, 0, "{orphan}");
    assert!(
        exists(&sandbox, "cm", "a", "live").await,
        "an orphaned App keeps its objects"
    );
    let appset = ready(&sandbox, "teams", "platform", "True").await;
    eventually("the status lists team c alone", || async {
        let appset = get(&sandbox, "appset", "teams", "platform").await;
        (appset["status"]["appCount"] == 1).then_some(())
    })
    .await;
    assert_eq!(appset["status"]["conditions"][0]["reason"], "Generated");
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_by_clusters_matrix_stamps_an_app_per_pair_syncing_through_its_secret() {
    let sandbox = app_sandbox(&["fleet", "east", "west"]).await;
    sandbox.trusted_service_account("fleet", "deployer").await;
    // Two clusters (both this sandbox, as the user its kubeconfig names), and a
    // kubeconfig Secret that is not labelled as a cluster.
    let kubeconfig = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        sandbox.sandbox.kubeconfig(),
    );
    for (name, labels) in [
        ("east", "{tether.dev/cluster: \"true\", region: east}"),
        ("west", "{tether.dev/cluster: \"true\", region: west}"),
        ("unlabelled", "{region: north}"),
    ] {
        sandbox.kubectl_apply(&format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: fleet\n  labels: {labels}\ndata:\n  value: {kubeconfig}\n"),
        )
        .await;
    }
    let origin = origin_http(
        &sandbox,
        &[
            ("web/cm.yaml", &configmap("web")),
            ("api/cm.yaml", &configmap("api")),
        ],
    );
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "matrix", &format!("{server}apps: []\n"), &[]).await;
    let appset = format!(
        "apiVersion: tether.dev/v1alpha1\nkind: AppSet\nmetadata:\n  name: fleet\n  namespace: fleet\nspec:\n\
         \x20 generators:\n  - matrix:\n      generators:\n      - list: {{elements: [{{app: web}}, {{app: api}}]}}\n      - clusters: {{selector: {{matchLabels: {{tether.dev/cluster: \"true\"}}}}}}\n\
         \x20 template:\n    metadata: {{name: '{{{{app}}}}-{{{{name}}}}'}}\n\
         \x20   spec:\n      serviceAccountName: deployer\n      source: {{repo: \"{}\", ref: main, path: '{{{{app}}}}', interval: {POLL}}}\n\
         \x20     destination: {{namespace: '{{{{metadata.labels.region}}}}'}}\n      sync: {{automated: true}}\n",
        origin.url
    );
    sandbox.kubectl_apply(&appset).await;
    let appset = ready(&sandbox, "fleet", "fleet", "True").await;
    assert_eq!(appset["status"]["appCount"], 4, "{appset}");
    assert_eq!(
        apps(&sandbox, "fleet").await,
        ["api-east", "api-west", "web-east", "web-west"]
    );
    let app = get(&sandbox, "tapp", "web-west", "fleet").await;
    assert_eq!(
        app["spec"]["destination"]["kubeConfig"]["secretRef"]["name"],
        "west"
    );
    assert_eq!(app["spec"]["destination"]["namespace"], "west");
    eventually("each pair's ConfigMap is applied in its region", || async {
        for (name, ns) in [
            ("web", "east"),
            ("web", "west"),
            ("api", "east"),
            ("api", "west"),
        ] {
            if !exists(&sandbox, "cm", name, ns).await {
                return None;
            }
        }
        Some(())
    })
    .await;
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_template_or_a_duplicate_name_fails_clearly_and_creates_nothing() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("team-x").await;
    install_crd(&sandbox).await;
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "invalid", &format!("{server}apps: []\n"), &[]).await;
    let appset = |name: &str, app_name: &str, interval: &str| {
        format!(
            "apiVersion: tether.dev/v1alpha1\nkind: AppSet\nmetadata:\n  name: {name}\n  namespace: team-x\nspec:\n\
             \x20 generators:\n  - list: {{elements: [{{env: dev, every: 1m}}, {{env: prod, every: soon}}]}}\n\
             \x20 template:\n    metadata: {{name: '{app_name}'}}\n\
             \x20   spec:\n      source: {{repo: \"https://git.example/r.git\", interval: '{interval}'}}\n"
        )
    };
    sandbox
        .kubectl_apply(&appset("bad-interval", "web-{{env}}", "{{every}}"))
        .await;
    sandbox
        .kubectl_apply(&appset("same-name", "web", "1m"))
        .await;
    let bad = ready(&sandbox, "bad-interval", "team-x", "False").await;
    let condition = &bad["status"]["conditions"][0];
    assert_eq!(condition["reason"], "TemplateInvalid", "{condition}");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message
            .starts_with("parameter set list element 1: App team-x/web-prod: spec.source.interval"),
        "{message}"
    );
    let duplicate = ready(&sandbox, "same-name", "team-x", "False").await;
    let condition = &duplicate["status"]["conditions"][0];
    assert_eq!(condition["reason"], "DuplicateName", "{condition}");
    assert_eq!(
        condition["message"],
        "parameter sets list element 0 and list element 1 both render App \"web\""
    );
    assert!(
        apps(&sandbox, "team-x").await.is_empty(),
        "nothing is created"
    );
    assert_eq!(serve.stop().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_files_generator_reads_a_private_repository_with_its_namespaces_secret() {
    const PASSWORD: &str = "s3cret-AppSet-pass";
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("team-s").await;
    install_crd(&sandbox).await;
    let _origin = origin_http(
        &sandbox,
        &[
            ("envs/dev.yaml", "env: dev\nreplicas: 1\n"),
            ("envs/prod.yaml", "[{env: prod-eu}, {env: prod-us}]\n"),
        ],
    );
    let http = crate::support::HttpGit::start(
        &sandbox.dir.path().join("srv"),
        Some(&format!("tether:{PASSWORD}")),
    );
    let url = http.url("apps.git");
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "private", &format!("{server}apps: []\n"), &[]).await;
    let appset = format!(
        "apiVersion: tether.dev/v1alpha1\nkind: AppSet\nmetadata:\n  name: envs\n  namespace: team-s\nspec:\n\
         \x20 generators:\n  - git:\n      repo: \"{url}\"\n      revision: main\n      files: [{{path: 'envs/*.yaml'}}]\n      credentials: {{secretRef: {{name: git-creds}}}}\n\
         \x20 template:\n    metadata: {{name: 'web-{{{{env}}}}'}}\n\
         \x20   spec:\n      source: {{repo: \"{url}\", ref: main, path: '{{{{path}}}}', interval: {POLL}}}\n"
    );
    sandbox.kubectl_apply(&appset).await;
    // No Secret yet: the repository cannot be read, and the status names the Secret.
    let failing = ready(&sandbox, "envs", "team-s", "False").await;
    let condition = &failing["status"]["conditions"][0];
    assert_eq!(condition["reason"], "SourceNotReady", "{condition}");
    assert!(
        condition["message"]
            .as_str()
            .unwrap_or_default()
            .contains("git-creds"),
        "{condition}"
    );
    assert!(apps(&sandbox, "team-s").await.is_empty());

    sandbox.kubectl_apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-creds\n  namespace: team-s\nstringData:\n  username: tether\n  password: {PASSWORD}\n"
        ),
    )
    .await;
    assert!(serve.push(&url).await.is_success());
    let generated = ready(&sandbox, "envs", "team-s", "True").await;
    assert_eq!(generated["status"]["appCount"], 3, "{generated}");
    assert_eq!(
        apps(&sandbox, "team-s").await,
        ["web-dev", "web-prod-eu", "web-prod-us"]
    );
    let dev = get(&sandbox, "tapp", "web-dev", "team-s").await;
    assert_eq!(dev["spec"]["source"]["path"], "envs");
    let text = serde_json::to_string(&generated).expect("JSON");
    assert!(!text.contains(PASSWORD), "the password shows nowhere");
    assert!(!serve.log().contains(PASSWORD), "nor in the log");
    assert_eq!(serve.stop().await, Some(0));
}

/// An AppSet of one list element per `envs` entry, stamping `web-<env>` in `namespace`.
fn list_appset(name: &str, namespace: &str, envs: &[&str], deletion: &str) -> String {
    let elements: Vec<String> = envs.iter().map(|e| format!("{{env: {e}}}")).collect();
    format!(
        "apiVersion: tether.dev/v1alpha1\nkind: AppSet\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n\
         \x20 generators:\n  - list: {{elements: [{}]}}\n\
         \x20 template:\n    metadata: {{name: '{name}-{{{{env}}}}'}}\n\
         \x20   spec:\n      source: {{repo: \"https://git.example/r.git\", path: '{{{{env}}}}', interval: {POLL}}}\n\
         \x20 syncPolicy:\n    deletion: {deletion}\n",
        elements.join(", ")
    )
}

/// The App's `spec.source.path` and uid, once it exists.
async fn path_and_uid(
    sandbox: &TestSandbox,
    name: &str,
    namespace: &str,
) -> Option<(String, String)> {
    let out = sandbox
        .kubectl(&["get", "tapp", name, "-n", namespace, "-o", "json"])
        .await;
    let app: Value = serde_json::from_str(&out.stdout).ok()?;
    Some((
        app["spec"]["source"]["path"].as_str()?.to_string(),
        app["metadata"]["uid"].as_str()?.to_string(),
    ))
}

/// Regression (issue #28): a generated App edited or deleted by hand stayed so until
/// the AppSet itself or a repository it reads changed; its Apps are watched now, and
/// the AppSet runs again at once, as Argo CD's ApplicationSet controller does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_app_edited_or_deleted_by_hand_is_restored_at_once() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("hand").await;
    install_crd(&sandbox).await;
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "hand", &format!("{server}apps: []\n"), &[]).await;
    sandbox
        .kubectl_apply(&list_appset("web", "hand", &["dev"], "orphan"))
        .await;
    ready(&sandbox, "web", "hand", "True").await;
    let (_, uid) = eventually("web-dev is generated", || async {
        path_and_uid(&sandbox, "web-dev", "hand").await
    })
    .await;

    sandbox
        .kubectl_merge_patch(
            "tapp",
            "web-dev",
            "hand",
            r#"{"spec":{"source":{"path":"edited"}}}"#,
        )
        .await;
    eventually("the edit is undone", || async {
        let (path, _) = path_and_uid(&sandbox, "web-dev", "hand").await?;
        (path == "dev").then_some(())
    })
    .await;

    // Without waiting: kubectl's wait lists the name again, and when the App is
    // already generated anew by then (milliseconds) it sees no deletion and waits on.
    sandbox
        .kubectl(&["delete", "tapp", "web-dev", "-n", "hand", "--wait=false"])
        .await
        .ok();
    eventually("the deleted App is generated again", || async {
        let (path, again) = path_and_uid(&sandbox, "web-dev", "hand").await?;
        (path == "dev" && again != uid).then_some(())
    })
    .await;
    assert_eq!(serve.stop().await, Some(0));
}

/// Deleting an AppSet deletes its Apps, whatever its policy for a vanished parameter
/// set: they are its dependents (ownerReferences) and the garbage collector removes
/// them, as with an Argo CD ApplicationSet; `kubectl delete --cascade=orphan` keeps
/// them, owned by no one. Each App's own `deletionPolicy` then says what becomes of
/// its objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_appset_deletes_its_apps_unless_the_deletion_orphans_them() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("gone").await;
    install_crd(&sandbox).await;
    let server = server_section(sandbox.dir.path());
    let serve = Serve::start(&sandbox, "gone", &format!("{server}apps: []\n"), &[]).await;
    for (name, deletion) in [("drop", "delete"), ("keep", "orphan"), ("held", "orphan")] {
        sandbox
            .kubectl_apply(&list_appset(name, "gone", &["a", "b"], deletion))
            .await;
        ready(&sandbox, name, "gone", "True").await;
    }
    let all = ["drop-a", "drop-b", "held-a", "held-b", "keep-a", "keep-b"];
    eventually("every App is generated", || async {
        (apps(&sandbox, "gone").await == all).then_some(())
    })
    .await;

    for name in ["drop", "keep"] {
        sandbox
            .kubectl(&["delete", "appset", name, "-n", "gone"])
            .await
            .ok();
    }
    sandbox
        .kubectl(&["delete", "appset", "held", "-n", "gone", "--cascade=orphan"])
        .await
        .ok();
    eventually(
        "the deleted AppSets' Apps go, the orphaned ones stay",
        || async { (apps(&sandbox, "gone").await == ["held-a", "held-b"]).then_some(()) },
    )
    .await;
    for name in ["held-a", "held-b"] {
        eventually("the orphaned App is owned by no one", || async {
            let app = get(&sandbox, "tapp", name, "gone").await;
            app["metadata"]["ownerReferences"]
                .as_array()
                .is_none_or(Vec::is_empty)
                .then_some(())
        })
        .await;
    }
    assert_eq!(serve.stop().await, Some(0));
}
