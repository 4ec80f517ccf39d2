//! Which applied objects the work agent watches, for which works, and which changes wake them:
//! the bookkeeping behind `feedbackScrapeType: Watch` (ocm-reference §1: status feedback
//! refreshed when the watched object changes rather than on the status-sync poll) and behind
//! the drift fast path (a hand edit of an applied object reverted at once rather than on the
//! next resync).
//!
//! ```text
//!  work reconcile ──set(work, objects)──▶ Interests ──▶ kinds to start / stop watching
//!  watch event (kind, ns, name) ─────────▶ Interests ──▶ works to reconcile, and how ([`Wake`])
//!  last metadata seen + the event's ─────▶ wakes()   ──▶ reconcile or not
//! ```
//!
//! One watch per resource kind serves every work that asks for objects of that kind; it is
//! started when the first work asks and stopped when the last one lets go, so an agent whose
//! works all poll and never revert drift watches nothing.

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

/// The labels and annotations a manifest sets: the only metadata whose change is drift (the
/// object's keys set by others are theirs, as the update strategies leave them).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MetadataKeys {
    /// Label keys.
    pub labels: BTreeSet<String>,
    /// Annotation keys.
    pub annotations: BTreeSet<String>,
}

/// Which changes of a watched object wake its works.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Wake {
    /// Changes of what the work wrote (spec, data, its labels and annotations): drift to
    /// revert. A status, or a label or annotation of someone else's (a Deployment's revision
    /// annotation), written by the object's controller does not wake the work.
    Content(MetadataKeys),
    /// Any change, status included: the work reports the object's status (watched feedback).
    AnyChange,
}

/// The metadata of an object that tells a change of content from a status write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// `metadata.resourceVersion`: changes with every write.
    pub resource_version: String,
    /// `metadata.generation`, for kinds that keep one (it then changes with the spec only).
    pub generation: Option<i64>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// Whether an object now `seen` wakes works asking for `wake`, when it was last `before`
/// (by the agent's own write or read, or by an earlier event; `None` when never seen: wake,
/// to be safe). For [`Wake::Content`], a kind with a generation changes content only with
/// its generation or the work's labels and annotations; a kind without one (a ConfigMap)
/// with every write.
pub fn wakes(wake: &Wake, before: Option<&Seen>, seen: &Seen) -> bool {
    let Some(before) = before else {
        return true;
    };
    match (wake, seen.generation) {
        (Wake::AnyChange, _) | (Wake::Content(_), None) => before.resource_version != seen.resource_version,
        (Wake::Content(keys), Some(generation)) => {
            let changed =
                |keys: &BTreeSet<String>, old: &BTreeMap<String, String>, new: &BTreeMap<String, String>| {
                    keys.iter().any(|key| old.get(key) != new.get(key))
                };
            before.generation != Some(generation)
                || changed(&keys.labels, &before.labels, &seen.labels)
                || changed(&keys.annotations, &before.annotations, &seen.annotations)
        }
    }
}

/// What a change of interests asks of the watches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchChanges {
    /// Kinds that gained their first interested work: start watching them.
    pub start: Vec<WatchedKind>,
    /// Kinds that lost their last interested work: stop watching them.
    pub stop: Vec<WatchedKind>,
    /// Objects that lost their last interested work: forget what was seen of them.
    pub released: Vec<WatchedObject>,
}

/// The objects each work watches, and how. Invariant: `by_object` is exactly the inverse of
/// `by_work`, and no work maps to an empty map.
#[derive(Clone, Debug, Default)]
pub struct Interests {
    by_work: BTreeMap<String, BTreeMap<WatchedObject, Wake>>,
    by_object: BTreeMap<WatchedObject, BTreeMap<String, Wake>>,
}

impl Interests {
    /// Kinds with at least one interested work.
    pub fn kinds(&self) -> BTreeSet<WatchedKind> {
        self.by_object.keys().map(|o| o.kind.clone()).collect()
    }

    /// Whether some work watches `object`.
    pub fn is_watched(&self, object: &WatchedObject) -> bool {
        self.by_object.contains_key(object)
    }

    /// Replaces what `work` watches with `objects` (empty: the work watches nothing, e.g. it
    /// was deleted) and returns which watches to start and stop.
    pub fn set(&mut self, work: &str, objects: BTreeMap<WatchedObject, Wake>) -> WatchChanges {
        let before = self.kinds();
        let mut released = Vec::new();
        if let Some(old) = self.by_work.remove(work) {
            for object in old.into_keys() {
                if let Some(works) = self.by_object.get_mut(&object) {
                    works.remove(work);
                    if works.is_empty() {
                        self.by_object.remove(&object);
                        released.push(object);
                    }
                }
            }
        }
        for (object, wake) in &objects {
            self.by_object
                .entry(object.clone())
                .or_default()
                .insert(work.to_owned(), wake.clone());
        }
        if !objects.is_empty() {
            self.by_work.insert(work.to_owned(), objects);
        }
        let after = self.kinds();
        released.retain(|object| !self.by_object.contains_key(object));
        WatchChanges {
            start: after.difference(&before).cloned().collect(),
            stop: before.difference(&after).cloned().collect(),
            released,
        }
    }

    /// The works interested in the object `namespace`/`name` of `kind`, each with how (none
    /// for an object no work asked for: the watch of its kind sees every object of the kind).
    pub fn works_for(&self, kind: &WatchedKind, namespace: &str, name: &str) -> Vec<(String, Wake)> {
        self.by_object
            .get(&WatchedObject::new(kind, namespace, name))
            .map(|works| {
                works
                    .iter()
                    .map(|(work, wake)| (work.clone(), wake.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl WatchedObject {
    /// The object `namespace`/`name` of `kind` (the namespace dropped for a cluster-scoped kind).
    pub fn new(kind: &WatchedKind, namespace: &str, name: &str) -> Self {
        Self {
            kind: kind.clone(),
            namespace: if kind.namespaced {
                namespace.to_owned()
            } else {
                String::new()
            },
            name: name.to_owned(),
        }
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

    fn set(objects: &[(&str, &str)]) -> BTreeMap<WatchedObject, Wake> {
        objects
            .iter()
            .map(|(r, n)| (object(r, n), Wake::AnyChange))
            .collect()
    }

    #[test]
    fn the_first_work_asking_for_a_kind_starts_its_watch_and_the_last_one_stops_it() {
        let mut interests = Interests::default();
        let changes = interests.set("a", set(&[("deployments", "web"), ("configmaps", "cfg")]));
        assert_eq!(changes.start, vec![kind("configmaps"), kind("deployments")]);
        assert!(changes.stop.is_empty() && changes.released.is_empty());

        // A second work on a kind already watched starts nothing.
        assert_eq!(
            interests.set("b", set(&[("deployments", "api")])),
            WatchChanges::default()
        );
        // The first work lets go of Deployments: another still needs them.
        assert_eq!(
            interests.set("a", set(&[("configmaps", "cfg")])),
            WatchChanges {
                released: vec![object("deployments", "web")],
                ..WatchChanges::default()
            }
        );
        assert_eq!(
            interests.set("b", BTreeMap::new()),
            WatchChanges {
                start: vec![],
                stop: vec![kind("deployments")],
                released: vec![object("deployments", "api")],
            }
        );
        assert_eq!(
            interests.set("a", BTreeMap::new()),
            WatchChanges {
                start: vec![],
                stop: vec![kind("configmaps")],
                released: vec![object("configmaps", "cfg")],
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
        let works: Vec<String> = interests
            .works_for(&kind(resource), namespace, name)
            .into_iter()
            .map(|(work, _)| work)
            .collect();
        assert_eq!(works, expected);
    }

    #[test]
    fn setting_the_same_objects_again_changes_nothing() {
        let mut interests = Interests::default();
        interests.set("a", set(&[("deployments", "web")]));
        assert_eq!(
            interests.set("a", set(&[("deployments", "web")])),
            WatchChanges::default()
        );
        assert_eq!(
            interests.works_for(&kind("deployments"), "ns", "web"),
            vec![("a".to_owned(), Wake::AnyChange)]
        );
    }

    fn seen(resource_version: &str, generation: Option<i64>, label: &str) -> Seen {
        Seen {
            resource_version: resource_version.into(),
            generation,
            labels: BTreeMap::from([("app".to_owned(), label.to_owned())]),
            annotations: BTreeMap::new(),
        }
    }

    fn content() -> Wake {
        Wake::Content(MetadataKeys {
            labels: BTreeSet::from(["app".to_owned()]),
            annotations: BTreeSet::from(["note".to_owned()]),
        })
    }

    #[test]
    fn someone_else_s_annotation_is_no_drift_but_the_work_s_own_is() {
        let before = seen("2", Some(1), "a");
        let mut revision = seen("3", Some(1), "a");
        revision
            .annotations
            .insert("deployment.kubernetes.io/revision".into(), "1".into());
        assert!(!wakes(&content(), Some(&before), &revision));
        let mut note = seen("3", Some(1), "a");
        note.annotations.insert("note".into(), "edited".into());
        assert!(wakes(&content(), Some(&before), &note));
    }

    #[rstest]
    #[case::never_seen_wakes(content(), None, seen("2", Some(1), "a"), true)]
    #[case::the_agent_s_own_write_echoed_back(
        content(),
        Some(seen("2", Some(1), "a")),
        seen("2", Some(1), "a"),
        false
    )]
    #[case::a_status_write_is_no_drift(
        content(),
        Some(seen("2", Some(1), "a")),
        seen("3", Some(1), "a"),
        false
    )]
    #[case::a_spec_edit_is_drift(content(), Some(seen("2", Some(1), "a")), seen("3", Some(2), "a"), true)]
    #[case::a_label_edit_is_drift(content(), Some(seen("2", Some(1), "a")), seen("3", Some(1), "b"), true)]
    #[case::any_write_to_a_kind_without_generation_is_drift(
        content(),
        Some(seen("2", None, "a")),
        seen("3", None, "a"),
        true
    )]
    #[case::watched_feedback_wakes_on_a_status_write(
        Wake::AnyChange,
        Some(seen("2", Some(1), "a")),
        seen("3", Some(1), "a"),
        true
    )]
    #[case::watched_feedback_ignores_a_repeat(
        Wake::AnyChange,
        Some(seen("3", Some(1), "a")),
        seen("3", Some(1), "a"),
        false
    )]
    fn only_changes_that_matter_to_the_work_wake_it(
        #[case] wake: Wake,
        #[case] before: Option<Seen>,
        #[case] now: Seen,
        #[case] expected: bool,
    ) {
        assert_eq!(wakes(&wake, before.as_ref(), &now), expected);
    }
}
