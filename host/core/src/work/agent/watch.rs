//! Which applied objects the work agent watches, and for which works: the bookkeeping behind
//! `feedbackScrapeType: Watch` (ocm-reference §1: status feedback refreshed when the watched
//! object changes rather than on the status-sync poll).
//!
//! ```text
//!  work reconcile ──set(work, objects)──▶ Interests ──▶ kinds to start / stop watching
//!  watch event (kind, ns, name) ─────────▶ Interests ──▶ works to reconcile
//! ```
//!
//! One watch per resource kind serves every work that asks for objects of that kind; it is
//! started when the first work asks and stopped when the last one lets go, so an agent whose
//! works all poll watches nothing.

use std::collections::{BTreeMap, BTreeSet};

/// A resource kind as the apiserver serves it: one watch each.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchedKind {
    /// API group (`""` for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name.
    pub resource: String,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// One watched object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchedObject {
    /// Its kind.
    pub kind: WatchedKind,
    /// Its namespace (`""` when cluster-scoped).
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// What a change of interests asks of the watches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchChanges {
    /// Kinds that gained their first interested work: start watching them.
    pub start: Vec<WatchedKind>,
    /// Kinds that lost their last interested work: stop watching them.
    pub stop: Vec<WatchedKind>,
}

/// The objects each work watches. Invariant: `by_object` is exactly the inverse of `by_work`,
/// and no work maps to an empty set.
#[derive(Clone, Debug, Default)]
pub struct Interests {
    by_work: BTreeMap<String, BTreeSet<WatchedObject>>,
    by_object: BTreeMap<WatchedObject, BTreeSet<String>>,
}

impl Interests {
    /// Kinds with at least one interested work.
    pub fn kinds(&self) -> BTreeSet<WatchedKind> {
        self.by_object.keys().map(|o| o.kind.clone()).collect()
    }

    /// Replaces what `work` watches with `objects` (empty: the work watches nothing, e.g. it
    /// was deleted or switched to Poll) and returns which watches to start and stop.
    pub fn set(&mut self, work: &str, objects: BTreeSet<WatchedObject>) -> WatchChanges {
        let before = self.kinds();
        if let Some(old) = self.by_work.remove(work) {
            for object in old {
                if let Some(works) = self.by_object.get_mut(&object) {
                    works.remove(work);
                    if works.is_empty() {
                        self.by_object.remove(&object);
                    }
                }
            }
        }
        for object in &objects {
            self.by_object
                .entry(object.clone())
                .or_default()
                .insert(work.to_owned());
        }
        if !objects.is_empty() {
            self.by_work.insert(work.to_owned(), objects);
        }
        let after = self.kinds();
        WatchChanges {
            start: after.difference(&before).cloned().collect(),
            stop: before.difference(&after).cloned().collect(),
        }
    }

    /// The works interested in the object `namespace`/`name` of `kind` (none for an object no
    /// work asked for: the watch of its kind sees every object of the kind).
    pub fn works_for(&self, kind: &WatchedKind, namespace: &str, name: &str) -> Vec<String> {
        let key = WatchedObject {
            kind: kind.clone(),
            namespace: if kind.namespaced {
                namespace.to_owned()
            } else {
                String::new()
            },
            name: name.to_owned(),
        };
        self.by_object
            .get(&key)
            .map(|works| works.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn kind(resource: &str) -> WatchedKind {
        WatchedKind {
            group: if resource == "deployments" { "apps" } else { "" }.to_owned(),
            version: "v1".to_owned(),
            resource: resource.to_owned(),
            namespaced: resource != "namespaces",
        }
    }

    fn object(resource: &str, name: &str) -> WatchedObject {
        WatchedObject {
            namespace: if resource == "namespaces" { "" } else { "ns" }.to_owned(),
            kind: kind(resource),
            name: name.to_owned(),
        }
    }

    fn set(objects: &[(&str, &str)]) -> BTreeSet<WatchedObject> {
        objects.iter().map(|(r, n)| object(r, n)).collect()
    }

    #[test]
    fn the_first_work_asking_for_a_kind_starts_its_watch_and_the_last_one_stops_it() {
        let mut interests = Interests::default();
        let changes = interests.set("a", set(&[("deployments", "web"), ("configmaps", "cfg")]));
        assert_eq!(changes.start, vec![kind("configmaps"), kind("deployments")]);
        assert!(changes.stop.is_empty());

        // A second work on a kind already watched starts nothing.
        assert_eq!(
            interests.set("b", set(&[("deployments", "api")])),
            WatchChanges::default()
        );
        // The first work lets go of Deployments: another still needs them.
        assert_eq!(
            interests.set("a", set(&[("configmaps", "cfg")])),
            WatchChanges::default()
        );
        assert_eq!(
            interests.set("b", BTreeSet::new()),
            WatchChanges {
                start: vec![],
                stop: vec![kind("deployments")],
            }
        );
        assert_eq!(
            interests.set("a", BTreeSet::new()),
            WatchChanges {
                start: vec![],
                stop: vec![kind("configmaps")],
            }
        );
        assert!(interests.kinds().is_empty());
    }

    #[rstest]
    #[case::its_own_work(vec![("a", vec![("deployments", "web")])], "deployments", "ns", "web", &["a"])]
    #[case::every_work_sharing_it(
        vec![("a", vec![("deployments", "web")]), ("b", vec![("deployments", "web"), ("configmaps", "web")])],
        "deployments", "ns", "web", &["a", "b"]
    )]
    #[case::nobody_for_an_unwatched_name(vec![("a", vec![("deployments", "web")])], "deployments", "ns", "api", &[])]
    #[case::nobody_for_another_namespace(
        vec![("a", vec![("deployments", "web")])], "deployments", "other", "web", &[]
    )]
    #[case::cluster_scoped_ignores_namespace(
        vec![("a", vec![("namespaces", "team")])], "namespaces", "", "team", &["a"]
    )]
    fn a_change_wakes_exactly_the_works_watching_the_object(
        #[case] works: Vec<(&str, Vec<(&str, &str)>)>,
        #[case] resource: &str,
        #[case] namespace: &str,
        #[case] name: &str,
        #[case] expected: &[&str],
    ) {
        let mut interests = Interests::default();
        for (work, objects) in works {
            interests.set(work, set(&objects));
        }
        assert_eq!(interests.works_for(&kind(resource), namespace, name), expected);
    }

    #[test]
    fn setting_the_same_objects_again_changes_nothing() {
        let mut interests = Interests::default();
        interests.set("a", set(&[("deployments", "web")]));
        assert_eq!(
            interests.set("a", set(&[("deployments", "web")])),
            WatchChanges::default()
        );
        assert_eq!(interests.works_for(&kind("deployments"), "ns", "web"), vec!["a"]);
    }
}
