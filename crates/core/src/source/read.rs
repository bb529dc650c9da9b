//! Read the files under one path of one commit, straight from the object database.
//!
//! Only the subtree at the path is walked and blobs are read one at a time, so reading a
//! small path of a large repository never loads the whole tree or its history.
//!
//! A repository is hostile input: every tree entry's name is checked as `git fsck`
//! checks it ([`check_entry_name`]) before anything is read under it, and a
//! [`RevisionBudget`] is spent while reading (each blob's size is taken from its
//! header before it is loaded), so a Git bomb (one blob referenced thousands of times
//! through nested trees) fails at the budget instead of filling memory.

use std::cell::Cell;
use std::fmt;

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

/// Most files one read of a revision may hand on. Argo CD has no count of its own (its
/// budget is in bytes); a manifest repository's app path holds tens to hundreds of
/// files, and a whole monorepo read for a kustomization a few thousand, so 20,000 is
/// far above real use and far below what a tree bomb of empty files reaches (8⁵ files
/// from five levels of eight entries).
pub const DEFAULT_MAX_REVISION_FILES: u64 = 20_000;

/// Most bytes one read of a revision may hand on: Argo CD's
/// `reposerver.max.combined.directory.manifests.size` (default `10M`) counts an app's
/// manifests only; a read here also counts every other file under the path (and the
/// whole tree when a kustomization needs it), so about three times that. A 512 × 1 MiB
/// Git bomb stops after 32 blobs, with at most this much loaded.
pub const DEFAULT_MAX_REVISION_BYTES: u64 = 32 * 1024 * 1024;

/// Most Git objects (trees and tree entries) one read may visit: five entries per file
/// of [`DEFAULT_MAX_REVISION_FILES`], so a tree of empty directories or submodule
/// entries, which hands on no file, is bounded too.
pub const DEFAULT_MAX_REVISION_OBJECTS: u64 = 100_000;

/// What one read of a revision may spend: files handed on, bytes loaded, objects
/// visited. Checked while reading, before each object is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevisionBudget {
    /// Files (regular files and symlinks) handed on.
    pub files: u64,
    /// Bytes of blobs loaded (a blob read twice counts twice: the read holds both).
    pub bytes: u64,
    /// Trees loaded and tree entries visited.
    pub objects: u64,
}

impl Default for RevisionBudget {
    fn default() -> Self {
        RevisionBudget {
            files: DEFAULT_MAX_REVISION_FILES,
            bytes: DEFAULT_MAX_REVISION_BYTES,
            objects: DEFAULT_MAX_REVISION_OBJECTS,
        }
    }
}

/// Which part of a [`RevisionBudget`] a read ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetKind {
    Files,
    Bytes,
    Objects,
}

impl fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BudgetKind::Files => "files",
            BudgetKind::Bytes => "bytes",
            BudgetKind::Objects => "Git objects",
        })
    }
}

/// Why `git fsck` (its `badTreeEntry` checks, with `core.protectNTFS` and
/// `core.protectHFS` on) would refuse a tree entry's name, if it would. Such a name
/// joined onto a folder leaves it (`..`), replaces git's own (`.git`, also as Windows
/// and macOS spell it) or cannot be a file name at all.
pub fn check_entry_name(name: &[u8]) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("an empty name");
    }
    if name.contains(&b'/') {
        return Err("a name with `/`");
    }
    if name.contains(&0) {
        return Err("a name with NUL");
    }
    if name == b"." || name == b".." {
        return Err("`.` and `..` are not names");
    }
    if is_dot_git(name) {
        return Err("`.git` (in any spelling) is git's own folder");
    }
    Ok(())
}

/// `.git` in any case; as NTFS reads it (trailing dots and spaces dropped, an
/// alternate data stream after `:`, the 8.3 short name `git~1`); as HFS+ reads it
/// (ignoring the zero-width code points it ignores).
fn is_dot_git(name: &[u8]) -> bool {
    let lower = name.to_ascii_lowercase();
    let ntfs_tail = |rest: &[u8]| rest.iter().all(|b| matches!(b, b' ' | b'.'));
    if let Some(rest) = lower.strip_prefix(b".git") {
        if ntfs_tail(rest) || rest.first() == Some(&b':') {
            return true;
        }
    }
    if let Some(rest) = lower.strip_prefix(b"git~1") {
        if ntfs_tail(rest) {
            return true;
        }
    }
    let Ok(text) = std::str::from_utf8(name) else {
        return false;
    };
    let visible: String = text.chars().filter(|c| !is_hfs_ignorable(*c)).collect();
    visible.eq_ignore_ascii_case(".git")
}

/// The code points HFS+ drops when it compares names (git's `utf8.c` list).
fn is_hfs_ignorable(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

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

/// Split a user-given path into components, refusing anything that climbs out or
/// names git's own folder.
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
            p => {
                check_entry_name(p.as_bytes()).map_err(|why| SourceError::UnsafeEntry {
                    path: path.to_string(),
                    message: why.to_string(),
                })?;
                parts.push(p.to_string());
            }
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

/// The id of the tree (or blob) at `path` in commit `sha`, `None` when the path does
/// not exist there. Equal ids mean equal content, so what a render read is compared
/// between two commits without reading it (`tether diff --base`, and a new commit of
/// a monorepo in `tether serve`).
pub(crate) fn object_id(
    repo: &Repository,
    sha: Oid,
    path: &str,
) -> Result<Option<String>, SourceError> {
    let tree = repo
        .find_commit(sha)
        .and_then(|c| c.tree())
        .map_err(git_err)?;
    let parts = normalize_root(path)?;
    if parts.is_empty() {
        return Ok(Some(tree.id().to_string()));
    }
    Ok(tree
        .get_path(std::path::Path::new(&parts.join("/")))
        .ok()
        .map(|entry| entry.id().to_string()))
}

/// Read every file under `root` at commit `sha`, sorted by path, within `budget`. Every
/// tree entry under `root` is checked ([`check_entry_name`]) before it is read.
pub(crate) fn read_tree(
    repo: &Repository,
    sha: Oid,
    root: &str,
    file_limit: u64,
    budget: RevisionBudget,
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
        file_limit,
        budget,
        spent: Spent::default(),
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

/// What a read has spent of its [`RevisionBudget`] so far.
#[derive(Debug, Default)]
struct Spent {
    files: Cell<u64>,
    bytes: Cell<u64>,
    objects: Cell<u64>,
}

struct Reader<'r> {
    repo: &'r Repository,
    odb: &'r git2::Odb<'r>,
    commit_tree: &'r Tree<'r>,
    root: &'r str,
    file_limit: u64,
    budget: RevisionBudget,
    spent: Spent,
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
            self.spend(BudgetKind::Objects, 1, &prefix)?;
            let tree = self.repo.find_tree(oid).map_err(git_err)?;
            for entry in tree.iter() {
                let name = String::from_utf8_lossy(entry.name_bytes());
                let path = format!("{prefix}{name}");
                self.spend(BudgetKind::Objects, 1, &path)?;
                check_entry_name(entry.name_bytes()).map_err(|why| SourceError::UnsafeEntry {
                    path: path.clone(),
                    message: why.to_string(),
                })?;
                if entry.filemode() == MODE_TREE {
                    stack.push((entry.id(), format!("{path}/")));
                } else {
                    self.entry(&path, entry.id(), entry.filemode(), out)?;
                }
            }
        }
        Ok(())
    }

    /// Count `amount` of `kind` against the budget; past it, the error names the path
    /// being read and the limit.
    fn spend(&self, kind: BudgetKind, amount: u64, path: &str) -> Result<(), SourceError> {
        let (cell, limit) = match kind {
            BudgetKind::Files => (&self.spent.files, self.budget.files),
            BudgetKind::Bytes => (&self.spent.bytes, self.budget.bytes),
            BudgetKind::Objects => (&self.spent.objects, self.budget.objects),
        };
        let total = cell.get().saturating_add(amount);
        if total > limit {
            return Err(SourceError::RevisionTooLarge {
                root: self.root.to_string(),
                at: path.trim_end_matches('/').to_string(),
                kind,
                limit,
            });
        }
        cell.set(total);
        Ok(())
    }

    fn entry(
        &self,
        path: &str,
        oid: Oid,
        mode: i32,
        out: &mut Vec<SourceFile>,
    ) -> Result<(), SourceError> {
        if mode == MODE_SUBMODULE {
            // A submodule is another repository's commit: nothing to read here.
            return Ok(());
        }
        self.spend(BudgetKind::Files, 1, path)?;
        let file = if mode == MODE_SYMLINK {
            let (target, bytes) = self.follow(path, oid)?;
            SourceFile {
                path: path.to_string(),
                bytes,
                kind: FileKind::Symlink { target },
            }
        } else {
            SourceFile {
                path: path.to_string(),
                bytes: self.blob(path, oid)?,
                kind: FileKind::Regular,
            }
        };
        out.push(file);
        Ok(())
    }

    /// Read a blob, checking its size from the object header (against the per-file
    /// limit and the budget) before loading it.
    fn blob(&self, path: &str, oid: Oid) -> Result<Vec<u8>, SourceError> {
        let (size, _) = self.odb.read_header(oid).map_err(git_err)?;
        let size = size as u64;
        if size > self.file_limit {
            return Err(SourceError::FileTooLarge {
                file: path.to_string(),
                size,
                limit: self.file_limit,
            });
        }
        self.spend(BudgetKind::Bytes, size, path)?;
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

    /// Whether each of `names` is refused, a failure naming it.
    fn expect_refused(names: &[&[u8]], refused: bool) {
        for name in names {
            let lossy = String::from_utf8_lossy(name);
            assert_eq!(check_entry_name(name).is_err(), refused, "{lossy:?}");
        }
    }

    #[test]
    fn names_git_fsck_refuses_are_refused() {
        let bad = [
            &b""[..],
            b".",
            b"..",
            b".git",
            b".GIT",
            b".Git",
            b".git.",
            b".git . ",
            b".git::$INDEX_ALLOCATION",
            b"GIT~1",
            b"git~1..",
            "\u{200c}.gi\u{200d}t".as_bytes(),
            ".g\u{feff}IT".as_bytes(),
            b"a/b",
            b"a\0b",
        ];
        expect_refused(&bad, true);
        let good = [
            &b"app.yaml"[..],
            b"...",
            b".gitignore",
            b".github",
            b"git",
            b"git~2",
            b".git-crypt",
            "caf\u{e9}.yaml".as_bytes(),
        ];
        expect_refused(&good, false);
    }

    #[test]
    fn a_source_path_naming_git_is_refused() {
        assert!(matches!(
            normalize_root("apps/.GIT/hooks"),
            Err(SourceError::UnsafeEntry { .. })
        ));
    }
}
