//! The string `format`s kube-apiserver checks in custom resources (kube-openapi's
//! `strfmt` registry as apiextensions-apiserver narrows it): a value that does not
//! parse is refused as `must be of type <format>`. Formats outside this list (and
//! those kube-apiserver only records, such as `password`) accept any string.

use std::net::{Ipv4Addr, Ipv6Addr};

use base64::Engine;

/// Whether `text` is a valid `format` value; `true` for formats not checked here.
pub(super) fn conforms(format: &str, text: &str) -> bool {
    match format {
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
        "ipv4" => text.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(text),
        "uuid" => is_uuid(text),
        "hostname" => is_hostname(text),
        _ => true,
    }
}

fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match (ip.parse::<Ipv4Addr>(), ip.parse::<Ipv6Addr>()) {
        (Ok(_), _) => bits <= 32,
        (_, Ok(_)) => bits <= 128,
        _ => false,
    }
}

/// `8-4-4-4-12` hexadecimal digits.
fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// An RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens,
/// at most 63 characters each and 255 in all.
fn is_hostname(text: &str) -> bool {
    const HOSTNAME_MAX: usize = 255;
    const LABEL_MAX: usize = 63;
    !text.is_empty()
        && text.len() <= HOSTNAME_MAX
        && text.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= LABEL_MAX
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::conforms;

    #[test]
    fn checked_formats_refuse_what_does_not_parse() {
        for (format, good, bad) in [
            ("byte", "aGVsbG8=", "not base64!"),
            ("date", "2026-11-27", "27.11.2026"),
            ("date-time", "2026-11-27T08:00:00Z", "2026-11-27 08:00"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "fd00::1", "fd00:::1"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6ba7b810"),
            ("hostname", "api.example.com", "-bad-.example.com"),
        ] {
            assert!(conforms(format, good), "{format}: {good}");
            assert!(!conforms(format, bad), "{format}: {bad}");
        }
        assert!(conforms("password", "anything at all"));
        assert!(conforms("no-such-format", ""));
    }
}
