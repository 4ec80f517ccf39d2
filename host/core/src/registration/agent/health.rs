//! The managed cluster's `ManagedClusterConditionAvailable`, as OCM's agent decides it: probe
//! the kube-apiserver's `/livez` (falling back to `/healthz` when `/livez` answers 404 or 403),
//! and report `False` only once failures have lasted 20 s, so a blip does not flip the
//! condition; meanwhile the previous condition stays and the probe is retried every 5 s.

use std::time::{Duration, Instant};

/// How long probes must keep failing before the cluster is reported unavailable.
pub const FAILURE_THRESHOLD: Duration = Duration::from_secs(20);
/// How soon to probe again after a failure within the threshold.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(5);
/// Message of `ManagedClusterConditionAvailable` True.
pub const AVAILABLE_MESSAGE: &str = "Managed cluster is available";

/// Whether a `/livez` answer with this HTTP status means "ask `/healthz` instead".
pub fn falls_back_to_healthz(status: u16) -> bool {
    status == 404 || status == 403
}

/// Message of `ManagedClusterConditionAvailable` False for a failed probe: the HTTP status (0
/// when there was no answer) and the body or the transport error.
pub fn unavailable_message(status: u16, detail: &str) -> String {
    format!("The kube-apiserver is not ok, status code: {status}, {detail}")
}

/// One probe's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `/livez` (or `/healthz`) answered 200.
    Healthy,
    /// Anything else, with the message for the condition.
    Unhealthy(String),
}

/// What to write after a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthDecision {
    /// Set Available True and go on to version, resources and claims.
    Available,
    /// Failures lasted the threshold: set Available False with this message, skip the rest.
    Unavailable(String),
    /// A failure within the threshold: keep the current condition, skip the rest, probe again
    /// after [`RETRY_INTERVAL`].
    Undecided,
}

/// Remembers since when probes have been failing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthTracker {
    first_failure: Option<Instant>,
}

impl HealthTracker {
    /// Folds in a probe made at `now` and says what to write.
    pub fn observe(&mut self, probe: Probe, now: Instant, threshold: Duration) -> HealthDecision {
        match probe {
            Probe::Healthy => {
                self.first_failure = None;
                HealthDecision::Available
            }
            Probe::Unhealthy(message) => {
                let since = *self.first_failure.get_or_insert(now);
                if now.saturating_duration_since(since) >= threshold {
                    HealthDecision::Unavailable(message)
                } else {
                    HealthDecision::Undecided
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_is_asked_only_when_livez_is_missing_or_forbidden() {
        assert!(falls_back_to_healthz(404));
        assert!(falls_back_to_healthz(403));
        assert!(!falls_back_to_healthz(500));
        assert!(!falls_back_to_healthz(200));
    }

    #[test]
    fn failures_are_reported_only_after_twenty_seconds() {
        let start = Instant::now();
        let mut tracker = HealthTracker::default();
        let bad = || Probe::Unhealthy(unavailable_message(500, "etcd failed"));
        assert_eq!(
            tracker.observe(bad(), start, FAILURE_THRESHOLD),
            HealthDecision::Undecided
        );
        assert_eq!(
            tracker.observe(bad(), start + Duration::from_secs(19), FAILURE_THRESHOLD),
            HealthDecision::Undecided
        );
        assert_eq!(
            tracker.observe(bad(), start + Duration::from_secs(20), FAILURE_THRESHOLD),
            HealthDecision::Unavailable("The kube-apiserver is not ok, status code: 500, etcd failed".into())
        );
    }

    #[test]
    fn one_success_restarts_the_failure_clock() {
        let start = Instant::now();
        let mut tracker = HealthTracker::default();
        let bad = || Probe::Unhealthy("down".into());
        tracker.observe(bad(), start, FAILURE_THRESHOLD);
        assert_eq!(
            tracker.observe(Probe::Healthy, start + Duration::from_secs(15), FAILURE_THRESHOLD),
            HealthDecision::Available
        );
        assert_eq!(
            tracker.observe(bad(), start + Duration::from_secs(25), FAILURE_THRESHOLD),
            HealthDecision::Undecided
        );
    }
}
