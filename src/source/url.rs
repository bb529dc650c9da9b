//! One name per repository, whatever spelling of its URL a user or a webhook gives.
//!
//! `https://github.com/Org/Repo.git`, `git@github.com:org/repo`, and
//! `ssh://git@github.com/org/repo/` are one repository: they share one clone, and a
//! webhook that names any of them triggers sources configured with any other.

use std::fmt;
use std::path::Path;

/// Default ports, dropped from the key so that an explicit default port does not make
/// a second repository (from each protocol's IANA assignment).
const DEFAULT_PORTS: &[(&str, u16)] = &[("http", 80), ("https", 443), ("ssh", 22), ("git", 9418)];

/// A repository's normalized identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoKey {
    /// `host/path` for remote repositories (lowercase, no user, no port, no `.git`),
    /// `file:/abs/path` for local ones (case kept: local file systems are
    /// case-sensitive). Webhooks match on this.
    pub host_path: String,
    /// A non-default port, kept apart so two servers on one host do not share a clone
    /// but a webhook naming the https URL still matches an ssh source on port 2222.
    pub port: Option<u16>,
}

impl RepoKey {
    /// A name safe to use as a directory under the cache root, unique per key.
    pub fn dir_name(&self) -> String {
        use sha2::Digest;
        let full = self.to_string();
        let digest = sha2::Sha256::digest(full.as_bytes());
        let readable: String = full
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        // Long paths are cut; the hash keeps the name unique.
        let readable = readable
            .get(readable.len().saturating_sub(60)..)
            .unwrap_or("");
        format!("{readable}-{}", hex::encode(&digest[..8]))
    }
}

impl fmt::Display for RepoKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => match self.host_path.split_once('/') {
                Some((host, path)) => write!(f, "{host}:{port}/{path}"),
                None => write!(f, "{}:{port}", self.host_path),
            },
            None => f.write_str(&self.host_path),
        }
    }
}

/// The URL with any password in it replaced by `***`, for messages and logs. tether
/// reads credentials from the environment or files, but a URL pasted with a token in
/// it must still never be printed.
pub fn redact_url(raw: &str) -> String {
    match password_in(raw) {
        Some(pw) => raw.replace(pw, "***"),
        None => raw.to_string(),
    }
}

/// The password of `scheme://user:password@host/...`, if any.
pub(crate) fn password_in(raw: &str) -> Option<&str> {
    let (_, rest) = raw.split_once("://")?;
    let authority = rest.split('/').next()?;
    let (userinfo, _) = authority.rsplit_once('@')?;
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then_some(password)
}

/// Normalize a repository URL to its [`RepoKey`].
pub fn normalize_repo_url(raw: &str) -> RepoKey {
    let raw = raw.trim();
    if let Some(rest) = raw.strip_prefix("file://") {
        return local_key(rest);
    }
    if raw.contains("://") {
        if let Ok(url) = url::Url::parse(raw) {
            let host = url.host_str().unwrap_or("").to_ascii_lowercase();
            let scheme = url.scheme().to_ascii_lowercase();
            let port = url.port().filter(|p| {
                !DEFAULT_PORTS
                    .iter()
                    .any(|(s, d)| *s == scheme.as_str() && d == p)
            });
            return RepoKey {
                host_path: format!("{host}/{}", clean_path(url.path())),
                port,
            };
        }
        return RepoKey {
            host_path: raw.to_ascii_lowercase(),
            port: None,
        };
    }
    if let Some((host, path)) = scp_like(raw) {
        return RepoKey {
            host_path: format!("{}/{}", host.to_ascii_lowercase(), clean_path(path)),
            port: None,
        };
    }
    local_key(raw)
}

/// `[user@]host:path`, as git reads it: the part before the first colon has no slash.
fn scp_like(raw: &str) -> Option<(&str, &str)> {
    let (before, path) = raw.split_once(':')?;
    if before.is_empty() || before.contains('/') || path.starts_with("//") {
        return None;
    }
    let host = before.rsplit_once('@').map_or(before, |(_, h)| h);
    Some((host, path))
}

fn clean_path(path: &str) -> String {
    let path = path.trim_matches('/');
    let path = path.strip_prefix("~/").unwrap_or(path);
    let path = path.strip_suffix(".git").unwrap_or(path);
    path.trim_end_matches('/').to_ascii_lowercase()
}

fn local_key(path: &str) -> RepoKey {
    let p = Path::new(path);
    // A repository that exists is named by its canonical path so that `./repo` and
    // `/abs/repo` share a clone; one that does not is named as given (the sync reports it).
    let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let s = abs.to_string_lossy();
    let s = s.trim_end_matches('/');
    let s = s.strip_suffix("/.git").unwrap_or(s);
    RepoKey {
        host_path: format!("file:{s}"),
        port: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_of_one_repository_share_a_key() {
        let want = normalize_repo_url("https://github.com/octo-org/hello-world");
        for v in [
            "https://github.com/Octo-Org/Hello-World.git",
            "http://github.com/octo-org/hello-world/",
            "https://user:token@github.com:443/octo-org/hello-world.git",
            "git@github.com:octo-org/hello-world.git",
            "ssh://git@github.com/octo-org/hello-world.git",
            "ssh://git@GitHub.com:22/octo-org/hello-world",
            "git://github.com/octo-org/hello-world.git",
        ] {
            assert_eq!(normalize_repo_url(v), want, "{v}");
        }
    }

    #[test]
    fn different_repositories_differ() {
        let a = normalize_repo_url("https://github.com/octo-org/hello-world");
        assert_ne!(a, normalize_repo_url("https://github.com/octo-org/hello"));
        assert_ne!(
            a,
            normalize_repo_url("https://gitlab.com/octo-org/hello-world")
        );
    }

    #[test]
    fn a_custom_port_is_kept_but_host_path_still_matches() {
        let ssh = normalize_repo_url("ssh://git@git.example.com:2222/team/app.git");
        let https = normalize_repo_url("https://git.example.com/team/app");
        assert_eq!(ssh.port, Some(2222));
        assert_ne!(ssh, https);
        assert_eq!(ssh.host_path, https.host_path);
        assert_eq!(ssh.to_string(), "git.example.com:2222/team/app");
    }

    #[test]
    fn local_paths_and_file_urls_share_a_key() {
        let dir = std::env::temp_dir();
        let plain = normalize_repo_url(&dir.to_string_lossy());
        let url = normalize_repo_url(&format!("file://{}", dir.to_string_lossy()));
        assert_eq!(plain, url);
        assert!(plain.host_path.starts_with("file:/"));
    }

    #[test]
    fn passwords_in_urls_are_redacted() {
        assert_eq!(
            redact_url("https://user:tok3n@h.example/org/r.git"),
            "https://user:***@h.example/org/r.git"
        );
        assert_eq!(redact_url("https://user@h/r"), "https://user@h/r");
        assert_eq!(
            redact_url("git@github.com:org/r.git"),
            "git@github.com:org/r.git"
        );
    }

    #[test]
    fn dir_names_are_safe_and_distinct() {
        let a = normalize_repo_url("https://h/a/b").dir_name();
        let b = normalize_repo_url("https://h/a_b").dir_name();
        assert_ne!(a, b);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
    }
}
