//! The index of PlacementDecisions a placement controller keeps beside its cache, so that one
//! scheduling pass reads its own decisions and the Balance counts without walking every
//! decision of every placement.
//!
//! ```text
//!  PlacementDecision ns/d ──apply/delete──▶ decisions: ns/d ─▶ (placement, clusters)
//!                                            by_placement: (ns, placement) ─▶ {d, ...}
//!                                            counts: cluster ─▶ decisions naming it
//! ```
//!
//! Updating costs the size of the changed decision; a relist replaces everything with
//! [`DecisionIndex::reset`]. Linkerd's policy indexes have the same apply, delete and reset
//! hooks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// `(namespace, name)` of a PlacementDecision or a Placement.
pub type Key = (String, String);

/// What the index keeps of one PlacementDecision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The placement named by its placement label, if any.
    pub placement: Option<String>,
    /// The clusters in its `status.decisions`, in order.
    pub clusters: Vec<String>,
}

/// PlacementDecisions by placement, and how many decisions name each cluster.
#[derive(Clone, Debug, Default)]
pub struct DecisionIndex {
    /// Every decision by `(namespace, name)`.
    decisions: HashMap<Key, Entry>,
    /// Decision names per `(namespace, placement)`; no empty sets are kept.
    by_placement: HashMap<Key, BTreeSet<String>>,
    /// Per cluster, how many decision entries over all decisions name it; no zeros are kept.
    counts: BTreeMap<String, i64>,
}

impl DecisionIndex {
    /// Records decision `key` as it is now.
    pub fn apply(&mut self, key: Key, entry: Entry) {
        self.delete(&key);
        for cluster in &entry.clusters {
            *self.counts.entry(cluster.clone()).or_insert(0) += 1;
        }
        if let Some(placement) = &entry.placement {
            self.by_placement
                .entry((key.0.clone(), placement.clone()))
                .or_default()
                .insert(key.1.clone());
        }
        self.decisions.insert(key, entry);
    }

    /// Forgets decision `key`.
    pub fn delete(&mut self, key: &Key) {
        let Some(old) = self.decisions.remove(key) else {
            return;
        };
        for cluster in &old.clusters {
            if let Some(count) = self.counts.get_mut(cluster) {
                *count -= 1;
                if *count <= 0 {
                    self.counts.remove(cluster);
                }
            }
        }
        if let Some(placement) = old.placement {
            let owner = (key.0.clone(), placement);
            if let Some(names) = self.by_placement.get_mut(&owner) {
                names.remove(&key.1);
                if names.is_empty() {
                    self.by_placement.remove(&owner);
                }
            }
        }
    }

    /// Replaces everything with `decisions` (after a relist).
    pub fn reset(&mut self, decisions: impl IntoIterator<Item = (Key, Entry)>) {
        *self = Self::default();
        for (key, entry) in decisions {
            self.apply(key, entry);
        }
    }

    /// Names of the decisions labelled for placement `name` in `namespace`.
    pub fn decisions_of(&self, namespace: &str, name: &str) -> Vec<String> {
        self.by_placement
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Per cluster, the decisions of every placement other than `namespace/name` that name it:
    /// the counts the Balance prioritizer reads.
    pub fn counts_without(&self, namespace: &str, name: &str) -> BTreeMap<String, i64> {
        let mut counts = self.counts.clone();
        for decision in self.decisions_of(namespace, name) {
            let key = (namespace.to_owned(), decision);
            for cluster in self
                .decisions
                .get(&key)
                .map(|e| e.clusters.as_slice())
                .unwrap_or_default()
            {
                if let Some(count) = counts.get_mut(cluster) {
                    *count -= 1;
                    if *count <= 0 {
                        counts.remove(cluster);
                    }
                }
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn key(ns: &str, name: &str) -> Key {
        (ns.to_owned(), name.to_owned())
    }

    fn entry(placement: Option<&str>, clusters: &[&str]) -> Entry {
        Entry {
            placement: placement.map(str::to_owned),
            clusters: clusters.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    fn counts(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect()
    }

    /// The index after applying `steps` in order; `None` deletes.
    fn built(steps: &[(&str, &str, Option<Entry>)]) -> DecisionIndex {
        let mut index = DecisionIndex::default();
        for (ns, name, entry) in steps {
            match entry {
                Some(entry) => index.apply(key(ns, name), entry.clone()),
                None => index.delete(&key(ns, name)),
            }
        }
        index
    }

    #[rstest]
    #[case::nothing(vec![], "ns", "p", counts(&[]))]
    #[case::own_decisions_do_not_count(
        vec![("ns", "p-decision-1", Some(entry(Some("p"), &["a", "b"])))], "ns", "p", counts(&[]))]
    #[case::other_placements_count(
        vec![("ns", "p-decision-1", Some(entry(Some("p"), &["a", "b"]))),
             ("ns", "q-decision-1", Some(entry(Some("q"), &["a"])))],
        "ns", "p", counts(&[("a", 1)]))]
    #[case::same_name_in_another_namespace_counts(
        vec![("ns", "p-decision-1", Some(entry(Some("p"), &["a"]))),
             ("other", "p-decision-1", Some(entry(Some("p"), &["a"])))],
        "ns", "p", counts(&[("a", 1)]))]
    #[case::an_update_replaces_the_old_clusters(
        vec![("ns", "q-decision-1", Some(entry(Some("q"), &["a"]))),
             ("ns", "q-decision-1", Some(entry(Some("q"), &["b"])))],
        "ns", "p", counts(&[("b", 1)]))]
    #[case::a_deletion_removes_the_clusters(
        vec![("ns", "q-decision-1", Some(entry(Some("q"), &["a"]))),
             ("ns", "q-decision-1", None)],
        "ns", "p", counts(&[]))]
    #[case::unlabelled_decisions_count_for_everyone(
        vec![("ns", "stray", Some(entry(None, &["a"])))], "ns", "p", counts(&[("a", 1)]))]
    fn balance_counts_leave_out_the_placement_itself(
        #[case] steps: Vec<(&str, &str, Option<Entry>)>,
        #[case] ns: &str,
        #[case] name: &str,
        #[case] expected: BTreeMap<String, i64>,
    ) {
        assert_eq!(built(&steps).counts_without(ns, name), expected);
    }

    #[test]
    fn decisions_of_a_placement_follow_their_label_and_namespace() {
        let index = built(&[
            ("ns", "p-decision-2", Some(entry(Some("p"), &[]))),
            ("ns", "p-decision-1", Some(entry(Some("p"), &["a"]))),
            ("ns", "q-decision-1", Some(entry(Some("q"), &["a"]))),
            ("other", "p-decision-1", Some(entry(Some("p"), &["a"]))),
            // Relabelled to another placement: no longer p's.
            ("ns", "moved", Some(entry(Some("p"), &[]))),
            ("ns", "moved", Some(entry(Some("q"), &[]))),
        ]);
        assert_eq!(index.decisions_of("ns", "p"), ["p-decision-1", "p-decision-2"]);
        assert_eq!(index.decisions_of("ns", "q"), ["moved", "q-decision-1"]);
        assert!(index.decisions_of("ns", "r").is_empty());
    }

    #[test]
    fn reset_forgets_decisions_missing_from_the_relist() {
        let mut index = built(&[
            ("ns", "gone", Some(entry(Some("p"), &["a"]))),
            ("ns", "kept", Some(entry(Some("q"), &["b"]))),
        ]);
        index.reset([(key("ns", "kept"), entry(Some("q"), &["b", "c"]))]);
        assert!(index.decisions_of("ns", "p").is_empty());
        assert_eq!(index.counts_without("ns", "p"), counts(&[("b", 1), ("c", 1)]));
    }

    #[test]
    fn applying_the_same_decision_twice_counts_it_once() {
        let mut index = built(&[("ns", "q-decision-1", Some(entry(Some("q"), &["a"])))]);
        index.apply(key("ns", "q-decision-1"), entry(Some("q"), &["a"]));
        assert_eq!(index.counts_without("ns", "p"), counts(&[("a", 1)]));
    }
}
