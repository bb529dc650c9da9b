//! The floor above the schemas: what Git holds, read as objects, and how two objects
//! differ. Nothing here does I/O beyond reading a revision's files and running its
//! renderers; no Kubernetes client, no Git, no async runtime, so "diff is pure" is a
//! compile error to break.
//!
//! ```text
//! module     what it is
//! manifest   files → typed objects with identity; validation; rendering
//! diff       pure: desired × live × rules → drift
//! ```

pub mod diff;
pub mod manifest;
