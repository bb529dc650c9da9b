//! Apps as Kubernetes objects (`apps.tether.dev`, issue #16): the CRD tether ships and
//! the step from an App object to the same [`AppConfig`] a configuration entry becomes.
//! `spec` holds the keys of one `apps:` entry, so it goes through the configuration's
//! own parser and checks (`raw` → `resolve`): there is one definition of what an app
//! may say, and an entry moves between the file and an App by copy and paste.

use std::sync::Arc;

use serde_json::Value;

use super::{AppConfig, Config, ConfigError};
use tether_core::report::outbound::Requester;
use tether_schema::ownership::MAX_APP_NAME_LEN;

/// The CRD, as `charts/tether/crds/app.yaml` ships it and `tether crd` prints it.
pub const APP_CRD_YAML: &str = include_str!("../../../../charts/tether/crds/app.yaml");

pub const APP_GROUP: &str = "tether.dev";
pub const APP_VERSION: &str = "v1alpha1";
pub const APP_KIND: &str = "App";
pub const APP_PLURAL: &str = "apps";

/// Holds a deleted App until tether has done what its `deletionPolicy` says.
pub const APP_FINALIZER: &str = "tether.dev/finalizer";

/// The field manager of App status writes: not `tether`, which owns applied objects,
/// so `managedFields` tells the two apart.
pub const APP_STATUS_MANAGER: &str = "tether-status";

/// What deleting an App does to the objects it applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// Delete them (through the prune path, so `tether.dev/prune: disabled` holds).
    Prune,
    /// Leave them (the default: deleting an App is not deleting a workload).
    Orphan,
}

/// One App object, read: who it is, which spec generation, and the app it describes.
#[derive(Debug, Clone, PartialEq)]
pub struct AppObject {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    /// Being deleted (`metadata.deletionTimestamp` set).
    pub deleting: bool,
    /// Carries [`APP_FINALIZER`].
    pub finalized: bool,
    pub deletion_policy: DeletionPolicy,
    /// The app, or why its spec cannot be one (shown in the App's status).
    pub config: Result<AppConfig, String>,
}

impl AppObject {
    /// The app's identity inside tether: `<namespace>.<name>`. Not `/`, which neither
    /// a label value (`tether.dev/app`) nor a URL path segment may hold; a namespace
    /// has no dots, so the split is unambiguous, and a configuration app (a DNS label)
    /// never has one, so the two never collide.
    pub fn identity(&self) -> String {
        app_identity(&self.namespace, &self.name)
    }

    /// Reads an App object as the API server returns it.
    pub fn from_object(object: &Value) -> Result<AppObject, String> {
        let meta = object.get("metadata").unwrap_or(&Value::Null);
        let text = |key: &str| meta.get(key).and_then(Value::as_str).unwrap_or_default();
        let (namespace, name) = (text("namespace").to_string(), text("name").to_string());
        if namespace.is_empty() || name.is_empty() {
            return Err("an App needs metadata.namespace and metadata.name".into());
        }
        let spec = object.get("spec").cloned().unwrap_or(Value::Null);
        let deletion_policy = match spec.get("deletionPolicy").and_then(Value::as_str) {
            Some("Prune") => DeletionPolicy::Prune,
            _ => DeletionPolicy::Orphan,
        };
        let identity = app_identity(&namespace, &name);
        let config = if identity.len() > MAX_APP_NAME_LEN {
            Err(format!(
                "{identity:?} (namespace.name) is longer than {MAX_APP_NAME_LEN} characters: \
                 the app's inventory name, tether-inventory-<namespace.name>, must fit in 63"
            ))
        } else {
            app_from_spec(&identity, &spec).map_err(|e| e.to_string())
        };
        Ok(AppObject {
            uid: text("uid").to_string(),
            generation: meta.get("generation").and_then(Value::as_i64).unwrap_or(0),
            deleting: meta.get("deletionTimestamp").is_some(),
            finalized: meta
                .get("finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|f| f == APP_FINALIZER)),
            namespace,
            name,
            deletion_policy,
            config,
        })
    }
}

/// `<namespace>.<name>`: see [`AppObject::identity`].
pub fn app_identity(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// Why an App may not say what a configuration entry may.
const TETHERS_CONTEXT: &str =
    "an App cannot use a context of tether's kubeconfig: use destination.kubeConfig.secretRef";
const TETHERS_ENVIRONMENT: &str =
    "an App cannot use tether's environment or files: use source.credentials.secretRef";
const TETHERS_KEY_FILES: &str =
    "an App cannot read tether's files: use source.verify.keys.secretRef";
const OWN_NAMESPACE: &str = "an App's Secrets are those of its own namespace";
const TETHERS_TOKEN: &str = "an App cannot post commit statuses with tether's token (read from tether's environment or files)";
const TETHERS_KEYS: &str =
    "an App cannot read SOPS keys from tether's files: use decryption.secretRef";
const TETHERS_NOTIFY: &str =
    "an App cannot read a notification's URL or key from tether's environment or files: use url";

/// The keys of a configuration entry an App may not set, and why: each leads to
/// tether's own kubeconfig, environment, files or tokens, or to another namespace's
/// Secrets. The CRD's schema prunes them, but a stale CRD keeps them, so tether
/// refuses them itself. `[]` is every item of a list.
pub(super) const TETHER_ONLY: &[(&str, &str)] = &[
    ("destination.context", TETHERS_CONTEXT),
    ("destination.kubeConfig.secretRef.namespace", OWN_NAMESPACE),
    ("source.credentials.username", TETHERS_ENVIRONMENT),
    ("source.credentials.passwordEnv", TETHERS_ENVIRONMENT),
    ("source.credentials.passwordFile", TETHERS_ENVIRONMENT),
    ("source.credentials.tokenEnv", TETHERS_ENVIRONMENT),
    ("source.credentials.tokenFile", TETHERS_ENVIRONMENT),
    ("source.credentials.sshKeyFile", TETHERS_ENVIRONMENT),
    ("source.credentials.knownHostsFile", TETHERS_ENVIRONMENT),
    ("source.credentials.secretRef.namespace", OWN_NAMESPACE),
    (
        "source.dependencyCredentials[].secretRef.namespace",
        OWN_NAMESPACE,
    ),
    ("source.verify.keys.files", TETHERS_KEY_FILES),
    ("source.verify.keys.secretRef.namespace", OWN_NAMESPACE),
    ("commitStatus", TETHERS_TOKEN),
    ("notifications[].urlEnv", TETHERS_NOTIFY),
    ("notifications[].urlFile", TETHERS_NOTIFY),
    ("notifications[].secretEnv", TETHERS_NOTIFY),
    ("notifications[].secretFile", TETHERS_NOTIFY),
    ("decryption.keyFiles", TETHERS_KEYS),
    ("decryption.secretRef.namespace", OWN_NAMESPACE),
];

/// The [`TETHER_ONLY`] keys `entry` (an App's spec) sets, named by their place in
/// the App (`spec.notifications[0].urlFile`).
fn tether_only_keys(entry: &serde_json::Map<String, Value>) -> Vec<super::Problem> {
    fn find(at: &Value, path: &[&str], place: String, out: &mut Vec<String>) {
        let Some((first, rest)) = path.split_first() else {
            out.push(place);
            return;
        };
        let (key, each) = match first.strip_suffix("[]") {
            Some(key) => (key, true),
            None => (*first, false),
        };
        let Some(value) = at.get(key).filter(|v| !v.is_null()) else {
            return;
        };
        let place = format!("{place}.{key}");
        match value.as_array() {
            Some(items) if each => {
                for (i, item) in items.iter().enumerate() {
                    find(item, rest, format!("{place}[{i}]"), out);
                }
            }
            _ if each => {}
            _ => find(value, rest, place, out),
        }
    }
    let entry = Value::Object(entry.clone());
    let mut problems = Vec::new();
    for (path, why) in TETHER_ONLY {
        let segments: Vec<&str> = path.split('.').collect();
        let mut found = Vec::new();
        find(&entry, &segments, "spec".into(), &mut found);
        problems.extend(found.into_iter().map(|path| super::Problem {
            path,
            line: None,
            message: (*why).into(),
        }));
    }
    problems
}

/// The app an App's `spec` describes, parsed and checked by the configuration's own
/// code: the spec becomes the one entry of an `apps:` list (JSON is YAML), problems
/// are named by their place in the App (`spec.source.interval`).
pub fn app_from_spec(identity: &str, spec: &Value) -> Result<AppConfig, ConfigError> {
    let origin = format!("App {}", identity.replacen('.', "/", 1));
    let mut entry = match spec {
        Value::Object(map) => map.clone(),
        Value::Null => serde_json::Map::new(),
        _ => {
            return Err(ConfigError::Syntax {
                origin,
                path: Some("spec".into()),
                line: None,
                message: "must be a mapping".into(),
            });
        }
    };
    let refused = tether_only_keys(&entry);
    if !refused.is_empty() {
        return Err(ConfigError::Invalid {
            origin,
            problems: refused,
        });
    }
    // The App's own key; every other key is an entry's.
    entry.remove("deletionPolicy");
    // The name is metadata's (and not a DNS label: it holds a dot); a stand-in passes
    // the entry's name check, and the identity replaces it below.
    entry.insert("name".into(), Value::String("app".into()));
    qualify_depends_on(&mut entry, identity);
    let text = serde_json::json!({ "apps": [entry] }).to_string();
    let respell = |path: String| match path.strip_prefix("apps[0]") {
        Some(rest) => format!("spec{rest}"),
        None => path,
    };
    match Config::parse(&text, &origin) {
        Ok(mut config) => confine(config.apps.remove(0), identity)
            .map_err(|problems| ConfigError::Invalid { origin, problems }),
        // Lines and columns are of the JSON text made here, not of anything the user
        // wrote: the field path alone says where.
        Err(ConfigError::Syntax {
            origin,
            path,
            message,
            ..
        }) => Err(ConfigError::Syntax {
            origin,
            path: path.map(respell),
            line: None,
            message,
        }),
        Err(ConfigError::Invalid { origin, problems }) => Err(ConfigError::Invalid {
            origin,
            problems: problems
                .into_iter()
                .map(|mut p| {
                    p.path = respell(p.path);
                    p.line = None;
                    p
                })
                .collect(),
        }),
        Err(other) => Err(other),
    }
}

/// A bare name in an App's `dependsOn` is an App of its own namespace (Flux's
/// reading), never one of the file's apps: the operator's apps are not a tenant's.
fn qualify_depends_on(entry: &mut serde_json::Map<String, Value>, identity: &str) {
    let (Some(Value::Array(refs)), Some((namespace, _))) =
        (entry.get_mut("dependsOn"), identity.split_once('.'))
    else {
        return;
    };
    for reference in refs.iter_mut() {
        // A name, or Flux's form `{name, readyExpr}`.
        let name = match reference {
            Value::Object(entry) => entry.get_mut("name"),
            other => Some(other),
        };
        if let Some(name) = name.filter(|n| n.as_str().is_some_and(|r| !r.contains('/'))) {
            *name = Value::String(format!("{namespace}/{}", name.as_str().unwrap_or_default()));
        }
    }
}

/// Confines an App's parsed app to its tenant: it reads only what its credentials
/// can fetch over the network (never tether's own files, its Git cache among them),
/// its ServiceAccount and Secrets are its namespace's, and its notifications go
/// where a tenant may send (`report::outbound`).
fn confine(mut app: AppConfig, identity: &str) -> Result<AppConfig, Vec<super::Problem>> {
    let repos = std::iter::once(("spec.source.repo".to_string(), &app.source.repo)).chain(
        app.source
            .helm
            .value_sources
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("spec.source.helm.valueSources[{i}].repo"), &v.repo)),
    );
    let problems: Vec<super::Problem> = repos
        .filter_map(|(path, repo)| {
            let message = tether_core::source::check_tenant_repo_url(repo).err()?;
            Some(super::Problem {
                path,
                line: None,
                message,
            })
        })
        .collect();
    if !problems.is_empty() {
        return Err(problems);
    }
    app.name = identity.to_string();
    app.tenant_namespace = identity.split_once('.').map(|(ns, _)| ns.to_string());
    for channel in app.notifications.iter_mut() {
        Arc::make_mut(channel).requester = Requester::Tenant;
    }
    if let Some(target) = app.commit_status.as_mut() {
        Arc::make_mut(target).requester = Requester::Tenant;
    }
    Ok(app)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::config::AppsWatchConfig;

    fn crd() -> Value {
        serde_saphyr::from_str(APP_CRD_YAML).expect("the CRD is YAML")
    }

    fn spec_schema() -> Value {
        crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
    }

    /// The object schemas below `spec`, by path (`spec`, `spec.source`,
    /// `spec.syncWindows[]`), each with its property names.
    fn object_schemas(path: &str, schema: &Value, out: &mut Vec<(String, BTreeSet<String>)>) {
        if let Some(items) = schema.get("items") {
            object_schemas(&format!("{path}[]"), items, out);
        }
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        out.push((path.to_string(), props.keys().cloned().collect()));
        for (key, child) in props {
            object_schemas(&format!("{path}.{key}"), child, out);
        }
    }

    /// The keys the configuration's parser takes at a place of an entry, read from its
    /// own refusal of an unknown key ("unknown field `x`, expected one of `a`, `b`").
    fn config_keys(path: &str) -> BTreeSet<String> {
        let mut entry = json!({"name": "a", "source": {"repo": "r"}});
        let mut at = &mut entry;
        for step in path
            .trim_start_matches("spec")
            .split('.')
            .filter(|s| !s.is_empty())
        {
            let (key, list) = match step.strip_suffix("[]") {
                Some(key) => (key, true),
                None => (step, false),
            };
            let value = if list { json!([{}]) } else { json!({}) };
            let map = at.as_object_mut().expect("an object");
            at = map.entry(key.to_string()).or_insert(value);
            if list {
                at = &mut at[0];
            }
        }
        at["zzUnknown"] = json!(1);
        let text = json!({ "apps": [entry] }).to_string();
        let message = match Config::parse(&text, "t") {
            Err(ConfigError::Syntax { message, .. }) => message,
            other => panic!("{path}: expected an unknown-field refusal, got {other:?}"),
        };
        let (_, expected) = message
            .split_once("expected one of")
            .or_else(|| message.split_once("expected"))
            .unwrap_or_else(|| panic!("{path}: {message}"));
        // Both spellings occur: "`a`, `b`" and "a, b".
        expected
            .split(',')
            .map(|k| k.trim().trim_matches('`').to_string())
            .filter(|k| !k.is_empty())
            .collect()
    }

    /// Keys a configuration entry has and an App has not: the name (metadata's), and
    /// those tether refuses from an App (see the CRD's head).
    fn config_only() -> Vec<String> {
        std::iter::once("spec.name".to_string())
            .chain(TETHER_ONLY.iter().map(|(path, _)| format!("spec.{path}")))
            .collect()
    }

    /// Keys an App has and a configuration entry has not.
    const APP_ONLY: &[&str] = &["spec.deletionPolicy"];

    #[test]
    fn every_key_of_a_config_entry_is_in_the_crd_and_back() {
        let mut schemas = Vec::new();
        object_schemas("spec", &spec_schema(), &mut schemas);
        assert!(schemas.len() >= 8, "{schemas:?}");
        for (path, crd_keys) in schemas {
            let config = config_keys(&path);
            let joined = |key: &String| format!("{path}.{key}");
            let missing: Vec<String> = config
                .iter()
                .filter(|k| !crd_keys.contains(*k))
                .map(joined)
                .filter(|k| !config_only().contains(k))
                .collect();
            let extra: Vec<String> = crd_keys
                .iter()
                .filter(|k| !config.contains(*k))
                .map(joined)
                .filter(|k| !APP_ONLY.contains(&k.as_str()))
                .collect();
            assert!(
                missing.is_empty(),
                "config keys not in the CRD: {missing:?}"
            );
            assert!(
                extra.is_empty(),
                "CRD keys the config does not take: {extra:?}"
            );
        }
    }

    #[test]
    fn a_spec_is_the_same_app_as_the_config_entry_it_was_copied_from() {
        let entry = "
apps:
  - name: web
    source:
      repo: https://git.example/web.git
      ref: main
      path: deploy
      interval: 30s
    destination:
      namespace: web
    sync:
      automated: true
      prune: true
    syncWindows:
      - kind: deny
        schedule: '0 22 * * *'
        duration: 8h
    ignoreDifferences:
      - kind: Deployment
        jsonPointers: [/spec/replicas]
";
        let from_file = Config::parse(entry, "t").expect("valid").apps.remove(0);
        let spec = json!({
            "source": {"repo": "https://git.example/web.git", "ref": "main", "path": "deploy", "interval": "30s"},
            "destination": {"namespace": "web"},
            "sync": {"automated": true, "prune": true},
            "syncWindows": [{"kind": "deny", "schedule": "0 22 * * *", "duration": "8h"}],
            "ignoreDifferences": [{"kind": "Deployment", "jsonPointers": ["/spec/replicas"]}],
            "deletionPolicy": "Prune",
        });
        let from_app = app_from_spec("team-a.web", &spec).expect("valid");
        assert_eq!(from_app.name, "team-a.web");
        assert_eq!(from_app.tenant_namespace.as_deref(), Some("team-a"));
        assert_eq!(
            AppConfig {
                name: "web".into(),
                tenant_namespace: None,
                ..from_app
            },
            from_file
        );
        assert_eq!(from_file.source.interval, Duration::from_secs(30));
    }

    #[test]
    fn an_apps_notifications_are_a_tenants_and_a_files_the_operators() {
        use tether_core::report::outbound::Requester;
        let spec = json!({
            "source": {"repo": "https://git.example/web.git"},
            "destination": {"namespace": "web"},
            "notifications": [{"type": "webhook", "url": "http://127.0.0.1:9998/internal/admin/reset"}],
        });
        let app = app_from_spec("team-a.web", &spec).expect("valid");
        assert_eq!(app.notifications[0].requester, Requester::Tenant);
        let file = Config::parse(
            "apps:\n- name: web\n  source: {repo: https://git.example/web.git}\n  destination: {namespace: web}\n  notifications: [{type: webhook, url: \"http://127.0.0.1:9/x\"}]\n",
            "t",
        )
        .expect("valid");
        assert_eq!(file.apps[0].notifications[0].requester, Requester::Operator);
    }

    #[test]
    fn a_bad_spec_is_named_by_its_place_in_the_app() {
        let spec = json!({"source": {"repo": "r", "interval": "soon"}});
        let err = app_from_spec("t1.web", &spec)
            .expect_err("invalid")
            .to_string();
        assert!(
            err.starts_with("App t1/web: spec.source.interval: "),
            "{err}"
        );
        let spec = json!({"source": {"repo": "r"}, "sync": {"automatic": true}});
        let err = app_from_spec("t1.web", &spec)
            .expect_err("unknown")
            .to_string();
        assert!(
            err.contains("spec.sync") && err.contains("automatic"),
            "{err}"
        );
        let spec = json!({"source": {"repo": "r"}, "destination": {"context": "prod"}});
        let err = app_from_spec("t1.web", &spec).expect_err("tether's context");
        assert!(
            err.to_string()
                .starts_with("App t1/web: spec.destination.context: "),
            "{err}"
        );
        let err = app_from_spec("t1.web", &json!("text")).expect_err("not a mapping");
        assert_eq!(err.to_string(), "App t1/web: spec: must be a mapping");
    }

    #[test]
    fn an_apps_git_credentials_are_a_secret_of_its_own_namespace() {
        let spec = json!({"source": {"repo": "https://h/r.git",
                          "credentials": {"secretRef": {"name": "git", "namespace": "other"}}}});
        let err = app_from_spec("t1.web", &spec).expect_err("another namespace's Secret");
        assert_eq!(
            err.to_string(),
            "App t1/web: spec.source.credentials.secretRef.namespace: an App's Secrets are those of its own namespace"
        );
        let spec = json!({"source": {"repo": "https://h/r.git",
                          "credentials": {"secretRef": {"name": "git"}}}});
        let app = app_from_spec("t1.web", &spec).expect("valid");
        assert_eq!(
            app.source().auth,
            tether_core::source::Auth::Secret(tether_core::source::CredentialsSecret {
                namespace: "t1".into(),
                name: "git".into(),
            })
        );
        let spec = json!({"source": {"repo": "https://h/r.git",
                          "credentials": {"secretRef": {"name": "git"}, "tokenEnv": "HOME"}}});
        let err = app_from_spec("t1.web", &spec).expect_err("tether's environment");
        assert!(
            err.to_string()
                .starts_with("App t1/web: spec.source.credentials.tokenEnv: "),
            "{err}"
        );
    }

    /// Issue #24: a stale CRD keeps the fields its schema no longer has; tether itself
    /// refuses those that reach its own files, environment and tokens.
    #[test]
    fn fields_that_reach_tethers_files_or_tokens_are_refused_without_the_crd() {
        let spec = json!({
            "source": {"repo": "https://h/r.git"},
            "commitStatus": {"provider": "github", "tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
            "notifications": [
                {"type": "webhook", "url": "https://hooks.example/a"},
                {"type": "webhook", "urlFile": "/etc/tether/api-token", "secretEnv": "TETHER_API_TOKEN"},
            ],
            "destination": {"kubeConfig": {"secretRef": {"name": "c", "namespace": "tether-system"}}},
        });
        let err = app_from_spec("t1.web", &spec).expect_err("refused");
        let ConfigError::Invalid { problems, .. } = &err else {
            panic!("{err:?}");
        };
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.destination.kubeConfig.secretRef.namespace",
                "spec.commitStatus",
                "spec.notifications[1].urlFile",
                "spec.notifications[1].secretEnv",
            ]
        );
        assert!(
            err.to_string().contains(
                "spec.commitStatus: an App cannot post commit statuses with tether's token"
            ),
            "{err}"
        );
        // The same App through the object path: its status says so, no worker runs.
        let object = json!({"metadata": {"namespace": "t1", "name": "web"}, "spec": spec});
        let app = AppObject::from_object(&object).expect("an App");
        assert!(
            app.config
                .expect_err("refused")
                .contains("spec.notifications[1].urlFile")
        );
    }

    #[test]
    fn an_app_object_says_who_it_is_and_what_deleting_it_does() {
        let object = json!({
            "metadata": {"namespace": "t1", "name": "web.v2", "uid": "u1", "generation": 3,
                         "finalizers": [APP_FINALIZER], "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"source": {"repo": "https://h.example/r.git"}, "deletionPolicy": "Prune"},
        });
        let app = AppObject::from_object(&object).expect("an App");
        assert_eq!(app.identity(), "t1.web.v2");
        assert_eq!(
            (app.generation, app.deleting, app.finalized),
            (3, true, true)
        );
        assert_eq!(app.deletion_policy, DeletionPolicy::Prune);
        assert_eq!(app.config.expect("valid").name, "t1.web.v2");

        let long = "n".repeat(MAX_APP_NAME_LEN);
        let object = json!({"metadata": {"namespace": "t1", "name": long}, "spec": {"source": {"repo": "r"}}});
        let app = AppObject::from_object(&object).expect("an App");
        assert_eq!(app.deletion_policy, DeletionPolicy::Orphan);
        assert!(app.config.expect_err("too long").contains("must fit in 63"));
        assert!(AppObject::from_object(&json!({"metadata": {"name": "x"}})).is_err());
    }

    #[test]
    fn server_apps_restricts_or_turns_off_the_app_watch() {
        let config = Config::parse("apps: []\n", "t").expect("valid");
        assert_eq!(config.server.apps, AppsWatchConfig::default());
        assert!(config.server.apps.enabled);
        let text = "server:\n  apps:\n    enabled: false\n    namespaces: [t1, t2]\napps: []\n";
        let config = Config::parse(text, "t").expect("valid");
        assert!(!config.server.apps.enabled);
        assert_eq!(config.server.apps.namespaces, ["t1", "t2"]);
        let text = "server:\n  apps:\n    namespaces: [T_1]\napps: []\n";
        let err = Config::parse(text, "t").expect_err("invalid").to_string();
        assert!(err.contains("server.apps.namespaces[0]"), "{err}");
    }
}
