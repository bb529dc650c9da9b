//! The documentation agrees with the code (issue #7): `docs/cli.md` is what
//! `docs/generate-cli.sh` makes from the binary's `--help`, every command's help is in it
//! verbatim, the README gives the commands CI and the quickstart really run, the
//! configuration reference names every option, and the comparison with Argo CD and Flux
//! claims for tether exactly the features tether has.

use std::path::{Path, PathBuf};
use std::process::Command;

const TETHER: &str = env!("CARGO_BIN_EXE_tether");

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_file(path)).unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// `tether ARGS --help` as the reference shows it: no environment values, no terminal.
fn help(args: &[&str]) -> String {
    let out = Command::new(TETHER)
        .args(args)
        .arg("--help")
        .env_remove("TETHER_CACHE_DIR")
        .env_remove("TETHER_SERVER")
        .env_remove("COLUMNS")
        .env_remove("LINES")
        .output()
        .expect("the tether binary runs");
    assert!(out.status.success(), "tether {args:?} --help failed");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands `tether --help` lists (clap's `help` aside).
fn commands() -> Vec<String> {
    help(&[])
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

const STALE: &str = "docs/cli.md is stale: regenerate it with `docs/generate-cli.sh > docs/cli.md`";

#[test]
fn cli_reference_is_what_the_generator_prints() {
    let out = Command::new("bash")
        .arg(repo_file("docs/generate-cli.sh"))
        .env("TETHER", TETHER)
        .output()
        .expect("bash runs docs/generate-cli.sh");
    assert!(
        out.status.success(),
        "docs/generate-cli.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).expect("UTF-8");
    let committed = read("docs/cli.md");
    if generated != committed {
        let line = generated
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "their ends".to_string(), |i| format!("line {}", i + 1));
        panic!("{STALE} (first difference at {line})");
    }
}

#[test]
fn cli_reference_has_every_commands_help_verbatim() {
    let doc = read("docs/cli.md");
    let commands = commands();
    for expected in ["sandbox", "source", "diff", "sync", "serve", "status"] {
        assert!(
            commands.iter().any(|c| c == expected),
            "`tether --help` does not list {expected}: {commands:?}"
        );
    }
    let top = format!("## tether\n\n```text\n{}```\n", help(&[]));
    assert!(doc.contains(&top), "{STALE}: `tether --help` differs");
    for command in &commands {
        let section = format!(
            "## tether {command}\n\n```text\n{}```\n",
            help(&[command.as_str()])
        );
        assert!(
            doc.contains(&section),
            "{STALE}: `tether {command} --help` differs"
        );
    }
}

/// The fenced `sh` blocks of a Markdown text, in order.
fn sh_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(block.trim_end().to_string());
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn readme_gives_the_quickstart_first_and_the_test_command_ci_runs() {
    let readme = read("README.md");
    let blocks = sh_blocks(&readme);
    assert_eq!(
        blocks.first().map(String::as_str),
        Some("examples/quickstart/quickstart.sh"),
        "the README's first command is the quickstart"
    );
    assert!(
        repo_file("examples/quickstart/quickstart.sh").is_file(),
        "the quickstart script exists"
    );
    assert_eq!(
        blocks.get(1).map(String::as_str),
        Some("cargo test"),
        "the README's second command is the test command"
    );
    // .ci/run runs exactly the README's test command, after the line that says so.
    let ci = read(".ci/run");
    let after = ci
        .split("# The test command, as README.md gives it:\n")
        .nth(1)
        .expect(".ci/run marks the README's test command");
    assert_eq!(after.lines().next(), Some("cargo test"));
}

/// Every key path of a YAML mapping, `a.b.c`, list items as `a[]`.
fn key_paths(value: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                out.push(path.clone());
                key_paths(child, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                key_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_configuration_reference_documents_every_key_of_the_example() {
    let example: serde_json::Value =
        serde_saphyr::from_str(&read("examples/config/tether.yaml")).expect("example parses");
    let mut paths = Vec::new();
    key_paths(&example, "", &mut paths);
    paths.sort();
    paths.dedup();
    assert!(
        paths.len() > 40,
        "the example names every option: {paths:?}"
    );
    let reference = read("docs/configuration.md");
    // The reference documents a webhook secret's keys once, for every provider.
    let documented = |path: &str| {
        let general = [
            "github",
            "gitlab",
            "gitea",
            "bitbucket",
            "azuredevops",
            "generic",
        ]
        .iter()
        .fold(path.to_string(), |p, provider| {
            p.replace(
                &format!("server.webhooks.{provider}."),
                "server.webhooks.<provider>.",
            )
        });
        reference.contains(&format!("`{general}`"))
    };
    let missing: Vec<&String> = paths.iter().filter(|p| !documented(p)).collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md lacks {missing:?}"
    );
}

/// What the product says of itself, to hold the comparison's claims against: the CLI
/// reference (generated from `--help`, kept fresh by the tests above) and the CRDs that
/// `tether crd` installs.
struct Product {
    cli: String,
    crds: String,
}

impl Product {
    fn read() -> Self {
        let out = Command::new(TETHER)
            .arg("crd")
            .output()
            .expect("tether crd runs");
        assert!(out.status.success(), "tether crd failed");
        Product {
            cli: read("docs/cli.md"),
            crds: String::from_utf8(out.stdout).expect("the CRDs are UTF-8"),
        }
    }

    /// Whether an installed CRD's schema has a property of this name.
    fn crd_field(&self, name: &str) -> bool {
        self.crds.lines().any(|l| l.trim() == format!("{name}:"))
    }
}

/// Whether the product has a feature.
type Has = fn(&Product) -> bool;

/// Each claim of tether's column in `docs/comparison.md` (a cell beginning **yes** or
/// **no**) and how to tell from the product whether tether has that feature.
const CLAIMS: &[(&str, Has)] = &[
    ("charts from Helm repositories and OCI registries", |p| {
        p.crd_field("chart") && p.crds.contains("oci://host/path")
    }),
    (
        "chart values from other Git repositories, ConfigMaps and Secrets, post-render patches",
        |p| {
            p.crd_field("valueSources") && p.crd_field("valuesFrom") && p.crd_field("postRenderers")
        },
    ),
    ("Helm `lookup` from the live cluster", |_| {
        repo_file("crates/core/src/cluster/lookup.rs").is_file()
    }),
    ("pull-request previews (base branch against head)", |p| {
        p.cli.contains("--base") && p.cli.contains("--comment")
    }),
    ("sync hooks (PreSync, Sync, PostSync, SyncFail)", |p| {
        p.cli.contains("--hook-timeout")
    }),
    ("dependencies between apps", |p| p.crd_field("dependsOn")),
    ("health rules for custom resources", |p| {
        p.crd_field("healthCheckExprs")
    }),
    ("apps generated from Git or clusters", |p| {
        p.crds.contains("appsets.tether.dev")
    }),
    ("SOPS-encrypted Secrets", |p| p.crd_field("decryption")),
    ("variable substitution", |p| p.crd_field("substitute")),
    ("signed-commit verification", |p| p.crd_field("verify")),
    ("web UI", |_| {
        repo_file("crates/controller/src/server/dashboard/mod.rs").is_file()
    }),
    ("browser login (SSO)", |_| {
        repo_file("crates/controller/src/server/people/oidc/mod.rs").is_file()
    }),
    ("rollback that holds", |p| {
        p.cli.contains("## tether rollback")
    }),
    ("multi-tenancy", |p| p.crd_field("serviceAccountName")),
    ("testing without a cluster", |p| {
        p.cli.contains("## tether sandbox")
    }),
];

#[test]
fn the_comparison_with_argo_cd_and_flux_claims_what_tether_has() {
    let page = read("docs/comparison.md");
    // (row, tether's cell) of the table; a claim is a cell beginning **yes** or **no**.
    let claims: Vec<(&str, bool)> = page
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.strip_prefix("| ")?.split(" | ").collect();
            let (row, tether) = (cells.first()?, cells.get(1)?);
            let has = if tether.starts_with("**yes**") {
                true
            } else if tether.starts_with("**no**") {
                false
            } else {
                return None;
            };
            Some((*row, has))
        })
        .collect();
    assert!(
        claims.len() >= CLAIMS.len(),
        "the table's claims: {claims:?}"
    );
    let product = Product::read();
    for (row, claimed) in &claims {
        let (_, has) = CLAIMS
            .iter()
            .find(|(name, _)| name == row)
            .unwrap_or_else(|| panic!("docs/comparison.md claims `{row}`, which no check holds"));
        assert_eq!(
            *claimed,
            has(&product),
            "docs/comparison.md says tether has `{row}`: {}, the product says otherwise",
            if *claimed { "yes" } else { "no" }
        );
    }
    for (name, _) in CLAIMS {
        assert!(
            claims.iter().any(|(row, _)| row == name),
            "docs/comparison.md lost its row `{name}`"
        );
    }
}
