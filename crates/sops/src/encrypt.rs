//! Writing SOPS files, as `sops encrypt` does: a fresh data key, every value the rule
//! selects encrypted under its path, the MAC over every leaf, and the data key wrapped
//! for each recipient (age X25519 and OpenPGP). tether itself only decrypts; this is
//! what its tests and benches encrypt their Secrets with, and what the format module's
//! reader is checked against beside the real `sops` output.

use std::io::Write;
use std::str::FromStr;

use aes_gcm::aead::OsRng;
use aes_gcm::aead::rand_core::RngCore;
use age::armor::{ArmoredWriter, Format as ArmorFormat};
use pgp::composed::{ArmorOptions, Deserializable, MessageBuilder, SignedPublicKey};
use pgp::crypto::sym::SymmetricKeyAlgorithm;
use pgp::types::KeyDetails;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha512};
use zeroize::Zeroizing;

use crate::cipher::{self, DATA_KEY_LEN, ValueType};
use crate::error::SopsError;
use crate::formats::{self, Format, METADATA_KEY};
use crate::metadata::Metadata;
use crate::tree::{go_bytes, visit};

/// The format version written into the metadata: the `sops` release whose layout
/// this writer follows (metadata map, `mac_only_encrypted`, age and PGP lists).
const SOPS_VERSION: &str = "3.9.4";

/// Who a new file's data key is wrapped for.
#[derive(Default)]
pub struct Recipients {
    age: Vec<age::x25519::Recipient>,
    pgp: Vec<SignedPublicKey>,
}

impl Recipients {
    pub fn new() -> Self {
        Self::default()
    }

    /// An age X25519 recipient (`age1…`).
    pub fn add_age(&mut self, recipient: &str) -> Result<(), SopsError> {
        let parsed =
            age::x25519::Recipient::from_str(recipient.trim()).map_err(|e| SopsError::Key {
                source_name: recipient.to_string(),
                reason: e.to_string(),
            })?;
        self.age.push(parsed);
        Ok(())
    }

    /// An armored OpenPGP public key with an encryption subkey.
    pub fn add_pgp(&mut self, armored: &str) -> Result<(), SopsError> {
        let (key, _) = SignedPublicKey::from_string(armored).map_err(|e| SopsError::Key {
            source_name: "an armored public key".to_string(),
            reason: e.to_string(),
        })?;
        self.pgp.push(key);
        Ok(())
    }
}

/// Which leaves a new file encrypts: one of SOPS's rules (`--encrypted-regex` …).
pub enum Rule {
    UnencryptedSuffix(String),
    EncryptedSuffix(String),
    UnencryptedRegex(String),
    EncryptedRegex(String),
}

/// Encrypts `documents` (YAML or JSON, each a map) for `recipients` under `rule`;
/// with `mac_only_encrypted` only the encrypted leaves feed the MAC. Returns the file.
pub fn encrypt(
    format: Format,
    mut documents: Vec<Value>,
    rule: &Rule,
    mac_only_encrypted: bool,
    recipients: &Recipients,
) -> Result<Vec<u8>, SopsError> {
    if !matches!(format, Format::Yaml | Format::Json) {
        return Err(SopsError::Unsupported {
            file: "(new file)".to_string(),
            what: format!("writing {}", format.name()),
        });
    }
    let (field, value) = match rule {
        Rule::UnencryptedSuffix(v) => ("unencrypted_suffix", v),
        Rule::EncryptedSuffix(v) => ("encrypted_suffix", v),
        Rule::UnencryptedRegex(v) => ("unencrypted_regex", v),
        Rule::EncryptedRegex(v) => ("encrypted_regex", v),
    };
    let lastmodified = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut meta = Map::new();
    meta.insert("lastmodified".into(), json!(lastmodified));
    meta.insert(field.into(), json!(value));
    if mac_only_encrypted {
        meta.insert("mac_only_encrypted".into(), json!(true));
    }
    let rules = Metadata::parse("(new file)", &Value::Object(meta.clone()))?.rules;
    let mut key = Zeroizing::new(vec![0u8; DATA_KEY_LEN]);
    OsRng.fill_bytes(&mut key);
    let mut mac = Sha512::new();
    for document in &mut documents {
        visit(document, &mut Vec::new(), &mut |leaf, path| {
            let encrypted = rules.encrypts(path);
            let bytes = go_bytes(leaf);
            if encrypted || !rules.mac_only_encrypted {
                mac.update(&bytes);
            }
            let kind = match leaf {
                Value::String(s) if !s.is_empty() => ValueType::Str,
                Value::Number(n) if n.is_f64() => ValueType::Float,
                Value::Number(_) => ValueType::Int,
                Value::Bool(_) => ValueType::Bool,
                _ => return Ok(()),
            };
            if encrypted {
                let aad: String = path.iter().map(|k| format!("{k}:")).collect();
                *leaf = Value::String(cipher::encrypt(&bytes, kind, &key, &aad));
            }
            Ok(())
        })?;
    }
    let digest = hex::encode_upper(mac.finalize());
    meta.insert(
        "mac".into(),
        json!(cipher::encrypt(
            digest.as_bytes(),
            ValueType::Str,
            &key,
            &lastmodified
        )),
    );
    meta.insert("version".into(), json!(SOPS_VERSION));
    wrap(&key, recipients, &lastmodified, &mut meta)?;
    for document in &mut documents {
        let map = document
            .as_object_mut()
            .ok_or_else(|| SopsError::Unsupported {
                file: "(new file)".to_string(),
                what: "a document that is not a map".to_string(),
            })?;
        map.insert(METADATA_KEY.to_string(), Value::Object(meta.clone()));
    }
    Ok(formats::emit(format, &documents))
}

/// Wraps the data key for every recipient into `meta`'s `age` and `pgp` lists.
fn wrap(
    key: &[u8],
    recipients: &Recipients,
    now: &str,
    meta: &mut Map<String, Value>,
) -> Result<(), SopsError> {
    let failed = |who: String, e: &dyn std::fmt::Display| SopsError::Key {
        source_name: who,
        reason: e.to_string(),
    };
    let mut age_list = Vec::new();
    for recipient in &recipients.age {
        let name = recipient.to_string();
        let encryptor =
            age::Encryptor::with_recipients(std::iter::once(recipient as &dyn age::Recipient))
                .map_err(|e| failed(name.clone(), &e))?;
        let mut out = Vec::new();
        let armored = ArmoredWriter::wrap_output(&mut out, ArmorFormat::AsciiArmor)
            .map_err(|e| failed(name.clone(), &e))?;
        let mut writer = encryptor
            .wrap_output(armored)
            .map_err(|e| failed(name.clone(), &e))?;
        writer
            .write_all(key)
            .map_err(|e| failed(name.clone(), &e))?;
        writer
            .finish()
            .and_then(ArmoredWriter::finish)
            .map_err(|e| failed(name.clone(), &e))?;
        age_list.push(json!({"recipient": name, "enc": String::from_utf8_lossy(&out)}));
    }
    let mut pgp_list = Vec::new();
    for public in &recipients.pgp {
        let fp = hex::encode_upper(public.fingerprint().as_bytes());
        let subkey = public
            .public_subkeys
            .iter()
            .find(|s| {
                s.signatures
                    .iter()
                    .any(|sig| sig.key_flags().encrypt_comms() || sig.key_flags().encrypt_storage())
            })
            .ok_or_else(|| failed(fp.clone(), &"no encryption subkey"))?;
        let mut builder = MessageBuilder::from_bytes("", key.to_vec())
            .seipd_v1(OsRng, SymmetricKeyAlgorithm::AES256);
        builder
            .encrypt_to_key(OsRng, &subkey.key)
            .map_err(|e| failed(fp.clone(), &e))?;
        let enc = builder
            .to_armored_string(OsRng, ArmorOptions::default())
            .map_err(|e| failed(fp.clone(), &e))?;
        pgp_list.push(json!({"created_at": now, "enc": enc, "fp": fp}));
    }
    if !age_list.is_empty() {
        meta.insert("age".into(), Value::Array(age_list));
    }
    if !pgp_list.is_empty() {
        meta.insert("pgp".into(), Value::Array(pgp_list));
    }
    Ok(())
}
