//! Plain manifests from an OCI artifact as an app's source (issue #26): Flux's
//! `OCIRepository` (`flux push artifact`) and Argo CD 3.1's OCI sources. The artifact
//! `oci://host/path/name` is repository `path/name` of registry `host`, spoken to by
//! the chart fetcher's OCI client ([`super::oci`]): the same SSRF guard, logins,
//! tokens, size budgets and digest checks as a chart of that registry.
//!
//! A tag is exact, a semver range resolved against the tags list (as a chart's
//! version is), or the source names a manifest digest. The manifest must hold exactly
//! one layer, a tar.gz of Flux's or OCI's layer media type; its bytes must have the
//! layer's digest, and it is expanded by the chart archives' checks
//! ([`super::archive::unpack_tree`]) into the same digest-keyed cache. The revision is
//! `tag@sha256:<manifest digest>` (Flux's), or the digest alone for a pinned one: a
//! tag pushed again is a new revision, and a poll whose tag still names the same
//! manifest fetches no blob.

use std::sync::Arc;

use super::archive;
use super::error::ChartError;
use super::login::ChartLogin;
use super::oci::{Descriptor, Expect, Reference, Registry, as_digest, tag_of};
use super::version::{parse_constraint, parse_version};
use super::{ChartStore, Expanded};
use crate::source::{Revision, redact_url};

/// Flux's layer media type for `flux push artifact` (fluxcd/pkg oci).
const FLUX_CONTENT_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";

/// The OCI image spec's gzip-compressed layer (what `oras push` of a tar.gz and Argo
/// CD's OCI sources use).
const OCI_TAR_GZIP_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// An artifact of plain manifests: one tar.gz layer of either media type.
const MANIFESTS: Expect = Expect::only(&[FLUX_CONTENT_LAYER, OCI_TAR_GZIP_LAYER]);

/// The tag an artifact source without one follows (Flux's `OCIRepository` default).
pub const DEFAULT_ARTIFACT_TAG: &str = "latest";

/// Where a bad range is reported, in [`ChartError::BadConstraint`]'s message.
const SOURCE_PLACE: &str = "source";

/// What a source's reference asks of the registry.
#[derive(Debug, PartialEq, Eq)]
enum Wanted<'a> {
    /// One manifest, by its digest.
    Digest(&'a str),
    /// A tag as it is (a full version, or a name such as `latest`).
    Tag(&'a str),
    /// The newest tag a semver range allows.
    Range(&'a str),
}

fn wanted(reference: &str) -> Wanted<'_> {
    let reference = reference.trim();
    if let Some(digest) = as_digest(reference) {
        return Wanted::Digest(digest);
    }
    if reference.is_empty() {
        return Wanted::Tag(DEFAULT_ARTIFACT_TAG);
    }
    if parse_version(reference).is_none() && parse_constraint(reference).is_ok() {
        return Wanted::Range(reference);
    }
    Wanted::Tag(reference)
}

/// `oci://host/path/name` as the registry's parent URL and the repository's last part.
fn split(url: &str) -> Result<(&str, &str), ChartError> {
    let url = url.trim_end_matches('/');
    let rest = url.strip_prefix(super::OCI_SCHEME).unwrap_or(url);
    match rest.rsplit_once('/') {
        Some((host, name)) if !host.is_empty() && !name.is_empty() => {
            Ok((&url[..url.len() - name.len() - 1], name))
        }
        _ => Err(ChartError::Registry {
            repo: redact_url(url),
            chart: String::new(),
            message: "an artifact is oci://host/path/name: no repository in the URL".into(),
        }),
    }
}

/// The manifest digest a revision of an artifact names.
fn digest_of(revision: &Revision) -> &str {
    revision
        .sha
        .rsplit_once('@')
        .map_or(revision.sha.as_str(), |(_, digest)| digest)
}

impl ChartStore {
    /// The artifact `url` at `reference` (a tag, a range over the tags, or a digest),
    /// its layer fetched and checked unless the cache holds its manifest's files.
    pub async fn resolve_artifact(
        &self,
        url: &str,
        reference: &str,
        login: &ChartLogin,
    ) -> Result<Revision, ChartError> {
        let want = wanted(reference);
        if let Wanted::Digest(digest) = want
            && self.cached(digest)?.is_some()
        {
            return Ok(pinned(digest));
        }
        let (parent, name) = split(url)?;
        let fetcher = self.fetcher()?;
        let registry = Registry {
            fetcher: &fetcher,
            tokens: &self.inner.tokens,
            repo: url,
            chart: name,
            at: Reference::parse(parent, name, !login.tls().is_empty())?,
            login,
            expect: &MANIFESTS,
        };
        let tag = match want {
            Wanted::Digest(_) => None,
            Wanted::Tag(tag) => Some(tag.to_string()),
            Wanted::Range(range) => Some(tag_of(
                &registry
                    .pick(range, SOURCE_PLACE)
                    .await
                    .map_err(as_unknown_tag)?,
            )),
        };
        let reference = tag.as_deref().unwrap_or(reference.trim());
        let (digest, layer) = self.manifest(&registry, reference).await?;
        self.layer(&registry, &digest, &layer, reference).await?;
        tracing::info!(
            repository = %redact_url(url),
            reference,
            digest = %digest,
            "OCI artifact resolved"
        );
        Ok(match tag {
            Some(tag) => Revision {
                sha: format!("{tag}@{digest}"),
                subject: format!("artifact {name}:{tag}"),
            },
            None => pinned(&digest),
        })
    }

    /// The files of the artifact `url` at `revision` (one [`ChartStore::resolve_artifact`]
    /// returned): from the cache, or fetched again by the revision's digest.
    pub async fn artifact_files(
        &self,
        url: &str,
        revision: &Revision,
        login: &ChartLogin,
    ) -> Result<Vec<(String, Vec<u8>)>, ChartError> {
        let digest = digest_of(revision);
        if self.cached(digest)?.is_none() {
            self.resolve_artifact(url, digest, login).await?;
        }
        let files = self.cached(digest)?.ok_or_else(|| ChartError::Registry {
            repo: redact_url(url),
            chart: String::new(),
            message: format!("{digest}: over the chart cache's budget"),
        })?;
        // Kept shared in the cache; the render stage takes its own copy.
        Ok(files.iter().cloned().collect())
    }

    fn cached(&self, digest: &str) -> Result<Option<Expanded>, ChartError> {
        Ok(self.inner.cache.lock().get(digest))
    }

    /// The manifest at `reference`; an unknown tag lists the tags there are.
    async fn manifest(
        &self,
        registry: &Registry<'_>,
        reference: &str,
    ) -> Result<(String, Descriptor), ChartError> {
        if let Some(found) = registry.manifest(reference, reference).await? {
            return Ok(found);
        }
        let tags = if as_digest(reference).is_some() {
            Vec::new()
        } else {
            registry.tags().await?
        };
        Err(ChartError::UnknownTag {
            repo: redact_url(registry.repo),
            reference: reference.to_string(),
            tags: super::repo::listed(tags.iter().map(String::as_str)),
        })
    }

    /// The layer of the manifest `digest`, fetched, checked and expanded into the
    /// cache, unless the cache holds it.
    async fn layer(
        &self,
        registry: &Registry<'_>,
        digest: &str,
        layer: &Descriptor,
        reference: &str,
    ) -> Result<(), ChartError> {
        if self.cached(digest)?.is_some() {
            return Ok(());
        }
        let bytes = registry.blob(layer, reference).await?;
        let files = archive::unpack_tree(&bytes).map_err(|problem| ChartError::Archive {
            repo: redact_url(registry.repo),
            chart: registry.chart.to_string(),
            version: reference.to_string(),
            problem,
        })?;
        self.inner
            .cache
            .lock()
            .put(digest.to_string(), Arc::new(files));
        Ok(())
    }
}

/// The revision of an artifact pinned by its manifest's digest.
fn pinned(digest: &str) -> Revision {
    Revision {
        sha: digest.to_string(),
        subject: format!("artifact {digest}"),
    }
}

/// A range no tag meets, said as an artifact's (the chart client says "version").
fn as_unknown_tag(err: ChartError) -> ChartError {
    match err {
        ChartError::UnknownVersion {
            repo,
            constraint,
            versions,
            ..
        } => ChartError::UnknownTag {
            repo,
            reference: constraint,
            tags: versions,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_artifacts_reference_is_a_digest_a_tag_or_a_range() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(wanted(&digest), Wanted::Digest(&digest));
        assert_eq!(wanted("1.2.3"), Wanted::Tag("1.2.3"));
        assert_eq!(wanted("latest"), Wanted::Tag("latest"));
        assert_eq!(wanted(""), Wanted::Tag(DEFAULT_ARTIFACT_TAG));
        assert_eq!(wanted("~1.2"), Wanted::Range("~1.2"));
        assert_eq!(wanted(">=1.0.0 <2"), Wanted::Range(">=1.0.0 <2"));
    }

    #[test]
    fn an_artifacts_url_is_its_registrys_path_and_its_name() {
        assert_eq!(
            split("oci://127.0.0.1:5000/manifests/app/").expect("ok"),
            ("oci://127.0.0.1:5000/manifests", "app")
        );
        assert_eq!(
            split("oci://ghcr.io/app").expect("ok"),
            ("oci://ghcr.io", "app")
        );
        assert!(split("oci://ghcr.io").is_err());
        let revision = Revision {
            sha: format!("1.0.0@sha256:{}", "cd".repeat(32)),
            subject: String::new(),
        };
        assert_eq!(digest_of(&revision), format!("sha256:{}", "cd".repeat(32)));
        assert_eq!(digest_of(&pinned("sha256:ab")), "sha256:ab");
    }
}
