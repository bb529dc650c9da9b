//! The service's configuration (`tether serve --config FILE`): which apps to keep in
//! sync, from where, under which policies. Read before the loop starts.
//!
//! Two steps (STYLE.md): the YAML is parsed into private `raw` structs that mirror the
//! schema agreed for issue #6 (camelCase, unknown keys refused; its example is
//! `tests/fixtures/config/tether.yaml`), then
//! validated into the typed [`Config`], collecting every problem with its field path
//! and line. Secrets are never inline: the configuration names environment variables
//! and files, read when used ([`Credentials::auth`] at fetch time,
//! [`ServerConfig::webhook_config`] at start-up), so validation does not need them.
//!
//! Adding a section (e.g. `notifications`) means a field in the `raw` struct, a field in
//! the typed one, and its checks in the matching `resolve_*` function.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use chrono_tz::Tz;
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::diff::IgnoreRule;
use crate::ownership::{DEFAULT_INVENTORY_NAMESPACE, INVENTORY_PREFIX, MAX_APP_NAME_LEN};
use crate::reconcile::windows::{SyncWindow, WindowKind, parse_schedule};
use crate::report::commit_status::CommitStatusConfig;
use crate::report::notify::NotificationConfig;
use crate::server::ApiToken;
use crate::source::{Auth, PollConfig, Provider, SecretRef, Source, WebhookConfig, WebhookSecret};

/// Where the HTTP server listens: every interface, port 8080 (the schema's default).
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8080));

/// Apps reconciled at once (the schema's default). Passes mostly wait on Git and the
/// API server, so four keep a two-core machine busy without queuing behind each other.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// Periodic full resync of every app, whatever the triggers say: the schema's default.
/// It bounds how long a missed event (or live drift no watch saw) can go unnoticed.
pub const DEFAULT_RESYNC_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// Name of the leader Lease (the schema's default).
pub const DEFAULT_LEASE_NAME: &str = "tether";

/// Leader election timings: client-go's `leaderelection` defaults, as used by
/// controller-runtime (LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// See [`DEFAULT_LEASE_DURATION`].
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// See [`DEFAULT_LEASE_DURATION`].
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The reference followed when none is given: the remote's default branch.
pub const DEFAULT_REF: &str = "HEAD";

/// The directory read when none is given: the repository's root.
pub const DEFAULT_PATH: &str = ".";

/// Poll interval of an app's source (the schema's default, Flux's usual
/// `GitRepository` interval). Shorter than the CLI's [`crate::source::DEFAULT_POLL_INTERVAL`]
/// because a service without webhooks relies on polling alone.
pub const DEFAULT_SOURCE_INTERVAL: Duration = Duration::from_secs(60);

/// Budgets for the YAML parser. A configuration is a few hundred nodes; these refuse an
/// alias bomb or a pathological nesting long before it costs memory.
const MAX_CONFIG_DEPTH: usize = 64;
const MAX_CONFIG_ALIASES: usize = 1_000;
const MAX_CONFIG_NODES: usize = 100_000;
const MAX_CONFIG_EVENTS: usize = 400_000;

// ---------------------------------------------------------------------------------
// Errors

/// What is wrong with a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read. Retryable: a volume may be mounted late.
    #[error("{origin}: cannot read: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    /// Not YAML, or not the schema's shape (unknown key, wrong type, missing field,
    /// duplicate key). The parser stops at the first. Needs a change.
    #[error("{}", Problem::render(origin, path.as_deref(), *line, message))]
    Syntax {
        origin: String,
        path: Option<String>,
        line: Option<usize>,
        message: String,
    },
    /// Well-formed, but values are invalid: every problem found, one per line. Needs a
    /// change.
    #[error("{}", render_all(origin, problems))]
    Invalid {
        origin: String,
        problems: Vec<Problem>,
    },
    /// A secret named by the configuration could not be read, or is empty. Retryable
    /// when a Secret is mounted late; the message names where, never the value.
    #[error("{what}: {message}")]
    Secret { what: String, message: String },
}

/// One invalid value: where it is and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Field path as written in the file: `apps[1].source.interval`.
    pub path: String,
    /// 1-based line of the value, when the parser recorded one.
    pub line: Option<usize>,
    pub message: String,
}

impl Problem {
    fn render(origin: &str, path: Option<&str>, line: Option<usize>, message: &str) -> String {
        let mut out = origin.to_string();
        if let Some(line) = line {
            out.push_str(&format!(":{line}"));
        }
        out.push_str(": ");
        if let Some(path) = path.filter(|p| !p.is_empty()) {
            out.push_str(path);
            out.push_str(": ");
        }
        out.push_str(message);
        out
    }
}

fn render_all(origin: &str, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| Problem::render(origin, Some(&p.path), p.line, &p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------
// The typed configuration

/// The whole configuration, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: ServerConfig,
    /// Where the `tether-inventory-<app>` ConfigMaps live.
    pub inventory_namespace: String,
    /// Apps reconciled at once (>= 1).
    pub concurrency: usize,
    /// Periodic full resync of every app.
    pub resync_interval: Duration,
    pub leader_election: LeaderElectionConfig,
    /// May be empty: the service then idles.
    pub apps: Vec<AppConfig>,
}

/// The HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub webhooks: WebhooksConfig,
    /// The bearer token `/api/v1` requires; None leaves it open (trusted networks).
    pub api_token: Option<SecretRef>,
}

/// Webhook secrets per provider (none configured: that provider's deliveries are
/// refused unless `allow_unsigned`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhooksConfig {
    pub github: Option<WebhookSecretRef>,
    pub gitlab: Option<WebhookSecretRef>,
    pub gitea: Option<WebhookSecretRef>,
    pub bitbucket: Option<WebhookSecretRef>,
    pub generic: Option<WebhookSecretRef>,
    /// Accept unsigned deliveries (only for tests and trusted networks).
    pub allow_unsigned: bool,
}

/// Where a webhook secret is read from: `{secretFile: PATH}` or `{secretEnv: NAME}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSecretRef(pub SecretRef);

/// Leader election over a `coordination.k8s.io` Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Also switched on by `--leader-elect`.
    pub enabled: bool,
    /// Defaults to the inventory namespace.
    pub namespace: String,
    pub lease_name: String,
    pub lease_duration: Duration,
    /// Shorter than `lease_duration`.
    pub renew_deadline: Duration,
    /// Shorter than `renew_deadline`.
    pub retry_period: Duration,
}

/// One application: a source, a destination and policies.
#[derive(Debug, Clone, PartialEq)]
pub struct AppConfig {
    /// DNS-1123 label of at most [`MAX_APP_NAME_LEN`] characters, unique.
    pub name: String,
    pub source: SourceConfig,
    pub destination: DestinationConfig,
    pub sync: SyncPolicy,
    pub ignore_differences: Vec<IgnoreDifference>,
    pub sync_windows: Vec<SyncWindow>,
    /// Freeze automation (drift is still reported).
    pub suspend: bool,
    /// Where to tell people about failures, degraded health and drift.
    pub notifications: Vec<NotificationConfig>,
    /// Post each pass's result to the Git provider as a commit status.
    pub commit_status: Option<CommitStatusConfig>,
}

/// Where an app's desired state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceConfig {
    pub repo: String,
    pub reference: String,
    pub path: String,
    /// Poll interval.
    pub interval: Duration,
    pub credentials: Credentials,
}

/// How to authenticate to a Git remote: references to secrets, never the secrets.
/// Several may be set (the schema's example sets them all); [`Credentials::auth`] picks
/// the one that fits the repository's URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// HTTP(S) user (with a password or token), or the SSH user (with a key).
    pub username: Option<String>,
    pub password: Option<SecretRef>,
    pub token: Option<SecretRef>,
    pub ssh_key_file: Option<PathBuf>,
    pub known_hosts_file: Option<PathBuf>,
}

/// Where an app's objects go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationConfig {
    /// Namespace for namespaced objects that name none.
    pub namespace: String,
    /// Kubeconfig context; `None` for the current one (or in-cluster).
    pub context: Option<String>,
}

/// What automation may do for an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncPolicy {
    /// Apply on drift; otherwise drift is only reported.
    pub automated: bool,
    /// Delete what the inventory owns and Git no longer has.
    pub prune: bool,
    /// Correct live drift too, not only new revisions (acts only when `automated`).
    pub self_heal: bool,
    /// Server-side apply with `force`: take fields from other managers.
    pub force: bool,
    /// Allow a prune that would delete every object the app owns.
    pub allow_mass_prune: bool,
}

impl Default for SyncPolicy {
    fn default() -> Self {
        SyncPolicy {
            automated: false,
            prune: false,
            self_heal: true,
            force: true,
            allow_mass_prune: false,
        }
    }
}

/// Fields that may differ without being drift (schema `ignoreDifferences`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoreDifference {
    /// `Some("")` for the core group; `None` matches every group.
    pub group: Option<String>,
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub json_pointers: Vec<String>,
    pub managed_fields_managers: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: DEFAULT_LISTEN,
            webhooks: WebhooksConfig::default(),
            api_token: None,
        }
    }
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            enabled: false,
            namespace: DEFAULT_INVENTORY_NAMESPACE.to_string(),
            lease_name: DEFAULT_LEASE_NAME.to_string(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            server: ServerConfig::default(),
            inventory_namespace: DEFAULT_INVENTORY_NAMESPACE.to_string(),
            concurrency: DEFAULT_CONCURRENCY,
            resync_interval: DEFAULT_RESYNC_INTERVAL,
            leader_election: LeaderElectionConfig::default(),
            apps: Vec::new(),
        }
    }
}

impl Config {
    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            origin: origin.clone(),
            source,
        })?;
        Config::parse(&text, &origin)
    }

    /// Parses and validates configuration text; `origin` (a file name) prefixes errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let raw = parse_raw(text, origin)?;
        let mut check = Checker::default();
        let config = resolve(raw, &mut check);
        // Top to bottom, as a person fixes a file; problems without a line (about a
        // default) last.
        check.problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
        if check.problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid {
                origin: origin.to_string(),
                problems: check.problems,
            })
        }
    }

    /// The app named `name`.
    pub fn app(&self, name: &str) -> Option<&AppConfig> {
        self.apps.iter().find(|a| a.name == name)
    }
}

impl AppConfig {
    /// The Git source to fetch, with its credentials.
    pub fn source(&self) -> Source {
        Source::new(&self.source.repo, &self.source.reference, &self.source.path)
            .with_auth(self.source.credentials.auth(&self.source.repo))
    }

    /// How to poll the source: the configured interval, default jitter and coalescing.
    pub fn poll_config(&self) -> PollConfig {
        PollConfig {
            interval: self.source.interval,
            ..PollConfig::default()
        }
    }

    /// The diff's ignore rules.
    pub fn ignore_rules(&self) -> Vec<IgnoreRule> {
        self.ignore_differences
            .iter()
            .map(|d| IgnoreRule {
                group: d.group.clone(),
                kind: d.kind.clone(),
                namespace: d.namespace.clone(),
                name: d.name.clone(),
                json_pointers: d.json_pointers.clone(),
                managers: d.managed_fields_managers.clone(),
            })
            .collect()
    }

    /// The name of the ConfigMap holding this app's inventory.
    pub fn inventory_name(&self) -> String {
        crate::ownership::inventory_name(&self.name)
    }
}

impl Credentials {
    /// How to authenticate to `url`. An SSH URL uses the SSH key when one is
    /// configured; otherwise a token wins over a password, and a password over an SSH
    /// key. One set of credentials can so serve a repository over either protocol.
    pub fn auth(&self, url: &str) -> Auth {
        let ssh = || match (&self.ssh_key_file, &self.known_hosts_file) {
            (Some(private_key), Some(known_hosts)) => Some(Auth::SshKey {
                private_key: private_key.clone(),
                known_hosts: known_hosts.clone(),
                passphrase: None,
                username: self.username.clone(),
            }),
            _ => None,
        };
        if crate::source::is_ssh_url(url)
            && let Some(auth) = ssh()
        {
            return auth;
        }
        if let Some(token) = &self.token {
            Auth::Token {
                token: token.clone(),
                username: self.username.clone(),
            }
        } else if let (Some(username), Some(password)) = (&self.username, &self.password) {
            Auth::Basic {
                username: username.clone(),
                password: password.clone(),
            }
        } else {
            ssh().unwrap_or(Auth::None)
        }
    }
}

impl WebhooksConfig {
    /// The configured secrets, per provider.
    pub fn secrets(&self) -> impl Iterator<Item = (Provider, &WebhookSecretRef)> {
        [
            (Provider::Github, &self.github),
            (Provider::Gitlab, &self.gitlab),
            (Provider::Gitea, &self.gitea),
            (Provider::Bitbucket, &self.bitbucket),
            (Provider::Generic, &self.generic),
        ]
        .into_iter()
        .filter_map(|(p, s)| s.as_ref().map(|s| (p, s)))
    }
}

fn provider_key(p: Provider) -> &'static str {
    match p {
        Provider::Github => "github",
        Provider::Gitlab => "gitlab",
        Provider::Gitea => "gitea",
        Provider::Bitbucket => "bitbucket",
        Provider::Generic => "generic",
    }
}

impl WebhookSecretRef {
    /// Reads the secret now. An unset variable, an unreadable file and an empty value
    /// are errors (an empty HMAC key would accept anyone's signature); the error names
    /// the variable or file, never the value.
    pub fn load(&self) -> Result<WebhookSecret, ConfigError> {
        self.load_as("webhook secret")
    }

    fn load_as(&self, what: &str) -> Result<WebhookSecret, ConfigError> {
        Ok(WebhookSecret::new(read_secret(&self.0, what)?.into_bytes()))
    }
}

/// Reads a secret the service needs: an unset variable, an unreadable file and an
/// empty value are errors naming `what` and where it was looked for, never the value.
fn read_secret(secret: &SecretRef, what: &str) -> Result<String, ConfigError> {
    let err = |message: String| ConfigError::Secret {
        what: what.to_string(),
        message,
    };
    let value = secret.read().map_err(err)?;
    if value.trim().is_empty() {
        return Err(err(match secret {
            SecretRef::Env(name) => format!("environment variable {name} is empty"),
            SecretRef::File(path) => format!("{} is empty", path.display()),
        }));
    }
    Ok(value)
}

/// The configuration key a secret was named by.
fn secret_field(secret: &SecretRef) -> &'static str {
    match secret {
        SecretRef::Env(_) => "secretEnv",
        SecretRef::File(_) => "secretFile",
    }
}

impl ServerConfig {
    /// The webhook receivers' configuration, with every configured secret read now.
    pub fn webhook_config(&self) -> Result<WebhookConfig, ConfigError> {
        let mut config = WebhookConfig {
            allow_unsigned: self.webhooks.allow_unsigned,
            ..WebhookConfig::default()
        };
        for (provider, secret) in self.webhooks.secrets() {
            let what = format!(
                "server.webhooks.{}.{}",
                provider_key(provider),
                secret_field(&secret.0)
            );
            config = config.with_secret(provider, secret.load_as(&what)?);
        }
        Ok(config)
    }

    /// The status API's token, read now; None when the API is open.
    pub fn api_token(&self) -> Result<Option<ApiToken>, ConfigError> {
        self.api_token
            .as_ref()
            .map(|secret| {
                let what = format!("server.apiToken.{}", secret_field(secret));
                read_secret(secret, &what).map(|value| ApiToken::new(value.trim()))
            })
            .transpose()
    }
}

// ---------------------------------------------------------------------------------
// Durations

/// Parses `30s`, `1m`, `1h30m`, `8h`, `500ms`: one or more integer amounts, each with a
/// unit (`ms`, `s`, `m`, `h`). Zero is accepted here; callers that need a positive
/// duration say so.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let not = || format!("{text:?} is not a duration (like 30s, 1m, 1h30m or 500ms)");
    let s = text.trim();
    if s.is_empty() {
        return Err(not());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(not());
        }
        let amount: u64 = rest[..digits].parse().map_err(|_| not())?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (Duration::from_millis(1), 2)
        } else if rest.starts_with('s') {
            (Duration::from_secs(1), 1)
        } else if rest.starts_with('m') {
            (Duration::from_secs(60), 1)
        } else if rest.starts_with('h') {
            (Duration::from_secs(3600), 1)
        } else {
            return Err(not());
        };
        rest = &rest[len..];
        let part = u32::try_from(amount)
            .ok()
            .and_then(|a| unit.checked_mul(a))
            .ok_or_else(|| format!("{text:?} is too long"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("{text:?} is too long"))?;
    }
    Ok(total)
}

// ---------------------------------------------------------------------------------
// Parsing

type S<T> = Spanned<T>;

/// The schema as written. Scalars that validation checks are `Spanned`, for lines.
mod raw {
    use super::S;
    use serde::{Deserialize, Deserializer};

    /// A key with nothing after it (`webhooks:` whose entries are all commented out)
    /// is null in YAML; it means the same as leaving the key out.
    fn null_is_default<'de, D, T>(de: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + Default,
    {
        Ok(Option::<T>::deserialize(de)?.unwrap_or_default())
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Config {
        #[serde(default, deserialize_with = "null_is_default")]
        pub server: Server,
        pub inventory_namespace: Option<S<String>>,
        pub concurrency: Option<S<i64>>,
        pub resync_interval: Option<S<String>>,
        #[serde(default, deserialize_with = "null_is_default")]
        pub leader_election: LeaderElection,
        #[serde(default, deserialize_with = "null_is_default")]
        pub apps: Vec<App>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Server {
        pub listen: Option<S<String>>,
        #[serde(default, deserialize_with = "null_is_default")]
        pub webhooks: Webhooks,
        pub api_token: Option<S<SecretFrom>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Webhooks {
        pub github: Option<S<SecretFrom>>,
        pub gitlab: Option<S<SecretFrom>>,
        pub gitea: Option<S<SecretFrom>>,
        pub bitbucket: Option<S<SecretFrom>>,
        pub generic: Option<S<SecretFrom>>,
        #[serde(default, deserialize_with = "null_is_default")]
        pub allow_unsigned: bool,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct SecretFrom {
        pub secret_file: Option<S<String>>,
        pub secret_env: Option<S<String>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct LeaderElection {
        #[serde(default, deserialize_with = "null_is_default")]
        pub enabled: bool,
        pub namespace: Option<S<String>>,
        pub lease_name: Option<S<String>>,
        pub lease_duration: Option<S<String>>,
        pub renew_deadline: Option<S<String>>,
        pub retry_period: Option<S<String>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct App {
        pub name: S<String>,
        pub source: Source,
        #[serde(default, deserialize_with = "null_is_default")]
        pub destination: Destination,
        #[serde(default, deserialize_with = "null_is_default")]
        pub sync: Sync,
        #[serde(default, deserialize_with = "null_is_default")]
        pub ignore_differences: Vec<S<IgnoreDifference>>,
        #[serde(default, deserialize_with = "null_is_default")]
        pub sync_windows: Vec<SyncWindow>,
        #[serde(default, deserialize_with = "null_is_default")]
        pub suspend: bool,
        #[serde(default, deserialize_with = "null_is_default")]
        pub notifications: Vec<crate::report::notify::NotificationConfig>,
        #[serde(default)]
        pub commit_status: Option<crate::report::commit_status::CommitStatusConfig>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Source {
        pub repo: S<String>,
        #[serde(rename = "ref")]
        pub reference: Option<String>,
        pub path: Option<String>,
        pub interval: Option<S<String>>,
        pub credentials: Option<S<Credentials>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Credentials {
        pub username: Option<S<String>>,
        pub password_env: Option<S<String>>,
        pub password_file: Option<S<String>>,
        pub token_env: Option<S<String>>,
        pub token_file: Option<S<String>>,
        pub ssh_key_file: Option<S<String>>,
        pub known_hosts_file: Option<S<String>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Destination {
        pub namespace: Option<S<String>>,
        pub context: Option<String>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Sync {
        #[serde(default, deserialize_with = "null_is_default")]
        pub automated: bool,
        #[serde(default, deserialize_with = "null_is_default")]
        pub prune: bool,
        pub self_heal: Option<bool>,
        pub force: Option<bool>,
        #[serde(default, deserialize_with = "null_is_default")]
        pub allow_mass_prune: bool,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct IgnoreDifference {
        pub group: Option<String>,
        pub kind: Option<String>,
        pub namespace: Option<String>,
        pub name: Option<String>,
        #[serde(default, deserialize_with = "null_is_default")]
        pub json_pointers: Vec<S<String>>,
        #[serde(default, deserialize_with = "null_is_default")]
        pub managed_fields_managers: Vec<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct SyncWindow {
        pub kind: S<String>,
        pub schedule: S<String>,
        pub duration: S<String>,
        pub time_zone: Option<S<String>>,
    }
}

fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_CONFIG_DEPTH;
    budget.flow_nesting_limit = MAX_CONFIG_DEPTH;
    budget.max_aliases = MAX_CONFIG_ALIASES;
    budget.max_nodes = MAX_CONFIG_NODES;
    budget.max_events = MAX_CONFIG_EVENTS;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    // Errors carry our own origin and line; the parser's snippet would repeat the input.
    options.with_snippet = false;
    options
}

fn parse_raw(text: &str, origin: &str) -> Result<raw::Config, ConfigError> {
    let syntax = |path: Option<String>, line: Option<usize>, message: String| ConfigError::Syntax {
        origin: origin.to_string(),
        path,
        line,
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#')
    }) {
        // Most likely a mount or templating mistake; `apps: []` says "no apps" on purpose.
        return Err(syntax(
            None,
            None,
            "the file is empty (write `apps: []` for a service with no apps)".into(),
        ));
    }
    let mut track = serde_path_to_error::Track::new();
    let result = serde_saphyr::with_deserializer_from_str_with_options(text, options(), |de| {
        raw::Config::deserialize(serde_path_to_error::Deserializer::new(de, &mut track))
    });
    result.map_err(|e| {
        let line = e.location().map(|l| l.line() as usize).filter(|l| *l > 0);
        let path = track.path().to_string();
        // `Spanned` adds an inner `.value` (no schema key is named `value`); `.` is the
        // root and `?` an unknown place.
        let path = path.replace(".value.", ".");
        let path = path.strip_suffix(".value").unwrap_or(&path).to_string();
        let path = (path != "." && path != "?").then_some(path);
        syntax(path, line, parser_message(&e.to_string()))
    })
}

/// The parser's message without its own position (ours replaces it): first line only,
/// `error: line L column C: ` and ` at line L, column C` removed.
fn parser_message(message: &str) -> String {
    let mut first = message.lines().next().unwrap_or("").trim();
    if let Some(rest) = first.strip_prefix("error: ")
        && let Some((position, msg)) = rest.split_once(": ")
        && position.starts_with("line ")
    {
        first = msg;
    }
    if let Some(i) = first.rfind(" at line ")
        && first[i + 9..].starts_with(|c: char| c.is_ascii_digit())
    {
        first = &first[..i];
    }
    first.to_string()
}

// ---------------------------------------------------------------------------------
// Validation

#[derive(Default)]
struct Checker {
    problems: Vec<Problem>,
}

fn line_of<T>(s: &S<T>) -> Option<usize> {
    Some(s.referenced.line() as usize).filter(|l| *l > 0)
}

impl Checker {
    fn report(&mut self, path: impl Into<String>, line: Option<usize>, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            line,
            message: message.into(),
        });
    }

    /// A positive duration, or the default when absent.
    fn duration(&mut self, path: &str, value: Option<&S<String>>, default: Duration) -> Duration {
        let Some(value) = value else {
            return default;
        };
        match parse_duration(&value.value) {
            Ok(d) if d.is_zero() => {
                self.report(
                    path,
                    line_of(value),
                    format!("{:?} must be positive", value.value),
                );
                default
            }
            Ok(d) => d,
            Err(message) => {
                self.report(path, line_of(value), message);
                default
            }
        }
    }

    fn label(&mut self, path: &str, value: &S<String>, max: usize, why: &str) {
        if let Err(message) = dns1123_label(&value.value, max, why) {
            self.report(path, line_of(value), message);
        }
    }

    fn non_empty(&mut self, path: &str, value: &S<String>) -> bool {
        if value.value.trim().is_empty() {
            self.report(path, line_of(value), "must not be empty");
            false
        } else {
            true
        }
    }
}

/// RFC 1123 label, as Kubernetes checks names of namespaces and labels.
fn dns1123_label(name: &str, max: usize, why: &str) -> Result<(), String> {
    let valid_chars = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !valid_chars {
        return Err(format!(
            "{name:?} is not a DNS-1123 label (lowercase letters, digits and '-', \
             starting and ending with a letter or digit)"
        ));
    }
    if name.len() > max {
        return Err(format!("{name:?} is longer than {max} characters{why}"));
    }
    Ok(())
}

/// RFC 1123 subdomain (dot-separated labels, 253 characters), as Kubernetes checks
/// most object names.
fn dns1123_subdomain(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| dns1123_label(l, 63, "").is_ok());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', \
             at most 253 characters)"
        ))
    }
}

fn resolve(raw: raw::Config, check: &mut Checker) -> Config {
    let inventory_namespace = match &raw.inventory_namespace {
        Some(ns) => {
            check.label("inventoryNamespace", ns, 63, "");
            ns.value.clone()
        }
        None => DEFAULT_INVENTORY_NAMESPACE.to_string(),
    };
    let concurrency = match &raw.concurrency {
        Some(c) if c.value < 1 => {
            check.report(
                "concurrency",
                line_of(c),
                format!("{} must be at least 1", c.value),
            );
            DEFAULT_CONCURRENCY
        }
        Some(c) => usize::try_from(c.value).unwrap_or(DEFAULT_CONCURRENCY),
        None => DEFAULT_CONCURRENCY,
    };
    let resync_interval = check.duration(
        "resyncInterval",
        raw.resync_interval.as_ref(),
        DEFAULT_RESYNC_INTERVAL,
    );
    let server = resolve_server(&raw.server, check);
    let leader_election =
        resolve_leader_election(&raw.leader_election, &inventory_namespace, check);
    let mut apps: Vec<AppConfig> = Vec::with_capacity(raw.apps.len());
    for (i, app) in raw.apps.iter().enumerate() {
        let path = format!("apps[{i}]");
        let resolved = resolve_app(app, &path, check);
        if let Some(first) = apps.iter().position(|a| a.name == resolved.name) {
            check.report(
                format!("{path}.name"),
                line_of(&app.name),
                format!("{:?} is also the name of apps[{first}]", resolved.name),
            );
        }
        apps.push(resolved);
    }
    Config {
        server,
        inventory_namespace,
        concurrency,
        resync_interval,
        leader_election,
        apps,
    }
}

fn resolve_server(raw: &raw::Server, check: &mut Checker) -> ServerConfig {
    let listen = match &raw.listen {
        Some(l) => match SocketAddr::from_str(l.value.trim()) {
            Ok(addr) => addr,
            Err(_) => {
                check.report(
                    "server.listen",
                    line_of(l),
                    format!(
                        "{:?} is not an address and port (like 0.0.0.0:8080 or [::]:8080)",
                        l.value
                    ),
                );
                DEFAULT_LISTEN
            }
        },
        None => DEFAULT_LISTEN,
    };
    let mut secret = |path: String, s: &Option<S<raw::SecretFrom>>| {
        let s = s.as_ref()?;
        let line = line_of(s);
        match (&s.value.secret_file, &s.value.secret_env) {
            (Some(file), None) => check
                .non_empty(&format!("{path}.secretFile"), file)
                .then(|| SecretRef::File(PathBuf::from(&file.value))),
            (None, Some(env)) => check
                .non_empty(&format!("{path}.secretEnv"), env)
                .then(|| SecretRef::Env(env.value.clone())),
            (Some(_), Some(_)) => {
                check.report(path, line, "set secretFile or secretEnv, not both");
                None
            }
            (None, None) => {
                check.report(path, line, "set secretFile or secretEnv");
                None
            }
        }
    };
    let w = &raw.webhooks;
    let mut webhook =
        |key: &str, s| secret(format!("server.webhooks.{key}"), s).map(WebhookSecretRef);
    let webhooks = WebhooksConfig {
        github: webhook("github", &w.github),
        gitlab: webhook("gitlab", &w.gitlab),
        gitea: webhook("gitea", &w.gitea),
        bitbucket: webhook("bitbucket", &w.bitbucket),
        generic: webhook("generic", &w.generic),
        allow_unsigned: w.allow_unsigned,
    };
    let api_token = secret("server.apiToken".into(), &raw.api_token);
    ServerConfig {
        listen,
        webhooks,
        api_token,
    }
}

fn resolve_leader_election(
    raw: &raw::LeaderElection,
    inventory_namespace: &str,
    check: &mut Checker,
) -> LeaderElectionConfig {
    let namespace = match &raw.namespace {
        Some(ns) => {
            check.label("leaderElection.namespace", ns, 63, "");
            ns.value.clone()
        }
        None => inventory_namespace.to_string(),
    };
    let lease_name = match &raw.lease_name {
        Some(n) => {
            if let Err(message) = dns1123_subdomain(&n.value) {
                check.report("leaderElection.leaseName", line_of(n), message);
            }
            n.value.clone()
        }
        None => DEFAULT_LEASE_NAME.to_string(),
    };
    let before = check.problems.len();
    let lease_duration = check.duration(
        "leaderElection.leaseDuration",
        raw.lease_duration.as_ref(),
        DEFAULT_LEASE_DURATION,
    );
    let renew_deadline = check.duration(
        "leaderElection.renewDeadline",
        raw.renew_deadline.as_ref(),
        DEFAULT_RENEW_DEADLINE,
    );
    let retry_period = check.duration(
        "leaderElection.retryPeriod",
        raw.retry_period.as_ref(),
        DEFAULT_RETRY_PERIOD,
    );
    // Ordering only makes sense between durations that parsed.
    if check.problems.len() == before {
        let shown = |d: Duration, set: bool| {
            let d = crate::reconcile::windows::format_duration(d);
            if set { d } else { format!("{d}, the default") }
        };
        if renew_deadline >= lease_duration {
            check.report(
                "leaderElection.renewDeadline",
                raw.renew_deadline.as_ref().and_then(line_of),
                format!(
                    "renewDeadline ({}) must be shorter than leaseDuration ({})",
                    shown(renew_deadline, raw.renew_deadline.is_some()),
                    shown(lease_duration, raw.lease_duration.is_some()),
                ),
            );
        }
        if retry_period >= renew_deadline {
            check.report(
                "leaderElection.retryPeriod",
                raw.retry_period.as_ref().and_then(line_of),
                format!(
                    "retryPeriod ({}) must be shorter than renewDeadline ({})",
                    shown(retry_period, raw.retry_period.is_some()),
                    shown(renew_deadline, raw.renew_deadline.is_some()),
                ),
            );
        }
    }
    LeaderElectionConfig {
        enabled: raw.enabled,
        namespace,
        lease_name,
        lease_duration,
        renew_deadline,
        retry_period,
    }
}

fn resolve_app(raw: &raw::App, path: &str, check: &mut Checker) -> AppConfig {
    check.label(
        &format!("{path}.name"),
        &raw.name,
        MAX_APP_NAME_LEN,
        &format!(" ({INVENTORY_PREFIX}<name> must fit in 63)"),
    );
    let src = &raw.source;
    check.non_empty(&format!("{path}.source.repo"), &src.repo);
    let source = SourceConfig {
        repo: src.repo.value.trim().to_string(),
        reference: src
            .reference
            .clone()
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_REF.to_string()),
        path: src
            .path
            .clone()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_PATH.to_string()),
        interval: check.duration(
            &format!("{path}.source.interval"),
            src.interval.as_ref(),
            DEFAULT_SOURCE_INTERVAL,
        ),
        credentials: match &src.credentials {
            Some(c) => resolve_credentials(c, &format!("{path}.source.credentials"), check),
            None => Credentials::default(),
        },
    };
    let destination = DestinationConfig {
        namespace: match &raw.destination.namespace {
            Some(ns) => {
                check.label(&format!("{path}.destination.namespace"), ns, 63, "");
                ns.value.clone()
            }
            None => crate::manifest::DEFAULT_NAMESPACE.to_string(),
        },
        context: raw.destination.context.clone(),
    };
    let s = &raw.sync;
    let sync = SyncPolicy {
        automated: s.automated,
        prune: s.prune,
        self_heal: s.self_heal.unwrap_or(true),
        force: s.force.unwrap_or(true),
        allow_mass_prune: s.allow_mass_prune,
    };
    let ignore_differences = raw
        .ignore_differences
        .iter()
        .enumerate()
        .map(|(i, d)| resolve_ignore(d, &format!("{path}.ignoreDifferences[{i}]"), check))
        .collect();
    let sync_windows = raw
        .sync_windows
        .iter()
        .enumerate()
        .filter_map(|(i, w)| resolve_window(w, &format!("{path}.syncWindows[{i}]"), check))
        .collect();
    if let Err(err) = crate::report::notify::resolve_channels(&raw.notifications) {
        check.report(path.to_string(), None, err.to_string());
    }
    if let Some(status) = &raw.commit_status
        && let Err(err) = status.resolve(&raw.name.value, &source.repo)
    {
        check.report(format!("{path}.commitStatus"), None, err.to_string());
    }
    AppConfig {
        name: raw.name.value.clone(),
        source,
        destination,
        sync,
        ignore_differences,
        sync_windows,
        suspend: raw.suspend,
        notifications: raw.notifications.clone(),
        commit_status: raw.commit_status.clone(),
    }
}

fn resolve_credentials(raw: &S<raw::Credentials>, path: &str, check: &mut Checker) -> Credentials {
    let line = line_of(raw);
    let c = &raw.value;
    let field = |name: &str| format!("{path}.{name}");
    let mut text = |name: &str, v: &Option<S<String>>| -> Option<String> {
        let v = v.as_ref()?;
        check.non_empty(&field(name), v).then(|| v.value.clone())
    };
    let username = text("username", &c.username);
    let password_env = text("passwordEnv", &c.password_env);
    let password_file = text("passwordFile", &c.password_file);
    let token_env = text("tokenEnv", &c.token_env);
    let token_file = text("tokenFile", &c.token_file);
    let ssh_key_file = text("sshKeyFile", &c.ssh_key_file).map(PathBuf::from);
    let known_hosts_file = text("knownHostsFile", &c.known_hosts_file).map(PathBuf::from);

    let line_at = |v: &Option<S<String>>| v.as_ref().and_then(line_of).or(line);
    let mut one_of = |env: Option<String>, file: Option<String>, what: &str, at| {
        match (env, file) {
            (Some(name), Some(_)) => {
                check.report(path, at, format!("set {what}Env or {what}File, not both"));
                // Still counts as set, so no second problem follows from this one.
                Some(SecretRef::Env(name))
            }
            (Some(name), None) => Some(SecretRef::Env(name)),
            (None, Some(file)) => Some(SecretRef::File(PathBuf::from(file))),
            (None, None) => None,
        }
    };
    let password = one_of(
        password_env,
        password_file,
        "password",
        line_at(&c.password_file),
    );
    let token = one_of(token_env, token_file, "token", line_at(&c.token_file));

    if password.is_some() && username.is_none() {
        check.report(path, line, "a password needs a username");
    }
    if ssh_key_file.is_some() && known_hosts_file.is_none() {
        check.report(
            path,
            line,
            "sshKeyFile needs knownHostsFile (the server's host key is always checked)",
        );
    }
    if known_hosts_file.is_some() && ssh_key_file.is_none() {
        check.report(path, line, "knownHostsFile is only used with sshKeyFile");
    }
    if username.is_some() && password.is_none() && token.is_none() && ssh_key_file.is_none() {
        check.report(
            path,
            line,
            "a username alone authenticates nothing: add a password, a token or sshKeyFile",
        );
    }
    Credentials {
        username,
        password,
        token,
        ssh_key_file,
        known_hosts_file,
    }
}

fn resolve_ignore(
    raw: &S<raw::IgnoreDifference>,
    path: &str,
    check: &mut Checker,
) -> IgnoreDifference {
    let d = &raw.value;
    for (i, p) in d.json_pointers.iter().enumerate() {
        if !p.value.starts_with('/') {
            check.report(
                format!("{path}.jsonPointers[{i}]"),
                line_of(p),
                format!(
                    "{:?} is not a JSON pointer to a field (RFC 6901: like /spec/replicas)",
                    p.value
                ),
            );
        }
    }
    if d.json_pointers.is_empty() && d.managed_fields_managers.is_empty() {
        check.report(
            path,
            line_of(raw),
            "ignores nothing: set jsonPointers or managedFieldsManagers",
        );
    }
    IgnoreDifference {
        group: d.group.clone(),
        kind: d.kind.clone(),
        namespace: d.namespace.clone(),
        name: d.name.clone(),
        json_pointers: d.json_pointers.iter().map(|p| p.value.clone()).collect(),
        managed_fields_managers: d.managed_fields_managers.clone(),
    }
}

fn resolve_window(raw: &raw::SyncWindow, path: &str, check: &mut Checker) -> Option<SyncWindow> {
    let kind = match raw.kind.value.as_str() {
        "allow" => Some(WindowKind::Allow),
        "deny" => Some(WindowKind::Deny),
        other => {
            check.report(
                format!("{path}.kind"),
                line_of(&raw.kind),
                format!("{other:?} is not a window kind (allow or deny)"),
            );
            None
        }
    };
    let schedule = match parse_schedule(&raw.schedule.value) {
        Ok(s) => Some(s),
        Err(e) => {
            check.report(
                format!("{path}.schedule"),
                line_of(&raw.schedule),
                e.to_string(),
            );
            None
        }
    };
    let before = check.problems.len();
    let duration = check.duration(
        &format!("{path}.duration"),
        Some(&raw.duration),
        Duration::ZERO,
    );
    let duration_ok = check.problems.len() == before;
    let time_zone = match &raw.time_zone {
        Some(tz) => match Tz::from_str(tz.value.trim()) {
            Ok(tz) => Some(tz),
            Err(_) => {
                check.report(
                    format!("{path}.timeZone"),
                    line_of(tz),
                    format!(
                        "{:?} is not an IANA time zone (like Europe/Berlin or UTC)",
                        tz.value
                    ),
                );
                None
            }
        },
        None => Some(Tz::UTC),
    };
    match (kind, schedule, duration_ok, time_zone) {
        (Some(kind), Some(schedule), true, Some(time_zone)) => Some(SyncWindow {
            kind,
            expression: raw.schedule.value.trim().to_string(),
            schedule,
            duration,
            time_zone,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema's own example (`/work/briefs/config-schema.md`), verbatim.
    const SCHEMA_EXAMPLE: &str = include_str!("../tests/fixtures/config/tether.yaml");

    fn parse(text: &str) -> Config {
        match Config::parse(text, "tether.yaml") {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    /// Every problem of an invalid configuration, one rendered line each.
    fn problems(text: &str) -> Vec<String> {
        match Config::parse(text, "tether.yaml") {
            Err(e @ ConfigError::Invalid { .. }) => {
                e.to_string().lines().map(String::from).collect()
            }
            Err(e) => panic!("expected invalid values, got: {e}"),
            Ok(_) => panic!("expected an error"),
        }
    }

    fn syntax(text: &str) -> String {
        match Config::parse(text, "tether.yaml") {
            Err(e @ ConfigError::Syntax { .. }) => e.to_string(),
            Err(e) => panic!("expected a syntax error, got: {e}"),
            Ok(_) => panic!("expected an error"),
        }
    }

    fn app(extra: &str) -> String {
        format!("apps:\n- name: web\n  source:\n    repo: git://h/r.git\n{extra}")
    }

    #[test]
    fn the_schema_example_loads_as_written() {
        let c = parse(SCHEMA_EXAMPLE);
        assert_eq!(c.server.listen, "127.0.0.1:8080".parse().expect("addr"));
        let w = &c.server.webhooks;
        assert_eq!(
            w.github,
            Some(WebhookSecretRef(SecretRef::File(
                "/etc/tether/github-secret".into()
            )))
        );
        assert_eq!(
            w.gitlab,
            Some(WebhookSecretRef(SecretRef::Env(
                "GITLAB_WEBHOOK_TOKEN".into()
            )))
        );
        assert_eq!(w.secrets().count(), 5);
        assert!(!w.allow_unsigned);
        assert_eq!(c.inventory_namespace, "tether-system");
        assert_eq!(c.concurrency, 4);
        assert_eq!(c.resync_interval, Duration::from_secs(600));
        assert_eq!(
            c.leader_election,
            LeaderElectionConfig {
                enabled: false,
                namespace: "tether-system".into(),
                lease_name: "tether".into(),
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
            }
        );
        assert_eq!(c.apps.len(), 1);
        let web = c.app("web").expect("web");
        assert_eq!(web.source.repo, "git://127.0.0.1:9418/apps.git");
        assert_eq!(web.source.reference, "main");
        assert_eq!(web.source.path, "apps/web");
        assert_eq!(web.source.interval, Duration::from_secs(60));
        assert_eq!(
            web.destination,
            DestinationConfig {
                namespace: "live".into(),
                context: Some("prod".into())
            }
        );
        assert_eq!(
            web.sync,
            SyncPolicy {
                automated: true,
                prune: true,
                self_heal: true,
                force: true,
                allow_mass_prune: false
            }
        );
        assert!(!web.suspend);
        assert_eq!(web.sync_windows.len(), 1);
        let win = &web.sync_windows[0];
        assert_eq!(
            (
                win.kind,
                win.expression.as_str(),
                win.duration,
                win.time_zone
            ),
            (
                WindowKind::Deny,
                "0 22 * * *",
                Duration::from_secs(8 * 3600),
                chrono_tz::Europe::Berlin
            )
        );
        assert_eq!(
            web.ignore_rules(),
            vec![IgnoreRule {
                group: Some("apps".into()),
                kind: Some("Deployment".into()),
                namespace: Some("live".into()),
                name: Some("web".into()),
                json_pointers: vec!["/spec/replicas".into()],
                managers: vec!["kube-controller-manager".into()],
            }]
        );
        assert_eq!(web.inventory_name(), "tether-inventory-web");
        assert_eq!(web.poll_config().interval, Duration::from_secs(60));
    }

    #[test]
    fn the_example_source_uses_the_token_over_git_protocol() {
        let c = parse(SCHEMA_EXAMPLE);
        let source = c.apps[0].source();
        assert_eq!(source.url, "git://127.0.0.1:9418/apps.git");
        assert_eq!(source.reference, "main");
        assert_eq!(source.path, "apps/web");
        assert_eq!(
            source.auth,
            Auth::Token {
                token: SecretRef::Env("GIT_TOKEN".into()),
                username: Some("bot".into())
            }
        );
    }

    #[test]
    fn defaults_fill_what_is_left_out() {
        let c = parse("apps: []\n");
        assert_eq!(c.server.listen, DEFAULT_LISTEN);
        assert_eq!(c.server.webhooks.secrets().count(), 0);
        assert_eq!(c.concurrency, DEFAULT_CONCURRENCY);
        assert_eq!(c.resync_interval, DEFAULT_RESYNC_INTERVAL);
        assert_eq!(c.leader_election, LeaderElectionConfig::default());
        assert!(c.apps.is_empty());

        let c = parse(&app(""));
        let a = &c.apps[0];
        assert_eq!(a.source.reference, "HEAD");
        assert_eq!(a.source.path, ".");
        assert_eq!(a.source.interval, DEFAULT_SOURCE_INTERVAL);
        assert_eq!(a.source.credentials, Credentials::default());
        assert_eq!(a.source().auth, Auth::None);
        assert_eq!(a.destination.namespace, "default");
        assert_eq!(a.destination.context, None);
        assert_eq!(a.sync, SyncPolicy::default());
        assert!(!a.sync.automated && a.sync.self_heal && a.sync.force);
        assert!(a.ignore_rules().is_empty() && a.sync_windows.is_empty());
    }

    #[test]
    fn equal_files_give_equal_configurations() {
        // What a reload compares to find the apps that changed.
        let a = parse(SCHEMA_EXAMPLE);
        assert_eq!(a, parse(SCHEMA_EXAMPLE));
        let b = parse(&SCHEMA_EXAMPLE.replace("duration: 8h", "duration: 9h"));
        assert_ne!(a.apps[0], b.apps[0]);
        assert_eq!(a.apps[0].source, b.apps[0].source);
    }

    #[test]
    fn the_lease_namespace_follows_the_inventory_namespace() {
        let c = parse("inventoryNamespace: gitops\n");
        assert_eq!(c.leader_election.namespace, "gitops");
        let c = parse("inventoryNamespace: gitops\nleaderElection: {namespace: leases}\n");
        assert_eq!(c.leader_election.namespace, "leases");
    }

    #[test]
    fn durations_in_every_spelling() {
        let d = |s: &str| parse_duration(s);
        assert_eq!(d("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(d("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(d("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(d("8h"), Ok(Duration::from_secs(8 * 3600)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(d("1m30s250ms"), Ok(Duration::from_millis(90_250)));
        for bad in ["1x", "", "30", "m", "1.5h", "-1s", "1 h", "h1"] {
            assert_eq!(
                d(bad),
                Err(format!(
                    "{bad:?} is not a duration (like 30s, 1m, 1h30m or 500ms)"
                )),
                "{bad}"
            );
        }
        assert_eq!(
            d("99999999999h"),
            Err("\"99999999999h\" is too long".into())
        );
    }

    #[test]
    fn a_bad_duration_names_its_file_line_and_field() {
        let text = "apps:\n- name: a\n  source: {repo: r}\n- name: b\n  source:\n    repo: r\n    interval: 1x\n";
        assert_eq!(
            problems(text),
            [
                "tether.yaml:7: apps[1].source.interval: \"1x\" is not a duration (like 30s, 1m, 1h30m or 500ms)"
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_not_just_the_first() {
        let text = "\
concurrency: 0
resyncInterval: 0s
inventoryNamespace: Tether_System
server:
  listen: localhost:8080
apps:
- name: Web
  source:
    repo: \"  \"
    interval: soon
  destination:
    namespace: -live
";
        assert_eq!(
            problems(text),
            [
                "tether.yaml:1: concurrency: 0 must be at least 1",
                "tether.yaml:2: resyncInterval: \"0s\" must be positive",
                "tether.yaml:3: inventoryNamespace: \"Tether_System\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
                "tether.yaml:5: server.listen: \"localhost:8080\" is not an address and port (like 0.0.0.0:8080 or [::]:8080)",
                "tether.yaml:7: apps[0].name: \"Web\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
                "tether.yaml:9: apps[0].source.repo: must not be empty",
                "tether.yaml:10: apps[0].source.interval: \"soon\" is not a duration (like 30s, 1m, 1h30m or 500ms)",
                "tether.yaml:12: apps[0].destination.namespace: \"-live\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
            ]
        );
    }

    #[test]
    fn app_names_are_unique_labels_short_enough_for_the_inventory() {
        let ok = "a".repeat(MAX_APP_NAME_LEN);
        assert_eq!(MAX_APP_NAME_LEN, 46);
        let c = parse(&format!("apps:\n- name: {ok}\n  source: {{repo: r}}\n"));
        assert_eq!(c.apps[0].inventory_name().len(), 63);

        let long = "a".repeat(MAX_APP_NAME_LEN + 1);
        assert_eq!(
            problems(&format!("apps:\n- name: {long}\n  source: {{repo: r}}\n")),
            [format!(
                "tether.yaml:2: apps[0].name: \"{long}\" is longer than 46 characters (tether-inventory-<name> must fit in 63)"
            )]
        );
        assert_eq!(
            problems(
                "apps:\n- name: web\n  source: {repo: r}\n- name: api\n  source: {repo: r}\n- name: web\n  source: {repo: r}\n"
            ),
            ["tether.yaml:6: apps[2].name: \"web\" is also the name of apps[0]"]
        );
    }

    #[test]
    fn leader_election_durations_must_be_ordered() {
        assert_eq!(
            problems(
                "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n  retryPeriod: 12s\n"
            ),
            [
                "tether.yaml:3: leaderElection.renewDeadline: renewDeadline (10s) must be shorter than leaseDuration (10s)",
                "tether.yaml:4: leaderElection.retryPeriod: retryPeriod (12s) must be shorter than renewDeadline (10s)",
            ]
        );
        // A default on the other side is named as such.
        assert_eq!(
            problems("leaderElection:\n  leaseDuration: 5s\n"),
            [
                "tether.yaml: leaderElection.renewDeadline: renewDeadline (10s, the default) must be shorter than leaseDuration (5s)"
            ]
        );
        assert_eq!(
            problems(
                "leaderElection:\n  leaseName: Tether!\n  namespace: a.b\n  retryPeriod: 0ms\n"
            ),
            [
                "tether.yaml:2: leaderElection.leaseName: \"Tether!\" is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)",
                "tether.yaml:3: leaderElection.namespace: \"a.b\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
                "tether.yaml:4: leaderElection.retryPeriod: \"0ms\" must be positive",
            ]
        );
        let c = parse(
            "leaderElection: {enabled: true, leaseName: tether.leader, leaseDuration: 1m, renewDeadline: 40s, retryPeriod: 5s}\n",
        );
        assert!(c.leader_election.enabled);
        assert_eq!(c.leader_election.lease_name, "tether.leader");
        assert_eq!(c.leader_election.renew_deadline, Duration::from_secs(40));
    }

    #[test]
    fn sync_windows_are_compiled_and_checked() {
        let c = parse(&app(
            "  syncWindows:\n  - {kind: allow, schedule: '0 9 * * 1-5', duration: 8h}\n",
        ));
        assert_eq!(c.apps[0].sync_windows[0].time_zone, Tz::UTC);
        assert_eq!(c.apps[0].sync_windows[0].kind, WindowKind::Allow);
        let text = app(
            "  syncWindows:\n  - kind: maybe\n    schedule: '0 22 * *'\n    duration: 0s\n    timeZone: Mars/Olympus\n  - {kind: deny, schedule: '0 22 * * 9', duration: 1h}\n",
        );
        assert_eq!(
            problems(&text),
            [
                "tether.yaml:6: apps[0].syncWindows[0].kind: \"maybe\" is not a window kind (allow or deny)",
                "tether.yaml:7: apps[0].syncWindows[0].schedule: `0 22 * *` has 4 fields; a schedule has 5 (minute hour day-of-month month day-of-week), or 6-7 with seconds first",
                "tether.yaml:8: apps[0].syncWindows[0].duration: \"0s\" must be positive",
                "tether.yaml:9: apps[0].syncWindows[0].timeZone: \"Mars/Olympus\" is not an IANA time zone (like Europe/Berlin or UTC)",
                "tether.yaml:10: apps[0].syncWindows[1].schedule: `0 22 * * 9`: day-of-week 9 is not 0-7",
            ]
        );
    }

    #[test]
    fn credentials_are_checked_without_reading_secrets() {
        let creds = |body: &str| app(&format!("    credentials:\n{body}"));
        assert_eq!(
            problems(&creds(
                "      username: bot\n      passwordEnv: P\n      passwordFile: /p\n"
            )),
            [
                "tether.yaml:8: apps[0].source.credentials: set passwordEnv or passwordFile, not both"
            ]
        );
        assert_eq!(
            problems(&creds("      tokenEnv: T\n      tokenFile: /t\n")),
            ["tether.yaml:7: apps[0].source.credentials: set tokenEnv or tokenFile, not both"]
        );
        assert_eq!(
            problems(&creds("      passwordFile: /p\n")),
            ["tether.yaml:6: apps[0].source.credentials: a password needs a username"]
        );
        assert_eq!(
            problems(&creds("      sshKeyFile: /k\n")),
            [
                "tether.yaml:6: apps[0].source.credentials: sshKeyFile needs knownHostsFile (the server's host key is always checked)"
            ]
        );
        assert_eq!(
            problems(&creds("      knownHostsFile: /kh\n")),
            [
                "tether.yaml:6: apps[0].source.credentials: knownHostsFile is only used with sshKeyFile"
            ]
        );
        assert_eq!(
            problems(&creds("      username: bot\n")),
            [
                "tether.yaml:6: apps[0].source.credentials: a username alone authenticates nothing: add a password, a token or sshKeyFile"
            ]
        );
        assert_eq!(
            problems(&creds("      tokenEnv: ''\n")),
            ["tether.yaml:6: apps[0].source.credentials.tokenEnv: must not be empty"]
        );
        // Files that do not exist yet are fine: they may be mounted later.
        let c = parse(&creds(
            "      username: bot\n      passwordFile: /nonexistent/p\n",
        ));
        assert_eq!(
            c.apps[0].source().auth,
            Auth::Basic {
                username: "bot".into(),
                password: SecretRef::File("/nonexistent/p".into())
            }
        );
    }

    #[test]
    fn credentials_follow_the_protocol_of_the_url() {
        let creds = Credentials {
            username: Some("bot".into()),
            password: Some(SecretRef::Env("P".into())),
            token: Some(SecretRef::Env("T".into())),
            ssh_key_file: Some("/k".into()),
            known_hosts_file: Some("/kh".into()),
        };
        let ssh = Auth::SshKey {
            private_key: "/k".into(),
            known_hosts: "/kh".into(),
            passphrase: None,
            username: Some("bot".into()),
        };
        assert_eq!(creds.auth("git@github.com:org/repo.git"), ssh);
        assert_eq!(creds.auth("ssh://git@h/r"), ssh);
        let token = Auth::Token {
            token: SecretRef::Env("T".into()),
            username: Some("bot".into()),
        };
        assert_eq!(creds.auth("https://h/r"), token);
        let basic = Credentials {
            token: None,
            ..creds.clone()
        };
        assert_eq!(
            basic.auth("https://h/r"),
            Auth::Basic {
                username: "bot".into(),
                password: SecretRef::Env("P".into())
            }
        );
        // With nothing else, the key is offered whatever the URL says.
        let key_only = Credentials {
            token: None,
            password: None,
            ..creds
        };
        assert_eq!(key_only.auth("https://h/r"), ssh);
        assert_eq!(Credentials::default().auth("https://h/r"), Auth::None);
    }

    #[test]
    fn ignore_rules_must_ignore_something_by_pointer() {
        let text = app(
            "  ignoreDifferences:\n  - kind: Deployment\n  - group: ''\n    kind: ConfigMap\n    jsonPointers: [data/x, /data/y]\n",
        );
        assert_eq!(
            problems(&text),
            [
                "tether.yaml:6: apps[0].ignoreDifferences[0]: ignores nothing: set jsonPointers or managedFieldsManagers",
                "tether.yaml:9: apps[0].ignoreDifferences[1].jsonPointers[0]: \"data/x\" is not a JSON pointer to a field (RFC 6901: like /spec/replicas)",
            ]
        );
        let c = parse(&app(
            "  ignoreDifferences:\n  - group: ''\n    kind: ConfigMap\n    jsonPointers: [/data/y]\n",
        ));
        let rule = &c.apps[0].ignore_rules()[0];
        assert_eq!(rule.group.as_deref(), Some(""));
        assert_eq!(rule.name, None);
    }

    #[test]
    fn webhook_secrets_are_exactly_one_of_file_or_env() {
        let text = "server:\n  webhooks:\n    github: {secretFile: /s, secretEnv: S}\n    gitlab: {}\n    gitea: {secretEnv: ''}\n";
        assert_eq!(
            problems(text),
            [
                "tether.yaml:3: server.webhooks.github: set secretFile or secretEnv, not both",
                "tether.yaml:4: server.webhooks.gitlab: set secretFile or secretEnv",
                "tether.yaml:5: server.webhooks.gitea.secretEnv: must not be empty",
            ]
        );
    }

    #[test]
    fn the_api_token_is_one_of_file_or_env_read_when_asked() {
        assert_eq!(
            problems("server:\n  apiToken: {secretFile: /t, secretEnv: T}\n"),
            ["tether.yaml:2: server.apiToken: set secretFile or secretEnv, not both"]
        );
        assert_eq!(
            problems("server:\n  apiToken: {secretFile: ''}\n"),
            ["tether.yaml:2: server.apiToken.secretFile: must not be empty"]
        );
        assert!(
            parse("server: {}\n")
                .server
                .api_token()
                .expect("none")
                .is_none()
        );

        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "t0ken\n").expect("write");
        let c = parse(&format!(
            "server:\n  apiToken: {{secretFile: {}}}\n",
            file.display()
        ));
        let token = c.server.api_token().expect("read").expect("configured");
        assert!(!format!("{token:?}").contains("t0ken"));

        std::fs::write(&file, " \n").expect("write");
        let err = c.server.api_token().expect_err("blank");
        assert_eq!(
            err.to_string(),
            format!("server.apiToken.secretFile: {} is empty", file.display())
        );
        let c = parse("server:\n  apiToken: {secretEnv: TETHER_TEST_SURELY_UNSET_VARIABLE}\n");
        assert_eq!(
            c.server.api_token().expect_err("unset").to_string(),
            "server.apiToken.secretEnv: environment variable TETHER_TEST_SURELY_UNSET_VARIABLE is not set"
        );
    }

    #[test]
    fn webhook_secrets_are_read_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("github");
        std::fs::write(&good, "s3cret\n").expect("write");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").expect("write");

        let c = parse(&format!(
            "server:\n  webhooks:\n    github: {{secretFile: {}}}\n    allowUnsigned: true\n",
            good.display()
        ));
        let wc = c.server.webhook_config().expect("webhook config");
        assert!(wc.allow_unsigned);
        assert_eq!(wc.secrets.len(), 1);
        assert!(wc.secrets.contains_key(&Provider::Github));
        // The secret never prints.
        assert!(!format!("{wc:?}").contains("s3cret"));

        let c = parse(&format!(
            "server:\n  webhooks:\n    bitbucket: {{secretFile: {}}}\n",
            empty.display()
        ));
        let err = c.server.webhook_config().expect_err("empty");
        assert_eq!(
            err.to_string(),
            format!(
                "server.webhooks.bitbucket.secretFile: {} is empty",
                empty.display()
            )
        );

        let missing = dir.path().join("missing");
        let err = WebhookSecretRef(SecretRef::File(missing.clone()))
            .load()
            .expect_err("missing");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "webhook secret: cannot read {}: ",
                missing.display()
            )),
            "{msg}"
        );
        let err = WebhookSecretRef(SecretRef::Env("TETHER_TEST_SURELY_UNSET_VARIABLE".into()))
            .load()
            .expect_err("unset");
        assert_eq!(
            err.to_string(),
            "webhook secret: environment variable TETHER_TEST_SURELY_UNSET_VARIABLE is not set"
        );
    }

    #[test]
    fn unknown_keys_name_their_path_and_line() {
        assert_eq!(
            syntax(&app("    interval: 1m\n    branch: main\n")),
            "tether.yaml:6: apps[0].source.branch: unknown field `branch`, expected one of repo, ref, path, interval, credentials"
        );
        assert_eq!(
            syntax("server:\n  listen: 0.0.0.0:1\n  tls: true\n"),
            "tether.yaml:3: server.tls: unknown field `tls`, expected one of listen, webhooks, apiToken"
        );
    }

    #[test]
    fn an_inline_secret_is_refused_without_being_printed() {
        let err = syntax(&app(
            "    credentials:\n      username: bot\n      token: hunter2\n",
        ));
        assert!(
            err.starts_with(
                "tether.yaml:7: apps[0].source.credentials.token: unknown field `token`"
            ),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
        let err = syntax(&app("    credentials:\n      tokenEnv: [hunter2]\n"));
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn shape_errors_name_their_path_and_line() {
        assert_eq!(
            syntax("concurrency: many\n"),
            "tether.yaml:1: concurrency: invalid i64"
        );
        assert_eq!(
            syntax("apps:\n- source: {repo: r}\n"),
            "tether.yaml:2: apps[0]: missing field `name`"
        );
        assert_eq!(
            syntax("apps:\n- name: a\n  source: {repo: r}\n  sync: {automated: yes please}\n"),
            "tether.yaml:4: apps[0].sync.automated: invalid boolean"
        );
        assert_eq!(
            syntax("concurrency: 1\nconcurrency: 2\n"),
            "tether.yaml:2: duplicate mapping key: concurrency, set DuplicateKeyPolicy in Options if acceptable"
        );
        assert_eq!(
            syntax("apps: [\n"),
            "tether.yaml:1: apps: unclosed bracket '['"
        );
        assert_eq!(
            syntax("# nothing\n\n"),
            "tether.yaml: the file is empty (write `apps: []` for a service with no apps)"
        );
    }

    #[test]
    fn empty_sections_are_left_out_sections() {
        // A section whose keys are all commented out is null in YAML.
        let c =
            parse("server:\n  webhooks:\n    # github: {secretEnv: X}\nleaderElection:\napps:\n");
        assert_eq!(c.server.webhooks.secrets().count(), 0);
        assert!(c.apps.is_empty());
        let c = parse(&app("  sync:\n  destination:\n  syncWindows:\n"));
        assert_eq!(c.apps[0].sync, SyncPolicy::default());
    }

    #[test]
    fn alias_replays_stop_at_the_budget() {
        let aliases = vec!["*x"; MAX_CONFIG_ALIASES + 1].join(", ");
        let text = format!(
            "apps:\n- name: a\n  source: {{repo: &x r}}\n  ignoreDifferences:\n  - managedFieldsManagers: [{aliases}]\n"
        );
        let err = syntax(&text);
        assert!(err.starts_with("tether.yaml:5: "), "{err}");
        assert!(err.contains("alias"), "{err}");
        // Under the budget the same shape is fine.
        let aliases = ["*x"; 10].join(", ");
        let c = parse(&format!(
            "apps:\n- name: a\n  source: {{repo: &x r}}\n  ignoreDifferences:\n  - managedFieldsManagers: [{aliases}]\n"
        ));
        assert_eq!(
            c.apps[0].ignore_differences[0]
                .managed_fields_managers
                .len(),
            10
        );
    }

    #[test]
    fn a_missing_file_is_a_read_error() {
        let err = Config::load(Path::new("/nonexistent/tether.yaml")).expect_err("missing");
        assert!(matches!(err, ConfigError::Read { .. }));
        assert!(
            err.to_string()
                .starts_with("/nonexistent/tether.yaml: cannot read: "),
            "{err}"
        );
    }
}
