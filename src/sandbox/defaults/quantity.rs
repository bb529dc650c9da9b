//! Resource quantities in the canonical form the real server stores and answers with
//! (`k8s.io/apimachinery/pkg/api/resource`): `1024Mi` comes back as `1Gi`, `0.5` as
//! `500m`. Without it a diff reports drift on every quantity written differently.

/// The precision every quantity is rounded up to on parse: nano-units.
const NANO_SCALE: i32 = -9;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// A parsed quantity: `mantissa × 10^exponent`, in the format its suffix chose.
#[derive(Debug)]
struct Quantity {
    mantissa: i128,
    exponent: i32,
    format: Format,
}

/// The canonical text of a quantity, or None when `text` is not a quantity (or too
/// large to represent exactly). `round_up_scale` first rounds the magnitude up to that
/// power of ten (`Some(-3)` for resource lists, as `SetDefaults_ResourceList` does).
pub fn canonical_quantity(text: &str, round_up_scale: Option<i32>) -> Option<String> {
    let mut q = parse(text)?;
    round_up(&mut q, NANO_SCALE)?;
    if let Some(scale) = round_up_scale {
        round_up(&mut q, scale)?;
    }
    Some(format(&q))
}

fn parse(text: &str) -> Option<Quantity> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &text[int_start..i];
    let mut frac_digits = "";
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &text[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return None;
    }
    let suffix = &text[i..];
    let (format, multiplier_pow2, suffix_exp) = match suffix {
        "" => (Format::DecimalSi, 0, 0),
        "n" => (Format::DecimalSi, 0, -9),
        "u" => (Format::DecimalSi, 0, -6),
        "m" => (Format::DecimalSi, 0, -3),
        "k" => (Format::DecimalSi, 0, 3),
        "M" => (Format::DecimalSi, 0, 6),
        "G" => (Format::DecimalSi, 0, 9),
        "T" => (Format::DecimalSi, 0, 12),
        "P" => (Format::DecimalSi, 0, 15),
        "E" => (Format::DecimalSi, 0, 18),
        "Ki" => (Format::BinarySi, 10, 0),
        "Mi" => (Format::BinarySi, 20, 0),
        "Gi" => (Format::BinarySi, 30, 0),
        "Ti" => (Format::BinarySi, 40, 0),
        "Pi" => (Format::BinarySi, 50, 0),
        "Ei" => (Format::BinarySi, 60, 0),
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = parse_exponent(&s[1..])?;
            (Format::DecimalExponent, 0, exp)
        }
        _ => return None,
    };
    let mut mantissa: i128 = 0;
    for d in int_digits.bytes().chain(frac_digits.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(i128::from(d - b'0'))?;
    }
    let frac_len = i32::try_from(frac_digits.len()).ok()?;
    let mut exponent = suffix_exp.checked_sub(frac_len)?;
    if multiplier_pow2 > 0 {
        mantissa = mantissa.checked_mul(1i128 << multiplier_pow2)?;
        // A binary value with a fraction is exact once its decimals are divided out.
        while exponent < 0 && mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
    }
    if negative {
        mantissa = -mantissa;
    }
    Some(Quantity {
        mantissa,
        exponent,
        format,
    })
}

fn parse_exponent(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Rounds the magnitude up (away from zero) so the exponent is at least `scale`.
fn round_up(q: &mut Quantity, scale: i32) -> Option<()> {
    if q.exponent >= scale {
        return Some(());
    }
    let shift = u32::try_from(scale - q.exponent).ok()?;
    let divisor = 10i128.checked_pow(shift);
    let (quotient, remainder) = match divisor {
        Some(d) => (q.mantissa / d, q.mantissa % d),
        // Finer than any i128 can hold: it is a non-zero sliver below the scale.
        None => (0, q.mantissa),
    };
    q.mantissa = quotient + remainder.signum();
    q.exponent = scale;
    Some(())
}

fn format(q: &Quantity) -> String {
    if q.mantissa == 0 {
        return "0".to_string();
    }
    let mut format = q.format;
    if format == Format::BinarySi {
        if q.mantissa.abs() < 1024 && q.exponent <= 0 {
            format = Format::DecimalSi;
        } else if let Some(integer) = as_integer(q) {
            if integer.abs() < 1024 {
                format = Format::DecimalSi;
            } else {
                return format_binary(integer);
            }
        } else {
            format = Format::DecimalSi;
        }
    }
    let mut mantissa = q.mantissa;
    let mut exponent = q.exponent;
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    match exponent.rem_euclid(3) {
        1 => {
            mantissa *= 10;
            exponent -= 1;
        }
        2 => {
            mantissa *= 100;
            exponent -= 2;
        }
        _ => {}
    }
    let suffix = match (format, exponent) {
        (_, 0) => String::new(),
        (Format::DecimalSi, -9) => "n".into(),
        (Format::DecimalSi, -6) => "u".into(),
        (Format::DecimalSi, -3) => "m".into(),
        (Format::DecimalSi, 3) => "k".into(),
        (Format::DecimalSi, 6) => "M".into(),
        (Format::DecimalSi, 9) => "G".into(),
        (Format::DecimalSi, 12) => "T".into(),
        (Format::DecimalSi, 15) => "P".into(),
        (Format::DecimalSi, 18) => "E".into(),
        (_, e) => format!("e{e}"),
    };
    format!("{mantissa}{suffix}")
}

fn as_integer(q: &Quantity) -> Option<i128> {
    if q.exponent >= 0 {
        let factor = 10i128.checked_pow(u32::try_from(q.exponent).ok()?)?;
        q.mantissa.checked_mul(factor)
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(-q.exponent).ok()?)?;
        (q.mantissa % divisor == 0).then_some(q.mantissa / divisor)
    }
}

fn format_binary(mut value: i128) -> String {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut index = 0;
    while index + 1 < SUFFIXES.len() && value % 1024 == 0 {
        value /= 1024;
        index += 1;
    }
    format!("{value}{}", SUFFIXES[index])
}

#[cfg(test)]
mod tests {
    use super::canonical_quantity;

    fn canon(s: &str) -> String {
        canonical_quantity(s, None).unwrap_or_else(|| format!("<{s} rejected>"))
    }

    #[test]
    fn decimal_values_keep_their_unit_or_move_to_a_multiple_of_three() {
        assert_eq!(canon("100m"), "100m");
        assert_eq!(canon("1"), "1");
        assert_eq!(canon("1000m"), "1");
        assert_eq!(canon("1500m"), "1500m");
        assert_eq!(canon("0.5"), "500m");
        assert_eq!(canon("0.1"), "100m");
        assert_eq!(canon("1.0"), "1");
        assert_eq!(canon("1000"), "1k");
        assert_eq!(canon("1200"), "1200");
        assert_eq!(canon("1000M"), "1G");
        assert_eq!(canon("12e2"), "1200");
        assert_eq!(canon("1e3"), "1e3");
        assert_eq!(canon("1E6"), "1e6");
        assert_eq!(canon("+2"), "2");
        assert_eq!(canon("-1500m"), "-1500m");
        assert_eq!(canon(".5"), "500m");
        assert_eq!(canon("0"), "0");
        assert_eq!(canon("0Gi"), "0");
    }

    #[test]
    fn binary_values_use_the_largest_exact_power_of_1024() {
        assert_eq!(canon("64Mi"), "64Mi");
        assert_eq!(canon("1024Mi"), "1Gi");
        assert_eq!(canon("1536Mi"), "1536Mi");
        assert_eq!(canon("1.5Gi"), "1536Mi");
        assert_eq!(canon("0.5Gi"), "512Mi");
        assert_eq!(canon("1Ki"), "1Ki");
        // Below 1024 a binary value is written in decimal.
        assert_eq!(canon("0.5Ki"), "512");
        assert_eq!(canon("1.5Ki"), "1536");
        assert_eq!(canon("0.1Ki"), "102400m");
    }

    #[test]
    fn precision_is_rounded_up_to_nano_and_optionally_milli() {
        assert_eq!(canon("0.0000000001"), "1n");
        assert_eq!(
            canonical_quantity("0.0001", Some(-3)).as_deref(),
            Some("1m")
        );
        assert_eq!(
            canonical_quantity("1.0001", Some(-3)).as_deref(),
            Some("1001m")
        );
        assert_eq!(
            canonical_quantity("-0.0001", Some(-3)).as_deref(),
            Some("-1m")
        );
        assert_eq!(
            canonical_quantity("250m", Some(-3)).as_deref(),
            Some("250m")
        );
    }

    #[test]
    fn non_quantities_are_rejected() {
        for bad in [
            "", "abc", "1x", "1.2.3", "m", "-", "1e", "1e+", "1Kib", "1 Gi",
        ] {
            assert_eq!(canonical_quantity(bad, None), None, "{bad:?}");
        }
    }
}
