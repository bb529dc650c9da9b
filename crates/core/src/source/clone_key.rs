//! Which sources may share a clone: those with the same repository, reached by the same
//! scheme, with the same credentials. A clone fetched with one tenant's token must
//! never answer another tenant's source, so the key is a digest of all three, and the
//! clone's folder is named by a keyed hash of it: the name says nothing of the URL or
//! the credentials, and cannot be guessed from the URL by whoever lacks the cache's key.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use super::auth::{self, is_ssh_url};
use super::{Source, SourceError};

/// The file under the cache root holding the key of its folder names.
const KEY_FILE: &str = ".key";

/// Bytes of the key: SHA-256's block-size-independent strength (RFC 2104 recommends at
/// least the hash's output length).
const KEY_BYTES: usize = 32;

/// Hex digits of a folder name: 128 bits of the keyed hash, as unguessable as a UUID.
const NAME_HEX_DIGITS: usize = 32;

/// The identity of one clone: a keyed hash of the source's scheme, repository and
/// credentials (never the credentials themselves).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CloneKey(String);

impl CloneKey {
    /// The clone's folder name under the cache root.
    pub(crate) fn dir_name(&self) -> &str {
        &self.0
    }
}

/// The keyed hash that names clones, from the cache root's key file (made on first
/// use, readable by its owner only): stable across restarts, so clones survive them.
#[derive(Clone)]
pub(crate) struct Keyer {
    key: [u8; KEY_BYTES],
}

impl std::fmt::Debug for Keyer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keyer")
    }
}

impl Keyer {
    /// Read the key under `root`, making it if there is none. Two processes opening
    /// one cache at once agree: the key is written aside and linked into place, which
    /// fails for the second, who then reads the first's.
    pub(crate) fn open(root: &Path) -> Result<Self, SourceError> {
        let path = root.join(KEY_FILE);
        let io = |source| SourceError::CacheIo {
            path: path.display().to_string(),
            source,
        };
        if let Some(key) = read_key(&path).map_err(io)? {
            return Ok(Keyer { key });
        }
        let mut key = [0u8; KEY_BYTES];
        rand::rng().fill_bytes(&mut key);
        let aside = root.join(format!(".key-{}", uuid::Uuid::new_v4()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&aside)
            .and_then(|mut f| f.write_all(&key).and_then(|()| f.sync_all()));
        let linked = written.and_then(|()| std::fs::hard_link(&aside, &path));
        let _ = std::fs::remove_file(&aside);
        match linked {
            Ok(()) => Ok(Keyer { key }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let key = read_key(&path)
                    .map_err(io)?
                    .ok_or_else(|| io(std::io::Error::other("the key file is damaged")))?;
                Ok(Keyer { key })
            }
            Err(e) => Err(io(e)),
        }
    }

    /// The clone `source` (its auth already resolved) may use.
    pub(crate) fn key(&self, source: &Source) -> Result<CloneKey, SourceError> {
        let repo = source.repo_key().to_string();
        let scheme = scheme(&source.url);
        let parts: [&[u8]; 4] = [
            scheme.as_bytes(),
            repo.as_bytes(),
            userinfo(&source.url).as_bytes(),
            &auth::credential_material(&source.url, &source.auth)?,
        ];
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.key).map_err(|e| SourceError::Git {
                message: format!("clone key: {e}"),
            })?;
        for part in parts {
            // Length-prefixed, so no two different lists make the same bytes.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        let digest = hex::encode(mac.finalize().into_bytes());
        Ok(CloneKey(digest[..NAME_HEX_DIGITS].to_string()))
    }
}

/// The key file's key, None when there is no file yet. A file of the wrong size is
/// damaged: an error, not silently replaced (which would orphan every clone).
fn read_key(path: &Path) -> std::io::Result<Option<[u8; KEY_BYTES]>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let key = <[u8; KEY_BYTES]>::try_from(bytes.as_slice())
                .map_err(|_| std::io::Error::other("the key file is damaged"))?;
            Ok(Some(key))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Make the cache root readable by its owner only: clones of private repositories
/// live there.
pub(crate) fn restrict(root: &Path) -> std::io::Result<()> {
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))
}

/// The transport a URL uses: `http`, `https` and `git` of one repository are different
/// clones (a plain-text fetch must never feed a TLS one); `ssh://` and scp-like are one.
fn scheme(url: &str) -> String {
    if is_ssh_url(url) {
        return "ssh".into();
    }
    match url.split_once("://") {
        Some((scheme, _)) => scheme.to_ascii_lowercase(),
        None => "file".into(),
    }
}

/// The user (and password) written in the URL, which are credentials too.
fn userinfo(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = if url.contains("://") {
        authority
    } else {
        // scp-like `user@host:path`: the authority ends at the colon.
        authority.split(':').next().unwrap_or("")
    };
    authority.rsplit_once('@').map_or("", |(user, _)| user)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Auth, SecretRef};

    fn keyer() -> (tempfile::TempDir, Keyer) {
        let dir = tempfile::tempdir().expect("tempdir");
        let keyer = Keyer::open(dir.path()).expect("key");
        (dir, keyer)
    }

    fn token(value: &str) -> Auth {
        Auth::Token {
            token: SecretRef::Inline(value.into()),
            username: None,
        }
    }

    #[test]
    fn one_clone_per_scheme_and_credentials() {
        let (_d, k) = keyer();
        let key = |url: &str, auth: Auth| k.key(&Source::new(url, "main", "").with_auth(auth));
        let base = key("https://h.example/org/app.git", token("t1")).expect("key");
        // The same repository spelt otherwise, the same credentials: one clone.
        assert_eq!(
            key("https://H.example/org/app", token("t1")).expect("key"),
            base
        );
        for other in [
            key("http://h.example/org/app.git", token("t1")),
            key("git://h.example/org/app.git", token("t1")),
            key("https://h.example/org/app.git", token("t2")),
            key("https://h.example/org/app.git", Auth::None),
            key("https://u:pw@h.example/org/app.git", Auth::None),
        ] {
            assert_ne!(other.expect("key"), base);
        }
        assert_eq!(
            key("git@h.example:org/app.git", Auth::None).expect("key"),
            key("ssh://git@h.example/org/app.git", Auth::None).expect("key")
        );
    }

    #[test]
    fn names_are_unguessable_without_the_key_and_stable_with_it() {
        let (dir, k) = keyer();
        let source = Source::new("https://h.example/org/app.git", "main", "");
        let name = k.key(&source).expect("key");
        assert!(!name.dir_name().contains("h_example") && name.dir_name().len() == 32);
        let again = Keyer::open(dir.path()).expect("reopen");
        assert_eq!(
            again.key(&source).expect("key"),
            name,
            "stable across restarts"
        );
        let (_d2, other) = keyer();
        assert_ne!(
            other.key(&source).expect("key"),
            name,
            "another cache's key"
        );
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .expect("key file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn userinfo_is_read_from_every_url_form() {
        assert_eq!(userinfo("https://u:p@h/r"), "u:p");
        assert_eq!(userinfo("https://h/r@v1"), "");
        assert_eq!(userinfo("git@h:org/r"), "git");
        assert_eq!(userinfo("/tmp/r@x"), "");
    }
}
