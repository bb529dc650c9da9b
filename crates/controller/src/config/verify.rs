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
