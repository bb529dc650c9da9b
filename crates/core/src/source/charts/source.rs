//! A chart as an app's whole source (issue #26): chart `name` of an HTTP(S) Helm
//! repository at the newest version a constraint allows, re-resolved at each poll.
//! The same fetcher, digest check, archive checks and cache serve it as serve a
//! chart's dependencies; only the revision is new. A revision names the chart, its
//! version and its archive's digest (`name@version@sha256:<hex>`, Flux's
//! `chart@version` with the digest), so a republished archive is a new revision, and
//! reading a revision's files back never takes another archive than the one it named.

use std::collections::HashMap;

use super::ChartStore;
use super::error::{ChartError, Checked};
use super::login::ChartLogin;
use super::oci;
use super::version::parse_constraint;
use crate::source::{Revision, redact_url};

/// Where a chart source's [`ChartError::BadConstraint`] comes from, in its message.
const SOURCE_PLACE: &str = "source";

/// Whether `text` is a version or version range a chart source of `repo` accepts
/// (or, for an OCI registry, a manifest digest), or why not (for the
/// configuration's validation, naming its field).
pub fn check_version(repo: &str, text: &str) -> Result<(), String> {
    if text.trim().starts_with("sha256:") {
        if !oci::is_oci(repo) {
            return Err("a digest pins a chart of an OCI registry (oci://) only".into());
        }
        return oci::as_digest(text)
            .map(|_| ())
            .ok_or_else(|| "a digest is sha256:<64 lowercase hex digits>".into());
    }
    parse_constraint(text).map(|_| ())
}

/// A chart revision's `sha`: `name@version@sha256:<hex>`.
fn revision_id(name: &str, version: &str, digest: &str) -> String {
    format!("{name}@{version}@{digest}")
}

/// The version and digest a revision of chart `name` names, when it is one.
fn parse_revision<'a>(name: &str, sha: &'a str) -> Option<(&'a str, &'a str)> {
    let rest = sha.strip_prefix(name)?.strip_prefix('@')?;
    let (version, digest) = rest.rsplit_once('@')?;
    digest.starts_with("sha256:").then_some((version, digest))
}

impl ChartStore {
    /// Chart `name` of `repo` at the newest version `constraint` allows, fetched and
    /// checked (or found in the cache), as a revision; fetched with `login`. A range asks the repository's
    /// index each time (one request); an exact version fetched before asks nothing.
    pub async fn resolve_chart(
        &self,
        repo: &str,
        name: &str,
        constraint: &str,
        login: &ChartLogin,
    ) -> Result<Revision, ChartError> {
        let mut indexes = HashMap::new();
        let (version, digest, _) = self
            .remote(repo, name, constraint, SOURCE_PLACE, &mut indexes, login)
            .await?;
        Ok(Revision {
            sha: revision_id(name, &version, &digest),
            subject: format!("chart {name} {version}"),
        })
    }

    /// The files of chart `name` at `revision` (one [`ChartStore::resolve_chart`]
    /// returned), from the cache, or fetched again when it was evicted: then the
    /// archive must still have the revision's digest.
    pub async fn chart_files(
        &self,
        repo: &str,
        name: &str,
        revision: &Revision,
        login: &ChartLogin,
    ) -> Result<Vec<(String, Vec<u8>)>, ChartError> {
        let (version, digest) =
            parse_revision(name, &revision.sha).ok_or_else(|| ChartError::Index {
                repo: redact_url(repo),
                message: format!("{} is not a revision of chart {name}", revision.sha),
            })?;
        let (_, fetched, files) = if oci::is_oci(repo) {
            // By the manifest's digest (from the cache when it holds it): the tag
            // may name another manifest by now.
            self.remote(repo, name, digest, SOURCE_PLACE, &mut HashMap::new(), login)
                .await?
        } else {
            match self.fetched_before(repo, name, version, login)? {
                Some((fetched, files)) => (version.to_string(), fetched, files),
                None => {
                    self.remote(
                        repo,
                        name,
                        version,
                        SOURCE_PLACE,
                        &mut HashMap::new(),
                        login,
                    )
                    .await?
                }
            }
        };
        if fetched != digest {
            return Err(ChartError::DigestMismatch {
                repo: redact_url(repo),
                chart: name.to_string(),
                version: version.to_string(),
                checked: Checked::Revision,
                expected: digest.to_string(),
                actual: fetched,
            });
        }
        // Kept shared in the cache; the render stage takes its own copy.
        Ok(files.iter().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_revision_names_the_chart_its_version_and_digest() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let sha = revision_id("web", "1.2.3-rc.1", &digest);
        assert_eq!(sha, format!("web@1.2.3-rc.1@{digest}"));
        assert_eq!(
            parse_revision("web", &sha),
            Some(("1.2.3-rc.1", digest.as_str()))
        );
        assert_eq!(parse_revision("we", &sha), None, "another chart's");
        assert_eq!(parse_revision("web", "web@1.0.0"), None, "no digest");
        let http = "https://charts.example.com";
        assert!(check_version(http, "~1.2").is_ok());
        assert!(check_version(http, ">=4.0.0 <5").is_ok());
        assert!(check_version(http, "banana").is_err());
        assert!(check_version(http, &digest).is_err(), "a digest is OCI's");
        assert!(check_version("oci://r.example/charts", &digest).is_ok());
        assert!(check_version("oci://r.example/charts", "sha256:ab").is_err());
    }
}
