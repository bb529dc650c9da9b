//! The controller: what runs the passes of `tether-core` for every app, forever. The
//! configuration that says which apps there are, the loop that schedules their passes
//! (with backoff, sync windows, leadership and shards), and the HTTP server that shows
//! and steers them. A module imports only those above it here.
//!
//! ```text
//! module     what it is
//! windows    sync windows: when automation may act
//! config     the service's configuration, parsed, checked and resolved once
//! reconcile  the loop: workers, passes, backoff, leadership; the runtime owning them
//! server     HTTP (status API, probes, metrics, webhooks), wired to the runtime
//! ```

pub mod config;
pub mod reconcile;
pub mod server;
pub(crate) mod windows;
