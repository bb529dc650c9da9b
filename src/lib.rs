//! tether keeps Kubernetes clusters equal to what a Git repository says they should be.
//!
//! The crate is laid out as the reconcile loop itself (see `DESIGN.md`): each module is
//! one stage, data flows down the list, and no stage reaches back up.
//!
//! ```text
//! source ──► manifest ──► diff ──► sync ──► report
//! ```
//!
//! `cluster` is the only module that talks to an API server; `diff` is pure; `sandbox`
//! is a Kubernetes-compatible API server held in memory, for trying tether and for tests.

pub mod cluster;
pub mod config;
pub mod diff;
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
