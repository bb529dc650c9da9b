//! What a chart of a revision needs vendored before Helm can render it, read from its
//! `Chart.yaml` and `Chart.lock` as `helm dependency build` reads them: a dependency
//! already in `charts/` is used as it is; one with a `repository:` is fetched, at the
//! version its Chart.lock pins when there is a lock (a dependency missing from it is
//! an error), else the newest its version range allows. Aliases, conditions and tags
//! are Helm's to apply at render time: it finds the charts in `charts/` either way.

use std::collections::BTreeSet;

use serde::Deserialize;
use tether_diff::manifest::resolve;

use super::error::ChartError;
use crate::source::redact_url;

/// The schemes of the repositories dependencies are fetched from.
const REMOTE_SCHEMES: [&str; 3] = ["https://", "http://", "oci://"];

/// Chart.yaml, as far as dependencies go.
#[derive(Debug, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    dependencies: Vec<Dependency>,
}

/// One entry of `dependencies:` (of Chart.yaml or Chart.lock).
#[derive(Debug, Clone, Default, Deserialize)]
struct Dependency {
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    repository: String,
}

/// Where a dependency to vendor comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A Helm repository over HTTP(S) or an OCI registry (`oci://host/path`, the
    /// chart's name appended), and the version constraint (exact when locked).
    Remote { repo: String, constraint: String },
    /// A folder of the same revision (`file://`), as a path from the repository root.
    Local { dir: String },
}

/// A dependency to vendor into the chart's `charts/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub name: String,
    pub origin: Origin,
}

/// `dir/name`, or `name` at the root.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// A path without empty, `.` or trailing parts.
pub fn norm(path: &str) -> String {
    path.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect::<Vec<_>>()
        .join("/")
}

fn file<'a>(files: &'a [(String, Vec<u8>)], key: &str) -> Option<&'a [u8]> {
    files
        .iter()
        .find(|(path, _)| norm(path) == key)
        .map(|(_, bytes)| bytes.as_slice())
}

fn parse<T: for<'de> Deserialize<'de> + Default>(
    files: &[(String, Vec<u8>)],
    key: &str,
) -> Result<Option<T>, ChartError> {
    let Some(bytes) = file(files, key) else {
        return Ok(None);
    };
    let bad = |message: String| ChartError::Metadata {
        file: key.to_string(),
        message,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
    serde_saphyr::from_str(text)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// The chart names `charts/` of the chart at `dir` already holds: folders with a
/// Chart.yaml, and archives (`name-1.2.3.tgz`, named as `helm package` names them).
fn vendored(files: &[(String, Vec<u8>)], dir: &str) -> BTreeSet<String> {
    let prefix = join(dir, "charts/");
    let mut names = BTreeSet::new();
    for (path, bytes) in files {
        let Some(rest) = norm(path).strip_prefix(&prefix).map(str::to_string) else {
            continue;
        };
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            [folder, "Chart.yaml"] => {
                let name = std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|t| serde_saphyr::from_str::<Metadata>(t).ok())
                    .map(|m| m.name)
                    .unwrap_or_else(|| folder.to_string());
                names.insert(name);
            }
            [archive] if archive.ends_with(".tgz") => {
                let stem = archive.trim_end_matches(".tgz");
                // `name-version`: the name is what precedes the first `-<digit>`.
                let cut = stem
                    .match_indices('-')
                    .find(|(at, _)| stem[at + 1..].starts_with(|c: char| c.is_ascii_digit()))
                    .map_or(stem.len(), |(at, _)| at);
                names.insert(stem[..cut].to_string());
            }
            _ => {}
        }
    }
    names
}

/// The version the `Chart.yaml` of an archive's files (paths from the chart's
/// folder) gives, when it gives one.
pub fn chart_version(files: &[(String, Vec<u8>)]) -> Option<String> {
    parse::<Metadata>(files, "Chart.yaml")
        .ok()
        .flatten()
        .map(|m| m.version.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Whether the chart at `path` names a `file://` dependency: its folder may lie
/// anywhere in the repository, so the whole revision must be read.
pub fn needs_repository(files: &[(String, Vec<u8>)], path: &str) -> bool {
    let key = join(&norm(path), "Chart.yaml");
    parse::<Metadata>(files, &key)
        .ok()
        .flatten()
        .is_some_and(|m| {
            m.dependencies
                .iter()
                .any(|d| d.repository.starts_with("file://"))
        })
}

/// Whether `path` holds a chart (its Chart.yaml), which the render stage renders
/// with Helm.
pub fn is_chart(files: &[(String, Vec<u8>)], path: &str) -> bool {
    file(files, &join(&norm(path), "Chart.yaml")).is_some()
}

/// The dependencies of the chart at `dir` that must be vendored before it renders.
pub fn plan(files: &[(String, Vec<u8>)], dir: &str) -> Result<Vec<Wanted>, ChartError> {
    let chart_at = if dir.is_empty() { "." } else { dir };
    let Some(metadata) = parse::<Metadata>(files, &join(dir, "Chart.yaml"))? else {
        return Ok(Vec::new());
    };
    let lock = parse::<Metadata>(files, &join(dir, "Chart.lock"))?;
    let have = vendored(files, dir);
    let mut wanted: Vec<Wanted> = Vec::new();
    for dep in metadata.dependencies {
        if dep.repository.is_empty() || have.contains(&dep.name) {
            continue; // vendored (or Helm reports it missing, naming it)
        }
        let unsupported = || ChartError::Unsupported {
            chart: chart_at.to_string(),
            dependency: dep.name.clone(),
            repository: redact_url(&dep.repository),
        };
        let origin = if let Some(path) = dep.repository.strip_prefix("file://") {
            Origin::Local {
                dir: resolve(dir, path).ok_or_else(|| ChartError::OutsideRepository {
                    chart: chart_at.to_string(),
                    dependency: dep.name.clone(),
                    repository: dep.repository.clone(),
                })?,
            }
        } else if REMOTE_SCHEMES
            .iter()
            .any(|scheme| dep.repository.starts_with(scheme))
        {
            let constraint = match &lock {
                None => dep.version.clone(),
                Some(lock) => lock
                    .dependencies
                    .iter()
                    .find(|l| l.name == dep.name && same_repo(&l.repository, &dep.repository))
                    .map(|l| l.version.clone())
                    .ok_or_else(|| ChartError::NotInLock {
                        chart: chart_at.to_string(),
                        dependency: dep.name.clone(),
                        repository: redact_url(&dep.repository),
                    })?,
            };
            Origin::Remote {
                repo: dep.repository.trim_end_matches('/').to_string(),
                constraint,
            }
        } else {
            return Err(unsupported());
        };
        let want = Wanted {
            name: dep.name.clone(),
            origin,
        };
        // The same chart twice (under two aliases) is vendored once.
        if !wanted.contains(&want) {
            wanted.push(want);
        }
    }
    Ok(wanted)
}

fn same_repo(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// The files of the local chart at `from` (a folder of the revision) as files of
/// `into`; refused when it holds no Chart.yaml naming chart `name`.
pub fn local_files(
    files: &[(String, Vec<u8>)],
    from: &str,
    name: &str,
    into: &str,
    chart_at: &str,
    repository: &str,
) -> Result<Vec<(String, Vec<u8>)>, ChartError> {
    let metadata = parse::<Metadata>(files, &join(from, "Chart.yaml"))?;
    if metadata.is_none_or(|m| m.name != name) {
        return Err(ChartError::MissingLocal {
            chart: chart_at.to_string(),
            dependency: name.to_string(),
            repository: repository.to_string(),
        });
    }
    let prefix = join(from, "");
    Ok(files
        .iter()
        .filter_map(|(path, bytes)| {
            let rest = norm(path);
            let rest = if from.is_empty() {
                rest
            } else {
                rest.strip_prefix(&prefix)?.to_string()
            };
            Some((join(into, &rest), bytes.clone()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.as_bytes().to_vec()))
            .collect()
    }

    const CHART: &str = "apiVersion: v2\nname: web\nversion: 1.0.0\ndependencies:\n\
        - {name: sub, version: ~0.1, repository: https://charts.example.com/}\n\
        - {name: sub, version: ~0.1, repository: https://charts.example.com, alias: two, condition: two.enabled}\n\
        - {name: lib, version: 0.1.0, repository: file://../lib}\n\
        - {name: kept, version: 1.0.0, repository: https://charts.example.com}\n";

    #[test]
    fn dependencies_come_from_the_lock_the_range_or_the_revision() {
        let tree = files(&[
            ("apps/web/Chart.yaml", CHART),
            ("apps/web/charts/kept-1.0.0.tgz", ""),
            ("apps/lib/Chart.yaml", "name: lib\nversion: 0.1.0\n"),
        ]);
        let http = |constraint: &str| Wanted {
            name: "sub".into(),
            origin: Origin::Remote {
                repo: "https://charts.example.com".into(),
                constraint: constraint.into(),
            },
        };
        let local = Wanted {
            name: "lib".into(),
            origin: Origin::Local {
                dir: "apps/lib".into(),
            },
        };
        assert_eq!(
            plan(&tree, "apps/web").expect("a plan"),
            [http("~0.1"), local.clone()]
        );
        assert!(needs_repository(&tree, "./apps/web/"));

        let mut locked = tree.clone();
        locked.push((
            "apps/web/Chart.lock".into(),
            b"dependencies:\n- {name: sub, version: 0.1.3, repository: https://charts.example.com}\n\
              - {name: lib, version: 0.1.0, repository: file://../lib}\n"
                .to_vec(),
        ));
        assert_eq!(
            plan(&locked, "apps/web").expect("a plan"),
            [http("0.1.3"), local]
        );
    }

    #[test]
    fn escapes_unlisted_and_unsupported_dependencies_are_refused_by_name() {
        let outside = files(&[(
            "web/Chart.yaml",
            "name: web\ndependencies:\n- {name: x, repository: 'file://../../etc'}\n",
        )]);
        assert_eq!(
            plan(&outside, "web").expect_err("escape").to_string(),
            "web: dependency x: file://../../etc leaves the repository"
        );
        let lockless = files(&[
            (
                "Chart.yaml",
                "name: web\ndependencies:\n- {name: x, repository: 'https://h/'}\n",
            ),
            ("Chart.lock", "dependencies: []\n"),
        ]);
        assert_eq!(
            plan(&lockless, "").expect_err("not locked").to_string(),
            ".: dependency x (https://h/) is missing from Chart.lock \
             (run `helm dependency update` and commit Chart.lock)"
        );
        let alias = files(&[(
            "Chart.yaml",
            "name: web\ndependencies:\n- {name: x, repository: '@stable'}\n",
        )]);
        let err = plan(&alias, "").expect_err("a local repository alias");
        assert!(
            err.to_string()
                .starts_with(".: dependency x: repository @stable is not supported"),
            "{err}"
        );
        let oci = files(&[(
            "Chart.yaml",
            "name: web\ndependencies:\n- {name: x, version: ~1, repository: 'oci://r.example/c/'}\n",
        )]);
        assert_eq!(
            plan(&oci, "").expect("an OCI dependency"),
            [Wanted {
                name: "x".into(),
                origin: Origin::Remote {
                    repo: "oci://r.example/c".into(),
                    constraint: "~1".into()
                }
            }]
        );
        let missing = files(&[("lib/Chart.yaml", "name: other\n")]);
        let err = local_files(
            &missing,
            "lib",
            "lib",
            "web/charts/lib",
            "web",
            "file://../lib",
        )
        .expect_err("not that chart");
        assert_eq!(
            err.to_string(),
            "web: dependency lib: file://../lib holds no chart lib"
        );
    }
}
