//! The login's pages and steps, as the browser meets them: `/login` (a button), then
//! `/oidc/login` (to the issuer, with a fresh state, nonce and PKCE challenge bound to
//! this browser by a cookie), then the issuer's redirect to `/oidc/callback` (the code
//! exchanged with the verifier, the ID token checked, the session cookie set), and
//! `/logout`. With OIDC configured, the dashboard's page sends a browser without a
//! session to `/login` (`/?token` still opens it for the operator's API token).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::session::{self, LOGIN_COOKIE, Pending, Purpose, SESSION_COOKIE, Session};
use super::{Oidc, OidcError, random_token, unix_now};
use crate::config::CALLBACK_PATH;

/// How long a login may take between leaving for the issuer and coming back: ample
/// for typing a password and a second factor, short enough that a stolen login
/// cookie is soon worthless.
pub const LOGIN_TTL_SECS: i64 = 600;

/// The login page allows only its style sheet: no script, no form posts elsewhere.
const LOGIN_PAGE_POLICY: &str = "default-src 'none'; style-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The dashboard's routes, and with OIDC the login's, the page sending a browser
/// without a session to `/login`.
pub fn pages<S: Clone + Send + Sync + 'static>(
    oidc: Option<Arc<Oidc>>,
    dashboard: Router<S>,
) -> Router<S> {
    let Some(oidc) = oidc else {
        return dashboard;
    };
    let login: Router<S> = Router::new()
        .route("/login", get(login_page))
        .route("/oidc/login", get(start))
        .route(CALLBACK_PATH, get(callback))
        .route("/logout", get(logout).post(logout))
        .route("/oidc/session", get(whoami))
        .with_state(oidc.clone());
    dashboard
        .layer(middleware::from_fn_with_state(oidc, login_first))
        .merge(login)
}

/// The dashboard's page without a session (nor `?token`) goes to `/login`.
async fn login_first(State(oidc): State<Arc<Oidc>>, request: Request, next: Next) -> Response {
    let page = request.uri().path() == "/";
    let token = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "token"));
    if page && !token && oidc.session(request.headers()).is_none() {
        return see_other("/login", &[]);
    }
    next.run(request).await
}

/// A 303 to `location`, setting `cookies`.
fn see_other(location: &str, cookies: &[String]) -> Response {
    let mut response = (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, location.to_string()),
            (header::CACHE_CONTROL, "no-store".to_string()),
            (header::REFERRER_POLICY, "no-referrer".to_string()),
        ],
    )
        .into_response();
    for cookie in cookies {
        if let Ok(value) = cookie.parse() {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// Text for HTML: the issuer's words reach the page through here only.
fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// The login page: a button to the issuer, the way to the API token, and why the
/// last login failed, if it did.
fn page(oidc: &Oidc, status: StatusCode, error: Option<&str>) -> Response {
    let issuer = url::Url::parse(&oidc.config().issuer)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let error = error
        .map(|e| format!("<p id=\"login-error\" class=\"error\">{}</p>\n", escape(e)))
        .unwrap_or_default();
    let html = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>tether: log in</title>\n<link rel=\"stylesheet\" href=\"/assets/dashboard.css\">\n\
         </head>\n<body>\n<main id=\"login\">\n<h1>tether</h1>\n{error}\
         <p><a id=\"oidc-login\" class=\"button\" href=\"/oidc/login\">Log in with {}</a></p>\n\
         <p><a id=\"token-login\" href=\"/?token\">Use an API token instead</a></p>\n\
         </main>\n</body>\n</html>\n",
        escape(&issuer)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, LOGIN_PAGE_POLICY),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        html,
    )
        .into_response()
}

async fn login_page(State(oidc): State<Arc<Oidc>>) -> Response {
    page(&oidc, StatusCode::OK, None)
}

/// A failed login: logged (the error names no secret) and shown on the login page.
fn failed(oidc: &Oidc, err: &OidcError) -> Response {
    tracing::warn!(issuer = %oidc.config().issuer, error = %err, "an OIDC login failed");
    let status = match err {
        OidcError::NoLogin | OidcError::State => StatusCode::BAD_REQUEST,
        OidcError::Unreachable(_) | OidcError::Refused(_) | OidcError::Issuer { .. } => {
            StatusCode::BAD_GATEWAY
        }
        _ => StatusCode::UNAUTHORIZED,
    };
    let mut response = page(oidc, status, Some(&err.to_string()));
    let clear = session::set_cookie(LOGIN_COOKIE, "", 0, oidc.config().secure());
    if let Ok(value) = clear.parse() {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// To the issuer's authorization endpoint, with this browser's login cookie.
async fn start(State(oidc): State<Arc<Oidc>>) -> Response {
    let provider = match oidc.provider().await {
        Ok(provider) => provider,
        Err(err) => return failed(&oidc, &err),
    };
    let Ok(mut url) = url::Url::parse(&provider.authorization_endpoint) else {
        let err = OidcError::Issuer {
            what: "discovery",
            answer: "an authorization_endpoint that is not a URL".into(),
        };
        return failed(&oidc, &err);
    };
    let pending = Pending {
        state: random_token(),
        nonce: random_token(),
        verifier: random_token(),
        exp: unix_now() + LOGIN_TTL_SECS,
    };
    let config = oidc.config();
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(pending.verifier.as_bytes()));
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &config.client_id)
        .append_pair("redirect_uri", &config.redirect_url)
        .append_pair("scope", &config.scopes.join(" "))
        .append_pair("state", &pending.state)
        .append_pair("nonce", &pending.nonce)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    let sealed = oidc.sealer.seal(Purpose::Login, &pending);
    let cookie = session::set_cookie(LOGIN_COOKIE, &sealed, LOGIN_TTL_SECS, config.secure());
    see_other(url.as_str(), &[cookie])
}

/// What the issuer sends the browser back with (RFC 6749 §4.1.2).
#[derive(Deserialize)]
struct Answer {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

async fn callback(
    State(oidc): State<Arc<Oidc>>,
    Query(answer): Query<Answer>,
    headers: HeaderMap,
) -> Response {
    match finish(&oidc, &headers, answer).await {
        Ok(session) => {
            tracing::info!(user = %session.user, groups = ?session.groups, "logged in with OIDC");
            let secure = oidc.config().secure();
            let max_age = session.exp - unix_now();
            let sealed = oidc.seal(&session);
            let cookies = [
                session::set_cookie(SESSION_COOKIE, &sealed, max_age, secure),
                session::set_cookie(LOGIN_COOKIE, "", 0, secure),
            ];
            see_other("/", &cookies)
        }
        Err(err) => failed(&oidc, &err),
    }
}

/// The callback's checks: this browser's login, its state, the code exchanged with
/// its verifier, the ID token verified against its nonce.
async fn finish(oidc: &Oidc, headers: &HeaderMap, answer: Answer) -> Result<Session, OidcError> {
    let pending: Pending = session::cookie(headers, LOGIN_COOKIE)
        .and_then(|sealed| oidc.sealer.open(Purpose::Login, sealed))
        .filter(|p: &Pending| p.exp > unix_now())
        .ok_or(OidcError::NoLogin)?;
    if let Some(error) = answer.error {
        return Err(OidcError::Denied(error));
    }
    let state = answer.state.unwrap_or_default();
    let same: bool =
        subtle::ConstantTimeEq::ct_eq(state.as_bytes(), pending.state.as_bytes()).into();
    if !same {
        return Err(OidcError::State);
    }
    let code = answer
        .code
        .ok_or_else(|| OidcError::Denied("no authorization code".into()))?;
    let provider = oidc.provider().await?;
    let id_token = exchange(oidc, &provider.token_endpoint, &code, &pending.verifier).await?;
    let claims = oidc.verify(&provider, &id_token, &pending.nonce).await?;
    oidc.session_of(&claims)
}

/// The code, exchanged at the token endpoint with the PKCE verifier (RFC 7636 §4.5);
/// a confidential client authenticates with HTTP Basic (RFC 6749 §2.3.1).
async fn exchange(
    oidc: &Oidc,
    endpoint: &str,
    code: &str,
    verifier: &str,
) -> Result<String, OidcError> {
    let config = oidc.config();
    // The serializer is not Send: the body is made in a scope of its own.
    let body = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", &config.redirect_url)
            .append_pair("code_verifier", verifier);
        if oidc.client_secret.is_none() {
            form.append_pair("client_id", &config.client_id);
        }
        form.finish()
    };
    let mut request = oidc
        .http
        .post(endpoint)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, "application/json");
    if let Some(secret) = &oidc.client_secret {
        let encode =
            |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let basic = format!("{}:{}", encode(&config.client_id), encode(secret.expose()));
        request = request.header(
            header::AUTHORIZATION,
            format!("Basic {}", STANDARD.encode(basic)),
        );
    }
    let answer = oidc
        .send("the code exchange", request.body(body), endpoint)
        .await?;
    serde_json::from_slice::<Value>(&answer)
        .ok()
        .and_then(|v| {
            v.get("id_token")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .ok_or_else(|| OidcError::Issuer {
            what: "the code exchange",
            answer: "no id_token".into(),
        })
}

/// Ends the session (this replica forgets it at once; the cookie is deleted).
async fn logout(State(oidc): State<Arc<Oidc>>, headers: HeaderMap) -> Response {
    if let Some(user) = oidc.revoke(&headers) {
        tracing::info!(user = %user, "logged out");
    }
    let clear = session::set_cookie(SESSION_COOKIE, "", 0, oidc.config().secure());
    let mut response = see_other("/login", &[clear]);
    response.headers_mut().insert(
        header::HeaderName::from_static("clear-site-data"),
        header::HeaderValue::from_static("\"cookies\""),
    );
    response
}

/// Who the session names, for the dashboard's header.
async fn whoami(State(oidc): State<Arc<Oidc>>, headers: HeaderMap) -> Response {
    let no_store = [(header::CACHE_CONTROL, "no-store")];
    match oidc.session(&headers) {
        Some(s) => (
            no_store,
            axum::Json(json!({"user": s.user, "groups": s.groups})),
        )
            .into_response(),
        None => (
            StatusCode::UNAUTHORIZED,
            no_store,
            axum::Json(json!({"error": "not logged in"})),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issuers_words_are_escaped_on_the_page() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }
}
