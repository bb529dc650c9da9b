//! Secrets the configuration names (never holds): read when the service starts, each
//! error naming the configuration key and where it looked, never the value. The status
//! API's token lives here, below the server that checks it.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{ConfigError, ServerConfig, WebhookSecretRef};
use tether_core::source::{SecretRef, WebhookConfig, WebhookSecret};

/// The bearer token `/api/v1` requires, kept as its SHA-256: a presented token is
/// checked in constant time whatever its length, and the token is never printed.
#[derive(Clone)]
pub struct ApiToken([u8; 32]);

impl ApiToken {
    pub fn new(token: &str) -> ApiToken {
        ApiToken(Sha256::digest(token.as_bytes()).into())
    }

    /// Whether `given` (a bearer token as presented, surrounding blanks ignored) is
    /// this token.
    pub fn accepts(&self, given: &str) -> bool {
        let given: [u8; 32] = Sha256::digest(given.trim().as_bytes()).into();
        given.ct_eq(&self.0).into()
    }
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(..)")
    }
}

impl WebhookSecretRef {
    /// Reads the secret now. An unset variable, an unreadable file and an empty value
    /// are errors (an empty HMAC key would accept anyone's signature); the error names
    /// the variable or file, never the value.
    pub fn load(&self) -> Result<WebhookSecret, ConfigError> {
        self.load_as("webhook secret")
    }

    fn load_as(&self, what: &str) -> Result<WebhookSecret, ConfigError> {
        Ok(WebhookSecret::new(read_secret(&self.0, what)?.into_bytes()))
    }
}

/// Reads a secret the service needs: an unset variable, an unreadable file and an
/// empty value are errors naming `what` and where it was looked for, never the value.
pub(super) fn read_secret(secret: &SecretRef, what: &str) -> Result<String, ConfigError> {
    let err = |message: String| ConfigError::Secret {
        what: what.to_string(),
        message,
    };
    let value = secret.read().map_err(err)?;
    if value.trim().is_empty() {
        return Err(err(match secret {
            SecretRef::Env(name) => format!("environment variable {name} is empty"),
            SecretRef::File(path) => format!("{} is empty", path.display()),
            SecretRef::Inline(_) => "the value is empty".into(),
        }));
    }
    Ok(value)
}

/// The configuration key a secret was named by.
pub(super) fn secret_field(secret: &SecretRef) -> &'static str {
    match secret {
        SecretRef::Env(_) => "secretEnv",
        SecretRef::File(_) => "secretFile",
        // Only a Secret read at fetch time holds one; the configuration never does.
        SecretRef::Inline(_) => "secret",
    }
}

impl ServerConfig {
    /// The webhook receivers' configuration, with every configured secret read now.
    pub fn webhook_config(&self) -> Result<WebhookConfig, ConfigError> {
        let mut config = WebhookConfig {
            allow_unsigned: self.webhooks.allow_unsigned,
            ..WebhookConfig::default()
        };
        for (provider, secret) in self.webhooks.secrets() {
            let what = format!("server.webhooks.{provider}.{}", secret_field(&secret.0));
            config = config.with_secret(provider, secret.load_as(&what)?);
        }
        Ok(config)
    }

    /// The status API's token, read now; None when the API is open.
    pub fn api_token(&self) -> Result<Option<ApiToken>, ConfigError> {
        self.api_token
            .as_ref()
            .map(|secret| {
                let what = format!("server.apiToken.{}", secret_field(secret));
                read_secret(secret, &what).map(|value| ApiToken::new(value.trim()))
            })
            .transpose()
    }

    /// The secret replicas sign their calls to each other with, read now; None when
    /// unset (validation requires it with shards).
    pub fn peer_token(&self) -> Result<Option<PeerToken>, ConfigError> {
        self.peer_token
            .as_ref()
            .map(|secret| {
                let what = format!("server.peerToken.{}", secret_field(secret));
                read_secret(secret, &what).map(|value| PeerToken(value.trim().to_string()))
            })
            .transpose()
    }
}

/// The replicas' shared secret (`server.peerToken`), for the server's peer signatures;
/// never printed.
pub struct PeerToken(String);

impl PeerToken {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for PeerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerToken(..)")
    }
}
