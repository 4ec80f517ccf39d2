//! The requeue policy for failed reconciles: a conflict (someone else wrote first) retries at
//! once from fresh data; anything else backs off, doubling with each failure of the same object
//! in a row, with jitter, so a broken object or an unreachable server does not spin, and a
//! fleet's worth of objects that failed together during an outage do not retry together after
//! it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::controller::Action;

/// The first retry of a conflict (409). A conflict means a newer version exists, which the
/// watch brings within milliseconds; waiting a whole second for it made contended objects (an
/// add-on's status, written by several controllers) slow.
pub const CONFLICT_RETRY: Duration = Duration::from_millis(100);
/// The first retry of any other failure.
pub const FIRST_RETRY: Duration = Duration::from_secs(2);
/// The longest wait between retries. A watch that reconnects after an outage relists and
/// reconciles every object anyway, so a longer wait would only slow recovery from a failure
/// the watch cannot see.
pub const MAX_RETRY: Duration = Duration::from_secs(120);
/// Each delay is drawn from `[1 - JITTER, 1 + JITTER]` times its nominal value.
pub const JITTER: f64 = 0.25;

/// Requeue after `error`, the object's `attempt`-th failure in a row (from 1).
pub fn requeue_after(error: &(dyn std::error::Error + 'static), attempt: u32) -> Action {
    let first = if status_code(error) == Some(409) {
        CONFLICT_RETRY
    } else {
        FIRST_RETRY
    };
    Action::requeue(delay(first, attempt, fastrand::f64()))
}

/// `first` doubled for every failure after the first, at most [`MAX_RETRY`], scaled by the
/// jitter that `unit` (in `[0, 1)`) picks.
pub fn delay(first: Duration, attempt: u32, unit: f64) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    let nominal = first.saturating_mul(1 << doublings).min(MAX_RETRY);
    nominal.mul_f64(1.0 - JITTER + 2.0 * JITTER * unit.clamp(0.0, 1.0))
}

/// Failures in a row per object, for [`requeue_after`]'s `attempt`.
#[derive(Debug, Default)]
pub struct Failures {
    counts: Mutex<HashMap<String, u32>>,
}

impl Failures {
    /// Counts a failure of `object`; returns how many in a row it has had.
    pub fn failed(&self, object: &str) -> u32 {
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(object.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        *count
    }

    /// Forgets `object`'s failures: it reconciled.
    pub fn succeeded(&self, object: &str) {
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        counts.remove(object);
    }
}

/// The HTTP status of the first API error in `error`'s source chain, if any.
pub fn status_code(error: &(dyn std::error::Error + 'static)) -> Option<u16> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(kube::Error::Api(status)) = e.downcast_ref::<kube::Error>() {
            return Some(status.code);
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_per_failure_up_to_the_cap() {
        let middle = |attempt| delay(FIRST_RETRY, attempt, 0.5);
        assert_eq!(middle(1), FIRST_RETRY);
        assert_eq!(middle(2), FIRST_RETRY * 2);
        assert_eq!(middle(4), FIRST_RETRY * 8);
        assert_eq!(middle(7), MAX_RETRY);
        assert_eq!(middle(u32::MAX), MAX_RETRY);
        assert_eq!(delay(CONFLICT_RETRY, 1, 0.5), CONFLICT_RETRY);
    }

    #[test]
    fn jitter_spreads_a_delay_by_a_quarter_either_way() {
        assert_eq!(delay(FIRST_RETRY, 1, 0.0), FIRST_RETRY.mul_f64(0.75));
        assert_eq!(delay(FIRST_RETRY, 1, 1.0), FIRST_RETRY.mul_f64(1.25));
        // A thousand objects failing together spread over the window, not onto one instant.
        let mut seen: Vec<Duration> = (0..1000)
            .map(|_| delay(FIRST_RETRY, 3, fastrand::f64()))
            .collect();
        seen.sort();
        seen.dedup();
        assert!(seen.len() > 900, "{} distinct delays", seen.len());
    }

    #[test]
    fn failures_count_in_a_row_and_reset_on_success() {
        let failures = Failures::default();
        assert_eq!(failures.failed("a"), 1);
        assert_eq!(failures.failed("a"), 2);
        assert_eq!(failures.failed("b"), 1);
        failures.succeeded("a");
        assert_eq!(failures.failed("a"), 1);
    }
}
