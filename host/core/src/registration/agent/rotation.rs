//! When the agent renews its hub client certificate, the rule OCM's client-certificate
//! controller applies: a new CSR once the certificate has at most a random 20–25 % of its
//! total life (`notAfter − notBefore`) left, or at once when there is no usable certificate
//! (expired, or issued to another subject).
//!
//! The random share is drawn once per certificate, so agents that joined together spread
//! their renewals instead of hitting the hub at the same moment. Kubernetes' signer backdates
//! `notBefore` by five minutes, which counts as life like any other; OCM does the same.

use std::time::{Duration, SystemTime};

use crate::x509::CertificateInfo;

/// Smallest share of the total life left when a renewal starts.
pub const MIN_REMAINING_SHARE: f64 = 0.20;
/// Largest share of the total life left when a renewal starts.
pub const MAX_REMAINING_SHARE: f64 = 0.25;

/// The remaining-life share at which to renew, for `random` uniform in `[0, 1)`:
/// `0.2 + 0.05 × random`, clamped to `[0.2, 0.25]`.
pub fn threshold(random: f64) -> f64 {
    let random = if random.is_finite() {
        random.clamp(0.0, 1.0)
    } else {
        0.0
    };
    MIN_REMAINING_SHARE + (MAX_REMAINING_SHARE - MIN_REMAINING_SHARE) * random
}

/// What the agent should do with a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertificateState {
    /// Usable; renew at `renew_at`.
    Valid {
        /// When the remaining life reaches the threshold.
        renew_at: SystemTime,
    },
    /// Usable, but the remaining life is at or below the threshold: renew now, with this
    /// certificate's identity.
    RenewalDue,
    /// `notAfter` has passed: the certificate no longer authenticates.
    Expired,
    /// The common name is not the agent's user.
    SubjectMismatch {
        /// The common name found in the certificate.
        found: String,
    },
}

impl CertificateState {
    /// Whether the certificate still authenticates the agent.
    pub fn is_usable(&self) -> bool {
        matches!(self, Self::Valid { .. } | Self::RenewalDue)
    }
}

/// Judges `certificate` for the agent whose user is `expected_user`, at `now`, renewing when
/// at most `threshold` (see [`threshold`]) of its total life is left.
pub fn assess(
    certificate: &CertificateInfo,
    expected_user: &str,
    now: SystemTime,
    threshold: f64,
) -> CertificateState {
    if certificate.subject.common_name != expected_user {
        return CertificateState::SubjectMismatch {
            found: certificate.subject.common_name.clone(),
        };
    }
    if now >= certificate.not_after {
        return CertificateState::Expired;
    }
    let renew_at = renew_at(certificate.not_before, certificate.not_after, threshold);
    if now >= renew_at {
        CertificateState::RenewalDue
    } else {
        CertificateState::Valid { renew_at }
    }
}

/// The moment when `threshold` of the life from `not_before` to `not_after` is left. A
/// certificate whose `notAfter` is before its `notBefore` is due at once (the epoch).
pub fn renew_at(not_before: SystemTime, not_after: SystemTime, threshold: f64) -> SystemTime {
    let Ok(total) = not_after.duration_since(not_before) else {
        return SystemTime::UNIX_EPOCH;
    };
    let share = if threshold.is_finite() {
        threshold.clamp(0.0, 1.0)
    } else {
        0.0
    };
    not_after
        .checked_sub(Duration::from_secs_f64(total.as_secs_f64() * share))
        .unwrap_or(not_before)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::x509::Subject;

    const USER: &str = "system:open-cluster-management:c1:a1";

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn certificate(user: &str, not_before: u64, not_after: u64) -> CertificateInfo {
        CertificateInfo {
            subject: Subject {
                common_name: user.to_owned(),
                ..Subject::default()
            },
            not_before: at(not_before),
            not_after: at(not_after),
        }
    }

    #[rstest]
    #[case::lowest(0.0, 0.20)]
    #[case::middle(0.5, 0.225)]
    #[case::highest(1.0, 0.25)]
    #[case::below_range(-3.0, 0.20)]
    #[case::above_range(7.0, 0.25)]
    #[case::not_a_number(f64::NAN, 0.20)]
    fn the_threshold_is_between_20_and_25_percent(#[case] random: f64, #[case] expected: f64) {
        assert!((threshold(random) - expected).abs() < 1e-12);
    }

    #[test]
    fn a_fresh_certificate_is_renewed_when_a_fifth_of_its_life_is_left() {
        // Life 1000 s, threshold 20 %: renew 200 s before notAfter.
        let cert = certificate(USER, 1000, 2000);
        assert_eq!(
            assess(&cert, USER, at(1500), 0.2),
            CertificateState::Valid { renew_at: at(1800) }
        );
        assert_eq!(assess(&cert, USER, at(1800), 0.2), CertificateState::RenewalDue);
        assert_eq!(assess(&cert, USER, at(1999), 0.2), CertificateState::RenewalDue);
    }

    #[test]
    fn a_quarter_threshold_renews_earlier() {
        let cert = certificate(USER, 0, 1000);
        assert_eq!(
            assess(&cert, USER, at(0), 0.25),
            CertificateState::Valid { renew_at: at(750) }
        );
    }

    #[test]
    fn a_backdated_short_certificate_counts_the_backdating_as_life() {
        // Kubernetes' signer: notBefore = issue − 300 s, notAfter = issue + 120 s.
        let cert = certificate(USER, 700, 1120);
        // 420 s of life, 20 % = 84 s: renew at 1036, 36 s after issue.
        assert_eq!(
            assess(&cert, USER, at(1000), 0.2),
            CertificateState::Valid { renew_at: at(1036) }
        );
    }

    #[test]
    fn an_expired_certificate_is_not_usable() {
        let cert = certificate(USER, 0, 1000);
        let state = assess(&cert, USER, at(1000), 0.2);
        assert_eq!(state, CertificateState::Expired);
        assert!(!state.is_usable());
    }

    #[test]
    fn a_certificate_for_another_agent_is_not_usable() {
        let cert = certificate("system:open-cluster-management:c1:other", 0, 1000);
        let state = assess(&cert, USER, at(10), 0.2);
        assert_eq!(
            state,
            CertificateState::SubjectMismatch {
                found: "system:open-cluster-management:c1:other".into()
            }
        );
        assert!(!state.is_usable());
    }

    #[test]
    fn inverted_validity_is_due_at_once() {
        assert_eq!(renew_at(at(500), at(100), 0.2), SystemTime::UNIX_EPOCH);
        let cert = certificate(USER, 700, 600);
        assert_eq!(assess(&cert, USER, at(550), 0.2), CertificateState::RenewalDue);
    }
}
