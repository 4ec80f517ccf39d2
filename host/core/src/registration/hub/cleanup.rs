//! Clean-up of a deleted cluster's namespace (the ResourceCleanup feature), as OCM's GC
//! controller orders it:
//!
//! ```text
//!  ManagedClusterAddOns ─▶ ManifestWorks ─▶ (nothing left) ─▶ RBAC ─▶ finalizers
//!  within a kind: batches by open-cluster-management.io/cleanup-priority, lowest first
//!                 (0..=100; missing or invalid counts as 0); the next batch waits until the
//!                 previous one is gone
//! ```
//!
//! While something remains, `Deleting` is False `ResourceRemaining` with the counts; once the
//! namespace is clean it is True `NoResource`; a failure is False `DeletingError`.
//!
//! Works and add-ons wait on finalizers only the cluster's agent removes (the work agent's
//! `manifest-work-cleanup`, the pre-delete hook's `addon-pre-delete`). OCM waits for them
//! forever; Flotilla lets them go ([`force_cleanup`]) once the agent has been gone
//! (`ManagedClusterConditionAvailable` Unknown) for a grace, or at once when the admin
//! annotates the cluster [`FORCE_CLEANUP_ANNOTATION`]. What the agent applied then stays on
//! the managed cluster.

use std::{collections::BTreeMap, time::Duration};

use flotilla_api::{
    addon::consts::{ADDON_PRE_DELETE_FINALIZER, ADDON_PRE_DELETE_FINALIZER_OLD},
    cluster::consts::{
        CLEANUP_PRIORITY_ANNOTATION,
        managed_cluster::{
            CONDITION_AVAILABLE, CONDITION_DELETING, REASON_DELETING_ERROR, REASON_NO_RESOURCE,
            REASON_RESOURCE_REMAINING,
        },
    },
    work::consts::MANIFEST_WORK_FINALIZER,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::conditions::{FALSE, NewCondition, TRUE, UNKNOWN};

/// Flotilla extension: `"true"` on a ManagedCluster lets its deletion take off the finalizers
/// only its agent would remove, without waiting for the agent-gone grace. For an admin whose
/// cluster's agent will never come back (after `flotilla unjoin`, a lost cluster).
pub const FORCE_CLEANUP_ANNOTATION: &str = "flotilla.dev/force-cleanup";

/// The finalizers on a cluster namespace's objects that only the cluster's agent removes:
/// the work agent's on ManifestWorks and the pre-delete hook's on ManagedClusterAddOns.
pub const AGENT_FINALIZERS: [&str; 3] = [
    MANIFEST_WORK_FINALIZER,
    ADDON_PRE_DELETE_FINALIZER,
    ADDON_PRE_DELETE_FINALIZER_OLD,
];

/// Why the hub may take the agent's finalizers off a deleted cluster's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Forced {
    /// The admin set [`FORCE_CLEANUP_ANNOTATION`].
    Annotation,
    /// Available has been Unknown (no lease renewal) since this time, longer than the grace.
    AgentGone(Timestamp),
}

impl Forced {
    /// Why, for an Event a person reads.
    pub fn describe(&self) -> String {
        match self {
            Self::Annotation => format!("the cluster is annotated {FORCE_CLEANUP_ANNOTATION}=true"),
            Self::AgentGone(since) => {
                format!("the cluster's agent has been gone (Available Unknown) since {since}")
            }
        }
    }
}

/// Whether a deleted cluster's clean-up may stop waiting for its agent: the admin asked, or
/// Available has been Unknown for at least `grace` at `now`. An agent that reports (Available
/// True or False) is alive, however slow, and is waited for.
pub fn force_cleanup(
    annotations: Option<&BTreeMap<String, String>>,
    conditions: &[Condition],
    now: Timestamp,
    grace: Duration,
) -> Option<Forced> {
    if annotations
        .and_then(|a| a.get(FORCE_CLEANUP_ANNOTATION))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return Some(Forced::Annotation);
    }
    let available = crate::conditions::find(conditions, CONDITION_AVAILABLE)?;
    if available.status != UNKNOWN {
        return None;
    }
    let since = available.last_transition_time.0;
    let gone = now.duration_since(since);
    let grace = SignedDuration::try_from(grace).unwrap_or(SignedDuration::MAX);
    (gone >= grace).then_some(Forced::AgentGone(since))
}

/// Why a deleted cluster's clean-up, still waiting on an agent that reports, has waited too
/// long: a pre-delete hook that never completes, or an add-on whose plugin is quarantined, holds
/// the deletion for as long as the agent lives. After `patience` since the deletion began, the
/// Deleting condition and a Warning Event say so and name the way forward; nothing is released
/// without the admin, since a live agent may still be cleaning up.
pub fn stalled(deleting_since: Timestamp, now: Timestamp, patience: Duration) -> Option<String> {
    let waited = now.duration_since(deleting_since);
    let patience = SignedDuration::try_from(patience).unwrap_or(SignedDuration::MAX);
    (waited >= patience).then(|| {
        format!(
            "waiting since {deleting_since} for the cluster's agent, which still reports, to release them (a \
             pre-delete hook that does not complete, or an add-on whose plugin cannot run); annotate the \
             cluster {FORCE_CLEANUP_ANNOTATION}=true to stop waiting (what the agent applied then stays on \
             the managed cluster)"
        )
    })
}

/// The agent finalizers `finalizers` holds, which a forced clean-up takes off.
pub fn agent_finalizers(finalizers: &[String]) -> Vec<&str> {
    finalizers
        .iter()
        .map(String::as_str)
        .filter(|f| AGENT_FINALIZERS.contains(f))
        .collect()
}

/// The highest cleanup priority; higher values are invalid.
pub const MAX_CLEANUP_PRIORITY: u8 = 100;

/// One object in the cluster namespace awaiting clean-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remaining<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its annotations.
    pub annotations: Option<&'a BTreeMap<String, String>>,
    /// Whether it is already being deleted.
    pub deleting: bool,
    /// Whether it still carries finalizers.
    pub has_finalizers: bool,
}

/// The cleanup priority of an object from its annotations: 0..=100, 0 when missing or invalid.
pub fn cleanup_priority(annotations: Option<&BTreeMap<String, String>>) -> u8 {
    annotations
        .and_then(|a| a.get(CLEANUP_PRIORITY_ANNOTATION))
        .and_then(|v| v.trim().parse::<u8>().ok())
        .filter(|p| *p <= MAX_CLEANUP_PRIORITY)
        .unwrap_or(0)
}

/// The names to delete now: every object of the lowest priority present (already-deleting
/// ones included, so the batch is not considered done while they linger). Empty when nothing
/// remains.
pub fn next_batch<'a>(remaining: &[Remaining<'a>]) -> Vec<&'a str> {
    let Some(lowest) = remaining.iter().map(|r| cleanup_priority(r.annotations)).min() else {
        return Vec::new();
    };
    remaining
        .iter()
        .filter(|r| cleanup_priority(r.annotations) == lowest)
        .map(|r| r.name)
        .collect()
}

/// `Deleting` False while objects of `resource` remain.
pub fn remaining_condition(resource: &str, remaining: &[Remaining<'_>]) -> NewCondition<'static> {
    let pending = remaining.iter().filter(|r| r.has_finalizers).count();
    NewCondition {
        type_: CONDITION_DELETING,
        status: FALSE,
        reason: REASON_RESOURCE_REMAINING,
        message: format!(
            "The resource {resource} is remaining, the remaining count is {}, the finalizer pending count is {pending}",
            remaining.len()
        ),
        observed_generation: None,
    }
}

/// `Deleting` True once the cluster namespace holds nothing to clean up.
pub fn no_resource_condition() -> NewCondition<'static> {
    NewCondition {
        type_: CONDITION_DELETING,
        status: TRUE,
        reason: REASON_NO_RESOURCE,
        message: "No cleaned resource in cluster ns.".to_owned(),
        observed_generation: None,
    }
}

/// `Deleting` False after a clean-up failure.
pub fn error_condition(message: String) -> NewCondition<'static> {
    NewCondition {
        type_: CONDITION_DELETING,
        status: FALSE,
        reason: REASON_DELETING_ERROR,
        message,
        observed_generation: None,
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn a_clean_up_is_stalled_once_it_has_waited_its_patience() {
        let start = Timestamp::from_second(1_000).unwrap();
        let patience = Duration::from_secs(600);
        let at = |s: i64| Timestamp::from_second(1_000 + s).unwrap();
        assert_eq!(stalled(start, at(599), patience), None);
        let message = stalled(start, at(600), patience).unwrap();
        assert!(message.contains(FORCE_CLEANUP_ANNOTATION), "{message}");
        assert!(stalled(start, at(5_000), patience).is_some());
    }

    fn annotations(value: Option<&str>) -> Option<BTreeMap<String, String>> {
        value.map(|v| BTreeMap::from([(CLEANUP_PRIORITY_ANNOTATION.to_owned(), v.to_owned())]))
    }

    #[rstest]
    #[case::missing(None, 0)]
    #[case::zero(Some("0"), 0)]
    #[case::middle(Some("42"), 42)]
    #[case::highest(Some("100"), 100)]
    #[case::too_high(Some("101"), 0)]
    #[case::negative(Some("-1"), 0)]
    #[case::not_a_number(Some("soon"), 0)]
    #[case::huge(Some("99999999999"), 0)]
    fn priorities_outside_0_to_100_count_as_0(#[case] value: Option<&str>, #[case] expected: u8) {
        assert_eq!(cleanup_priority(annotations(value).as_ref()), expected);
    }

    fn available(status: &str, since: i64) -> Vec<Condition> {
        vec![Condition {
            type_: CONDITION_AVAILABLE.to_owned(),
            status: status.to_owned(),
            reason: "Test".to_owned(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::from_second(since).unwrap(),
            ),
        }]
    }

    #[rstest]
    #[case::live_agent(TRUE, 0, None)]
    #[case::live_agent_reporting_unhealthy(FALSE, 0, None)]
    #[case::gone_within_the_grace(UNKNOWN, 1000 - 599, None)]
    #[case::gone_for_the_grace(UNKNOWN, 1000 - 600, Some(Forced::AgentGone(Timestamp::from_second(400).unwrap())))]
    fn only_an_agent_gone_for_the_grace_is_given_up_on(
        #[case] status: &str,
        #[case] since: i64,
        #[case] expected: Option<Forced>,
    ) {
        let now = Timestamp::from_second(1000).unwrap();
        let grace = Duration::from_secs(600);
        assert_eq!(
            force_cleanup(None, &available(status, since), now, grace),
            expected
        );
    }

    #[test]
    fn the_admin_annotation_forces_even_a_live_agent_and_nothing_is_forced_without_available() {
        let now = Timestamp::from_second(1000).unwrap();
        let grace = Duration::from_secs(600);
        let forced = BTreeMap::from([(FORCE_CLEANUP_ANNOTATION.to_owned(), "true".to_owned())]);
        let other = BTreeMap::from([(FORCE_CLEANUP_ANNOTATION.to_owned(), "no".to_owned())]);
        assert_eq!(
            force_cleanup(Some(&forced), &available(TRUE, 999), now, grace),
            Some(Forced::Annotation)
        );
        assert_eq!(force_cleanup(Some(&other), &available(TRUE, 0), now, grace), None);
        assert_eq!(force_cleanup(None, &[], now, grace), None);
    }

    #[test]
    fn only_the_agents_finalizers_are_taken_off() {
        let finalizers = vec![
            MANIFEST_WORK_FINALIZER.to_owned(),
            "example.com/someone-else".to_owned(),
            ADDON_PRE_DELETE_FINALIZER_OLD.to_owned(),
        ];
        assert_eq!(
            agent_finalizers(&finalizers),
            vec![MANIFEST_WORK_FINALIZER, ADDON_PRE_DELETE_FINALIZER_OLD]
        );
    }

    #[test]
    fn the_lowest_priority_batch_goes_first() {
        let low = annotations(Some("10"));
        let high = annotations(Some("90"));
        let bad = annotations(Some("abc"));
        let item = |name, annotations| Remaining {
            name,
            annotations,
            deleting: false,
            has_finalizers: false,
        };
        let all = vec![
            item("high", high.as_ref()),
            item("low", low.as_ref()),
            item("bad", bad.as_ref()),
            item("none", None),
        ];
        assert_eq!(next_batch(&all), vec!["bad", "none"]);
        assert_eq!(next_batch(&all[..2]), vec!["low"]);
        assert_eq!(next_batch(&all[..1]), vec!["high"]);
        assert!(next_batch(&[]).is_empty());
    }

    #[test]
    fn the_remaining_message_counts_objects_and_pending_finalizers() {
        let all = vec![
            Remaining {
                name: "a",
                annotations: None,
                deleting: true,
                has_finalizers: true,
            },
            Remaining {
                name: "b",
                annotations: None,
                deleting: false,
                has_finalizers: false,
            },
        ];
        let condition = remaining_condition("manifestworks", &all);
        assert_eq!(
            (condition.status, condition.reason),
            (FALSE, REASON_RESOURCE_REMAINING)
        );
        assert!(
            condition.message.contains("manifestworks"),
            "{}",
            condition.message
        );
        assert!(
            condition.message.contains("remaining count is 2"),
            "{}",
            condition.message
        );
        assert!(
            condition.message.contains("finalizer pending count is 1"),
            "{}",
            condition.message
        );
    }
}
