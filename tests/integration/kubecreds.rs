//! The CLI's sessions (issue #30): `tether status|rollback --server URL` without a
//! token file send the user's own kubeconfig credentials, as kubectl would send them
//! to the API server (an inline token, a token file, an exec plugin's ExecCredential
//! of client.authentication.k8s.io v1 and v1beta1), against the sandbox's
//! TokenRequest-made ServiceAccount tokens, real `kubectl` and `tether serve` as a
//! process: each user sees and changes what RBAC lets them. A client certificate
//! cannot be forwarded and says so; a token the cluster did not issue is a 401 whose
//! message names where it came from, never the token.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use tether_testkit::assert_contains;

use serde_json::Value;

use crate::people::{RBAC, action_notes, team_apps, team_origin, teams, token};
use crate::serve::{Origin, Serve, server_section_with_token, tether_client};
use crate::support::{TestSandbox, eventually};

const API_TOKEN: &str = "operator-break-glass";
const OPERATOR: &str = "system:serviceaccount:team-a:operator";

/// A kubeconfig at `dir/name` whose one context `me` (current) has `user` (YAML
/// under `user:`, indented by four) on a cluster at `server`.
fn kubeconfig(dir: &Path, name: &str, server: &str, user: &str) -> PathBuf {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: me\n  context: {{cluster: c, user: u}}\ncurrent-context: me\n"
    );
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the kubeconfig");
    path
}

/// An exec plugin: a shell script printing an ExecCredential of `api_version` with
/// `token`, valid for an hour.
fn exec_user(dir: &Path, name: &str, api_version: &str, token: &str) -> String {
    let script = dir.join(name);
    let credential = format!(
        "{{\"apiVersion\":\"client.authentication.k8s.io/{api_version}\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\",\"expirationTimestamp\":\"2099-01-01T00:00:00Z\"}}}}"
    );
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat <<'EOF'\n{credential}\nEOF\n"),
    )
    .expect("write the plugin");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/{api_version}\n      command: {}\n      interactiveMode: Never\n",
        script.display()
    )
}

/// `tether ARGS --server URL --kubeconfig FILE`, with no token in the environment;
/// its exit code and what it printed (stdout, then stderr).
async fn cli(serve_url: &str, kubeconfig: &Path, args: &[&str]) -> (Option<i32>, String) {
    tether_client(serve_url, args, ("--kubeconfig", kubeconfig)).await
}

/// The names of the apps `tether status -o json` lists with this kubeconfig.
async fn listed(serve_url: &str, kubeconfig: &Path) -> Vec<String> {
    let (code, out) = cli(serve_url, kubeconfig, &["status", "-o", "json"]).await;
    assert!(matches!(code, Some(0 | 1)), "{out}");
    let list: Value = serde_json::from_str(&out).expect("status -o json");
    let mut names: Vec<String> = list["apps"]
        .as_array()
        .expect("apps")
        .iter()
        .filter_map(|app| app["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// tether serve (with an operator's API token) following team-a/web and team-b/api.
/// tether serve with team-a's apps, and their Git server: the caller keeps it, so that
/// it serves for as long as the test runs (dropping it stops it).
async fn start(sandbox: &TestSandbox) -> (Serve, Origin) {
    teams(sandbox, RBAC).await;
    let origin = team_origin(sandbox, &[]);
    let server = server_section_with_token(sandbox.dir.path(), API_TOKEN);
    let config = format!("{server}apps: []\n");
    let serve = Serve::start(sandbox, "kubecreds", &config, &[]).await;
    team_apps(sandbox, &origin.url).await;
    (serve, origin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_acts_with_the_kubeconfig_users_token_as_rbac_allows() {
    let sandbox = TestSandbox::start().await;
    let (serve, _origin) = start(&sandbox).await;
    let dir = sandbox.dir.path();
    let cluster = sandbox.url().to_string();
    let viewer = token(&sandbox, "viewer").await;
    let operator = token(&sandbox, "operator").await;
    let nobody = token(&sandbox, "nobody").await;
    // The viewer's token inline, the operator's from an exec plugin (v1), nobody's
    // from a token file; the viewer again through a v1beta1 plugin.
    let viewer_config = kubeconfig(dir, "viewer", &cluster, &format!("    token: {viewer}"));
    let operator_config = kubeconfig(
        dir,
        "operator",
        &cluster,
        &exec_user(dir, "operator-plugin", "v1", &operator),
    );
    let nobody_file = dir.join("nobody-token");
    std::fs::write(&nobody_file, &nobody).expect("write the token");
    let nobody_config = kubeconfig(
        dir,
        "nobody",
        &cluster,
        &format!("    tokenFile: {}", nobody_file.display()),
    );
    let viewer_beta = kubeconfig(
        dir,
        "viewer-beta",
        &cluster,
        &exec_user(dir, "viewer-plugin", "v1beta1", &viewer),
    );

    // Each sees only the apps RBAC lets them get (once both apps run).
    let team_a = vec!["team-a.web".to_string()];
    eventually("the viewer sees team-a's app", || async {
        (listed(&serve.url, &viewer_config).await == team_a).then_some(())
    })
    .await;
    assert_eq!(listed(&serve.url, &operator_config).await, team_a);
    assert_eq!(listed(&serve.url, &viewer_beta).await, team_a);
    assert_eq!(
        listed(&serve.url, &nobody_config).await,
        Vec::<String>::new()
    );

    // The revision to roll back to, as the operator's status shows it.
    let (_, out) = eventually("the app is applied", || async {
        let (code, out) = cli(
            &serve.url,
            &operator_config,
            &["status", "--app", "team-a.web", "-o", "json"],
        )
        .await;
        let status: Value = serde_json::from_str(&out).ok()?;
        status["appliedRevisions"][0]["sha"].as_str()?;
        Some((code, out))
    })
    .await;
    let status: Value = serde_json::from_str(&out).expect("json");
    let sha = status["appliedRevisions"][0]["sha"]
        .as_str()
        .expect("a sha")
        .to_string();

    // The viewer may not roll back: the server says what is missing.
    let rollback = ["rollback", "team-a.web", sha.as_str(), "--reason", "test"];
    let (code, out) = cli(&serve.url, &viewer_config, &rollback).await;
    assert_eq!(code, Some(2), "{out}");
    assert_contains(&out, "needs patch on apps.tether.dev in team-a");
    // The operator, through the exec plugin, may; the Event names them.
    let (code, out) = cli(&serve.url, &operator_config, &rollback).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        action_notes(&sandbox, 1).await,
        [format!("roll back by {OPERATOR} through tether's API")]
    );

    // A token the cluster never issued: a 401 that names the context, not the token.
    let forged = "forged-token-nobody-issued";
    let forged_config = kubeconfig(dir, "forged", &cluster, &format!("    token: {forged}"));
    let (code, out) = cli(&serve.url, &forged_config, &["status"]).await;
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("401 Unauthorized"), "{out}");
    assert_contains(
        &out,
        "did not accept the token of kubeconfig context \"me\"",
    );
    assert!(!out.contains(forged), "the token was printed: {out}");

    let log = serve.log();
    for secret in [&viewer, &operator, &nobody] {
        let at = log.find(secret.as_str());
        assert!(
            at.is_none(),
            "a token was logged: {}",
            &log[at.unwrap_or(0).saturating_sub(300)..]
        );
    }
}

/// A context with only a client certificate cannot be forwarded: the CLI says what to
/// use instead and sends nothing (no server listens at the URL).
#[tokio::test]
async fn a_client_certificate_only_context_is_refused_with_what_to_use() {
    let dir = tempfile::tempdir().expect("a directory");
    let pem = |kind: &str| {
        let text = format!("-----BEGIN {kind}-----\nMIIB\n-----END {kind}-----\n");
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text)
    };
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}",
        pem("CERTIFICATE"),
        pem("PRIVATE KEY")
    );
    let config = kubeconfig(dir.path(), "cert", "https://127.0.0.1:1", &user);
    let (code, out) = cli("http://127.0.0.1:1", &config, &["status"]).await;
    assert_eq!(code, Some(2), "{out}");
    assert_contains(
        &out,
        "kubeconfig context \"me\" authenticates with a client certificate only, which cannot be forwarded to tether serve",
    );
    assert!(out.contains("kubectl create token"), "{out}");
    assert!(!out.contains("could not connect"), "{out}");
}
