//! Helm's version constraints (Masterminds/semver, which Helm uses for
//! `dependencies[].version`) read into `semver` requirements, and the newest version
//! of a repository's list that meets one.
//!
//! Where the two differ, Helm's reading wins: a bare version is exact (`1.2.3` is
//! `=1.2.3`, not Cargo's `^1.2.3`), comparators are separated by spaces or commas,
//! `||` separates alternatives and `1.2 - 1.4` is a range.

use semver::{Version, VersionReq};

/// Operators that may stand apart from their version (`>= 1.2`).
const OPERATORS: [&str; 7] = [">=", "<=", ">", "<", "=", "~", "^"];

/// The alternatives of a Helm constraint; an error says what is wrong.
pub fn parse_constraint(text: &str) -> Result<Vec<VersionReq>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(vec![VersionReq::STAR]);
    }
    text.split("||")
        .map(|alternative| {
            let comparators = comparators(alternative)?;
            VersionReq::parse(&comparators.join(", ")).map_err(|e| e.to_string())
        })
        .collect()
}

/// One alternative's comparators, in `semver`'s spelling.
fn comparators(alternative: &str) -> Result<Vec<String>, String> {
    let tokens: Vec<&str> = alternative
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        if tokens.get(i + 1) == Some(&"-") {
            let upper = tokens.get(i + 2).ok_or("a range without its upper end")?;
            out.push(format!(">={}", bare(token)));
            out.push(format!("<={}", bare(upper)));
            i += 3;
            continue;
        }
        if OPERATORS.contains(&token) {
            let version = tokens.get(i + 1).ok_or("an operator without a version")?;
            out.push(format!("{token}{}", bare(version)));
            i += 2;
            continue;
        }
        if token.starts_with("!=") {
            return Err("`!=` is not supported".to_string());
        }
        let split = token
            .find(|c: char| !OPERATORS.iter().any(|o| o.contains(c)))
            .unwrap_or(token.len());
        let (op, version) = token.split_at(split);
        let op = if op.is_empty() && !is_wildcard(version) {
            "="
        } else {
            op
        };
        out.push(format!("{op}{}", bare(version)));
        i += 1;
    }
    Ok(out)
}

/// Whether a version has a wildcard part (`*`, `1.x`, `1.2.*`): `semver` takes
/// those without an operator only.
fn is_wildcard(version: &str) -> bool {
    version
        .split('.')
        .any(|part| matches!(part, "*" | "x" | "X"))
}

/// A version without Helm's optional `v`.
fn bare(version: &str) -> &str {
    version.strip_prefix('v').unwrap_or(version)
}

/// A repository's version string read as semver (`v1.2.3` too); `None` when it is not.
pub fn parse_version(text: &str) -> Option<Version> {
    Version::parse(bare(text.trim())).ok()
}

/// The newest of `versions` meeting any of `reqs`.
pub fn newest<'a>(versions: impl Iterator<Item = &'a str>, reqs: &[VersionReq]) -> Option<&'a str> {
    versions
        .filter_map(|text| Some((parse_version(text)?, text)))
        .filter(|(version, _)| reqs.iter().any(|req| req.matches(version)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, text)| text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick<'a>(constraint: &str, versions: &[&'a str]) -> Option<&'a str> {
        let reqs = parse_constraint(constraint).expect(constraint);
        newest(versions.iter().copied(), &reqs)
    }

    #[test]
    fn helm_constraints_pick_the_newest_match_as_helm_does() {
        let versions = ["1.2.0", "1.2.9", "1.3.0", "2.0.0", "2.1.0-rc.1", "v0.9.1"];
        assert_eq!(pick("~1.2", &versions), Some("1.2.9"));
        assert_eq!(pick("^1.2.0", &versions), Some("1.3.0"));
        assert_eq!(pick("1.2.0", &versions), Some("1.2.0"), "bare is exact");
        assert_eq!(pick(">=1.0.0 <2", &versions), Some("1.3.0"));
        assert_eq!(pick(">= 1.0.0, < 2.0.0", &versions), Some("1.3.0"));
        assert_eq!(pick("1.2.x", &versions), Some("1.2.9"));
        assert_eq!(pick("1.2 - 1.2.5", &versions), Some("1.2.0"));
        assert_eq!(pick("~0.9 || ~2.0", &versions), Some("2.0.0"));
        assert_eq!(pick("*", &versions), Some("2.0.0"), "no prerelease");
        assert_eq!(pick("", &versions), Some("2.0.0"));
        assert_eq!(pick("v0.9.1", &versions), Some("v0.9.1"));
        assert_eq!(pick("~3", &versions), None);
        assert!(parse_constraint(">=").is_err());
        assert!(parse_constraint("!=1.0.0").is_err());
        assert!(parse_constraint("banana").is_err());
    }
}
