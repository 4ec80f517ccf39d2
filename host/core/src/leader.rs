//! Leader election over a `coordination.k8s.io/v1` Lease, decided purely.
//!
//! The rules are client-go's: a candidate takes the lease when nobody holds it or when the
//! record has not changed for `leaseDurationSeconds` *as this candidate observed it*. Expiry is
//! measured on the candidate's own clock from the moment it saw the record change, never from
//! the `renewTime` written by another machine, so clock skew between replicas cannot make two
//! of them leaders. The holder must renew within its renew deadline (shorter than the lease
//! duration) or stop acting; the I/O half in `flotilla-kube` enforces that.

use std::time::Duration;

/// What a candidate knows of the lease record it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `spec.holderIdentity`; empty or absent when released.
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds` as written by the holder.
    pub duration: Duration,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
}

/// What a candidate does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write the lease as holder: `acquire` when taking it over (new `acquireTime`), with
    /// `transitions` to record.
    Lead {
        /// True when the lease changes hands (or is created).
        acquire: bool,
        /// `spec.leaseTransitions` to write.
        transitions: i32,
    },
    /// Somebody else leads; look again after `retry_in` at the latest.
    Follow {
        /// The current holder.
        holder: String,
        /// Time until the record expires for this candidate, if it does not change.
        expires_in: Duration,
    },
}

/// Decides for candidate `me`, given the record (None: no lease yet) and how long ago this
/// candidate saw that record change (`observed_age`).
pub fn decide(record: Option<&LeaseRecord>, me: &str, observed_age: Duration) -> Decision {
    let Some(record) = record else {
        return Decision::Lead {
            acquire: true,
            transitions: 0,
        };
    };
    let holder = record.holder.as_deref().unwrap_or_default();
    if holder == me {
        return Decision::Lead {
            acquire: false,
            transitions: record.transitions,
        };
    }
    if holder.is_empty() || observed_age >= record.duration {
        return Decision::Lead {
            acquire: true,
            transitions: record.transitions.saturating_add(1),
        };
    }
    Decision::Follow {
        holder: holder.to_owned(),
        expires_in: record.duration.saturating_sub(observed_age),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn record(holder: Option<&str>, seconds: u64, transitions: i32) -> LeaseRecord {
        LeaseRecord {
            holder: holder.map(str::to_owned),
            duration: Duration::from_secs(seconds),
            transitions,
        }
    }

    #[rstest]
    #[case::no_lease_yet(None, 0, Decision::Lead { acquire: true, transitions: 0 })]
    #[case::own_lease_is_renewed_even_when_old(Some(record(Some("me"), 15, 3)), 99, Decision::Lead { acquire: false, transitions: 3 })]
    #[case::released_lease_is_taken(Some(record(Some(""), 15, 3)), 0, Decision::Lead { acquire: true, transitions: 4 })]
    #[case::absent_holder_is_taken(Some(record(None, 15, 3)), 0, Decision::Lead { acquire: true, transitions: 4 })]
    #[case::live_lease_of_another_is_followed(Some(record(Some("other"), 15, 3)), 10, Decision::Follow { holder: "other".into(), expires_in: Duration::from_secs(5) })]
    #[case::expired_lease_of_another_is_taken(Some(record(Some("other"), 15, 3)), 15, Decision::Lead { acquire: true, transitions: 4 })]
    fn decisions_follow_client_go(
        #[case] current: Option<LeaseRecord>,
        #[case] age_seconds: u64,
        #[case] expected: Decision,
    ) {
        assert_eq!(
            decide(current.as_ref(), "me", Duration::from_secs(age_seconds)),
            expected
        );
    }

    #[test]
    fn a_just_observed_record_of_another_is_never_taken() {
        for seconds in 1..100 {
            let current = record(Some("other"), seconds, 0);
            assert!(matches!(
                decide(Some(&current), "me", Duration::ZERO),
                Decision::Follow { .. }
            ));
        }
    }
}
