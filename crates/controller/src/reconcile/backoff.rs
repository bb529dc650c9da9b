//! How long an app waits after a failed pass before the next one: exponential, with
//! jitter, capped, and reset by a success (DESIGN.md, "The loop").
//!
//! The jitter source is injected so that tests are deterministic; the service uses a
//! thread-local RNG.

use std::fmt;
use std::time::Duration;

/// First delay. A transient failure (a conflict, an API server restart, a fetch cut
/// short) usually clears within a second, so the first retry comes quickly. client-go's
/// default controller rate limiter starts lower (5 ms) because it retries one object,
/// not a whole pass over an app's repository and objects.
pub const DEFAULT_INITIAL_DELAY: Duration = Duration::from_secs(1);

/// Largest delay: five minutes (DESIGN.md). A failure that outlasts it is one a person
/// has to fix, and retrying more often would only load the API server and the Git host.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(5 * 60);

/// Each delay is scaled by a random factor in `[1 - j, 1 + j)` so that apps failing
/// together (the API server went away) do not retry together. ±20% spreads them while
/// keeping each delay recognisably the doubling one.
pub const DEFAULT_JITTER: f64 = 0.2;

/// Exponential backoff for one app: `initial × 2^attempts`, capped at `max`, then
/// jittered, and never above `max`.
pub struct Backoff {
    initial: Duration,
    max: Duration,
    jitter: f64,
    attempts: u32,
    /// Uniform samples in `[0, 1)`.
    sample: Box<dyn FnMut() -> f64 + Send + Sync>,
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("initial", &self.initial)
            .field("max", &self.max)
            .field("jitter", &self.jitter)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

impl Backoff {
    /// 1 s doubling to 5 min, ±20% jitter from the thread-local RNG.
    pub fn new() -> Self {
        Backoff::with_sampler(rand::random::<f64>)
    }

    /// The default delays with jitter drawn from `sample`, which must return values in
    /// `[0, 1)` (out-of-range values are clamped).
    pub fn with_sampler(sample: impl FnMut() -> f64 + Send + Sync + 'static) -> Self {
        Backoff {
            initial: DEFAULT_INITIAL_DELAY,
            max: DEFAULT_MAX_DELAY,
            jitter: DEFAULT_JITTER,
            attempts: 0,
            sample: Box::new(sample),
        }
    }

    /// The delay before the next attempt, and counts this failure.
    pub fn next_delay(&mut self) -> Duration {
        // 2^attempts overflows u32 long after the cap is reached; saturate instead.
        let factor = 2u32.checked_pow(self.attempts).unwrap_or(u32::MAX);
        let base = self.initial.saturating_mul(factor).min(self.max);
        self.attempts = self.attempts.saturating_add(1);
        let u = (self.sample)();
        let u = if u.is_finite() {
            u.clamp(0.0, 1.0)
        } else {
            0.5
        };
        let scale = 1.0 + self.jitter * (2.0 * u - 1.0);
        base.mul_f64(scale).min(self.max)
    }

    /// Forget past failures: the next delay is the initial one again.
    pub fn reset(&mut self) {
        self.attempts = 0;
    }

    /// Failures counted since the last reset.
    #[cfg(test)]
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(u: f64) -> Backoff {
        Backoff::with_sampler(move || u)
    }

    #[test]
    fn without_jitter_delays_double_up_to_the_cap() {
        let mut b = fixed(0.5);
        let got: Vec<u64> = (0..12).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(b.attempts(), 12);
    }

    #[test]
    fn jitter_spreads_by_twenty_percent_either_way() {
        let mut low = fixed(0.0);
        let mut high = fixed(0.999_999);
        assert_eq!(low.next_delay(), Duration::from_millis(800));
        assert_eq!(low.next_delay(), Duration::from_millis(1600));
        let h = high.next_delay();
        assert!(
            h > Duration::from_millis(1199) && h < Duration::from_millis(1200),
            "{h:?}"
        );
    }

    #[test]
    fn jitter_never_exceeds_the_cap() {
        let mut b = fixed(0.999_999);
        for _ in 0..20 {
            assert!(b.next_delay() <= DEFAULT_MAX_DELAY);
        }
        // At the cap, the jitter can only shorten.
        let mut b = fixed(0.0);
        for _ in 0..20 {
            b.next_delay();
        }
        assert_eq!(b.next_delay(), Duration::from_secs(240));
    }

    #[test]
    fn reset_starts_over() {
        let mut b = fixed(0.5);
        for _ in 0..5 {
            b.next_delay();
        }
        assert_eq!(b.attempts(), 5);
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn many_failures_do_not_overflow() {
        let mut b = fixed(0.5);
        for _ in 0..100 {
            assert!(b.next_delay() <= DEFAULT_MAX_DELAY);
        }
        assert_eq!(b.next_delay(), DEFAULT_MAX_DELAY);
    }

    #[test]
    fn a_sequence_of_samples_is_used_in_order() {
        let mut samples = [0.0, 1.0, 0.25].into_iter().cycle();
        let mut b = Backoff::with_sampler(move || samples.next().unwrap_or(0.5));
        assert_eq!(b.next_delay(), Duration::from_millis(800));
        assert_eq!(b.next_delay(), Duration::from_millis(2400));
        assert_eq!(b.next_delay(), Duration::from_millis(3600));
    }

    #[test]
    fn bad_samples_are_tamed() {
        // A NaN sample is treated as the midpoint: no jitter at all.
        let mut b = Backoff::with_sampler(|| f64::NAN);
        assert_eq!(b.next_delay(), DEFAULT_INITIAL_DELAY);
    }
}
