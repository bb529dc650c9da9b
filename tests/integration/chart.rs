//! The Helm chart (`charts/tether`), rendered by Helm's own engine (`.ci/install-helm`)
//! with its default values and with each documented variant, checked object by object,
//! then applied to the sandbox and read back with `kubectl`.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use serde_json::Value;

use crate::support::{TestSandbox, tether};

mod exposure;
mod tenancy;
mod values;

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
    sandbox.kubectl_json(&args).await
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
