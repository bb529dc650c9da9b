//! `source.helm.valueSources` (issue #26): value files from other Git repositories,
//! Argo CD's multi-source `$values`. Argo CD lists the extra source beside the chart
//! (`sources: [{repoURL, targetRevision, ref: values}]`); tether keeps one source per
//! app and names the extra ones under the chart's values, where they are used:
//! `valueSources: [{name: values, repo: URL, ref: main}]`, and a value file
//! `$values/envs/prod.yaml` reads `envs/prod.yaml` of that repository. The same app's
//! own repository may be one of them (at the same or another ref). Checked here; the
//! repositories are fetched and read at each pass (`reconcile::value_sources`).

use std::collections::BTreeSet;

use super::check::{Checker, dns1123_label, line_of};
use super::model::{AppConfig, DEFAULT_REF};
use super::raw::{RawValueSource, S};
use tether_core::source::Source;
use tether_diff::manifest::REF_PREFIX;

/// A value source's name is a DNS-1123 label of at most this many characters, as
/// Argo CD's `ref` names are short identifiers (`values`, `config`).
const MAX_NAME_LEN: usize = 63;

/// One Git repository whose files value files name as `$NAME/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueSource {
    /// What `$NAME/` stands for in `valueFiles`.
    pub name: String,
    pub repo: String,
    /// A branch, tag or commit; the remote's default branch (`HEAD`) when unset.
    pub reference: String,
}

/// A `$NAME/path` value file split into its source's name and the path in it; None
/// for a file of the chart's own revision.
pub fn split_ref_file(file: &str) -> Option<(&str, &str)> {
    let rest = file.strip_prefix(REF_PREFIX)?;
    Some(rest.split_once('/').unwrap_or((rest, "")))
}

/// Why a `$NAME/path` value file cannot be read, given the names of the app's value
/// sources: an unknown name, or a path that is empty, absolute or climbs out of the
/// repository. Pure.
pub fn check_ref_file(file: &str, names: &BTreeSet<&str>) -> Result<(), String> {
    let Some((name, path)) = split_ref_file(file) else {
        return Ok(());
    };
    if !names.contains(name) {
        let known: Vec<&str> = names.iter().copied().collect();
        return Err(format!(
            "{file:?} names the value source {name:?}, which source.helm.valueSources does not \
             list (it lists: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    let escapes = path.split('/').any(|p| p == ".." || p == ".");
    if path.is_empty() || path.starts_with('/') || path.contains('\\') || escapes {
        return Err(format!(
            "{file:?} must be $NAME/path, the path a file inside that repository \
             (no '..', '.' or absolute path)"
        ));
    }
    Ok(())
}

/// Checks `valueSources` at `path` (`apps[0].source.helm.valueSources`), reporting
/// every problem.
pub(super) fn resolve_value_sources(
    raw: &[S<RawValueSource>],
    path: &str,
    check: &mut Checker,
) -> Vec<ValueSource> {
    let mut seen = BTreeSet::new();
    let mut sources = Vec::with_capacity(raw.len());
    for (i, entry) in raw.iter().enumerate() {
        let at = |field: &str| format!("{path}[{i}].{field}");
        let name = entry.value.name.value.trim();
        if let Err(message) = dns1123_label(name, MAX_NAME_LEN, "") {
            check.report(at("name"), line_of(&entry.value.name), message);
        } else if !seen.insert(name.to_string()) {
            check.report(
                at("name"),
                line_of(&entry.value.name),
                format!("{name:?} names two value sources"),
            );
        }
        let repo = entry.value.repo.value.trim();
        if check.non_empty(&at("repo"), &entry.value.repo) && repo.starts_with("oci://") {
            check.report(
                at("repo"),
                line_of(&entry.value.repo),
                "a value source is a Git repository (an OCI registry holds charts, not value files)",
            );
        }
        sources.push(ValueSource {
            name: name.to_string(),
            repo: repo.to_string(),
            reference: entry
                .value
                .reference
                .as_ref()
                .map(|r| r.value.trim())
                .filter(|r| !r.is_empty())
                .unwrap_or(DEFAULT_REF)
                .to_string(),
        });
    }
    sources
}

/// Reports each `$NAME/path` entry of `valueFiles` (at `path`) that
/// [`check_ref_file`] refuses.
pub(super) fn check_ref_files(
    files: &[S<String>],
    sources: &[ValueSource],
    path: &str,
    check: &mut Checker,
) {
    let names: BTreeSet<&str> = sources.iter().map(|s| s.name.as_str()).collect();
    for (i, file) in files.iter().enumerate() {
        if let Err(message) = check_ref_file(file.value.trim(), &names) {
            check.report(format!("{path}.valueFiles[{i}]"), line_of(file), message);
        }
    }
}

impl AppConfig {
    /// The app's value sources as the source cache fetches them, by name: each a
    /// whole Git repository (its files read one by one), with the app's own
    /// credentials (its Secret, or those of the file fitting the repository's URL).
    pub fn value_sources(&self) -> Vec<(String, Source)> {
        self.source
            .helm
            .value_sources
            .iter()
            .map(|v| {
                let auth = match &self.source.credentials.secret_ref {
                    Some(_) => self.source().auth,
                    None => self.source.credentials.auth(&v.repo),
                };
                let source = Source::new(&v.repo, &v.reference, "").with_auth(auth);
                (v.name.clone(), source)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::super::chart::tests::problems;
    use super::*;

    #[test]
    fn a_ref_file_names_a_listed_source_and_a_path_inside_it() {
        let names = BTreeSet::from(["values", "config"]);
        assert_eq!(
            split_ref_file("$values/envs/prod.yaml"),
            Some(("values", "envs/prod.yaml"))
        );
        assert_eq!(split_ref_file("values/prod.yaml"), None);
        assert!(check_ref_file("$values/envs/prod.yaml", &names).is_ok());
        assert!(check_ref_file("../values/prod.yaml", &names).is_ok());
        for (file, says) in [
            (
                "$other/a.yaml",
                "which source.helm.valueSources does not list (it lists: config, values)",
            ),
            ("$values", "must be $NAME/path"),
            ("$values/", "must be $NAME/path"),
            ("$values//etc/passwd", "must be $NAME/path"),
            ("$values/../../etc/passwd", "no '..'"),
            ("$values/envs/../../x.yaml", "no '..'"),
            ("$values/./x.yaml", "no '..'"),
        ] {
            let err = check_ref_file(file, &names).expect_err(file);
            assert!(err.contains(says), "{file}: {err}");
        }
        let none = BTreeSet::new();
        let err = check_ref_file("$values/a.yaml", &none).expect_err("no sources");
        assert!(err.contains("it lists: none"), "{err}");
    }

    #[test]
    fn value_sources_are_named_git_repositories_of_the_app() {
        let text = "apps:\n- name: web\n  source:\n    repo: \"https://charts.example.com/\"\n    chart: web\n    version: \"1.0.0\"\n    credentials: {username: u, tokenEnv: T}\n    helm:\n      valueFiles: [values-prod.yaml, \"$values/envs/prod.yaml\"]\n      valueSources:\n      - {name: values, repo: \"https://git.example.com/team/values.git\", ref: main}\n      - {name: own, repo: \"https://git.example.com/team/app.git\"}\n";
        let config = Config::parse(text, "tether.yaml").expect("valid");
        let app = &config.apps[0];
        assert_eq!(
            app.source.helm.value_files,
            ["values-prod.yaml", "$values/envs/prod.yaml"]
        );
        let sources = app.value_sources();
        let (name, values) = &sources[0];
        assert_eq!(name, "values");
        assert_eq!(values.url, "https://git.example.com/team/values.git");
        assert_eq!(values.reference, "main");
        assert_eq!(values.path, "");
        assert_eq!(values.chart, None);
        assert_eq!(sources[1].1.reference, DEFAULT_REF);
        assert_eq!(values.auth, app.source.credentials.auth(&values.url));

        for (helm, field, says) in [
            (
                "{valueFiles: [\"$vals/a.yaml\"], valueSources: [{name: values, repo: \"https://h/r.git\"}]}",
                "source.helm.valueFiles[0]",
                "names the value source \"vals\"",
            ),
            (
                "{valueFiles: [\"$values/../a.yaml\"], valueSources: [{name: values, repo: \"https://h/r.git\"}]}",
                "source.helm.valueFiles[0]",
                "no '..'",
            ),
            (
                "{valueSources: [{name: Values, repo: \"https://h/r.git\"}]}",
                "source.helm.valueSources[0].name",
                "is not a DNS-1123 label",
            ),
            (
                "{valueSources: [{name: v, repo: \"https://h/a.git\"}, {name: v, repo: \"https://h/b.git\"}]}",
                "source.helm.valueSources[1].name",
                "names two value sources",
            ),
            (
                "{valueSources: [{name: v, repo: \"oci://h/c\"}]}",
                "source.helm.valueSources[0].repo",
                "a value source is a Git repository",
            ),
            (
                "{valueSources: [{name: v, repo: \"\"}]}",
                "source.helm.valueSources[0].repo",
                "must not be empty",
            ),
        ] {
            let shown = problems(&format!(
                "{{repo: \"https://h/app.git\", path: chart, helm: {helm}}}"
            ));
            assert!(
                shown.contains(&format!("apps[0].{field}")) && shown.contains(says),
                "{helm}: {shown}"
            );
        }
    }
}
