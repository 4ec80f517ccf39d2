//! ManagedClusterSets and their bindings:
//!
//! ```text
//!  set selector                          member clusters
//!  ExclusiveClusterSetLabel (default)    label cluster.open-cluster-management.io/clusterset=<set>
//!  LabelSelector                         clusters whose labels match spec.clusterSelector.labelSelector
//! ```
//!
//! The hub keeps two sets: `default` (exclusive label) and `global` (empty label selector: every
//! cluster). It reverts their selectors unless the set is annotated
//! `cluster.open-cluster-management.io/autoupdate: "false"`. Each set reports `ClusterSetEmpty`;
//! each binding reports `Bound` depending on whether its set exists.

use std::collections::BTreeMap;

use flotilla_api::cluster::{
    consts::{
        CLUSTER_SET_AUTOUPDATE_ANNOTATION, CLUSTER_SET_LABEL, DEFAULT_CLUSTER_SET, GLOBAL_CLUSTER_SET,
        managed_cluster_set::{CONDITION_EMPTY, REASON_CLUSTERS_SELECTED, REASON_NO_CLUSTER_MATCHED},
        managed_cluster_set_binding::{
            CONDITION_BOUND, REASON_CLUSTER_SET_BOUND, REASON_CLUSTER_SET_NOT_FOUND,
        },
    },
    v1beta2::{ManagedClusterSelector, SelectorType},
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::{
    conditions::{FALSE, NewCondition, TRUE},
    selector::{self, SelectorError},
};

/// The selector of the `default` set: the exclusive clusterset label.
pub fn default_set_selector() -> ManagedClusterSelector {
    ManagedClusterSelector {
        selector_type: SelectorType::ExclusiveClusterSetLabel,
        label_selector: None,
    }
}

/// The selector of the `global` set: an empty label selector, matching every cluster.
pub fn global_set_selector() -> ManagedClusterSelector {
    ManagedClusterSelector {
        selector_type: SelectorType::LabelSelector,
        label_selector: Some(LabelSelector::default()),
    }
}

/// The selector the hub maintains for set `name` (`default` or `global`), if any.
pub fn managed_selector(name: &str) -> Option<ManagedClusterSelector> {
    match name {
        DEFAULT_CLUSTER_SET => Some(default_set_selector()),
        GLOBAL_CLUSTER_SET => Some(global_set_selector()),
        _ => None,
    }
}

/// The selector to write back onto a hub-maintained set whose selector was changed, or `None`
/// when it is right, not hub-maintained, or opted out with `autoupdate: "false"`.
pub fn selector_to_restore(
    name: &str,
    annotations: &BTreeMap<String, String>,
    current: &ManagedClusterSelector,
) -> Option<ManagedClusterSelector> {
    if annotations
        .get(CLUSTER_SET_AUTOUPDATE_ANNOTATION)
        .is_some_and(|v| v == "false")
    {
        return None;
    }
    managed_selector(name).filter(|wanted| !same_selector(wanted, current))
}

/// Whether two selectors select alike; an absent and an empty label selector are the same
/// for the exclusive type, which ignores it.
fn same_selector(a: &ManagedClusterSelector, b: &ManagedClusterSelector) -> bool {
    match (a.selector_type, b.selector_type) {
        (SelectorType::ExclusiveClusterSetLabel, SelectorType::ExclusiveClusterSetLabel) => {
            a.label_selector.as_ref().is_none_or(is_empty) && b.label_selector.as_ref().is_none_or(is_empty)
        }
        _ => a == b,
    }
}

fn is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && selector.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// Whether a cluster with `labels` belongs to set `set_name` with `selector`. A
/// `LabelSelector` set without a label selector selects nothing, like OCM.
pub fn is_member(
    set_name: &str,
    selector: &ManagedClusterSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    match selector.selector_type {
        SelectorType::ExclusiveClusterSetLabel => {
            Ok(labels.get(CLUSTER_SET_LABEL).is_some_and(|v| v == set_name))
        }
        SelectorType::LabelSelector => match &selector.label_selector {
            Some(label_selector) => selector::matches(label_selector, labels),
            None => Ok(false),
        },
    }
}

/// Counts the members of a set among clusters given by their labels.
pub fn count_members<'a>(
    set_name: &str,
    selector: &ManagedClusterSelector,
    clusters: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
) -> Result<usize, SelectorError> {
    let mut count = 0;
    for labels in clusters {
        if is_member(set_name, selector, labels)? {
            count += 1;
        }
    }
    Ok(count)
}

/// `ClusterSetEmpty` for a set with `count` members.
pub fn empty_condition(count: usize) -> NewCondition<'static> {
    if count == 0 {
        NewCondition {
            type_: CONDITION_EMPTY,
            status: TRUE,
            reason: REASON_NO_CLUSTER_MATCHED,
            message: "No ManagedCluster selected".to_owned(),
            observed_generation: None,
        }
    } else {
        NewCondition {
            type_: CONDITION_EMPTY,
            status: FALSE,
            reason: REASON_CLUSTERS_SELECTED,
            message: format!("{count} ManagedClusters selected"),
            observed_generation: None,
        }
    }
}

/// `Bound` for a binding whose set exists (`true`) or not.
pub fn bound_condition(set_exists: bool) -> NewCondition<'static> {
    let (status, reason) = if set_exists {
        (TRUE, REASON_CLUSTER_SET_BOUND)
    } else {
        (FALSE, REASON_CLUSTER_SET_NOT_FOUND)
    };
    NewCondition {
        type_: CONDITION_BOUND,
        status,
        reason,
        message: String::new(),
        observed_generation: None,
    }
}

/// Whether a cluster lacks the clusterset label and so belongs in `default` (the
/// DefaultClusterSet feature).
pub fn needs_default_set_label(labels: &BTreeMap<String, String>) -> bool {
    !labels.contains_key(CLUSTER_SET_LABEL)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn selecting(pairs: &[(&str, &str)]) -> ManagedClusterSelector {
        ManagedClusterSelector {
            selector_type: SelectorType::LabelSelector,
            label_selector: Some(LabelSelector {
                match_labels: Some(labels(pairs)),
                match_expressions: None,
            }),
        }
    }

    #[test]
    fn exclusive_sets_take_clusters_labelled_with_their_name() {
        let exclusive = default_set_selector();
        assert!(is_member("blue", &exclusive, &labels(&[(CLUSTER_SET_LABEL, "blue")])).unwrap());
        assert!(!is_member("blue", &exclusive, &labels(&[(CLUSTER_SET_LABEL, "red")])).unwrap());
        assert!(!is_member("blue", &exclusive, &labels(&[])).unwrap());
    }

    #[test]
    fn label_selector_sets_match_labels_and_global_matches_all() {
        let prod = selecting(&[("env", "prod")]);
        let clusters = [
            labels(&[("env", "prod")]),
            labels(&[("env", "dev")]),
            labels(&[("env", "prod"), (CLUSTER_SET_LABEL, "x")]),
        ];
        assert_eq!(count_members("prod", &prod, &clusters).unwrap(), 2);
        assert_eq!(
            count_members("global", &global_set_selector(), &clusters).unwrap(),
            3
        );
        let no_selector = ManagedClusterSelector {
            selector_type: SelectorType::LabelSelector,
            label_selector: None,
        };
        assert_eq!(count_members("none", &no_selector, &clusters).unwrap(), 0);
    }

    #[test]
    fn a_bad_selector_is_an_error() {
        let bad = ManagedClusterSelector {
            selector_type: SelectorType::LabelSelector,
            label_selector: Some(LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "env".into(),
                    operator: "Near".into(),
                    values: None,
                }]),
            }),
        };
        assert!(count_members("bad", &bad, [&labels(&[("env", "x")])]).is_err());
    }

    #[test]
    fn emptiness_is_reported_with_the_count() {
        let empty = empty_condition(0);
        assert_eq!((empty.status, empty.reason), (TRUE, REASON_NO_CLUSTER_MATCHED));
        let two = empty_condition(2);
        assert_eq!((two.status, two.reason), (FALSE, REASON_CLUSTERS_SELECTED));
        assert_eq!(two.message, "2 ManagedClusters selected");
    }

    #[test]
    fn hub_sets_are_restored_unless_opted_out() {
        let none = BTreeMap::new();
        let changed = selecting(&[("env", "prod")]);
        assert_eq!(
            selector_to_restore(DEFAULT_CLUSTER_SET, &none, &changed),
            Some(default_set_selector())
        );
        assert_eq!(
            selector_to_restore(GLOBAL_CLUSTER_SET, &none, &changed),
            Some(global_set_selector())
        );
        assert_eq!(
            selector_to_restore(GLOBAL_CLUSTER_SET, &none, &global_set_selector()),
            None
        );
        assert_eq!(
            selector_to_restore(DEFAULT_CLUSTER_SET, &none, &default_set_selector()),
            None
        );
        assert_eq!(selector_to_restore("mine", &none, &changed), None);
        let opted_out = labels(&[(CLUSTER_SET_AUTOUPDATE_ANNOTATION, "false")]);
        assert_eq!(
            selector_to_restore(DEFAULT_CLUSTER_SET, &opted_out, &changed),
            None
        );
    }

    #[test]
    fn an_exclusive_selector_ignores_an_empty_label_selector() {
        let with_empty = ManagedClusterSelector {
            selector_type: SelectorType::ExclusiveClusterSetLabel,
            label_selector: Some(LabelSelector::default()),
        };
        assert_eq!(
            selector_to_restore(DEFAULT_CLUSTER_SET, &BTreeMap::new(), &with_empty),
            None
        );
    }

    #[test]
    fn bindings_are_bound_only_to_existing_sets() {
        assert_eq!(bound_condition(true).reason, REASON_CLUSTER_SET_BOUND);
        assert_eq!(bound_condition(false).status, FALSE);
        assert_eq!(bound_condition(false).reason, REASON_CLUSTER_SET_NOT_FOUND);
    }

    #[test]
    fn only_unlabelled_clusters_get_the_default_label() {
        assert!(needs_default_set_label(&labels(&[("a", "b")])));
        assert!(!needs_default_set_label(&labels(&[(CLUSTER_SET_LABEL, "blue")])));
    }
}
