//! The level-triggered loop: triggers, backoff, policies, sync windows, leadership,
//! shards.

pub(crate) mod app;
pub mod appset;
pub(crate) mod backoff;
pub mod decryption;
pub(crate) mod depends;
pub(crate) mod inputs;
pub mod leader;
pub(crate) mod pass;
pub(crate) mod pin;
pub(crate) mod runtime;
pub mod shard;
pub(crate) mod trust;
pub(crate) mod value_sources;
pub mod values;
pub mod variables;
