//! The drift corpus: desired/live pairs under `tests/fixtures/diff/<case>/`, each with
//! the exact verdict and field paths expected (`expected.json`). Cases named `real-*`
//! use objects a real kube-apiserver v1.36 stored. Also: no Secret value in any
//! output format, and the offline `tether diff --path --live` runner end to end.

use std::fs;
use std::path::{Path, PathBuf};
use tether_testkit::assert_contains;

use serde_json::{Value, json};
use tether_core::report::drift::{DriftReport, Format, render};
use tether_core::sync::desired::{
    DesiredError, DesiredInput, ReadOptions, compare_offline, read_desired, read_snapshot,
};
use tether_diff::diff::{
    DiffOptions, ExtraPolicy, IgnoreRule, MaskKey, Mode, OpenApiSchemas, Status, diff_sets,
};
use tether_diff::manifest::{ManifestSet, ParseOptions, parse_files};

/// `tether diff --path desired --live live [--app app]`, in-process.
fn offline_diff(
    desired: &Path,
    live: &Path,
    app: Option<&str>,
) -> Result<DriftReport, DesiredError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let read = ReadOptions {
            app,
            default_namespace: "default",
            scopes: None,
            renderers: &tether_diff::manifest::Renderers::default(),
        };
        let desired = read_desired(DesiredInput::Dir(desired), &read).await?;
        let live = read_snapshot(live, "default")?;
        Ok(DriftReport {
            revision: None,
            objects: compare_offline(&desired.manifests, &live, app, &[]),
            ..DriftReport::default()
        })
    })
}

/// Runs the `tether` binary and returns its exit code and stdout.
fn tether_diff(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg("diff")
        .args(args)
        .output()
        .expect("tether runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/diff")
}

fn parse(path: &Path, name: &str) -> anyhow::Result<ManifestSet> {
    let bytes = fs::read(path.join(name))?;
    parse_files(&[(name, bytes)], &ParseOptions::default())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn rules(expected: &Value) -> Vec<IgnoreRule> {
    let Some(list) = expected.get("ignore").and_then(Value::as_array) else {
        return Vec::new();
    };
    let s = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    list.iter()
        .map(|r| IgnoreRule {
            group: s(r, "group"),
            kind: s(r, "kind"),
            namespace: s(r, "namespace"),
            name: s(r, "name"),
            json_pointers: strings(r.get("jsonPointers")),
            managers: strings(r.get("managers")),
        })
        .collect()
}

fn is_marker(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str)
        .is_some_and(|s| s.starts_with("<secret:") && s.ends_with('>'))
}

/// Runs one case; returns what differs from the expectation.
fn run_case(dir: &Path) -> anyhow::Result<Vec<String>> {
    let expected: Value = serde_json::from_slice(&fs::read(dir.join("expected.json"))?)?;
    let desired = parse(dir, "desired.yaml")?;
    let live = parse(dir, "live.yaml")?;
    let rules = rules(&expected);
    let mode = match expected.get("mode").and_then(Value::as_str) {
        Some("online") => Mode::Online,
        _ => Mode::Offline,
    };
    let mask = MaskKey::new([42; 32]);
    let all = || desired.objects.iter().chain(live.objects.iter());
    let crds = all()
        .filter(|m| m.id.kind == "CustomResourceDefinition")
        .map(|m| &m.object);
    let schemas = OpenApiSchemas::new(all().map(|m| &m.id), crds);
    let opts = DiffOptions {
        mode,
        rules: &rules,
        schema: &schemas,
        mask: &mask,
    };
    let app = expected.get("app").and_then(Value::as_str);
    let extra = app.map_or(ExtraPolicy::Ignore, ExtraPolicy::OwnedBy);
    let out = diff_sets(
        desired.objects.iter().map(|m| (&m.id, &m.object)),
        live.objects.iter().map(|m| (&m.id, &m.object)),
        extra,
        &opts,
    );
    let mut problems = Vec::new();
    let [object] = out.as_slice() else {
        return Ok(vec![format!("expected one object, got {}", out.len())]);
    };
    let status = object.drift.status().as_str();
    if Some(status) != expected["status"].as_str() {
        problems.push(format!("status {status}, expected {}", expected["status"]));
    }
    let got: Vec<String> = object
        .drift
        .changes()
        .iter()
        .map(|c| c.path.to_string())
        .collect();
    let want: Vec<String> = expected["changes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["path"].as_str())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if got != want {
        problems.push(format!("paths {got:?}, expected {want:?}"));
        return Ok(problems);
    }
    for (c, e) in object
        .drift
        .changes()
        .iter()
        .zip(expected["changes"].as_array().into_iter().flatten())
    {
        if e.get("masked").is_some() {
            let live_ok = if e.get("live_absent").is_some() {
                c.live.is_none()
            } else {
                is_marker(c.live.as_ref()) && c.live != c.desired
            };
            if !is_marker(c.desired.as_ref()) || !live_ok {
                problems.push(format!(
                    "{}: not masked: {:?} / {:?}",
                    c.path, c.desired, c.live
                ));
            }
            continue;
        }
        // Absent and null are different: a key missing from the expectation means absent.
        if c.desired.as_ref() != e.get("desired") || c.live.as_ref() != e.get("live") {
            problems.push(format!(
                "{}: desired {:?} live {:?}, expected {:?} / {:?}",
                c.path,
                c.desired,
                c.live,
                e.get("desired"),
                e.get("live")
            ));
        }
    }
    Ok(problems)
}

#[test]
fn corpus_verdicts_and_paths_are_exact() -> anyhow::Result<()> {
    let mut cases: Vec<PathBuf> = fs::read_dir(corpus_dir())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("expected.json").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 30, "the corpus has {} cases", cases.len());
    let real = cases
        .iter()
        .filter(|c| {
            c.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("real-"))
        })
        .count();
    assert!(real >= 5, "{real} cases use recorded server objects");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match run_case(case) {
            Ok(p) if p.is_empty() => {}
            Ok(p) => failures.push(format!("{name}: {}", p.join("; "))),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    Ok(())
}

const PLAIN: &str = "correct-horse-battery";
const OTHER_PLAIN: &str = "tr0ub4dor-and-3";
const TOKEN_PLAIN: &str = "sk_live_token_value";

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    fs::create_dir_all(dir)?;
    fs::write(dir.join(name), text)?;
    Ok(())
}

/// Desired and live trees with a Secret changed, a Secret missing and an owned Secret
/// no longer desired (Extra), so every rendering path sees Secret data.
fn secret_trees(root: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let desired = root.join("desired");
    let live = root.join("live");
    write(
        &desired,
        "secrets.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: db, namespace: shop}}\nstringData:\n  password: {PLAIN}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {{name: new, namespace: shop}}\ndata:\n  token: {}\n",
            b64(TOKEN_PLAIN)
        ),
    )?;
    let last_applied =
        json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": b64(OTHER_PLAIN)}})
            .to_string();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "db", "namespace": "shop", "uid": "1",
                      "labels": {"tether.dev/app": "shop", "app.kubernetes.io/managed-by": "tether"},
                      "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}},
         "data": {"password": b64(OTHER_PLAIN)}},
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "old", "namespace": "shop", "labels": {"tether.dev/app": "shop"}},
         "data": {"token": b64(TOKEN_PLAIN), "password": b64(PLAIN)}}
    ]});
    write(&live, "live.json", &serde_json::to_string_pretty(&list)?)?;
    Ok((desired, live))
}

#[test]
fn no_secret_value_appears_in_any_output_format() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (desired, live) = secret_trees(tmp.path())?;
    let report = offline_diff(&desired, &live, Some("shop"))?;
    let statuses: Vec<_> = report.objects.iter().map(|o| o.drift.status()).collect();
    assert_eq!(
        statuses,
        vec![Status::Modified, Status::Missing, Status::Extra]
    );
    let forbidden = [PLAIN, OTHER_PLAIN, TOKEN_PLAIN]
        .iter()
        .flat_map(|p| [p.to_string(), b64(p)])
        .collect::<Vec<_>>();
    for format in [
        Format::Text { color: false },
        Format::Text { color: true },
        Format::Json,
        Format::Markdown,
        Format::Junit,
    ] {
        let out = render(&report, format);
        assert!(
            out.contains("<secret:") || out.contains("&lt;secret:"),
            "{format:?} shows no masked value:\n{out}"
        );
        for f in &forbidden {
            assert!(
                !out.contains(f.as_str()),
                "{format:?} leaks a Secret value:\n{out}"
            );
        }
    }
    // The change is still seen: the password differs.
    assert_eq!(
        report.objects[0].drift.changes()[0].path.to_string(),
        "data.password"
    );
    Ok(())
}

/// Issue #31: `tether diff --live` read two pairs gitops-engine's own diff tests hold
/// in sync as drift: a ClusterRole with `rules: []` against a live one whose rules the
/// server omitted (or served as null), and a Secret whose data value is `""` against the
/// live `null` the server serves for it. A value given against one the server kept
/// absent is still drift.
#[test]
fn issue31_empty_against_omitted_or_null_reads_in_sync() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (d, l) = (tmp.path().join("d"), tmp.path().join("l"));
    let role =
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: grafana}\n";
    let secret =
        "apiVersion: v1\nkind: Secret\nmetadata: {name: wp, namespace: shop}\ntype: Opaque\n";
    write(
        &d,
        "all.yaml",
        &format!("{role}rules: []\n---\n{secret}data: {{smtp: ''}}\n"),
    )?;
    let run = |live: &str| -> anyhow::Result<(Option<i32>, String)> {
        write(&l, "live.yaml", live)?;
        let args: Vec<&std::ffi::OsStr> = vec![
            "--path".as_ref(),
            d.as_os_str(),
            "--live".as_ref(),
            l.as_os_str(),
            "--color".as_ref(),
            "never".as_ref(),
        ];
        let (code, out, err) = tether_diff(&args);
        Ok((code, format!("{out}{err}")))
    };
    let (code, out) = run(&format!("{role}---\n{secret}data: {{smtp: null}}\n"))?;
    assert_eq!(code, Some(0), "rules omitted, data value null: {out}");
    let (code, out) = run(&format!(
        "{role}rules: null\n---\n{secret}data: {{smtp: null}}\n"
    ))?;
    assert_eq!(code, Some(0), "rules null: {out}");
    let (code, out) = run(&format!("{role}---\n{secret}data: {{}}\n"))?;
    assert_eq!(
        code,
        Some(1),
        "a data key the server keeps, absent live: {out}"
    );
    assert!(out.contains("~ data.smtp"), "{out}");
    write(
        &d,
        "all.yaml",
        &format!("{role}rules: [{{apiGroups: [''], resources: [pods], verbs: [get]}}]\n"),
    )?;
    let (code, out) = run(role)?;
    assert_eq!(code, Some(1), "rules given, none live: {out}");
    assert!(out.contains("~ rules"), "{out}");
    Ok(())
}

#[test]
fn offline_diff_exit_codes_follow_kubectl() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let cm =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata: {k: v}\n";
    write(&tmp.path().join("d"), "cm.yaml", cm)?;
    write(
        &tmp.path().join("l"),
        "cm.yaml",
        &cm.replace("k: v", "k: v, extra: x"),
    )?;
    let (d, l) = (tmp.path().join("d"), tmp.path().join("l"));
    let args = |color: &'static str| -> Vec<&std::ffi::OsStr> {
        vec![
            "--path".as_ref(),
            d.as_os_str(),
            "--live".as_ref(),
            l.as_os_str(),
            "--color".as_ref(),
            color.as_ref(),
        ]
    };
    let (code, out, _) = tether_diff(&args("never"));
    assert_eq!(code, Some(0), "in sync: {out}");
    write(&l, "cm.yaml", &cm.replace("k: v", "k: w"))?;
    let (code, text, _) = tether_diff(&args("never"));
    assert_eq!(code, Some(1), "drift: {text}");
    assert_contains(&text, "Modified: ConfigMap shop/a\n  ~ data.k\n");
    assert!(text.contains("-  k: w\n+  k: v\n"), "{text}");
    assert!(
        text.ends_with("1 object: 0 in sync, 1 modified, 0 missing, 0 extra\n"),
        "{text}"
    );
    write(
        &d,
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
    )?;
    let (code, out, message) = tether_diff(&args("never"));
    assert_eq!(code, Some(2), "an error is never exit 1: {out}");
    assert!(out.is_empty(), "nothing on stdout for an error: {out}");
    assert_contains(
        &message,
        "bad.yaml, document 1, line 1: missing metadata.name",
    );
    Ok(())
}

#[test]
fn json_and_junit_follow_the_contract() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (desired, live) = secret_trees(tmp.path())?;
    let report = DriftReport {
        revision: Some("0123abc".into()),
        ..offline_diff(&desired, &live, Some("shop"))?
    };
    let v: Value = serde_json::from_str(&render(&report, Format::Json))?;
    assert_eq!(v["revision"], "0123abc");
    assert_eq!(
        v["summary"],
        json!({"InSync": 0, "Modified": 1, "Missing": 1, "Extra": 1, "Conflict": 0})
    );
    assert_eq!(v["resources"][0]["apiVersion"], "v1");
    assert_eq!(v["resources"][0]["kind"], "Secret");
    assert_eq!(v["resources"][0]["namespace"], "shop");
    assert_eq!(v["resources"][0]["name"], "db");
    assert_eq!(v["resources"][0]["status"], "Modified");
    assert_eq!(v["resources"][0]["changes"][0]["path"], "data.password");
    assert_eq!(v["resources"][1]["changes"], json!([]));
    let junit = render(&report, Format::Junit);
    assert!(junit.contains("tests=\"3\" failures=\"3\""), "{junit}");
    assert_eq!(junit.matches("<testcase ").count(), 3);
    let md = render(&report, Format::Markdown);
    assert!(
        md.contains("| Modified | 1 |")
            && md.contains("<details><summary>Missing: Secret shop/new</summary>"),
        "{md}"
    );
    Ok(())
}
