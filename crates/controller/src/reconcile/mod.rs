//! The level-triggered loop: triggers, backoff, policies, sync windows, leadership,
//! shards.

pub mod app;
pub mod appset;
pub mod backoff;
pub mod decryption;
pub mod depends;
pub mod inputs;
pub mod leader;
pub mod pass;
pub mod pin;
pub mod runtime;
pub mod shard;
pub mod trust;
pub mod value_sources;
pub mod values;
pub mod variables;
