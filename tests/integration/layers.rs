//! The house keeps its floors: a module of the library imports only modules on lower
//! floors, in the order `src/lib.rs` documents, and the sandbox imports only `schema`.
//! Read from the source itself, so a new arrow pointing up fails here first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The floors as `src/lib.rs` documents them: module → floor (`None`: apart).
fn floors(lib: &str) -> BTreeMap<String, Option<u32>> {
    lib.lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let floor = words.next()?;
            let module = words.next()?;
            if !module.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                return None;
            }
            match floor {
                "–" => Some((module.to_string(), None)),
                n => Some((module.to_string(), Some(n.parse().ok()?))),
            }
        })
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

#[test]
fn no_module_imports_one_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(root.join("lib.rs")).expect("src/lib.rs");
    let floors = floors(&lib);
    assert!(
        floors.len() >= 10,
        "src/lib.rs documents no floors: {floors:?}"
    );
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&root).expect("under src");
        let first = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_string();
        if first == "lib" || first == "main" || first == "cli" {
            continue; // the crate root and the binary stand above every floor
        }
        let Some(&own) = floors.get(&first) else {
            wrong.push(format!(
                "src/{}: module {first:?} has no floor in src/lib.rs",
                relative.display()
            ));
            continue;
        };
        let source = std::fs::read_to_string(&file).expect("read a source file");
        for (line, module) in imports(&source) {
            if module == first {
                continue;
            }
            let Some(&theirs) = floors.get(&module) else {
                wrong.push(format!(
                    "src/{}:{line}: crate::{module} has no floor",
                    relative.display()
                ));
                continue;
            };
            let allowed = match (own, theirs) {
                // The sandbox stands apart: it may use the schemas, nothing else.
                (None, _) => module == "schema",
                (Some(_), None) => false,
                (Some(own), Some(theirs)) => theirs < own,
            };
            if !allowed {
                wrong.push(format!(
                    "src/{}:{line}: {first} (floor {}) imports crate::{module} (floor {})",
                    relative.display(),
                    own.map_or("apart".into(), |f| f.to_string()),
                    theirs.map_or("apart".into(), |f| f.to_string()),
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_floors_are_read_from_the_documented_table() {
    let doc = "//! floor  module  what\n//!   1    ownership   words\n//!   2    schema   x\n//!   –    sandbox   y\n";
    let floors = floors(doc);
    assert_eq!(floors.get("ownership"), Some(&Some(1)));
    assert_eq!(floors.get("schema"), Some(&Some(2)));
    assert_eq!(floors.get("sandbox"), Some(&None));
    assert_eq!(floors.get("module"), None);
    assert_eq!(
        imports("use crate::diff::X; // crate::server\nlet y = crate::sync::run();"),
        vec![(1, "diff".to_string()), (2, "sync".to_string())]
    );
}
