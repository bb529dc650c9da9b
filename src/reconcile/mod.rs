//! The level-triggered loop: triggers, backoff, policies, sync windows, leadership.

pub mod observe;
