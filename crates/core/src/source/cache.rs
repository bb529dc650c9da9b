//! One bare clone per repository and credentials under a cache directory, fetched
//! incrementally and shared only by sources that reach the repository by the same
//! scheme with the same credentials ([`super::clone_key`]); what each source may read
//! there is what its own syncs resolved ([`super::records`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use git2::{AutotagOption, Direction, FetchOptions, FetchPrune, Oid, Remote, Repository};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::auth::{self, AuthOutcome};
use super::clone_key::{self, CloneKey, Keyer};
use super::read::{self, RevisionBudget, git_err};
use super::records::{Records, SourceStatus};
use super::refs::{follows_default_branch, resolve_local};
use super::timeout::{self, GitTimeouts, Watchdog};
use super::url::redact;
use super::{Auth, Revision, Source, SourceError, SourceFile, is_full_sha};
use crate::cluster::Cluster;
mod charts;
mod earlier;

/// Every branch and tag, mirrored under the same names: one fetch serves every source
/// of the repository whatever its reference, as `git clone --mirror` would.
const FETCH_REFSPECS: &[&str] = &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/// Where the cache lives when `--cache-dir` is not given.
const CACHE_SUBDIR: &str = "tether/git";

/// What a [`SourceCache`] is opened with: the limits of its fetches and of its reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheOptions {
    /// Bounds on every fetch and `ls-remote`.
    pub timeouts: GitTimeouts,
    /// What one read of a revision may spend.
    pub budget: RevisionBudget,
}

impl From<GitTimeouts> for CacheOptions {
    fn from(timeouts: GitTimeouts) -> Self {
        CacheOptions {
            timeouts,
            ..CacheOptions::default()
        }
    }
}

/// The shared Git cache. Cheap to clone (an `Arc`); every clone sees the same
/// repositories, locks and statuses.
#[derive(Clone)]
pub struct SourceCache {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    keyer: Keyer,
    repos: Mutex<HashMap<CloneKey, Arc<RepoEntry>>>,
    records: Records,
    file_limit: u64,
    options: CacheOptions,
    /// The connection that reads `credentials.secretRef` Secrets, as tether itself
    /// (Flux's source-controller reads them as the controller too).
    secrets: Mutex<Option<Arc<Cluster>>>,
    /// Chart dependencies of the revisions read (issue #26), shared by every app.
    charts: super::charts::ChartStore,
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

    /// Open a cache whose fetches and `ls-remote`s stop at `options.timeouts` and
    /// whose reads spend at most `options.budget` (a [`GitTimeouts`] alone keeps the
    /// default budget).
    pub fn open_with(
        dir: impl Into<PathBuf>,
        options: impl Into<CacheOptions>,
    ) -> Result<Self, SourceError> {
        timeout::apply_socket_timeouts();
        let root = dir.into();
        // A folder tether makes is its owner's only; one given that exists is left as
        // it is (it may be shared on purpose).
        let made = !root.exists();
        std::fs::create_dir_all(&root)
            .and_then(|()| {
                if made {
                    clone_key::restrict(&root)
                } else {
                    Ok(())
                }
            })
            .map_err(|source| SourceError::CacheIo {
                path: root.display().to_string(),
                source,
            })?;
        Ok(SourceCache {
            inner: Arc::new(Inner {
                keyer: Keyer::open(&root)?,
                root,
                repos: Mutex::new(HashMap::new()),
                records: Records::default(),
                file_limit: read::MAX_FILE_BYTES,
                options: options.into(),
                secrets: Mutex::new(None),
                charts: super::charts::ChartStore::new(super::charts::DEFAULT_CHART_CACHE_BYTES),
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

    /// The chart dependency store every revision's chart is vendored from.
    pub fn charts(&self) -> &super::charts::ChartStore {
        &self.inner.charts
    }

    /// Read the Secrets of [`Auth::Secret`] sources through `cluster` from now on.
    pub fn read_secrets_with(&self, cluster: Arc<Cluster>) {
        {
            let mut secrets = self.inner.secrets.lock();
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
        let data = self.secret_data(source, secret).await?;
        let cred_err = |message: String| SourceError::Credentials {
            url: source.url.clone(),
            message,
        };
        let auth = secret.auth(&data).map_err(cred_err)?;
        Ok(source.clone().with_auth(auth))
    }

    /// The cache's root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Fetch the source's repository (incrementally; sharing a fetch with concurrent
    /// syncs of the same clone, which hold the same credentials), resolve its
    /// reference to one commit, and check the path exists there.
    ///
    /// On failure the cache keeps what it had: [`SourceCache::status`] reports
    /// `Ready=False` with the reason and still holds the last good revision, whose files
    /// [`SourceCache::read_files`] still reads.
    pub async fn sync(&self, source: &Source) -> Result<Revision, SourceError> {
        let requested = Instant::now();
        let result = match self.sync_registry(source).await {
            Some(registry) => registry.map(|revision| (revision, None)),
            None => self
                .sync_inner(source, requested)
                .await
                .map(|(revision, key)| (revision, Some(key))),
        }
        .map_err(|e| e.redact(&source.url));
        if let Some(unused) = self.inner.records.record(source, &result) {
            self.discard(&unused);
        }
        crate::metrics::METRICS.git_fetch(
            &source.repo_key().host_path,
            requested.elapsed(),
            result.as_ref().err().map(SourceError::reason),
        );
        result.map(|(revision, _)| revision)
    }

    async fn sync_inner(
        &self,
        source: &Source,
        requested: Instant,
    ) -> Result<(Revision, CloneKey), SourceError> {
        let resolved = self.resolve_auth(source).await?;
        auth::preflight(&resolved.url, &resolved.auth)?;
        let key = self.inner.keyer.key(&resolved)?;
        // A pinned commit needs no network only if this source's own credentials
        // resolved it before: another source having brought it into a clone is not enough.
        let pinned_known = source.is_pinned()
            && self
                .inner
                .records
                .verified_in(source, &key, &source.reference);
        let entry = self.entry(&key);
        let mut state = entry.fetch.lock().await;
        let watchdog = Watchdog::start(self.inner.options.timeouts.deadline);
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
            pinned_known,
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
                Ok((revision, key))
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
        let (budget, limit) = (self.inner.options.budget, self.inner.file_limit);
        self.in_clone(source, &revision.sha, |repo, oid| {
            read::read_tree(repo, oid, path, limit, budget)
        })
    }

    /// The Git object ids of `paths` at `revision` (`None` for a path absent there),
    /// read from the clone without reading any file. Blocking.
    pub fn object_ids<'p>(
        &self,
        source: &Source,
        revision: &Revision,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Result<Vec<(&'p str, Option<String>)>, SourceError> {
        self.in_clone(source, &revision.sha, |repo, oid| {
            paths
                .into_iter()
                .map(|path| Ok((path, read::object_id(repo, oid, path)?)))
                .collect()
        })
        .map_err(|e| e.redact(&source.url))
    }

    /// Runs `read` over the clone in which this source's own sync resolved `sha`.
    /// The revision was resolved there: an object missing now means the clone is
    /// damaged, which the next sync repairs.
    pub(crate) fn in_clone<T>(
        &self,
        source: &Source,
        sha: &str,
        read: impl FnOnce(&Repository, Oid) -> Result<T, SourceError>,
    ) -> Result<T, SourceError> {
        let key = self.inner.records.clone_for(source, sha)?;
        let entry = self.entry(&key);
        let oid = Oid::from_str(sha).map_err(git_err)?;
        let repo = Repository::open_bare(&entry.dir).map_err(|e| {
            entry.needs_repair.store(true, Ordering::SeqCst);
            corrupt(&source.url, &e)
        })?;
        read(&repo, oid).map_err(|e| match e {
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
        if source.is_registry() {
            // A repository's index is the check: the sync reads it, and fetches an
            // archive only for a version it has not fetched before.
            return Ok(true);
        }
        if source.is_pinned() {
            // A commit SHA never moves: only a missing object needs a fetch.
            return Ok(known.is_none());
        }
        let url = source.url.clone();
        let source = self
            .resolve_auth(source)
            .await
            .map_err(|e| e.redact(&url))?;
        let watchdog = Watchdog::start(self.inner.options.timeouts.deadline);
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
        self.inner.records.status(source)
    }

    /// The revision to keep using: the last one that synced.
    pub fn last_good(&self, source: &Source) -> Option<Revision> {
        self.status(source).last_good
    }

    /// Hold `source` while it is in use (a watcher holds its source for as long as it
    /// runs). When the last hold of a source is dropped, the cache forgets it: its
    /// status, its metric series, and its clone when no other source uses that clone.
    pub fn hold(&self, source: &Source) -> SourceHold {
        self.inner.records.hold(source);
        SourceHold {
            cache: self.clone(),
            source: source.clone(),
        }
    }

    fn release(&self, source: &Source) {
        let forgotten = self.inner.records.release(source);
        if let Some((url, reference, path)) = &forgotten.series {
            crate::metrics::METRICS.forget_source(url, reference, path);
        }
        if let Some(repo) = &forgotten.repo {
            crate::metrics::METRICS.forget_repo(repo);
        }
        if let Some(key) = &forgotten.clone {
            self.discard(key);
        }
    }

    /// Delete a clone no source uses any more. One being fetched right now (a source
    /// starting up with the same credentials) is kept: it is in use again.
    fn discard(&self, key: &CloneKey) {
        let mut repos = self.inner.repos.lock();
        let dir = self.inner.root.join(key.dir_name());
        if let Some(entry) = repos.get(key) {
            let Ok(state) = entry.fetch.try_lock() else {
                return;
            };
            if state.straggler.is_some() {
                return;
            }
        }
        repos.remove(key);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::debug!(
                clone = key.dir_name(),
                "removed the clone of a forgotten source"
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(clone = key.dir_name(), error = %e, "cannot remove the clone of a forgotten source")
            }
        }
    }

    fn entry(&self, key: &CloneKey) -> Arc<RepoEntry> {
        let mut repos = self.inner.repos.lock();
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

/// A source in use: dropping the last hold of a source makes the cache forget it
/// ([`SourceCache::hold`]).
pub struct SourceHold {
    cache: SourceCache,
    source: Source,
}

impl Drop for SourceHold {
    fn drop(&mut self) {
        self.cache.release(&self.source);
    }
}

/// The blocking part of one sync.
struct SyncJob {
    dir: PathBuf,
    source: Source,
    skip_fetch: bool,
    /// The reference is a commit this source resolved before in this clone.
    pinned_known: bool,
    repair: bool,
    watchdog: Watchdog,
}

impl SyncJob {
    /// Returns the revision and whether a fetch ran.
    fn run(self) -> Result<(Revision, bool), SourceError> {
        let url = &self.source.url;
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
        // A pinned commit this source resolved here before needs no network at all.
        if self.pinned_known {
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
