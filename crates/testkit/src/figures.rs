//! The arithmetic of a benchmark's figures.

use std::time::Duration;

/// Milliseconds, as the tables print them.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The median of samples (the upper one of an even count). Panics on no samples: a
/// figure of nothing is a broken bench.
pub fn median<T: Copy + PartialOrd>(samples: &[T]) -> T {
    let mut sorted = samples.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    sorted[sorted.len() / 2]
}

/// The nearest-rank percentile `p` (0–100) of samples.
pub fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// A table's verdict column: `FAIL` is what `.ci/run`'s quick benches look for.
pub fn verdict(pass: bool) -> &'static str {
    if pass { "pass" } else { "FAIL" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_is_the_middle_sample_whatever_the_order() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4, 1, 3, 2]), 3);
        let d = Duration::from_millis;
        assert_eq!(median(&[d(9), d(1), d(5)]), d(5));
    }

    #[test]
    fn percentile_takes_the_nearest_rank() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&samples, 50.0), 50.0);
        assert_eq!(percentile(&samples, 99.0), 99.0);
        assert_eq!(percentile(&samples, 0.0), 1.0);
        assert_eq!(percentile(&[7.0], 90.0), 7.0);
    }
}
