//! One reconcile of a ClusterManagementAddOn's config rollout:
//!
//! ```text
//!  deleting, or lifecycle not ours ─▶ nothing
//!  read: the add-on's ManagedClusterAddOns (cache), each install placement (missing? decisions,
//!        groups, clustersPerDecisionGroup), every config they may use (hash, generation)
//!  plan purely (flotilla_core::addon::rollout::plan_configuration), the serving plugin
//!        revision its AddOnPlugin serves
//!  per add-on: configReferences (when released) + Configured, and the released plugin
//!              revision annotation when the batch releases it ─▶ submitted to the writer
//!  CMA: defaultconfigReferences + installProgressions ─▶ one status patch if changed, once
//!       the add-ons' changes are written
//!  requeue at the nearest progressDeadline / minSuccessTime end
//! ```
//!
//! The add-ons are read as written, with this controller's own changes submitted and not
//! written yet, so a batch is planned on its own last steps and a rollout never has more
//! add-ons in flight than its strategy allows because of a stale read. Other controllers'
//! changes count once written, so they only make an add-on look in flight a little longer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flotilla_api::addon::consts::cluster_management_addon as cma;
use flotilla_api::addon::v1alpha1::{
    ClusterManagementAddOn, ClusterManagementAddOnStatus, ManagedClusterAddOn,
};
use flotilla_api::addon::v1beta1::{AddOnConfig, InstallStrategyType};
use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_core::addon::configs::{
    ObservedConfig, config_key, config_reference_from_v1alpha1, config_reference_to_v1alpha1,
    default_config_references, default_configs_v1alpha1, install_progression_from_v1alpha1,
    install_progression_to_v1alpha1,
};
use flotilla_core::addon::install::is_managed_by_addon_manager;
use flotilla_core::addon::revision::{AddonRevisions, RELEASED_REVISION_ANNOTATION};
use flotilla_core::addon::rollout::{AddonInput, PlacementInput, PlacementProblem, plan_configuration};
use flotilla_core::conditions;
use flotilla_core::rollout::ClusterGroups;
use flotilla_kube::events::{self, ConditionEvent};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::Context;
use crate::configs::{config_object, observed};
use crate::error::{self, Result};

/// How long the CMA's status waits for the add-ons' changes to be written: it never says a
/// step was taken before the step is written, and a write still failing by then is retried
/// by the writer while the rollout looks again.
const ADDONS_WRITTEN_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// What the hub knows about one install placement.
struct PlacementState {
    selected: BTreeSet<String>,
    groups: std::result::Result<ClusterGroups, PlacementProblem>,
    clusters_per_decision_group: IntOrString,
}

/// Reads placement `namespace/name` and its decisions.
async fn placement_state(ctx: &Context, namespace: &str, name: &str) -> Result<PlacementState> {
    let placement = Api::<Placement>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(error::read(format!("Placement {namespace}/{name}")))?;
    let Some(placement) = placement else {
        return Ok(PlacementState {
            selected: BTreeSet::new(),
            groups: Err(PlacementProblem::NotFound),
            clusters_per_decision_group: IntOrString::Int(0),
        });
    };
    let decisions = Api::<PlacementDecision>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={name}")))
        .await
        .map_err(error::read(format!("PlacementDecisions of {namespace}/{name}")))?
        .items;
    let selected = decisions
        .iter()
        .filter_map(|d| d.status.as_ref())
        .flat_map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()))
        .filter(|c| !c.is_empty())
        .collect();
    let groups =
        ClusterGroups::from_decisions(&decisions).map_err(|e| PlacementProblem::Invalid(e.to_string()));
    Ok(PlacementState {
        selected,
        groups,
        clusters_per_decision_group: placement
            .spec
            .decision_strategy
            .group_strategy
            .clusters_per_decision_group,
    })
}

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

/// Releases configs to the add-ons of `cma` as its rollout strategies allow.
pub(crate) async fn reconcile(cma: Arc<ClusterManagementAddOn>, ctx: Arc<Context>) -> Result<Action> {
    if cma.meta().deletion_timestamp.is_some()
        || !is_managed_by_addon_manager(cma.metadata.annotations.as_ref())
    {
        return Ok(Action::await_change());
    }
    let name = cma.name_any();
    let client = &ctx.client;
    // A batch is planned on the add-ons as written, with this controller's own last steps
    // whether written or not: another controller's step (an add-on done) counts once it is
    // written, so no observer ever sees more add-ons in flight than the strategy allows.
    if !flotilla_kube::controller::cache_ready(&ctx.addons) {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    let addons: Vec<Arc<ManagedClusterAddOn>> = ctx
        .addons
        .state()
        .into_iter()
        .filter(|a| a.name_any() == name)
        .map(|a| ctx.writer.view_of(crate::Writer::Rollout, a))
        .filter(|a| a.meta().deletion_timestamp.is_none())
        .collect();

    // Placements count only for the Placements install strategy, as in OCM.
    let strategies = match cma.spec.install_strategy.type_ {
        InstallStrategyType::Placements => cma.spec.install_strategy.placements.as_slice(),
        _ => &[],
    };
    let mut states = Vec::with_capacity(strategies.len());
    for strategy in strategies {
        let p = &strategy.placement;
        states.push(placement_state(&ctx, &p.namespace, &p.name).await?);
    }

    // Every config any add-on may use, read once.
    let defaults = default_configs_v1alpha1(&cma.spec);
    let wanted: Vec<&AddOnConfig> = defaults
        .iter()
        .chain(strategies.iter().flat_map(|s| s.configs.iter()))
        .chain(addons.iter().flat_map(|a| a.spec.configs.iter()))
        .collect();
    let mut observed_configs: BTreeMap<String, ObservedConfig> = BTreeMap::new();
    let mut looked_up: BTreeSet<String> = BTreeSet::new();
    for config in wanted {
        let key = config_key(&config.group_resource, &config.referent);
        if !looked_up.insert(key.clone()) {
            continue;
        }
        if let Some(object) = config_object(client, &config.group_resource, &config.referent).await?
            && let Some(o) = observed(&object)
        {
            observed_configs.insert(key, o);
        }
    }
    let observe = |gr: &_, referent: &_| observed_configs.get(&config_key(gr, referent)).cloned();

    let now = Timestamp::now();
    let placements: Vec<PlacementInput<'_>> = strategies
        .iter()
        .zip(states)
        .map(|(strategy, state)| PlacementInput {
            strategy,
            selected: state.selected,
            groups: state.groups,
            clusters_per_decision_group: state.clusters_per_decision_group,
        })
        .collect();
    let namespaces: Vec<String> = addons.iter().map(|a| a.namespace().unwrap_or_default()).collect();
    let inputs: Vec<AddonInput<'_>> = addons
        .iter()
        .zip(&namespaces)
        .map(|(addon, cluster)| {
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
        })
        .collect();
    let previous = cma.status.clone().unwrap_or_default();
    let existing_progressions: Vec<_> = previous
        .install_progressions
        .iter()
        .map(install_progression_from_v1alpha1)
        .collect();
    let serving = ctx.plugins.loaded(&name).map(|p| p.digest().to_string());
    let plan = plan_configuration(
        serving.as_deref(),
        &defaults,
        &placements,
        &existing_progressions,
        &inputs,
        observe,
        now,
    );

    // Add-ons first: a CMA status that shows a step was taken never precedes the step.
    let mut submitted = Vec::new();
    for (addon, cluster) in addons.iter().zip(&namespaces) {
        let Some(update) = plan.addons.get(cluster) else {
            continue;
        };
        let current = addon.status.clone().unwrap_or_default();
        let mut desired = current.clone();
        if let Some(references) = &update.references {
            desired.config_references = references.iter().map(config_reference_to_v1alpha1).collect();
        }
        if let Some(condition) = update.configured.clone() {
            conditions::set(&mut desired.conditions, condition, now);
        }
        let revision = plan.revisions.get(cluster);
        let released: Vec<(&str, &str)> = revision
            .map(|r| (RELEASED_REVISION_ANNOTATION, r.as_str()))
            .into_iter()
            .collect();
        let api: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), cluster);
        if ctx
            .writer
            .submit(crate::Writer::Rollout, &api, addon, &desired, &released)?
        {
            if desired.config_references != current.config_references {
                tracing::info!(addon = %name, %cluster, "configs released");
            }
            if let Some(revision) = revision {
                tracing::info!(addon = %name, %cluster, %revision, "plugin revision released");
            }
            submitted.push(ObjectRef::from_obj(addon.as_ref()));
        }
    }
    for addon in &addons {
        ctx.writer
            .heard(crate::Writer::Rollout, &ObjectRef::from_obj(addon.as_ref()));
    }
    if !ctx.writer.flushed(&submitted, ADDONS_WRITTEN_WITHIN).await {
        tracing::debug!(addon = %name, submitted = submitted.len(), "add-on changes not written yet; looking again");
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }

    let desired = ClusterManagementAddOnStatus {
        default_config_references: default_config_references(
            &defaults,
            &previous.default_config_references,
            observe,
        ),
        install_progressions: plan
            .progressions
            .iter()
            .map(install_progression_to_v1alpha1)
            .collect(),
    };
    if desired != previous {
        let api: Api<ClusterManagementAddOn> = Api::all(client.clone());
        flotilla_kube::status::patch_if_changed(&api, cma.as_ref(), Some(&previous), &desired).await?;
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
                .conditions_of(
                    cma.as_ref(),
                    Some(&part),
                    before,
                    &progression.conditions,
                    ROLLOUT_EVENTS,
                )
                .await;
        }
    }
    let resync = ctx.options.resync;
    let after = plan
        .recheck_after
        .and_then(|d| std::time::Duration::try_from(d).ok())
        .map_or(resync, |d| d.min(resync));
    Ok(Action::requeue(after))
}
