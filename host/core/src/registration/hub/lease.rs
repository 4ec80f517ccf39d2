//! Cluster availability from the agent's lease, as OCM's hub lease controller judges it.
//!
//! The agent bumps `renewTime` of Lease `managed-cluster-lease` in the cluster namespace every
//! `leaseDurationSeconds`. The hub gives it five periods of grace:
//!
//! ```text
//!  renewTime ──────────── + 5 × leaseDurationSeconds (0 ⇒ 60 ⇒ 300 s) ──▶ expiry
//!  now < expiry: fresh, look again at expiry     now ≥ expiry: Available Unknown
//! ```
//!
//! An agent cannot renew while the hub's apiserver is down, and the hub cannot judge while it
//! cannot read. So the grace also runs from the moment the hub last began to see its apiserver
//! ([`Sight`]: its start, or the answer to a read after failed or held-up ones): an outage of the hub
//! side marks no cluster Unknown, which would taint every cluster out of its placements at once.
//! OCM's hub judges by `renewTime` alone.
//!
//! While the cluster is Unknown, its add-ons cannot report either, so every
//! ManagedClusterAddOn's `Available` becomes Unknown with the cluster's reason and message.
//!
//! Clock sync: the agent writes `renewTime` from its own clock; the apiserver stamps the write
//! with the hub's (`managedFields[].time`). More than one lease period apart, the clocks are
//! out of sync (`ManagedClusterConditionClockSynced` False), which would otherwise show up as
//! a cluster flapping to Unknown.

use std::time::Duration;

use flotilla_api::{
    addon::consts::managed_cluster_addon::CONDITION_AVAILABLE as ADDON_CONDITION_AVAILABLE,
    cluster::consts::managed_cluster::{
        CONDITION_AVAILABLE, CONDITION_CLOCK_SYNCED, REASON_CLOCK_OUT_OF_SYNC, REASON_CLOCK_SYNCED,
        REASON_LEASE_UPDATE_STOPPED,
    },
};
use k8s_openapi::{
    api::coordination::v1::Lease,
    apimachinery::pkg::apis::meta::v1::{Condition, ManagedFieldsEntry, Time},
    jiff::{SignedDuration, Timestamp},
};

use crate::conditions::{self, FALSE, NewCondition, TRUE, UNKNOWN};

/// How many lease periods may pass without a renewal before the cluster is Unknown.
pub const GRACE_PERIODS: u32 = 5;
/// The lease period when the cluster sets none (`leaseDurationSeconds: 0`).
pub const DEFAULT_LEASE_DURATION_SECONDS: u64 = 60;

/// The lease period the agent renews at: `leaseDurationSeconds`, or 60 s when it is 0.
pub fn lease_duration(lease_duration_seconds: i32) -> Duration {
    match u64::try_from(lease_duration_seconds) {
        Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
        _ => Duration::from_secs(DEFAULT_LEASE_DURATION_SECONDS),
    }
}

/// How long after its last renewal a lease expires: 5 × the lease period.
pub fn grace_period(lease_duration_seconds: i32) -> Duration {
    lease_duration(lease_duration_seconds).saturating_mul(GRACE_PERIODS)
}

/// What the lease says about the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// Renewed recently enough; it expires at `expires_at` unless renewed again.
    Fresh {
        /// The moment the lease expires.
        expires_at: Timestamp,
    },
    /// Not renewed within the grace period (or never renewed).
    Expired,
}

/// Judges a lease last renewed at `renew_time` (`None`: never) at `now`, by a hub that has seen
/// its apiserver without a break since `sighted` ([`Sight::read`]).
pub fn lease_state(
    renew_time: Option<Timestamp>,
    lease_duration_seconds: i32,
    sighted: Timestamp,
    now: Timestamp,
) -> LeaseState {
    let renewed = renew_time.map_or(sighted, |renewed| renewed.max(sighted));
    let grace = SignedDuration::try_from(grace_period(lease_duration_seconds)).unwrap_or(SignedDuration::MAX);
    match renewed.checked_add(grace) {
        Ok(expires_at) if now < expires_at => LeaseState::Fresh { expires_at },
        // Overflow means "far in the future".
        Err(_) => LeaseState::Fresh {
            expires_at: Timestamp::MAX,
        },
        Ok(_) => LeaseState::Expired,
    }
}

/// How long a read may take before it counts as the hub not seeing its apiserver.
pub const HELD_UP_READ: Duration = Duration::from_secs(5);

/// Since when the hub has seen its apiserver without a break, as its reads tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sight {
    since: Timestamp,
    lost: bool,
}

impl Sight {
    /// A hub that starts seeing at `now` (its start).
    pub fn new(now: Timestamp) -> Self {
        Self {
            since: now,
            lost: false,
        }
    }

    /// Since when the hub has seen its apiserver, as of its last read.
    pub fn since(&self) -> Timestamp {
        self.since
    }

    /// A read failed: the hub cannot see its apiserver.
    pub fn lost(&mut self) {
        self.lost = true;
    }

    /// A read started at `started` succeeded at `finished`; since when the hub has seen without
    /// a break. A read held up longer than [`HELD_UP_READ`] (an apiserver waiting for its etcd
    /// answers once etcd is back) counts as an outage that ended when it returned.
    pub fn read(&mut self, started: Timestamp, finished: Timestamp) -> Timestamp {
        let held_up = finished.duration_since(started)
            > SignedDuration::try_from(HELD_UP_READ).unwrap_or(SignedDuration::MAX);
        if self.lost || held_up {
            self.lost = false;
            self.since = finished;
        }
        self.since
    }
}

/// When the agent last renewed `lease`, by its own clock.
pub fn renewed(lease: &Lease) -> Option<Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

/// When the apiserver received the latest write of `lease`, by the hub's clock (the newest
/// `managedFields[].time`).
pub fn written_at(lease: &Lease) -> Option<Timestamp> {
    lease
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.time.as_ref().map(|t| t.0))
        .max()
}

/// Keeps of a cached lease what the hub judges it by: its spec and the time of its latest
/// write, as one managed-fields entry holding only that time.
pub fn slim(lease: &mut Lease) {
    let written = written_at(lease);
    let metadata = &mut lease.metadata;
    metadata.managed_fields = written.map(|at| {
        vec![ManagedFieldsEntry {
            time: Some(Time(at)),
            ..Default::default()
        }]
    });
    metadata.annotations = None;
    metadata.labels = None;
    metadata.owner_references = None;
}

/// How long to wait from `now` until `expires_at` (zero if already past).
pub fn until(expires_at: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(expires_at.duration_since(now)).unwrap_or(Duration::ZERO)
}

/// `ManagedClusterConditionAvailable` Unknown because the lease expired.
pub fn lease_stopped_condition() -> NewCondition<'static> {
    NewCondition {
        type_: CONDITION_AVAILABLE,
        status: UNKNOWN,
        reason: REASON_LEASE_UPDATE_STOPPED,
        message: "Registration agent stopped updating its lease.".to_owned(),
        observed_generation: None,
    }
}

/// The Available condition to set on an expired cluster, or `None` when it is already
/// Unknown (whatever the reason: the hub does not overwrite an Unknown it did not set).
pub fn expired_cluster_condition(cluster_conditions: &[Condition]) -> Option<NewCondition<'static>> {
    match conditions::find(cluster_conditions, CONDITION_AVAILABLE) {
        Some(c) if c.status == UNKNOWN => None,
        _ => Some(lease_stopped_condition()),
    }
}

/// The `Available` condition to set on an add-on of a cluster whose Available condition is
/// `cluster_available`: Unknown with the cluster's reason and message while the cluster is
/// Unknown — also over an add-on already Unknown for another reason (a missing lease), as OCM's
/// health check controller overwrites it; otherwise, or when the add-on already says exactly
/// that, `None` (leave the add-on alone).
pub fn addon_condition<'a>(
    cluster_available: Option<&'a Condition>,
    addon_conditions: &[Condition],
) -> Option<NewCondition<'a>> {
    let cluster = cluster_available.filter(|c| c.status == UNKNOWN)?;
    if conditions::find(addon_conditions, ADDON_CONDITION_AVAILABLE)
        .is_some_and(|c| c.status == UNKNOWN && c.reason == cluster.reason && c.message == cluster.message)
    {
        return None;
    }
    Some(NewCondition {
        type_: ADDON_CONDITION_AVAILABLE,
        status: UNKNOWN,
        reason: &cluster.reason,
        message: cluster.message.clone(),
        observed_generation: None,
    })
}

/// `ManagedClusterConditionClockSynced` for a lease the agent stamped `renew_time` and the hub
/// received at `written_at`: True when they are less than one lease period apart either way.
pub fn clock_synced_condition(
    renew_time: Timestamp,
    written_at: Timestamp,
    lease_duration_seconds: i32,
) -> NewCondition<'static> {
    let period =
        SignedDuration::try_from(lease_duration(lease_duration_seconds)).unwrap_or(SignedDuration::MAX);
    let skew = written_at.duration_since(renew_time).abs();
    if skew < period {
        NewCondition {
            type_: CONDITION_CLOCK_SYNCED,
            status: TRUE,
            reason: REASON_CLOCK_SYNCED,
            message: "The clock of the managed cluster is synced with the hub.".to_owned(),
            observed_generation: None,
        }
    } else {
        NewCondition {
            type_: CONDITION_CLOCK_SYNCED,
            status: FALSE,
            reason: REASON_CLOCK_OUT_OF_SYNC,
            message: format!(
                "The clocks of the hub and the managed cluster differ by a lease period ({}s) or more; \
                 this makes the cluster look unavailable. Synchronize the managed cluster's clock (NTP).",
                period.as_secs()
            ),
            observed_generation: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: format!("{reason} message"),
            observed_generation: None,
            last_transition_time: Time(at(0)),
        }
    }

    #[rstest]
    #[case::set(2, 10)]
    #[case::one_second(1, 5)]
    #[case::zero_means_sixty(0, 300)]
    #[case::negative_means_sixty(-5, 300)]
    #[case::default(60, 300)]
    fn the_grace_is_five_lease_periods(#[case] lease_seconds: i32, #[case] grace_seconds: u64) {
        assert_eq!(grace_period(lease_seconds), Duration::from_secs(grace_seconds));
    }

    #[test]
    fn a_lease_is_fresh_until_the_grace_ends_and_expired_from_then_on() {
        let sighted = at(0);
        assert_eq!(
            lease_state(Some(at(100)), 2, sighted, at(109)),
            LeaseState::Fresh { expires_at: at(110) }
        );
        assert_eq!(
            lease_state(Some(at(100)), 2, sighted, at(110)),
            LeaseState::Expired
        );
        assert_eq!(
            lease_state(Some(at(100)), 2, sighted, at(500)),
            LeaseState::Expired
        );
        assert_eq!(lease_state(None, 2, sighted, at(100)), LeaseState::Expired);
    }

    /// A read held up by an apiserver waiting for its etcd (100..200) answers with the lease as
    /// it was before: the grace runs from its return.
    #[test]
    fn a_read_held_up_through_an_etcd_outage_counts_as_an_outage() {
        let mut sight = Sight::new(at(0));
        assert_eq!(
            sight.read(at(100), at(104)),
            at(0),
            "a slow read is not an outage"
        );
        let sighted = sight.read(at(100), at(200));
        assert_eq!(sighted, at(200));
        assert_eq!(
            lease_state(Some(at(99)), 2, sighted, at(200)),
            LeaseState::Fresh { expires_at: at(210) }
        );
    }

    /// The agents could not renew through the hub's outage (100..200): their leases get a
    /// grace from the end of it, and expire only if not renewed within it.
    #[test]
    fn after_the_hubs_own_outage_a_lease_gets_its_grace_from_the_end_of_it() {
        let mut sight = Sight::new(at(0));
        assert_eq!(sight.read(at(50), at(50)), at(0));
        sight.lost();
        sight.lost();
        let sighted = sight.read(at(200), at(200));
        assert_eq!(sighted, at(200));
        assert_eq!(
            sight.read(at(300), at(301)),
            at(200),
            "sight lasts until lost again"
        );
        assert_eq!(
            lease_state(Some(at(99)), 2, sighted, at(201)),
            LeaseState::Fresh { expires_at: at(210) }
        );
        assert_eq!(
            lease_state(Some(at(99)), 2, sighted, at(210)),
            LeaseState::Expired
        );
        assert_eq!(
            lease_state(Some(at(205)), 2, sighted, at(210)),
            LeaseState::Fresh { expires_at: at(215) }
        );
        assert_eq!(
            lease_state(None, 2, sighted, at(201)),
            LeaseState::Fresh { expires_at: at(210) }
        );
    }

    #[test]
    fn a_slimmed_lease_keeps_its_renewal_and_its_latest_write() {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
        let entry = |seconds, manager: &str| ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            time: Some(Time(at(seconds))),
            ..Default::default()
        };
        let mut lease = Lease {
            metadata: ObjectMeta {
                name: Some("managed-cluster-lease".into()),
                labels: Some([("a".to_owned(), "b".to_owned())].into()),
                managed_fields: Some(vec![entry(30, "agent"), entry(50, "hub"), entry(40, "x")]),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                renew_time: Some(MicroTime(at(45))),
                ..Default::default()
            }),
        };
        slim(&mut lease);
        assert_eq!(renewed(&lease), Some(at(45)));
        assert_eq!(written_at(&lease), Some(at(50)));
        assert_eq!(lease.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        assert_eq!(lease.metadata.labels, None);
    }

    #[test]
    fn the_next_look_is_at_expiry() {
        assert_eq!(until(at(110), at(104)), Duration::from_secs(6));
        assert_eq!(until(at(110), at(120)), Duration::ZERO);
    }

    #[test]
    fn an_expired_cluster_becomes_unknown_once() {
        let available = vec![condition(CONDITION_AVAILABLE, "True", "ManagedClusterAvailable")];
        let set = expired_cluster_condition(&available).unwrap();
        assert_eq!((set.status, set.reason), (UNKNOWN, REASON_LEASE_UPDATE_STOPPED));
        assert!(expired_cluster_condition(&[]).is_some());
        let unknown = vec![condition(CONDITION_AVAILABLE, UNKNOWN, "Other")];
        assert_eq!(expired_cluster_condition(&unknown), None);
    }

    #[test]
    fn addons_copy_the_clusters_unknown() {
        let cluster = condition(CONDITION_AVAILABLE, UNKNOWN, REASON_LEASE_UPDATE_STOPPED);
        let healthy = vec![condition(
            ADDON_CONDITION_AVAILABLE,
            "True",
            "ManagedClusterAddOnLeaseUpdated",
        )];
        let set = addon_condition(Some(&cluster), &healthy).unwrap();
        assert_eq!(set.status, UNKNOWN);
        assert_eq!(set.reason, REASON_LEASE_UPDATE_STOPPED);
        assert_eq!(set.message, cluster.message);
        assert!(addon_condition(Some(&cluster), &[]).is_some());
    }

    #[test]
    fn addons_are_left_alone_unless_the_cluster_is_unknown() {
        let healthy = vec![condition(ADDON_CONDITION_AVAILABLE, "True", "Fine")];
        let available = condition(CONDITION_AVAILABLE, "True", "ManagedClusterAvailable");
        assert_eq!(addon_condition(Some(&available), &healthy), None);
        assert_eq!(addon_condition(None, &healthy), None);
        let cluster = condition(CONDITION_AVAILABLE, UNKNOWN, REASON_LEASE_UPDATE_STOPPED);
        let unknown = vec![condition(ADDON_CONDITION_AVAILABLE, UNKNOWN, "Whatever")];
        let overwritten = addon_condition(Some(&cluster), &unknown).expect("the cluster's reason wins");
        assert_eq!(overwritten.reason, REASON_LEASE_UPDATE_STOPPED);
        let mut same = unknown.clone();
        same[0].reason = cluster.reason.clone();
        same[0].message = cluster.message.clone();
        assert_eq!(addon_condition(Some(&cluster), &same), None);
    }

    #[rstest]
    #[case::same_moment(100, 100, 60, TRUE)]
    #[case::agent_behind_within_a_period(100, 159, 60, TRUE)]
    #[case::agent_ahead_within_a_period(159, 100, 60, TRUE)]
    #[case::agent_behind_by_a_period(100, 160, 60, FALSE)]
    #[case::agent_ahead_by_more(400, 100, 60, FALSE)]
    #[case::zero_duration_means_sixty(100, 150, 0, TRUE)]
    #[case::short_lease(100, 103, 2, FALSE)]
    fn clocks_more_than_one_lease_period_apart_are_out_of_sync(
        #[case] renewed: i64,
        #[case] written: i64,
        #[case] lease_seconds: i32,
        #[case] status: &str,
    ) {
        let condition = clock_synced_condition(at(renewed), at(written), lease_seconds);
        assert_eq!(
            (condition.type_, condition.status),
            (CONDITION_CLOCK_SYNCED, status)
        );
        let reason = if status == TRUE {
            REASON_CLOCK_SYNCED
        } else {
            REASON_CLOCK_OUT_OF_SYNC
        };
        assert_eq!(condition.reason, reason);
    }
}
