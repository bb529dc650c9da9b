//! Authorization figures (issue #30): what people and permissions cost a request to
//! tether's API, against the in-process sandbox answering TokenReviews and
//! SubjectAccessReviews over HTTPS, through the real router.
//!
//! 1. per-request overhead with warm caches: a user's `GET /api/v1/apps/{app}` minus
//!    the operator's (API token, no review), median; target < 0.1 ms;
//! 2. cold: one SubjectAccessReview round trip (an empty decision cache);
//! 3. SubjectAccessReviews per page load (`GET /api/v1/apps?view=summary`) of 1,000
//!    apps in 40 namespaces, cold, for a user who may list Apps everywhere (one review
//!    per namespace) and one who may list them in one namespace only (one per
//!    namespace, plus one per app elsewhere); and the same load again, warm (none).
//!
//! 4. a browser's OIDC session (issue #30): verifying its cookie alone (HMAC and
//!    JSON, per request), and a warm `GET /api/v1/apps/{app}` with the cookie minus
//!    the operator's.
//!
//! `cargo bench --bench authz [-- --quick]` prints a table and writes
//! `target/bench-results/authz.json`; `--quick` runs fewer rounds.

#[path = "../tests/integration/dashboard_load.rs"]
#[allow(dead_code)]
mod dashboard_load;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use serde_json::json;
use tether_controller::config::ApiToken;
use tether_controller::config::OidcConfig;
use tether_controller::server::guard::Access;
use tether_controller::server::people::oidc::session::Session;
use tether_controller::server::people::oidc::{Oidc, unix_now};
use tether_controller::server::people::{People, User, Verb};
use tether_core::report::status::Statuses;
use tether_sandbox::{Sandbox, SandboxOptions};
use tower::ServiceExt as _;

use dashboard_load::NoWorkers;

const API_TOKEN: &str = "bench-operator";
const APPS: usize = 1000;
const NAMESPACES: usize = 40;
const SAR: &str = "authorization.k8s.io/subjectaccessreviews";

/// Session cookies verified per timed round: enough that the clock's resolution is
/// nothing beside them.
const VERIFICATIONS: u32 = 1_000;

/// An OIDC login as `tether serve` builds it; no issuer is asked (a session cookie is
/// checked with the session key alone).
fn bench_oidc() -> Oidc {
    let config = OidcConfig {
        issuer: "https://issuer.invalid".into(),
        client_id: "tether".into(),
        client_secret: None,
        redirect_url: "https://tether.invalid/oidc/callback".into(),
        scopes: vec!["openid".into()],
        username_claim: "email".into(),
        username_prefix: String::new(),
        groups_claim: None,
        groups_prefix: String::new(),
        session_key: None,
        session_ttl: tether_controller::config::DEFAULT_SESSION_TTL,
    };
    Oidc::new(config, Arc::new(Default::default())).expect("an OIDC login")
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

async fn get(router: &Router, path: &str, token: &str) -> Duration {
    send(router, path, ("authorization", format!("Bearer {token}"))).await
}

async fn send(router: &Router, path: &str, (name, value): (&str, String)) -> Duration {
    let request = axum::http::Request::get(path)
        .header(name, value)
        .body(axum::body::Body::empty())
        .expect("a request");
    let started = Instant::now();
    let answer = router.clone().oneshot(request).await.expect("an answer");
    let _ = axum::body::to_bytes(answer.into_body(), usize::MAX).await;
    started.elapsed()
}

/// team-00, and RBAC: `everywhere` may list Apps in every namespace, `one` only in
/// team-00.
fn rbac() -> Vec<serde_json::Value> {
    let role = |kind: &str, namespace: Option<&str>| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": "app-viewer", "namespace": namespace},
            "rules": [{"apiGroups": ["tether.dev"], "resources": ["apps"], "verbs": ["get", "list"]}]})
    };
    let binding = |kind: &str, namespace: Option<&str>, user: &str, role_kind: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": format!("{user}-viewer"), "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": "app-viewer"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]})
    };
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-00"}}),
        role("ClusterRole", None),
        binding("ClusterRoleBinding", None, "everywhere", "ClusterRole"),
        binding("RoleBinding", Some("team-00"), "one", "ClusterRole"),
    ]
}

async fn create(client: &kube::Client, object: &serde_json::Value) {
    let kind = object["kind"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"].as_str();
    let plural = format!("{}s", kind.to_lowercase());
    let path = match namespace {
        _ if kind == "Namespace" => "/api/v1/namespaces".to_string(),
        Some(ns) => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{plural}"),
        None => format!("/apis/rbac.authorization.k8s.io/v1/{plural}"),
    };
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(object).expect("JSON"))
        .expect("a request");
    client
        .request::<serde_json::Value>(request)
        .await
        .expect("created");
}

fn statuses() -> Statuses {
    let statuses = Statuses::default();
    for i in 0..APPS {
        statuses.update(&format!("team-{:02}.app-{i:04}", i % NAMESPACES), |_| {});
    }
    statuses
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 200 } else { 2000 };
    let cold_rounds = if quick { 20 } else { 200 };
    let sandbox = Sandbox::start(SandboxOptions::default())
        .await
        .expect("the sandbox starts");
    let client = sandbox.client().await.expect("a client");
    for object in rbac() {
        create(&client, &object).await;
    }
    for user in ["everywhere", "one"] {
        sandbox.add_static_token(&format!("{user}-token"), user, &[]);
    }
    let people = Arc::new(People::new(client.clone(), "tether-system".into()));
    let oidc = Arc::new(bench_oidc());
    let session = Session {
        sid: "bench".into(),
        user: "everywhere".into(),
        groups: vec!["system:authenticated".into()],
        exp: unix_now() + 3600,
    };
    let cookie = format!("tether_session={}", oidc.seal(&session));
    let access = Access {
        token: Some(ApiToken::new(API_TOKEN)),
        insecure_open_api: false,
        people: Some(people.clone()),
        oidc: Some(oidc.clone()),
    };
    let router = tether_controller::server::router(
        statuses(),
        Arc::new(NoWorkers),
        Router::new(),
        access,
        None,
    );

    // 1. Warm: the same request as the operator and as a user whose answers are kept.
    let path = "/api/v1/apps/team-00.app-0000";
    get(&router, path, "everywhere-token").await;
    let (mut operator, mut user) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        operator.push(get(&router, path, API_TOKEN).await.as_secs_f64() * 1e3);
        user.push(get(&router, path, "everywhere-token").await.as_secs_f64() * 1e3);
    }
    let (operator, user) = (median(operator), median(user));
    let warm_overhead = (user - operator).max(0.0);

    // 4. An OIDC session: its cookie verified alone, then a warm request with it.
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("cookie", cookie.parse().expect("a cookie header"));
    let mut verify = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        for _ in 0..VERIFICATIONS {
            std::hint::black_box(
                oidc.user(std::hint::black_box(&headers))
                    .expect("a session"),
            );
        }
        verify.push(started.elapsed().as_secs_f64() * 1e6 / VERIFICATIONS as f64);
    }
    let verify = median(verify);
    send(&router, path, ("cookie", cookie.clone())).await;
    let mut session_requests = Vec::new();
    for _ in 0..rounds {
        session_requests.push(
            send(&router, path, ("cookie", cookie.clone()))
                .await
                .as_secs_f64()
                * 1e3,
        );
    }
    let session_request = median(session_requests);
    let session_overhead = (session_request - operator).max(0.0);

    // 2. Cold: one SubjectAccessReview, each time with an empty cache.
    let known = Arc::new(User {
        name: "everywhere".into(),
        uid: String::new(),
        groups: vec!["system:authenticated".into()],
        extra: Default::default(),
    });
    let mut cold = Vec::new();
    for i in 0..cold_rounds {
        let fresh = People::new(client.clone(), "tether-system".into());
        let app = format!("team-00.app-{i:04}");
        let started = Instant::now();
        fresh
            .allowed(&known, Verb::Get, &app)
            .await
            .expect("a review");
        cold.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let cold = median(cold);

    // 3. Reviews per page load of 1,000 apps, cold then warm.
    let mut loads = Vec::new();
    for user in ["everywhere", "one"] {
        let token = format!("{user}-token");
        sandbox.reset_requests();
        let started = Instant::now();
        get(&router, "/api/v1/apps?view=summary", &token).await;
        let cold_ms = started.elapsed().as_secs_f64() * 1e3;
        let cold_reviews = sandbox.requests().get("create", SAR);
        sandbox.reset_requests();
        let started = Instant::now();
        get(&router, "/api/v1/apps?view=summary", &token).await;
        let warm_ms = started.elapsed().as_secs_f64() * 1e3;
        let warm_reviews = sandbox.requests().get("create", SAR);
        loads.push((user, cold_reviews, cold_ms, warm_reviews, warm_ms));
    }

    println!("{:<58} {:>12}", "figure", "value");
    println!(
        "{:<58} {:>9.4} ms {}",
        "warm per-request authorization overhead (median)",
        warm_overhead,
        if warm_overhead < 0.1 { "PASS" } else { "FAIL" }
    );
    println!("{:<58} {:>9.4} ms", "  operator request (median)", operator);
    println!("{:<58} {:>9.4} ms", "  user request, warm (median)", user);
    println!(
        "{:<58} {:>9.3} ms",
        "cold: one SubjectAccessReview (median)", cold
    );
    println!(
        "{:<58} {:>9.2} µs",
        "OIDC session cookie verification, warm (median)", verify
    );
    println!(
        "{:<58} {:>9.4} ms {}",
        "warm per-request overhead with a session cookie (median)",
        session_overhead,
        if session_overhead < 0.1 {
            "PASS"
        } else {
            "FAIL"
        }
    );
    for (user, cold_reviews, cold_ms, warm_reviews, warm_ms) in &loads {
        println!(
            "{:<58} {:>6} SARs, {:>8.1} ms",
            format!("page load, {APPS} apps / {NAMESPACES} namespaces, cold, user {user}"),
            cold_reviews,
            cold_ms
        );
        println!(
            "{:<58} {:>6} SARs, {:>8.1} ms",
            format!("  same page load, warm"),
            warm_reviews,
            warm_ms
        );
    }
    let results = json!({
        "quick": quick,
        "warm_overhead_ms": {"median": warm_overhead, "target": 0.1, "operator_ms": operator, "user_ms": user, "rounds": rounds},
        "cold_sar_ms": {"median": cold, "rounds": cold_rounds},
        "oidc_session": {"verify_us": verify, "verifications_per_round": VERIFICATIONS, "request_ms": session_request, "overhead_ms": session_overhead, "target_ms": 0.1, "rounds": rounds},
        "page_load": loads.iter().map(|(user, cold_reviews, cold_ms, warm_reviews, warm_ms)| json!({
            "user": user, "apps": APPS, "namespaces": NAMESPACES,
            "cold_sars": cold_reviews, "cold_ms": cold_ms,
            "warm_sars": warm_reviews, "warm_ms": warm_ms,
        })).collect::<Vec<_>>(),
    });
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), "authz.json", &results);
    sandbox.stop().await;
    if warm_overhead >= 0.1 || session_overhead >= 0.1 {
        std::process::exit(1);
    }
}
