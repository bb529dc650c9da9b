//! `source.oci`, `source.tag` and `source.digest` (issue #26): an app whose source is
//! an OCI artifact of plain manifests (`flux push artifact`), as Flux's
//! `OCIRepository` names one (`url`, `ref.tag` / `ref.semver` / `ref.digest`), with
//! `source.path` a folder inside it. Checked here so that a configuration that loads
//! names an artifact and a tag, range or digest tether can follow.

use super::check::{Checker, line_of};
use super::raw;

/// The scheme of an OCI artifact's URL.
const OCI_SCHEME: &str = "oci://";

/// Longest tag the OCI distribution spec allows (`[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`).
const MAX_TAG_LEN: usize = 128;

/// The source's `repo`: the artifact's URL for an `oci` source, else `repo`, which
/// must then be set.
pub(super) fn source_repo(src: &raw::Source, path: &str, check: &mut Checker) -> String {
    let at = format!("{path}.source.repo");
    match (&src.oci, &src.repo) {
        (Some(oci), repo) => {
            if repo.is_some() {
                check.report(
                    at,
                    line_of(oci),
                    "set repo (Git or a chart's repository) or oci (an artifact), not both",
                );
            }
            oci.value.trim().to_string()
        }
        (None, Some(repo)) => {
            check.non_empty(&at, repo);
            repo.value.trim().to_string()
        }
        (None, None) => {
            check.report(at, None, "must be set (or source.oci for an OCI artifact)");
            String::new()
        }
    }
}

/// The tag, range or digest an `oci` source follows, when the source is one
/// ([`tether_core::source::charts::DEFAULT_ARTIFACT_TAG`] without either); every
/// problem reported on `check`.
pub(super) fn resolve_artifact(
    src: &raw::Source,
    path: &str,
    check: &mut Checker,
) -> Option<String> {
    let at = |field: &str| format!("{path}.source.{field}");
    let Some(oci) = &src.oci else {
        for (field, value) in [("tag", &src.tag), ("digest", &src.digest)] {
            if let Some(value) = value {
                check.report(
                    at(field),
                    line_of(value),
                    "a tag or digest is an OCI artifact's: set source.oci too",
                );
            }
        }
        return None;
    };
    let url = oci.value.trim();
    let named = url
        .strip_prefix(OCI_SCHEME)
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(host, name)| !host.is_empty() && !name.trim_matches('/').is_empty());
    if !named {
        check.report(
            at("oci"),
            line_of(oci),
            "an OCI artifact is oci://host/path/name",
        );
    }
    for (field, set) in [
        ("chart", src.chart.is_some()),
        ("version", src.version.is_some()),
        ("ref", src.reference.is_some()),
        ("verify", src.verify.is_some()),
    ] {
        if set {
            check.report(
                at(field),
                line_of(oci),
                format!("an OCI artifact source takes no {field} (source.tag or source.digest)"),
            );
        }
    }
    match (&src.tag, &src.digest) {
        (Some(tag), Some(_)) => {
            check.report(at("digest"), line_of(tag), "set tag or digest, not both");
            None
        }
        (None, Some(digest)) => {
            let text = digest.value.trim();
            if !text.starts_with("sha256:")
                || tether_core::source::charts::check_version(url, text).is_err()
            {
                check.report(
                    at("digest"),
                    line_of(digest),
                    "a digest is sha256:<64 lowercase hex digits>",
                );
            }
            Some(text.to_string())
        }
        (Some(tag), None) => {
            let text = tag.value.trim();
            if !is_tag(text) && tether_core::source::charts::check_version(url, text).is_err() {
                check.report(
                    at("tag"),
                    line_of(tag),
                    format!("{text:?} is no OCI tag and no semver range"),
                );
            }
            Some(text.to_string())
        }
        (None, None) => Some(tether_core::source::charts::DEFAULT_ARTIFACT_TAG.to_string()),
    }
}

/// Whether `text` is a tag as the OCI distribution spec allows one.
fn is_tag(text: &str) -> bool {
    let mut bytes = text.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
    first_ok
        && text.len() <= MAX_TAG_LEN
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::super::chart::tests::problems;

    #[test]
    fn an_artifact_source_names_an_oci_artifact_a_tag_range_or_digest_and_a_path() {
        let text = "apps:\n- name: web\n  source: {oci: \"oci://ghcr.io/team/manifests\", tag: \"~1.2\", path: deploy}\n";
        let config = Config::parse(text, "tether.yaml").expect("valid");
        let source = config.apps[0].source();
        assert!(source.artifact && source.chart.is_none());
        assert_eq!(source.url, "oci://ghcr.io/team/manifests");
        assert_eq!(source.reference, "~1.2");
        assert_eq!(source.path, "deploy");
        let text = "apps:\n- name: web\n  source: {oci: \"oci://ghcr.io/team/manifests\"}\n";
        let config = Config::parse(text, "tether.yaml").expect("valid");
        assert_eq!(
            config.apps[0].source().reference,
            "latest",
            "Flux's default"
        );
        let digest = format!("sha256:{}", "0a".repeat(32));
        let text = format!(
            "apps:\n- name: web\n  source: {{oci: \"oci://ghcr.io/m\", digest: \"{digest}\"}}\n"
        );
        let config = Config::parse(&text, "tether.yaml").expect("pinned by digest");
        assert_eq!(config.apps[0].source().reference, digest);

        for (source, field, says) in [
            (
                "{oci: \"oci://ghcr.io\"}",
                "source.oci",
                "an OCI artifact is oci://host/path/name",
            ),
            (
                "{oci: \"oci://h/m\", repo: \"https://h/r.git\"}",
                "source.repo",
                "not both",
            ),
            (
                "{oci: \"oci://h/m\", tag: \"1.0.0\", digest: \"sha256:ab\"}",
                "source.digest",
                "set tag or digest, not both",
            ),
            (
                "{oci: \"oci://h/m\", digest: \"sha256:ab\"}",
                "source.digest",
                "sha256:<64 lowercase hex digits>",
            ),
            (
                "{oci: \"oci://h/m\", tag: \"no/tag\"}",
                "source.tag",
                "is no OCI tag and no semver range",
            ),
            (
                "{oci: \"oci://h/m\", chart: web}",
                "source.chart",
                "an OCI artifact source takes no chart",
            ),
            (
                "{repo: \"https://h/r.git\", tag: \"1.0.0\"}",
                "source.tag",
                "set source.oci too",
            ),
            ("{path: x}", "source.repo", "must be set"),
        ] {
            let shown = problems(source);
            assert!(
                shown.contains(&format!("apps[0].{field}")) && shown.contains(says),
                "{source}: {shown}"
            );
        }
    }
}
