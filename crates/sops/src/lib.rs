//! SOPS decryption for tether's render stage (issue #27), in Rust: no `sops` binary,
//! no GnuPG, no system libraries.
//!
//! A SOPS file keeps its tree in its own format with every value the rules select
//! replaced by `ENC[AES256_GCM,…]` (AES-256-GCM under one random data key, the value's
//! path as additional data), a `sops` metadata block holding that data key wrapped for
//! each recipient (age X25519, OpenPGP, cloud KMS), and a MAC: SHA-512 over every leaf,
//! encrypted under the data key. [`decrypt`] opens the data key with the [`Keys`] tether
//! holds, opens every value and checks the MAC; a file encrypted for no key tether
//! holds, a tampered value or a MAC mismatch is an error naming the file (and the
//! recipients), and no partial plaintext is returned.
//!
//! Plaintext lives in [`Decrypted`], whose `Debug` shows no value, and in what the
//! caller makes of it; keys live in [`Keys`], whose `Debug` shows none.
//!
//! Its own crate, beside tether-schema: it imports nothing of tether, and the age and
//! OpenPGP stacks it pulls in (RSA, X25519, scrypt) would otherwise be tether-diff's.
//!
//! ```text
//! module     what it is
//! error      SopsError: what can go wrong, naming the file
//! cipher     one ENC[AES256_GCM,…] value
//! metadata   the `sops` block: stanzas, MAC, encryption rules
//! keys       age identities and PGP secret keys; opening the data key
//! tree       the walk: values opened by path, the MAC computed and checked
//! formats    YAML, JSON, dotenv, INI and binary files to and from the tree form
//! encrypt    writing SOPS files (tests, benches): data key, values, MAC, stanzas
//! ```

mod cipher;
mod encrypt;
mod error;
mod formats;
mod keys;
mod metadata;
mod tree;

use serde_json::Value;
use zeroize::Zeroizing;

pub use encrypt::{Recipients, Rule, encrypt};
pub use error::SopsError;
pub use formats::Format;
pub use keys::{Keys, SOPS_AGE_KEY, SOPS_AGE_KEY_FILE};

/// A decrypted SOPS file. Holds plaintext: keep it in memory, hand it only to what
/// renders or applies, and never print it (its `Debug` shows no value).
pub struct Decrypted {
    format: Format,
    body: Body,
}

enum Body {
    Tree(Vec<Value>),
    /// The binary store's file: bytes, which need not be UTF-8.
    Binary(Zeroizing<Vec<u8>>),
}

impl std::fmt::Debug for Decrypted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decrypted")
            .field("format", &self.format)
            .field("documents", &self.documents().len())
            .finish_non_exhaustive()
    }
}

impl Decrypted {
    /// The decrypted documents in tree form (one for YAML, JSON, dotenv and INI, more
    /// for multi-document YAML, none for a binary file), keys in file order, without the
    /// `sops` metadata.
    pub fn documents(&self) -> &[Value] {
        match &self.body {
            Body::Tree(documents) => documents,
            Body::Binary(_) => &[],
        }
    }

    /// The file as `sops decrypt` prints it (for binary files, the original bytes).
    pub fn to_bytes(&self) -> Zeroizing<Vec<u8>> {
        match &self.body {
            Body::Tree(documents) => Zeroizing::new(formats::emit(self.format, documents)),
            Body::Binary(bytes) => bytes.clone(),
        }
    }
}

/// Whether `bytes` is a SOPS-encrypted file of `format` (it has a `sops` metadata block).
pub fn is_encrypted(format: Format, bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| formats::parse("", format, text).ok())
        .and_then(|parsed| parsed.metadata)
        .is_some_and(|m| m.get("lastmodified").is_some() || m.get("mac").is_some())
}

/// Decrypts the SOPS file `file` (its name in the repository, for errors) of `format`
/// with `keys`, checking every value and the MAC.
pub fn decrypt(
    file: &str,
    format: Format,
    bytes: &[u8],
    keys: &Keys,
) -> Result<Decrypted, SopsError> {
    let text = std::str::from_utf8(bytes).map_err(|_| SopsError::Parse {
        file: file.to_string(),
        format: format.name(),
        reason: "not UTF-8".to_string(),
    })?;
    let parsed = formats::parse(file, format, text)?;
    let raw = parsed.metadata.ok_or_else(|| SopsError::NotEncrypted {
        file: file.to_string(),
    })?;
    let metadata = metadata::Metadata::parse(file, &raw)?;
    let key = keys.data_key(file, &metadata)?;
    let mut walk = tree::Walk::new(file, &key, &metadata);
    let mut documents = parsed.documents;
    let body = if format == Format::Binary {
        let data = documents
            .first()
            .and_then(|d| d.get(formats::BINARY_KEY))
            .and_then(Value::as_str)
            .ok_or_else(|| SopsError::Metadata {
                file: file.to_string(),
                field: formats::BINARY_KEY.to_string(),
                reason: "a binary SOPS file has one `data` string".to_string(),
            })?;
        Body::Binary(Zeroizing::new(
            walk.raw(data, &[formats::BINARY_KEY.to_string()])?,
        ))
    } else {
        for document in &mut documents {
            walk.tree(document)?;
        }
        Body::Tree(documents)
    };
    walk.verify()?;
    Ok(Decrypted { format, body })
}
