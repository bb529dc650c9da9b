//! One name per repository, whatever spelling of its URL a user or a webhook gives.
//!
//! `https://github.com/Org/Repo.git`, `git@github.com:org/repo`, and
//! `ssh://git@github.com/org/repo/` are one repository: a webhook that names any of them
//! triggers sources configured with any other (a clone is shared only by one scheme and
//! one set of credentials too: see `clone_key`).

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

/// What stands in for a credential in every message, log line and answer.
const MASK: &str = "***";

/// Credentials shorter than this are not searched for as bare strings in messages
/// (see [`redact_known`]): masking every `ab` of a message would garble it, and a one-
/// or two-character password protects nothing worth hiding. Credentials inside URLs
/// are masked whatever their length.
const MIN_BARE_SECRET_LEN: usize = 3;

/// `text` with the credentials of every URL in it replaced by `***`: the one redaction
/// every message, log line, status error, webhook answer and CLI line of the source
/// stage goes through (libgit2's own messages quote URLs too).
///
/// It reads URLs the way a careless user writes them, not only the way RFC 3986 does:
/// `https://TOKEN@host/…` (a token as the user name), `https://user:pa/ss@host/…` and
/// `https://user:p@ss@host/…` (a password with `/` or `@` in it, not percent-encoded),
/// percent-encoded userinfo, `ssh://user:pw@host/…`, and a URL anywhere in a sentence.
/// The whole userinfo becomes `***` (`https://TOKEN:x-oauth-basic@…` puts the token in
/// the user name), except the login name of an `ssh://` URL, which is no secret
/// (`ssh://git@host/…` stays as it is; `ssh://git:pw@host/…` becomes `ssh://git:***@…`).
/// When it cannot tell a userinfo from a path, it masks more rather than less.
/// Idempotent: redacting redacted text changes nothing.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let scheme = scheme_before(&rest[..at]);
        let after = &rest[at + 3..];
        let token_len = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(after.len());
        let token = &after[..token_len];
        out.push_str(&rest[..at + 3]);
        match userinfo_len(token) {
            Some(len) => {
                out.push_str(&masked_userinfo(&scheme, &token[..len]));
                out.push_str(&token[len..]);
            }
            None => out.push_str(token),
        }
        rest = &after[token_len..];
    }
    out.push_str(rest);
    out
}

/// [`redact`], kept under the name the report stage calls it by: one function, two names.
pub fn redact_url(raw: &str) -> String {
    redact(raw)
}

/// [`redact`], and also every bare occurrence of the credentials of `url` (the URL a
/// source is configured with): libgit2 may quote a URL decoded (a percent-encoded
/// password in clear) or cut in a way the URL scan cannot recognise.
pub(crate) fn redact_known(text: &str, url: &str) -> String {
    // Bare secrets first: once the scan has masked part of a password, what is left of
    // it no longer matches.
    let mut text = text.to_string();
    for secret in secrets_in(url) {
        if secret.len() >= MIN_BARE_SECRET_LEN && secret != MASK {
            text = text.replace(&secret, MASK);
        }
    }
    redact(&text)
}

/// The credentials of one whole URL (its password, or its user name when that stands
/// alone outside ssh), raw and percent-decoded. A whole URL has no sentence after it,
/// so its last `@` ends the userinfo: a password with both `@` and `/` is found whole.
pub(crate) fn secrets_in(url: &str) -> Vec<String> {
    let Some(at) = url.find("://") else {
        return Vec::new();
    };
    let scheme = scheme_before(&url[..at]);
    let token = url[at + 3..].trim_end();
    let Some(len) = userinfo_len(token).max(token.rfind('@').filter(|&i| {
        // Past the authority, only a `user:password` shape makes an `@` a userinfo end.
        token[..i]
            .split_once(':')
            .is_some_and(|(_, p)| !is_port_then_path(p))
    })) else {
        return Vec::new();
    };
    let userinfo = &token[..len];
    let raw: Vec<&str> = match userinfo.split_once(':') {
        Some((_, password)) => vec![password],
        None if is_ssh_scheme(&scheme) => Vec::new(),
        None => vec![userinfo],
    };
    let mut secrets = Vec::new();
    for s in raw.into_iter().filter(|s| !s.is_empty()) {
        let decoded = percent_decode(s);
        if decoded != s {
            secrets.push(decoded);
        }
        secrets.push(s.to_string());
    }
    secrets
}

/// Whether `url` carries a password (`scheme://user:password@host/…`), which libgit2
/// offers to an HTTP server before asking for configured credentials.
pub(crate) fn has_password(url: &str) -> bool {
    url.split_once("://")
        .and_then(|(_, token)| userinfo_len(token).map(|len| token[..len].contains(':')))
        .unwrap_or(false)
}

/// The scheme that ends where `before` ends (`https` of `… https`), lowercase.
fn scheme_before(before: &str) -> String {
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .map_or(0, |i| i + 1);
    before[start..].to_ascii_lowercase()
}

fn is_ssh_scheme(scheme: &str) -> bool {
    matches!(scheme, "ssh" | "git+ssh" | "ssh+git")
}

/// `8443/org/repo` or `8443`: what follows the colon of `host:port`, not a password.
fn is_port_then_path(after_colon: &str) -> bool {
    let port = after_colon
        .split(['/', '?', '#'])
        .next()
        .unwrap_or(after_colon);
    port.bytes().all(|b| b.is_ascii_digit()) && !after_colon.contains('@')
}

/// The length of the userinfo at the start of `token` (what follows `scheme://`), if
/// it has one. The authority ends at the first `/`, `?` or `#` and its last `@` ends
/// the userinfo (so a password may contain `@`). When the authority has no `@` but
/// reads `user:password` (not `host:port`), a `/` cut the password short: the first
/// `@` after it ends the userinfo (so a password may contain `/`, and the
/// `url@reference:path` a source prints is not taken for one).
fn userinfo_len(token: &str) -> Option<usize> {
    let authority_len = token.find(['/', '?', '#']).unwrap_or(token.len());
    let authority = &token[..authority_len];
    if let Some(at) = authority.rfind('@') {
        return Some(at);
    }
    let (_, after_colon) = authority.split_once(':')?;
    if after_colon.is_empty() || after_colon.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token[authority_len..]
        .find('@')
        .map(|at| authority_len + at)
}

fn masked_userinfo(scheme: &str, userinfo: &str) -> String {
    if is_ssh_scheme(scheme) {
        return match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{MASK}"),
            None => userinfo.to_string(),
        };
    }
    MASK.to_string()
}

/// `%2F` → `/`; anything not a valid escape is kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a tenant (an App object) may name `url` as its repository: `https://`,
/// `http://`, `ssh://` or scp-like SSH only. `file://` and local paths would read the
/// files of tether's own pod (its Git cache among them), and `git://` is unauthenticated
/// plain text; they stay for the configuration file and the CLI, which the operator
/// writes. The error says what is accepted, never the URL's credentials.
pub fn check_tenant_repo_url(url: &str) -> Result<(), String> {
    let accepted = "an App's repository must be an https://, http://, ssh://, oci:// \
                    (a chart's registry) or user@host:path URL";
    match url.trim().split_once("://") {
        Some((scheme, rest)) => {
            let known = ["https", "http", "ssh", "oci"]
                .iter()
                .any(|s| scheme.eq_ignore_ascii_case(s));
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            if known && !host.is_empty() {
                Ok(())
            } else {
                Err(format!("{accepted}, not {scheme}://"))
            }
        }
        None if is_plain_scp(url.trim()) => Ok(()),
        None => Err(format!("{accepted}, not a local path")),
    }
}

/// `[user@]host:path` with a plain host and user name and nothing else (no `ext::`
/// transport, no spaces): what git reads as SSH.
fn is_plain_scp(url: &str) -> bool {
    let Some((authority, path)) = url.split_once(':') else {
        return false;
    };
    let (user, host) = authority.rsplit_once('@').unwrap_or(("git", authority));
    let plain = |s: &str, extra: &[char]| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-') || extra.contains(&c))
    };
    plain(host, &[])
        && plain(user, &['_'])
        && !path.is_empty()
        && !path.starts_with(':')
        && !path.chars().any(char::is_whitespace)
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
    fn every_form_of_credential_in_a_url_is_redacted() {
        for (raw, want) in [
            // A token as the user name, alone or with GitHub's old fixed password.
            (
                "https://ghp_TOKEN123@github.com/o/r.git",
                "https://***@github.com/o/r.git",
            ),
            (
                "https://ghp_TOKEN123:x-oauth-basic@github.com/o/r",
                "https://***@github.com/o/r",
            ),
            (
                "https://user:tok3n@h.example/org/r.git",
                "https://***@h.example/org/r.git",
            ),
            // Passwords with `/` or `@`, not percent-encoded.
            (
                "https://user:pa/ss@h.example/r.git",
                "https://***@h.example/r.git",
            ),
            (
                "https://user:p@ss@h.example:8443/r.git",
                "https://***@h.example:8443/r.git",
            ),
            // Percent-encoded userinfo.
            (
                "https://me%40corp:p%2Fss%40w@h.example/r",
                "https://***@h.example/r",
            ),
            // ssh: the login name stays, the password goes.
            (
                "ssh://git:SshPw@h.example:2222/r.git",
                "ssh://git:***@h.example:2222/r.git",
            ),
            ("git+ssh://deploy:SshPw@h/r", "git+ssh://deploy:***@h/r"),
            ("ssh://git@h.example/r.git", "ssh://git@h.example/r.git"),
            // No credentials: unchanged.
            (
                "https://h.example:8443/org/r.git",
                "https://h.example:8443/org/r.git",
            ),
            ("https://h/org/r@v1", "https://h/org/r@v1"),
            ("git@github.com:org/r.git", "git@github.com:org/r.git"),
            ("/tmp/repo", "/tmp/repo"),
        ] {
            assert_eq!(redact(raw), want, "{raw}");
            assert_eq!(redact(want), want, "idempotent on {want}");
        }
    }

    #[test]
    fn urls_inside_sentences_are_redacted_and_the_rest_kept() {
        let text = "remote https://user:S3cret@h:8443/x.git@main:deploy unreachable: \
                    failed to fetch 'http://TOKEN99@127.0.0.1:9/x.git/info/refs' (and \
                    https://u:pa/ss@h/y.git@v1:.)";
        let got = redact(text);
        for secret in ["S3cret", "TOKEN99", "pa/ss", "u:pa"] {
            assert!(!got.contains(secret), "{secret} in {got}");
        }
        assert!(
            got.contains("https://***@h:8443/x.git@main:deploy unreachable"),
            "{got}"
        );
        assert!(
            got.contains("'http://***@127.0.0.1:9/x.git/info/refs'"),
            "{got}"
        );
        assert!(got.contains("https://***@h/y.git@v1:.)"), "{got}");
        // The reference printed after a source URL is not mistaken for a userinfo.
        assert_eq!(
            redact("https://h:8443/x.git@main:deploy"),
            "https://h:8443/x.git@main:deploy"
        );
    }

    #[test]
    fn a_known_url_masks_its_secrets_even_bare_or_decoded() {
        let url = "https://me:p%2Fss@wd@h.example/r.git";
        let message = "auth failed for me with p/ss@wd at https://me:p%2Fss@wd@h.example/r.git";
        let got = redact_known(message, url);
        assert!(!got.contains("p/ss@wd") && !got.contains("p%2Fss"), "{got}");
        // A password with `@` before a `/`: the whole URL tells where it ends.
        let url = "https://user:p@s/s@h.example/r.git";
        let got = redact_known(&format!("cannot fetch {url}"), url);
        assert_eq!(got, "cannot fetch https://***@h.example/r.git");
        // A token alone is the secret; an ssh login name is not.
        assert_eq!(
            secrets_in("https://TOKEN99@h/r"),
            vec!["TOKEN99".to_string()]
        );
        assert!(secrets_in("ssh://git@h/r").is_empty());
        assert!(secrets_in("https://h:8443/org/r@v1").is_empty());
        assert!(has_password("https://u:p@h/r") && has_password("https://u:pa/ss@h/r"));
        assert!(!has_password("https://TOKEN@h/r") && !has_password("https://h:443/r"));
        // Short secrets are not searched bare (the URL scan still masks them in URLs).
        assert_eq!(
            redact_known("a b at https://u:ab@h/r", "https://u:ab@h/r"),
            "a b at https://***@h/r"
        );
    }

    #[test]
    fn tenants_name_only_network_repositories() {
        for ok in [
            "https://h.example/org/r.git",
            "HTTP://h.example:8080/r",
            "ssh://git@h.example:2222/r.git",
            "git@github.com:org/r.git",
            "oci://ghcr.io/org/charts",
        ] {
            assert!(check_tenant_repo_url(ok).is_ok(), "{ok}");
        }
        for refused in [
            "file:///var/cache/tether/git/x",
            "/var/cache/tether/git/x",
            "./repo",
            "git://h.example/r.git",
            "https:///local",
            "oci:///charts",
            "ext::sh -c touch% /tmp/x",
        ] {
            let err = check_tenant_repo_url(refused).expect_err(refused);
            assert!(err.starts_with("an App's repository must be"), "{err}");
        }
    }
}
