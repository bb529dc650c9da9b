//! Race runs (2): diffs back to back with the Deployment controller's writes after a
//! sync; runs with false drift counted.

use super::*;

const RACE_DEPLOYMENTS: usize = 3;

// 2. Race runs

struct RaceRun {
    /// Every drift any diff of the run reported.
    drifted: Vec<String>,
    /// Diffs made, back to back, from the end of the sync until the controller was
    /// done with every Deployment.
    diffs: usize,
    /// Controller writes the watch saw while one of those diffs ran.
    writes_during_diffs: usize,
    /// Server-side apply dry runs those diffs made: a diff compares a dry-run answer
    /// with a live copy (the race) only for an object it could not call unchanged
    /// from the live object alone.
    dry_runs: u64,
    diff_times: Vec<Duration>,
}

pub(super) struct Race {
    runs: Vec<RaceRun>,
    final_revision: Option<String>,
}

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: {name}\n        image: {image}\n"
    )
}

const REVISION: &str = "deployment.kubernetes.io/revision";
/// How long a run keeps diffing when the controller never finishes (it always has
/// within tens of milliseconds).
const RACE_WINDOW_LIMIT: Duration = Duration::from_secs(5);

/// A Deployment change the watch saw: when, which, the revision annotation it
/// carried, and whether the controller was done with it (status observed the
/// generation and the replica is available).
struct Change {
    at: Instant,
    name: String,
    revision: Option<String>,
    settled: bool,
}

impl Change {
    fn of(deployment: &Deployment) -> Change {
        let status = deployment.status.as_ref();
        let settled = status.and_then(|s| s.observed_generation) == deployment.metadata.generation
            && status.and_then(|s| s.available_replicas) == Some(1);
        Change {
            at: Instant::now(),
            name: deployment.name_any(),
            revision: deployment.annotations().get(REVISION).cloned(),
            settled,
        }
    }
}

/// Every Deployment change in `default`, as it arrives.
fn watch_changes(client: &kube::Client) -> (Arc<Mutex<Vec<Change>>>, tokio::task::JoinHandle<()>) {
    let changes: Arc<Mutex<Vec<Change>>> = Arc::default();
    let api = Api::<Deployment>::namespaced(client.clone(), "default");
    let task = tokio::spawn({
        let changes = changes.clone();
        async move {
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                if let Ok(watcher::Event::Apply(deployment)) = event {
                    changes.lock().push(Change::of(&deployment));
                }
            }
        }
    });
    (changes, task)
}

pub(super) async fn race_runs(tmp: &Path, runs: usize) -> Race {
    let (sandbox, kubeconfig, client) = fresh_sandbox(tmp, "race").await;
    let cluster = Cluster::connect(Some(&kubeconfig), None)
        .await
        .expect("cluster");
    let (changes, watch) = watch_changes(&client);
    let dir = tmp.join("race");
    let mut out = Vec::new();
    for round in 0..runs {
        let image = format!("nginx:1.{round}");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        for d in 0..RACE_DEPLOYMENTS {
            let name = format!("web-{d}");
            std::fs::write(dir.join(format!("{name}.yaml")), deployment(&name, &image))
                .expect("write");
        }
        let mut desired = read_dir(&dir, &ParseOptions::default()).expect("manifests");
        label_for_app(&mut desired, "race");
        let options = SyncOptions::new("race");
        let report = sync(&cluster, &desired, None, &options)
            .await
            .expect("sync");
        assert!(
            !report.failed(),
            "round {round}: the sync failed: {report:?}"
        );

        // tether's apply of this round carries the old revision (round), the
        // controller's writes after it the new one (round + 1): that tells them apart.
        let controller_revision = (round + 1).to_string();
        let by_controller = |c: &Change| c.revision.as_ref() == Some(&controller_revision);
        let mut run = RaceRun {
            drifted: Vec::new(),
            diffs: 0,
            writes_during_diffs: 0,
            dry_runs: 0,
            diff_times: Vec::new(),
        };
        sandbox.reset_requests();
        let window = Instant::now();
        loop {
            let started = Instant::now();
            let observed = observe(&cluster, &desired, &report.inventory, &options)
                .await
                .expect("observe");
            let drift = observed.drift().expect("drift");
            let ended = Instant::now();
            run.diffs += 1;
            run.diff_times.push(ended - started);
            run.drifted.extend(
                drift
                    .iter()
                    .filter(|d| d.drift.is_drift())
                    .map(|d| format!("{}: {:?}", d.id, d.drift)),
            );
            let seen = changes.lock();
            run.writes_during_diffs += seen
                .iter()
                .filter(|c| by_controller(c) && c.at >= started && c.at <= ended)
                .count();
            let done: BTreeSet<&str> = seen
                .iter()
                .filter(|c| by_controller(c) && c.settled)
                .map(|c| c.name.as_str())
                .collect();
            if done.len() == RACE_DEPLOYMENTS || window.elapsed() > RACE_WINDOW_LIMIT {
                break;
            }
        }
        run.dry_runs = sandbox.requests().verb("dryrun:patch");
        out.push(run);
    }
    // The controller kept up: it gave the last change its revision.
    let final_revision = Api::<Deployment>::namespaced(client.clone(), "default")
        .get("web-0")
        .await
        .ok()
        .and_then(|d| d.annotations().get(REVISION).cloned());
    watch.abort();
    sandbox.stop().await;
    Race {
        runs: out,
        final_revision,
    }
}

pub(super) fn print_race(race: &Race) -> bool {
    let false_drift = race.runs.iter().filter(|r| !r.drifted.is_empty()).count();
    let raced = race
        .runs
        .iter()
        .filter(|r| r.writes_during_diffs > 0)
        .count();
    let writes: usize = race.runs.iter().map(|r| r.writes_during_diffs).sum();
    let diffs: usize = race.runs.iter().map(|r| r.diffs).sum();
    let dry_runs: u64 = race.runs.iter().map(|r| r.dry_runs).sum();
    let mut times: Vec<Duration> = race
        .runs
        .iter()
        .flat_map(|r| r.diff_times.iter().copied())
        .collect();
    times.sort();
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let revision_ok = race.final_revision.as_deref() == Some(race.runs.len().to_string().as_str())
        || race.runs.is_empty();
    let ok = false_drift == 0 && revision_ok;
    println!(
        "2. race runs: {} runs of {RACE_DEPLOYMENTS} Deployments: sync, then diff back to back until the controller is done",
        race.runs.len()
    );
    println!(
        "   runs with false drift: {false_drift} (expected 0)  {}",
        verdict(false_drift == 0)
    );
    for (i, r) in race.runs.iter().enumerate() {
        if !r.drifted.is_empty() {
            println!("       run {}: {}", i + 1, r.drifted.join("; "));
        }
    }
    println!(
        "   diffs: {diffs} (median {:.1} ms, {dry_runs} dry runs); runs where the controller wrote during a diff: {raced} ({writes} writes)",
        ms(median)
    );
    println!(
        "   revision annotation after the last run: {} (expected {})  {}",
        race.final_revision.as_deref().unwrap_or("none"),
        race.runs.len(),
        verdict(revision_ok)
    );
    ok
}

/// This part's figures in `field.json`.
pub(super) fn json(race: &Race) -> Value {
    json!({
        "deployments": RACE_DEPLOYMENTS,
        "false_drift_runs": race.runs.iter().filter(|r| !r.drifted.is_empty()).count(),
        "final_revision": race.final_revision,
        "runs": race.runs.iter().map(|r| json!({
            "drifted": r.drifted,
            "diffs": r.diffs,
            "diff_ms": r.diff_times.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            "controller_writes_during_diffs": r.writes_during_diffs,
            "dry_runs": r.dry_runs,
        })).collect::<Vec<_>>(),
    })
}
