//! Webhooks through the real axum router over HTTP: each provider's signature scheme and
//! documented payloads (files under `tests/fixtures/webhooks/`, from the providers'
//! docs), which sources each delivery wakes, and what the answer may say.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::Path;
use tether_core::source::{
    Provider, Source, Triggers, WebhookConfig, WebhookSecret, WebhookState, webhook_router,
};
use tower::ServiceExt;

const SECRET: &str = "It's a Secret to Everybody";

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/webhooks")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn sign(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("hmac");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

pub(crate) fn signed_config() -> WebhookConfig {
    let mut c = WebhookConfig::default();
    for p in [
        Provider::Github,
        Provider::Gitlab,
        Provider::Gitea,
        Provider::Bitbucket,
        Provider::Generic,
    ] {
        c = c.with_secret(p, WebhookSecret::new(SECRET));
    }
    c
}

/// Sources registered under URL spellings different from the payloads'.
const SOURCES: &[(&str, &str)] = &[
    ("git@github.com:codertocat/hello-world.git", "main"),
    ("ssh://git@example.com/mike/diaspora", "main"),
    ("https://EXAMPLE.com/jsmith/example", "v1.0.0"),
    ("https://example.com/gitlabhq/gitlab-test.git", "main"),
    ("http://localhost:3000/gitea/webhooks", "main"),
    ("git@bitbucket.org:team_name/repo_name.git", "main"),
    (
        "https://git.example.com/platform/deployments",
        "refs/heads/main",
    ),
    // Bitbucket Data Center, by http (project key as users type it) and by ssh.
    (
        "https://bitbucket.example.com/scm/PROJ/repository.git",
        "master",
    ),
    (
        "ssh://git@bitbucket.example.com:7999/proj/repository.git",
        "refs/heads/master",
    ),
    // Another project with a repository of the same slug: never woken by PROJ's pushes.
    (
        "https://bitbucket.example.com/scm/web/repository.git",
        "master",
    ),
    // Gogs, with a token in the URL the answer must never show.
    (
        "http://deploy:gogs-TOKEN-1@localhost:3000/unknwon/webhooks.git",
        "develop",
    ),
];

fn registered() -> (Triggers, Vec<Source>) {
    let t = Triggers::new();
    let sources: Vec<Source> = SOURCES
        .iter()
        .map(|(url, reference)| Source::new(*url, *reference, "deploy"))
        .collect();
    for s in &sources {
        t.register(s);
    }
    (t, sources)
}

fn fired(triggers: &Triggers, sources: &[Source]) -> Vec<u64> {
    sources
        .iter()
        .map(|s| triggers.register(s).fired())
        .collect()
}

pub(crate) async fn post(
    router: &axum::Router,
    path: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (StatusCode, String) {
    let mut req = Request::post(path).header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = router
        .clone()
        .oneshot(req.body(Body::from(body)).expect("request"))
        .await
        .expect("response");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
}

/// How each endpoint's provider signs a body and names an event.
pub(crate) fn headers_for(endpoint: &str, event: &str, body: &[u8]) -> Vec<(&'static str, String)> {
    match endpoint {
        "/webhooks/github" => vec![
            ("x-github-event", event.to_string()),
            ("x-hub-signature-256", format!("sha256={}", sign(body))),
        ],
        "/webhooks/gitlab" => vec![
            ("x-gitlab-event", event.to_string()),
            ("x-gitlab-token", SECRET.to_string()),
        ],
        "/webhooks/gitea" => vec![
            ("x-gitea-event", event.to_string()),
            ("x-gitea-signature", sign(body)),
        ],
        "/webhooks/gogs" => vec![
            ("x-gogs-event", event.to_string()),
            ("x-gogs-signature", sign(body)),
        ],
        "/webhooks/bitbucket" => vec![
            ("x-event-key", event.to_string()),
            ("x-hub-signature", format!("sha256={}", sign(body))),
        ],
        "/webhooks/generic" => vec![("x-signature", format!("sha256={}", sign(body)))],
        other => panic!("no endpoint {other}"),
    }
}

/// Every accepted delivery: endpoint, event, fixture, the sources (indexes into
/// [`SOURCES`]) it must wake and the ref it moved.
const ACCEPTED: &[(&str, &str, &str, &[usize], &str)] = &[
    (
        "/webhooks/github",
        "push",
        "github-push.json",
        &[0],
        "refs/heads/main",
    ),
    (
        "/webhooks/github",
        "pull_request",
        "github-pull_request-merged.json",
        &[0],
        "refs/heads/main",
    ),
    (
        "/webhooks/gitlab",
        "Push Hook",
        "gitlab-push.json",
        &[1],
        "refs/heads/main",
    ),
    (
        "/webhooks/gitlab",
        "Tag Push Hook",
        "gitlab-tag_push.json",
        &[2],
        "refs/tags/v1.0.0",
    ),
    (
        "/webhooks/gitlab",
        "Merge Request Hook",
        "gitlab-merge_request-merged.json",
        &[3],
        "refs/heads/main",
    ),
    (
        "/webhooks/gitea",
        "push",
        "gitea-push.json",
        &[4],
        "refs/heads/main",
    ),
    (
        "/webhooks/gitea",
        "pull_request",
        "gitea-pull_request-merged.json",
        &[4],
        "refs/heads/main",
    ),
    (
        "/webhooks/gogs",
        "push",
        "gogs-push.json",
        &[10],
        "refs/heads/develop",
    ),
    (
        "/webhooks/bitbucket",
        "repo:push",
        "bitbucket-repo-push.json",
        &[5],
        "refs/heads/main",
    ),
    (
        "/webhooks/bitbucket",
        "pullrequest:fulfilled",
        "bitbucket-pullrequest-fulfilled.json",
        &[5],
        "refs/heads/main",
    ),
    (
        "/webhooks/bitbucket",
        "repo:refs_changed",
        "bitbucket-server-refs_changed.json",
        &[7, 8],
        "refs/heads/master",
    ),
    (
        "/webhooks/bitbucket",
        "pr:merged",
        "bitbucket-server-pr_merged.json",
        &[7, 8],
        "refs/heads/master",
    ),
    (
        "/webhooks/generic",
        "",
        "generic-push.json",
        &[6],
        "refs/heads/main",
    ),
];

#[tokio::test]
async fn each_provider_wakes_exactly_the_sources_its_push_or_merge_names() {
    let (triggers, sources) = registered();
    let router = webhook_router(WebhookState::new(signed_config(), triggers.clone()));
    for (endpoint, event, file, woken, moved) in ACCEPTED {
        let before = fired(&triggers, &sources);
        let body = fixture(file);
        let headers = headers_for(endpoint, event, &body);
        let (status, text) = post(&router, endpoint, &headers, body).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{file}: {text}");
        let answer = json(&text);
        assert_eq!(answer["status"], "accepted", "{file}: {text}");
        assert_eq!(answer["matched"], woken.len(), "{file}: {text}");
        assert_eq!(answer["refs"], serde_json::json!([moved]), "{file}: {text}");
        let after = fired(&triggers, &sources);
        for (i, source) in sources.iter().enumerate() {
            let want = before[i] + u64::from(woken.contains(&i));
            assert_eq!(after[i], want, "{file}: {}", source.url);
        }
    }
}

#[tokio::test]
async fn answers_never_echo_source_urls_or_their_credentials() {
    let (triggers, sources) = registered();
    let router = webhook_router(WebhookState::new(signed_config(), triggers));
    for (endpoint, event, file, _, _) in ACCEPTED {
        let body = fixture(file);
        let headers = headers_for(endpoint, event, &body);
        let (_, text) = post(&router, endpoint, &headers, body).await;
        assert!(!text.contains("://"), "{file}: {text}");
        assert!(!text.contains("gogs-TOKEN-1"), "{file}: {text}");
        for s in &sources {
            let key = s.repo_key().host_path;
            assert!(
                !text.to_lowercase().contains(&key),
                "{file} names {key}: {text}"
            );
        }
    }
}

#[tokio::test]
async fn gogs_deliveries_are_accepted_on_the_gitea_endpoint_too() {
    let (triggers, sources) = registered();
    let router = webhook_router(WebhookState::new(signed_config(), triggers.clone()));
    let body = fixture("gogs-push.json");
    let headers = headers_for("/webhooks/gogs", "push", &body);
    let (status, text) = post(&router, "/webhooks/gitea", &headers, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{text}");
    assert_eq!(triggers.register(&sources[10]).fired(), 1);

    // Forgejo's own header names, on the same endpoint.
    let body = fixture("gitea-push.json");
    let headers = vec![
        ("x-forgejo-event", "push".to_string()),
        ("x-forgejo-signature", sign(&body)),
    ];
    let (status, _) = post(&router, "/webhooks/gitea", &headers, body).await;
    assert_eq!(status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn tampered_missing_and_wrong_signatures_are_401() {
    let (triggers, sources) = registered();
    let router = webhook_router(WebhookState::new(signed_config(), triggers.clone()));
    for (endpoint, event, file, _, _) in ACCEPTED {
        let body = fixture(file);
        let headers = headers_for(endpoint, event, &body);

        // Tampered: the signature is for the original body. (GitLab sends a token,
        // not a signature: a changed body cannot be told apart.)
        if *endpoint != "/webhooks/gitlab" {
            let mut tampered = body.clone();
            let at = tampered.iter().position(|b| *b == b'm').expect("an m");
            tampered[at] = b'M';
            let (status, text) = post(&router, endpoint, &headers, tampered).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{file} tampered: {text}");
        }

        // Missing signature header.
        let unsigned: Vec<_> = headers
            .iter()
            .filter(|(k, _)| k.contains("event") || k.contains("key"))
            .cloned()
            .collect();
        let (status, text) = post(&router, endpoint, &unsigned, body.clone()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{file} unsigned: {text}");

        // Wrong secret.
        let wrong: Vec<_> = headers
            .iter()
            .map(|(k, v)| match *k {
                "x-gitlab-token" => (*k, "wrong-token".to_string()),
                k if k.contains("signature") && v.starts_with("sha256=") => {
                    (k, format!("sha256={}", "0".repeat(64)))
                }
                k if k.contains("signature") => (k, "0".repeat(64)),
                k => (k, v.clone()),
            })
            .collect();
        let (status, text) = post(&router, endpoint, &wrong, body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{file} wrong: {text}");
        assert!(!text.contains(SECRET), "{text}");
    }
    assert!(
        fired(&triggers, &sources).iter().all(|n| *n == 0),
        "no refused delivery woke a source"
    );
}

#[tokio::test]
async fn non_push_events_and_payloads_matching_no_source_are_200_with_a_reason() {
    let (triggers, sources) = registered();
    let router = webhook_router(WebhookState::new(signed_config(), triggers.clone()));
    for (endpoint, event, file) in [
        ("/webhooks/github", "ping", "github-ping.json"),
        ("/webhooks/github", "issues", "github-issues.json"),
        ("/webhooks/gitlab", "Issue Hook", "gitlab-issue.json"),
        (
            "/webhooks/bitbucket",
            "issue:created",
            "bitbucket-issue-created.json",
        ),
    ] {
        let body = fixture(file);
        let headers = headers_for(endpoint, event, &body);
        let (status, text) = post(&router, endpoint, &headers, body).await;
        assert_eq!(status, StatusCode::OK, "{file}: {text}");
        let answer = json(&text);
        assert_eq!(answer["status"], "ignored", "{file}: {text}");
        assert!(!answer["reason"].as_str().unwrap_or("").is_empty());
    }

    // A Gitea pull request closed without merging moves nothing.
    let mut closed: serde_json::Value =
        serde_json::from_slice(&fixture("gitea-pull_request-merged.json")).expect("json");
    closed["pull_request"]["merged"] = serde_json::Value::Bool(false);
    let body = serde_json::to_vec(&closed).expect("json");
    let headers = headers_for("/webhooks/gitea", "pull_request", &body);
    let (status, text) = post(&router, "/webhooks/gitea", &headers, body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains("not merged"), "{text}");

    // A push to a branch nobody follows.
    let body =
        br#"{"repository":"https://git.example.com/platform/deployments","ref":"refs/heads/dev"}"#
            .to_vec();
    let headers = headers_for("/webhooks/generic", "", &body);
    let (status, text) = post(&router, "/webhooks/generic", &headers, body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(
        json(&text)["reason"]
            .as_str()
            .unwrap_or("")
            .contains("no source")
    );
    assert!(fired(&triggers, &sources).iter().all(|n| *n == 0));

    // A Bitbucket Data Center push of a project no source follows: only the other
    // project's repository of the same slug is registered.
    let only_other = Triggers::new();
    let other = Source::new(SOURCES[9].0, SOURCES[9].1, "deploy");
    only_other.register(&other);
    let router = webhook_router(WebhookState::new(signed_config(), only_other.clone()));
    for (event, file) in [
        ("repo:refs_changed", "bitbucket-server-refs_changed.json"),
        ("pr:merged", "bitbucket-server-pr_merged.json"),
    ] {
        let body = fixture(file);
        let headers = headers_for("/webhooks/bitbucket", event, &body);
        let (status, text) = post(&router, "/webhooks/bitbucket", &headers, body).await;
        assert_eq!(status, StatusCode::OK, "{file}: {text}");
        assert_eq!(json(&text)["status"], "ignored", "{file}: {text}");
    }
    assert_eq!(only_other.register(&other).fired(), 0);
}

#[tokio::test]
async fn bad_bodies_are_400_and_big_ones_413_and_unconfigured_secrets_401() {
    let config = WebhookConfig {
        body_limit: 4096,
        ..signed_config()
    };
    let (triggers, _) = registered();
    let router = webhook_router(WebhookState::new(config, triggers));
    let body = b"this is not json".to_vec();
    let headers = headers_for("/webhooks/github", "push", &body);
    let (status, _) = post(&router, "/webhooks/github", &headers, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let body = br#"{"zen":"no ref, no repository"}"#.to_vec();
    let headers = headers_for("/webhooks/github", "push", &body);
    let (status, _) = post(&router, "/webhooks/github", &headers, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // A Data Center push that names no repository at all.
    let body =
        br#"{"eventKey":"repo:refs_changed","changes":[{"refId":"refs/heads/master"}]}"#.to_vec();
    let headers = headers_for("/webhooks/bitbucket", "repo:refs_changed", &body);
    let (status, _) = post(&router, "/webhooks/bitbucket", &headers, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let body = vec![b' '; 8192];
    let headers = headers_for("/webhooks/github", "push", &body);
    let (status, _) = post(&router, "/webhooks/github", &headers, body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // No secret configured: refused unless unsigned deliveries were allowed.
    let (triggers, _) = registered();
    let router = webhook_router(WebhookState::new(WebhookConfig::default(), triggers));
    let body = fixture("generic-push.json");
    let (status, _) = post(&router, "/webhooks/generic", &[], body.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let gogs = fixture("gogs-push.json");
    let headers = headers_for("/webhooks/gogs", "push", &gogs);
    let (status, _) = post(&router, "/webhooks/gogs", &headers, gogs).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "Gogs needs the Gitea secret"
    );
    let open = WebhookConfig {
        allow_unsigned: true,
        ..WebhookConfig::default()
    };
    let (triggers, _) = registered();
    let router = webhook_router(WebhookState::new(open, triggers));
    let (status, _) = post(&router, "/webhooks/generic", &[], body).await;
    assert_eq!(status, StatusCode::ACCEPTED);
}
