//! SOPS decryption in `tether serve` (issue #27): an App's `decryption.secretRef` (a
//! Secret of its own namespace, read as its ServiceAccount) and a file app's key
//! Secret in tether's namespace plus a key file, against the sandbox. Age- and
//! PGP-encrypted Secrets reach the cluster as plaintext; a missing key Secret, a
//! missing key and a tampered file stop the app, named, with nothing applied; a
//! changed key Secret is a new desired state. The plaintext shows nowhere else.

use age::secrecy::ExposeSecret;
use base64::Engine;
use tether_sops::Recipients;
use tether_testkit::assert_contains;

use crate::app_crd::{app_sandbox, apply_app};
use crate::serve::{Serve, get_text, origin_http, server_section};
use crate::sops::{encrypted_secret, gpg_key, password_in as password};
use crate::support::{eventually, tether};

const AGE_PLAIN: &str = "served-age-plain-Vb3nQ8";
const PGP_PLAIN: &str = "served-pgp-plain-Hm5tR1";

/// A Secret of SOPS keys in Flux's layout: `entries` are (name, text).
fn key_secret(namespace: &str, entries: &[(&str, &str)]) -> String {
    let data: Vec<String> = entries
        .iter()
        .map(|(name, text)| {
            format!(
                "  {name}: {}\n",
                base64::engine::general_purpose::STANDARD.encode(text)
            )
        })
        .collect();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sops-keys\n  namespace: {namespace}\ndata:\n{}",
        data.concat()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_decrypts_with_an_apps_key_secret_and_a_file_apps_keys_and_shows_no_plaintext() {
    let sandbox = app_sandbox(&["vault-f", "vault-t", "vault-a", "team-s", "tether-system"]).await;
    sandbox.trusted_service_account("team-s", "deployer").await;

    let identity = age::x25519::Identity::generate();
    let age_key = identity.to_string().expose_secret().to_string();
    let mut for_age = Recipients::new();
    for_age
        .add_age(&identity.to_public().to_string())
        .expect("recipient");
    let (public, pgp_key) = gpg_key(&sandbox.dir.path().join("gnupg"));
    let mut for_pgp = Recipients::new();
    for_pgp.add_pgp(&public).expect("a public key");
    let secrets = |ns: &str| {
        (
            encrypted_secret("db", ns, AGE_PLAIN, &for_age),
            encrypted_secret("api", ns, PGP_PLAIN, &for_pgp),
        )
    };
    let (files_db, files_api) = secrets("vault-f");
    let (tenant_db, tenant_api) = secrets("vault-a");
    let (tampered_db, tampered_api) = secrets("vault-t");
    // A clear value edited by hand: the MAC no longer matches.
    let tampered_db = tampered_db.replacen("name: db", "name: dbx", 1);
    let origin = origin_http(
        &sandbox,
        &[
            ("apps/files/db.enc.yaml", &files_db),
            ("apps/files/api.enc.yaml", &files_api),
            ("apps/tampered/db.enc.yaml", &tampered_db),
            ("apps/tampered/api.enc.yaml", &tampered_api),
            ("apps/tenant/db.enc.yaml", &tenant_db),
            ("apps/tenant/api.enc.yaml", &tenant_api),
        ],
    );
    let pgp_file = sandbox.dir.path().join("pgp.asc");
    std::fs::write(&pgp_file, &pgp_key).expect("write");
    let entry = |name: &str, ns: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{}\", ref: main, path: apps/{name}, interval: 1h}}\n  destination: {{namespace: {ns}}}\n  sync: {{automated: true}}\n  decryption: {{provider: sops, secretRef: {{name: sops-keys}}, keyFiles: [\"{}\"]}}\n",
            origin.url,
            pgp_file.display()
        )
    };
    let config = format!(
        "resyncInterval: 1s\n{}apps:\n{}{}",
        server_section(sandbox.dir.path()),
        entry("files", "vault-f"),
        entry("tampered", "vault-t"),
    );
    let serve = Serve::start(&sandbox, "sops-serve", &config, &[]).await;

    // The file app: its key Secret is missing at first, which stops it, named.
    let status = serve
        .wait_status_text(
            "files",
            "the missing key Secret reported",
            "DecryptionFailed",
        )
        .await;
    assert_contains(&status, "Secret tether-system/sops-keys not found");
    sandbox
        .kubectl_apply(&key_secret("tether-system", &[("age.agekey", &age_key)]))
        .await;
    eventually("the file app's Secrets decrypted", || async {
        (password(&sandbox, "db", "vault-f").await.as_deref() == Some(AGE_PLAIN)).then_some(())
    })
    .await;
    assert_eq!(
        password(&sandbox, "api", "vault-f").await.as_deref(),
        Some(PGP_PLAIN)
    );
    // `tether diff --config` opens the app's files with its own keys (Secret, key file).
    let config_file = sandbox.dir.path().join("diff-config.yaml");
    std::fs::write(&config_file, &config).expect("write");
    let config_arg = config_file.to_str().expect("utf-8");
    let mut diffs = Vec::new();
    for format in ["text", "json", "markdown", "junit"] {
        let args = ["--config", config_arg, "--app", "files", "-o", format];
        let diff = tether(&sandbox, "diff", &args).await;
        assert_eq!(diff.code, Some(0), "in sync with the app's keys: {diff:?}");
        diffs.push(format!("{}{}", diff.stdout, diff.stderr));
    }

    // A tampered file fails its revision, named, and nothing of it is applied.
    let status = serve
        .wait_status_text("tampered", "the MAC mismatch reported", "MAC mismatch")
        .await;
    assert!(status.contains("ManifestInvalid"), "{status}");
    assert!(status.contains("db.enc.yaml"), "{status}");
    assert_eq!(password(&sandbox, "api", "vault-t").await, None);

    // The App: its key Secret opens the age file only.
    sandbox
        .kubectl_apply(&key_secret("team-s", &[("age.agekey", &age_key)]))
        .await;
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{repo: \"{}\", ref: main, path: apps/tenant, interval: 1h}}\n  destination: {{namespace: vault-a}}\n  sync: {{automated: true}}\n  decryption: {{provider: sops, secretRef: {{name: sops-keys}}}}\n",
        origin.url
    );
    apply_app(&sandbox, "web", "team-s", &spec).await;
    let status = serve
        .wait_status_text(
            "team-s.web",
            "the missing PGP key reported",
            "no key that opens it",
        )
        .await;
    assert!(status.contains("api.enc.yaml"), "{status}");
    assert!(status.contains("PGP"), "{status}");
    assert_eq!(
        password(&sandbox, "db", "vault-a").await,
        None,
        "nothing of the revision is applied"
    );

    // A changed key Secret is a new desired state: the revision is tried again.
    sandbox
        .kubectl_apply(&key_secret(
            "team-s",
            &[("age.agekey", &age_key), ("ci.asc", &pgp_key)],
        ))
        .await;
    eventually("the App's Secrets decrypted", || async {
        (password(&sandbox, "api", "vault-a").await.as_deref() == Some(PGP_PLAIN)).then_some(())
    })
    .await;
    assert_eq!(
        password(&sandbox, "db", "vault-a").await.as_deref(),
        Some(AGE_PLAIN)
    );

    // The plaintext is in the cluster and nowhere else tether shows.
    let mut shown: Vec<(&str, String)> = diffs.into_iter().map(|d| ("diff", d)).collect();
    shown.extend([
        ("log", serve.log()),
        (
            "App",
            crate::app_crd::app(&sandbox, "web", "team-s")
                .await
                .to_string(),
        ),
    ]);
    for app in ["files", "tampered", "team-s.web"] {
        shown.push(("status API", serve.status(app).await.to_string()));
        let tree = get_text(format!("{}/api/v1/apps/{app}/tree", serve.url)).await;
        shown.push(("dashboard tree", tree));
    }
    let page = get_text(format!("{}/", serve.url)).await;
    shown.push(("dashboard", page));
    for plain in [AGE_PLAIN, PGP_PLAIN] {
        let b64 = base64::engine::general_purpose::STANDARD.encode(plain);
        for (what, text) in &shown {
            assert!(
                !text.contains(plain) && !text.contains(&b64),
                "{what} shows a plaintext:\n{text}"
            );
        }
    }
}
