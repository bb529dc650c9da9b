//! The SOPS keys of a pass (`decryption:`): a file app's key files and the entries of
//! its key Secret (Flux's layout: `*.agekey` age identities, `*.asc` armored PGP
//! private keys; other entries are not keys and are skipped), read at the start of
//! every pass with the app's own identity, as `postBuild` variables are. Their digest
//! joins the revision's identity ([`revision_id`]): a changed key Secret is a new
//! desired state (rendered again, so a revision stalled for want of a key is tried
//! again), while unchanged keys keep the kept render, so a warm pass decrypts nothing
//! and parses no key. Key material never reaches an error: they name the Secret, the
//! entry or the file.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::config::AppConfig;
use tether_core::cluster::{Cluster, ClusterError};
use tether_diff::manifest::SopsKeys;
use tether_sops::{Keys, SopsError};

/// Bytes of SHA-256 the revision id shows of the keys: as many as of the variables
/// (`Substitution::digest`), enough to tell one key set from the next.
const KEYS_DIGEST_BYTES: usize = 6;

/// Flux's suffixes for the entries of a decryption Secret.
const AGE_ENTRY_SUFFIX: &str = ".agekey";
const PGP_ENTRY_SUFFIX: &str = ".asc";

/// Why the keys could not be read; nothing was rendered. Each is worth retrying: the
/// Secret or file may be created or fixed, which moves no source, so only a later pass
/// sees it.
#[derive(Debug, thiserror::Error)]
pub enum DecryptionError {
    #[error("decryption.secretRef: Secret {namespace}/{name} not found")]
    Missing { namespace: String, name: String },
    #[error(
        "decryption.secretRef: Secret {namespace}/{name} holds no *{AGE_ENTRY_SUFFIX} or *{PGP_ENTRY_SUFFIX} entry"
    )]
    NoKeys { namespace: String, name: String },
    #[error("decryption.secretRef: Secret {namespace}/{name}: entry {entry} is not UTF-8 text")]
    NotText {
        namespace: String,
        name: String,
        entry: String,
    },
    #[error("decryption.secretRef: reading Secret {namespace}/{name}: {source}")]
    Cluster {
        namespace: String,
        name: String,
        /// Boxed: keeps the error small enough to return by value.
        #[source]
        source: Box<ClusterError>,
    },
    /// A key file or entry that does not read or parse (named, never shown).
    #[error("decryption: {0}")]
    Key(#[source] SopsError),
}

/// An app's keys as one pass read them, with the digest of their text.
#[derive(Debug, Clone)]
pub struct AppKeys {
    digest: String,
    keys: SopsKeys,
}

impl AppKeys {
    /// The keys, for the render stage.
    pub fn sops(&self) -> SopsKeys {
        self.keys.clone()
    }
}

/// What one key source holds: an age file, a PGP file, or a file of either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Age,
    Pgp,
    Either,
}

/// One source of keys as read: where from (for errors), what it holds, its text.
struct Material {
    source: String,
    kind: KeyKind,
    text: String,
}

/// The pass's keys, None when the app has no `decryption`. `kept` is what the last
/// pass read: when the keys' text is unchanged it is returned as is, so the render
/// kept for them stays current and nothing is parsed again.
pub async fn read(
    cluster: &Cluster,
    app: &AppConfig,
    inventory_namespace: &str,
    kept: Option<&AppKeys>,
) -> Result<Option<AppKeys>, DecryptionError> {
    let Some(decryption) = &app.decryption else {
        return Ok(None);
    };
    let mut material = Vec::new();
    for path in &decryption.key_files {
        let source = path.display().to_string();
        let text = tokio::fs::read_to_string(path).await.map_err(|e| {
            DecryptionError::Key(SopsError::Key {
                source_name: source.clone(),
                reason: e.to_string(),
            })
        })?;
        material.push(Material {
            source,
            kind: KeyKind::Either,
            text,
        });
    }
    if let Some(name) = &decryption.secret_name {
        // An App's Secret is its own namespace's, whatever else was written.
        let namespace = app
            .tenant_namespace
            .as_deref()
            .or(decryption.secret_namespace.as_deref())
            .unwrap_or(inventory_namespace);
        let data = cluster
            .secret_data(namespace, name)
            .await
            .map_err(|e| DecryptionError::Cluster {
                namespace: namespace.to_string(),
                name: name.clone(),
                source: Box::new(e),
            })?
            .ok_or_else(|| DecryptionError::Missing {
                namespace: namespace.to_string(),
                name: name.clone(),
            })?;
        material.extend(secret_material(namespace, name, data)?);
    }
    let digest = digest(&material);
    if let Some(kept) = kept.filter(|k| k.digest == digest) {
        return Ok(Some(kept.clone()));
    }
    Ok(Some(AppKeys {
        keys: SopsKeys::new(parse(&material)?),
        digest,
    }))
}

/// The identity of what a pass renders with these keys: `id` (the commit and the
/// variables, [`super::variables::revision_id`]) and the keys' digest (`+keys.<digest>`).
pub fn revision_id(id: String, keys: Option<&AppKeys>) -> String {
    match keys {
        Some(k) => format!("{id}+keys.{}", k.digest),
        None => id,
    }
}

/// The key entries of a decryption Secret, by Flux's suffixes; at least one.
fn secret_material(
    namespace: &str,
    name: &str,
    data: BTreeMap<String, Vec<u8>>,
) -> Result<Vec<Material>, DecryptionError> {
    let mut material = Vec::new();
    for (entry, bytes) in data {
        let kind = if entry.ends_with(AGE_ENTRY_SUFFIX) {
            KeyKind::Age
        } else if entry.ends_with(PGP_ENTRY_SUFFIX) {
            KeyKind::Pgp
        } else {
            continue;
        };
        let text = String::from_utf8(bytes).map_err(|_| DecryptionError::NotText {
            namespace: namespace.to_string(),
            name: name.to_string(),
            entry: entry.clone(),
        })?;
        material.push(Material {
            source: format!("Secret {namespace}/{name} entry {entry}"),
            kind,
            text,
        });
    }
    if material.is_empty() {
        return Err(DecryptionError::NoKeys {
            namespace: namespace.to_string(),
            name: name.to_string(),
        });
    }
    Ok(material)
}

fn parse(material: &[Material]) -> Result<Keys, DecryptionError> {
    let mut keys = Keys::new();
    for m in material {
        match m.kind {
            KeyKind::Age => keys.add_age(&m.source, &m.text),
            KeyKind::Pgp => keys.add_pgp(&m.source, &m.text),
            KeyKind::Either => keys.add(&m.source, &m.text),
        }
        .map_err(DecryptionError::Key)?;
    }
    Ok(keys)
}

/// SHA-256 over every source's name, kind and text, each length-prefixed.
fn digest(material: &[Material]) -> String {
    let mut hash = Sha256::new();
    for m in material {
        let kind = format!("{:?}", m.kind);
        for part in [m.source.as_str(), kind.as_str(), m.text.as_str()] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
    }
    hex::encode(&hash.finalize()[..KEYS_DIGEST_BYTES])
}

#[cfg(test)]
mod tests {
    use age::secrecy::ExposeSecret;

    use super::*;

    fn identity() -> String {
        age::x25519::Identity::generate()
            .to_string()
            .expose_secret()
            .to_string()
    }

    fn data(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn a_secrets_agekey_entries_are_keys_and_other_entries_are_skipped() {
        let key = identity();
        let material = secret_material(
            "ops",
            "keys",
            data(&[("a.agekey", &key), ("note", "hello")]),
        )
        .expect("one key entry");
        assert_eq!(material.len(), 1);
        assert_eq!(material[0].source, "Secret ops/keys entry a.agekey");
        assert!(!parse(&material).expect("parses").is_empty());
    }

    #[test]
    fn a_secret_without_keys_or_with_a_bad_one_is_named_without_its_text() {
        let none = secret_material("ops", "keys", data(&[("note", "x")]))
            .err()
            .expect("no key entry");
        assert_eq!(
            none.to_string(),
            "decryption.secretRef: Secret ops/keys holds no *.agekey or *.asc entry"
        );
        let bad_text = "AGE-SECRET-KEY-NOT-REALLY";
        let material =
            secret_material("ops", "keys", data(&[("b.agekey", bad_text)])).expect("an entry");
        let message = parse(&material).expect_err("not a key").to_string();
        assert!(
            message.contains("Secret ops/keys entry b.agekey"),
            "{message}"
        );
        assert!(!message.contains(bad_text), "{message}");
        // An age entry holding a PGP block is not read as one: Flux's suffixes decide.
        let material = secret_material(
            "ops",
            "keys",
            data(&[("c.asc", "-----BEGIN AGE ENCRYPTED FILE-----")]),
        )
        .expect("an entry");
        assert!(parse(&material).is_err());
        let mut binary = data(&[]);
        binary.insert("d.agekey".into(), vec![0xff, 0xfe]);
        let message = secret_material("ops", "keys", binary)
            .err()
            .expect("not text")
            .to_string();
        assert!(message.contains("entry d.agekey is not UTF-8"), "{message}");
    }

    #[test]
    fn the_revision_id_changes_with_the_keys_and_only_with_them() {
        let (one, two) = (identity(), identity());
        let keys = |text: &str| {
            let material = secret_material("ops", "keys", data(&[("a.agekey", text)])).unwrap();
            AppKeys {
                keys: SopsKeys::new(parse(&material).unwrap()),
                digest: digest(&material),
            }
        };
        let sha = "a".repeat(40);
        assert_eq!(revision_id(sha.clone(), None), sha);
        let first = revision_id(sha.clone(), Some(&keys(&one)));
        assert!(first.starts_with(&format!("{sha}+keys.")), "{first}");
        assert_eq!(super::super::variables::revision_sha(&first), sha);
        assert_eq!(revision_id(sha.clone(), Some(&keys(&one))), first);
        assert_ne!(revision_id(sha.clone(), Some(&keys(&two))), first);
        assert!(!first.contains(&one[15..]), "{first}");
    }
}
