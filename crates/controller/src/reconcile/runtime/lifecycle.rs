//! An app's life in the runtime: its worker and source watcher started (with the
//! suspension and pin recorded for it), and a new configuration applied by stopping,
//! starting and restarting only the apps it changes.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{Contexts, Running, STOP_GRACE, ServeError, commit_url_prefix, stop_app};
use crate::config::{AppConfig, Config};
use crate::reconcile::app;
use tether_core::metrics::METRICS;
use tether_core::report::status::{ConditionStatus, ConditionType};
use tether_core::source::{SourceWatcher, Triggers};

impl Contexts {
    pub(super) async fn start_all(
        &mut self,
        config: &Config,
        triggers: &Triggers,
    ) -> Result<(), ServeError> {
        for app in &config.apps {
            self.start(app, config, triggers).await?;
        }
        Ok(())
    }

    /// Whether this replica holds `app`, for its source: with shards, only the shard's
    /// holder fetches (the others' idle apps cost no fetch); otherwise always, so a
    /// follower of `--leader-elect` keeps its sources warm for a takeover.
    fn held(&self, app: &str, stop: CancellationToken) -> tokio::sync::watch::Receiver<bool> {
        if self.ownership.owner(app).is_none() {
            return tokio::sync::watch::channel(true).1;
        }
        let mut leadership = self.ownership.for_app(app);
        let (tx, rx) = tokio::sync::watch::channel(leadership.is_leader());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    () = leadership.changed() => {}
                }
                tx.send_if_modified(|held| {
                    let now = leadership.is_leader();
                    std::mem::replace(held, now) != now
                });
            }
        });
        rx
    }

    /// Starts an app's worker. An app whose cluster or identity cannot be set up
    /// (a kubeconfig Secret missing or malformed) does not start: its status says
    /// why, and the next reload tries again; the other apps run on.
    pub(super) async fn start(
        &mut self,
        app: &AppConfig,
        config: &Config,
        triggers: &Triggers,
    ) -> Result<(), ServeError> {
        let (target, shared) = match self.for_app(app, config).await {
            Ok(found) => found,
            Err(err) => {
                tracing::error!(app = %app.name, error = %err, "cannot set up the app's cluster or identity; not started");
                let (message, reason) = (err.to_string(), err.reason());
                self.statuses.update(&app.name, |s| {
                    let now = chrono::Utc::now();
                    s.set_condition(
                        ConditionType::Ready,
                        ConditionStatus::False,
                        reason,
                        &message,
                        now,
                    );
                    s.set_condition(
                        ConditionType::Stalled,
                        ConditionStatus::True,
                        reason,
                        &message,
                        now,
                    );
                });
                return Ok(());
            }
        };
        let source = app.source();
        let trigger = triggers.register(&source);
        let source_cancel = self.workers.child_token();
        let (rx, source_task) = SourceWatcher::spawn_while(
            self.sources.clone(),
            source,
            app.poll_config(&config.sources),
            trigger,
            self.held(&app.name, source_cancel.clone()),
            source_cancel.clone(),
        );
        // Each value source is a Git source of its own: polled, woken by its
        // repository's pushes, and stopped with the app's source.
        let value_sources = app
            .value_sources()
            .into_iter()
            .map(|(name, source)| {
                let trigger = triggers.register(&source);
                let (state, _task) = SourceWatcher::spawn_while(
                    self.sources.clone(),
                    source.clone(),
                    app.poll_config(&config.sources),
                    trigger,
                    self.held(&app.name, source_cancel.clone()),
                    source_cancel.clone(),
                );
                (name, source, state)
            })
            .collect();
        let cluster = shared.cluster.clone();
        let handle = app::spawn(
            app.clone(),
            shared,
            rx,
            value_sources,
            self.workers.child_token(),
        );
        if self.apps.suspensions.is_recorded(&app.name) {
            handle.set_suspended(true);
        }
        if let Some(pin) = self.apps.pins.get(&app.name) {
            handle.set_pin(Some(pin));
        }
        let commit_page = commit_url_prefix(&app.source.repo);
        self.statuses
            .update(&app.name, |s| s.commit_url_prefix = commit_page);
        self.apps.running.lock().insert(
            app.name.clone(),
            Running {
                handle,
                source_task,
                source_cancel,
                target,
                cluster,
            },
        );
        Ok(())
    }

    /// Applies a new configuration: apps removed stop, apps added start, apps changed
    /// restart; apps unchanged keep running undisturbed.
    pub(super) async fn reload(
        &mut self,
        old: &Config,
        new: &Config,
        triggers: &Triggers,
    ) -> Result<(), ServeError> {
        if old.server != new.server {
            tracing::warn!(
                "server settings (listen address, webhook secrets, API token) change at the next restart"
            );
        }
        if old.shards != new.shards || old.leader_election != new.leader_election {
            tracing::warn!("shards and leader election change at the next restart");
        }
        if old.sources.budget != new.sources.budget {
            tracing::warn!("sources.budget changes at the next restart");
        }
        for app in &old.apps {
            if new.app(&app.name) == Some(app) {
                continue;
            }
            let running = self.apps.running.lock().remove(&app.name);
            if let Some(running) = running {
                triggers.unregister(&app.source());
                for (_, source) in app.value_sources() {
                    triggers.unregister(&source);
                }
                let target = running.target.clone();
                stop_app(running, Instant::now() + STOP_GRACE).await;
                self.release(&target, &app.name);
            }
            if new.app(&app.name).is_none() {
                self.statuses.remove(&app.name);
                METRICS.forget_app(&app.name);
            }
        }
        for app in &new.apps {
            let running = self.apps.running.lock().contains_key(&app.name);
            // An app that could not start last time tries again.
            if old.app(&app.name) != Some(app) || !running {
                self.start(app, new, triggers).await?;
            }
        }
        Ok(())
    }
}
