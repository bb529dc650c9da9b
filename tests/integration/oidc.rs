//! Browser login with OIDC (issue #30) against `tether serve` as a process and an
//! issuer the test runs (`oidc_issuer`): the code flow with PKCE, then the session
//! cookie standing for the user, whose username and groups the sandbox's RBAC judges
//! through the same SubjectAccessReviews as bearer tokens. Driven over HTTP step by
//! step for the failure paths (audience, expiry, nonce, state, key rotation and an
//! unpublished key, a tampered cookie, logout), and through the real login page in
//! headless Chromium for what a person sees.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::{StatusCode, header};
use serde_json::{Value, json};
use tether_testkit::assert_contains;

use crate::oidc_issuer::{CLIENT_SECRET, Flaw, Issuer, TestUser};
use crate::people::{assert_forbidden, team_apps, team_origin, teams};
use crate::serve::Serve;
use crate::support::{TestSandbox, eventually};
use crate::webdriver::Browser;

const API_TOKEN: &str = "operator-break-glass";

/// team-a's viewers (a group of the issuer) may see its Apps; joe may also change them.
/// (They bind [`APP_ROLES`].)
const RBAC: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewers, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-viewer}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'oidc:team-a-viewers'}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: operators, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-operator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: 'oidc:joe@example.com'}
";

fn user(email: &str, groups: &[&str]) -> TestUser {
    TestUser {
        email: email.to_string(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

fn jane() -> TestUser {
    user("jane@example.com", &["team-a-viewers"])
}

/// A sandbox with Apps in team-a and team-b, an issuer logging `first` in, and
/// `tether serve` with `server.oidc` on a port fixed before it starts (the redirect
/// URL names it).
struct Fixture {
    sandbox: TestSandbox,
    issuer: Issuer,
    serve: Serve,
}

async fn fixture(name: &str, first: TestUser) -> Fixture {
    let sandbox = TestSandbox::start().await;
    teams(&sandbox, RBAC).await;
    let origin = team_origin(&sandbox, &[]);
    let issuer = Issuer::start(first).await;
    let dir = sandbox.dir.path();
    let token_file = dir.join("api-token");
    std::fs::write(&token_file, API_TOKEN).expect("write the token");
    let secret_file = dir.join("client-secret");
    std::fs::write(&secret_file, CLIENT_SECRET).expect("write the secret");
    let port = tether_testkit::free_port();
    let config = format!(
        "server:
  listen: 127.0.0.1:{port}
  apiToken: {{secretFile: {}}}
  outbound: {{allowedNetworks: [127.0.0.1]}}
  oidc:
    issuer: {}
    clientID: tether
    clientSecret: {{secretFile: {}}}
    redirectURL: http://127.0.0.1:{port}/oidc/callback
    scopes: [openid, email, groups]
    usernameClaim: email
    usernamePrefix: 'oidc:'
    groupsClaim: groups
    groupsPrefix: 'oidc:'
",
        token_file.display(),
        issuer.url,
        secret_file.display()
    );
    let serve = Serve::start(&sandbox, name, &config, &[]).await;
    team_apps(&sandbox, &origin.url).await;
    let http = reqwest::Client::new();
    eventually("the operator sees both apps synced", || async {
        let list: Value = http
            .get(format!("{}/api/v1/apps", serve.url))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let apps = list["apps"].as_array()?;
        (apps.len() == 2 && apps.iter().all(|a| a["sync"] == "Synced")).then_some(())
    })
    .await;
    Fixture {
        sandbox,
        issuer,
        serve,
    }
}

/// A browser's steps, one request at a time (no redirect followed, cookies by hand).
struct Steps {
    url: String,
    http: reqwest::Client,
}

/// The value `response` sets cookie `name` to.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap_or_default().to_string())
}

fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .expect("a Location")
        .to_string()
}

impl Steps {
    fn new(url: &str) -> Steps {
        Steps {
            url: url.to_string(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("a client"),
        }
    }

    /// To the issuer and back: the login cookie and the callback URL it answered.
    async fn to_issuer_and_back(&self) -> (String, String) {
        let start = self
            .http
            .get(format!("{}/oidc/login", self.url))
            .send()
            .await
            .expect("an answer");
        assert_eq!(start.status(), StatusCode::SEE_OTHER);
        let login = set_cookie(&start, "tether_login").expect("a login cookie");
        let authorize = location(&start);
        assert_contains(&authorize, "code_challenge_method=S256");
        let back = self.http.get(&authorize).send().await.expect("the issuer");
        assert_eq!(back.status(), StatusCode::FOUND);
        (login, location(&back))
    }

    async fn callback(&self, callback: &str, login: Option<&str>) -> reqwest::Response {
        let mut request = self.http.get(callback);
        if let Some(login) = login {
            request = request.header(header::COOKIE, format!("tether_login={login}"));
        }
        request.send().await.expect("an answer")
    }

    /// A whole login: the session cookie, or the callback's status and page.
    async fn login(&self) -> Result<String, (StatusCode, String)> {
        let (login, callback) = self.to_issuer_and_back().await;
        let answer = self.callback(&callback, Some(&login)).await;
        match set_cookie(&answer, "tether_session") {
            Some(session) if answer.status() == StatusCode::SEE_OTHER => Ok(session),
            _ => Err((answer.status(), answer.text().await.unwrap_or_default())),
        }
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        session: &str,
    ) -> (StatusCode, Value) {
        let answer = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header(header::COOKIE, format!("tether_session={session}"))
            .header(header::ORIGIN, &self.url)
            .header(header::CONTENT_TYPE, "application/json")
            .send()
            .await
            .expect("an answer");
        let status = answer.status();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    async fn names(&self, session: &str) -> Vec<String> {
        let (status, list) = self
            .call(reqwest::Method::GET, "/api/v1/apps", session)
            .await;
        assert_eq!(status, StatusCode::OK, "{list}");
        let mut names: Vec<String> = list["apps"]
            .as_array()
            .expect("apps")
            .iter()
            .filter_map(|a| a["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    }

    /// A login that fails at the callback, with what the page says.
    async fn refused(&self) -> (StatusCode, String) {
        self.login().await.expect_err("the login is refused")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oidc_login_stands_for_the_user_rbac_judges_and_refuses_what_is_wrong() {
    let Fixture {
        sandbox,
        issuer,
        serve,
    } = fixture("oidc-http", jane()).await;
    let steps = Steps::new(&serve.url);
    let post = reqwest::Method::POST;

    // The dashboard's page sends a browser without a session to the login page;
    // `?token` still opens it for the API token.
    let page = steps
        .http
        .get(format!("{}/", serve.url))
        .send()
        .await
        .expect("/");
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&page), "/login");
    let with_token = steps
        .http
        .get(format!("{}/?token", serve.url))
        .send()
        .await
        .expect("/");
    assert_eq!(with_token.status(), StatusCode::OK);

    // jane, of the viewers group: team-a's app only, and no sync.
    let jane_session = steps.login().await.expect("jane logs in");
    assert_eq!(steps.names(&jane_session).await, ["team-a.web"]);
    let (_, me) = steps
        .call(reqwest::Method::GET, "/oidc/session", &jane_session)
        .await;
    assert_eq!(
        me,
        json!({"user": "oidc:jane@example.com", "groups": ["oidc:team-a-viewers"]})
    );
    assert_forbidden(
        steps
            .call(post.clone(), "/api/v1/apps/team-a.web/sync", &jane_session)
            .await,
        "oidc:jane@example.com may view app \"team-a.web\" but not sync it: needs patch on apps.tether.dev in team-a",
    );
    // A cookie rides along on another site's request too: that is refused.
    let cross = steps
        .http
        .post(format!("{}/api/v1/apps/team-a.web/sync", serve.url))
        .header(header::COOKIE, format!("tether_session={jane_session}"))
        .header(header::ORIGIN, "http://evil.example")
        .send()
        .await
        .expect("an answer");
    assert_eq!(cross.status(), StatusCode::FORBIDDEN);

    // joe may sync team-a's app, and the Event names him.
    issuer.log_in_as(user("joe@example.com", &[]));
    let joe_session = steps.login().await.expect("joe logs in");
    let (status, answer) = eventually("joe's sync finds its app", || async {
        let (status, body) = steps
            .call(post.clone(), "/api/v1/apps/team-a.web/sync", &joe_session)
            .await;
        (status != StatusCode::NOT_FOUND).then_some((status, body))
    })
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let (status, _) = steps
        .call(post.clone(), "/api/v1/apps/team-b.api/sync", &joe_session)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    eventually("joe's sync is an Event on the App", || async {
        let list = sandbox
            .get("/apis/events.k8s.io/v1/namespaces/team-a/events")
            .await
            .json();
        list["items"]
            .as_array()?
            .iter()
            .any(|e| {
                e["regarding"]["name"] == "web"
                    && e["note"] == "sync by oidc:joe@example.com through tether's API"
            })
            .then_some(())
    })
    .await;
    // Someone no binding names sees nothing.
    issuer.log_in_as(user("nobody@example.com", &["elsewhere"]));
    let nobody = steps.login().await.expect("nobody logs in");
    assert!(steps.names(&nobody).await.is_empty());

    // ID tokens that are wrong in one way each.
    issuer.log_in_as(jane());
    for (flaw, says) in [
        (Flaw::Audience, "not for this client"),
        (Flaw::Expired, "the ID token expired"),
        (Flaw::Nonce, "does not answer this login"),
    ] {
        issuer.flaw_next(flaw);
        let (status, page) = steps.refused().await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{flaw:?}: {page}");
        assert!(page.contains(says), "{flaw:?}: {page}");
    }
    // A callback whose state is not this browser's, or without the login cookie.
    let (login, callback) = steps.to_issuer_and_back().await;
    let forged = url::Url::parse(&callback).expect("a URL");
    let mut other = forged.clone();
    other
        .query_pairs_mut()
        .clear()
        .extend_pairs(forged.query_pairs().map(|(k, v)| {
            if k == "state" {
                (k, "attacker".into())
            } else {
                (k, v)
            }
        }));
    let answer = steps.callback(other.as_str(), Some(&login)).await;
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    assert!(
        answer
            .text()
            .await
            .expect("a page")
            .contains("state does not match")
    );
    let answer = steps.callback(&callback, None).await;
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    assert!(
        answer
            .text()
            .await
            .expect("a page")
            .contains("not started in this browser")
    );

    // The issuer rotates its key: the unknown kid makes tether fetch the keys again.
    let fetches = issuer.key_fetches();
    issuer.rotate();
    steps.login().await.expect("a login after the rotation");
    assert_eq!(issuer.key_fetches(), fetches + 1);
    // A key the issuer never published: refused, and no second fetch so soon.
    issuer.flaw_next(Flaw::UnpublishedKey);
    let (status, page) = steps.refused().await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(page.contains("names key &quot;rogue&quot;"), "{page}");
    assert_eq!(issuer.key_fetches(), fetches + 1);

    // A session cookie changed by its holder is no one's.
    let (payload, mac) = joe_session.split_once('.').expect("two parts");
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64")).expect("JSON");
    claims["user"] = json!("oidc:admin@example.com");
    claims["groups"] = json!(["system:masters"]);
    let tampered = format!("{}.{mac}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    let (status, _) = steps
        .call(reqwest::Method::GET, "/api/v1/apps", &tampered)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Logout ends the session at once, the cookie kept or not.
    let out = steps
        .http
        .get(format!("{}/logout", serve.url))
        .header(header::COOKIE, format!("tether_session={joe_session}"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert_eq!(set_cookie(&out, "tether_session").as_deref(), Some(""));
    let (status, _) = steps
        .call(reqwest::Method::GET, "/api/v1/apps", &joe_session)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The operator's token still works.
    let operator = steps
        .http
        .get(format!("{}/api/v1/apps", serve.url))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .expect("an answer");
    assert_eq!(operator.status(), StatusCode::OK);

    // Nothing secret reached the log: sessions, the code, the client secret.
    let log = serve.log();
    let code = url::Url::parse(&callback)
        .expect("a URL")
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.to_string())
        .expect("a code");
    for secret in [
        &jane_session,
        &joe_session,
        &code,
        &CLIENT_SECRET.to_string(),
    ] {
        assert!(!log.contains(secret.as_str()), "a secret was logged");
    }
    assert!(log.contains("logged in with OIDC"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_logs_in_through_the_page_sees_their_apps_and_is_told_what_they_may_not_do() {
    let fixture = fixture("oidc-browser", jane()).await;
    let browser = Browser::start().await;
    browser.goto(&format!("{}/", fixture.serve.url)).await;
    browser
        .wait_until(
            "the login page",
            "return document.getElementById('oidc-login') !== null",
        )
        .await;
    browser.click("#oidc-login").await;
    // Through the issuer and back to the dashboard: team-a's app, not team-b's.
    browser
        .wait_until(
            "the dashboard with team-a's app",
            "return document.querySelector('tr[data-app=\"team-a.web\"]') !== null",
        )
        .await;
    let rows = browser
        .run("return [...document.querySelectorAll('tr[data-app]')].map(r => r.dataset.app)")
        .await;
    assert_eq!(rows, json!(["team-a.web"]));
    let who = browser
        .wait_until("who is logged in", "const w = document.getElementById('who'); return w && !w.hidden ? w.textContent : null")
        .await;
    assert_eq!(who, "oidc:jane@example.com");
    // Sync from the app's page is refused, saying what is missing.
    browser
        .goto(&format!("{}/#/apps/team-a.web", fixture.serve.url))
        .await;
    browser
        .wait_until(
            "the app's page",
            "return document.getElementById('sync') !== null",
        )
        .await;
    browser.click("#sync").await;
    let notice = browser
        .wait_until("the refusal", "const n = document.getElementById('notice'); return n && n.textContent.includes('refused') ? n.textContent : null")
        .await;
    assert!(
        notice
            .as_str()
            .is_some_and(|n| n.contains("needs patch on apps.tether.dev in team-a")),
        "{notice}"
    );
    // Logging out leads back to the login page, and the dashboard asks again.
    browser.click("#logout").await;
    browser
        .wait_until(
            "the login page again",
            "return document.getElementById('oidc-login') !== null",
        )
        .await;
    browser.goto(&format!("{}/", fixture.serve.url)).await;
    browser
        .wait_until(
            "the login page, not the dashboard",
            "return location.pathname === '/login'",
        )
        .await;
    assert_eq!(fixture.issuer.exchanges(), 1);
}
