//! The level-triggered loop: triggers, backoff, policies, sync windows, leadership.

pub mod backoff;
pub mod observe;
pub mod windows;
