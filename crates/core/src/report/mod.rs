//! Drift and sync reports for people and machines, and the outbound side of the
//! report stage: commit statuses on the Git provider and notifications to webhooks.

pub mod comment;
pub mod commit_status;
pub mod delivery;
pub mod drift;
pub mod notify;
pub mod preview;
pub use crate::outbound;
pub mod status;
pub mod sync;
