//! Notifications: after a pass, what happened to an app (a sync failed, health degraded,
//! drift found or corrected, its source stale) goes to the app's channels, a generic
//! JSON webhook (HMAC-SHA256 signed if asked) or a Slack-compatible incoming webhook.
//! Events name objects and changed field paths, never values, so no Secret value leaves
//! the cluster this way; a flapping app gets one message per `minInterval`, the next
//! counting those held back. An App's channels reach public addresses only (`outbound`).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::task::JoinHandle;

use super::delivery::{
    self, Admission, CloseOnDrop, DeliveryError, DeliveryOptions, DeliveryStats, Post, Queue,
};
use super::drift::{DriftReport, Summary};
use crate::source::{Revision, SecretRef};
use crate::sync::{Action, SyncReport};
use tether_diff::diff::{Change, ObjectDiff, Segment, Status, is_secret};
use tether_diff::manifest::ObjectId;

/// One message per app, event kind and channel per five minutes at most: long enough
/// that an app flapping on every pass (the default poll is one minute) cannot flood a
/// channel, short enough that a new failure after a fix is seen quickly.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// Objects listed in one Slack message; the rest are counted. Slack truncates long
/// messages, and a list of hundreds helps no one in a chat.
const SLACK_MAX_OBJECTS: usize = 10;

/// Objects carried in one webhook body; the summary still counts them all.
const WEBHOOK_MAX_OBJECTS: usize = 500;

/// Header carrying `sha256=<hex HMAC-SHA256 of the body>`, GitHub's convention for
/// signed webhooks, so receivers can reuse their verification code.
pub const SIGNATURE_HEADER: &str = "x-tether-signature-256";
/// Header naming the event kind (`driftDetected`…), to route without parsing.
pub const EVENT_HEADER: &str = "x-tether-event";
/// Header with a unique id per delivery (the same across its retries), so a receiver
/// can drop a retried duplicate.
pub const DELIVERY_HEADER: &str = "x-tether-delivery";

/// What happened to an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum EventKind {
    /// A pass failed (source, manifests, dry run, apply, prune).
    SyncFailed,
    /// The app's health became Degraded.
    HealthDegraded,
    /// The live state differs from Git and nothing corrected it (no auto-sync, or a
    /// closed sync window).
    DriftDetected,
    /// Drift was found and applied away.
    DriftCorrected,
    /// The app's Git source has been failing for longer than its `source.staleAfter`:
    /// the cluster is kept at the last good revision, and new commits are not seen.
    /// Sent once per failure, again only after the source has recovered.
    SourceStale,
}

impl EventKind {
    pub const ALL: [EventKind; 5] = [
        EventKind::SyncFailed,
        EventKind::HealthDegraded,
        EventKind::DriftDetected,
        EventKind::DriftCorrected,
        EventKind::SourceStale,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::SyncFailed => "syncFailed",
            EventKind::HealthDegraded => "healthDegraded",
            EventKind::DriftDetected => "driftDetected",
            EventKind::DriftCorrected => "driftCorrected",
            EventKind::SourceStale => "sourceStale",
        }
    }

    fn headline(self) -> &'static str {
        match self {
            EventKind::SyncFailed => "sync failed",
            EventKind::HealthDegraded => "health degraded",
            EventKind::DriftDetected => "drift detected",
            EventKind::DriftCorrected => "drift corrected",
            EventKind::SourceStale => "source stale",
        }
    }

    fn emoji(self) -> &'static str {
        match self {
            EventKind::SyncFailed => ":x:",
            EventKind::HealthDegraded => ":warning:",
            EventKind::DriftDetected => ":mag:",
            EventKind::DriftCorrected => ":white_check_mark:",
            EventKind::SourceStale => ":hourglass:",
        }
    }
}

/// The kind of channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// A JSON body as [`Event`] serializes, optionally signed.
    Webhook,
    /// A Slack (or Mattermost, Rocket.Chat…) incoming webhook: `{"text": …}`.
    Slack,
}

/// One entry of an app's `notifications:` list, as written in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotificationConfig {
    #[serde(rename = "type")]
    pub kind: ChannelKind,
    /// The URL, for a webhook whose URL is not a secret.
    #[serde(default)]
    pub url: Option<String>,
    /// The environment variable holding the URL.
    #[serde(default)]
    pub url_env: Option<String>,
    /// The file holding the URL.
    #[serde(default)]
    pub url_file: Option<PathBuf>,
    /// The environment variable holding the webhook's HMAC key.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// The file holding the webhook's HMAC key.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// The events sent; all when absent.
    #[serde(default)]
    pub events: Option<Vec<EventKind>>,
    /// At most one message per app and event kind per this long (`30s`, `5m`,
    /// `1h30m`; `0s` sends every one). Defaults to 5m.
    #[serde(default)]
    pub min_interval: Option<String>,
}

/// Why a `notifications:` entry cannot be used. All need a change of configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    #[error("notifications[{index}]: needs exactly one of url, urlEnv and urlFile")]
    Url { index: usize },
    #[error("notifications[{index}].url: not an http(s) URL")]
    InvalidUrl { index: usize },
    #[error(
        "notifications[{index}]: a Slack webhook URL is a secret; give it with urlEnv or urlFile"
    )]
    SlackUrlInline { index: usize },
    #[error("notifications[{index}]: at most one of secretEnv and secretFile")]
    Secret { index: usize },
    #[error(
        "notifications[{index}]: Slack webhooks are not signed; secretEnv/secretFile is for type webhook"
    )]
    SlackSecret { index: usize },
    #[error("notifications[{index}].events: empty; omit it to send every event")]
    NoEvents { index: usize },
    #[error(
        "notifications[{index}].minInterval: {value:?} is not a duration like 30s, 5m or 1h30m"
    )]
    Interval { index: usize, value: String },
}

/// Where a channel's URL comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum UrlSource {
    Literal(String),
    /// Read at each delivery; never logged.
    Secret(SecretRef),
}

impl fmt::Debug for UrlSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlSource::Literal(url) => write!(f, "{:?}", crate::source::redact_url(url)),
            UrlSource::Secret(r) => write!(f, "{r:?}"),
        }
    }
}

/// A resolved channel of one app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// `notifications[<index>]`: how logs name the channel (never by URL).
    pub name: String,
    pub kind: ChannelKind,
    pub url: UrlSource,
    /// The HMAC key of a webhook.
    pub secret: Option<SecretRef>,
    pub events: Vec<EventKind>,
    pub min_interval: Duration,
    pub requester: super::outbound::Requester,
}

/// Resolve an app's `notifications:` list; errors name the entry and field.
pub fn resolve_channels(configs: &[NotificationConfig]) -> Result<Vec<Arc<Channel>>, NotifyError> {
    configs
        .iter()
        .enumerate()
        .map(|(index, config)| config.resolve(index).map(Arc::new))
        .collect()
}

impl NotificationConfig {
    /// Check one entry, the `index`-th of its list. Secrets are not read here: they
    /// are read at each delivery.
    pub fn resolve(&self, index: usize) -> Result<Channel, NotifyError> {
        let url = match (&self.url, &self.url_env, &self.url_file) {
            (Some(_), None, None) if self.kind == ChannelKind::Slack => {
                return Err(NotifyError::SlackUrlInline { index });
            }
            (Some(url), None, None) => {
                if !is_http_url(url) {
                    return Err(NotifyError::InvalidUrl { index });
                }
                UrlSource::Literal(url.clone())
            }
            (None, Some(name), None) => UrlSource::Secret(SecretRef::Env(name.clone())),
            (None, None, Some(path)) => UrlSource::Secret(SecretRef::File(path.clone())),
            _ => return Err(NotifyError::Url { index }),
        };
        let secret = SecretRef::env_or_file(&self.secret_env, &self.secret_file)
            .map_err(|_| NotifyError::Secret { index })?;
        if secret.is_some() && self.kind == ChannelKind::Slack {
            return Err(NotifyError::SlackSecret { index });
        }
        let events = match &self.events {
            None => EventKind::ALL.to_vec(),
            Some(list) if list.is_empty() => return Err(NotifyError::NoEvents { index }),
            Some(list) => list.clone(),
        };
        let min_interval = match &self.min_interval {
            None => DEFAULT_MIN_INTERVAL,
            Some(text) => tether_schema::duration::parse_duration(text).map_err(|_| {
                NotifyError::Interval {
                    index,
                    value: text.clone(),
                }
            })?,
        };
        Ok(Channel {
            name: format!("notifications[{index}]"),
            kind: self.kind,
            url,
            secret,
            events,
            min_interval,
            requester: super::outbound::Requester::Operator,
        })
    }
}

fn is_http_url(raw: &str) -> bool {
    url::Url::parse(raw)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
}

/// An object an event is about: its identity, its verdict and the paths of the
/// fields that differ. Values are never carried.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

impl ObjectRef {
    /// The reference for one diffed object.
    pub fn from_diff(diff: &ObjectDiff) -> ObjectRef {
        ObjectRef::new(&diff.id, diff.drift.status(), diff.drift.changes())
    }

    /// The reference for an object a sync changed (or would change). A Secret's
    /// paths stop at the key (`data.password`): deeper segments of a path can hold
    /// values.
    pub fn new(id: &ObjectId, status: Status, changes: &[Change]) -> ObjectRef {
        let secret = is_secret(id);
        let paths = changes
            .iter()
            .map(|c| {
                if secret {
                    c.path
                        .segments()
                        .iter()
                        .take(2)
                        .map_while(|s| match s {
                            Segment::Field(f) => Some(f.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join(".")
                } else {
                    c.path.to_string()
                }
            })
            .collect();
        ObjectRef {
            api_version: id.api_version(),
            kind: id.kind.clone(),
            namespace: id.namespace.clone(),
            name: id.name.clone(),
            status,
            paths,
        }
    }

    fn title(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// The commit an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventRevision {
    pub sha: String,
    pub subject: String,
}

impl From<&Revision> for EventRevision {
    fn from(r: &Revision) -> Self {
        EventRevision {
            sha: r.sha.clone(),
            subject: r.subject.clone(),
        }
    }
}

/// What happened to an app in one pass; the webhook body is this, serialized.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub app: String,
    #[serde(rename = "event")]
    pub kind: EventKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<EventRevision>,
    /// A status reason named after the stage (`SourceFailed`, `ApplyFailed`,
    /// `Degraded`…). Never free text from the API server, which can quote an object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub summary: Summary,
    /// Drifted objects (at most 500, in the order given).
    pub objects: Vec<ObjectRef>,
}

impl Event {
    /// An event about a drift report: its summary and its drifted objects.
    pub fn from_drift(
        app: &str,
        kind: EventKind,
        revision: Option<&Revision>,
        report: &DriftReport,
    ) -> Event {
        Event {
            app: app.to_string(),
            kind,
            revision: revision.map(EventRevision::from),
            reason: None,
            summary: report.summary(),
            objects: report
                .objects
                .iter()
                .filter(|o| o.drift.is_drift())
                .map(ObjectRef::from_diff)
                .collect(),
        }
    }

    /// The event for a sync (or the dry run that found drift): what it created,
    /// configured or pruned, or would have. `reason` names a stage, never a message.
    pub fn from_sync(
        app: &str,
        kind: EventKind,
        revision: Option<&Revision>,
        reason: Option<&str>,
        report: &SyncReport,
    ) -> Event {
        let mut summary = Summary::default();
        let mut objects = Vec::new();
        for o in &report.objects {
            let Some(status) = o.drift else { continue };
            if o.action == Action::Failed {
                continue;
            }
            summary.add(status);
            if status == Status::InSync {
                continue;
            }
            objects.push(ObjectRef::new(&o.id, status, &o.changes));
        }
        Event {
            app: app.to_string(),
            kind,
            revision: revision.map(EventRevision::from),
            reason: reason.map(str::to_string),
            summary,
            objects,
        }
    }

    /// The webhook body: the event, plus how many like it the rate limit held back.
    fn webhook_body(&self, suppressed: u64, delivery_id: &str) -> serde_json::Value {
        let mut body = serde_json::to_value(self).unwrap_or_default();
        if let Some(m) = body.as_object_mut() {
            if let Some(serde_json::Value::Array(objects)) = m.get_mut("objects") {
                objects.truncate(WEBHOOK_MAX_OBJECTS);
            }
            m.insert("suppressed".into(), suppressed.into());
            m.insert("deliveryId".into(), delivery_id.into());
            m.insert(
                "timestamp".into(),
                chrono::Utc::now()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    .into(),
            );
        }
        body
    }

    /// The Slack text (mrkdwn), one headline and a short list of objects.
    fn slack_text(&self, suppressed: u64) -> String {
        let mut text = format!(
            "{} *{}*: {}",
            self.kind.emoji(),
            slack_escape(&self.app),
            self.kind.headline()
        );
        if let Some(r) = &self.revision {
            let short = r.sha.get(..12).unwrap_or(&r.sha);
            text.push_str(&format!(" at `{short}` {}", slack_escape(&r.subject)));
        }
        if let Some(reason) = &self.reason {
            text.push_str(&format!(" ({})", slack_escape(reason)));
        }
        let s = &self.summary;
        if s.total() > 0 {
            text.push_str(&format!(
                "\n{} modified, {} missing, {} extra, {} in sync",
                s.modified, s.missing, s.extra, s.in_sync
            ));
        }
        for o in self.objects.iter().take(SLACK_MAX_OBJECTS) {
            text.push_str(&format!(
                "\n• {} {}",
                slack_escape(&o.title()),
                o.status.as_str()
            ));
            if !o.paths.is_empty() {
                let paths: Vec<String> = o.paths.iter().map(|p| slack_escape(p)).collect();
                text.push_str(&format!(": `{}`", paths.join("`, `")));
            }
        }
        if self.objects.len() > SLACK_MAX_OBJECTS {
            text.push_str(&format!(
                "\n…and {} more",
                self.objects.len() - SLACK_MAX_OBJECTS
            ));
        }
        if suppressed > 0 {
            text.push_str(&format!(
                "\n_{suppressed} more {} event(s) for this app were held back by the rate limit_",
                self.kind.as_str()
            ));
        }
        text
    }
}

/// Slack reads `&`, `<` and `>` as markup; its docs ask senders to escape them.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One message waiting for delivery.
struct Message {
    channel: Arc<Channel>,
    event: Arc<Event>,
    suppressed: u64,
}

/// The rate limit's memory for one (app, channel, event kind).
#[derive(Debug)]
struct Window {
    last_sent: Instant,
    suppressed: u64,
}

type Windows = Arc<Mutex<HashMap<(String, String, EventKind), Window>>>;

/// The handle the reconcile loop holds: [`notify`](Self::notify) applies the rate
/// limit and queues, returning at once; a worker task sends.
#[derive(Clone)]
pub struct Notifier {
    queue: Arc<Queue<Message>>,
    windows: Windows,
    worker: Arc<Mutex<Option<JoinHandle<()>>>>,
    _closer: Arc<CloseOnDrop<Message>>,
}

impl Notifier {
    /// Start the worker on the current Tokio runtime (an error outside one). Dropping
    /// every clone of the handle closes the queue; the worker drains it and ends.
    pub fn start(options: DeliveryOptions) -> Result<Notifier, DeliveryError> {
        let clients = Arc::new(delivery::Clients::new(&options)?);
        let queue = Queue::new(options.queue_capacity);
        let worker = {
            let queue = queue.clone();
            delivery::spawn_worker(queue.clone(), move |_app, message: Message| {
                let clients = clients.clone();
                let options = options.clone();
                let queue = queue.clone();
                async move { send(&clients, &options, &queue, message).await }
            })?
        };
        Ok(Notifier {
            _closer: Arc::new(CloseOnDrop(queue.clone())),
            queue,
            windows: Arc::default(),
            worker: Arc::new(Mutex::new(Some(worker))),
        })
    }

    /// Send `event` to each of the app's `channels` that wants its kind and whose
    /// rate limit allows it; never waits on the network. Returns how many messages
    /// were queued.
    pub fn notify(&self, channels: &[Arc<Channel>], event: Event) -> usize {
        let event = Arc::new(event);
        let now = Instant::now();
        let mut queued = 0;
        for channel in channels.iter().filter(|c| c.events.contains(&event.kind)) {
            let suppressed = {
                let mut windows = self.windows.lock();
                let key = (event.app.clone(), channel.name.clone(), event.kind);
                match windows.get_mut(&key) {
                    Some(w) if now.duration_since(w.last_sent) < channel.min_interval => {
                        w.suppressed += 1;
                        None
                    }
                    Some(w) => {
                        w.last_sent = now;
                        Some(std::mem::take(&mut w.suppressed))
                    }
                    None => {
                        windows.insert(
                            key,
                            Window {
                                last_sent: now,
                                suppressed: 0,
                            },
                        );
                        Some(0)
                    }
                }
            };
            let Some(suppressed) = suppressed else {
                self.queue.counters.skipped();
                tracing::debug!(app = %event.app, channel = %channel.name, event = event.kind.as_str(), "notification held back by the rate limit");
                continue;
            };
            let message = Message {
                channel: channel.clone(),
                event: event.clone(),
                suppressed,
            };
            if self.queue.push(&event.app, message, Admission::Append) {
                queued += 1;
            }
        }
        queued
    }

    /// Forget the rate-limit windows of `app` (it was removed from the configuration).
    pub fn forget(&self, app: &str) {
        self.windows.lock().retain(|(a, _, _), _| a != app);
    }

    /// Wait until every message queued so far has been sent or given up on.
    pub async fn flush(&self) {
        self.queue.flush().await;
    }

    /// Stop taking events, send what is queued, and end the worker.
    pub async fn shutdown(&self) {
        self.queue.close();
        let worker = self.worker.lock().take();
        if let Some(worker) = worker {
            let _ = worker.await;
        }
    }

    pub fn stats(&self) -> DeliveryStats {
        self.queue.counters.snapshot()
    }
}

impl Message {
    fn post(&self) -> Result<Post, DeliveryError> {
        let url = match &self.channel.url {
            UrlSource::Literal(url) => url.clone(),
            UrlSource::Secret(r) => r.read().map_err(DeliveryError::Build)?,
        };
        if !is_http_url(&url) {
            // The URL may be a secret: say where it came from, not what it is.
            return Err(DeliveryError::Build(format!(
                "the URL from {:?} is not an http(s) URL",
                self.channel.url
            )));
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let body = match self.channel.kind {
            ChannelKind::Slack => {
                serde_json::json!({ "text": self.event.slack_text(self.suppressed) })
            }
            ChannelKind::Webhook => {
                let id = uuid::Uuid::new_v4().to_string();
                headers.insert(
                    HeaderName::from_static(EVENT_HEADER),
                    HeaderValue::from_static(self.event.kind.as_str()),
                );
                if let Ok(v) = HeaderValue::from_str(&id) {
                    headers.insert(HeaderName::from_static(DELIVERY_HEADER), v);
                }
                self.event.webhook_body(self.suppressed, &id)
            }
        };
        let body = serde_json::to_vec(&body).map_err(|e| DeliveryError::Build(e.to_string()))?;
        if let Some(secret) = &self.channel.secret {
            let key = secret.read().map_err(DeliveryError::Build)?;
            let signature = format!("sha256={}", sign(key.as_bytes(), &body));
            let value = HeaderValue::from_str(&signature)
                .map_err(|_| DeliveryError::Build("signature header".into()))?;
            headers.insert(HeaderName::from_static(SIGNATURE_HEADER), value);
        }
        Ok(Post::new(self.channel.requester, url, headers, body))
    }
}

/// Hex HMAC-SHA256 of `body` under `key`.
pub fn sign(key: &[u8], body: &[u8]) -> String {
    // HMAC takes keys of any length: new_from_slice cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

async fn send(
    clients: &delivery::Clients,
    options: &DeliveryOptions,
    queue: &Queue<Message>,
    message: Message,
) {
    let result = match message.post() {
        Ok(post) => delivery::post_with_retry(clients, options, &queue.counters, &post).await,
        Err(e) => Err(e),
    };
    let app = message.event.app.as_str();
    let channel = message.channel.name.as_str();
    let event = message.event.kind.as_str();
    match result {
        Ok(attempts) => {
            queue.counters.delivered();
            tracing::debug!(app, channel, event, attempts, "notification sent");
        }
        Err(error) => {
            queue.counters.failed();
            tracing::warn!(app, channel, event, %error, "notification not sent");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> NotificationConfig {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn channels_resolve_with_defaults() {
        let c = config("type: webhook\nurl: https://hooks.local/x\nsecretEnv: HOOK_KEY\n")
            .resolve(0)
            .unwrap();
        assert_eq!(c.events, EventKind::ALL);
        assert_eq!(c.min_interval, DEFAULT_MIN_INTERVAL);
        assert_eq!(c.secret, Some(SecretRef::Env("HOOK_KEY".into())));
        let c = config("type: slack\nurlFile: /run/slack\nevents: [syncFailed]\nminInterval: 1m\n")
            .resolve(2)
            .unwrap();
        assert_eq!(c.name, "notifications[2]");
        assert_eq!(c.events, [EventKind::SyncFailed]);
        assert_eq!(c.min_interval, Duration::from_secs(60));
    }

    #[test]
    fn bad_channels_are_refused_by_field() {
        let cases = [
            (
                "type: slack\nurl: https://hooks.slack.com/services/T/B/X\n",
                NotifyError::SlackUrlInline { index: 1 },
            ),
            ("type: webhook\n", NotifyError::Url { index: 1 }),
            (
                "type: webhook\nurl: https://a.local\nurlEnv: U\n",
                NotifyError::Url { index: 1 },
            ),
            (
                "type: webhook\nurl: ftp://a.local\n",
                NotifyError::InvalidUrl { index: 1 },
            ),
            (
                "type: slack\nurlEnv: U\nsecretEnv: K\n",
                NotifyError::SlackSecret { index: 1 },
            ),
            (
                "type: webhook\nurlEnv: U\nsecretEnv: K\nsecretFile: /k\n",
                NotifyError::Secret { index: 1 },
            ),
            (
                "type: webhook\nurlEnv: U\nevents: []\n",
                NotifyError::NoEvents { index: 1 },
            ),
            (
                "type: webhook\nurlEnv: U\nminInterval: soon\n",
                NotifyError::Interval {
                    index: 1,
                    value: "soon".into(),
                },
            ),
        ];
        for (yaml, want) in cases {
            assert_eq!(config(yaml).resolve(1), Err(want), "{yaml}");
        }
        let err = config("type: slack\nurl: https://hooks.slack.com/services/T/B/X\n")
            .resolve(0)
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hooks.slack.com"), "{err}");
        assert!(
            serde_saphyr::from_str::<NotificationConfig>("type: webhook\nurlEnv: U\nretries: 3\n")
                .is_err()
        );
        assert!(
            serde_saphyr::from_str::<NotificationConfig>(
                "type: webhook\nurlEnv: U\nevents: [everything]\n"
            )
            .is_err()
        );
    }

    #[test]
    fn slack_text_escapes_markup_and_counts_what_was_held_back() {
        let event = Event {
            app: "shop<prod>".into(),
            kind: EventKind::SyncFailed,
            revision: Some(EventRevision {
                sha: "0123456789abcdef0123456789abcdef01234567".into(),
                subject: "Bump & deploy".into(),
            }),
            reason: Some("ApplyFailed".into()),
            summary: Summary::default(),
            objects: Vec::new(),
        };
        let text = event.slack_text(3);
        assert!(
            text.contains(
                "*shop&lt;prod&gt;*: sync failed at `0123456789ab` Bump &amp; deploy (ApplyFailed)"
            ),
            "{text}"
        );
        assert!(text.contains("3 more syncFailed event(s)"), "{text}");
    }
}
