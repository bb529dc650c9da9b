//! The private keys tether opens SOPS data keys with: age X25519 identities and
//! OpenPGP secret keys, as Flux reads them from a Secret (`*.agekey`, `*.asc`) and the
//! `sops` tool from `SOPS_AGE_KEY` / `SOPS_AGE_KEY_FILE`. Keys are secrets: `Debug`
//! shows only how many there are and their public names, and no error quotes a key.

use std::io::Read;
use std::str::FromStr;

use age::armor::ArmoredReader;
use pgp::composed::{Deserializable, Message, SignedSecretKey, TheRing};
use pgp::types::{KeyDetails, Password};
use zeroize::Zeroizing;

use crate::cipher::DATA_KEY_LEN;
use crate::error::SopsError;
use crate::metadata::{Metadata, Stanza};

/// The environment variable holding age identities inline, as `sops` reads it.
pub const SOPS_AGE_KEY: &str = "SOPS_AGE_KEY";
/// The environment variable naming a file of age identities, as `sops` reads it.
pub const SOPS_AGE_KEY_FILE: &str = "SOPS_AGE_KEY_FILE";

const PGP_PRIVATE_BLOCK: &str = "-----BEGIN PGP PRIVATE KEY BLOCK-----";
const PGP_PRIVATE_BLOCK_END: &str = "-----END PGP PRIVATE KEY BLOCK-----";
const AGE_SECRET_PREFIX: &str = "AGE-SECRET-KEY-";

/// A data key, wiped from memory when dropped.
pub(crate) type DataKey = Zeroizing<Vec<u8>>;

/// The private keys tether holds for SOPS files.
#[derive(Clone, Default)]
pub struct Keys {
    age: Vec<age::x25519::Identity>,
    pgp: Vec<SignedSecretKey>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pgp: Vec<String> = self.pgp.iter().map(fingerprint).collect();
        f.debug_struct("Keys")
            .field("age_identities", &self.age.len())
            .field("pgp", &pgp)
            .finish()
    }
}

fn fingerprint(key: &SignedSecretKey) -> String {
    hex::encode_upper(key.fingerprint().as_bytes())
}

impl Keys {
    /// No keys: every SOPS file fails with "no key that opens it".
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.age.is_empty() && self.pgp.is_empty()
    }

    /// Adds the keys in `text`, read from `source` (a file path or a Secret entry, for
    /// errors): armored PGP private key blocks if it holds any, age identities (one
    /// `AGE-SECRET-KEY-…` a line, `#` comments) otherwise.
    pub fn add(&mut self, source: &str, text: &str) -> Result<(), SopsError> {
        if text.contains(PGP_PRIVATE_BLOCK) {
            self.add_pgp(source, text)
        } else {
            self.add_age(source, text)
        }
    }

    /// Adds the age identities in `text` (Flux's `*.agekey` entries, `keys.txt`).
    pub fn add_age(&mut self, source: &str, text: &str) -> Result<(), SopsError> {
        let bad = |reason: &str| SopsError::Key {
            source_name: source.to_string(),
            reason: reason.to_string(),
        };
        let before = self.age.len();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if !line.starts_with(AGE_SECRET_PREFIX) {
                return Err(bad(&format!(
                    "line {} is not an age identity ({AGE_SECRET_PREFIX}…)",
                    n + 1
                )));
            }
            let identity = age::x25519::Identity::from_str(line)
                .map_err(|_| bad(&format!("line {} is not a valid age identity", n + 1)))?;
            self.age.push(identity);
        }
        if self.age.len() == before {
            return Err(bad("holds no age identity"));
        }
        Ok(())
    }

    /// Adds the secret keys of every armored private key block in `text` (Flux's
    /// `*.asc` entries, `gpg --export-secret-keys --armor`); public blocks beside them
    /// are skipped. Keys with a passphrase are refused: nothing could type it.
    pub fn add_pgp(&mut self, source: &str, text: &str) -> Result<(), SopsError> {
        let bad = |reason: String| SopsError::Key {
            source_name: source.to_string(),
            reason,
        };
        let mut rest = text;
        let before = self.pgp.len();
        while let Some(start) = rest.find(PGP_PRIVATE_BLOCK) {
            let block = &rest[start..];
            let end = block
                .find(PGP_PRIVATE_BLOCK_END)
                .ok_or_else(|| bad("an armored private key block has no end line".into()))?
                + PGP_PRIVATE_BLOCK_END.len();
            let (key, _) = SignedSecretKey::from_string(&block[..end])
                .map_err(|_| bad("an armored private key block does not parse".into()))?;
            if key.primary_key.secret_params().is_encrypted() {
                return Err(bad(format!(
                    "the secret key {} has a passphrase; export it without one",
                    fingerprint(&key)
                )));
            }
            self.pgp.push(key);
            rest = &block[end..];
        }
        if self.pgp.len() == before {
            return Err(bad("holds no armored PGP private key block".into()));
        }
        Ok(())
    }

    /// Adds the keys in the file at `path` (see [`Keys::add`]).
    pub fn add_file(&mut self, path: &std::path::Path) -> Result<(), SopsError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SopsError::Key {
            source_name: source.clone(),
            reason: e.to_string(),
        })?;
        self.add(&source, &text)
    }

    /// Adds the keys the `sops` tool would find in the environment: `SOPS_AGE_KEY`
    /// (identities inline) and `SOPS_AGE_KEY_FILE` (a file of them).
    pub fn add_from_env(&mut self) -> Result<(), SopsError> {
        if let Ok(text) = std::env::var(SOPS_AGE_KEY) {
            self.add_age(SOPS_AGE_KEY, &text)?;
        }
        if let Ok(path) = std::env::var(SOPS_AGE_KEY_FILE) {
            self.add_file(std::path::Path::new(&path))?;
        }
        Ok(())
    }

    /// The file's data key, from the first stanza one of the keys opens. Every stanza of
    /// a file wraps the same key, so the first that opens is enough.
    pub(crate) fn data_key(&self, file: &str, metadata: &Metadata) -> Result<DataKey, SopsError> {
        for stanza in &metadata.stanzas {
            let opened = match stanza {
                Stanza::Age { enc, .. } => self.open_age(enc),
                Stanza::Pgp { enc, .. } => self.open_pgp(enc),
                Stanza::Other { .. } => None,
            };
            if let Some(key) = opened {
                if key.len() != DATA_KEY_LEN {
                    return Err(SopsError::DataKeyLength {
                        file: file.to_string(),
                        recipient: stanza.recipient(),
                        len: key.len(),
                    });
                }
                return Ok(key);
            }
        }
        Err(SopsError::NoMatchingKey {
            file: file.to_string(),
            recipients: metadata.stanzas.iter().map(Stanza::recipient).collect(),
        })
    }

    fn open_age(&self, enc: &str) -> Option<DataKey> {
        if self.age.is_empty() {
            return None;
        }
        let decryptor = age::Decryptor::new(ArmoredReader::new(enc.as_bytes())).ok()?;
        let identities = self.age.iter().map(|i| i as &dyn age::Identity);
        let mut reader = decryptor.decrypt(identities).ok()?;
        let mut key = Zeroizing::new(Vec::with_capacity(DATA_KEY_LEN));
        reader.read_to_end(&mut key).ok()?;
        Some(key)
    }

    fn open_pgp(&self, enc: &str) -> Option<DataKey> {
        if self.pgp.is_empty() {
            return None;
        }
        let (message, _) = Message::from_string(enc).ok()?;
        let no_passphrase = Password::empty();
        let ring = TheRing {
            secret_keys: self.pgp.iter().collect(),
            key_passwords: vec![&no_passphrase],
            ..TheRing::default()
        };
        let (mut message, _) = message.decrypt_the_ring(ring, true).ok()?;
        if message.is_compressed() {
            message = message.decompress().ok()?;
        }
        message.as_data_vec().ok().map(Zeroizing::new)
    }
}
