//! One bare clone per repository under a cache directory, fetched incrementally and
//! shared by every source that reads that repository.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::{DateTime, Utc};
use git2::{AutotagOption, Direction, FetchOptions, FetchPrune, Oid, Remote, Repository};
use tokio::task::JoinHandle;

use super::auth::{self, AuthOutcome};
use super::read::{self, git_err};
use super::timeout::{self, GitTimeouts, Watchdog};
use super::url::redact;
use super::{Auth, RepoKey, Revision, Source, SourceError, SourceFile, is_full_sha};
use crate::cluster::Cluster;

/// Every branch and tag, mirrored under the same names: one fetch serves every source
/// of the repository whatever its reference, as `git clone --mirror` would.
const FETCH_REFSPECS: &[&str] = &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/// Where the cache lives when `--cache-dir` is not given.
const CACHE_SUBDIR: &str = "tether/git";

/// The state of one source, as status conditions report it.
///
/// A failing source keeps serving its last good revision, so the failure must show
/// elsewhere: `last_success` says how old that revision's confirmation is, and
/// `failing_since` how long the source has been failing (a `Stale` condition, an
/// alert on `time() - tether_source_last_success_timestamp_seconds`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceStatus {
    /// `Ready=True` after the last sync succeeded.
    pub ready: bool,
    /// Why not ready (`SourceError::reason`), when not.
    pub reason: Option<&'static str>,
    /// The last error's message, when not ready. Credentials in it are redacted.
    pub message: Option<String>,
    /// Whether the last error is worth retrying unchanged.
    pub retryable: bool,
    /// The last revision that synced successfully: what stays in use after a failure.
    pub last_good: Option<Revision>,
    /// When the last sync succeeded (the remote answered and the reference and path
    /// resolved); `None` until one has.
    pub last_success: Option<DateTime<Utc>>,
    /// When the first failure after the last success happened: set by the first failed
    /// sync, kept by the ones after it, cleared by the next success. `None` while
    /// ready.
    pub failing_since: Option<DateTime<Utc>>,
}

/// The shared Git cache. Cheap to clone (an `Arc`); every clone sees the same
/// repositories, locks and statuses.
#[derive(Clone)]
pub struct SourceCache {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    repos: Mutex<HashMap<RepoKey, Arc<RepoEntry>>>,
    statuses: Mutex<HashMap<Source, SourceStatus>>,
    file_limit: u64,
    timeouts: GitTimeouts,
    /// The connection that reads `credentials.secretRef` Secrets, as tether itself
    /// (Flux's source-controller reads them as the controller too).
    secrets: Mutex<Option<Arc<Cluster>>>,
}

struct RepoEntry {
    dir: PathBuf,
    /// One fetch at a time per repository; syncs of other repositories run in parallel.
    fetch: tokio::sync::Mutex<FetchState>,
    /// A reader found the clone damaged: the next sync re-clones it.
    needs_repair: AtomicBool,
}

/// What one blocking sync job returns: the revision and whether a fetch ran.
type JobResult = Result<(Revision, bool), SourceError>;

#[derive(Default)]
struct FetchState {
    /// When the last successful fetch started. A sync requested before that instant
    /// is answered by that fetch instead of starting another.
    last_fetch_started: Option<Instant>,
    /// A job abandoned at its deadline that may still be running (stuck where no
    /// callback can stop it; its socket timeouts end it). The next sync waits for it,
    /// within its own deadline, so two jobs never write one clone at once.
    straggler: Option<JoinHandle<JobResult>>,
}

impl SourceCache {
    /// Open (creating it if needed) a cache rooted at `dir`, with the default
    /// [`GitTimeouts`].
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, SourceError> {
        Self::open_with(dir, GitTimeouts::default())
    }

    /// Open a cache whose fetches and `ls-remote`s stop at `timeouts`.
    pub fn open_with(dir: impl Into<PathBuf>, timeouts: GitTimeouts) -> Result<Self, SourceError> {
        timeout::apply_socket_timeouts();
        let root = dir.into();
        std::fs::create_dir_all(&root).map_err(|source| SourceError::CacheIo {
            path: root.display().to_string(),
            source,
        })?;
        Ok(SourceCache {
            inner: Arc::new(Inner {
                root,
                repos: Mutex::new(HashMap::new()),
                statuses: Mutex::new(HashMap::new()),
                file_limit: read::MAX_FILE_BYTES,
                timeouts,
                secrets: Mutex::new(None),
            }),
        })
    }

    /// The default cache directory: `<user cache dir>/tether/git` (e.g.
    /// `~/.cache/tether/git`), or under the system temp dir when there is no home.
    pub fn default_dir() -> PathBuf {
        dirs::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join(CACHE_SUBDIR)
    }

    /// Read the Secrets of [`Auth::Secret`] sources through `cluster` from now on.
    pub fn read_secrets_with(&self, cluster: Arc<Cluster>) {
        if let Ok(mut secrets) = self.inner.secrets.lock() {
            *secrets = Some(cluster);
        }
    }

    /// The source with its [`Auth::Secret`] read now and resolved into credentials;
    /// any other source as it is. A missing Secret or key is a credentials error that
    /// names them, never a value.
    async fn resolve_auth(&self, source: &Source) -> Result<Source, SourceError> {
        let Auth::Secret(secret) = &source.auth else {
            return Ok(source.clone());
        };
        let cred_err = |message: String| SourceError::Credentials {
            url: source.url.clone(),
            message,
        };
        let cluster = self.inner.secrets.lock().ok().and_then(|c| c.clone());
        let cluster = cluster.ok_or_else(|| {
            cred_err(format!(
                "credentials.secretRef names {secret}, and no cluster connection reads Secrets here"
            ))
        })?;
        let data = cluster
            .secret_data(&secret.namespace, &secret.name)
            .await
            .map_err(|e| cred_err(format!("cannot read {secret}: {e}")))?
            .ok_or_else(|| cred_err(format!("{secret} not found")))?;
        let auth = secret.auth(&data).map_err(cred_err)?;
        Ok(source.clone().with_auth(auth))
    }

    /// The cache's root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Fetch the source's repository (incrementally; sharing a fetch with concurrent
    /// syncs of the same repository), resolve its reference to one commit, and check the
    /// path exists there.
    ///
    /// On failure the cache keeps what it had: [`SourceCache::status`] reports
    /// `Ready=False` with the reason and still holds the last good revision, whose files
    /// [`SourceCache::read_files`] still reads.
    pub async fn sync(&self, source: &Source) -> Result<Revision, SourceError> {
        let requested = Instant::now();
        let result = self
            .sync_inner(source, requested)
            .await
            .map_err(|e| e.redact(&source.url));
        self.record(source, &result);
        crate::metrics::METRICS.git_fetch(
            &source.repo_key().host_path,
            requested.elapsed(),
            result.as_ref().err().map(SourceError::reason),
        );
        result
    }

    async fn sync_inner(
        &self,
        source: &Source,
        requested: Instant,
    ) -> Result<Revision, SourceError> {
        let resolved = self.resolve_auth(source).await?;
        let entry = self.entry(&source.repo_key());
        let mut state = entry.fetch.lock().await;
        let watchdog = Watchdog::start(self.inner.timeouts.deadline);
        if let Some(mut straggler) = state.straggler.take() {
            if tokio::time::timeout(watchdog.remaining(), &mut straggler)
                .await
                .is_err()
            {
                state.straggler = Some(straggler);
                return Err(watchdog.error(&source.url));
            }
        }
        let already_fetched = state.last_fetch_started.is_some_and(|t| t >= requested);
        let repair = entry.needs_repair.swap(false, Ordering::SeqCst);
        let job = SyncJob {
            dir: entry.dir.clone(),
            source: resolved,
            skip_fetch: already_fetched && !repair,
            repair,
            watchdog: watchdog.clone(),
        };
        let started = Instant::now();
        let mut task = tokio::task::spawn_blocking(move || job.run());
        let outcome = match tokio::time::timeout(watchdog.remaining(), &mut task).await {
            Ok(joined) => joined.map_err(|e| SourceError::Git {
                message: format!("sync task failed: {e}"),
            })?,
            Err(_) => {
                // libgit2 is stuck where no callback runs: stop waiting, release the
                // lock, and let the next sync of this repository wait for the job.
                watchdog.cancel();
                state.straggler = Some(task);
                return Err(watchdog.error(&source.url));
            }
        };
        match outcome {
            Ok((revision, fetched)) => {
                if fetched {
                    state.last_fetch_started = Some(started);
                }
                Ok(revision)
            }
            Err(e) => {
                if matches!(e, SourceError::CacheCorrupt { .. }) {
                    entry.needs_repair.store(true, Ordering::SeqCst);
                }
                Err(e)
            }
        }
    }

    /// Read every file under the source's path at `revision`, straight from the
    /// object database (no checkout). Blocking: call it from `spawn_blocking` in async
    /// code. Files above 8 MiB ([`super::MAX_FILE_BYTES`]) and symlinks leaving the path
    /// are errors naming the file.
    pub fn read_files(
        &self,
        source: &Source,
        revision: &Revision,
    ) -> Result<Vec<SourceFile>, SourceError> {
        self.read_path(source, revision, &source.path)
    }

    /// Like [`SourceCache::read_files`] for another path of the same repository.
    pub fn read_path(
        &self,
        source: &Source,
        revision: &Revision,
        path: &str,
    ) -> Result<Vec<SourceFile>, SourceError> {
        self.read_path_inner(source, revision, path)
            .map_err(|e| e.redact(&source.url))
    }

    fn read_path_inner(
        &self,
        source: &Source,
        revision: &Revision,
        path: &str,
    ) -> Result<Vec<SourceFile>, SourceError> {
        let entry = self.entry(&source.repo_key());
        let oid = Oid::from_str(&revision.sha).map_err(git_err)?;
        let repo = Repository::open_bare(&entry.dir).map_err(|e| {
            entry.needs_repair.store(true, Ordering::SeqCst);
            corrupt(&source.url, &e)
        })?;
        read::read_tree(&repo, oid, path, self.inner.file_limit).map_err(|e| match e {
            // The revision was resolved from this clone: an object missing now means the
            // clone is damaged, which the next sync repairs.
            SourceError::Git { message } => {
                entry.needs_repair.store(true, Ordering::SeqCst);
                SourceError::CacheCorrupt {
                    url: source.url.clone(),
                    message,
                }
            }
            other => other,
        })
    }

    /// The cheap check: ask the remote where the reference points (one `ls-remote` of
    /// the advertised refs, no pack transfer) and compare with the revision this source
    /// last synced. `true` when a sync would bring something new (or it never synced).
    /// Not with the shared clone: another app's source of the same repository may have
    /// fetched the new commit already, and this one would then never take it.
    pub async fn remote_moved(&self, source: &Source) -> Result<bool, SourceError> {
        let known = self.last_good(source).map(|revision| revision.sha);
        if source.is_pinned() {
            // A commit SHA never moves: only a missing object needs a fetch.
            return Ok(known.is_none());
        }
        let url = source.url.clone();
        let source = self
            .resolve_auth(source)
            .await
            .map_err(|e| e.redact(&url))?;
        let watchdog = Watchdog::start(self.inner.timeouts.deadline);
        let job_watchdog = watchdog.clone();
        let task = tokio::task::spawn_blocking(move || {
            let remote = ls_remote(&source.url, &source.auth, &source.reference, &job_watchdog)?;
            Ok(match (remote, known) {
                (Some(remote), Some(known)) => remote.to_string() != known,
                (None, _) => true, // let the sync report the missing ref
                (_, None) => true,
            })
        });
        let moved: Result<bool, SourceError> =
            match tokio::time::timeout(watchdog.remaining(), task).await {
                Ok(joined) => joined.map_err(|e| SourceError::Git {
                    message: format!("check task failed: {e}"),
                })?,
                Err(_) => {
                    // Nothing is locked by a check: the stuck job ends at its socket
                    // timeouts on its own.
                    watchdog.cancel();
                    Err(watchdog.error(&url))
                }
            };
        moved.map_err(|e: SourceError| e.redact(&url))
    }

    /// The source's readiness and last good revision.
    pub fn status(&self, source: &Source) -> SourceStatus {
        self.inner
            .statuses
            .lock()
            .map(|s| s.get(source).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// The revision to keep using: the last one that synced.
    pub fn last_good(&self, source: &Source) -> Option<Revision> {
        self.status(source).last_good
    }

    fn record(&self, source: &Source, result: &Result<Revision, SourceError>) {
        let Ok(mut statuses) = self.inner.statuses.lock() else {
            return;
        };
        let status = statuses.entry(source.clone()).or_default();
        let now = Utc::now();
        match result {
            Ok(revision) => {
                status.ready = true;
                status.reason = None;
                status.message = None;
                status.retryable = false;
                status.last_good = Some(revision.clone());
                status.last_success = Some(now);
                status.failing_since = None;
                crate::metrics::METRICS.source_success(
                    &redact(&source.url),
                    &source.reference,
                    &source.path,
                    now,
                );
            }
            // Not logged here: the caller reports the error it gets back (the service's
            // poller logs it, the CLI prints it), so it is said once.
            Err(e) => {
                status.ready = false;
                status.reason = Some(e.reason());
                status.message = Some(e.to_string());
                status.retryable = e.is_retryable();
                status.failing_since.get_or_insert(now);
            }
        }
    }

    fn entry(&self, key: &RepoKey) -> Arc<RepoEntry> {
        let mut repos = match self.inner.repos.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        repos
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(RepoEntry {
                    dir: self.inner.root.join(key.dir_name()),
                    fetch: tokio::sync::Mutex::new(FetchState::default()),
                    needs_repair: AtomicBool::new(false),
                })
            })
            .clone()
    }
}

/// The blocking part of one sync.
struct SyncJob {
    dir: PathBuf,
    source: Source,
    skip_fetch: bool,
    repair: bool,
    watchdog: Watchdog,
}

impl SyncJob {
    /// Returns the revision and whether a fetch ran.
    fn run(self) -> Result<(Revision, bool), SourceError> {
        let url = &self.source.url;
        auth::preflight(url, &self.source.auth)?;
        let exists = self.dir.join("HEAD").exists() || self.dir.join("objects").exists();
        if !exists {
            self.reclone()?;
            return Ok((self.resolve_fresh()?, true));
        }
        let repo = match Repository::open_bare(&self.dir) {
            Ok(repo) if !self.repair => repo,
            Ok(_) => {
                tracing::warn!(url = %redact(url), "re-cloning a cache a reader found damaged");
                self.reclone()?;
                return Ok((self.resolve_fresh()?, true));
            }
            Err(e) => {
                tracing::warn!(url = %redact(url), error = %redact(e.message()), "cache unreadable, re-cloning");
                self.reclone()?;
                return Ok((self.resolve_fresh()?, true));
            }
        };
        // A pinned commit already here needs no network at all.
        if self.source.is_pinned() {
            if let Ok(rev) = self.resolve(&repo) {
                return Ok((rev, false));
            }
        }
        let mut fetched = false;
        if !self.skip_fetch {
            if let Err(fetch_error) = fetch(
                &repo,
                url,
                &self.source.auth,
                &self.source.reference,
                &self.watchdog,
            ) {
                // A failed fetch is either the remote's fault or a damaged clone. Only a
                // clone that fails its own check is re-cloned, so an unreachable remote
                // never costs us the last good revision.
                if local_damage(&repo).is_some() {
                    drop(repo);
                    tracing::warn!(url = %redact(url), "cache damaged, re-cloning");
                    self.reclone()?;
                    return Ok((self.resolve_fresh()?, true));
                }
                return Err(fetch_error);
            }
            fetched = true;
        }
        match self.resolve(&repo) {
            Ok(rev) => Ok((rev, fetched)),
            Err(SourceError::Git { message }) => {
                drop(repo);
                tracing::warn!(url = %redact(url), error = %redact(&message), "cache damaged, re-cloning");
                self.reclone()?;
                Ok((self.resolve_fresh()?, true))
            }
            Err(e) => Err(e),
        }
    }

    fn resolve_fresh(&self) -> Result<Revision, SourceError> {
        let repo = Repository::open_bare(&self.dir).map_err(|e| corrupt(&self.source.url, &e))?;
        self.resolve(&repo).map_err(|e| match e {
            SourceError::Git { message } => SourceError::CacheCorrupt {
                url: self.source.url.clone(),
                message,
            },
            other => other,
        })
    }

    /// Resolve the reference to a commit and check the path exists there.
    fn resolve(&self, repo: &Repository) -> Result<Revision, SourceError> {
        let oid = resolve_local(repo, &self.source.reference)?.ok_or_else(|| {
            SourceError::RefMissing {
                url: self.source.url.clone(),
                reference: self.source.reference.clone(),
            }
        })?;
        let commit = repo.find_commit(oid).map_err(git_err)?;
        read::check_path(repo, oid, &self.source.path)?;
        Ok(Revision {
            sha: oid.to_string(),
            subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or(b"")).into_owned(),
        })
    }

    /// Clone into a fresh directory beside the cache and swap it in only once complete:
    /// a failed clone leaves the old clone (and its last good revision) in place.
    fn reclone(&self) -> Result<(), SourceError> {
        let url = &self.source.url;
        let parent = self.dir.parent().unwrap_or(Path::new("."));
        let io = |path: &Path, source| SourceError::CacheIo {
            path: path.display().to_string(),
            source,
        };
        let fresh = parent.join(format!(".clone-{}", uuid::Uuid::new_v4()));
        let cloned = Repository::init_bare(&fresh)
            .map_err(git_err)
            .and_then(|repo| {
                fetch(
                    &repo,
                    url,
                    &self.source.auth,
                    &self.source.reference,
                    &self.watchdog,
                )
            });
        if let Err(e) = cloned {
            let _ = std::fs::remove_dir_all(&fresh);
            return Err(e);
        }
        if self.dir.exists() {
            let old = parent.join(format!(".old-{}", uuid::Uuid::new_v4()));
            std::fs::rename(&self.dir, &old).map_err(|e| io(&self.dir, e))?;
            let _ = std::fs::remove_dir_all(&old);
        }
        std::fs::rename(&fresh, &self.dir).map_err(|e| io(&self.dir, e))?;
        Ok(())
    }
}

fn corrupt(url: &str, e: &git2::Error) -> SourceError {
    SourceError::CacheCorrupt {
        url: url.to_string(),
        message: e.message().to_string(),
    }
}

/// Fetch every branch and tag, pruning what the remote deleted. A full SHA not reachable
/// from any of them is asked for by id (servers that allow it answer).
fn fetch(
    repo: &Repository,
    url: &str,
    auth: &Auth,
    reference: &str,
    watchdog: &Watchdog,
) -> Result<(), SourceError> {
    if watchdog.expired() {
        return Err(watchdog.error(url));
    }
    let outcome = RefCell::new(AuthOutcome::default());
    let result = {
        let mut remote = repo.remote_anonymous(url).map_err(git_err)?;
        let mut opts = FetchOptions::new();
        let mut callbacks = auth::callbacks(url, auth, &outcome);
        watchdog.watch(&mut callbacks);
        opts.remote_callbacks(callbacks)
            .prune(FetchPrune::On)
            .download_tags(AutotagOption::None)
            .update_fetchhead(false);
        let fetched = remote.fetch(FETCH_REFSPECS, Some(&mut opts), None);
        if fetched.is_ok() {
            // Remember the remote's default branch so a source may follow `HEAD`.
            if let Ok(name) = remote.default_branch() {
                if let Ok(name) = name.as_str() {
                    let _ = repo.set_head(name);
                }
            }
        }
        fetched
    };
    if let Err(e) = result {
        return Err(classify(url, e, outcome.into_inner(), watchdog));
    }
    if is_full_sha(reference) {
        if let Ok(oid) = Oid::from_str(reference) {
            if repo.find_commit(oid).is_err() {
                let outcome = RefCell::new(AuthOutcome::default());
                let mut remote = repo.remote_anonymous(url).map_err(git_err)?;
                let mut opts = FetchOptions::new();
                let mut callbacks = auth::callbacks(url, auth, &outcome);
                watchdog.watch(&mut callbacks);
                opts.remote_callbacks(callbacks).update_fetchhead(false);
                // Failure here just means the SHA is missing: resolve reports it.
                let _ = remote.fetch(&[reference], Some(&mut opts), None);
            }
        }
    }
    Ok(())
}

/// `HEAD` (or no reference at all) follows the remote's default branch.
pub(crate) fn follows_default_branch(reference: &str) -> bool {
    reference.is_empty() || reference == "HEAD"
}

/// The commit a reference points to in the local clone, `None` when it is not there.
fn resolve_local(repo: &Repository, reference: &str) -> Result<Option<Oid>, SourceError> {
    if is_full_sha(reference) {
        let oid = Oid::from_str(reference).map_err(git_err)?;
        return Ok(repo.find_commit(oid).ok().map(|c| c.id()));
    }
    if follows_default_branch(reference) {
        return match repo.head() {
            Ok(head) => Ok(Some(head.peel_to_commit().map_err(git_err)?.id())),
            Err(e)
                if matches!(
                    e.code(),
                    git2::ErrorCode::UnbornBranch | git2::ErrorCode::NotFound
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(git_err(e)),
        };
    }
    let candidates = if reference.starts_with("refs/") {
        vec![reference.to_string()]
    } else {
        vec![
            format!("refs/heads/{reference}"),
            format!("refs/tags/{reference}"),
        ]
    };
    for name in candidates {
        match repo.find_reference(&name) {
            Ok(r) => {
                let commit = r.peel_to_commit().map_err(git_err)?;
                return Ok(Some(commit.id()));
            }
            Err(e) if e.code() == git2::ErrorCode::NotFound => continue,
            Err(e) => return Err(git_err(e)),
        }
    }
    Ok(None)
}

/// Ask the remote where `reference` points without fetching. Annotated tags are peeled
/// (`^{}`), as `git ls-remote` shows them.
fn ls_remote(
    url: &str,
    auth: &Auth,
    reference: &str,
    watchdog: &Watchdog,
) -> Result<Option<Oid>, SourceError> {
    auth::preflight(url, auth)?;
    let outcome = RefCell::new(AuthOutcome::default());
    let listed = (|| -> Result<Option<Oid>, git2::Error> {
        let mut remote = Remote::create_detached(url)?;
        let mut callbacks = auth::callbacks(url, auth, &outcome);
        watchdog.watch(&mut callbacks);
        let conn = remote.connect_auth(Direction::Fetch, Some(callbacks), None)?;
        let heads = conn.list()?;
        let names: Vec<String> = if follows_default_branch(reference) {
            vec!["HEAD".to_string()]
        } else if reference.starts_with("refs/") {
            vec![reference.to_string()]
        } else {
            vec![
                format!("refs/heads/{reference}"),
                format!("refs/tags/{reference}"),
            ]
        };
        for name in names {
            let peeled = format!("{name}^{{}}");
            if let Some(h) = heads.iter().find(|h| h.name() == peeled) {
                return Ok(Some(h.oid()));
            }
            if let Some(h) = heads.iter().find(|h| h.name() == name) {
                return Ok(Some(h.oid()));
            }
        }
        Ok(None)
    })();
    listed.map_err(|e| classify(url, e, outcome.into_inner(), watchdog))
}

/// Is the local clone damaged? Every reference must peel to a commit whose tree exists.
fn local_damage(repo: &Repository) -> Option<String> {
    let refs = match repo.references() {
        Ok(r) => r,
        Err(e) => return Some(e.message().to_string()),
    };
    for r in refs {
        let r = match r {
            Ok(r) => r,
            Err(e) => return Some(e.message().to_string()),
        };
        if let Err(e) = r.peel_to_commit().and_then(|c| c.tree()) {
            return Some(e.message().to_string());
        }
    }
    None
}

/// Turn a transport failure into a typed error: the deadline if our callbacks stopped
/// the transfer, what the credential callbacks saw, a socket timeout, then libgit2's
/// own classification.
fn classify(url: &str, e: git2::Error, outcome: AuthOutcome, watchdog: &Watchdog) -> SourceError {
    if watchdog.tripped() {
        return watchdog.error(url);
    }
    if let Some(failure) = outcome.failure {
        return failure;
    }
    if let Some(timeout) = timeout::socket_timeout(url, &e) {
        return timeout;
    }
    let message = e.message().to_string();
    let lower = message.to_ascii_lowercase();
    // libgit2's words for an HTTP 404 (`unexpected http status code: 404`): the host
    // answered, so the remote is reachable and the repository is what is missing.
    if lower.contains("status code: 404") {
        return SourceError::RepoNotFound {
            url: url.to_string(),
        };
    }
    if e.code() == git2::ErrorCode::Auth
        || lower.contains("401")
        || lower.contains("403")
        || lower.contains("authentication")
        || lower.contains("unauthorized")
    {
        return SourceError::AuthRefused {
            url: url.to_string(),
            message,
        };
    }
    SourceError::Unreachable {
        url: url.to_string(),
        message,
    }
}
