//! Acting on drift: plan, apply, prune, health.
