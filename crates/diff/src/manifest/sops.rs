//! SOPS-encrypted manifests (issue #27): a YAML or JSON file with a `sops` metadata
//! block is decrypted before it is parsed, so the objects the diff and the apply see
//! hold the plaintext, in memory only. With no key that opens it (or no keys at all)
//! the file is an error naming it and its recipients, and none of its objects is
//! applied: ciphertext never reaches the cluster.

use std::sync::Arc;

use tether_sops::{Format, Keys};

use super::Input;
use super::error::{Location, ManifestError};

/// The bytes every SOPS value starts with: a cheap test before the full one, which
/// parses the file.
const CIPHERTEXT_MARK: &[u8] = b"ENC[AES256_GCM,";

/// An app's SOPS keys, shared by its passes. Two are equal only when they are the same
/// keys (the same `Arc`); `Debug` shows no key material.
#[derive(Clone, Default)]
pub struct SopsKeys(Option<Arc<Keys>>);

impl SopsKeys {
    pub fn new(keys: Keys) -> Self {
        SopsKeys(Some(Arc::new(keys)))
    }

    pub fn get(&self) -> Option<&Keys> {
        self.0.as_deref()
    }
}

impl PartialEq for SopsKeys {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
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
            None => f.write_str("no SOPS keys"),
        }
    }
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
    if input.rendered
        || !input
            .bytes
            .windows(CIPHERTEXT_MARK.len())
            .any(|w| w == CIPHERTEXT_MARK)
        || !tether_sops::is_encrypted(format, &input.bytes)
    {
        return Ok(None);
    }
    let none = Keys::new();
    tether_sops::decrypt(&input.path, format, &input.bytes, keys.unwrap_or(&none))
        .map(|plain| Some(plain.to_bytes().to_vec()))
        .map_err(|source| ManifestError::Sops {
            at: Location::file(&input.path),
            source: Box::new(source),
        })
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
}
