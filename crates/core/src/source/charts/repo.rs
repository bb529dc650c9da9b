//! Helm repositories over HTTP(S), as `helm dependency build` reads them: the
//! repository's `index.yaml`, then a chart's archive from the URL the index gives,
//! checked against the digest the index gives. Every request goes through the SSRF
//! guard when one is set (`tether serve`: the repository URL is written by whoever
//! writes the chart, not by the operator), redirects included; every response is
//! read under a size budget and a deadline.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::error::{ChartError, Checked};
use super::login::ChartLogin;
use super::tls::ChartTls;
use super::version::{newest, parse_constraint, parse_version};
use crate::outbound::{GuardedResolver, OutboundPolicy};
use crate::source::redact_url;

/// An `index.yaml` larger than this is refused. Large public repositories publish
/// indexes of a few MiB to ~20 MiB (Bitnami's, before it was trimmed); 64 MiB leaves
/// room for those and no more.
pub const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;

/// How long one request to a chart repository may take, body included: Helm's own
/// HTTP getter waits up to 120 s; a render stage that waits that long stalls a pass,
/// so half of it.
pub const CHART_FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Redirects followed per request, as browsers and Go's client (10) do; a chart
/// repository on GitHub releases redirects once, to its CDN.
const MAX_REDIRECTS: usize = 10;

/// HTTP clients of sources with their own TLS trust kept at once: one per distinct
/// CA and client certificate, so a few dozen covers every repository of a cluster;
/// past it (certificates rotated many times over) they are built again as needed.
const MAX_TLS_CLIENTS: usize = 64;

/// Nodes and events a big index needs: ~30 nodes per version, tens of thousands of
/// versions. serde-saphyr's defaults (250 000 nodes) are for configuration files.
const INDEX_MAX_NODES: usize = 20_000_000;

/// A repository's index: per chart name, its versions.
#[derive(Debug, Default, Deserialize)]
pub struct Index {
    #[serde(default)]
    entries: BTreeMap<String, Vec<Entry>>,
}

/// One version of a chart in an index.
#[derive(Debug, Clone, Deserialize)]
pub struct Entry {
    pub version: String,
    #[serde(default)]
    urls: Vec<String>,
    #[serde(default)]
    digest: Option<String>,
}

/// How many names or versions an error lists before `…`.
const LISTED: usize = 20;

pub(super) fn listed<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let items: Vec<&str> = items.collect();
    let mut text = items
        .iter()
        .take(LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > LISTED {
        text.push_str(", …");
    }
    if text.is_empty() {
        text.push_str("none");
    }
    text
}

impl Index {
    /// The newest version of `chart` meeting `constraint` (an exact version from a
    /// Chart.lock is a constraint too); `dependency` names it in errors.
    pub fn pick(
        &self,
        repo: &str,
        chart: &str,
        constraint: &str,
        dependency: (&str, &str),
    ) -> Result<&Entry, ChartError> {
        let repo = redact_url(repo);
        let entries = self
            .entries
            .get(chart)
            .ok_or_else(|| ChartError::UnknownChart {
                repo: repo.clone(),
                chart: chart.to_string(),
                available: listed(self.entries.keys().map(String::as_str)),
            })?;
        let reqs = parse_constraint(constraint).map_err(|message| ChartError::BadConstraint {
            chart: dependency.0.to_string(),
            dependency: dependency.1.to_string(),
            constraint: constraint.to_string(),
            message,
        })?;
        let version = newest(entries.iter().map(|e| e.version.as_str()), &reqs);
        let mut versions: Vec<&Entry> = entries.iter().collect();
        versions.sort_by_key(|e| std::cmp::Reverse(parse_version(&e.version)));
        version
            .and_then(|v| entries.iter().find(|e| e.version == v))
            .ok_or_else(|| ChartError::UnknownVersion {
                repo,
                chart: chart.to_string(),
                constraint: constraint.to_string(),
                versions: listed(versions.iter().map(|e| e.version.as_str())),
            })
    }
}

/// A client builder for chart repositories: redirects checked by the guard (when
/// one is set) and counted, the fetch deadline, no proxy under a guard.
fn builder(policy: &Option<Arc<OutboundPolicy>>) -> reqwest::ClientBuilder {
    let guard = policy.clone();
    let redirects = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error("too many redirects");
        }
        match guard.as_ref().map(|p| p.check_url(attempt.url().as_str())) {
            Some(Err(refused)) => attempt.error(refused),
            _ => attempt.follow(),
        }
    });
    let builder = reqwest::Client::builder()
        .redirect(redirects)
        .timeout(CHART_FETCH_TIMEOUT)
        .user_agent(concat!("tether/", env!("CARGO_PKG_VERSION")));
    match policy {
        // A proxy would resolve the name itself, out of the guard's sight.
        Some(policy) => builder
            .no_proxy()
            .dns_resolver(GuardedResolver::new(policy.clone())),
        None => builder,
    }
}

/// Whether `url` has the scheme, host and port of the repository `repo`.
fn same_origin(repo: &str, url: &str) -> bool {
    match (url::Url::parse(repo), url::Url::parse(url)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

/// A response: its status, headers and body (read under a budget).
pub(super) struct Answer {
    pub status: reqwest::StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

/// The HTTP side: one client, guarded or not, and a count of the requests it made
/// (shared with the store: the bench and the tests count a warm pass's).
pub struct Fetcher {
    client: reqwest::Client,
    /// Clients trusting a source's own CA or presenting its client certificate, by
    /// [`ChartTls::fingerprint`]: that trust is that source's only.
    trusting: Mutex<HashMap<String, reqwest::Client>>,
    policy: Option<Arc<OutboundPolicy>>,
    requests: Arc<AtomicU64>,
}

impl Fetcher {
    /// A fetcher whose requests reach only what `policy` allows (`None`: anywhere,
    /// as the CLI on a user's own machine).
    pub fn new(
        policy: Option<Arc<OutboundPolicy>>,
        requests: Arc<AtomicU64>,
    ) -> Result<Fetcher, String> {
        let client = builder(&policy)
            .build()
            .map_err(|e| e.without_url().to_string())?;
        Ok(Fetcher {
            client,
            trusting: Mutex::new(HashMap::new()),
            policy,
            requests,
        })
    }

    /// The client for a source with `tls`: the shared one, or one trusting its CA and
    /// presenting its certificate (built once per distinct trust).
    fn client(&self, repo: &str, tls: &ChartTls) -> Result<reqwest::Client, ChartError> {
        let key = tls.fingerprint();
        if key.is_empty() {
            return Ok(self.client.clone());
        }
        let failed = |message: String| ChartError::Unreachable {
            repo: redact_url(repo),
            what: "HTTP client".into(),
            message,
        };
        let mut trusting = self.trusting.lock();
        if let Some(client) = trusting.get(&key) {
            return Ok(client.clone());
        }
        let client = tls
            .configure(builder(&self.policy))
            .map_err(failed)?
            .build()
            .map_err(|e| failed(e.without_url().to_string()))?;
        if trusting.len() >= MAX_TLS_CLIENTS {
            trusting.clear();
        }
        trusting.insert(key, client.clone());
        Ok(client)
    }

    /// The body of `url`, at most `limit` bytes; `what` names it in errors. The
    /// login goes only to the repository's own origin, as Helm sends it
    /// (`--pass-credentials` off): an index may point archives anywhere.
    async fn get(
        &self,
        repo: &str,
        url: &str,
        what: &str,
        limit: u64,
        login: &ChartLogin,
    ) -> Result<Vec<u8>, ChartError> {
        let mut headers = Vec::new();
        if let Some(header) = login.header().filter(|_| same_origin(repo, url)) {
            headers.push((reqwest::header::AUTHORIZATION, header));
        }
        let answer = self
            .send(repo, url, &headers, what, limit, login.tls())
            .await?;
        if !answer.status.is_success() {
            return Err(ChartError::Status {
                repo: redact_url(repo),
                what: what.to_string(),
                status: answer.status.as_u16(),
            });
        }
        Ok(answer.body)
    }

    /// One GET of `url` with `headers`, whatever its status, its body read under
    /// `limit` bytes: an OCI registry's 401 is a step of its handshake, not a failure.
    pub(super) async fn send(
        &self,
        repo: &str,
        url: &str,
        headers: &[(reqwest::header::HeaderName, String)],
        what: &str,
        limit: u64,
        tls: &ChartTls,
    ) -> Result<Answer, ChartError> {
        let shown = redact_url(repo);
        let client = self.client(repo, tls)?;
        if let Some(policy) = &self.policy {
            policy
                .check_url(url)
                .map_err(|source| ChartError::Refused {
                    repo: shown.clone(),
                    source,
                })?;
        }
        let unreachable = |e: reqwest::Error| {
            // The guard's refusal travels inside the connect error: name it as such.
            let e = e.without_url();
            let mut message = e.to_string();
            let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            while let Some(c) = cause {
                if let Some(refused) = c.downcast_ref::<crate::outbound::OutboundError>() {
                    return ChartError::Refused {
                        repo: shown.clone(),
                        source: refused.clone(),
                    };
                }
                cause = c.source();
                // "error sending request" alone says nothing: the causes (a refused
                // connection, an unknown CA, a missing client certificate) do.
                if let Some(c) = cause {
                    message = format!("{message}: {c}");
                }
            }
            ChartError::Unreachable {
                repo: shown.clone(),
                what: what.to_string(),
                message: redact_url(&message),
            }
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut request = client.get(url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let mut response = request.send().await.map_err(unreachable)?;
        let too_large = || ChartError::TooLarge {
            repo: shown.clone(),
            what: what.to_string(),
            limit,
        };
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let status = response.status();
        let response_headers = response.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if (body.len() + chunk.len()) as u64 > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            headers: response_headers,
            body,
        })
    }

    /// The repository's `index.yaml`.
    pub async fn index(&self, repo: &str, login: &ChartLogin) -> Result<Index, ChartError> {
        let url = format!("{}/index.yaml", repo.trim_end_matches('/'));
        let body = self
            .get(repo, &url, "index.yaml", MAX_INDEX_BYTES, login)
            .await?;
        let bad = |message: String| ChartError::Index {
            repo: redact_url(repo),
            message,
        };
        let text = std::str::from_utf8(&body).map_err(|e| bad(e.to_string()))?;
        let options = serde_saphyr::options! {
            budget: serde_saphyr::budget! {
                max_nodes: INDEX_MAX_NODES,
                max_events: INDEX_MAX_NODES * 2,
            },
        };
        serde_saphyr::from_str_with_options(text, options).map_err(|e| bad(e.to_string()))
    }

    /// The archive of `entry` (of chart `chart`), its SHA-256 checked against the
    /// index's digest; returns the archive and its digest (`sha256:<hex>`).
    pub async fn archive(
        &self,
        repo: &str,
        chart: &str,
        entry: &Entry,
        login: &ChartLogin,
    ) -> Result<(Vec<u8>, String), ChartError> {
        let bad = |message: &str| ChartError::Index {
            repo: redact_url(repo),
            message: format!("{chart} {}: {message}", entry.version),
        };
        let expected = entry
            .digest
            .as_deref()
            .map(|d| d.trim().trim_start_matches("sha256:").to_ascii_lowercase())
            .filter(|d| d.len() == 64)
            .ok_or_else(|| bad("no sha256 digest (tether checks every archive against one)"))?;
        let first = entry.urls.first().ok_or_else(|| bad("no download URL"))?;
        let base = url::Url::parse(&format!("{}/", repo.trim_end_matches('/')))
            .map_err(|e| bad(&e.to_string()))?;
        let url = base.join(first).map_err(|e| bad(&e.to_string()))?;
        let what = format!("{chart}-{}.tgz", entry.version);
        let bytes = self
            .get(
                repo,
                url.as_str(),
                &what,
                super::archive::MAX_ARCHIVE_BYTES,
                login,
            )
            .await?;
        let actual = hex::encode(Sha256::digest(&bytes));
        if actual != expected {
            return Err(ChartError::DigestMismatch {
                repo: redact_url(repo),
                chart: chart.to_string(),
                version: entry.version.clone(),
                checked: Checked::Index,
                expected: format!("sha256:{expected}"),
                actual: format!("sha256:{actual}"),
            });
        }
        Ok((bytes, format!("sha256:{actual}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = "apiVersion: v1\nentries:\n  sub:\n  - version: 0.1.0\n    urls: [sub-0.1.0.tgz]\n    digest: abc\n  - version: 0.2.0\n    urls: [sub-0.2.0.tgz]\n  other:\n  - version: 1.0.0\n";

    #[test]
    fn unknown_charts_and_versions_name_the_repository_and_what_exists() {
        let index: Index = serde_saphyr::from_str(INDEX).expect("an index");
        let dep = ("web", "sub");
        let repo = "https://user:pw@charts.example.com/stable";
        assert_eq!(
            index.pick(repo, "sub", "~0.1", dep).expect("0.1").version,
            "0.1.0"
        );
        assert_eq!(
            index.pick(repo, "sub", "", dep).expect("newest").version,
            "0.2.0"
        );
        let err = index.pick(repo, "nope", "1", dep).expect_err("no chart");
        assert_eq!(
            err.to_string(),
            "https://***@charts.example.com/stable: no chart nope in index.yaml (it has: other, sub)"
        );
        let err = index
            .pick(repo, "sub", "~3.0", dep)
            .expect_err("no version");
        assert_eq!(
            err.to_string(),
            "https://***@charts.example.com/stable: chart sub has no version matching \"~3.0\" \
             (versions: 0.2.0, 0.1.0)"
        );
        assert!(!err.is_retryable());
    }
}
