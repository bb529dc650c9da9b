//! Durations as the configuration spells them (`30s`, `1m`, `1h30m`, `500ms`): a leaf
//! every layer may use (the configuration, notifications, sync windows, the command
//! line), so it imports nothing of the crate.

use std::time::Duration;

/// Parses `30s`, `1m`, `1h30m`, `8h`, `500ms`: one or more integer amounts, each with a
/// unit (`ms`, `s`, `m`, `h`). Zero is accepted here; callers that need a positive
/// duration say so.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let not = || format!("{text:?} is not a duration (like 30s, 1m, 1h30m or 500ms)");
    let s = text.trim();
    if s.is_empty() {
        return Err(not());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(not());
        }
        let amount: u64 = rest[..digits].parse().map_err(|_| not())?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (Duration::from_millis(1), 2)
        } else if rest.starts_with('s') {
            (Duration::from_secs(1), 1)
        } else if rest.starts_with('m') {
            (Duration::from_secs(60), 1)
        } else if rest.starts_with('h') {
            (Duration::from_secs(3600), 1)
        } else {
            return Err(not());
        };
        rest = &rest[len..];
        let part = u32::try_from(amount)
            .ok()
            .and_then(|a| unit.checked_mul(a))
            .ok_or_else(|| format!("{text:?} is too long"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("{text:?} is too long"))?;
    }
    Ok(total)
}

/// `8h`, `1h30m`, `90s` → `1m30s`, `500ms`: the config's own spelling.
pub fn format_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    let mut out = String::new();
    let secs = d.as_secs();
    let (h, m, s, ms) = (secs / 3600, secs / 60 % 60, secs % 60, d.subsec_millis());
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s"), (u64::from(ms), "ms")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() {
        out = format!("{}ns", d.subsec_nanos());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_spelling() {
        let d = |s: &str| parse_duration(s);
        assert_eq!(d("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(d("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(d("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(d("8h"), Ok(Duration::from_secs(8 * 3600)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(d("1m30s250ms"), Ok(Duration::from_millis(90_250)));
        for bad in ["1x", "", "30", "m", "1.5h", "-1s", "1 h", "h1"] {
            assert_eq!(
                d(bad),
                Err(format!(
                    "{bad:?} is not a duration (like 30s, 1m, 1h30m or 500ms)"
                )),
                "{bad}"
            );
        }
        assert_eq!(
            d("99999999999h"),
            Err("\"99999999999h\" is too long".into())
        );
    }

    #[test]
    fn durations_print_as_they_are_written() {
        let f = |s: u64| format_duration(Duration::from_secs(s));
        assert_eq!(f(8 * 3600), "8h");
        assert_eq!(f(5400), "1h30m");
        assert_eq!(f(90), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
