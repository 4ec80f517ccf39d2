//! The cluster lease `managed-cluster-lease` in the cluster namespace on the hub: the agent
//! bumps its `renewTime` every `spec.leaseDurationSeconds` of its ManagedCluster (0 means 60),
//! each period stretched by up to 25 % at random like OCM's `wait.JitterUntil`, so a fleet of
//! agents does not renew in lock-step. The hub counts a cluster as gone after five periods.

use std::time::Duration;

/// Lease period when the ManagedCluster does not set one.
pub const DEFAULT_LEASE_DURATION_SECONDS: i32 = 60;
/// Largest random stretch of one renewal period, as a share of the period.
pub const LEASE_JITTER_FACTOR: f64 = 0.25;

/// The renewal period for `spec.leaseDurationSeconds`; zero or negative means 60 s.
pub fn lease_duration(spec_seconds: i32) -> Duration {
    let seconds = if spec_seconds > 0 {
        spec_seconds
    } else {
        DEFAULT_LEASE_DURATION_SECONDS
    };
    Duration::from_secs(u64::from(seconds.unsigned_abs()))
}

/// One renewal period: `period × (1 + 0.25 × random)` for `random` uniform in `[0, 1)`.
pub fn jittered(period: Duration, random: f64) -> Duration {
    let random = if random.is_finite() {
        random.clamp(0.0, 1.0)
    } else {
        0.0
    };
    period + period.mul_f64(LEASE_JITTER_FACTOR * random)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::unset(0, 60)]
    #[case::negative(-5, 60)]
    #[case::set(10, 10)]
    fn zero_means_sixty_seconds(#[case] spec: i32, #[case] seconds: u64) {
        assert_eq!(lease_duration(spec), Duration::from_secs(seconds));
    }

    #[rstest]
    #[case::no_jitter(0.0, 60_000)]
    #[case::half(0.5, 67_500)]
    #[case::full(1.0, 75_000)]
    #[case::clamped(9.0, 75_000)]
    fn jitter_stretches_a_period_by_at_most_a_quarter(#[case] random: f64, #[case] millis: u64) {
        assert_eq!(
            jittered(Duration::from_secs(60), random),
            Duration::from_millis(millis)
        );
    }
}
