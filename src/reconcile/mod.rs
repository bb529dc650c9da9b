//! The level-triggered loop: triggers, backoff, policies, sync windows, leadership.

pub mod app;
pub mod backoff;
pub mod leader;
pub mod pass;
