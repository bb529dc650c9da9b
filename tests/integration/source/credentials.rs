//! Sources behind credentials: smart HTTP with basic auth and tokens from files, a
//! credentials Secret read before each fetch, and credentials in URLs never shown.

use super::*;

#[tokio::test]
async fn smart_http_with_basic_auth_and_token_from_files() {
    let origin = Origin::new();
    let http = HttpGit::start(&origin.root, Some("tether:s3cret-pass"));
    let (dir, cache) = cache();
    let secret_file = dir.path().join("password");
    std::fs::write(&secret_file, "s3cret-pass\n").expect("write secret");
    let wrong_file = dir.path().join("wrong");
    std::fs::write(&wrong_file, "nope").expect("write secret");

    let basic = Source::new(http.url("app"), "main", "deploy").with_auth(Auth::Basic {
        username: "tether".into(),
        password: SecretRef::File(secret_file.clone()),
    });
    let rev = cache
        .sync(&basic)
        .await
        .expect("fetch over http with basic auth");
    assert_eq!(rev.sha, git(&origin.repo, &["rev-parse", "HEAD"]));
    let sha2 = origin.commit("over http");
    assert_eq!(cache.sync(&basic).await.expect("incremental").sha, sha2);
    assert!(
        !cache
            .remote_moved(&basic)
            .await
            .expect("ls-remote over http")
    );

    let token = Source::new(http.url("app"), "main", "deploy").with_auth(Auth::Token {
        token: SecretRef::File(secret_file),
        username: Some("tether".into()),
    });
    assert_eq!(cache.sync(&token).await.expect("token").sha, sha2);

    // A separate cache so the refused fetches cannot be answered from a clone.
    let (_d2, fresh) = self::cache();
    let wrong = Source::new(http.url("app"), "main", "deploy").with_auth(Auth::Basic {
        username: "tether".into(),
        password: SecretRef::File(wrong_file),
    });
    let err = fresh.sync(&wrong).await.expect_err("wrong password");
    assert!(matches!(err, SourceError::AuthRefused { .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert!(!err.to_string().contains("nope"), "secret leaked: {err}");

    // A password pasted into the URL is used, and never shown.
    let in_url = Source::new(
        format!("http://tether:pasted-pw@127.0.0.1:{}/app", http.port),
        "main",
        "deploy",
    );
    let err = fresh
        .sync(&in_url)
        .await
        .expect_err("wrong password in the URL");
    assert!(matches!(err, SourceError::AuthRefused { .. }), "{err:?}");
    assert!(err.to_string().contains("credentials in the URL"), "{err}");
    let status = fresh.status(&in_url);
    for shown in [
        err.to_string(),
        format!("{err:?}"),
        format!("{status:?}"),
        in_url.to_string(),
    ] {
        assert!(!shown.contains("pasted-pw"), "password leaked: {shown}");
    }

    let anonymous = Source::new(http.url("app"), "main", "deploy");
    let err = fresh.sync(&anonymous).await.expect_err("no credentials");
    assert!(matches!(err, SourceError::AuthRefused { .. }), "{err:?}");

    let missing = Source::new(http.url("app"), "main", "deploy").with_auth(Auth::Token {
        token: SecretRef::Env("TETHER_TEST_TOKEN_THAT_IS_NEVER_SET".into()),
        username: None,
    });
    let err = fresh.sync(&missing).await.expect_err("unset variable");
    assert!(matches!(err, SourceError::Credentials { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("TETHER_TEST_TOKEN_THAT_IS_NEVER_SET")
    );
    let status = fresh.status(&missing);
    assert!(!status.ready);
    assert_eq!(status.reason, Some("CredentialsUnavailable"));
}

/// `credentials.secretRef` at the source stage: the cache reads the Secret through the
/// connection it is given, before each fetch and each poll's check; what is missing is
/// named, no value is shown anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credentials_secret_is_read_before_each_fetch_and_never_shown() {
    const RIGHT: &str = "s3cret-from-a-Secret";
    let origin = Origin::new();
    let http = HttpGit::start(&origin.root, Some(&format!("tether:{RIGHT}")));
    let sandbox = crate::support::TestSandbox::start().await;
    sandbox.namespace("team").await;
    let (_d, cache) = cache();
    let source =
        Source::new(http.url("app"), "main", "deploy").with_auth(Auth::Secret(CredentialsSecret {
            namespace: "team".into(),
            name: "git".into(),
        }));

    // No connection to read Secrets with (a CLI without a cluster).
    let err = cache.sync(&source).await.expect_err("no reader");
    assert!(matches!(err, SourceError::Credentials { .. }), "{err:?}");
    assert!(err.to_string().contains("Secret team/git"), "{err}");

    let cluster = tether_core::cluster::Cluster::connect(Some(&sandbox.kubeconfig), None)
        .await
        .expect("cluster");
    cache.read_secrets_with(std::sync::Arc::new(cluster));
    let err = cache.sync(&source).await.expect_err("no Secret");
    assert!(
        err.to_string().contains("Secret team/git not found"),
        "{err}"
    );
    assert_eq!(cache.status(&source).reason, Some("CredentialsUnavailable"));

    let apply = |data: &str| {
        let yaml = format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: git, namespace: team}}\nstringData:\n{data}"
        );
        let sandbox = &sandbox;
        async move {
            sandbox.kubectl_apply(&yaml).await;
        }
    };
    apply("  username: tether\n").await;
    let err = cache.sync(&source).await.expect_err("no password key");
    assert!(
        err.to_string()
            .contains("Secret team/git has key username but no key password"),
        "{err}"
    );

    apply("  username: tether\n  password: not-the-one\n").await;
    let err = cache.sync(&source).await.expect_err("wrong password");
    assert!(matches!(err, SourceError::AuthRefused { .. }), "{err:?}");

    // Fixed in the Secret: the next fetch and check use it, no restart.
    sandbox
        .kubectl(&["delete", "secret", "git", "-n", "team"])
        .await
        .ok();
    apply(&format!("  username: tether\n  password: {RIGHT}\n")).await;
    let rev = cache.sync(&source).await.expect("fetch with the Secret");
    assert_eq!(rev.sha, git(&origin.repo, &["rev-parse", "HEAD"]));
    origin.commit("moved");
    assert!(cache.remote_moved(&source).await.expect("ls-remote"));
    let status = cache.status(&source);
    for shown in [
        format!("{source:?}"),
        source.to_string(),
        format!("{status:?}"),
    ] {
        assert!(
            !shown.contains(RIGHT) && !shown.contains("not-the-one"),
            "{shown}"
        );
    }
}

/// URL forms with credentials users paste, each with the part that must never show.
fn urls_with_credentials(port: u16) -> Vec<(String, &'static str)> {
    vec![
        (
            format!("http://user:SECRETpw@127.0.0.1:{port}/app"),
            "SECRETpw",
        ),
        (
            format!("http://ghp_SECRETtoken@127.0.0.1:{port}/app"),
            "SECRETtoken",
        ),
        (
            format!("http://ghp_SECRETtoken:x-oauth-basic@127.0.0.1:{port}/app"),
            "SECRETtoken",
        ),
        (
            format!("http://user:pa/SECRETslash@127.0.0.1:{port}/app"),
            "SECRETslash",
        ),
        (
            format!("http://user:p@SECRETat@127.0.0.1:{port}/app"),
            "SECRETat",
        ),
        (
            format!("http://user:SECRET%2Fenc@127.0.0.1:{port}/app"),
            "SECRET",
        ),
        (
            format!("ssh://git:SECRETssh@127.0.0.1:{port}/app.git"),
            "SECRETssh",
        ),
    ]
}

#[tokio::test]
async fn credentials_in_urls_never_reach_errors_statuses_or_logs_of_a_fetch() {
    let origin = Origin::new();
    let http = HttpGit::start(&origin.root, Some("tether:the-right-one"));
    let (_d, cache) = cache();
    for (url, secret) in urls_with_credentials(http.port) {
        let source = Source::new(url.clone(), "main", "deploy");
        let err = cache.sync(&source).await.expect_err("refused");
        let status = cache.status(&source);
        for shown in [
            err.to_string(),
            format!("{err:?}"),
            format!("{status:?}"),
            source.to_string(),
        ] {
            assert!(!shown.contains(secret), "{url}: {shown}");
        }
    }
}

#[tokio::test]
async fn tether_source_prints_no_credential_from_the_url() {
    let origin = Origin::new();
    let http = HttpGit::start(&origin.root, Some("tether:the-right-one"));
    let dir = tempfile::tempdir().expect("tempdir");
    for (url, secret) in urls_with_credentials(http.port) {
        for output in ["text", "json"] {
            let out = Command::new(env!("CARGO_BIN_EXE_tether"))
                .args(["source", "--repo", &url, "--path", "deploy", "-o", output])
                .env("TETHER_CACHE_DIR", dir.path())
                .env("RUST_LOG", "debug")
                .output()
                .expect("tether source runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
            assert!(!stderr.is_empty(), "{url}: the error is reported");
            assert!(
                !stdout.contains(secret) && !stderr.contains(secret),
                "{url} leaked:\n{stdout}\n{stderr}"
            );
        }
    }
}
