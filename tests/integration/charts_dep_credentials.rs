//! Credentials for chart dependencies on other hosts (issue #26): an umbrella chart in
//! Git (no `charts/`) depending on a chart of a Helm repository behind basic
//! authentication, one of an htpasswd `docker-registry` and one of a public Helm
//! repository, each on its own host. `source.dependencyCredentials` names a Secret per
//! repository URL prefix (and a dockerconfigjson serving its registries), as an App
//! object and in the configuration file; `tether serve` syncs both. Without the
//! credentials the pass fails naming the dependency, its repository and the 401,
//! and applies nothing; the public repository never sees a login, the private one
//! only its own; no password reaches the log or a status.

use crate::app_crd::{apply_app, exists};
use crate::charts_deps::HelmRepo;
use crate::charts_oci::{OciRegistry, USER, base64_login, oci_sandbox};
use crate::charts_source::{chart, serve_with_helm};
use crate::serve::{origin_http, server_section};
use crate::support::TestSandbox;

const HELM_PASSWORD: &str = "helm-Pa55word-of-repository-a";
const REGISTRY_PASSWORD: &str = "registry-Pa55word-of-host-b";

/// The umbrella chart: `web` 1.0.0 of the private Helm repository, `api` 2.0.0 of the
/// registry, `extra` 3.0.0 of the public repository (each renders ConfigMap
/// `<release>-<version>`).
fn umbrella(private: &str, registry: &str, public: &str) -> String {
    format!(
        "apiVersion: v2\nname: stack\nversion: 0.1.0\ndependencies:\n\
         - {{name: web, version: 1.0.0, repository: \"{private}\"}}\n\
         - {{name: api, version: \"~2.0\", repository: \"{registry}\"}}\n\
         - {{name: extra, version: 3.0.0, repository: \"{public}\"}}\n"
    )
}

/// An App's `spec` for the umbrella of `repo`, released as `release`, with
/// `credentials` (YAML flow) as its `dependencyCredentials`, if any.
fn spec(repo: &str, release: &str, credentials: Option<&str>) -> String {
    let credentials = credentials
        .map(|c| format!(", dependencyCredentials: {c}"))
        .unwrap_or_default();
    format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{repo}\", path: stack, interval: 200ms{credentials}, helm: {{releaseName: {release}}}}}\n  destination: {{namespace: oci}}\n  sync: {{automated: true}}\n"
    )
}

async fn secrets(sandbox: &TestSandbox, registry: &OciRegistry) {
    let password = format!("--from-literal=password={HELM_PASSWORD}");
    let user = format!("--from-literal=username={USER}");
    let create = [
        "create", "secret", "generic", "charts-a", "-n", "team", &user, &password,
    ];
    sandbox.kubectl(&create).await.ok();
    let server = format!("--docker-server={}", registry.host());
    let user = format!("--docker-username={USER}");
    let password = format!("--docker-password={REGISTRY_PASSWORD}");
    let create = [
        "create",
        "secret",
        "docker-registry",
        "regcred",
        "-n",
        "team",
        &server,
        &user,
        &password,
    ];
    sandbox.kubectl(&create).await.ok();
}

#[tokio::test]
async fn a_git_umbrellas_dependencies_on_other_hosts_take_their_own_credentials_only() {
    let sandbox = oci_sandbox().await;
    let root = sandbox.dir.path();
    let build = root.join("build");
    let private_login = format!("Basic {}", base64_login(USER, HELM_PASSWORD));
    let private = HelmRepo::start_with_login(root.join("private"), private_login.clone()).await;
    private.publish(&chart(&build, "web", "1.0.0"));
    let public = HelmRepo::start(root.join("public")).await;
    public.publish(&chart(&build, "extra", "3.0.0"));
    let registry = OciRegistry::start_with_login(&root.join("registry"), REGISTRY_PASSWORD).await;
    registry.push_as(&chart(&build, "api", "2.0.0"), &build, REGISTRY_PASSWORD);
    secrets(&sandbox, &registry).await;
    let git = origin_http(
        &sandbox,
        &[(
            "stack/Chart.yaml",
            &umbrella(&private.url, &registry.url(), &public.url),
        )],
    );

    // The configuration file's app names the Secrets' namespace; an App's are its own.
    let file_credentials = format!(
        "[{{url: \"{}/\", secretRef: {{name: charts-a, namespace: team}}}}, {{secretRef: {{name: regcred, namespace: team}}}}]",
        private.url
    );
    let config = format!(
        "sources: {{minInterval: 100ms}}\n{}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps:\n\
         - name: filestack\n  source: {{repo: \"{}\", path: stack, interval: 200ms, dependencyCredentials: {file_credentials}, helm: {{releaseName: filestack}}}}\n  destination: {{namespace: oci}}\n  sync: {{automated: true}}\n",
        server_section(root),
        git.url,
    );
    let serve = serve_with_helm(&sandbox, "chart-dep-credentials", &config).await;
    let credentials = format!(
        "[{{url: \"{}\", secretRef: {{name: charts-a}}}}, {{secretRef: {{name: regcred}}}}]",
        private.url
    );
    for (name, credentials) in [("stack", Some(credentials.as_str())), ("bare", None)] {
        apply_app(&sandbox, name, "team", &spec(&git.url, name, credentials)).await;
    }

    for (app, release) in [("filestack", "filestack"), ("team.stack", "stack")] {
        serve
            .wait_status(
                app,
                "the umbrella with its dependencies' logins syncs",
                |s| s["sync"] == "Synced",
            )
            .await;
        for version in ["1-0-0", "2-0-0", "3-0-0"] {
            let name = format!("{release}-{version}");
            assert!(exists(&sandbox, "cm", &name, "oci").await, "{name}");
        }
    }

    // No credentials for the private repository: named, with the status, nothing applied.
    let bare = serve
        .wait_status("team.bare", "the umbrella without credentials fails", |s| {
            s["lastPass"]["error"].is_string()
        })
        .await;
    let error = bare["lastPass"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("stack: dependency web: ")
            && error.contains(&format!("{}: index.yaml: HTTP 401", private.url))
            && error.contains("no source.dependencyCredentials entry matches"),
        "{bare}"
    );
    assert_ne!(bare["sync"], "Synced", "{bare}");
    for version in ["1-0-0", "2-0-0", "3-0-0"] {
        assert!(
            !exists(&sandbox, "cm", &format!("bare-{version}"), "oci").await,
            "nothing of a failed render is applied"
        );
    }

    // Each host saw only its own login: the public repository none at all.
    assert_eq!(public.authorizations(), Vec::<String>::new());
    let seen = private.authorizations();
    assert!(
        !seen.is_empty() && seen.iter().all(|h| *h == private_login),
        "{seen:?}"
    );
    let log = serve.log();
    for password in [HELM_PASSWORD, REGISTRY_PASSWORD] {
        assert!(!log.contains(password) && !bare.to_string().contains(password));
    }
    assert_eq!(serve.stop().await, Some(0));
}
