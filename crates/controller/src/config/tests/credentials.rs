//! The configuration's credentials and secrets: checked when loaded without being
//! read, read only when asked, never printed.

use super::*;

#[test]
fn credentials_are_checked_without_reading_secrets() {
    let creds = |body: &str| app(&format!("    credentials:\n{body}"));
    assert_eq!(
        problems(&creds(
            "      username: bot\n      passwordEnv: P\n      passwordFile: /p\n"
        )),
        ["tether.yaml:8: apps[0].source.credentials: set passwordEnv or passwordFile, not both"]
    );
    assert_eq!(
        problems(&creds("      tokenEnv: T\n      tokenFile: /t\n")),
        ["tether.yaml:7: apps[0].source.credentials: set tokenEnv or tokenFile, not both"]
    );
    assert_eq!(
        problems(&creds("      passwordFile: /p\n")),
        ["tether.yaml:6: apps[0].source.credentials: a password needs a username"]
    );
    assert_eq!(
        problems(&creds("      sshKeyFile: /k\n")),
        [
            "tether.yaml:6: apps[0].source.credentials: sshKeyFile needs knownHostsFile (the server's host key is always checked)"
        ]
    );
    assert_eq!(
        problems(&creds("      knownHostsFile: /kh\n")),
        ["tether.yaml:6: apps[0].source.credentials: knownHostsFile is only used with sshKeyFile"]
    );
    assert_eq!(
        problems(&creds("      username: bot\n")),
        [
            "tether.yaml:6: apps[0].source.credentials: a username alone authenticates nothing: add a password, a token or sshKeyFile"
        ]
    );
    assert_eq!(
        problems(&creds("      tokenEnv: ''\n")),
        ["tether.yaml:6: apps[0].source.credentials.tokenEnv: must not be empty"]
    );
    // Files that do not exist yet are fine: they may be mounted later.
    let c = parse(&creds(
        "      username: bot\n      passwordFile: /nonexistent/p\n",
    ));
    assert_eq!(
        c.apps[0].source().auth,
        Auth::Basic {
            username: "bot".into(),
            password: SecretRef::File("/nonexistent/p".into())
        }
    );
}

#[test]
fn credentials_follow_the_protocol_of_the_url() {
    let creds = Credentials {
        username: Some("bot".into()),
        password: Some(SecretRef::Env("P".into())),
        token: Some(SecretRef::Env("T".into())),
        ssh_key_file: Some("/k".into()),
        known_hosts_file: Some("/kh".into()),
        secret_ref: None,
    };
    let ssh = Auth::SshKey {
        private_key: "/k".into(),
        known_hosts: "/kh".into(),
        passphrase: None,
        username: Some("bot".into()),
    };
    assert_eq!(creds.auth("git@github.com:org/repo.git"), ssh);
    assert_eq!(creds.auth("ssh://git@h/r"), ssh);
    let token = Auth::Token {
        token: SecretRef::Env("T".into()),
        username: Some("bot".into()),
    };
    assert_eq!(creds.auth("https://h/r"), token);
    let basic = Credentials {
        token: None,
        ..creds.clone()
    };
    assert_eq!(
        basic.auth("https://h/r"),
        Auth::Basic {
            username: "bot".into(),
            password: SecretRef::Env("P".into())
        }
    );
    // With nothing else, the key is offered whatever the URL says.
    let key_only = Credentials {
        token: None,
        password: None,
        ..creds
    };
    assert_eq!(key_only.auth("https://h/r"), ssh);
    assert_eq!(Credentials::default().auth("https://h/r"), Auth::None);
}

#[test]
fn webhook_secrets_are_exactly_one_of_file_or_env() {
    let text = "server:\n  webhooks:\n    github: {secretFile: /s, secretEnv: S}\n    gitlab: {}\n    gitea: {secretEnv: ''}\n";
    assert_eq!(
        problems(text),
        [
            "tether.yaml:3: server.webhooks.github: set secretFile or secretEnv, not both",
            "tether.yaml:4: server.webhooks.gitlab: set secretFile or secretEnv",
            "tether.yaml:5: server.webhooks.gitea.secretEnv: must not be empty",
        ]
    );
}

#[test]
fn the_api_token_is_one_of_file_or_env_read_when_asked() {
    assert_eq!(
        problems("server:\n  apiToken: {secretFile: /t, secretEnv: T}\n"),
        ["tether.yaml:2: server.apiToken: set secretFile or secretEnv, not both"]
    );
    assert_eq!(
        problems("server:\n  apiToken: {secretFile: ''}\n"),
        ["tether.yaml:2: server.apiToken.secretFile: must not be empty"]
    );
    assert!(
        parse("server: {}\n")
            .server
            .api_token()
            .expect("none")
            .is_none()
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("token");
    std::fs::write(&file, "t0ken\n").expect("write");
    let c = parse(&format!(
        "server:\n  apiToken: {{secretFile: {}}}\n",
        file.display()
    ));
    let token = c.server.api_token().expect("read").expect("configured");
    assert!(!format!("{token:?}").contains("t0ken"));

    std::fs::write(&file, " \n").expect("write");
    let err = c.server.api_token().expect_err("blank");
    assert_eq!(
        err.to_string(),
        format!("server.apiToken.secretFile: {} is empty", file.display())
    );
    let c = parse("server:\n  apiToken: {secretEnv: TETHER_TEST_SURELY_UNSET_VARIABLE}\n");
    assert_eq!(
        c.server.api_token().expect_err("unset").to_string(),
        "server.apiToken.secretEnv: environment variable TETHER_TEST_SURELY_UNSET_VARIABLE is not set"
    );
}

#[test]
fn webhook_secrets_are_read_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("github");
    std::fs::write(&good, "s3cret\n").expect("write");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").expect("write");

    let c = parse(&format!(
        "server:\n  webhooks:\n    github: {{secretFile: {}}}\n    allowUnsigned: true\n",
        good.display()
    ));
    let wc = c.server.webhook_config().expect("webhook config");
    assert!(wc.allow_unsigned);
    assert_eq!(wc.secrets.len(), 1);
    assert!(wc.secrets.contains_key(&Provider::Github));
    // The secret never prints.
    assert!(!format!("{wc:?}").contains("s3cret"));

    let c = parse(&format!(
        "server:\n  webhooks:\n    bitbucket: {{secretFile: {}}}\n",
        empty.display()
    ));
    let err = c.server.webhook_config().expect_err("empty");
    assert_eq!(
        err.to_string(),
        format!(
            "server.webhooks.bitbucket.secretFile: {} is empty",
            empty.display()
        )
    );

    let missing = dir.path().join("missing");
    let err = WebhookSecretRef(SecretRef::File(missing.clone()))
        .load()
        .expect_err("missing");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "webhook secret: cannot read {}: ",
            missing.display()
        )),
        "{msg}"
    );
    let err = WebhookSecretRef(SecretRef::Env("TETHER_TEST_SURELY_UNSET_VARIABLE".into()))
        .load()
        .expect_err("unset");
    assert_eq!(
        err.to_string(),
        "webhook secret: environment variable TETHER_TEST_SURELY_UNSET_VARIABLE is not set"
    );
}

#[test]
fn an_inline_secret_is_refused_without_being_printed() {
    let err = syntax(&app(
        "    credentials:\n      username: bot\n      token: hunter2\n",
    ));
    assert!(
        err.starts_with("tether.yaml:7: apps[0].source.credentials.token: unknown field `token`"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let err = syntax(&app("    credentials:\n      tokenEnv: [hunter2]\n"));
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn a_credentials_secret_is_read_from_the_inventory_namespace_unless_named() {
    let c = parse(
        "inventoryNamespace: ops\n\
         apps:\n- name: web\n  source:\n    repo: https://h/r.git\n    credentials:\n      secretRef: {name: git-creds}\n\
         - name: api\n  source:\n    repo: https://h/r.git\n    credentials:\n      secretRef: {name: git-creds, namespace: teams}\n",
    );
    let secret = |name: &str| match c.app(name).expect("app").source().auth {
        Auth::Secret(s) => (s.namespace, s.name),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(secret("web"), ("ops".into(), "git-creds".into()));
    assert_eq!(secret("api"), ("teams".into(), "git-creds".into()));
    // An App's Secret is its own namespace's.
    let mut app = c.app("api").expect("api").clone();
    app.tenant_namespace = Some("t1".into());
    assert!(
        matches!(app.source().auth, Auth::Secret(s) if s.namespace == "t1"),
        "the tenant namespace wins"
    );
}

#[test]
fn a_credentials_secret_is_not_mixed_with_env_or_file_keys() {
    for (key, value) in [
        ("username", "bot"),
        ("passwordEnv", "P"),
        ("tokenFile", "/t"),
        ("sshKeyFile", "/k"),
        ("knownHostsFile", "/kh"),
    ] {
        let found = problems(&format!(
            "apps:\n- name: web\n  source:\n    repo: https://h/r.git\n    credentials:\n      \
             secretRef: {{name: git-creds}}\n      {key}: {value}\n"
        ));
        let joined = found.join("\n");
        assert!(
            joined.contains("apps[0].source.credentials.secretRef")
                && joined.contains(&format!("not together with {key}")),
            "{key}: {joined}"
        );
    }
    let found = problems(
        "apps:\n- name: web\n  source:\n    repo: https://h/r.git\n    credentials:\n      \
         secretRef: {name: Not_A_Name, namespace: \"\"}\n",
    )
    .join("\n");
    for field in [
        "apps[0].source.credentials.secretRef.name",
        "apps[0].source.credentials.secretRef.namespace",
    ] {
        assert!(found.contains(field), "{field} missing from:\n{found}");
    }
    // Only a name and a namespace: a key would say it reads one value.
    assert!(
        syntax(
            "apps:\n- name: web\n  source:\n    repo: https://h/r.git\n    credentials:\n      \
             secretRef: {name: x, key: password}\n"
        )
        .contains("unknown field")
    );
}
