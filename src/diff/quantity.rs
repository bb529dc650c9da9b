//! Kubernetes quantities compared by value: `1000m` == `1`, `1Gi` == `1024Mi`,
//! `0.5` == `500m`, as the API server canonicalises them (k8s.io/apimachinery
//! `pkg/api/resource/quantity.go`).

/// A quantity as an exact fraction `num / 10^scale`. Equal values compare equal
/// whatever their scale (`5 / 10^1 == 500 / 10^3`).
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    num: i128,
    scale: u32,
}

/// Accumulating one more digit stays within `i128` below this.
const ACCUMULATE_LIMIT: i128 = (i128::MAX - 9) / 10;

impl Quantity {
    /// Parses the serialised form (`<sign><digits>[.<digits>]<suffix>`); `None` when
    /// the text is not a quantity or too large to hold exactly.
    pub fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        // One pass over the number: its digits as an integer, and how many follow the
        // point (None until a point is seen).
        let mut num: i128 = 0;
        let mut digits = 0;
        let mut fraction: Option<i32> = None;
        for &b in rest.as_bytes() {
            match b {
                b'0'..=b'9' => {
                    if num > ACCUMULATE_LIMIT {
                        return None;
                    }
                    num = num * 10 + i128::from(b - b'0');
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
        let mut exp10: i32 = -fraction.unwrap_or(0);
        let mut exp2: u32 = 0;
        match suffix {
            "" => {}
            "n" => exp10 -= 9,
            "u" => exp10 -= 6,
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            "Ki" => exp2 = 10,
            "Mi" => exp2 = 20,
            "Gi" => exp2 = 30,
            "Ti" => exp2 = 40,
            "Pi" => exp2 = 50,
            "Ei" => exp2 = 60,
            s if s.starts_with(['e', 'E']) => exp10 += s[1..].parse::<i32>().ok()?,
            _ => return None,
        }
        if exp2 > 0 {
            num = num.checked_mul(1i128 << exp2)?;
        }
        if negative {
            num = -num;
        }
        let scale = if exp10 >= 0 {
            num = num.checked_mul(10i128.checked_pow(exp10.unsigned_abs())?)?;
            0
        } else {
            exp10.unsigned_abs()
        };
        Some(Quantity { num, scale })
    }

    /// The numerator over `10^scale`, for a `scale` at least this one's; None when it
    /// does not fit, and then the value is larger than any quantity that does.
    fn at_scale(self, scale: u32) -> Option<i128> {
        if self.num == 0 {
            return Some(0);
        }
        10i128
            .checked_pow(scale - self.scale)
            .and_then(|factor| self.num.checked_mul(factor))
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        // Brought to the finer scale; the side already at it always fits, so a side
        // that does not fit is the larger one.
        let scale = self.scale.max(other.scale);
        match (self.at_scale(scale), other.at_scale(scale)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Quantity {}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn eq(a: &str, b: &str) -> bool {
        Quantity::parse(a).is_some() && Quantity::parse(a) == Quantity::parse(b)
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
    }

    #[test]
    fn different_values_differ() {
        assert!(!eq("1G", "1Gi"));
        assert!(!eq("100m", "1"));
        assert!(!eq("128Mi", "128M"));
        assert!(!eq("1", "-1"));
        assert!(!eq("1e-40", "0"));
        assert!(!eq("1e-400", "0"));
        // The left side cannot be brought to the right's scale within i128.
        assert!(!eq("99999999999999999999999999999999999999", "1n"));
    }

    #[test]
    fn rejects_non_quantities() {
        for s in [
            "", "abc", "1..2", "1Q", ".", "1.2.3", "Gi", "1e", "1x", "-", "+.", "1 m",
        ] {
            assert_eq!(Quantity::parse(s), None, "{s}");
        }
    }

    #[test]
    fn huge_values_do_not_overflow() {
        assert_eq!(
            Quantity::parse("99999999999999999999999999999999999999999Ei"),
            None
        );
        assert!(eq("8Ei", "8192Pi"));
    }

    #[test]
    fn numbers_and_strings_compare() {
        use serde_json::json;
        assert!(same_quantity(&json!(1), &json!("1000m")));
        assert!(same_quantity(&json!(0.5), &json!("500m")));
        assert!(!same_quantity(&json!(true), &json!("1")));
    }
}
