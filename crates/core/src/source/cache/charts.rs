//! A chart source's credentials (issue #26), read at each fetch as a Git source's
//! are: the configuration's environment variable or file, or a Secret read through
//! the cluster connection (an App's with its own identity), resolved for the chart's
//! repository (a `kubernetes.io/dockerconfigjson` entry for an OCI registry's host);
//! and the sync of a source with no clone (a chart, an OCI artifact).

use std::collections::BTreeMap;

use super::SourceCache;
use crate::source::charts::{ChartLogin, DependencyLogins};
use crate::source::{Auth, CredentialsSecret, Revision, Source, SourceError};

impl SourceCache {
    /// Resolves a source that has no clone through the chart store's clients: a
    /// chart (of a Helm repository or an OCI registry) or an OCI artifact. `None` for a
    /// Git source.
    pub(super) async fn sync_registry(
        &self,
        source: &Source,
    ) -> Option<Result<Revision, SourceError>> {
        if source.chart.is_none() && !source.artifact {
            return None;
        }
        let login = match self.chart_login(source).await {
            Ok(login) => login,
            Err(e) => return Some(Err(e)),
        };
        let charts = &self.inner.charts;
        let resolved = match &source.chart {
            Some(chart) => {
                charts
                    .resolve_chart(&source.url, chart, &source.reference, &login)
                    .await
            }
            None => {
                charts
                    .resolve_artifact(&source.url, &source.reference, &login)
                    .await
            }
        };
        Some(resolved.map_err(SourceError::from))
    }

    /// The login a chart source's credentials give now. A missing Secret or key is a
    /// credentials error that names them and the repository, never a value.
    pub async fn chart_login(&self, source: &Source) -> Result<ChartLogin, SourceError> {
        let login = match &source.auth {
            Auth::Secret(secret) => {
                let data = self.secret_data(source, secret).await?;
                ChartLogin::from_secret(secret, &data, &source.url)
            }
            auth => ChartLogin::from_auth(auth),
        };
        login.map_err(|message| SourceError::Credentials {
            url: source.url.clone(),
            message,
        })
    }

    /// The logins of a chart's dependencies, read now: the Secrets of the source's
    /// `dependencyCredentials`, and `own`, the chart source's login for its own
    /// repository. A missing Secret or key is a credentials error naming them.
    pub async fn dependency_logins(
        &self,
        source: &Source,
        own: Option<ChartLogin>,
    ) -> Result<DependencyLogins, SourceError> {
        let mut logins = DependencyLogins::new(own.map(|login| (source.url.as_str(), login)));
        for entry in &source.dependency_credentials {
            let data = self.secret_data(source, &entry.secret).await?;
            logins
                .add(entry, &data)
                .map_err(|message| SourceError::Credentials {
                    url: source.url.clone(),
                    message,
                })?;
        }
        Ok(logins)
    }

    /// The decoded data of `secret`, read through the cluster connection.
    pub(super) async fn secret_data(
        &self,
        source: &Source,
        secret: &CredentialsSecret,
    ) -> Result<BTreeMap<String, Vec<u8>>, SourceError> {
        let cred_err = |message: String| SourceError::Credentials {
            url: source.url.clone(),
            message,
        };
        let cluster = self.inner.secrets.lock().clone();
        let cluster = cluster.ok_or_else(|| {
            cred_err(format!(
                "credentials.secretRef names {secret}, and no cluster connection reads Secrets here"
            ))
        })?;
        cluster
            .secret_data(&secret.namespace, &secret.name)
            .await
            .map_err(|e| cred_err(format!("cannot read {secret}: {e}")))?
            .ok_or_else(|| cred_err(format!("{secret} not found")))
    }
}
