//! What a source's reference names in a clone: the commit it resolves to, and the
//! annotated tag object on the way (whose signature a verified source checks).

use git2::{ObjectType, Oid, Repository};

use super::read::git_err;
use super::{SourceError, is_full_sha};

/// The full ref names a short reference may mean, in the order they are tried: a
/// branch wins over a tag of the same name, as in the fetch's resolution.
fn candidates(reference: &str) -> Vec<String> {
    if reference.starts_with("refs/") {
        vec![reference.to_string()]
    } else {
        vec![
            format!("refs/heads/{reference}"),
            format!("refs/tags/{reference}"),
        ]
    }
}

/// The commit a reference points to in the local clone, `None` when it is not there.
pub(crate) fn resolve_local(
    repo: &Repository,
    reference: &str,
) -> Result<Option<Oid>, SourceError> {
    if is_full_sha(reference) {
        let oid = Oid::from_str(reference).map_err(git_err)?;
        return Ok(repo.find_commit(oid).ok().map(|c| c.id()));
    }
    if follows_default_branch(reference) {
        return match repo.head() {
            Ok(head) => Ok(Some(head.peel_to_commit().map_err(git_err)?.id())),
            Err(e)
                if matches!(
                    e.code(),
                    git2::ErrorCode::UnbornBranch | git2::ErrorCode::NotFound
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(git_err(e)),
        };
    }
    for name in candidates(reference) {
        match repo.find_reference(&name) {
            Ok(r) => {
                let commit = r.peel_to_commit().map_err(git_err)?;
                return Ok(Some(commit.id()));
            }
            Err(e) if e.code() == git2::ErrorCode::NotFound => continue,
            Err(e) => return Err(git_err(e)),
        }
    }
    Ok(None)
}

/// The annotated tag object the reference names, if it names one (not a branch, a
/// commit SHA, `HEAD` or a lightweight tag).
pub(crate) fn annotated_tag(
    repo: &Repository,
    reference: &str,
) -> Result<Option<Oid>, SourceError> {
    if is_full_sha(reference) || follows_default_branch(reference) {
        return Ok(None);
    }
    for name in candidates(reference) {
        match repo.find_reference(&name) {
            Ok(r) => {
                let Some(target) = r.target() else {
                    return Ok(None);
                };
                let kind = repo.find_object(target, None).map_err(git_err)?.kind();
                return Ok((kind == Some(ObjectType::Tag)).then_some(target));
            }
            Err(e) if e.code() == git2::ErrorCode::NotFound => continue,
            Err(e) => return Err(git_err(e)),
        }
    }
    Ok(None)
}

/// `HEAD` (or no reference at all) follows the remote's default branch.
pub(crate) fn follows_default_branch(reference: &str) -> bool {
    reference.is_empty() || reference == "HEAD"
}
