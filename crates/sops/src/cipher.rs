//! One SOPS value: `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`, AES-256-GCM with a
//! 32-byte IV (SOPS's choice, not GCM's usual 12) and the value's tree path as the
//! additional data, so a ciphertext moved to another key does not decrypt.

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{AesGcm, Nonce, Tag};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// AES-256-GCM with SOPS's 32-byte nonce.
type SopsGcm = AesGcm<aes_gcm::aes::Aes256, U32>;

/// The size of a SOPS data key (AES-256).
pub(crate) const DATA_KEY_LEN: usize = 32;
/// The IV length SOPS writes (`aes/cipher.go`: `make([]byte, 32)`).
const IV_LEN: usize = 32;
const TAG_LEN: usize = 16;

/// The type a value had before SOPS encrypted it (the `type:` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueType {
    Str,
    Int,
    Float,
    Bool,
    Bytes,
    Comment,
}

/// A decrypted value: its bytes and the type they are to be read as.
pub(crate) struct Opened {
    pub bytes: Vec<u8>,
    pub kind: ValueType,
}

/// Why a value did not open; the caller adds the file and the path.
#[derive(Debug)]
pub(crate) enum CipherError {
    Format,
    Authentication,
}

impl CipherError {
    pub fn reason(&self) -> &'static str {
        match self {
            CipherError::Format => "not an ENC[AES256_GCM,…] value",
            CipherError::Authentication => "authentication failed",
        }
    }
}

impl ValueType {
    fn name(self) -> &'static str {
        match self {
            ValueType::Str => "str",
            ValueType::Int => "int",
            ValueType::Float => "float",
            ValueType::Bool => "bool",
            ValueType::Bytes => "bytes",
            ValueType::Comment => "comment",
        }
    }
}

/// Encrypts `plaintext` of type `kind` under the data key with `aad`, a fresh random
/// IV each time, as `aes.Cipher.Encrypt` writes it.
pub(crate) fn encrypt(plaintext: &[u8], kind: ValueType, key: &[u8], aad: &str) -> String {
    use aes_gcm::aead::OsRng;
    use aes_gcm::aead::rand_core::RngCore;
    let mut iv = [0u8; IV_LEN];
    OsRng.fill_bytes(&mut iv);
    let cipher = SopsGcm::new_from_slice(key).expect("a 32-byte data key");
    let mut data = plaintext.to_vec();
    let tag = cipher
        .encrypt_in_place_detached(Nonce::<U32>::from_slice(&iv), aad.as_bytes(), &mut data)
        .expect("AES-GCM encrypts any length SOPS values have");
    format!(
        "ENC[AES256_GCM,data:{},iv:{},tag:{},type:{}]",
        STANDARD.encode(&data),
        STANDARD.encode(iv),
        STANDARD.encode(tag),
        kind.name()
    )
}

/// Decrypts one `ENC[…]` string with the data key, `aad` being the path (`a:b:c:`) or,
/// for the MAC, the `lastmodified` string.
pub(crate) fn decrypt(value: &str, key: &[u8], aad: &str) -> Result<Opened, CipherError> {
    let body = value
        .strip_prefix("ENC[AES256_GCM,")
        .and_then(|rest| rest.strip_suffix(']'))
        .ok_or(CipherError::Format)?;
    let (mut data, mut iv, mut tag, mut kind) = (None, None, None, None);
    for field in body.split(',') {
        let (name, content) = field.split_once(':').ok_or(CipherError::Format)?;
        match name {
            "data" => data = Some(content),
            "iv" => iv = Some(content),
            "tag" => tag = Some(content),
            "type" => kind = Some(content),
            _ => return Err(CipherError::Format),
        }
    }
    let decode = |field: Option<&str>| {
        STANDARD
            .decode(field.ok_or(CipherError::Format)?)
            .map_err(|_| CipherError::Format)
    };
    let mut bytes = decode(data)?;
    let iv = decode(iv)?;
    let tag = decode(tag)?;
    let kind = match kind.ok_or(CipherError::Format)? {
        "str" => ValueType::Str,
        "int" => ValueType::Int,
        "float" => ValueType::Float,
        "bool" => ValueType::Bool,
        "bytes" => ValueType::Bytes,
        "comment" => ValueType::Comment,
        _ => return Err(CipherError::Format),
    };
    if iv.len() != IV_LEN || tag.len() != TAG_LEN || key.len() != DATA_KEY_LEN {
        return Err(CipherError::Format);
    }
    let cipher = SopsGcm::new_from_slice(key).map_err(|_| CipherError::Format)?;
    cipher
        .decrypt_in_place_detached(
            Nonce::<U32>::from_slice(&iv),
            aad.as_bytes(),
            &mut bytes,
            Tag::from_slice(&tag),
        )
        .map_err(|_| CipherError::Authentication)?;
    Ok(Opened { bytes, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// getsops/sops `aes/cipher_test.go` TestDecrypt and TestDecryptInvalidAad.
    const VECTOR: &str = "ENC[AES256_GCM,data:oYyi,iv:MyIDYbT718JRr11QtBkcj3Dwm4k1aCGZBVeZf0EyV8o=,tag:t5z2Z023Up0kxwCgw1gNxg==,type:str]";

    #[test]
    fn the_upstream_vector_opens_with_its_path_and_not_without() {
        let key = [b'f'; 32];
        let opened = decrypt(VECTOR, &key, "bar:").expect("opens");
        assert_eq!(opened.bytes, b"foo");
        assert_eq!(opened.kind, ValueType::Str);
        assert!(matches!(
            decrypt(VECTOR, &key, ""),
            Err(CipherError::Authentication)
        ));
        assert!(matches!(
            decrypt(VECTOR, &[b'g'; 32], "bar:"),
            Err(CipherError::Authentication)
        ));
    }

    #[test]
    fn what_encrypt_writes_decrypt_reads_back_under_the_same_path_only() {
        let key = [7u8; 32];
        let value = encrypt(b"25.5", ValueType::Float, &key, "a:b:");
        assert!(value.starts_with("ENC[AES256_GCM,data:"), "{value}");
        let opened = decrypt(&value, &key, "a:b:").expect("opens");
        assert_eq!(
            (opened.bytes.as_slice(), opened.kind),
            (&b"25.5"[..], ValueType::Float)
        );
        assert!(decrypt(&value, &key, "a:c:").is_err());
        assert_ne!(
            value,
            encrypt(b"25.5", ValueType::Float, &key, "a:b:"),
            "a fresh IV each time"
        );
    }

    #[test]
    fn malformed_values_are_format_errors() {
        let key = [b'f'; 32];
        for bad in [
            "ENC[AES256_GCM,data:oYyi]",
            "ENC[AES256_GCM,data:!!,iv:AA==,tag:AA==,type:str]",
            &VECTOR.replace("type:str", "type:blob"),
            "plain",
        ] {
            assert!(
                matches!(decrypt(bad, &key, "bar:"), Err(CipherError::Format)),
                "{bad}"
            );
        }
    }
}
