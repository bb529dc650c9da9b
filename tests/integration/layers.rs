//! The house keeps its floors. Between crates, Cargo keeps them: a crate names only the
//! crates below it in its `Cargo.toml` (schema ← diff ← core ← controller ← the binary;
//! the sandbox beside them, on schema alone), so an import pointing up is a cycle Cargo
//! refuses. Within a crate of several floors, the order of the module table in its
//! `lib.rs` is the order of its floors, and a module imports only those listed above it.
//! Read from the source itself, so a new arrow pointing up fails here first.

use std::path::{Path, PathBuf};

/// The crates of several floors, each with the modules its `lib.rs` table lists.
const LAYERED_CRATES: [&str; 3] = ["diff", "core", "controller"];

/// The floors as a crate's `lib.rs` documents them, bottom first: the first word of
/// each row of its `text` table (`//! module   what it is`).
fn floors(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .skip_while(|line| !line.trim().starts_with("```text"))
        .skip(2) // the fence and the heading row
        .take_while(|line| !line.trim().starts_with("```"))
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate modules a file names (`crate::x::…`), outside comments.
fn imports(source: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let module: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !module.is_empty() {
                found.push((n + 1, module));
            }
        }
    }
    found
}

/// What `file` (under `src`) imports against the floors: one line per arrow pointing up.
fn arrows_up(src: &Path, floors: &[String], file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative
        .components()
        .next()
        .and_then(|c| c.as_os_str().to_str())
        .unwrap_or_default()
        .trim_end_matches(".rs")
        .to_string();
    if first == "lib" {
        return Vec::new();
    }
    let floor = |module: &str| floors.iter().position(|m| m == module);
    let Some(own) = floor(&first) else {
        return vec![format!(
            "{}: module {first:?} has no floor in lib.rs",
            file.display()
        )];
    };
    let source = std::fs::read_to_string(file).expect("read a source file");
    imports(&source)
        .into_iter()
        .filter(|(_, module)| *module != first)
        .filter_map(|(line, module)| match floor(&module) {
            Some(theirs) if theirs < own => None,
            Some(_) => Some(format!(
                "{}:{line}: {first} imports crate::{module}, a floor above it",
                file.display()
            )),
            None => Some(format!(
                "{}:{line}: crate::{module} has no floor",
                file.display()
            )),
        })
        .collect()
}

#[test]
fn no_module_imports_one_above_it() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut wrong = Vec::new();
    for name in LAYERED_CRATES {
        let src = crates.join(name).join("src");
        let lib = std::fs::read_to_string(src.join("lib.rs")).expect("the crate's lib.rs");
        let floors = floors(&lib);
        assert!(floors.len() >= 2, "{name}/src/lib.rs documents no floors");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            wrong.extend(arrows_up(&src, &floors, &file));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up:\n{}",
        wrong.join("\n")
    );
}

/// "diff is pure" holds by construction: the floors below the cluster cannot reach an
/// API server, a Git host or an async runtime, because they do not depend on one.
#[test]
fn the_pure_floors_depend_on_no_client_and_no_runtime() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    for name in ["schema", "diff", "sops"] {
        let manifest = std::fs::read_to_string(crates.join(name).join("Cargo.toml"))
            .expect("the crate's Cargo.toml");
        let dependencies: Vec<&str> = manifest
            .lines()
            .skip_while(|line| line.trim() != "[dependencies]")
            .skip(1)
            .take_while(|line| !line.starts_with('['))
            .filter_map(|line| line.split(['.', ' ', '=']).next())
            .filter(|name| !name.is_empty() && !name.starts_with('#'))
            .collect();
        assert!(!dependencies.is_empty(), "{name} lists no dependencies");
        for forbidden in [
            "tokio",
            "kube",
            "git2",
            "reqwest",
            "axum",
            "hyper",
            "tether-core",
        ] {
            assert!(
                !dependencies.contains(&forbidden),
                "crates/{name} depends on {forbidden}: {dependencies:?}"
            );
        }
    }
}

#[test]
fn the_floors_are_read_from_the_documented_table() {
    let doc = "//! intro\n//! ```text\n//! module   what\n//! metrics  the registry\n//! cluster  the API\n//! ```\n";
    assert_eq!(floors(doc), ["metrics", "cluster"]);
    assert_eq!(
        imports("use crate::diff::X; // crate::server\nlet y = crate::sync::run();"),
        vec![(1, "diff".to_string()), (2, "sync".to_string())]
    );
}
