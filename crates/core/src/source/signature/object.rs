//! A signed Git object split into what was signed and the signature, exactly as git
//! splits it before it asks gpg or ssh-keygen: a commit's `gpgsig` header (its
//! continuation lines, each with the leading space dropped) is taken out of the
//! object and the rest is the payload, byte for byte (`commit.c`'s
//! `parse_signed_commit`); a tag's signature is the text from the last line that
//! opens a signature block to the end, and the payload everything before it
//! (`gpg-interface.c`'s `parse_signed_buffer`).

/// Which kind of signature a block is, by its armor line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureFormat {
    /// `-----BEGIN PGP SIGNATURE-----`: OpenPGP (gpg).
    OpenPgp,
    /// `-----BEGIN SSH SIGNATURE-----`: an SSHSIG blob (`ssh-keygen -Y sign`).
    Ssh,
}

const PGP_BEGIN: &[u8] = b"-----BEGIN PGP SIGNATURE-----";
const SSH_BEGIN: &[u8] = b"-----BEGIN SSH SIGNATURE-----";

impl SignatureFormat {
    /// The format a block starting with `text` is in, if it opens a signature git
    /// knows (X.509 signatures are not verified here: they are not named a format).
    fn of(text: &[u8]) -> Option<SignatureFormat> {
        if text.starts_with(PGP_BEGIN) {
            Some(SignatureFormat::OpenPgp)
        } else if text.starts_with(SSH_BEGIN) {
            Some(SignatureFormat::Ssh)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SignatureFormat::OpenPgp => "OpenPGP",
            SignatureFormat::Ssh => "SSH",
        }
    }
}

/// A signed object's two parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedObject {
    /// The bytes the signature is over.
    pub payload: Vec<u8>,
    /// The armored signature.
    pub signature: Vec<u8>,
}

/// Why an object carries no signature tether can check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsigned {
    /// No signature at all.
    Missing,
    /// A signature in a format other than OpenPGP or SSH (X.509, `gpgsm`).
    OtherFormat,
}

/// A raw commit object (as `git cat-file commit` prints it) split into payload and
/// signature: the `gpgsig` header and its continuation lines come out, the rest stays.
pub fn split_commit(raw: &[u8]) -> Result<(SignedObject, SignatureFormat), Unsigned> {
    let mut payload = Vec::with_capacity(raw.len());
    let mut signature = Vec::new();
    let mut in_signature = false;
    let mut in_headers = true;
    for line in raw.split_inclusive(|b| *b == b'\n') {
        if in_headers {
            if line == b"\n" {
                in_headers = false;
            } else if let Some(rest) = line.strip_prefix(b"gpgsig ") {
                in_signature = true;
                signature.extend_from_slice(rest);
                continue;
            } else if in_signature && line.first() == Some(&b' ') {
                signature.extend_from_slice(&line[1..]);
                continue;
            } else {
                in_signature = false;
            }
        }
        payload.extend_from_slice(line);
    }
    if signature.is_empty() {
        return Err(Unsigned::Missing);
    }
    // The header's last line has no newline of its own once split off: git adds it.
    if signature.last() != Some(&b'\n') {
        signature.push(b'\n');
    }
    let format = SignatureFormat::of(&signature).ok_or(Unsigned::OtherFormat)?;
    Ok((SignedObject { payload, signature }, format))
}

/// A raw tag object split at the last line that opens a signature block.
pub fn split_tag(raw: &[u8]) -> Result<(SignedObject, SignatureFormat), Unsigned> {
    let mut at = None;
    let mut offset = 0;
    for line in raw.split_inclusive(|b| *b == b'\n') {
        if let Some(format) = SignatureFormat::of(line) {
            at = Some((offset, format));
        }
        offset += line.len();
    }
    let (at, format) = at.ok_or(Unsigned::Missing)?;
    Ok((
        SignedObject {
            payload: raw[..at].to_vec(),
            signature: raw[at..].to_vec(),
        },
        format,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNED: &[u8] = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\
author A <a@example.com> 1700000000 +0000\n\
committer A <a@example.com> 1700000000 +0000\n\
gpgsig -----BEGIN SSH SIGNATURE-----\n \
U1NIU0lH\n \n \
-----END SSH SIGNATURE-----\n\
\n\
subject\n\
\n\
gpgsig not-a-header in the message\n";

    #[test]
    fn a_commit_loses_its_gpgsig_header_and_keeps_everything_else_byte_for_byte() {
        let (signed, format) = split_commit(SIGNED).expect("signed");
        assert_eq!(format, SignatureFormat::Ssh);
        assert_eq!(
            signed.payload,
            b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\
author A <a@example.com> 1700000000 +0000\n\
committer A <a@example.com> 1700000000 +0000\n\
\n\
subject\n\
\n\
gpgsig not-a-header in the message\n"
        );
        // A continuation line that is one space is an empty line of the signature.
        assert_eq!(
            signed.signature,
            b"-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n\n-----END SSH SIGNATURE-----\n"
        );
    }

    #[test]
    fn an_unsigned_commit_or_an_x509_one_has_nothing_to_verify() {
        let unsigned = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nmessage\n";
        assert_eq!(split_commit(unsigned), Err(Unsigned::Missing));
        let x509 = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\
gpgsig -----BEGIN SIGNED MESSAGE-----\n MII=\n -----END SIGNED MESSAGE-----\n\nm\n";
        assert_eq!(split_commit(x509), Err(Unsigned::OtherFormat));
    }

    #[test]
    fn a_tag_is_split_at_its_last_signature_block() {
        let raw = b"object 4b825dc642cb6eb9a060e54bf8d69288fbee4904\ntype commit\ntag v1\n\
tagger A <a@example.com> 1700000000 +0000\n\nquoted:\n-----BEGIN PGP SIGNATURE-----\nnot this\n\
-----BEGIN PGP SIGNATURE-----\n\nwsBc\n-----END PGP SIGNATURE-----\n";
        let (signed, format) = split_tag(raw).expect("signed");
        assert_eq!(format, SignatureFormat::OpenPgp);
        assert!(signed.payload.ends_with(b"not this\n"));
        assert!(signed.signature.starts_with(PGP_BEGIN));
        assert_eq!(signed.payload.len() + signed.signature.len(), raw.len());
        assert_eq!(
            split_tag(b"object 0\ntype commit\n\nm\n"),
            Err(Unsigned::Missing)
        );
    }
}
