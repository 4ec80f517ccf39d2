//! What a rollout reads besides the add-ons: each install placement with its decisions (the
//! clusters it selects and how they group into batches), and every config an add-on may use
//! (its spec hash and generation), each looked up once however many add-ons name it. These
//! are reads from the apiserver, not caches: the plan needs them as they are now.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::addon::v1beta1::{AddOnConfig, ConfigGroupResource, ConfigReferent, PlacementStrategy};
use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_core::addon::configs::{ObservedConfig, config_key};
use flotilla_core::addon::rollout::PlacementProblem;
use flotilla_core::rollout::ClusterGroups;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::api::ListParams;

use super::Context;
use crate::configs::{config_object, observed};
use crate::error::{self, Result};

/// What the hub knows about one install placement.
pub(super) struct PlacementState {
    /// The clusters its decisions name.
    pub(super) selected: BTreeSet<String>,
    /// Its decision groups, or why it cannot be rolled out over.
    pub(super) groups: std::result::Result<ClusterGroups, PlacementProblem>,
    /// The Placement's `clustersPerDecisionGroup`.
    pub(super) clusters_per_decision_group: IntOrString,
}

/// Reads the placement of each of `strategies`, in order.
pub(super) async fn placements(
    ctx: &Context,
    strategies: &[PlacementStrategy],
) -> Result<Vec<PlacementState>> {
    let mut states = Vec::with_capacity(strategies.len());
    for strategy in strategies {
        let p = &strategy.placement;
        states.push(placement_state(ctx, &p.namespace, &p.name).await?);
    }
    Ok(states)
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

/// The configs found, as the plan sees them, by [`config_key`].
pub(super) struct ObservedConfigs(BTreeMap<String, ObservedConfig>);

impl ObservedConfigs {
    /// How config `referent` of type `gr` was found, if it was.
    pub(super) fn get(&self, gr: &ConfigGroupResource, referent: &ConfigReferent) -> Option<ObservedConfig> {
        self.0.get(&config_key(gr, referent)).cloned()
    }
}

/// Reads every config any add-on may use, once: the CMA's `defaults`, those of its install
/// `strategies` and those of its `addons`.
pub(super) async fn configs(
    ctx: &Context,
    defaults: &[AddOnConfig],
    strategies: &[PlacementStrategy],
    addons: &[std::sync::Arc<ManagedClusterAddOn>],
) -> Result<ObservedConfigs> {
    let wanted = defaults
        .iter()
        .chain(strategies.iter().flat_map(|s| s.configs.iter()))
        .chain(addons.iter().flat_map(|a| a.spec.configs.iter()));
    let mut observed_configs: BTreeMap<String, ObservedConfig> = BTreeMap::new();
    let mut looked_up: BTreeSet<String> = BTreeSet::new();
    for config in wanted {
        let key = config_key(&config.group_resource, &config.referent);
        if !looked_up.insert(key.clone()) {
            continue;
        }
        if let Some(object) = config_object(&ctx.client, &config.group_resource, &config.referent).await?
            && let Some(o) = observed(&object)
        {
            observed_configs.insert(key, o);
        }
    }
    Ok(ObservedConfigs(observed_configs))
}
