//! From the configuration as written to the configuration as used: defaults filled in,
//! values checked (every problem reported through [`Checker`]), sync windows compiled,
//! and each app's notification channels and commit-status target resolved once, here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono_tz::Tz;

use super::check::{Checker, dns1123_subdomain, line_of};
use super::credentials::{resolve_credentials, resolve_kube_config};
use super::model::*;
use super::raw::{self, S};
use crate::windows::{SyncWindow, WindowKind, parse_schedule};
use tether_core::report::commit_status::CommitStatusTarget;
use tether_core::report::notify::Channel;
use tether_core::source::{Provider, SecretRef};
use tether_schema::duration::format_duration;
use tether_schema::ownership::{DEFAULT_INVENTORY_NAMESPACE, INVENTORY_PREFIX, MAX_APP_NAME_LEN};

pub(super) fn resolve(
    mut raw: raw::Config,
    generate: &mut super::Generate<'_>,
    check: &mut Checker,
) -> Config {
    let inventory_namespace = match &raw.inventory_namespace {
        Some(ns) => {
            check.label("inventoryNamespace", ns, 63, "");
            ns.value.clone()
        }
        None => DEFAULT_INVENTORY_NAMESPACE.to_string(),
    };
    let concurrency = match &raw.concurrency {
        Some(c) if c.value < 1 => {
            check.report(
                "concurrency",
                line_of(c),
                format!("{} must be at least 1", c.value),
            );
            DEFAULT_APP_CONCURRENCY
        }
        Some(c) => usize::try_from(c.value).unwrap_or(DEFAULT_APP_CONCURRENCY),
        None => DEFAULT_APP_CONCURRENCY,
    };
    let resync_interval = check.duration(
        "resyncInterval",
        raw.resync_interval.as_ref(),
        DEFAULT_RESYNC_INTERVAL,
    );
    let render_timeout = check.duration(
        "renderTimeout",
        raw.render_timeout.as_ref(),
        tether_diff::manifest::DEFAULT_RENDER_TIMEOUT,
    );
    let server = resolve_server(&raw.server, check);
    let leader_election =
        resolve_leader_election(&raw.leader_election, &inventory_namespace, check);
    let shards = resolve_shards(raw.shards.as_ref(), check);
    // Replicas sign their calls to each other (issue #24): without a shared key a
    // replica could only pass on its caller's token, to whatever URL a Lease names.
    if shards > 1 && raw.server.peer_token.is_none() {
        check.report(
            "server.peerToken",
            raw.shards.as_ref().and_then(line_of),
            "required with shards above 1: the replicas sign their calls to each other \
             with it (a Secret the chart generates); set secretFile or secretEnv",
        );
    }
    let sources = resolve_sources(&raw.sources, check);
    let mut apps: Vec<AppConfig> = Vec::with_capacity(raw.apps.len());
    // Who each app is, for the error about two apps of one name.
    let mut named: Vec<String> = Vec::with_capacity(raw.apps.len());
    for (i, app) in raw.apps.iter().enumerate() {
        let path = format!("apps[{i}]");
        let resolved = resolve_entry(app, &path, &inventory_namespace, check);
        if let Some(first) = apps.iter().position(|a| a.name == resolved.name) {
            check.report(
                format!("{path}.name"),
                line_of(&app.name),
                format!("{:?} is also the name of {}", resolved.name, named[first]),
            );
        }
        apps.push(resolved);
        named.push(path);
    }
    let generated = super::app_sets::resolve_app_sets(
        std::mem::take(&mut raw.app_sets),
        &mut super::app_sets::Expansion {
            apps: &mut apps,
            raw: &mut raw.apps,
            named: &mut named,
            inventory_namespace: &inventory_namespace,
            resolve: resolve_entry,
        },
        generate,
        check,
    );
    super::depends::check_file_apps(&apps, &raw.apps, check);
    let health_checks =
        super::health::resolve_health_checks(&raw.health_check_exprs, "healthCheckExprs", check);
    Config {
        server,
        inventory_namespace,
        concurrency,
        resync_interval,
        render_timeout,
        leader_election,
        shards,
        sources,
        apps,
        health_checks,
        generated,
    }
}

/// One entry of `apps` (listed or generated), resolved: its Secrets are in the
/// inventory namespace unless it names another.
fn resolve_entry(
    app: &raw::App,
    path: &str,
    inventory_namespace: &str,
    check: &mut Checker,
) -> AppConfig {
    let mut resolved = resolve_app(app, path, check);
    if let Some(r) = resolved.source.credentials.secret_ref.as_mut() {
        r.namespace
            .get_or_insert_with(|| inventory_namespace.to_string());
    }
    for entry in &mut resolved.source.dependency_credentials {
        (entry.secret_ref.namespace).get_or_insert_with(|| inventory_namespace.to_string());
    }
    if let Some(super::VerifyConfig {
        keys: super::VerifyKeys::Secret { namespace, .. },
        ..
    }) = resolved.source.verify.as_mut()
    {
        namespace.get_or_insert_with(|| inventory_namespace.to_string());
    }
    resolved
}

/// `sources`: a positive minimum interval, budgets of at least 1.
fn resolve_sources(raw: &raw::Sources, check: &mut Checker) -> SourcesConfig {
    let defaults = SourcesConfig::default();
    let mut count = |key: &str, value: &Option<S<i64>>, default: u64| match value {
        None => default,
        Some(v) => match u64::try_from(v.value) {
            Ok(n) if n >= 1 => n,
            _ => {
                check.report(
                    format!("sources.budget.{key}"),
                    line_of(v),
                    format!("{} must be at least 1", v.value),
                );
                default
            }
        },
    };
    let budget = tether_core::source::RevisionBudget {
        files: count("files", &raw.budget.files, defaults.budget.files),
        bytes: count("bytes", &raw.budget.bytes, defaults.budget.bytes),
        objects: count("objects", &raw.budget.objects, defaults.budget.objects),
    };
    SourcesConfig {
        min_interval: check.duration(
            "sources.minInterval",
            raw.min_interval.as_ref(),
            defaults.min_interval,
        ),
        budget,
    }
}

/// `shards`: 1 to [`MAX_SHARDS`]. More than one needs no `leaderElection.enabled`:
/// sharding is an election per shard, with the namespace and timings given there.
fn resolve_shards(raw: Option<&S<i64>>, check: &mut Checker) -> u32 {
    let Some(raw) = raw else {
        return DEFAULT_SHARDS;
    };
    match u32::try_from(raw.value) {
        Ok(n) if (1..=MAX_SHARDS).contains(&n) => n,
        _ => {
            check.report(
                "shards",
                line_of(raw),
                format!("{} must be between 1 and {MAX_SHARDS}", raw.value),
            );
            DEFAULT_SHARDS
        }
    }
}

fn resolve_server(raw: &raw::Server, check: &mut Checker) -> ServerConfig {
    let listen = resolve_listen(raw, check);
    let w = &raw.webhooks;
    let mut webhook = |provider: Provider, s| {
        resolve_secret(format!("server.webhooks.{provider}"), s, check).map(WebhookSecretRef)
    };
    let webhooks = WebhooksConfig {
        github: webhook(Provider::Github, &w.github),
        gitlab: webhook(Provider::Gitlab, &w.gitlab),
        gitea: webhook(Provider::Gitea, &w.gitea),
        bitbucket: webhook(Provider::Bitbucket, &w.bitbucket),
        azuredevops: webhook(Provider::AzureDevops, &w.azuredevops),
        generic: webhook(Provider::Generic, &w.generic),
        allow_unsigned: w.allow_unsigned,
    };
    let api_token = resolve_secret("server.apiToken".into(), &raw.api_token, check);
    let peer_token = resolve_secret("server.peerToken".into(), &raw.peer_token, check);
    let oidc = raw.oidc.as_ref().map(|oidc| {
        let secrets = oidc
            .value
            .secrets()
            .map(|(path, s)| resolve_secret(path.into(), s, check));
        super::oidc::resolve(oidc, secrets, raw.api_token.is_some(), check)
    });
    let shutdown_timeout = check.duration(
        "server.shutdownTimeout",
        raw.shutdown_timeout.as_ref(),
        DEFAULT_SHUTDOWN_TIMEOUT,
    );
    let default_service_account = raw.default_service_account.as_ref().map(|name| {
        if let Err(message) = dns1123_subdomain(&name.value) {
            check.report("server.defaultServiceAccount", line_of(name), message);
        }
        name.value.clone()
    });
    for (i, ns) in raw.apps.namespaces.iter().enumerate() {
        check.label(&format!("server.apps.namespaces[{i}]"), ns, 63, "");
    }
    let apps = AppsWatchConfig {
        enabled: raw.apps.enabled.unwrap_or(true),
        namespaces: raw
            .apps
            .namespaces
            .iter()
            .map(|n| n.value.clone())
            .collect(),
    };
    let advertise_url = raw.advertise_url.as_ref().and_then(|u| {
        let checked = advertised(&u.value);
        if let Err(message) = &checked {
            check.report("server.advertiseURL", line_of(u), message.clone());
        }
        checked.ok()
    });
    ServerConfig {
        oidc,
        listen,
        webhooks,
        api_token,
        peer_token,
        outbound_allowed: resolve_outbound(raw, check),
        insecure_open_api: raw.insecure_open_api,
        shutdown_timeout,
        default_service_account,
        apps,
        advertise_url,
    }
}

/// `server.listen`: an address and port. Issue #12: the status API triggers syncs
/// and shows drifted values, so without a token it stays on loopback unless the file
/// says the network is trusted. An apiToken block that is itself wrong is reported
/// already; no second problem.
fn resolve_listen(raw: &raw::Server, check: &mut Checker) -> SocketAddr {
    let listen = match &raw.listen {
        Some(l) => match SocketAddr::from_str(l.value.trim()) {
            Ok(addr) => addr,
            Err(_) => {
                check.report(
                    "server.listen",
                    line_of(l),
                    format!(
                        "{:?} is not an address and port (like 0.0.0.0:8080 or [::]:8080)",
                        l.value
                    ),
                );
                DEFAULT_LISTEN
            }
        },
        None => DEFAULT_LISTEN,
    };
    if raw.api_token.is_none() && !is_loopback(&listen) && !raw.insecure_open_api {
        check.report(
            "server.listen",
            raw.listen.as_ref().and_then(line_of),
            format!(
                "{listen} is reachable from other hosts and server.apiToken is not set: the \
                 status API could be used by anyone to trigger syncs and read drifted values; \
                 set server.apiToken, listen on 127.0.0.1, or set server.insecureOpenAPI: true \
                 on a trusted network"
            ),
        );
    }
    listen
}

/// A secret the server reads from a file or an environment variable (one of them).
fn resolve_secret(
    path: String,
    s: &Option<S<raw::SecretFrom>>,
    check: &mut Checker,
) -> Option<SecretRef> {
    let s = s.as_ref()?;
    let line = line_of(s);
    match (&s.value.secret_file, &s.value.secret_env) {
        (Some(file), None) => check
            .non_empty(&format!("{path}.secretFile"), file)
            .then(|| SecretRef::File(PathBuf::from(&file.value))),
        (None, Some(env)) => check
            .non_empty(&format!("{path}.secretEnv"), env)
            .then(|| SecretRef::Env(env.value.clone())),
        (Some(_), Some(_)) => {
            check.report(path, line, "set secretFile or secretEnv, not both");
            None
        }
        (None, None) => {
            check.report(path, line, "set secretFile or secretEnv");
            None
        }
    }
}

/// `server.outbound.allowedNetworks`: the networks outbound calls may reach.
fn resolve_outbound(raw: &raw::Server, check: &mut Checker) -> Vec<ipnet::IpNet> {
    raw.outbound
        .allowed_networks
        .iter()
        .enumerate()
        .filter_map(|(i, net)| {
            let parsed = tether_core::report::outbound::parse_network(&net.value);
            if let Err(message) = &parsed {
                let key = format!("server.outbound.allowedNetworks[{i}]");
                check.report(key, line_of(net), message.clone());
            }
            parsed.ok()
        })
        .collect()
}

/// `server.advertiseURL`: an `http` or `https` URL with a host and no path, query or
/// credentials (peers append `/api/v1/...`), kept without a trailing slash.
fn advertised(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text.trim()).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    if !plain {
        return Err(format!(
            "{text:?} must be http:// or https:// with a host and port, and nothing after \
             them (like http://10.0.0.7:8080)"
        ));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// Whether only this host can connect (`127.0.0.0/8`, `::1`, and `::ffff:127.0.0.1`).
fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

fn resolve_leader_election(
    raw: &raw::LeaderElection,
    inventory_namespace: &str,
    check: &mut Checker,
) -> LeaderElectionConfig {
    let namespace = match &raw.namespace {
        Some(ns) => {
            check.label("leaderElection.namespace", ns, 63, "");
            ns.value.clone()
        }
        None => inventory_namespace.to_string(),
    };
    let lease_name = match &raw.lease_name {
        Some(n) => {
            if let Err(message) = dns1123_subdomain(&n.value) {
                check.report("leaderElection.leaseName", line_of(n), message);
            }
            n.value.clone()
        }
        None => DEFAULT_LEASE_NAME.to_string(),
    };
    let before = check.problems.len();
    let lease_duration = check.duration(
        "leaderElection.leaseDuration",
        raw.lease_duration.as_ref(),
        DEFAULT_LEASE_DURATION,
    );
    let renew_deadline = check.duration(
        "leaderElection.renewDeadline",
        raw.renew_deadline.as_ref(),
        DEFAULT_RENEW_DEADLINE,
    );
    let retry_period = check.duration(
        "leaderElection.retryPeriod",
        raw.retry_period.as_ref(),
        DEFAULT_RETRY_PERIOD,
    );
    // Ordering only makes sense between durations that parsed.
    if check.problems.len() == before {
        let shown = |d: Duration, set: bool| {
            let d = format_duration(d);
            if set { d } else { format!("{d}, the default") }
        };
        if renew_deadline >= lease_duration {
            check.report(
                "leaderElection.renewDeadline",
                raw.renew_deadline.as_ref().and_then(line_of),
                format!(
                    "renewDeadline ({}) must be shorter than leaseDuration ({})",
                    shown(renew_deadline, raw.renew_deadline.is_some()),
                    shown(lease_duration, raw.lease_duration.is_some()),
                ),
            );
        }
        if retry_period >= renew_deadline {
            check.report(
                "leaderElection.retryPeriod",
                raw.retry_period.as_ref().and_then(line_of),
                format!(
                    "retryPeriod ({}) must be shorter than renewDeadline ({})",
                    shown(retry_period, raw.retry_period.is_some()),
                    shown(renew_deadline, raw.renew_deadline.is_some()),
                ),
            );
        }
    }
    LeaderElectionConfig {
        enabled: raw.enabled,
        namespace,
        lease_name,
        lease_duration,
        renew_deadline,
        retry_period,
    }
}

fn resolve_app(raw: &raw::App, path: &str, check: &mut Checker) -> AppConfig {
    check.label(
        &format!("{path}.name"),
        &raw.name,
        MAX_APP_NAME_LEN,
        &format!(" ({INVENTORY_PREFIX}<name> must fit in 63)"),
    );
    let source = resolve_source(&raw.source, path, check);
    let service_account_name = raw.service_account_name.as_ref().map(|name| {
        if let Err(message) = dns1123_subdomain(&name.value) {
            check.report(format!("{path}.serviceAccountName"), line_of(name), message);
        }
        name.value.clone()
    });
    let ignore_differences = raw
        .ignore_differences
        .iter()
        .enumerate()
        .map(|(i, d)| resolve_ignore(d, &format!("{path}.ignoreDifferences[{i}]"), check))
        .collect();
    let sync_windows = raw
        .sync_windows
        .iter()
        .enumerate()
        .filter_map(|(i, w)| resolve_window(w, &format!("{path}.syncWindows[{i}]"), check))
        .collect();
    let (notifications, commit_status) = resolve_reporting(raw, &source, path, check);
    let (depends_on, ready_exprs) =
        super::depends::resolve_references(&raw.depends_on, path, check);
    AppConfig {
        name: raw.name.value.clone(),
        destination: resolve_destination(&raw.destination, path, check),
        sync: resolve_sync_policy(&raw.sync, path, check),
        source,
        ignore_differences,
        sync_windows,
        suspend: raw.suspend,
        notifications,
        commit_status,
        service_account_name,
        tenant_namespace: None,
        depends_on,
        ready_exprs,
        post_build: raw.post_build.as_ref().map(|p| {
            super::post_build::resolve_post_build(&p.value, &format!("{path}.postBuild"), check)
        }),
        decryption: raw.decryption.as_ref().map(|d| {
            super::decryption::resolve_decryption(&d.value, &format!("{path}.decryption"), check)
        }),
        health_checks: super::health::resolve_health_checks(
            &raw.health_check_exprs,
            &format!("{path}.healthCheckExprs"),
            check,
        ),
    }
}

/// An app's `source`: where its manifests come from and how they are read.
fn resolve_source(src: &raw::Source, path: &str, check: &mut Checker) -> SourceConfig {
    let artifact = super::artifact::resolve_artifact(src, path, check);
    SourceConfig {
        repo: super::artifact::source_repo(src, path, check),
        reference: match &artifact {
            Some(tag) => tag.clone(),
            None => src
                .reference
                .clone()
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_REF.to_string()),
        },
        path: src
            .path
            .clone()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_PATH.to_string()),
        interval: check.duration(
            &format!("{path}.source.interval"),
            src.interval.as_ref(),
            DEFAULT_SOURCE_INTERVAL,
        ),
        stale_after: check.duration(
            &format!("{path}.source.staleAfter"),
            src.stale_after.as_ref(),
            DEFAULT_SOURCE_STALE_AFTER,
        ),
        credentials: match &src.credentials {
            Some(c) => resolve_credentials(c, &format!("{path}.source.credentials"), check),
            None => Credentials::default(),
        },
        helm: match &src.helm {
            Some(h) => resolve_helm(&h.value, &format!("{path}.source.helm"), check),
            None => HelmConfig::default(),
        },
        chart: super::chart::resolve_chart(src, path, check),
        artifact: artifact.is_some(),
        verify: src
            .verify
            .as_ref()
            .map(|v| super::verify::resolve_verify(v, &format!("{path}.source.verify"), check)),
        dependency_credentials: super::dependency_credentials::resolve(src, path, check),
    }
}

/// An app's `destination`: the namespace its objects default to and the cluster
/// (a context or a kubeconfig, not both).
fn resolve_destination(
    raw: &raw::Destination,
    path: &str,
    check: &mut Checker,
) -> DestinationConfig {
    if raw.context.is_some() && raw.kube_config.is_some() {
        check.report(
            format!("{path}.destination"),
            raw.kube_config.as_ref().and_then(line_of),
            "set context or kubeConfig, not both",
        );
    }
    DestinationConfig {
        namespace: match &raw.namespace {
            Some(ns) => {
                check.label(&format!("{path}.destination.namespace"), ns, 63, "");
                ns.value.clone()
            }
            None => tether_diff::manifest::DEFAULT_NAMESPACE.to_string(),
        },
        context: raw.context.clone(),
        kube_config: raw.kube_config.as_ref().map(|k| {
            resolve_kube_config(&k.value, &format!("{path}.destination.kubeConfig"), check)
        }),
    }
}

/// An app's `sync` policy, with tether's defaults (self-heal and force on).
fn resolve_sync_policy(s: &raw::Sync, path: &str, check: &mut Checker) -> SyncPolicy {
    SyncPolicy {
        automated: s.automated,
        prune: s.prune,
        self_heal: s.self_heal.unwrap_or(true),
        force: s.force.unwrap_or(true),
        allow_mass_prune: s.allow_mass_prune,
        hook_timeout: check.duration(
            &format!("{path}.sync.hookTimeout"),
            s.hook_timeout.as_ref(),
            tether_core::sync::hooks::DEFAULT_HOOK_TIMEOUT,
        ),
    }
}

/// Where an app's outcomes are told: its notification channels and its commit
/// status target. Resolved here, once: the worker takes the result and has nothing
/// left to fail.
fn resolve_reporting(
    raw: &raw::App,
    source: &SourceConfig,
    path: &str,
    check: &mut Checker,
) -> (Vec<Arc<Channel>>, Option<Arc<CommitStatusTarget>>) {
    let notifications = match tether_core::report::notify::resolve_channels(&raw.notifications) {
        Ok(channels) => channels,
        Err(err) => {
            check.report(path.to_string(), None, err.to_string());
            Vec::new()
        }
    };
    if (source.chart.is_some() || source.artifact) && raw.commit_status.is_some() {
        check.report(
            format!("{path}.commitStatus"),
            None,
            "commit statuses are posted on Git commits; a chart or OCI artifact source has none",
        );
    }
    let commit_status = raw.commit_status.as_ref().and_then(|status| {
        match status.resolve(&raw.name.value, &source.repo) {
            Ok(target) => Some(Arc::new(target)),
            Err(err) => {
                check.report(format!("{path}.commitStatus"), None, err.to_string());
                None
            }
        }
    });
    (notifications, commit_status)
}

fn resolve_ignore(
    raw: &S<raw::IgnoreDifference>,
    path: &str,
    check: &mut Checker,
) -> IgnoreDifference {
    let d = &raw.value;
    for (i, p) in d.json_pointers.iter().enumerate() {
        if !p.value.starts_with('/') {
            check.report(
                format!("{path}.jsonPointers[{i}]"),
                line_of(p),
                format!(
                    "{:?} is not a JSON pointer to a field (RFC 6901: like /spec/replicas)",
                    p.value
                ),
            );
        }
    }
    if d.json_pointers.is_empty() && d.managed_fields_managers.is_empty() {
        check.report(
            path,
            line_of(raw),
            "ignores nothing: set jsonPointers or managedFieldsManagers",
        );
    }
    IgnoreDifference {
        group: d.group.clone(),
        kind: d.kind.clone(),
        namespace: d.namespace.clone(),
        name: d.name.clone(),
        json_pointers: d.json_pointers.iter().map(|p| p.value.clone()).collect(),
        managed_fields_managers: d.managed_fields_managers.clone(),
    }
}

fn resolve_window(raw: &raw::SyncWindow, path: &str, check: &mut Checker) -> Option<SyncWindow> {
    let kind = match raw.kind.value.as_str() {
        "allow" => Some(WindowKind::Allow),
        "deny" => Some(WindowKind::Deny),
        other => {
            check.report(
                format!("{path}.kind"),
                line_of(&raw.kind),
                format!("{other:?} is not a window kind (allow or deny)"),
            );
            None
        }
    };
    let schedule = match parse_schedule(&raw.schedule.value) {
        Ok(s) => Some(s),
        Err(e) => {
            check.report(
                format!("{path}.schedule"),
                line_of(&raw.schedule),
                e.to_string(),
            );
            None
        }
    };
    let before = check.problems.len();
    let duration = check.duration(
        &format!("{path}.duration"),
        Some(&raw.duration),
        Duration::ZERO,
    );
    let duration_ok = check.problems.len() == before;
    let time_zone = match &raw.time_zone {
        Some(tz) => match Tz::from_str(tz.value.trim()) {
            Ok(tz) => Some(tz),
            Err(_) => {
                check.report(
                    format!("{path}.timeZone"),
                    line_of(tz),
                    format!(
                        "{:?} is not an IANA time zone (like Europe/Berlin or UTC)",
                        tz.value
                    ),
                );
                None
            }
        },
        None => Some(Tz::UTC),
    };
    match (kind, schedule, duration_ok, time_zone) {
        (Some(kind), Some(schedule), true, Some(time_zone)) => Some(SyncWindow {
            kind,
            expression: raw.schedule.value.trim().to_string(),
            schedule,
            duration,
            time_zone,
        }),
        _ => None,
    }
}

/// Helm's own limit on a release name (it becomes part of object names and labels).
const MAX_RELEASE_NAME_LEN: usize = 53;

fn resolve_helm(raw: &raw::Helm, path: &str, check: &mut Checker) -> HelmConfig {
    if let Some(name) = &raw.release_name {
        check.label(
            &format!("{path}.releaseName"),
            name,
            MAX_RELEASE_NAME_LEN,
            " (Helm's limit)",
        );
    }
    let values = raw.values.as_ref().and_then(|v| match &v.value {
        serde_json::Value::Object(_) => Some(v.value.to_string()),
        serde_json::Value::String(text) => Some(text.clone()),
        serde_json::Value::Null => None,
        _ => {
            check.report(
                format!("{path}.values"),
                line_of(v),
                "must be a mapping, or YAML text holding one",
            );
            None
        }
    });
    let value_sources = super::value_sources::resolve_value_sources(
        &raw.value_sources,
        &format!("{path}.valueSources"),
        check,
    );
    super::value_sources::check_ref_files(&raw.value_files, &value_sources, path, check);
    for (i, file) in raw.value_files.iter().enumerate() {
        let f = file.value.trim();
        if tether_diff::manifest::is_ref_file(f) {
            continue; // checked with the value sources
        }
        let climbs = f.split('/').any(|p| p == "..");
        if f.is_empty() || f.starts_with('/') || climbs {
            check.report(
                format!("{path}.valueFiles[{i}]"),
                line_of(file),
                format!(
                    "{:?} must be a path inside the chart's revision",
                    file.value
                ),
            );
        }
    }
    for (i, set) in raw.set.iter().enumerate() {
        if !set.value.contains('=') {
            check.report(
                format!("{path}.set[{i}]"),
                line_of(set),
                format!("{:?} must be key=value", set.value),
            );
        }
    }
    HelmConfig {
        release_name: raw.release_name.as_ref().map(|n| n.value.clone()),
        values,
        value_files: raw
            .value_files
            .iter()
            .map(|f| f.value.trim().to_string())
            .collect(),
        set: raw.set.iter().map(|s| s.value.clone()).collect(),
        values_from: super::values_from::resolve_values_from(
            &raw.values_from,
            &format!("{path}.valuesFrom"),
            check,
        ),
        post_renderers: super::post_render::resolve_post_renderers(
            &raw.post_renderers,
            &format!("{path}.postRenderers"),
            check,
        ),
        value_sources,
    }
}
