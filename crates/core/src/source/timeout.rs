//! Bounds on every conversation with a Git remote, so a black-holed host (a listener
//! that accepts and never answers) costs one failed sync, not a pass and a
//! per-repository lock held forever.
//!
//! Three limits, each where it can act:
//! - **connect** and **read** timeouts on the socket itself (libgit2's server timeouts,
//!   which its git://, http(s):// and ssh transports all honour: the socket stream polls
//!   with them and the ssh transport hands the read timeout to libssh2). They are
//!   process-wide in libgit2, so they are constants set once, before the first fetch.
//! - a **deadline** for a whole fetch or `ls-remote`, per cache ([`GitTimeouts`]): the
//!   progress callbacks cancel a transfer that runs past it (a server trickling a byte
//!   every few seconds never trips a read timeout), and the async side stops waiting at
//!   the deadline even when libgit2 is stuck where no callback runs (DNS, a TLS or SSH
//!   handshake), releasing the repository's lock.

use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use git2::RemoteCallbacks;

use super::{SourceError, TimeoutKind};

/// Longest wait for a TCP connection to a Git host: Go's `net/http` default dialer
/// (`DefaultTransport`, 30 s), which the Git clients of Flux and Argo CD use.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest silence from a connected Git host. A healthy server is never silent this
/// long: `git upload-pack` sends a keepalive every 5 s while it prepares a pack
/// (`uploadpack.keepAlive`), and smart-HTTP servers stream. Same value as the dialer's,
/// so a dead host fails within about 30 s whichever step it dies in.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest a whole fetch (or `ls-remote`) of one repository may take: Flux's default
/// `GitRepository` `.spec.timeout` (60 s). A first clone of a very large repository may
/// need more: raise [`GitTimeouts::deadline`].
pub const DEFAULT_FETCH_DEADLINE: Duration = Duration::from_secs(60);

/// The limits a [`super::SourceCache`] puts on each fetch and `ls-remote`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GitTimeouts {
    /// Longest one fetch or `ls-remote` may take, from its start (including a wait for
    /// an earlier fetch of the same repository that was abandoned at its own deadline).
    /// Default [`DEFAULT_FETCH_DEADLINE`].
    pub deadline: Duration,
}

impl Default for GitTimeouts {
    fn default() -> Self {
        GitTimeouts {
            deadline: DEFAULT_FETCH_DEADLINE,
        }
    }
}

/// Give libgit2 its socket timeouts, once per process.
pub(crate) fn apply_socket_timeouts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let ms = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: these options write two C ints that libgit2 reads when it opens a
        // socket. `Once` makes this the only write, and it runs before this process's
        // first fetch (every fetch calls it first), so no transport reads them meanwhile.
        let set = unsafe {
            git2::opts::set_server_connect_timeout_in_milliseconds(ms(DEFAULT_CONNECT_TIMEOUT))
                .and_then(|()| {
                    git2::opts::set_server_timeout_in_milliseconds(ms(DEFAULT_READ_TIMEOUT))
                })
        };
        if let Err(e) = set {
            tracing::warn!(error = %super::redact(e.message()), "cannot set Git socket timeouts");
        }
    });
}

/// The deadline of one fetch or `ls-remote`, shared by the blocking job (whose progress
/// callbacks check it) and the async side (which cancels it when it stops waiting).
#[derive(Debug, Clone)]
pub(crate) struct Watchdog {
    inner: Arc<WatchdogInner>,
}

#[derive(Debug)]
struct WatchdogInner {
    limit: Duration,
    deadline: Instant,
    cancelled: AtomicBool,
    tripped: AtomicBool,
}

impl Watchdog {
    pub(crate) fn start(limit: Duration) -> Self {
        let now = Instant::now();
        Watchdog {
            inner: Arc::new(WatchdogInner {
                limit,
                deadline: now
                    .checked_add(limit)
                    .unwrap_or(now + DEFAULT_FETCH_DEADLINE),
                cancelled: AtomicBool::new(false),
                tripped: AtomicBool::new(false),
            }),
        }
    }

    /// The limit this watchdog enforces.
    pub(crate) fn limit(&self) -> Duration {
        self.inner.limit
    }

    /// Time left before the deadline.
    pub(crate) fn remaining(&self) -> Duration {
        self.inner
            .deadline
            .saturating_duration_since(Instant::now())
    }

    /// Stop the transfer at its next callback (the async side gave up waiting).
    pub(crate) fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
    }

    /// Past the deadline or cancelled; remembers that it said so, so the error the
    /// aborted transfer returns can be told apart from the remote's own.
    pub(crate) fn expired(&self) -> bool {
        let expired =
            self.inner.cancelled.load(Ordering::SeqCst) || Instant::now() >= self.inner.deadline;
        if expired {
            self.inner.tripped.store(true, Ordering::SeqCst);
        }
        expired
    }

    /// Whether a callback aborted the transfer because of the deadline.
    pub(crate) fn tripped(&self) -> bool {
        self.inner.tripped.load(Ordering::SeqCst)
    }

    /// The error for a fetch of `url` stopped by this deadline.
    pub(crate) fn error(&self, url: &str) -> SourceError {
        SourceError::Timeout {
            url: url.to_string(),
            timeout: TimeoutKind::Deadline,
            after: self.limit(),
        }
    }

    /// Make `callbacks` abort the transfer once the deadline passes: libgit2 calls them
    /// for every chunk of pack data and every progress line the server sends.
    pub(crate) fn watch<'a>(&'a self, callbacks: &mut RemoteCallbacks<'a>) {
        callbacks.transfer_progress(move |_| !self.expired());
        callbacks.sideband_progress(move |_| !self.expired());
    }
}

/// A libgit2 failure that is one of the socket timeouts, as [`SourceError::Timeout`].
/// libgit2 returns `GIT_TIMEOUT` from its socket stream; libssh2's timeout arrives as a
/// plain error whose message says "timed out".
pub(crate) fn socket_timeout(url: &str, e: &git2::Error) -> Option<SourceError> {
    let lower = e.message().to_ascii_lowercase();
    if e.code() != git2::ErrorCode::Timeout && !lower.contains("timed out") {
        return None;
    }
    let (timeout, after) = if lower.contains("connect") {
        (TimeoutKind::Connect, DEFAULT_CONNECT_TIMEOUT)
    } else {
        (TimeoutKind::Read, DEFAULT_READ_TIMEOUT)
    };
    Some(SourceError::Timeout {
        url: url.to_string(),
        timeout,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watchdog_expires_at_its_deadline_or_when_cancelled() {
        let w = Watchdog::start(Duration::from_secs(60));
        assert!(!w.expired() && !w.tripped());
        assert!(w.remaining() > Duration::from_secs(59));
        w.cancel();
        assert!(w.expired() && w.tripped());

        let w = Watchdog::start(Duration::ZERO);
        assert!(w.expired());
        assert_eq!(w.remaining(), Duration::ZERO);
        assert!(matches!(
            w.error("git://h/r"),
            SourceError::Timeout {
                timeout: TimeoutKind::Deadline,
                ..
            }
        ));
    }

    #[test]
    fn libgit2_socket_timeouts_become_typed_timeouts() {
        use git2::ErrorClass::{Net, Os};
        use git2::ErrorCode::{GenericError as Generic, Timeout};
        let timeout_of = |error: git2::Error| match socket_timeout("git://h/r", &error) {
            Some(SourceError::Timeout { timeout, .. }) => Some(timeout),
            other => {
                assert!(other.is_none(), "{error}: {other:?}");
                None
            }
        };
        let read = git2::Error::new(Timeout, Net, "could not read from socket: timed out");
        assert_eq!(timeout_of(read), Some(TimeoutKind::Read));
        let connect = git2::Error::new(Generic, Net, "failed to connect to h: Operation timed out");
        assert_eq!(timeout_of(connect), Some(TimeoutKind::Connect));
        let refused = git2::Error::new(Generic, Os, "failed to connect to h: Connection refused");
        assert_eq!(timeout_of(refused), None);
    }
}
