//! What the browser keeps between requests after an OIDC login: a session cookie
//! naming the user and their groups, and, while a login is under way, a cookie binding
//! its state, nonce and PKCE verifier to this browser. Both are JSON signed with
//! HMAC-SHA256 under the session key (`server.oidc.sessionKey`, or one generated at
//! start), tagged with what they are so one cannot pass for the other, and expiring.
//! Nothing secret is in them (no token, no code): a reader learns who is logged in,
//! which the page shows anyway; only the signature makes them worth anything.

use axum::http::{HeaderMap, header};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac as _};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use sha2::Sha256;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "tether_session";
/// The cookie of a login under way.
pub const LOGIN_COOKIE: &str = "tether_login";
/// Bytes of a generated session key: HMAC-SHA256's block is 64 bytes, its output 32;
/// a key of 32 random bytes is as strong as the MAC (RFC 2104 §3).
pub const GENERATED_KEY_BYTES: usize = 32;

/// A logged-in user, as their session cookie says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// A random id, so a logout can revoke this session before it expires.
    pub sid: String,
    /// The username, prefixed as `server.oidc.usernamePrefix` says.
    pub user: String,
    pub groups: Vec<String>,
    /// Unix seconds.
    pub exp: i64,
}

/// A login under way: what the callback checks the issuer's answer against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub state: String,
    pub nonce: String,
    /// The PKCE `code_verifier` (RFC 7636), sent only to the token endpoint.
    pub verifier: String,
    /// Unix seconds.
    pub exp: i64,
}

/// What a signed value is: part of what is signed, so a login cookie is never a
/// session.
#[derive(Debug, Clone, Copy)]
pub enum Purpose {
    Session,
    Login,
}

impl Purpose {
    fn tag(self) -> &'static [u8] {
        match self {
            Purpose::Session => b"tether session\0",
            Purpose::Login => b"tether login\0",
        }
    }
}

/// Signs and opens cookie values with the session key (keyed once: each use clones
/// the keyed state rather than hashing the key again).
#[derive(Clone)]
pub struct Sealer {
    keyed: Hmac<Sha256>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    pub fn new(key: &[u8]) -> Sealer {
        // HMAC takes a key of any length (RFC 2104 §2): this cannot fail.
        let keyed = Hmac::<Sha256>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
        Sealer { keyed }
    }

    /// A sealer with a random key: sessions then end when the process does, and each
    /// replica has its own (documented: configure `sessionKey` for several).
    pub fn generated() -> Sealer {
        let key: [u8; GENERATED_KEY_BYTES] = rand::random();
        Sealer::new(&key)
    }

    fn mac(&self, purpose: Purpose) -> Hmac<Sha256> {
        let mut mac = self.keyed.clone();
        mac.update(purpose.tag());
        mac
    }

    /// `payload` as `base64url(JSON).base64url(HMAC)`.
    pub fn seal(&self, purpose: Purpose, payload: &impl Serialize) -> String {
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(payload).unwrap_or_default());
        let mut mac = self.mac(purpose);
        mac.update(body.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// The payload of a value this key sealed for `purpose`; None for anything else
    /// (the MAC is compared in constant time).
    pub fn open<T: DeserializeOwned>(&self, purpose: Purpose, sealed: &str) -> Option<T> {
        let (body, tag) = sealed.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let mut mac = self.mac(purpose);
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).ok()?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()
    }
}

/// The value of cookie `name` in a request's `Cookie` headers.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value)
}

/// A `Set-Cookie` value: `HttpOnly` (no script reads it), `SameSite=Lax` (sent on a
/// top-level navigation back from the issuer, never on another site's POST or fetch),
/// `Secure` when the browser reaches tether over TLS. `max_age` 0 deletes it.
pub fn set_cookie(name: &str, value: &str, max_age: i64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session {
            sid: "s1".into(),
            user: "oidc:jane".into(),
            groups: vec!["oidc:team-a".into()],
            exp: 1_800_000_000,
        }
    }

    #[test]
    fn a_sealed_session_opens_with_its_key_and_purpose_only() {
        let sealer = Sealer::new(b"k1");
        let sealed = sealer.seal(Purpose::Session, &session());
        assert_eq!(
            sealer.open::<Session>(Purpose::Session, &sealed),
            Some(session())
        );
        assert_eq!(
            Sealer::new(b"k2").open::<Session>(Purpose::Session, &sealed),
            None
        );
        assert_eq!(sealer.open::<Session>(Purpose::Login, &sealed), None);
        assert_eq!(
            Sealer::generated().open::<Session>(Purpose::Session, &sealed),
            None
        );
    }

    #[test]
    fn a_tampered_cookie_opens_to_nothing() {
        let sealer = Sealer::new(b"k1");
        let sealed = sealer.seal(Purpose::Session, &session());
        let (_, tag) = sealed.split_once('.').expect("two parts");
        let mut admin = session();
        admin.groups = vec!["system:masters".into()];
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&admin).expect("JSON"));
        for forged in [
            format!("{body}.{tag}"),
            body.clone(),
            format!("{body}."),
            String::new(),
            format!("{}x", sealed),
        ] {
            assert_eq!(sealer.open::<Session>(Purpose::Session, &forged), None);
        }
    }

    #[test]
    fn cookies_are_found_among_others_and_set_with_their_attributes() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            "a=1; tether_session=v.w".parse().expect("h"),
        );
        headers.append(header::COOKIE, "b=2".parse().expect("h"));
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("v.w"));
        assert_eq!(cookie(&headers, "b"), Some("2"));
        assert_eq!(cookie(&headers, LOGIN_COOKIE), None);
        assert_eq!(
            set_cookie(SESSION_COOKIE, "v", 60, true),
            "tether_session=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure"
        );
        assert!(!set_cookie(SESSION_COOKIE, "", 0, false).contains("Secure"));
    }
}
