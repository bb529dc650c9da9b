//! Drift and sync reports for people and machines.

pub mod drift;
pub mod sync;
