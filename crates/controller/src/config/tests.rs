//! The configuration's unit tests: the schema's example, defaults, every check and
//! its message, secrets read only when asked.

use std::time::Duration;

use chrono_tz::Tz;

use super::raw::MAX_CONFIG_ALIASES;
use super::*;
use crate::windows::WindowKind;
use tether_core::source::{Auth, Provider, SecretRef};
use tether_diff::diff::IgnoreRule;
use tether_schema::ownership::MAX_APP_NAME_LEN;

mod credentials;
mod service;

/// The schema's own example (`/work/briefs/config-schema.md`), verbatim.
const SCHEMA_EXAMPLE: &str = include_str!("../../../../tests/fixtures/config/tether.yaml");

fn parse(text: &str) -> Config {
    match Config::parse(text, "tether.yaml") {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

/// Every problem of an invalid configuration, one rendered line each.
fn problems(text: &str) -> Vec<String> {
    match Config::parse(text, "tether.yaml") {
        Err(e @ ConfigError::Invalid { .. }) => e.to_string().lines().map(String::from).collect(),
        Err(e) => panic!("expected invalid values, got: {e}"),
        Ok(_) => panic!("expected an error"),
    }
}

fn syntax(text: &str) -> String {
    match Config::parse(text, "tether.yaml") {
        Err(e @ ConfigError::Syntax { .. }) => e.to_string(),
        Err(e) => panic!("expected a syntax error, got: {e}"),
        Ok(_) => panic!("expected an error"),
    }
}

fn app(extra: &str) -> String {
    format!("apps:\n- name: web\n  source:\n    repo: git://h/r.git\n{extra}")
}

#[test]
fn the_schema_example_loads_as_written() {
    let c = parse(SCHEMA_EXAMPLE);
    assert_eq!(c.server.listen, "127.0.0.1:8080".parse().expect("addr"));
    let w = &c.server.webhooks;
    assert_eq!(
        w.github,
        Some(WebhookSecretRef(SecretRef::File(
            "/etc/tether/github-secret".into()
        )))
    );
    assert_eq!(
        w.gitlab,
        Some(WebhookSecretRef(SecretRef::Env(
            "GITLAB_WEBHOOK_TOKEN".into()
        )))
    );
    assert_eq!(w.secrets().count(), 5);
    assert!(!w.allow_unsigned);
    assert_eq!(c.inventory_namespace, "tether-system");
    assert_eq!(c.concurrency, 4);
    assert_eq!(c.resync_interval, Duration::from_secs(600));
    assert_eq!(
        c.leader_election,
        LeaderElectionConfig {
            enabled: false,
            namespace: "tether-system".into(),
            lease_name: "tether".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    );
    assert_eq!(c.apps.len(), 1);
    let web = c.app("web").expect("web");
    assert_eq!(web.source.repo, "git://127.0.0.1:9418/apps.git");
    assert_eq!(web.source.reference, "main");
    assert_eq!(web.source.path, "apps/web");
    assert_eq!(web.source.interval, Duration::from_secs(60));
    assert_eq!(
        web.destination,
        DestinationConfig {
            namespace: "live".into(),
            context: Some("prod".into()),
            kube_config: None,
        }
    );
    assert_eq!(
        web.sync,
        SyncPolicy {
            automated: true,
            prune: true,
            self_heal: true,
            force: true,
            allow_mass_prune: false,
            hook_timeout: Duration::from_secs(300),
        }
    );
    assert!(!web.suspend);
    assert_eq!(web.sync_windows.len(), 1);
    let win = &web.sync_windows[0];
    assert_eq!(
        (
            win.kind,
            win.expression.as_str(),
            win.duration,
            win.time_zone
        ),
        (
            WindowKind::Deny,
            "0 22 * * *",
            Duration::from_secs(8 * 3600),
            chrono_tz::Europe::Berlin
        )
    );
    assert_eq!(
        web.ignore_rules(),
        vec![IgnoreRule {
            group: Some("apps".into()),
            kind: Some("Deployment".into()),
            namespace: Some("live".into()),
            name: Some("web".into()),
            json_pointers: vec!["/spec/replicas".into()],
            managers: vec!["kube-controller-manager".into()],
        }]
    );
    assert_eq!(web.inventory_name(), "tether-inventory-web");
    assert_eq!(
        web.poll_config(&c.sources).interval,
        Duration::from_secs(60)
    );
}

#[test]
fn the_example_source_uses_the_token_over_git_protocol() {
    let c = parse(SCHEMA_EXAMPLE);
    let source = c.apps[0].source();
    assert_eq!(source.url, "git://127.0.0.1:9418/apps.git");
    assert_eq!(source.reference, "main");
    assert_eq!(source.path, "apps/web");
    assert_eq!(
        source.auth,
        Auth::Token {
            token: SecretRef::Env("GIT_TOKEN".into()),
            username: Some("bot".into())
        }
    );
}

#[test]
fn defaults_fill_what_is_left_out() {
    let c = parse("apps: []\n");
    assert_eq!(c.server.listen, DEFAULT_LISTEN);
    assert_eq!(c.server.webhooks.secrets().count(), 0);
    assert_eq!(c.concurrency, DEFAULT_APP_CONCURRENCY);
    assert_eq!(c.resync_interval, DEFAULT_RESYNC_INTERVAL);
    assert_eq!(
        c.render_timeout,
        tether_diff::manifest::DEFAULT_RENDER_TIMEOUT
    );
    assert_eq!(c.leader_election, LeaderElectionConfig::default());
    assert_eq!(c.shards, DEFAULT_SHARDS);
    assert!(c.apps.is_empty());

    let c = parse(&app(""));
    let a = &c.apps[0];
    assert_eq!(a.source.reference, "HEAD");
    assert_eq!(a.source.path, ".");
    assert_eq!(a.source.interval, DEFAULT_SOURCE_INTERVAL);
    assert_eq!(a.source.stale_after, DEFAULT_SOURCE_STALE_AFTER);
    assert_eq!(a.source.credentials, Credentials::default());
    assert_eq!(a.source().auth, Auth::None);
    assert_eq!(a.destination.namespace, "default");
    assert_eq!(a.destination.context, None);
    assert_eq!(a.sync, SyncPolicy::default());
    assert!(!a.sync.automated && a.sync.self_heal && a.sync.force);
    assert!(a.ignore_rules().is_empty() && a.sync_windows.is_empty());
}

#[test]
fn equal_files_give_equal_configurations() {
    // What a reload compares to find the apps that changed.
    let a = parse(SCHEMA_EXAMPLE);
    assert_eq!(a, parse(SCHEMA_EXAMPLE));
    let b = parse(&SCHEMA_EXAMPLE.replace("duration: 8h", "duration: 9h"));
    assert_ne!(a.apps[0], b.apps[0]);
    assert_eq!(a.apps[0].source, b.apps[0].source);
}

#[test]
fn a_bad_duration_names_its_file_line_and_field() {
    let text = "apps:\n- name: a\n  source: {repo: r}\n- name: b\n  source:\n    repo: r\n    interval: 1x\n";
    assert_eq!(
        problems(text),
        [
            "tether.yaml:7: apps[1].source.interval: \"1x\" is not a duration (like 30s, 1m, 1h30m or 500ms)"
        ]
    );
}

#[test]
fn an_apps_hook_timeout_defaults_to_helms_and_must_be_a_positive_duration() {
    let c = parse(&app(""));
    assert_eq!(c.apps[0].sync.hook_timeout, Duration::from_secs(300));
    let c = parse(&app("  sync:\n    hookTimeout: 90s\n"));
    assert_eq!(c.apps[0].sync.hook_timeout, Duration::from_secs(90));
    assert_eq!(
        problems(&app("  sync:\n    hookTimeout: 0s\n")),
        ["tether.yaml:6: apps[0].sync.hookTimeout: \"0s\" must be positive"]
    );
}

#[test]
fn a_source_is_stale_after_its_own_stale_after() {
    let c = parse(&app("    staleAfter: 90s\n"));
    assert_eq!(c.apps[0].source.stale_after, Duration::from_secs(90));
    assert_eq!(
        problems(&app("    staleAfter: 0s\n")),
        ["tether.yaml:5: apps[0].source.staleAfter: \"0s\" must be positive"]
    );
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let text = "\
concurrency: 0
resyncInterval: 0s
inventoryNamespace: Tether_System
server:
  listen: localhost:8080
apps:
- name: Web
  source:
    repo: \"  \"
    interval: soon
  destination:
    namespace: -live
";
    assert_eq!(
        problems(text),
        [
            "tether.yaml:1: concurrency: 0 must be at least 1",
            "tether.yaml:2: resyncInterval: \"0s\" must be positive",
            "tether.yaml:3: inventoryNamespace: \"Tether_System\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
            "tether.yaml:5: server.listen: \"localhost:8080\" is not an address and port (like 0.0.0.0:8080 or [::]:8080)",
            "tether.yaml:7: apps[0].name: \"Web\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
            "tether.yaml:9: apps[0].source.repo: must not be empty",
            "tether.yaml:10: apps[0].source.interval: \"soon\" is not a duration (like 30s, 1m, 1h30m or 500ms)",
            "tether.yaml:12: apps[0].destination.namespace: \"-live\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
        ]
    );
}

#[test]
fn app_names_are_unique_labels_short_enough_for_the_inventory() {
    let ok = "a".repeat(MAX_APP_NAME_LEN);
    assert_eq!(MAX_APP_NAME_LEN, 46);
    let c = parse(&format!("apps:\n- name: {ok}\n  source: {{repo: r}}\n"));
    assert_eq!(c.apps[0].inventory_name().len(), 63);

    let long = "a".repeat(MAX_APP_NAME_LEN + 1);
    assert_eq!(
        problems(&format!("apps:\n- name: {long}\n  source: {{repo: r}}\n")),
        [format!(
            "tether.yaml:2: apps[0].name: \"{long}\" is longer than 46 characters (tether-inventory-<name> must fit in 63)"
        )]
    );
    assert_eq!(
        problems(
            "apps:\n- name: web\n  source: {repo: r}\n- name: api\n  source: {repo: r}\n- name: web\n  source: {repo: r}\n"
        ),
        ["tether.yaml:6: apps[2].name: \"web\" is also the name of apps[0]"]
    );
}

#[test]
fn sync_windows_are_compiled_and_checked() {
    let c = parse(&app(
        "  syncWindows:\n  - {kind: allow, schedule: '0 9 * * 1-5', duration: 8h}\n",
    ));
    assert_eq!(c.apps[0].sync_windows[0].time_zone, Tz::UTC);
    assert_eq!(c.apps[0].sync_windows[0].kind, WindowKind::Allow);
    let text = app(
        "  syncWindows:\n  - kind: maybe\n    schedule: '0 22 * *'\n    duration: 0s\n    timeZone: Mars/Olympus\n  - {kind: deny, schedule: '0 22 * * 9', duration: 1h}\n",
    );
    assert_eq!(
        problems(&text),
        [
            "tether.yaml:6: apps[0].syncWindows[0].kind: \"maybe\" is not a window kind (allow or deny)",
            "tether.yaml:7: apps[0].syncWindows[0].schedule: `0 22 * *` has 4 fields; a schedule has 5 (minute hour day-of-month month day-of-week), or 6-7 with seconds first",
            "tether.yaml:8: apps[0].syncWindows[0].duration: \"0s\" must be positive",
            "tether.yaml:9: apps[0].syncWindows[0].timeZone: \"Mars/Olympus\" is not an IANA time zone (like Europe/Berlin or UTC)",
            "tether.yaml:10: apps[0].syncWindows[1].schedule: `0 22 * * 9`: day-of-week 9 is not 0-7",
        ]
    );
}

#[test]
fn ignore_rules_must_ignore_something_by_pointer() {
    let text = app(
        "  ignoreDifferences:\n  - kind: Deployment\n  - group: ''\n    kind: ConfigMap\n    jsonPointers: [data/x, /data/y]\n",
    );
    assert_eq!(
        problems(&text),
        [
            "tether.yaml:6: apps[0].ignoreDifferences[0]: ignores nothing: set jsonPointers or managedFieldsManagers",
            "tether.yaml:9: apps[0].ignoreDifferences[1].jsonPointers[0]: \"data/x\" is not a JSON pointer to a field (RFC 6901: like /spec/replicas)",
        ]
    );
    let c = parse(&app(
        "  ignoreDifferences:\n  - group: ''\n    kind: ConfigMap\n    jsonPointers: [/data/y]\n",
    ));
    let rule = &c.apps[0].ignore_rules()[0];
    assert_eq!(rule.group.as_deref(), Some(""));
    assert_eq!(rule.name, None);
}

#[test]
fn unknown_keys_name_their_path_and_line() {
    assert_eq!(
        syntax(&app("    interval: 1m\n    branch: main\n")),
        "tether.yaml:6: apps[0].source.branch: unknown field `branch`, expected one of repo, ref, path, interval, staleAfter, credentials, helm, chart, version, verify, oci, tag, digest, dependencyCredentials"
    );
    assert_eq!(
        syntax("server:\n  listen: 0.0.0.0:1\n  tls: true\n"),
        "tether.yaml:3: server.tls: unknown field `tls`, expected one of listen, webhooks, apiToken, insecureOpenAPI, shutdownTimeout, defaultServiceAccount, apps, advertiseURL, peerToken, outbound, oidc"
    );
}

#[test]
fn shape_errors_name_their_path_and_line() {
    assert_eq!(
        syntax("concurrency: many\n"),
        "tether.yaml:1: concurrency: invalid i64"
    );
    assert_eq!(
        syntax("apps:\n- source: {repo: r}\n"),
        "tether.yaml:2: apps[0]: missing field `name`"
    );
    assert_eq!(
        syntax("apps:\n- name: a\n  source: {repo: r}\n  sync: {automated: yes please}\n"),
        "tether.yaml:4: apps[0].sync.automated: invalid boolean"
    );
    assert_eq!(
        syntax("concurrency: 1\nconcurrency: 2\n"),
        "tether.yaml:2: duplicate mapping key: concurrency, set DuplicateKeyPolicy in Options if acceptable"
    );
    assert_eq!(
        syntax("apps: [\n"),
        "tether.yaml:1: apps: unclosed bracket '['"
    );
    assert_eq!(
        syntax("# nothing\n\n"),
        "tether.yaml: the file is empty (write `apps: []` for a service with no apps)"
    );
}

#[test]
fn empty_sections_are_left_out_sections() {
    // A section whose keys are all commented out is null in YAML.
    let c = parse("server:\n  webhooks:\n    # github: {secretEnv: X}\nleaderElection:\napps:\n");
    assert_eq!(c.server.webhooks.secrets().count(), 0);
    assert!(c.apps.is_empty());
    let c = parse(&app("  sync:\n  destination:\n  syncWindows:\n"));
    assert_eq!(c.apps[0].sync, SyncPolicy::default());
}

#[test]
fn alias_replays_stop_at_the_budget() {
    let aliases = vec!["*x"; MAX_CONFIG_ALIASES + 1].join(", ");
    let text = format!(
        "apps:\n- name: a\n  source: {{repo: &x r}}\n  ignoreDifferences:\n  - managedFieldsManagers: [{aliases}]\n"
    );
    let err = syntax(&text);
    assert!(err.starts_with("tether.yaml:5: "), "{err}");
    assert!(err.contains("alias"), "{err}");
    // Under the budget the same shape is fine.
    let aliases = ["*x"; 10].join(", ");
    let c = parse(&format!(
        "apps:\n- name: a\n  source: {{repo: &x r}}\n  ignoreDifferences:\n  - managedFieldsManagers: [{aliases}]\n"
    ));
    assert_eq!(
        c.apps[0].ignore_differences[0]
            .managed_fields_managers
            .len(),
        10
    );
}

#[test]
fn a_missing_file_is_a_read_error() {
    let err = Config::load(Path::new("/nonexistent/tether.yaml")).expect_err("missing");
    assert!(matches!(err, ConfigError::Read { .. }));
    assert!(
        err.to_string()
            .starts_with("/nonexistent/tether.yaml: cannot read: "),
        "{err}"
    );
}

#[test]
fn source_helm_becomes_the_apps_render_inputs() {
    let c = parse(&app(
        "    path: charts/web\n    helm:\n      releaseName: shop\n      valueFiles: [prod.yaml]\n      values: {replicas: 2, image: {tag: v1}}\n      set: [\"color=red\"]\n  destination: {namespace: live}\n",
    ));
    let r = c.apps[0].renderers();
    assert_eq!(r.release, "web");
    assert_eq!(r.helm.release_name.as_deref(), Some("shop"));
    assert_eq!(r.helm.namespace, "live");
    assert_eq!(r.helm.value_files, ["prod.yaml"]);
    assert_eq!(r.helm.set, ["color=red"]);
    let values: serde_json::Value =
        serde_json::from_str(r.helm.values.as_deref().expect("values")).expect("JSON is YAML");
    assert_eq!(
        values,
        serde_json::json!({"replicas": 2, "image": {"tag": "v1"}})
    );

    // Values given as YAML text are passed as written.
    let c = parse(&app("    helm:\n      values: |\n        replicas: 3\n"));
    assert_eq!(
        c.apps[0].source.helm.values.as_deref(),
        Some("replicas: 3\n")
    );
}

#[test]
fn source_helm_problems_name_the_field_and_line() {
    assert_eq!(
        problems(&app(
            "    helm:\n      releaseName: Not_A_Name\n      values: [1]\n      valueFiles: [../secrets.yaml, /etc/x.yaml]\n      set: [novalue]\n"
        )),
        [
            "tether.yaml:6: apps[0].source.helm.releaseName: \"Not_A_Name\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
            "tether.yaml:7: apps[0].source.helm.values: must be a mapping, or YAML text holding one",
            "tether.yaml:8: apps[0].source.helm.valueFiles[0]: \"../secrets.yaml\" must be a path inside the chart's revision",
            "tether.yaml:8: apps[0].source.helm.valueFiles[1]: \"/etc/x.yaml\" must be a path inside the chart's revision",
            "tether.yaml:9: apps[0].source.helm.set[0]: \"novalue\" must be key=value",
        ]
    );
    assert!(
        syntax(&app("    helm:\n      valuesFile: x.yaml\n")).contains("unknown field"),
        "unknown keys are refused"
    );
}

#[test]
fn an_app_names_its_service_account_and_another_clusters_kubeconfig() {
    let c = parse(
        "server:\n  defaultServiceAccount: tether-tenant\n\
         apps:\n- name: web\n  serviceAccountName: deployer\n  source: {repo: git://h/r.git}\n\
         \x20 destination:\n    namespace: t1\n    kubeConfig:\n      secretRef: {name: prod}\n\
         - name: api\n  source: {repo: git://h/r.git}\n  destination:\n    namespace: t2\n\
         \x20   kubeConfig:\n      secretRef: {name: prod, key: config, namespace: clusters}\n",
    );
    assert_eq!(
        c.server.default_service_account.as_deref(),
        Some("tether-tenant")
    );
    let web = c.app("web").expect("web");
    let default = c.server.default_service_account.as_deref();
    assert_eq!(
        web.service_account(default)
            .map(|a| a.username())
            .as_deref(),
        Some("system:serviceaccount:t1:deployer")
    );
    let secret = web.kube_config_secret("tether-system").expect("a Secret");
    assert_eq!(
        (secret.namespace.as_str(), secret.name.as_str(), secret.key),
        ("tether-system", "prod", None)
    );
    let api = c.app("api").expect("api");
    // No name of its own: the server's default, in its destination namespace.
    assert_eq!(
        api.service_account(default)
            .map(|a| a.username())
            .as_deref(),
        Some("system:serviceaccount:t2:tether-tenant")
    );
    assert_eq!(api.service_account(None), None);
    let secret = api.kube_config_secret("tether-system").expect("a Secret");
    assert_eq!(
        (secret.namespace.as_str(), secret.key.as_deref()),
        ("clusters", Some("config"))
    );
    // An App's tenant namespace wins over both.
    let mut app = api.clone();
    app.tenant_namespace = Some("team-a".into());
    assert_eq!(
        app.service_account(default).map(|a| a.namespace).as_deref(),
        Some("team-a")
    );
    assert_eq!(
        app.kube_config_secret("tether-system")
            .map(|s| s.namespace)
            .as_deref(),
        Some("team-a")
    );
}

#[test]
fn bad_service_accounts_and_kubeconfig_references_are_named() {
    let found = problems(
        "server:\n  defaultServiceAccount: Not_Valid\n\
         apps:\n- name: web\n  serviceAccountName: \"\"\n  source: {repo: git://h/r.git}\n\
         \x20 destination:\n    context: prod\n    kubeConfig:\n      secretRef: {name: prod, key: \"\"}\n",
    );
    let joined = found.join("\n");
    for field in [
        "server.defaultServiceAccount",
        "apps[0].serviceAccountName",
        "apps[0].destination.kubeConfig.secretRef.key: must not be empty",
        "apps[0].destination: set context or kubeConfig, not both",
    ] {
        assert!(joined.contains(field), "{field} missing from:\n{joined}");
    }
    assert!(syntax("apps:\n- name: web\n  source: {repo: git://h/r.git}\n  destination:\n    kubeConfig: {secretRef: {nam: x}}\n").contains("unknown field"));
}

/// Issue #24: how long a renderer may run is the operator's to set, and never zero.
#[test]
fn the_render_timeout_is_read_and_must_be_positive() {
    assert_eq!(
        parse("renderTimeout: 30s\napps: []\n").render_timeout,
        Duration::from_secs(30)
    );
    assert_eq!(
        problems("renderTimeout: 0s\napps: []\n"),
        ["tether.yaml:1: renderTimeout: \"0s\" must be positive"]
    );
}
