//! The configuration as written (the loop's configuration, step one of two): private
//! structs that mirror the schema agreed for issue #6 (camelCase, unknown keys refused),
//! and the parser that fills them with a field path and line for the first shape error.
//! Scalars that validation checks are `Spanned`, so its problems carry lines too.

use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::ConfigError;

pub(super) type S<T> = Spanned<T>;

/// Budgets for the YAML parser. A configuration is a few hundred nodes; these refuse an
/// alias bomb or a pathological nesting long before it costs memory.
const MAX_CONFIG_DEPTH: usize = 64;
pub(super) const MAX_CONFIG_ALIASES: usize = 1_000;
const MAX_CONFIG_NODES: usize = 100_000;
const MAX_CONFIG_EVENTS: usize = 400_000;

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
    pub render_timeout: Option<S<String>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub leader_election: LeaderElection,
    pub shards: Option<S<i64>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub sources: Sources,
    #[serde(default, deserialize_with = "null_is_default")]
    pub apps: Vec<App>,
    /// CEL health rules for every app (issue #28).
    #[serde(default, deserialize_with = "null_is_default")]
    pub health_check_exprs: Vec<S<RawHealthCheck>>,
    /// AppSets stamping file apps (issue #28), in the AppSet CRD's spec shape; read by
    /// `reconcile::appset::file`, which the configuration cannot import.
    #[serde(default, deserialize_with = "null_is_default")]
    pub app_sets: Vec<S<serde_json::Value>>,
}

/// `sources`: limits every app's Git source shares.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Sources {
    pub min_interval: Option<S<String>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub budget: Budget,
}

/// `sources.budget`: what one read of a revision may spend.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Budget {
    pub files: Option<S<i64>>,
    pub bytes: Option<S<i64>>,
    pub objects: Option<S<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Server {
    pub listen: Option<S<String>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub webhooks: Webhooks,
    pub api_token: Option<S<SecretFrom>>,
    /// Spelled as issue #12 names it, not as `camelCase` would (`insecureOpenApi`).
    #[serde(
        default,
        rename = "insecureOpenAPI",
        deserialize_with = "null_is_default"
    )]
    pub insecure_open_api: bool,
    pub shutdown_timeout: Option<S<String>>,
    pub default_service_account: Option<S<String>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub apps: AppsWatch,
    /// Spelled as `insecureOpenAPI` is: `advertiseURL`.
    #[serde(rename = "advertiseURL")]
    pub advertise_url: Option<S<String>>,
    pub peer_token: Option<S<SecretFrom>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub outbound: Outbound,
    pub oidc: Option<S<RawOidc>>,
}

/// `server.outbound`: where Apps' notifications may go besides public addresses.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Outbound {
    #[serde(default, deserialize_with = "null_is_default")]
    pub allowed_networks: Vec<S<String>>,
}

/// `server.apps`: which App objects (`apps.tether.dev`) the service runs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppsWatch {
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub namespaces: Vec<S<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Webhooks {
    pub github: Option<S<SecretFrom>>,
    pub gitlab: Option<S<SecretFrom>>,
    pub gitea: Option<S<SecretFrom>>,
    pub bitbucket: Option<S<SecretFrom>>,
    pub azuredevops: Option<S<SecretFrom>>,
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
    pub notifications: Vec<tether_core::report::notify::NotificationConfig>,
    #[serde(default)]
    pub commit_status: Option<tether_core::report::commit_status::CommitStatusConfig>,
    pub service_account_name: Option<S<String>>,
    /// Apps this one waits for: a file app's `name`, an App's `namespace/name`.
    #[serde(default, deserialize_with = "null_is_default")]
    pub depends_on: Vec<S<RawDependsOn>>,
    #[serde(default)]
    pub post_build: Option<S<RawPostBuild>>,
    #[serde(default)]
    pub decryption: Option<S<RawDecryption>>,
    /// CEL health rules of this app (issue #28); they win over the file's.
    #[serde(default, deserialize_with = "null_is_default")]
    pub health_check_exprs: Vec<S<RawHealthCheck>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Source {
    /// Absent only for an OCI artifact source (`oci`).
    pub repo: Option<S<String>>,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub path: Option<String>,
    pub interval: Option<S<String>>,
    pub stale_after: Option<S<String>>,
    pub credentials: Option<S<Credentials>>,
    pub helm: Option<S<Helm>>,
    /// A chart of the Helm repository `repo` instead of a Git path (issue #26).
    pub chart: Option<S<String>>,
    /// The chart's version: exact or a semver range; the newest when unset.
    pub version: Option<S<String>>,
    /// Signed commits (issue #27): see `super::verify`.
    pub verify: Option<S<Verify>>,
    /// An OCI artifact of plain manifests instead of `repo` (issue #26): see
    /// `super::artifact`.
    pub oci: Option<S<String>>,
    /// The artifact's tag, or a semver range over its tags.
    pub tag: Option<S<String>>,
    /// The artifact's manifest digest.
    pub digest: Option<S<String>>,
    /// Credentials for the chart's dependencies on other repositories (issue #26).
    #[serde(default, deserialize_with = "null_is_default")]
    pub dependency_credentials: Vec<S<DependencyCredential>>,
}

/// `source.verify`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Verify {
    pub mode: Option<S<String>>,
    pub keys: S<VerifyKeys>,
}

/// `source.verify.keys`: a Secret, or (configuration file only) files.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerifyKeys {
    pub secret_ref: Option<S<SecretNameRef>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub files: Vec<S<String>>,
}

/// How a chart at the source's path is rendered (`helm template`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Helm {
    pub release_name: Option<S<String>>,
    /// A mapping, or YAML text holding one (as Argo CD's `values` takes it).
    pub values: Option<S<serde_json::Value>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub value_files: Vec<S<String>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub set: Vec<S<String>>,
    /// ConfigMaps and Secrets holding values (Flux's `valuesFrom`), read at each pass.
    #[serde(default, deserialize_with = "null_is_default")]
    pub values_from: Vec<S<RawValuesFrom>>,
    /// Kustomize patches, images and labels over the chart's output (Flux's
    /// `postRenderers`).
    #[serde(default, deserialize_with = "null_is_default")]
    pub post_renderers: Vec<S<RawPostRenderer>>,
    /// Git repositories whose files value files name as `$NAME/path` (Argo CD's
    /// multi-source `$values`).
    #[serde(default, deserialize_with = "null_is_default")]
    pub value_sources: Vec<S<RawValueSource>>,
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
    /// A Secret holding the credentials under Flux's keys, read at each fetch.
    pub secret_ref: Option<S<SecretNameRef>>,
}

/// `source.credentials.secretRef`: a whole Secret, by name (Flux's
/// `GitRepository.spec.secretRef`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretNameRef {
    pub name: S<String>,
    /// Only in the configuration file: an App's Secret is in the App's namespace.
    pub namespace: Option<S<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Destination {
    pub namespace: Option<S<String>>,
    pub context: Option<String>,
    pub kube_config: Option<S<KubeConfig>>,
}

/// `destination.kubeConfig`: another cluster, by a Secret holding its kubeconfig
/// (Flux's `spec.kubeConfig`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeConfig {
    pub secret_ref: S<SecretKeyRef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretKeyRef {
    pub name: S<String>,
    pub key: Option<S<String>>,
    /// Only in the configuration file: an App's Secret is in the App's namespace.
    pub namespace: Option<S<String>>,
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
    pub hook_timeout: Option<S<String>>,
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

pub(super) fn parse_raw(text: &str, origin: &str) -> Result<Config, ConfigError> {
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
        Config::deserialize(serde_path_to_error::Deserializer::new(de, &mut track))
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

/// `postBuild:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPostBuild {
    /// Flux's CRD takes strings; a number or boolean is taken as YAML writes it.
    #[serde(default)]
    pub substitute: std::collections::BTreeMap<String, S<serde_json::Value>>,
    #[serde(default)]
    pub substitute_from: Vec<S<RawVariablesFrom>>,
    pub strict: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawVariablesFrom {
    pub kind: S<String>,
    pub name: S<String>,
    #[serde(default)]
    pub optional: bool,
}

/// `source.helm.valuesFrom[]` as written (Flux's `ValuesReference`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawValuesFrom {
    pub kind: S<String>,
    pub name: S<String>,
    pub values_key: Option<S<String>>,
    pub target_path: Option<S<String>>,
    #[serde(default)]
    pub optional: bool,
}

/// `source.helm.postRenderers[]` as written (Flux's `PostRenderer`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPostRenderer {
    pub kustomize: S<RawPostKustomize>,
}

/// `postRenderers[].kustomize`: Kustomize's own field names.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPostKustomize {
    #[serde(default)]
    pub patches: Vec<S<RawPatch>>,
    #[serde(default)]
    pub images: Vec<S<RawImage>>,
    #[serde(default)]
    pub common_labels: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// A Kustomize patch: strategic merge or JSON 6902, by target.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPatch {
    pub patch: S<String>,
    pub target: Option<S<RawPatchTarget>>,
}

/// Kustomize's patch target selector.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPatchTarget {
    pub group: Option<String>,
    pub version: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub label_selector: Option<String>,
    pub annotation_selector: Option<String>,
}

/// Kustomize's image override.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawImage {
    pub name: S<String>,
    pub new_name: Option<String>,
    pub new_tag: Option<String>,
    pub digest: Option<String>,
}

/// `decryption:` as written (Flux's `spec.decryption`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawDecryption {
    pub provider: S<String>,
    /// A Secret of `*.agekey` and `*.asc` entries (Flux's layout).
    pub secret_ref: Option<S<SecretNameRef>>,
    /// Only in the configuration file: key files on tether's own disk.
    #[serde(default)]
    pub key_files: Vec<S<String>>,
}

/// `server.oidc` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOidc {
    pub(super) issuer: S<String>,
    #[serde(rename = "clientID")]
    pub(super) client_id: S<String>,
    pub(super) client_secret: Option<S<SecretFrom>>,
    #[serde(rename = "redirectURL")]
    pub(super) redirect_url: S<String>,
    #[serde(default)]
    pub(super) scopes: Vec<S<String>>,
    pub(super) username_claim: Option<S<String>>,
    pub(super) username_prefix: Option<S<String>>,
    pub(super) groups_claim: Option<S<String>>,
    pub(super) groups_prefix: Option<S<String>>,
    pub(super) session_key: Option<S<SecretFrom>>,
    #[serde(rename = "sessionTTL")]
    pub(super) session_ttl: Option<S<String>>,
}

/// One `dependsOn` entry as written: a reference, or Flux's form with a CEL
/// `readyExpr` the dependency must also satisfy.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum RawDependsOn {
    Name(String),
    Entry(RawDependsOnEntry),
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawDependsOnEntry {
    pub name: String,
    #[serde(default)]
    pub ready_expr: Option<String>,
}

impl RawDependsOn {
    pub(super) fn reference(&self) -> &str {
        match self {
            RawDependsOn::Name(name) | RawDependsOn::Entry(RawDependsOnEntry { name, .. }) => {
                name.trim()
            }
        }
    }

    pub(super) fn ready_expr(&self) -> Option<&str> {
        match self {
            RawDependsOn::Name(_) => None,
            RawDependsOn::Entry(entry) => entry.ready_expr.as_deref(),
        }
    }
}

/// One `healthCheckExprs` entry as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHealthCheck {
    pub api_version: String,
    pub kind: String,
    pub current: String,
    #[serde(default)]
    pub in_progress: Option<String>,
    #[serde(default)]
    pub failed: Option<String>,
}

/// One entry of `source.dependencyCredentials`: a Secret, for the repositories under
/// `url` (or, without it, a dockerconfigjson's registries).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DependencyCredential {
    pub url: Option<S<String>>,
    pub secret_ref: S<SecretNameRef>,
}

/// `source.helm.valueSources[]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawValueSource {
    pub name: S<String>,
    pub repo: S<String>,
    #[serde(rename = "ref")]
    pub reference: Option<S<String>>,
}
