//! tether keeps Kubernetes clusters equal to what a Git repository says they should be.
//!
//! The crate is laid out as the reconcile loop itself (see `DESIGN.md`): each module is
//! one stage, and data flows down the floors below. A module imports only modules on
//! lower floors (`tests/integration/layers.rs` holds the code to this list):
//!
//! ```text
//! floor  module      what it is
//!   1    ownership   the labels, annotations and names that say what tether owns
//!   1    metrics     the process's Prometheus registry
//!   1    duration    durations as configuration spells them
//!   2    windows     sync windows: when automation may act
//!   2    schema      OpenAPI schemas, field sets (FieldsV1) and quantities
//!   3    manifest    files → typed objects with identity
//!   4    diff        pure: desired × live × rules → drift
//!   5    cluster     the only module that talks to an API server
//!   6    source      Git: fetch, revisions, webhooks
//!   7    sync        observe, decide, apply, prune, inventory
//!   8    report      drift and sync reports, status, commit statuses, notifications
//!   9    config      the service's configuration, parsed, checked and resolved once
//!  10    reconcile   the loop: one worker per app, passes, backoff, leadership
//!  11    server      HTTP (status API, probes, metrics, webhooks) and `tether serve`
//!   –    sandbox     a Kubernetes-compatible API server in memory; imports only schema
//! ```
//!
//! The command line (`src/main.rs` and `src/cli/`) is the binary's, above them all.

pub mod cluster;
pub mod config;
pub mod diff;
pub mod duration;
pub mod manifest;
pub mod metrics;
pub mod ownership;
pub mod reconcile;
pub mod report;
pub mod sandbox;
pub mod schema;
pub mod server;
pub mod source;
pub mod sync;
pub mod windows;
