//! How long the agent waits before retrying after an error: doubling from an initial delay up
//! to a cap, so a broken bootstrap secret or an unreachable hub is retried soon at first and
//! then without hammering. A success resets the count.

use std::time::Duration;

/// Retry delays: `initial × 2^attempt`, capped at `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
    /// Failures since the last success.
    pub attempt: u32,
}

impl Backoff {
    /// A backoff that has seen no failure yet.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max: max.max(initial),
            attempt: 0,
        }
    }

    /// Records a failure and returns how long to wait before the next try.
    pub fn next_delay(&mut self) -> Duration {
        let delay = delay(self.attempt, self.initial, self.max);
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// Records a success: the next failure waits `initial` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The delay after the `attempt`-th consecutive failure (from 0): `initial × 2^attempt`,
/// never more than `max`.
pub fn delay(attempt: u32, initial: Duration, max: Duration) -> Duration {
    let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
    initial.checked_mul(factor).unwrap_or(max).min(max.max(initial))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset_after_success() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let delays: Vec<u64> = (0..6).map(|_| backoff.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn huge_attempt_counts_do_not_overflow() {
        assert_eq!(
            delay(u32::MAX, Duration::from_secs(1), Duration::from_secs(60)),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn a_cap_below_the_initial_delay_is_the_initial_delay() {
        assert_eq!(
            delay(0, Duration::from_secs(5), Duration::from_secs(1)),
            Duration::from_secs(5)
        );
    }
}
