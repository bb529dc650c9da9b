//! Issue #28's "done when", as one scenario through `tether serve`, two sandboxes, the
//! real `kubectl` and git over smart HTTP. A platform repository holds a CRD and its
//! operator (app `platform`), custom resources of that CRD (app `crs`, which
//! `dependsOn: [platform]`) and one directory per team. From empty: `crs` waits with
//! `DependencyNotReady` until the operator reports ready, then syncs; its resource's
//! health comes from a CEL rule (`healthCheckExprs`) as the operator writes its status.
//! An AppSet stamps one App per `teams/*` directory and labelled cluster (two kubeconfig
//! Secrets reaching a second sandbox); a commit to one team's directory re-renders
//! only that team's Apps, and removing the directory deletes them (policy `delete`)
//! and their objects.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::app_crd::{exists, install_crd};
use crate::appsets::{apps, configmap, ready};
use crate::fleets::{first_pass, time, waits_for};
use crate::health_cel::{CRD, GADGET, RULES, gadget, set_status};
use crate::monorepo::{counters, grown};
use crate::serve::{Origin, Serve, data_key, origin_http, server_section};
use crate::support::{TestSandbox, condition, eventually};

/// Long enough that only webhooks and spec changes bring a new commit.
const POLL: &str = "1h";

/// The namespace of the platform's apps' objects (the Gadget's own, in `health_cel`).
const PLATFORM_NS: &str = "gadgets";

/// The Gadgets' operator: a Deployment with no status until the test writes one, as its
/// controller would (the sandbox's Deployment controller is stopped for that).
const OPERATOR: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: gadget-operator\n  namespace: gadgets\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: gadget-operator}\n  template:\n    metadata:\n      labels: {app: gadget-operator}\n    spec:\n      containers:\n      - name: operator\n        image: example.com/gadget-operator:1.0\n";

/// The regions of the two clusters (both the second sandbox), each a namespace there.
const REGIONS: [&str; 2] = ["east", "west"];

/// The operator's apps: `crs` waits for `platform`, and judges its Gadget by the CEL
/// rule. A 2 s resync re-reads the operator's status whether or not a watch wakes it.
fn config(server: &str, url: &str) -> String {
    let app = |name: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{url}\", ref: main, path: {name}, interval: {POLL}}}\n  destination: {{namespace: {PLATFORM_NS}}}\n  sync: {{automated: true, prune: true}}\n"
        )
    };
    format!(
        "{server}resyncInterval: 2s\napps:\n{}{}  dependsOn: [platform]\n{RULES}",
        app("platform"),
        app("crs"),
    )
}

/// An App per team directory × labelled cluster, in the cluster's region; a team
/// whose directory goes is deleted, and with it (`deletionPolicy: Prune`) its objects.
fn teams_appset(url: &str) -> String {
    format!(
        "apiVersion: tether.dev/v1alpha1\nkind: AppSet\nmetadata:\n  name: teams\n  namespace: platform\nspec:\n\
         \x20 generators:\n  - matrix:\n      generators:\n      - git: {{repo: \"{url}\", revision: main, directories: [{{path: teams/*}}]}}\n      - clusters: {{selector: {{matchLabels: {{tether.dev/cluster: \"true\"}}}}}}\n\
         \x20 template:\n    metadata: {{name: 'team-{{{{path.basename}}}}-{{{{name}}}}'}}\n\
         \x20   spec:\n      serviceAccountName: deployer\n      source: {{repo: \"{url}\", ref: main, path: '{{{{path}}}}', interval: {POLL}}}\n\
         \x20     destination: {{namespace: '{{{{metadata.labels.region}}}}'}}\n      sync: {{automated: true, prune: true}}\n      deletionPolicy: Prune\n\
         \x20 syncPolicy:\n    deletion: delete\n"
    )
}

/// The generated Apps' names for these teams, sorted as `kubectl get` lists them.
fn team_apps(teams: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = teams
        .iter()
        .flat_map(|t| REGIONS.map(|r| format!("team-{t}-{r}")))
        .collect();
    names.sort();
    names
}

/// Every app's name in the status API and the metrics: file apps by name, Apps as
/// `<namespace>.<name>`.
fn statused(teams: &[&str]) -> Vec<String> {
    let mut names = vec!["platform".to_string(), "crs".to_string()];
    names.extend(team_apps(teams).iter().map(|a| format!("platform.{a}")));
    names
}

/// The second sandbox's kubeconfig as a cluster Secret of the AppSet's namespace,
/// labelled as a cluster in `region`.
fn cluster_secret(remote: &TestSandbox, region: &str) -> String {
    let kubeconfig = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        remote.sandbox.kubeconfig(),
    );
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {region}\n  namespace: platform\n  labels: {{tether.dev/cluster: \"true\", region: {region}}}\ndata:\n  value: {kubeconfig}\n"
    )
}

/// Both sandboxes ready for the platform: namespaces, the CRDs of Apps and AppSets at
/// home, the teams' ServiceAccount on both, the cluster Secrets; and the repository.
async fn prepare(home: &TestSandbox, remote: &TestSandbox) -> Origin {
    home.namespaces(&[PLATFORM_NS, "platform"]).await;
    for ns in ["platform", REGIONS[0], REGIONS[1]] {
        remote.namespace(ns).await;
    }
    install_crd(home).await;
    for sandbox in [home, remote] {
        sandbox
            .trusted_service_account("platform", "deployer")
            .await;
    }
    for region in REGIONS {
        home.kubectl_apply(&cluster_secret(remote, region)).await;
    }
    origin_http(
        home,
        &[
            ("platform/crd.yaml", CRD),
            ("platform/operator.yaml", OPERATOR),
            ("crs/gadget.yaml", GADGET),
            ("teams/a/cm.yaml", &configmap("a")),
            ("teams/b/cm.yaml", &configmap("b")),
        ],
    )
}

/// The operator's controller says it runs: the status a Deployment controller writes
/// for one available replica of the current generation.
async fn operator_ready(home: &TestSandbox) {
    let generation = home
        .kubectl(&[
            "get",
            "deployment",
            "gadget-operator",
            "-n",
            PLATFORM_NS,
            "-o",
            "jsonpath={.metadata.generation}",
        ])
        .await
        .ok()
        .stdout;
    let status = format!(
        "{{\"status\": {{\"observedGeneration\": {generation}, \"replicas\": 1, \"updatedReplicas\": 1, \"readyReplicas\": 1, \"availableReplicas\": 1}}}}"
    );
    home.kubectl(&[
        "patch",
        "deployment",
        "gadget-operator",
        "-n",
        PLATFORM_NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ])
    .await
    .ok();
}

/// Whether team `team`'s ConfigMap holds `value` in every region of the second sandbox.
async fn team_applied(remote: &TestSandbox, team: &str, value: &str) -> bool {
    for region in REGIONS {
        if data_key(remote, team, region).await.as_deref() != Some(value) {
            return false;
        }
    }
    true
}

/// Waits until every app of `names` reports `sha` as its revision, Synced.
async fn all_at(serve: &Serve, names: &[String], sha: &str) {
    for name in names {
        serve.wait_synced_at(name, sha).await;
    }
}

async fn renders(serve: &Serve, names: &[String]) -> BTreeMap<String, u64> {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    counters(serve, "renders", &names).await
}

/// When the app's Ready condition last changed.
fn ready_since(status: &Value) -> DateTime<Utc> {
    time(&condition(status, "Ready")["lastTransitionTime"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_syncs_from_empty_in_dependency_order_with_teams_generated_per_cluster() {
    let home = TestSandbox::start().await;
    let remote = TestSandbox::start().await;
    home.sandbox.set_deployment_controller_delay(None);
    let origin = prepare(&home, &remote).await;
    let server = server_section(home.dir.path());
    let serve = Serve::start(&home, "platform", &config(&server, &origin.url), &[]).await;
    home.kubectl_apply(&teams_appset(&origin.url)).await;

    // The platform applies its CRD and operator at once; the operator is not ready yet,
    // so `crs` waits, says for what, and neither reads nor writes anything.
    waits_for(&serve, "crs", "platform").await;
    let platform = serve
        .wait_status("platform", "platform applied, its operator starting", |s| {
            s["sync"] == "Synced" && s["health"] == "Progressing"
        })
        .await;
    assert!(exists(&home, "deployment", "gadget-operator", PLATFORM_NS).await);
    assert!(
        !exists(&home, "gadget", "g1", PLATFORM_NS).await,
        "{platform}"
    );

    // Meanwhile the teams: an App per directory and cluster, each syncing to its
    // region of the second sandbox through its kubeconfig Secret.
    let appset = ready(&home, "teams", "platform", "True").await;
    assert_eq!(appset["status"]["appCount"], 4, "{appset}");
    assert_eq!(apps(&home, "platform").await, team_apps(&["a", "b"]));
    eventually(
        "each team's ConfigMap is applied in each region",
        || async {
            (team_applied(&remote, "a", "v").await && team_applied(&remote, "b", "v").await)
                .then_some(())
        },
    )
    .await;
    assert!(
        !exists(&home, "cm", "a", "east").await,
        "nothing lands at home"
    );

    // The operator reports ready: platform is Healthy, which wakes crs; its Gadget has
    // no status yet, so the CEL rule's inProgress holds.
    operator_ready(&home).await;
    let crs = serve
        .wait_status("crs", "crs syncs once platform is ready", |s| {
            s["sync"] == "Synced" && gadget(s).is_some_and(|g| g["health"] == "Progressing")
        })
        .await;
    let platform = serve.status("platform").await;
    assert_eq!(platform["health"], "Healthy", "{platform}");
    assert!(
        first_pass(&crs) >= ready_since(&platform),
        "crs ran before platform was ready:\n{platform}\n{crs}"
    );
    assert_eq!(crs["health"], "Progressing", "{crs}");

    // The Gadget's health follows its operator's status, through the CEL rule.
    set_status(&home, r#"{"phase": "Running"}"#).await;
    serve
        .wait_status("crs", "crs is Healthy", |s| s["health"] == "Healthy")
        .await;
    set_status(&home, r#"{"phase": "Failed", "message": "disk full"}"#).await;
    let crs = serve
        .wait_status("crs", "crs is Degraded", |s| s["health"] == "Degraded")
        .await;
    let g = gadget(&crs).expect("the Gadget");
    assert_eq!(
        g["healthMessage"], "disk full [failed (status.phase == 'Failed') holds]",
        "{crs}"
    );

    // A commit to team a's directory: its two Apps render again, no other app does.
    let everyone = statused(&["a", "b"]);
    let first = crate::support::git(&origin.repo.dir, &["rev-parse", "HEAD"]);
    all_at(&serve, &everyone, first.trim()).await;
    let before = renders(&serve, &everyone).await;
    origin.repo.write(
        "teams/a/cm.yaml",
        &configmap("a").replace("key: v", "key: v2"),
    );
    let second = origin.repo.commit("team a: v2");
    assert!(serve.push(&origin.url).await.is_success());
    all_at(&serve, &everyone, &second).await;
    eventually("team a's change is applied in each region", || async {
        team_applied(&remote, "a", "v2").await.then_some(())
    })
    .await;
    let rendered: Vec<(String, u64)> = grown(&before, &renders(&serve, &everyone).await)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(
        rendered,
        [
            ("platform.team-a-east".to_string(), 1),
            ("platform.team-a-west".to_string(), 1)
        ]
    );

    // Team b's directory removed: under `deletion: delete` its Apps go, and their
    // objects with them; team a's stay.
    origin.repo.remove("teams/b/cm.yaml");
    origin.repo.commit("no team b");
    assert!(serve.push(&origin.url).await.is_success());
    eventually("team b's Apps and objects are deleted", || async {
        let gone = apps(&home, "platform").await == team_apps(&["a"])
            && data_key(&remote, "b", REGIONS[0]).await.is_none()
            && data_key(&remote, "b", REGIONS[1]).await.is_none();
        gone.then_some(())
    })
    .await;
    assert!(team_applied(&remote, "a", "v2").await);
    assert_eq!(serve.stop().await, Some(0));
}
