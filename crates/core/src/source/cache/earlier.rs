//! An earlier revision of a source, for a rollback (issue #30): a commit in the
//! history of the revision the source's own credentials resolved, read from the same
//! clone. A commit another source brought into the clone, or one this branch never
//! had, is refused, as for any revision (see `records`).

use git2::{Oid, Repository};

use super::{SourceCache, corrupt};
use crate::source::read::git_err;
use crate::source::{Revision, Source, SourceError};

impl SourceCache {
    /// The revision `sha` of `source`, once it is checked to be the source's last
    /// good revision or one of its ancestors; it is then readable like the source's
    /// own ([`SourceCache::read_files`]).
    pub async fn earlier(&self, source: &Source, sha: &str) -> Result<Revision, SourceError> {
        let (key, head) =
            self.inner
                .records
                .head(source)
                .ok_or_else(|| SourceError::NotVerified {
                    url: source.url.clone(),
                    sha: sha.to_string(),
                })?;
        let dir = self.entry(&key).dir.clone();
        let (url, wanted) = (source.url.clone(), sha.to_string());
        let revision = tokio::task::spawn_blocking(move || {
            let repo = Repository::open_bare(&dir).map_err(|e| corrupt(&url, &e))?;
            let not_ancestor = || SourceError::NotAncestor {
                url: url.clone(),
                sha: wanted.clone(),
                head: head.clone(),
            };
            let oid = Oid::from_str(&wanted).map_err(|_| not_ancestor())?;
            let head_oid = Oid::from_str(&head).map_err(git_err)?;
            let related = oid == head_oid
                || repo
                    .graph_descendant_of(head_oid, oid)
                    .map_err(|_| not_ancestor())?;
            if !related {
                return Err(not_ancestor());
            }
            let commit = repo.find_commit(oid).map_err(|_| not_ancestor())?;
            Ok(Revision {
                sha: oid.to_string(),
                subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or(b""))
                    .into_owned(),
            })
        })
        .await
        .map_err(|e| SourceError::Git {
            message: format!("history check failed: {e}"),
        })?
        .map_err(|e: SourceError| e.redact(&source.url))?;
        self.inner.records.verify(source, &key, &revision.sha);
        Ok(revision)
    }
}
