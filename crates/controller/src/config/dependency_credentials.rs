//! `source.dependencyCredentials` (issue #26): Secrets whose credentials serve a
//! chart's dependencies on repositories other than the source's own, matched by URL
//! prefix (Argo CD's repository credentials, Helm's `repositories.yaml`), or, for an
//! entry without `url`, a dockerconfigjson's registries. Checked here so that a
//! configuration that loads names prefixes tether can match and Secrets it can read.

// A dependency's `repository:` is fetched over a chart source's schemes.
use super::chart::CHART_SCHEMES as SCHEMES;
use super::check::{Checker, line_of};
use super::credentials::secret_ref;
use super::model::DependencyCredentialConfig;
use super::raw;

/// The entries of `src.dependencyCredentials`; every problem reported on `check`.
pub(super) fn resolve(
    src: &raw::Source,
    path: &str,
    check: &mut Checker,
) -> Vec<DependencyCredentialConfig> {
    let mut urls: Vec<String> = Vec::new();
    let mut out = Vec::new();
    if src.oci.is_some() && !src.dependency_credentials.is_empty() {
        check.report(
            format!("{path}.source.dependencyCredentials"),
            src.dependency_credentials.first().and_then(line_of),
            "an OCI artifact of manifests has no chart dependencies",
        );
    }
    for (i, entry) in src.dependency_credentials.iter().enumerate() {
        let at = format!("{path}.source.dependencyCredentials[{i}]");
        let url = entry.value.url.as_ref().map(|url| {
            let text = url.value.trim().trim_end_matches('/').to_string();
            if let Err(message) = check_url(&text) {
                check.report(format!("{at}.url"), line_of(url), message);
            }
            if urls.contains(&text) {
                check.report(
                    format!("{at}.url"),
                    line_of(url),
                    format!("{text} has an entry already: one Secret per prefix"),
                );
            }
            urls.push(text.clone());
            text
        });
        let r = &entry.value.secret_ref.value;
        let secret_ref = secret_ref(
            &r.name,
            None,
            r.namespace.as_ref(),
            &format!("{at}.secretRef"),
            check,
        );
        out.push(DependencyCredentialConfig { url, secret_ref });
    }
    out
}

/// Whether `url` is a prefix a dependency's repository can match: a scheme
/// dependencies are fetched over, a host, and nothing a Secret should hold instead.
fn check_url(url: &str) -> Result<(), String> {
    let Some(rest) = SCHEMES.iter().find_map(|s| url.strip_prefix(s)) else {
        return Err(format!(
            "{url:?} is no repository URL prefix: https://host/path, http://… or oci://host/path"
        ));
    };
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err(format!("{url:?} names no host"));
    }
    if host.contains('@') {
        return Err("credentials belong in the Secret, not in the url".into());
    }
    if rest.contains(['?', '#']) {
        return Err(format!("{url:?}: a prefix has no query or fragment"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::super::chart::tests::problems;
    use tether_core::source::CredentialsSecret;
    use tether_core::source::charts::DependencyCredential;

    #[test]
    fn entries_name_a_prefix_and_a_secret_of_the_inventory_namespace_or_their_own() {
        let text = "apps:\n- name: web\n  source:\n    repo: https://git.example/r.git\n    path: stack\n    dependencyCredentials:\n    - {url: \"https://charts.example.com/private/\", secretRef: {name: charts}}\n    - {secretRef: {name: regcred, namespace: registries}}\n";
        let config = Config::parse(text, "tether.yaml").expect("valid");
        let source = config.apps[0].source();
        assert_eq!(
            source.dependency_credentials,
            [
                DependencyCredential {
                    url: Some("https://charts.example.com/private".into()),
                    secret: CredentialsSecret {
                        namespace: "tether-system".into(),
                        name: "charts".into()
                    },
                },
                DependencyCredential {
                    url: None,
                    secret: CredentialsSecret {
                        namespace: "registries".into(),
                        name: "regcred".into()
                    },
                },
            ]
        );
    }

    #[test]
    fn a_prefix_that_matches_nothing_or_carries_credentials_is_refused_by_its_place() {
        let err = problems(
            "{repo: https://git.example/r.git, dependencyCredentials: [{url: charts.example.com, secretRef: {name: a}}, {url: \"https://u:p@charts.example.com\", secretRef: {name: b}}, {url: \"oci://r.example/c\", secretRef: {name: c}}, {url: \"oci://r.example/c/\", secretRef: {name: d}}, {secretRef: {name: Bad_Name}}]}",
        );
        for want in [
            "apps[0].source.dependencyCredentials[0].url",
            "is no repository URL prefix",
            "apps[0].source.dependencyCredentials[1].url",
            "credentials belong in the Secret",
            "apps[0].source.dependencyCredentials[3].url",
            "oci://r.example/c has an entry already",
            "apps[0].source.dependencyCredentials[4].secretRef.name",
        ] {
            assert!(err.contains(want), "{want}: {err}");
        }
        assert!(!err.contains("u:p@"), "{err}");
        let err = problems(
            "{oci: \"oci://r.example/app\", tag: \"1.0.0\", dependencyCredentials: [{secretRef: {name: a}}]}",
        );
        assert!(
            err.contains("apps[0].source.dependencyCredentials")
                && err.contains("has no chart dependencies"),
            "{err}"
        );
    }
}
