//! The configuration of the service around the apps: leader election and shards,
//! the status API's address and token, shutdown, notifications, outbound networks.

use super::*;

#[test]
fn the_lease_namespace_follows_the_inventory_namespace() {
    let c = parse("inventoryNamespace: gitops\n");
    assert_eq!(c.leader_election.namespace, "gitops");
    let c = parse("inventoryNamespace: gitops\nleaderElection: {namespace: leases}\n");
    assert_eq!(c.leader_election.namespace, "leases");
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
