//! Kubernetes quantities compared by value: `1000m` == `1`, `1Gi` == `1024Mi`,
//! `0.5` == `500m`, as the API server canonicalises them (k8s.io/apimachinery
//! `pkg/api/resource/quantity.go`).

/// A quantity as an exact fraction `num / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    num: i128,
    scale: u32,
}

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
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        let mut num: i128 = 0;
        for c in int_part.bytes().chain(frac_part.bytes()) {
            num = num.checked_mul(10)?.checked_add(i128::from(c - b'0'))?;
        }
        let mut exp10: i32 = -(i32::try_from(frac_part.len()).ok()?);
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
        num = num.checked_mul(1i128.checked_shl(exp2)?)?;
        if negative {
            num = -num;
        }
        let scale = if exp10 >= 0 {
            num = num.checked_mul(10i128.checked_pow(exp10.unsigned_abs())?)?;
            0
        } else {
            exp10.unsigned_abs()
        };
        Some(Quantity { num, scale }.reduced())
    }

    /// Removes trailing decimal zeros so equal values have one representation.
    fn reduced(mut self) -> Quantity {
        while self.scale > 0 && self.num % 10 == 0 {
            self.num /= 10;
            self.scale -= 1;
        }
        self
    }
}

/// Whether two serialised quantities (strings or JSON numbers) denote the same value.
pub fn same_quantity(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match (
        text(a).as_deref().and_then(Quantity::parse),
        text(b).as_deref().and_then(Quantity::parse),
    ) {
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
    }

    #[test]
    fn different_values_differ() {
        assert!(!eq("1G", "1Gi"));
        assert!(!eq("100m", "1"));
        assert!(!eq("128Mi", "128M"));
        assert!(!eq("1", "-1"));
    }

    #[test]
    fn rejects_non_quantities() {
        for s in ["", "abc", "1..2", "1Q", ".", "1.2.3", "Gi", "1e", "1x"] {
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
