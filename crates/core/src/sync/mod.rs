//! Acting on drift: make the cluster match the desired state with as few writes as
//! possible, in an order that works the first time, deleting only what the app owns.
//!
//! [`sync`] reads top to bottom as the pass: split (the app's objects from its hooks)
//! → plan (one ordered list of steps, objects to apply and hooks to run, by phase,
//! wave and kind: `plan`) → inventory → observe (live objects and what
//! applying each would do, `observe` and `decide`) → validate → pre-sync (the
//! Namespaces and CRDs the revision creates, then its PreSync hooks) → cover inventory
//! (record what it may write) → apply by wave → sync hooks → prune → record inventory
//! → post-sync. Each stage is a method of `pipeline::Pass` that returns the
//! [`StageFailure`] where it fails; the report carries the first. [`heal`] shares the
//! opening and stops after applying. A dry run goes through the same stages, which
//! write nothing.
//!
//! A pass validates everything before it writes anything: every object that would
//! change is dry-run first, and one refusal means nothing is applied. Objects that
//! cannot be dry-run yet (their CRD or Namespace is created by this same sync) are
//! dry-run as soon as what they need exists, before any of them is applied.
//!
//! A new object therefore costs two requests (its dry run and its apply), where
//! `kubectl apply --server-side` sends one and validates nothing before writing. Judging
//! new objects in process instead was weighed and left out: the served OpenAPI schemas
//! catch types and undeclared fields, but kube-apiserver refuses far more (its
//! registries' validation of names, selectors, pod specs, ports; admission webhooks,
//! ValidatingAdmissionPolicies, ResourceQuotas; the acting ServiceAccount's RBAC), and
//! an object such a judge passes but the server refuses would be written after others,
//! breaking "one refusal means nothing is applied". What a cold sync costs, side by
//! side with kubectl, is in `benches/README.md` (`benches/sync.rs`).

mod annotations;
mod apply;
mod decide;
pub mod desired;
pub mod health;
pub mod hooks;
pub mod inputs;
pub mod inventory;
mod item;
mod observe;
mod pipeline;
pub(crate) mod plan;
pub mod preview;
pub mod prune;
mod report;
pub mod stage;

use std::borrow::Cow;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, ClusterError, LiveObjects};
use tether_diff::diff::IgnoreRule;
use tether_diff::manifest::ManifestSet;
use tether_schema::ownership::DEFAULT_INVENTORY_NAMESPACE;

use hooks::{Hook, HookError};
use inventory::{Inventory, InventoryError};
use pipeline::{Pass, Planned, Scope};
use plan::WaveError;
use stage::ObjectFailure;

pub use observe::{Candidate, Observed, observe, observe_objects};
pub use report::{Action, Lineage, ObjectResult, OwnerReference, SyncReport};
pub use report::{HookAction, HookResult};
pub use stage::Phase;
pub use stage::{StageFailure, WaitFailure};

/// How many requests a sync keeps in flight: enough to hide round trips, few enough
/// not to trip API priority and fairness on a real cluster (kubectl's own parallel
/// operations default to a similar figure).
pub const DEFAULT_REQUEST_CONCURRENCY: usize = 16;

/// What a sync may do.
#[derive(Clone)]
pub struct SyncOptions<'a> {
    /// Names the inventory; every applied object is labelled for it. Empty (only to
    /// observe, as `tether diff` without `--app` does): the objects belong to no app,
    /// so none is another app's and nothing is a prune candidate.
    pub app: &'a str,
    pub inventory_namespace: &'a str,
    /// Take fields other managers own (server-side apply `force`).
    pub force: bool,
    pub prune: bool,
    pub allow_mass_prune: bool,
    /// Validate and report, write nothing.
    pub dry_run: bool,
    /// Delete and recreate an object whose change touches an immutable field.
    pub replace_immutable: bool,
    /// Wait for each wave to be Healthy, within this overall time.
    pub wait: Option<Duration>,
    pub concurrency: usize,
    /// Differences these rules ignore are not a reason to write.
    pub rules: &'a [IgnoreRule],
    /// Live objects already known; without it, the app's objects are listed.
    pub live: Option<&'a dyn LiveObjects>,
    /// The app's inventory as the caller last saw it written; without it, it is read.
    /// It is read again before anything is pruned.
    pub inventory: Option<&'a Inventory>,
    /// Told after each step how many desired objects are done, of how many.
    pub progress: Option<&'a (dyn Fn(usize, usize) + Sync)>,
    /// When the app's hooks run.
    pub hooks: HookRuns,
    /// How long the hooks of one phase may run in all; past it the phase fails.
    pub hook_timeout: Duration,
    /// This revision was applied in full before (every object accepted by the
    /// server): a heal of one object is applied without a dry run first (see
    /// `decide`).
    pub validated: bool,
    /// The CEL health rules of the app and the configuration (issue #28), in front of
    /// the built-in ones.
    pub health: health::Judge<'a>,
}

/// When a sync runs the app's hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookRuns {
    /// Every sync: an explicit `tether sync` is one sync operation, as Argo CD runs
    /// hooks on every sync it is asked for.
    Always,
    /// Only a pass that has something to write (create, change or prune): `tether
    /// serve` passes again and again, and a steady-state pass is no sync operation.
    WhenWriting,
}

impl<'a> SyncOptions<'a> {
    pub fn new(app: &'a str) -> SyncOptions<'a> {
        SyncOptions {
            app,
            inventory_namespace: DEFAULT_INVENTORY_NAMESPACE,
            force: true,
            prune: false,
            allow_mass_prune: false,
            dry_run: false,
            replace_immutable: false,
            wait: None,
            concurrency: DEFAULT_REQUEST_CONCURRENCY,
            rules: &[],
            live: None,
            inventory: None,
            progress: None,
            hooks: HookRuns::Always,
            hook_timeout: hooks::DEFAULT_HOOK_TIMEOUT,
            validated: false,
            health: health::Judge::default(),
        }
    }
}

/// Why a sync could not run at all (per-object failures are in the report).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("invalid sync waves:\n  {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Waves(Vec<WaveError>),
    #[error("invalid hooks:\n  {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Hooks(Vec<HookError>),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// The server refused to validate objects (a diff cannot say what applying them
    /// would do).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Refused(Vec<ObjectFailure>),
    /// The manifests name tether's own records (an inventory): nothing is applied.
    #[error("objects tether keeps for itself:\n  {}", .0.join("\n  "))]
    Bookkeeping(Vec<String>),
}

impl SyncError {
    pub fn is_retryable(&self) -> bool {
        match self {
            SyncError::Waves(_)
            | SyncError::Hooks(_)
            | SyncError::Inventory(_)
            | SyncError::Refused(_)
            | SyncError::Bookkeeping(_) => false,
            SyncError::Cluster(err) => err.is_retryable(),
        }
    }
}

impl From<inventory::ReadError> for SyncError {
    fn from(err: inventory::ReadError) -> Self {
        match err {
            inventory::ReadError::Cluster(err) => SyncError::Cluster(err),
            inventory::ReadError::Invalid(err) => SyncError::Inventory(err),
        }
    }
}

/// Makes the cluster match `desired` for `options.app`, running its hooks (objects
/// annotated as such) as steps of its plan. The pass, stage by stage (`pipeline`).
pub async fn sync(
    cluster: &Cluster,
    desired: &ManifestSet,
    revision: Option<&str>,
    options: &SyncOptions<'_>,
) -> Result<SyncReport, SyncError> {
    let (objects, hooks) = split(desired, options)?;
    let plan = plan(&objects, hooks)?;
    let inventory = inventory(cluster, options).await?;
    let mut pass = Pass::observe(cluster, plan, inventory, revision, options, Scope::App).await?;
    let outcome = async {
        pass.validate()?;
        pass.pre_sync().await?;
        pass.cover_inventory().await?;
        pass.apply_by_wave().await?;
        pass.sync_hooks().await?;
        pass.prune().await?;
        pass.record_inventory().await?;
        pass.claimed()?;
        Ok(pass.post_sync().await?)
    }
    .await;
    pass.close(outcome).await
}

/// Heals some objects of a revision the app has applied in full: `desired` holds
/// only the objects a live change touched. They are observed and decided as a sync
/// decides them (the verdicts, the dry run and "one refusal means nothing is
/// written" included) and the drifted ones applied in order; nothing else is read,
/// nothing is pruned, no hook runs, and the inventory is written only if it did not
/// cover these objects yet. The report holds these objects only: what the whole app
/// looks like is the next full sync's to say.
pub async fn heal(
    cluster: &Cluster,
    desired: &ManifestSet,
    revision: Option<&str>,
    options: &SyncOptions<'_>,
) -> Result<SyncReport, SyncError> {
    let plan = plan(desired, Vec::new())?;
    let inventory = inventory(cluster, options).await?;
    let scope = Scope::Objects;
    let mut pass = Pass::observe(cluster, plan, inventory, revision, options, scope).await?;
    let outcome = async {
        pass.validate()?;
        pass.cover_inventory().await?;
        Ok(pass.apply_by_wave().await?)
    }
    .await;
    pass.close(outcome).await
}

/// Split: the app's objects and its hooks (which are not app objects: they run as
/// steps of the plan). Manifests naming tether's own records are refused first.
fn split<'d>(
    desired: &'d ManifestSet,
    options: &SyncOptions<'_>,
) -> Result<(Cow<'d, ManifestSet>, Vec<Hook<'d>>), SyncError> {
    let bookkeeping = inventory::bookkeeping_in(desired, options.inventory_namespace);
    if !bookkeeping.is_empty() {
        return Err(SyncError::Bookkeeping(bookkeeping));
    }
    hooks::split(desired).map_err(SyncError::Hooks)
}

/// Plan: the objects and the hooks as one ordered list of steps (`plan`).
fn plan<'p>(objects: &'p ManifestSet, hooks: Vec<Hook<'p>>) -> Result<Planned<'p>, SyncError> {
    let started = Instant::now();
    let steps = plan::plan(
        objects.objects.iter().map(|m| (&m.id, &m.object)),
        hooks.iter().map(Hook::planned),
    )
    .map_err(SyncError::Waves)?;
    Ok(Planned {
        objects,
        hooks,
        steps,
        started,
    })
}

/// Inventory: the app's as the caller last saw it written, else as stored.
async fn inventory(cluster: &Cluster, options: &SyncOptions<'_>) -> Result<Inventory, SyncError> {
    match options.inventory {
        Some(known) => Ok(known.clone()),
        None => read_inventory(cluster, options.app, options.inventory_namespace).await,
    }
}

/// An app's inventory as stored in the cluster; empty when it has none yet.
pub async fn read_inventory(
    cluster: &Cluster,
    app: &str,
    namespace: &str,
) -> Result<Inventory, SyncError> {
    Ok(inventory::read(cluster, app, namespace).await?)
}
