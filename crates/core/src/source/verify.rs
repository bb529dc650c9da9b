//! Signed commits (issue #27): before a revision is handed to the render stage, the
//! commit (or the annotated tag a `ref: v1.2.3` names) is checked against the keys the
//! app trusts; with [`VerifyMode::AllSinceLast`] every first-parent commit since the
//! last applied revision is too. The signatures are checked by [`super::signature`];
//! this module reads the objects from the clone and keeps each verdict per object and
//! key set, so a pass over a revision already checked verifies nothing again.
//!
//! First parent, not every commit: what a branch applies is each tree its tip pointed
//! at, and those are the first-parent chain; a merge commit's signature vouches for the
//! tree it brings in (Argo CD checks the tip only, Flux the tip or the tag).

use std::collections::HashMap;
use std::sync::Arc;

use git2::{Oid, Repository};
use parking_lot::Mutex;

use super::read::git_err;
use super::signature::{ObjectKind, Signer, TrustedKeys, VerifyFailure, verify_object};
use super::{Revision, Source, SourceCache, SourceError, refs};

/// Most commits one check walks since the last applied revision. A branch moves by a
/// few commits between passes; a thousand unsigned-history commits to check means the
/// last applied revision is far behind or the history was rewritten, which a person
/// should look at (the check then fails, nothing is applied).
pub const MAX_COMMITS_PER_CHECK: usize = 1000;

/// Verdicts kept per cache before it starts over: each is a few hundred bytes, and a
/// fleet's apps see far fewer new commits between restarts.
const MAX_VERDICTS: usize = 10_000;

/// Which commits must be signed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VerifyMode {
    /// The commit to apply (or the annotated tag the reference names).
    #[default]
    Head,
    /// That, and every first-parent commit since the last applied revision.
    AllSinceLast,
}

impl VerifyMode {
    /// The mode as the configuration spells it (`head`, `all-since-last`).
    pub fn parse(text: &str) -> Option<VerifyMode> {
        match text {
            "head" => Some(VerifyMode::Head),
            "all-since-last" => Some(VerifyMode::AllSinceLast),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VerifyMode::Head => "head",
            VerifyMode::AllSinceLast => "all-since-last",
        }
    }
}

/// What a source's revisions must satisfy.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyPolicy {
    pub mode: VerifyMode,
    pub keys: TrustedKeys,
}

/// A revision that passed: who signed what was checked at its tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// `commit <sha>` or `tag <name>`.
    pub object: String,
    pub signer: Signer,
    /// Objects whose signatures the check looked at (kept verdicts included).
    pub checked: usize,
}

/// Why a revision is not applied.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A commit or tag is unsigned, or signed by a key not trusted, or its signature
    /// does not verify. Not retryable: it needs a new commit or other keys.
    #[error("{object} {failure}")]
    Refused {
        /// `commit <sha>` or `tag <name>`.
        object: String,
        failure: VerifyFailure,
    },
    /// Not retryable: the last applied revision is too far behind (or was rewritten).
    #[error(
        "more than {MAX_COMMITS_PER_CHECK} commits since the last applied revision {since}: not checked"
    )]
    TooManyCommits { since: String },
    /// The clone could not be read; as the source stage's own errors.
    #[error("{0}")]
    Source(#[from] SourceError),
}

impl VerifyError {
    /// Whether trying again later can help without a new commit or other keys.
    pub fn is_retryable(&self) -> bool {
        match self {
            VerifyError::Source(err) => err.is_retryable(),
            VerifyError::Refused { .. } | VerifyError::TooManyCommits { .. } => false,
        }
    }

    /// The status reason of `SourceVerified=False`.
    pub fn reason(&self) -> &'static str {
        match self {
            VerifyError::Refused { .. } | VerifyError::TooManyCommits { .. } => {
                "VerificationFailed"
            }
            VerifyError::Source(err) => err.reason(),
        }
    }
}

type Kept = HashMap<([u8; 32], Oid), Result<Signer, VerifyFailure>>;

/// Verdicts kept per object and key set. Cheap to clone: clones share the verdicts.
#[derive(Debug, Default, Clone)]
pub struct Verdicts {
    kept: Arc<Mutex<Kept>>,
}

impl Verdicts {
    /// How many verdicts are kept (what a warm pass adds nothing to).
    pub fn len(&self) -> usize {
        self.kept.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The verdict on object `oid`, checked now if it is not kept.
    fn verdict(
        &self,
        repo: &Repository,
        oid: Oid,
        kind: ObjectKind,
        keys: &TrustedKeys,
    ) -> Result<Result<Signer, VerifyFailure>, SourceError> {
        let key = (keys.digest(), oid);
        if let Some(kept) = self.kept.lock().get(&key) {
            return Ok(kept.clone());
        }
        let odb = repo.odb().map_err(git_err)?;
        let object = odb.read(oid).map_err(git_err)?;
        let verdict = verify_object(kind, object.data(), keys);
        let mut kept = self.kept.lock();
        if kept.len() >= MAX_VERDICTS {
            kept.clear();
        }
        kept.insert(key, verdict.clone());
        Ok(verdict)
    }
}

impl SourceCache {
    /// Checks `revision` of `source` (resolved by its last sync) against `policy`:
    /// the annotated tag its reference names, or the commit; with
    /// [`VerifyMode::AllSinceLast`] also every first-parent commit after `since` (the
    /// last applied commit; without one, the tip alone). Blocking.
    pub fn verify(
        &self,
        source: &Source,
        revision: &Revision,
        policy: &VerifyPolicy,
        since: Option<&str>,
        verdicts: &Verdicts,
    ) -> Result<Verified, VerifyError> {
        let checked = self.in_clone(source, &revision.sha, |repo, tip| {
            Ok(check(repo, &source.reference, tip, policy, since, verdicts))
        });
        checked.map_err(|e| e.redact(&source.url))?
    }
}

/// The check over one clone: the tip first (so its signer is reported), then the
/// chain since the last applied commit, oldest last.
fn check(
    repo: &Repository,
    reference: &str,
    tip: Oid,
    policy: &VerifyPolicy,
    since: Option<&str>,
    verdicts: &Verdicts,
) -> Result<Verified, VerifyError> {
    let keys = &policy.keys;
    let (object, kind, oid) = match refs::annotated_tag(repo, reference)? {
        Some(tag) => (format!("tag {reference}"), ObjectKind::Tag, tag),
        None => (format!("commit {tip}"), ObjectKind::Commit, tip),
    };
    let signer = verdicts
        .verdict(repo, oid, kind, keys)?
        .map_err(|failure| VerifyError::Refused {
            object: object.clone(),
            failure,
        })?;
    let mut checked = 1;
    let since = since.and_then(|sha| Oid::from_str(sha).ok());
    if let (VerifyMode::AllSinceLast, Some(since)) = (policy.mode, since)
        && since != tip
    {
        for oid in first_parents_since(repo, tip, since)? {
            if oid == tip && kind == ObjectKind::Commit {
                continue;
            }
            checked += 1;
            verdicts
                .verdict(repo, oid, ObjectKind::Commit, keys)?
                .map_err(|failure| VerifyError::Refused {
                    object: format!("commit {oid}"),
                    failure,
                })?;
        }
    }
    Ok(Verified {
        object,
        signer,
        checked,
    })
}

/// The first-parent chain from `tip` back to (not including) `since` or any of its
/// ancestors, at most [`MAX_COMMITS_PER_CHECK`] long.
fn first_parents_since(repo: &Repository, tip: Oid, since: Oid) -> Result<Vec<Oid>, VerifyError> {
    let mut walk = repo.revwalk().map_err(git_err)?;
    walk.simplify_first_parent().map_err(git_err)?;
    walk.push(tip).map_err(git_err)?;
    // A last applied commit no longer in the clone (history rewritten and collected)
    // hides nothing: the walk then reaches the cap, and the check fails.
    if repo.find_commit(since).is_ok() {
        walk.hide(since).map_err(git_err)?;
    }
    let mut chain = Vec::new();
    for oid in walk {
        chain.push(oid.map_err(git_err)?);
        if chain.len() > MAX_COMMITS_PER_CHECK {
            return Err(VerifyError::TooManyCommits {
                since: since.to_string(),
            });
        }
    }
    Ok(chain)
}
