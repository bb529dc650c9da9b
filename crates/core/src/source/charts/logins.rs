//! Which login fetches a chart dependency (issue #26): an app's
//! `dependencyCredentials`, matched by repository URL prefix the way Argo CD matches
//! repository credentials and Helm's `repositories.yaml` names a repository's; the
//! chart source's own login for its own repository; a dockerconfigjson's registries;
//! else none.
//!
//! A prefix matches on whole parts of the URL: the same scheme, the same host and
//! port, and whole path segments, so a login for `https://charts.example.com` is
//! never offered to `https://charts.example.com.evil.example` nor to
//! `http://charts.example.com`, and one for `oci://r.example/team` never to
//! `oci://r.example/teammate`. Of several entries that match, the longest prefix wins.
//! The fetcher then sends a login only to its repository's own origin (never to an
//! archive an index points elsewhere, nor after a redirect to another host).

use std::collections::BTreeMap;

use super::login::{ChartLogin, docker_logins};
use crate::source::CredentialsSecret;

/// One entry of an app's `source.dependencyCredentials`: the Secret whose
/// credentials serve dependencies on repositories under `url`, or, without a `url`,
/// a `kubernetes.io/dockerconfigjson` Secret serving OCI dependencies on its hosts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DependencyCredential {
    /// `https://host[:port]/path`, `http://…` or `oci://host[:port]/path`.
    pub url: Option<String>,
    pub secret: CredentialsSecret,
}

/// A repository URL cut into what a prefix compares: scheme, host with port, path
/// segments.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Prefix {
    scheme: String,
    authority: String,
    path: Vec<String>,
}

impl Prefix {
    /// `None` for text with no `scheme://host`.
    fn parse(url: &str) -> Option<Prefix> {
        let (scheme, rest) = url.trim().split_once("://")?;
        let mut parts = rest.split(['?', '#']).next().unwrap_or("").split('/');
        let authority = parts.next().unwrap_or("");
        // Credentials in a URL are not part of where it points.
        let authority = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        if authority.is_empty() {
            return None;
        }
        Some(Prefix {
            scheme: scheme.to_ascii_lowercase(),
            authority: authority.to_ascii_lowercase(),
            path: parts
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
        })
    }

    fn covers(&self, repo: &Prefix) -> bool {
        self.scheme == repo.scheme
            && self.authority == repo.authority
            && repo.path.starts_with(&self.path)
    }
}

/// The logins an app's dependencies may be fetched with, read for one render.
#[derive(Debug, Default)]
pub struct DependencyLogins {
    /// `dependencyCredentials` entries with a `url`.
    by_prefix: Vec<(Prefix, ChartLogin)>,
    /// The chart source's repository and login.
    parent: Option<(String, ChartLogin)>,
    /// The registries of `dependencyCredentials` entries without a `url`.
    registries: Vec<(String, ChartLogin)>,
}

impl DependencyLogins {
    /// No credentials but a chart source's own (`repo` and its `login`), if any.
    pub fn new(parent: Option<(&str, ChartLogin)>) -> DependencyLogins {
        DependencyLogins {
            parent: parent.map(|(repo, login)| (repo.to_string(), login)),
            ..DependencyLogins::default()
        }
    }

    /// Adds `entry`, whose Secret's decoded `data` was read now. The error names the
    /// Secret and a key, never a value.
    pub fn add(
        &mut self,
        entry: &DependencyCredential,
        data: &BTreeMap<String, Vec<u8>>,
    ) -> Result<(), String> {
        let secret = &entry.secret;
        match &entry.url {
            Some(url) => {
                let prefix = Prefix::parse(url).ok_or_else(|| {
                    format!("dependencyCredentials url {url} has no scheme://host")
                })?;
                let login = ChartLogin::from_secret(secret, data, url)?;
                self.by_prefix.push((prefix, login));
            }
            None => self.registries.extend(docker_logins(secret, data)?),
        }
        Ok(())
    }

    /// The login for a dependency on `repo` (its `repository:`): the longest
    /// `dependencyCredentials` prefix covering it, else the chart source's own login
    /// when `repo` is the source's repository, else a dockerconfigjson's login for an
    /// OCI registry's host, else none (anonymous).
    pub fn for_repository(&self, repo: &str) -> Option<&ChartLogin> {
        let at = Prefix::parse(repo)?;
        let longest = self
            .by_prefix
            .iter()
            .filter(|(prefix, _)| prefix.covers(&at))
            .max_by_key(|(prefix, _)| prefix.path.len())
            .map(|(_, login)| login);
        longest
            .or_else(|| {
                self.parent
                    .as_ref()
                    .filter(|(source, _)| super::same_repository(source, repo))
                    .map(|(_, login)| login)
            })
            .or_else(|| {
                (at.scheme == "oci")
                    .then(|| {
                        self.registries
                            .iter()
                            .find(|(host, _)| *host == at.authority)
                    })
                    .flatten()
                    .map(|(_, login)| login)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository that redirects `index.yaml` to another host (another port of
    /// loopback) that records the `Authorization` headers it is sent.
    #[tokio::test]
    async fn a_login_is_not_sent_on_after_a_redirect_to_another_host() {
        use parking_lot::Mutex;
        use std::sync::Arc;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let record = seen.clone();
        let other = axum::Router::new().route(
            "/index.yaml",
            axum::routing::get(move |headers: axum::http::HeaderMap| async move {
                if let Some(h) = headers.get("authorization") {
                    record.lock().push(format!("{h:?}"));
                }
                "apiVersion: v1\nentries: {}\n"
            }),
        );
        let serve = |app: axum::Router| async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let at = format!("http://{}", listener.local_addr().expect("addr"));
            tokio::spawn(async move { axum::serve(listener, app).await });
            at
        };
        let elsewhere = serve(other).await;
        let moved = format!("{elsewhere}/index.yaml");
        let repo = serve(axum::Router::new().route(
            "/index.yaml",
            axum::routing::get(move || async move { axum::response::Redirect::temporary(&moved) }),
        ))
        .await;
        let login = ChartLogin::from_secret(&secret("a"), &basic("robot"), &repo).expect("login");
        let fetcher = super::super::repo::Fetcher::new(None, Arc::default()).expect("a client");
        fetcher
            .index(&repo, &login)
            .await
            .expect("the index, redirected");
        assert_eq!(*seen.lock(), Vec::<String>::new());
    }

    fn secret(name: &str) -> CredentialsSecret {
        CredentialsSecret {
            namespace: "team".into(),
            name: name.into(),
        }
    }

    fn basic(user: &str) -> BTreeMap<String, Vec<u8>> {
        [("username", user), ("password", "pw")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn entry(url: Option<&str>, name: &str) -> DependencyCredential {
        DependencyCredential {
            url: url.map(str::to_string),
            secret: secret(name),
        }
    }

    fn header(logins: &DependencyLogins, repo: &str) -> Option<String> {
        logins.for_repository(repo).and_then(ChartLogin::header)
    }

    #[test]
    fn the_longest_prefix_of_whole_url_parts_wins_and_no_other_host_gets_a_login() {
        let mut logins = DependencyLogins::default();
        let site = "https://charts.example.com";
        logins
            .add(&entry(Some(site), "site"), &basic("site"))
            .expect("site");
        logins
            .add(
                &entry(Some("https://charts.example.com/team/"), "team"),
                &basic("team"),
            )
            .expect("team");
        let site_login = ChartLogin::from_secret(&secret("site"), &basic("site"), site)
            .expect("a login")
            .header();
        let team_login = ChartLogin::from_secret(&secret("team"), &basic("team"), site)
            .expect("a login")
            .header();
        assert_eq!(
            header(&logins, "https://charts.example.com/stable"),
            site_login
        );
        assert_eq!(header(&logins, "https://CHARTS.example.com"), site_login);
        assert_eq!(
            header(&logins, "https://charts.example.com/team/x"),
            team_login
        );
        assert_eq!(
            header(&logins, "https://charts.example.com/team"),
            team_login
        );
        assert_eq!(
            header(&logins, "https://charts.example.com/teammate"),
            site_login,
            "a prefix ends at a segment"
        );
        for elsewhere in [
            "https://charts.example.com.evil.example",
            "https://charts.example.com:8443",
            "http://charts.example.com",
            "oci://charts.example.com",
            "https://evil.example/https://charts.example.com",
            "not a URL",
        ] {
            assert_eq!(header(&logins, elsewhere), None, "{elsewhere}");
        }
    }

    #[test]
    fn a_dockerconfigjson_without_url_serves_its_registries_and_the_source_its_own() {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD.encode("robot:pw");
        let json = format!(r#"{{"auths":{{"registry.example:5000":{{"auth":"{auth}"}}}}}}"#);
        let data: BTreeMap<String, Vec<u8>> = [(
            super::super::DOCKER_CONFIG_KEY.to_string(),
            json.into_bytes(),
        )]
        .into();
        let parent = ChartLogin::from_secret(&secret("own"), &basic("own"), "https://own.example")
            .expect("a login");
        let mut logins =
            DependencyLogins::new(Some(("https://own.example/charts", parent.clone())));
        logins
            .add(&entry(None, "regcred"), &data)
            .expect("registries");
        let registry = logins
            .for_repository("oci://registry.example:5000/charts")
            .expect("the registry's login");
        assert_eq!(registry.basic(), Some(format!("Basic {auth}")));
        assert!(
            logins
                .for_repository("https://registry.example:5000")
                .is_none()
        );
        assert!(
            logins
                .for_repository("oci://registry.example:5001/c")
                .is_none()
        );
        assert_eq!(
            logins.for_repository("https://own.example/other"),
            Some(&parent)
        );
        // A url-less entry must be a dockerconfigjson; a bad url is named.
        let err = logins
            .add(&entry(None, "plain"), &basic("u"))
            .expect_err("not a dockerconfigjson");
        assert!(
            err.starts_with("Secret team/plain has no key .dockerconfigjson"),
            "{err}"
        );
        assert!(!err.contains("pw"));
        let err = logins
            .add(&entry(Some("charts.example.com"), "x"), &basic("u"))
            .expect_err("no scheme");
        assert_eq!(
            err,
            "dependencyCredentials url charts.example.com has no scheme://host"
        );
    }
}
