//! The two Placement conditions, with OCM's reasons and precedence:
//!
//! ```text
//!  PlacementSatisfied False  NoManagedClusterSetBindings   no binding to an existing set
//!                     False  NoIntersection                spec.clusterSets ∩ bound sets = ∅
//!                     False  AllManagedClusterSetsEmpty    no candidate cluster
//!                     False  NoManagedClusterMatched       nothing selected
//!                     True   AllDecisionsScheduled         numberOfClusters reached (or unset)
//!                     False  NotAllDecisionsScheduled      "<n> cluster decisions unscheduled"
//!  PlacementMisconfigured True Misconfigured "<plugin>:<message>" / False Succeedconfigured
//! ```

use flotilla_api::cluster::consts::placement::{
    CONDITION_MISCONFIGURED, CONDITION_SATISFIED, REASON_ALL_DECISIONS_SCHEDULED,
    REASON_ALL_MANAGED_CLUSTER_SETS_EMPTY, REASON_MISCONFIGURED, REASON_NO_INTERSECTION,
    REASON_NO_MANAGED_CLUSTER_MATCHED, REASON_NO_MANAGED_CLUSTER_SET_BINDINGS,
    REASON_NOT_ALL_DECISIONS_SCHEDULED, REASON_SUCCEEDCONFIGURED,
};

use crate::{
    conditions::{FALSE, NewCondition, TRUE},
    placement::Misconfiguration,
};

/// The counts `PlacementSatisfied` is decided from.
#[derive(Clone, Copy, Debug)]
pub struct Counts<'a> {
    /// `spec.clusterSets`.
    pub spec_sets: &'a [String],
    /// Eligible sets.
    pub eligible_sets: &'a [String],
    /// Valid bindings.
    pub bindings: usize,
    /// Candidate clusters.
    pub available: usize,
    /// Selected clusters.
    pub selected: usize,
    /// Wanted but not selected.
    pub unscheduled: i64,
}

fn condition(
    type_: &'static str,
    status: &'static str,
    reason: &'static str,
    message: String,
) -> NewCondition<'static> {
    NewCondition {
        type_,
        status,
        reason,
        message,
        observed_generation: None,
    }
}

/// `PlacementSatisfied`.
pub fn satisfied(c: &Counts<'_>) -> NewCondition<'static> {
    let t = CONDITION_SATISFIED;
    if c.bindings == 0 {
        condition(
            t,
            FALSE,
            REASON_NO_MANAGED_CLUSTER_SET_BINDINGS,
            "No valid ManagedClusterSetBindings found in placement namespace".into(),
        )
    } else if c.eligible_sets.is_empty() {
        condition(
            t,
            FALSE,
            REASON_NO_INTERSECTION,
            format!(
                "None of ManagedClusterSets [{}] is bound to placement namespace",
                c.spec_sets.join(",")
            ),
        )
    } else if c.available == 0 {
        condition(
            t,
            FALSE,
            REASON_ALL_MANAGED_CLUSTER_SETS_EMPTY,
            format!(
                "All ManagedClusterSets [{}] have no member ManagedCluster",
                c.eligible_sets.join(",")
            ),
        )
    } else if c.selected == 0 {
        condition(
            t,
            FALSE,
            REASON_NO_MANAGED_CLUSTER_MATCHED,
            "No ManagedCluster matches any of the cluster predicate".into(),
        )
    } else if c.unscheduled == 0 {
        condition(
            t,
            TRUE,
            REASON_ALL_DECISIONS_SCHEDULED,
            "All cluster decisions scheduled".into(),
        )
    } else {
        condition(
            t,
            FALSE,
            REASON_NOT_ALL_DECISIONS_SCHEDULED,
            format!("{} cluster decisions unscheduled", c.unscheduled),
        )
    }
}

/// `PlacementMisconfigured`.
pub fn misconfigured(problem: Option<&Misconfiguration>) -> NewCondition<'static> {
    match problem {
        Some(m) => condition(
            CONDITION_MISCONFIGURED,
            TRUE,
            REASON_MISCONFIGURED,
            format!("{}:{}", m.plugin, m.message),
        ),
        None => condition(
            CONDITION_MISCONFIGURED,
            FALSE,
            REASON_SUCCEEDCONFIGURED,
            "Placement configurations check pass".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::no_bindings(0, &[], 0, 0, 0, REASON_NO_MANAGED_CLUSTER_SET_BINDINGS)]
    #[case::no_intersection(1, &[], 0, 0, 0, REASON_NO_INTERSECTION)]
    #[case::empty_sets(1, &["s"], 0, 0, 0, REASON_ALL_MANAGED_CLUSTER_SETS_EMPTY)]
    #[case::nothing_matched(1, &["s"], 3, 0, 2, REASON_NO_MANAGED_CLUSTER_MATCHED)]
    #[case::all_scheduled(1, &["s"], 3, 3, 0, REASON_ALL_DECISIONS_SCHEDULED)]
    #[case::some_unscheduled(1, &["s"], 3, 2, 1, REASON_NOT_ALL_DECISIONS_SCHEDULED)]
    fn satisfied_reasons_follow_ocm_precedence(
        #[case] bindings: usize,
        #[case] eligible: &[&str],
        #[case] available: usize,
        #[case] selected: usize,
        #[case] unscheduled: i64,
        #[case] reason: &str,
    ) {
        let eligible: Vec<String> = eligible.iter().map(|s| (*s).to_owned()).collect();
        let c = satisfied(&Counts {
            spec_sets: &[],
            eligible_sets: &eligible,
            bindings,
            available,
            selected,
            unscheduled,
        });
        assert_eq!(c.reason, reason);
        assert_eq!(
            c.status,
            if reason == REASON_ALL_DECISIONS_SCHEDULED {
                TRUE
            } else {
                FALSE
            }
        );
    }

    #[test]
    fn misconfigured_names_the_plugin() {
        let c = misconfigured(Some(&Misconfiguration {
            plugin: "Predicate",
            message: "bad".into(),
        }));
        assert_eq!(
            (c.status, c.reason, c.message.as_str()),
            (TRUE, REASON_MISCONFIGURED, "Predicate:bad")
        );
        assert_eq!(misconfigured(None).reason, REASON_SUCCEEDCONFIGURED);
    }
}
