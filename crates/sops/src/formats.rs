//! The stores SOPS writes (`stores/*`): YAML and JSON keep the tree as it is with the
//! metadata under `sops`; dotenv and INI flatten the metadata (`sops_…` keys, the
//! `[sops]` section); the binary store wraps a whole file as one `data` leaf in JSON.
//! Each is read into one tree form (JSON values, key order kept) and written back in
//! its own format once decrypted. Comments are not kept (SOPS encrypts them too; a
//! manifest does not need them).

use serde_json::{Map, Value};

use crate::error::SopsError;
use crate::metadata::unflatten;

/// The key holding the metadata in YAML, JSON and binary files.
pub(crate) const METADATA_KEY: &str = "sops";
/// dotenv's metadata prefix (`stores/dotenv`: `SopsPrefix`).
const DOTENV_PREFIX: &str = "sops_";
/// The binary store's one leaf.
pub(crate) const BINARY_KEY: &str = "data";

/// A SOPS file format, as `sops` chooses it from the file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
    Dotenv,
    Ini,
    Binary,
}

impl Format {
    /// The format `sops` infers from a file name (`formats.FormatForPath`): anything
    /// it does not recognise is binary.
    pub fn from_path(path: &str) -> Self {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("yaml" | "yml") => Format::Yaml,
            Some("json") => Format::Json,
            Some("env") => Format::Dotenv,
            Some("ini") => Format::Ini,
            _ => Format::Binary,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Yaml => "YAML",
            Format::Json => "JSON",
            Format::Dotenv => "dotenv",
            Format::Ini => "INI",
            Format::Binary => "binary (SOPS JSON)",
        }
    }
}

/// A file read into the tree form: its documents and the metadata taken out of them.
pub(crate) struct Parsed {
    pub documents: Vec<Value>,
    pub metadata: Option<Value>,
}

/// Reads `text` as `format`; `None` metadata means not a SOPS file.
pub(crate) fn parse(file: &str, format: Format, text: &str) -> Result<Parsed, SopsError> {
    let bad = |reason: String| SopsError::Parse {
        file: file.to_string(),
        format: format.name(),
        reason,
    };
    let mut documents = match format {
        Format::Yaml => {
            serde_saphyr::from_multiple::<Value>(text).map_err(|e| bad(e.to_string()))?
        }
        Format::Json | Format::Binary => {
            vec![serde_json::from_str::<Value>(text).map_err(|e| bad(e.to_string()))?]
        }
        Format::Dotenv => return dotenv(text).map_err(bad),
        Format::Ini => return ini(text).map_err(bad),
    };
    documents.retain(|d| !d.is_null());
    // SOPS writes the metadata into every document of a multi-document YAML file.
    let mut metadata = None;
    for document in &mut documents {
        if let Some(found) = document
            .as_object_mut()
            .and_then(|m| m.shift_remove(METADATA_KEY))
        {
            metadata = Some(found);
        }
    }
    Ok(Parsed {
        documents,
        metadata,
    })
}

/// `stores/dotenv`: `KEY=VALUE` lines split at the first `=` (nothing trimmed), `\n`
/// escapes, `#` comments.
fn dotenv(text: &str) -> Result<Parsed, String> {
    let mut tree = Map::new();
    let mut flat = Vec::new();
    for (n, line) in text.split('\n').enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| format!("line {} has no `=`", n + 1))?;
        let value = value.replace("\\n", "\n");
        match key.strip_prefix(DOTENV_PREFIX) {
            Some(meta) => flat.push((meta.to_string(), value)),
            None => {
                tree.insert(key.to_string(), Value::String(value));
            }
        }
    }
    Ok(Parsed {
        documents: vec![Value::Object(tree)],
        metadata: (!flat.is_empty()).then(|| unflatten(flat)),
    })
}

/// `stores/ini`: sections are the tree's top level, `key = value` (or `key: value`)
/// lines, `;`/`#` comments, `"""` multi-line values; the `[sops]` section is the
/// flattened metadata, whose values may carry `\n` escapes (sops ≥ 3.13.2).
fn ini(text: &str) -> Result<Parsed, String> {
    let mut tree = Map::new();
    let mut flat = Vec::new();
    let mut section: Option<String> = None;
    let mut lines = text.lines().enumerate();
    while let Some((n, raw)) = lines.next() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.trim().to_string());
            continue;
        }
        let at = line
            .find(['=', ':'])
            .ok_or_else(|| format!("line {} is neither a section nor `key = value`", n + 1))?;
        let key = line[..at].trim().to_string();
        let mut value = line[at + 1..].trim().to_string();
        if let Some(first) = value.strip_prefix("\"\"\"") {
            let mut joined = first.to_string();
            while !joined.ends_with("\"\"\"") {
                let (_, next) = lines
                    .next()
                    .ok_or_else(|| format!("line {}: `\"\"\"` value has no end", n + 1))?;
                joined.push('\n');
                joined.push_str(next);
            }
            joined.truncate(joined.len() - 3);
            value = joined;
        } else if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
            value = value[1..value.len() - 1].to_string();
        }
        match section.as_deref() {
            Some(METADATA_KEY) => flat.push((key, value.replace("\\n", "\n"))),
            name => {
                let name = name.unwrap_or(INI_DEFAULT_SECTION).to_string();
                let entry = tree
                    .entry(name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(map) = entry.as_object_mut() {
                    map.insert(key, Value::String(value));
                }
            }
        }
    }
    Ok(Parsed {
        documents: vec![Value::Object(tree)],
        metadata: (!flat.is_empty()).then(|| unflatten(flat)),
    })
}

/// go-ini's name for keys before the first section.
const INI_DEFAULT_SECTION: &str = "DEFAULT";

/// Writes decrypted documents back in `format`, as `sops decrypt` prints them.
pub(crate) fn emit(format: Format, documents: &[Value]) -> Vec<u8> {
    match format {
        Format::Yaml => serde_saphyr::to_string_multiple(documents)
            .unwrap_or_default()
            .into_bytes(),
        Format::Json => {
            let mut out = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(b"\t");
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
            for document in documents {
                serde::Serialize::serialize(document, &mut serializer).unwrap_or_default();
            }
            out.push(b'\n');
            out
        }
        Format::Dotenv => {
            let mut out = String::new();
            for (key, value) in entries(documents) {
                out.push_str(&format!("{key}={}\n", scalar(value).replace('\n', "\\n")));
            }
            out.into_bytes()
        }
        Format::Ini => {
            let mut sections = Vec::new();
            for (name, keys) in entries(documents) {
                let Some(keys) = keys.as_object() else {
                    continue;
                };
                let mut section = format!("[{name}]\n");
                for (key, value) in keys {
                    section.push_str(&format!("{key} = {}\n", scalar(value)));
                }
                sections.push(section);
            }
            sections.join("\n").into_bytes()
        }
        // Binary files are bytes, never a tree (`Decrypted::to_bytes`).
        Format::Binary => Vec::new(),
    }
}

fn entries(documents: &[Value]) -> impl Iterator<Item = (&String, &Value)> {
    documents.iter().filter_map(Value::as_object).flatten()
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_follow_the_file_name_as_sops_does() {
        assert_eq!(Format::from_path("a/secret.enc.yaml"), Format::Yaml);
        assert_eq!(Format::from_path("b.YML"), Format::Yaml);
        assert_eq!(Format::from_path("c.json"), Format::Json);
        assert_eq!(Format::from_path("app.env"), Format::Dotenv);
        assert_eq!(Format::from_path("x.ini"), Format::Ini);
        assert_eq!(Format::from_path("tls.crt"), Format::Binary);
        assert_eq!(Format::from_path("dir.d/noext"), Format::Binary);
    }

    #[test]
    fn dotenv_keeps_spaces_around_the_first_equals() {
        let parsed = dotenv("foo =a=b\n#c\nsops_version=3\n").expect("parses");
        assert_eq!(parsed.documents[0], serde_json::json!({"foo ": "a=b"}));
        assert_eq!(parsed.metadata, Some(serde_json::json!({"version": "3"})));
    }

    #[test]
    fn ini_without_a_separator_names_the_line() {
        let err = ini("[a]\nb = c\nnonsense\n").err().expect("fails");
        assert!(err.contains("line 3"), "{err}");
    }
}
