//! The arithmetic of a benchmark's figures, and where they are written.

use std::path::{Path, PathBuf};
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

/// Writes a bench's figures as `target/bench-results/FILE` under `root` (the bench's
/// `CARGO_MANIFEST_DIR`), where `benches/README.md` and CI read them; returns the path.
/// Panics when it cannot: a bench whose figures are lost has failed.
pub fn write_results(root: &str, file: &str, results: &serde_json::Value) -> PathBuf {
    let dir = Path::new(root).join("target").join("bench-results");
    std::fs::create_dir_all(&dir).expect("mkdir bench-results");
    let path = dir.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(results).expect("JSON"))
        .expect("write results");
    path
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

    #[test]
    fn results_are_written_pretty_under_target_bench_results() {
        let root = tempfile::tempdir().expect("tempdir");
        let root_str = root.path().to_str().expect("a UTF-8 path");
        let path = write_results(root_str, "x.json", &serde_json::json!({"p50": 1.5}));
        assert_eq!(path, root.path().join("target/bench-results/x.json"));
        let written = std::fs::read_to_string(&path).expect("written");
        assert_eq!(written, "{\n  \"p50\": 1.5\n}");
    }
}
