//! The other replicas' changes on this replica's event stream (`/api/v1/events`), with
//! shards: each replica holding an app this one does not is followed on its own event
//! stream, and its `app` and `removed` events for the apps it holds come through here,
//! as it wrote them. One upstream stream per peer serves every client of this replica
//! (issue #24: a stream per peer per client let a hundred open pages cost a peer a
//! hundred streams); it runs while a client listens and stops with the last one. Calls
//! are a peer's ([`super::peer_auth`]), marked as forwarded so the peer relays nothing
//! further, and an event longer than [`MAX_EVENT_BYTES`] ends the stream.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::{HeaderMap, Method};
use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use super::Control;
use super::peer_auth::FORWARDED_HEADER;
use super::peer_auth::{PEER_HEADER, PeerKey};
use super::peers::{FORWARD_TIMEOUT, ForwardError, is_forwarded, live_peers};
use tether_core::report::status::Statuses;

/// How often the relay looks again at who holds the apps this replica does not, to
/// follow a shard that moved: well under a lease duration.
pub const RELAY_REFRESH: Duration = Duration::from_millis(500);

/// How long a followed peer's event stream may stay silent before it is taken for
/// gone: two of its keepalives.
const RELAY_SILENCE: Duration = Duration::from_secs(30);

/// The longest event read from a peer: an `app` event is one app's status (its
/// resources and drifted fields), well under a megabyte even for thousands of objects.
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// Events waiting for the slowest client; one that falls further behind is sent a
/// `reset` (reload every app) instead of what it missed.
const RELAY_BACKLOG: usize = 256;

/// A client for event streams: no overall timeout (a stream lasts), only for
/// connecting and for silence.
fn stream_client() -> Result<&'static reqwest::Client, ForwardError> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let built = reqwest::Client::builder()
        .connect_timeout(FORWARD_TIMEOUT)
        .read_timeout(RELAY_SILENCE)
        .build()
        .map_err(|e| ForwardError::Client(e.to_string()))?;
    Ok(CLIENT.get_or_init(|| built))
}

/// Aborts a followed peer's task when it is no longer followed, and all of them when
/// the relay stops.
struct Following {
    url: String,
    task: tokio::task::AbortHandle,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The relay of one replica: shared by every event stream it serves.
#[derive(Clone)]
pub struct Relay {
    control: Arc<dyn Control>,
    statuses: Statuses,
    key: Option<PeerKey>,
    /// The running relay's channel; None while no client listens.
    running: Arc<Mutex<Option<broadcast::Sender<Bytes>>>>,
}

impl Relay {
    pub fn new(control: Arc<dyn Control>, statuses: Statuses, key: Option<PeerKey>) -> Relay {
        Relay {
            control,
            statuses,
            key,
            running: Arc::default(),
        }
    }

    /// The peers' events for one more event stream; nothing for a forwarded request
    /// (a peer's own stream relays nothing further), or without shards. The stream
    /// stops listening when the receiver is dropped.
    pub fn subscribe(&self, headers: &HeaderMap) -> Option<mpsc::Receiver<Bytes>> {
        // Sharding is on for every app or none: any name tells which.
        if is_forwarded(headers) || self.control.owner("").is_none() {
            return None;
        }
        let mut shared = {
            let mut running = self.running.lock();
            match running.as_ref() {
                Some(tx) => tx.subscribe(),
                None => {
                    let (tx, rx) = broadcast::channel(RELAY_BACKLOG);
                    *running = Some(tx.clone());
                    tokio::spawn(self.clone().run(tx));
                    rx
                }
            }
        };
        let (tx, rx) = mpsc::channel(RELAY_BACKLOG);
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = tx.closed() => return,
                    event = shared.recv() => event,
                };
                let event = match event {
                    Ok(event) => event,
                    Err(broadcast::error::RecvError::Lagged(_)) => reset(),
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if tx.send(event).await.is_err() {
                    return;
                }
            }
        });
        Some(rx)
    }

    /// Follows the peers holding apps while anyone listens on `tx`: one task per peer,
    /// started and stopped as shards move.
    async fn run(self, tx: broadcast::Sender<Bytes>) {
        let mut following: BTreeMap<String, Following> = BTreeMap::new();
        loop {
            {
                // Under the lock a new client either finds this relay still running
                // (and is counted) or none at all (and starts its own).
                let mut running = self.running.lock();
                if tx.receiver_count() == 0 {
                    *running = None;
                    return;
                }
            }
            let peers = live_peers(self.control.as_ref(), &self.statuses);
            following.retain(|holder, f| peers.get(holder) == Some(&f.url));
            for (holder, url) in peers {
                if following.contains_key(&holder) {
                    continue;
                }
                let follower = Follower {
                    control: self.control.clone(),
                    key: self.key.clone(),
                    holder: holder.clone(),
                    url: url.clone(),
                    tx: tx.clone(),
                };
                let task = tokio::spawn(follower.run()).abort_handle();
                following.insert(holder, Following { url, task });
            }
            tokio::time::sleep(RELAY_REFRESH).await;
        }
    }
}

/// One peer followed on its event stream.
struct Follower {
    control: Arc<dyn Control>,
    key: Option<PeerKey>,
    holder: String,
    url: String,
    tx: broadcast::Sender<Bytes>,
}

impl Follower {
    /// Follows the peer, reconnecting a second after its stream drops, until aborted.
    async fn run(self) {
        let url = format!("{}/api/v1/events", self.url);
        loop {
            if let Err(err) = self.follow(&url).await {
                tracing::debug!(%url, error = %err, "a peer's events cannot be read");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// One connection to the peer's stream, until it ends.
    async fn follow(&self, url: &str) -> Result<(), String> {
        let key = self
            .key
            .as_ref()
            .ok_or("no server.peerToken is configured here")?;
        let signed = key.sign(&Method::GET, "/api/v1/events");
        let mut response = stream_client()
            .map_err(|e| e.to_string())?
            .get(url)
            .header(FORWARDED_HEADER, "1")
            .header(PEER_HEADER, signed.header.clone())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if let Err(err) = key.check_reply(&signed, response.headers()) {
            tracing::warn!(%url, peer = %self.holder, error = %err, "a replica's published URL did not answer as a peer");
            return Err(err.to_string());
        }
        if !response.status().is_success() {
            return Err(format!("answered {}", response.status().as_u16()));
        }
        // Whatever changed there while not followed was missed.
        let _ = self.tx.send(reset());
        let mut buffer: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = buffer.drain(..end + 2).collect();
                let theirs = |name: &str| {
                    self.control
                        .owner(name)
                        .is_some_and(|o| !o.local && o.holder.as_deref() == Some(&self.holder))
                };
                if let Some(event) = relayable(&block, theirs) {
                    let _ = self.tx.send(event);
                }
            }
            if buffer.len() > MAX_EVENT_BYTES {
                return Err(format!("sent an event longer than {MAX_EVENT_BYTES} bytes"));
            }
        }
        Ok(())
    }
}

/// The `reset` event: reload every app.
fn reset() -> Bytes {
    Bytes::from_static(b"event: reset\ndata: {}\n\n")
}

/// One event block of a peer's stream, if it is to be passed on: an `app` or
/// `removed` event for an app `theirs` says the peer holds, or a `reset`.
fn relayable(block: &[u8], theirs: impl Fn(&str) -> bool) -> Option<Bytes> {
    let text = std::str::from_utf8(block).ok()?;
    let mut kind = "message";
    let mut data = String::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("event:") {
            kind = name.trim();
        } else if let Some(part) = line.strip_prefix("data:") {
            data.push_str(part.trim_start());
        }
    }
    let app = match kind {
        "reset" => return Some(reset()),
        "app" => serde_json::from_str::<Value>(&data)
            .ok()?
            .get("name")?
            .as_str()?
            .to_string(),
        "removed" => serde_json::from_str::<String>(&data).ok()?,
        _ => return None,
    };
    theirs(&app).then(|| Bytes::copy_from_slice(block))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::shard::Owner;
    use crate::server::service::SuspendError;
    use axum::response::IntoResponse;
    use futures::future::BoxFuture;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every app is held by the peer `b` at `url`.
    struct HeldElsewhere(String);

    impl Control for HeldElsewhere {
        fn request_sync(&self, _: &str) -> bool {
            false
        }
        fn set_suspended(&self, _: &str, _: bool) -> BoxFuture<'_, Result<bool, SuspendError>> {
            Box::pin(async { Ok(false) })
        }
        fn readiness(&self) -> Vec<(&'static str, bool)> {
            Vec::new()
        }
        fn owner(&self, _: &str) -> Option<Owner> {
            Some(Owner {
                shard: 1,
                holder: Some("b".into()),
                url: Some(self.0.clone()),
                local: false,
            })
        }
    }

    /// A peer on loopback whose event stream counts its connections and stays open.
    async fn peer(key: PeerKey, streams: Arc<AtomicUsize>) -> String {
        let events = move || {
            let streams = streams.clone();
            async move {
                streams.fetch_add(1, Ordering::SeqCst);
                let body = futures::stream::pending::<Result<Bytes, std::io::Error>>();
                (
                    [("content-type", "text/event-stream")],
                    axum::body::Body::from_stream(body),
                )
                    .into_response()
            }
        };
        let app = axum::Router::new()
            .route("/api/v1/events", axum::routing::get(events))
            .layer(axum::middleware::from_fn_with_state(
                Some(key),
                crate::server::peer_auth::authenticate,
            ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn every_client_shares_one_stream_per_peer_which_ends_with_the_last() {
        // As `main` does: one TLS provider for the process, before any client.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let key = PeerKey::new("relay-test");
        let streams = Arc::new(AtomicUsize::new(0));
        let url = peer(key.clone(), streams.clone()).await;
        let statuses = Statuses::default();
        statuses.update("web", |_| {});
        let relay = Relay::new(Arc::new(HeldElsewhere(url)), statuses, Some(key));
        let mut clients: Vec<mpsc::Receiver<Bytes>> = (0..5)
            .map(|_| relay.subscribe(&HeaderMap::new()).expect("sharded"))
            .collect();
        // Each client hears the connection's `reset`: the stream is up.
        for client in clients.iter_mut() {
            let event = tokio::time::timeout(Duration::from_secs(10), client.recv())
                .await
                .expect("in time");
            assert_eq!(event, Some(reset()));
        }
        tokio::time::sleep(RELAY_REFRESH * 2).await;
        assert_eq!(
            streams.load(Ordering::SeqCst),
            1,
            "one stream for five clients"
        );
        drop(clients);
        tokio::time::timeout(Duration::from_secs(10), async {
            while relay.running.lock().is_some() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the relay stops with its last client");
    }

    #[test]
    fn only_a_peers_own_apps_and_resets_are_relayed() {
        let theirs = |app: &str| app == "web";
        let app = b"event: app\ndata: {\"name\":\"web\",\"sync\":\"Synced\"}\n\n";
        assert_eq!(relayable(app, theirs).as_deref(), Some(&app[..]));
        let other = b"event: app\ndata: {\"name\":\"db\"}\n\n";
        assert_eq!(relayable(other, theirs), None);
        let removed = b"event: removed\ndata: \"web\"\n\n";
        assert_eq!(relayable(removed, theirs).as_deref(), Some(&removed[..]));
        assert_eq!(relayable(b"event: removed\ndata: \"db\"\n\n", theirs), None);
        assert_eq!(
            relayable(b"event: reset\ndata: {}\n\n", theirs),
            Some(reset())
        );
        // Its greeting, keepalives and anything unreadable stay there.
        assert_eq!(
            relayable(b"retry: 1000\nevent: hello\ndata: {}\n\n", theirs),
            None
        );
        assert_eq!(relayable(b": keepalive\n\n", theirs), None);
        assert_eq!(relayable(b"event: app\ndata: {not json\n\n", theirs), None);
        assert_eq!(relayable(&[0xff, 0xfe, b'\n', b'\n'], theirs), None);
    }
}
