//! SOPS-encrypted Secrets (issue #27) as a user syncs them: an app whose directory
//! holds one Secret encrypted for an age identity and one for an OpenPGP key (made
//! with the real `gpg`), synced with `tether sync --sops-key-file` to the sandbox. The
//! cluster gets the plaintext; nothing tether prints does (sync's and diff's every
//! output format, with drift and without, and the errors when a key is missing).

use std::path::{Path, PathBuf};
use tether_testkit::assert_contains;
use tether_testkit::assert_lacks;

use age::secrecy::ExposeSecret;
use base64::Engine;
use serde_json::json;
use tether_sops::{Format, Recipients, Rule, encrypt};

use crate::support::{Run, TestSandbox, app_dir, run_ok, sync_app, tether, tether_with_env};

const AGE_PLAIN: &str = "age-plaintext-Zq7vW2";
const PGP_PLAIN: &str = "pgp-plaintext-Kx9mP4";

/// A Secret `namespace/name` holding `password`, encrypted as `sops --encrypted-regex` does.
pub(crate) fn encrypted_secret(
    name: &str,
    namespace: &str,
    password: &str,
    recipients: &Recipients,
) -> String {
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "stringData": {"password": password},
    });
    let rule = Rule::EncryptedRegex("^(data|stringData)$".to_string());
    let bytes = encrypt(Format::Yaml, vec![secret], &rule, false, recipients).expect("encrypts");
    String::from_utf8(bytes).expect("YAML")
}

/// A fresh OpenPGP key made by `gpg` in its own home: (armored public, armored secret).
pub(crate) fn gpg_key(home: &Path) -> (String, String) {
    std::fs::create_dir_all(home).expect("mkdir");
    let gpg = |args: &[&str]| {
        let out = run_ok(
            std::process::Command::new("gpg")
                .arg("--homedir")
                .arg(home)
                .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
                .args(args),
        );
        String::from_utf8(out.stdout).expect("armored")
    };
    let uid = "tether sops test <sops@example.invalid>";
    gpg(&["--quick-gen-key", uid, "default", "default", "never"]);
    (
        gpg(&["--armor", "--export", uid]),
        gpg(&["--armor", "--export-secret-keys", uid]),
    )
}

struct App {
    dir: PathBuf,
    age_key: PathBuf,
    pgp_key: PathBuf,
    age_recipient: String,
}

fn app(sandbox: &TestSandbox) -> App {
    let identity = age::x25519::Identity::generate();
    let age_recipient = identity.to_public().to_string();
    let mut for_age = Recipients::new();
    for_age.add_age(&age_recipient).expect("recipient");
    let (public, secret) = gpg_key(&sandbox.dir.path().join("gnupg"));
    let mut for_pgp = Recipients::new();
    for_pgp.add_pgp(&public).expect("a public key");
    let dir = app_dir(
        sandbox,
        "sops-app",
        &[
            (
                "db.enc.yaml",
                encrypted_secret("db", "default", AGE_PLAIN, &for_age),
            ),
            (
                "api.enc.yaml",
                encrypted_secret("api", "default", PGP_PLAIN, &for_pgp),
            ),
        ],
    );
    let keys = sandbox.dir.path().join("keys");
    std::fs::create_dir_all(&keys).expect("mkdir");
    let (age_key, pgp_key) = (keys.join("age.agekey"), keys.join("pgp.asc"));
    std::fs::write(&age_key, identity.to_string().expose_secret()).expect("write");
    std::fs::write(&pgp_key, secret).expect("write");
    App {
        dir,
        age_key,
        pgp_key,
        age_recipient,
    }
}

#[track_caller]
fn assert_no_plaintext(what: &str, run: &Run) {
    for plain in [AGE_PLAIN, PGP_PLAIN] {
        let b64 = base64::engine::general_purpose::STANDARD.encode(plain);
        for text in [&run.stdout, &run.stderr] {
            assert!(
                !text.contains(plain) && !text.contains(&b64),
                "{what} printed a plaintext:\n{text}"
            );
        }
    }
}

async fn password(sandbox: &TestSandbox, name: &str) -> String {
    password_in(sandbox, name, "default")
        .await
        .expect("the Secret exists")
}

/// The decoded `password` of Secret `namespace/name`, None while it does not exist.
pub(crate) async fn password_in(
    sandbox: &TestSandbox,
    name: &str,
    namespace: &str,
) -> Option<String> {
    let out = sandbox
        .kubectl(&[
            "get",
            "secret",
            name,
            "-n",
            namespace,
            "-o",
            "jsonpath={.data.password}",
        ])
        .await;
    if out.code != 0 {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(out.stdout.trim())
        .expect("base64");
    Some(String::from_utf8(bytes).expect("utf-8"))
}

#[tokio::test(flavor = "multi_thread")]
async fn age_and_pgp_encrypted_secrets_reach_the_cluster_as_plaintext_and_no_output() {
    let sandbox = TestSandbox::start().await;
    let app = app(&sandbox);
    let key_args = [
        "--sops-key-file",
        app.age_key.to_str().expect("utf-8"),
        "--sops-key-file",
        app.pgp_key.to_str().expect("utf-8"),
    ];

    let synced = sync_app(&sandbox, &app.dir, "sops", &key_args).await;
    assert_no_plaintext("sync", &synced);
    assert_eq!(synced.code, Some(0), "{synced:?}");
    assert_eq!(password(&sandbox, "db").await, AGE_PLAIN);
    assert_eq!(password(&sandbox, "api").await, PGP_PLAIN);

    // In sync, then drifted: every report format compares the plaintext and shows none.
    sandbox
        .kubectl(&[
            "patch",
            "secret",
            "db",
            "-n",
            "default",
            "-p",
            r#"{"stringData":{"password":"changed-in-cluster"}}"#,
        ])
        .await
        .ok();
    let dir = app.dir.to_str().expect("utf-8");
    for format in ["text", "json", "markdown", "junit"] {
        let mut args = vec!["--path", dir, "--app", "sops", "-o", format];
        args.extend(key_args);
        let diff = tether(&sandbox, "diff", &args).await;
        assert_no_plaintext(&format!("diff -o {format}"), &diff);
        assert_eq!(diff.code, Some(1), "drift on db only: {diff:?}");
        assert_lacks(&diff.stdout, "changed-in-cluster");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_key_nothing_is_applied_and_the_error_names_file_and_recipient() {
    let sandbox = TestSandbox::start().await;
    let app = app(&sandbox);
    // Only the PGP key: the age-encrypted file cannot be opened.
    let pgp_only = ["--sops-key-file", app.pgp_key.to_str().expect("utf-8")];
    let refused = sync_app(&sandbox, &app.dir, "sops", &pgp_only).await;
    assert_no_plaintext("a refused sync", &refused);
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(refused.stderr.contains("db.enc.yaml"), "{}", refused.stderr);
    assert_contains(&refused.stderr, &app.age_recipient);
    let listed = sandbox
        .kubectl(&["get", "secrets", "-n", "default", "-o", "name"])
        .await
        .ok();
    assert!(
        !listed.stdout.contains("secret/api"),
        "nothing of the revision is applied: {}",
        listed.stdout
    );

    // The age identity from the environment, as `sops` reads it.
    let env = [("SOPS_AGE_KEY_FILE", app.age_key.display().to_string())];
    let dir = app.dir.to_str().expect("utf-8");
    let args = [
        "--path",
        dir,
        "--app",
        "sops",
        "-o",
        "json",
        "--sops-key-file",
        app.pgp_key.to_str().expect("utf-8"),
    ];
    let synced = tether_with_env(&sandbox, "sync", &args, &env).await;
    assert_no_plaintext("sync with SOPS_AGE_KEY_FILE", &synced);
    assert_eq!(synced.code, Some(0), "{synced:?}");
    assert_eq!(password(&sandbox, "db").await, AGE_PLAIN);

    let bad = tether(
        &sandbox,
        "diff",
        &["--path", dir, "--sops-key-file", "/nonexistent/key.txt"],
    )
    .await;
    assert_ne!(bad.code, Some(0));
    assert_contains(&bad.stderr, "/nonexistent/key.txt");
}
