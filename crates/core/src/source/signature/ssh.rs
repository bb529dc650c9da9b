//! SSH signatures as git makes them (`ssh-keygen -Y sign -n git`), checked against an
//! allowed-signers file (git's `gpg.ssh.allowedSignersFile`, ssh-keygen's
//! `ALLOWED SIGNERS` format), in Rust: the SSHSIG blob is parsed as OpenSSH's
//! `PROTOCOL.sshsig` defines it and its signature checked over the signed-data
//! structure with ed25519, RSA (`rsa-sha2-256`/`-512`) or ECDSA (P-256, P-384).

use base64::Engine;
use sha2::{Digest, Sha256, Sha512};

use super::VerifyFailure;

/// The namespace git signs in (`ssh-keygen -Y sign -n git`): a signature made for
/// another purpose (`file`, `email`) is not a commit signature.
pub const GIT_NAMESPACE: &str = "git";

const MAGIC: &[u8] = b"SSHSIG";
const BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
const END: &str = "-----END SSH SIGNATURE-----";

/// One line of an allowed-signers file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSigner {
    /// The principals (e-mail addresses) the line names, as written.
    pub principals: String,
    /// The namespaces the key may sign in (`namespaces="git,file"`); empty is any.
    namespaces: Vec<String>,
    /// The public key's wire blob (what an SSHSIG names its key by).
    key: Vec<u8>,
    /// `SHA256:` and the key's fingerprint, as ssh-keygen prints it.
    pub fingerprint: String,
}

/// Parses an allowed-signers file: `principals [options] keytype base64-key [comment]`
/// per line, `#` comments and blank lines skipped. Options other than `namespaces` are
/// refused by name: `cert-authority` needs certificates and `valid-after`/`valid-before`
/// a trusted signing time, which tether does not check, and a key must not be trusted
/// more widely than its line says.
pub fn parse_allowed_signers(text: &str) -> Result<Vec<AllowedSigner>, String> {
    let mut signers = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let signer = parse_line(line).map_err(|e| format!("line {}: {e}", index + 1))?;
        signers.push(signer);
    }
    Ok(signers)
}

fn parse_line(line: &str) -> Result<AllowedSigner, String> {
    let mut tokens = Tokens(line);
    let principals = tokens.next().ok_or("no principals")?;
    let mut next = tokens.next().ok_or("no key")?;
    let mut namespaces = Vec::new();
    if !is_key_type(&next) {
        for option in split_options(&next) {
            let (name, value) = option.split_once('=').unwrap_or((option.as_str(), ""));
            match name.to_ascii_lowercase().as_str() {
                "namespaces" => {
                    namespaces = value
                        .trim_matches('"')
                        .split(',')
                        .map(|n| n.trim().to_string())
                        .collect();
                }
                other => return Err(format!("option {other:?} is not supported")),
            }
        }
        next = tokens.next().ok_or("no key")?;
    }
    if !is_key_type(&next) {
        return Err(format!("{next:?} is not an SSH key type"));
    }
    let blob = tokens.next().ok_or("no key after its type")?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(blob.as_bytes())
        .map_err(|_| "the key is not base64".to_string())?;
    let mut reader = Reader(&key);
    let algorithm = reader.string().map_err(|_| "the key is truncated")?;
    if algorithm != next.as_bytes() {
        return Err(format!("the key is not of its named type {next}"));
    }
    Ok(AllowedSigner {
        principals: principals.trim_matches('"').to_string(),
        namespaces,
        fingerprint: fingerprint(&key),
        key,
    })
}

fn is_key_type(token: &str) -> bool {
    matches!(
        token,
        "ssh-ed25519" | "ssh-rsa" | "ecdsa-sha2-nistp256" | "ecdsa-sha2-nistp384"
    ) || token.starts_with("sk-")
        || token.ends_with("-cert-v01@openssh.com")
        || token == "ecdsa-sha2-nistp521"
}

/// Whitespace-separated tokens, where a double-quoted stretch is part of its token.
struct Tokens<'a>(&'a str);

impl Iterator for Tokens<'_> {
    type Item = String;
    fn next(&mut self) -> Option<String> {
        let text = self.0.trim_start();
        if text.is_empty() {
            return None;
        }
        let mut quoted = false;
        let end = text
            .char_indices()
            .find(|&(_, c)| {
                if c == '"' {
                    quoted = !quoted;
                }
                c.is_whitespace() && !quoted
            })
            .map_or(text.len(), |(i, _)| i);
        self.0 = &text[end..];
        Some(text[..end].to_string())
    }
}

/// Comma-separated options, where a quoted value may hold commas.
fn split_options(text: &str) -> Vec<String> {
    let mut options = vec![String::new()];
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                options.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = options.last_mut() {
            last.push(c);
        }
    }
    options
}

/// `SHA256:` and the unpadded base64 of the key blob's digest, as ssh-keygen shows it.
fn fingerprint(key: &[u8]) -> String {
    let digest = Sha256::digest(key);
    format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
}

/// A parsed SSHSIG blob.
struct SshSig<'a> {
    key: &'a [u8],
    namespace: &'a [u8],
    reserved: &'a [u8],
    hash: &'a [u8],
    signature: &'a [u8],
}

/// The signer of an armored SSH signature over `payload`, if one of `signers` made it
/// in git's namespace.
pub fn verify(
    armored: &[u8],
    payload: &[u8],
    signers: &[AllowedSigner],
) -> Result<String, VerifyFailure> {
    let blob = dearmor(armored).ok_or_else(|| malformed("not an armored SSH signature"))?;
    let sig = parse_sshsig(&blob).ok_or_else(|| malformed("a malformed SSHSIG blob"))?;
    let key_fingerprint = fingerprint(sig.key);
    if sig.namespace != GIT_NAMESPACE.as_bytes() {
        return Err(VerifyFailure::Invalid {
            signer: key_fingerprint,
            reason: format!(
                "signed in namespace {:?}, not {GIT_NAMESPACE:?}",
                String::from_utf8_lossy(sig.namespace)
            ),
        });
    }
    let Some(signer) = signers.iter().find(|s| {
        s.key == sig.key
            && (s.namespaces.is_empty() || s.namespaces.iter().any(|n| n == GIT_NAMESPACE))
    }) else {
        return Err(VerifyFailure::Untrusted {
            signer: key_fingerprint,
        });
    };
    let digest = match sig.hash {
        b"sha512" => Sha512::digest(payload).to_vec(),
        b"sha256" => Sha256::digest(payload).to_vec(),
        other => {
            return Err(VerifyFailure::Invalid {
                signer: key_fingerprint,
                reason: format!(
                    "hash {:?} is not SHA-256 or SHA-512",
                    String::from_utf8_lossy(other)
                ),
            });
        }
    };
    let mut signed = Vec::with_capacity(64 + digest.len());
    signed.extend_from_slice(MAGIC);
    for field in [sig.namespace, sig.reserved, sig.hash, &digest] {
        put_string(&mut signed, field);
    }
    check_signature(sig.key, sig.signature, &signed).map_err(|reason| VerifyFailure::Invalid {
        signer: key_fingerprint.clone(),
        reason,
    })?;
    Ok(format!("{} ({})", signer.principals, signer.fingerprint))
}

fn malformed(what: &str) -> VerifyFailure {
    VerifyFailure::Malformed(what.to_string())
}

fn dearmor(armored: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(armored).ok()?;
    let body = text.trim().strip_prefix(BEGIN)?.strip_suffix(END)?;
    let joined: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(joined)
        .ok()
}

fn parse_sshsig(blob: &[u8]) -> Option<SshSig<'_>> {
    let rest = blob.strip_prefix(MAGIC)?;
    let mut reader = Reader(rest);
    if reader.u32().ok()? != 1 {
        return None;
    }
    let sig = SshSig {
        key: reader.string().ok()?,
        namespace: reader.string().ok()?,
        reserved: reader.string().ok()?,
        hash: reader.string().ok()?,
        signature: reader.string().ok()?,
    };
    reader.0.is_empty().then_some(sig)
}

/// Checks `signature` (an SSH signature blob) by `key` (an SSH public key blob) over
/// `message`.
fn check_signature(key: &[u8], signature: &[u8], message: &[u8]) -> Result<(), String> {
    let truncated = |_| "truncated".to_string();
    let mut key = Reader(key);
    let key_type = key.string().map_err(truncated)?;
    let mut sig = Reader(signature);
    let sig_type = sig.string().map_err(truncated)?;
    let sig_bytes = sig.string().map_err(truncated)?;
    let bad = |e: &dyn std::fmt::Display| format!("the signature does not verify ({e})");
    match (key_type, sig_type) {
        (b"ssh-ed25519", b"ssh-ed25519") => {
            let public: [u8; 32] = key
                .string()
                .map_err(truncated)?
                .try_into()
                .map_err(|_| "an ed25519 key is 32 bytes")?;
            let public = ed25519_dalek::VerifyingKey::from_bytes(&public).map_err(|e| bad(&e))?;
            let sig = ed25519_dalek::Signature::from_slice(sig_bytes).map_err(|e| bad(&e))?;
            public.verify_strict(message, &sig).map_err(|e| bad(&e))
        }
        (b"ssh-rsa", b"rsa-sha2-256" | b"rsa-sha2-512") => {
            let e = key.string().map_err(truncated)?;
            let n = key.string().map_err(truncated)?;
            let public = rsa::RsaPublicKey::new(
                rsa::BigUint::from_bytes_be(n),
                rsa::BigUint::from_bytes_be(e),
            )
            .map_err(|e| bad(&e))?;
            let (scheme, hashed) = if sig_type == b"rsa-sha2-256" {
                (
                    rsa::Pkcs1v15Sign::new::<Sha256>(),
                    Sha256::digest(message).to_vec(),
                )
            } else {
                (
                    rsa::Pkcs1v15Sign::new::<Sha512>(),
                    Sha512::digest(message).to_vec(),
                )
            };
            public
                .verify(scheme, &hashed, sig_bytes)
                .map_err(|e| bad(&e))
        }
        (b"ecdsa-sha2-nistp256", b"ecdsa-sha2-nistp256") => {
            use p256::ecdsa::signature::Verifier;
            let _curve = key.string().map_err(truncated)?;
            let point = key.string().map_err(truncated)?;
            let public = p256::ecdsa::VerifyingKey::from_sec1_bytes(point).map_err(|e| bad(&e))?;
            let (r, s) = ecdsa_scalars::<32>(sig_bytes).ok_or("a malformed ECDSA signature")?;
            let (r, s) = (
                p256::FieldBytes::clone_from_slice(&r),
                p256::FieldBytes::clone_from_slice(&s),
            );
            let sig = p256::ecdsa::Signature::from_scalars(r, s).map_err(|e| bad(&e))?;
            public.verify(message, &sig).map_err(|e| bad(&e))
        }
        (b"ecdsa-sha2-nistp384", b"ecdsa-sha2-nistp384") => {
            use p384::ecdsa::signature::Verifier;
            let _curve = key.string().map_err(truncated)?;
            let point = key.string().map_err(truncated)?;
            let public = p384::ecdsa::VerifyingKey::from_sec1_bytes(point).map_err(|e| bad(&e))?;
            let (r, s) = ecdsa_scalars::<48>(sig_bytes).ok_or("a malformed ECDSA signature")?;
            let (r, s) = (
                p384::FieldBytes::clone_from_slice(&r),
                p384::FieldBytes::clone_from_slice(&s),
            );
            let sig = p384::ecdsa::Signature::from_scalars(r, s).map_err(|e| bad(&e))?;
            public.verify(message, &sig).map_err(|e| bad(&e))
        }
        (key_type, sig_type) => Err(format!(
            "a {} signature by a {} key is not supported",
            String::from_utf8_lossy(sig_type),
            String::from_utf8_lossy(key_type)
        )),
    }
}

/// An SSH ECDSA signature's `mpint r, mpint s`, each as a big-endian scalar of `size`
/// bytes (an mpint may carry a leading zero, or be shorter).
fn ecdsa_scalars<const N: usize>(blob: &[u8]) -> Option<([u8; N], [u8; N])> {
    let mut reader = Reader(blob);
    let scalar = |mpint: &[u8]| -> Option<[u8; N]> {
        let trimmed = match mpint.iter().position(|b| *b != 0) {
            Some(first) => &mpint[first..],
            None => &[],
        };
        if trimmed.len() > N {
            return None;
        }
        let mut out = [0u8; N];
        out[N - trimmed.len()..].copy_from_slice(trimmed);
        Some(out)
    };
    let r = scalar(reader.string().ok()?)?;
    let s = scalar(reader.string().ok()?)?;
    Some((r, s))
}

/// SSH wire format: `uint32` lengths before strings.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Result<u32, ()> {
        let (head, rest) = self.0.split_first_chunk::<4>().ok_or(())?;
        self.0 = rest;
        Ok(u32::from_be_bytes(*head))
    }

    fn string(&mut self) -> Result<&'a [u8], ()> {
        let len = self.u32()? as usize;
        if self.0.len() < len {
            return Err(());
        }
        let (value, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(value)
    }
}

fn put_string(out: &mut Vec<u8>, value: &[u8]) {
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(value);
}
