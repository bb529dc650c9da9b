//! A Kubernetes-compatible API server held in memory, for trying tether and for tests.
pub mod fields;
