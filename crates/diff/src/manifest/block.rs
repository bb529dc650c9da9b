//! A fast reader for the YAML that manifests and `kubectl get -o yaml` are made of:
//! block mappings and sequences, plain and quoted scalars, literal block scalars,
//! empty flow collections and comments. It builds a JSON value in one pass over the
//! lines, several times faster than the general parser.
//!
//! It never decides anything the general parser would decide differently. Whatever
//! lies outside that subset (anchors, aliases, tags, flow collections, folded or
//! multi-line scalars, tabs, duplicate keys, anything malformed) makes it step aside
//! with `None`, and the general parser reads the document: results, budgets and error
//! messages stay the general parser's. Plain scalars whose type is not obvious
//! (`yes`, `0644`, `1e3`) are handed to the caller's resolver, which asks that parser.

use serde_json::{Map, Value};

/// One line of a document: its indentation in spaces and the text after it, without
/// the line break. Rewritten in place when a sequence item starts a mapping on its
/// dash's line (`- name: web`), so the mapping sees its first key at its own column.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

impl Line<'_> {
    /// Blank lines and whole-line comments carry no structure.
    fn is_significant(&self) -> bool {
        !(self.text.trim_end_matches(' ').is_empty() || self.text.starts_with('#'))
    }
}

/// Reads one document (already split from its stream) whose root is a mapping or a
/// sequence, or returns `None` for the general parser to read it. `resolve` types a
/// plain scalar that is not obviously a string, an integer, a boolean or null.
pub(super) fn parse(
    text: &str,
    max_depth: usize,
    resolve: &dyn Fn(&str) -> Option<Value>,
) -> Option<Value> {
    if !plain_text(text) {
        return None;
    }
    let lines = text
        .split('\n')
        .map(|l| {
            let text = l.trim_start_matches(' ');
            Line {
                indent: l.len() - text.len(),
                text,
            }
        })
        .collect();
    let mut reader = Reader {
        lines,
        at: 0,
        depth: 0,
        max_depth,
        resolve,
    };
    let root = reader.peek()?;
    let value = reader.node(root.indent)?;
    // Anything left over (a less indented line after the root) is for the general
    // parser to judge.
    reader.peek().is_none().then_some(value)
}

/// Text the line reader can take as it is: no tabs (which YAML allows only in some
/// separations), no carriage returns, nothing YAML does not count as printable, and
/// none of the characters YAML 1.1 reads as line breaks or a byte order mark.
fn plain_text(text: &str) -> bool {
    let controls = text.bytes().any(|b| (b < 0x20 && b != b'\n') || b == 0x7f);
    !controls && (text.is_ascii() || text.chars().all(printable))
}

fn printable(c: char) -> bool {
    const NOT: [char; 5] = ['\u{2028}', '\u{2029}', '\u{feff}', '\u{fffe}', '\u{ffff}'];
    !(('\u{80}'..='\u{9f}').contains(&c) || NOT.contains(&c))
}

struct Reader<'a, 'r> {
    lines: Vec<Line<'a>>,
    at: usize,
    depth: usize,
    max_depth: usize,
    resolve: &'r dyn Fn(&str) -> Option<Value>,
}

/// What a line's text starts with, seen as a mapping entry.
enum Entry<'a> {
    /// `key: rest`, with `rest` after the separator.
    Pair(String, &'a str),
    /// Not a mapping entry: a scalar.
    Scalar,
}

impl<'a> Reader<'a, '_> {
    /// The next line with structure, skipping blank lines and comments.
    fn peek(&mut self) -> Option<Line<'a>> {
        while let Some(line) = self.lines.get(self.at) {
            if line.is_significant() {
                return Some(*line);
            }
            self.at += 1;
        }
        None
    }

    /// The collection that starts at the next line, indented by `indent`.
    fn node(&mut self, indent: usize) -> Option<Value> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return None;
        }
        let line = self.peek()?;
        let value = if is_dash(line.text) {
            self.sequence(indent)
        } else {
            self.mapping(indent)
        };
        self.depth -= 1;
        value
    }

    fn mapping(&mut self, indent: usize) -> Option<Value> {
        let mut map = Map::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent || is_dash(line.text) {
                return None;
            }
            let Entry::Pair(key, rest) = entry(line.text)? else {
                return None;
            };
            self.at += 1;
            let value = self.value(indent, rest, true)?;
            if map.insert(key, value).is_some() {
                return None;
            }
        }
        Some(Value::Object(map))
    }

    fn sequence(&mut self, indent: usize) -> Option<Value> {
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent != indent || !is_dash(line.text) {
                if line.indent > indent {
                    return None;
                }
                break;
            }
            let rest = line.text[1..].trim_start_matches(' ');
            let item = match entry(rest)? {
                Entry::Pair(..) => {
                    // `- name: web`: a mapping whose first key sits after the dash.
                    let column = indent + line.text.len() - rest.len();
                    self.lines[self.at] = Line {
                        indent: column,
                        text: rest,
                    };
                    self.depth += 1;
                    if self.depth > self.max_depth {
                        return None;
                    }
                    let map = self.mapping(column)?;
                    self.depth -= 1;
                    map
                }
                Entry::Scalar if is_dash(rest) => return None,
                Entry::Scalar => {
                    self.at += 1;
                    self.value(indent, rest, false)?
                }
            };
            items.push(item);
        }
        Some(Value::Array(items))
    }

    /// The value after `key:` or `-` in a collection indented by `indent`: `rest` of
    /// the line, or the lines below. A mapping's value may be a sequence at the key's
    /// own indentation (`compact`), as kubectl writes `containers:`.
    fn value(&mut self, indent: usize, rest: &'a str, compact: bool) -> Option<Value> {
        let rest = rest.trim_end_matches(' ');
        if rest.is_empty() || rest.starts_with('#') {
            return match self.peek() {
                Some(next) if next.indent > indent => self.node(next.indent),
                Some(next) if compact && next.indent == indent && is_dash(next.text) => {
                    self.sequence(indent)
                }
                _ => Some(Value::Null),
            };
        }
        let value = match rest.as_bytes()[0] {
            b'|' => return self.literal(indent, &rest[1..]),
            b'"' => {
                let (s, after) = double_quoted(rest)?;
                end_of_line(after).then_some(Value::String(s))?
            }
            b'\'' => {
                let (s, after) = single_quoted(rest)?;
                end_of_line(after).then_some(Value::String(s))?
            }
            // Only empty flow collections, as kubectl writes them.
            b'{' | b'[' => match (rest.get(..2), rest.get(2..)) {
                (Some("{}"), Some(after)) if end_of_line(after) => Value::Object(Map::new()),
                (Some("[]"), Some(after)) if end_of_line(after) => Value::Array(Vec::new()),
                _ => return None,
            },
            _ => self.plain(plain_scalar(rest)?)?,
        };
        // A more indented line after an inline value would continue a multi-line
        // scalar, or be an error: either way, not ours.
        match self.peek() {
            Some(next) if next.indent > indent => None,
            _ => Some(value),
        }
    }

    /// Types a plain scalar: the common forms here, the rest by the resolver.
    fn plain(&self, s: &str) -> Option<Value> {
        match s {
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            "null" | "~" => return Some(Value::Null),
            _ => {}
        }
        if let Some(n) = canonical_int(s) {
            return Some(Value::from(n));
        }
        if is_plain_string(s) {
            return Some(Value::String(s.to_string()));
        }
        // Read alone, `---` and `...` would be document markers, not the text.
        if s.starts_with("---") || s.starts_with("...") {
            return None;
        }
        (self.resolve)(s)
    }

    /// A literal block scalar (`|`, `|-`, `|+`) below a key or dash at `indent`.
    /// Folded scalars, explicit indentation and leading or over-indented blank lines
    /// are left to the general parser.
    fn literal(&mut self, indent: usize, header: &str) -> Option<Value> {
        let (chomp, after) = match header.as_bytes().first() {
            Some(b'-') => (Chomp::Strip, &header[1..]),
            Some(b'+') => (Chomp::Keep, &header[1..]),
            _ => (Chomp::Clip, header),
        };
        if !end_of_line(after) {
            return None;
        }
        let first = self.lines.get(self.at)?;
        let content = first.indent;
        if content <= indent || first.text.trim_end_matches(' ').is_empty() {
            return None;
        }
        let mut out = String::new();
        while let Some(line) = self.lines.get(self.at) {
            let blank = line.text.is_empty();
            if blank && line.indent > content {
                return None;
            }
            if !blank && line.indent < content {
                break;
            }
            if !blank {
                out.extend(std::iter::repeat_n(' ', line.indent - content));
                out.push_str(line.text);
            }
            out.push('\n');
            self.at += 1;
        }
        if self.at == self.lines.len() {
            // The split leaves an empty last line after the final line break; it
            // is not a line of the scalar.
            out.pop();
        }
        match chomp {
            Chomp::Keep => {}
            Chomp::Strip => out.truncate(out.trim_end_matches('\n').len()),
            Chomp::Clip => {
                out.truncate(out.trim_end_matches('\n').len());
                out.push('\n');
            }
        }
        Some(Value::String(out))
    }
}

enum Chomp {
    Clip,
    Strip,
    Keep,
}

fn is_dash(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// Nothing but spaces and perhaps a comment after a value.
fn end_of_line(after: &str) -> bool {
    let rest = after.trim_start_matches(' ');
    rest.is_empty() || (rest.len() < after.len() && rest.starts_with('#'))
}

/// Splits `key: rest`. `None` when the line is a mapping entry of a form left to the
/// general parser (a complex or merge key, a key with a comment in it).
fn entry(text: &str) -> Option<Entry<'_>> {
    let quoted = match text.as_bytes().first() {
        Some(b'"') => Some(double_quoted(text)?),
        Some(b'\'') => Some(single_quoted(text)?),
        _ => None,
    };
    if let Some((key, after)) = quoted {
        return match after.strip_prefix(':') {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => {
                Some(Entry::Pair(key, rest.trim_start_matches(' ')))
            }
            _ if end_of_line(after) => Some(Entry::Scalar),
            _ => None,
        };
    }
    let bytes = text.as_bytes();
    let Some(colon) =
        (0..bytes.len()).find(|&i| bytes[i] == b':' && bytes.get(i + 1).is_none_or(|&b| b == b' '))
    else {
        return Some(Entry::Scalar);
    };
    let key = text[..colon].trim_end_matches(' ');
    if key.is_empty() || key == "<<" || key.contains(" #") || starts_with_indicator(key) {
        return None;
    }
    // Keys are read as text: `8080: x` has the key "8080", as the general parser
    // gives a JSON map. Only a plain string is taken here, to be sure of that.
    if !is_plain_string(key) {
        return None;
    }
    Some(Entry::Pair(
        key.to_string(),
        text[colon + 1..].trim_start_matches(' '),
    ))
}

/// A plain scalar's text, without a trailing comment. `None` for what cannot be a
/// plain scalar in block context: a leading indicator, or `: ` inside.
fn plain_scalar(rest: &str) -> Option<&str> {
    if starts_with_indicator(rest) {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut end = bytes.len();
    for i in 0..bytes.len() {
        match bytes[i] {
            b'#' if i > 0 && bytes[i - 1] == b' ' => {
                end = i;
                break;
            }
            b':' if bytes.get(i + 1).is_none_or(|&b| b == b' ') => return None,
            _ => {}
        }
    }
    Some(rest[..end].trim_end_matches(' '))
}

/// YAML's indicators cannot start a plain scalar; `-`, `?` and `:` can when a
/// non-space follows (`-1`, `--port`).
fn starts_with_indicator(s: &str) -> bool {
    let bytes = s.as_bytes();
    match bytes.first() {
        Some(b'-' | b'?' | b':') => bytes.get(1).is_none_or(|&b| b == b' '),
        Some(
            b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|' | b'>' | b'\''
            | b'"' | b'%' | b'@' | b'`',
        ) => true,
        Some(_) => false,
        None => true,
    }
}

/// Plain scalars that are strings under every YAML schema: they start with a letter,
/// `/`, `_` or `--` and are none of the words YAML 1.1 reads as a boolean, null or
/// float (`yes`, `Off`, `NULL`, `nan`…), or they start with a digit and carry a
/// character no number or timestamp has.
fn is_plain_string(s: &str) -> bool {
    const WORDS: [&str; 12] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf", "infinity",
    ];
    let Some(&first) = s.as_bytes().first() else {
        return false;
    };
    if first.is_ascii_alphabetic() {
        return s.len() > 8 || !WORDS.iter().any(|w| w.eq_ignore_ascii_case(s));
    }
    if first.is_ascii_digit() {
        // Numbers, in any base or notation YAML knows, and timestamps are made of
        // these; a unit (`128Mi`, `100m`, `25%`) makes a string.
        return s
            .bytes()
            .any(|b| !(b.is_ascii_hexdigit() || b"._:+-xXoOtTzZ ".contains(&b)));
    }
    first == b'/' || first == b'_' || s.starts_with("--")
}

/// Decimal integers as JSON writes them: no sign but `-`, no leading zero (`0644` is
/// octal to kubectl), no separators, within i64.
fn canonical_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = match digits.as_bytes() {
        [b'0'] => digits.len() == s.len(),
        [b'1'..=b'9', rest @ ..] => rest.len() < 18 && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if canonical { s.parse().ok() } else { None }
}

/// A double-quoted scalar on one line: its value and what follows the closing quote.
fn double_quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 2..])),
            '\\' => {
                let (_, e) = chars.next()?;
                let hex = |chars: &mut std::str::CharIndices<'_>, n: usize| {
                    let digits: String = chars.by_ref().take(n).map(|(_, c)| c).collect();
                    let code = (digits.len() == n)
                        .then(|| u32::from_str_radix(&digits, 16).ok())
                        .flatten()?;
                    char::from_u32(code)
                };
                out.push(match e {
                    '0' => '\0',
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    't' => '\t',
                    'n' => '\n',
                    'v' => '\u{b}',
                    'f' => '\u{c}',
                    'r' => '\r',
                    'e' => '\u{1b}',
                    ' ' => ' ',
                    '"' => '"',
                    '/' => '/',
                    '\\' => '\\',
                    'N' => '\u{85}',
                    '_' => '\u{a0}',
                    'L' => '\u{2028}',
                    'P' => '\u{2029}',
                    'x' => hex(&mut chars, 2)?,
                    'u' => hex(&mut chars, 4)?,
                    'U' => hex(&mut chars, 8)?,
                    _ => return None,
                });
            }
            c => out.push(c),
        }
    }
    None
}

/// A single-quoted scalar on one line (`''` is a quote).
fn single_quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut rest = &s[1..];
    loop {
        let end = rest.find('\'')?;
        out.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        match rest.strip_prefix('\'') {
            Some(after) => {
                out.push('\'');
                rest = after;
            }
            None => return Some((out, rest)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::yaml::{full_parse, resolve_plain};
    use super::*;

    /// Reads `doc` both ways. When the block reader takes it, the general parser must
    /// give the same value; returns whether the block reader took it.
    fn agrees(doc: &str) -> bool {
        let fast = parse(doc, 128, &resolve_plain);
        if let Some(value) = &fast {
            match full_parse(doc) {
                Ok(general) => assert_eq!(&general, value, "document:\n{doc}"),
                Err(e) => {
                    panic!("the general parser refuses ({e}) what the block reader took:\n{doc}")
                }
            }
        }
        fast.is_some()
    }

    /// The shapes the block reader exists for; it must take every one of them.
    const TAKEN: &[&str] = &[
        // As `kubectl get -o yaml` prints it.
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  annotations:\n    deployment.kubernetes.io/revision: \"1\"\n  creationTimestamp: \"2026-11-01T10:00:00Z\"\n  generation: 2\n  managedFields:\n  - apiVersion: apps/v1\n    fieldsType: FieldsV1\n    fieldsV1:\n      f:spec:\n        f:replicas: {}\n    manager: tether\n    operation: Apply\n  name: web\n  namespace: shop\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - args:\n        - --port\n        - \"8080\"\n        image: nginx:1.27\n        name: web\n        ports:\n        - containerPort: 8080\n          protocol: TCP\n        resources: {}\n      dnsPolicy: ClusterFirst\n      tolerations: []\nstatus:\n  readyReplicas: -1\n  ratio: 0\n",
        // As people write it: comments, quoted keys, indented sequences, literals.
        "# the shop's config\napiVersion: v1   # core\nkind: ConfigMap\nmetadata:\n  name: 'shop''s'\n  labels:\n    \"app.kubernetes.io/name\": shop\n    tier: \"web \\\"front\\\" \\u00e9\"\ndata:\n  empty:\n  list:\n    - a b\n    -   c: 1\n        d: 2\n    -\n      e: 3\n  nginx.conf: |\n    server {\n      listen 80;\n\n      # not a comment\n    }\n  strip: |-\n    one\n    two\n\n  keep: |+\n    kept\n\n  tail: done\n",
        "- a\n- 1\n-\n- b: c\n",
        "a: |\n  last line without a break",
    ];

    #[test]
    fn takes_the_shapes_manifests_have() {
        for doc in TAKEN {
            assert!(agrees(doc), "not taken:\n{doc}");
        }
    }

    #[test]
    fn leaves_the_rest_to_the_general_parser() {
        for doc in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: [1, 2]\n",
            "a: {b: 1}\n",
            "a: >\n  folded\n",
            "a: |2\n   x\n",
            "a: |\n\n  leading blank\n",
            "a:\tb\n",
            "a: b\r\n",
            "a: 1\na: 2\n",
            "a: multi\n  line\n",
            "a: \"multi\n  line\"\n",
            "<<: {b: 1}\n",
            "? a\n: b\n",
            "8080: port\n",
            "a: b: c\n",
            "- - a\n",
            "plain scalar\n",
            "a:\n  b: 1\n c: 2\n",
            "a: \"bad \\q escape\"\n",
        ] {
            assert!(!agrees(doc), "taken:\n{doc}");
        }
    }

    #[test]
    fn scalars_are_typed_as_the_general_parser_types_them() {
        let scalars = [
            "yes",
            "No",
            "ON",
            "off",
            "y",
            "N",
            "True",
            "FALSE",
            "Null",
            "NULL",
            "~",
            "nan",
            "NaN",
            ".nan",
            ".inf",
            "-.Inf",
            "inf",
            "Infinity",
            "0644",
            "0o17",
            "0x1F",
            "0b11",
            "08",
            "09.5",
            "1e3",
            "1E-3",
            "1_000",
            "+5",
            "-0",
            "0",
            "-12",
            "123456789012345678",
            "1234567890123456789012",
            ".5",
            "1.",
            "1.2.3",
            "2026-11-01",
            "12:30:00",
            "1:20",
            "v1",
            "yesterday",
            "nully",
            "a'b",
            "a\"b",
            "a#b",
            "a # comment",
            "http://x:80/y",
            "-x",
            "--",
            "---x",
            "...x",
            "é",
            "_x",
            "/x",
            "=",
            "0.0",
            "-1.5e+3",
            "10Gi",
            "100m",
            "1Gi",
            "25%",
            "12h",
            "1.5Ki",
            "3d",
            "0x1g",
            "2001-12-14t21:59:43.10-05:00",
            "2001-12-14 21:59:43.10 -5",
            "1 2",
            "8080/TCP",
            "1e3x",
            "1,000",
        ];
        for s in scalars {
            agrees(&format!("k: {s}\n"));
            agrees(&format!("- {s}\n"));
            agrees(&format!("{s}: v\n"));
        }
    }

    /// Random edits of the shapes above, with the characters YAML gives meaning to:
    /// whatever the block reader takes, the general parser reads the same way.
    #[test]
    fn random_edits_never_disagree() {
        const ALPHABET: &[&str] = &[
            " ", "  ", "-", "- ", ":", ": ", "#", " #", "\n", "\"", "'", "|", "|-", "{", "}", "[",
            "]", "a", "0", "\\", "&", "*", "!", ">", "?", ",", "é", "~", ".", "---", "\u{85}",
            "\u{9f}", "\u{2028}", "\u{fffe}",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % n as u64).unwrap_or(0)
        };
        let mut taken = 0;
        for round in 0..6_000 {
            let mut doc = TAKEN[round % TAKEN.len()].to_string();
            for _ in 0..1 + next(3) {
                let mut at = next(doc.len() + 1);
                while !doc.is_char_boundary(at) {
                    at -= 1;
                }
                match next(3) {
                    0 => doc.insert_str(at, ALPHABET[next(ALPHABET.len())]),
                    1 => {
                        let mut end = (at + 1 + next(4)).min(doc.len());
                        while !doc.is_char_boundary(end) {
                            end += 1;
                        }
                        doc.replace_range(at..end, "");
                    }
                    _ => doc.insert(at, ' '),
                }
            }
            taken += usize::from(agrees(&doc));
        }
        // Most edits leave valid YAML that the block reader still takes; if it took
        // none, this test would prove nothing.
        assert!(taken > 1_000, "only {taken} edited documents were taken");
    }
}
