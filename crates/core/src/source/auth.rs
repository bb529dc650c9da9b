//! Credentials for fetching: read from the environment or a file at fetch time (so a
//! rotated token is picked up without a restart), never stored in configuration and
//! never logged.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine;
use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};

use super::SourceError;

/// The username sent with a bare token over HTTP. GitHub, GitLab and Gitea accept any
/// username with a personal access token; GitHub documents `x-access-token` for app
/// installation tokens, which makes it the one that works everywhere.
const DEFAULT_TOKEN_USERNAME: &str = "x-access-token";

/// The SSH user when the URL names none (every hosted forge uses `git`).
const DEFAULT_SSH_USERNAME: &str = "git";

/// Where a secret value is read from.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum SecretRef {
    /// An environment variable's name.
    Env(String),
    /// A file's path (e.g. a mounted Kubernetes Secret); one trailing newline is dropped.
    File(PathBuf),
    /// The value itself, read from a Kubernetes Secret just before one fetch
    /// ([`Auth::Secret`]); never configured, never shown.
    Inline(String),
}

impl fmt::Debug for SecretRef {
    // Names where the secret lives, never what it is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretRef::Env(name) => write!(f, "env:{name}"),
            SecretRef::File(path) => write!(f, "file:{}", path.display()),
            SecretRef::Inline(_) => f.write_str("inline"),
        }
    }
}

/// A secret named both by an environment variable and by a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("name the secret by an environment variable or a file, not both")]
pub struct BothEnvAndFile;

impl SecretRef {
    /// The secret a configuration names by `…Env` or `…File`: none, one, or (both
    /// set) an error.
    pub fn env_or_file(
        env: &Option<String>,
        file: &Option<std::path::PathBuf>,
    ) -> Result<Option<SecretRef>, BothEnvAndFile> {
        match (env, file) {
            (None, None) => Ok(None),
            (Some(name), None) => Ok(Some(SecretRef::Env(name.clone()))),
            (None, Some(path)) => Ok(Some(SecretRef::File(path.clone()))),
            (Some(_), Some(_)) => Err(BothEnvAndFile),
        }
    }

    /// Read the secret now. The error names the variable or file, not the value.
    pub fn read(&self) -> Result<String, String> {
        match self {
            SecretRef::Env(name) => {
                std::env::var(name).map_err(|_| format!("environment variable {name} is not set"))
            }
            SecretRef::File(path) => std::fs::read_to_string(path)
                .map(|s| s.strip_suffix('\n').unwrap_or(&s).to_string())
                .map_err(|e| format!("cannot read {}: {e}", path.display())),
            SecretRef::Inline(value) => Ok(value.clone()),
        }
    }
}

/// How to authenticate to a remote.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Auth {
    /// Anonymous (public repositories, local paths, `git://`).
    #[default]
    None,
    /// HTTP(S) with a token as the password.
    Token {
        token: SecretRef,
        /// Defaults to `x-access-token`.
        username: Option<String>,
    },
    /// HTTP(S) basic authentication.
    Basic {
        username: String,
        password: SecretRef,
    },
    /// SSH with a private key file, checking the server against a known_hosts file.
    SshKey {
        private_key: PathBuf,
        known_hosts: PathBuf,
        passphrase: Option<SecretRef>,
        /// Defaults to the URL's user, else `git`.
        username: Option<String>,
    },
    /// SSH with a private key and known_hosts held in memory: what a Secret's
    /// `identity` and `known_hosts` keys resolve to.
    SshInline {
        identity: SecretRef,
        known_hosts: String,
        passphrase: Option<SecretRef>,
    },
    /// A Kubernetes Secret holding the credentials under Flux's keys, read by the
    /// cache before every fetch (so a rotated Secret counts at the next poll) and
    /// resolved into one of the variants above.
    Secret(CredentialsSecret),
}

/// A Secret holding Git credentials (`source.credentials.secretRef`), with Flux's
/// `GitRepository` keys: `username` + `password` (HTTP basic), `bearerToken` or
/// `password` alone (a token), `identity` + `known_hosts` (SSH; `password` is then
/// the key's passphrase).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CredentialsSecret {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for CredentialsSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret {}/{}", self.namespace, self.name)
    }
}

impl CredentialsSecret {
    /// The credentials the Secret's `data` (key → decoded bytes) holds. Errors name
    /// the Secret and its keys, never a value.
    pub fn auth(&self, data: &BTreeMap<String, Vec<u8>>) -> Result<Auth, String> {
        let text = |key: &str| -> Result<Option<String>, String> {
            match data.get(key) {
                None => Ok(None),
                Some(bytes) => String::from_utf8(bytes.clone())
                    .map(Some)
                    .map_err(|_| format!("{self}: key {key} is not UTF-8 text")),
            }
        };
        let inline = |v: String| SecretRef::Inline(v);
        let password = text("password")?;
        if let Some(identity) = text("identity")? {
            let known_hosts = text("known_hosts")?.ok_or_else(|| {
                format!("{self} has key identity but no key known_hosts (the server's host key is always checked)")
            })?;
            return Ok(Auth::SshInline {
                identity: inline(identity),
                known_hosts,
                passphrase: password.map(inline),
            });
        }
        if let Some(username) = text("username")? {
            let password =
                password.ok_or_else(|| format!("{self} has key username but no key password"))?;
            return Ok(Auth::Basic {
                username,
                password: inline(password),
            });
        }
        match text("bearerToken")?.or(password) {
            Some(token) => Ok(Auth::Token {
                token: inline(token),
                username: None,
            }),
            None => Err(format!(
                "{self} has none of the keys username and password, bearerToken, password, \
                 identity and known_hosts"
            )),
        }
    }
}

/// What the callbacks saw, so a failed fetch can be told apart (auth vs host key vs
/// network) without parsing libgit2's messages.
#[derive(Debug, Default)]
pub(crate) struct AuthOutcome {
    attempts: u32,
    pub(crate) failure: Option<SourceError>,
}

pub fn is_ssh_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("ssh://") || lower.starts_with("git+ssh://") {
        return true;
    }
    if url.contains("://") {
        return false;
    }
    // scp-like `user@host:path`; a local path has a slash before any colon.
    match url.split_once(':') {
        Some((before, rest)) => !before.is_empty() && !before.contains('/') && !rest.is_empty(),
        None => false,
    }
}

/// Checks that need no network: the key files exist and the auth suits the protocol.
pub(crate) fn preflight(url: &str, auth: &Auth) -> Result<(), SourceError> {
    let cred_err = |message: String| SourceError::Credentials {
        url: url.to_string(),
        message,
    };
    if is_ssh_url(url) {
        match auth {
            Auth::SshKey {
                private_key,
                known_hosts,
                ..
            } => {
                if !private_key.is_file() {
                    return Err(cred_err(format!(
                        "SSH private key {} does not exist",
                        private_key.display()
                    )));
                }
                if !known_hosts.is_file() {
                    return Err(cred_err(format!(
                        "known_hosts file {} does not exist",
                        known_hosts.display()
                    )));
                }
            }
            Auth::SshInline { .. } => {}
            _ => {
                return Err(cred_err(
                    "an ssh:// source needs a private key file and a known_hosts file".into(),
                ));
            }
        }
    }
    Ok(())
}

/// Remote callbacks answering libgit2's credential and host key questions for `auth`.
/// Each credential is offered once: libgit2 asks again after a refusal, and answering
/// again would loop forever.
pub(crate) fn callbacks<'a>(
    url: &'a str,
    auth: &'a Auth,
    outcome: &'a RefCell<AuthOutcome>,
) -> RemoteCallbacks<'a> {
    let mut cb = RemoteCallbacks::new();
    cb.credentials(move |asked, username_from_url, allowed| {
        let mut out = outcome.borrow_mut();
        credential(url, auth, &mut out, asked, username_from_url, allowed)
    });
    let known_hosts = match auth {
        Auth::SshKey { known_hosts, .. } => Some(KnownHosts::File(known_hosts)),
        Auth::SshInline { known_hosts, .. } => Some(KnownHosts::Text(known_hosts)),
        _ => None,
    };
    if let Some(known_hosts) = known_hosts {
        let port = ssh_port(url);
        cb.certificate_check(move |cert, host| {
            let Some(key) = cert.as_hostkey().and_then(|h| h.hostkey()) else {
                // Not an SSH host key (an X.509 certificate): let libgit2's own
                // verification decide.
                return Ok(CertificateCheckStatus::CertificatePassthrough);
            };
            let checked = match known_hosts {
                KnownHosts::File(path) => check_known_host(path, host, port, key),
                KnownHosts::Text(text) => {
                    check_known_host_text(text, "known_hosts", host, port, key)
                }
            };
            match checked {
                Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
                Err(message) => {
                    outcome.borrow_mut().failure = Some(SourceError::HostKeyUnknown {
                        host: host.to_string(),
                        message: message.clone(),
                    });
                    Err(git2::Error::from_str(&message))
                }
            }
        });
    }
    cb
}

/// The answer to one of libgit2's credential questions for `url` (`asked`: the URL
/// it is talking to), noting a refusal in `out`.
fn credential(
    url: &str,
    auth: &Auth,
    out: &mut AuthOutcome,
    asked: &str,
    username_from_url: Option<&str>,
    allowed: CredentialType,
) -> Result<Cred, git2::Error> {
    out.attempts += 1;
    // libgit2 asks for the URL it is talking to, which a redirect may have moved
    // to another server: credentials go only where they belong.
    if !same_origin(url, asked) {
        let asked = super::redact(asked);
        let message = format!("credentials withheld from {asked}");
        out.failure = Some(SourceError::CredentialsWithheld {
            url: url.to_string(),
            asked,
        });
        return Err(git2::Error::from_str(&message));
    }
    let refuse = |out: &mut AuthOutcome, message: String| {
        out.failure = Some(SourceError::AuthRefused {
            url: url.to_string(),
            message: message.clone(),
        });
        git2::Error::from_str(&message)
    };
    if out.attempts > 1 {
        return Err(refuse(out, "the server refused the credentials".into()));
    }
    match auth {
        // libgit2 offers credentials pasted into the URL before asking us.
        Auth::None if super::url::has_password(url) => Err(refuse(
            out,
            "the server refused the credentials in the URL".into(),
        )),
        Auth::None => Err(refuse(
            out,
            "the server requires credentials and none are configured".into(),
        )),
        Auth::Token { token, username }
            if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) =>
        {
            let secret = read_secret(url, token, out)?;
            let user = username.as_deref().unwrap_or(DEFAULT_TOKEN_USERNAME);
            Cred::userpass_plaintext(user, &secret)
        }
        Auth::Basic { username, password }
            if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) =>
        {
            let secret = read_secret(url, password, out)?;
            Cred::userpass_plaintext(username, &secret)
        }
        Auth::SshKey {
            private_key,
            passphrase,
            username,
            ..
        } => {
            let user = username
                .as_deref()
                .or(username_from_url)
                .unwrap_or(DEFAULT_SSH_USERNAME);
            if allowed.contains(CredentialType::USERNAME) {
                return Cred::username(user);
            }
            let pass = match passphrase {
                Some(p) => Some(read_secret(url, p, out)?),
                None => None,
            };
            Cred::ssh_key(user, None, private_key, pass.as_deref())
        }
        Auth::SshInline {
            identity,
            passphrase,
            ..
        } => {
            let user = username_from_url.unwrap_or(DEFAULT_SSH_USERNAME);
            if allowed.contains(CredentialType::USERNAME) {
                return Cred::username(user);
            }
            let key = read_secret(url, identity, out)?;
            let pass = match passphrase {
                Some(p) => Some(read_secret(url, p, out)?),
                None => None,
            };
            Cred::ssh_key_from_memory(user, None, &key, pass.as_deref())
        }
        _ => Err(refuse(
            out,
            format!("the configured credentials do not fit what the server asks ({allowed:?})"),
        )),
    }
}

/// The scheme, host and port a URL's credentials belong to: `ssh` for `ssh://` and
/// scp-like URLs, default ports filled in, host lowercase. None for what is no
/// network URL (a local path), which is never given credentials.
fn origin(url: &str) -> Option<(String, String, u16)> {
    if url.contains("://") {
        let parsed = url::Url::parse(url).ok()?;
        let scheme = match parsed.scheme().to_ascii_lowercase().as_str() {
            "git+ssh" | "ssh+git" => "ssh".to_string(),
            other => other.to_string(),
        };
        let host = parsed.host_str()?.to_ascii_lowercase();
        let port = parsed.port_or_known_default().or(match scheme.as_str() {
            "ssh" => Some(22),
            "git" => Some(9418),
            _ => None,
        })?;
        return Some((scheme, host, port));
    }
    if !is_ssh_url(url) {
        return None;
    }
    let (before, _) = url.split_once(':')?;
    let host = before.rsplit_once('@').map_or(before, |(_, h)| h);
    Some(("ssh".to_string(), host.to_ascii_lowercase(), 22))
}

/// Whether `asked` (the URL libgit2 wants credentials for) is on the same scheme, host
/// and port as `configured` (the source's URL). Anything unreadable is not.
pub(crate) fn same_origin(configured: &str, asked: &str) -> bool {
    match (origin(configured), origin(asked)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The credentials `auth` stands for, read now, as bytes to digest: two sources share a
/// clone only when these are equal. Never shown, never stored: the cache keeps only a
/// keyed hash of them.
pub(crate) fn credential_material(url: &str, auth: &Auth) -> Result<Vec<u8>, SourceError> {
    let cred_err = |message: String| SourceError::Credentials {
        url: url.to_string(),
        message,
    };
    let read = |secret: &SecretRef| secret.read().map_err(cred_err);
    let read_file = |path: &Path| {
        std::fs::read(path).map_err(|e| cred_err(format!("cannot read {}: {e}", path.display())))
    };
    // An absent secret (a key without a passphrase) reads as empty.
    let read_optional = |secret: &Option<SecretRef>| {
        Ok::<_, SourceError>(
            secret
                .as_ref()
                .map(read)
                .transpose()?
                .unwrap_or_default()
                .into_bytes(),
        )
    };
    let parts: Vec<Vec<u8>> = match auth {
        Auth::None => vec![b"none".to_vec()],
        Auth::Token { token, username } => vec![
            b"token".to_vec(),
            username.clone().unwrap_or_default().into_bytes(),
            read(token)?.into_bytes(),
        ],
        Auth::Basic { username, password } => vec![
            b"basic".to_vec(),
            username.clone().into_bytes(),
            read(password)?.into_bytes(),
        ],
        Auth::SshKey {
            private_key,
            known_hosts,
            passphrase,
            username,
        } => vec![
            b"ssh-key".to_vec(),
            username.clone().unwrap_or_default().into_bytes(),
            read_file(private_key)?,
            read_file(known_hosts)?,
            read_optional(passphrase)?,
        ],
        Auth::SshInline {
            identity,
            known_hosts,
            passphrase,
        } => vec![
            b"ssh-inline".to_vec(),
            read(identity)?.into_bytes(),
            known_hosts.clone().into_bytes(),
            read_optional(passphrase)?,
        ],
        // Resolved into one of the above before any fetch; never keyed unresolved.
        Auth::Secret(secret) => vec![b"secret".to_vec(), secret.to_string().into_bytes()],
    };
    // Length-prefixed, so no two different lists make the same bytes.
    let mut material = Vec::new();
    for part in parts {
        material.extend_from_slice(&(part.len() as u64).to_be_bytes());
        material.extend_from_slice(&part);
    }
    Ok(material)
}

/// Where the trusted host keys are.
enum KnownHosts<'a> {
    File(&'a Path),
    Text(&'a str),
}

fn read_secret(
    url: &str,
    secret: &SecretRef,
    out: &mut AuthOutcome,
) -> Result<String, git2::Error> {
    secret.read().map_err(|message| {
        out.failure = Some(SourceError::Credentials {
            url: url.to_string(),
            message: message.clone(),
        });
        git2::Error::from_str(&message)
    })
}

fn ssh_port(url: &str) -> Option<u16> {
    if !url.contains("://") {
        return None;
    }
    url::Url::parse(url).ok()?.port().filter(|p| *p != 22)
}

/// Is `key` (the raw public key blob the server sent) listed for `host` in the
/// known_hosts file? Plain host patterns only: hashed entries (`|1|…`) are not read.
pub(crate) fn check_known_host(
    known_hosts: &Path,
    host: &str,
    port: Option<u16>,
    key: &[u8],
) -> Result<(), String> {
    let text = std::fs::read_to_string(known_hosts)
        .map_err(|e| format!("cannot read {}: {e}", known_hosts.display()))?;
    check_known_host_text(&text, &known_hosts.display().to_string(), host, port, key)
}

/// Like [`check_known_host`], for known_hosts text read elsewhere (`origin` names it).
pub(crate) fn check_known_host_text(
    text: &str,
    origin: &str,
    host: &str,
    port: Option<u16>,
    key: &[u8],
) -> Result<(), String> {
    let wanted = match port {
        Some(p) => format!("[{host}]:{p}"),
        None => host.to_string(),
    };
    let mut listed_with_other_key = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(hosts), Some(_kind), Some(blob)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !hosts.split(',').any(|h| h.eq_ignore_ascii_case(&wanted)) {
            continue;
        }
        match base64::engine::general_purpose::STANDARD.decode(blob) {
            Ok(listed) if listed == key => return Ok(()),
            _ => listed_with_other_key = true,
        }
    }
    if listed_with_other_key {
        Err(format!(
            "{wanted} is in {origin} with a different key: the server's host key changed"
        ))
    } else {
        Err(format!(
            "{wanted} is not in {origin} (hashed entries are not read; add a plain `host type key` line)"
        ))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    const KEY_B64: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    fn known_hosts(content: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("known_hosts");
        std::fs::write(&path, content).expect("write");
        (dir, path)
    }

    fn key_bytes() -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(KEY_B64)
            .expect("b64")
    }

    #[test]
    fn a_listed_host_key_is_accepted() {
        let (_d, path) = known_hosts(&format!("# c\ngithub.com,1.2.3.4 ssh-ed25519 {KEY_B64}\n"));
        let key = key_bytes();
        assert!(check_known_host(&path, "github.com", None, &key).is_ok());
        assert!(check_known_host(&path, "1.2.3.4", None, &key).is_ok());
    }

    #[test]
    fn an_unknown_host_or_changed_key_is_refused() {
        let (_d, path) = known_hosts(&format!("github.com ssh-ed25519 {KEY_B64}\n"));
        let key = key_bytes();
        let err = check_known_host(&path, "gitlab.com", None, &key).expect_err("unknown host");
        assert!(err.contains("not in"), "{err}");
        let err = check_known_host(&path, "github.com", None, b"other").expect_err("changed");
        assert!(err.contains("different key"), "{err}");
        // A non-default port is a different known_hosts entry.
        let err = check_known_host(&path, "github.com", Some(2222), &key).expect_err("port");
        assert!(err.contains("[github.com]:2222"), "{err}");
    }

    #[test]
    fn credentials_belong_to_one_scheme_host_and_port() {
        let url = "https://git.example.com/org/app.git";
        assert!(same_origin(
            url,
            "https://git.example.com/org/app.git/info/refs?service=x"
        ));
        assert!(same_origin(url, "https://GIT.example.com:443/other"));
        for other in [
            "https://evil.example.com/org/app.git",
            "http://git.example.com/org/app.git",
            "https://git.example.com:8443/org/app.git",
            "/tmp/repo",
            "not a url",
        ] {
            assert!(!same_origin(url, other), "{other}");
        }
        assert!(same_origin(
            "git@github.com:org/r.git",
            "ssh://git@github.com/org/r.git"
        ));
        assert!(!same_origin(
            "git@github.com:org/r.git",
            "ssh://git@gitlab.com/org/r.git"
        ));
        assert!(!same_origin("/tmp/repo", "/tmp/repo"));
    }

    #[test]
    fn ssh_urls_are_recognised() {
        assert!(is_ssh_url("ssh://git@h/x"));
        assert!(is_ssh_url("git@github.com:org/repo.git"));
        assert!(!is_ssh_url("/tmp/repo"));
        assert!(!is_ssh_url("https://h/x"));
        assert!(!is_ssh_url("file:///tmp/x"));
    }

    #[test]
    fn secret_refs_never_print_their_value() {
        let s = SecretRef::Env("TOKEN_VAR".into());
        assert_eq!(format!("{s:?}"), "env:TOKEN_VAR");
        let inline = SecretRef::Inline("hunter2".into());
        assert_eq!(format!("{inline:?}"), "inline");
    }

    /// A Secret's data of `pairs` (the chart login's tests use it too).
    pub(crate) fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn git_secret() -> CredentialsSecret {
        CredentialsSecret {
            namespace: "t1".into(),
            name: "git".into(),
        }
    }

    #[test]
    fn a_secret_resolves_by_fluxs_keys() {
        let secret = git_secret();
        let basic = secret
            .auth(&data(&[("username", "u"), ("password", "p")]))
            .expect("basic");
        assert_eq!(
            basic,
            Auth::Basic {
                username: "u".into(),
                password: SecretRef::Inline("p".into())
            }
        );
        for keys in [&[("bearerToken", "t")][..], &[("password", "t")][..]] {
            let token = secret.auth(&data(keys)).expect("token");
            assert_eq!(
                token,
                Auth::Token {
                    token: SecretRef::Inline("t".into()),
                    username: None
                }
            );
        }
        let ssh = secret
            .auth(&data(&[("identity", "KEY"), ("known_hosts", "h k v")]))
            .expect("ssh");
        assert!(
            matches!(
                ssh,
                Auth::SshInline {
                    passphrase: None,
                    ..
                }
            ),
            "{ssh:?}"
        );
        assert!(!format!("{ssh:?}").contains("KEY"), "{ssh:?}");
    }

    #[test]
    fn a_secret_missing_a_key_is_refused_naming_the_secret_and_key_only() {
        let secret = git_secret();
        let err = secret
            .auth(&data(&[("username", "s3cr3t-user")]))
            .expect_err("no password");
        assert_eq!(err, "Secret t1/git has key username but no key password");
        let err = secret
            .auth(&data(&[("identity", "s3cr3t-key")]))
            .expect_err("no known_hosts");
        assert!(
            err.contains("no key known_hosts") && !err.contains("s3cr3t"),
            "{err}"
        );
        let err = secret.auth(&data(&[("other", "x")])).expect_err("no keys");
        assert!(
            err.starts_with("Secret t1/git has none of the keys"),
            "{err}"
        );
    }
}
