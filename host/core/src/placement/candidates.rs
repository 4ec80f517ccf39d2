//! Step 1 of scheduling: the candidate clusters of a Placement.
//!
//! A binding counts only when the cluster set it names exists; the eligible sets are the bound
//! sets, intersected with `spec.clusterSets` when that is given; the candidates are the members
//! of the eligible sets that are not being deleted. Each count is kept because the
//! `PlacementSatisfied` reasons tell them apart (no binding, no intersection, empty sets).

use std::collections::{BTreeMap, BTreeSet};

use crate::{
    placement::{labels_of, name_of},
    registration::hub::clusterset,
};
use flotilla_api::cluster::{
    v1::ManagedCluster,
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};

/// The candidates of one Placement and what led to them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Candidates<'a> {
    /// Bindings in the placement namespace whose set exists.
    pub valid_bindings: usize,
    /// Bound sets that the placement may use, sorted by name.
    pub eligible_sets: Vec<String>,
    /// Member clusters of the eligible sets that are not being deleted, sorted by name.
    pub clusters: Vec<&'a ManagedCluster>,
}

/// The candidates of a placement asking for `wanted_sets` (empty: any bound set), given the
/// bindings of its namespace and every cluster set and cluster.
///
/// A binding names its set by its own name, which admission keeps equal to `spec.clusterSet`.
pub fn candidates<'a>(
    wanted_sets: &[String],
    bindings: &[&ManagedClusterSetBinding],
    sets: &[&ManagedClusterSet],
    clusters: &[&'a ManagedCluster],
) -> Candidates<'a> {
    let sets_by_name: BTreeMap<String, &ManagedClusterSet> = sets
        .iter()
        .map(|s| (name_of(&s.metadata).to_owned(), *s))
        .collect();
    let bound: BTreeSet<String> = bindings
        .iter()
        .map(|b| name_of(&b.metadata).to_owned())
        .filter(|name| sets_by_name.contains_key(name))
        .collect();
    let valid_bindings = bindings
        .iter()
        .filter(|b| sets_by_name.contains_key(name_of(&b.metadata)))
        .count();
    let eligible_sets: Vec<String> = if wanted_sets.is_empty() {
        bound.into_iter().collect()
    } else {
        let wanted: BTreeSet<&String> = wanted_sets.iter().collect();
        bound.into_iter().filter(|s| wanted.contains(s)).collect()
    };
    let selected: Vec<&ManagedClusterSet> = eligible_sets
        .iter()
        .filter_map(|s| sets_by_name.get(s).copied())
        .collect();
    let mut members: Vec<&ManagedCluster> = clusters
        .iter()
        .copied()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| {
            let labels = labels_of(&c.metadata);
            selected.iter().any(|set| {
                // A set whose label selector is malformed selects nobody, as in OCM.
                clusterset::is_member(name_of(&set.metadata), &set.spec.cluster_selector, labels)
                    .unwrap_or(false)
            })
        })
        .collect();
    members.sort_by(|a, b| name_of(&a.metadata).cmp(name_of(&b.metadata)));
    members.dedup_by(|a, b| name_of(&a.metadata) == name_of(&b.metadata));
    Candidates {
        valid_bindings,
        eligible_sets,
        clusters: members,
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::placement::testing::{binding, cluster, exclusive_set, label_set};

    fn refs<T>(items: &[T]) -> Vec<&T> {
        items.iter().collect()
    }

    fn names(c: &Candidates<'_>) -> Vec<String> {
        c.clusters
            .iter()
            .map(|c| name_of(&c.metadata).to_owned())
            .collect()
    }

    #[rstest]
    #[case::bound_set_members(&[], &["prod"], &["a", "b"])]
    #[case::spec_sets_intersect_bound_sets(&["dev"], &["prod", "dev"], &["c"])]
    #[case::spec_set_not_bound_gives_nothing(&["dev"], &["prod"], &[])]
    #[case::binding_to_missing_set_is_ignored(&[], &["missing"], &[])]
    #[case::two_sets_union(&[], &["prod", "dev"], &["a", "b", "c"])]
    fn candidates_are_members_of_bound_and_wanted_sets(
        #[case] wanted: &[&str],
        #[case] bound: &[&str],
        #[case] expected: &[&str],
    ) {
        let sets = vec![exclusive_set("prod"), exclusive_set("dev")];
        let bindings: Vec<_> = bound.iter().map(|b| binding(b)).collect();
        let clusters = vec![
            cluster("a")
                .label("cluster.open-cluster-management.io/clusterset", "prod")
                .build(),
            cluster("b")
                .label("cluster.open-cluster-management.io/clusterset", "prod")
                .build(),
            cluster("c")
                .label("cluster.open-cluster-management.io/clusterset", "dev")
                .build(),
        ];
        let wanted: Vec<String> = wanted.iter().map(|s| (*s).to_owned()).collect();
        let result = candidates(&wanted, &refs(&bindings), &refs(&sets), &refs(&clusters));
        assert_eq!(names(&result), expected);
    }

    #[test]
    fn a_binding_to_a_missing_set_is_not_a_valid_binding() {
        let bindings = [binding("gone"), binding("prod")];
        let sets = [exclusive_set("prod")];
        let result = candidates(&[], &refs(&bindings), &refs(&sets), &[]);
        assert_eq!(result.valid_bindings, 1);
        assert_eq!(result.eligible_sets, vec!["prod".to_owned()]);
    }

    #[test]
    fn clusters_being_deleted_are_not_candidates() {
        let clusters = vec![cluster("a").build(), cluster("b").deleting().build()];
        let (bindings, sets) = ([binding("global")], [label_set("global")]);
        let result = candidates(&[], &refs(&bindings), &refs(&sets), &refs(&clusters));
        assert_eq!(names(&result), vec!["a"]);
    }

    #[test]
    fn a_cluster_in_two_eligible_sets_is_a_candidate_once() {
        let clusters = vec![
            cluster("a")
                .label("cluster.open-cluster-management.io/clusterset", "prod")
                .build(),
        ];
        let bindings = [binding("global"), binding("prod")];
        let sets = [label_set("global"), exclusive_set("prod")];
        let result = candidates(&[], &refs(&bindings), &refs(&sets), &refs(&clusters));
        assert_eq!(names(&result), vec!["a"]);
    }
}
