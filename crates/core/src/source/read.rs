//! Read the files under one path of one commit, straight from the object database.
//!
//! Only the subtree at the path is walked and blobs are read one at a time, so reading a
//! small path of a large repository never loads the whole tree or its history.

use git2::{ObjectType, Oid, Repository, Tree};

use super::SourceError;

/// Largest file read from a repository. Manifests are small; Kubernetes itself caps an
/// object at ~1.5 MiB (etcd's default request limit), so anything above a few MiB is a
/// mistake (a binary, a dump) that should not be loaded into memory. 8 MiB leaves room
/// for large generated CRD bundles.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// How far a chain of symlinks is followed before giving up (Linux's own limit for one
/// path component is 40; chains in manifest repositories are one or two links long).
const MAX_SYMLINK_HOPS: usize = 8;

const MODE_TREE: i32 = 0o040000;
const MODE_SYMLINK: i32 = 0o120000;
const MODE_SUBMODULE: i32 = 0o160000;

/// One file of a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path from the repository root, `/`-separated (e.g. `apps/web/deploy.yaml`): what
    /// an error message should name.
    pub path: String,
    /// The file's content. For a symlink, the content of the file it points to (empty
    /// when it points to a directory, whose files are listed on their own).
    pub bytes: Vec<u8>,
    /// Regular file or symlink.
    pub kind: FileKind,
}

/// What a [`SourceFile`] is in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileKind {
    /// A regular (or executable) file.
    Regular,
    /// A symlink whose target, resolved from the repository root, stays inside the path
    /// root. `target` is the resolved repository path.
    Symlink { target: String },
}

/// Split a user-given path into components, refusing anything that climbs out.
pub(crate) fn normalize_root(path: &str) -> Result<Vec<String>, SourceError> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(SourceError::OutsideRoot {
                    file: path.to_string(),
                    root: String::new(),
                    message: "a source path may not contain `..`".into(),
                });
            }
            p => parts.push(p.to_string()),
        }
    }
    Ok(parts)
}

/// Does `root` exist in the commit `sha`? (Checked at sync time, so a revision that
/// lacks the path is never handed downstream as an empty one.)
pub(crate) fn check_path(repo: &Repository, sha: Oid, root: &str) -> Result<(), SourceError> {
    let parts = normalize_root(root)?;
    if parts.is_empty() {
        return Ok(());
    }
    let mut tree = repo
        .find_commit(sha)
        .and_then(|c| c.tree())
        .map_err(git_err)?;
    // Walk one component at a time: a name absent from its tree is a missing path, but
    // a listed object that cannot be loaded is a damaged clone (`Git`, which the sync
    // repairs), not a path the user got wrong.
    for (i, part) in parts.iter().enumerate() {
        let Some((id, mode)) = tree.get_name(part).map(|e| (e.id(), e.filemode())) else {
            return Err(SourceError::PathMissing {
                path: root.to_string(),
                sha: sha.to_string(),
            });
        };
        if i + 1 == parts.len() {
            if mode == MODE_TREE {
                repo.find_tree(id).map_err(git_err)?;
            } else {
                repo.odb()
                    .and_then(|odb| odb.read_header(id))
                    .map_err(git_err)?;
            }
            return Ok(());
        }
        if mode != MODE_TREE {
            return Err(SourceError::PathMissing {
                path: root.to_string(),
                sha: sha.to_string(),
            });
        }
        tree = repo.find_tree(id).map_err(git_err)?;
    }
    Ok(())
}

/// Read every file under `root` at commit `sha`, sorted by path.
pub(crate) fn read_tree(
    repo: &Repository,
    sha: Oid,
    root: &str,
    limit: u64,
) -> Result<Vec<SourceFile>, SourceError> {
    let parts = normalize_root(root)?;
    let root_str = parts.join("/");
    let commit_tree = repo
        .find_commit(sha)
        .and_then(|c| c.tree())
        .map_err(git_err)?;
    let odb = repo.odb().map_err(git_err)?;
    let reader = Reader {
        repo,
        odb: &odb,
        commit_tree: &commit_tree,
        root: &root_str,
        limit,
    };
    let mut files = Vec::new();
    if parts.is_empty() {
        reader.walk(commit_tree.id(), String::new(), &mut files)?;
    } else {
        let entry = commit_tree
            .get_path(std::path::Path::new(&root_str))
            .map_err(|_| SourceError::PathMissing {
                path: root.to_string(),
                sha: sha.to_string(),
            })?;
        if entry.filemode() == MODE_TREE {
            reader.walk(entry.id(), format!("{root_str}/"), &mut files)?;
        } else {
            reader.entry(&root_str, entry.id(), entry.filemode(), &mut files)?;
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

struct Reader<'r> {
    repo: &'r Repository,
    odb: &'r git2::Odb<'r>,
    commit_tree: &'r Tree<'r>,
    root: &'r str,
    limit: u64,
}

impl Reader<'_> {
    fn walk(
        &self,
        tree: Oid,
        prefix: String,
        out: &mut Vec<SourceFile>,
    ) -> Result<(), SourceError> {
        let mut stack = vec![(tree, prefix)];
        while let Some((oid, prefix)) = stack.pop() {
            let tree = self.repo.find_tree(oid).map_err(git_err)?;
            for entry in tree.iter() {
                let name = String::from_utf8_lossy(entry.name_bytes());
                let path = format!("{prefix}{name}");
                if entry.filemode() == MODE_TREE {
                    stack.push((entry.id(), format!("{path}/")));
                } else {
                    self.entry(&path, entry.id(), entry.filemode(), out)?;
                }
            }
        }
        Ok(())
    }

    fn entry(
        &self,
        path: &str,
        oid: Oid,
        mode: i32,
        out: &mut Vec<SourceFile>,
    ) -> Result<(), SourceError> {
        match mode {
            // A submodule is another repository's commit: nothing to read here.
            MODE_SUBMODULE => Ok(()),
            MODE_SYMLINK => {
                let (target, bytes) = self.follow(path, oid)?;
                out.push(SourceFile {
                    path: path.to_string(),
                    bytes,
                    kind: FileKind::Symlink { target },
                });
                Ok(())
            }
            _ => {
                let bytes = self.blob(path, oid)?;
                out.push(SourceFile {
                    path: path.to_string(),
                    bytes,
                    kind: FileKind::Regular,
                });
                Ok(())
            }
        }
    }

    /// Read a blob, checking its size from the object header before loading it.
    fn blob(&self, path: &str, oid: Oid) -> Result<Vec<u8>, SourceError> {
        let (size, _) = self.odb.read_header(oid).map_err(git_err)?;
        let size = size as u64;
        if size > self.limit {
            return Err(SourceError::FileTooLarge {
                file: path.to_string(),
                size,
                limit: self.limit,
            });
        }
        let blob = self.repo.find_blob(oid).map_err(git_err)?;
        Ok(blob.content().to_vec())
    }

    /// Resolve a symlink inside the path root; return its resolved path and content.
    fn follow(&self, link: &str, oid: Oid) -> Result<(String, Vec<u8>), SourceError> {
        let outside = |message: String| SourceError::OutsideRoot {
            file: link.to_string(),
            root: self.root.to_string(),
            message,
        };
        let mut current = link.to_string();
        let mut target_oid = oid;
        for _ in 0..MAX_SYMLINK_HOPS {
            let raw = self.blob(&current, target_oid)?;
            let target = String::from_utf8_lossy(&raw).into_owned();
            if target.starts_with('/') {
                return Err(outside(format!("symlink to absolute path {target:?}")));
            }
            let mut parts: Vec<&str> = current.split('/').collect();
            parts.pop();
            for part in target.split('/') {
                match part {
                    "" | "." => {}
                    ".." => {
                        if parts.pop().is_none() {
                            return Err(outside(format!(
                                "symlink to {target:?} leaves the repository"
                            )));
                        }
                    }
                    p => parts.push(p),
                }
            }
            let resolved = parts.join("/");
            let inside = self.root.is_empty()
                || resolved == self.root
                || resolved.starts_with(&format!("{}/", self.root));
            if !inside {
                return Err(outside(format!(
                    "symlink to {target:?} resolves to {resolved:?}"
                )));
            }
            let entry = if resolved.is_empty() {
                return Ok((resolved, Vec::new()));
            } else {
                self.commit_tree
                    .get_path(std::path::Path::new(&resolved))
                    .map_err(|_| {
                        outside(format!(
                            "symlink to {target:?}: {resolved:?} does not exist"
                        ))
                    })?
            };
            match entry.kind() {
                Some(ObjectType::Tree) => return Ok((resolved, Vec::new())),
                _ if entry.filemode() == MODE_SYMLINK => {
                    current = resolved;
                    target_oid = entry.id();
                }
                _ => {
                    let bytes = self.blob(&resolved, entry.id())?;
                    return Ok((resolved, bytes));
                }
            }
        }
        Err(outside(format!(
            "more than {MAX_SYMLINK_HOPS} symlinks in a chain"
        )))
    }
}

pub(crate) fn git_err(e: git2::Error) -> SourceError {
    SourceError::Git {
        message: e.message().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_paths_are_normalized_and_dotdot_refused() {
        assert_eq!(normalize_root("").ok(), Some(vec![]));
        assert_eq!(
            normalize_root("./apps//web/").ok(),
            Some(vec!["apps".to_string(), "web".to_string()])
        );
        assert!(matches!(
            normalize_root("apps/../../etc"),
            Err(SourceError::OutsideRoot { .. })
        ));
    }
}
