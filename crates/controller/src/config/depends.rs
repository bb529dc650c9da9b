//! `dependsOn` (issue #28): the apps an app waits for before a pass syncs or prunes.
//! A reference is a file app's `name` or an App's `namespace/name` (within an App,
//! a bare `name` is an App of its own namespace, as Flux's `dependsOn` reads it).
//! Here they become identities (an App's is `<namespace>.<name>`, see
//! [`super::app_identity`]), and the configuration file's own apps are checked: a
//! reference to a file app that does not exist, or a chain that comes back to where it
//! started, is a configuration error naming the chain. App objects come and go while
//! the service runs, so the service runs the same [`find_cycle`] over every running
//! app (`reconcile::depends`) and an App waiting for one that does not exist says so.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::AppConfig;
use super::check::{Checker, dns1123_label, dns1123_subdomain, line_of};
use super::raw::{self, RawDependsOn, S};
use tether_core::sync::health::cel::Predicate;

/// The identity a reference names: `name` (a file app) or `namespace/name` (an App).
pub fn identity_of(reference: &str) -> Result<String, String> {
    match reference.split_once('/') {
        Some((namespace, name)) => {
            dns1123_label(namespace, 63, "")
                .and_then(|()| dns1123_subdomain(name))
                .map_err(|why| format!("{reference:?}: {why}"))?;
            Ok(super::app_identity(namespace, name))
        }
        None => {
            dns1123_label(reference, 63, "").map_err(|why| {
                format!("{why}; an App is named namespace/name, a file app by its name")
            })?;
            Ok(reference.to_string())
        }
    }
}

/// An identity as people write it: an App's `namespace/name`, a file app's name.
pub fn display(identity: &str) -> String {
    identity.replacen('.', "/", 1)
}

/// `a → b → a`: a chain as errors and conditions name it.
pub fn render_chain(chain: &[String]) -> String {
    chain
        .iter()
        .map(|id| display(id))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// A chain of dependencies from `start` back to `start` (`[start, …, start]`), if
/// there is one. `graph` maps each app to what it depends on.
pub fn find_cycle(graph: &BTreeMap<String, Vec<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, Vec<String>>,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut HashSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flatten() {
            path.push(next.clone());
            if next == start || (seen.insert(next.clone()) && walk(graph, next, start, path, seen))
            {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(graph, start, start, &mut path, &mut HashSet::new()).then_some(path)
}

/// `apps[i].dependsOn`, as identities, and the `readyExpr`s by identity, compiled; a
/// malformed reference or expression is reported and left out.
pub(super) fn resolve_references(
    references: &[S<RawDependsOn>],
    path: &str,
    check: &mut Checker,
) -> (Vec<String>, BTreeMap<String, Predicate>) {
    let mut identities: Vec<String> = Vec::with_capacity(references.len());
    let mut ready = BTreeMap::new();
    for (i, reference) in references.iter().enumerate() {
        let place = format!("{path}.dependsOn[{i}]");
        match identity_of(reference.value.reference()) {
            Ok(id) if identities.contains(&id) => {
                check.report(place, line_of(reference), format!("{id:?} is listed twice"))
            }
            Ok(id) => {
                if let Some(source) = reference.value.ready_expr() {
                    match Predicate::compile("readyExpr", source) {
                        Ok(expr) => {
                            ready.insert(id.clone(), expr);
                        }
                        Err(err) => check.report(
                            format!("{place}.readyExpr"),
                            line_of(reference),
                            err.to_string(),
                        ),
                    }
                }
                identities.push(id);
            }
            Err(why) => check.report(place, line_of(reference), why),
        }
    }
    (identities, ready)
}

/// The file's apps: each reference to a file app names one of them, and no chain of
/// them comes back to where it started (reported once per cycle, at its first app).
pub(super) fn check_file_apps(apps: &[AppConfig], raw: &[raw::App], check: &mut Checker) {
    let names: BTreeSet<&str> = apps.iter().map(|a| a.name.as_str()).collect();
    for (i, (app, raw)) in apps.iter().zip(raw).enumerate() {
        for (j, dep) in app.depends_on.iter().enumerate() {
            // App objects are known only while the service runs.
            if !dep.contains('.') && !names.contains(dep.as_str()) {
                let line = raw.depends_on.get(j).and_then(line_of);
                let message = format!(
                    "no app named {dep:?} in this file (an App object is named namespace/name)"
                );
                check.report(format!("apps[{i}].dependsOn[{j}]"), line, message);
            }
        }
    }
    let graph: BTreeMap<String, Vec<String>> = apps
        .iter()
        .map(|a| (a.name.clone(), a.depends_on.clone()))
        .collect();
    let mut reported: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for (i, (app, raw)) in apps.iter().zip(raw).enumerate() {
        let Some(chain) = find_cycle(&graph, &app.name) else {
            continue;
        };
        if reported.insert(chain.iter().cloned().collect()) {
            let line = raw.depends_on.first().and_then(line_of);
            let message = format!("a dependency cycle: {}", render_chain(&chain));
            check.report(format!("apps[{i}].dependsOn"), line, message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ConfigError};

    fn graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        edges
            .iter()
            .map(|(a, deps)| (a.to_string(), deps.iter().map(|d| d.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_cycle_is_found_with_its_chain_and_a_diamond_is_not_one() {
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        assert_eq!(find_cycle(&g, "a").unwrap(), ["a", "b", "c", "a"]);
        assert_eq!(find_cycle(&g, "c").unwrap(), ["c", "a", "b", "c"]);
        // d leads into the cycle but is not on it.
        assert_eq!(find_cycle(&g, "d"), None);
        let diamond = graph(&[("top", &["l", "r"]), ("l", &["base"]), ("r", &["base"])]);
        assert_eq!(find_cycle(&diamond, "top"), None);
        assert_eq!(
            find_cycle(&graph(&[("me", &["me"])]), "me").unwrap(),
            ["me", "me"]
        );
    }

    #[test]
    fn references_name_file_apps_or_apps_by_namespace() {
        assert_eq!(identity_of("crds").unwrap(), "crds");
        assert_eq!(
            identity_of("platform/cert-manager").unwrap(),
            "platform.cert-manager"
        );
        assert!(identity_of("Platform/x").unwrap_err().contains("DNS-1123"));
        assert!(identity_of("a/b/c").is_err());
        assert!(identity_of("").is_err());
        assert_eq!(display("platform.cert-manager"), "platform/cert-manager");
    }

    fn problems(text: &str) -> Vec<String> {
        match Config::parse(text, "t.yaml") {
            Err(ConfigError::Invalid { problems, .. }) => problems
                .into_iter()
                .map(|p| format!("{}: {}", p.path, p.message))
                .collect(),
            other => panic!("expected problems, got {other:?}"),
        }
    }

    const APP: &str = "  source: {repo: https://git.example/r.git}\n";

    #[test]
    fn a_cycle_of_file_apps_is_an_error_naming_the_chain_once() {
        let text = format!(
            "apps:\n- name: crds\n{APP}  dependsOn: [ops]\n- name: ops\n{APP}  dependsOn: [crs]\n\
             - name: crs\n{APP}  dependsOn: [crds]\n"
        );
        assert_eq!(
            problems(&text),
            ["apps[0].dependsOn: a dependency cycle: crds → ops → crs → crds"]
        );
        let own = format!("apps:\n- name: me\n{APP}  dependsOn: [me]\n");
        assert_eq!(
            problems(&own),
            ["apps[0].dependsOn: a dependency cycle: me → me"]
        );
    }

    #[test]
    fn an_unknown_file_app_is_an_error_and_an_app_object_is_taken_on_trust() {
        let text =
            format!("apps:\n- name: web\n{APP}  dependsOn: [db, team-a/cache, team-a/cache]\n");
        assert_eq!(
            problems(&text),
            [
                "apps[0].dependsOn[2]: \"team-a.cache\" is listed twice",
                "apps[0].dependsOn[0]: no app named \"db\" in this file (an App object is named namespace/name)",
            ]
        );
        let fine =
            format!("apps:\n- name: db\n{APP}- name: web\n{APP}  dependsOn: [db, team-a/cache]\n");
        let config = Config::parse(&fine, "t.yaml").expect("valid");
        assert_eq!(config.apps[1].depends_on, ["db", "team-a.cache"]);
    }

    #[test]
    fn a_dependency_with_a_ready_expr_is_compiled_at_load_and_a_bad_one_refused() {
        let text = format!(
            "apps:\n- name: db\n{APP}- name: web\n{APP}  dependsOn:\n  - name: db\n    readyExpr: \"dep.health == 'Healthy'\"\n  - team-a/cache\n"
        );
        let config = Config::parse(&text, "t.yaml").expect("valid");
        assert_eq!(config.apps[1].depends_on, ["db", "team-a.cache"]);
        let ready = &config.apps[1].ready_exprs;
        assert_eq!(ready.len(), 1);
        assert_eq!(ready["db"].source(), "dep.health == 'Healthy'");
        let bad = text.replace("dep.health == 'Healthy'", "dep.health ==");
        let found = problems(&bad);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("apps[1].dependsOn[0].readyExpr: readyExpr: line 1, column"),
            "{found:?}"
        );
        // An App's bare name in the object form is an App of its own namespace too.
        let spec = serde_json::json!({
            "source": {"repo": "https://git.example/r.git"},
            "dependsOn": [{"name": "db", "readyExpr": "true"}],
        });
        let app = crate::config::app_from_spec("team-a.web", &spec).expect("valid");
        assert_eq!(app.depends_on, ["team-a.db"]);
        assert!(app.ready_exprs.contains_key("team-a.db"));
    }

    #[test]
    fn an_apps_bare_reference_is_an_app_of_its_own_namespace() {
        let spec = serde_json::json!({
            "source": {"repo": "https://git.example/r.git"},
            "dependsOn": ["db", "platform/crds"],
        });
        let app = crate::config::app_from_spec("team-a.web", &spec).expect("valid");
        assert_eq!(app.depends_on, ["team-a.db", "platform.crds"]);
        let bad = serde_json::json!({
            "source": {"repo": "https://git.example/r.git"},
            "dependsOn": ["Not_A_Name"],
        });
        let err = crate::config::app_from_spec("team-a.web", &bad).unwrap_err();
        assert!(err.to_string().contains("spec.dependsOn[0]"), "{err}");
    }
}
