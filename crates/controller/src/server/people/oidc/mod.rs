//! Browser login with OpenID Connect (issue #30): the authorization code flow with
//! PKCE (S256) against the issuer `server.oidc` names. The issuer's endpoints come from
//! its discovery document, its keys from its JWKS (fetched again when a token names a
//! key not seen yet: the issuer rotated, at most once per [`JWKS_REFETCH_INTERVAL`]);
//! the ID token is checked (`jwt`), and the user it names, with their groups, is kept
//! in a signed session cookie (`session`). From there the user is a [`User`] like one
//! a TokenReview names: the same SubjectAccessReviews decide what they may do, there is
//! no second permission system.
//!
//! Every request to the issuer goes through the outbound guard: its addresses must be
//! public, or in `server.outbound.allowedNetworks` (a Dex inside the cluster, a test's
//! issuer on loopback); no redirect is followed. No token, code, cookie or secret is
//! logged: errors name the issuer's answer, never what was sent.

pub(crate) mod flow;
pub(crate) mod jwt;
pub mod session;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use parking_lot::RwLock;
use serde_json::{Map, Value};

use super::User;
use super::cache::Expiring;
use crate::config::{ClientSecret, ConfigError, OidcConfig};
use jwt::{Expected, JwtError, KeySet};
use session::{Purpose, SESSION_COOKIE, Sealer, Session};
use tether_core::outbound::{GuardedResolver, OutboundError, OutboundPolicy};

/// The least time between two fetches of the JWKS caused by a token naming an unknown
/// key: a rotation is picked up at once, while made-up key ids cost the issuer at most
/// one request per interval.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// A request to the issuer: discovery, keys and the code exchange answer in well under
/// a second; a hung issuer must not hold a login (or a browser) for long.
pub const ISSUER_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from the issuer: a discovery document or JWKS is a few KB.
pub const MAX_ISSUER_ANSWER: usize = 1 << 20;
/// Revoked sessions remembered at most (a logout each); past it the oldest go.
const REVOKED_LIMIT: usize = 100_000;

/// Why a login failed. `Unreachable` and `Issuer` are retryable (the issuer may answer
/// later); the others need a new login or a change of configuration.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("cannot reach the OIDC issuer: {0}")]
    Unreachable(String),
    #[error("the OIDC issuer's address is refused: {0}")]
    Refused(#[from] OutboundError),
    #[error("the OIDC issuer answered {what} with {answer}")]
    Issuer { what: &'static str, answer: String },
    #[error("the OIDC issuer refused the login: {0}")]
    Denied(String),
    #[error("this login was not started in this browser, or took over 10 minutes: start again")]
    NoLogin,
    #[error("the login's state does not match this browser's: start again")]
    State,
    #[error("{0}")]
    IdToken(#[from] JwtError),
    #[error("the ID token has no {0:?} claim to name the user by")]
    NoUsername(String),
    #[error("the ID token's email is not verified")]
    EmailNotVerified,
    #[error("the groups claim {0:?} is not a list of strings")]
    Groups(String),
}

impl OidcError {
    pub fn retryable(&self) -> bool {
        matches!(self, OidcError::Unreachable(_) | OidcError::Issuer { .. })
    }
}

/// The issuer's endpoints, from its discovery document.
#[derive(Debug, Clone)]
struct Provider {
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

/// The issuer's keys, and when a token last made tether fetch them again.
#[derive(Debug, Default)]
struct Keys {
    set: KeySet,
    refetched: Option<Instant>,
}

/// The OIDC login of one server: configuration, issuer client, session key.
pub struct Oidc {
    config: OidcConfig,
    client_secret: Option<ClientSecret>,
    sealer: Sealer,
    http: reqwest::Client,
    policy: Arc<OutboundPolicy>,
    provider: tokio::sync::Mutex<Option<Provider>>,
    keys: RwLock<Keys>,
    /// Session ids logged out before they expire.
    revoked: Expiring<String, ()>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("issuer", &self.config.issuer)
            .finish_non_exhaustive()
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Oidc {
    /// Reads the configuration's secrets and builds the issuer's client; `policy` is
    /// `server.outbound`'s.
    pub fn new(config: OidcConfig, policy: Arc<OutboundPolicy>) -> Result<Oidc, ConfigError> {
        let client_secret = config.read_client_secret()?;
        let sealer = match config.read_session_key()? {
            Some(key) => Sealer::new(&key),
            None => Sealer::generated(),
        };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(GuardedResolver::new(policy.clone()))
            .timeout(ISSUER_TIMEOUT)
            .user_agent(concat!("tether/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ConfigError::Secret {
                what: "server.oidc".into(),
                message: format!("cannot build the issuer's HTTP client: {}", e.without_url()),
            })?;
        Ok(Oidc {
            revoked: Expiring::new(config.session_ttl, REVOKED_LIMIT),
            config,
            client_secret,
            sealer,
            http,
            policy,
            provider: tokio::sync::Mutex::new(None),
            keys: RwLock::new(Keys::default()),
        })
    }

    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// The session cookie's value for `session`.
    pub fn seal(&self, session: &Session) -> String {
        self.sealer.seal(Purpose::Session, session)
    }

    /// The user a request's session cookie names, if it is one this server signed,
    /// not expired and not logged out.
    pub fn user(&self, headers: &HeaderMap) -> Option<Arc<User>> {
        let session = self.session(headers)?;
        Some(Arc::new(User {
            name: session.user,
            uid: String::new(),
            groups: session.groups,
            extra: Default::default(),
        }))
    }

    fn session(&self, headers: &HeaderMap) -> Option<Session> {
        let sealed = session::cookie(headers, SESSION_COOKIE)?;
        let session: Session = self.sealer.open(Purpose::Session, sealed)?;
        let live = session.exp > unix_now() && self.revoked.get(&session.sid).is_none();
        live.then_some(session)
    }

    /// A GET to the issuer, its JSON answer bounded by [`MAX_ISSUER_ANSWER`].
    async fn fetch(&self, what: &'static str, url: &str) -> Result<Value, OidcError> {
        let answer = self.send(what, self.http.get(url), url).await?;
        serde_json::from_slice(&answer).map_err(|e| OidcError::Issuer {
            what,
            answer: format!("a body that is not JSON ({e})"),
        })
    }

    /// Sends `request` to `url` (checked by the outbound policy first, for an address
    /// typed as such); a non-2xx answer is an error naming its status and OAuth error
    /// code (never what was sent).
    async fn send(
        &self,
        what: &'static str,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<Vec<u8>, OidcError> {
        self.policy.check_url(url)?;
        let unreachable = |e: reqwest::Error| {
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                if let Some(refused) = cause.downcast_ref::<OutboundError>() {
                    return OidcError::Refused(refused.clone());
                }
                source = cause.source();
            }
            OidcError::Unreachable(format!("{what}: {}", e.without_url()))
        };
        let mut answer = request.send().await.map_err(unreachable)?;
        let status = answer.status();
        let mut body = Vec::new();
        while let Some(chunk) = answer.chunk().await.map_err(unreachable)? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_ISSUER_ANSWER {
                return Err(OidcError::Issuer {
                    what,
                    answer: format!("more than {MAX_ISSUER_ANSWER} bytes"),
                });
            }
        }
        if !status.is_success() {
            let code = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
                .map(|code| format!(" ({code})"))
                .unwrap_or_default();
            return Err(OidcError::Issuer {
                what,
                answer: format!("HTTP {status}{code}"),
            });
        }
        Ok(body)
    }

    /// The issuer's endpoints: its discovery document, read once (again after a
    /// failure). Its `issuer` must be the configured one (OIDC Discovery §4.3).
    async fn provider(&self) -> Result<Provider, OidcError> {
        let mut known = self.provider.lock().await;
        if let Some(provider) = known.as_ref() {
            return Ok(provider.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let document = self.fetch("discovery", &url).await?;
        let field = |name: &str| {
            document
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let wrong = |answer: String| OidcError::Issuer {
            what: "discovery",
            answer,
        };
        if field("issuer").as_deref() != Some(self.config.issuer.as_str()) {
            return Err(wrong(format!(
                "issuer {:?}, not {:?}",
                field("issuer").unwrap_or_default(),
                self.config.issuer
            )));
        }
        let pkce = document
            .get("code_challenge_methods_supported")
            .and_then(Value::as_array);
        if pkce.is_some_and(|methods| !methods.iter().any(|m| m == "S256")) {
            return Err(wrong("no S256 among its PKCE methods".into()));
        }
        let endpoint = |name: &'static str| {
            field(name).ok_or_else(|| wrong(format!("a document without {name}")))
        };
        let provider = Provider {
            authorization_endpoint: endpoint("authorization_endpoint")?,
            token_endpoint: endpoint("token_endpoint")?,
            jwks_uri: endpoint("jwks_uri")?,
        };
        *known = Some(provider.clone());
        Ok(provider)
    }

    async fn fetch_keys(&self, provider: &Provider) -> Result<KeySet, OidcError> {
        let request = self.http.get(&provider.jwks_uri);
        let document = self.send("keys", request, &provider.jwks_uri).await?;
        let set = KeySet::parse(&document)?;
        tracing::info!(issuer = %self.config.issuer, keys = set.len(), "fetched the OIDC issuer's keys");
        Ok(set)
    }

    /// Verifies an ID token with the issuer's keys, fetching them first when none are
    /// known, and again when the token names a key not among them (at most once per
    /// [`JWKS_REFETCH_INTERVAL`]).
    async fn verify(
        &self,
        provider: &Provider,
        id_token: &str,
        nonce: &str,
    ) -> Result<Map<String, Value>, OidcError> {
        let expected = Expected {
            issuer: &self.config.issuer,
            client_id: &self.config.client_id,
            nonce,
            now: unix_now(),
        };
        let known = self.read_keys(|k| (!k.set.is_empty()).then(|| k.set.clone()));
        let keys = match known {
            Some(keys) => keys,
            None => self.store_keys(self.fetch_keys(provider).await?, false),
        };
        match jwt::verify(id_token, &keys, &expected) {
            Err(JwtError::UnknownKey(kid)) => {
                let due = self.read_keys(|k| {
                    k.refetched
                        .is_none_or(|at| at.elapsed() >= JWKS_REFETCH_INTERVAL)
                });
                if !due {
                    return Err(JwtError::UnknownKey(kid).into());
                }
                let keys = self.store_keys(self.fetch_keys(provider).await?, true);
                Ok(jwt::verify(id_token, &keys, &expected)?)
            }
            verified => Ok(verified?),
        }
    }

    fn read_keys<T>(&self, read: impl FnOnce(&Keys) -> T) -> T {
        read(&self.keys.read())
    }

    fn store_keys(&self, set: KeySet, refetch: bool) -> KeySet {
        let mut keys = self.keys.write();
        keys.set = set.clone();
        if refetch {
            keys.refetched = Some(Instant::now());
        }
        set
    }

    /// The session of the user an ID token's claims name, prefixed as configured.
    fn session_of(&self, claims: &Map<String, Value>) -> Result<Session, OidcError> {
        let config = &self.config;
        let claim = &config.username_claim;
        let name = claims
            .get(claim)
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| OidcError::NoUsername(claim.clone()))?;
        // kube-apiserver: with the email claim, an email_verified that is present must
        // be true.
        if claim == "email" && claims.get("email_verified").is_some_and(|v| v != true) {
            return Err(OidcError::EmailNotVerified);
        }
        let groups = match config.groups_claim.as_ref().and_then(|c| claims.get(c)) {
            None => Vec::new(),
            Some(Value::String(one)) => vec![one.clone()],
            Some(Value::Array(many)) => many
                .iter()
                .map(|g| g.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    OidcError::Groups(config.groups_claim.clone().unwrap_or_default())
                })?,
            Some(_) => {
                return Err(OidcError::Groups(
                    config.groups_claim.clone().unwrap_or_default(),
                ));
            }
        };
        Ok(Session {
            sid: random_token(),
            user: format!("{}{name}", config.username_prefix),
            groups: groups
                .into_iter()
                .map(|g| format!("{}{g}", config.groups_prefix))
                .collect(),
            exp: unix_now() + config.session_ttl.as_secs() as i64,
        })
    }

    /// Ends a session before it expires (this replica's memory: see docs/access.md).
    fn revoke(&self, headers: &HeaderMap) -> Option<String> {
        let session = self.session(headers)?;
        self.revoked.insert(session.sid, ());
        Some(session.user)
    }
}

/// 32 random bytes, base64url: a state, nonce, PKCE verifier (43 characters, within
/// RFC 7636's 43–128) or session id.
pub fn random_token() -> String {
    use base64::Engine as _;
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
