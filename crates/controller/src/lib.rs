//! The controller: what runs the passes of `tether-core` for every app, forever. The
//! configuration that says which apps there are, the loop that schedules their passes
//! (with backoff, sync windows, leadership and shards), and the HTTP server that shows
//! and steers them. A module imports only those above it here.
//!
//! ```text
//! module     what it is
//! windows    sync windows: when automation may act
//! config     the service's configuration, parsed, checked and resolved once
//! reconcile  the loop: one worker per app, passes, backoff, leadership
//! server     HTTP (status API, probes, metrics, webhooks) and `tether serve`
//! ```

pub mod config;
pub mod reconcile;
pub mod server;
pub mod windows;
