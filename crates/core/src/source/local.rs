//! A repository already on this machine, read in place: the checkout a CI job runs
//! in. `tether diff --base` compares two of its commits, so it reads them from the
//! job's own object database instead of cloning it into the cache (a pull request's
//! merge commit is often on no branch a clone would fetch).
//!
//! Reads go through the same tree walk as the cache's ([`super::read`]): entry names
//! checked as `git fsck` checks them, files bounded, a [`RevisionBudget`] spent.

use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use super::read::{self, MAX_FILE_BYTES, RevisionBudget, SourceFile, git_err};
use super::{Revision, SourceError};

/// A Git repository on disk (a work tree or a bare repository), opened once: a
/// preview of hundreds of apps looks up thousands of paths in it.
pub struct LocalRepo {
    repo: Repository,
    /// The repository's `.git` directory (or the bare repository itself).
    git_dir: PathBuf,
}

impl std::fmt::Debug for LocalRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRepo")
            .field("git_dir", &self.git_dir)
            .finish_non_exhaustive()
    }
}

impl LocalRepo {
    /// The repository holding `dir`, searched upwards as `git` does.
    pub fn discover(dir: &Path) -> Result<LocalRepo, SourceError> {
        let repo = Repository::discover(dir).map_err(|e| SourceError::Git {
            message: format!("{} is in no Git repository: {}", dir.display(), e.message()),
        })?;
        Ok(LocalRepo {
            git_dir: repo.path().to_path_buf(),
            repo,
        })
    }

    /// The same repository opened again, for another thread: a `git2::Repository`
    /// may move between threads but not be shared by them.
    pub fn reopen(&self) -> Result<LocalRepo, SourceError> {
        let repo = Repository::open(&self.git_dir).map_err(|e| SourceError::Git {
            message: format!("cannot open {}: {}", self.git_dir.display(), e.message()),
        })?;
        Ok(LocalRepo {
            repo,
            git_dir: self.git_dir.clone(),
        })
    }

    /// The work tree's top directory (`None` for a bare repository).
    pub fn work_dir(&self) -> Option<PathBuf> {
        self.repo.workdir().map(Path::to_path_buf)
    }

    /// The URLs of the repository's remotes, for matching the sources that read it.
    pub fn remote_urls(&self) -> Vec<String> {
        let repo = &self.repo;
        let Ok(names) = repo.remotes() else {
            return Vec::new();
        };
        names
            .iter()
            .flatten()
            .flatten()
            .filter_map(|name| Some(repo.find_remote(name).ok()?.url().ok()?.to_string()))
            .collect()
    }

    /// The commit `spec` names, as `git rev-parse` reads it (`HEAD`, `origin/main`,
    /// `main~1`, a SHA or an abbreviation of one, a tag).
    pub fn resolve(&self, spec: &str) -> Result<Revision, SourceError> {
        let commit = self
            .repo
            .revparse_single(spec)
            .and_then(|object| object.peel_to_commit())
            .map_err(|_| SourceError::RefMissing {
                url: self.git_dir.display().to_string(),
                reference: spec.to_string(),
            })?;
        Ok(Revision {
            sha: commit.id().to_string(),
            subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or(b"")).into_owned(),
        })
    }

    /// Every file under `path` at `revision`, as [`super::SourceCache::read_path`]
    /// reads a clone's.
    pub fn read_path(
        &self,
        revision: &Revision,
        path: &str,
    ) -> Result<Vec<SourceFile>, SourceError> {
        let oid = commit_id(revision)?;
        read::read_tree(
            &self.repo,
            oid,
            path,
            MAX_FILE_BYTES,
            RevisionBudget::default(),
        )
    }

    /// The id of the tree (or blob) at `path` in `revision`, `None` when the path
    /// does not exist there. Equal ids mean equal content, so what a render read is
    /// compared between two commits without reading it.
    pub fn object_id(
        &self,
        revision: &Revision,
        path: &str,
    ) -> Result<Option<String>, SourceError> {
        let oid = commit_id(revision)?;
        read::object_id(&self.repo, oid, path)
    }
}

/// The commit `revision` names.
fn commit_id(revision: &Revision) -> Result<Oid, SourceError> {
    Oid::from_str(&revision.sha).map_err(git_err)
}
