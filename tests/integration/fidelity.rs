//! Fidelity: the exchanges recorded from a real kube-apiserver 1.36 (the shared
//! fixtures) replayed against a fresh sandbox in the order they were recorded, and the
//! answers compared: status codes, `Status` reasons, messages and causes, objects field
//! by field (but for the values that differ on every run), watch event sequences and
//! discovery documents. Where the sandbox differs on purpose, [`EXEMPTIONS`] says so,
//! one field path at a time, with the reason.
//!
//! The `protobuf/` exchanges are reasoned from their JSON twins, not recorded (their
//! README line and `reason.py`): their bodies are `{"base64", "decoded"}`, the bytes
//! sent as they are and the sandbox's protobuf answer compared in its decoded form.
//! The `conversion/` exchanges are reasoned too: a recorded object read in another
//! version kube-apiserver serves it in.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use reqwest::Method;
use serde_json::{Value, json};
use tether_sandbox::protobuf;

use crate::support::{Answer, TestSandbox, read};

mod discovery;

/// Where the recorded exchanges live, in the repository.
const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/kube-apiserver-v1.36"
);

/// The recorder's HTTP client; kube-apiserver derives the field manager of a non-apply
/// write from the user agent, so the replay sends the same one.
const RECORDER_USER_AGENT: &str = "Python-urllib/3.12";

/// Values that differ on every run (the fixtures' README): compared for presence only.
/// `lastTransitionTime` is a time like `time`.
const VOLATILE: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "time",
    "deletionTimestamp",
    "lastTransitionTime",
    "clusterIP",
    "clusterIPs",
    "nodePort",
];

/// Stateful exchanges in the order they were recorded: by the resourceVersions of their
/// answers, errors and reads placed where the state they show existed. Some depend on
/// earlier ones (the ssa/ folder works on the applied Deployment; errors/ and delete/
/// on the ConfigMap that patch/ changed), so the order is part of the test;
/// `replay_order_follows_the_recorded_resource_versions` checks it.
const ORDER: &[&str] = &[
    "apply/namespace-fixtures",
    "apply/configmap-app-config",
    "apply/secret-app-secret",
    "apply/serviceaccount-app",
    "apply/service-web",
    "apply/service-web-np",
    "apply/service-web-lb",
    "apply/deployment-web",
    "protobuf/get-deployment",
    "apply/statefulset-db",
    "status/deployment-status-subresource-get",
    "protobuf/get-statefulset-status",
    "apply/daemonset-agent",
    "apply/job-migrate",
    "apply/cronjob-backup",
    "apply/ingress-web",
    "apply/networkpolicy-deny-all",
    "apply/role-reader",
    "apply/rolebinding-reader",
    "apply/clusterrole-fixtures-viewer",
    "apply/clusterrolebinding-fixtures-viewer",
    "apply/persistentvolumeclaim-data",
    "apply/poddisruptionbudget-web",
    "apply/horizontalpodautoscaler-web",
    "conversion/get-hpa-v1",
    "protobuf/get-hpa-v1",
    "apply/lease-leader",
    "apply/customresourcedefinition-widgets.example.com",
    "apply/widget-w1",
    "apply/pod-debug",
    "ssa/conflict-without-force",
    "ssa/other-manager-forced",
    "ssa/other-manager-sets-replicas",
    "ssa/tether-reapplies",
    "ssa/dry-run",
    "ssa/get-after-dry-run",
    "ssa/field-removed-when-manager-omits-it",
    "generation/label-merge-patch",
    "generation/spec-merge-patch",
    "patch/json-patch",
    "patch/strategic-merge-patch",
    "patch/unsupported-content-type",
    "list/configmaps",
    "protobuf/list-configmaps",
    "list/label-selector",
    "errors/not-found",
    "protobuf/not-found",
    "errors/namespace-not-found",
    "errors/already-exists",
    "protobuf/already-exists",
    "errors/invalid-missing-name",
    "protobuf/invalid-missing-name",
    "errors/invalid-field-value",
    "errors/kind-mismatch",
    "errors/update-stale-resourceversion",
    "errors/unauthorized",
    "errors/unknown-resource",
    "errors/method-not-allowed",
    "delete/create-with-finalizer",
    "delete/delete-held-by-finalizer",
    "delete/remove-finalizer",
    "delete/get-after-finalizer-removed",
    "delete/delete-plain",
    "delete/delete-with-propagation",
    "watch/create-modify-delete",
    "watch/from-resourceversion-1",
    // Protobuf twins that write come last, where no recorded exchange sees their objects.
    "protobuf/create-configmap",
    "protobuf/watch-create-modify-delete",
    "protobuf/custom-resource-get-not-acceptable",
    "protobuf/custom-resource-create-not-acceptable",
];

/// Discovery documents: stateless, compared in a sandbox of their own.
const DISCOVERY: &[&str] = &[
    "discovery/version",
    "discovery/api",
    "discovery/apis",
    "discovery/api_v1",
    "discovery/apis_apps_v1",
    "discovery/apis_batch_v1",
    "discovery/apis_autoscaling_v2",
    "discovery/apis_networking.k8s.io_v1",
    "discovery/apis_policy_v1",
    "discovery/apis_rbac.authorization.k8s.io_v1",
    "discovery/apis_coordination.k8s.io_v1",
    "discovery/apis_apiextensions.k8s.io_v1",
    "discovery/aggregated-api",
    "discovery/aggregated-apis",
];

/// Where the sandbox differs on purpose: (fixture, field path, reason). A difference
/// is exempt only at that path or below it.
const EXEMPTIONS: &[(&str, &str, &str)] = &[
    (
        "discovery/api",
        "/body/serverAddressByClientCIDRs/0/serverAddress",
        "the address the server listens on: the recording's port, the sandbox's own",
    ),
    (
        "discovery/apis",
        "/body/groups",
        "the sandbox lists only the group versions it serves (checked to be a subset of \
         the recorded list by discovery_matches_the_recorded_documents)",
    ),
    (
        "discovery/aggregated-apis",
        "/body/items",
        "the sandbox lists only the group versions it serves (each checked to equal the \
         recorded one by aggregated_discovery_serves_the_recorded_group_versions)",
    ),
    (
        "apply/pod-debug",
        "/status",
        "the recording server ran without kube-controller-manager, so namespace fixtures \
         had no `default` ServiceAccount and the Pod was refused (403); every real \
         cluster has it, and the sandbox admits the Pod as such a cluster does",
    ),
    (
        "apply/pod-debug",
        "/body",
        "see /status: the sandbox answers with the Pod it created, not the 403 Status",
    ),
];

fn fixtures_dir() -> PathBuf {
    let dir = PathBuf::from(FIXTURES);
    assert!(
        dir.join("README.md").is_file(),
        "the recorded fixtures are missing at {}",
        dir.display()
    );
    dir
}

fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Replays one recorded request, optionally with another path.
async fn replay(sandbox: &TestSandbox, name: &str, recorded: &Value, path: &str) -> Answer {
    let request = &recorded["request"];
    let method = Method::from_bytes(request["method"].as_str().unwrap_or("GET").as_bytes())
        .expect("a method");
    let url = format!("{}{path}", sandbox.url());
    let mut builder = sandbox
        .http
        .request(method, url)
        .header(reqwest::header::USER_AGENT, RECORDER_USER_AGENT);
    // The recorder sent its request without credentials for this one.
    if name != "errors/unauthorized" {
        builder = builder.bearer_auth(sandbox.sandbox.token());
    }
    if let Some(accept) = request["accept"].as_str() {
        builder = builder.header(reqwest::header::ACCEPT, accept);
    }
    if let Some(content_type) = request["contentType"].as_str() {
        builder = builder.header(reqwest::header::CONTENT_TYPE, content_type);
    }
    match &request["body"] {
        Value::Null => {}
        Value::String(text) => builder = builder.body(text.clone()),
        body if body.get("base64").is_some() => builder = builder.body(protobuf_bytes(body)),
        body => builder = builder.body(body.to_string()),
    }
    read(builder).await
}

/// A watch's recorded events as protobuf carries them.
fn protobuf_events(events: &Value) -> Vec<Value> {
    events
        .as_array()
        .expect("recorded events")
        .iter()
        .map(|e| json!({"type": e["type"], "object": protobuf_form(&e["object"], true)}))
        .collect()
}

/// The bytes of a reasoned protobuf body (`{"base64", "decoded"}`).
fn protobuf_bytes(body: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(body["base64"].as_str().unwrap_or_default())
        .expect("the fixture's base64")
}

/// What protobuf can carry of a recorded JSON answer: no `null` members (protobuf has
/// no null; Go reads both alike), and no apiVersion and kind in embedded objects (a
/// StatefulSet's volumeClaimTemplates: protobuf messages carry no type meta).
fn protobuf_form(value: &Value, top: bool) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| {
                    !v.is_null()
                        && (top
                            || !map.contains_key("metadata")
                            || (k.as_str() != "apiVersion" && k.as_str() != "kind"))
                })
                .map(|(k, v)| (k.clone(), protobuf_form(v, false)))
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| protobuf_form(v, false)).collect())
        }
        other => other.clone(),
    }
}

/// Replaces volatile values by a marker, keeping whether they are there: the
/// [`VOLATILE`] fields, and any string equal to a uid in the document (a Job's
/// `controller-uid` labels and selector carry its uid).
fn normalize(value: &mut Value) {
    let mut uids = Vec::new();
    collect_uids(value, &mut uids);
    normalize_fields(value, &uids);
}

/// kube-apiserver orders managedFields by operation, `time`, then manager; `time` is
/// volatile (a replay runs within a second, the recording took several), so entries
/// are compared in the order of their stable keys only.
fn sort_managed_fields(entries: &mut Value) {
    if let Some(entries) = entries.as_array_mut() {
        let key = |e: &Value| {
            ["operation", "manager", "apiVersion", "subresource"]
                .map(|k| e[k].as_str().unwrap_or_default().to_string())
        };
        entries.sort_by_key(key);
    }
}

fn collect_uids(value: &Value, uids: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("uid", Value::String(uid)) if !uid.is_empty() => uids.push(uid.clone()),
                    _ => collect_uids(child, uids),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_uids(i, uids)),
        _ => {}
    }
}

fn normalize_fields(value: &mut Value, uids: &[String]) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if VOLATILE.contains(&key.as_str()) && !child.is_null() {
                    *child = json!("<volatile>");
                } else if key == "managedFields" {
                    sort_managed_fields(child);
                    normalize_fields(child, uids);
                } else {
                    normalize_fields(child, uids);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| normalize_fields(i, uids)),
        Value::String(text) if uids.contains(text) => *value = json!("<volatile>"),
        _ => {}
    }
}

/// Every difference between two values, by JSON pointer.
fn differences(path: &str, expected: &Value, actual: &Value, out: &mut Vec<(String, String)>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                let child = format!("{path}/{key}");
                match a.get(key) {
                    Some(other) => differences(&child, value, other, out),
                    None => out.push((child, format!("expected {value}, missing"))),
                }
            }
            for (key, value) in a {
                if !e.contains_key(key) {
                    out.push((format!("{path}/{key}"), format!("unexpected {value}")));
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            for (i, (x, y)) in e.iter().zip(a).enumerate() {
                differences(&format!("{path}/{i}"), x, y, out);
            }
            if e.len() != a.len() {
                out.push((
                    path.to_string(),
                    format!("expected {} items, got {}", e.len(), a.len()),
                ));
            }
        }
        _ if expected != actual => out.push((
            path.to_string(),
            format!("expected {expected}, got {actual}"),
        )),
        _ => {}
    }
}

/// The exemption (its field path) that covers a difference at `path`, if any.
fn exempt(name: &str, path: &str) -> Option<&'static str> {
    EXEMPTIONS
        .iter()
        .find(|(fixture, prefix, _)| {
            *fixture == name
                && (path == *prefix
                    || path
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('/')))
        })
        .map(|(_, prefix, _)| *prefix)
}

/// The outcome of one exchange.
#[derive(Default)]
struct Tally {
    matched: Vec<String>,
    exempted: Vec<String>,
    failures: Vec<String>,
    /// Exemptions that covered a difference, as (fixture, field path).
    used: Vec<(String, &'static str)>,
}

impl Tally {
    /// Compares status and body (as `{"status", "body"}` so that exemptions can name
    /// either) and files the outcome.
    fn compare(&mut self, name: &str, expected_status: &Value, expected: &Value, answer: &Answer) {
        let actual_body = if expected.is_string() {
            Value::String(answer.text())
        } else {
            serde_json::from_slice(&answer.body).unwrap_or_else(|_| Value::String(answer.text()))
        };
        self.compare_values(
            name,
            json!({"status": expected_status, "body": expected}),
            json!({"status": answer.status.as_u16(), "body": actual_body}),
        );
    }

    fn compare_values(&mut self, name: &str, mut expected: Value, mut actual: Value) {
        normalize(&mut expected);
        normalize(&mut actual);
        let mut found = Vec::new();
        differences("", &expected, &actual, &mut found);
        let mut exemptions = 0;
        let mut unexplained = Vec::new();
        for (path, what) in found {
            match exempt(name, &path) {
                Some(prefix) => {
                    exemptions += 1;
                    self.used.push((name.to_string(), prefix));
                }
                None => unexplained.push(format!("  {path}: {what}")),
            }
        }
        if !unexplained.is_empty() {
            self.failures
                .push(format!("{name}:\n{}", unexplained.join("\n")));
        } else if exemptions > 0 {
            self.exempted.push(name.to_string());
        } else {
            self.matched.push(name.to_string());
        }
    }

    fn finish(self, what: &str) {
        let total = self.matched.len() + self.exempted.len() + self.failures.len();
        println!(
            "fidelity ({what}): {} of {total} exchanges matched exactly, {} matched with \
             documented exemptions, {} differ",
            self.matched.len(),
            self.exempted.len(),
            self.failures.len()
        );
        for name in &self.exempted {
            let reasons: Vec<_> = EXEMPTIONS
                .iter()
                .filter(|(fixture, _, _)| fixture == name)
                .map(|(_, path, reason)| format!("{path}: {reason}"))
                .collect();
            println!("  exempt {name}: {}", reasons.join("; "));
        }
        assert!(
            self.failures.is_empty(),
            "{} of {total} exchanges differ from the real kube-apiserver:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
        // An exemption no longer needed hides nothing and must go.
        let compared: Vec<&String> = self.matched.iter().chain(&self.exempted).collect();
        for (fixture, path, _) in EXEMPTIONS {
            if compared.iter().any(|name| name == fixture) {
                assert!(
                    self.used.iter().any(|(f, p)| f == fixture && p == path),
                    "the exemption of {fixture} at {path} is no longer needed"
                );
            }
        }
    }
}

/// Substitutes a query parameter's value in a recorded path.
fn with_param(path: &str, key: &str, value: &str) -> String {
    let Some((base, query)) = path.split_once('?') else {
        return path.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if k == key => format!("{k}={value}"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

/// Reads a whole watch (it ends at its `timeoutSeconds`) as a list of events.
async fn watch_events(sandbox: &TestSandbox, path: &str) -> Vec<Value> {
    sandbox
        .watch_until(path, Duration::from_secs(10), |_| false)
        .await
}

/// Consecutive BOOKMARKs folded into one: kube-apiserver sends a bookmark when the
/// watch cache's progress notification fires and another as the watch times out; the
/// sandbox sends only the one at the timeout. Clients keep the last resourceVersion
/// either way. (A narrow exemption of the watch comparison, by event type.)
fn fold_bookmarks(events: &[Value]) -> Vec<Value> {
    let mut folded: Vec<Value> = Vec::new();
    for event in events {
        let repeated = event["type"] == "BOOKMARK"
            && folded.last().is_some_and(|last| last["type"] == "BOOKMARK");
        if repeated {
            if let Some(last) = folded.last_mut() {
                *last = event.clone();
            }
        } else {
            folded.push(event.clone());
        }
    }
    folded
}

/// The writes the recorder made while `watch/create-modify-delete` ran (recorded only
/// in the events they caused): create `watched` with a=1, change a to 2, delete it.
async fn watched_configmap_writes(sandbox: &TestSandbox) {
    eventually_watching(sandbox).await;
    let base = "/api/v1/namespaces/fixtures/configmaps";
    let send = |method: Method, path: String, content_type: &'static str, body: Option<Value>| {
        let mut builder = sandbox
            .request(method, &path)
            .header(reqwest::header::USER_AGENT, RECORDER_USER_AGENT)
            .header(reqwest::header::CONTENT_TYPE, content_type);
        if let Some(body) = body {
            builder = builder.body(body.to_string());
        }
        read(builder)
    };
    let created = send(
        Method::POST,
        base.to_string(),
        "application/json",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched"}, "data": {"a": "1"}})),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let changed = send(
        Method::PATCH,
        format!("{base}/watched"),
        "application/merge-patch+json",
        Some(json!({"data": {"a": "2"}})),
    )
    .await;
    assert_eq!(changed.status, 200, "{}", changed.text());
    let deleted = send(
        Method::DELETE,
        format!("{base}/watched"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
}

async fn eventually_watching(sandbox: &TestSandbox) {
    crate::support::eventually("the watch to start", || async {
        (sandbox.sandbox.requests().get("watch", "configmaps") > 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn replay_order_follows_the_recorded_resource_versions() {
    // Every stateful fixture is replayed exactly once.
    let dir = fixtures_dir();
    let mut on_disk = Vec::new();
    for folder in [
        "apply",
        "ssa",
        "generation",
        "patch",
        "list",
        "errors",
        "delete",
        "status",
        "watch",
        "protobuf",
        "conversion",
    ] {
        for entry in std::fs::read_dir(dir.join(folder)).expect("a fixture folder") {
            let name = entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if let Some(stem) = name.strip_suffix(".json") {
                on_disk.push(format!("{folder}/{stem}"));
            }
        }
    }
    on_disk.sort();
    let mut ordered: Vec<String> = ORDER.iter().map(|s| s.to_string()).collect();
    ordered.sort();
    assert_eq!(ordered, on_disk, "ORDER names every stateful fixture once");

    // Answers that carry a resourceVersion come in the order the server gave them out.
    let mut last = 0u64;
    for name in ORDER {
        let recorded = fixture(name);
        let Some(rv) = recorded
            .pointer("/response/body/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse::<u64>().ok())
        else {
            continue;
        };
        assert!(
            rv >= last,
            "{name} (resourceVersion {rv}) comes after {last}"
        );
        last = rv;
    }
}

#[tokio::test]
async fn recorded_exchanges_replay_the_same_against_the_sandbox() {
    let sandbox = TestSandbox::start().await;
    // The fixtures were recorded from a kube-apiserver without kube-controller-manager
    // (their README): nobody else wrote to the Deployments they apply.
    sandbox.sandbox.set_deployment_controller_delay(None);
    let mut tally = Tally::default();
    for name in ORDER {
        let recorded = fixture(name);
        let path = recorded["request"]["path"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let expected_status = recorded["response"]["status"].clone();
        let expected = recorded["response"]["body"].clone();
        if name.starts_with("watch/") {
            // The watch starts where the recorder's did: at a list's resourceVersion
            // (or at 1, the beginning); a shorter timeout keeps the test quick.
            let mut path = with_param(&path, "timeoutSeconds", "1");
            let from = crate::support::read(
                sandbox.request(Method::GET, "/api/v1/namespaces/fixtures/configmaps"),
            )
            .await
            .json()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if !path.contains("resourceVersion=1&") {
                path = with_param(&path, "resourceVersion", &from);
            }
            let events = if *name == "watch/create-modify-delete" {
                let (events, ()) = tokio::join!(
                    watch_events(&sandbox, &path),
                    watched_configmap_writes(&sandbox)
                );
                events
            } else {
                watch_events(&sandbox, &path).await
            };
            tally.compare_values(
                name,
                json!({"status": expected_status,
                    "events": fold_bookmarks(expected.as_array().expect("recorded events"))}),
                json!({"status": 200, "events": fold_bookmarks(&events)}),
            );
            continue;
        }
        if name.starts_with("protobuf/watch") {
            let mut path = with_param(&path, "timeoutSeconds", "1");
            let from = crate::support::read(
                sandbox.request(Method::GET, "/api/v1/namespaces/fixtures/configmaps"),
            )
            .await
            .json()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            path = with_param(&path, "resourceVersion", &from);
            let accept = recorded["request"]["accept"].as_str().unwrap_or_default();
            let watch = read(
                sandbox
                    .request(Method::GET, &path)
                    .header(reqwest::header::ACCEPT, accept),
            );
            let (answer, ()) = tokio::join!(watch, watched_configmap_writes(&sandbox));
            let mut events = Vec::new();
            let mut rest = &answer.body[..];
            while !rest.is_empty() {
                match protobuf::read_watch_frame(rest) {
                    Ok((event_type, object, after)) => {
                        events.push(json!({"type": event_type, "object": object}));
                        rest = after;
                    }
                    Err(err) => {
                        events.push(json!({"unreadable frame": err.to_string()}));
                        break;
                    }
                }
            }
            tally.compare_values(
                name,
                json!({"status": expected_status,
                    "contentType": recorded["response"]["contentType"],
                    "events": fold_bookmarks(&protobuf_events(&expected["decoded"]))}),
                json!({"status": answer.status.as_u16(), "contentType": answer.content_type,
                    "events": fold_bookmarks(&events)}),
            );
            continue;
        }
        if name.starts_with("protobuf/") {
            let answer = replay(&sandbox, name, &recorded, &path).await;
            let (expected, actual) = match expected.get("decoded") {
                // An answer in protobuf: compared in its decoded form.
                Some(decoded) => (
                    protobuf_form(decoded, true),
                    protobuf::decode_object(&answer.body).unwrap_or_else(
                        |err| json!({"not protobuf": err.to_string(), "text": answer.text()}),
                    ),
                ),
                None => (
                    expected.clone(),
                    serde_json::from_slice(&answer.body)
                        .unwrap_or_else(|_| Value::String(answer.text())),
                ),
            };
            tally.compare_values(
                name,
                json!({"status": expected_status,
                    "contentType": recorded["response"]["contentType"], "body": expected}),
                json!({"status": answer.status.as_u16(), "contentType": answer.content_type,
                    "body": actual}),
            );
            continue;
        }
        let answer = replay(&sandbox, name, &recorded, &path).await;
        tally.compare(name, &expected_status, &expected, &answer);
    }
    tally.finish("stateful exchanges");
}

#[test]
fn differences_name_paths_and_exemptions_stay_narrow() {
    let mut found = Vec::new();
    differences(
        "",
        &json!({"a": {"b": [1, 2]}, "c": 1}),
        &json!({"a": {"b": [1, 3]}, "d": 1}),
        &mut found,
    );
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["/a/b/1", "/c", "/d"]);
    assert!(exempt("discovery/apis", "/body/groups/3/versions").is_some());
    assert!(exempt("discovery/apis", "/body/groupsX").is_none());
    assert!(exempt("discovery/api", "/body/kind").is_none());
    for (fixture, path, reason) in EXEMPTIONS {
        assert!(
            path.starts_with('/') && path.len() > 1,
            "{fixture}: an exemption names a field path"
        );
        assert!(!reason.is_empty());
    }
    let mut volatile = json!({"metadata": {"uid": "x", "name": "n", "deletionTimestamp": null,
        "labels": {"controller-uid": "x"}}});
    normalize(&mut volatile);
    assert_eq!(
        volatile,
        json!({"metadata": {"uid": "<volatile>", "name": "n", "deletionTimestamp": null,
            "labels": {"controller-uid": "<volatile>"}}})
    );
}
