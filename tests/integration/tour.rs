//! The five-minute tour of `docs/getting-started.md` runs as written (issue #31): its
//! commands, taken from the page itself, run one after another in one fresh `bash` in a
//! fresh repository holding this one's `examples/`, and print what the page shows. Only what a test
//! must change is changed: `cargo build` is the test's own build (its binary is linked
//! where the build puts it), `/tmp/tour` is a temporary directory and the port
//! `127.0.0.1:8080` a free one.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tether_testkit::free_port;

/// Far more than the tour takes (seconds): it only bounds a hung step.
const TOUR_LIMIT: Duration = Duration::from_secs(120);

/// One command of the tour and the output the page shows after it.
#[derive(Debug)]
struct Step {
    command: String,
    expected: Vec<String>,
}

/// The tour's commands, in order: the lines of its code blocks, or in a block that
/// shows a session, the lines after `$ ` with the output shown below each.
fn tour_steps(page: &str) -> Vec<Step> {
    let tour = page
        .strip_prefix("# A five-minute tour\n")
        .expect("docs/getting-started.md is the tour");
    let mut steps = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in tour.lines() {
        match (&mut block, line) {
            (None, "```" | "```sh") => block = Some(Vec::new()),
            (Some(lines), "```") => {
                let session = lines.iter().any(|l| l.starts_with("$ "));
                for l in lines.iter() {
                    match l.strip_prefix("$ ") {
                        Some(command) => steps.push(Step {
                            command: command.to_string(),
                            expected: Vec::new(),
                        }),
                        None if session => steps
                            .last_mut()
                            .expect("output follows a command")
                            .expected
                            .push(l.to_string()),
                        None if !l.trim().is_empty() => steps.push(Step {
                            command: l.to_string(),
                            expected: Vec::new(),
                        }),
                        None => {}
                    }
                }
                block = None;
            }
            (Some(lines), _) => lines.push(line),
            (None, _) => {}
        }
    }
    steps
}

/// Whether `output` has a line matching `expected`, where `…` stands for anything and
/// runs of spaces for any run of spaces.
fn shows(output: &str, expected: &str) -> bool {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let parts: Vec<String> = expected.split('…').map(squash).collect();
    output.lines().map(squash).any(|line| {
        let mut rest = line.as_str();
        parts.iter().all(|part| match rest.find(part.as_str()) {
            Some(at) => {
                rest = &rest[at + part.len()..];
                true
            }
            None => false,
        })
    })
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh repository with this one's `examples/` committed, and the test's tether
/// binary where `cargo build` puts it.
fn fresh_clone(dir: &Path, port: u16) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let copied = Command::new("cp")
        .arg("-R")
        .arg(root.join("examples"))
        .arg(dir)
        .status()
        .expect("cp runs");
    assert!(copied.success());
    let config = dir.join("examples/tour/tether.yaml");
    let text = std::fs::read_to_string(&config).expect("examples/tour/tether.yaml");
    assert!(text.contains("127.0.0.1:8080"), "{text}");
    std::fs::write(
        &config,
        text.replace("127.0.0.1:8080", &format!("127.0.0.1:{port}")),
    )
    .expect("write");
    git(dir, &["init", "--quiet", "--initial-branch=main"]);
    git(dir, &["add", "."]);
    git(
        dir,
        &[
            "-c",
            "user.name=tour",
            "-c",
            "user.email=tour@tether.invalid",
            "commit",
            "--quiet",
            "-m",
            "examples",
        ],
    );
    let bin = dir.join("target/debug");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tether"), bin.join("tether")).expect("link");
}

#[test]
fn the_getting_started_tour_runs_as_written_in_a_fresh_shell() {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/getting-started.md"),
    )
    .expect("docs/getting-started.md");
    let steps = tour_steps(&page);
    assert!(
        steps.iter().any(|s| s.command == "cargo build")
            && steps.iter().any(|s| s.command.starts_with("export PATH=")),
        "the tour says how to build tether and find it: {steps:?}"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let clone = tmp.path().join("tether");
    let tour = tmp.path().join("tour");
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&clone).expect("mkdir");
    std::fs::create_dir_all(&out).expect("mkdir");
    let port = free_port();
    fresh_clone(&clone, port);

    // One script, one shell: each command's output and exit code kept by number; a
    // command sent to the background runs as written.
    let mut script = String::from(
        "set -u\ntrap 'exit 143' TERM\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n",
    );
    let mut run = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if step.command == "cargo build" {
            continue;
        }
        let command = step
            .command
            .replace("/tmp/tour", tour.to_str().expect("utf-8"))
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"));
        if command.trim_end().ends_with('&') {
            script.push_str(&format!("{command}\n"));
        } else {
            let file = out.join(i.to_string());
            let file = file.display();
            script.push_str(&format!(
                "{{ {command}\n}} > {file}.out 2> {file}.err; echo $? > {file}.code\n"
            ));
            run.push((i, step));
        }
    }
    let ran = Command::new("timeout")
        .arg(TOUR_LIMIT.as_secs().to_string())
        .args(["bash", "--noprofile", "--norc", "-c", &script])
        .current_dir(&clone)
        .env("HOME", tmp.path())
        .env_remove("KUBECONFIG")
        .env_remove("TETHER_CACHE_DIR")
        .env_remove("TETHER_SERVER")
        .output()
        .expect("bash runs the tour");
    let log = |name: &str| std::fs::read_to_string(tour.join(name)).unwrap_or_default();
    let context = || {
        format!(
            "script:\n{script}\nstderr: {}\nsandbox.log (tail): {}\nserve.log (tail): {}",
            String::from_utf8_lossy(&ran.stderr),
            log("sandbox.log")
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n"),
            log("serve.log")
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n"),
        )
    };
    assert_eq!(ran.status.code(), Some(0), "{}", context());
    for (i, step) in run {
        let read =
            |ext: &str| std::fs::read_to_string(out.join(format!("{i}.{ext}"))).unwrap_or_default();
        let (stdout, stderr, code) = (read("out"), read("err"), read("code"));
        let code: i32 = code
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("`{}` did not run\n{}", step.command, context()));
        // `tether diff` exits 1 when it finds drift, as the tour shows it does.
        let allowed: &[i32] = if step.command.starts_with("tether diff") {
            &[0, 1]
        } else {
            &[0]
        };
        assert!(
            allowed.contains(&code),
            "`{}` exited {code}\nstdout:\n{stdout}\nstderr:\n{stderr}\n{}",
            step.command,
            context()
        );
        for expected in step.expected.iter().filter(|l| l.as_str() != "…") {
            assert!(
                shows(&stdout, expected),
                "`{}` did not print {expected:?}:\n{stdout}\nstderr:\n{stderr}",
                step.command
            );
        }
    }
}

#[test]
fn a_tour_line_matches_with_ellipses_and_any_spacing() {
    assert!(shows("a  b   c\n", "a b c"));
    assert!(shows(
        "x\nhello  Synced  Healthy  abc123  Ready  Succeeded 3ms\n",
        "hello  Synced  Healthy  …  Ready   Succeeded …"
    ));
    assert!(!shows("hello  OutOfSync\n", "hello  Synced …"));
}
