//! Sandbox figures (issue "Foundation and the sandbox"): start to `ready`, a list of
//! 10,000 objects, and the memory held by 10,000 Deployments. Runs the real `tether
//! sandbox` binary and talks HTTPS to it, as kubectl would.
//!
//! `cargo bench --bench sandbox` prints a table and writes
//! `target/bench-results/sandbox.json`.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::json;
use tether_testkit::bench::deployment;
use tether_testkit::figures::median;
use tether_testkit::proc::proc_status;

const STARTS: usize = 20;
const LIST_OBJECTS: usize = 10_000;
const LIST_RUNS: usize = 10;
const DEPLOYMENTS: usize = 10_000;
/// Concurrent writers while filling the sandbox.
const WRITERS: usize = 8;

struct Running {
    child: Child,
    url: String,
    token: String,
    ca_pem: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path) -> (Running, Duration) {
    let kubeconfig = dir.join("kubeconfig");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["sandbox", "--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the tether binary runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout is piped"))
        .read_line(&mut line)
        .expect("the sandbox prints a line");
    let elapsed = started.elapsed();
    let url = line
        .trim()
        .strip_prefix("ready ")
        .expect("the line is `ready <url>`")
        .to_string();
    let config: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&kubeconfig).expect("kubeconfig written"))
            .expect("kubeconfig is YAML");
    let ca = config["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("CA data");
    let ca_pem = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(ca)
            .expect("base64"),
    )
    .expect("PEM");
    let token = config["users"][0]["user"]["token"]
        .as_str()
        .expect("token")
        .to_string();
    (
        Running {
            child,
            url,
            token,
            ca_pem,
        },
        elapsed,
    )
}

fn client(sandbox: &Running) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(sandbox.ca_pem.as_bytes()).expect("CA parses");
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client builds")
}

async fn create_all(sandbox: &Running, path: &str, bodies: Vec<serde_json::Value>) {
    let client = client(sandbox);
    let chunks: Vec<Vec<serde_json::Value>> = bodies
        .chunks(bodies.len().div_ceil(WRITERS))
        .map(<[_]>::to_vec)
        .collect();
    let mut tasks = Vec::new();
    for chunk in chunks {
        let client = client.clone();
        let url = format!("{}{path}", sandbox.url);
        let token = sandbox.token.clone();
        tasks.push(tokio::spawn(async move {
            for body in chunk {
                let response = client
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&body)
                    .send()
                    .await
                    .expect("create");
                assert_eq!(
                    response.status(),
                    201,
                    "{}",
                    response.text().await.unwrap_or_default()
                );
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer");
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");

    // 1. Start to `ready`.
    let mut starts = Vec::new();
    for _ in 0..STARTS {
        let (sandbox, elapsed) = start(dir.path());
        starts.push(elapsed);
        drop(sandbox);
    }
    let start_median = median(&starts);
    let start_max = starts.iter().max().copied().unwrap_or_default();

    // 2. A list of 10,000 ConfigMaps.
    let (sandbox, _) = start(dir.path());
    let configmaps = (0..LIST_OBJECTS)
        .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}"), "labels": {"i": i.to_string()}}, "data": {"key": "value", "index": i.to_string()}}))
        .collect();
    runtime.block_on(create_all(
        &sandbox,
        "/api/v1/namespaces/default/configmaps",
        configmaps,
    ));
    let http = client(&sandbox);
    let list_times: Vec<Duration> = (0..LIST_RUNS)
        .map(|_| {
            runtime.block_on(async {
                let started = Instant::now();
                let response = http
                    .get(format!(
                        "{}/api/v1/namespaces/default/configmaps",
                        sandbox.url
                    ))
                    .bearer_auth(&sandbox.token)
                    .send()
                    .await
                    .expect("list");
                let body = response.bytes().await.expect("body");
                let elapsed = started.elapsed();
                let list: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
                assert_eq!(list["items"].as_array().map(Vec::len), Some(LIST_OBJECTS));
                elapsed
            })
        })
        .collect();
    let list_median = median(&list_times);
    drop(sandbox);

    // 3. Memory held by 10,000 Deployments.
    let (sandbox, _) = start(dir.path());
    let idle_kib = proc_status(sandbox.child.id(), "VmRSS") as u64;
    // The shared Deployment with the `tier` label this bench's figures were taken with.
    let tiered = |i| {
        let mut deployment = deployment(i);
        deployment["metadata"]["labels"]["tier"] = "front".into();
        deployment
    };
    let deployments = (0..DEPLOYMENTS).map(tiered).collect();
    let fill_started = Instant::now();
    runtime.block_on(create_all(
        &sandbox,
        "/apis/apps/v1/namespaces/default/deployments",
        deployments,
    ));
    let fill = fill_started.elapsed();
    let full_kib = proc_status(sandbox.child.id(), "VmRSS") as u64;
    drop(sandbox);

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{:<44} {:>12} {:>10}",
        "sandbox figure", "measured", "target"
    );
    println!(
        "{:<44} {:>9.1} ms {:>10}",
        "start to ready (median of 20)",
        ms(start_median),
        "< 200 ms"
    );
    println!(
        "{:<44} {:>9.1} ms {:>10}",
        "start to ready (max of 20)",
        ms(start_max),
        ""
    );
    println!(
        "{:<44} {:>9.1} ms {:>10}",
        "list of 10,000 ConfigMaps (median of 10)",
        ms(list_median),
        "< 100 ms"
    );
    println!(
        "{:<44} {:>8.1} MiB {:>10}",
        "RSS with 10,000 Deployments",
        full_kib as f64 / 1024.0,
        "< 200 MiB"
    );
    println!(
        "{:<44} {:>8.1} MiB {:>10}",
        "RSS idle",
        idle_kib as f64 / 1024.0,
        ""
    );
    println!(
        "{:<44} {:>9.1} s  {:>10}",
        "creating 10,000 Deployments (8 writers)",
        fill.as_secs_f64(),
        ""
    );

    let results = json!({
        "start_to_ready_ms": {"median": ms(start_median), "max": ms(start_max), "runs": STARTS, "target": 200},
        "list_10000_ms": {"median": ms(list_median), "runs": LIST_RUNS, "target": 100},
        "rss_10000_deployments_mib": {"value": full_kib as f64 / 1024.0, "idle": idle_kib as f64 / 1024.0, "target": 200},
        "create_10000_deployments_s": fill.as_secs_f64(),
    });
    tether_testkit::figures::write_results(env!("CARGO_MANIFEST_DIR"), "sandbox.json", &results);
}
