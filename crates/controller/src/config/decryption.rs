//! An app's `decryption:` block, Flux's `spec.decryption` under the same names: which
//! keys open the SOPS-encrypted files of its revisions. `provider: sops`, and the keys
//! from a Secret (`secretRef`, Flux's layout: `*.agekey` entries of age identities,
//! `*.asc` entries of armored PGP private keys) and, in the configuration file only,
//! from key files on tether's disk (`keyFiles`). Parsed and checked here; the Secret
//! and files are read at each pass (`reconcile::decryption`): an App's Secret in its
//! own namespace, with its own identity; a file app's in `secretRef.namespace`, by
//! default the inventory namespace (tether's own), as its other Secrets are.

use std::path::PathBuf;

use super::check::{Checker, dns1123_subdomain, line_of};
use super::raw::RawDecryption;

/// The one provider there is, as Flux names it.
pub const SOPS_PROVIDER: &str = "sops";

/// `decryption:` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecryptionConfig {
    /// The Secret of keys, by name.
    pub secret_name: Option<String>,
    /// Its namespace when the file names one; otherwise the App's, or for a file app
    /// the inventory namespace.
    pub secret_namespace: Option<String>,
    /// Key files (`keyFiles`), each holding age identities or armored PGP private keys.
    pub key_files: Vec<PathBuf>,
}

/// Checks `decryption` at `path` (`apps[0].decryption`), reporting every problem.
pub(super) fn resolve_decryption(
    raw: &RawDecryption,
    path: &str,
    check: &mut Checker,
) -> DecryptionConfig {
    if raw.provider.value != SOPS_PROVIDER {
        check.report(
            format!("{path}.provider"),
            line_of(&raw.provider),
            format!("must be {SOPS_PROVIDER}"),
        );
    }
    let secret_ref = raw.secret_ref.as_ref().map(|r| &r.value);
    if let Some(r) = secret_ref {
        if let Err(message) = dns1123_subdomain(&r.name.value) {
            check.report(format!("{path}.secretRef.name"), line_of(&r.name), message);
        }
        if let Some(namespace) = &r.namespace {
            check.label(&format!("{path}.secretRef.namespace"), namespace, 63, "");
        }
    }
    for (i, file) in raw.key_files.iter().enumerate() {
        check.non_empty(&format!("{path}.keyFiles[{i}]"), file);
    }
    if secret_ref.is_none() && raw.key_files.is_empty() {
        check.report(
            path,
            line_of(&raw.provider),
            "names no keys: set secretRef (or keyFiles in the configuration file)",
        );
    }
    DecryptionConfig {
        secret_name: secret_ref.map(|r| r.name.value.clone()),
        secret_namespace: secret_ref.and_then(|r| r.namespace.as_ref().map(|n| n.value.clone())),
        key_files: raw
            .key_files
            .iter()
            .map(|f| PathBuf::from(&f.value))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError};

    #[test]
    fn decryption_takes_a_secret_and_key_files_and_names_what_is_wrong() {
        let text = "apps:\n- name: a\n  source: {repo: r}\n  decryption: {provider: sops, secretRef: {name: keys, namespace: ops}, keyFiles: [/etc/tether/age.agekey]}\n";
        let config = Config::parse(text, "t").expect("parses");
        let decryption = config.apps[0].decryption.clone().expect("decryption");
        assert_eq!(decryption.secret_name.as_deref(), Some("keys"));
        assert_eq!(decryption.secret_namespace.as_deref(), Some("ops"));
        assert_eq!(
            decryption.key_files,
            vec![std::path::PathBuf::from("/etc/tether/age.agekey")]
        );

        let text = "apps:\n- name: a\n  source: {repo: r}\n  decryption: {provider: vault, secretRef: {name: Bad_Name}}\n- name: b\n  source: {repo: r}\n  decryption: {provider: sops}\n";
        let Err(ConfigError::Invalid { problems, .. }) = Config::parse(text, "t") else {
            panic!("must be refused");
        };
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "apps[0].decryption.provider",
                "apps[0].decryption.secretRef.name",
                "apps[1].decryption",
            ]
        );
    }
    #[test]
    fn an_apps_keys_are_a_secret_of_its_own_namespace_never_tethers_files() {
        use serde_json::json;
        let spec = json!({
            "source": {"repo": "https://h/r.git"},
            "decryption": {"provider": "sops", "secretRef": {"name": "keys"}},
        });
        let app = crate::config::app_from_spec("t1.web", &spec).expect("valid");
        let decryption = app.decryption.expect("decryption");
        assert_eq!(decryption.secret_name.as_deref(), Some("keys"));
        assert_eq!(app.tenant_namespace.as_deref(), Some("t1"));

        let spec = json!({
            "source": {"repo": "https://h/r.git"},
            "decryption": {"provider": "sops", "secretRef": {"name": "keys", "namespace": "tether-system"}, "keyFiles": ["/etc/tether/age.agekey"]},
        });
        let err = crate::config::app_from_spec("t1.web", &spec).expect_err("refused");
        let ConfigError::Invalid { problems, .. } = &err else {
            panic!("{err:?}");
        };
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.decryption.keyFiles",
                "spec.decryption.secretRef.namespace"
            ]
        );
    }
}
