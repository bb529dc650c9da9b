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
fn the_lease_namespace_follows_the_inventory_namespace() {
    let c = parse("inventoryNamespace: gitops\n");
    assert_eq!(c.leader_election.namespace, "gitops");
    let c = parse("inventoryNamespace: gitops\nleaderElection: {namespace: leases}\n");
    assert_eq!(c.leader_election.namespace, "leases");
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
fn leader_election_durations_must_be_ordered() {
    assert_eq!(
        problems(
            "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n  retryPeriod: 12s\n"
        ),
        [
            "tether.yaml:3: leaderElection.renewDeadline: renewDeadline (10s) must be shorter than leaseDuration (10s)",
            "tether.yaml:4: leaderElection.retryPeriod: retryPeriod (12s) must be shorter than renewDeadline (10s)",
        ]
    );
    // A default on the other side is named as such.
    assert_eq!(
        problems("leaderElection:\n  leaseDuration: 5s\n"),
        [
            "tether.yaml: leaderElection.renewDeadline: renewDeadline (10s, the default) must be shorter than leaseDuration (5s)"
        ]
    );
    assert_eq!(
        problems("leaderElection:\n  leaseName: Tether!\n  namespace: a.b\n  retryPeriod: 0ms\n"),
        [
            "tether.yaml:2: leaderElection.leaseName: \"Tether!\" is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)",
            "tether.yaml:3: leaderElection.namespace: \"a.b\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
            "tether.yaml:4: leaderElection.retryPeriod: \"0ms\" must be positive",
        ]
    );
    let c = parse(
        "leaderElection: {enabled: true, leaseName: tether.leader, leaseDuration: 1m, renewDeadline: 40s, retryPeriod: 5s}\n",
    );
    assert!(c.leader_election.enabled);
    assert_eq!(c.leader_election.lease_name, "tether.leader");
    assert_eq!(c.leader_election.renew_deadline, Duration::from_secs(40));
}

#[test]
fn shards_take_leader_elections_namespace_and_timings_and_are_bounded() {
    // More than one shard needs no `enabled: true`: each shard is its own election.
    let c = parse(
        "shards: 3\nserver: {peerToken: {secretEnv: PEER}}\nleaderElection: {namespace: leases, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 1s}\n",
    );
    assert_eq!(c.shards, 3);
    assert!(!c.leader_election.enabled);
    assert_eq!(c.leader_election.namespace, "leases");
    assert_eq!(c.leader_election.lease_duration, Duration::from_secs(4));
    assert_eq!(parse("shards: 1\n").shards, 1);
    let peers = "server: {peerToken: {secretFile: /peer/token}}\n";
    assert_eq!(
        parse(&format!("shards: {MAX_SHARDS}\n{peers}")).shards,
        MAX_SHARDS
    );
    // Issue #24: replicas sign their calls to each other, never pass a caller's token.
    assert_eq!(
        problems("shards: 2\n"),
        [
            "tether.yaml:1: server.peerToken: required with shards above 1: the replicas sign \
             their calls to each other with it (a Secret the chart generates); set secretFile \
             or secretEnv"
        ]
    );
    assert_eq!(
        problems("shards: 0\n"),
        ["tether.yaml:1: shards: 0 must be between 1 and 256"]
    );
    assert_eq!(
        problems("concurrency: 2\nshards: 257\n"),
        ["tether.yaml:2: shards: 257 must be between 1 and 256"]
    );
    assert_eq!(
        problems("shards: -4\n"),
        ["tether.yaml:1: shards: -4 must be between 1 and 256"]
    );
    assert!(syntax("shards: three\n").contains("shards"));
    // The timings shards use are checked as the leader's are.
    assert_eq!(
        problems(&format!(
            "shards: 2\n{peers}leaderElection: {{leaseDuration: 2s}}\n"
        )),
        [
            "tether.yaml: leaderElection.renewDeadline: renewDeadline (10s, the default) must be shorter than leaseDuration (2s)"
        ]
    );
}

#[test]
fn the_advertised_url_is_a_plain_http_base() {
    let c = parse("server: {advertiseURL: \"http://10.0.0.7:8080/\"}\n");
    assert_eq!(
        c.server.advertise_url.as_deref(),
        Some("http://10.0.0.7:8080")
    );
    assert_eq!(parse("apps: []\n").server.advertise_url, None);
    assert_eq!(
        problems("server:\n  advertiseURL: \"http://h:1/api\"\n"),
        [
            "tether.yaml:2: server.advertiseURL: \"http://h:1/api\" must be http:// or https:// with a host and port, and nothing after them (like http://10.0.0.7:8080)"
        ]
    );
    assert_eq!(problems("server:\n  advertiseURL: \"ftp://h\"\n").len(), 1);
    assert_eq!(
        problems("server:\n  advertiseURL: \"http://u:p@h:1\"\n").len(),
        1
    );
    assert!(problems("server:\n  advertiseURL: \"not a url\"\n")[0].contains("is not a URL"));
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
fn credentials_are_checked_without_reading_secrets() {
    let creds = |body: &str| app(&format!("    credentials:\n{body}"));
    assert_eq!(
        problems(&creds(
            "      username: bot\n      passwordEnv: P\n      passwordFile: /p\n"
        )),
        ["tether.yaml:8: apps[0].source.credentials: set passwordEnv or passwordFile, not both"]
    );
    assert_eq!(
        problems(&creds("      tokenEnv: T\n      tokenFile: /t\n")),
        ["tether.yaml:7: apps[0].source.credentials: set tokenEnv or tokenFile, not both"]
    );
    assert_eq!(
        problems(&creds("      passwordFile: /p\n")),
        ["tether.yaml:6: apps[0].source.credentials: a password needs a username"]
    );
    assert_eq!(
        problems(&creds("      sshKeyFile: /k\n")),
        [
            "tether.yaml:6: apps[0].source.credentials: sshKeyFile needs knownHostsFile (the server's host key is always checked)"
        ]
    );
    assert_eq!(
        problems(&creds("      knownHostsFile: /kh\n")),
        ["tether.yaml:6: apps[0].source.credentials: knownHostsFile is only used with sshKeyFile"]
    );
    assert_eq!(
        problems(&creds("      username: bot\n")),
        [
            "tether.yaml:6: apps[0].source.credentials: a username alone authenticates nothing: add a password, a token or sshKeyFile"
        ]
    );
    assert_eq!(
        problems(&creds("      tokenEnv: ''\n")),
        ["tether.yaml:6: apps[0].source.credentials.tokenEnv: must not be empty"]
    );
    // Files that do not exist yet are fine: they may be mounted later.
    let c = parse(&creds(
        "      username: bot\n      passwordFile: /nonexistent/p\n",
    ));
    assert_eq!(
        c.apps[0].source().auth,
        Auth::Basic {
            username: "bot".into(),
            password: SecretRef::File("/nonexistent/p".into())
        }
    );
}

#[test]
fn credentials_follow_the_protocol_of_the_url() {
    let creds = Credentials {
        username: Some("bot".into()),
        password: Some(SecretRef::Env("P".into())),
        token: Some(SecretRef::Env("T".into())),
        ssh_key_file: Some("/k".into()),
        known_hosts_file: Some("/kh".into()),
        secret_ref: None,
    };
    let ssh = Auth::SshKey {
        private_key: "/k".into(),
        known_hosts: "/kh".into(),
        passphrase: None,
        username: Some("bot".into()),
    };
    assert_eq!(creds.auth("git@github.com:org/repo.git"), ssh);
    assert_eq!(creds.auth("ssh://git@h/r"), ssh);
    let token = Auth::Token {
        token: SecretRef::Env("T".into()),
        username: Some("bot".into()),
    };
    assert_eq!(creds.auth("https://h/r"), token);
    let basic = Credentials {
        token: None,
        ..creds.clone()
    };
    assert_eq!(
        basic.auth("https://h/r"),
        Auth::Basic {
            username: "bot".into(),
            password: SecretRef::Env("P".into())
        }
    );
    // With nothing else, the key is offered whatever the URL says.
    let key_only = Credentials {
        token: None,
        password: None,
        ..creds
    };
    assert_eq!(key_only.auth("https://h/r"), ssh);
    assert_eq!(Credentials::default().auth("https://h/r"), Auth::None);
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
fn webhook_secrets_are_exactly_one_of_file_or_env() {
    let text = "server:\n  webhooks:\n    github: {secretFile: /s, secretEnv: S}\n    gitlab: {}\n    gitea: {secretEnv: ''}\n";
    assert_eq!(
        problems(text),
        [
            "tether.yaml:3: server.webhooks.github: set secretFile or secretEnv, not both",
            "tether.yaml:4: server.webhooks.gitlab: set secretFile or secretEnv",
            "tether.yaml:5: server.webhooks.gitea.secretEnv: must not be empty",
        ]
    );
}

#[test]
fn the_api_token_is_one_of_file_or_env_read_when_asked() {
    assert_eq!(
        problems("server:\n  apiToken: {secretFile: /t, secretEnv: T}\n"),
        ["tether.yaml:2: server.apiToken: set secretFile or secretEnv, not both"]
    );
    assert_eq!(
        problems("server:\n  apiToken: {secretFile: ''}\n"),
        ["tether.yaml:2: server.apiToken.secretFile: must not be empty"]
    );
    assert!(
        parse("server: {}\n")
            .server
            .api_token()
            .expect("none")
            .is_none()
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("token");
    std::fs::write(&file, "t0ken\n").expect("write");
    let c = parse(&format!(
        "server:\n  apiToken: {{secretFile: {}}}\n",
        file.display()
    ));
    let token = c.server.api_token().expect("read").expect("configured");
    assert!(!format!("{token:?}").contains("t0ken"));

    std::fs::write(&file, " \n").expect("write");
    let err = c.server.api_token().expect_err("blank");
    assert_eq!(
        err.to_string(),
        format!("server.apiToken.secretFile: {} is empty", file.display())
    );
    let c = parse("server:\n  apiToken: {secretEnv: TETHER_TEST_SURELY_UNSET_VARIABLE}\n");
    assert_eq!(
        c.server.api_token().expect_err("unset").to_string(),
        "server.apiToken.secretEnv: environment variable TETHER_TEST_SURELY_UNSET_VARIABLE is not set"
    );
}

#[test]
fn webhook_secrets_are_read_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("github");
    std::fs::write(&good, "s3cret\n").expect("write");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").expect("write");

    let c = parse(&format!(
        "server:\n  webhooks:\n    github: {{secretFile: {}}}\n    allowUnsigned: true\n",
        good.display()
    ));
    let wc = c.server.webhook_config().expect("webhook config");
    assert!(wc.allow_unsigned);
    assert_eq!(wc.secrets.len(), 1);
    assert!(wc.secrets.contains_key(&Provider::Github));
    // The secret never prints.
    assert!(!format!("{wc:?}").contains("s3cret"));

    let c = parse(&format!(
        "server:\n  webhooks:\n    bitbucket: {{secretFile: {}}}\n",
        empty.display()
    ));
    let err = c.server.webhook_config().expect_err("empty");
    assert_eq!(
        err.to_string(),
        format!(
            "server.webhooks.bitbucket.secretFile: {} is empty",
            empty.display()
        )
    );

    let missing = dir.path().join("missing");
    let err = WebhookSecretRef(SecretRef::File(missing.clone()))
        .load()
        .expect_err("missing");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "webhook secret: cannot read {}: ",
            missing.display()
        )),
        "{msg}"
    );
    let err = WebhookSecretRef(SecretRef::Env("TETHER_TEST_SURELY_UNSET_VARIABLE".into()))
        .load()
        .expect_err("unset");
    assert_eq!(
        err.to_string(),
        "webhook secret: environment variable TETHER_TEST_SURELY_UNSET_VARIABLE is not set"
    );
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
fn an_inline_secret_is_refused_without_being_printed() {
    let err = syntax(&app(
        "    credentials:\n      username: bot\n      token: hunter2\n",
    ));
    assert!(
        err.starts_with("tether.yaml:7: apps[0].source.credentials.token: unknown field `token`"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let err = syntax(&app("    credentials:\n      tokenEnv: [hunter2]\n"));
    assert!(!err.contains("hunter2"), "{err}");
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

/// Issue #12: the status API triggers syncs and shows drifted values, so without a
/// token it listens on loopback only, unless the file says the network is trusted.
#[test]
fn without_a_token_the_status_api_stays_on_loopback() {
    let c = parse("apps: []\n");
    assert!(c.server.listen.ip().is_loopback(), "{}", c.server.listen);
    assert!(!c.server.insecure_open_api);
    for open in ["0.0.0.0:8080", "[::]:8080", "10.0.0.7:9000"] {
        assert_eq!(
            problems(&format!("apps: []\nserver:\n  listen: \"{open}\"\n")),
            [format!(
                "tether.yaml:3: server.listen: {} is reachable from other hosts and \
                 server.apiToken is not set: the status API could be used by anyone to \
                 trigger syncs and read drifted values; set server.apiToken, listen on \
                 127.0.0.1, or set server.insecureOpenAPI: true on a trusted network",
                open.parse::<std::net::SocketAddr>().expect("an address")
            )],
            "{open}"
        );
    }
    for local in [
        "127.0.0.1:9000",
        "127.1.2.3:80",
        "[::1]:8080",
        "[::ffff:127.0.0.1]:8080",
    ] {
        let c = parse(&format!("server:\n  listen: \"{local}\"\n"));
        assert_eq!(c.server.listen, local.parse().expect("an address"));
    }
    let c = parse("server:\n  listen: 0.0.0.0:8080\n  apiToken: {secretEnv: T}\n");
    assert_eq!(c.server.listen, "0.0.0.0:8080".parse().expect("an address"));
    let c = parse("server:\n  listen: 0.0.0.0:8080\n  insecureOpenAPI: true\n");
    assert!(c.server.insecure_open_api && c.server.api_token.is_none());
    // The camelCase spelling serde would guess is not the key.
    assert_eq!(
        syntax("server:\n  listen: 0.0.0.0:8080\n  insecureOpenApi: true\n"),
        "tether.yaml:3: server.insecureOpenApi: unknown field `insecureOpenApi`, expected one of \
         listen, webhooks, apiToken, insecureOpenAPI, shutdownTimeout, defaultServiceAccount, apps, advertiseURL, peerToken, outbound, oidc"
    );
    // A token block that is itself wrong is the one problem to fix.
    assert_eq!(
        problems("server:\n  listen: 0.0.0.0:8080\n  apiToken: {secretFile: ''}\n"),
        ["tether.yaml:3: server.apiToken.secretFile: must not be empty"]
    );
}

#[test]
fn the_shutdown_budget_defaults_to_25s_and_must_be_positive() {
    assert_eq!(DEFAULT_SHUTDOWN_TIMEOUT, Duration::from_secs(25));
    assert_eq!(
        parse("apps: []\n").server.shutdown_timeout,
        DEFAULT_SHUTDOWN_TIMEOUT
    );
    let c = parse("server:\n  shutdownTimeout: 1m30s\n");
    assert_eq!(c.server.shutdown_timeout, Duration::from_secs(90));
    assert_eq!(
        problems("server:\n  shutdownTimeout: 0s\n"),
        ["tether.yaml:2: server.shutdownTimeout: \"0s\" must be positive"]
    );
    assert_eq!(
        problems("server:\n  shutdownTimeout: soon\n"),
        [
            "tether.yaml:2: server.shutdownTimeout: \"soon\" is not a duration (like 30s, 1m, 1h30m or 500ms)"
        ]
    );
}

/// The workers take channels and the commit-status target as loaded: nothing is left
/// to resolve (or to fail, and be dropped) when an app starts.
#[test]
fn notifications_and_commit_status_are_resolved_when_loaded() {
    let c = parse(
        "apps:\n- name: web\n  source: {repo: \"https://git.example.com/org/apps.git\"}\n  \
         notifications:\n  - {type: webhook, url: \"https://hooks.example.com/t\", minInterval: 0s, events: [syncFailed]}\n  \
         - {type: slack, urlEnv: SLACK_URL}\n  \
         commitStatus: {provider: gitlab, apiUrl: \"https://git.example.com/api/v4/\", tokenEnv: GL_TOKEN}\n",
    );
    let a = &c.apps[0];
    let names: Vec<&str> = a.notifications.iter().map(|ch| ch.name.as_str()).collect();
    assert_eq!(names, ["notifications[0]", "notifications[1]"]);
    assert_eq!(a.notifications[0].min_interval, Duration::ZERO);
    assert_eq!(
        a.notifications[0].events,
        [tether_core::report::notify::EventKind::SyncFailed]
    );
    assert_eq!(
        a.notifications[1].url,
        tether_core::report::notify::UrlSource::Secret(SecretRef::Env("SLACK_URL".into()))
    );
    let target = a.commit_status.as_deref().expect("a commit-status target");
    assert_eq!(target.app, "web");
    assert_eq!(target.api_url, "https://git.example.com/api/v4");
    assert_eq!(target.repository, "org/apps");
    assert_eq!(target.context, "tether/web");
    assert_eq!(target.token, SecretRef::Env("GL_TOKEN".into()));

    assert!(parse(&app("")).apps[0].notifications.is_empty());
    assert!(parse(&app("")).apps[0].commit_status.is_none());
    assert_eq!(
        problems(&app(
            "  notifications:\n  - {type: webhook, url: \"https://h/x\", urlEnv: U}\n  \
             commitStatus: {provider: github, repository: org/apps}\n"
        )),
        [
            "tether.yaml: apps[0]: notifications[0]: needs exactly one of url, urlEnv and urlFile",
            "tether.yaml: apps[0].commitStatus: commitStatus needs exactly one of tokenEnv and tokenFile",
        ]
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

#[test]
fn a_credentials_secret_is_read_from_the_inventory_namespace_unless_named() {
    let c = parse(
        "inventoryNamespace: ops\n\
         apps:\n- name: web\n  source:\n    repo: https://h/r.git\n    credentials:\n      secretRef: {name: git-creds}\n\
         - name: api\n  source:\n    repo: https://h/r.git\n    credentials:\n      secretRef: {name: git-creds, namespace: teams}\n",
    );
    let secret = |name: &str| match c.app(name).expect("app").source().auth {
        Auth::Secret(s) => (s.namespace, s.name),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(secret("web"), ("ops".into(), "git-creds".into()));
    assert_eq!(secret("api"), ("teams".into(), "git-creds".into()));
    // An App's Secret is its own namespace's.
    let mut app = c.app("api").expect("api").clone();
    app.tenant_namespace = Some("t1".into());
    assert!(
        matches!(app.source().auth, Auth::Secret(s) if s.namespace == "t1"),
        "the tenant namespace wins"
    );
}

#[test]
fn a_credentials_secret_is_not_mixed_with_env_or_file_keys() {
    for (key, value) in [
        ("username", "bot"),
        ("passwordEnv", "P"),
        ("tokenFile", "/t"),
        ("sshKeyFile", "/k"),
        ("knownHostsFile", "/kh"),
    ] {
        let found = problems(&format!(
            "apps:\n- name: web\n  source:\n    repo: https://h/r.git\n    credentials:\n      \
             secretRef: {{name: git-creds}}\n      {key}: {value}\n"
        ));
        let joined = found.join("\n");
        assert!(
            joined.contains("apps[0].source.credentials.secretRef")
                && joined.contains(&format!("not together with {key}")),
            "{key}: {joined}"
        );
    }
    let found = problems(
        "apps:\n- name: web\n  source:\n    repo: https://h/r.git\n    credentials:\n      \
         secretRef: {name: Not_A_Name, namespace: \"\"}\n",
    )
    .join("\n");
    for field in [
        "apps[0].source.credentials.secretRef.name",
        "apps[0].source.credentials.secretRef.namespace",
    ] {
        assert!(found.contains(field), "{field} missing from:\n{found}");
    }
    // Only a name and a namespace: a key would say it reads one value.
    assert!(
        syntax(
            "apps:\n- name: web\n  source:\n    repo: https://h/r.git\n    credentials:\n      \
             secretRef: {name: x, key: password}\n"
        )
        .contains("unknown field")
    );
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

#[test]
fn outbound_networks_are_cidrs_or_addresses_and_a_bad_one_is_named() {
    let c =
        parse("server:\n  outbound: {allowedNetworks: [10.0.0.0/8, 127.0.0.1, \"fd00::/8\"]}\n");
    let nets: Vec<String> = c
        .server
        .outbound_allowed
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(nets, ["10.0.0.0/8", "127.0.0.1/32", "fd00::/8"]);
    assert!(parse("server: {}\n").server.outbound_allowed.is_empty());
    assert_eq!(
        problems("server:\n  outbound:\n    allowedNetworks: [10.0.0.0/8, intranet]\n"),
        [
            "tether.yaml:3: server.outbound.allowedNetworks[1]: \"intranet\" is not a network (like 10.0.0.0/8) or an address"
        ]
    );
}
