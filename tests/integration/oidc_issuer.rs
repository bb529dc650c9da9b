//! An OpenID Connect issuer for the login tests (issue #30): an external peer of
//! tether, as Dex or Keycloak would be, on a loopback port. It serves discovery and a
//! JWKS of RSA keys made for the run, an authorization endpoint that logs the test's
//! current user in at once (no password form) and redirects back with a code, and a
//! token endpoint that checks the client secret and the PKCE verifier (RFC 7636)
//! before it hands out an ID token. A test can make the next ID token wrong in one
//! way (audience, expiry, nonce, an unpublished key) and rotate the keys.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use parking_lot::Mutex;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rsa::pkcs8::EncodePrivateKey as _;
use rsa::traits::PublicKeyParts as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

pub const CLIENT_ID: &str = "tether";
pub const CLIENT_SECRET: &str = "tether-client-secret";

/// What the next ID token gets wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    None,
    Audience,
    Expired,
    Nonce,
    /// Signed with a key the JWKS does not publish.
    UnpublishedKey,
}

/// Who the authorization endpoint logs in.
#[derive(Debug, Clone)]
pub struct TestUser {
    pub email: String,
    pub groups: Vec<String>,
}

struct Key {
    kid: String,
    pair: RsaKeyPair,
    jwk: Value,
}

fn rsa_key(kid: &str) -> Key {
    let private = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).expect("an RSA key");
    let der = private.to_pkcs8_der().expect("PKCS#8");
    Key {
        kid: kid.to_string(),
        pair: RsaKeyPair::from_pkcs8(der.as_bytes()).expect("ring reads it"),
        jwk: json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
            "n": URL_SAFE_NO_PAD.encode(private.n().to_bytes_be()),
            "e": URL_SAFE_NO_PAD.encode(private.e().to_bytes_be())}),
    }
}

/// A code handed out and not yet exchanged.
struct Grant {
    redirect_uri: String,
    challenge: String,
    nonce: String,
    user: TestUser,
}

struct Inner {
    url: String,
    /// Published, the last one signing.
    keys: Vec<Key>,
    rogue: Key,
    user: TestUser,
    flaw: Flaw,
    codes: HashMap<String, Grant>,
    key_fetches: usize,
    exchanges: usize,
}

#[derive(Clone)]
pub struct Issuer {
    inner: Arc<Mutex<Inner>>,
    pub url: String,
    _server: Arc<tokio::task::JoinHandle<()>>,
}

impl Issuer {
    pub async fn start(user: TestUser) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let inner = Arc::new(Mutex::new(Inner {
            url: url.clone(),
            keys: vec![rsa_key("key-1")],
            rogue: rsa_key("rogue"),
            user,
            flaw: Flaw::None,
            codes: HashMap::new(),
            key_fetches: 0,
            exchanges: 0,
        }));
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/keys", get(keys))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the issuer serves");
        });
        Issuer {
            inner,
            url,
            _server: Arc::new(server),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock())
    }

    pub fn log_in_as(&self, user: TestUser) {
        self.with(|i| i.user = user);
    }

    pub fn flaw_next(&self, flaw: Flaw) {
        self.with(|i| i.flaw = flaw);
    }

    /// A new signing key replaces the published one.
    pub fn rotate(&self) {
        let key = rsa_key("key-2");
        self.with(|i| i.keys = vec![key]);
    }

    pub fn key_fetches(&self) -> usize {
        self.with(|i| i.key_fetches)
    }

    pub fn exchanges(&self) -> usize {
        self.with(|i| i.exchanges)
    }
}

type Shared = Arc<Mutex<Inner>>;

async fn discovery(State(inner): State<Shared>) -> Response {
    let url = inner.lock().url.clone();
    axum::Json(json!({
        "issuer": url,
        "authorization_endpoint": format!("{url}/authorize"),
        "token_endpoint": format!("{url}/token"),
        "jwks_uri": format!("{url}/keys"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
    }))
    .into_response()
}

async fn keys(State(inner): State<Shared>) -> Response {
    let mut inner = inner.lock();
    inner.key_fetches += 1;
    let keys: Vec<Value> = inner.keys.iter().map(|k| k.jwk.clone()).collect();
    axum::Json(json!({ "keys": keys })).into_response()
}

fn bad(error: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({ "error": error })),
    )
        .into_response()
}

/// Logs the current user in and sends the browser back with a code and the state.
async fn authorize(
    State(inner): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let param = |name: &str| q.get(name).cloned().unwrap_or_default();
    let scopes = param("scope");
    if param("client_id") != CLIENT_ID
        || param("response_type") != "code"
        || param("code_challenge_method") != "S256"
        || param("code_challenge").is_empty()
        || !scopes.split(' ').any(|s| s == "openid")
    {
        return bad("invalid_request");
    }
    let code = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    let mut inner = inner.lock();
    let user = inner.user.clone();
    inner.codes.insert(
        code.clone(),
        Grant {
            redirect_uri: param("redirect_uri"),
            challenge: param("code_challenge"),
            nonce: param("nonce"),
            user,
        },
    );
    let mut back = url::Url::parse(&param("redirect_uri")).expect("a redirect URI");
    back.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &param("state"));
    (StatusCode::FOUND, [(header::LOCATION, back.to_string())]).into_response()
}

/// The code exchange: client secret (HTTP Basic), redirect URI and PKCE verifier.
async fn token(State(inner): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let basic = format!(
        "Basic {}",
        STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(&basic)
    {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let mut inner = inner.lock();
    inner.exchanges += 1;
    let Some(grant) = inner.codes.remove(&field("code")) else {
        return bad("invalid_grant");
    };
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(field("code_verifier").as_bytes()));
    if field("grant_type") != "authorization_code"
        || field("redirect_uri") != grant.redirect_uri
        || challenge != grant.challenge
    {
        return bad("invalid_grant");
    }
    let flaw = std::mem::replace(&mut inner.flaw, Flaw::None);
    let now = chrono::Utc::now().timestamp();
    let mut claims = json!({
        "iss": inner.url.clone(), "aud": CLIENT_ID, "sub": format!("id-{}", grant.user.email),
        "email": grant.user.email.clone(), "email_verified": true, "groups": grant.user.groups,
        "iat": now, "exp": now + 600, "nonce": grant.nonce,
    });
    match flaw {
        Flaw::Audience => claims["aud"] = json!("another-client"),
        Flaw::Expired => {
            claims["iat"] = json!(now - 3600);
            claims["exp"] = json!(now - 1800);
        }
        Flaw::Nonce => claims["nonce"] = json!("not-this-login"),
        Flaw::None | Flaw::UnpublishedKey => {}
    }
    let key = match flaw {
        Flaw::UnpublishedKey => &inner.rogue,
        _ => inner.keys.last().expect("a key"),
    };
    let id_token = sign(key, &claims);
    axum::Json(json!({"access_token": "opaque", "token_type": "Bearer", "expires_in": 600, "id_token": id_token}))
        .into_response()
}

fn sign(key: &Key, claims: &Value) -> String {
    let part = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).expect("JSON"));
    let input = format!(
        "{}.{}",
        part(&json!({"alg": "RS256", "typ": "JWT", "kid": key.kid})),
        part(claims)
    );
    let mut sig = vec![0; key.pair.public().modulus_len()];
    key.pair
        .sign(
            &RSA_PKCS1_SHA256,
            &SystemRandom::new(),
            input.as_bytes(),
            &mut sig,
        )
        .expect("signed");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
}
