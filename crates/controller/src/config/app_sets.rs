//! `appSets:` in the configuration file (issue #28): AppSets whose Apps are file apps.
//! Each item has the AppSet CRD's spec shape (`name`, `generators`, `template`,
//! `syncPolicy`); the configuration cannot read generators itself (they sit above it,
//! in `reconcile::appset`, which reads Git trees and cluster Secrets), so the caller
//! passes a [`Generate`] that turns an item into entries of `apps`. Here those
//! entries are resolved and checked as the listed ones are: one definition of an app,
//! and a generated app whose name is taken is an error naming both.

use serde_json::Value;

use super::check::{Checker, line_of};
use super::raw::{self, S};
use super::{AppConfig, GeneratedApp};

/// Expands one `appSets` item: given the inventory namespace (whose Secrets its
/// generators read) and the item, the apps it generates, or what is wrong with it
/// (its field named as in the item: `generators[0].git.repo: ...`).
pub type Generate<'a> = dyn FnMut(&str, &Value) -> Result<Vec<Generated>, String> + 'a;

/// One app an `appSets` item generates.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The parameter set it came from (`directory teams/a`).
    pub origin: String,
    /// An entry of `apps`, `name` included.
    pub entry: Value,
    /// `syncPolicy.deletion: delete`: its objects are pruned when its parameter set goes.
    pub prune: bool,
}

/// What the generated apps join: the apps resolved so far, their raw entries (for the
/// checks that read them after), and who each is.
pub(super) struct Expansion<'a> {
    pub apps: &'a mut Vec<AppConfig>,
    pub raw: &'a mut Vec<raw::App>,
    pub named: &'a mut Vec<String>,
    pub inventory_namespace: &'a str,
    /// How an entry of `apps` resolves, the same for listed and generated ones
    /// (`resolve::resolve_entry`, passed down: resolution calls this module).
    pub resolve: fn(&raw::App, &str, &str, &mut Checker) -> AppConfig,
}

/// Generates and resolves the apps of every `appSets` item; problems are named by
/// the item and parameter set, at the item's line.
pub(super) fn resolve_app_sets(
    items: Vec<S<Value>>,
    into: &mut Expansion<'_>,
    generate: &mut Generate<'_>,
    check: &mut Checker,
) -> Vec<GeneratedApp> {
    let mut generated = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let line = line_of(item);
        let name = item.value["name"].as_str().unwrap_or_default().to_string();
        let place = format!("appSets[{i}] ({name})");
        let apps = match generate(into.inventory_namespace, &item.value) {
            Ok(apps) => apps,
            Err(message) => {
                check.report(place, line, message);
                continue;
            }
        };
        let first_problem = check.problems.len();
        for app in apps {
            let at = format!("{place}, parameter set {}: template.spec", app.origin);
            let Some(raw) = parse_entry(&app.entry, &at, check) else {
                continue;
            };
            let resolved = (into.resolve)(&raw, &at, into.inventory_namespace, check);
            let who = format!("{place} parameter set {}", app.origin);
            if let Some(first) = into.apps.iter().position(|a| a.name == resolved.name) {
                check.report(
                    format!("{at}.name"),
                    line,
                    format!(
                        "{:?} is also the name of {}",
                        resolved.name, into.named[first]
                    ),
                );
            }
            generated.push(GeneratedApp {
                app: resolved.name.clone(),
                app_set: name.clone(),
                origin: app.origin,
                prune: app.prune,
            });
            into.apps.push(resolved);
            into.raw.push(raw);
            into.named.push(who);
        }
        // Lines of the entry's own text mean nothing to the reader: the item's line does.
        for problem in &mut check.problems[first_problem..] {
            problem.line = line;
        }
    }
    generated
}

/// A generated entry read as a listed one is: unknown keys and wrong types refused.
fn parse_entry(entry: &Value, at: &str, check: &mut Checker) -> Option<raw::App> {
    let text = serde_json::json!({ "apps": [entry] }).to_string();
    match raw::parse_raw(&text, at) {
        Ok(mut config) if config.apps.len() == 1 => config.apps.pop(),
        Ok(_) => None,
        Err(super::ConfigError::Syntax { path, message, .. }) => {
            let field = path
                .as_deref()
                .and_then(|p| p.strip_prefix("apps[0]"))
                .unwrap_or_default();
            check.report(format!("{at}{field}"), None, message);
            None
        }
        Err(other) => {
            check.report(at.to_string(), None, other.to_string());
            None
        }
    }
}
