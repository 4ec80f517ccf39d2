//! Step 7: PlacementDecision objects. Each group is cut into pages of at most 100 clusters
//! (an empty group still has one empty page); pages are named `<placement>-decision-<n>` with
//! `n` counting from 1 across groups, and labelled with the placement and the group's name and
//! index, which Argo CD's ApplicationSet generator and the rollout library read.

use std::collections::BTreeMap;

use flotilla_api::cluster::{
    consts::{
        DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, MAX_DECISIONS_PER_PLACEMENT_DECISION,
        PLACEMENT_LABEL,
    },
    v1beta1::{ClusterDecision, DecisionGroupStatus},
};

use crate::placement::Group;

/// One PlacementDecision to exist.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    /// `<placement>-decision-<n>`.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its `status.decisions`: cluster names sorted, empty reason, no score.
    pub decisions: Vec<ClusterDecision>,
}

/// Name of the `n`th PlacementDecision (from 1) of `placement`.
pub fn page_name(placement: &str, n: usize) -> String {
    format!("{placement}-decision-{n}")
}

/// The labels of a PlacementDecision of `placement` in `group`.
pub fn page_labels(placement: &str, group: &Group) -> BTreeMap<String, String> {
    BTreeMap::from([
        (PLACEMENT_LABEL.to_owned(), placement.to_owned()),
        (DECISION_GROUP_NAME_LABEL.to_owned(), group.name.clone()),
        (DECISION_GROUP_INDEX_LABEL.to_owned(), group.index.to_string()),
    ])
}

/// The pages of `groups` and the `status.decisionGroups` naming them.
pub fn pages(placement: &str, groups: &[Group]) -> (Vec<Page>, Vec<DecisionGroupStatus>) {
    let mut pages = Vec::new();
    let mut statuses = Vec::new();
    for group in groups {
        let mut chunks: Vec<&[String]> = group
            .clusters
            .chunks(MAX_DECISIONS_PER_PLACEMENT_DECISION)
            .collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let mut names = Vec::new();
        for chunk in chunks {
            let name = page_name(placement, pages.len() + 1);
            names.push(name.clone());
            pages.push(Page {
                name,
                labels: page_labels(placement, group),
                decisions: chunk
                    .iter()
                    .map(|c| ClusterDecision {
                        cluster_name: c.clone(),
                        reason: String::new(),
                        score: 0,
                    })
                    .collect(),
            });
        }
        statuses.push(DecisionGroupStatus {
            decision_group_index: i32::try_from(group.index).unwrap_or(i32::MAX),
            decision_group_name: group.name.clone(),
            decisions: Some(names),
            clusters_count: i32::try_from(group.clusters.len()).unwrap_or(i32::MAX),
        });
    }
    (pages, statuses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(index: usize, name: &str, count: usize) -> Group {
        Group {
            index,
            name: name.into(),
            clusters: (0..count).map(|i| format!("c{i:04}")).collect(),
        }
    }

    #[test]
    fn two_hundred_fifty_clusters_make_three_pages_of_at_most_one_hundred() {
        let (pages, statuses) = pages("p", &[group(0, "", 250)]);
        let sizes: Vec<usize> = pages.iter().map(|p| p.decisions.len()).collect();
        assert_eq!(sizes, vec![100, 100, 50]);
        let names: Vec<&str> = pages.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, vec!["p-decision-1", "p-decision-2", "p-decision-3"]);
        assert_eq!(statuses[0].clusters_count, 250);
        assert_eq!(statuses[0].decisions.as_ref().unwrap().len(), 3);
    }

    #[test]
    fn page_numbers_run_across_groups_and_labels_name_the_group() {
        let (pages, statuses) = pages("web", &[group(0, "canary", 2), group(1, "", 0)]);
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[1].name, "web-decision-2");
        assert!(pages[1].decisions.is_empty());
        assert_eq!(pages[0].labels[PLACEMENT_LABEL], "web");
        assert_eq!(pages[0].labels[DECISION_GROUP_NAME_LABEL], "canary");
        assert_eq!(pages[1].labels[DECISION_GROUP_INDEX_LABEL], "1");
        assert_eq!(statuses[1].decision_group_name, "");
        assert_eq!(statuses[1].decisions, Some(vec!["web-decision-2".to_owned()]));
    }
}
