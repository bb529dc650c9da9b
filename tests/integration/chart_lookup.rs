//! Helm's `lookup` from the live cluster (issue #26, argoproj/argo-cd#5202): the
//! read-only endpoint a render's `helm template --dry-run=server` reads through,
//! driven by the real `kubectl` as the app's (impersonated) identity; grafana's chart
//! (a random admin password unless `lookup` finds the Secret it made, a checksum of
//! that Secret on the workload) synced by `tether serve` and diffed right after with
//! no drift; a tenant whose identity may not read Secrets gets its lookup refused,
//! with nothing of another namespace's Secret anywhere; an offline diff says its
//! lookups answered nothing.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use tether_core::cluster::lookup::LookupEndpoint;
use tether_core::cluster::{Cluster, ServiceAccount};

use crate::app_crd::{app_sandbox, apply_app};
use crate::charts_deps::HelmRepo;
use crate::charts_source::serve_with_helm;
use crate::serve::server_section;
use crate::support::{TestSandbox, http_client, tether_with_env};

/// Data of a Secret in another namespace that a tenant's chart tries to read.
const STOLEN: &str = "an0ther-teams-s3cret";

/// The ServiceAccount `team/deployer`, which may read and write ConfigMaps and
/// Deployments of `team` and nothing else (no Secrets).
const NO_SECRETS_RBAC: &str = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: team\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: deployer\n  namespace: team\n\
rules:\n- apiGroups: ['', apps]\n  resources: [configmaps, deployments]\n\
\x20 verbs: [get, list, watch, create, update, patch, delete]\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: deployer\n  namespace: team\n\
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}\n\
subjects:\n- kind: ServiceAccount\n  name: deployer\n  namespace: team\n";

fn secret(name: &str, namespace: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {namespace}\nstringData:\n  password: {value:?}\n"
    )
}

/// kubectl against the endpoint whose kubeconfig is `kubeconfig`.
async fn kubectl_via(sandbox: &TestSandbox, kubeconfig: &Path, args: &[&str]) -> (i32, String) {
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=10s")
        .args(args)
        .env("HOME", sandbox.dir.path())
        .env("KUBECACHEDIR", sandbox.dir.path().join("lookup-cache"))
        .env_remove("KUBECONFIG")
        .output()
        .await
        .expect("kubectl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lookup_endpoint_reads_as_the_apps_identity_and_refuses_writes_watches_and_the_rest() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespaces(&["team", "other"]).await;
    sandbox.kubectl_apply(NO_SECRETS_RBAC).await;
    sandbox
        .kubectl_apply(&secret("stolen", "other", STOLEN))
        .await;
    sandbox.kubectl_apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\n  namespace: team\ndata:\n  a: b\n",
    )
    .await;
    let own = Cluster::connect(Some(&sandbox.kubeconfig), None)
        .await
        .expect("tether's connection");
    let account = ServiceAccount {
        namespace: "team".into(),
        name: "deployer".into(),
    };
    let tenant = own.impersonating(&account, None).expect("impersonating");
    let endpoint = LookupEndpoint::start(&tenant).await.expect("the endpoint");
    let kubeconfig: PathBuf = endpoint.kubeconfig().to_path_buf();
    let mode = std::fs::metadata(&kubeconfig)
        .expect("kubeconfig")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "only tether may read the render's token"
    );
    let text = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    assert!(text.contains("server: https://127.0.0.1:"), "{text}");
    let ours = |key: &str| {
        let real = std::fs::read_to_string(&sandbox.kubeconfig).expect("kubeconfig");
        real.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(str::to_string))
            .expect("the sandbox's kubeconfig has it")
    };
    assert!(
        !text.contains(&ours("token: ")) && !text.contains(&ours("certificate-authority-data: ")),
        "the render's kubeconfig holds none of tether's credentials: {text}"
    );

    // What the ServiceAccount may read, it reads; as itself.
    let before = sandbox.sandbox.audit().len();
    let (code, out) = kubectl_via(
        &sandbox,
        &kubeconfig,
        &["get", "configmap", "mine", "-n", "team", "-o", "name"],
    )
    .await;
    assert_eq!((code, out.trim()), (0, "configmap/mine"), "{out}");
    let (code, out) = kubectl_via(
        &sandbox,
        &kubeconfig,
        &["get", "configmaps", "-n", "team", "-o", "name"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("configmap/mine"), "{out}");

    // Another namespace's Secret: refused by RBAC as the ServiceAccount, data nowhere.
    let (code, out) = kubectl_via(
        &sandbox,
        &kubeconfig,
        &["get", "secret", "stolen", "-n", "other", "-o", "json"],
    )
    .await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("forbidden"), "{out}");
    assert!(
        !out.contains(STOLEN) && !out.contains("YW4wdGhlci"),
        "{out}"
    );

    // Writes, watches, subresources and other paths: refused by the endpoint.
    let (code, out) = kubectl_via(
        &sandbox,
        &kubeconfig,
        &[
            "create",
            "configmap",
            "planted",
            "-n",
            "team",
            "--from-literal=a=b",
        ],
    )
    .await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("only get and list are served"), "{out}");
    let (code, out) = kubectl_via(
        &sandbox,
        &kubeconfig,
        &["delete", "configmap", "mine", "-n", "team"],
    )
    .await;
    assert_ne!(code, 0, "{out}");
    let (code, out) = kubectl_via(
        &sandbox,
        &kubeconfig,
        &["get", "configmaps", "-n", "team", "--watch-only"],
    )
    .await;
    assert_ne!(code, 0, "{out}");
    for path in [
        "/api/v1/namespaces/team/pods/web/log",
        "/api/v1/nodes/one/proxy",
        "/metrics",
    ] {
        let (code, out) = kubectl_via(&sandbox, &kubeconfig, &["get", "--raw", path]).await;
        assert_ne!(code, 0, "{path}: {out}");
        assert!(
            out.contains("NotFound") || out.contains("not found"),
            "{path}: {out}"
        );
    }
    // Every request that reached the API server went as the ServiceAccount, and read.
    let audit = sandbox.sandbox.audit();
    let through: Vec<_> = audit[before..].iter().collect();
    assert!(
        through
            .iter()
            .any(|r| r.path.ends_with("/namespaces/team/configmaps/mine")),
        "{through:?}"
    );
    assert!(
        through
            .iter()
            .all(|r| r.user == "system:serviceaccount:team:deployer"
                && (r.verb == "get" || r.verb == "list")),
        "only reads, as the ServiceAccount: {through:?}"
    );
    let mine = sandbox
        .kubectl(&["get", "configmap", "-n", "team", "-o", "name"])
        .await
        .ok()
        .stdout;
    assert_eq!(
        mine.trim(),
        "configmap/mine",
        "nothing was written or deleted"
    );

    // Without the render's token, or with another: refused.
    let port = text
        .split("https://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the endpoint's port")
        .to_string();
    let url = format!("https://127.0.0.1:{port}/api/v1/namespaces/team/configmaps");
    let client = http_client(&text);
    let anonymous = client.get(&url).send().await.expect("the endpoint answers");
    assert_eq!(anonymous.status(), reqwest::StatusCode::UNAUTHORIZED);
    let guessed = client
        .get(&url)
        .bearer_auth(sandbox.sandbox.token())
        .send()
        .await
        .expect("answers");
    assert_eq!(guessed.status(), reqwest::StatusCode::UNAUTHORIZED);

    // The endpoint and its kubeconfig end with the render.
    drop(endpoint);
    assert!(!kubeconfig.exists(), "the kubeconfig is removed");
}

/// Chart `grafana` 1.0.0, the shape of grafana's own: its admin password is random
/// unless `lookup` finds the Secret it made before, and the workload carries a
/// checksum of that Secret; with `steal` it renders another namespace's Secret into
/// a ConfigMap.
fn grafana_chart(root: &Path) -> PathBuf {
    crate::charts_source::write_chart(
        root.join("grafana"),
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: grafana\nversion: 1.0.0\n",
            ),
            ("values.yaml", "steal: false\n"),
            (
                "templates/secret.yaml",
                "{{- $secret := (lookup \"v1\" \"Secret\" .Release.Namespace (printf \"%s-admin\" .Release.Name)) | default dict }}\n\
             {{- $data := (get $secret \"data\") | default dict }}\n\
             {{- $password := (get $data \"admin-password\") | default (randAlphaNum 40 | b64enc) }}\n\
             apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-admin\ntype: Opaque\ndata:\n\
             \x20 admin-password: {{ $password | quote }}\n",
            ),
            (
                "templates/deployment.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: 1\n\
             \x20 selector: {matchLabels: {app: grafana}}\n  template:\n    metadata:\n      labels: {app: grafana}\n\
             \x20     annotations:\n        checksum/secret: {{ include (print $.Template.BasePath \"/secret.yaml\") . | sha256sum }}\n\
             \x20   spec:\n      containers:\n      - name: grafana\n        image: grafana/grafana:11.0.0\n",
            ),
            (
                "templates/stolen.yaml",
                "{{- if .Values.steal }}\n{{- $s := lookup \"v1\" \"Secret\" \"other\" \"stolen\" }}\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-stolen\n\
             data:\n  found: {{ $s | toJson | quote }}\n{{- end }}\n",
            ),
        ],
    )
}

async fn admin_password(sandbox: &TestSandbox, namespace: &str) -> String {
    let path = "jsonpath={.data.admin-password}";
    let get = [
        "get",
        "secret",
        "grafana-admin",
        "-n",
        namespace,
        "-o",
        path,
    ];
    sandbox.kubectl(&get).await.ok().stdout
}

/// The drifted changes of a diff report, as `Kind/name path`.
fn changes(report: &serde_json::Value) -> Vec<String> {
    let resources = report["resources"].as_array().cloned().unwrap_or_default();
    resources
        .iter()
        .filter(|r| r["status"] != "InSync")
        .flat_map(|r| {
            let object = format!(
                "{}/{}",
                r["kind"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or("")
            );
            let paths: Vec<String> = r["changes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["path"].as_str().unwrap_or("").to_string())
                .collect();
            if paths.is_empty() {
                vec![format!("{object} {}", r["status"])]
            } else {
                paths.into_iter().map(|p| format!("{object} {p}")).collect()
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grafanas_password_is_found_by_lookup_so_renders_after_a_sync_do_not_drift() {
    let sandbox = app_sandbox(&["web", "cli", "team", "other", "tether-system"]).await;
    sandbox.kubectl_apply(NO_SECRETS_RBAC).await;
    sandbox
        .kubectl_apply(&secret("stolen", "other", STOLEN))
        .await;
    let root = sandbox.dir.path();
    let repo = HelmRepo::start(root.join("repo")).await;
    let chart = grafana_chart(&root.join("build"));
    repo.publish(&chart);
    let apps = format!(
        "- name: grafana\n  source: {{repo: \"{}\", chart: grafana, version: \"1.0.0\", interval: 1h}}\n  destination: {{namespace: web}}\n  sync: {{automated: true}}\n",
        repo.url
    );
    let server = server_section(root);
    let config = format!(
        "resyncInterval: 1s\n{server}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps:\n{apps}"
    );
    let serve = serve_with_helm(&sandbox, "chart-lookup", &config).await;
    let synced = serve
        .wait_status("grafana", "grafana's first pass", |s| {
            s["sync"] == "Synced" || s["lastPass"]["error"].is_string()
        })
        .await;
    assert_eq!(synced["sync"], "Synced", "{synced}");
    let password = admin_password(&sandbox, "web").await;
    assert_eq!(
        password.len(),
        56,
        "a random 40-character password: {password}"
    );

    // A diff right after renders anew: lookup finds the Secret, so its password is
    // the live one. (At the first install the chart rolled its password twice, once
    // for the Secret and once for the checksum, as under `helm install`: that
    // checksum is all that differs, once.)
    let helm = crate::chart::helm();
    let bin = helm.parent().expect("helm's folder");
    let env_path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("PATH", env_path)];
    let config_file = sandbox.write_file("lookup-diff.yaml", &format!("apps:\n{apps}"));
    let diff = tether_with_env(
        &sandbox,
        "diff",
        &["--config", &config_file, "-o", "json"],
        &env,
    )
    .await;
    assert!(diff.code == Some(0) || diff.code == Some(1), "{diff:?}");
    let report: serde_json::Value = serde_json::from_str(&diff.stdout).expect("JSON");
    let drift = changes(&report["apps"][0]);
    assert!(
        drift
            .iter()
            .all(|c| c.starts_with("Deployment/grafana ") && c.contains("checksum/secret")),
        "the Secret is in sync: {drift:?}"
    );
    assert!(!diff.stdout.contains(&password), "Secret data is masked");
    assert_eq!(
        admin_password(&sandbox, "web").await,
        password,
        "a diff writes nothing"
    );

    // The CLI's own renders look up too: a sync, a second sync (the checksum settles),
    // then no drift at all, and the password made at the first sync kept throughout.
    let local = chart.to_string_lossy().into_owned();
    let helm = helm.to_string_lossy().into_owned();
    let common = [
        "--path",
        local.as_str(),
        "--app",
        "grafana-cli",
        "--release",
        "grafana",
        "--namespace",
        "cli",
        "--helm",
        helm.as_str(),
    ];
    let first = tether_with_env(&sandbox, "sync", &common, &env).await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let made = admin_password(&sandbox, "cli").await;
    let second = tether_with_env(&sandbox, "sync", &common, &env).await;
    assert_eq!(second.code, Some(0), "{second:?}");
    let mut json_args = common.to_vec();
    json_args.extend(["-o", "json"]);
    let clean = tether_with_env(&sandbox, "diff", &json_args, &env).await;
    assert_eq!(
        clean.code,
        Some(0),
        "no drift: {:?}",
        changes(&serde_json::from_str(&clean.stdout).unwrap_or_default())
    );
    assert_eq!(
        admin_password(&sandbox, "cli").await,
        made,
        "the password stays"
    );

    // Offline (a snapshot instead of a cluster), lookups answer nothing, and it says so.
    let live = sandbox
        .kubectl(&["get", "secret,deployment", "-n", "cli", "-o", "yaml"])
        .await
        .ok()
        .stdout;
    let snapshot = sandbox.write_file("live.yaml", &live);
    let offline = std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["diff", "--live", snapshot.as_str()])
        .args(common)
        .output()
        .expect("tether runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&offline.stdout),
        String::from_utf8_lossy(&offline.stderr),
    );
    assert!(
        stderr.contains("calls lookup") && stderr.contains("answered nothing"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(&made) && !stdout.contains(&made),
        "Secret data is masked"
    );

    // A tenant App whose ServiceAccount may not read Secrets: its lookup is refused,
    // the pass stops, nothing of another namespace's Secret anywhere.
    let spec = format!(
        "  serviceAccountName: deployer\n  source:\n    repo: \"{}\"\n    chart: grafana\n    version: \"1.0.0\"\n    interval: 1h\n    helm:\n      values: {{steal: true}}\n  destination: {{namespace: team}}\n  sync: {{automated: true}}\n",
        repo.url
    );
    apply_app(&sandbox, "thief", "team", &spec).await;
    let refused = serve
        .wait_status("team.thief", "the thief's pass", |s| {
            s["sync"] == "Synced" || s["lastPass"]["error"].is_string()
        })
        .await
        .to_string();
    assert!(refused.contains("forbidden"), "{refused}");
    let applied = sandbox
        .kubectl(&["get", "configmaps,deployments", "-n", "team", "-o", "name"])
        .await
        .ok()
        .stdout;
    assert!(
        !applied.contains("stolen") && !applied.contains("deployment"),
        "nothing of the thief's chart is applied: {applied}"
    );
    let log = serve.log();
    for text in [&refused, &log] {
        assert!(
            !text.contains(STOLEN) && !text.contains("YW4wdGhlci"),
            "the Secret's data leaked"
        );
        assert!(!text.contains(&password), "grafana's password leaked");
    }
}
