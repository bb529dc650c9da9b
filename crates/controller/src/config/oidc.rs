//! `server.oidc`: browser login to the dashboard with an OpenID Connect issuer (Dex,
//! Keycloak, Google…), issue #30. The keys follow kube-apiserver's `--oidc-*` flags
//! (issuer URL, client ID, username and groups claims and prefixes) so one RBAC
//! binding names a user the same way for `kubectl` and for tether. Written, checked
//! and resolved here; the login itself is `server::people::oidc`.

use std::time::Duration;

use super::ConfigError;
use super::check::{Checker, line_of};
use super::raw::{RawOidc, S, SecretFrom};
use super::secrets::{read_secret, secret_field};
use tether_core::source::SecretRef;

/// How long a session lasts after a login: a working day. Argo CD keeps 24 h; a
/// shorter session bounds how long a stolen cookie or a removed user lingers (RBAC
/// changes apply at once: only who the user is is kept this long).
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// The claim naming the user, as kube-apiserver's `--oidc-username-claim` defaults.
pub const DEFAULT_USERNAME_CLAIM: &str = "sub";
/// The scopes asked for when none are configured: `openid` (required), and the email
/// and profile claims most issuers then include. Dex needs `groups` added for groups.
pub const DEFAULT_SCOPES: [&str; 3] = ["openid", "email", "profile"];
/// The path of the redirect URL, where the issuer sends the browser back.
pub const CALLBACK_PATH: &str = "/oidc/callback";

impl RawOidc {
    /// The secrets, for the server section's secret resolver: `clientSecret` and
    /// `sessionKey`.
    pub(super) fn secrets(&self) -> [(&'static str, &Option<S<SecretFrom>>); 2] {
        [
            ("server.oidc.clientSecret", &self.client_secret),
            ("server.oidc.sessionKey", &self.session_key),
        ]
    }
}

/// `server.oidc`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    /// Exactly as the ID tokens' `iss` says it.
    pub issuer: String,
    pub client_id: String,
    /// A confidential client's secret; None for a public client (PKCE alone).
    pub client_secret: Option<SecretRef>,
    /// Where the issuer sends the browser back: this server's `/oidc/callback`, as the
    /// browser reaches it. `https://` makes the cookies `Secure`.
    pub redirect_url: String,
    /// `openid` first, always.
    pub scopes: Vec<String>,
    pub username_claim: String,
    /// Put before every username (kube-apiserver's default: the issuer and `#`, unless
    /// the claim is `email`; `-` for none).
    pub username_prefix: String,
    /// The claim listing the user's groups; None: no groups.
    pub groups_claim: Option<String>,
    pub groups_prefix: String,
    /// The key sessions are signed with; None: one generated at start.
    pub session_key: Option<SecretRef>,
    pub session_ttl: Duration,
}

impl OidcConfig {
    /// Whether the browser reaches tether over TLS (so cookies are `Secure`).
    pub fn secure(&self) -> bool {
        self.redirect_url.starts_with("https://")
    }

    /// The client secret, read now; None for a public client.
    pub fn read_client_secret(&self) -> Result<Option<ClientSecret>, ConfigError> {
        self.read("clientSecret", &self.client_secret)
            .map(|s| s.map(ClientSecret))
    }

    /// The session key's bytes, read now; None: generate one.
    pub fn read_session_key(&self) -> Result<Option<Vec<u8>>, ConfigError> {
        self.read("sessionKey", &self.session_key)
            .map(|s| s.map(String::into_bytes))
    }

    fn read(&self, key: &str, secret: &Option<SecretRef>) -> Result<Option<String>, ConfigError> {
        secret
            .as_ref()
            .map(|secret| {
                let what = format!("server.oidc.{key}.{}", secret_field(secret));
                read_secret(secret, &what).map(|value| value.trim().to_string())
            })
            .transpose()
    }
}

/// The OIDC client's secret (`server.oidc.clientSecret`): sent only to the issuer's
/// token endpoint, never printed.
#[derive(Clone)]
pub struct ClientSecret(String);

impl ClientSecret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(..)")
    }
}

/// Checks and resolves `server.oidc`; `secrets` are `clientSecret` and `sessionKey`
/// as the section's resolver read them, `api_token` whether `server.apiToken` is set.
pub(super) fn resolve(
    raw: &S<RawOidc>,
    secrets: [Option<SecretRef>; 2],
    api_token: bool,
    check: &mut Checker,
) -> OidcConfig {
    let [client_secret, session_key] = secrets;
    let oidc = &raw.value;
    if !api_token {
        check.report(
            "server.oidc",
            line_of(raw),
            "needs server.apiToken: without it the API is open on loopback to anyone, \
             and a login would limit no one (the token stays the operator's break-glass)",
        );
    }
    if let Err(message) = issuer_url(&oidc.issuer.value) {
        check.report("server.oidc.issuer", line_of(&oidc.issuer), message);
    }
    if let Err(message) = redirect_url(&oidc.redirect_url.value) {
        check.report(
            "server.oidc.redirectURL",
            line_of(&oidc.redirect_url),
            message,
        );
    }
    check.non_empty("server.oidc.clientID", &oidc.client_id);
    let username_claim = match &oidc.username_claim {
        Some(claim) if check.non_empty("server.oidc.usernameClaim", claim) => claim.value.clone(),
        _ => DEFAULT_USERNAME_CLAIM.to_string(),
    };
    let prefix = |given: &Option<S<String>>, default: String| match given.as_ref() {
        Some(p) if p.value == "-" => String::new(),
        Some(p) => p.value.clone(),
        None => default,
    };
    // kube-apiserver: a claim other than `email` is prefixed with the issuer, so that
    // `sub` values of two issuers cannot name the same user.
    let username_default = if username_claim == "email" {
        String::new()
    } else {
        format!("{}#", oidc.issuer.value)
    };
    let mut scopes: Vec<String> = oidc.scopes.iter().map(|s| s.value.clone()).collect();
    if scopes.is_empty() {
        scopes = DEFAULT_SCOPES.map(str::to_string).to_vec();
    }
    if !scopes.iter().any(|s| s == "openid") {
        scopes.insert(0, "openid".into());
    }
    OidcConfig {
        issuer: oidc.issuer.value.clone(),
        client_id: oidc.client_id.value.clone(),
        client_secret,
        redirect_url: oidc.redirect_url.value.clone(),
        scopes,
        username_prefix: prefix(&oidc.username_prefix, username_default),
        username_claim,
        groups_claim: oidc.groups_claim.as_ref().map(|c| c.value.clone()),
        groups_prefix: prefix(&oidc.groups_prefix, String::new()),
        session_key,
        session_ttl: check.duration(
            "server.oidc.sessionTTL",
            oidc.session_ttl.as_ref(),
            DEFAULT_SESSION_TTL,
        ),
    }
}

/// Whether a URL's host is a loopback address or `localhost`.
fn loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// An issuer is `https://` (as kube-apiserver requires), or `http://` on loopback
/// (a port-forwarded Dex, a test's issuer), without query or fragment.
fn issuer_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback(&url));
    if !scheme_ok || url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{text:?} must be an https:// URL (http:// only on loopback) without query or \
             fragment, exactly as the issuer's ID tokens name it"
        ));
    }
    Ok(())
}

/// The redirect URL is this server's callback as the browser reaches it.
fn redirect_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.path() != CALLBACK_PATH {
        return Err(format!(
            "{text:?} must be http:// or https:// ending in {CALLBACK_PATH} (like \
             https://tether.example.com{CALLBACK_PATH}), registered with the issuer"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const SERVER: &str = "server:\n  apiToken: {secretEnv: T}\n  oidc:\n    issuer: https://dex.example.com\n    clientID: tether\n    redirectURL: https://tether.example.com/oidc/callback\n";

    #[test]
    fn the_defaults_follow_kube_apiservers_oidc_flags() {
        let config = Config::parse(SERVER, "t.yaml").expect("valid");
        let oidc = config.server.oidc.expect("oidc");
        assert_eq!(oidc.username_claim, "sub");
        assert_eq!(oidc.username_prefix, "https://dex.example.com#");
        assert_eq!(oidc.groups_prefix, "");
        assert_eq!(oidc.scopes, ["openid", "email", "profile"]);
        assert_eq!(oidc.session_ttl, DEFAULT_SESSION_TTL);
        assert!(oidc.secure() && oidc.client_secret.is_none());
        let email = format!(
            "{SERVER}    usernameClaim: email\n    scopes: [groups]\n    groupsPrefix: 'oidc:'\n"
        );
        let oidc = Config::parse(&email, "t.yaml")
            .expect("valid")
            .server
            .oidc
            .expect("oidc");
        assert_eq!(oidc.username_prefix, "");
        assert_eq!(oidc.scopes, ["openid", "groups"]);
        assert_eq!(oidc.groups_prefix, "oidc:");
        let none = format!("{SERVER}    usernamePrefix: '-'\n");
        let oidc = Config::parse(&none, "t.yaml")
            .expect("valid")
            .server
            .oidc
            .expect("oidc");
        assert_eq!(oidc.username_prefix, "");
    }

    #[test]
    fn a_login_without_the_operators_token_or_with_bad_urls_is_refused_naming_the_key() {
        let text = SERVER
            .replace("  apiToken: {secretEnv: T}\n", "")
            .replace("https://dex.example.com", "http://dex.example.com")
            .replace("/oidc/callback", "/callback");
        let err = Config::parse(&text, "t.yaml")
            .expect_err("invalid")
            .to_string();
        for key in [
            "server.oidc:",
            "server.oidc.issuer",
            "server.oidc.redirectURL",
        ] {
            assert!(err.contains(key), "{key} in {err}");
        }
        assert!(err.contains("needs server.apiToken"), "{err}");
        let unknown = format!("{SERVER}    clientSecretFile: x\n");
        assert!(Config::parse(&unknown, "t.yaml").is_err());
    }

    #[test]
    fn issuers_are_https_or_loopback_and_the_redirect_is_the_callback() {
        assert!(issuer_url("https://dex.example.com/dex").is_ok());
        assert!(issuer_url("http://127.0.0.1:5556/dex").is_ok());
        assert!(issuer_url("http://localhost:5556").is_ok());
        assert!(issuer_url("http://dex.example.com").is_err());
        assert!(issuer_url("https://dex.example.com/?a=b").is_err());
        assert!(redirect_url("https://tether.example.com/oidc/callback").is_ok());
        assert!(redirect_url("https://tether.example.com/callback").is_err());
        assert!(redirect_url("ftp://tether.example.com/oidc/callback").is_err());
    }
}
