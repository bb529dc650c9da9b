//! Structural schemas of Kubernetes kinds, from OpenAPI v3: which lists merge by key,
//! which maps are atomic. Server-side apply, strategic merge patch and field paths in
//! drift reports all follow these rules.
