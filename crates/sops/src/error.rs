//! What can go wrong while opening a SOPS file. Every message names the file (as the
//! caller named it: a path in the repository, never a temporary path) and, where it
//! helps, the tree path or the recipients; none carries a key or a decrypted value.

/// A SOPS file that tether could not open. None of these is retryable: each is decided
/// by the file's bytes and the keys tether holds, which a retry of the same revision
/// does not change (a new key in the Secret is a new pass, not a retry).
#[derive(Debug, thiserror::Error)]
pub enum SopsError {
    #[error("{file}: not a SOPS file (no `sops` metadata)")]
    NotEncrypted { file: String },
    #[error("{file}: cannot parse as {format}: {reason}")]
    Parse {
        file: String,
        format: &'static str,
        reason: String,
    },
    #[error("{file}: SOPS metadata field `{field}`: {reason}")]
    Metadata {
        file: String,
        field: String,
        reason: String,
    },
    #[error("{file}: {what} is not supported")]
    Unsupported { file: String, what: String },
    #[error(
        "{file}: encrypted for {}, and tether holds no key that opens it",
        recipients.join(", ")
    )]
    NoMatchingKey {
        file: String,
        recipients: Vec<String>,
    },
    #[error("{file}: the data key from {recipient} is {len} bytes, SOPS data keys are 32")]
    DataKeyLength {
        file: String,
        recipient: String,
        len: usize,
    },
    #[error(
        "{file}: the value at `{path}` does not decrypt ({reason}): tampered, or not from this file"
    )]
    Value {
        file: String,
        path: String,
        reason: &'static str,
    },
    #[error("{file}: MAC mismatch: the file was changed after SOPS encrypted it")]
    MacMismatch { file: String },
    #[error("{file}: no MAC in the SOPS metadata, so the file cannot be verified")]
    MacMissing { file: String },
    #[error("SOPS key from {source_name}: {reason}")]
    Key { source_name: String, reason: String },
}

impl SopsError {
    /// Never: see the type's documentation.
    pub fn is_retryable(&self) -> bool {
        false
    }
}
