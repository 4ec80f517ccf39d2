//! Step 6: decision groups. The group length is `clustersPerDecisionGroup` (a count, or a
//! percentage of the selected clusters rounded up; ≤ 0 or more than all means all). Predefined
//! groups come first: each takes the not yet grouped selected clusters its label and claim
//! selectors match, sorted by name and cut into groups of that length. The remaining clusters
//! form the unnamed groups. With nothing selected there is still one empty group.

use std::collections::BTreeSet;

use flotilla_api::cluster::{v1::ManagedCluster, v1beta1::GroupStrategy};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::{
    placement::{Group, Misconfiguration, claims_of, labels_of, name_of},
    selector,
};

/// The group length for `total` selected clusters.
pub fn group_length(per_group: &IntOrString, total: usize) -> Result<usize, Misconfiguration> {
    let invalid = || {
        Misconfiguration::new(
            "",
            format!("clustersPerDecisionGroup {per_group:?} is invalid: not a count or a percentage"),
        )
    };
    let length: i64 = match per_group {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => {
            let percent: f64 = s
                .strip_suffix('%')
                .ok_or_else(invalid)?
                .parse()
                .map_err(|_| invalid())?;
            // The CRD refuses more than 100 %; one that got past it is reported, not clamped.
            if !(0.0..=100.0).contains(&percent) {
                return Err(Misconfiguration::new(
                    "",
                    format!("clustersPerDecisionGroup {s} is not a percentage between 0% and 100%"),
                ));
            }
            (percent / 100.0 * total as f64).ceil() as i64
        }
    };
    Ok(if length <= 0 || length > total as i64 {
        total
    } else {
        length as usize
    })
}

/// The decision groups of `selected`.
pub fn decision_groups(
    strategy: &GroupStrategy,
    selected: &[&ManagedCluster],
) -> Result<Vec<Group>, Misconfiguration> {
    let length = group_length(&strategy.clusters_per_decision_group, selected.len())?;
    let mut remaining: BTreeSet<&str> = selected.iter().map(|c| name_of(&c.metadata)).collect();
    let mut named: Vec<(String, Vec<String>)> = Vec::new();
    for group in &strategy.decision_groups {
        let s = &group.group_cluster_selector;
        let mut members = Vec::new();
        for cluster in selected {
            let name = name_of(&cluster.metadata);
            if !remaining.contains(name) {
                continue;
            }
            let labels_ok = selector::matches(&s.label_selector, labels_of(&cluster.metadata))
                .map_err(|e| Misconfiguration::new("", e.to_string()))?;
            let claims_ok =
                selector::requirements_match(&s.claim_selector.match_expressions, &claims_of(cluster))
                    .map_err(|e| Misconfiguration::new("", e.to_string()))?;
            if labels_ok && claims_ok {
                members.push(name.to_owned());
                remaining.remove(name);
            }
        }
        named.push((group.group_name.clone(), members));
    }
    named.push((String::new(), remaining.into_iter().map(str::to_owned).collect()));
    let mut groups = Vec::new();
    for (name, mut members) in named {
        members.sort();
        for chunk in members.chunks(length.max(1)) {
            groups.push(Group {
                index: groups.len(),
                name: name.clone(),
                clusters: chunk.to_vec(),
            });
        }
    }
    if groups.is_empty() {
        groups.push(Group::default());
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;
    use crate::placement::testing::cluster;

    #[rstest]
    #[case::default_zero_means_all(IntOrString::Int(0), 7, 7)]
    #[case::count(IntOrString::Int(3), 7, 3)]
    #[case::count_above_total(IntOrString::Int(30), 7, 7)]
    #[case::percent_rounds_up(IntOrString::String("25%".into()), 7, 2)]
    #[case::hundred_percent(IntOrString::String("100%".into()), 7, 7)]
    #[case::zero_percent_means_all(IntOrString::String("0%".into()), 7, 7)]
    #[case::nothing_selected(IntOrString::String("50%".into()), 0, 0)]
    fn group_length_follows_count_or_percentage(
        #[case] per_group: IntOrString,
        #[case] total: usize,
        #[case] expected: usize,
    ) {
        assert_eq!(group_length(&per_group, total).unwrap(), expected);
    }

    #[rstest]
    #[case::over_hundred_percent("150%")]
    #[case::not_a_percentage("ten")]
    #[case::garbage_percentage("x%")]
    fn bad_group_lengths_are_misconfigurations(#[case] value: &str) {
        assert!(group_length(&IntOrString::String(value.into()), 10).is_err());
    }

    fn names(groups: &[Group]) -> Vec<(usize, &str, Vec<&str>)> {
        groups
            .iter()
            .map(|g| {
                (
                    g.index,
                    g.name.as_str(),
                    g.clusters.iter().map(String::as_str).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn predefined_groups_come_first_and_the_rest_is_chunked() {
        let clusters = [
            cluster("c5").label("canary", "true").build(),
            cluster("c1").build(),
            cluster("c3").label("canary", "true").build(),
            cluster("c2").build(),
            cluster("c4").build(),
        ];
        let refs: Vec<_> = clusters.iter().collect();
        let strategy: GroupStrategy = serde_json::from_value(json!({
            "decisionGroups": [{"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"canary": "true"}}}}],
            "clustersPerDecisionGroup": 2
        }))
        .unwrap();
        let groups = decision_groups(&strategy, &refs).unwrap();
        assert_eq!(
            names(&groups),
            vec![
                (0, "canary", vec!["c3", "c5"]),
                (1, "", vec!["c1", "c2"]),
                (2, "", vec!["c4"]),
            ]
        );
    }

    #[test]
    fn a_cluster_belongs_to_the_first_matching_group_only() {
        let clusters = [cluster("a").label("x", "1").build()];
        let refs: Vec<_> = clusters.iter().collect();
        let strategy: GroupStrategy = serde_json::from_value(json!({
            "decisionGroups": [
                {"groupName": "one", "groupClusterSelector": {"labelSelector": {"matchLabels": {"x": "1"}}}},
                {"groupName": "two", "groupClusterSelector": {}}
            ]
        }))
        .unwrap();
        assert_eq!(
            names(&decision_groups(&strategy, &refs).unwrap()),
            vec![(0, "one", vec!["a"])]
        );
    }

    #[test]
    fn nothing_selected_gives_one_empty_group() {
        let groups = decision_groups(&GroupStrategy::default(), &[]).unwrap();
        assert_eq!(groups, vec![Group::default()]);
    }
}
