//! The level-triggered loop: triggers, backoff, policies, sync windows, leadership.

pub mod backoff;
pub mod leader;
pub mod observe;
pub mod windows;
