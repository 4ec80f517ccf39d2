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

use std::collections::BTreeMap;

use flotilla_api::cluster::consts::{
    CLEANUP_PRIORITY_ANNOTATION,
    managed_cluster::{
        CONDITION_DELETING, REASON_DELETING_ERROR, REASON_NO_RESOURCE, REASON_RESOURCE_REMAINING,
    },
};

use crate::conditions::{FALSE, NewCondition, TRUE};

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
