//! Tenants and other clusters, for the loop's cluster stage: a connection that acts as
//! an app's ServiceAccount (so the API server's RBAC decides what the app may read
//! and write, Flux's model), and a connection to the cluster of a kubeconfig kept in a
//! Secret, keyed so that apps naming the same cluster share one.
//!
//! Impersonation sends `Impersonate-User: system:serviceaccount:<ns>:<name>` alone:
//! kube-apiserver then gives the identity a ServiceAccount's own groups
//! (`system:serviceaccounts`, `system:serviceaccounts:<ns>`, `system:authenticated`),
//! and tether's own identity needs only `impersonate` on `serviceaccounts` (naming the
//! groups too would need `impersonate` on `groups` as well). Flux's kustomize-controller
//! sets only the user name, for the same reason.
//!
//! One object is exempt: the app's own inventory ConfigMap (tether's bookkeeping, in
//! tether's namespace) is read and written as tether, as Flux keeps its inventory in
//! its own Kustomization's status. A tenant's ServiceAccount then needs rights on the
//! objects its Git names and nothing in tether's namespace. The exemption names the
//! one ConfigMap exactly, and only tether's inventory code asks for it
//! ([`Cluster::for_bookkeeping`]): every other request, an object from Git of the same
//! name included, goes as the tenant, so Git cannot write an inventory as tether.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{Cluster, ClusterError, ConfigError, SecretProblem, build_client};
use tether_schema::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

/// The key of a kubeconfig Secret when none is named: Flux's `value`, then its
/// `value.yaml`.
pub const DEFAULT_KUBECONFIG_KEYS: [&str; 2] = ["value", "value.yaml"];

/// A ServiceAccount an app acts as.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccount {
    /// The user name kube-apiserver authenticates the ServiceAccount as.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

impl fmt::Display for ServiceAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The one ConfigMap an impersonating connection reads and writes as tether: the
/// app's inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookkeeping {
    pub namespace: String,
    pub name: String,
}

/// What an impersonating connection carries besides its client.
#[derive(Clone)]
pub(super) struct Tenant {
    account: ServiceAccount,
    bookkeeping: Option<Bookkeeping>,
    /// tether's own connection to the same cluster, for the bookkeeping.
    own: Arc<Cluster>,
}

/// A Secret holding a kubeconfig (`destination.kubeConfig.secretRef`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KubeConfigSecret {
    pub namespace: String,
    pub name: String,
    /// None: [`DEFAULT_KUBECONFIG_KEYS`], in order.
    pub key: Option<String>,
}

impl fmt::Display for KubeConfigSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret {}/{}", self.namespace, self.name)
    }
}

/// Which cluster, as whom: the API server's URL and a digest of the kubeconfig that
/// reaches it (never the credentials themselves). Apps whose kubeconfigs are equal
/// share one connection and one watch cache.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey {
    pub server: String,
    pub credentials: String,
}

impl fmt::Display for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.server, &self.credentials)
    }
}

impl Cluster {
    /// The same cluster, acting as `account`: every request carries
    /// `Impersonate-User`, except those on `bookkeeping`. What the server serves is
    /// shared with this connection (discovery is the same for every identity).
    pub fn impersonating(
        &self,
        account: &ServiceAccount,
        bookkeeping: Option<Bookkeeping>,
    ) -> Result<Cluster, ClusterError> {
        let mut config = self
            .config
            .clone()
            .ok_or_else(|| ClusterError::Config(ConfigError::NoImpersonation))?;
        config.auth_info.impersonate = Some(account.username());
        config.auth_info.impersonate_groups = None;
        let client = build_client(config.clone())?;
        let own = match &self.tenant {
            Some(tenant) => tenant.own.clone(),
            None => Arc::new(self.clone()),
        };
        Ok(Cluster {
            client,
            config: Some(config),
            timeout: self.timeout,
            kinds: self.kinds.clone(),
            discovered: self.discovered.clone(),
            tenant: Some(Tenant {
                account: account.clone(),
                bookkeeping,
                own,
            }),
        })
    }

    /// The ServiceAccount this connection acts as, if any.
    pub fn service_account(&self) -> Option<&ServiceAccount> {
        self.tenant.as_ref().map(|t| &t.account)
    }

    /// The connection tether's bookkeeping on the ConfigMap `namespace/name` goes
    /// through: tether's own when this connection acts as a tenant and the ConfigMap
    /// is the one its [`Bookkeeping`] names, this connection otherwise. Only the
    /// inventory's own code asks; the objects an app applies never do.
    pub fn for_bookkeeping(&self, namespace: &str, name: &str) -> &Cluster {
        match &self.tenant {
            Some(Tenant {
                bookkeeping: Some(b),
                own,
                ..
            }) if namespace == b.namespace && name == b.name => own,
            _ => self,
        }
    }

    /// Creates the namespace `name` unless it exists. A tenant's inventory lives in
    /// tether's namespace, which its ServiceAccount may not create: tether makes sure
    /// of it before the tenant's first pass.
    pub async fn ensure_namespace(&self, name: &str) -> Result<(), ClusterError> {
        let gvk = GroupVersionKind::gvk("", "v1", "Namespace");
        let kind = self
            .resolve(&gvk)
            .await?
            .ok_or_else(|| ClusterError::NotServed("Namespaces"))?;
        if self.get(&kind, None, name).await?.is_some() {
            return Ok(());
        }
        let namespace = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
        });
        self.apply(&kind, &namespace, true).await.map(|_| ())
    }

    /// A Secret's `data`, decoded (key → bytes), read with this connection's identity;
    /// None when it does not exist. Values never reach an error: only which key is bad.
    pub async fn secret_data(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ClusterError> {
        let gvk = GroupVersionKind::gvk("", "v1", "Secret");
        let kind = self
            .resolve(&gvk)
            .await?
            .ok_or_else(|| ClusterError::NotServed("Secrets"))?;
        let Some(object) = self.get(&kind, Some(namespace), name).await? else {
            return Ok(None);
        };
        let mut out = BTreeMap::new();
        if let Some(data) = object.get("data").and_then(Value::as_object) {
            for (key, value) in data {
                let bytes = value
                    .as_str()
                    .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
                    .ok_or_else(|| ClusterError::Secret {
                        secret: format!("Secret {namespace}/{name}"),
                        problem: SecretProblem::NotBase64(key.clone()),
                    })?;
                out.insert(key.clone(), bytes);
            }
        }
        Ok(Some(out))
    }

    /// Connects to the cluster of the kubeconfig in `secret`, read with this
    /// connection's identity. The kubeconfig's contents never reach a log or an
    /// error: only where it was and what is wrong with its shape.
    pub async fn connect_secret(
        &self,
        secret: &KubeConfigSecret,
    ) -> Result<(Cluster, ClusterKey), ClusterError> {
        let gvk = GroupVersionKind::gvk("", "v1", "Secret");
        let kind = self
            .resolve(&gvk)
            .await?
            .ok_or_else(|| ClusterError::NotServed("Secrets"))?;
        let object = self
            .get(&kind, Some(&secret.namespace), &secret.name)
            .await?
            .ok_or_else(|| secret_problem(secret, SecretProblem::NotFound))?;
        let text = kubeconfig_text(&object, secret)?;
        let (config, key) = config_from_kubeconfig(&text, secret).await?;
        Ok((Cluster::from_config(config)?, key))
    }
}

/// The kubeconfig text under the Secret's key.
fn kubeconfig_text(
    secret_object: &Value,
    secret: &KubeConfigSecret,
) -> Result<String, ClusterError> {
    let data = secret_object.get("data").and_then(Value::as_object);
    let keys: Vec<&str> = match &secret.key {
        Some(key) => vec![key.as_str()],
        None => DEFAULT_KUBECONFIG_KEYS.to_vec(),
    };
    let (key, encoded) = keys
        .iter()
        .find_map(|k| Some((*k, data?.get(*k)?.as_str()?)))
        .ok_or_else(|| secret_problem(secret, SecretProblem::NoKey(keys.join(" or "))))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| secret_problem(secret, SecretProblem::NotBase64(key.to_string())))?;
    String::from_utf8(bytes).map_err(|_| secret_problem(secret, SecretProblem::NotUtf8))
}

/// Reads a kubeconfig from a Secret into a client configuration and its key. Only
/// inline credentials are accepted: a command (`exec`, `auth-provider`) or a file
/// path would run a program or read a file of tether's own (its ServiceAccount token)
/// on behalf of whoever wrote the Secret. Flux refuses `exec` by default likewise.
pub(crate) async fn config_from_kubeconfig(
    text: &str,
    secret: &KubeConfigSecret,
) -> Result<(kube::Config, ClusterKey), ClusterError> {
    // The parser's message may quote the text: only the fact is reported.
    let kubeconfig = Kubeconfig::from_yaml(text)
        .map_err(|_| secret_problem(secret, SecretProblem::NotAKubeconfig))?;
    for named in &kubeconfig.auth_infos {
        let Some(auth) = &named.auth_info else {
            continue;
        };
        let refused = [
            (auth.exec.is_some(), "exec"),
            (auth.auth_provider.is_some(), "auth-provider"),
            (auth.token_file.is_some(), "tokenFile"),
            (auth.client_certificate.is_some(), "client-certificate"),
            (auth.client_key.is_some(), "client-key"),
        ];
        if let Some((_, what)) = refused.iter().find(|(set, _)| *set) {
            let user = named.name.clone();
            return Err(secret_problem(
                secret,
                SecretProblem::Credentials { user, what },
            ));
        }
    }
    for named in &kubeconfig.clusters {
        if named
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            let cluster = named.name.clone();
            return Err(secret_problem(
                secret,
                SecretProblem::CertificateAuthorityFile(cluster),
            ));
        }
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|_| secret_problem(secret, SecretProblem::NoContext))?;
    let digest = Sha256::digest(text.as_bytes());
    let key = ClusterKey {
        server: config.cluster_url.to_string(),
        credentials: hex::encode(&digest[..8]),
    };
    Ok((config, key))
}

/// The error for a kubeconfig Secret that cannot be used.
fn secret_problem(secret: &KubeConfigSecret, problem: SecretProblem) -> ClusterError {
    ClusterError::Secret {
        secret: secret.to_string(),
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> KubeConfigSecret {
        KubeConfigSecret {
            namespace: "t1".into(),
            name: "prod".into(),
            key: None,
        }
    }

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
        clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n\
        users:\n- name: u\n  user:\n    token: s3cr3t-token\n\
        contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n";

    #[tokio::test]
    async fn equal_kubeconfigs_share_a_key_and_different_credentials_do_not() {
        let (config, key) = config_from_kubeconfig(KUBECONFIG, &secret()).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
        let (_, same) = config_from_kubeconfig(KUBECONFIG, &secret()).await.unwrap();
        assert_eq!(key, same);
        let other = KUBECONFIG.replace("s3cr3t-token", "another-token");
        let (_, different) = config_from_kubeconfig(&other, &secret()).await.unwrap();
        assert_eq!(key.server, different.server);
        assert_ne!(key, different);
        assert!(!key.to_string().contains("s3cr3t"));
    }

    #[tokio::test]
    async fn commands_and_files_in_a_kubeconfig_are_refused_without_echoing_it() {
        let exec = KUBECONFIG.replace(
            "    token: s3cr3t-token\n",
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/steal\n",
        );
        let err = config_from_kubeconfig(&exec, &secret()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot configure a Kubernetes client: Secret t1/prod: user \"u\" uses exec; only inline credentials are accepted"
        );
        let file = KUBECONFIG.replace(
            "    token: s3cr3t-token\n",
            "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
        );
        assert!(config_from_kubeconfig(&file, &secret()).await.is_err());
        let garbage = "s3cr3t-token: [unclosed";
        let err = config_from_kubeconfig(garbage, &secret())
            .await
            .unwrap_err();
        assert!(!err.to_string().contains("s3cr3t"), "{err}");
    }

    #[test]
    fn the_default_keys_are_fluxs() {
        let encode = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let object = serde_json::json!({"data": {"value.yaml": encode("text")}});
        assert_eq!(kubeconfig_text(&object, &secret()).unwrap(), "text");
        let mut named = secret();
        named.key = Some("kubeconfig".into());
        let err = kubeconfig_text(&object, &named).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("Secret t1/prod: has no key kubeconfig"),
            "{err}"
        );
    }

    #[test]
    fn a_service_account_is_named_as_kube_apiserver_names_it() {
        let account = ServiceAccount {
            namespace: "t1".into(),
            name: "deployer".into(),
        };
        assert_eq!(account.username(), "system:serviceaccount:t1:deployer");
    }
}
