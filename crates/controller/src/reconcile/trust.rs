//! Signed commits in the loop (issue #27): before a pass renders the revision its
//! source resolved, the revision is checked against the app's trusted keys
//! (`source.verify`). A verified revision reports `SourceVerified=True` and is what
//! the pass applies; an unsigned or untrusted one is not applied: the app reports
//! `SourceVerified=False` naming the commit and the signer, and passes and heals keep
//! the last verified revision. Verdicts are kept per commit and key set, so a warm
//! pass verifies nothing again; the keys are read at each pass (a Secret rotated
//! takes effect at the next one).

use chrono::Utc;
use tether_core::cluster::Cluster;
use tether_core::source::signature::TrustedKeys;
use tether_core::source::{Revision, SourceCache, Verdicts, VerifyPolicy};
use tether_core::sync::desired::{Verification, verify_revision};

use super::pass::PassError;
use crate::config::{AppConfig, VerifyConfig, VerifyKeys};
use tether_core::report::status::{ConditionStatus, ConditionType, Statuses, reason};

/// An app's signed-commit gate.
#[derive(Debug, Default)]
pub struct Trust {
    config: Option<VerifyConfig>,
    verdicts: Verdicts,
    /// The last revision that passed: what passes and heals apply while a newer one
    /// is refused. Kept in memory only: after a restart, until a revision passes,
    /// nothing is applied.
    verified: Option<Revision>,
}

/// What the pass needs to check a revision.
pub struct Check<'a> {
    pub cluster: &'a Cluster,
    pub sources: &'a SourceCache,
    pub statuses: &'a Statuses,
    pub app: &'a AppConfig,
    /// The last applied commit, for `all-since-last` when none was verified here yet.
    pub applied: Option<&'a str>,
}

impl Trust {
    pub fn new(config: Option<VerifyConfig>) -> Trust {
        Trust {
            config,
            ..Trust::default()
        }
    }

    /// The revision a heal may apply: the last verified one (`None` without
    /// `source.verify`: then the source's own).
    pub fn verified(&self) -> Option<&Revision> {
        self.verified.as_ref()
    }

    pub fn enabled(&self) -> bool {
        self.config.is_some()
    }

    /// The revision a pass applies: `revision` when it passes (or nothing is to be
    /// checked), else the last verified one, else an error (nothing is applied).
    pub async fn check(
        &mut self,
        revision: &Revision,
        at: Check<'_>,
    ) -> Result<Revision, PassError> {
        let Some(config) = &self.config else {
            return Ok(revision.clone());
        };
        let outcome = match read_keys(config, at.cluster, at.app).await {
            Ok(keys) => {
                let policy = VerifyPolicy {
                    mode: config.mode,
                    keys,
                };
                let since = self
                    .verified
                    .as_ref()
                    .map(|r| r.sha.as_str())
                    .or(at.applied);
                let check = Verification {
                    policy: &policy,
                    since,
                    verdicts: &self.verdicts,
                };
                verify_revision(at.sources, &at.app.source(), revision, check)
                    .await
                    .map_err(|err| (err.reason(), err.to_string(), err.is_retryable()))
            }
            Err(message) => Err(("KeysInvalid", message, true)),
        };
        let now = Utc::now();
        match outcome {
            Ok(verified) => {
                let message = format!("{} signed by {}", verified.object, verified.signer);
                at.statuses.update(&at.app.name, |s| {
                    s.set_condition(
                        ConditionType::SourceVerified,
                        ConditionStatus::True,
                        reason::VERIFIED,
                        &message,
                        now,
                    );
                });
                self.verified = Some(revision.clone());
                Ok(revision.clone())
            }
            Err((reason, message, retryable)) => {
                let kept = self.verified.clone();
                let shown = match &kept {
                    Some(last) => format!("{message}; {} stays applied", short(&last.sha)),
                    None => format!("{message}; nothing is applied"),
                };
                tracing::warn!(app = %at.app.name, reason, "source verification failed: {shown}");
                at.statuses.update(&at.app.name, |s| {
                    s.set_condition(
                        ConditionType::SourceVerified,
                        ConditionStatus::False,
                        reason,
                        &shown,
                        now,
                    );
                });
                kept.ok_or(PassError::Unverified { message, retryable })
            }
        }
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// The trusted keys, read now: a Secret's every entry (the App's namespace, or the
/// one resolution filled in), or the configuration's files. The message names the
/// Secret, file or entry, never a key's bytes.
async fn read_keys(
    config: &VerifyConfig,
    cluster: &Cluster,
    app: &AppConfig,
) -> Result<TrustedKeys, String> {
    let entries: Vec<(String, Vec<u8>)> = match &config.keys {
        VerifyKeys::Secret { name, namespace } => {
            let namespace = app
                .tenant_namespace
                .as_deref()
                .or(namespace.as_deref())
                .unwrap_or(tether_schema::ownership::DEFAULT_INVENTORY_NAMESPACE);
            let data = cluster
                .secret_data(namespace, name)
                .await
                .map_err(|e| format!("reading Secret {namespace}/{name}: {e}"))?
                .ok_or_else(|| format!("Secret {namespace}/{name} not found"))?;
            data.into_iter()
                .map(|(key, bytes)| (format!("Secret {namespace}/{name} key {key}"), bytes))
                .collect()
        }
        VerifyKeys::Files(files) => {
            let mut entries = Vec::with_capacity(files.len());
            for file in files {
                let bytes =
                    std::fs::read(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
                entries.push((file.display().to_string(), bytes));
            }
            entries
        }
    };
    TrustedKeys::from_entries(entries.iter().map(|(n, b)| (n.as_str(), b.as_slice())))
        .map_err(|e| e.to_string())
}
