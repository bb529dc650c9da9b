//! The oracle: files the real `sops` tool encrypted (getsops/sops, MPL-2.0), their keys
//! and their expected plaintext, in `shared/fixtures/sops/` beside the repository (not
//! committed into it: see its README). Every entry of its MANIFEST.json is checked,
//! by kind: `decrypt` files open to the plaintext upstream states (exact `sops decrypt`
//! output, named values, plaintext twins) and to every leaf of the independent
//! derivation, whose MAC real sops wrote; `negative` ones fail with the MAC error named;
//! `parse-only` ones fail naming the file and every recipient; plaintext files are not
//! SOPS files.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value;
use tether_sops::{Format, Keys, SopsError, decrypt, is_encrypted};

/// Where the fixtures are: `TETHER_SOPS_FIXTURES`, or `shared/fixtures/sops` in the
/// nearest folder above this crate that has one (CI lays `shared/` beside the clone).
fn fixtures() -> PathBuf {
    tether_testkit::sops_fixtures(Path::new(env!("CARGO_MANIFEST_DIR")))
}

fn read(root: &Path, file: &str) -> Vec<u8> {
    std::fs::read(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn json(root: &Path, file: &str) -> Value {
    serde_json::from_slice(&read(root, file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn keys(root: &Path, files: &[&str]) -> Keys {
    let mut keys = Keys::new();
    for file in files {
        let text = String::from_utf8(read(root, file)).expect("a key file is text");
        keys.add(file, &text).unwrap_or_else(|e| panic!("{e}"));
    }
    keys
}

fn strs(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Every scalar under `value` with its path (list items under their list's path), in
/// document order: the leaves as SOPS walks them.
fn leaves(value: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                path.push(key.clone());
                leaves(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => items.iter().for_each(|item| leaves(item, path, out)),
        leaf => out.push((path.clone(), scalar(leaf))),
    }
}

/// A leaf as text, numbers compared as numbers (an `int` 1 equals a float 1.0).
fn scalar(leaf: &Value) -> String {
    match leaf {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_f64().unwrap_or_default().to_string(),
        other => other.to_string(),
    }
}

/// A `decrypt` fixture: opens, and equals every plaintext the manifest gives for it.
fn check_decrypts(root: &Path, entry: &Value) -> Result<(), String> {
    let file = entry["file"].as_str().unwrap_or_default();
    let format = Format::from_path(file);
    let keys = keys(root, &strs(&entry["key_files"]));
    let decrypted = decrypt(file, format, &read(root, file), &keys).map_err(|e| e.to_string())?;
    let expected = &entry["expected"];
    if let Some(stdout) = expected["stdout_file"].as_str() {
        if *decrypted.to_bytes() != read(root, stdout) {
            return Err(format!("output differs from {stdout}"));
        }
    }
    let document = decrypted
        .documents()
        .first()
        .cloned()
        .unwrap_or(Value::Null);
    for (path, want) in expected["values"].as_object().into_iter().flatten() {
        let pointer = format!(
            "/{}",
            path.replace('[', "/").replace(']', "").replace('.', "/")
        );
        if document.pointer(&pointer) != Some(want) {
            return Err(format!("value {path} differs"));
        }
    }
    if let Some(twin) = expected["twin"].as_str() {
        let text = String::from_utf8(read(root, twin)).expect("a twin is text");
        let twin: Value = serde_saphyr::from_str(&text).map_err(|e| format!("{twin}: {e}"))?;
        if document != twin {
            return Err(format!("tree differs from the plaintext twin {twin}"));
        }
    }
    let derived = json(root, entry["derived"].as_str().unwrap_or_default());
    let want: Vec<(Vec<String>, String)> = derived["leaves"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            let path = strs(&l["path"]).into_iter().map(str::to_string).collect();
            (path, scalar(&l["value"]))
        })
        .collect();
    let mut got = Vec::new();
    if format == Format::Binary {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(
                derived["leaves"][0]["value_b64"]
                    .as_str()
                    .unwrap_or_default(),
            )
            .map_err(|e| e.to_string())?;
        if *decrypted.to_bytes() != bytes {
            return Err("binary output differs from the derived data".to_string());
        }
        return Ok(());
    }
    for document in decrypted.documents() {
        leaves(document, &mut Vec::new(), &mut got);
    }
    if got != want {
        let at = got
            .iter()
            .zip(&want)
            .position(|(g, w)| g != w)
            .unwrap_or(got.len().min(want.len()));
        return Err(format!(
            "leaves differ from the derived ones at #{at} ({} vs {} leaves, path {:?})",
            got.len(),
            want.len(),
            want.get(at).map(|w| &w.0)
        ));
    }
    Ok(())
}

/// A file that must not open: the error names the file and is the one the manifest
/// says (MAC mismatch, no MAC, no key with every recipient named).
fn check_fails(root: &Path, entry: &Value, all_keys: &Keys) -> Result<(), String> {
    let file = entry["file"].as_str().unwrap_or_default();
    let status = entry["check"]["status"].as_str().unwrap_or_default();
    let keys = if entry["key_files"].as_array().is_some_and(|a| !a.is_empty()) {
        keys(root, &strs(&entry["key_files"]))
    } else {
        all_keys.clone()
    };
    let error = match decrypt(file, Format::from_path(file), &read(root, file), &keys) {
        Ok(_) => return Err(format!("decrypted, but the manifest says {status}")),
        Err(error) => error,
    };
    let message = error.to_string();
    if !message.contains(file) {
        return Err(format!("the error does not name the file: {message}"));
    }
    let matches = match (status, &error) {
        ("MAC_MISMATCH", SopsError::MacMismatch { .. }) => true,
        ("NO_MAC", SopsError::MacMissing { .. }) => true,
        ("NO_DATA_KEY", SopsError::NoMatchingKey { .. }) => entry["check"]["master_keys"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|k| message.contains(k["id"].as_str().unwrap_or("?"))),
        _ => false,
    };
    if !matches {
        return Err(format!("wanted {status}, got: {message}"));
    }
    Ok(())
}

#[test]
fn every_fixture_decrypts_to_its_expected_plaintext_and_every_bad_one_fails_naming_the_file() {
    let root = fixtures();
    let manifest = json(&root, "MANIFEST.json");
    let key_files: Vec<&str> = manifest["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["file"].as_str())
        .collect();
    let all_keys = keys(&root, &key_files);
    let entries = manifest["fixtures"].as_array().expect("a fixture list");
    let mut failures = Vec::new();
    for entry in entries {
        let file = entry["file"].as_str().expect("a file");
        let manifest_format = match entry["format"].as_str() {
            Some("yaml") => Some(Format::Yaml),
            Some("json") => Some(Format::Json),
            Some("dotenv") => Some(Format::Dotenv),
            Some("ini") => Some(Format::Ini),
            Some("binary") => Some(Format::Binary),
            _ => None,
        };
        if manifest_format.is_some_and(|f| f != Format::from_path(file)) {
            failures.push(format!(
                "{file}: format from its name is not {:?}",
                manifest_format
            ));
        }
        let outcome = match entry["kind"].as_str() {
            Some("decrypt") => check_decrypts(&root, entry),
            Some("negative" | "parse-only") => check_fails(&root, entry, &all_keys),
            Some("plaintext-twin") => {
                let bytes = read(&root, file);
                match decrypt(file, Format::Yaml, &bytes, &all_keys) {
                    Err(SopsError::NotEncrypted { .. }) if !is_encrypted(Format::Yaml, &bytes) => {
                        Ok(())
                    }
                    _ => Err("a plaintext file is taken for a SOPS file".to_string()),
                }
            }
            other => Err(format!("unknown fixture kind {other:?}")),
        };
        if let Err(why) = outcome {
            failures.push(format!("{file}: {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}

/// The private key blocks or identity lines of a key file, one `Keys` each.
fn single_keys(root: &Path, file: &str) -> Vec<Keys> {
    let text = String::from_utf8(read(root, file)).expect("text");
    let mut out = Vec::new();
    if text.contains("PRIVATE KEY BLOCK") {
        let end = "-----END PGP PRIVATE KEY BLOCK-----";
        for block in text.split_inclusive(end).filter(|b| b.contains(end)) {
            let mut keys = Keys::new();
            keys.add_pgp(file, block).expect("a private block");
            out.push(keys);
        }
    } else {
        for line in text.lines().filter(|l| l.starts_with("AGE-SECRET-KEY-")) {
            let mut keys = Keys::new();
            keys.add_age(file, line).expect("an identity");
            out.push(keys);
        }
    }
    out
}

#[test]
fn each_recipient_alone_opens_a_file_encrypted_for_several() {
    let root = fixtures();
    for (file, key_file) in [
        ("history/age-pr1031/example.yaml", "keys/age/keys.txt"),
        (
            "head/example.yaml",
            "keys/pgp/sops_functional_tests_key.asc",
        ),
    ] {
        let singles = single_keys(&root, key_file);
        assert_eq!(singles.len(), 2, "{key_file}");
        for keys in singles {
            decrypt(file, Format::Yaml, &read(&root, file), &keys)
                .unwrap_or_else(|e| panic!("{keys:?}: {e}"));
        }
    }
}

#[test]
fn a_file_for_other_recipients_names_them_all() {
    let root = fixtures();
    let file = "head/example.yaml";
    let age_only = keys(&root, &["keys/age/keys.txt"]);
    let error = decrypt(file, Format::Yaml, &read(&root, file), &age_only).expect_err("no PGP key");
    let message = error.to_string();
    assert!(
        matches!(error, SopsError::NoMatchingKey { .. }),
        "{message}"
    );
    for wanted in [
        file,
        "PGP FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4",
        "PGP D7229043384BCC60326C6FB9D8720D957C3D3074",
    ] {
        assert!(message.contains(wanted), "{wanted} not in: {message}");
    }
    let none = decrypt(file, Format::Yaml, &read(&root, file), &Keys::new()).expect_err("no keys");
    assert!(matches!(none, SopsError::NoMatchingKey { .. }), "{none}");
}

#[test]
fn a_tampered_value_fails_naming_file_and_path_but_not_the_value() {
    let root = fixtures();
    let file = "head/example.yaml";
    let text = String::from_utf8(read(&root, file)).expect("text");
    let line = text
        .lines()
        .find(|l| l.starts_with("myapp1: ENC["))
        .expect("myapp1");
    let data = line.find("data:").expect("data") + "data:".len();
    let mut tampered_line = line.to_string();
    let flipped = if &line[data..=data] == "A" { "B" } else { "A" };
    tampered_line.replace_range(data..=data, flipped);
    let tampered = text.replace(line, &tampered_line);
    let keys = keys(&root, &["keys/pgp/sops_functional_tests_key.asc"]);
    let error = decrypt(file, Format::Yaml, tampered.as_bytes(), &keys).expect_err("tampered");
    let message = error.to_string();
    assert!(
        matches!(error, SopsError::Value { ref path, .. } if path == "myapp1"),
        "{message}"
    );
    assert!(message.contains(file), "{message}");
    // A value moved to another key does not open either: the path is authenticated.
    let moved = text.replace("myapp1: ENC[", "myapp9: ENC[");
    assert!(matches!(
        decrypt(file, Format::Yaml, moved.as_bytes(), &keys),
        Err(SopsError::Value { .. })
    ));
}

#[test]
fn keys_and_plaintext_stay_out_of_debug_and_errors() {
    let root = fixtures();
    let age_text = String::from_utf8(read(&root, "keys/age/keys.txt")).expect("text");
    let keys = keys(
        &root,
        &[
            "keys/age/keys.txt",
            "keys/pgp/sops_functional_tests_key.asc",
        ],
    );
    let debug = format!("{keys:?}");
    assert!(!debug.contains("AGE-SECRET-KEY"), "{debug}");
    assert!(
        debug.contains("FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4"),
        "{debug}"
    );
    let file = "history/age-pr1031/example.yaml";
    let decrypted = decrypt(file, Format::Yaml, &read(&root, file), &keys).expect("opens");
    let plaintext = String::from_utf8(decrypted.to_bytes().to_vec()).expect("text");
    assert!(plaintext.contains("c4r1b0u"), "the fixture's password");
    assert!(!format!("{decrypted:?}").contains("c4r1b0u"));
    // A broken identity is refused without quoting it.
    let secret_line = age_text
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-"))
        .expect("an identity");
    let broken = format!("{}X", &secret_line[..secret_line.len() - 1]);
    let error = Keys::new()
        .add("keys.txt", &broken)
        .expect_err("not an identity");
    assert!(!error.to_string().contains(&broken[15..]), "{error}");
}
