//! Charts from an OCI registry (issue #26), served by the CNCF distribution registry
//! (Debian's `docker-registry`) on loopback, pushed there by Helm's own SDK, synced by
//! `tether serve` against the sandbox: a range resolved from the tags and followed at
//! the next poll, the revision naming the manifest's digest; a Git chart whose
//! dependency is an `oci://` chart; an App object pinned by digest; an unknown
//! version naming the tags that exist; a chart layer whose bytes are not its digest's,
//! refused with nothing applied; a steady state that lists tags and fetches no blob.
//! Behind htpasswd, an App's `kubectl create secret docker-registry` Secret lets it in
//! (also for a dependency on the same registry) and a stale one fails as
//! `AuthenticationFailed`, naming the registry and never the password; a Helm repository behind basic authentication takes Flux's keys, and a
//! Secret whose CA is no PEM is refused by its key.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::app_crd::{app_sandbox, apply_app, exists, wait_app_synced};
use crate::charts_deps::{HelmRepo, run_helm, tar_chart};
use crate::charts_source::{chart, serve_with_helm};
use crate::serve::{cm_value, origin, server_section};
use crate::support::{TestSandbox, eventually, run_ok};
use tether_testkit::tls::TestPki;

/// The registry's accept header for a Helm chart's manifest.
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// A distribution registry on loopback, storing in a folder of the test, its access
/// log in a file; stopped (by its PID) when dropped.
pub(crate) struct OciRegistry {
    child: Child,
    /// `127.0.0.1:PORT`.
    host: String,
    storage: PathBuf,
    log: PathBuf,
}

impl Drop for OciRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The user the htpasswd registry knows.
pub(crate) const USER: &str = "robot";

impl OciRegistry {
    /// An anonymous registry.
    pub(crate) async fn start(dir: &Path) -> OciRegistry {
        OciRegistry::spawn(dir, "", dir.join("storage"), "").await
    }

    /// A registry that lets in only [`USER`] with `password` (htpasswd, bcrypt), as
    /// `docker-registry`'s own htpasswd authentication does.
    pub(crate) async fn start_with_login(dir: &Path, password: &str) -> OciRegistry {
        std::fs::create_dir_all(dir).expect("mkdir");
        let htpasswd = dir.join("htpasswd");
        // bcrypt from the system's libcrypt (Python's crypt module).
        let out = run_ok(Command::new("python3")
            .args(["-W", "ignore", "-c"])
            .arg("import crypt, sys; print(sys.argv[1] + ':' + crypt.crypt(sys.argv[2], crypt.mksalt(crypt.METHOD_BLOWFISH)))")
            .args([USER, password]));
        std::fs::write(&htpasswd, &out.stdout).expect("write htpasswd");
        let auth = format!(
            "auth:\n  htpasswd: {{realm: tether-test, path: {}}}\n",
            htpasswd.display()
        );
        OciRegistry::spawn(dir, &auth, dir.join("storage"), "").await
    }

    /// A second registry serving what `self` stores, over TLS with `pki`'s serving
    /// certificate, asking every client for a certificate of its CA
    /// (`http.tls.clientcas`): pushed to over plain HTTP, pulled from over mutual TLS.
    pub(crate) async fn start_tls_twin(&self, dir: &Path, pki: &TestPki) -> OciRegistry {
        let tls = format!(
            "  tls: {{certificate: {}, key: {}, clientcas: [{}]}}\n",
            pki.server_cert.display(),
            pki.server_key.display(),
            pki.ca.display()
        );
        OciRegistry::spawn(dir, "", self.storage.clone(), &tls).await
    }

    async fn spawn(dir: &Path, auth: &str, storage: PathBuf, tls: &str) -> OciRegistry {
        std::fs::create_dir_all(dir).expect("mkdir");
        let host = format!("127.0.0.1:{}", tether_testkit::free_port());
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: info}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n{auth}http:\n  addr: {host}\n  secret: tether-test\n{tls}",
                storage.display()
            ),
        )
        .expect("write config.yml");
        let log = dir.join("registry.log");
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .expect("docker-registry runs (apt-get install docker-registry; .ci/run does)");
        let registry = OciRegistry {
            child,
            host,
            storage,
            log,
        };
        let ping = format!("http://{}/v2/", registry.host);
        eventually("the registry answers", || async {
            if !tls.is_empty() {
                // It asks for a client certificate: a listening port is enough.
                return tokio::net::TcpStream::connect(&registry.host)
                    .await
                    .ok()
                    .map(drop);
            }
            let answer = reqwest::get(&ping).await.ok()?;
            (answer.status().is_success() || answer.status() == 401).then_some(())
        })
        .await;
        registry
    }

    /// `127.0.0.1:PORT`, where the registry listens (plain HTTP).
    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    /// The `oci://` URL of the registry's `charts` path.
    pub(crate) fn url(&self) -> String {
        format!("oci://{}/charts", self.host)
    }

    /// Packages the chart folder `chart` and pushes it, both with Helm's own SDK.
    pub(crate) fn push(&self, chart: &Path, build: &Path) {
        let archive = self.package(chart, build);
        run_helm(&["push", path(&archive), &self.url(), "--plain-http"]);
    }

    /// [`OciRegistry::push`], logged in as [`USER`] with `password` (on stdin).
    pub(crate) fn push_as(&self, chart: &Path, build: &Path, password: &str) {
        self.push_archive_as(&self.package(chart, build), password);
    }

    /// Pushes the chart archive `archive` with Helm's SDK, logged in as [`USER`].
    pub(crate) fn push_archive_as(&self, archive: &Path, password: &str) {
        let mut child = Command::new(crate::chart::helm())
            .args(["push", path(archive), &self.url(), "--plain-http"])
            .args(["--username", USER, "--password-stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("helm runs");
        std::io::Write::write_all(
            child.stdin.as_mut().expect("stdin"),
            format!("{password}\n").as_bytes(),
        )
        .expect("write the password");
        let out = child.wait_with_output().expect("helm ends");
        assert!(
            out.status.success(),
            "helm push: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The chart folder `chart` packaged by Helm's SDK: the archive's path.
    fn package(&self, chart: &Path, build: &Path) -> PathBuf {
        let name = chart.file_name().and_then(|n| n.to_str()).expect("a name");
        let out = build.join(format!("pushed-{name}"));
        std::fs::create_dir_all(&out).expect("mkdir");
        for entry in std::fs::read_dir(&out).expect("read_dir") {
            std::fs::remove_file(entry.expect("entry").path()).expect("rm");
        }
        run_helm(&["package", path(chart), "-d", path(&out)]);
        std::fs::read_dir(&out)
            .expect("read_dir")
            .next()
            .expect("an archive")
            .expect("entry")
            .path()
    }

    /// The manifest of `chart:tag`, and its digest as the registry names it.
    pub(crate) async fn manifest(&self, chart: &str, tag: &str) -> (serde_json::Value, String) {
        self.manifest_as(chart, tag, None).await
    }

    /// [`OciRegistry::manifest`], as [`USER`] with `password` when one is given.
    async fn manifest_as(
        &self,
        chart: &str,
        tag: &str,
        password: Option<&str>,
    ) -> (serde_json::Value, String) {
        let mut request = reqwest::Client::new()
            .get(format!(
                "http://{}/v2/charts/{chart}/manifests/{tag}",
                self.host
            ))
            .header("accept", OCI_MANIFEST);
        if let Some(password) = password {
            request = request.basic_auth(USER, Some(password));
        }
        let answer = request.send().await.expect("the manifest");
        assert!(answer.status().is_success(), "{chart}:{tag}");
        let digest = answer.headers()["docker-content-digest"]
            .to_str()
            .expect("a digest")
            .to_string();
        (answer.json().await.expect("JSON"), digest)
    }

    /// The file the registry keeps blob `digest` in.
    pub(crate) fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Requests the registry logged whose path starts with `prefix`.
    pub(crate) fn requests(&self, prefix: &str) -> usize {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let needle = format!("\"GET {prefix}");
        log.lines().filter(|l| l.contains(&needle)).count()
    }

    /// [`OciRegistry::requests`] the registry answered with a 200 (its access log
    /// gives the status after the request line).
    pub(crate) fn served(&self, prefix: &str) -> usize {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let needle = format!("\"GET {prefix}");
        log.lines()
            .filter(|l| {
                l.split_once(&needle)
                    .and_then(|(_, rest)| rest.split_once("\" "))
                    .is_some_and(|(_, status)| status.starts_with("200 "))
            })
            .count()
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// A configuration app: chart `chart` of `repo` at `version`, polled often.
fn app(name: &str, repo: &str, chart: &str, version: &str) -> String {
    format!(
        "- name: {name}\n  source: {{repo: \"{repo}\", chart: {chart}, version: \"{version}\", interval: 200ms, helm: {{values: {{greeting: hello}}}}}}\n  destination: {{namespace: oci}}\n  sync: {{automated: true, prune: true}}\n"
    )
}

/// The `greeting` of ConfigMap `name` in namespace `oci`, if it exists.
pub(crate) async fn greeting(sandbox: &TestSandbox, name: &str) -> Option<String> {
    cm_value(sandbox, name, "oci", "greeting").await
}

/// A sandbox for the registry tests: the `oci` namespace for file apps, `team` for
/// App objects acting as its `deployer` ServiceAccount, and the App CRD.
pub(crate) async fn oci_sandbox() -> TestSandbox {
    let sandbox = app_sandbox(&["oci", "team"]).await;
    sandbox.trusted_service_account("team", "deployer").await;
    sandbox
}

#[tokio::test]
async fn a_chart_from_an_oci_registry_syncs_follows_its_range_and_fails_clearly() {
    let sandbox = oci_sandbox().await;
    let root = sandbox.dir.path();
    let build = root.join("build");
    let registry = OciRegistry::start(&root.join("registry")).await;
    let repo = registry.url();
    for version in ["1.0.0", "2.0.0"] {
        registry.push(&chart(&build, "web", version), &build);
    }
    // A chart whose layer the registry now serves with other bytes than its digest's.
    registry.push(&chart(&build, "bad", "1.0.0"), &build);
    let (bad, _) = registry.manifest("bad", "1.0.0").await;
    let layer = bad["layers"][0]["digest"].as_str().expect("a layer");
    std::fs::write(registry.blob_file(layer), b"not the chart that was pushed").expect("tamper");

    // A chart in Git whose dependency is the registry's, not vendored.
    let stack = format!(
        "apiVersion: v2\nname: stack\nversion: 0.1.0\ndependencies:\n- {{name: web, version: \"~1.0\", repository: \"{repo}\", alias: front}}\n"
    );
    let git = origin(&sandbox, &[("stack/Chart.yaml", &stack)]);

    let server = server_section(root);
    let config = format!(
        "sources: {{minInterval: 100ms}}\n{server}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps:\n{}{}{}\
         - name: stack\n  source: {{repo: \"{}\", path: stack, interval: 200ms}}\n  destination: {{namespace: oci}}\n  sync: {{automated: true}}\n",
        app("web", &repo, "web", "~1.0"),
        app("missing", &repo, "web", "9.9.9"),
        app("bad", &repo, "bad", "1.0.0"),
        git.url,
    );
    let serve = serve_with_helm(&sandbox, "chart-oci", &config).await;

    // The newest version of the range, named by its manifest's digest.
    let (_, digest) = registry.manifest("web", "1.0.0").await;
    let want = format!("web@1.0.0@{digest}");
    let synced = serve.wait_synced_at("web", &want).await;
    assert_eq!(synced["source"]["ready"], true, "{synced}");
    assert_eq!(
        greeting(&sandbox, "web-1-0-0").await.as_deref(),
        Some("hello")
    );

    // The Git chart's OCI dependency, vendored under its alias's values.
    serve.wait_synced("stack").await;
    assert_eq!(
        greeting(&sandbox, "stack-1-0-0").await.as_deref(),
        Some("default"),
        "the dependency web 1.0.0 rendered in the stack release"
    );

    // A version pushed within the range is taken at the next poll; the old one pruned.
    registry.push(&chart(&build, "web", "1.0.1"), &build);
    let (_, moved) = registry.manifest("web", "1.0.1").await;
    let want = format!("web@1.0.1@{moved}");
    serve.wait_synced_at("web", &want).await;
    eventually("web-1-0-0 is pruned", || async {
        greeting(&sandbox, "web-1-0-0")
            .await
            .is_none()
            .then_some(())
    })
    .await;

    // An App object pinned by digest.
    let (_, pinned) = registry.manifest("web", "2.0.0").await;
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{repo}\", chart: web, version: \"{pinned}\", helm: {{releaseName: shop}}}}\n  destination: {{namespace: oci}}\n  sync: {{automated: true}}\n"
    );
    apply_app(&sandbox, "shop", "team", &spec).await;
    let want = format!("web@2.0.0@{pinned}");
    wait_app_synced(&sandbox, "shop", "team", |r| r == want).await;
    assert!(exists(&sandbox, "cm", "shop-2-0-0", "oci").await);

    // Steady state: each poll lists the tags; no manifest or blob is fetched again.
    // Only answered requests count: app `missing` retries its unknown tag under
    // backoff (a 404 each time), at times that may fall in this window.
    let blobs = registry.requests("/v2/charts/web/blobs/");
    let manifests = registry.served("/v2/charts/web/manifests/");
    let polls = registry.requests("/v2/charts/web/tags/list");
    eventually("two more polls", || async {
        (registry.requests("/v2/charts/web/tags/list") >= polls + 2).then_some(())
    })
    .await;
    assert_eq!(
        registry.requests("/v2/charts/web/blobs/"),
        blobs,
        "a blob fetched twice"
    );
    assert_eq!(
        registry.served("/v2/charts/web/manifests/"),
        manifests,
        "a manifest fetched twice"
    );

    let missing = serve.wait_source_failed("missing").await;
    assert_eq!(
        missing["source"]["reason"], "ChartVersionNotFound",
        "{missing}"
    );
    // The versions of its last attempt: under backoff, that may predate 1.0.1's push.
    let message = missing["source"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&repo)
            && message.contains("chart web has no version matching \"9.9.9\"")
            && (message.contains("(versions: 2.0.0, 1.0.1, 1.0.0)")
                || message.contains("(versions: 2.0.0, 1.0.0)")),
        "{missing}"
    );

    let bad = serve.wait_source_failed("bad").await;
    assert_eq!(bad["source"]["reason"], "DigestMismatch", "{bad}");
    assert!(
        bad["source"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("bad-1.0.0: the archive's digest is sha256:")
                && m.contains(&format!("the manifest says {layer}"))),
        "{bad}"
    );
    assert!(
        greeting(&sandbox, "bad-1-0-0").await.is_none()
            && greeting(&sandbox, "missing-9-9-9").await.is_none(),
        "nothing of a failed chart source is applied"
    );
    assert_eq!(serve.stop().await, Some(0));
}

/// An App's `spec` for chart `web` of `repo` with the registry Secret `secret`.
fn private_spec(repo: &str, release: &str, secret: &str) -> String {
    chart_spec(repo, "web", "~1.0", release, secret)
}

/// An App's `spec` for `chart` of `repo` at `version` with the Secret `secret`.
fn chart_spec(repo: &str, chart: &str, version: &str, release: &str, secret: &str) -> String {
    format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{repo}\", chart: {chart}, version: \"{version}\", interval: 200ms, credentials: {{secretRef: {{name: {secret}}}}}, helm: {{releaseName: {release}}}}}\n  destination: {{namespace: oci}}\n  sync: {{automated: true}}\n"
    )
}

#[tokio::test]
async fn a_registry_behind_a_login_takes_a_dockerconfigjson_secret_and_names_a_refusal() {
    const PASSWORD: &str = "right-Pa55word-of-the-registry";
    const WRONG: &str = "wrong-Pa55word-for-the-registry";
    let sandbox = oci_sandbox().await;
    let root = sandbox.dir.path();
    let build = root.join("build");
    let registry = OciRegistry::start_with_login(&root.join("registry"), PASSWORD).await;
    registry.push_as(&chart(&build, "web", "1.0.0"), &build, PASSWORD);
    let repo = registry.url();
    // The Secrets as `kubectl create secret docker-registry` writes them.
    for (name, password) in [("registry", PASSWORD), ("stale", WRONG)] {
        sandbox
            .kubectl(&[
                "create",
                "secret",
                "docker-registry",
                name,
                "-n",
                "team",
                &format!("--docker-server={}", registry.host),
                &format!("--docker-username={USER}"),
                &format!("--docker-password={password}"),
            ])
            .await
            .ok();
    }

    let config = format!(
        "sources: {{minInterval: 100ms}}\n{}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps: []\n",
        server_section(root)
    );
    let serve = serve_with_helm(&sandbox, "chart-oci-login", &config).await;
    for (name, secret) in [("private", "registry"), ("denied", "stale")] {
        apply_app(&sandbox, name, "team", &private_spec(&repo, name, secret)).await;
    }

    let (_, digest) = registry.manifest_as("web", "1.0.0", Some(PASSWORD)).await;
    let want = format!("web@1.0.0@{digest}");
    serve.wait_synced_at("team.private", &want).await;
    assert_eq!(
        greeting(&sandbox, "private-1-0-0").await.as_deref(),
        Some("default")
    );

    // A chart whose dependency is on the same registry, not vendored: the dependency
    // is fetched with the App's dockerconfigjson login too.
    let stack = build.join("stack-src/stack");
    std::fs::create_dir_all(&stack).expect("mkdir");
    std::fs::write(
        stack.join("Chart.yaml"),
        format!(
            "apiVersion: v2\nname: stack\nversion: 0.1.0\ndependencies:\n- {{name: web, version: \"~1.0\", repository: \"{repo}\"}}\n"
        ),
    )
    .expect("write");
    registry.push_archive_as(&tar_chart(&stack, "0.1.0", &build.join("stack")), PASSWORD);
    apply_app(
        &sandbox,
        "stack",
        "team",
        &chart_spec(&repo, "stack", "0.1.0", "stack", "registry"),
    )
    .await;
    serve.wait_synced("team.stack").await;
    assert_eq!(
        greeting(&sandbox, "stack-1-0-0").await.as_deref(),
        Some("default"),
        "web 1.0.0 fetched with the login, rendered in the stack release"
    );

    let denied = serve.wait_source_failed("team.denied").await;
    assert_eq!(
        denied["source"]["reason"], "AuthenticationFailed",
        "{denied}"
    );
    let message = denied["source"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&repo) && message.contains("HTTP 401"),
        "{denied}"
    );
    assert!(
        greeting(&sandbox, "denied-1-0-0").await.is_none(),
        "nothing applied"
    );

    // A Helm repository behind basic authentication, with Flux's keys; a Secret whose
    // CA is no PEM is refused by its key.
    let helm_repo = HelmRepo::start_with_login(
        root.join("helm-repo"),
        format!("Basic {}", base64_login(USER, PASSWORD)),
    )
    .await;
    helm_repo.publish(&chart(&build, "web", "1.0.3"));
    for (name, extra) in [("helm-login", ""), ("helm-ca", "--from-literal=ca.crt=PEM")] {
        let mut args = vec![
            "create",
            "secret",
            "generic",
            name,
            "-n",
            "team",
            "--from-literal=username=robot",
        ];
        let password = format!("--from-literal=password={PASSWORD}");
        args.push(&password);
        if !extra.is_empty() {
            args.push(extra);
        }
        sandbox.kubectl(&args).await.ok();
    }
    for (name, secret) in [("helmsrc", "helm-login"), ("helmca", "helm-ca")] {
        apply_app(
            &sandbox,
            name,
            "team",
            &private_spec(&helm_repo.url, name, secret),
        )
        .await;
    }
    serve
        .wait_synced_from("team.helmsrc", "web@1.0.3@sha256:")
        .await;
    assert_eq!(
        greeting(&sandbox, "helmsrc-1-0-3").await.as_deref(),
        Some("default")
    );
    let refused = serve.wait_source_failed("team.helmca").await;
    assert!(
        refused["source"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Secret team/helm-ca: key ca.crt holds no PEM certificate")),
        "{refused}"
    );

    let log = serve.log();
    for secret in [PASSWORD, WRONG] {
        assert!(!log.contains(secret) && !denied.to_string().contains(secret));
    }
    assert_eq!(serve.stop().await, Some(0));
}

/// `user:password` in base64, as a basic `Authorization` header carries it.
pub(crate) fn base64_login(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}
