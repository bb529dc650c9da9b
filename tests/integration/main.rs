//! tether's integration tests: one binary, one module per topic. They talk HTTP to a
//! running sandbox, run real `git` repositories and a real `git daemon`, and drive the
//! sandbox with the real `kubectl`.

mod annotations;
mod app_crd;
mod chart;
mod cli;
mod cli_errors;
mod commit_status_providers;
mod config;
mod crd_schema;
mod dashboard;
mod dashboard_load;
mod diff_corpus;
mod diff_online;
mod docs;
mod examples;
mod fidelity;
mod field;
mod helm_hooks;
mod hooks;
mod http_guard;
mod kubectl_commands;
mod layers;
mod leader;
mod manifest;
mod notify;
mod peer_trust;
mod protobuf;
mod quickstart;
mod render;
mod render_safety;
mod sandbox_client;
mod sandbox_http;
mod sandbox_kubectl;
mod serve;
mod shard;
mod sops;
mod source;
mod source_security;
mod support;
mod sync;
mod tenancy;
mod tenant_identity;
mod tour;
mod webdriver;
mod webhooks;
