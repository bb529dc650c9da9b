//! Post-build substitution figures: what `${var}` substitution adds per object to the
//! render stage, for Deployments of about 60 fields holding 8 placeholders each, and
//! for the same objects holding none (the common case of an app with `postBuild` whose
//! most objects use no variable). Both as [`Substitution::apply`] alone and as the
//! parse of 1,000 YAML documents with and without substitution.
//! Target: under 20 µs per object with placeholders (parsing such an object takes
//! about 200 µs, so substitution stays a small part of a render).
//! `cargo bench --bench substitute [-- --quick]` prints a table, writes
//! `target/bench-results/substitute.json`, and exits 1 when it printed a FAIL.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use tether_diff::manifest::substitute::Substitution;
use tether_diff::manifest::{Origin, ParseOptions, parse_files};

/// The target per object with placeholders (see the module's doc).
const TARGET: Duration = Duration::from_micros(20);

/// Objects per measured set.
const OBJECTS: usize = 1_000;

/// A Deployment of about 60 fields; with `vars`, eight of its strings are placeholders.
fn deployment(i: usize, vars: bool) -> String {
    let v = |name: &str, plain: &str| {
        if vars {
            format!("${{{name}}}")
        } else {
            plain.to_string()
        }
    };
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{i}
  namespace: bench
  labels: {{app: app-{i}, team: core, cluster: \"{cluster}\"}}
  annotations: {{owner: team-core}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: app-{i}}}}}
  template:
    metadata:
      labels: {{app: app-{i}, team: core}}
    spec:
      serviceAccountName: app
      containers:
      - name: main
        image: \"{registry}/team/app-{i}:{tag}\"
        args: [--port, \"8080\", --log-level, info]
        ports: [{{name: http, containerPort: 8080}}]
        env:
        - {{name: MODE, value: production}}
        - {{name: REGION, value: \"{region}\"}}
        - {{name: CLUSTER, value: \"{cluster}\"}}
        - {{name: DOMAIN, value: \"api.{domain}\"}}
        resources:
          requests: {{cpu: 100m, memory: \"{memory}\"}}
          limits: {{cpu: \"1\", memory: 1Gi}}
        readinessProbe: {{httpGet: {{path: /healthz, port: http}}, periodSeconds: 5}}
",
        cluster = v("cluster", "prod"),
        replicas = v("replicas", "3"),
        registry = v("registry", "registry.example.com"),
        tag = v("tag", "1.0.0"),
        region = v("region", "eu-west-1"),
        domain = v("domain", "example.com"),
        memory = v("memory", "128Mi"),
    )
}

fn variables() -> Substitution {
    let mut s = Substitution::new(true);
    for (name, value) in [
        ("cluster", "prod"),
        ("replicas", "3"),
        ("registry", "registry.example.com"),
        ("tag", "1.0.0"),
        ("region", "eu-west-1"),
        ("domain", "example.com"),
        ("memory", "128Mi"),
    ] {
        s.define(name, value, "bench").expect("valid name");
    }
    s
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median time of `apply` over every object of the set (clones made outside it).
fn apply_time(objects: &[serde_json::Value], vars: &Substitution, runs: usize) -> Duration {
    let origin = Origin {
        file: "bench.yaml".into(),
        document: 1,
        line: 1,
        item: None,
    };
    let samples = (0..runs)
        .map(|_| {
            let mut copies = objects.to_vec();
            let started = Instant::now();
            for object in &mut copies {
                vars.apply(object, &origin).expect("substitutes");
            }
            let took = started.elapsed();
            black_box(copies);
            took
        })
        .collect();
    median(samples)
}

/// Median time of parsing the set's YAML, with `vars` or without substitution.
fn parse_time(yaml: &str, vars: Option<&Substitution>, runs: usize) -> Duration {
    let files = [("bench.yaml", yaml.as_bytes())];
    let opts = ParseOptions {
        substitute: vars,
        ..ParseOptions::default()
    };
    let samples = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let set = parse_files(&files, &opts).expect("parses");
            let took = started.elapsed();
            assert_eq!(set.len(), OBJECTS);
            black_box(set);
            took
        })
        .collect();
    median(samples)
}

fn per_object_us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6 / OBJECTS as f64
}

fn main() {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let runs = if quick { 3 } else { 15 };
    let vars = variables();
    let mut rows = Vec::new();
    let mut failed = false;
    println!(
        "post-build substitution, {OBJECTS} Deployments per set (medians of {runs} runs{})",
        if quick { ", --quick" } else { "" }
    );
    println!(
        "{:<22} {:>14} {:>16} {:>16} {:>14} {:>8}",
        "objects", "apply/object", "parse/object", "parse+subst/obj", "added/object", "verdict"
    );
    for (name, with_vars) in [("8 placeholders each", true), ("no placeholders", false)] {
        let yaml: String = (0..OBJECTS)
            .map(|i| format!("---\n{}", deployment(i, with_vars)))
            .collect();
        let objects = parse_files(&[("bench.yaml", yaml.as_bytes())], &ParseOptions::default())
            .expect("parses")
            .objects
            .into_iter()
            .map(|m| m.object)
            .collect::<Vec<_>>();
        let apply = apply_time(&objects, &vars, runs);
        let plain = parse_time(&yaml, None, runs);
        let substituted = parse_time(&yaml, Some(&vars), runs);
        let added = substituted.saturating_sub(plain);
        let ok = apply < TARGET * OBJECTS as u32;
        failed |= !ok;
        println!(
            "{:<22} {:>12.2}µs {:>14.2}µs {:>14.2}µs {:>12.2}µs {:>8}",
            name,
            per_object_us(apply),
            per_object_us(plain),
            per_object_us(substituted),
            per_object_us(added),
            if ok { "ok" } else { "FAIL" }
        );
        rows.push(json!({
            "objects": name,
            "apply_us_per_object": per_object_us(apply),
            "parse_us_per_object": per_object_us(plain),
            "parse_with_substitution_us_per_object": per_object_us(substituted),
            "added_us_per_object": per_object_us(added),
            "ok": ok,
        }));
    }
    println!("target: apply < {} µs per object", TARGET.as_micros());
    let out: PathBuf = [env!("CARGO_MANIFEST_DIR"), "target", "bench-results"]
        .iter()
        .collect();
    std::fs::create_dir_all(&out).expect("mkdir bench-results");
    let report = json!({
        "bench": "substitute",
        "quick": quick,
        "objects_per_set": OBJECTS,
        "target_us_per_object": TARGET.as_micros(),
        "sets": rows,
    });
    std::fs::write(
        out.join("substitute.json"),
        serde_json::to_string_pretty(&report).expect("JSON"),
    )
    .expect("write substitute.json");
    if failed {
        std::process::exit(1);
    }
}
