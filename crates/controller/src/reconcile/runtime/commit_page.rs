//! The link from an app's status to its revision on the Git provider's web pages:
//! set by the runtime when the app starts, shown by the dashboard.

/// The provider's commit page without the SHA (`https://github.com/org/repo/commit/`)
/// for a repository URL on GitHub, GitLab or Bitbucket, in HTTPS or SSH form.
/// Credentials in the URL never reach the result; other hosts give `None`, as their
/// web pages cannot be guessed.
pub fn commit_url_prefix(repo: &str) -> Option<String> {
    let (host, path) = if let Some(rest) = repo
        .strip_prefix("https://")
        .or_else(|| repo.strip_prefix("http://"))
        .or_else(|| repo.strip_prefix("ssh://"))
        .or_else(|| repo.strip_prefix("git://"))
    {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        // An SSH or git port is not the web server's.
        let host = if repo.starts_with("https://") || repo.starts_with("http://") {
            host
        } else {
            host.split_once(':').map_or(host, |(h, _)| h)
        };
        (host, path)
    } else {
        // scp-like: git@github.com:org/repo.git
        let (authority, path) = repo.split_once(':')?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        (host, path)
    };
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_matches('/');
    let bare = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    let safe = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~/:".contains(&b))
    };
    if !safe(host) || !safe(path) || path.split('/').count() < 2 {
        return None;
    }
    let commit = if bare == "github.com" || bare.starts_with("github.") {
        "commit"
    } else if bare == "gitlab.com" || bare.starts_with("gitlab.") {
        "-/commit"
    } else if bare == "bitbucket.org" {
        "commits"
    } else {
        return None;
    };
    Some(format!("https://{host}/{path}/{commit}/"))
}
