//! Drift engine figures: 1k/5k/10k Deployments of about 60 fields compared in memory
//! on one core (target: 10,000 in < 100 ms, linear in count and in size), and the
//! offline `tether diff --path --live` of 10,000 objects on disk (target: < 1 s), with
//! the manifest reader next to serde-saphyr alone on the same YAML.
//! Each figure is the median run's wall and CPU time (of the same run), with the
//! recorded OpenAPI schemas of the kinds compared. Prints a table and writes
//! target/bench-results/diff.json; a missed target prints FAIL and the bench exits 1.
//! `-- --quick`: the 1,000-object in-memory diff alone, in seconds.
//! Memory (issue #31): the peak RSS of a `tether diff` process (`ru_maxrss` from
//! `wait4`) against a `tether sandbox` holding 1,000 and 10,000 objects in sync
//! (targets: < 50 and < 150 MiB), kubectl diff's at 1,000 beside it; `-- --memory`
//! runs these figures alone (`-- --memory --quick`: 1,000 objects only).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether_diff::diff::{DiffOptions, Drift, MaskKey, Mode, OpenApiSchemas, diff};
use tether_diff::manifest::ObjectId;

/// A Deployment as people write it, with `containers` containers.
fn desired(i: usize, containers: usize) -> Value {
    let cs: Vec<Value> = (0..containers)
        .map(|c| {
            json!({
                "name": format!("c{c}"),
                "image": format!("registry.example.com/team/app-{i}:1.{c}.0"),
                "args": ["--port", "8080", "--log-level", "info"],
                "ports": [{"name": "http", "containerPort": 8080 + c}],
                "env": [{"name": "MODE", "value": "production"}, {"name": "REGION", "value": "eu-west-1"},
                        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]
            })
        })
        .collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("app-{i}"), "namespace": "bench",
                     "labels": {"app": format!("app-{i}"), "team": "core", "app.kubernetes.io/part-of": "shop"},
                     "annotations": {"owner": "team-core"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": format!("app-{i}")}},
            "template": {
                "metadata": {"labels": {"app": format!("app-{i}"), "team": "core"}},
                "spec": {"serviceAccountName": "app", "containers": cs,
                         "volumes": [{"name": "config", "configMap": {"name": format!("app-{i}")}}]}
            }
        }
    })
}

/// The same object as the API server stores it: defaults, server metadata, status,
/// quantities canonicalised, ports with their protocol, lists in another order.
fn live(i: usize, containers: usize, drifted: bool) -> Value {
    let mut l = desired(i, containers);
    l["metadata"]["uid"] = json!(format!("uid-{i}"));
    l["metadata"]["resourceVersion"] = json!("12345");
    l["metadata"]["generation"] = json!(2);
    l["metadata"]["creationTimestamp"] = json!("2026-11-01T10:00:00Z");
    l["metadata"]["managedFields"] =
        json!([{"manager": "tether", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]);
    l["spec"]["revisionHistoryLimit"] = json!(10);
    l["spec"]["progressDeadlineSeconds"] = json!(600);
    l["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
    let spec = &mut l["spec"]["template"]["spec"];
    spec["restartPolicy"] = json!("Always");
    spec["dnsPolicy"] = json!("ClusterFirst");
    spec["terminationGracePeriodSeconds"] = json!(30);
    if let Some(cs) = spec["containers"].as_array_mut() {
        for c in cs.iter_mut() {
            c["ports"][0]["protocol"] = json!("TCP");
            c["resources"]["limits"]["cpu"] = json!("1000m");
            c["terminationMessagePath"] = json!("/dev/termination-log");
            c["imagePullPolicy"] = json!("IfNotPresent");
            if let Some(env) = c["env"].as_array_mut() {
                env.reverse();
            }
        }
        cs.reverse();
        if drifted {
            cs[0]["image"] = json!("registry.example.com/team/app:old");
        }
    }
    l["status"] = json!({"replicas": 3, "readyReplicas": 3, "observedGeneration": 2});
    l
}

fn leaf_count(v: &Value) -> usize {
    match v {
        Value::Object(m) => m.values().map(leaf_count).sum(),
        Value::Array(a) => a.iter().map(leaf_count).sum(),
        _ => 1,
    }
}

fn ident(i: usize) -> ObjectId {
    ObjectId {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        namespace: Some("bench".into()),
        name: format!("app-{i}"),
    }
}

struct Row {
    name: String,
    objects: usize,
    fields: usize,
    wall: Duration,
    /// CPU time: of this thread in memory; of the whole process on disk (the parser
    /// runs on its own thread).
    cpu: Duration,
    target: Option<Duration>,
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// The median of `runs`, wall and CPU time of that same run (the run whose wall time
/// is the median): CPU time is what "on one core" means, and unlike wall time it is
/// not inflated by the other processes sharing the machine's two cores. Minimums from
/// different runs would describe a run that never happened.
fn median_of<F: FnMut()>(runs: usize, clock: libc::clockid_t, mut f: F) -> (Duration, Duration) {
    let mut samples: Vec<(Duration, Duration)> = (0..runs)
        .map(|_| {
            let (t, c) = (Instant::now(), cpu_clock(clock));
            f();
            (t.elapsed(), cpu_clock(clock).saturating_sub(c))
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn in_memory(n: usize, containers: usize, target: Option<Duration>) -> Row {
    let pairs: Vec<(ObjectId, Value, Value)> = (0..n)
        .map(|i| {
            (
                ident(i),
                desired(i, containers),
                live(i, containers, i % 10 == 0),
            )
        })
        .collect();
    let fields = leaf_count(&pairs[0].1);
    let mask = MaskKey::new([0; 32]);
    let schemas = OpenApiSchemas::new(pairs.iter().map(|(id, _, _)| id), []);
    let opts = DiffOptions {
        mode: Mode::Offline,
        rules: &[],
        schema: &schemas,
        mask: &mask,
    };
    let mut modified = 0;
    let (wall, cpu) = median_of(5, libc::CLOCK_THREAD_CPUTIME_ID, || {
        modified = 0;
        for (id, d, l) in &pairs {
            if let Drift::Modified(_) = black_box(diff(id, Some(d), Some(l), &opts)) {
                modified += 1;
            }
        }
    });
    assert_eq!(modified, n.div_ceil(10), "every tenth object drifted");
    Row {
        name: format!("in-memory diff, {containers} container(s)"),
        objects: n,
        fields,
        wall,
        cpu,
        target,
    }
}

/// A yardstick for how fast this machine is right now: serde_json parsing the same
/// objects as JSON text (a well-known speed), measured in the same run.
fn reference(n: usize) -> Row {
    let texts: Vec<String> = (0..n)
        .map(|i| serde_json::to_string(&desired(i, 2)).unwrap_or_default())
        .collect();
    let (wall, cpu) = median_of(5, libc::CLOCK_THREAD_CPUTIME_ID, || {
        for t in &texts {
            black_box(serde_json::from_str::<Value>(t).ok());
        }
    });
    Row {
        name: "reference: serde_json parse, same objects".into(),
        objects: n,
        fields: leaf_count(&desired(0, 2)),
        wall,
        cpu,
        target: None,
    }
}

/// Reading manifests: `n` Deployments as YAML, 100 to a file, through tether's reader
/// (one file at a time, so on one thread) and through serde-saphyr alone.
fn yaml_read(n: usize) -> [Row; 2] {
    let files: Vec<(String, String)> = (0..n / 100)
        .map(|f| {
            let text: String = (f * 100..(f + 1) * 100)
                .map(|i| {
                    format!(
                        "---\n{}",
                        serde_saphyr::to_string(&desired(i, 2)).unwrap_or_default()
                    )
                })
                .collect();
            (format!("apps-{f:04}.yaml"), text)
        })
        .collect();
    let options = tether_diff::manifest::ParseOptions::default();
    let mut read = 0;
    let (wall, cpu) = median_of(3, libc::CLOCK_PROCESS_CPUTIME_ID, || {
        read = files
            .iter()
            .map(|file| {
                tether_diff::manifest::parse_files(std::slice::from_ref(file), &options)
                    .map_or(0, |set| set.objects.len())
            })
            .sum();
    });
    assert_eq!(read, n, "every object read");
    let (general_wall, general_cpu) = median_of(3, libc::CLOCK_PROCESS_CPUTIME_ID, || {
        for (_, text) in &files {
            for doc in text.split("---\n").filter(|d| !d.is_empty()) {
                black_box(serde_saphyr::from_str::<Value>(doc).ok());
            }
        }
    });
    let row = |name: &str, wall, cpu| Row {
        name: name.into(),
        objects: n,
        fields: leaf_count(&desired(0, 2)),
        wall,
        cpu,
        target: None,
    };
    [
        row("YAML read: tether_diff::manifest", wall, cpu),
        row(
            "reference: serde-saphyr, same YAML",
            general_wall,
            general_cpu,
        ),
    ]
}

fn on_disk(n: usize) -> std::io::Result<Row> {
    let tmp = std::env::temp_dir().join(format!("tether-bench-diff-{}", std::process::id()));
    let (ddir, ldir) = (tmp.join("desired"), tmp.join("live"));
    std::fs::create_dir_all(&ddir)?;
    std::fs::create_dir_all(&ldir)?;
    let per_file = 100;
    for f in 0..n / per_file {
        let mut text = String::new();
        let mut items = Vec::new();
        for i in f * per_file..(f + 1) * per_file {
            text.push_str("---\n");
            text.push_str(&serde_saphyr::to_string(&desired(i, 2)).unwrap_or_default());
            items.push(live(i, 2, i % 10 == 0));
        }
        std::fs::write(ddir.join(format!("apps-{f:04}.yaml")), text)?;
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(
            ldir.join(format!("live-{f:04}.yaml")),
            serde_saphyr::to_string(&list).unwrap_or_default(),
        )?;
    }
    let fields = leaf_count(&desired(0, 2));
    let mut count = 0;
    // End to end, as CI runs it: the binary parses both trees, compares and renders.
    let (wall, _) = median_of(3, libc::CLOCK_PROCESS_CPUTIME_ID, || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
            .args(["diff", "-o", "json", "--path"])
            .arg(&ddir)
            .arg("--live")
            .arg(&ldir)
            .output()
            .expect("tether runs");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        count = report["resources"].as_array().map(Vec::len).unwrap_or(0);
    });
    // The child's CPU time is not this process's; report wall time for both.
    let cpu = wall;
    std::fs::remove_dir_all(&tmp)?;
    assert_eq!(count, n, "every object compared");
    Ok(Row {
        name: "tether diff --path --live (process, end to end)".into(),
        objects: n,
        fields,
        wall,
        cpu,
        target: Some(Duration::from_secs(1)),
    })
}

/// A `tether sandbox` process holding `n` objects applied by kubectl from files in a
/// folder of their own: a Deployment, a Service and two ConfigMaps per four, and their
/// Namespace.
struct Applied {
    tmp: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
    sandbox: std::process::Child,
}

impl Applied {
    fn start(n: usize, name: &str) -> std::io::Result<Applied> {
        use std::io::BufRead as _;
        use std::process::{Command, Stdio};

        let tmp = std::env::temp_dir().join(format!("tether-bench-{name}-{}", std::process::id()));
        let (dir, kubeconfig) = (tmp.join("manifests"), tmp.join("kubeconfig"));
        std::fs::create_dir_all(&dir)?;
        let mut sandbox = Command::new(env!("CARGO_BIN_EXE_tether"))
            .args(["sandbox", "--kubeconfig"])
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut ready = String::new();
        std::io::BufReader::new(
            sandbox
                .stdout
                .take()
                .ok_or_else(|| std::io::Error::other("no stdout"))?,
        )
        .read_line(&mut ready)?;
        std::fs::write(
            dir.join("00-namespace.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: bench}\n",
        )?;
        for i in 0..n - 1 {
            let text = match i % 4 {
                0 => format!(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app-{i}, namespace: bench}}\nspec:\n  selector: {{matchLabels: {{app: app-{i}}}}}\n  template:\n    metadata: {{labels: {{app: app-{i}}}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n        ports: [{{containerPort: 8080}}]\n        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}\n"
                ),
                1 => format!(
                    "apiVersion: v1\nkind: Service\nmetadata: {{name: app-{i}, namespace: bench}}\nspec:\n  selector: {{app: app-{i}}}\n  ports: [{{port: 80, targetPort: 8080}}]\n"
                ),
                _ => format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app-{i}, namespace: bench}}\ndata: {{key: value-{i}}}\n"
                ),
            };
            std::fs::write(dir.join(format!("{i:05}.yaml")), text)?;
        }
        let applied = Applied {
            tmp,
            dir,
            kubeconfig,
            sandbox,
        };
        // Without --validate=false kubectl checks each object against the OpenAPI
        // documents on the client (about 40 ms of CPU each): 10,000 took longer than
        // 14 minutes to populate, the sandbox idle.
        let out = applied
            .kubectl(&["apply", "--server-side", "--validate=false", "-f"])
            .output()?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(applied)
    }

    /// `kubectl ARGS <folder>`.
    fn kubectl(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .arg(&self.dir)
            .env("HOME", &self.tmp);
        c
    }

    /// `tether diff -o json` of the folder.
    fn tether_diff(&self) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_tether"));
        c.args(["diff", "-o", "json", "--kubeconfig"])
            .arg(&self.kubeconfig)
            .arg("--path")
            .arg(&self.dir);
        c
    }

    fn stop(mut self) -> std::io::Result<()> {
        let _ = self.sandbox.kill();
        let _ = self.sandbox.wait();
        std::fs::remove_dir_all(&self.tmp)
    }
}

/// Online: `tether diff` of `n` objects against a sandbox process, next to `kubectl
/// diff --server-side -f` of the same files, in the same run (target: tether at most
/// half of kubectl's wall time).
fn online(n: usize) -> std::io::Result<[Row; 2]> {
    let applied = Applied::start(n, "online")?;
    let time_median = |mut command: std::process::Command| -> std::io::Result<Duration> {
        let mut samples = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            let out = command.output()?;
            let elapsed = started.elapsed();
            assert_eq!(
                out.status.code(),
                Some(0),
                "in sync: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            samples.push(elapsed);
        }
        samples.sort();
        Ok(samples[samples.len() / 2])
    };
    let tether = time_median(applied.tether_diff())?;
    let kubectl_time = time_median(applied.kubectl(&["diff", "--server-side", "-f"]))?;
    applied.stop()?;
    let row = |name: &str, wall: Duration, target: Option<Duration>| Row {
        name: name.into(),
        objects: n,
        fields: 0,
        wall,
        cpu: wall,
        target,
    };
    Ok([
        row(
            "tether diff, online (sandbox)",
            tether,
            Some(kubectl_time / 2),
        ),
        row(
            "kubectl diff --server-side (same files)",
            kubectl_time,
            None,
        ),
    ])
}

/// Issue #31's memory targets for `tether diff` (online, in sync): peak RSS by objects.
const DIFF_PEAK_RSS_MIB: [(usize, f64); 2] = [(1_000, 50.0), (10_000, 150.0)];

/// One child's peak resident memory.
struct Memory {
    name: String,
    objects: usize,
    peak_mib: f64,
    target_mib: Option<f64>,
}

/// Runs `command` to its end and returns its peak RSS in MiB: `ru_maxrss` of that
/// child alone, from `wait4` (the kernel's high-water mark of its resident set).
fn peak_rss_mib(command: &mut std::process::Command) -> std::io::Result<f64> {
    let command = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    Ok(tether_testkit::proc::run_measured(command)?.peak_rss_mib)
}

/// `tether diff`'s peak RSS against a sandbox holding each number of objects, in
/// sync; kubectl diff's next to the 1,000 for scale.
fn memory(sizes: &[(usize, f64)]) -> std::io::Result<Vec<Memory>> {
    let mut rows = Vec::new();
    for &(n, target) in sizes {
        let applied = Applied::start(n, "memory")?;
        rows.push(Memory {
            name: "tether diff, online: peak RSS".into(),
            objects: n,
            peak_mib: peak_rss_mib(&mut applied.tether_diff())?,
            target_mib: Some(target),
        });
        if n == 1_000 {
            rows.push(Memory {
                name: "kubectl diff --server-side: peak RSS".into(),
                objects: n,
                peak_mib: peak_rss_mib(&mut applied.kubectl(&["diff", "--server-side", "-f"]))?,
                target_mib: None,
            });
        }
        applied.stop()?;
    }
    Ok(rows)
}

fn main() -> std::io::Result<()> {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?").to_string();
    let mut rows = Vec::new();
    let quick = std::env::args().any(|a| a == "--quick");
    if std::env::args().any(|a| a == "--memory") {
        let sizes = if quick { 1 } else { DIFF_PEAK_RSS_MIB.len() };
        let memory = memory(&DIFF_PEAK_RSS_MIB[..sizes])?;
        return report(&load, &[], &memory, "diff-memory.json");
    }
    if quick {
        // The CI cut-down (dev profile, unoptimised: ten times the per-object budget).
        rows.push(in_memory(1_000, 2, Some(Duration::from_millis(100))));
        return report(&load, &rows, &[], "diff-quick.json");
    }
    for n in [1_000, 5_000, 10_000] {
        let target = (n == 10_000).then_some(Duration::from_millis(100));
        rows.push(in_memory(n, 2, target));
    }
    for containers in [1, 4] {
        rows.push(in_memory(10_000, containers, None));
    }
    rows.push(reference(10_000));
    rows.extend(yaml_read(10_000));
    rows.push(on_disk(10_000)?);
    rows.extend(online(1_000)?);
    report(&load, &rows, &memory(&DIFF_PEAK_RSS_MIB)?, "diff.json")
}

/// Prints the table and writes `file`; a missed target is FAIL, and the bench exits 1.
fn report(load: &str, rows: &[Row], memory: &[Memory], file: &str) -> std::io::Result<()> {
    println!("load average at start: {load} (2 cores, shared); targets judged on CPU time");
    println!(
        "{:<38} {:>7} {:>6} {:>10} {:>10} {:>11} {:>12}",
        "benchmark", "objects", "fields", "wall", "cpu", "cpu/object", "target"
    );
    let mut json_rows = Vec::new();
    for r in rows {
        let per = r.cpu / u32::try_from(r.objects).unwrap_or(1);
        let verdict = match r.target {
            Some(t) if r.cpu <= t => format!("< {t:?} ok"),
            Some(t) => format!("> {t:?} FAIL"),
            None => String::new(),
        };
        println!(
            "{:<38} {:>7} {:>6} {:>8.1}ms {:>8.1}ms {:>9.2}µs {:>12}",
            r.name,
            r.objects,
            r.fields,
            r.wall.as_secs_f64() * 1e3,
            r.cpu.as_secs_f64() * 1e3,
            per.as_secs_f64() * 1e6,
            verdict
        );
        json_rows.push(json!({
            "name": r.name, "objects": r.objects, "fields_per_object": r.fields,
            "wall_ms": r.wall.as_secs_f64() * 1e3, "cpu_ms": r.cpu.as_secs_f64() * 1e3,
            "cpu_per_object_us": per.as_secs_f64() * 1e6,
            "target_ms": r.target.map(|t| t.as_secs_f64() * 1e3),
            "met": r.target.map(|t| r.cpu <= t),
        }));
    }
    let mut memory_rows = Vec::new();
    for m in memory {
        let verdict = match m.target_mib {
            Some(t) if m.peak_mib < t => format!("< {t:.0} MiB ok"),
            Some(t) => format!(">= {t:.0} MiB FAIL"),
            None => String::new(),
        };
        println!(
            "{:<38} {:>7} {:>6} {:>19.1} MiB {:>17}",
            m.name, m.objects, "", m.peak_mib, verdict
        );
        memory_rows.push(json!({
            "name": m.name, "objects": m.objects, "peak_rss_mib": m.peak_mib,
            "target_mib": m.target_mib, "met": m.target_mib.map(|t| m.peak_mib < t),
        }));
    }
    let dir = PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into()))
        .join("bench-results");
    std::fs::create_dir_all(&dir)?;
    let build = if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    };
    let out = json!({"benchmark": "diff", "threads": 1, "load_average": load, "build": build,
                     "results": json_rows, "memory": memory_rows});
    std::fs::write(
        dir.join(file),
        serde_json::to_string_pretty(&out).unwrap_or_default(),
    )?;
    println!("wrote {}", dir.join(file).display());
    let over = memory
        .iter()
        .any(|m| m.target_mib.is_some_and(|t| m.peak_mib >= t));
    if over || rows.iter().any(|r| r.target.is_some_and(|t| r.cpu > t)) {
        std::process::exit(1);
    }
    Ok(())
}
