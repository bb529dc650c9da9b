//! SOPS-encrypted manifests (issue #27): a YAML or JSON file with a `sops` metadata
//! block is decrypted before it is parsed, so the objects the diff and the apply see
//! hold the plaintext, in memory only. With no key that opens it (or no keys at all)
//! the file is an error naming it and its recipients, and none of its objects is
//! applied: ciphertext never reaches the cluster.
//!
//! Files a renderer reads (a `secretGenerator`'s dotenv, INI or binary files, a chart's
//! `secrets.yaml` values file, a kustomization's encrypted resources) are decrypted
//! into the renderer's private copy only ([`decrypt_for_copy`]), which is removed
//! after the build; their plaintext values are masked in the renderer's errors.
//!
//! `tether diff` with no key configured at all reads such a file *sealed* instead
//! ([`SopsKeys::sealed`]): each document is kept out of the comparison and reported
//! as [`Sealed`] ("encrypted: not compared") under the identity its clear metadata
//! gives, so the rest of the app is still diffed. Nothing of its values, ciphertext
//! or plaintext, is kept; a sync never reads sealed.

use std::sync::Arc;

use serde_json::Value;
use tether_sops::{Decrypted, Format, Keys};

use super::error::{Location, ManifestError};
use super::{GroupKind, Input, ObjectId, Origin, Scope};

/// The bytes every SOPS value starts with: a cheap test before the full one, which
/// parses the file.
const CIPHERTEXT_MARK: &[u8] = b"ENC[AES256_GCM,";

/// How `tether diff` reports a document it read sealed.
pub const NOT_COMPARED: &str = "encrypted: not compared";

/// An app's SOPS keys, shared by its passes. Two are equal only when they are the same
/// keys (the same `Arc`); `Debug` shows no key material.
#[derive(Clone, Default)]
pub struct SopsKeys {
    keys: Option<Arc<Keys>>,
    /// No keys, and an encrypted document is reported rather than an error.
    sealed: bool,
}

impl SopsKeys {
    pub fn new(keys: Keys) -> Self {
        SopsKeys {
            keys: Some(Arc::new(keys)),
            sealed: false,
        }
    }

    /// No keys: encrypted documents are read sealed, not compared (`tether diff`
    /// only; a sync must not leave part of a revision out).
    pub fn sealed() -> Self {
        SopsKeys {
            keys: None,
            sealed: true,
        }
    }

    pub fn get(&self) -> Option<&Keys> {
        self.keys.as_deref()
    }

    /// Whether encrypted documents are read sealed.
    pub fn is_sealed(&self) -> bool {
        self.sealed
    }
}

impl PartialEq for SopsKeys {
    fn eq(&self, other: &Self) -> bool {
        self.sealed == other.sealed
            && match (&self.keys, &other.keys) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

impl Eq for SopsKeys {}

impl std::fmt::Debug for SopsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.get() {
            Some(keys) => keys.fmt(f),
            None if self.sealed => f.write_str("no SOPS keys (encrypted documents not compared)"),
            None => f.write_str("no SOPS keys"),
        }
    }
}

/// A SOPS-encrypted document read without keys: where it is and, when its metadata
/// is in clear, which object it declares. It holds none of its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub origin: Origin,
    /// None when the rules encrypted its apiVersion, kind, name or namespace.
    pub id: Option<ObjectId>,
    /// A hash of the encrypted document as written: two revisions of it are the
    /// same exactly when it is equal (a preview says "changed" without opening it).
    pub fingerprint: u64,
}

impl Sealed {
    /// The document's identity from its clear metadata, namespaced as `scope` says.
    pub(crate) fn of(
        object: &serde_json::Value,
        origin: Origin,
        scope: impl Fn(&GroupKind) -> Scope,
        default_namespace: &str,
    ) -> Sealed {
        let id = clear_identity(object).map(|mut id| {
            match scope(&id.group_kind()) {
                Scope::Cluster => id.namespace = None,
                Scope::Namespaced => {
                    id.namespace
                        .get_or_insert_with(|| default_namespace.to_string());
                }
            }
            id
        });
        Sealed {
            origin,
            id,
            fingerprint: fingerprint(object),
        }
    }

    /// `Secret default/db`, or `file db.enc.yaml document 2` when the identity is
    /// encrypted too.
    pub fn title(&self) -> String {
        match &self.id {
            Some(id) => id.to_string(),
            None => format!(
                "file {} document {}",
                self.origin.file, self.origin.document
            ),
        }
    }
}

/// A stable hash of a document's text (within one build: both revisions of a
/// preview are read by the same process).
fn fingerprint(object: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    object.to_string().hash(&mut hasher);
    hasher.finish()
}

/// Whether a document read sealed is a SOPS document (it still has its metadata).
pub(crate) fn is_sealed_document(object: &Value) -> bool {
    object.get("sops").is_some_and(Value::is_object)
}

/// The identity a SOPS document declares, when none of its parts is ciphertext.
fn clear_identity(object: &Value) -> Option<ObjectId> {
    let is_clear = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .is_some_and(|s| !s.starts_with("ENC["))
    };
    let meta = object.get("metadata");
    let parts = [
        object.get("apiVersion"),
        object.get("kind"),
        meta.and_then(|m| m.get("name")),
    ];
    let namespace = meta.and_then(|m| m.get("namespace"));
    if !parts.into_iter().all(is_clear) || (namespace.is_some() && !is_clear(namespace)) {
        return None;
    }
    ObjectId::of(object)
}

/// The plaintext of `input` when it is a SOPS-encrypted manifest file, `None` when it
/// is an ordinary one. Rendered output is never decrypted here: the renderer saw the
/// files, not tether.
pub(crate) fn decrypt_input(
    input: &Input,
    keys: Option<&Keys>,
) -> Result<Option<Vec<u8>>, ManifestError> {
    let lower = input.path.to_ascii_lowercase();
    let format = if lower.ends_with(".json") {
        Format::Json
    } else {
        Format::Yaml
    };
    if input.rendered {
        return Ok(None);
    }
    Ok(decrypt_file(&input.path, format, &input.bytes, keys)?
        .map(|plain| plain.to_bytes().to_vec()))
}

/// A file opened for a renderer's copy: its plaintext, and its values (to mask).
pub(crate) type Opened = (Vec<u8>, Vec<String>);

/// A file of a renderer's private copy (`path` in the repository) as it is written
/// there: its plaintext when it is a SOPS file of the format `sops` infers from its
/// name, with its plaintext values (to mask in the renderer's errors); `None` for an
/// ordinary file, written as it is.
pub(crate) fn decrypt_for_copy(
    path: &str,
    bytes: &[u8],
    keys: Option<&Keys>,
) -> Result<Option<Opened>, ManifestError> {
    let Some(plain) = decrypt_file(path, Format::from_path(path), bytes, keys)? else {
        return Ok(None);
    };
    let bytes = plain.to_bytes().to_vec();
    let mut values = Vec::new();
    if plain.documents().is_empty() {
        // A binary file: its lines are what a renderer could quote.
        values.extend(String::from_utf8_lossy(&bytes).lines().map(str::to_string));
    }
    plain
        .documents()
        .iter()
        .for_each(|d| leaves(d, &mut values));
    Ok(Some((bytes, values)))
}

/// Whether `bytes` is a SOPS file of the format `sops` infers from `path`.
pub(crate) fn is_sops_file(path: &str, bytes: &[u8]) -> bool {
    is_sops(Format::from_path(path), bytes)
}

fn is_sops(format: Format, bytes: &[u8]) -> bool {
    bytes
        .windows(CIPHERTEXT_MARK.len())
        .any(|w| w == CIPHERTEXT_MARK)
        && tether_sops::is_encrypted(format, bytes)
}

/// The decrypted file when `bytes` is a SOPS file of `format`, `None` otherwise.
fn decrypt_file(
    path: &str,
    format: Format,
    bytes: &[u8],
    keys: Option<&Keys>,
) -> Result<Option<Decrypted>, ManifestError> {
    if !is_sops(format, bytes) {
        return Ok(None);
    }
    let none = Keys::new();
    tether_sops::decrypt(path, format, bytes, keys.unwrap_or(&none))
        .map(Some)
        .map_err(|source| ManifestError::Sops {
            at: Location::file(path),
            source: Box::new(source),
        })
}

/// Every scalar of a decrypted tree, as text.
fn leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use age::secrecy::ExposeSecret;
    use serde_json::{Value, json};
    use tether_sops::{Recipients, Rule};

    use super::*;
    use crate::manifest::{ParseOptions, Renderers, parse_files, render_tree};

    const PLAIN: &str = "hunter2-in-the-clear";

    /// A Secret encrypted for a fresh age identity, as `sops --encrypted-regex` writes it.
    fn encrypted_secret() -> (Vec<u8>, Keys, String) {
        let identity = age::x25519::Identity::generate();
        let recipient = identity.to_public().to_string();
        let mut recipients = Recipients::new();
        recipients.add_age(&recipient).expect("a recipient");
        let secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db", "namespace": "apps"},
            "stringData": {"password": PLAIN},
        });
        let rule = Rule::EncryptedRegex("^(data|stringData)$".to_string());
        let bytes = tether_sops::encrypt(Format::Yaml, vec![secret], &rule, false, &recipients)
            .expect("encrypts");
        let mut keys = Keys::new();
        let secret_line = identity.to_string();
        keys.add_age("test", secret_line.expose_secret())
            .expect("an identity");
        (bytes, keys, recipient)
    }

    #[test]
    fn an_encrypted_manifest_is_parsed_as_its_plaintext_with_the_key() {
        let (bytes, keys, _) = encrypted_secret();
        assert!(!String::from_utf8_lossy(&bytes).contains(PLAIN));
        let opts = ParseOptions {
            sops_keys: Some(&keys),
            ..ParseOptions::default()
        };
        let set = parse_files(&[("secrets/db.enc.yaml", bytes)], &opts).expect("decrypts");
        let object = &set.objects[0].object;
        assert_eq!(object["stringData"]["password"], json!(PLAIN));
        assert_eq!(object.get("sops"), None::<&Value>);
    }

    #[test]
    fn without_a_key_an_encrypted_manifest_is_an_error_naming_file_and_recipient() {
        let (bytes, _, recipient) = encrypted_secret();
        let error = parse_files(&[("secrets/db.enc.yaml", bytes)], &ParseOptions::default())
            .expect_err("ciphertext must not be applied");
        let message = error.to_string();
        assert!(message.contains("secrets/db.enc.yaml"), "{message}");
        assert!(message.contains(&recipient), "{message}");
        assert!(!error.is_retryable());
    }

    /// Issue #27: read sealed, an encrypted document keeps only where it is and the
    /// identity its clear metadata gives; a plain one beside it is read as ever.
    #[test]
    fn without_keys_a_sealed_read_keeps_the_identity_and_no_value() {
        let (bytes, _, _) = encrypted_secret();
        let plain = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n".to_vec();
        let opts = ParseOptions {
            sops_sealed: true,
            ..ParseOptions::default()
        };
        let files = [("db.enc.yaml", bytes.clone()), ("settings.yaml", plain)];
        let set = parse_files(&files, &opts).expect("reads sealed");
        assert_eq!(set.objects.len(), 1);
        assert_eq!(set.sealed.len(), 1);
        assert_eq!(set.sealed[0].title(), "Secret apps/db");
        assert!(!format!("{set:?}").contains("ENC["), "{set:?}");
        let (again, _, _) = encrypted_secret();
        let other = parse_files(&[("db.enc.yaml", again)], &opts).expect("reads sealed");
        assert_ne!(other.sealed[0].fingerprint, set.sealed[0].fingerprint);
        // With a key configured, sealed reading is off: the wrong key is an error.
        let (_, stranger, _) = encrypted_secret();
        let keyed = ParseOptions {
            sops_keys: Some(&stranger),
            ..opts
        };
        assert!(parse_files(&[("db.enc.yaml", bytes)], &keyed).is_err());
    }

    #[test]
    fn the_render_stage_takes_the_keys_from_the_renderers() {
        let (bytes, keys, _) = encrypted_secret();
        let renderers = Renderers {
            sops: SopsKeys::new(keys),
            ..Renderers::default()
        };
        let files = vec![("app/db.enc.yaml".to_string(), bytes)];
        let set =
            render_tree(&files, "app", &renderers, &ParseOptions::default()).expect("renders");
        assert_eq!(
            set.objects[0].object["stringData"]["password"],
            json!(PLAIN)
        );
        assert!(!format!("{renderers:?}").contains("AGE-SECRET-KEY"));
    }
    fn fixture(path: &str) -> Vec<u8> {
        let root = tether_testkit::sops_fixtures(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
        std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The key that opens upstream's functional-test files.
    fn functional_tests_key() -> Keys {
        let text = fixture("keys/pgp/sops_functional_tests_key.asc");
        let mut keys = Keys::new();
        keys.add_pgp("test key", std::str::from_utf8(&text).expect("armored"))
            .expect("a key");
        keys
    }

    fn b64(bytes: &[u8]) -> Value {
        use base64::Engine;
        json!(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// Issue #27: a `secretGenerator` over files `sops` encrypted (dotenv, INI) reads
    /// them decrypted in the private copy, to exactly the plaintext `sops decrypt`
    /// prints; without the key the revision fails naming the file.
    #[test]
    fn a_secret_generator_reads_encrypted_dotenv_and_ini_files_as_sops_decrypts_them() {
        let expected = |name: &str| {
            fixture(&format!(
                "expected/upstream/head/functional-tests/res/{name}.stdout"
            ))
        };
        let (env, ini) = (
            fixture("head/functional-tests/res/format.enc.env"),
            fixture("head/functional-tests/res/format.enc.ini"),
        );
        let keys = functional_tests_key();
        let (plain, values) = decrypt_for_copy("app/app.env", &env, Some(&keys))
            .expect("decrypts")
            .expect("a SOPS file");
        assert_eq!(plain, expected("format.enc.env"));
        assert!(values.contains(&" bar".to_string()), "{values:?}");
        let kustomization = "secretGenerator:\n- name: env\n  namespace: apps\n  envs: [app.env]\n  files: [app.ini]\ngeneratorOptions:\n  disableNameSuffixHash: true\n";
        let files = vec![
            (
                "app/kustomization.yaml".to_string(),
                kustomization.as_bytes().to_vec(),
            ),
            ("app/app.env".to_string(), env),
            ("app/app.ini".to_string(), ini),
        ];
        let renderers = Renderers {
            sops: SopsKeys::new(keys),
            ..Renderers::default()
        };
        let set =
            render_tree(&files, "app", &renderers, &ParseOptions::default()).expect("renders");
        let data = &set.objects[0].object["data"];
        assert_eq!(data["foo "], b64(b" bar"), "{data}");
        assert_eq!(data["app.ini"], b64(&expected("format.enc.ini")));

        // The same kustomization on disk is built in a private copy, decrypted there.
        let tmp = tempfile::tempdir().expect("tempdir");
        for (path, bytes) in &files {
            let target = tmp.path().join(path);
            std::fs::create_dir_all(target.parent().expect("a parent")).expect("mkdir");
            std::fs::write(target, bytes).expect("write");
        }
        let app = tmp.path().join("app");
        let on_disk = crate::manifest::render_dir(&app, &renderers, &ParseOptions::default())
            .expect("renders on disk");
        assert_eq!(on_disk.objects[0].object["data"], *data);
        let error =
            crate::manifest::render_dir(&app, &Renderers::default(), &ParseOptions::default())
                .expect_err("no key: nothing is built on disk either");
        assert!(error.to_string().contains("app.env"), "{error}");

        let error = render_tree(
            &files,
            "app",
            &Renderers::default(),
            &ParseOptions::default(),
        )
        .expect_err("no key: nothing is built");
        let message = error.to_string();
        assert!(message.contains("app/app.env"), "{message}");
        assert!(
            message.contains("FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4"),
            "{message}"
        );
    }
}
