//! The Helm chart (`charts/tether`), rendered by Helm's own engine (`.ci/install-helm`)
//! with its default values and with each documented variant, checked object by object,
//! then applied to the sandbox and read back with `kubectl`.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use serde_json::Value;

use crate::support::{TestSandbox, tether};

/// The release every test renders. Its name contains the chart's, so the objects are
/// named after the release alone (Helm's usual fullname rule).
const RELEASE: &str = "tether-test";
const FULLNAME: &str = "tether-test";
/// The image the tests name, as a user names the one they built and pushed.
const IMAGE: &str = "registry.example.com/tether";

/// Where `.ci/install-helm` puts the helm command, relative to the crate.
const INSTALLED_HELM: &str = "target/tools/bin/helm";

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/tether")
}

/// The helm command: `TETHER_HELM`, else the one `.ci/install-helm` installed. Missing
/// helm fails the test: the chart is only tested with the real engine.
pub(crate) fn helm() -> PathBuf {
    let path = std::env::var_os("TETHER_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(INSTALLED_HELM));
    assert!(
        path.is_file(),
        "helm is not installed at {}: run .ci/install-helm (or set TETHER_HELM to a helm command)",
        path.display()
    );
    path
}

/// What `helm` printed and how it ended.
struct HelmRun {
    success: bool,
    stdout: String,
    stderr: String,
}

fn run_helm(args: &[&str], values: &str) -> HelmRun {
    let dir = tempfile::tempdir().expect("tempdir");
    // The chart has no default image (none is published): every render names one, as
    // a user must, unless the test's values say otherwise.
    let image_file = dir.path().join("image.yaml");
    std::fs::write(&image_file, format!("image: {{repository: {IMAGE}}}\n")).expect("write");
    let values_file = dir.path().join("values.yaml");
    std::fs::write(&values_file, values).expect("write values");
    let out = Command::new(helm())
        .args(args)
        .arg(chart_dir())
        .arg("-f")
        .arg(&image_file)
        .arg("-f")
        .arg(&values_file)
        .env("HOME", dir.path())
        .output()
        .expect("helm runs");
    HelmRun {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The chart rendered by `helm template`: its text and its objects.
struct Rendered {
    text: String,
    objects: Vec<Value>,
}

impl Rendered {
    fn kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self
            .objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap_or_default().to_string())
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    #[track_caller]
    fn one(&self, kind: &str) -> &Value {
        let found = self.all(kind);
        assert_eq!(found.len(), 1, "exactly one {kind} in:\n{}", self.text);
        found[0]
    }

    #[track_caller]
    fn named(&self, kind: &str, name: &str) -> &Value {
        let found: Vec<&Value> = self
            .all(kind)
            .into_iter()
            .filter(|o| o["metadata"]["name"] == name)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "exactly one {kind} {name} in:\n{}",
            self.text
        );
        found[0]
    }

    fn container(&self) -> &Value {
        &self.one("Deployment")["spec"]["template"]["spec"]["containers"][0]
    }

    fn args(&self) -> Vec<String> {
        strings(&self.container()["args"])
    }

    /// The tether config the ConfigMap carries, parsed; it must load and validate as
    /// `tether serve` loads it.
    fn config(&self) -> Value {
        let text = self.one("ConfigMap")["data"]["tether.yaml"]
            .as_str()
            .expect("the ConfigMap holds tether.yaml");
        if let Err(err) = tether_controller::config::Config::parse(text, "tether.yaml") {
            panic!("the chart's config does not load: {err}\n{text}");
        }
        serde_saphyr::from_str(text).expect("tether.yaml is YAML")
    }

    /// Writes the rendered manifests to `dir/rendered.yaml` and returns `dir`.
    fn write_to(&self, dir: &Path) -> PathBuf {
        let out = dir.join("rendered");
        std::fs::create_dir_all(&out).expect("mkdir");
        std::fs::write(out.join("rendered.yaml"), &self.text).expect("write");
        out
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// `helm template RELEASE charts/tether -n NAMESPACE -f values`, which must succeed.
fn render(namespace: &str, values: &str) -> Rendered {
    let run = run_helm(&["template", RELEASE, "-n", namespace], values);
    assert!(run.success, "helm template failed: {}", run.stderr);
    let objects: Vec<Value> = serde_saphyr::from_multiple(&run.stdout)
        .unwrap_or_else(|e| panic!("helm's output is YAML ({e}):\n{}", run.stdout));
    let objects = objects.into_iter().filter(Value::is_object).collect();
    Rendered {
        text: run.stdout,
        objects,
    }
}

/// `helm template --dry-run=server` against the sandbox: the chart's `lookup` calls
/// read the cluster, as they do in a `helm upgrade`. Helm runs on a blocking thread so
/// the sandbox, on this test's runtime, can answer it.
async fn render_on(sandbox: &TestSandbox, namespace: &str, values: &str) -> Rendered {
    let kubeconfig = sandbox.kubeconfig.to_str().expect("utf-8 path").to_string();
    let (namespace, values) = (namespace.to_string(), values.to_string());
    let run = tokio::task::spawn_blocking(move || {
        run_helm(
            &[
                "template",
                RELEASE,
                "-n",
                &namespace,
                "--dry-run=server",
                "--kubeconfig",
                &kubeconfig,
            ],
            &values,
        )
    })
    .await
    .expect("helm runs");
    assert!(
        run.success,
        "helm template --dry-run=server failed: {}",
        run.stderr
    );
    let objects: Vec<Value> = serde_saphyr::from_multiple(&run.stdout)
        .unwrap_or_else(|e| panic!("helm's output is YAML ({e}):\n{}", run.stdout));
    Rendered {
        text: run.stdout,
        objects: objects.into_iter().filter(Value::is_object).collect(),
    }
}

/// The token in the chart's generated API-token Secret, decoded.
fn generated_token(rendered: &Rendered) -> String {
    let secret = rendered.one("Secret");
    assert_eq!(secret["metadata"]["name"], format!("{FULLNAME}-api-token"));
    let encoded = secret["data"]["token"].as_str().expect("data.token");
    let token = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    String::from_utf8(token).expect("utf-8")
}

/// `helm template` with values the chart must refuse; returns helm's error.
fn render_fails(values: &str) -> String {
    let run = run_helm(&["template", RELEASE, "-n", "tether-system"], values);
    assert!(
        !run.success,
        "helm template accepted {values:?}:\n{}",
        run.stdout
    );
    run.stderr
}

/// Applies rendered manifests to the sandbox. The one place that says how: with
/// Applies rendered manifests as a user of the chart would with tether: `tether sync`.
async fn apply_rendered(sandbox: &TestSandbox, dir: &Path) {
    let path = dir.to_str().expect("utf-8 path");
    let run = tether(sandbox, "sync", &["--path", path, "--app", "chart"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
}

/// `kubectl get KIND NAME [-n NS] -o json`, which must succeed.
async fn get(sandbox: &TestSandbox, kind: &str, name: &str, namespace: Option<&str>) -> Value {
    let mut args = vec!["get", kind, name, "-o", "json"];
    if let Some(namespace) = namespace {
        args.extend(["-n", namespace]);
    }
    let out = sandbox.kubectl(&args).await.ok();
    serde_json::from_str(&out.stdout).expect("kubectl prints JSON")
}

/// Renders, creates the namespaces, applies, and returns the sandbox.
async fn install(rendered: &Rendered, namespaces: &[&str]) -> TestSandbox {
    let sandbox = TestSandbox::start().await;
    for namespace in namespaces {
        sandbox.namespace(namespace).await;
    }
    let dir = rendered.write_to(sandbox.dir.path());
    apply_rendered(&sandbox, &dir).await;
    sandbox
}

fn rules_of(role: &Value) -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
                strings(&r["verbs"]),
            )
        })
        .collect()
}

/// The pod spec's security settings, as the issue asks for them.
fn assert_hardened(deployment: &Value) {
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
    assert!(
        security["runAsUser"].as_i64().is_some_and(|uid| uid > 0),
        "a non-root uid: {security}"
    );
    for field in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                container["resources"][field][resource].is_string(),
                "resources.{field}.{resource} set: {}",
                container["resources"]
            );
        }
    }
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], "http");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "http");
    assert_eq!(container["ports"][0]["name"], "http");
    assert_eq!(container["ports"][0]["containerPort"], 8080);
    // The root filesystem is read-only, so the Git cache is an emptyDir mounted where
    // TETHER_CACHE_DIR points.
    let cache_dir = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "TETHER_CACHE_DIR")
        .and_then(|e| e["value"].as_str())
        .expect("TETHER_CACHE_DIR is set");
    let mount = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["mountPath"] == cache_dir)
        .expect("the cache directory is mounted");
    let volume = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .expect("the cache volume");
    assert!(volume["emptyDir"].is_object(), "{volume}");
}

#[tokio::test]
async fn default_values_render_a_hardened_leader_elected_deployment_that_applies() {
    let namespace = "tether-system";
    let rendered = render(namespace, "");
    assert_eq!(
        rendered.kinds(),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Role",
            "RoleBinding",
            "Secret",
            "Service",
            "ServiceAccount"
        ]
    );
    let deployment = rendered.one("Deployment");
    assert_eq!(deployment["metadata"]["name"], FULLNAME);
    assert_eq!(deployment["metadata"]["namespace"], namespace);
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_hardened(deployment);
    assert_eq!(
        rendered.args(),
        [
            "serve",
            "--config",
            "/etc/tether/tether.yaml",
            "--leader-elect"
        ]
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        FULLNAME
    );

    // Issue #12: the pod's address is not loopback, so the API gets a token, from a
    // Secret the chart generates and mounts; rendered.config() loads it as tether does.
    let config = rendered.config();
    assert_eq!(config["server"]["listen"], "0.0.0.0:8080");
    assert_eq!(
        config["server"]["apiToken"],
        serde_json::json!({"secretFile": "/etc/tether/api/token"})
    );
    assert!(config["server"]["insecureOpenAPI"].is_null());
    let token = generated_token(&rendered);
    assert_eq!(token.len(), 48);
    assert!(token.chars().all(|c| c.is_ascii_alphanumeric()), "{token}");
    assert_eq!(
        mounted_secret_files(&deployment["spec"]["template"]["spec"]),
        [(
            "/etc/tether/api/token".to_string(),
            format!("{FULLNAME}-api-token"),
            "token".to_string()
        )]
    );
    // Issue #12: tether's stop fits in the grace period, with time to exit.
    assert_eq!(
        deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        30
    );
    assert_eq!(config["server"]["shutdownTimeout"], "25s");
    assert_eq!(config["inventoryNamespace"], namespace);
    assert_eq!(config["leaderElection"]["enabled"], true);
    assert_eq!(config["leaderElection"]["namespace"], namespace);
    assert_eq!(config["leaderElection"]["leaseName"], FULLNAME);
    assert_eq!(config["server"]["webhooks"]["allowUnsigned"], false);

    // Reads cluster-wide (the watch cache), bound to the ServiceAccount; the Lease and
    // the inventory in the release namespace (issue #24: see
    // tether_itself_writes_nothing_…).
    let cluster_role = rendered.named("ClusterRole", FULLNAME);
    // (then impersonation and the App object rules: see the_chart_ships_the_app_crd_…)
    assert_eq!(
        rules_of(cluster_role)[0],
        (
            vec!["*".into()],
            vec!["*".into()],
            vec!["get".into(), "list".into(), "watch".into()]
        )
    );
    let binding = rendered.one("ClusterRoleBinding");
    assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
    assert_eq!(binding["subjects"][0]["name"], FULLNAME);
    assert_eq!(binding["subjects"][0]["namespace"], namespace);
    let own = rules_of(rendered.one("Role"));
    let lease = own
        .iter()
        .find(|(groups, resources, _)| {
            groups == &["coordination.k8s.io"] && resources == &["leases"]
        })
        .expect("a rule for Leases");
    for verb in ["get", "create", "update"] {
        assert!(lease.2.iter().any(|v| v == verb), "{verb} on leases");
    }
    assert_eq!(rendered.one("Role")["metadata"]["namespace"], namespace);

    let service = rendered.one("Service");
    let ports: Vec<(String, i64)> = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["port"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(ports, [("http".into(), 8080), ("metrics".into(), 9090)]);

    // Helm's own linter agrees, warnings included.
    let lint = run_helm(&["lint", "--strict"], "");
    assert!(lint.success, "helm lint: {}{}", lint.stdout, lint.stderr);

    let sandbox = install(&rendered, &[namespace]).await;
    let live = get(&sandbox, "deployment", FULLNAME, Some(namespace)).await;
    assert_eq!(live["spec"]["replicas"], 2);
    assert_hardened(&live);
    assert_eq!(
        strings(&live["spec"]["template"]["spec"]["containers"][0]["args"]),
        rendered.args()
    );
    let live_config = get(&sandbox, "configmap", FULLNAME, Some(namespace)).await;
    assert_eq!(
        live_config["data"]["tether.yaml"],
        rendered.one("ConfigMap")["data"]["tether.yaml"]
    );
    let live_role = get(&sandbox, "clusterrole", FULLNAME, None).await;
    assert_eq!(live_role["rules"][0]["verbs"][0], "get");
    let live_binding = get(&sandbox, "clusterrolebinding", FULLNAME, None).await;
    assert_eq!(live_binding["roleRef"]["name"], FULLNAME);
    get(&sandbox, "serviceaccount", FULLNAME, Some(namespace)).await;
    get(
        &sandbox,
        "rolebinding",
        &format!("{FULLNAME}-self"),
        Some(namespace),
    )
    .await;
    let live_service = get(&sandbox, "service", FULLNAME, Some(namespace)).await;
    assert_eq!(live_service["spec"]["type"], "ClusterIP");
    assert_eq!(live_service["spec"]["ports"][1]["name"], "metrics");
    assert_eq!(live_service["spec"]["ports"][1]["targetPort"], "http");
}

#[tokio::test]
async fn namespaced_rbac_grants_roles_in_the_listed_namespaces_only() {
    let rendered = render(
        "tether-system",
        "rbac:\n  scope: namespaced\n  namespaces: [team-a, team-b]\n  rules:\n  - apiGroups: [\"\", apps]\n    resources: [configmaps, services, deployments]\n    verbs: [get, list, watch, create, patch, update, delete]\n",
    );
    let kinds = rendered.kinds();
    assert!(!kinds.contains(&"ClusterRole".to_string()), "{kinds:?}");
    assert!(
        !kinds.contains(&"ClusterRoleBinding".to_string()),
        "{kinds:?}"
    );
    let mut role_places: Vec<(String, String)> = rendered
        .all("Role")
        .iter()
        .map(|r| {
            (
                r["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
                r["metadata"]["name"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    role_places.sort();
    assert_eq!(
        role_places,
        [
            ("team-a".into(), FULLNAME.into()),
            ("team-b".into(), FULLNAME.into()),
            ("tether-system".into(), format!("{FULLNAME}-self")),
        ]
    );
    assert_eq!(rendered.all("RoleBinding").len(), 3);
    let team_role = rendered
        .all("Role")
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == "team-a")
        .expect("the team-a Role");
    assert_eq!(
        rules_of(team_role)[0].1,
        ["configmaps", "services", "deployments"]
    );

    let sandbox = install(&rendered, &["tether-system", "team-a", "team-b"]).await;
    for namespace in ["team-a", "team-b"] {
        let role = get(&sandbox, "role", FULLNAME, Some(namespace)).await;
        assert_eq!(role["rules"][0]["resources"][2], "deployments");
        let binding = get(&sandbox, "rolebinding", FULLNAME, Some(namespace)).await;
        assert_eq!(binding["subjects"][0]["namespace"], "tether-system");
        assert_eq!(binding["roleRef"]["kind"], "Role");
    }
    let none = sandbox
        .kubectl(&["get", "clusterrole", FULLNAME, "-o", "name"])
        .await;
    assert_ne!(none.code, 0, "no ClusterRole: {}", none.stdout);
}

#[tokio::test]
async fn one_replica_without_leader_election_drops_the_flag_and_the_lease_rights() {
    let rendered = render(
        "ops",
        "replicaCount: 1\nleaderElection:\n  enabled: false\n",
    );
    assert_eq!(rendered.one("Deployment")["spec"]["replicas"], 1);
    assert!(!rendered.args().contains(&"--leader-elect".to_string()));
    assert_eq!(rendered.config()["leaderElection"]["enabled"], false);
    let own = rules_of(rendered.one("Role"));
    assert!(
        own.iter().all(|(_, resources, _)| resources != &["leases"]),
        "{own:?}"
    );

    let sandbox = install(&rendered, &["ops"]).await;
    let live = get(&sandbox, "deployment", FULLNAME, Some("ops")).await;
    assert_eq!(live["spec"]["replicas"], 1);
    assert_eq!(
        strings(&live["spec"]["template"]["spec"]["containers"][0]["args"]),
        ["serve", "--config", "/etc/tether/tether.yaml"]
    );
}

#[tokio::test]
async fn shards_run_every_replica_with_its_pod_ip_and_the_rights_of_shard_and_member_leases() {
    let rendered = render(
        "ops",
        "replicaCount: 3\nshards: 6\nleaderElection: {enabled: false}\n",
    );
    assert_eq!(rendered.one("Deployment")["spec"]["replicas"], 3);
    // Each shard is its own election: no single leader.
    assert!(!rendered.args().contains(&"--leader-elect".to_string()));
    let config = rendered.config();
    assert_eq!(config["shards"], 6);
    assert_eq!(config["leaderElection"]["namespace"], "ops");
    let env = &rendered.container()["env"];
    let pod_ip = env
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "POD_IP")
        .expect("POD_IP for the status URL peers use");
    assert_eq!(pod_ip["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
    // Issue #24: the replicas sign their calls with a generated peer token, mounted.
    assert_eq!(
        config["server"]["peerToken"]["secretFile"],
        "/etc/tether/peer/token"
    );
    let peer_secret = format!("{FULLNAME}-peer-token");
    let secret = rendered
        .objects
        .iter()
        .find(|o| o["kind"] == "Secret" && o["metadata"]["name"] == peer_secret.as_str())
        .expect("the generated peer token Secret");
    let token = secret["data"]["token"].as_str().expect("a token");
    assert!(token.len() >= 48, "{token}");
    let mounted = rendered.container()["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["name"] == "peer-token" && m["mountPath"] == "/etc/tether/peer");
    assert!(mounted, "the peer token is mounted");
    let own = rules_of(rendered.one("Role"));
    let leases = own
        .iter()
        .find(|(_, resources, _)| resources == &["leases"])
        .expect("Lease rights");
    assert_eq!(
        leases.2,
        [
            "get", "list", "watch", "create", "update", "patch", "delete"
        ]
    );

    // With leader election on too, sharding wins and the flag stays off.
    let both = render("ops", "replicaCount: 2\nshards: 4\n");
    assert!(!both.args().contains(&"--leader-elect".to_string()));
    assert_eq!(both.config()["shards"], 4);
    // One shard is no sharding: the config does not mention it, the Lease rights are
    // the leader's, without delete.
    let single = render("ops", "");
    assert!(single.config().get("shards").is_none());
    assert!(single.config()["server"].get("peerToken").is_none());
    let own = rules_of(single.one("Role"));
    let leases = own
        .iter()
        .find(|(_, resources, _)| resources == &["leases"])
        .expect("the leader's Lease rights");
    assert_eq!(
        leases.2,
        ["get", "list", "watch", "create", "update", "patch"]
    );
    assert!(
        single.container()["env"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| e["name"] != "POD_IP")
    );

    let sandbox = install(&rendered, &["ops"]).await;
    let live = get(&sandbox, "deployment", FULLNAME, Some("ops")).await;
    assert_eq!(live["spec"]["replicas"], 3);
}

#[tokio::test]
async fn webhook_api_and_git_secrets_are_mounted_from_existing_secrets_never_inlined() {
    let values = r#"
webhookSecrets:
  github: {existingSecret: tether-webhooks, key: github}
  generic: {existingSecret: tether-generic, key: token}
apiToken: {existingSecret: tether-api, key: bearer}
git:
  credentials:
    existingSecret: git-credentials
    username: tether-bot
    tokenKey: api-token
    sshKeyKey: id_ed25519
    knownHostsKey: known_hosts
config:
  apps:
  - name: web
    source: {repo: "https://git.example.com/apps.git", path: apps/web}
  - name: own
    source:
      repo: "https://git.example.com/own.git"
      credentials: {tokenEnv: OWN_TOKEN}
"#;
    // The Secrets exist in the cluster, and Helm renders against it (its `lookup`
    // could read them): their values still never pass through the chart.
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("tether-system").await;
    let secret_value = "s3cr3t-never-in-the-chart";
    let secrets = sandbox.write_file(
        "secrets.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: tether-webhooks, namespace: tether-system}}\nstringData: {{github: {secret_value}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: tether-generic, namespace: tether-system}}\nstringData: {{token: {secret_value}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: tether-api, namespace: tether-system}}\nstringData: {{bearer: {secret_value}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: git-credentials, namespace: tether-system}}\nstringData: {{api-token: {secret_value}}}\n"
        ),
    );
    sandbox
        .kubectl(&["apply", "--server-side", "-f", &secrets])
        .await
        .ok();
    let rendered = render_on(&sandbox, "tether-system", values).await;
    let encoded = base64::engine::general_purpose::STANDARD.encode(secret_value);
    for shown in [secret_value, encoded.as_str()] {
        assert!(
            !rendered.text.contains(shown),
            "{shown} in:\n{}",
            rendered.text
        );
    }
    assert!(
        rendered.all("Secret").is_empty(),
        "the chart creates no Secret"
    );

    let config = rendered.config();
    let webhooks = &config["server"]["webhooks"];
    assert_eq!(
        webhooks["github"]["secretFile"],
        "/etc/tether/webhooks/github/github"
    );
    assert_eq!(
        webhooks["generic"]["secretFile"],
        "/etc/tether/webhooks/generic/token"
    );
    assert_eq!(
        config["server"]["apiToken"],
        serde_json::json!({"secretFile": "/etc/tether/api/bearer"})
    );
    let web = &config["apps"][0]["source"]["credentials"];
    assert_eq!(web["username"], "tether-bot");
    assert_eq!(web["tokenFile"], "/etc/tether/git/token");
    assert_eq!(web["sshKeyFile"], "/etc/tether/git/ssh-key");
    assert_eq!(web["knownHostsFile"], "/etc/tether/git/known_hosts");
    // An app with credentials of its own keeps them.
    assert_eq!(
        config["apps"][1]["source"]["credentials"],
        serde_json::json!({"tokenEnv": "OWN_TOKEN"})
    );

    // Every file the config names is a mounted key of the named Secret.
    let pod = &rendered.one("Deployment")["spec"]["template"]["spec"];
    let mounted = mounted_secret_files(pod);
    for (file, secret, key) in [
        (
            "/etc/tether/webhooks/github/github",
            "tether-webhooks",
            "github",
        ),
        (
            "/etc/tether/webhooks/generic/token",
            "tether-generic",
            "token",
        ),
        ("/etc/tether/api/bearer", "tether-api", "bearer"),
        ("/etc/tether/git/token", "git-credentials", "api-token"),
        ("/etc/tether/git/ssh-key", "git-credentials", "id_ed25519"),
        (
            "/etc/tether/git/known_hosts",
            "git-credentials",
            "known_hosts",
        ),
    ] {
        assert!(
            mounted.contains(&(file.to_string(), secret.to_string(), key.to_string())),
            "{file} from {secret}/{key} in {mounted:?}"
        );
    }

    let dir = rendered.write_to(sandbox.dir.path());
    apply_rendered(&sandbox, &dir).await;
    let live = get(&sandbox, "deployment", FULLNAME, Some("tether-system")).await;
    let live_mounted = mounted_secret_files(&live["spec"]["template"]["spec"]);
    assert_eq!(live_mounted, mounted);
    let live_config = get(&sandbox, "configmap", FULLNAME, Some("tether-system")).await;
    assert!(
        !live_config.to_string().contains(secret_value),
        "no secret value in the ConfigMap"
    );
}

/// (file path in the container, Secret name, Secret key) for every Secret key mounted.
fn mounted_secret_files(pod: &Value) -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    for mount in pod["containers"][0]["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(volume) = pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == mount["name"])
        else {
            continue;
        };
        let secret = &volume["secret"];
        if secret.is_null() {
            continue;
        }
        assert_eq!(mount["readOnly"], true, "{mount}");
        for item in secret["items"].as_array().into_iter().flatten() {
            files.push((
                format!(
                    "{}/{}",
                    mount["mountPath"].as_str().unwrap_or_default(),
                    item["path"].as_str().unwrap_or_default()
                ),
                secret["secretName"].as_str().unwrap_or_default().into(),
                item["key"].as_str().unwrap_or_default().into(),
            ));
        }
    }
    files.sort();
    files
}

#[tokio::test]
async fn service_monitor_scrapes_the_metrics_port_once_its_crd_exists() {
    let rendered = render(
        "monitoring",
        "serviceMonitor:\n  enabled: true\n  interval: 15s\n  labels: {release: prometheus}\n",
    );
    let monitor = rendered.one("ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["interval"], "15s");
    // It selects the chart's Service, whose port it names.
    let service = rendered.one("Service");
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(&service["metadata"]["labels"][key], value, "{key}");
    }

    let sandbox = TestSandbox::start().await;
    sandbox.namespace("monitoring").await;
    let crd =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chart/servicemonitor-crd.yaml");
    sandbox
        .kubectl(&["apply", "--server-side", "-f", crd.to_str().expect("utf-8")])
        .await
        .ok();
    sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/servicemonitors.monitoring.coreos.com",
            "--timeout=10s",
        ])
        .await
        .ok();
    let dir = rendered.write_to(sandbox.dir.path());
    apply_rendered(&sandbox, &dir).await;
    let live = get(&sandbox, "servicemonitor", FULLNAME, Some("monitoring")).await;
    assert_eq!(live["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(live["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(
        live["spec"]["namespaceSelector"]["matchNames"][0],
        "monitoring"
    );
}

#[tokio::test]
async fn ingress_routes_only_the_webhook_paths_to_the_service() {
    let rendered = render(
        "tether-system",
        "ingress:\n  enabled: true\n  className: nginx\n  host: hooks.example.com\n  tls:\n  - {secretName: hooks-tls, hosts: [hooks.example.com]}\n",
    );
    let ingress = rendered.one("Ingress");
    assert_eq!(ingress["spec"]["ingressClassName"], "nginx");
    assert_eq!(ingress["spec"]["tls"][0]["secretName"], "hooks-tls");
    let rule = &ingress["spec"]["rules"][0];
    assert_eq!(rule["host"], "hooks.example.com");
    let paths = rule["http"]["paths"].as_array().expect("paths");
    assert_eq!(paths.len(), 1);
    assert_eq!(paths[0]["path"], "/webhooks");
    assert_eq!(paths[0]["pathType"], "Prefix");
    assert_eq!(paths[0]["backend"]["service"]["name"], FULLNAME);
    assert_eq!(paths[0]["backend"]["service"]["port"]["number"], 8080);

    let sandbox = install(&rendered, &["tether-system"]).await;
    let live = get(&sandbox, "ingress", FULLNAME, Some("tether-system")).await;
    assert_eq!(
        live["spec"]["rules"][0]["http"]["paths"][0]["path"],
        "/webhooks"
    );
    assert_eq!(
        live["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"],
        FULLNAME
    );
}

#[test]
fn values_the_chart_cannot_honour_are_refused_naming_the_field() {
    for (values, expected) in [
        (
            "replicaCount: 3\nleaderElection: {enabled: false}\n",
            "replicaCount > 1 needs leaderElection.enabled or shards > 1",
        ),
        ("shards: 0\n", "shards must be at least 1"),
        (
            "shards: 2\nconfig:\n  shards: 3\n",
            "config.shards is set by the chart: set shards",
        ),
        (
            "rbac: {scope: everywhere}\n",
            "rbac.scope must be cluster or namespaced",
        ),
        (
            "webhookSecrets:\n  github: {key: github}\n",
            "webhookSecrets.github.existingSecret is required",
        ),
        (
            "webhookSecrets:\n  svn: {existingSecret: hooks}\n",
            "webhookSecrets.svn: unknown provider",
        ),
        (
            "apiToken: {generate: false}\n",
            "apiToken: without existingSecret or generate: true the status API has no token",
        ),
        (
            "apiToken: {value: t0ken}\n",
            "apiToken.value: the token is never inlined",
        ),
        (
            "config:\n  server: {shutdownTimeout: 10s}\n",
            "config.server.shutdownTimeout is set by the chart",
        ),
        (
            "terminationGracePeriodSeconds: 5\n",
            "terminationGracePeriodSeconds must be at least 6",
        ),
        (
            "config:\n  server: {listen: \"127.0.0.1:9000\"}\n",
            "config.server.listen is set by the chart",
        ),
        (
            "git:\n  credentials: {existingSecret: git}\n",
            "git.credentials.existingSecret is set: name at least one of",
        ),
        (
            "serviceAccount: {create: false}\n",
            "serviceAccount.name is required",
        ),
    ] {
        let error = render_fails(values);
        assert!(error.contains(expected), "{values:?}: {error}");
    }
}

#[test]
fn a_changed_config_changes_the_pod_template_so_the_pods_restart() {
    let checksum = |values: &str| {
        render("tether-system", values).one("Deployment")["spec"]["template"]["metadata"]
            ["annotations"]["checksum/config"]
            .as_str()
            .expect("a config checksum")
            .to_string()
    };
    assert_eq!(checksum(""), checksum(""));
    assert_ne!(checksum(""), checksum("config:\n  concurrency: 8\n"));
}

/// Regression (issue #31): the chart's default image, `ghcr.io/tether/tether`, did not
/// exist. It has none now: a render without one stops and says how to get one.
#[test]
fn the_chart_names_no_image_of_its_own_and_says_how_to_build_one() {
    let err = render_fails("image: {repository: \"\"}\n");
    assert!(
        err.contains("image.repository is required")
            && err.contains("Dockerfile")
            && err.contains("docker build"),
        "{err}"
    );
    let rendered = render("tether-system", "");
    let deployment = rendered.one("Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("{IMAGE}:0.1.0")
    );
}

/// The image cannot be built here; what can be checked is that its build context has
/// what the build reads, and that it runs as the user the chart expects.
#[test]
fn the_dockerfile_copies_what_the_build_reads_and_runs_as_the_charts_user() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("Dockerfile");
    let ignored: Vec<String> = std::fs::read_to_string(root.join(".dockerignore"))
        .expect(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .map(|l| l.trim_end_matches('/').to_string())
        .collect();
    assert!(ignored.iter().any(|p| p == "target"), "target/ stays out");

    let mut copied = Vec::new();
    for line in dockerfile.lines() {
        let Some(rest) = line.strip_prefix("COPY ") else {
            continue;
        };
        if rest.starts_with("--from") {
            continue;
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        for source in &words[..words.len() - 1] {
            assert!(root.join(source).exists(), "COPY {source}: not in the repo");
            assert!(
                !ignored
                    .iter()
                    .any(|p| source == p || source.starts_with(&format!("{p}/"))),
                "COPY {source} is excluded by .dockerignore"
            );
            copied.push(source.to_string());
        }
    }
    // Every target path Cargo.toml names is in the context (cargo refuses a manifest
    // whose targets are missing), and so are the default bench and test directories.
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let mut needed: Vec<String> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("path = \""))
        .map(|p| p.trim_end_matches('"').to_string())
        .collect();
    // The workspace's crates, and the App and AppSet CRDs the binary embeds (`tether crd`).
    needed.extend(
        [
            "Cargo.lock",
            "benches",
            "assets",
            "crates",
            "charts/tether/crds/app.yaml",
            "charts/tether/crds/appset.yaml",
        ]
        .map(String::from),
    );
    for path in needed {
        assert!(
            copied
                .iter()
                .any(|c| path == *c || path.starts_with(&format!("{c}/"))),
            "{path} is not copied into the build"
        );
    }

    let values: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml"),
    )
    .expect("values.yaml is YAML");
    let uid = values["securityContext"]["runAsUser"]
        .as_i64()
        .expect("a uid");
    let gid = values["securityContext"]["runAsGroup"]
        .as_i64()
        .expect("a gid");
    let user = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("USER "))
        .next_back()
        .expect("the image sets a USER");
    assert_eq!(user.trim(), format!("{uid}:{gid}"));
    assert!(uid > 0);
    // The chart passes arguments only, so the image's entrypoint runs them.
    assert!(dockerfile.contains("ENTRYPOINT [\"/usr/local/bin/tether\"]"));
    let rendered = render("tether-system", "");
    assert!(rendered.container()["command"].is_null());
}

/// Issue #24: by default tether itself writes nothing of the cluster's objects (it
/// reads, impersonates ServiceAccounts, and keeps its own state and App objects), Apps
/// act as `tether-tenant` of their namespace, and the chart ships the ClusterRole a
/// platform team binds for a tenant. `rbac.singleTeam` restores every right.
#[tokio::test]
async fn tether_itself_writes_nothing_and_apps_act_as_tenants_by_default() {
    let namespace = "tether-system";
    let rendered = render(namespace, "");
    let writes = [
        "*",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];
    let own = rules_of(rendered.named("ClusterRole", FULLNAME));
    // Issue #30: reviews are asked, never stored, and an action's Event is its trail.
    let people = |groups: &Vec<String>, resources: &Vec<String>, verbs: &Vec<String>| {
        let allowed = [
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
            ("events.k8s.io", "events"),
        ];
        verbs == &["create"]
            && matches!((groups.as_slice(), resources.as_slice()), ([g], [r])
                if allowed.contains(&(g.as_str(), r.as_str())))
    };
    for (groups, resources, verbs) in &own {
        let writing = verbs.iter().any(|v| writes.contains(&v.as_str()));
        assert!(
            !writing || groups == &["tether.dev"] || people(groups, resources, verbs),
            "tether may write {groups:?}/{resources:?}: {verbs:?}"
        );
    }
    assert!(own.contains(&(
        vec!["".into()],
        vec!["serviceaccounts".into()],
        vec!["impersonate".into()]
    )));
    assert_eq!(
        rendered.config()["server"]["defaultServiceAccount"],
        "tether-tenant"
    );
    let tenant = rendered.named("ClusterRole", &format!("{FULLNAME}-tenant"));
    let tenant_rules = rules_of(tenant);
    assert!(
        tenant_rules.iter().any(|(_, resources, verbs)| resources
            .contains(&"deployments".to_string())
            && verbs.contains(&"patch".to_string())),
        "{tenant_rules:?}"
    );
    // Bound by nothing the chart makes: the platform team binds it per namespace.
    for binding in rendered
        .all("ClusterRoleBinding")
        .into_iter()
        .chain(rendered.all("RoleBinding"))
    {
        assert_ne!(binding["roleRef"]["name"], tenant["metadata"]["name"]);
    }

    // Installed, the API server agrees: tether may impersonate and read, not write.
    let sandbox = install(&rendered, &[namespace]).await;
    let as_tether = format!("--as=system:serviceaccount:{namespace}:{FULLNAME}");
    let can_i = |verb: &'static str, what: &'static str, ns: &'static str| {
        let (sandbox, as_tether) = (&sandbox, as_tether.clone());
        async move {
            let out = sandbox
                .kubectl(&["auth", "can-i", verb, what, "-n", ns, &as_tether])
                .await;
            out.stdout.trim().to_string()
        }
    };
    assert_eq!(
        can_i("impersonate", "serviceaccounts", "team-a").await,
        "yes"
    );
    assert_eq!(can_i("list", "secrets", "team-a").await, "yes");
    assert_eq!(can_i("create", "clusterrolebindings", "team-a").await, "no");
    assert_eq!(can_i("patch", "configmaps", "kube-system").await, "no");
    assert_eq!(
        can_i("patch", "configmaps", namespace).await,
        "yes",
        "its inventory"
    );

    // One team: every right, as before issue #24.
    let single = render(
        namespace,
        "rbac: {singleTeam: true}
",
    );
    let own = rules_of(single.named("ClusterRole", FULLNAME));
    assert_eq!(
        own[0],
        (vec!["*".into()], vec!["*".into()], vec!["*".into()])
    );
    // No default: every App names its ServiceAccount; no tenant ClusterRole if unwanted.
    let strict = render(
        namespace,
        "tenants: {defaultServiceAccount: \"\", createClusterRole: false}\n",
    );
    assert!(strict.config()["server"]["defaultServiceAccount"].is_null());
    assert_eq!(strict.all("ClusterRole").len(), 1);
    // The configuration's own setting wins over the chart's default.
    let own_default = render(
        namespace,
        "config:\n  server:\n    defaultServiceAccount: deployer\n",
    );
    assert_eq!(
        own_default.config()["server"]["defaultServiceAccount"],
        "deployer"
    );
}

/// The `yaml` blocks of the chart's README, in order.
fn readme_values() -> Vec<String> {
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).expect("README.md");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```yaml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_variant_the_readme_documents_renders_and_lints_clean() {
    let variants = readme_values();
    assert!(variants.len() >= 5, "the README's variants: {variants:?}");
    for values in variants {
        let rendered = render("tether-system", &values);
        assert!(rendered.all("Deployment").len() == 1, "{values}");
        let lint = run_helm(&["lint", "--strict", "-n", "tether-system"], &values);
        assert!(
            lint.success,
            "helm lint --strict with {values}: {}{}",
            lint.stdout, lint.stderr
        );
    }
}

/// Issue #12: the generated token is drawn once. Without a cluster (`helm template`)
/// each render draws anew; against a cluster where the release's Secret exists (what
/// `helm upgrade` sees) the chart keeps the token it finds, so clients holding it keep
/// working.
#[tokio::test]
async fn the_generated_api_token_is_kept_across_upgrades() {
    let first = generated_token(&render("tether-system", ""));
    let again = generated_token(&render("tether-system", ""));
    assert_ne!(first, again, "no cluster, nothing to keep: a new token");

    let sandbox = TestSandbox::start().await;
    sandbox.namespace("tether-system").await;
    let fresh = generated_token(&render_on(&sandbox, "tether-system", "").await);
    assert_eq!(fresh.len(), 48, "a first install draws a token");
    // The Secret as the first install left it: Helm's ownership marks, the token.
    let installed = sandbox.write_file(
        "installed.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {FULLNAME}-api-token\n  namespace: tether-system\n  labels: {{app.kubernetes.io/managed-by: Helm}}\n  annotations: {{meta.helm.sh/release-name: {RELEASE}, meta.helm.sh/release-namespace: tether-system}}\nstringData: {{token: {first}}}\n"
        ),
    );
    sandbox
        .kubectl(&["apply", "--server-side", "-f", &installed])
        .await
        .ok();
    for _ in 0..2 {
        let upgraded = render_on(&sandbox, "tether-system", "config:\n  concurrency: 8\n").await;
        assert_eq!(generated_token(&upgraded), first);
    }
    // A token of your own replaces the generated Secret.
    let own = render_on(
        &sandbox,
        "tether-system",
        "apiToken: {existingSecret: tether-api}\n",
    )
    .await;
    assert!(own.all("Secret").is_empty());
    assert!(!own.text.contains(&first));
}

/// Issue #12: an API without a token only when asked for: no Secret, the choice in the
/// config (tether warns at start), and the config loads as tether loads it.
#[test]
fn an_open_api_is_rendered_only_when_asked_for() {
    let rendered = render(
        "tether-system",
        "apiToken: {generate: false}\nconfig:\n  server: {insecureOpenAPI: true}\n",
    );
    assert!(rendered.all("Secret").is_empty());
    let config = rendered.config();
    assert_eq!(config["server"]["insecureOpenAPI"], true);
    assert!(config["server"]["apiToken"].is_null(), "{config}");
    let pod = &rendered.one("Deployment")["spec"]["template"]["spec"];
    assert!(mounted_secret_files(pod).is_empty());
}

/// tether's stop budget follows the pod's grace period, 5s below it.
#[test]
fn the_shutdown_budget_follows_the_grace_period() {
    let rendered = render("tether-system", "terminationGracePeriodSeconds: 60\n");
    assert_eq!(
        rendered.one("Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        60
    );
    assert_eq!(rendered.config()["server"]["shutdownTimeout"], "55s");
}

/// Issue #16: Helm installs the App CRD from the chart's `crds/` (the same text `tether
/// crd` prints), and the roles grant what `tether serve` needs for App objects unless
/// `config.server.apps.enabled` is false.
#[tokio::test]
async fn the_chart_ships_the_app_crd_and_the_rights_serve_needs_for_apps() {
    let run = run_helm(
        &["template", RELEASE, "-n", "tether-system", "--include-crds"],
        "",
    );
    assert!(run.success, "helm template failed: {}", run.stderr);
    let objects: Vec<Value> = serde_saphyr::from_multiple(&run.stdout).expect("YAML");
    let crd = objects
        .iter()
        .find(|o| o["kind"] == "CustomResourceDefinition")
        .expect("the App CRD is rendered");
    let shipped: Value =
        serde_saphyr::from_str(tether_controller::config::APP_CRD_YAML).expect("YAML");
    assert_eq!(crd, &shipped);

    let app_rules = |role: &Value| -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
        rules_of(role)
            .into_iter()
            .filter(|(groups, _, _)| groups.iter().any(|g| g == "tether.dev"))
            .collect()
    };
    let rendered = render("tether-system", "");
    let rules = app_rules(rendered.named("ClusterRole", FULLNAME));
    assert_eq!(rules.len(), 3, "{rules:?}");
    assert_eq!(rules[0].1, ["apps"]);
    // create and delete: the Apps an AppSet generates and deletes (issue #28).
    assert_eq!(
        rules[0].2,
        [
            "get", "list", "watch", "patch", "update", "create", "delete"
        ]
    );
    assert_eq!(rules[1].1, ["apps/status"]);
    assert_eq!(rules[1].2, ["get", "patch", "update"]);
    assert_eq!(rules[2].1, ["appsets/status"]);
    assert_eq!(rules[2].2, ["get", "patch", "update"]);
    let crd_rule = &rendered.named("ClusterRole", FULLNAME)["rules"]
        .as_array()
        .and_then(|r| r.last())
        .cloned()
        .expect("rules");
    assert_eq!(crd_rule["resources"][0], "customresourcedefinitions");
    assert_eq!(crd_rule["resourceNames"][0], "apps.tether.dev");
    assert_eq!(strings(&crd_rule["verbs"]), ["get", "list", "watch"]);

    let namespaced = render(
        "tether-system",
        "rbac:\n  scope: namespaced\n  namespaces: [team-a]\nconfig:\n  server:\n    apps:\n      namespaces: [team-a]\n",
    );
    let role = namespaced
        .all("Role")
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == "team-a")
        .expect("the team-a Role");
    assert_eq!(app_rules(role).len(), 3);
    assert_eq!(
        namespaced.config()["server"]["apps"]["namespaces"][0],
        "team-a"
    );

    let off = render(
        "tether-system",
        "config:\n  server:\n    apps:\n      enabled: false\n",
    );
    assert!(app_rules(off.named("ClusterRole", FULLNAME)).is_empty());

    // Applied as Helm would (CRDs first), the CRD serves `kubectl get tapp`.
    let sandbox = TestSandbox::start().await;
    let dir = sandbox.dir.path().join("crds");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("app.yaml"),
        serde_json::to_string(crd).expect("JSON"),
    )
    .expect("write");
    apply_rendered(&sandbox, &dir).await;
    crate::support::eventually("the App kind is served", || async {
        (sandbox.kubectl(&["get", "tapp", "-A"]).await.code == 0).then_some(())
    })
    .await;
}
