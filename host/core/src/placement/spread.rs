//! Step 5: selection, with Flotilla's spread constraints.
//!
//! Without `spreadPolicy.spreadConstraints` selection is OCM's: the first `numberOfClusters`
//! clusters in score order (all of them when unset). With constraints, clusters are taken one
//! at a time in score order, with the semantics of Kubernetes pod topology spread:
//!
//! - a domain is a value of the constraint's topology key (a label, or a claim) among the
//!   feasible clusters; skew = selected in a domain − the fewest selected in any domain;
//! - `DoNotSchedule`: a cluster is taken only if taking it keeps skew ≤ `maxSkew`, and clusters
//!   without the key are never taken;
//! - `ScheduleAnyway`: among the clusters the hard constraints allow, those that keep every soft
//!   constraint's skew ≤ `maxSkew` are preferred; the best-scored one is taken otherwise.
//!
//! Since a domain's count only grows, skew after each step is at most `maxSkew` for every
//! `DoNotSchedule` constraint, which the property tests check.

use std::collections::BTreeMap;

use flotilla_api::cluster::{
    v1::ManagedCluster,
    v1beta1::{SpreadConstraintsTerm, TopologyKeyType, UnsatisfiableMaxSkewAction},
};

use crate::placement::{claims_of, labels_of};

/// The topology value of `cluster` for a constraint.
pub fn topology_value(cluster: &ManagedCluster, constraint: &SpreadConstraintsTerm) -> Option<String> {
    match constraint.topology_key_type {
        TopologyKeyType::Label => labels_of(&cluster.metadata)
            .get(&constraint.topology_key)
            .cloned(),
        TopologyKeyType::Claim => claims_of(cluster).remove(&constraint.topology_key),
    }
}

/// Indexes into `ranked` (best first) of the selected clusters, ascending.
pub fn select(
    ranked: &[&ManagedCluster],
    wanted: Option<i32>,
    constraints: &[SpreadConstraintsTerm],
) -> Vec<usize> {
    let wanted = wanted
        .map_or(ranked.len(), |n| usize::try_from(n).unwrap_or(0))
        .min(ranked.len());
    if constraints.is_empty() {
        return (0..wanted).collect();
    }
    // Domain of every cluster for every constraint, and per constraint the count per domain.
    let domains: Vec<Vec<Option<String>>> = ranked
        .iter()
        .map(|c| constraints.iter().map(|k| topology_value(c, k)).collect())
        .collect();
    let mut counts: Vec<BTreeMap<String, i64>> = constraints
        .iter()
        .enumerate()
        .map(|(k, _)| {
            domains
                .iter()
                .filter_map(|d| d[k].clone())
                .map(|v| (v, 0))
                .collect()
        })
        .collect();
    let mut taken = vec![false; ranked.len()];
    let mut picked = Vec::new();
    while picked.len() < wanted {
        let mut best: Option<(usize, usize)> = None; // (soft violations, index)
        for (i, cluster_domains) in domains.iter().enumerate() {
            if taken[i] {
                continue;
            }
            let mut soft = 0;
            let mut allowed = true;
            for (k, constraint) in constraints.iter().enumerate() {
                let fits = match &cluster_domains[k] {
                    Some(v) => {
                        let min = counts[k].values().copied().min().unwrap_or(0);
                        counts[k][v] + 1 - min <= i64::from(constraint.max_skew.max(1))
                    }
                    None => constraint.when_unsatisfiable != UnsatisfiableMaxSkewAction::DoNotSchedule,
                };
                if !fits {
                    match constraint.when_unsatisfiable {
                        UnsatisfiableMaxSkewAction::DoNotSchedule => allowed = false,
                        UnsatisfiableMaxSkewAction::ScheduleAnyway => soft += 1,
                    }
                }
            }
            if allowed && best.is_none_or(|(s, _)| soft < s) {
                best = Some((soft, i));
                if soft == 0 {
                    break;
                }
            }
        }
        let Some((_, i)) = best else { break };
        taken[i] = true;
        picked.push(i);
        for (k, domain) in domains[i].iter().enumerate() {
            if let Some(v) = domain
                && let Some(count) = counts[k].get_mut(v)
            {
                *count += 1;
            }
        }
    }
    picked.sort_unstable();
    picked
}

/// The largest skew of a selection for one constraint (selected per domain − fewest), over the
/// domains of `feasible`.
pub fn skew(
    feasible: &[&ManagedCluster],
    selected: &[&ManagedCluster],
    constraint: &SpreadConstraintsTerm,
) -> i64 {
    let mut counts: BTreeMap<String, i64> = feasible
        .iter()
        .filter_map(|c| topology_value(c, constraint))
        .map(|v| (v, 0))
        .collect();
    for c in selected {
        if let Some(v) = topology_value(c, constraint) {
            *counts.entry(v).or_default() += 1;
        }
    }
    let max = counts.values().copied().max().unwrap_or(0);
    let min = counts.values().copied().min().unwrap_or(0);
    max - min
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::placement::{name_of, testing::cluster};

    fn term(key: &str, max_skew: i32, action: UnsatisfiableMaxSkewAction) -> SpreadConstraintsTerm {
        SpreadConstraintsTerm {
            topology_key: key.into(),
            topology_key_type: TopologyKeyType::Label,
            max_skew,
            when_unsatisfiable: action,
        }
    }

    /// Clusters best first: three in zone a, one in zone b, one without a zone.
    fn ranked() -> Vec<ManagedCluster> {
        vec![
            cluster("a1").label("zone", "a").build(),
            cluster("a2").label("zone", "a").build(),
            cluster("a3").label("zone", "a").build(),
            cluster("b1").label("zone", "b").build(),
            cluster("none").build(),
        ]
    }

    fn run(wanted: Option<i32>, constraints: &[SpreadConstraintsTerm]) -> Vec<String> {
        let clusters = ranked();
        let refs: Vec<&ManagedCluster> = clusters.iter().collect();
        select(&refs, wanted, constraints)
            .into_iter()
            .map(|i| name_of(&refs[i].metadata).to_owned())
            .collect()
    }

    use UnsatisfiableMaxSkewAction::{DoNotSchedule, ScheduleAnyway};

    #[rstest]
    #[case::no_constraints_takes_the_best(Some(2), vec![], &["a1", "a2"])]
    #[case::no_constraints_no_count_takes_all(None, vec![], &["a1", "a2", "a3", "b1", "none"])]
    #[case::hard_spreads_over_zones(Some(2), vec![term("zone", 1, DoNotSchedule)], &["a1", "b1"])]
    #[case::hard_stops_at_max_skew(Some(4), vec![term("zone", 1, DoNotSchedule)], &["a1", "a2", "b1"])]
    #[case::hard_larger_skew(Some(4), vec![term("zone", 2, DoNotSchedule)], &["a1", "a2", "a3", "b1"])]
    #[case::hard_skips_clusters_without_the_key(None, vec![term("zone", 5, DoNotSchedule)], &["a1", "a2", "a3", "b1"])]
    #[case::soft_prefers_spread(Some(2), vec![term("zone", 1, ScheduleAnyway)], &["a1", "b1"])]
    #[case::soft_fills_up_anyway(Some(5), vec![term("zone", 1, ScheduleAnyway)], &["a1", "a2", "a3", "b1", "none"])]
    fn selection_honours_spread_constraints(
        #[case] wanted: Option<i32>,
        #[case] constraints: Vec<SpreadConstraintsTerm>,
        #[case] expected: &[&str],
    ) {
        assert_eq!(run(wanted, &constraints), expected);
    }

    #[test]
    fn a_claim_can_be_the_topology_key() {
        let clusters = [
            cluster("x1").claim("region", "eu").build(),
            cluster("x2").claim("region", "eu").build(),
            cluster("y1").claim("region", "us").build(),
        ];
        let refs: Vec<&ManagedCluster> = clusters.iter().collect();
        let mut constraint = term("region", 1, DoNotSchedule);
        constraint.topology_key_type = TopologyKeyType::Claim;
        assert_eq!(select(&refs, Some(2), &[constraint]), vec![0, 2]);
    }
}
