//! `source.verify` (issue #27): which commits of an app's source must be signed, and
//! by which keys. As Flux's `GitRepository.spec.verify`: the keys are a Secret's
//! entries (OpenPGP public keys, `*.asc`, and SSH allowed-signers files, any other
//! entry), an App's in its own namespace; a file app may name the Secret's namespace
//! (default: the inventory namespace) or list key files tether reads instead.

use std::path::PathBuf;

use tether_core::source::VerifyMode;

use super::check::dns1123_subdomain;
use super::check::{Checker, line_of};
use super::raw;

/// `source.verify`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyConfig {
    pub mode: VerifyMode,
    pub keys: VerifyKeys,
}

/// Where the trusted keys are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyKeys {
    /// `keys.secretRef`: every entry of a Secret, read at each pass. The namespace is
    /// filled in by resolution (an App's own, or the file's, or the inventory's).
    Secret {
        name: String,
        namespace: Option<String>,
    },
    /// `keys.files`: key files on tether's disk (configuration file only).
    Files(Vec<PathBuf>),
}

pub(super) fn resolve_verify(
    raw: &raw::S<raw::Verify>,
    path: &str,
    check: &mut Checker,
) -> VerifyConfig {
    let v = &raw.value;
    let mode = match &v.mode {
        None => VerifyMode::Head,
        Some(mode) => VerifyMode::parse(&mode.value).unwrap_or_else(|| {
            check.report(
                format!("{path}.mode"),
                line_of(mode),
                format!("{:?}: must be head or all-since-last", mode.value),
            );
            VerifyMode::Head
        }),
    };
    let at = format!("{path}.keys");
    let keys = &v.keys.value;
    let keys = match (&keys.secret_ref, keys.files.is_empty()) {
        (Some(r), true) => {
            if let Err(message) = dns1123_subdomain(&r.value.name.value) {
                check.report(
                    format!("{at}.secretRef.name"),
                    line_of(&r.value.name),
                    message,
                );
            }
            if let Some(ns) = &r.value.namespace {
                check.label(&format!("{at}.secretRef.namespace"), ns, 63, "");
            }
            VerifyKeys::Secret {
                name: r.value.name.value.clone(),
                namespace: r.value.namespace.as_ref().map(|n| n.value.clone()),
            }
        }
        (None, false) => {
            for (i, file) in keys.files.iter().enumerate() {
                check.non_empty(&format!("{at}.files[{i}]"), file);
            }
            VerifyKeys::Files(keys.files.iter().map(|f| PathBuf::from(&f.value)).collect())
        }
        (Some(_), false) | (None, true) => {
            check.report(
                at,
                line_of(&v.keys),
                "name the trusted keys: either secretRef or files",
            );
            VerifyKeys::Files(Vec::new())
        }
    };
    VerifyConfig { mode, keys }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, app_from_spec};

    fn source(verify: &str) -> Result<Config, String> {
        let text = format!(
            "inventoryNamespace: ops\napps:\n- name: web\n  source:\n    repo: git://h/r.git\n    verify: {verify}\n"
        );
        Config::parse(&text, "tether.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn a_file_apps_keys_are_files_or_a_secret_of_the_inventory_namespace() {
        let config = source("{keys: {files: [/etc/keys/a.asc]}}").expect("loads");
        assert_eq!(
            config.apps[0].source.verify,
            Some(VerifyConfig {
                mode: VerifyMode::Head,
                keys: VerifyKeys::Files(vec![PathBuf::from("/etc/keys/a.asc")]),
            })
        );
        let config =
            source("{mode: all-since-last, keys: {secretRef: {name: signers}}}").expect("loads");
        assert_eq!(
            config.apps[0].source.verify,
            Some(VerifyConfig {
                mode: VerifyMode::AllSinceLast,
                keys: VerifyKeys::Secret {
                    name: "signers".into(),
                    namespace: Some("ops".into()),
                },
            })
        );
    }

    #[test]
    fn a_bad_mode_and_keys_named_twice_or_not_at_all_are_refused_by_field() {
        let err = source("{mode: tip, keys: {files: [a]}}").expect_err("mode");
        assert!(
            err.contains("apps[0].source.verify.mode: \"tip\": must be head or all-since-last"),
            "{err}"
        );
        let err = source("{keys: {files: [a], secretRef: {name: s}}}").expect_err("both");
        assert!(
            err.contains("apps[0].source.verify.keys: name the trusted keys"),
            "{err}"
        );
        let err = source("{keys: {}}").expect_err("neither");
        assert!(
            err.contains("apps[0].source.verify.keys: name the trusted keys"),
            "{err}"
        );
    }

    #[test]
    fn an_app_reads_its_keys_from_its_own_namespace_only() {
        let files = serde_json::json!({"source": {"repo": "https://h/r.git", "verify": {"keys": {"files": ["/etc/passwd"]}}}});
        let err = app_from_spec("team.web", &files)
            .expect_err("files")
            .to_string();
        assert!(
            err.contains("spec.source.verify.keys.files: an App cannot read tether's files"),
            "{err}"
        );
        let other = serde_json::json!({"source": {"repo": "https://h/r.git", "verify": {"keys": {"secretRef": {"name": "s", "namespace": "ops"}}}}});
        let err = app_from_spec("team.web", &other)
            .expect_err("namespace")
            .to_string();
        assert!(
            err.contains("spec.source.verify.keys.secretRef.namespace"),
            "{err}"
        );
        let own = serde_json::json!({"source": {"repo": "https://h/r.git", "verify": {"keys": {"secretRef": {"name": "s"}}}}});
        let app = app_from_spec("team.web", &own).expect("loads");
        // The Secret is read in the App's namespace, whatever resolution filled in.
        assert_eq!(app.tenant_namespace.as_deref(), Some("team"));
        assert!(matches!(
            app.source.verify.map(|v| v.keys),
            Some(VerifyKeys::Secret { name, .. }) if name == "s"
        ));
    }
}
