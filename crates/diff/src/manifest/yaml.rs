//! Bytes → documents → JSON values, with budgets so that an alias bomb or a
//! pathologically nested file fails fast in bounded memory.

use serde_json::Value;

use super::block;
use super::error::{Location, ManifestError};
use super::{MAX_YAML_DEPTH, Origin};

/// Budgets per document. A Kubernetes object is a few hundred nodes; the largest
/// real CRDs a few tens of thousands. Aliases are legal YAML but rare in manifests, so
/// their replay is capped far below what a "billion laughs" needs.
fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_YAML_DEPTH;
    budget.flow_nesting_limit = MAX_YAML_DEPTH;
    budget.max_aliases = 10_000;
    budget.max_nodes = 1_000_000;
    budget.max_events = 4_000_000;
    budget.max_recorded_anchor_events = 100_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    // The snippet would quote the input, and the input may be a Secret.
    options.with_snippet = false;
    options.emit_comments = false;
    // kubectl reads YAML 1.1 (sigs.k8s.io/yaml): `defaultMode: 0644` is octal 420
    // there, and tether must send what kubectl would.
    options.legacy_octal_numbers = true;
    options
}

/// Whole floats become integers, as kubectl's YAML-to-JSON conversion writes them
/// (`1e3` and `08` are sent as `1000` and `8`): the API server refuses `8.0` for an
/// integer field.
fn integral_floats_to_ints(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_ints),
        Value::Object(map) => map.values_mut().for_each(integral_floats_to_ints),
        _ => {}
    }
}

/// Reads a document with the general parser.
pub(super) fn full_parse(text: &str) -> Result<Value, serde_saphyr::Error> {
    let mut value = serde_saphyr::from_str_with_options(text, options())?;
    integral_floats_to_ints(&mut value);
    Ok(value)
}

/// Types a plain scalar the block reader is not sure of, exactly as the general
/// parser types it in a document.
pub(super) fn resolve_plain(scalar: &str) -> Option<Value> {
    full_parse(scalar).ok()
}

/// One document of a file: its 1-based index, its first line and its text. The text
/// starts at the file's line `first_line`, so parser lines map back by addition.
struct Document<'a> {
    index: usize,
    first_line: usize,
    text: std::borrow::Cow<'a, str>,
}

/// Splits a YAML stream on `---` and `...` lines. Kept by hand (rather than a
/// multi-document parse) so that one broken document does not hide the others, and
/// each error knows its document.
fn split_documents(text: &str) -> Vec<Document<'_>> {
    // (start offset, end offset, first line, marker remainder, is the preamble)
    let mut spans: Vec<(usize, usize, usize, Option<String>, bool)> = Vec::new();
    let mut start = 0usize;
    let mut first_line = 1usize;
    let mut remainder: Option<String> = None;
    let mut preamble = true;
    let mut offset = 0usize;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let line_no = i + 1;
        let bare = line.trim_end_matches(['\n', '\r']);
        let is_start = bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t");
        let is_end = bare == "..." || bare.starts_with("... ");
        if is_start || is_end {
            spans.push((start, offset, first_line, remainder.take(), preamble));
            preamble = false;
            if is_start && !bare[3..].trim().is_empty() {
                // `--- !tag` or `--- |`: keep what follows the marker, in place.
                remainder = Some(format!("   {}\n", &bare[3..]));
            }
            start = offset + line.len();
            first_line = if remainder.is_some() {
                line_no
            } else {
                line_no + 1
            };
        }
        offset += line.len();
    }
    spans.push((start, text.len(), first_line, remainder, preamble));

    let has_markers = spans.len() > 1;
    let mut docs = Vec::new();
    for (s, e, first_line, rem, is_preamble) in spans {
        let body: std::borrow::Cow<'_, str> = match rem {
            Some(mut r) => {
                r.push_str(&text[s..e]);
                r.into()
            }
            None => text[s..e].into(),
        };
        // An empty preamble before the first `---` is not a document.
        if is_preamble && has_markers && is_blank(&body) {
            continue;
        }
        docs.push(Document {
            index: docs.len() + 1,
            first_line,
            text: body,
        });
    }
    docs
}

fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#')
    })
}

/// The line of a document's first content, for errors about the whole document.
fn content_line(doc: &Document<'_>) -> usize {
    doc.text
        .lines()
        .position(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#')
        })
        .map_or(doc.first_line, |i| doc.first_line + i)
}

/// Parser messages may quote the input; a quoted Secret value must not reach a log,
/// so anything between quotes is elided and only the first line is kept.
pub(crate) fn sanitize(message: &str) -> String {
    let mut first = message.lines().next().unwrap_or("").trim();
    // The parser's own position is relative to the document; ours replaces it.
    if let Some(i) = first.rfind(" at line ")
        && first[i + 9..].starts_with(|c: char| c.is_ascii_digit())
    {
        first = &first[..i];
    }
    let mut out = String::with_capacity(first.len());
    let mut quote: Option<char> = None;
    for c in first.chars() {
        match quote {
            Some(q) if c == q => {
                out.push('…');
                out.push(c);
                quote = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if c == '"' || c == '`' {
                    quote = Some(c);
                }
            }
        }
    }
    if quote.is_some() {
        out.push('…');
    }
    out
}

/// Reads every object of one file into `out`, and every problem into `errors`.
pub(crate) fn read_documents(
    file: &str,
    bytes: &[u8],
    is_json: bool,
    out: &mut Vec<(Value, Origin)>,
    errors: &mut Vec<ManifestError>,
) {
    let at_file = Location::file(file);
    let Ok(text) = std::str::from_utf8(bytes) else {
        errors.push(ManifestError::InvalidYaml {
            at: at_file,
            message: "the file is not UTF-8".to_string(),
        });
        return;
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);

    if is_json {
        let mut de = serde_json::Deserializer::from_str(text);
        let value = match serde::Deserialize::deserialize(&mut de)
            .and_then(|v: Value| de.end().map(|()| v))
        {
            Ok(v) => v,
            Err(e) => {
                errors.push(ManifestError::InvalidJson {
                    at: Location {
                        document: Some(1),
                        line: Some(e.line()),
                        ..at_file
                    },
                    message: sanitize(&e.to_string()),
                });
                return;
            }
        };
        let origin = Origin {
            file: file.to_string(),
            document: 1,
            line: 1,
            item: None,
        };
        push_object(value, origin, out, errors);
        return;
    }

    for doc in split_documents(text) {
        if is_blank(&doc.text) {
            continue;
        }
        // The block reader leaves deep documents to the general parser well before
        // its depth budget, so the two never disagree on where that limit lies.
        let parsed = match block::parse(&doc.text, MAX_YAML_DEPTH / 2, &resolve_plain) {
            Some(value) => Ok(value),
            None => full_parse(&doc.text),
        };
        match parsed {
            Ok(Value::Null) => {}
            Ok(value) => {
                let origin = Origin {
                    file: file.to_string(),
                    document: doc.index,
                    line: content_line(&doc),
                    item: None,
                };
                push_object(value, origin, out, errors);
            }
            Err(e) => {
                let line = e
                    .location()
                    .map(|l| l.line() as usize)
                    .filter(|l| *l > 0)
                    .map_or(content_line(&doc), |l| doc.first_line + l - 1);
                errors.push(ManifestError::InvalidYaml {
                    at: Location {
                        file: file.to_string(),
                        document: Some(doc.index),
                        line: Some(line),
                        item: None,
                    },
                    message: sanitize(&e.to_string()),
                });
            }
        }
    }
}

/// Adds one document's object, expanding `kind: List` into its items.
fn push_object(
    value: Value,
    origin: Origin,
    out: &mut Vec<(Value, Origin)>,
    errors: &mut Vec<ManifestError>,
) {
    let Value::Object(mut object) = value else {
        errors.push(ManifestError::NotAnObject {
            at: origin.location(),
        });
        return;
    };
    let is_list = object.get("kind").and_then(Value::as_str) == Some("List")
        && object
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v == "v1" || v.is_empty());
    if !is_list {
        out.push((Value::Object(object), origin));
        return;
    }
    let items = match object.shift_remove("items") {
        Some(Value::Array(items)) => items,
        // An empty List, as `kubectl get` prints when nothing matches.
        None | Some(Value::Null) => return,
        Some(_) => {
            errors.push(ManifestError::BadList {
                at: origin.location(),
            });
            return;
        }
    };
    // The items are moved out, not copied: a `kubectl get -o yaml` dump is a List of
    // every object.
    for (i, item) in items.into_iter().enumerate() {
        let origin = Origin {
            item: Some(i),
            ..origin.clone()
        };
        if item.is_object() {
            out.push((item, origin));
        } else {
            errors.push(ManifestError::NotAnObject {
                at: origin.location(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_kubectl_reads_them() {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        let doc = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nspec: {mode: 0644, big: 1e3, zero: 08, ratio: 0.5, hex: 0x1F}\n";
        read_documents("x.yaml", doc.as_bytes(), false, &mut out, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let spec = &out[0].0["spec"];
        assert_eq!(spec["mode"], serde_json::json!(420));
        assert_eq!(spec["big"].to_string(), "1000");
        assert_eq!(spec["zero"].to_string(), "8");
        assert_eq!(spec["ratio"].to_string(), "0.5");
        assert_eq!(spec["hex"], serde_json::json!(31));
    }

    #[test]
    fn splits_documents_with_lines() {
        let docs = split_documents("a: 1\n---\nb: 2\n--- \n\n---\nc: 3\n");
        let got: Vec<_> = docs
            .iter()
            .map(|d| (d.index, d.first_line, d.text.to_string()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, 1, "a: 1\n".to_string()),
                (2, 3, "b: 2\n".to_string()),
                (3, 5, "\n".to_string()),
                (4, 7, "c: 3\n".to_string()),
            ]
        );
    }

    #[test]
    fn leading_marker_is_not_a_document() {
        let docs = split_documents("# comment\n---\na: 1\n");
        assert_eq!(docs.len(), 1);
        assert_eq!((docs[0].index, docs[0].first_line), (1, 3));
    }

    #[test]
    fn sanitize_elides_quoted_input() {
        assert_eq!(
            sanitize("bad value \"hunter2\" here\nsnippet hunter2"),
            "bad value \"…\" here"
        );
        assert_eq!(sanitize("unterminated `abc"), "unterminated `…");
    }
}
