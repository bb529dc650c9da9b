//! Credentials for a chart repository (issue #26): what a chart source's
//! `credentials` resolve to, read at each fetch (a rotated Secret counts at the next
//! poll). Flux's keys for a Helm repository (`username` + `password`, or
//! `bearerToken`), and a `kubernetes.io/dockerconfigjson` Secret's entry for the
//! registry's host for an OCI registry, as Flux's `HelmRepository` of type `oci` and
//! Argo CD's repository credentials read them.
//!
//! A login never appears in a log, an error or a status: its `Debug` says only what
//! kind it is, and the chart store keys what a login fetched by a fingerprint of it,
//! so a source without the credentials is never served what one with them fetched.
//! The same Secret may carry a custom CA and a client certificate ([`ChartTls`]):
//! they are part of the login, and of its fingerprint.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::tls::ChartTls;
use crate::source::{Auth, CredentialsSecret};

/// The key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// Credentials for one chart repository or registry, and its TLS trust.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ChartLogin {
    kind: Kind,
    tls: ChartTls,
}

#[derive(Clone, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    Anonymous,
    Basic {
        username: String,
        password: String,
    },
    Bearer(String),
}

impl std::fmt::Debug for ChartLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Anonymous => "anonymous",
            Kind::Basic { .. } => "basic (redacted)",
            Kind::Bearer(_) => "bearer token (redacted)",
        };
        f.write_str(kind)?;
        if !self.tls.is_empty() {
            write!(f, " with {:?}", self.tls)?;
        }
        Ok(())
    }
}

/// `~/.docker/config.json`'s shape, as far as logins go.
#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

impl ChartLogin {
    /// A source's credentials read now: the configuration file's `username` with
    /// `passwordEnv`/`passwordFile` (basic) or `tokenEnv`/`tokenFile` (a bearer token
    /// for a Helm repository; an OCI registry takes it as the password of `username`).
    /// The error names the variable or file, never a value.
    pub fn from_auth(auth: &Auth) -> Result<ChartLogin, String> {
        let kind = match auth {
            Auth::None => Kind::Anonymous,
            Auth::Basic { username, password } => Kind::Basic {
                username: username.clone(),
                password: password.read()?,
            },
            Auth::Token {
                token,
                username: Some(username),
            } => Kind::Basic {
                username: username.clone(),
                password: token.read()?,
            },
            Auth::Token {
                token,
                username: None,
            } => Kind::Bearer(token.read()?),
            Auth::SshKey { .. } | Auth::SshInline { .. } => {
                return Err(
                    "a chart repository takes a username and password or a token, not an SSH key"
                        .into(),
                );
            }
            Auth::Secret(secret) => {
                return Err(format!("{secret} is read through the cluster"));
            }
        };
        Ok(ChartLogin {
            kind,
            tls: ChartTls::default(),
        })
    }

    /// The credentials `secret` (its `data`, decoded) holds for the repository at
    /// `repo`: a dockerconfigjson's entry for its host, or Flux's keys; with the
    /// Secret's custom CA and client certificate, if any. A Secret of TLS keys only
    /// (Flux's `certSecretRef`) is an anonymous login with them.
    pub fn from_secret(
        secret: &CredentialsSecret,
        data: &BTreeMap<String, Vec<u8>>,
        repo: &str,
    ) -> Result<ChartLogin, String> {
        let tls = ChartTls::from_secret(secret, data)?;
        let mut login = if let Some(json) = data.get(DOCKER_CONFIG_KEY) {
            docker_login(secret, json, repo)?
        } else if !tls.is_empty() && !CREDENTIAL_KEYS.iter().any(|k| data.contains_key(*k)) {
            ChartLogin::default()
        } else {
            ChartLogin::from_auth(&secret.auth(data)?)?
        };
        login.tls = tls;
        Ok(login)
    }

    /// The login's custom CA and client certificate.
    pub fn tls(&self) -> &ChartTls {
        &self.tls
    }

    /// A fingerprint of the credentials (empty when anonymous): what they fetched is
    /// kept under it.
    pub fn fingerprint(&self) -> String {
        let mut hash = Sha256::new();
        self.tls.hash_into(&mut hash);
        match &self.kind {
            Kind::Anonymous if self.tls.is_empty() => return String::new(),
            Kind::Anonymous => {}
            Kind::Basic { username, password } => {
                hash.update(b"basic\0");
                hash.update(username.as_bytes());
                hash.update(b"\0");
                hash.update(password.as_bytes());
            }
            Kind::Bearer(token) => {
                hash.update(b"bearer\0");
                hash.update(token.as_bytes());
            }
        }
        hex::encode(hash.finalize())
    }

    /// The `Authorization` header a Helm repository's requests carry, if any.
    pub fn header(&self) -> Option<String> {
        match &self.kind {
            Kind::Anonymous => None,
            Kind::Basic { .. } => self.basic(),
            Kind::Bearer(token) => Some(format!("Bearer {token}")),
        }
    }

    /// The `Authorization: Basic` header of a username and password (or a token
    /// standing for one: the registry's token service is asked with it), if any.
    pub fn basic(&self) -> Option<String> {
        let (username, password) = match &self.kind {
            Kind::Anonymous => return None,
            Kind::Basic { username, password } => (username.as_str(), password.as_str()),
            // Registries that issue tokens to a personal access token (ghcr.io,
            // Docker Hub) take any user name with it.
            Kind::Bearer(token) => ("tether", token.as_str()),
        };
        let pair = format!("{username}:{password}");
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        ))
    }
}

/// Keys of Flux's `secretRef` that carry credentials (as [`CredentialsSecret::auth`]
/// reads them): a Secret with none of them and TLS keys is a `certSecretRef`.
const CREDENTIAL_KEYS: [&str; 4] = ["username", "password", "bearerToken", "identity"];

/// The host (with its port) of an `oci://`, `http(s)://` URL or a bare registry name.
fn host_of(text: &str) -> String {
    let rest = text.split_once("://").map_or(text, |(_, rest)| rest);
    rest.split('/').next().unwrap_or("").to_ascii_lowercase()
}

/// The login of a dockerconfigjson for `repo`'s host; its keys may be a host, or a
/// URL with a path (`https://index.docker.io/v1/`), as `docker login` writes them.
fn docker_login(secret: &CredentialsSecret, json: &[u8], repo: &str) -> Result<ChartLogin, String> {
    let config: DockerConfig = serde_json::from_slice(json)
        .map_err(|_| format!("{secret}: key {DOCKER_CONFIG_KEY} is not a Docker config JSON"))?;
    let host = host_of(repo);
    let entry = config
        .auths
        .iter()
        .find(|(key, _)| host_of(key) == host)
        .map(|(_, entry)| entry)
        .ok_or_else(|| {
            format!("{secret}: key {DOCKER_CONFIG_KEY} holds no login for registry {host}")
        })?;
    entry_login(secret, &host, entry)
}

/// Every registry host of a dockerconfigjson Secret with its login (an App's
/// `dependencyCredentials` entry without a `url`: its hosts are where it applies).
/// The error names the Secret and its key, never a value.
pub(super) fn docker_logins(
    secret: &CredentialsSecret,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<(String, ChartLogin)>, String> {
    let json = data.get(DOCKER_CONFIG_KEY).ok_or_else(|| {
        format!(
            "{secret} has no key {DOCKER_CONFIG_KEY}: an entry without url takes a \
             kubernetes.io/dockerconfigjson Secret, whose registries it serves (or set url)"
        )
    })?;
    let config: DockerConfig = serde_json::from_slice(json)
        .map_err(|_| format!("{secret}: key {DOCKER_CONFIG_KEY} is not a Docker config JSON"))?;
    let tls = ChartTls::from_secret(secret, data)?;
    config
        .auths
        .iter()
        .map(|(key, entry)| {
            let host = host_of(key);
            let mut login = entry_login(secret, &host, entry)?;
            login.tls = tls.clone();
            Ok((host, login))
        })
        .collect()
}

/// The login of one `auths` entry of registry `host`.
fn entry_login(
    secret: &CredentialsSecret,
    host: &str,
    entry: &DockerAuth,
) -> Result<ChartLogin, String> {
    let incomplete =
        || format!("{secret}: the login for registry {host} has no username and password");
    let (username, password) = match (&entry.username, &entry.password, &entry.auth) {
        (Some(username), Some(password), _) => (username.clone(), password.clone()),
        (_, _, Some(auth)) => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or_else(incomplete)?;
            let (username, password) = decoded.split_once(':').ok_or_else(incomplete)?;
            (username.to_string(), password.to_string())
        }
        _ => return Err(incomplete()),
    };
    Ok(ChartLogin {
        kind: Kind::Basic { username, password },
        tls: ChartTls::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::auth::tests::data;

    fn secret() -> CredentialsSecret {
        CredentialsSecret {
            namespace: "team".into(),
            name: "registry".into(),
        }
    }

    #[test]
    fn a_dockerconfigjson_gives_the_login_of_the_registrys_host_and_never_shows_it() {
        let auth = base64::engine::general_purpose::STANDARD.encode("robot:s3cret-pw");
        let json = format!(
            r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"eDp5"}},"registry.example:5000":{{"auth":"{auth}"}}}}}}"#
        );
        let data = data(&[(DOCKER_CONFIG_KEY, &json)]);
        let login = ChartLogin::from_secret(&secret(), &data, "oci://registry.example:5000/charts")
            .expect("a login");
        assert_eq!(
            login.basic().as_deref(),
            Some(format!("Basic {auth}").as_str())
        );
        assert!(!format!("{login:?}").contains("s3cret"));
        assert_ne!(login.fingerprint(), ChartLogin::default().fingerprint());
        let err = ChartLogin::from_secret(&secret(), &data, "oci://other.example/charts")
            .expect_err("no login for that host");
        assert_eq!(
            err,
            "Secret team/registry: key .dockerconfigjson holds no login for registry other.example"
        );
        let split = r#"{"auths":{"r.example":{"username":"u","password":"p"}}}"#;
        let login = ChartLogin::from_secret(
            &secret(),
            &self::data(&[(DOCKER_CONFIG_KEY, split)]),
            "oci://r.example/c",
        )
        .expect("username and password keys");
        assert_eq!(login.basic().as_deref(), Some("Basic dTpw"));
    }

    #[test]
    fn flux_keys_give_basic_or_bearer_and_bad_tls_keys_are_refused_by_name() {
        let basic = ChartLogin::from_secret(
            &secret(),
            &data(&[("username", "u"), ("password", "p")]),
            "https://charts.example",
        )
        .expect("basic");
        assert_eq!(basic.header().as_deref(), Some("Basic dTpw"));
        let bearer = ChartLogin::from_secret(
            &secret(),
            &data(&[("bearerToken", "t0ken")]),
            "https://charts.example",
        )
        .expect("bearer");
        assert_eq!(bearer.header().as_deref(), Some("Bearer t0ken"));
        let err = ChartLogin::from_secret(
            &secret(),
            &data(&[
                ("username", "u"),
                ("password", "p"),
                ("ca.crt", "s3cret-bytes"),
            ]),
            "https://charts.example",
        )
        .expect_err("a CA that is no PEM");
        assert_eq!(
            err,
            "Secret team/registry: key ca.crt holds no PEM certificate"
        );
        assert!(!err.contains("s3cret"));
        // Flux's certSecretRef: TLS keys only, an anonymous login trusting the CA.
        let (ca, _, _) = tether_testkit::tls::signed_pems(&["client"]);
        let trusting =
            ChartLogin::from_secret(&secret(), &data(&[("ca.crt", &ca)]), "oci://r.example/c")
                .expect("a CA alone");
        assert_eq!(trusting.header(), None);
        assert!(!trusting.tls().is_empty());
        assert_ne!(trusting.fingerprint(), "", "what it fetched is its own");
        assert_eq!(
            format!("{trusting:?}"),
            "anonymous with ChartTls { ca: true, client_certificate: false }"
        );
        assert_eq!(ChartLogin::default().header(), None);
        assert_eq!(ChartLogin::default().fingerprint(), "");
    }
}
