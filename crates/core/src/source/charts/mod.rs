//! Chart dependencies of a Git chart (issue #26), vendored before the render stage
//! runs Helm: what `helm dependency build` does, by tether's own fetcher, so that
//! every request goes through the SSRF guard and every archive through tether's
//! checks ([`archive`]), and Helm itself never touches the network.
//!
//! Archives are kept expanded in one process-wide cache keyed by their SHA-256
//! digest and bounded in bytes ([`DEFAULT_CHART_CACHE_BYTES`], least recently used
//! first out); an exact version (a Chart.lock's) already fetched from a repository is
//! served from it without a request. A Git chart is rendered once per commit (the
//! render cache), so a pass with no new commit makes no request at all.
//!
//! Charts of OCI registries ([`oci`]) take the same path: the same client, checks
//! and cache, keyed by their manifest's digest.
//!
//! A chart may also be an app's whole source ([`ChartStore::resolve_chart`]): the
//! same fetcher and cache, re-resolved at each poll. Its login (credentials, and a
//! custom CA or client certificate: [`tls`]) also serves its dependencies on the same
//! repository or registry. An app's `dependencyCredentials` ([`logins`]) serve its
//! dependencies on other repositories, matched by URL prefix; any other is fetched
//! anonymously.
//!
//! An OCI artifact of plain manifests may be an app's source too ([`artifact`]): the
//! same registry client, archive checks and cache, without Helm.

mod archive;
mod artifact;
mod deps;
mod error;
mod login;
mod logins;
mod oci;
mod repo;
mod source;
mod tls;
mod version;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use archive::{
    ArchiveProblem, MAX_ARCHIVE_BYTES, MAX_CHART_BYTES, MAX_CHART_FILE_BYTES, MAX_CHART_FILES,
};
pub use artifact::DEFAULT_ARTIFACT_TAG;
pub use deps::{is_chart, needs_repository};
pub use error::ChartError;
pub use login::{ChartLogin, DOCKER_CONFIG_KEY};
pub use logins::{DependencyCredential, DependencyLogins};
pub use oci::{MAX_MANIFEST_BYTES, OCI_SCHEME};
pub use repo::{CHART_FETCH_TIMEOUT, MAX_INDEX_BYTES};
pub use source::check_version;
pub use tls::ChartTls;

use archive::ChartFile;
use deps::{Origin, join, norm};
use parking_lot::Mutex;
use repo::{Fetcher, Index};

use crate::outbound::OutboundPolicy;
use crate::source::redact_url;

/// Expanded chart bytes the cache keeps: a few dozen typical charts (50–500 KiB
/// each), or the largest well-known ones several times over, within the memory a
/// tether Pod is given by its chart (512 MiB limit).
pub const DEFAULT_CHART_CACHE_BYTES: u64 = 128 * 1024 * 1024;

/// An archive's files, expanded, as the cache shares them.
type Expanded = Arc<Vec<ChartFile>>;

/// One dependency vendored into a chart, for the log and the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vendored {
    pub name: String,
    /// The version fetched; empty for a `file://` chart.
    pub version: String,
    /// `sha256:<hex>` of the archive; empty for a `file://` chart.
    pub digest: String,
}

/// The process's chart dependency store: the fetcher and the cache. Cheap to clone.
#[derive(Clone)]
pub struct ChartStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ChartStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChartStore")
            .field("requests", &self.requests())
            .finish()
    }
}

struct Inner {
    policy: Mutex<Option<Arc<OutboundPolicy>>>,
    fetcher: Mutex<Option<Arc<Fetcher>>>,
    requests: Arc<AtomicU64>,
    cache: Mutex<Cache>,
    /// `(repository, chart, version, login's fingerprint)` → digest, for versions
    /// fetched before: what one login fetched is not another's to read.
    pinned: Mutex<HashMap<Pin, String>>,
    /// OCI registries' bearer tokens.
    tokens: oci::Tokens,
}

/// A version (or an OCI digest) of a chart, as one login fetched it.
type Pin = (String, String, String, String);

/// Expanded archives by digest, least recently used out first past `budget` bytes.
struct Cache {
    budget: u64,
    used: u64,
    tick: u64,
    charts: HashMap<String, Cached>,
}

struct Cached {
    files: Expanded,
    bytes: u64,
    used_at: u64,
}

impl Cache {
    fn get(&mut self, digest: &str) -> Option<Expanded> {
        self.tick += 1;
        let tick = self.tick;
        self.charts.get_mut(digest).map(|c| {
            c.used_at = tick;
            c.files.clone()
        })
    }

    fn put(&mut self, digest: String, files: Expanded) {
        let bytes: u64 = files.iter().map(|(p, b)| (p.len() + b.len()) as u64).sum();
        if bytes > self.budget || self.charts.contains_key(&digest) {
            return; // used for this render, never kept: it would evict everything
        }
        while self.used + bytes > self.budget {
            let Some(oldest) = self
                .charts
                .iter()
                .min_by_key(|(_, c)| c.used_at)
                .map(|(d, _)| d.clone())
            else {
                break;
            };
            if let Some(evicted) = self.charts.remove(&oldest) {
                self.used -= evicted.bytes;
            }
        }
        self.tick += 1;
        self.used += bytes;
        self.charts.insert(
            digest,
            Cached {
                files,
                bytes,
                used_at: self.tick,
            },
        );
    }
}

impl ChartStore {
    /// A store keeping at most `budget` expanded bytes, fetching from anywhere until
    /// [`ChartStore::guard`] is called.
    pub fn new(budget: u64) -> ChartStore {
        ChartStore {
            inner: Arc::new(Inner {
                policy: Mutex::new(None),
                fetcher: Mutex::new(None),
                requests: Arc::new(AtomicU64::new(0)),
                cache: Mutex::new(Cache {
                    budget,
                    used: 0,
                    tick: 0,
                    charts: HashMap::new(),
                }),
                pinned: Mutex::new(HashMap::new()),
                tokens: oci::Tokens::default(),
            }),
        }
    }

    /// From now on, requests reach only public addresses and `policy`'s networks:
    /// `tether serve`, where a chart's author (not the operator) names the repository.
    pub fn guard(&self, policy: Arc<OutboundPolicy>) {
        {
            let mut slot = self.inner.policy.lock();
            *slot = Some(policy);
        }
        {
            let mut fetcher = self.inner.fetcher.lock();
            *fetcher = None;
        }
    }

    /// HTTP requests made so far (the bench and the tests count a warm pass's).
    pub fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::Relaxed)
    }

    /// Expanded bytes the cache holds now.
    pub fn cached_bytes(&self) -> u64 {
        self.inner.cache.lock().used
    }

    fn fetcher(&self) -> Result<Arc<Fetcher>, ChartError> {
        let mut slot = self.inner.fetcher.lock();
        if let Some(fetcher) = slot.as_ref() {
            return Ok(fetcher.clone());
        }
        let policy = self.inner.policy.lock().clone();
        let fetcher = Fetcher::new(policy, self.inner.requests.clone()).map_err(|message| {
            ChartError::Unreachable {
                repo: "(any)".into(),
                what: "HTTP client".into(),
                message,
            }
        })?;
        let fetcher = Arc::new(fetcher);
        *slot = Some(fetcher.clone());
        Ok(fetcher)
    }

    /// Vendors into `files` (a revision's, keyed from the repository root) the
    /// dependencies the chart at `path` needs and does not hold in `charts/`. No
    /// chart there, or nothing to vendor: `files` is left as it is. Each dependency
    /// is fetched with the login `logins` gives its repository (as Helm's
    /// `dependency build` uses a repository's entry of `repositories.yaml`), else
    /// anonymously; a refusal names the dependency.
    pub async fn vendor(
        &self,
        files: &mut Vec<(String, Vec<u8>)>,
        path: &str,
        logins: &DependencyLogins,
    ) -> Result<Vec<Vendored>, ChartError> {
        let dir = norm(path);
        let chart_at = if dir.is_empty() {
            ".".to_string()
        } else {
            dir.clone()
        };
        let wanted = deps::plan(files, &dir)?;
        let mut indexes: HashMap<String, Index> = HashMap::new();
        let mut added = Vec::new();
        let mut out = Vec::new();
        for want in wanted {
            match want.origin {
                Origin::Local { dir: from } => {
                    let into = join(&dir, &format!("charts/{}", want.name));
                    let repository = format!("file://{from}");
                    added.extend(deps::local_files(
                        files,
                        &from,
                        &want.name,
                        &into,
                        &chart_at,
                        &repository,
                    )?);
                    out.push(Vendored {
                        name: want.name,
                        version: String::new(),
                        digest: String::new(),
                    });
                }
                Origin::Remote { repo, constraint } => {
                    let anonymous = ChartLogin::default();
                    let login = logins.for_repository(&repo);
                    let (version, digest, chart) = self
                        .remote(
                            &repo,
                            &want.name,
                            &constraint,
                            &chart_at,
                            &mut indexes,
                            login.unwrap_or(&anonymous),
                        )
                        .await
                        .map_err(|e| e.of_dependency(&chart_at, &want.name, login.is_some()))?;
                    let into = join(&dir, &format!("charts/{}-{version}", want.name));
                    added.extend(chart.iter().map(|(p, b)| (join(&into, p), b.clone())));
                    out.push(Vendored {
                        name: want.name,
                        version,
                        digest,
                    });
                }
            }
        }
        files.extend(added);
        Ok(out)
    }

    /// Chart `name` of `repo` (an HTTP(S) Helm repository or an OCI registry) at the
    /// newest version `constraint` allows: from the cache when that version was
    /// fetched before, else from the repository.
    async fn remote(
        &self,
        repo: &str,
        name: &str,
        constraint: &str,
        chart_at: &str,
        indexes: &mut HashMap<String, Index>,
        login: &ChartLogin,
    ) -> Result<(String, String, Expanded), ChartError> {
        if oci::is_oci(repo) {
            return self
                .remote_oci(repo, name, constraint, chart_at, login)
                .await;
        }
        // A bare full version is exact (Helm's reading, and every Chart.lock's).
        if version::parse_version(constraint).is_some() {
            let version = constraint.trim().to_string();
            if let Some((digest, files)) = self.fetched_before(repo, name, &version, login)? {
                return Ok((version, digest, files));
            }
        }
        let fetcher = self.fetcher()?;
        if !indexes.contains_key(repo) {
            indexes.insert(repo.to_string(), fetcher.index(repo, login).await?);
        }
        let index = &indexes[repo];
        let entry = index
            .pick(repo, name, constraint, (chart_at, name))?
            .clone();
        if let Some((digest, files)) = self.fetched_before(repo, name, &entry.version, login)? {
            return Ok((entry.version, digest, files));
        }
        let (bytes, digest) = fetcher.archive(repo, name, &entry, login).await?;
        let files = archive::unpack(&bytes, name).map_err(|problem| ChartError::Archive {
            repo: redact_url(repo),
            chart: name.to_string(),
            version: entry.version.clone(),
            problem,
        })?;
        tracing::info!(
            repository = %redact_url(repo),
            chart = name,
            version = %entry.version,
            digest = %digest,
            "chart dependency fetched"
        );
        let files = Arc::new(files);
        self.inner.cache.lock().put(digest.clone(), files.clone());
        self.pin(repo, name, &entry.version, login, &digest)?;
        Ok((entry.version, digest, files))
    }

    /// Remembers that `login` fetched `version` of chart `name` of `repo` as `digest`.
    fn pin(
        &self,
        repo: &str,
        name: &str,
        version: &str,
        login: &ChartLogin,
        digest: &str,
    ) -> Result<(), ChartError> {
        let key = (
            repo.to_string(),
            name.to_string(),
            version.to_string(),
            login.fingerprint(),
        );
        self.inner.pinned.lock().insert(key, digest.to_string());
        Ok(())
    }

    /// The digest and files of `name` `version` of `repo`, when `login` fetched it
    /// before and it is still in the cache.
    fn fetched_before(
        &self,
        repo: &str,
        name: &str,
        version: &str,
        login: &ChartLogin,
    ) -> Result<Option<(String, Expanded)>, ChartError> {
        let key = (
            repo.to_string(),
            name.to_string(),
            version.to_string(),
            login.fingerprint(),
        );
        let pinned = self.inner.pinned.lock();
        let Some(digest) = pinned.get(&key).cloned() else {
            return Ok(None);
        };
        drop(pinned);
        let files = self.inner.cache.lock().get(&digest);
        Ok(files.map(|files| (digest, files)))
    }
}

/// Whether a dependency's repository `dependency` is the chart source's `source`:
/// the same registry host for OCI, the same origin (scheme, host, port) for HTTP(S).
fn same_repository(source: &str, dependency: &str) -> bool {
    let origin = |url: &str| {
        let url = url::Url::parse(url).ok()?;
        Some((
            url.scheme().to_string(),
            url.host_str()?.to_ascii_lowercase(),
            url.port(),
        ))
    };
    origin(source).is_some_and(|o| Some(o) == origin(dependency))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(n: usize, size: usize) -> Expanded {
        Arc::new((0..n).map(|i| (format!("f{i}"), vec![0; size])).collect())
    }

    #[test]
    fn a_chart_sources_login_serves_dependencies_on_its_own_repository_only() {
        let oci = "oci://registry.example:5000/charts";
        assert!(same_repository(oci, "oci://registry.example:5000/other"));
        assert!(same_repository(oci, "oci://Registry.example:5000"));
        assert!(!same_repository(oci, "oci://registry.example:5001/charts"));
        assert!(!same_repository(oci, "oci://ghcr.io/charts"));
        let http = "https://charts.example.com/stable";
        assert!(same_repository(
            http,
            "https://charts.example.com/incubator"
        ));
        assert!(!same_repository(http, "http://charts.example.com/stable"));
        assert!(!same_repository(
            http,
            "https://charts.example.com.evil.example"
        ));
        assert!(!same_repository(http, oci));
        assert!(!same_repository("not a URL", "not a URL"));
    }

    #[test]
    fn the_cache_keeps_its_budget_and_evicts_the_least_recently_used() {
        let mut cache = Cache {
            budget: 300,
            used: 0,
            tick: 0,
            charts: HashMap::new(),
        };
        cache.put("a".into(), files(1, 98));
        cache.put("b".into(), files(1, 98));
        cache.put("c".into(), files(1, 98));
        assert!(cache.get("a").is_some(), "a is the most recent now");
        cache.put("d".into(), files(1, 98));
        assert!(cache.get("b").is_none(), "b was the least recently used");
        assert!(cache.get("a").is_some() && cache.get("d").is_some());
        assert!(cache.used <= 300);
        cache.put("huge".into(), files(1, 400));
        assert!(
            cache.get("huge").is_none(),
            "over the whole budget: never kept"
        );
        assert_eq!(cache.charts.len(), 3);
    }
}
