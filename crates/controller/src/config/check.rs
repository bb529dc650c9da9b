//! Validation's bookkeeping: every problem found, with its field path and line, so one
//! run of `tether serve` names all that is wrong with a file, top to bottom.

use std::time::Duration;

use super::Problem;
use super::raw::S;
use tether_schema::duration::parse_duration;

#[derive(Default)]
pub(super) struct Checker {
    pub(super) problems: Vec<Problem>,
}

pub(super) fn line_of<T>(s: &S<T>) -> Option<usize> {
    Some(s.referenced.line() as usize).filter(|l| *l > 0)
}

impl Checker {
    pub(super) fn report(
        &mut self,
        path: impl Into<String>,
        line: Option<usize>,
        message: impl Into<String>,
    ) {
        self.problems.push(Problem {
            path: path.into(),
            line,
            message: message.into(),
        });
    }

    /// A positive duration, or the default when absent.
    pub(super) fn duration(
        &mut self,
        path: &str,
        value: Option<&S<String>>,
        default: Duration,
    ) -> Duration {
        let Some(value) = value else {
            return default;
        };
        match parse_duration(&value.value) {
            Ok(d) if d.is_zero() => {
                self.report(
                    path,
                    line_of(value),
                    format!("{:?} must be positive", value.value),
                );
                default
            }
            Ok(d) => d,
            Err(message) => {
                self.report(path, line_of(value), message);
                default
            }
        }
    }

    pub(super) fn label(&mut self, path: &str, value: &S<String>, max: usize, why: &str) {
        if let Err(message) = dns1123_label(&value.value, max, why) {
            self.report(path, line_of(value), message);
        }
    }

    pub(super) fn non_empty(&mut self, path: &str, value: &S<String>) -> bool {
        if value.value.trim().is_empty() {
            self.report(path, line_of(value), "must not be empty");
            false
        } else {
            true
        }
    }
}

/// RFC 1123 label, as Kubernetes checks names of namespaces and labels.
pub(super) fn dns1123_label(name: &str, max: usize, why: &str) -> Result<(), String> {
    let valid_chars = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !valid_chars {
        return Err(format!(
            "{name:?} is not a DNS-1123 label (lowercase letters, digits and '-', \
             starting and ending with a letter or digit)"
        ));
    }
    if name.len() > max {
        return Err(format!("{name:?} is longer than {max} characters{why}"));
    }
    Ok(())
}

/// RFC 1123 subdomain (dot-separated labels, 253 characters), as Kubernetes checks
/// most object names.
pub(super) fn dns1123_subdomain(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| dns1123_label(l, 63, "").is_ok());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', \
             at most 253 characters)"
        ))
    }
}
