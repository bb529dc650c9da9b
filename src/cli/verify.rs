//! `--verify-key` and `--verify-mode` of `tether diff` and `tether sync` (issue #27):
//! the Git revision must be signed by a trusted key before anything of it is
//! rendered, compared or applied; an unsigned or untrusted one is an error (exit 2).

use std::path::PathBuf;

use tether_core::cluster::Cluster;
use tether_core::source::signature::TrustedKeys;
use tether_core::source::{VerifyMode, VerifyPolicy};

use super::Error;

#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Require the Git revision to be signed by a key in FILE: an armored OpenPGP
    /// public key (`gpg --armor --export`) or an SSH allowed-signers file
    /// (repeatable). An unsigned or untrusted commit is refused and nothing is applied.
    #[arg(long = "verify-key", value_name = "FILE", requires = "repo")]
    pub keys: Vec<PathBuf>,

    /// Which commits must be signed: `head` (the commit, or the annotated tag --ref
    /// names) or `all-since-last` (also every first-parent commit since the revision
    /// the app's inventory records).
    #[arg(long = "verify-mode", value_name = "MODE", default_value = "head", value_parser = parse_mode, requires = "keys")]
    pub mode: VerifyMode,
}

fn parse_mode(text: &str) -> Result<VerifyMode, String> {
    VerifyMode::parse(text).ok_or_else(|| format!("{text:?}: use head or all-since-last"))
}

impl VerifyArgs {
    /// The policy the flags give, `None` without `--verify-key`.
    pub fn policy(&self) -> Result<Option<VerifyPolicy>, Error> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        let mut entries = Vec::with_capacity(self.keys.len());
        for path in &self.keys {
            let bytes = std::fs::read(path).map_err(|source| Error::VerifyKeyFile {
                path: path.clone(),
                source,
            })?;
            entries.push((path.display().to_string(), bytes));
        }
        let keys = TrustedKeys::from_entries(
            entries
                .iter()
                .map(|(name, bytes)| (name.as_str(), bytes.as_slice())),
        )
        .map_err(Error::VerifyKey)?;
        Ok(Some(VerifyPolicy {
            mode: self.mode,
            keys,
        }))
    }
}

/// The commit `app`'s inventory says was applied last, which `all-since-last` checks
/// from; none when the mode does not need it, or the app was never synced.
pub async fn since(
    policy: Option<&VerifyPolicy>,
    cluster: &Cluster,
    app: &str,
    inventory_namespace: &str,
) -> Option<String> {
    if policy?.mode != VerifyMode::AllSinceLast {
        return None;
    }
    tether_core::sync::inventory::read(cluster, app, inventory_namespace)
        .await
        .ok()?
        .revision
}
