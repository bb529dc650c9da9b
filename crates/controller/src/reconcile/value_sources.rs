//! The value files a pass reads from other Git repositories (issue #26, Argo CD's
//! multi-source `$values`): each of the app's `source.helm.valueSources` is a Git
//! source of its own, kept synced by its own watcher (polled, and woken by a push
//! webhook naming its repository) through the shared source cache with the app's
//! credentials, so the cache's rule holds: a clone's revision is read only for the
//! credentials that fetched it. A pass takes each source's current revision; its
//! commit joins the revision's identity (`…+NAME@<commit>`), so a commit to a values
//! repository is a new desired state, and a pass with nothing new reads and renders
//! nothing: the files are read again only when a revision moved.

use std::collections::BTreeMap;

use tokio::sync::watch;

use crate::config::{AppConfig, split_ref_file};
use tether_core::source::{Revision, Source, SourceCache, SourceError, SourceState};
use tether_diff::manifest::{ValuesLayer, is_ref_file};

/// Why a pass could not read its value files from other repositories; nothing was
/// rendered.
#[derive(Debug, thiserror::Error)]
pub enum RefValuesError {
    /// The source has not synced yet, or never succeeded: retryable (its watcher
    /// retries, and wakes the app when it has a revision).
    #[error("source.helm.valueSources {name} ({repo}): no revision fetched yet: {message}")]
    NotFetched {
        name: String,
        repo: String,
        message: String,
    },
    /// The file is not in the repository at that revision: a commit must add it (or
    /// the configuration change), so the app stalls until one of them moves.
    #[error("source.helm.valueFiles {file:?}: {repo} has no file {path:?} at {revision}")]
    Missing {
        file: String,
        repo: String,
        revision: String,
        path: String,
    },
    /// The file is there and not a values document (or not a file).
    #[error("source.helm.valueFiles {file:?}: {path:?} of {repo} at {revision} {message}")]
    Invalid {
        file: String,
        repo: String,
        revision: String,
        path: String,
        message: String,
    },
    /// Reading the cache's clone failed (a symlink out of the path, a file too large,
    /// a damaged clone): as the source error says.
    #[error("source.helm.valueFiles {file:?}: reading {repo} at {revision}: {source}")]
    Read {
        file: String,
        repo: String,
        revision: String,
        #[source]
        source: SourceError,
    },
}

impl RefValuesError {
    /// Whether trying again unchanged can succeed; otherwise a commit or the
    /// configuration must change.
    pub fn is_retryable(&self) -> bool {
        match self {
            RefValuesError::NotFetched { .. } => true,
            RefValuesError::Missing { .. } | RefValuesError::Invalid { .. } => false,
            RefValuesError::Read { source, .. } => source.is_retryable(),
        }
    }
}

/// One value source as the worker follows it.
struct Followed {
    name: String,
    source: Source,
    state: watch::Receiver<SourceState>,
}

/// An app's value sources: their watchers' states and the files last read.
#[derive(Default)]
pub struct ValueSources {
    followed: Vec<Followed>,
    /// The files read at [`ValueSources::current`]'s revisions, by `valueFiles` entry.
    read: Option<(Vec<String>, BTreeMap<String, ValuesLayer>)>,
}

impl ValueSources {
    /// Follows `sources` (the app's, [`AppConfig::value_sources`]) through the states
    /// their watchers publish.
    pub fn new(sources: Vec<(String, Source, watch::Receiver<SourceState>)>) -> Self {
        ValueSources {
            followed: sources
                .into_iter()
                .map(|(name, source, state)| Followed {
                    name,
                    source,
                    state,
                })
                .collect(),
            read: None,
        }
    }

    /// The revision each source offers now (`None` for one with none yet), by name.
    fn current(&self) -> Vec<(&str, Option<Revision>)> {
        self.followed
            .iter()
            .map(|f| (f.name.as_str(), f.state.borrow().revision.clone()))
            .collect()
    }

    /// Whether a source has not tried its first fetch yet: its watcher wakes the app
    /// when it has, so a pass waits instead of failing.
    pub fn pending(&self) -> bool {
        self.followed.iter().any(|f| f.state.borrow().syncs == 0)
    }

    /// `id` with each source's commit: `<id>+NAME@<commit>`, in the order listed.
    pub fn revision_id(&self, id: String) -> String {
        self.current().into_iter().fold(id, |id, (name, rev)| {
            let sha = rev.map(|r| r.sha).unwrap_or_default();
            format!("{id}+{name}@{sha}")
        })
    }

    /// The revision as the status shows it: `<revision>+NAME@<short commit>`.
    pub fn shown(&self, sha: &str) -> String {
        self.current()
            .into_iter()
            .fold(sha.to_string(), |shown, (name, rev)| match rev {
                Some(rev) => format!("{shown}+{name}@{}", rev.short()),
                None => format!("{shown}+{name}@?"),
            })
    }

    /// The value files of `app` from these sources at their current revisions, read
    /// from the cache's clones (no request), or kept from the last read when no
    /// revision moved.
    pub async fn read(
        &mut self,
        cache: &SourceCache,
        app: &AppConfig,
    ) -> Result<BTreeMap<String, ValuesLayer>, RefValuesError> {
        let mut revisions = Vec::with_capacity(self.followed.len());
        for f in &self.followed {
            let state = f.state.borrow().clone();
            let Some(revision) = state.revision else {
                return Err(RefValuesError::NotFetched {
                    name: f.name.clone(),
                    repo: f.source.url.clone(),
                    message: state
                        .status
                        .message
                        .unwrap_or_else(|| "not synced yet".into()),
                });
            };
            revisions.push(revision);
        }
        let shas: Vec<String> = revisions.iter().map(|r| r.sha.clone()).collect();
        if let Some((read_at, files)) = &self.read
            && *read_at == shas
        {
            return Ok(files.clone());
        }
        let mut files = BTreeMap::new();
        for file in app
            .source
            .helm
            .value_files
            .iter()
            .filter(|f| is_ref_file(f))
        {
            // Checked with the configuration: every name is listed.
            let Some((name, path)) = split_ref_file(file) else {
                continue;
            };
            let Some(at) = self.followed.iter().position(|f| f.name == name) else {
                continue;
            };
            let layer =
                read_file(cache, &self.followed[at].source, &revisions[at], file, path).await?;
            files.insert(file.clone(), layer);
        }
        self.read = Some((shas, files.clone()));
        Ok(files)
    }
}

/// `path` of `source` at `revision`, as a values document.
async fn read_file(
    cache: &SourceCache,
    source: &Source,
    revision: &Revision,
    file: &str,
    path: &str,
) -> Result<ValuesLayer, RefValuesError> {
    let (cache, src, rev, wanted) = (
        cache.clone(),
        source.clone(),
        revision.clone(),
        path.to_string(),
    );
    let read = tokio::task::spawn_blocking(move || cache.read_path(&src, &rev, &wanted))
        .await
        .map_err(|e| SourceError::Git {
            message: format!("read task failed: {e}"),
        });
    let place = |message: &str| RefValuesError::Invalid {
        file: file.to_string(),
        repo: source.url.clone(),
        revision: revision.sha.clone(),
        path: path.to_string(),
        message: message.to_string(),
    };
    let files = match read.and_then(|r| r) {
        Ok(files) => files,
        Err(SourceError::PathMissing { .. }) => {
            return Err(RefValuesError::Missing {
                file: file.to_string(),
                repo: source.url.clone(),
                revision: revision.sha.clone(),
                path: path.to_string(),
            });
        }
        Err(source_error) => {
            return Err(RefValuesError::Read {
                file: file.to_string(),
                repo: source.url.clone(),
                revision: revision.sha.clone(),
                source: source_error,
            });
        }
    };
    let [one] = files.as_slice() else {
        return Err(place("is a directory, not a values file"));
    };
    if one.path != path {
        return Err(place("is a directory, not a values file"));
    }
    let origin = format!("{} at {} file {path}", source.url, revision.short());
    super::values::values_document(origin, &one.bytes).map_err(|message| place(&message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_core::source::SourceStatus;

    fn followed(
        name: &str,
        sha: Option<&str>,
        syncs: u64,
    ) -> (String, Source, watch::Receiver<SourceState>) {
        let state = SourceState {
            revision: sha.map(|sha| Revision {
                sha: sha.into(),
                subject: "s".into(),
            }),
            status: SourceStatus::default(),
            syncs,
        };
        let source = Source::new(format!("https://git.example.com/{name}.git"), "main", "");
        (name.into(), source, watch::channel(state).1)
    }

    #[test]
    fn the_revision_names_each_value_sources_commit() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let sources = ValueSources::new(vec![
            followed("values", Some(&a), 1),
            followed("config", Some(&b), 1),
        ]);
        assert!(!sources.pending());
        assert_eq!(
            sources.revision_id("web@1.0.0@sha256:00".into()),
            format!("web@1.0.0@sha256:00+values@{a}+config@{b}")
        );
        assert_eq!(
            sources.shown("web@1.0.0@sha256:00"),
            "web@1.0.0@sha256:00+values@aaaaaaaaaaaa+config@bbbbbbbbbbbb"
        );
        let none = ValueSources::default();
        assert_eq!(none.revision_id("x".into()), "x");
        assert_eq!(none.shown("x"), "x");
        let waiting = ValueSources::new(vec![followed("values", None, 0)]);
        assert!(waiting.pending());
        assert_eq!(waiting.shown("x"), "x+values@?");
    }
}
