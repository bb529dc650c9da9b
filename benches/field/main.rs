//! Field figures (issue #12): the findings `tests/integration/field.rs` checks once
//! each, repeated often enough to be counted, against the in-process sandbox.
//!
//! 1. **Crash runs**: a `tether sync` process of 600 objects (ConfigMaps in three
//!    Namespaces the app also creates), slowed by the sandbox's injected latency, is
//!    SIGKILLed at a random moment after its first write; Git (a directory) then drops
//!    a random part of the set (below the mass-prune guard) and `tether sync --prune`
//!    runs. Counted after it: orphans (objects labelled for the app that Git does not
//!    have) and lost objects (desired, yet absent or being deleted). Expected 0 and 0.
//! 2. **Race runs**: a library sync gives three Deployments a new image, then at once
//!    `sync::observe` and `Observed::drift` diff them, back to back, until a watch
//!    shows the sandbox's Deployment controller (~5 ms after each change) done writing
//!    the revision annotation and status. Counted: runs with any drift (expected 0),
//!    and how many controller writes landed while a diff ran (the race was run). The
//!    dry runs those diffs made are counted too: a diff dry-runs (and so compares an
//!    answer with a live copy) only an object it cannot call unchanged from the live
//!    object alone, which after a sync is none of them.
//! 3. **Faults**: with 20% of requests answered 500, 503 or 429, five apps of 20
//!    objects each are synced by `tether sync` repeated until it exits 0 (as a
//!    retrying service would, at most 20 attempts each); then, faults off, `tether
//!    diff` must find each in sync. And `tether diff` against a black-holed API server
//!    (a listener that accepts and never answers) must exit 2 within the request
//!    timeout, never hang.
//!
//! `cargo bench --bench field [-- --crash-runs N --race-runs N --quick --black-hole
//! --seed S]` prints a table, writes `target/bench-results/field.json`, and exits 1
//! when it printed a FAIL. `--quick` is 3 crash runs and 10 race runs without the
//! black hole (30 s at worst) unless `--black-hole` asks for it. The seed picks the
//! kill moments and what Git drops; it is printed so a failing run can be repeated.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};
use tether_core::cluster::{Cluster, DEFAULT_REQUEST_TIMEOUT};
use tether_core::sync::desired::label_for_app;
use tether_core::sync::{SyncOptions, observe, sync};
use tether_diff::manifest::{ParseOptions, read_dir};
use tether_sandbox::{Sandbox, SandboxOptions};
use tether_schema::ownership::{APP_LABEL, DEFAULT_INVENTORY_NAMESPACE, inventory_name};
use tether_testkit::figures::{ms, verdict};

mod crash;
mod faults;
mod race;

use crash::{Crash, crash_runs, print_crash};
use faults::{BlackHole, Faults, black_hole, fault_convergence, print_faults};
use race::{Race, print_race, race_runs};

struct Args {
    crash_runs: usize,
    race_runs: usize,
    black_hole: bool,
    seed: u64,
}

impl Args {
    fn parse() -> Result<Args, String> {
        let mut crash_runs = None;
        let mut race_runs = None;
        let mut quick = false;
        let mut black_hole = false;
        let mut seed = None;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |name: &str| -> Result<u64, String> {
                args.next()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("{name} needs a number"))
            };
            match arg.as_str() {
                "--crash-runs" => crash_runs = Some(number("--crash-runs")? as usize),
                "--race-runs" => race_runs = Some(number("--race-runs")? as usize),
                "--seed" => seed = Some(number("--seed")?),
                "--quick" => quick = true,
                "--black-hole" => black_hole = true,
                // cargo bench passes --bench to every bench target.
                "--bench" => {}
                other => {
                    return Err(format!(
                        "unknown argument {other:?}; expected --crash-runs N, --race-runs N, --quick, --black-hole, --seed S"
                    ));
                }
            }
        }
        Ok(Args {
            crash_runs: crash_runs.unwrap_or(if quick { 3 } else { 20 }),
            race_runs: race_runs.unwrap_or(if quick { 10 } else { 50 }),
            black_hole: black_hole || !quick,
            seed: seed.unwrap_or_else(|| rand::rng().random()),
        })
    }
}

/// One object of a generated app, by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Object {
    Namespace(String),
    ConfigMap(String, String),
}

impl Object {
    fn manifest(&self) -> String {
        match self {
            Object::Namespace(name) => {
                format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
            }
            Object::ConfigMap(namespace, name) => format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: \"{name}\"\n"
            ),
        }
    }

    fn file_name(&self) -> String {
        match self {
            Object::Namespace(name) => format!("ns-{name}.yaml"),
            Object::ConfigMap(namespace, name) => format!("cm-{namespace}-{name}.yaml"),
        }
    }

    fn namespace(&self) -> &str {
        match self {
            Object::Namespace(name) | Object::ConfigMap(name, _) => name,
        }
    }
}

/// Makes `dir` hold exactly `objects`, one file each, as a commit would.
fn write_app(dir: &Path, objects: &[Object]) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("mkdir");
    for object in objects {
        std::fs::write(dir.join(object.file_name()), object.manifest()).expect("write");
    }
}

fn tether(command: &str, kubeconfig: &Path, dir: &Path, app: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"));
    c.arg(command)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--path")
        .arg(dir)
        .args(["--app", app])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Any tether command that has not ended by then hangs: a FAIL, not a wait.
const RUN_LIMIT: Duration = Duration::from_secs(300);

async fn run(command: &mut tokio::process::Command) -> Finished {
    // kill_on_drop: a command given up on is killed with its future.
    let Ok(out) = tokio::time::timeout(RUN_LIMIT, command.output()).await else {
        return Finished {
            code: None,
            stdout: String::new(),
            stderr: format!("hung: killed after {} s", RUN_LIMIT.as_secs()),
        };
    };
    let out = out.expect("the tether binary runs");
    Finished {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn fresh_sandbox(dir: &Path, name: &str) -> (Sandbox, PathBuf, kube::Client) {
    let sandbox = Sandbox::start(SandboxOptions::default())
        .await
        .expect("sandbox starts");
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = sandbox.client().await.expect("client");
    (sandbox, kubeconfig, client)
}

/// The live objects labelled for `app`, with those being deleted set apart.
async fn labelled(client: &kube::Client, app: &str) -> (BTreeSet<Object>, BTreeSet<Object>) {
    let selector = ListParams::default().labels(&format!("{APP_LABEL}={app}"));
    let mut live = BTreeSet::new();
    let mut deleting = BTreeSet::new();
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&selector)
        .await
        .expect("list namespaces");
    for ns in namespaces {
        let object = Object::Namespace(ns.name_any());
        match ns.metadata.deletion_timestamp {
            Some(_) => deleting.insert(object),
            None => live.insert(object),
        };
    }
    let configmaps = Api::<ConfigMap>::all(client.clone())
        .list(&selector)
        .await
        .expect("list configmaps");
    for cm in configmaps {
        let object = Object::ConfigMap(cm.namespace().unwrap_or_default(), cm.name_any());
        match cm.metadata.deletion_timestamp {
            Some(_) => deleting.insert(object),
            None => live.insert(object),
        };
    }
    (live, deleting)
}

async fn inventory_written(client: &kube::Client, app: &str) -> bool {
    Api::<ConfigMap>::namespaced(client.clone(), DEFAULT_INVENTORY_NAMESPACE)
        .get_opt(&inventory_name(app))
        .await
        .ok()
        .flatten()
        .is_some()
}

fn results_json(
    args: &Args,
    crash: &Crash,
    race: &Race,
    faults: &Faults,
    hole: Option<&BlackHole>,
    ok: bool,
) -> Value {
    json!({
        "seed": args.seed,
        "ok": ok,
        "crash": crash::json(crash),
        "race": race::json(race),
        "faults": faults::json(faults, hole),
    })
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = match Args::parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut rng = StdRng::seed_from_u64(args.seed);

    let crash = crash_runs(tmp.path(), args.crash_runs, &mut rng).await;
    let race = race_runs(tmp.path(), args.race_runs).await;
    let faults = fault_convergence(tmp.path()).await;
    let hole = match args.black_hole {
        true => Some(black_hole(tmp.path()).await),
        false => None,
    };

    println!("field figures (issue #12), seed {}", args.seed);
    let crash_ok = print_crash(&crash);
    let race_ok = print_race(&race);
    let faults_ok = print_faults(&faults, hole.as_ref());
    let ok = crash_ok && race_ok && faults_ok;
    println!("{}", if ok { "all ok" } else { "FAIL" });

    let results = results_json(&args, &crash, &race, &faults, hole.as_ref(), ok);
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), "field.json", &results);
    if !ok {
        std::process::exit(1);
    }
}
