//! The ID token an OIDC issuer hands back after a login, checked as OpenID Connect
//! Core §3.1.3.7 says: signed by one of the issuer's keys (its JWKS) with an asymmetric
//! algorithm, by this issuer, for this client, not expired, and answering this login's
//! nonce. A pure function of the token, the keys and the clock: the login flow fetches
//! the keys and refetches them when a token names a key it has not seen (rotation).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

/// How far the issuer's clock may be from ours, either way: clocks kept by NTP agree
/// to well under a second; a minute absorbs a drifting VM without letting an expired
/// token live on (go-oidc allows five minutes, for `nbf` only).
pub const CLOCK_SKEW_SECS: i64 = 60;

/// The algorithms accepted: RSA PKCS#1 v1.5 (what Dex, Keycloak, Google and Azure AD
/// sign with by default) and ECDSA P-256. `none` and the HMAC family are never
/// accepted: an HS256 token "signed" with a public key is the classic forgery.
pub const ALGORITHMS: [&str; 4] = ["RS256", "RS384", "RS512", "ES256"];

/// Why an ID token is refused. Only [`JwtError::UnknownKey`] may change on a retry
/// (after the issuer's keys are fetched again); the others are final for this token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("the ID token is malformed: {0}")]
    Malformed(&'static str),
    #[error("the ID token is signed with {0:?}; accepted: RS256, RS384, RS512, ES256")]
    Algorithm(String),
    #[error("the ID token names key {0:?}, which the issuer's JWKS does not hold")]
    UnknownKey(String),
    #[error("the ID token's signature does not verify with the issuer's key")]
    Signature,
    #[error("the ID token was issued by {0:?}, not by the configured issuer")]
    Issuer(String),
    #[error("the ID token is not for this client (its audience does not name the client ID)")]
    Audience,
    #[error("the ID token expired at {0} (Unix time)")]
    Expired(i64),
    #[error("the ID token is not valid before {0} (Unix time)")]
    NotYetValid(i64),
    #[error("the ID token says it was issued in the future ({0}, Unix time)")]
    IssuedInFuture(i64),
    #[error("the ID token does not answer this login (its nonce differs)")]
    Nonce,
    #[error("the ID token has no {0:?} claim")]
    MissingClaim(&'static str),
    #[error("the issuer's JWKS is malformed: {0}")]
    KeySet(String),
}

/// A public key of the issuer's JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KeyMaterial {
    /// Modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An uncompressed P-256 point (0x04 ‖ x ‖ y).
    P256(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    kid: Option<String>,
    /// The JWK's `alg`, when it pins one.
    alg: Option<String>,
    material: KeyMaterial,
}

/// The issuer's signing keys (`jwks_uri`): RSA and P-256 keys meant for signatures;
/// others (encryption keys, curves not supported) are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeySet {
    keys: Vec<Key>,
}

fn b64(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()
}

impl KeySet {
    /// Parses a JWKS document (RFC 7517 §5).
    pub fn parse(document: &[u8]) -> Result<KeySet, JwtError> {
        let value: Value =
            serde_json::from_slice(document).map_err(|e| JwtError::KeySet(e.to_string()))?;
        let listed = value
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| JwtError::KeySet("no \"keys\" list".into()))?;
        let keys = listed.iter().filter_map(key).collect();
        Ok(KeySet { keys })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key a token's header names: by `kid`, or the only key that fits when the
    /// token names none.
    fn find(&self, kid: Option<&str>, rsa: bool) -> Result<&Key, JwtError> {
        let fits = |k: &&Key| matches!(k.material, KeyMaterial::Rsa { .. }) == rsa;
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .filter(fits)
                .find(|k| k.kid.as_deref() == Some(kid))
                .ok_or_else(|| JwtError::UnknownKey(kid.to_string())),
            None => {
                let mut fitting = self.keys.iter().filter(fits);
                match (fitting.next(), fitting.next()) {
                    (Some(only), None) => Ok(only),
                    _ => Err(JwtError::UnknownKey(String::new())),
                }
            }
        }
    }
}

/// One JWK, if it is a signing key of a kind verified here.
fn key(jwk: &Value) -> Option<Key> {
    let text = |name: &str| jwk.get(name).and_then(Value::as_str);
    if text("use").is_some_and(|u| u != "sig") {
        return None;
    }
    let material = match text("kty")? {
        "RSA" => KeyMaterial::Rsa {
            n: b64(text("n")?)?,
            e: b64(text("e")?)?,
        },
        "EC" if text("crv") == Some("P-256") => {
            let (x, y) = (b64(text("x")?)?, b64(text("y")?)?);
            if x.len() != 32 || y.len() != 32 {
                return None;
            }
            KeyMaterial::P256([&[4u8][..], &x[..], &y[..]].concat())
        }
        _ => return None,
    };
    Some(Key {
        kid: text("kid").map(str::to_string),
        alg: text("alg").map(str::to_string),
        material,
    })
}

/// What this login expects of its ID token.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    pub nonce: &'a str,
    /// Now, in seconds since the Unix epoch.
    pub now: i64,
}

/// The header fields that choose the key.
struct Header {
    alg: String,
    kid: Option<String>,
}

/// A token's three parts, decoded.
struct Parts<'t> {
    header: Header,
    claims: Map<String, Value>,
    /// The signed input: header and claims as sent.
    signed: &'t str,
    signature: Vec<u8>,
}

/// The token's three parts, decoded: header, claims, and the signed input with its
/// signature.
fn split(token: &str) -> Result<Parts<'_>, JwtError> {
    let mut parts = token.split('.');
    let (Some(head), Some(body), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed("not three dot-separated parts"));
    };
    let json = |part: &str, what: &'static str| -> Result<Map<String, Value>, JwtError> {
        let bytes = b64(part).ok_or(JwtError::Malformed(what))?;
        serde_json::from_slice(&bytes).map_err(|_| JwtError::Malformed(what))
    };
    let header = json(head, "the header is not base64url JSON")?;
    let claims = json(body, "the claims are not base64url JSON")?;
    let signature = b64(sig).ok_or(JwtError::Malformed("the signature is not base64url"))?;
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(JwtError::Malformed("the header has no alg"))?
        .to_string();
    let kid = header
        .get("kid")
        .and_then(Value::as_str)
        .map(str::to_string);
    let signed = &token[..head.len() + 1 + body.len()];
    Ok(Parts {
        header: Header { alg, kid },
        claims,
        signed,
        signature,
    })
}

/// Checks the signature of `signed` with `key` under `alg` (one of [`ALGORITHMS`]).
fn check_signature(alg: &str, key: &Key, signed: &str, sig: &[u8]) -> Result<(), JwtError> {
    if key.alg.as_deref().is_some_and(|pinned| pinned != alg) {
        return Err(JwtError::Algorithm(alg.to_string()));
    }
    let verified = match (&key.material, alg) {
        (KeyMaterial::Rsa { n, e }, "RS256" | "RS384" | "RS512") => {
            let params = match alg {
                "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                _ => &signature::RSA_PKCS1_2048_8192_SHA512,
            };
            RsaPublicKeyComponents { n, e }.verify(params, signed.as_bytes(), sig)
        }
        (KeyMaterial::P256(point), "ES256") => {
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(signed.as_bytes(), sig)
        }
        _ => return Err(JwtError::Algorithm(alg.to_string())),
    };
    verified.map_err(|_| JwtError::Signature)
}

/// Verifies `token` against `keys` and `expected`, and returns its claims.
pub fn verify(
    token: &str,
    keys: &KeySet,
    expected: &Expected<'_>,
) -> Result<Map<String, Value>, JwtError> {
    let Parts {
        header,
        claims,
        signed,
        signature: sig,
    } = split(token)?;
    if !ALGORITHMS.contains(&header.alg.as_str()) {
        return Err(JwtError::Algorithm(header.alg));
    }
    let key = keys.find(header.kid.as_deref(), header.alg.starts_with("RS"))?;
    check_signature(&header.alg, key, signed, &sig)?;
    check_claims(&claims, expected)?;
    Ok(claims)
}

/// The claim checks of OIDC Core §3.1.3.7 (items 2, 3, 4, 9, 10 and 11).
fn check_claims(claims: &Map<String, Value>, expected: &Expected<'_>) -> Result<(), JwtError> {
    let text = |name| claims.get(name).and_then(Value::as_str);
    let time = |name| claims.get(name).and_then(Value::as_i64);
    let issuer = text("iss").ok_or(JwtError::MissingClaim("iss"))?;
    if issuer != expected.issuer {
        return Err(JwtError::Issuer(issuer.to_string()));
    }
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => return Err(JwtError::MissingClaim("aud")),
    };
    // Several audiences: the authorized party must be this client (§3.1.3.7 item 4).
    let party_ok = audiences.len() == 1 || text("azp").is_none_or(|azp| azp == expected.client_id);
    if !audiences.contains(&expected.client_id) || !party_ok {
        return Err(JwtError::Audience);
    }
    let now = expected.now;
    let expires = time("exp").ok_or(JwtError::MissingClaim("exp"))?;
    if now >= expires + CLOCK_SKEW_SECS {
        return Err(JwtError::Expired(expires));
    }
    if let Some(not_before) = time("nbf")
        && now + CLOCK_SKEW_SECS < not_before
    {
        return Err(JwtError::NotYetValid(not_before));
    }
    let issued = time("iat").ok_or(JwtError::MissingClaim("iat"))?;
    if now + CLOCK_SKEW_SECS < issued {
        return Err(JwtError::IssuedInFuture(issued));
    }
    let nonce = text("nonce").ok_or(JwtError::MissingClaim("nonce"))?;
    let same: bool =
        subtle::ConstantTimeEq::ct_eq(nonce.as_bytes(), expected.nonce.as_bytes()).into();
    if !same {
        return Err(JwtError::Nonce);
    }
    Ok(())
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
mod tests;
