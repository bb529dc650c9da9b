//! How the chart exposes and feeds tether: Secrets mounted from existing Secrets and
//! never inlined, the ServiceMonitor once its CRD exists, an Ingress for the webhook
//! paths only.

use super::*;

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
        .apply_crd(
            crd.to_str().expect("utf-8"),
            "servicemonitors.monitoring.coreos.com",
        )
        .await;
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
