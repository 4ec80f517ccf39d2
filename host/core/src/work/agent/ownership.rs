//! Who owns an applied object, and what removing a manifest or a work does to it.
//!
//! Every object a work applies carries a non-controller ownerReference to the work's
//! AppliedManifestWork (several works may apply the same object; each adds its own). An
//! orphaned object (`Orphan`, or a matching `SelectivelyOrphan` rule) instead gets the removal
//! marker — the owner's uid with a trailing `-` — which tells the applier to drop that owner.
//! Clean-up deletes an object only when this work's AppliedManifestWork is its last
//! AppliedManifestWork owner and its uid is still the one recorded; otherwise it only lets go.
//!
//! An object that existed before the work first applied it is adopted like one the work
//! created, and so deleted with the work (as OCM does). A work annotated
//! [`RELEASE_PRE_EXISTING_ANNOTATION`] (a Flotilla extension) instead never takes ownership of
//! an object it finds already there without its owner reference ([`adoption_owner`]): the
//! object is applied but released, never deleted, when the work or the manifest goes. The
//! record is the owner reference itself: present on what the work created, absent on what it
//! found.

use std::collections::BTreeSet;

use flotilla_api::work::v1::{AppliedManifestResourceMeta, DeleteOption, DeletePropagationPolicyType};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// Flotilla extension: `"true"` on a ManifestWork releases, rather than deletes, the objects
/// that existed before this work applied them when the work (or the manifest) is removed.
pub const RELEASE_PRE_EXISTING_ANNOTATION: &str = "flotilla.dev/release-pre-existing";

/// Whether `annotations` (a ManifestWork's) ask for [`RELEASE_PRE_EXISTING_ANNOTATION`].
pub fn releases_pre_existing(annotations: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(RELEASE_PRE_EXISTING_ANNOTATION))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The owner reference to apply an object with, given its live owners (`None`: it does not
/// exist yet). With `release_pre_existing`, an object that exists without `owner` is one the
/// work found, not created: it gets the removal marker, so the work never owns (nor deletes)
/// it. Otherwise `owner` as it is (already a marker when the work orphans the object).
pub fn adoption_owner(
    owner: &OwnerReference,
    live_owners: Option<&[OwnerReference]>,
    release_pre_existing: bool,
) -> OwnerReference {
    let found = live_owners.is_some_and(|owners| !owners.iter().any(|o| o.uid == owner.uid));
    if release_pre_existing && found && !owner.uid.ends_with('-') {
        required_owner(owner, false)
    } else {
        owner.clone()
    }
}

/// `apiVersion` of the owner references the agent writes.
pub const OWNER_API_VERSION: &str = "work.open-cluster-management.io/v1";
/// `kind` of the owner references the agent writes.
pub const OWNER_KIND: &str = "AppliedManifestWork";

/// Whether the work owns (and so will delete) the object `group`/`resource` `namespace`/`name`
/// under `delete_option`: always with `Foreground` (the default), never with `Orphan`, and with
/// `SelectivelyOrphan` unless an orphaning rule names exactly that object.
pub fn owned_by_work(
    delete_option: Option<&DeleteOption>,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let Some(option) = delete_option else {
        return true;
    };
    match option.propagation_policy {
        DeletePropagationPolicyType::Foreground => true,
        DeletePropagationPolicyType::Orphan => false,
        DeletePropagationPolicyType::SelectivelyOrphan => {
            !option.selectively_orphan.as_ref().is_some_and(|orphans| {
                orphans.orphaning_rules.iter().any(|rule| {
                    rule.group == group
                        && rule.resource == resource
                        && rule.name == name
                        && rule.namespace == namespace
                })
            })
        }
    }
}

/// The non-controller owner reference to AppliedManifestWork `name` (uid `uid`).
pub fn owner_reference(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: OWNER_API_VERSION.to_owned(),
        kind: OWNER_KIND.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// The owner reference to put on an applied object: `owner` when the work owns it, else the
/// removal marker (`owner`'s uid plus `-`), which [`merge_owner_references`] turns into "drop
/// this owner".
pub fn required_owner(owner: &OwnerReference, owned: bool) -> OwnerReference {
    if owned {
        owner.clone()
    } else {
        OwnerReference {
            uid: format!("{}-", owner.uid),
            ..owner.clone()
        }
    }
}

/// `existing` with `required` applied: added (or replaced, by uid), or — for a removal marker —
/// the marked owner dropped. `None` when nothing changes.
pub fn merge_owner_references(
    existing: &[OwnerReference],
    required: &OwnerReference,
) -> Option<Vec<OwnerReference>> {
    if let Some(removed_uid) = required.uid.strip_suffix('-') {
        if !existing.iter().any(|o| o.uid == removed_uid) {
            return None;
        }
        return Some(
            existing
                .iter()
                .filter(|o| o.uid != removed_uid)
                .cloned()
                .collect(),
        );
    }
    match existing.iter().position(|o| o.uid == required.uid) {
        Some(i) if existing[i] == *required => None,
        Some(i) => {
            let mut merged = existing.to_vec();
            merged[i] = required.clone();
            Some(merged)
        }
        None => {
            let mut merged = existing.to_vec();
            merged.push(required.clone());
            Some(merged)
        }
    }
}

/// Whether `owners` hold an AppliedManifestWork owner other than the one with `uid`.
pub fn has_other_applied_owner(owners: &[OwnerReference], uid: &str) -> bool {
    owners
        .iter()
        .any(|o| o.api_version == OWNER_API_VERSION && o.kind == OWNER_KIND && o.uid != uid)
}

/// What the agent sees of a live object when cleaning up a recorded one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveObject {
    /// Its uid.
    pub uid: String,
    /// Its owner references.
    pub owners: Vec<OwnerReference>,
    /// Whether its deletion has started.
    pub deleting: bool,
}

/// What to do with a recorded applied object that the work no longer maintains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// Gone already: forget it.
    Gone,
    /// Not owned by this AppliedManifestWork (orphaned, read-only, or taken over): leave it.
    NotOwned,
    /// Other AppliedManifestWorks own it too: only drop this owner reference.
    Release,
    /// Another object of the same name replaced it (uid differs): leave it and forget it.
    Replaced,
    /// Its deletion is under way: keep it recorded until it is gone.
    Pending,
    /// Delete it (with the recorded uid as precondition) and keep it recorded until gone.
    Delete,
}

/// The clean-up of `recorded` given the live object (`None` when not found) and this
/// AppliedManifestWork's uid `owner_uid`.
pub fn cleanup(
    recorded: &AppliedManifestResourceMeta,
    live: Option<&LiveObject>,
    owner_uid: &str,
) -> Cleanup {
    let Some(live) = live else {
        return Cleanup::Gone;
    };
    if !live.owners.iter().any(|o| o.uid == owner_uid) {
        return Cleanup::NotOwned;
    }
    if has_other_applied_owner(&live.owners, owner_uid) {
        return Cleanup::Release;
    }
    if !recorded.uid.is_empty() && recorded.uid != live.uid {
        return Cleanup::Replaced;
    }
    if live.deleting {
        return Cleanup::Pending;
    }
    Cleanup::Delete
}

/// Identity of a recorded object, without version and uid.
fn key(meta: &AppliedManifestResourceMeta) -> (&str, &str, &str, &str) {
    (&meta.group, &meta.resource, &meta.namespace, &meta.name)
}

/// The objects of `previous` that `current` no longer holds (by group, resource, namespace and
/// name: a version change is the same object).
pub fn untracked(
    previous: &[AppliedManifestResourceMeta],
    current: &[AppliedManifestResourceMeta],
) -> Vec<AppliedManifestResourceMeta> {
    let kept: BTreeSet<_> = current.iter().map(key).collect();
    previous
        .iter()
        .filter(|p| !kept.contains(&key(p)))
        .cloned()
        .collect()
}

/// Sorts applied resources by group, version, resource, namespace and name, as OCM records
/// them, dropping duplicates.
pub fn sort_applied(resources: &mut Vec<AppliedManifestResourceMeta>) {
    resources.sort_by(|a, b| {
        (&a.group, &a.version, &a.resource, &a.namespace, &a.name).cmp(&(
            &b.group,
            &b.version,
            &b.resource,
            &b.namespace,
            &b.name,
        ))
    });
    resources.dedup_by(|a, b| key(a) == key(b) && a.version == b.version);
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::{OrphaningRule, SelectivelyOrphan};
    use rstest::rstest;

    use super::*;

    fn option(policy: DeletePropagationPolicyType, rules: &[(&str, &str, &str, &str)]) -> DeleteOption {
        DeleteOption {
            propagation_policy: policy,
            selectively_orphan: (!rules.is_empty()).then(|| SelectivelyOrphan {
                orphaning_rules: rules
                    .iter()
                    .map(|(group, resource, namespace, name)| OrphaningRule {
                        group: (*group).into(),
                        resource: (*resource).into(),
                        namespace: (*namespace).into(),
                        name: (*name).into(),
                    })
                    .collect(),
            }),
            ttl_seconds_after_finished: None,
        }
    }

    #[rstest]
    #[case::no_option(None, true)]
    #[case::foreground(Some(option(DeletePropagationPolicyType::Foreground, &[])), true)]
    #[case::orphan(Some(option(DeletePropagationPolicyType::Orphan, &[])), false)]
    #[case::selectively_without_rules(Some(option(DeletePropagationPolicyType::SelectivelyOrphan, &[])), true)]
    #[case::selectively_matching(
        Some(option(DeletePropagationPolicyType::SelectivelyOrphan, &[("", "configmaps", "ns", "keep")])),
        false
    )]
    #[case::selectively_other_namespace(
        Some(option(DeletePropagationPolicyType::SelectivelyOrphan, &[("", "configmaps", "other", "keep")])),
        true
    )]
    #[case::selectively_other_group(
        Some(option(DeletePropagationPolicyType::SelectivelyOrphan, &[("apps", "configmaps", "ns", "keep")])),
        true
    )]
    fn the_delete_option_decides_ownership(#[case] option: Option<DeleteOption>, #[case] owned: bool) {
        assert_eq!(
            owned_by_work(option.as_ref(), "", "configmaps", "ns", "keep"),
            owned
        );
    }

    fn owner(uid: &str) -> OwnerReference {
        owner_reference(&format!("amw-{uid}"), uid)
    }

    #[rstest]
    #[case::created_by_the_work(None, true, "u1")]
    #[case::adopted_by_default(Some(vec![]), false, "u1")]
    #[case::found_without_our_owner(Some(vec![]), true, "u1-")]
    #[case::found_shared_with_another_work(Some(vec![owner("u2")]), true, "u1-")]
    #[case::created_by_the_work_earlier(Some(vec![owner("u1")]), true, "u1")]
    fn only_objects_found_already_there_are_released(
        #[case] live: Option<Vec<OwnerReference>>,
        #[case] release: bool,
        #[case] uid: &str,
    ) {
        let got = adoption_owner(&owner("u1"), live.as_deref(), release);
        assert_eq!(got.uid, uid);
        // An orphaning marker stays one.
        let marker = required_owner(&owner("u1"), false);
        assert_eq!(adoption_owner(&marker, live.as_deref(), release), marker);
    }

    #[rstest]
    #[case::absent(None, false)]
    #[case::true_(Some("true"), true)]
    #[case::loose_true(Some(" True "), true)]
    #[case::other(Some("yes"), false)]
    fn the_release_annotation_must_say_true(#[case] value: Option<&str>, #[case] expected: bool) {
        let annotations = value.map(|v| [(RELEASE_PRE_EXISTING_ANNOTATION.to_owned(), v.to_owned())].into());
        assert_eq!(releases_pre_existing(annotations.as_ref()), expected);
    }

    #[test]
    fn owner_references_are_added_once_and_the_removal_marker_drops_them() {
        let mine = owner("u1");
        let added = merge_owner_references(&[owner("u2")], &mine).unwrap();
        assert_eq!(added, vec![owner("u2"), mine.clone()]);
        assert_eq!(merge_owner_references(&added, &mine), None);
        let marker = required_owner(&mine, false);
        assert_eq!(marker.uid, "u1-");
        assert_eq!(merge_owner_references(&added, &marker), Some(vec![owner("u2")]));
        assert_eq!(merge_owner_references(&[owner("u2")], &marker), None);
        assert_eq!(mine.controller, None);
    }

    fn recorded(uid: &str) -> AppliedManifestResourceMeta {
        AppliedManifestResourceMeta {
            group: String::new(),
            resource: "configmaps".into(),
            name: "cm".into(),
            namespace: "ns".into(),
            version: "v1".into(),
            uid: uid.into(),
        }
    }

    fn live(uid: &str, owners: &[&str], deleting: bool) -> LiveObject {
        LiveObject {
            uid: uid.into(),
            owners: owners.iter().map(|u| owner(u)).collect(),
            deleting,
        }
    }

    #[rstest]
    #[case::gone(None, Cleanup::Gone)]
    #[case::orphaned(Some(live("o1", &[], false)), Cleanup::NotOwned)]
    #[case::shared(Some(live("o1", &["me", "other"], false)), Cleanup::Release)]
    #[case::replaced(Some(live("o2", &["me"], false)), Cleanup::Replaced)]
    #[case::deleting(Some(live("o1", &["me"], true)), Cleanup::Pending)]
    #[case::last_owner(Some(live("o1", &["me"], false)), Cleanup::Delete)]
    fn cleanup_deletes_only_what_this_work_alone_owns(
        #[case] live: Option<LiveObject>,
        #[case] expected: Cleanup,
    ) {
        assert_eq!(cleanup(&recorded("o1"), live.as_ref(), "me"), expected);
    }

    #[test]
    fn untracked_objects_ignore_version_and_uid_and_the_record_is_sorted() {
        let mut deploy = recorded("d");
        deploy.group = "apps".into();
        deploy.resource = "deployments".into();
        let mut cm_v2 = recorded("x");
        cm_v2.version = "v2".into();
        assert_eq!(
            untracked(&[recorded("a"), deploy.clone()], &[cm_v2]),
            vec![deploy.clone()]
        );

        let mut list = vec![deploy.clone(), recorded("a"), recorded("a")];
        sort_applied(&mut list);
        assert_eq!(list, vec![recorded("a"), deploy]);
    }
}
