//! Which ManagedClusterAddOns the hub creates and deletes for a ClusterManagementAddOn:
//!
//! ```text
//! CMA (lifecycle annotation absent or "addon-manager"; "self" and anything else: hands off)
//!   installStrategy Manual      ──▶ nothing (users create ManagedClusterAddOns)
//!   installStrategy Placements  ──▶ union of the placements' decisions
//!        create: clusters in the union without the add-on (empty spec, CMA controller owner,
//!                the cluster's addon.open-cluster-management.io* annotations)
//!        delete: the CMA's own add-ons on clusters outside the union
//! ```
//!
//! A placement that does not exist contributes no cluster and is reported so the controller can
//! say so; OCM skips it the same way. When several AddOnPlugins claim one add-on name,
//! [`addon_drivers`] picks the one that drives it; [`template_for_addon`] says which
//! AddOnTemplates may serve an add-on.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::addon::GROUP;
use flotilla_api::addon::consts::{LIFECYCLE_ADDON_MANAGER, LIFECYCLE_ANNOTATION};
use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnSpec};
use flotilla_api::addon::v1beta1::{InstallStrategy, InstallStrategyType, PlacementRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

/// API version of the ClusterManagementAddOn owner reference OCM puts on the add-ons it installs.
pub const OWNER_API_VERSION: &str = "addon.open-cluster-management.io/v1beta1";

/// Whether the hub's add-on manager manages a ClusterManagementAddOn with these annotations:
/// yes when the lifecycle annotation is absent or `addon-manager`; `self` (or any other value)
/// leaves it to its own manager, so a Go add-on manager can share the hub.
pub fn is_managed_by_addon_manager(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(LIFECYCLE_ANNOTATION))
        .is_none_or(|value| value == LIFECYCLE_ADDON_MANAGER)
}

/// Whether `owners` name the ClusterManagementAddOn with uid `cma_uid` as controller.
pub fn is_controlled_by(owners: &[OwnerReference], cma_uid: &str) -> bool {
    owners
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == cma_uid)
}

/// An existing ManagedClusterAddOn of the add-on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExistingAddon {
    /// Its cluster (namespace).
    pub cluster: String,
    /// Whether the ClusterManagementAddOn is its controller owner.
    pub owned: bool,
}

/// What the install strategy asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallPlan {
    /// Clusters that get a new ManagedClusterAddOn.
    pub create: BTreeSet<String>,
    /// Clusters whose ManagedClusterAddOn is deleted.
    pub delete: BTreeSet<String>,
    /// Install placements that do not exist.
    pub missing_placements: Vec<PlacementRef>,
}

/// The install plan of a managed ClusterManagementAddOn (check
/// [`is_managed_by_addon_manager`] first). `decisions` gives the clusters a placement selects,
/// or None when the placement does not exist. Only add-ons the CMA owns are deleted, so a
/// ManagedClusterAddOn a user created by hand survives a placement change.
pub fn install_plan(
    strategy: &InstallStrategy,
    decisions: impl Fn(&PlacementRef) -> Option<BTreeSet<String>>,
    existing: &[ExistingAddon],
) -> InstallPlan {
    let mut plan = InstallPlan::default();
    if strategy.type_ == InstallStrategyType::Manual {
        return plan;
    }
    let mut wanted = BTreeSet::new();
    for placement in &strategy.placements {
        match decisions(&placement.placement) {
            Some(clusters) => wanted.extend(clusters),
            None => plan.missing_placements.push(placement.placement.clone()),
        }
    }
    let present: BTreeSet<&String> = existing.iter().map(|e| &e.cluster).collect();
    plan.create = wanted.iter().filter(|c| !present.contains(c)).cloned().collect();
    plan.delete = existing
        .iter()
        .filter(|e| e.owned && !wanted.contains(&e.cluster))
        .map(|e| e.cluster.clone())
        .collect();
    plan
}

/// The ManagedClusterAddOn installed on `cluster` for the ClusterManagementAddOn `cma_name`
/// (uid `cma_uid`): empty spec, the CMA as controller owner, and the cluster's annotations whose
/// key starts with `addon.open-cluster-management.io`.
pub fn new_managed_cluster_addon(
    cma_name: &str,
    cma_uid: &str,
    cluster: &str,
    cluster_annotations: Option<&BTreeMap<String, String>>,
) -> ManagedClusterAddOn {
    let annotations: BTreeMap<String, String> = cluster_annotations
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(GROUP))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut addon = ManagedClusterAddOn::new(cma_name, ManagedClusterAddOnSpec::default());
    addon.metadata = ObjectMeta {
        name: Some(cma_name.to_owned()),
        namespace: Some(cluster.to_owned()),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: OWNER_API_VERSION.into(),
            kind: "ClusterManagementAddOn".into(),
            name: cma_name.to_owned(),
            uid: cma_uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..Default::default()
    };
    addon
}

/// An AddOnPlugin's claim on an add-on name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginClaim {
    /// The AddOnPlugin's name.
    pub plugin: String,
    /// The add-on it drives (`AddOnPlugin::addon_name`).
    pub addon: String,
    /// Its `metadata.creationTimestamp`.
    pub created: Option<Timestamp>,
}

/// Which plugin drives each add-on when several claim it: the oldest (then the first by name),
/// so that a newcomer never takes an add-on away from a working plugin. The others get `Ready`
/// False `AddOnNameConflict`.
pub fn addon_drivers(claims: &[PluginClaim]) -> BTreeMap<String, String> {
    let mut drivers: BTreeMap<String, &PluginClaim> = BTreeMap::new();
    for claim in claims {
        let key = |c: &PluginClaim| (c.created.is_none(), c.created, c.plugin.clone());
        drivers
            .entry(claim.addon.clone())
            .and_modify(|current| {
                if key(claim) < key(current) {
                    *current = claim;
                }
            })
            .or_insert(claim);
    }
    drivers
        .into_iter()
        .map(|(addon, c)| (addon, c.plugin.clone()))
        .collect()
}

/// Whether AddOnTemplate `template` (whose `spec.addonName` is `template_addon`) may serve add-on
/// `addon`: only a template of that add-on — its `addonName`, or its own name when it names
/// none. Which template an add-on uses is read from its `status.configReferences`, which the
/// cluster's agent may write as well as the rollout; another add-on's template would give the
/// agent that add-on's manifests, registrations and signing CA. The error says why, for a
/// condition and a log line.
pub fn template_for_addon(template_addon: &str, template: &str, addon: &str) -> Result<(), String> {
    let owner = if template_addon.is_empty() {
        template
    } else {
        template_addon
    };
    if owner == addon {
        Ok(())
    } else {
        Err(format!(
            "AddOnTemplate {template} belongs to add-on {owner}, not {addon}; an add-on is served only by its \
             own templates"
        ))
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::addon::consts::LIFECYCLE_SELF;
    use flotilla_api::addon::v1beta1::PlacementStrategy;
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::absent(None, true)]
    #[case::addon_manager(Some(LIFECYCLE_ADDON_MANAGER), true)]
    #[case::self_managed(Some(LIFECYCLE_SELF), false)]
    #[case::anything_else(Some("someone"), false)]
    fn the_lifecycle_annotation_decides_who_manages(#[case] value: Option<&str>, #[case] managed: bool) {
        let annotations: Option<BTreeMap<String, String>> =
            value.map(|v| [(LIFECYCLE_ANNOTATION.to_owned(), v.to_owned())].into());
        assert_eq!(is_managed_by_addon_manager(annotations.as_ref()), managed);
    }

    fn placements(names: &[&str]) -> InstallStrategy {
        InstallStrategy {
            type_: InstallStrategyType::Placements,
            placements: names
                .iter()
                .map(|n| PlacementStrategy {
                    placement: PlacementRef {
                        namespace: "default".into(),
                        name: (*n).into(),
                    },
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn decisions(p: &PlacementRef) -> Option<BTreeSet<String>> {
        let clusters: &[&str] = match p.name.as_str() {
            "a" => &["c1", "c2"],
            "b" => &["c2", "c3"],
            "empty" => &[],
            _ => return None,
        };
        Some(clusters.iter().map(|c| (*c).to_owned()).collect())
    }

    fn existing(list: &[(&str, bool)]) -> Vec<ExistingAddon> {
        list.iter()
            .map(|(c, owned)| ExistingAddon {
                cluster: (*c).into(),
                owned: *owned,
            })
            .collect()
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[rstest]
    #[case::union_of_placements(&["a", "b"], &[], &["c1", "c2", "c3"], &[])]
    #[case::existing_are_not_recreated(&["a"], &[("c1", true)], &["c2"], &[])]
    #[case::owned_outside_the_union_are_deleted(&["a"], &[("c3", true), ("c1", true)], &["c2"], &["c3"])]
    #[case::hand_made_add_ons_stay(&["a"], &[("c9", false)], &["c1", "c2"], &[])]
    #[case::an_empty_placement_removes_everything_owned(&["empty"], &[("c1", true)], &[], &["c1"])]
    fn placements_install_on_the_union_of_their_decisions(
        #[case] names: &[&str],
        #[case] current: &[(&str, bool)],
        #[case] create: &[&str],
        #[case] delete: &[&str],
    ) {
        let plan = install_plan(&placements(names), decisions, &existing(current));
        assert_eq!(plan.create, set(create));
        assert_eq!(plan.delete, set(delete));
        assert!(plan.missing_placements.is_empty());
    }

    #[test]
    fn a_missing_placement_is_reported_and_contributes_nothing() {
        let plan = install_plan(&placements(&["a", "gone"]), decisions, &existing(&[("c2", true)]));
        assert_eq!(plan.create, set(&["c1"]));
        assert_eq!(plan.missing_placements.len(), 1);
        assert_eq!(plan.missing_placements[0].name, "gone");
    }

    #[test]
    fn manual_installs_nothing_and_deletes_nothing() {
        let strategy = InstallStrategy::default();
        let plan = install_plan(&strategy, decisions, &existing(&[("c1", true)]));
        assert_eq!(plan, InstallPlan::default());
    }

    #[test]
    fn new_add_ons_are_owned_by_the_cma_and_copy_addon_annotations() {
        let annotations: BTreeMap<String, String> = [
            (
                "addon.open-cluster-management.io/hosting-cluster-name".to_owned(),
                "h".to_owned(),
            ),
            ("other.io/x".to_owned(), "y".to_owned()),
        ]
        .into();
        let addon = new_managed_cluster_addon("hello", "uid-9", "c1", Some(&annotations));
        assert_eq!(addon.metadata.namespace.as_deref(), Some("c1"));
        assert_eq!(addon.metadata.name.as_deref(), Some("hello"));
        let kept = addon.metadata.annotations.clone().unwrap();
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            vec!["addon.open-cluster-management.io/hosting-cluster-name"]
        );
        let owners = addon.metadata.owner_references.clone().unwrap();
        assert!(is_controlled_by(&owners, "uid-9"));
        assert_eq!(owners[0].kind, "ClusterManagementAddOn");
        assert!(addon.spec.configs.is_empty());
    }

    #[test]
    fn the_oldest_plugin_drives_a_contested_add_on() {
        let claim = |plugin: &str, addon: &str, created: Option<i64>| PluginClaim {
            plugin: plugin.into(),
            addon: addon.into(),
            created: created.map(|s| Timestamp::from_second(s).unwrap()),
        };
        let drivers = addon_drivers(&[
            claim("new", "hello", Some(20)),
            claim("old", "hello", Some(10)),
            claim("b", "other", Some(5)),
            claim("a", "other", Some(5)),
            claim("unknown-age", "other", None),
            claim("alone", "solo", None),
        ]);
        assert_eq!(drivers["hello"], "old");
        assert_eq!(drivers["other"], "a");
        assert_eq!(drivers["solo"], "alone");
    }

    #[rstest]
    #[case::its_own("hello", "hello-v2", "hello", true)]
    #[case::named_for_itself("", "hello", "hello", true)]
    #[case::another_addons("other", "other", "hello", false)]
    #[case::another_addons_named_like_this_one("other", "hello", "hello", false)]
    #[case::unnamed_and_another_name("", "other", "hello", false)]
    fn only_an_addons_own_template_serves_it(
        #[case] template_addon: &str,
        #[case] template: &str,
        #[case] addon: &str,
        #[case] allowed: bool,
    ) {
        let verdict = template_for_addon(template_addon, template, addon);
        assert_eq!(verdict.is_ok(), allowed, "{verdict:?}");
        if let Err(message) = verdict {
            assert!(message.contains("not hello"), "{message}");
        }
    }
}
