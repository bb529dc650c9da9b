//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource`), one parser
//! for every stage: `diff` compares them by value (`1000m` == `1`, `1Gi` == `1024Mi`)
//! so a quantity written differently is no drift, and the sandbox stores them in the
//! canonical form the real server answers with (`1024Mi` → `1Gi`, `0.5` → `500m`).
//!
//! Parsing is one scan of the borrowed text, with no allocation: the diff bench compares
//! every quantity of every pod template this way.

/// How a quantity was written, which decides how its canonical form is written
/// (`quantity.go`'s `Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityFormat {
    /// No suffix or a decimal SI one: `500m`, `2`, `1k`, `3G`.
    DecimalSi,
    /// A power-of-two suffix: `64Mi`, `1Gi`.
    BinarySi,
    /// An exponent: `1e3`, `5E-2`.
    DecimalExponent,
}

/// A parsed quantity: exactly `mantissa × 10^exponent`. Equal values compare equal
/// whatever their notation (`5 × 10^-1 == 500 × 10^-3`); the format only matters for
/// [`Quantity::canonical`].
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
    format: QuantityFormat,
}

/// Accumulating one more digit stays within `i128` below this.
const ACCUMULATE_LIMIT: i128 = (i128::MAX - 9) / 10;

/// The precision the real server keeps: every quantity is rounded up to nano-units when
/// it is parsed (`resource.Nano`).
const NANO_SCALE: i32 = -9;

impl Quantity {
    /// Parses the serialised form (`<sign><digits>[.<digits>]<suffix>`, surrounding
    /// blanks ignored as the server's JSON decoding ignores them); `None` when the text is
    /// not a quantity or too large to hold exactly.
    pub(crate) fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        // One pass over the number: its digits as an integer, and how many follow the
        // point (None until a point is seen).
        let mut mantissa: i128 = 0;
        let mut digits = 0;
        let mut fraction: Option<i32> = None;
        for &b in rest.as_bytes() {
            match b {
                b'0'..=b'9' => {
                    if mantissa > ACCUMULATE_LIMIT {
                        return None;
                    }
                    mantissa = mantissa * 10 + i128::from(b - b'0');
                    digits += 1;
                    if let Some(f) = &mut fraction {
                        *f += 1;
                    }
                }
                b'.' if fraction.is_none() => fraction = Some(0),
                b'.' => return None,
                _ => break,
            }
        }
        if digits == 0 {
            return None;
        }
        let number_len = digits + usize::from(fraction.is_some());
        let suffix = &rest[number_len..];
        let (format, exp2, exp10) = match suffix {
            "" => (QuantityFormat::DecimalSi, 0, 0),
            "n" => (QuantityFormat::DecimalSi, 0, -9),
            "u" => (QuantityFormat::DecimalSi, 0, -6),
            "m" => (QuantityFormat::DecimalSi, 0, -3),
            "k" => (QuantityFormat::DecimalSi, 0, 3),
            "M" => (QuantityFormat::DecimalSi, 0, 6),
            "G" => (QuantityFormat::DecimalSi, 0, 9),
            "T" => (QuantityFormat::DecimalSi, 0, 12),
            "P" => (QuantityFormat::DecimalSi, 0, 15),
            "E" => (QuantityFormat::DecimalSi, 0, 18),
            "Ki" => (QuantityFormat::BinarySi, 10, 0),
            "Mi" => (QuantityFormat::BinarySi, 20, 0),
            "Gi" => (QuantityFormat::BinarySi, 30, 0),
            "Ti" => (QuantityFormat::BinarySi, 40, 0),
            "Pi" => (QuantityFormat::BinarySi, 50, 0),
            "Ei" => (QuantityFormat::BinarySi, 60, 0),
            s if s.starts_with(['e', 'E']) => (
                QuantityFormat::DecimalExponent,
                0,
                s[1..].parse::<i32>().ok()?,
            ),
            _ => return None,
        };
        if exp2 > 0 {
            mantissa = mantissa.checked_mul(1i128 << exp2)?;
        }
        if negative {
            mantissa = -mantissa;
        }
        Some(Quantity {
            mantissa,
            exponent: exp10.checked_sub(fraction.unwrap_or(0))?,
            format,
        })
    }

    /// The mantissa over `10^exponent`, for an `exponent` at most this one's; None when
    /// it does not fit, and then the value is larger than any quantity that does.
    fn at_exponent(self, exponent: i32) -> Option<i128> {
        if self.mantissa == 0 {
            return Some(0);
        }
        let shift = u32::try_from(i64::from(self.exponent) - i64::from(exponent)).ok()?;
        10i128
            .checked_pow(shift)
            .and_then(|factor| self.mantissa.checked_mul(factor))
    }

    /// The text the real server stores and answers with for this quantity, rounded up
    /// to nano-units and, with `round_up_scale`, to that power of ten first (`Some(-3)`
    /// for resource lists, as `SetDefaults_ResourceList` does). None when the value
    /// cannot be represented exactly.
    pub(crate) fn canonical(&self, round_up_scale: Option<i32>) -> Option<String> {
        let mut q = *self;
        if q.format == QuantityFormat::BinarySi {
            // A binary value with a fraction is exact once its decimals are divided out.
            while q.exponent < 0 && q.mantissa % 10 == 0 {
                q.mantissa /= 10;
                q.exponent += 1;
            }
        }
        q.round_up(NANO_SCALE)?;
        if let Some(scale) = round_up_scale {
            q.round_up(scale)?;
        }
        Some(q.format_canonical())
    }

    /// Rounds the magnitude up (away from zero) so the exponent is at least `scale`.
    fn round_up(&mut self, scale: i32) -> Option<()> {
        if self.exponent >= scale {
            return Some(());
        }
        let shift = u32::try_from(i64::from(scale) - i64::from(self.exponent)).ok()?;
        let (quotient, remainder) = match 10i128.checked_pow(shift) {
            Some(d) => (self.mantissa / d, self.mantissa % d),
            // Finer than any i128 can hold: it is a non-zero sliver below the scale.
            None => (0, self.mantissa),
        };
        self.mantissa = quotient + remainder.signum();
        self.exponent = scale;
        Some(())
    }

    fn format_canonical(&self) -> String {
        if self.mantissa == 0 {
            return "0".to_string();
        }
        let mut format = self.format;
        if format == QuantityFormat::BinarySi {
            if self.mantissa.abs() < 1024 && self.exponent <= 0 {
                format = QuantityFormat::DecimalSi;
            } else if let Some(integer) = self.as_integer() {
                if integer.abs() < 1024 {
                    format = QuantityFormat::DecimalSi;
                } else {
                    return format_binary(integer);
                }
            } else {
                format = QuantityFormat::DecimalSi;
            }
        }
        let mut mantissa = self.mantissa;
        let mut exponent = self.exponent;
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
            (QuantityFormat::DecimalSi, -9) => "n".into(),
            (QuantityFormat::DecimalSi, -6) => "u".into(),
            (QuantityFormat::DecimalSi, -3) => "m".into(),
            (QuantityFormat::DecimalSi, 3) => "k".into(),
            (QuantityFormat::DecimalSi, 6) => "M".into(),
            (QuantityFormat::DecimalSi, 9) => "G".into(),
            (QuantityFormat::DecimalSi, 12) => "T".into(),
            (QuantityFormat::DecimalSi, 15) => "P".into(),
            (QuantityFormat::DecimalSi, 18) => "E".into(),
            (_, e) => format!("e{e}"),
        };
        format!("{mantissa}{suffix}")
    }

    fn as_integer(&self) -> Option<i128> {
        if self.exponent >= 0 {
            let factor = 10i128.checked_pow(u32::try_from(self.exponent).ok()?)?;
            self.mantissa.checked_mul(factor)
        } else {
            let divisor = 10i128.checked_pow(u32::try_from(-self.exponent).ok()?)?;
            (self.mantissa % divisor == 0).then_some(self.mantissa / divisor)
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        // Brought to the finer exponent; the side already at it always fits, so a side
        // that does not fit is the larger one.
        let exponent = self.exponent.min(other.exponent);
        match (self.at_exponent(exponent), other.at_exponent(exponent)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Quantity {}

fn format_binary(mut value: i128) -> String {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut index = 0;
    while index + 1 < SUFFIXES.len() && value % 1024 == 0 {
        value /= 1024;
        index += 1;
    }
    format!("{value}{}", SUFFIXES[index])
}

/// Whether two serialised quantities (strings or JSON numbers) denote the same value.
pub fn same_quantity(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let quantity = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Quantity::parse(s),
        serde_json::Value::Number(n) => Quantity::parse(&n.to_string()),
        _ => None,
    };
    match (quantity(a), quantity(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// The canonical text of a quantity ([`Quantity::canonical`]), or None when `text` is
/// not a quantity or too large to represent exactly.
pub fn canonical_quantity(text: &str, round_up_scale: Option<i32>) -> Option<String> {
    Quantity::parse(text)?.canonical(round_up_scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eq(a: &str, b: &str) -> bool {
        Quantity::parse(a).is_some() && Quantity::parse(a) == Quantity::parse(b)
    }

    fn canon(s: &str) -> String {
        canonical_quantity(s, None).unwrap_or_else(|| format!("<{s} rejected>"))
    }

    #[test]
    fn equal_values_in_different_notations() {
        assert!(eq("1000m", "1"));
        assert!(eq("1Gi", "1024Mi"));
        assert!(eq("0.5", "500m"));
        assert!(eq("1.5Gi", "1536Mi"));
        assert!(eq("1e3", "1k"));
        assert!(eq("1E3", "1000"));
        assert!(eq("2M", "2000k"));
        assert!(eq("100m", "0.1"));
        assert!(eq("1Ki", "1024"));
        assert!(eq("-1", "-1000m"));
        assert!(eq("1000000n", "1m"));
        assert!(eq("0e-400", "0"));
        assert!(eq("1.50", "1.5"));
        assert!(eq("+2", "2.000"));
        assert!(eq("1.", "1"));
        assert!(eq(".5", "500m"));
        assert!(eq(" 1Gi ", "1Gi"));
        // Beyond i128 once multiplied out, yet equal: exponents are compared exactly.
        assert!(eq("1e100", "10e99"));
    }

    #[test]
    fn different_values_differ() {
        assert!(!eq("1G", "1Gi"));
        assert!(!eq("100m", "1"));
        assert!(!eq("128Mi", "128M"));
        assert!(!eq("1", "-1"));
        assert!(!eq("1e-40", "0"));
        assert!(!eq("1e-400", "0"));
        // The left side cannot be brought to the right's exponent within i128.
        assert!(!eq("99999999999999999999999999999999999999", "1n"));
        assert!(!eq("1e2147483647", "1e-2147483648"));
    }

    #[test]
    fn rejects_non_quantities() {
        for s in [
            "", "abc", "1..2", "1Q", ".", "1.2.3", "Gi", "1e", "1x", "-", "+.", "1 m", "m", "1e+",
            "1Kib", "1 Gi",
        ] {
            assert_eq!(Quantity::parse(s), None, "{s}");
            assert_eq!(canonical_quantity(s, None), None, "{s:?}");
        }
    }

    #[test]
    fn huge_values_do_not_overflow() {
        assert_eq!(
            Quantity::parse("99999999999999999999999999999999999999999Ei"),
            None
        );
        assert!(eq("8Ei", "8192Pi"));
        assert_eq!(Quantity::parse("1.5e-2147483648"), None);
    }

    #[test]
    fn numbers_and_strings_compare() {
        use serde_json::json;
        assert!(same_quantity(&json!(1), &json!("1000m")));
        assert!(same_quantity(&json!(0.5), &json!("500m")));
        assert!(!same_quantity(&json!(true), &json!("1")));
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
    fn canonical_text_parses_back_to_the_same_value() {
        for s in ["1.5Gi", "0.5", "1e3", "12e2", "-1500m", "0.1Ki", "1024Mi"] {
            let canonical = canon(s);
            assert!(eq(s, &canonical), "{s} → {canonical}");
        }
    }
}
