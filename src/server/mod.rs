//! tether's own HTTP surface: webhooks, the status API, health and metrics.
