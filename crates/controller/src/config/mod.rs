//! The service's configuration (`tether serve --config FILE`): which apps to keep in
//! sync, from where, under which policies. Read before the loop starts; it sits above
//! `report` (whose channel and commit-status blocks it resolves) and below `reconcile`
//! and `server`, which take its resolved types.
//!
//! Two steps (STYLE.md): the YAML is parsed into private `raw` structs that mirror the
//! schema agreed for issue #6 (camelCase, unknown keys refused; its example is
//! `tests/fixtures/config/tether.yaml`), then resolved (`resolve`) into the typed [`Config`]
//! (`model`), with `check` collecting every problem with its field path and line.
//! What the workers use (notification channels, the commit-status target) is resolved
//! here, once, so a configuration that loads cannot fail later.
//!
//! Secrets are never inline: the configuration names environment variables and files,
//! read when used ([`Credentials::auth`] at fetch time, [`ServerConfig::webhook_config`]
//! and [`ServerConfig::api_token`] at start-up, in `secrets`), so validation does not
//! need them.
//!
//! Adding a section (e.g. `notifications`) means a field in the `raw` struct, a field in
//! the typed one (`model`), and its checks in the matching `resolve_*` function.

mod app_crd;
mod app_sets;
mod artifact;
mod chart;
mod check;
mod credentials;
mod decryption;
mod dependency_credentials;
pub(crate) mod depends;
mod health;
mod model;
mod oidc;
mod post_build;
mod post_render;
mod raw;
mod resolve;
mod secrets;
#[cfg(test)]
mod tests;
mod value_sources;
mod values_from;
mod verify;

use std::path::Path;

pub use app_crd::*;
pub use app_sets::{Generate, Generated};
pub use decryption::{DecryptionConfig, SOPS_PROVIDER};
pub use model::*;
pub use oidc::{CALLBACK_PATH, ClientSecret, DEFAULT_SESSION_TTL, OidcConfig};
pub use post_build::{DEFAULT_STRICT, PostBuildConfig, VariablesFrom, VariablesKind};
pub use secrets::{ApiToken, PeerToken};
pub use value_sources::{ValueSource, check_ref_file, split_ref_file};
pub use values_from::{DEFAULT_VALUES_KEY, ValuesFrom};
pub use verify::{VerifyConfig, VerifyKeys};

/// Kept for callers that read durations as the configuration spells them (the
/// command line's `--timeout`); the parser itself is the leaf [`tether_schema::duration`].
pub use tether_schema::duration::parse_duration;

/// What is wrong with a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read. Retryable: a volume may be mounted late.
    #[error("{origin}: cannot read: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    /// Not YAML, or not the schema's shape (unknown key, wrong type, missing field,
    /// duplicate key). The parser stops at the first. Needs a change.
    #[error("{}", Problem::render(origin, path.as_deref(), *line, message))]
    Syntax {
        origin: String,
        path: Option<String>,
        line: Option<usize>,
        message: String,
    },
    /// Well-formed, but values are invalid: every problem found, one per line. Needs a
    /// change.
    #[error("{}", render_all(origin, problems))]
    Invalid {
        origin: String,
        problems: Vec<Problem>,
    },
    /// A secret named by the configuration could not be read, or is empty. Retryable
    /// when a Secret is mounted late; the message names where, never the value.
    #[error("{what}: {message}")]
    Secret { what: String, message: String },
}

/// One invalid value: where it is and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Field path as written in the file: `apps[1].source.interval`.
    pub path: String,
    /// 1-based line of the value, when the parser recorded one.
    pub line: Option<usize>,
    pub message: String,
}

impl Problem {
    fn render(origin: &str, path: Option<&str>, line: Option<usize>, message: &str) -> String {
        let mut out = origin.to_string();
        if let Some(line) = line {
            out.push_str(&format!(":{line}"));
        }
        out.push_str(": ");
        if let Some(path) = path.filter(|p| !p.is_empty()) {
            out.push_str(path);
            out.push_str(": ");
        }
        out.push_str(message);
        out
    }
}

fn render_all(origin: &str, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| Problem::render(origin, Some(&p.path), p.line, &p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Config {
    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            origin: origin.clone(),
            source,
        })?;
        Config::parse(&text, &origin)
    }

    /// Parses and validates configuration text; `origin` (a file name) prefixes errors.
    /// `appSets` generate no apps here: only `tether serve`, which fetches what their
    /// generators read, expands them ([`Config::parse_with`]).
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        Config::parse_with(text, origin, &mut |_, _| Ok(Vec::new()))
    }

    /// Parses and validates configuration text, each item of `appSets` expanded by
    /// `generate` (given the inventory namespace and the item) into entries of `apps`,
    /// which are then resolved and checked as the listed ones are.
    pub fn parse_with(
        text: &str,
        origin: &str,
        generate: &mut Generate<'_>,
    ) -> Result<Config, ConfigError> {
        let raw = raw::parse_raw(text, origin)?;
        let mut check = check::Checker::default();
        let config = resolve::resolve(raw, generate, &mut check);
        // Top to bottom, as a person fixes a file; problems without a line (about a
        // default) last.
        check.problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
        if check.problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid {
                origin: origin.to_string(),
                problems: check.problems,
            })
        }
    }

    /// The app named `name`.
    pub fn app(&self, name: &str) -> Option<&AppConfig> {
        self.apps.iter().find(|a| a.name == name)
    }
}
