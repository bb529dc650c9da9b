//! `source.chart` and `source.version` (issue #26): an app whose source is a chart of
//! an HTTP(S) Helm repository or an OCI registry (`oci://host/path`), as Argo CD names
//! one (`repoURL` + `chart`) and Flux versions one (`version`, exact or a semver
//! range; for OCI, a manifest digest too). Checked here so that a
//! configuration that loads names a repository and a version range tether can follow.

use super::check::{Checker, line_of};
use super::model::ChartSource;
use super::raw;

/// The schemes of the Helm repositories a chart source is fetched from.
pub(super) const CHART_SCHEMES: [&str; 3] = ["https://", "http://", "oci://"];

/// The chart a source names, when it names one; every problem reported on `check`.
pub(super) fn resolve_chart(
    src: &raw::Source,
    path: &str,
    check: &mut Checker,
) -> Option<ChartSource> {
    let Some(name) = &src.chart else {
        if let Some(version) = &src.version {
            check.report(
                format!("{path}.source.version"),
                line_of(version),
                "a version is a chart's: set source.chart too (a Git source takes ref)",
            );
        }
        return None;
    };
    let at = |field: &str| format!("{path}.source.{field}");
    check.non_empty(&at("chart"), name);
    if name.value.contains('/') {
        check.report(
            at("chart"),
            line_of(name),
            "the chart's name in the repository (its index.yaml, or the last part of \
             its OCI reference), without a path",
        );
    }
    let repo = src.repo.as_ref().map_or("", |r| r.value.trim());
    if !CHART_SCHEMES.iter().any(|s| repo.starts_with(s)) {
        check.report(
            at("repo"),
            src.repo.as_ref().and_then(line_of),
            "a chart source's repo is a Helm repository's http(s):// URL \
             or an OCI registry's oci://host/path",
        );
    }
    for (field, set) in [
        ("ref", src.reference.is_some()),
        ("path", src.path.is_some()),
    ] {
        if set {
            check.report(
                at(field),
                line_of(name),
                format!(
                    "a chart source takes no {field} (source.version picks the chart's version)"
                ),
            );
        }
    }
    if let Some(credentials) = &src.credentials {
        for (field, set) in [
            ("sshKeyFile", credentials.value.ssh_key_file.is_some()),
            (
                "knownHostsFile",
                credentials.value.known_hosts_file.is_some(),
            ),
        ] {
            if set {
                check.report(
                    at(&format!("credentials.{field}")),
                    line_of(credentials),
                    "a chart repository takes a username and password, a token, \
                     or a secretRef (Flux's keys, or a dockerconfigjson for a registry)",
                );
            }
        }
    }
    let version = src.version.as_ref().map_or("", |v| v.value.trim());
    if let Err(message) = tether_core::source::charts::check_version(repo, version) {
        check.report(
            at("version"),
            src.version.as_ref().and_then(line_of),
            format!("{version:?} is no version or semver range: {message}"),
        );
    }
    Some(ChartSource {
        name: name.value.trim().to_string(),
        version: version.to_string(),
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{Config, ConfigError};

    /// The problems a configuration of one app with `source` is refused for.
    pub(in crate::config) fn problems(source: &str) -> String {
        let text = format!("apps:\n- name: web\n  source: {source}\n");
        match Config::parse(&text, "tether.yaml") {
            Err(e @ ConfigError::Invalid { .. }) => e.to_string(),
            Err(e) => panic!("expected invalid values, got: {e}"),
            Ok(_) => panic!("expected an error for {source}"),
        }
    }

    #[test]
    fn a_chart_source_names_a_helm_repository_a_chart_and_a_version_range() {
        let text = "apps:\n- name: web\n  source: {repo: \"https://charts.example.com/stable/\", chart: podinfo, version: \"~6.5\"}\n";
        let config = Config::parse(text, "tether.yaml").expect("valid");
        let source = config.apps[0].source();
        assert_eq!(source.chart.as_deref(), Some("podinfo"));
        assert_eq!(source.reference, "~6.5");
        assert_eq!(source.path, "");
        assert_eq!(source.url, "https://charts.example.com/stable/");
        let digest = format!("sha256:{}", "0a".repeat(32));
        let text = format!(
            "apps:\n- name: web\n  source: {{repo: \"oci://ghcr.io/stefanprodan/charts\", chart: podinfo, version: \"{digest}\"}}\n"
        );
        let config = Config::parse(&text, "tether.yaml").expect("an OCI chart pinned by digest");
        assert_eq!(config.apps[0].source().reference, digest);

        for (source, field, says) in [
            (
                "{repo: \"ssh://r.example/c\", chart: c}",
                "source.repo",
                "or an OCI registry's oci://host/path",
            ),
            (
                "{repo: \"https://h\", chart: c, version: \"sha256:abc\"}",
                "source.version",
                "a digest pins a chart of an OCI registry (oci://) only",
            ),
            (
                "{repo: \"https://h\", chart: c, version: banana}",
                "source.version",
                "is no version or semver range",
            ),
            (
                "{repo: \"https://h\", chart: c, ref: main}",
                "source.ref",
                "a chart source takes no ref",
            ),
            (
                "{repo: \"oci://h/c\", chart: c, credentials: {sshKeyFile: /k, knownHostsFile: /h}}",
                "source.credentials.sshKeyFile",
                "a chart repository takes a username and password",
            ),
            (
                "{repo: \"https://h\", chart: c, path: x}",
                "source.path",
                "a chart source takes no path",
            ),
            (
                "{repo: \"https://h\", chart: a/c}",
                "source.chart",
                "without a path",
            ),
            (
                "{repo: \"https://h/r.git\", version: \"1.0.0\"}",
                "source.version",
                "set source.chart too",
            ),
        ] {
            let shown = problems(source);
            assert!(
                shown.contains(&format!("apps[0].{field}")) && shown.contains(says),
                "{source}: {shown}"
            );
        }
    }
}
