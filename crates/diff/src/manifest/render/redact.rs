//! A renderer's error as its user needs to read it: the renderer's own words (the
//! template, the value path, the file and line, the patch that did not apply) kept,
//! and only secret values masked, however they are written.
//!
//! kustomize and helm quote what they fail on: a Secret as YAML (`password: x`,
//! `'x'`, `"x"`, a `|` block), as JSON (`{"data":{"password":"eA=="}}`), as a Go map
//! (`map[data:map[password:eA==]]`), a `--set password=x`. Masked are the values of
//! a `data` or `stringData` map (every value in it, at any depth: its kind is often
//! out of sight in an error's fragment) and of a key that names a credential
//! (`password`, `token`, `clientSecret`, …, but not `secretName` or `tokenFile`,
//! which name where one is). Everything else stays as printed.

use base64::Engine as _;
use serde_json::Value;

use super::super::error::ManifestError;
use super::super::yaml::read_documents;
use super::super::{KUSTOMIZATION_FILES, is_manifest_file};

/// What stands in for a masked value.
const MASK: &str = "***";

/// Known secret values shorter than this are not searched for where they stand
/// alone: masking every `on` of a message would garble it (the source stage's
/// rule for bare credentials too), and a key before them still masks them.
const MIN_KNOWN_LEN: usize = 4;

/// The maps whose every value is secret: a Secret's.
const SECRET_MAPS: &[&str] = &["data", "stringData"];

/// Key words (lower case, without `-`, `_` and `.`) that make a key a credential's.
const CREDENTIAL_WORDS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "privatekey",
    "credential",
    "accesskey",
];

/// Endings of keys that name where a credential is, not the credential itself.
const REFERENCE_ENDINGS: &[&str] = &["name", "ref", "refs", "namespace", "file", "path"];

/// The one-line message tether shows for a renderer's stderr: kubectl's log-line
/// wrapping taken off (`E1127 … run.go:72] "command failed" err="…"`), secret
/// values masked, then the first error with its continuation lines folded in.
pub(super) fn renderer_message(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    match klog_error(&text) {
        Some(message) => fold(&mask_secrets(&message)),
        None => first_error(&mask_secrets(&text)),
    }
}

/// The error of kubectl's `"command failed" err=…` log line: a Go-quoted string,
/// or a block of tab-indented lines between `err=<` and ` >`.
fn klog_error(text: &str) -> Option<String> {
    let mut lines = text.lines();
    let line = lines.find(|l| l.contains("] \"command failed\" err="))?;
    let value = &line[line.find(" err=")? + 5..];
    if value == "<" {
        let body: Vec<&str> = lines
            .take_while(|l| l.trim() != ">")
            .map(|l| l.strip_prefix('\t').unwrap_or(l))
            .collect();
        return Some(body.join("\n"));
    }
    go_unquote(value)
}

/// A Go `%q` string's content (`"a \"b\"\n"` → `a "b"` and a newline).
fn go_unquote(quoted: &str) -> Option<String> {
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            other => out.push(other),
        }
    }
    Some(out)
}

/// Every line joined into one.
fn fold(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first error with its indented continuation lines folded in: helm names the
/// template on one line and what failed on the next ones; the next `Error:` is
/// usually the same one again, wrapped.
fn first_error(text: &str) -> String {
    let mut lines = text.trim().lines();
    let mut out = lines.next().unwrap_or("").trim().to_string();
    for line in lines.take_while(|l| l.starts_with(char::is_whitespace)) {
        out.push(' ');
        out.push_str(line.trim());
    }
    out
}

/// The secret values of the files a renderer was given, masked wherever they stand
/// in its error, with no key before them too: kustomize prints a node's bare contents
/// (`node contents: <value>`), and helm a value a template failed on.
#[derive(Debug, Default)]
pub(super) struct KnownSecrets(Vec<String>);

impl KnownSecrets {
    /// From Secrets' `data` (decoded too) and `stringData`, credential keys of any
    /// document (values files), `secretGenerator` literals, and `--set` credentials.
    pub(super) fn from_files<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        set: &[String],
    ) -> KnownSecrets {
        let mut values = Vec::new();
        for (path, bytes) in files {
            if !is_manifest_file(path) {
                continue;
            }
            let mut objects = Vec::new();
            let is_json = path.to_ascii_lowercase().ends_with(".json");
            // Templates and broken files do not parse: they hold no known value.
            read_documents(path, bytes, is_json, &mut objects, &mut Vec::new());
            let name = path.rsplit('/').next().unwrap_or(path);
            for (object, _) in &objects {
                collect(object, false, &mut values);
                if KUSTOMIZATION_FILES.contains(&name) {
                    literals(object, &mut values);
                }
            }
        }
        for s in set {
            if let Some((key, value)) = s.split_once('=')
                && is_credential(key)
            {
                values.push(value.to_string());
            }
        }
        KnownSecrets::default().with(values)
    }

    /// These values and `values` (the plaintext of files decrypted for a renderer).
    pub(super) fn with(self, values: Vec<String>) -> KnownSecrets {
        let mut known: Vec<String> = values
            .iter()
            .flat_map(|v| std::iter::once(v.as_str()).chain(v.lines()))
            .map(str::trim)
            .filter(|v| v.len() >= MIN_KNOWN_LEN && *v != MASK)
            .map(str::to_string)
            .chain(self.0)
            .collect();
        // The longest first: a value that holds another is masked whole.
        known.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        known.dedup();
        KnownSecrets(known)
    }

    /// A renderer's error with these values masked too.
    pub(super) fn mask_error(&self, err: ManifestError) -> ManifestError {
        let mask = |message: String| {
            self.0
                .iter()
                .fold(message, |m, secret| m.replace(secret.as_str(), MASK))
        };
        match err {
            ManifestError::Kustomize { at, message } => ManifestError::Kustomize {
                at,
                message: mask(message),
            },
            ManifestError::Helm { at, message } => ManifestError::Helm {
                at,
                message: mask(message),
            },
            ManifestError::PostRender { at, place, message } => ManifestError::PostRender {
                at,
                place,
                message: mask(message),
            },
            other => other,
        }
    }
}

/// The string values of `value` that are secret: under a credential key, or in a
/// Secret's `data` (its decoded text too) and `stringData`.
fn collect(value: &Value, secret: bool, out: &mut Vec<String>) {
    match value {
        Value::String(s) if secret => {
            out.push(s.clone());
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(s)
                && let Ok(text) = String::from_utf8(bytes)
            {
                out.push(text);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, secret, out)),
        Value::Object(map) => {
            let is_secret = map.get("kind").and_then(Value::as_str) == Some("Secret");
            for (key, v) in map {
                let under = secret
                    || is_credential(key)
                    || (is_secret && SECRET_MAPS.contains(&key.as_str()));
                collect(v, under, out);
            }
        }
        _ => {}
    }
}

/// The values of a kustomization's `secretGenerator` literals (`key=value`).
fn literals(kustomization: &Value, out: &mut Vec<String>) {
    let generators = kustomization
        .get("secretGenerator")
        .and_then(Value::as_array);
    for generator in generators.into_iter().flatten() {
        let literals = generator.get("literals").and_then(Value::as_array);
        for literal in literals.into_iter().flatten().filter_map(Value::as_str) {
            if let Some((_, value)) = literal.split_once('=') {
                out.push(value.to_string());
            }
        }
    }
}

/// Whether a key's value is a credential.
fn is_credential(key: &str) -> bool {
    let key: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .flat_map(char::to_lowercase)
        .collect();
    CREDENTIAL_WORDS.iter().any(|w| key.contains(w))
        && !REFERENCE_ENDINGS.iter().any(|e| key.ends_with(e))
}

/// A block below a key: the lines indented deeper than `indent` belong to it.
#[derive(Debug, Clone, Copy)]
struct Block {
    indent: usize,
    /// A block scalar (`|`, `>`): every line is the value. Otherwise a mapping of
    /// secret values.
    scalar: bool,
}

/// `text` with every secret value replaced by `***`, lines and quotes kept.
pub(super) fn mask_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blocks: Vec<Block> = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let body = line.trim_start_matches([' ', '\t']);
        let indent = line.len() - body.len();
        if !body.is_empty() {
            while blocks.last().is_some_and(|b| indent <= b.indent) {
                blocks.pop();
            }
        }
        let inside = blocks.last().copied();
        if inside.is_some_and(|b| b.scalar) || body.is_empty() {
            out.push_str(&line[..indent]);
            if !body.is_empty() {
                out.push_str(MASK);
            }
            continue;
        }
        let (masked, opens) = mask_line(body, inside.is_some());
        out.push_str(&line[..indent]);
        out.push_str(&masked);
        if let Some(scalar) = opens {
            blocks.push(Block { indent, scalar });
        }
    }
    out
}

/// The bracket a scanner is in: its values secret or not, and whether it is a Go
/// map (`map[k:v k2:v2]`), whose entries a space ends.
#[derive(Debug, Clone, Copy)]
struct Frame {
    secret: bool,
    go: bool,
}

/// One line's secret values masked, with what its last key opens below it: a
/// block scalar (`Some(true)`) or a mapping (`Some(false)`) of secret values.
fn mask_line(line: &str, secret_map: bool) -> (String, Option<bool>) {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut stack = vec![Frame {
        secret: secret_map,
        go: false,
    }];
    let mut opens = None;
    let mut i = 0;
    while i < bytes.len() {
        let frame = *stack.last().unwrap_or(&Frame {
            secret: false,
            go: false,
        });
        let c = bytes[i];
        if let Some((key, after_key)) = key_at(line, i, frame.go) {
            out.push_str(&line[i..after_key]);
            i = after_key;
            let secret = frame.secret || is_credential(key) || SECRET_MAPS.contains(&key);
            let (value_end, opened) = mask_value(line, i, secret, frame, &mut stack, &mut out);
            i = value_end;
            if let Some(scalar) = opened {
                opens = secret.then_some(scalar);
            }
            continue;
        }
        if line[i..].starts_with("map[") {
            stack.push(Frame {
                secret: frame.secret,
                go: true,
            });
            out.push_str("map[");
            i += 4;
            continue;
        }
        match c {
            b'{' | b'[' => {
                stack.push(Frame {
                    secret: frame.secret,
                    go: false,
                });
                out.push(c as char);
                i += 1;
            }
            b'}' | b']' => {
                if stack.len() > 1 {
                    stack.pop();
                }
                out.push(c as char);
                i += 1;
            }
            // A value of a secret map's list, or a stray scalar of a secret block.
            _ if frame.secret && !c.is_ascii_whitespace() && c != b',' => {
                let end = scalar_end(line, i, stack.len() > 1, frame.go);
                push_masked(&line[i..end], &mut out);
                i = end;
            }
            _ => {
                let ch = line[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    (out, opens)
}

/// A key starting at `i`: a bare word or a quoted string followed by `:` (and, out
/// of a Go map, by a space, a quote, a bracket or the line's end) or by `=` (a
/// bare word: `--set password=x`, an env file). Returns the key and where its
/// separator ends.
fn key_at(line: &str, i: usize, go: bool) -> Option<(&str, usize)> {
    let bytes = line.as_bytes();
    if i > 0 {
        let before = bytes[i - 1];
        let starts_token = before.is_ascii_whitespace()
            || matches!(before, b'{' | b'[' | b',' | b'(' | b'<' | b'-');
        if !starts_token {
            return None;
        }
    }
    let (key, mut j, quoted) = match bytes[i] {
        q @ (b'"' | b'\'') => {
            let close = line[i + 1..].find(q as char)? + i + 1;
            (&line[i + 1..close], close + 1, true)
        }
        _ => {
            let len = line[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')))
                .unwrap_or(line.len() - i);
            if len == 0 {
                return None;
            }
            (&line[i..i + len], i + len, false)
        }
    };
    match bytes.get(j) {
        Some(b'=') if !quoted => return Some((key, j + 1)),
        Some(b':') => j += 1,
        _ => return None,
    }
    let next = bytes.get(j).copied();
    let separates = go
        || quoted
        || matches!(next, None | Some(b' ' | b'\t' | b'"' | b'\'' | b'{' | b'['))
        || line[j..].starts_with("map[");
    separates.then_some((key, j))
}

/// Copies (or masks) the value starting at `i` after a key, pushing a frame for a
/// map it opens. Returns where the value ends and what it opens below the line.
fn mask_value(
    line: &str,
    mut i: usize,
    secret: bool,
    frame: Frame,
    stack: &mut Vec<Frame>,
    out: &mut String,
) -> (usize, Option<bool>) {
    let bytes = line.as_bytes();
    while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
        out.push(bytes[i] as char);
        i += 1;
    }
    let rest = &line[i..];
    if rest.is_empty() || rest.starts_with('#') {
        out.push_str(rest);
        return (line.len(), Some(false));
    }
    if rest.starts_with('|') || rest.starts_with('>') {
        let indicator = rest.split_whitespace().next().unwrap_or(rest);
        if indicator[1..]
            .chars()
            .all(|c| matches!(c, '-' | '+') || c.is_ascii_digit())
        {
            out.push_str(rest);
            return (line.len(), Some(true));
        }
    }
    if let Some(open) = ["map[", "{", "["].iter().find(|o| rest.starts_with(**o)) {
        stack.push(Frame {
            secret,
            go: *open == "map[",
        });
        out.push_str(open);
        return (i + open.len(), None);
    }
    if !secret {
        // Scanned on: a key may follow (`Error: … password: x`).
        return (i, None);
    }
    let end = scalar_end(line, i, stack.len() > 1, frame.go);
    push_masked(&line[i..end], out);
    (end, None)
}

/// Where a scalar starting at `i` ends: its closing quote; else, in a bracket, a
/// `,`, a closing bracket (or in a Go map a space); out of one, the line's end.
fn scalar_end(line: &str, i: usize, bracketed: bool, go: bool) -> usize {
    let bytes = line.as_bytes();
    match bytes[i] {
        b'"' => {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(bytes.len())
        }
        b'\'' => {
            // YAML doubles a quote inside single quotes: `'it''s'`.
            let mut j = i + 1;
            loop {
                match line[j..].find('\'') {
                    Some(c) if bytes.get(j + c + 1) == Some(&b'\'') => j += c + 2,
                    Some(c) => return j + c + 1,
                    None => return line.len(),
                }
            }
        }
        _ => {
            if !bracketed {
                return line.len();
            }
            line[i..]
                .find(|c: char| matches!(c, ',' | '}' | ']') || (go && c == ' '))
                .map_or(line.len(), |e| i + e)
        }
    }
}

/// `value` masked, its quotes kept: `"x"` → `"***"`, `x` → `***`.
fn push_masked(value: &str, out: &mut String) {
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'');
    match quote {
        Some(q) => {
            out.push(q);
            out.push_str(MASK);
            if value.len() > 1 && value.ends_with(q) {
                out.push(q);
            }
        }
        None if value.trim().is_empty() => out.push_str(value),
        None => out.push_str(MASK),
    }
}

#[cfg(test)]
mod tests;
