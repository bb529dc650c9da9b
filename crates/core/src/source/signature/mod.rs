//! Who signed a commit or a tag, checked in Rust against the keys an app trusts:
//! OpenPGP public keys ([`pgp`]) and SSH allowed signers ([`ssh`]), over the payload
//! git signs ([`object`]). Pure: bytes of objects and keys in, a verdict out; the
//! source stage ([`super::verify`]) reads the objects from the clone and keeps the
//! verdicts.

mod object;
mod pgp;
mod ssh;

use std::fmt;

pub use object::{SignatureFormat, SignedObject, Unsigned, split_commit, split_tag};
pub use ssh::GIT_NAMESPACE;

/// The keys an app trusts, from files (the CLI, a file app) or a Secret's entries.
#[derive(Clone, Default)]
pub struct TrustedKeys {
    pgp: Vec<::pgp::composed::SignedPublicKey>,
    ssh: Vec<ssh::AllowedSigner>,
    /// A digest of every entry's bytes: verdicts are kept per commit and key set.
    digest: [u8; 32],
}

impl fmt::Debug for TrustedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrustedKeys")
            .field("pgp", &self.pgp.len())
            .field("ssh", &self.ssh.len())
            .finish()
    }
}

impl PartialEq for TrustedKeys {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

/// A key entry that holds no key tether can use: names the entry, never its bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("verification key {entry}: {reason}")]
pub struct KeyError {
    pub entry: String,
    pub reason: String,
}

impl TrustedKeys {
    /// The keys in named entries (file paths, or a Secret's keys): an entry holding
    /// `-----BEGIN PGP PUBLIC KEY BLOCK-----` is OpenPGP public keys, any other an
    /// allowed-signers file. An empty entry, or one that holds no key, is an error
    /// naming it; so is a set without any key.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<TrustedKeys, KeyError> {
        use sha2::Digest;
        let mut keys = TrustedKeys::default();
        let mut digest = sha2::Sha256::new();
        let mut names = Vec::new();
        for (name, bytes) in entries {
            names.push(name.to_string());
            digest.update((name.len() as u64).to_be_bytes());
            digest.update(name.as_bytes());
            digest.update((bytes.len() as u64).to_be_bytes());
            digest.update(bytes);
            let error = |reason: String| KeyError {
                entry: name.to_string(),
                reason,
            };
            let text = std::str::from_utf8(bytes).map_err(|_| error("is not text".into()))?;
            if text.contains("-----BEGIN PGP") {
                keys.pgp
                    .extend(pgp::parse_public_keys(text).map_err(error)?);
            } else {
                let signers = ssh::parse_allowed_signers(text).map_err(error)?;
                if signers.is_empty() {
                    return Err(error(
                        "holds neither an armored OpenPGP public key nor an allowed signer".into(),
                    ));
                }
                keys.ssh.extend(signers);
            }
        }
        if names.is_empty() {
            return Err(KeyError {
                entry: "(none)".into(),
                reason: "no verification keys are given".into(),
            });
        }
        keys.digest = digest.finalize().into();
        Ok(keys)
    }

    /// Identifies this key set: a verdict kept for a commit holds for this set only.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }
}

/// Why a signature is not accepted. Messages name the signer by key id, fingerprint
/// or allowed-signers principal, never by key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyFailure {
    #[error("is not signed")]
    Unsigned,
    #[error("is signed in a format tether does not verify (X.509)")]
    OtherFormat,
    #[error("is signed by {signer}, which no trusted key is")]
    Untrusted { signer: String },
    #[error("has a signature by {signer} that is not valid: {reason}")]
    Invalid { signer: String, reason: String },
    #[error("has {0}")]
    Malformed(String),
}

/// What a good signature says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    pub format: SignatureFormat,
    /// Who: a key's user id and fingerprint, or allowed-signers principals and the
    /// key's SHA256 fingerprint.
    pub identity: String,
}

impl fmt::Display for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} key {}", self.format.as_str(), self.identity)
    }
}

/// Which kind of Git object a raw object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Commit,
    Tag,
}

/// Checks the signature of a raw commit or tag object against `keys`.
pub fn verify_object(
    kind: ObjectKind,
    raw: &[u8],
    keys: &TrustedKeys,
) -> Result<Signer, VerifyFailure> {
    let split = match kind {
        ObjectKind::Commit => split_commit(raw),
        ObjectKind::Tag => split_tag(raw),
    };
    let (signed, format) = split.map_err(|unsigned| match unsigned {
        Unsigned::Missing => VerifyFailure::Unsigned,
        Unsigned::OtherFormat => VerifyFailure::OtherFormat,
    })?;
    let identity = match format {
        SignatureFormat::OpenPgp => pgp::verify(&signed.signature, &signed.payload, &keys.pgp)?,
        SignatureFormat::Ssh => ssh::verify(&signed.signature, &signed.payload, &keys.ssh)?,
    };
    Ok(Signer { format, identity })
}

#[cfg(test)]
mod tests;
