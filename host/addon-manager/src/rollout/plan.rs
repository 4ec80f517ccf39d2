//! Planning a batch, purely: the placements and add-ons as read become the inputs of
//! `flotilla_core::addon::rollout::plan_configuration`, which decides which add-ons get their
//! desired configs (and the serving plugin revision) now, what the CMA's install progressions
//! say, and when to look again. Nothing here reads or writes the cluster, so what a reconcile
//! does follows from what it read.

use std::sync::Arc;
use std::time::Duration;

use flotilla_api::addon::v1alpha1::{ClusterManagementAddOnStatus, ManagedClusterAddOn};
use flotilla_api::addon::v1beta1::{AddOnConfig, PlacementStrategy};
use flotilla_core::addon::configs::{config_reference_from_v1alpha1, install_progression_from_v1alpha1};
use flotilla_core::addon::revision::AddonRevisions;
use flotilla_core::addon::rollout::{AddonInput, ConfigurationPlan, PlacementInput, plan_configuration};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::read::{ObservedConfigs, PlacementState};

/// What the plan starts from: the CMA's and its add-ons' state as read.
pub(super) struct Inputs<'a> {
    /// The plugin revision serving the add-on, if an AddOnPlugin serves it.
    pub(super) serving: Option<&'a str>,
    /// The CMA's default configs.
    pub(super) defaults: &'a [AddOnConfig],
    /// Its install strategy's placements.
    pub(super) strategies: &'a [PlacementStrategy],
    /// The state of each of them, in the same order ([`super::read::placements`]).
    pub(super) placements: Vec<PlacementState>,
    /// Its status before this reconcile.
    pub(super) previous: &'a ClusterManagementAddOnStatus,
    /// Its ManagedClusterAddOns not being deleted.
    pub(super) addons: &'a [Arc<ManagedClusterAddOn>],
    /// Every config they may use.
    pub(super) configs: &'a ObservedConfigs,
}

/// The next batch of the rollout, planned at `now`.
pub(super) fn plan(read: Inputs<'_>, now: Timestamp) -> ConfigurationPlan {
    let placements: Vec<PlacementInput<'_>> = read
        .strategies
        .iter()
        .zip(read.placements)
        .map(|(strategy, state)| PlacementInput {
            strategy,
            selected: state.selected,
            groups: state.groups,
            clusters_per_decision_group: state.clusters_per_decision_group,
        })
        .collect();
    let namespaces: Vec<String> = read
        .addons
        .iter()
        .map(|a| a.namespace().unwrap_or_default())
        .collect();
    let inputs: Vec<AddonInput<'_>> = read
        .addons
        .iter()
        .zip(&namespaces)
        .map(|(addon, cluster)| addon_input(addon, cluster))
        .collect();
    let existing_progressions: Vec<_> = read
        .previous
        .install_progressions
        .iter()
        .map(install_progression_from_v1alpha1)
        .collect();
    plan_configuration(
        read.serving,
        read.defaults,
        &placements,
        &existing_progressions,
        &inputs,
        |gr, referent| read.configs.get(gr, referent),
        now,
    )
}

/// Add-on `addon` on `cluster` as the plan sees it.
fn addon_input<'a>(addon: &'a ManagedClusterAddOn, cluster: &'a str) -> AddonInput<'a> {
    let status = addon.status.as_ref();
    AddonInput {
        cluster,
        spec_configs: &addon.spec.configs,
        config_references: status
            .map(|s| {
                s.config_references
                    .iter()
                    .map(config_reference_from_v1alpha1)
                    .collect()
            })
            .unwrap_or_default(),
        conditions: status.map(|s| s.conditions.as_slice()).unwrap_or_default(),
        revisions: AddonRevisions::from_annotations(addon.metadata.annotations.as_ref()),
    }
}

/// How long until the rollout looks again: at the plan's nearest deadline or soak end, and
/// at the latest after `resync`.
pub(super) fn recheck_after(plan: &ConfigurationPlan, resync: Duration) -> Duration {
    plan.recheck_after
        .and_then(|d| Duration::try_from(d).ok())
        .map_or(resync, |d| d.min(resync))
}
