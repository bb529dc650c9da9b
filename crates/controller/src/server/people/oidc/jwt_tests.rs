//! The ID token checks, with tokens signed here by an RSA key made for the run and a
//! P-256 key (ring signs, as an issuer would).

use super::*;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, RsaKeyPair};
use rsa::pkcs8::EncodePrivateKey as _;
use rsa::traits::PublicKeyParts as _;
use serde_json::json;
use std::sync::LazyLock;

const ISSUER: &str = "https://issuer.example";
const CLIENT: &str = "tether";
const NONCE: &str = "n-0S6_WzA2Mj";
const NOW: i64 = 1_800_000_000;

/// One RSA key for every test of the run (making one takes a while).
static RSA_KEY: LazyLock<(RsaKeyPair, Value)> = LazyLock::new(|| {
    let private = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).expect("an RSA key");
    let der = private.to_pkcs8_der().expect("PKCS#8");
    let pair = RsaKeyPair::from_pkcs8(der.as_bytes()).expect("ring reads it");
    let jwk = json!({"kty": "RSA", "kid": "rsa-1", "use": "sig",
        "n": URL_SAFE_NO_PAD.encode(private.n().to_bytes_be()),
        "e": URL_SAFE_NO_PAD.encode(private.e().to_bytes_be())});
    (pair, jwk)
});

fn ec_key() -> (EcdsaKeyPair, Value) {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let doc = EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("a P-256 key");
    let pair = EcdsaKeyPair::from_pkcs8(alg, doc.as_ref(), &rng).expect("read back");
    let point = ring::signature::KeyPair::public_key(&pair)
        .as_ref()
        .to_vec();
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "ec-1",
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])});
    (pair, jwk)
}

fn claims() -> Value {
    json!({"iss": ISSUER, "aud": CLIENT, "sub": "jane", "exp": NOW + 300, "iat": NOW - 5, "nonce": NONCE})
}

fn unsigned(header: &Value, claims: &Value) -> String {
    let part = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).expect("JSON"));
    format!("{}.{}", part(header), part(claims))
}

fn rs256(kid: &str, claims: &Value) -> String {
    let input = unsigned(&json!({"alg": "RS256", "kid": kid, "typ": "JWT"}), claims);
    let pair = &RSA_KEY.0;
    let mut sig = vec![0; pair.public().modulus_len()];
    pair.sign(
        &signature::RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        input.as_bytes(),
        &mut sig,
    )
    .expect("signed");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
}

fn keys(jwks: &[&Value]) -> KeySet {
    KeySet::parse(&serde_json::to_vec(&json!({ "keys": jwks })).expect("JSON")).expect("a JWKS")
}

fn expected() -> Expected<'static> {
    Expected {
        issuer: ISSUER,
        client_id: CLIENT,
        nonce: NONCE,
        now: NOW,
    }
}

fn check(token: &str) -> Result<Map<String, Value>, JwtError> {
    verify(token, &keys(&[&RSA_KEY.1]), &expected())
}

#[test]
fn a_token_signed_by_the_issuer_for_this_login_is_accepted_rs256_and_es256() {
    let verified = check(&rs256("rsa-1", &claims())).expect("valid");
    assert_eq!(verified["sub"], "jane");

    let (pair, jwk) = ec_key();
    let input = unsigned(&json!({"alg": "ES256", "kid": "ec-1"}), &claims());
    let sig = pair
        .sign(&SystemRandom::new(), input.as_bytes())
        .expect("signed");
    let token = format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()));
    let both = keys(&[&RSA_KEY.1, &jwk]);
    assert!(verify(&token, &both, &expected()).is_ok());
    // The P-256 key does not verify an RSA algorithm.
    let relabelled = format!(
        "{}.{}",
        unsigned(&json!({"alg": "RS256", "kid": "ec-1"}), &claims()),
        URL_SAFE_NO_PAD.encode(sig.as_ref())
    );
    assert_eq!(
        verify(&relabelled, &both, &expected()),
        Err(JwtError::UnknownKey("ec-1".into()))
    );
}

#[test]
fn audience_issuer_nonce_and_times_are_checked() {
    let with = |change: Value| {
        let mut c = claims();
        for (k, v) in change.as_object().expect("an object") {
            c[k] = v.clone();
        }
        check(&rs256("rsa-1", &c))
    };
    assert_eq!(with(json!({"aud": "argocd"})), Err(JwtError::Audience));
    assert_eq!(
        with(json!({"aud": ["argocd", CLIENT], "azp": "argocd"})),
        Err(JwtError::Audience)
    );
    assert!(with(json!({"aud": ["argocd", CLIENT], "azp": CLIENT})).is_ok());
    assert_eq!(
        with(json!({"iss": "https://evil.example"})),
        Err(JwtError::Issuer("https://evil.example".into()))
    );
    assert_eq!(with(json!({"nonce": "replayed"})), Err(JwtError::Nonce));
    assert_eq!(
        with(json!({"exp": NOW - 120})),
        Err(JwtError::Expired(NOW - 120))
    );
    // Within the clock skew either way.
    assert!(with(json!({"exp": NOW - 30})).is_ok());
    assert!(with(json!({"nbf": NOW + 30, "iat": NOW + 30})).is_ok());
    assert_eq!(
        with(json!({"nbf": NOW + 600})),
        Err(JwtError::NotYetValid(NOW + 600))
    );
    assert_eq!(
        with(json!({"iat": NOW + 600})),
        Err(JwtError::IssuedInFuture(NOW + 600))
    );
    let mut no_nonce = claims();
    no_nonce.as_object_mut().expect("object").remove("nonce");
    assert_eq!(
        check(&rs256("rsa-1", &no_nonce)),
        Err(JwtError::MissingClaim("nonce"))
    );
}

#[test]
fn forged_tampered_and_unknown_key_tokens_are_refused() {
    // alg none, and HS256 keyed with the public key's bytes.
    let none = format!("{}.", unsigned(&json!({"alg": "none"}), &claims()));
    assert_eq!(check(&none), Err(JwtError::Algorithm("none".into())));
    let input = unsigned(&json!({"alg": "HS256", "kid": "rsa-1"}), &claims());
    let public = RSA_KEY.1["n"].as_str().expect("n").as_bytes();
    let mac = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, public),
        input.as_bytes(),
    );
    let hs = format!("{input}.{}", URL_SAFE_NO_PAD.encode(mac.as_ref()));
    assert_eq!(check(&hs), Err(JwtError::Algorithm("HS256".into())));

    // Claims changed after signing.
    let token = rs256("rsa-1", &claims());
    let mut elevated = claims();
    elevated["sub"] = json!("admin");
    let forged_body = unsigned(&json!({}), &elevated);
    let mut parts: Vec<&str> = token.split('.').collect();
    parts[1] = forged_body.split('.').nth(1).expect("claims");
    assert_eq!(check(&parts.join(".")), Err(JwtError::Signature));

    assert_eq!(
        check(&rs256("rotated-2", &claims())),
        Err(JwtError::UnknownKey("rotated-2".into()))
    );
    assert!(matches!(check("a.b"), Err(JwtError::Malformed(_))));
}

#[test]
fn the_key_set_keeps_only_signing_keys_it_can_verify_with() {
    let set = keys(&[
        &RSA_KEY.1,
        &json!({"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"}),
        &json!({"kty": "EC", "crv": "P-521", "kid": "big", "x": "AA", "y": "AA"}),
        &json!({"kty": "oct", "kid": "secret", "k": "c2VjcmV0"}),
    ]);
    assert_eq!(set.len(), 1);
    assert!(matches!(
        KeySet::parse(b"{\"nokeys\": []}"),
        Err(JwtError::KeySet(_))
    ));
    // A JWK pinned to RS512 does not verify an RS256 signature.
    let mut pinned = RSA_KEY.1.clone();
    pinned["alg"] = json!("RS512");
    let token = rs256("rsa-1", &claims());
    assert_eq!(
        verify(&token, &keys(&[&pinned]), &expected()),
        Err(JwtError::Algorithm("RS256".into()))
    );
}
