//! The sandbox on the wire (issue #15).
//!
//! - `kubectl apply --server-side --validate=false` of 1,000 objects (ConfigMaps and
//!   Deployments) against the in-process sandbox: kubectl's wall time and requests next
//!   to the sandbox's own time answering them (`Sandbox::serving_time`, measured inside
//!   the server around each request), so the sandbox's cost per request stands apart
//!   from kubectl's. `--validate=false`: kubectl 1.32's client-side OpenAPI validation
//!   costs about 40 ms of CPU per object and would measure kubectl, not the server.
//! - Protobuf next to its JSON twin: the per-request cost of creating and getting a
//!   ConfigMap and a Deployment over HTTPS, each request timed alone, the two formats
//!   interleaved so that both see the same machine; and the codec alone against
//!   serde_json for the same objects.
//!
//! `cargo bench --bench protobuf` prints a table and writes
//! `target/bench-results/protobuf.json`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tether::sandbox::protobuf;
use tether::sandbox::{Sandbox, SandboxOptions};

const REQUESTS: usize = 300;
const APPLIED: usize = 1_000;
/// The sandbox's own time per request must stay under this (issue #15).
const SERVING_BUDGET_US: f64 = 1_000.0;
const CODEC_RUNS: usize = 2_000;

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Json,
    Protobuf,
}

fn config_map(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i}"), "labels": {"app": "web", "i": i.to_string()}},
        "data": {"log-level": "info", "index": i.to_string(), "greeting": "hello, world"}})
}

fn deployment(i: usize) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("web-{i}"), "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web", "i": i.to_string()}},
            "template": {
                "metadata": {"labels": {"app": "web", "i": i.to_string()}},
                "spec": {"containers": [{
                    "name": "web", "image": "nginx:1.25",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "env": [{"name": "MODE", "value": "production"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}}
                }]}
            }
        }
    })
}

fn client(kubeconfig: &str) -> reqwest::Client {
    let config: Value = serde_saphyr::from_str(kubeconfig).expect("kubeconfig is YAML");
    let ca = config["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("CA data");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .expect("base64");
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&pem).expect("CA parses")])
        .build()
        .expect("client builds")
}

fn median(mut values: Vec<Duration>) -> f64 {
    values.sort();
    values[values.len() / 2].as_secs_f64() * 1e6
}

struct Figures {
    create: [Vec<Duration>; 2],
    get: [Vec<Duration>; 2],
}

async fn measure(
    sandbox: &Sandbox,
    http: &reqwest::Client,
    path: &str,
    make: fn(usize) -> Value,
) -> Figures {
    let mut figures = Figures {
        create: [Vec::new(), Vec::new()],
        get: [Vec::new(), Vec::new()],
    };
    let url = format!("{}{path}", sandbox.url());
    for i in 0..REQUESTS * 2 {
        let format = if i % 2 == 0 {
            Format::Json
        } else {
            Format::Protobuf
        };
        let slot = usize::from(format == Format::Protobuf);
        let object = make(i);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (body, media_type) = match format {
            Format::Json => (
                serde_json::to_vec(&object).expect("JSON"),
                "application/json",
            ),
            Format::Protobuf => (
                protobuf::encode_object(&object).expect("protobuf"),
                protobuf::MEDIA_TYPE,
            ),
        };
        let started = Instant::now();
        let response = http
            .post(&url)
            .bearer_auth(sandbox.token())
            .header(reqwest::header::CONTENT_TYPE, media_type)
            .header(reqwest::header::ACCEPT, media_type)
            .body(body)
            .send()
            .await
            .expect("create");
        let status = response.status();
        let answer = response.bytes().await.expect("answer");
        figures.create[slot].push(started.elapsed());
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));

        let started = Instant::now();
        let response = http
            .get(format!("{url}/{name}"))
            .bearer_auth(sandbox.token())
            .header(reqwest::header::ACCEPT, media_type)
            .send()
            .await
            .expect("get");
        let answer = response.bytes().await.expect("answer");
        let object = match format {
            Format::Json => serde_json::from_slice::<Value>(&answer).expect("JSON"),
            Format::Protobuf => protobuf::decode_object(&answer).expect("protobuf"),
        };
        figures.get[slot].push(started.elapsed());
        assert_eq!(object["metadata"]["name"], name.as_str());
    }
    figures
}

/// What `kubectl apply --server-side` of [`APPLIED`] objects cost, seen from kubectl
/// and from inside the sandbox.
struct Applied {
    wall: Duration,
    requests: u64,
    serving: Duration,
}

async fn kubectl_apply(sandbox: &Sandbox) -> Applied {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let manifests = dir.path().join("objects.json");
    let items: Vec<Value> = (0..APPLIED)
        .map(|i| {
            let mut object = if i % 2 == 0 {
                config_map(i)
            } else {
                deployment(i)
            };
            object["metadata"]["name"] = format!("applied-{i}").into();
            object["metadata"]["namespace"] = "default".into();
            object
        })
        .collect();
    std::fs::write(
        &manifests,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .expect("JSON"),
    )
    .expect("manifests written");
    sandbox.reset_requests();
    let started = Instant::now();
    let output = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "--server-side", "--validate=false", "-f"])
        .arg(&manifests)
        .output()
        .await
        .expect("kubectl runs");
    let wall = started.elapsed();
    assert!(
        output.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let counts = sandbox.requests();
    Applied {
        wall,
        requests: counts.0.values().sum(),
        serving: sandbox.serving_time(),
    }
}

/// Median microseconds of `run`, over [`CODEC_RUNS`] runs.
fn codec(mut run: impl FnMut()) -> f64 {
    median(
        (0..CODEC_RUNS)
            .map(|_| {
                let started = Instant::now();
                run();
                started.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (applied, config_maps, deployments) = runtime.block_on(async {
        let sandbox = Sandbox::start(SandboxOptions::default())
            .await
            .expect("the sandbox starts");
        // Nothing else writes while timing.
        sandbox.set_deployment_controller_delay(None);
        let applied = kubectl_apply(&sandbox).await;
        let http = client(sandbox.kubeconfig());
        let config_maps = measure(
            &sandbox,
            &http,
            "/api/v1/namespaces/default/configmaps",
            config_map,
        )
        .await;
        let deployments = measure(
            &sandbox,
            &http,
            "/apis/apps/v1/namespaces/default/deployments",
            deployment,
        )
        .await;
        sandbox.stop().await;
        (applied, config_maps, deployments)
    });

    let object = deployment(0);
    let encoded = protobuf::encode_object(&object).expect("encodes");
    let json_bytes = serde_json::to_vec(&object).expect("JSON");
    let codec_figures = [
        (
            "Deployment to protobuf",
            codec(|| drop(protobuf::encode_object(&object))),
        ),
        (
            "Deployment to JSON",
            codec(|| drop(serde_json::to_vec(&object))),
        ),
        (
            "Deployment from protobuf",
            codec(|| drop(protobuf::decode_object(&encoded))),
        ),
        (
            "Deployment from JSON",
            codec(|| drop(serde_json::from_slice::<Value>(&json_bytes))),
        ),
    ];

    let requests = applied.requests.max(1) as f64;
    let serving_us = applied.serving.as_secs_f64() * 1e6 / requests;
    let verdict = if serving_us < SERVING_BUDGET_US {
        "pass"
    } else {
        "FAIL"
    };
    println!(
        "kubectl apply --server-side --validate=false, {APPLIED} objects (ConfigMaps and Deployments)"
    );
    println!(
        "{:<40} {:>10.0} ms",
        "kubectl wall",
        applied.wall.as_secs_f64() * 1e3
    );
    println!(
        "{:<40} {:>10} ({:.2} per object)",
        "requests",
        applied.requests,
        requests / APPLIED as f64
    );
    println!(
        "{:<40} {:>10.0} µs per request, wall {:.0} µs per request  {verdict} (< {SERVING_BUDGET_US:.0} µs)",
        "sandbox's own time",
        serving_us,
        applied.wall.as_secs_f64() * 1e6 / requests
    );
    println!();
    let mut results = serde_json::Map::new();
    results.insert(
        "kubectl_apply".into(),
        json!({
            "objects": APPLIED,
            "validate": false,
            "wall_ms": applied.wall.as_secs_f64() * 1e3,
            "requests": applied.requests,
            "sandbox_serving_us_per_request": serving_us,
            "target_us_per_request": SERVING_BUDGET_US,
            "result": verdict,
        }),
    );
    println!(
        "{:<40} {:>10} {:>10}",
        "median per request (µs)", "JSON", "protobuf"
    );
    for (kind, figures) in [("ConfigMap", &config_maps), ("Deployment", &deployments)] {
        for (verb, times) in [("create", &figures.create), ("get", &figures.get)] {
            let json = median(times[0].clone());
            let proto = median(times[1].clone());
            println!(
                "{:<40} {json:>10.0} {proto:>10.0}",
                format!("{verb} {kind}")
            );
            results.insert(
                format!("{verb}_{}_us", kind.to_lowercase()),
                json!({"json": json, "protobuf": proto, "requests": REQUESTS}),
            );
        }
    }
    println!();
    println!("{:<40} {:>10}", "codec alone, median (µs)", "");
    for (what, us) in codec_figures {
        println!("{what:<40} {us:>10.1}");
        results.insert(what.to_lowercase().replace(' ', "_") + "_us", json!(us));
    }
    println!(
        "{:<40} {:>10} {:>10}",
        "Deployment size (bytes)",
        json_bytes.len(),
        encoded.len()
    );
    results.insert(
        "deployment_bytes".into(),
        json!({"json": json_bytes.len(), "protobuf": encoded.len()}),
    );

    let out: PathBuf = [env!("CARGO_MANIFEST_DIR"), "target", "bench-results"]
        .iter()
        .collect();
    std::fs::create_dir_all(&out).expect("results dir");
    std::fs::write(
        out.join("protobuf.json"),
        serde_json::to_string_pretty(&Value::Object(results)).expect("JSON"),
    )
    .expect("results written");
    if verdict == "FAIL" {
        std::process::exit(1);
    }
}
