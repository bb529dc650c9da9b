//! OpenPGP signatures as git makes them (`gpg --detach-sign --armor` over the
//! payload), checked with rpgp against armored public keys: the primary key, or a
//! subkey bound to it, that the signature's issuer names.

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::KeyDetails;

use super::VerifyFailure;

/// Every public key in an armored text (one or more `PUBLIC KEY BLOCK`s; a secret key
/// block is refused, so a private key put in the trust Secret by mistake is said so
/// and never used). Each key's self-signatures and subkey bindings must verify.
pub fn parse_public_keys(text: &str) -> Result<Vec<SignedPublicKey>, String> {
    if text.contains("-----BEGIN PGP PRIVATE KEY BLOCK-----") {
        return Err("holds a private key: give public keys only".to_string());
    }
    let (keys, _) = SignedPublicKey::from_armor_many(text.as_bytes())
        .map_err(|e| format!("not an armored OpenPGP public key ({e})"))?;
    let mut out = Vec::new();
    for key in keys {
        let key = key.map_err(|e| format!("an unreadable OpenPGP key ({e})"))?;
        let fingerprint = fingerprint_of(&key.primary_key);
        if !key.details.revocation_signatures.is_empty() {
            return Err(format!("key {fingerprint} is revoked"));
        }
        key.verify()
            .map_err(|e| format!("key {fingerprint} does not verify ({e})"))?;
        out.push(key);
    }
    if out.is_empty() {
        return Err("holds no OpenPGP public key".to_string());
    }
    Ok(out)
}

fn fingerprint_of(key: &impl KeyDetails) -> String {
    format!("{:X}", key.fingerprint())
}

/// The signer of an armored OpenPGP signature over `payload`, if one of `keys` made it.
pub fn verify(
    armored: &[u8],
    payload: &[u8],
    keys: &[SignedPublicKey],
) -> Result<String, VerifyFailure> {
    let text = std::str::from_utf8(armored)
        .map_err(|_| VerifyFailure::Malformed("a signature that is not text".into()))?;
    let (signature, _) = DetachedSignature::from_string(text)
        .map_err(|e| VerifyFailure::Malformed(format!("an unreadable OpenPGP signature ({e})")))?;
    let sig = &signature.signature;
    let issuer_ids: Vec<Vec<u8>> = sig.issuer().iter().map(|id| id.as_ref().to_vec()).collect();
    let issuer_fps: Vec<Vec<u8>> = sig
        .issuer_fingerprint()
        .iter()
        .map(|fp| fp.as_ref().to_vec())
        .collect();
    let named = |fingerprint: &[u8], key_id: &[u8]| {
        issuer_fps.iter().any(|fp| fp.as_slice() == fingerprint)
            || issuer_ids.iter().any(|id| id.as_slice() == key_id)
    };
    let signer = issuer_fps
        .first()
        .map(hex::encode_upper)
        .or_else(|| issuer_ids.first().map(hex::encode_upper))
        .unwrap_or_else(|| "an unnamed key".to_string());
    for key in keys {
        let primary = &key.primary_key;
        let verdict = |candidate: &dyn Fn(&[u8]) -> pgp::errors::Result<()>| {
            candidate(payload).map_err(|e| VerifyFailure::Invalid {
                signer: fingerprint_of(primary),
                reason: format!("the signature does not verify ({e})"),
            })
        };
        if named(primary.fingerprint().as_ref(), primary.key_id().as_ref()) {
            verdict(&|data| signature.verify(primary, data))?;
            return Ok(format!("{}{}", user_id(key), fingerprint_of(primary)));
        }
        for sub in &key.public_subkeys {
            if named(sub.key.fingerprint().as_ref(), sub.key.key_id().as_ref()) {
                verdict(&|data| signature.verify(&sub.key, data))?;
                return Ok(format!("{}{}", user_id(key), fingerprint_of(primary)));
            }
        }
    }
    Err(VerifyFailure::Untrusted { signer })
}

/// `Name <email> ` of a key's first user id, for the report (a public identity, never
/// key material).
fn user_id(key: &SignedPublicKey) -> String {
    key.details
        .users
        .first()
        .map(|user| format!("{} ", String::from_utf8_lossy(user.id.id())))
        .unwrap_or_default()
}
