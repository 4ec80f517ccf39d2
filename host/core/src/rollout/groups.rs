//! The clusters a placement chose, by decision group: the input every rollout is planned over.
//!
//! A placement writes its choice as PlacementDecisions labelled with the decision group's name
//! and index; [`ClusterGroups`] merges them per group. Group selection follows OCM's decision
//! tracker to the letter, including one quirk: groups are enumerated by index from `0` up to the
//! number of distinct indices, so a group whose index lies beyond that count (a gap in the
//! numbering, which no placement controller produces) is not part of the rollout.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::cluster::consts::{DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL};
use flotilla_api::cluster::v1alpha1::MandatoryDecisionGroup;
use flotilla_api::cluster::v1beta1::PlacementDecision;

use super::RolloutError;

/// A decision group: its name (`""` for the group of clusters no named group took) and index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    /// Decision group index; ordered before the name so groups sort by index.
    pub index: i32,
    /// Decision group name.
    pub name: String,
}

impl GroupKey {
    /// The key of group `index` named `name`.
    pub fn new(name: impl Into<String>, index: i32) -> Self {
        Self {
            index,
            name: name.into(),
        }
    }
}

/// Clusters per decision group, as the PlacementDecisions of one placement list them.
///
/// Invariant: keys are unique (group name + index); a cluster may appear in several groups only
/// if the decisions say so, in which case the lowest-keyed group is the one it is reported under.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterGroups {
    groups: BTreeMap<GroupKey, BTreeSet<String>>,
}

impl ClusterGroups {
    /// Groups from `(group, clusters)` pairs; pairs with the same group are merged.
    pub fn new<I, C, S>(groups: I) -> Self
    where
        I: IntoIterator<Item = (GroupKey, C)>,
        C: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut merged: BTreeMap<GroupKey, BTreeSet<String>> = BTreeMap::new();
        for (key, clusters) in groups {
            merged
                .entry(key)
                .or_default()
                .extend(clusters.into_iter().map(Into::into));
        }
        Self { groups: merged }
    }

    /// Groups from the PlacementDecisions of one placement, keyed by their decision-group labels.
    /// A decision without a numeric `decision-group-index` label is an error, as in OCM.
    pub fn from_decisions<'a>(
        decisions: impl IntoIterator<Item = &'a PlacementDecision>,
    ) -> Result<Self, RolloutError> {
        let mut pairs = Vec::new();
        for decision in decisions {
            let labels = decision.metadata.labels.as_ref();
            let label = |key: &str| labels.and_then(|l| l.get(key)).cloned().unwrap_or_default();
            let index_label = label(DECISION_GROUP_INDEX_LABEL);
            let index = index_label
                .parse::<i32>()
                .map_err(|_| RolloutError::DecisionGroupIndex {
                    decision: decision.metadata.name.clone().unwrap_or_default(),
                    value: index_label.clone(),
                })?;
            let clusters = decision
                .status
                .as_ref()
                .map(|s| {
                    s.decisions
                        .iter()
                        .map(|d| d.cluster_name.clone())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            pairs.push((GroupKey::new(label(DECISION_GROUP_NAME_LABEL), index), clusters));
        }
        Ok(Self::new(pairs))
    }

    /// Every cluster of every group.
    pub fn clusters(&self) -> BTreeSet<&str> {
        self.groups.values().flatten().map(String::as_str).collect()
    }

    /// The groups, ordered by index.
    pub fn iter(&self) -> impl Iterator<Item = (&GroupKey, &BTreeSet<String>)> {
        self.groups.iter()
    }

    /// Whether there is no group at all.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The group each cluster is reported under (the lowest-keyed group holding it).
    pub(crate) fn group_of_clusters(&self) -> BTreeMap<&str, &GroupKey> {
        let mut out = BTreeMap::new();
        for (key, clusters) in &self.groups {
            for cluster in clusters {
                out.entry(cluster.as_str()).or_insert(key);
            }
        }
        out
    }

    /// Name of each index (the last name in key order when an index carries several names).
    fn index_to_name(&self) -> BTreeMap<i32, &str> {
        self.groups.keys().map(|k| (k.index, k.name.as_str())).collect()
    }

    /// The group keys `wanted` refers to: a name selects every group of that name (by index), an
    /// index (used when the name is empty) the group of that index.
    fn resolve(&self, wanted: &[MandatoryDecisionGroup]) -> Vec<GroupKey> {
        let index_to_name = self.index_to_name();
        let mut out = Vec::new();
        for group in wanted {
            if group.group_name.is_empty() {
                if let Some(name) = index_to_name.get(&group.group_index) {
                    out.push(GroupKey::new(*name, group.group_index));
                }
            } else {
                out.extend(self.groups.keys().filter(|k| k.name == group.group_name).cloned());
            }
        }
        out
    }

    /// The groups `wanted` refers to.
    pub(crate) fn only(&self, wanted: &[MandatoryDecisionGroup]) -> ClusterGroups {
        let keys = self.resolve(wanted);
        let groups = self
            .groups
            .iter()
            .filter(|(k, _)| keys.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()));
        Self {
            groups: groups.collect(),
        }
    }

    /// Every group except those `excluded` refers to, enumerated as OCM's tracker does: indices
    /// `0..n` where `n` is the number of distinct indices (see the module documentation).
    pub(crate) fn besides(&self, excluded: &[MandatoryDecisionGroup]) -> ClusterGroups {
        let excluded = self.resolve(excluded);
        let index_to_name = self.index_to_name();
        let count = i32::try_from(index_to_name.len()).unwrap_or(i32::MAX);
        let mut groups = BTreeMap::new();
        for index in 0..count {
            let key = GroupKey::new(index_to_name.get(&index).copied().unwrap_or_default(), index);
            if excluded.contains(&key) {
                continue;
            }
            if let Some(clusters) = self.groups.get(&key) {
                groups.insert(key, clusters.clone());
            }
        }
        Self { groups }
    }
}
