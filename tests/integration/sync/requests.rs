//! What a sync asks of the API server: an object absent from the cache is adopted, not
//! created; a cold sync costs a dry run and an apply per object; the longest write is
//! logged.

use super::*;

/// In `tether serve` the live view is the watch cache of objects labelled for tether,
/// so an object already in the cluster without the labels is absent from it. Syncing
/// adopts it, and says so: configured (its labels and data changed), not created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlabelled_object_absent_from_the_cache_is_adopted_not_created() {
    use std::sync::Arc;
    use tether_core::cluster::Cluster;
    use tether_core::cluster::cache::Cache;
    use tether_core::sync::{Action, SyncOptions};
    use tether_diff::manifest::{ParseOptions, read_dir};

    let sandbox = TestSandbox::start().await;
    let before = app_dir(
        &sandbox,
        "before",
        &[("existing.yaml", &configmap("existing", "", "old"))],
    );
    let created = sandbox
        .kubectl(&["create", "-f", before.to_str().expect("utf-8")])
        .await;
    assert_eq!(created.code, 0, "{}", created.stderr);
    let dir = app_dir(
        &sandbox,
        "adopt",
        &[
            ("existing.yaml", &configmap("existing", "", "new")),
            ("fresh.yaml", &configmap("fresh", "", "x")),
        ],
    );
    let mut desired = read_dir(&dir, &ParseOptions::default()).expect("the manifests read");
    tether_core::sync::desired::label_for_app(&mut desired, "adopt");

    let cluster = Arc::new(
        Cluster::connect(Some(&sandbox.kubeconfig), None)
            .await
            .expect("a client for the sandbox"),
    );
    let cache = Cache::new(cluster.clone(), tokio_util::sync::CancellationToken::new());
    let kind = cluster
        .resolve(&kube::core::GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .await
        .expect("discovery")
        .expect("ConfigMaps are served");
    assert!(cache.watch("", "ConfigMap", &kind).await, "the cache syncs");
    assert!(cache.is_empty(), "nothing is labelled for tether yet");

    let options = SyncOptions {
        live: Some(&cache),
        ..SyncOptions::new("adopt")
    };
    let report = tether_core::sync::sync(&cluster, &desired, None, &options)
        .await
        .expect("the sync runs");
    let result = |name: &str| {
        report
            .objects
            .iter()
            .find(|o| o.id.name == name)
            .unwrap_or_else(|| panic!("{name} not in the report"))
    };
    assert_eq!(result("fresh").action, Action::Created);
    let adopted = result("existing");
    assert_eq!(adopted.action, Action::Configured, "{}", adopted.message);
    let mut paths: Vec<String> = adopted.changes.iter().map(|c| c.path.to_string()).collect();
    paths.sort();
    // It had no labels at all: the whole map is the change.
    assert_eq!(paths, ["data.key", "metadata.labels"]);

    let labelled = sandbox
        .kubectl(&[
            "get",
            "configmap",
            "existing",
            "-n",
            "default",
            "-o",
            "jsonpath={.metadata.labels.tether\\.dev/app}={.data.key}",
        ])
        .await;
    assert_eq!(labelled.stdout, "adopt=new", "{}", labelled.stderr);
}

/// A cold sync costs a dry run and an apply per new object and no read of each (the
/// labelled lists say what the app has; the dry run says whether a missing one exists
/// unlabelled); a second sync of the same revision writes nothing and dry-runs
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_sync_costs_a_dry_run_and_an_apply_per_object_and_no_read_of_each() {
    const OBJECTS: u64 = 20;
    let sandbox = TestSandbox::start().await;
    // One object exists already, unlabelled: it is adopted, not created over.
    let before = app_dir(
        &sandbox,
        "before",
        &[("cm-0.yaml", configmap("cm-0", "", "old"))],
    );
    let created = sandbox
        .kubectl(&["create", "-f", before.to_str().expect("utf-8")])
        .await;
    assert_eq!(created.code, 0, "{}", created.stderr);
    let files: Vec<(String, String)> = (0..OBJECTS)
        .map(|i| {
            (
                format!("cm-{i}.yaml"),
                configmap(&format!("cm-{i}"), "", "v"),
            )
        })
        .collect();
    let dir = app_dir(&sandbox, "cold", &files);

    sandbox.sandbox.reset_requests();
    let run = sync(&sandbox, &dir, "cold", &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let first = report(&run);
    assert_eq!(first["summary"]["created"], OBJECTS - 1, "{first}");
    assert_eq!(action_of(&first, "ConfigMap/cm-0"), "configured", "{first}");
    let requests = sandbox.sandbox.requests();
    // One dry run per object; the adopted one is read once its dry run says it exists.
    assert_eq!(requests.verb("dryrun:patch"), OBJECTS, "{requests:?}");
    let gets = requests.verb("get") - requests.get("get", "discovery");
    assert!(gets <= 3, "objects are not read one by one: {requests:?}");
    // The applies, the inventory written before and after, and its namespace.
    assert!(requests.writes() <= OBJECTS + 3, "{requests:?}");
    let per_object = requests.total() as f64 / OBJECTS as f64;
    assert!(
        requests.total() <= 2 * OBJECTS + 10,
        "{per_object:.2} requests per object: {requests:?}"
    );

    sandbox.sandbox.reset_requests();
    let again = sync(&sandbox, &dir, "cold", &[]).await;
    assert_eq!(again.code, Some(0), "{}{}", again.stdout, again.stderr);
    assert_eq!(report(&again)["summary"]["unchanged"], OBJECTS);
    let requests = sandbox.sandbox.requests();
    assert_eq!(requests.writes(), 0, "{requests:?}");
    assert_eq!(requests.verb("dryrun:patch"), 0, "{requests:?}");
}

/// Issue #31: a sync that writes logs how long its longest write took (`write_us`, the
/// figure the serve bench sets next to each heal); a second one, writing nothing, logs
/// no such line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_that_writes_logs_its_longest_writes_round_trip() {
    let sandbox = TestSandbox::start().await;
    let dir = app_dir(
        &sandbox,
        "timed",
        &[("a.yaml", configmap("timed", "", "a").as_str())],
    );
    let path = dir.to_str().expect("utf-8");
    let args = ["--log-format", "json", "--path", path, "--app", "timed"];
    let logged = [("RUST_LOG", "tether_core::sync=info".to_string())];
    let finished = |run: &crate::support::Run| -> Vec<Value> {
        assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
        run.stderr
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["fields"]["message"] == "sync finished")
            .collect()
    };
    let first = tether_with_env(&sandbox, "sync", &args, &logged).await;
    let lines = finished(&first);
    assert_eq!(lines.len(), 1, "{}", first.stderr);
    assert!(
        lines[0]["fields"]["write_us"]
            .as_u64()
            .is_some_and(|us| us > 0),
        "{}",
        first.stderr
    );
    let second = tether_with_env(&sandbox, "sync", &args, &logged).await;
    assert!(finished(&second).is_empty(), "{}", second.stderr);
}
