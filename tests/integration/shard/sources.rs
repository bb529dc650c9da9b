//! Sources under shards: a replica fetches only the repositories of the apps it
//! holds (a recording proxy in front of the git daemon counts), and a webhook to one
//! replica wakes every holder's sources.

use super::*;

/// The repositories asked for through a proxy in front of a `git daemon`, in order:
/// one replica's Git traffic, which the daemon, seeing only 127.0.0.1, cannot tell
/// apart from another's.
#[derive(Clone, Default)]
struct GitRequests(std::sync::Arc<parking_lot::Mutex<Vec<String>>>);

impl GitRequests {
    fn take(&self) -> BTreeSet<String> {
        std::mem::take(&mut *self.0.lock()).into_iter().collect()
    }
}

/// A TCP proxy to the daemon on `daemon_port` recording the repository each
/// connection asks for (the first pkt-line of the git protocol:
/// `git-upload-pack /app-3.git\0host=…\0`); its port.
async fn recording_proxy(daemon_port: u16, requests: GitRequests) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let requests = requests.clone();
            tokio::spawn(async move {
                let mut length = [0u8; 4];
                inbound.read_exact(&mut length).await.ok()?;
                let size = usize::from_str_radix(std::str::from_utf8(&length).ok()?, 16).ok()?;
                let mut line = vec![0u8; size.checked_sub(4)?];
                inbound.read_exact(&mut line).await.ok()?;
                let text = String::from_utf8_lossy(&line);
                let repo = text.split('\0').next()?.split(' ').nth(1)?;
                let repo = repo.trim_start_matches('/').trim_end_matches(".git");
                requests.0.lock().push(repo.to_string());
                let mut outbound = tokio::net::TcpStream::connect(("127.0.0.1", daemon_port))
                    .await
                    .ok()?;
                outbound.write_all(&length).await.ok()?;
                outbound.write_all(&line).await.ok()?;
                tokio::io::copy_bidirectional(&mut inbound, &mut outbound)
                    .await
                    .ok()
            });
        }
    });
    port
}

/// One repository per app (`<app>.git`, its ConfigMap at `apps/<app>/cm.yaml`), read
/// through `proxy`.
fn config_per_app(proxy: u16, port: u16) -> String {
    let mut text = config(Some("unused"), port);
    text.truncate(text.find("apps:\n").expect("an apps section") + "apps:\n".len());
    for i in 0..APPS {
        let name = app_name(i);
        text.push_str(&format!(
            "- name: {name}\n  source: {{repo: \"git://127.0.0.1:{proxy}/{name}.git\", ref: main, path: apps/{name}, interval: 1h}}\n  destination: {{namespace: {NAMESPACE}}}\n  sync: {{automated: true, selfHeal: true}}\n"
        ));
    }
    text
}

/// Issue #18, idle replicas cost nothing: a replica fetches only the repositories of
/// the apps it holds. A joining replica fetches its share at once (polls are an hour
/// apart) and the other then fetches nothing; when the newcomer dies, the survivor
/// fetches the dead one's repositories at once, and applies what they hold now, not
/// what it had fetched before handing them over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_fetches_only_the_repositories_of_the_apps_it_holds() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace(NAMESPACE).await;
    let root = sandbox.dir.path().join("per-app");
    let apps: Vec<String> = (0..APPS).map(app_name).collect();
    let repos: Vec<GitRepo> = apps
        .iter()
        .map(|app| {
            let repo = GitRepo::init(root.join(format!("{app}.git")));
            repo.write(
                &format!("apps/{app}/cm.yaml"),
                &configmap(app, NAMESPACE, "v1"),
            );
            repo.commit("first");
            repo
        })
        .collect();
    let daemon = GitDaemon::start(&root);
    let daemon_port: u16 = daemon
        .url("x")
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next()?.parse().ok())
        .expect("the daemon's port");
    let (to_a, to_b) = (GitRequests::default(), GitRequests::default());
    let proxy_a = recording_proxy(daemon_port, to_a.clone()).await;
    let proxy_b = recording_proxy(daemon_port, to_b.clone()).await;

    // Alone, A holds every shard and fetches every repository.
    let a =
        start_replica_configured(&sandbox, "replica-a", |port| config_per_app(proxy_a, port)).await;
    wait_for_split(&sandbox, &[&a]).await;
    wait_healed(&sandbox, &apps).await;
    let every: BTreeSet<String> = apps.iter().cloned().collect();
    assert_eq!(to_a.take(), every);

    // B joins and fetches exactly its share, at once; A, which handed it over, asks
    // for nothing more.
    let b =
        start_replica_configured(&sandbox, "replica-b", |port| config_per_app(proxy_b, port)).await;
    let held = wait_for_split(&sandbox, &[&a, &b]).await;
    let of = |user: &str| -> BTreeSet<String> {
        apps.iter()
            .filter(|app| held[shard_of(app, SHARDS) as usize] == user)
            .cloned()
            .collect()
    };
    let (of_a, of_b) = (of("replica-a"), of("replica-b"));
    assert!(!of_a.is_empty() && !of_b.is_empty(), "{held:?}");
    let fetched_b = eventually("B fetches its share", || async {
        let seen: BTreeSet<String> = to_b.0.lock().iter().cloned().collect();
        (seen == of_b).then_some(seen)
    })
    .await;
    println!(
        "B fetched {} repositories of {}: {fetched_b:?}",
        fetched_b.len(),
        APPS
    );
    // Its passes are done once its apps say Synced from B itself.
    eventually("B's apps Synced on B", || async {
        let body: Value = try_get_json(format!("{}/api/v1/apps", b.url)).await?;
        let apps = body["apps"].as_array()?;
        apps.iter()
            .filter(|x| of_b.contains(x["name"].as_str().unwrap_or_default()))
            .all(|x| x["sync"] == "Synced")
            .then_some(())
    })
    .await;
    assert_eq!(to_a.take(), BTreeSet::new(), "A fetched after handing over");
    assert_eq!(to_b.take(), of_b, "B fetched beyond its share");

    // Every repository moves on; nobody polls for an hour. B dies: A takes its shards
    // and fetches their repositories at once, applying the new commit; its own apps,
    // never re-fetched, stay where they were.
    for (app, repo) in apps.iter().zip(&repos) {
        repo.write(
            &format!("apps/{app}/cm.yaml"),
            &configmap(app, NAMESPACE, "v2"),
        );
        repo.commit("second");
    }
    let mut b = b;
    b.kill();
    let orphaned: Vec<String> = of_b.iter().cloned().collect();
    let deadline = Instant::now() + POLL_TIMEOUT * 2;
    loop {
        let mut moved = true;
        for app in &orphaned {
            moved &= value_of(&sandbox, app).await.as_deref() == Some("v2");
        }
        if moved {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{orphaned:?} not moved to v2 by A"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        to_a.take(),
        of_b,
        "A fetched what it took over, and only that"
    );
    assert_eq!(to_b.take(), BTreeSet::new(), "a dead replica fetched");
    for app in &of_a {
        assert_eq!(
            value_of(&sandbox, app).await.as_deref(),
            Some("v1"),
            "{app}"
        );
    }
    let mut a = a;
    a.stop().await;
}

/// Issue #18, webhooks with shards: a provider reaches one replica (through a
/// Service, any of them), which answers it and passes the delivery on to the others,
/// so every holder fetches at once the apps it holds (polls are an hour apart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_to_one_replica_wakes_every_holders_sources() {
    use hmac::{Hmac, Mac};
    use sha2::Sha256;
    const SECRET: &str = "shard-webhook-secret";
    let (sandbox, origin) = setup().await;
    let secret = sandbox.dir.path().join("webhook-secret");
    std::fs::write(&secret, SECRET).expect("write the secret");
    let with_webhooks = |port| {
        config(Some(&origin.url), port).replacen(
            "server:\n",
            &format!(
                "server:\n  webhooks:\n    generic: {{secretFile: {}}}\n",
                secret.display()
            ),
            1,
        )
    };
    let a = start_replica_configured(&sandbox, "replica-a", with_webhooks).await;
    let b = start_replica_configured(&sandbox, "replica-b", with_webhooks).await;
    let held = wait_for_split(&sandbox, &[&a, &b]).await;
    let apps: Vec<String> = (0..APPS).map(app_name).collect();
    wait_healed(&sandbox, &apps).await;
    assert!(held.contains(&b.user), "{held:?}");
    // A's view of who holds what catches up with the Leases within a retry period;
    // until then it passes deliveries to whoever it last saw holding them.
    eventually("A sees both holders", || async {
        let body: Value = try_get_json(format!("{}/api/v1/apps", a.url)).await?;
        let apps = body["apps"].as_array()?;
        let owners: BTreeSet<&str> = apps.iter().filter_map(|x| x["owner"].as_str()).collect();
        (apps.iter().all(|x| x["sync"] == "Synced") && owners.len() == 2).then_some(())
    })
    .await;

    for app in &apps {
        origin.repo.write(
            &format!("apps/{app}/cm.yaml"),
            &configmap(app, NAMESPACE, "v2"),
        );
    }
    origin.repo.commit("second");
    let push = |signature: String| {
        let body =
            serde_json::json!({"repository": origin.url, "ref": "refs/heads/main"}).to_string();
        let url = format!("{}/webhooks/generic", a.url);
        async move {
            reqwest::Client::new()
                .post(url)
                .header("x-signature", signature)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("the webhook is answered")
                .status()
        }
    };
    // A forged delivery is refused by A, and goes no further.
    assert_eq!(
        push("sha256=00".into()).await,
        reqwest::StatusCode::UNAUTHORIZED
    );
    let body = serde_json::json!({"repository": origin.url, "ref": "refs/heads/main"}).to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("a key");
    mac.update(body.as_bytes());
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    sandbox.sandbox.reset_requests();
    let pushed = Instant::now();
    assert_eq!(push(signature).await, reqwest::StatusCode::ACCEPTED);
    let deadline = pushed + POLL_TIMEOUT;
    loop {
        let mut moved = Vec::new();
        for app in &apps {
            if value_of(&sandbox, app).await.as_deref() == Some("v2") {
                moved.push(app.clone());
            }
        }
        if moved.len() == APPS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {moved:?} moved to v2, held by {:?}",
            moved
                .iter()
                .map(|app| &held[shard_of(app, SHARDS) as usize])
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "a webhook to A moved every app of both replicas in {:?}",
        pushed.elapsed()
    );
    let written = writers(&sandbox);
    for app in &apps {
        let holder = &held[shard_of(app, SHARDS) as usize];
        let by: BTreeSet<&String> = written.get(app).into_iter().flatten().collect();
        assert!(by.iter().all(|w| *w == holder), "{app} written by {by:?}");
    }
}
