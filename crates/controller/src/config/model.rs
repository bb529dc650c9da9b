//! The configuration as the service uses it: validated, defaults filled in, and the
//! report stage's channels and commit-status target resolved (step two of two).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::windows::SyncWindow;
use tether_core::cluster::{KubeConfigSecret, ServiceAccount};
use tether_core::report::commit_status::CommitStatusTarget;
use tether_core::report::notify::Channel;
use tether_core::source::{
    Auth, CredentialsSecret, PollConfig, Provider, RevisionBudget, SecretRef, Source,
};
use tether_diff::diff::IgnoreRule;
use tether_schema::ownership::DEFAULT_INVENTORY_NAMESPACE;

/// Where the HTTP server listens: loopback, port 8080 (issue #12). The status API can
/// trigger syncs and shows drifted values, so without a token it is reachable from
/// this host only; a pod (the chart) sets its address and a token explicitly.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));

/// How long `tether serve` may take to stop after SIGTERM (issue #12): passes in
/// flight, the last notifications and the Lease release all fit in it. Kubernetes'
/// default `terminationGracePeriodSeconds` is 30 s, after which the kubelet sends
/// SIGKILL; 25 s leaves the process 5 s to exit before that.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(25);

/// Apps reconciled at once (the schema's default). Passes mostly wait on Git and the
/// API server, so four keep a two-core machine busy without queuing behind each other.
pub const DEFAULT_APP_CONCURRENCY: usize = 4;

/// Periodic full resync of every app, whatever the triggers say: the schema's default.
/// It bounds how long a missed event (or live drift no watch saw) can go unnoticed.
pub const DEFAULT_RESYNC_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// Shards when none are configured: one, which is the whole service (today's single
/// leader or single replica).
pub const DEFAULT_SHARDS: u32 = 1;

/// Most shards a configuration may ask for: each costs a Lease and a renewal per retry
/// period on the replica holding it, and more shards than replicas buys nothing but
/// finer balance. 256 keeps the Lease traffic of a full set at about two requests a
/// second per default retry period and replica (client-go's 2 s).
pub const MAX_SHARDS: u32 = 256;

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
/// `GitRepository` interval). Shorter than the CLI's [`tether_core::source::DEFAULT_POLL_INTERVAL`]
/// because a service without webhooks relies on polling alone.
pub const DEFAULT_SOURCE_INTERVAL: Duration = Duration::from_secs(60);

/// How long an app's source may fail before it is called stale (and `sourceStale` is
/// sent): ten default polls in a row, so a Git host's restart or a flaky minute pages
/// no one, while a revoked token or a moved repository is known within the quarter hour.
pub const DEFAULT_SOURCE_STALE_AFTER: Duration = Duration::from_secs(10 * 60);

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
    /// How long one renderer run (kustomize, helm) may take before it and every
    /// process it started are killed.
    pub render_timeout: Duration,
    pub leader_election: LeaderElectionConfig,
    /// Apps split across replicas by a stable hash of their identity, each shard held
    /// as a Lease (`reconcile::shard`). 1: no sharding; more implies leader election's
    /// namespace and timings, without its single leader Lease.
    pub shards: u32,
    /// Limits every app's Git source shares.
    pub sources: SourcesConfig,
    /// May be empty: the service then idles.
    pub apps: Vec<AppConfig>,
    /// `healthCheckExprs`: CEL health rules for every app, compiled (issue #28).
    pub health_checks: tether_core::sync::health::HealthRules,
    /// The apps of `apps` that `appSets` generated, and from what (issue #28).
    pub generated: Vec<GeneratedApp>,
}

/// `sources`: the floor of every app's poll interval and the budget of a revision read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcesConfig {
    /// No source polls more often ([`tether_core::source::DEFAULT_MIN_POLL_INTERVAL`]).
    pub min_interval: Duration,
    /// What one read of a revision may spend ([`tether_core::source::RevisionBudget`]).
    pub budget: RevisionBudget,
}

impl Default for SourcesConfig {
    fn default() -> Self {
        SourcesConfig {
            min_interval: tether_core::source::DEFAULT_MIN_POLL_INTERVAL,
            budget: RevisionBudget::default(),
        }
    }
}

/// The HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Loopback unless `api_token` is set or `insecure_open_api` says otherwise.
    pub listen: SocketAddr,
    pub webhooks: WebhooksConfig,
    /// The bearer token `/api/v1` requires; None leaves it open, which validation
    /// allows only on loopback or with `insecure_open_api`.
    pub api_token: Option<SecretRef>,
    /// Serve `/api/v1` without a token on a non-loopback address (a trusted network;
    /// logged as a warning at start).
    pub insecure_open_api: bool,
    /// The whole stop after SIGTERM: passes in flight, then notifications, then the
    /// Lease.
    pub shutdown_timeout: Duration,
    /// The ServiceAccount an app that names none acts as (`--default-service-account`
    /// overrides it): with it, every app is impersonated, as Flux's option makes it.
    pub default_service_account: Option<String>,
    /// App objects: `server.apps`.
    pub apps: AppsWatchConfig,
    /// Where peers reach this replica's status API when apps are sharded (an
    /// `http(s)://` URL without a path); None: `POD_IP` with the listen port, else the
    /// listen address.
    pub advertise_url: Option<String>,
    /// The key replicas sign their calls to each other with (`server::peer_auth`);
    /// required with `shards` above 1.
    pub peer_token: Option<SecretRef>,
    /// Loopback, link-local and private networks Apps' notifications may still reach
    /// (`server.outbound.allowedNetworks`; see `report::outbound`).
    pub outbound_allowed: Vec<ipnet::IpNet>,
    /// Browser login with an OIDC issuer (`server.oidc`); None: bearer tokens only.
    pub oidc: Option<super::OidcConfig>,
}

/// Which App objects (`apps.tether.dev`) the service runs next to its file's apps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppsWatchConfig {
    /// Watch Apps whenever the cluster serves the CRD (the default).
    pub enabled: bool,
    /// Only these namespaces; every namespace when empty.
    pub namespaces: Vec<String>,
}

impl Default for AppsWatchConfig {
    fn default() -> Self {
        AppsWatchConfig {
            enabled: true,
            namespaces: Vec::new(),
        }
    }
}

/// Webhook secrets per provider (none configured: that provider's deliveries are
/// refused unless `allow_unsigned`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhooksConfig {
    pub github: Option<WebhookSecretRef>,
    pub gitlab: Option<WebhookSecretRef>,
    pub gitea: Option<WebhookSecretRef>,
    pub bitbucket: Option<WebhookSecretRef>,
    pub azuredevops: Option<WebhookSecretRef>,
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
    /// Where to tell people about failures, degraded health and drift: the
    /// `notifications:` list, resolved when the configuration loaded.
    pub notifications: Vec<Arc<Channel>>,
    /// Post each pass's result to the Git provider as a commit status: the
    /// `commitStatus:` block, resolved when the configuration loaded.
    pub commit_status: Option<Arc<CommitStatusTarget>>,
    /// The ServiceAccount every read and write of a pass acts as (impersonated), in
    /// [`AppConfig::tenant_namespace`]; None: tether's own identity, unless the server
    /// has a default.
    pub service_account_name: Option<String>,
    /// The namespace an app belongs to: an App's own, whose ServiceAccounts and
    /// Secrets it may use. None for an entry of the configuration file: its
    /// ServiceAccount is then in the destination namespace, and its kubeconfig Secret
    /// where `secretRef.namespace` says (by default the inventory namespace, tether's own).
    pub tenant_namespace: Option<String>,
    /// The apps a pass waits for before it syncs or prunes (`dependsOn`), by identity:
    /// a file app's name, an App's `<namespace>.<name>` (see `config::depends`).
    pub depends_on: Vec<String>,
    /// `dependsOn[].readyExpr`, compiled, by the dependency's identity: CEL over the
    /// dependency's status (`dep`) and this app's (`self`), which must hold besides
    /// the dependency being ready (see `reconcile::depends`).
    pub ready_exprs: BTreeMap<String, tether_core::sync::health::cel::Predicate>,
    /// Post-build substitution: the `postBuild:` block (see [`super::post_build`]).
    pub post_build: Option<super::PostBuildConfig>,
    /// SOPS decryption: the `decryption:` block (see [`super::decryption`]).
    pub decryption: Option<super::DecryptionConfig>,
    /// `healthCheckExprs`: this app's CEL health rules, compiled (see
    /// [`super::health`]); they win over [`Config::health_checks`].
    pub health_checks: tether_core::sync::health::HealthRules,
}

/// Where an app's desired state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceConfig {
    pub repo: String,
    pub reference: String,
    pub path: String,
    /// Poll interval.
    pub interval: Duration,
    /// Failing for this long makes the source stale (see [`DEFAULT_SOURCE_STALE_AFTER`]).
    pub stale_after: Duration,
    pub credentials: Credentials,
    /// How a chart at the path is rendered; a chart renders with its defaults without.
    pub helm: HelmConfig,
    /// A chart of the Helm repository `repo` instead of a Git path (`source.chart`).
    pub chart: Option<ChartSource>,
    /// Which commits must be signed, by which keys (`source.verify`); none without.
    pub verify: Option<super::VerifyConfig>,
    /// `repo` is an OCI artifact of plain manifests (`source.oci`) and `reference` its
    /// tag, range or digest (issue #26).
    pub artifact: bool,
    /// Secrets for the chart's dependencies on other repositories
    /// (`source.dependencyCredentials`).
    pub dependency_credentials: Vec<DependencyCredentialConfig>,
}

/// One entry of `source.dependencyCredentials` (issue #26): a Secret serving the
/// chart dependencies on repositories under `url`, or, without one, a
/// dockerconfigjson's registries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyCredentialConfig {
    pub url: Option<String>,
    pub secret_ref: KubeConfigRef,
}

/// `source.chart` and `source.version`: chart `name` of the Helm repository at the
/// source's `repo`, at the newest version `version` allows (issue #26).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartSource {
    pub name: String,
    /// Exact (`1.2.3`) or a semver range (`~1.2`, `>=4.0.0 <5`); `""` is the newest.
    pub version: String,
}

/// `source.helm`: a chart's release and values (a chart in Git or of a Helm
/// repository, `source.chart`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelmConfig {
    /// The release name; the app's name when unset.
    pub release_name: Option<String>,
    /// Inline values as YAML text, applied after the files.
    pub values: Option<String>,
    /// Values files relative to the chart, from the same revision; later wins.
    pub value_files: Vec<String>,
    /// `key=value` overrides as `helm --set` takes them, applied last.
    pub set: Vec<String>,
    /// ConfigMaps and Secrets read at each pass, merged in order after the files and
    /// before the inline values (see [`super::values_from`]).
    pub values_from: Vec<super::ValuesFrom>,
    /// Kustomization fragments applied in order to the chart's output (see
    /// [`super::post_render`]).
    pub post_renderers: Vec<serde_json::Value>,
    /// Git repositories value files name as `$NAME/path` (see
    /// [`super::value_sources`]).
    pub value_sources: Vec<super::ValueSource>,
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
    /// A Secret holding them all, read at each fetch (never with the keys above);
    /// `key` is unused.
    pub secret_ref: Option<KubeConfigRef>,
}

/// Where an app's objects go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationConfig {
    /// Namespace for namespaced objects that name none.
    pub namespace: String,
    /// Kubeconfig context; `None` for the current one (or in-cluster).
    pub context: Option<String>,
    /// Another cluster, by a Secret holding its kubeconfig.
    pub kube_config: Option<KubeConfigRef>,
}

/// `destination.kubeConfig.secretRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeConfigRef {
    pub name: String,
    /// None: `value`, then `value.yaml` (Flux's keys).
    pub key: Option<String>,
    /// Set only in the configuration file (see [`AppConfig::tenant_namespace`]).
    pub namespace: Option<String>,
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
    /// How long the hooks of one phase may run in all.
    pub hook_timeout: Duration,
}

impl Default for SyncPolicy {
    fn default() -> Self {
        SyncPolicy {
            automated: false,
            prune: false,
            self_heal: true,
            force: true,
            allow_mass_prune: false,
            hook_timeout: tether_core::sync::hooks::DEFAULT_HOOK_TIMEOUT,
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
            insecure_open_api: false,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            default_service_account: None,
            apps: AppsWatchConfig::default(),
            advertise_url: None,
            peer_token: None,
            outbound_allowed: Vec::new(),
            oidc: None,
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
            concurrency: DEFAULT_APP_CONCURRENCY,
            resync_interval: DEFAULT_RESYNC_INTERVAL,
            render_timeout: tether_diff::manifest::DEFAULT_RENDER_TIMEOUT,
            leader_election: LeaderElectionConfig::default(),
            shards: DEFAULT_SHARDS,
            sources: SourcesConfig::default(),
            apps: Vec::new(),
            health_checks: Default::default(),
            generated: Vec::new(),
        }
    }
}

impl AppConfig {
    /// The source to fetch: a Git repository with its credentials, or a chart.
    pub fn source(&self) -> Source {
        let auth = match &self.source.credentials.secret_ref {
            Some(r) => Auth::Secret(CredentialsSecret {
                // The file's apps have the namespace filled in by resolution.
                namespace: self.secret_namespace(r, DEFAULT_INVENTORY_NAMESPACE),
                name: r.name.clone(),
            }),
            None => self.source.credentials.auth(&self.source.repo),
        };
        let dependencies = self
            .source
            .dependency_credentials
            .iter()
            .map(|entry| tether_core::source::charts::DependencyCredential {
                url: entry.url.clone(),
                secret: CredentialsSecret {
                    namespace: self
                        .secret_namespace(&entry.secret_ref, DEFAULT_INVENTORY_NAMESPACE),
                    name: entry.secret_ref.name.clone(),
                },
            })
            .collect();
        let source = match &self.source.chart {
            Some(chart) => {
                Source::chart(&self.source.repo, &chart.name, &chart.version).with_auth(auth)
            }
            None if self.source.artifact => {
                Source::artifact(&self.source.repo, &self.source.reference, &self.source.path)
                    .with_auth(auth)
            }
            None => Source::new(&self.source.repo, &self.source.reference, &self.source.path)
                .with_auth(auth),
        };
        source.with_dependency_credentials(dependencies)
    }

    /// Where a Secret the app names lives: in its tenant namespace (an App's own),
    /// or where the file says, or in `inventory_namespace`.
    fn secret_namespace(&self, r: &KubeConfigRef, inventory_namespace: &str) -> String {
        match (&self.tenant_namespace, &r.namespace) {
            (Some(tenant), _) => tenant.clone(),
            (None, Some(ns)) => ns.clone(),
            (None, None) => inventory_namespace.to_string(),
        }
    }

    /// The render stage's inputs for this app: its chart's release and values, into
    /// the destination namespace; `helm` and `kubectl kustomize` from PATH.
    pub fn renderers(&self) -> tether_diff::manifest::Renderers {
        let helm = &self.source.helm;
        tether_diff::manifest::Renderers {
            helm: tether_diff::manifest::HelmInputs {
                release_name: helm.release_name.clone(),
                namespace: self.destination.namespace.clone(),
                value_files: helm.value_files.clone(),
                values: helm.values.clone(),
                set: helm.set.clone(),
                ..tether_diff::manifest::HelmInputs::default()
            },
            post_renderers: helm.post_renderers.clone(),
            release: self.name.clone(),
            ..tether_diff::manifest::Renderers::default()
        }
    }

    /// How to poll the source: the configured interval, default jitter and coalescing,
    /// no more often than `sources` allows.
    pub fn poll_config(&self, sources: &SourcesConfig) -> PollConfig {
        PollConfig {
            interval: self.source.interval,
            min_interval: sources.min_interval,
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
        tether_schema::ownership::inventory_name(&self.name)
    }

    /// The ServiceAccount the app's passes act as: its own, or `default` (the
    /// server's); in its tenant namespace, or else its destination namespace.
    pub fn service_account(&self, default: Option<&str>) -> Option<ServiceAccount> {
        let name = self.service_account_name.as_deref().or(default)?;
        Some(ServiceAccount {
            namespace: self
                .tenant_namespace
                .clone()
                .unwrap_or_else(|| self.destination.namespace.clone()),
            name: name.to_string(),
        })
    }

    /// The Secret holding the kubeconfig of the app's cluster, if not tether's own:
    /// in the tenant namespace, or where the file says, or in `inventory_namespace`.
    pub fn kube_config_secret(&self, inventory_namespace: &str) -> Option<KubeConfigSecret> {
        let r = self.destination.kube_config.as_ref()?;
        Some(KubeConfigSecret {
            namespace: self.secret_namespace(r, inventory_namespace),
            name: r.name.clone(),
            key: r.key.clone(),
        })
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
        if tether_core::source::is_ssh_url(url)
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
            (Provider::AzureDevops, &self.azuredevops),
            (Provider::Generic, &self.generic),
        ]
        .into_iter()
        .filter_map(|(p, s)| s.as_ref().map(|s| (p, s)))
    }
}

/// A generated app of the resolved configuration, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedApp {
    pub app: String,
    pub app_set: String,
    pub origin: String,
    /// Whether its objects are pruned when its parameter set disappears.
    pub prune: bool,
}
