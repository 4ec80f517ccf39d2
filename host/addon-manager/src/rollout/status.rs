//! The CMA's status, once the add-ons' changes are written: `defaultconfigReferences` and one
//! `installProgressions` entry per install placement, computed purely from the plan and
//! patched once if it changed, with each placement's `Progressing` changes as Events.

use flotilla_api::addon::consts::cluster_management_addon as cma;
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ClusterManagementAddOnStatus};
use flotilla_api::addon::v1beta1::AddOnConfig;
use flotilla_core::addon::configs::{default_config_references, install_progression_to_v1alpha1};
use flotilla_core::addon::rollout::ConfigurationPlan;
use flotilla_kube::events::{self, ConditionEvent};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;

use super::Context;
use super::read::ObservedConfigs;
use crate::error::Result;

/// A placement's rollout of the add-on's configs, reported as Events on the
/// ClusterManagementAddOn with OCM's reasons: `Progressing`, then `Completed` once every
/// configured add-on applied them; a placement that cannot roll out (`PlacementNotFound`,
/// `RolloutStrategyInvalid`) is a Warning.
const ROLLOUT_EVENTS: &[ConditionEvent] = &[ConditionEvent {
    type_: cma::CONDITION_PROGRESSING,
    action: "RollOut",
    warning: cannot_roll_out,
}];

/// `Progressing` False for another reason than completion.
fn cannot_roll_out(condition: &Condition) -> bool {
    events::when_false(condition) && condition.reason != cma::REASON_COMPLETED
}

/// The CMA's status after `plan`: its `defaults` with the `configs` found, over the
/// `previous` status.
pub(super) fn desired(
    defaults: &[AddOnConfig],
    configs: &ObservedConfigs,
    previous: &ClusterManagementAddOnStatus,
    plan: &ConfigurationPlan,
) -> ClusterManagementAddOnStatus {
    ClusterManagementAddOnStatus {
        default_config_references: default_config_references(
            defaults,
            &previous.default_config_references,
            |gr, referent| configs.get(gr, referent),
        ),
        install_progressions: plan
            .progressions
            .iter()
            .map(install_progression_to_v1alpha1)
            .collect(),
    }
}

/// Patches the CMA's status from `previous` to `desired` if it changed, and reports each
/// placement's `Progressing` changes as Events.
pub(super) async fn patch(
    ctx: &Context,
    cma: &ClusterManagementAddOn,
    previous: &ClusterManagementAddOnStatus,
    desired: &ClusterManagementAddOnStatus,
) -> Result<()> {
    if desired == previous {
        return Ok(());
    }
    let api: Api<ClusterManagementAddOn> = Api::all(ctx.client.clone());
    flotilla_kube::status::patch_if_changed(&api, cma, Some(previous), desired).await?;
    for progression in &desired.install_progressions {
        let placement = &progression.placement;
        let before = previous
            .install_progressions
            .iter()
            .find(|p| p.placement == *placement)
            .map(|p| p.conditions.as_slice())
            .unwrap_or_default();
        let part = format!("placement {}/{}", placement.namespace, placement.name);
        ctx.events
            .conditions_of(cma, Some(&part), before, &progression.conditions, ROLLOUT_EVENTS)
            .await;
    }
    Ok(())
}
