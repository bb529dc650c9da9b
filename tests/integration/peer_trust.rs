//! Issue #24, finding 4: a forged member Lease and forged shard Leases against a
//! sharded `tether serve` with an API token. The forged member's URL is a listener on
//! loopback that answers with an invented status. Written as the issue did (by a client
//! other than tether), the member is refused: the listener is never called. Written
//! with tether's field manager name borrowed, it is called, but with a peer signature
//! and no token, and its unsigned answer is not believed. Either way the status the API
//! shows is not the listener's, and the shards, forged with `leaseDurationSeconds:
//! 3600`, are taken back after the configured lease duration.

use std::sync::Arc;
use std::time::Duration;
use tether_testkit::assert_contains;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::serve::{Serve, configmap, server_section_with_token, with_origin};
use crate::support::{POLL_TIMEOUT, TestSandbox, eventually};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/tether-system/leases";
const API_TOKEN: &str = "api-t0ken-for-peers-test";
const PEER_TOKEN: &str = "peer-t0ken-for-peers-test";
const INVENTED: &str = "invented by the listener";

/// A loopback listener that records every byte it is sent and answers every request
/// with an invented list of apps, as a forged peer would.
async fn listener() -> (String, Arc<Mutex<Vec<u8>>>) {
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}", socket.local_addr().expect("an address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = socket.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 8192];
                let Ok(n) = stream.read(&mut buffer).await else {
                    return;
                };
                record.lock().extend_from_slice(&buffer[..n]);
                let body =
                    json!({"apps": [{"name": "web", "sync": "Synced", "message": INVENTED}]})
                        .to_string();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    (url, seen)
}

fn member_lease(url: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "tether-member-evil",
            "labels": {"app.kubernetes.io/managed-by": "tether", "tether.dev/role": "member"},
            "annotations": {"tether.dev/status-url": url},
        },
        "spec": {"holderIdentity": "evil", "leaseDurationSeconds": 3600},
    })
}

/// Each shard Lease's holder.
async fn shard_holders(sandbox: &TestSandbox) -> Vec<Option<String>> {
    (0..2)
        .map(|i| format!("{LEASES}/tether-shard-{i}"))
        .map(|path| async move {
            let lease = sandbox.get(&path).await.json();
            lease["spec"]["holderIdentity"].as_str().map(str::to_string)
        })
        .collect::<futures::future::JoinAll<_>>()
        .await
}

/// Both shard Leases rewritten as held by `evil` for an hour.
async fn forge_shards(sandbox: &TestSandbox) {
    for i in 0..2 {
        let path = format!("{LEASES}/tether-shard-{i}");
        let mut lease = sandbox.get(&path).await.json();
        lease["spec"]["holderIdentity"] = json!("evil");
        lease["spec"]["leaseDurationSeconds"] = json!(3600);
        let answer = sandbox.put(&path, &lease).await;
        assert!(answer.status.is_success(), "{}", answer.text());
    }
}

/// Polls the app list, as a user with the token, until both shards are ours again:
/// every answer must be free of the invented status, and while `evil` held a shard
/// the app it holds must say it cannot be read.
async fn watch_until_retaken(sandbox: &TestSandbox, serve: &Serve, me: &str) -> bool {
    let client = reqwest::Client::new();
    let mut saw_evil = false;
    let deadline = tokio::time::Instant::now() + POLL_TIMEOUT;
    loop {
        let answer = client
            .get(format!("{}/api/v1/apps", serve.url))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .expect("an answer");
        let text = answer.text().await.expect("a body");
        assert!(
            !text.contains(INVENTED),
            "the listener's status was shown: {text}"
        );
        let body: Value = serde_json::from_str(&text).expect("JSON");
        if let Some(app) = body["apps"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["owner"] == "evil")
        {
            saw_evil = true;
            assert_eq!(app["sync"], "Unknown", "{app}");
        }
        let holders = shard_holders(sandbox).await;
        if holders.iter().all(|h| h.as_deref() == Some(me)) {
            return saw_evil;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the forged shards were not taken back: {holders:?}\n{}",
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_member_lease_gets_no_token_shows_no_status_and_holds_no_shard() {
    let (sandbox, origin) = with_origin(
        "peers",
        &[("web/cm.yaml", &configmap("web", "peers", "v1"))],
    )
    .await;
    let dir = sandbox.dir.path();
    let server = server_section_with_token(dir, API_TOKEN);
    let peer = dir.join("peer-token");
    std::fs::write(&peer, PEER_TOKEN).expect("write the token");
    let config = format!(
        "{server}  peerToken: {{secretFile: {}}}\nshards: 2\nleaderElection: {{leaseDuration: 2s, renewDeadline: 1500ms, retryPeriod: 300ms}}\napps:\n- name: web\n  source: {{repo: \"{}\", ref: main, path: web, interval: 1h}}\n  destination: {{namespace: peers}}\n",
        peer.display(),
        origin.url
    );
    let serve = Serve::start(&sandbox, "peers", &config, &[]).await;
    let me = eventually("the replica holds both shards", || async {
        let holders = shard_holders(&sandbox).await;
        let first = holders[0].clone()?;
        holders
            .iter()
            .all(|h| h.as_ref() == Some(&first))
            .then_some(first)
    })
    .await;

    // As the issue wrote them: by a client that is not tether.
    let (url, seen) = listener().await;
    let created = sandbox.post(LEASES, &member_lease(&url)).await;
    assert!(created.status.is_success(), "{}", created.text());
    forge_shards(&sandbox).await;
    assert!(
        watch_until_retaken(&sandbox, &serve, &me).await,
        "no answer showed the app held by evil"
    );
    assert!(seen.lock().is_empty(), "the forged member's URL was called");
    assert!(serve.log().contains("a member Lease is not tether's own"));

    // Written with tether's field manager name: called, but as a peer, and not believed.
    let path = format!("{LEASES}/tether-member-evil");
    assert!(sandbox.delete(&path).await.status.is_success());
    let borrowed = sandbox
        .post(
            &format!("{LEASES}?fieldManager=tether"),
            &member_lease(&url),
        )
        .await;
    assert!(borrowed.status.is_success(), "{}", borrowed.text());
    forge_shards(&sandbox).await;
    watch_until_retaken(&sandbox, &serve, &me).await;
    let received = String::from_utf8_lossy(&seen.lock()).to_string();
    for secret in [API_TOKEN, PEER_TOKEN] {
        assert!(
            !received.contains(secret),
            "the listener got a token:\n{received}"
        );
    }
    assert!(
        !received.to_ascii_lowercase().contains("authorization"),
        "{received}"
    );
    assert_contains(&serve.log(), "did not answer as a peer");
}
