//! Chart sources behind a CA of their own and mutual TLS (issue #26): a Helm
//! repository served over HTTPS by Python's `ssl`, and the distribution registry with
//! `http.tls.clientcas`, both asking for a client certificate signed by a CA the test
//! made. An App whose Secret carries Flux's `ca.crt`, `tls.crt` and `tls.key` syncs
//! from both, and a chart whose dependency is on the same repository fetches it with
//! them; the same chart without the Secret fails (the CA is trusted for that
//! source only, not by the process); a Secret without the client certificate is
//! turned away by the server; a Secret whose CA is no PEM is refused naming the Secret
//! and the key. Nothing of a failed source is applied, and no key reaches the log.

use crate::app_crd::{app_sandbox, apply_app};
use crate::charts_deps::{run_helm, tar_chart};
use crate::charts_oci::OciRegistry;
use crate::charts_source::{chart, serve_with_helm};
use crate::serve::server_section;
use crate::support::TestSandbox;
use tether_testkit::tls::{HttpsDir, TestPki};

const NAMESPACE: &str = "secure";

/// An App's spec: chart `web` of `repo` at `version`, with Secret `secret` if any.
fn spec(repo: &str, version: &str, release: &str, secret: Option<&str>) -> String {
    // `stack-…` Apps take chart `stack`, the others `web`.
    let chart = release
        .split('-')
        .next()
        .filter(|c| *c == "stack")
        .unwrap_or("web");
    let credentials = secret
        .map(|s| format!(", credentials: {{secretRef: {{name: {s}}}}}"))
        .unwrap_or_default();
    format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{repo}\", chart: {chart}, version: \"{version}\", interval: 200ms{credentials}, helm: {{releaseName: {release}}}}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true}}\n"
    )
}

async fn exists(sandbox: &TestSandbox, name: &str) -> bool {
    crate::app_crd::exists(sandbox, "cm", name, NAMESPACE).await
}

#[tokio::test]
async fn chart_sources_behind_their_own_ca_and_mutual_tls_sync_with_fluxs_tls_keys() {
    let sandbox = app_sandbox(&[NAMESPACE, "team"]).await;
    sandbox.trusted_service_account("team", "deployer").await;
    let root = sandbox.dir.path();
    let build = root.join("build");
    let pki = TestPki::generate(&root.join("pki"));

    let folder = root.join("https-repo");
    std::fs::create_dir_all(&folder).expect("mkdir");
    let web = chart(&build, "web", "1.0.0");
    let (web, folder_str) = (
        web.to_str().expect("utf-8"),
        folder.to_str().expect("utf-8"),
    );
    run_helm(&["package", web, "-d", folder_str]);
    run_helm(&["repo", "index", folder_str]);
    let https = HttpsDir::start(&folder, &pki);
    // A chart of the same repository depending on `web` there, not vendored: its
    // dependency is fetched with the source's CA and client certificate.
    let stack = build.join("stack-src/stack");
    std::fs::create_dir_all(&stack).expect("mkdir");
    std::fs::write(
        stack.join("Chart.yaml"),
        format!(
            "apiVersion: v2\nname: stack\nversion: 0.1.0\ndependencies:\n- {{name: web, version: \"~1.0\", repository: \"{}\"}}\n",
            https.url
        ),
    )
    .expect("write");
    tar_chart(&stack, "0.1.0", &folder);
    run_helm(&["repo", "index", folder_str]);
    let registry = OciRegistry::start(&root.join("registry")).await;
    registry.push(&chart(&build, "web", "2.0.0"), &build);
    let mtls_registry = registry
        .start_tls_twin(&root.join("registry-tls"), &pki)
        .await;

    let file = |key: &str, path: &std::path::Path| format!("--from-file={key}={}", path.display());
    let secrets: [(&str, Vec<String>); 3] = [
        (
            "mtls",
            vec![
                file("ca.crt", &pki.ca),
                file("tls.crt", &pki.client_cert),
                file("tls.key", &pki.client_key),
            ],
        ),
        ("ca-only", vec![file("ca.crt", &pki.ca)]),
        (
            "bad-ca",
            vec!["--from-literal=ca.crt=not-a-certificate".to_string()],
        ),
    ];
    for (name, keys) in &secrets {
        let mut args = vec!["create", "secret", "generic", name, "-n", "team"];
        args.extend(keys.iter().map(String::as_str));
        sandbox.kubectl(&args).await.ok();
    }

    let config = format!(
        "sources: {{minInterval: 100ms}}\n{}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps: []\n",
        server_section(root)
    );
    let serve = serve_with_helm(&sandbox, "chart-tls", &config).await;
    let oci = mtls_registry.url();
    let apps = [
        ("helm-mtls", https.url.as_str(), "~1.0", Some("mtls")),
        ("oci-mtls", oci.as_str(), "~2.0", Some("mtls")),
        ("stack-mtls", https.url.as_str(), "0.1.0", Some("mtls")),
        ("untrusted", https.url.as_str(), "~1.0", None),
        (
            "no-client-cert",
            https.url.as_str(),
            "~1.0",
            Some("ca-only"),
        ),
        ("bad-ca", https.url.as_str(), "~1.0", Some("bad-ca")),
    ];
    for (name, repo, version, secret) in apps {
        apply_app(&sandbox, name, "team", &spec(repo, version, name, secret)).await;
    }

    for (app, revision, object) in [
        ("helm-mtls", "web@1.0.0@sha256:", "helm-mtls-1-0-0"),
        ("oci-mtls", "web@2.0.0@sha256:", "oci-mtls-2-0-0"),
        // web 1.0.0 rendered as the dependency of the stack release.
        ("stack-mtls", "stack@0.1.0@sha256:", "stack-mtls-1-0-0"),
    ] {
        serve
            .wait_synced_from(&format!("team.{app}"), revision)
            .await;
        assert!(exists(&sandbox, object).await, "{object} applied");
    }

    // Each refusal says why: the server's CA unknown without the Secret, the client
    // certificate missing with a CA alone.
    for (app, why) in [
        ("untrusted", "invalid peer certificate: UnknownIssuer"),
        ("no-client-cert", "CertificateRequired"),
    ] {
        let failed = serve.wait_source_failed(&format!("team.{app}")).await;
        assert!(
            failed["source"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&https.url) && m.contains(why)),
            "{failed}"
        );
    }
    let bad = serve.wait_source_failed("team.bad-ca").await;
    assert!(
        bad["source"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Secret team/bad-ca: key ca.crt holds no PEM certificate")),
        "{bad}"
    );
    for app in ["untrusted", "no-client-cert", "bad-ca"] {
        assert!(
            !exists(&sandbox, &format!("{app}-1-0-0")).await,
            "nothing of {app} applied"
        );
    }

    let key = std::fs::read_to_string(&pki.client_key).expect("the key");
    let body = key.lines().nth(1).expect("a PEM body line");
    let log = serve.log();
    assert!(!log.contains(body) && !log.contains("PRIVATE KEY"));
    assert_eq!(serve.stop().await, Some(0));
}
