//! The reconciler's working floors: everything one pass of one app needs, from the API
//! server and the Git host to the report of what it did. Data flows down this list, and
//! a module imports only those above it here (and the crates below: `tether-diff`,
//! `tether-schema`).
//!
//! ```text
//! module     what it is
//! metrics    the process's Prometheus registry
//! outbound   where a request named by hostile input may go (the SSRF guard)
//! cluster    the only module that talks to an API server
//! source     Git: fetch, revisions, webhooks; chart dependencies from Helm repositories
//! sync       observe, decide, apply, prune, inventory
//! report     drift and sync reports, status, commit statuses, notifications
//! ```

pub mod cluster;
pub mod metrics;
pub mod outbound;
pub mod report;
pub mod source;
pub mod sync;
