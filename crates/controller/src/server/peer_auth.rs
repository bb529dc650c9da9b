//! Peers authenticate as peers (issue #24). With shards, replicas call each other at the
//! URLs their member Leases publish, and anyone allowed to write a Lease could publish
//! one. So a replica never sends its caller's credentials to a peer: it signs each call
//! with the key every replica shares (`server.peerToken`, a Secret the chart generates),
//! and the key itself never travels. A call carries [`PEER_HEADER`]: the time, a fresh
//! nonce and an HMAC-SHA256 over them, the method and the path. The peer checks it (the
//! time within [`MAX_SKEW`], the nonce never seen before, so a captured call cannot be
//! replayed) and answers with [`PEER_REPLY_HEADER`], an HMAC over the nonce, which the
//! caller checks before it believes a word of the answer: a listener that is not a
//! replica learns nothing it can use and cannot put its own status in front of users.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use serde_json::json;
use sha2::Sha256;

/// Marks a request one replica forwards to another; such a request must carry a
/// signature ([`PEER_HEADER`]).
pub const FORWARDED_HEADER: &str = "x-tether-forwarded";

/// A peer's signature on a call: `t=<unix seconds>,n=<nonce>,s=<hex HMAC>`.
pub const PEER_HEADER: &str = "x-tether-peer";

/// A peer's proof that it holds the key, on its answer: the hex HMAC of the call's nonce.
pub const PEER_REPLY_HEADER: &str = "x-tether-peer-reply";

/// How far a call's time may be from ours: replicas' clocks are NTP-synchronised nodes'
/// (Kubernetes' own tokens allow minutes); a call is answered within seconds
/// (`peers::FORWARD_TIMEOUT`). A replayed call is refused by its nonce within this
/// window and by its time after it.
pub const MAX_SKEW: Duration = Duration::from_secs(30);

/// Nonces remembered at most: calls within two skews at a few hundred a second (a
/// dashboard of several replicas polls each peer once per refresh). Past it, calls
/// are refused until old nonces age out, rather than remembered without bound.
const MAX_NONCES: usize = 65_536;

/// Bytes of a nonce: 128 bits, drawn per call.
const NONCE_BYTES: usize = 16;

/// Why a call or an answer is not a peer's. Not retryable: a peer with another key,
/// or no peer at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerAuthError {
    #[error("no server.peerToken is configured here")]
    NoKey,
    #[error("the call carries no {PEER_HEADER} signature")]
    Unsigned,
    #[error("the {PEER_HEADER} header is malformed")]
    Malformed,
    #[error("the call is {0} s away from this replica's clock")]
    Skewed(u64),
    #[error("the signature does not match (another peer token?)")]
    BadSignature,
    #[error("the call's nonce was seen before (a replay)")]
    Replayed,
    #[error("too many peer calls in flight to remember their nonces")]
    Busy,
    #[error("the answer carries no proof that it comes from a replica holding the peer token")]
    NoProof,
}

/// The peers' shared key, and the nonces of the calls it verified lately.
#[derive(Clone)]
pub struct PeerKey {
    key: Arc<[u8]>,
    seen: Arc<Mutex<HashMap<[u8; NONCE_BYTES], SystemTime>>>,
}

impl std::fmt::Debug for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerKey(..)")
    }
}

/// A signed call on its way: the header to send and the nonce its answer must prove.
pub struct Signed {
    pub header: HeaderValue,
    nonce: String,
}

fn unix(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl PeerKey {
    pub fn new(secret: &str) -> PeerKey {
        PeerKey {
            key: Arc::from(secret.trim().as_bytes()),
            seen: Arc::default(),
        }
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length: new_from_slice cannot fail.
        Hmac::<Sha256>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!())
    }

    fn call_mac(&self, time: u64, nonce: &str, method: &Method, path: &str) -> Hmac<Sha256> {
        let mut mac = self.mac();
        mac.update(format!("tether-peer/1\n{time}\n{nonce}\n{method}\n{path}").as_bytes());
        mac
    }

    fn reply_mac(&self, nonce: &str) -> Hmac<Sha256> {
        let mut mac = self.mac();
        mac.update(format!("tether-peer-reply/1\n{nonce}").as_bytes());
        mac
    }

    /// Signs a call of `method` on `path` (with its query), now.
    pub fn sign(&self, method: &Method, path: &str) -> Signed {
        self.sign_at(method, path, SystemTime::now())
    }

    fn sign_at(&self, method: &Method, path: &str, at: SystemTime) -> Signed {
        let nonce = hex::encode(uuid::Uuid::new_v4().as_bytes());
        let time = unix(at);
        let signature = hex::encode(
            self.call_mac(time, &nonce, method, path)
                .finalize()
                .into_bytes(),
        );
        let text = format!("t={time},n={nonce},s={signature}");
        // Digits, hex and punctuation only: always a valid header value.
        let header = HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""));
        Signed { header, nonce }
    }

    /// Checks a call's signature: the nonce, to prove in the answer.
    pub fn verify(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<String, PeerAuthError> {
        let text = headers
            .get(PEER_HEADER)
            .ok_or(PeerAuthError::Unsigned)?
            .to_str()
            .map_err(|_| PeerAuthError::Malformed)?;
        let mut fields = text.split(',').map(|f| f.split_once('='));
        let (Some(Some(("t", time))), Some(Some(("n", nonce))), Some(Some(("s", signature))), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(PeerAuthError::Malformed);
        };
        let time: u64 = time.parse().map_err(|_| PeerAuthError::Malformed)?;
        let nonce_bytes: [u8; NONCE_BYTES] = hex::decode(nonce)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(PeerAuthError::Malformed)?;
        let signature = hex::decode(signature).map_err(|_| PeerAuthError::Malformed)?;
        self.call_mac(time, nonce, method, path)
            .verify_slice(&signature)
            .map_err(|_| PeerAuthError::BadSignature)?;
        let skew = unix(now).abs_diff(time);
        if skew > MAX_SKEW.as_secs() {
            return Err(PeerAuthError::Skewed(skew));
        }
        self.remember(nonce_bytes, now)?;
        Ok(nonce.to_string())
    }

    /// Records a verified call's nonce: refused if seen within the window.
    fn remember(&self, nonce: [u8; NONCE_BYTES], now: SystemTime) -> Result<(), PeerAuthError> {
        let mut seen = self.seen.lock();
        if seen.contains_key(&nonce) {
            return Err(PeerAuthError::Replayed);
        }
        if seen.len() >= MAX_NONCES {
            // A nonce is kept until no call of its time can pass the skew check.
            seen.retain(|_, at| now.duration_since(*at).unwrap_or_default() <= MAX_SKEW * 2);
            if seen.len() >= MAX_NONCES {
                return Err(PeerAuthError::Busy);
            }
        }
        seen.insert(nonce, now);
        Ok(())
    }

    /// The proof for the answer to the call whose nonce is `nonce`.
    pub fn reply(&self, nonce: &str) -> HeaderValue {
        let proof = hex::encode(self.reply_mac(nonce).finalize().into_bytes());
        HeaderValue::from_str(&proof).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    /// Checks that an answer to `signed` comes from a holder of the key.
    pub fn check_reply(&self, signed: &Signed, headers: &HeaderMap) -> Result<(), PeerAuthError> {
        let proof = headers
            .get(PEER_REPLY_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| hex::decode(v).ok())
            .ok_or(PeerAuthError::NoProof)?;
        self.reply_mac(&signed.nonce)
            .verify_slice(&proof)
            .map_err(|_| PeerAuthError::NoProof)
    }
}

/// Marks a request whose peer signature was verified: it needs no API token.
#[derive(Debug, Clone, Copy)]
pub struct FromPeer;

/// Every request that says it comes from a peer ([`FORWARDED_HEADER`]) must prove it:
/// refused with a 401 (and logged) otherwise; verified, it is marked [`FromPeer`] and
/// its answer carries the reply proof. Other requests pass untouched.
pub async fn authenticate(
    State(key): State<Option<PeerKey>>,
    mut request: Request,
    next: Next,
) -> Response {
    if !request.headers().contains_key(FORWARDED_HEADER) {
        return next.run(request).await;
    }
    let path = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_string(),
        |p| p.as_str().to_string(),
    );
    let verified = key.as_ref().ok_or(PeerAuthError::NoKey).and_then(|key| {
        let nonce = key.verify(
            request.method(),
            &path,
            request.headers(),
            SystemTime::now(),
        )?;
        Ok(key.reply(&nonce))
    });
    match verified {
        Ok(proof) => {
            request.extensions_mut().insert(FromPeer);
            let mut response = next.run(request).await;
            response.headers_mut().insert(PEER_REPLY_HEADER, proof);
            response
        }
        Err(err) => {
            tracing::warn!(%path, error = %err, "refused a call claiming to come from a peer");
            (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({ "error": format!("not a peer: {err}") })),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed_headers(signed: &Signed) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(PEER_HEADER, signed.header.clone());
        headers
    }

    #[test]
    fn a_signed_call_is_verified_once_and_its_answer_proves_the_key() {
        let key = PeerKey::new("shared-secret\n");
        let now = SystemTime::now();
        let signed = key.sign_at(&Method::GET, "/api/v1/apps?view=summary", now);
        let text = signed.header.to_str().expect("text").to_string();
        assert!(!text.contains("shared-secret"), "{text}");
        let headers = signed_headers(&signed);
        let nonce = key
            .verify(&Method::GET, "/api/v1/apps?view=summary", &headers, now)
            .expect("verified");
        assert_eq!(
            key.verify(&Method::GET, "/api/v1/apps?view=summary", &headers, now),
            Err(PeerAuthError::Replayed)
        );
        let mut answer = HeaderMap::new();
        answer.insert(PEER_REPLY_HEADER, key.reply(&nonce));
        assert_eq!(key.check_reply(&signed, &answer), Ok(()));
        assert_eq!(
            key.check_reply(&signed, &HeaderMap::new()),
            Err(PeerAuthError::NoProof)
        );
        let stranger = PeerKey::new("another-secret");
        let mut forged = HeaderMap::new();
        forged.insert(PEER_REPLY_HEADER, stranger.reply(&nonce));
        assert_eq!(
            key.check_reply(&signed, &forged),
            Err(PeerAuthError::NoProof)
        );
    }

    #[test]
    fn another_key_path_method_or_time_is_refused() {
        let key = PeerKey::new("shared-secret");
        let now = SystemTime::now();
        let signed = key.sign_at(&Method::GET, "/api/v1/apps", now);
        let headers = signed_headers(&signed);
        let stranger = PeerKey::new("another-secret");
        assert_eq!(
            stranger.verify(&Method::GET, "/api/v1/apps", &headers, now),
            Err(PeerAuthError::BadSignature)
        );
        assert_eq!(
            key.verify(&Method::POST, "/api/v1/apps", &headers, now),
            Err(PeerAuthError::BadSignature)
        );
        assert_eq!(
            key.verify(&Method::GET, "/api/v1/apps/x", &headers, now),
            Err(PeerAuthError::BadSignature)
        );
        let late = now + MAX_SKEW + Duration::from_secs(2);
        assert!(matches!(
            key.verify(&Method::GET, "/api/v1/apps", &headers, late),
            Err(PeerAuthError::Skewed(_))
        ));
        assert_eq!(
            key.verify(&Method::GET, "/api/v1/apps", &HeaderMap::new(), now),
            Err(PeerAuthError::Unsigned)
        );
        let mut junk = HeaderMap::new();
        junk.insert(PEER_HEADER, HeaderValue::from_static("t=1,n=zz,s=00"));
        assert_eq!(
            key.verify(&Method::GET, "/api/v1/apps", &junk, now),
            Err(PeerAuthError::Malformed)
        );
        assert_eq!(format!("{key:?}"), "PeerKey(..)");
    }
}
