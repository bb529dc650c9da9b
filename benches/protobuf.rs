//! Protobuf next to its JSON twin (issue #15): the per-request cost of creating and
//! getting a ConfigMap and a Deployment against the in-process sandbox over HTTPS, each
//! request timed alone, the two formats interleaved so that both see the same machine;
//! and the codec alone against serde_json for the same objects.
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
    let (config_maps, deployments) = runtime.block_on(async {
        let sandbox = Sandbox::start(SandboxOptions::default())
            .await
            .expect("the sandbox starts");
        // Nothing else writes while timing.
        sandbox.set_deployment_controller_delay(None);
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
        (config_maps, deployments)
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

    println!(
        "{:<40} {:>10} {:>10}",
        "median per request (µs)", "JSON", "protobuf"
    );
    let mut results = serde_json::Map::new();
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
}
