//! The generator stage of an AppSet: each generator turns what it reads (its list, a
//! Git tree, the cluster Secrets) into parameter sets. Pure: the service fetches the
//! trees and lists the Secrets ([`Facts`]); nothing in here does I/O.
//!
//! Parameter names are Argo CD's, so its users' templates carry over:
//! - a Git directory: `path`, `path.basename`, `path.basenameNormalized`, `path[N]`;
//! - a Git file: the file's keys (nested keys joined by `.`, list items as `key[N]`),
//!   and `path` (the file's directory), `path.basename`, `path.basenameNormalized`,
//!   `path.filename`, `path.filenameNormalized`, `path[N]`;
//! - a list element: its keys, flattened the same way;
//! - a cluster: `name` (the kubeconfig Secret's) and `metadata.labels.<key>`.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::Value;
use tether_core::source::SourceFile;

/// The label that makes a kubeconfig Secret a cluster for the `clusters` generator
/// (Argo CD's is `argocd.argoproj.io/secret-type: cluster`; the value must be "true").
pub const CLUSTER_SECRET_LABEL: &str = "tether.dev/cluster";

/// One parameter set: the values a template reads, the cluster it came from (its
/// kubeconfig Secret, which becomes the App's destination), and where it came from,
/// for errors ("directory teams/a").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSet {
    pub values: BTreeMap<String, String>,
    pub cluster: Option<String>,
    pub origin: String,
}

/// One repository at one revision, as a Git generator names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GitRef {
    pub repo: String,
    /// A branch, tag, commit or `HEAD` (the default branch).
    pub revision: String,
    /// The Secret of the AppSet's namespace holding the credentials (the keys of an
    /// App's `source.credentials.secretRef`); anonymous without.
    pub secret: Option<String>,
}

/// A kubeconfig Secret labelled [`CLUSTER_SECRET_LABEL`] in the AppSet's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSecret {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// What the generators read, fetched by the service before they run.
#[derive(Debug, Default)]
pub struct Facts {
    /// Every file of each repository's tree at its revision.
    pub trees: HashMap<GitRef, Vec<SourceFile>>,
    pub clusters: Vec<ClusterSecret>,
}

/// A generator, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Generator {
    List(Vec<Value>),
    /// Directories of a tree matching one of `include` and none of `exclude`.
    GitDirectories {
        git: GitRef,
        include: Vec<String>,
        exclude: Vec<String>,
    },
    /// Files of a tree matching one of the patterns, read as JSON or YAML.
    GitFiles {
        git: GitRef,
        paths: Vec<String>,
    },
    /// Cluster Secrets whose labels include every one of these.
    Clusters(BTreeMap<String, String>),
    /// Every set of the first joined with every set of the second.
    Matrix(Box<Generator>, Box<Generator>),
    /// The first generator's sets, each overlaid with the later generators' sets that
    /// agree with it on every key of `keys`.
    Merge {
        keys: Vec<String>,
        generators: Vec<Generator>,
    },
}

/// Why a generator made no parameter sets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeneratorError {
    /// The generator's own spec is wrong: needs a change, not a retry.
    #[error("{path}: {message}")]
    Spec { path: String, message: String },
    /// A file of the tree is no parameter set: needs a commit, not a retry.
    #[error("{repo}: {file}: {message}")]
    File {
        repo: String,
        file: String,
        message: String,
    },
    /// Two generators of a matrix give one parameter two values.
    #[error("matrix: {first} and {second} both set parameter {key:?}")]
    Conflict {
        key: String,
        first: String,
        second: String,
    },
    /// The tree has not been fetched (yet): retryable.
    #[error("{0}: not fetched yet")]
    NotFetched(String),
}

impl GeneratorError {
    /// Whether the next pass may succeed without a change to the AppSet or the repository.
    pub fn is_retryable(&self) -> bool {
        matches!(self, GeneratorError::NotFetched(_))
    }
}

/// The spec of one generator, as written (exactly one key set).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGenerator {
    list: Option<RawList>,
    git: Option<RawGit>,
    clusters: Option<RawClusters>,
    matrix: Option<RawNested>,
    merge: Option<RawMerge>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawList {
    elements: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGit {
    repo: String,
    #[serde(default)]
    revision: Option<String>,
    #[serde(default)]
    directories: Vec<RawDirectory>,
    #[serde(default)]
    files: Vec<RawFile>,
    #[serde(default)]
    credentials: Option<RawCredentials>,
}

/// Only a Secret of the AppSet's own namespace: never tether's environment or files.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCredentials {
    secret_ref: RawSecretRef,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecretRef {
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDirectory {
    path: String,
    #[serde(default)]
    exclude: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    path: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClusters {
    #[serde(default)]
    selector: RawSelector,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSelector {
    #[serde(default)]
    match_labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNested {
    generators: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawMerge {
    merge_keys: Vec<String>,
    generators: Vec<Value>,
}

fn spec_error(path: &str, message: impl Into<String>) -> GeneratorError {
    GeneratorError::Spec {
        path: path.to_string(),
        message: message.into(),
    }
}

impl Generator {
    /// Parses one generator at `path` (`spec.generators[0]`), naming the field at fault.
    pub fn parse(value: &Value, path: &str) -> Result<Generator, GeneratorError> {
        let raw: RawGenerator = serde_path_to_error::deserialize(value).map_err(|e| {
            let at = e.path().to_string();
            let at = if at == "." {
                path.to_string()
            } else {
                format!("{path}.{at}")
            };
            spec_error(&at, e.into_inner().to_string())
        })?;
        let set = [
            raw.list.is_some(),
            raw.git.is_some(),
            raw.clusters.is_some(),
            raw.matrix.is_some(),
            raw.merge.is_some(),
        ];
        if set.iter().filter(|s| **s).count() != 1 {
            return Err(spec_error(
                path,
                "needs exactly one of list, git, clusters, matrix, merge",
            ));
        }
        let nested = |generators: &[Value], at: &str| {
            generators
                .iter()
                .enumerate()
                .map(|(i, g)| Generator::parse(g, &format!("{at}.generators[{i}]")))
                .collect::<Result<Vec<_>, _>>()
        };
        if let Some(list) = raw.list {
            return Ok(Generator::List(list.elements));
        }
        if let Some(git) = raw.git {
            return parse_git(git, &format!("{path}.git"));
        }
        if let Some(clusters) = raw.clusters {
            return Ok(Generator::Clusters(clusters.selector.match_labels));
        }
        if let Some(matrix) = raw.matrix {
            let at = format!("{path}.matrix");
            let mut children = nested(&matrix.generators, &at)?;
            if children.len() != 2 {
                return Err(spec_error(
                    &format!("{at}.generators"),
                    "needs exactly two generators",
                ));
            }
            let second = children.pop().map(Box::new);
            let first = children.pop().map(Box::new);
            if let (Some(first), Some(second)) = (first, second) {
                return Ok(Generator::Matrix(first, second));
            }
        }
        if let Some(merge) = raw.merge {
            let at = format!("{path}.merge");
            let generators = nested(&merge.generators, &at)?;
            if generators.len() < 2 {
                return Err(spec_error(
                    &format!("{at}.generators"),
                    "needs at least two generators",
                ));
            }
            if merge.merge_keys.is_empty() {
                return Err(spec_error(
                    &format!("{at}.mergeKeys"),
                    "needs at least one key",
                ));
            }
            return Ok(Generator::Merge {
                keys: merge.merge_keys,
                generators,
            });
        }
        Err(spec_error(path, "needs exactly one generator"))
    }

    /// The repositories this generator reads.
    pub fn git_refs(&self, out: &mut Vec<GitRef>) {
        match self {
            Generator::GitDirectories { git, .. } | Generator::GitFiles { git, .. } => {
                if !out.contains(git) {
                    out.push(git.clone());
                }
            }
            Generator::Matrix(a, b) => {
                a.git_refs(out);
                b.git_refs(out);
            }
            Generator::Merge { generators, .. } => generators.iter().for_each(|g| g.git_refs(out)),
            Generator::List(_) | Generator::Clusters(_) => {}
        }
    }

    /// Whether it reads the cluster Secrets.
    pub fn reads_clusters(&self) -> bool {
        match self {
            Generator::Clusters(_) => true,
            Generator::Matrix(a, b) => a.reads_clusters() || b.reads_clusters(),
            Generator::Merge { generators, .. } => generators.iter().any(Generator::reads_clusters),
            _ => false,
        }
    }

    /// The parameter sets, in a stable order.
    pub fn generate(&self, facts: &Facts) -> Result<Vec<ParamSet>, GeneratorError> {
        match self {
            Generator::List(elements) => Ok(elements
                .iter()
                .enumerate()
                .map(|(i, element)| ParamSet {
                    values: flatten(element),
                    cluster: None,
                    origin: format!("list element {i}"),
                })
                .collect()),
            Generator::GitDirectories {
                git,
                include,
                exclude,
            } => {
                let tree = tree(facts, git)?;
                Ok(directories(tree)
                    .into_iter()
                    .filter(|d| include.iter().any(|p| glob_match(p, d)))
                    .filter(|d| !exclude.iter().any(|p| glob_match(p, d)))
                    .map(|d| ParamSet {
                        values: path_params(&d),
                        cluster: None,
                        origin: format!("directory {d}"),
                    })
                    .collect())
            }
            Generator::GitFiles { git, paths } => {
                let tree = tree(facts, git)?;
                let mut sets = Vec::new();
                for file in tree
                    .iter()
                    .filter(|f| paths.iter().any(|p| glob_match(p, &f.path)))
                {
                    sets.extend(file_sets(git, file)?);
                }
                Ok(sets)
            }
            Generator::Clusters(match_labels) => Ok(facts
                .clusters
                .iter()
                .filter(|c| match_labels.iter().all(|(k, v)| c.labels.get(k) == Some(v)))
                .map(|c| {
                    let mut values: BTreeMap<String, String> = c
                        .labels
                        .iter()
                        .map(|(k, v)| (format!("metadata.labels.{k}"), v.clone()))
                        .collect();
                    values.insert("name".into(), c.name.clone());
                    ParamSet {
                        values,
                        cluster: Some(c.name.clone()),
                        origin: format!("cluster {}", c.name),
                    }
                })
                .collect()),
            Generator::Matrix(a, b) => {
                let (left, right) = (a.generate(facts)?, b.generate(facts)?);
                let mut sets = Vec::with_capacity(left.len() * right.len());
                for l in &left {
                    for r in &right {
                        sets.push(join(l, r)?);
                    }
                }
                Ok(sets)
            }
            Generator::Merge { keys, generators } => {
                let mut sets = Vec::new();
                for (i, g) in generators.iter().enumerate() {
                    let next = g.generate(facts)?;
                    if i == 0 {
                        sets = next;
                    } else {
                        overlay(&mut sets, &next, keys);
                    }
                }
                Ok(sets)
            }
        }
    }
}

fn parse_git(git: RawGit, path: &str) -> Result<Generator, GeneratorError> {
    let reference = GitRef {
        revision: git
            .revision
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "HEAD".into()),
        repo: git.repo,
        secret: git.credentials.map(|c| c.secret_ref.name),
    };
    if reference.repo.is_empty() {
        return Err(spec_error(&format!("{path}.repo"), "must not be empty"));
    }
    for (i, pattern) in git
        .files
        .iter()
        .map(|f| &f.path)
        .chain(git.directories.iter().map(|d| &d.path))
        .enumerate()
    {
        if pattern.is_empty() || pattern.starts_with('/') || pattern.split('/').any(|s| s == "..") {
            return Err(spec_error(
                &format!(
                    "{path}.{}",
                    if i < git.files.len() {
                        "files"
                    } else {
                        "directories"
                    }
                ),
                format!("{pattern:?}: a pattern is a path inside the repository"),
            ));
        }
    }
    match (git.directories.is_empty(), git.files.is_empty()) {
        (false, true) => {
            let (exclude, include): (Vec<_>, Vec<_>) =
                git.directories.into_iter().partition(|d| d.exclude);
            if include.is_empty() {
                return Err(spec_error(
                    &format!("{path}.directories"),
                    "needs a path that is not `exclude: true`",
                ));
            }
            Ok(Generator::GitDirectories {
                git: reference,
                include: include.into_iter().map(|d| d.path).collect(),
                exclude: exclude.into_iter().map(|d| d.path).collect(),
            })
        }
        (true, false) => Ok(Generator::GitFiles {
            git: reference,
            paths: git.files.into_iter().map(|f| f.path).collect(),
        }),
        _ => Err(spec_error(path, "needs exactly one of directories, files")),
    }
}

fn tree<'f>(facts: &'f Facts, git: &GitRef) -> Result<&'f Vec<SourceFile>, GeneratorError> {
    facts.trees.get(git).ok_or_else(|| {
        GeneratorError::NotFetched(format!(
            "{}@{}",
            tether_core::source::redact(&git.repo),
            git.revision
        ))
    })
}

/// Every directory of a tree holding a file (at any depth), sorted.
fn directories(tree: &[SourceFile]) -> Vec<String> {
    let mut dirs = std::collections::BTreeSet::new();
    for file in tree {
        let mut path = file.path.as_str();
        while let Some((parent, _)) = path.rsplit_once('/') {
            if !dirs.insert(parent.to_string()) {
                break;
            }
            path = parent;
        }
    }
    dirs.into_iter().collect()
}

/// The parameters of a directory: `path`, `path.basename`, `path.basenameNormalized`,
/// `path[N]`.
fn path_params(dir: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let basename = dir.rsplit('/').next().unwrap_or(dir);
    values.insert("path".into(), dir.to_string());
    values.insert("path.basename".into(), basename.to_string());
    values.insert("path.basenameNormalized".into(), normalize(basename));
    for (i, segment) in dir.split('/').filter(|s| !s.is_empty()).enumerate() {
        values.insert(format!("path[{i}]"), segment.to_string());
    }
    values
}

/// A name made fit for Kubernetes as Argo CD does it: lower case, anything not
/// alphanumeric, `-` or `.` turned into `-`.
fn normalize(name: &str) -> String {
    name.chars()
        .map(|c| match c.to_ascii_lowercase() {
            c if c.is_ascii_alphanumeric() || c == '-' || c == '.' => c,
            _ => '-',
        })
        .collect()
}

/// The parameter sets of one file: the file, or each item of a top-level list.
fn file_sets(git: &GitRef, file: &SourceFile) -> Result<Vec<ParamSet>, GeneratorError> {
    let fail = |message: String| GeneratorError::File {
        repo: tether_core::source::redact(&git.repo),
        file: file.path.clone(),
        message,
    };
    let text = std::str::from_utf8(&file.bytes).map_err(|_| fail("is not UTF-8".into()))?;
    let value: Value =
        serde_saphyr::from_str(text).map_err(|e| fail(format!("is not JSON or YAML: {e}")))?;
    let (dir, filename) = file.path.rsplit_once('/').unwrap_or(("", &file.path));
    let mut base = path_params(dir);
    base.insert("path.filename".into(), filename.to_string());
    base.insert("path.filenameNormalized".into(), normalize(filename));
    let items: Vec<(Value, String)> = match value {
        Value::Object(_) => vec![(value, format!("file {}", file.path))],
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| (item, format!("file {} item {i}", file.path)))
            .collect(),
        _ => return Err(fail("must hold a mapping or a list of mappings".into())),
    };
    items
        .into_iter()
        .map(|(item, origin)| {
            if !item.is_object() {
                return Err(fail(format!("{origin}: must be a mapping")));
            }
            let mut values = base.clone();
            values.extend(flatten(&item));
            Ok(ParamSet {
                values,
                cluster: None,
                origin,
            })
        })
        .collect()
}

/// Keys of a mapping as parameters: nested keys joined by `.`, list items `key[N]`,
/// scalars as their text (null as "").
fn flatten(value: &Value) -> BTreeMap<String, String> {
    fn walk(value: &Value, prefix: &str, out: &mut BTreeMap<String, String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(v, &key, out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{prefix}[{i}]"), out);
                }
            }
            Value::String(s) => {
                out.insert(prefix.to_string(), s.clone());
            }
            Value::Null => {
                out.insert(prefix.to_string(), String::new());
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(value, "", &mut out);
    out
}

/// One set of a matrix: both sets' values; a parameter both set differently is an error.
fn join(left: &ParamSet, right: &ParamSet) -> Result<ParamSet, GeneratorError> {
    let mut values = left.values.clone();
    for (key, value) in &right.values {
        if let Some(old) = values.insert(key.clone(), value.clone()) {
            if old != *value {
                return Err(GeneratorError::Conflict {
                    key: key.clone(),
                    first: left.origin.clone(),
                    second: right.origin.clone(),
                });
            }
        }
    }
    Ok(ParamSet {
        values,
        cluster: right.cluster.clone().or_else(|| left.cluster.clone()),
        origin: format!("{} × {}", left.origin, right.origin),
    })
}

/// Argo CD's merge: each base set that agrees with a later set on every merge key
/// takes that set's values (the later set wins); sets matching no base set are dropped.
fn overlay(base: &mut [ParamSet], other: &[ParamSet], keys: &[String]) {
    let key_of = |set: &ParamSet| -> Option<Vec<String>> {
        keys.iter().map(|k| set.values.get(k).cloned()).collect()
    };
    let by_key: HashMap<Vec<String>, &ParamSet> =
        other.iter().filter_map(|s| Some((key_of(s)?, s))).collect();
    for set in base.iter_mut() {
        if let Some(found) = key_of(set).and_then(|k| by_key.get(&k)) {
            set.values.extend(found.values.clone());
            if found.cluster.is_some() {
                set.cluster = found.cluster.clone();
            }
        }
    }
}

/// A glob over `/`-separated paths: `*` and `?` stay within one segment, `**` is any
/// number of whole segments (zero included), `[abc]` is one of those characters.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let path: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    segments_match(&pattern, &path)
}

fn segments_match(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| segments_match(rest, &path[skip..])),
        Some((first, rest)) => match path.split_first() {
            Some((segment, tail)) => {
                segment_match(first.as_bytes(), segment.as_bytes()) && segments_match(rest, tail)
            }
            None => false,
        },
    }
}

fn segment_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| segment_match(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && segment_match(rest, &text[1..]),
        Some((b'[', rest)) => match (rest.iter().position(|b| *b == b']'), text.split_first()) {
            (Some(end), Some((c, tail))) => {
                rest[..end].contains(c) && segment_match(&rest[end + 1..], tail)
            }
            _ => false,
        },
        Some((p, rest)) => text.first() == Some(p) && segment_match(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests;
