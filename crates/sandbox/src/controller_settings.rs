//! The simulated controllers' settings: whether the Deployment controller runs and how
//! soon it acts. The API's state holds them (they change while the sandbox runs, over
//! `PUT /sandbox/controllers`); the controllers read them. A leaf, so that neither
//! side has to import the other for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long after a change the controller acts: kube-controller-manager reacts to a
/// watch event within milliseconds, so clients see the race they see against a real
/// cluster (a read right after an apply may or may not include the controller's writes).
pub const DEFAULT_DEPLOYMENT_CONTROLLER_DELAY: Duration = Duration::from_millis(5);

/// `delay_us` when the controller is off.
const OFF: u64 = u64::MAX;

/// Whether the Deployment controller runs, and its delay; changeable while running.
pub(crate) struct Settings {
    delay_us: AtomicU64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            delay_us: AtomicU64::new(DEFAULT_DEPLOYMENT_CONTROLLER_DELAY.as_micros() as u64),
        }
    }
}

impl Settings {
    /// The delay before a pass, or None when the controller is off.
    pub(crate) fn delay(&self) -> Option<Duration> {
        match self.delay_us.load(Ordering::Relaxed) {
            OFF => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    pub(crate) fn set_delay(&self, delay: Option<Duration>) {
        let us = delay.map_or(OFF, |d| {
            u64::try_from(d.as_micros()).unwrap_or(OFF - 1).min(OFF - 1)
        });
        self.delay_us.store(us, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_switch_the_controller_off_and_on() {
        let settings = Settings::default();
        assert_eq!(settings.delay(), Some(DEFAULT_DEPLOYMENT_CONTROLLER_DELAY));
        settings.set_delay(None);
        assert_eq!(settings.delay(), None);
        settings.set_delay(Some(Duration::from_millis(20)));
        assert_eq!(settings.delay(), Some(Duration::from_millis(20)));
    }
}
