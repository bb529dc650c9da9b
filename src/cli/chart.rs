//! `tether diff|sync --chart URL --version V --values f.yaml` (issue #26): a chart of
//! a Helm repository or an OCI registry as the command's desired state, fetched by
//! the chart sources the service polls (`tether_core::source::charts`: the index's
//! digest, Helm's OCI manifest, the archive's limits), with values files from the
//! local disk.

use tether_controller::config::{ValuesFrom, VariablesKind};
use tether_controller::reconcile::values;
use tether_core::source::Source;
use tether_diff::manifest::{Renderers, ValuesLayer};

use super::{Error, GitArgs};

#[derive(Debug, Clone, clap::Args)]
pub struct ChartArgs {
    /// A chart instead of manifests: oci://HOST/PATH/NAME, or https://HOST/PATH/NAME for
    /// chart NAME of the Helm repository whose index.yaml is at https://HOST/PATH/ (log
    /// in with --username and --password-env/--password-file, or --token-env/--token-file).
    /// --values then names local files.
    #[arg(long, value_name = "URL", conflicts_with_all = ["repo", "ssh_key"])]
    pub chart: Option<String>,

    /// The version of --chart: exact, a semver range (~1.2), or in an OCI registry a
    /// digest (sha256:...); the newest when unset.
    #[arg(long = "version", value_name = "VERSION", requires = "chart")]
    pub chart_version: Option<String>,
}

impl ChartArgs {
    /// The chart source these arguments name (None without --chart), logged in with
    /// `git`'s credential flags as a configuration file's chart source is.
    pub fn source(&self, git: &GitArgs) -> Result<Option<Source>, Error> {
        let Some(url) = &self.chart else {
            return Ok(None);
        };
        let (repo, name) = split(url).ok_or_else(|| Error::ChartUrl {
            url: tether_core::source::redact(url),
        })?;
        let auth = git.source(&repo, "").auth;
        let version = self.chart_version.clone().unwrap_or_default();
        Ok(Some(Source::chart(repo, name, version).with_auth(auth)))
    }
}

/// The renderers of a `--chart` command: its `--values` are files of the local disk
/// (the chart's own files are in the archive), and its release is the chart's name
/// unless `--app` (or `--release`) names one.
pub fn renderers(
    source: &Source,
    mut renderers: Renderers,
    app: Option<&str>,
    values: &[String],
) -> Result<Renderers, Error> {
    renderers.helm.value_files.clear();
    renderers.helm.values_from = local_values(values)?;
    if let (None, Some(name)) = (app, &source.chart) {
        renderers.release = name.clone();
    }
    Ok(renderers)
}

/// `--values` files of the local disk as values layers (merged in order, after the
/// chart's own values), each a YAML mapping; an error names the file.
fn local_values(files: &[String]) -> Result<Vec<ValuesLayer>, Error> {
    files
        .iter()
        .map(|file| {
            let problem = |problem: String| Error::LocalValues {
                file: file.clone(),
                problem,
            };
            let bytes = std::fs::read(file).map_err(|e| problem(e.to_string()))?;
            let from = ValuesFrom {
                kind: VariablesKind::ConfigMap,
                name: file.clone(),
                values_key: String::new(),
                target_path: None,
                optional: false,
            };
            values::layer(&from, format!("--values {file}"), &bytes).map_err(problem)
        })
        .collect()
}

/// The repository and the chart's name of `--chart`: its last path segment after an
/// `oci://`, `https://` or `http://` repository, as Helm names charts. Pure.
fn split(url: &str) -> Option<(String, String)> {
    let url = url.trim_end_matches('/');
    let scheme = ["oci://", "https://", "http://"]
        .into_iter()
        .find(|s| url.starts_with(s))?;
    let (repo, name) = url.rsplit_once('/')?;
    if repo.len() <= scheme.len() || name.is_empty() {
        return None;
    }
    // A Helm repository is the folder holding index.yaml.
    let repo = if scheme == "oci://" {
        repo.to_string()
    } else {
        format!("{repo}/")
    };
    Some((repo, name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_url_is_its_repository_and_its_last_segment() {
        let split = |url| split(url).map(|(r, n)| format!("{r} {n}"));
        assert_eq!(
            split("oci://ghcr.io/org/charts/podinfo").as_deref(),
            Some("oci://ghcr.io/org/charts podinfo")
        );
        assert_eq!(
            split("https://repo.example.com/name").as_deref(),
            Some("https://repo.example.com/ name")
        );
        assert_eq!(
            split("http://127.0.0.1:8080/sub/web/").as_deref(),
            Some("http://127.0.0.1:8080/sub/ web")
        );
        for bad in [
            "oci://host",
            "https://",
            "git@host:repo",
            "file:///tmp/c",
            "web",
        ] {
            assert_eq!(split(bad), None, "{bad}");
        }
    }
}
