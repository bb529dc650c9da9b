//! Charts in OCI registries (issue #26), as `helm pull oci://…` reads them: the
//! OCI distribution API over the chart fetcher's guarded client, so an OCI chart
//! meets the same SSRF guard, size budgets, archive checks and digest cache as one of
//! an HTTP(S) Helm repository.
//!
//! `oci://host/path` with chart `name` is repository `path/name` of registry `host`
//! (Helm's and Flux's spelling of an OCI Helm repository). A version range is resolved
//! against the repository's tags (`/v2/<name>/tags/list`, pages followed by `Link`);
//! the manifest must carry Helm's media types, and its chart layer's bytes must have
//! the layer's digest. The manifest's own digest names the revision, as the tag a
//! registry serves may be pushed again.
//!
//! Authentication is the distribution API's: on a `401` with a `Bearer` challenge, a
//! token from the challenge's realm (anonymous, or for the source's login), kept for
//! the next request; on a `Basic` challenge (an htpasswd registry), the login's.
//! A registry is spoken to over HTTPS, or plain HTTP when its host is a loopback
//! address (Docker's own default for insecure registries) and the source names no CA
//! or client certificate of its own.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderName, LINK, WWW_AUTHENTICATE};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::archive::{self, MAX_ARCHIVE_BYTES};
use super::error::{ChartError, Checked};
use super::login::ChartLogin;
use super::repo::{Answer, Fetcher, listed};
use super::version::{newest, parse_constraint, parse_version};
use super::{ChartStore, Expanded, deps};
use crate::source::redact_url;

/// The scheme of a chart repository that is an OCI registry.
pub const OCI_SCHEME: &str = "oci://";

/// The media type of an OCI image manifest, the only kind Helm pushes.
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Helm's media types (helm.sh/helm/v3 pkg/registry/constants.go): the config blob,
/// the chart layer, and the layer Helm wrote before 3.7 and still reads.
const HELM_CONFIG: &str = "application/vnd.cncf.helm.config.v1+json";
const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
const HELM_LEGACY_CHART_LAYER: &str = "application/tar+gzip";

/// What a manifest must hold: a config blob of one media type (any when `None`), and
/// one layer of `layers`' media types, the only layer when `alone`.
pub(super) struct Expect {
    config: Option<&'static str>,
    pub(super) layers: &'static [&'static str],
    alone: bool,
}

/// A Helm chart: Helm's config, one chart layer (a provenance layer may sit beside it).
const HELM_CHART: Expect = Expect {
    config: Some(HELM_CONFIG),
    layers: &[HELM_CHART_LAYER, HELM_LEGACY_CHART_LAYER],
    alone: false,
};

impl Expect {
    /// An artifact of plain manifests: any config, exactly one layer of `layers`.
    pub(super) const fn only(layers: &'static [&'static str]) -> Expect {
        Expect {
            config: None,
            layers,
            alone: true,
        }
    }
}

/// A manifest larger than this is refused: the OCI distribution spec asks registries
/// to accept manifests of at least 4 MiB, and a chart's holds two descriptors.
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;

/// One page of a tags list, or a token response, larger than this is refused: a
/// page of 10 000 tags is ~300 KiB.
const MAX_PAGE_BYTES: u64 = 4 * 1024 * 1024;

/// Pages of tags followed before giving up: registries page by 100 to 1 000 tags, so
/// up to 100 000 versions of one chart.
const MAX_TAG_PAGES: usize = 100;

/// Whether `repo` names an OCI registry.
pub fn is_oci(repo: &str) -> bool {
    repo.starts_with(OCI_SCHEME)
}

/// `sha256:<hex>` when `text` is a digest (an OCI chart pinned by its manifest).
pub fn as_digest(text: &str) -> Option<&str> {
    let text = text.trim();
    let hex = text.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(text)
}

/// Where chart `name` of `oci://host/path` lives: the registry's base URL and the
/// repository's name in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `https://host[:port]`, or `http://` for a loopback host.
    base: String,
    /// `path/name`.
    repository: String,
}

impl Reference {
    /// The reference of chart `name` of `repo`; `tls` (a source with its own CA or
    /// client certificate) speaks HTTPS even to a loopback registry.
    pub fn parse(repo: &str, name: &str, tls: bool) -> Result<Reference, ChartError> {
        let bad = |message: &str| ChartError::Registry {
            repo: redact_url(repo),
            chart: name.to_string(),
            message: message.to_string(),
        };
        let url = url::Url::parse(repo.trim_end_matches('/'))
            .map_err(|e| bad(&format!("not an oci://host/path URL: {e}")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                "credentials do not go in the URL (source.credentials names a Secret)",
            ));
        }
        let host = url
            .host()
            .ok_or_else(|| bad("not an oci://host/path URL: no host"))?;
        let loopback = match &host {
            // An oci:// URL's host is opaque to the URL parser: an address is a "domain".
            url::Host::Domain(domain) => {
                *domain == "localhost"
                    || domain
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
        };
        let scheme = if loopback && !tls { "http" } else { "https" };
        let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
        let path = url.path().trim_matches('/');
        let repository = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}/{name}")
        };
        Ok(Reference {
            base: format!("{scheme}://{host}{port}"),
            repository,
        })
    }
}

/// A version as Helm tags it: OCI tags cannot hold `+`, so Helm writes `_`.
pub(super) fn tag_of(version: &str) -> String {
    version.replace('+', "_")
}

/// The version a tag stands for.
fn version_of(tag: &str) -> String {
    tag.replace('_', "+")
}

/// A `WWW-Authenticate: Bearer …` challenge's parameters.
#[derive(Debug, Default, PartialEq, Eq)]
struct Challenge {
    realm: String,
    service: Option<String>,
    scope: Option<String>,
}

/// The Bearer challenge of a `WWW-Authenticate` header (RFC 7235 auth-params, values
/// quoted or not, commas inside quotes kept), if it is one with a realm.
fn bearer_challenge(header: &str) -> Option<Challenge> {
    let (scheme, params) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut challenge = Challenge::default();
    let mut rest = params.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"')?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => after.split_once(',').unwrap_or((after, "")),
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "realm" => challenge.realm = value.to_string(),
            "service" => challenge.service = Some(value.to_string()),
            "scope" => challenge.scope = Some(value.to_string()),
            _ => {}
        }
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    (!challenge.realm.is_empty()).then_some(challenge)
}

/// The next page of a tags list, from a `Link: <url>; rel="next"` header.
fn next_page(link: &str) -> Option<&str> {
    link.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim().trim_start_matches("rel=").trim_matches('"') == "next")
            .then(|| target.trim().trim_start_matches('<').trim_end_matches('>'))
    })
}

/// Bearer tokens registries issued, by registry and repository, reused until a
/// registry answers 401 again. Never logged, never in an error.
#[derive(Default)]
pub struct Tokens(Mutex<HashMap<String, String>>);

impl Tokens {
    fn get(&self, key: &str) -> Option<String> {
        self.0.lock().get(key).cloned()
    }

    fn put(&self, key: String, token: String) {
        {
            let mut tokens = self.0.lock();
            tokens.insert(key, token);
        }
    }
}

#[derive(Deserialize)]
struct TagList {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

/// A blob a manifest names.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Descriptor {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    #[serde(default)]
    size: u64,
}

/// One chart's (or artifact's) repository in one registry, spoken to through the
/// chart fetcher.
pub(super) struct Registry<'a> {
    pub(super) fetcher: &'a Fetcher,
    pub(super) tokens: &'a Tokens,
    /// The `oci://` URL, as errors name it (redacted).
    pub(super) repo: &'a str,
    pub(super) chart: &'a str,
    pub(super) at: Reference,
    pub(super) login: &'a ChartLogin,
    pub(super) expect: &'a Expect,
}

impl Registry<'_> {
    /// Tokens are kept per registry, repository and login: one login's token is not
    /// another's.
    fn token_key(&self) -> String {
        format!(
            "{} {} {}",
            self.at.base,
            self.at.repository,
            self.login.fingerprint()
        )
    }

    fn url(&self, tail: &str) -> String {
        format!("{}/v2/{}/{tail}", self.at.base, self.at.repository)
    }

    fn status(&self, what: &str, status: StatusCode) -> ChartError {
        ChartError::Status {
            repo: redact_url(self.repo),
            what: what.to_string(),
            status: status.as_u16(),
        }
    }

    pub(super) fn invalid(&self, message: String) -> ChartError {
        ChartError::Registry {
            repo: redact_url(self.repo),
            chart: self.chart.to_string(),
            message,
        }
    }

    /// GET `url`; on a 401 with a Bearer challenge, a token from its realm and the
    /// same request again. Any other status is the caller's to judge.
    async fn get(
        &self,
        url: &str,
        accept: Option<&str>,
        what: &str,
        limit: u64,
    ) -> Result<Answer, ChartError> {
        let key = self.token_key();
        let headers = |authorization: Option<String>| {
            let mut headers: Vec<(HeaderName, String)> = Vec::new();
            if let Some(accept) = accept {
                headers.push((ACCEPT, accept.to_string()));
            }
            if let Some(authorization) = authorization {
                headers.push((AUTHORIZATION, authorization));
            }
            headers
        };
        let answer = self
            .fetcher
            .send(
                self.repo,
                url,
                &headers(self.tokens.get(&key)),
                what,
                limit,
                self.login.tls(),
            )
            .await?;
        if answer.status != StatusCode::UNAUTHORIZED {
            return Ok(answer);
        }
        let challenge = answer
            .headers
            .get(WWW_AUTHENTICATE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let authorization = match bearer_challenge(challenge) {
            Some(bearer) => format!("Bearer {}", self.token(&bearer).await?),
            // A registry asking for basic authentication (htpasswd): the login's.
            None => match self.login.basic() {
                Some(basic) if challenge.to_ascii_lowercase().starts_with("basic") => basic,
                _ => return Ok(answer),
            },
        };
        self.tokens.put(key, authorization.clone());
        self.fetcher
            .send(
                self.repo,
                url,
                &headers(Some(authorization)),
                what,
                limit,
                self.login.tls(),
            )
            .await
    }

    /// A pull token from the challenge's realm: anonymous, or for the login's
    /// username and password.
    async fn token(&self, challenge: &Challenge) -> Result<String, ChartError> {
        let mut url = url::Url::parse(&challenge.realm)
            .ok()
            .filter(|u| matches!(u.scheme(), "https" | "http"))
            .ok_or_else(|| self.invalid("the registry's token realm is no http(s) URL".into()))?;
        let scope = challenge
            .scope
            .clone()
            .unwrap_or_else(|| format!("repository:{}:pull", self.at.repository));
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = &challenge.service {
                query.append_pair("service", service);
            }
            query.append_pair("scope", &scope);
        }
        let headers: Vec<(HeaderName, String)> = self
            .login
            .basic()
            .map(|basic| (AUTHORIZATION, basic))
            .into_iter()
            .collect();
        let answer = self
            .fetcher
            .send(
                self.repo,
                url.as_str(),
                &headers,
                "token",
                MAX_PAGE_BYTES,
                self.login.tls(),
            )
            .await?;
        if !answer.status.is_success() {
            return Err(self.status("token", answer.status));
        }
        let parsed: TokenAnswer = serde_json::from_slice(&answer.body)
            .map_err(|_| self.invalid("the registry's token answer is not JSON".into()))?;
        parsed
            .token
            .or(parsed.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| self.invalid("the registry's token answer holds no token".into()))
    }

    /// Every tag of the repository, page after page.
    pub(super) async fn tags(&self) -> Result<Vec<String>, ChartError> {
        let mut url = self.url("tags/list");
        let mut tags = Vec::new();
        for _ in 0..MAX_TAG_PAGES {
            let answer = self.get(&url, None, "tags", MAX_PAGE_BYTES).await?;
            if answer.status == StatusCode::NOT_FOUND {
                return Err(self.invalid(format!(
                    "the registry has no repository {} (HTTP 404)",
                    self.at.repository
                )));
            }
            if !answer.status.is_success() {
                return Err(self.status("tags", answer.status));
            }
            let page: TagList = serde_json::from_slice(&answer.body)
                .map_err(|e| self.invalid(format!("the tags list does not parse: {e}")))?;
            tags.extend(page.tags.unwrap_or_default());
            let next = answer
                .headers
                .get(LINK)
                .and_then(|h| h.to_str().ok())
                .and_then(next_page);
            let Some(next) = next else {
                return Ok(tags);
            };
            let base = url::Url::parse(&url).map_err(|e| self.invalid(e.to_string()))?;
            url = base
                .join(next)
                .map_err(|e| self.invalid(format!("the tags list's next page: {e}")))?
                .to_string();
        }
        Err(self.invalid(format!("the tags list is over {MAX_TAG_PAGES} pages")))
    }

    /// The newest version among the tags that meets `constraint`.
    pub(super) async fn pick(
        &self,
        constraint: &str,
        chart_at: &str,
    ) -> Result<String, ChartError> {
        let tags = self.tags().await?;
        let reqs = parse_constraint(constraint).map_err(|message| ChartError::BadConstraint {
            chart: chart_at.to_string(),
            dependency: self.chart.to_string(),
            constraint: constraint.to_string(),
            message,
        })?;
        let versions: Vec<String> = tags.iter().map(|t| version_of(t)).collect();
        newest(versions.iter().map(String::as_str), &reqs)
            .map(str::to_string)
            .ok_or_else(|| self.unknown_version(constraint, &versions))
    }

    pub(super) fn unknown_version(&self, constraint: &str, versions: &[String]) -> ChartError {
        let mut sorted: Vec<&String> = versions
            .iter()
            .filter(|v| parse_version(v).is_some())
            .collect();
        sorted.sort_by_key(|v| std::cmp::Reverse(parse_version(v)));
        ChartError::UnknownVersion {
            repo: redact_url(self.repo),
            chart: self.chart.to_string(),
            constraint: constraint.to_string(),
            versions: listed(sorted.iter().map(|v| v.as_str())),
        }
    }

    /// The manifest at `reference` (a tag or a digest): its digest and its chart
    /// layer; `None` when the registry has no such tag.
    pub(super) async fn manifest(
        &self,
        reference: &str,
        version: &str,
    ) -> Result<Option<(String, Descriptor)>, ChartError> {
        let url = self.url(&format!("manifests/{reference}"));
        let answer = self
            .get(&url, Some(OCI_MANIFEST), "manifest", MAX_MANIFEST_BYTES)
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !answer.status.is_success() {
            return Err(self.status("manifest", answer.status));
        }
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&answer.body)));
        let named = as_digest(reference).map(str::to_string).or_else(|| {
            let header = answer.headers.get("docker-content-digest")?;
            header.to_str().ok().and_then(as_digest).map(str::to_string)
        });
        if let Some(expected) = named.filter(|named| *named != digest) {
            return Err(ChartError::DigestMismatch {
                repo: redact_url(self.repo),
                chart: self.chart.to_string(),
                version: version.to_string(),
                checked: Checked::Manifest,
                expected,
                actual: digest,
            });
        }
        let manifest: Manifest = serde_json::from_slice(&answer.body)
            .map_err(|e| self.invalid(format!("the manifest does not parse: {e}")))?;
        if let Some(config) = self.expect.config
            && manifest.config.media_type != config
        {
            return Err(self.invalid(format!(
                "{reference} is not a Helm chart (config media type {:?}, Helm's is {config})",
                manifest.config.media_type
            )));
        }
        let wanted = self.expect.layers.join(" or ");
        if self.expect.alone && manifest.layers.len() != 1 {
            return Err(self.invalid(format!(
                "{reference}: the manifest must hold exactly one layer ({wanted}), it holds {}",
                manifest.layers.len()
            )));
        }
        let held: Vec<String> = manifest
            .layers
            .iter()
            .map(|l| l.media_type.clone())
            .collect();
        let mut found = manifest
            .layers
            .into_iter()
            .filter(|l| self.expect.layers.contains(&l.media_type.as_str()));
        let (Some(layer), None) = (found.next(), found.next()) else {
            return Err(self.invalid(format!(
                "{reference}: the manifest must hold one layer of media type {wanted} \
                 (its layers' media types: {held:?})"
            )));
        };
        if as_digest(&layer.digest).is_none() {
            return Err(self.invalid(format!(
                "{reference}: the chart layer's digest is not sha256:<64 hex digits>"
            )));
        }
        Ok(Some((digest, layer)))
    }

    /// The chart layer's bytes, checked against its digest.
    pub(super) async fn blob(
        &self,
        layer: &Descriptor,
        version: &str,
    ) -> Result<Vec<u8>, ChartError> {
        let what = format!("{}-{version}.tgz", self.chart);
        if layer.size > MAX_ARCHIVE_BYTES {
            return Err(ChartError::TooLarge {
                repo: redact_url(self.repo),
                what,
                limit: MAX_ARCHIVE_BYTES,
            });
        }
        let url = self.url(&format!("blobs/{}", layer.digest));
        let answer = self.get(&url, None, &what, MAX_ARCHIVE_BYTES).await?;
        if !answer.status.is_success() {
            return Err(self.status(&what, answer.status));
        }
        let actual = format!("sha256:{}", hex::encode(Sha256::digest(&answer.body)));
        if actual != layer.digest {
            return Err(ChartError::DigestMismatch {
                repo: redact_url(self.repo),
                chart: self.chart.to_string(),
                version: version.to_string(),
                checked: Checked::Layer,
                expected: layer.digest.clone(),
                actual,
            });
        }
        Ok(answer.body)
    }
}

impl ChartStore {
    /// Chart `name` of the OCI registry `repo` at the newest version `constraint`
    /// allows (or at the manifest digest it names): from the cache when that version
    /// (or digest) was fetched before, else from the registry. The digest returned is
    /// the manifest's.
    pub(super) async fn remote_oci(
        &self,
        repo: &str,
        name: &str,
        constraint: &str,
        chart_at: &str,
        login: &ChartLogin,
    ) -> Result<(String, String, Expanded), ChartError> {
        if let Some(digest) = as_digest(constraint)
            && let Some((_, files)) = self.fetched_before(repo, name, digest, login)?
        {
            return Ok((
                chart_version(repo, name, &files)?,
                digest.to_string(),
                files,
            ));
        }
        let fetcher = self.fetcher()?;
        let registry = Registry {
            fetcher: &fetcher,
            tokens: &self.inner.tokens,
            repo,
            chart: name,
            at: Reference::parse(repo, name, !login.tls().is_empty())?,
            login,
            expect: &HELM_CHART,
        };
        let version = match as_digest(constraint) {
            Some(_) => None,
            // A bare full version is exact (Helm's reading): no tags list needed.
            None if parse_version(constraint).is_some() => Some(constraint.trim().to_string()),
            None => Some(registry.pick(constraint, chart_at).await?),
        };
        if let Some(version) = &version {
            if let Some((digest, files)) = self.fetched_before(repo, name, version, login)? {
                return Ok((version.clone(), digest, files));
            }
        }
        let reference = match (&version, as_digest(constraint)) {
            (Some(version), _) => tag_of(version),
            (None, digest) => digest.unwrap_or_default().to_string(),
        };
        let shown = version.clone().unwrap_or_else(|| reference.clone());
        let Some((digest, layer)) = registry.manifest(&reference, &shown).await? else {
            if version.is_none() {
                return Err(registry.invalid(format!("the registry has no manifest {reference}")));
            }
            let tags = registry.tags().await?;
            let versions: Vec<String> = tags.iter().map(|t| version_of(t)).collect();
            return Err(registry.unknown_version(constraint, &versions));
        };
        let cached = self.inner.cache.lock().get(&digest);
        let files = match cached {
            Some(files) => files,
            None => {
                let bytes = registry.blob(&layer, &shown).await?;
                let files =
                    archive::unpack(&bytes, name).map_err(|problem| ChartError::Archive {
                        repo: redact_url(repo),
                        chart: name.to_string(),
                        version: shown.clone(),
                        problem,
                    })?;
                let files = Arc::new(files);
                self.inner.cache.lock().put(digest.clone(), files.clone());
                files
            }
        };
        let version = match version {
            Some(version) => version,
            None => chart_version(repo, name, &files)?,
        };
        tracing::info!(
            repository = %redact_url(repo),
            chart = name,
            version = %version,
            digest = %digest,
            "chart fetched from an OCI registry"
        );
        // Under the manifest's digest too: a source pinned to it finds it there.
        self.pin(repo, name, &version, login, &digest)?;
        self.pin(repo, name, &digest, login, &digest)?;
        Ok((version, digest, files))
    }
}

/// The version a chart's own Chart.yaml gives (a chart pinned by digest has no other).
fn chart_version(
    repo: &str,
    name: &str,
    files: &[(String, Vec<u8>)],
) -> Result<String, ChartError> {
    deps::chart_version(files).ok_or_else(|| ChartError::Registry {
        repo: redact_url(repo),
        chart: name.to_string(),
        message: "Chart.yaml names no version".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oci_repository_is_its_registry_and_the_charts_path_in_it() {
        let at =
            Reference::parse("oci://ghcr.io/stefanprodan/charts/", "podinfo", false).expect("ok");
        assert_eq!(at.base, "https://ghcr.io");
        assert_eq!(at.repository, "stefanprodan/charts/podinfo");
        let local = Reference::parse("oci://127.0.0.1:5000", "web", false).expect("ok");
        assert_eq!(local.base, "http://127.0.0.1:5000");
        assert_eq!(local.repository, "web");
        let trusted = Reference::parse("oci://127.0.0.1:5000", "web", true).expect("ok");
        assert_eq!(
            trusted.base, "https://127.0.0.1:5000",
            "a source with its own CA speaks TLS"
        );
        assert_eq!(
            Reference::parse("oci://localhost:5000/a", "web", false)
                .expect("ok")
                .base,
            "http://localhost:5000"
        );
        let err = Reference::parse("oci://u:secret@r.example/c", "web", false).expect_err("creds");
        assert!(!err.to_string().contains("secret"), "{err}");
        assert_eq!(tag_of("1.2.3+build.1"), "1.2.3_build.1");
        assert_eq!(version_of("1.2.3_build.1"), "1.2.3+build.1");
        assert!(as_digest(&format!("sha256:{}", "a".repeat(64))).is_some());
        assert!(as_digest("sha256:abc").is_none());
        assert!(as_digest(&format!("sha256:{}", "A".repeat(64))).is_none());
    }

    #[test]
    fn bearer_challenges_and_link_headers_read_as_registries_write_them() {
        assert_eq!(
            bearer_challenge(
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:samalba/my-app:pull,push""#
            ),
            Some(Challenge {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:samalba/my-app:pull,push".into()),
            })
        );
        assert_eq!(
            bearer_challenge("bearer realm=https://ghcr.io/token, service=ghcr.io"),
            Some(Challenge {
                realm: "https://ghcr.io/token".into(),
                service: Some("ghcr.io".into()),
                scope: None,
            })
        );
        assert_eq!(bearer_challenge(r#"Basic realm="Registry Realm""#), None);
        assert_eq!(bearer_challenge("Bearer service=x"), None, "no realm");
        assert_eq!(
            next_page(r#"</v2/charts/web/tags/list?last=1.0.9&n=100>; rel="next""#),
            Some("/v2/charts/web/tags/list?last=1.0.9&n=100")
        );
        assert_eq!(next_page(r#"</x>; rel="prev""#), None);
    }
}
