//! Who may call `/api/v1` (issue #24). With `server.apiToken`, a caller presents the
//! token (a page on another site cannot: it would need a preflight no one answers), or
//! their own Kubernetes token, which the cluster reviews and whose user RBAC then
//! limits (`people`, issue #30). A replica's call presents its peer signature instead
//! (`peer_auth`). The guard names the caller ([`Caller`]) for what runs after it. Without a token
//! the API is on loopback, where any page the user's browser opens can reach it, so:
//! - **DNS rebinding**: only loopback `Host` values are served (`localhost`,
//!   `127.0.0.1`, `[::1]`, any port): a name the attacker points at 127.0.0.1 keeps its
//!   own `Host`. With `server.insecureOpenAPI` (a trusted network) an address typed as
//!   such is served too; a name never is, as a rebound name looks the same.
//! - **Cross-site requests**: a state-changing request (POST, PUT, PATCH, DELETE)
//!   needs `Content-Type: application/json` (which a page can send elsewhere only
//!   after a CORS preflight, never answered here), and a browser's marks of where it
//!   comes from, when present, must say this site: `Origin` equal to this host,
//!   `Sec-Fetch-Site: same-origin` or `none` (typed by the user). A client that is not
//!   a browser sends neither mark and cannot be made to cross sites: without a body
//!   it needs no content type (`curl -X POST …/sync`).

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use std::sync::Arc;

use super::bearer;
use super::peer_auth::FromPeer;
use super::people::oidc::Oidc;
use super::people::{self, Caller, People};
use crate::config::ApiToken;

/// How `/api/v1` is reached: with a token, or open on loopback (the default; or on a
/// trusted network, `insecure_open_api`).
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub token: Option<ApiToken>,
    pub insecure_open_api: bool,
    /// With a token: other bearer tokens are users the cluster authenticates.
    pub people: Option<Arc<People>>,
    /// With `server.oidc`: a browser's session cookie names a user too.
    pub oidc: Option<Arc<Oidc>>,
}

/// Why a request is refused, as its answer says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "this API needs the token server.apiToken names, or a Kubernetes token of yours \
         (kubectl create token), as Authorization: Bearer <token>"
    )]
    Unauthorized,
    #[error(
        "Host {0:?} is not a loopback address: without server.apiToken this API answers \
         only to localhost, 127.0.0.1 and [::1] (a foreign name is how DNS rebinding reaches it)"
    )]
    ForeignHost(String),
    #[error("a cross-site request ({0}) may not change anything here")]
    CrossSite(String),
    #[error("a request that changes something must be sent as Content-Type: application/json")]
    NotJson,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let code = match self {
            Refusal::Unauthorized => StatusCode::UNAUTHORIZED,
            Refusal::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Refusal::ForeignHost(_) | Refusal::CrossSite(_) => StatusCode::FORBIDDEN,
        };
        let body = axum::Json(json!({ "error": self.to_string() }));
        if code == StatusCode::UNAUTHORIZED {
            let challenge = [(header::WWW_AUTHENTICATE, r#"Bearer realm="tether""#)];
            return (code, challenge, body).into_response();
        }
        (code, body).into_response()
    }
}

/// The `Host` of a request without its port, brackets kept off IPv6.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// Whether a `Host` value may be served without a token.
pub fn host_allowed(host: &str, insecure_open_api: bool) -> bool {
    let name = host_name(host);
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || insecure_open_api,
        Err(_) => false,
    }
}

fn changes_state(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

fn is_json(headers: &HeaderMap) -> Option<bool> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().unwrap_or("");
    let essence = value.split(';').next().unwrap_or("").trim();
    Some(essence.eq_ignore_ascii_case("application/json"))
}

/// The checks for a request without a token, as a pure function of its method and
/// headers (`host` is its `Host`).
pub fn check_untokened(
    method: &Method,
    headers: &HeaderMap,
    host: &str,
    insecure_open_api: bool,
) -> Result<(), Refusal> {
    if !host_allowed(host, insecure_open_api) {
        return Err(Refusal::ForeignHost(host.to_string()));
    }
    check_same_site(method, headers, host)
}

/// The cross-site checks of a request the browser sends by itself with what proves
/// who it is (an open loopback API, a session cookie).
pub fn check_same_site(method: &Method, headers: &HeaderMap, host: &str) -> Result<(), Refusal> {
    if !changes_state(method) {
        return Ok(());
    }
    let text = |name| headers.get(name).map(|v| v.to_str().unwrap_or("?"));
    let origin = text(header::ORIGIN);
    let fetch_site = text(header::HeaderName::from_static("sec-fetch-site"));
    if let Some(origin) = origin {
        let same = ["http://", "https://"].iter().any(|scheme| {
            origin
                .strip_prefix(scheme)
                .is_some_and(|o| o.eq_ignore_ascii_case(host))
        });
        if !same {
            return Err(Refusal::CrossSite(format!("Origin {origin}")));
        }
    }
    if let Some(site) = fetch_site
        && !matches!(site, "same-origin" | "none")
    {
        return Err(Refusal::CrossSite(format!("Sec-Fetch-Site {site}")));
    }
    let from_browser = origin.is_some() || fetch_site.is_some();
    let has_body = headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|n| *n != "0")
        || headers.contains_key(header::TRANSFER_ENCODING);
    match is_json(headers) {
        Some(true) => Ok(()),
        Some(false) => Err(Refusal::NotJson),
        None if from_browser || has_body => Err(Refusal::NotJson),
        None => Ok(()),
    }
}

/// A request's `Host`.
fn host_of(request: &Request) -> &str {
    request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or("")
}

/// The gate of `/api/v1`: a peer's verified call, the token, a user's token the
/// cluster accepts, or the checks above. The request goes on marked with its
/// [`Caller`].
pub async fn guard(State(access): State<Access>, mut request: Request, next: Next) -> Response {
    if request.extensions().get::<FromPeer>().is_some() {
        request.extensions_mut().insert(Caller::Operator);
        return next.run(request).await;
    }
    let verdict = match &access.token {
        Some(token) => match bearer(request.headers()) {
            Some(given) if token.accepts(given) => Ok(Caller::Operator),
            Some(given) => match &access.people {
                Some(people) => match people.authenticate(given).await {
                    Ok(Some(user)) => Ok(Caller::User(user)),
                    Ok(None) => Err(Refusal::Unauthorized),
                    Err(err) => return people::unavailable(&err),
                },
                None => Err(Refusal::Unauthorized),
            },
            // A browser's session (OIDC), held to the cross-site checks a cookie needs.
            None => match access.oidc.as_ref().and_then(|o| o.user(request.headers())) {
                Some(user) => {
                    check_same_site(request.method(), request.headers(), host_of(&request))
                        .map(|()| Caller::User(user))
                }
                None => Err(Refusal::Unauthorized),
            },
        },
        None => {
            let host = host_of(&request);
            check_untokened(
                request.method(),
                request.headers(),
                host,
                access.insecure_open_api,
            )
            .map(|()| Caller::Operator)
        }
    };
    match verdict {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refusal) => {
            if refusal != Refusal::Unauthorized {
                tracing::warn!(path = %request.uri().path(), error = %refusal, "refused an API request");
            }
            refusal.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("a header value"));
        }
        map
    }

    #[test]
    fn only_loopback_hosts_are_served_without_a_token() {
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:9",
            "[::1]:8080",
            "[::1]",
            "LOCALHOST:1",
        ] {
            assert!(host_allowed(host, false), "{host}");
        }
        for host in [
            "rebind.attacker.example",
            "rebind.attacker.example:8080",
            "10.0.0.7:8080",
            "",
            "localhost.evil:80",
        ] {
            assert!(!host_allowed(host, false), "{host}");
        }
        // A trusted network's addresses, never a name.
        assert!(host_allowed("10.0.0.7:8080", true));
        assert!(!host_allowed("tether.internal:8080", true));
    }

    #[test]
    fn cross_site_and_non_json_changes_are_refused() {
        let post = Method::POST;
        let host = "127.0.0.1:8080";
        let evil = headers(&[
            ("origin", "http://evil.example"),
            ("content-type", "text/plain"),
        ]);
        assert!(matches!(
            check_untokened(&post, &evil, host, false),
            Err(Refusal::CrossSite(_))
        ));
        let plain = headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("content-type", "text/plain"),
        ]);
        assert_eq!(
            check_untokened(&post, &plain, host, false),
            Err(Refusal::NotJson)
        );
        let dashboard = headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/json"),
        ]);
        assert_eq!(check_untokened(&post, &dashboard, host, false), Ok(()));
        let no_type = headers(&[("sec-fetch-site", "same-origin")]);
        assert_eq!(
            check_untokened(&post, &no_type, host, false),
            Err(Refusal::NotJson)
        );
        let cross = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("content-type", "application/json"),
        ]);
        assert!(check_untokened(&post, &cross, host, false).is_err());
        // curl -X POST: no browser marks, no body.
        assert_eq!(
            check_untokened(&post, &HeaderMap::new(), host, false),
            Ok(())
        );
        let form = headers(&[("content-length", "3")]);
        assert_eq!(
            check_untokened(&post, &form, host, false),
            Err(Refusal::NotJson)
        );
        // Reads are only held to the Host.
        assert_eq!(check_untokened(&Method::GET, &evil, host, false), Ok(()));
        assert!(
            check_untokened(
                &Method::GET,
                &HeaderMap::new(),
                "rebind.attacker.example",
                false
            )
            .is_err()
        );
    }
}
