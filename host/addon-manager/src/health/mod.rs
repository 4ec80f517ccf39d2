//! The health controller: for each ManagedClusterAddOn whose plugin probes health on the hub,
//! `status.healthCheck.mode` from the plugin's `describe` and the `Available` condition from
//! the deploy works' status feedback, as addon-framework's health check does.
//!
//! ```text
//!  ManagedClusterAddOn ─────────────────────────────┐
//!  ManifestWork (addon-name label) ─────────────────┤
//!  ClusterManagementAddOn, AddOnPlugin (same name) ─┼─▶ reconcile(add-on) ─▶ healthCheck.mode,
//!  ManagedCluster (cluster namespace) ──────────────┘                       Available
//! ```
//!
//! The decisions are `flotilla_core::addon::health` (`assess`, `workload_check`,
//! `probe_condition`); a `customized` prober's verdict comes from the plugin's `probe-health`,
//! where any fault or timeout is Unknown naming the fault, never Available. Lease-mode add-ons
//! only get their mode written: the klusterlet judges their leases.

mod reconcile;

use std::sync::Arc;

use crate::plugins::Plugins;
use flotilla_api::addon::consts::{ADDON_NAME_LABEL, managed_cluster_addon as mca};
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::work::v1::{
    FeedBackType, FeedbackRule, JsonPath, ManifestConfigOption, ManifestWork, ResourceIdentifier,
};
use flotilla_core::addon::health::Prober;
use flotilla_core::addon::works::ProbeFeedback;
use flotilla_kube::events::Events;
use flotilla_wasm::types::{self, HealthMode};
use kube::runtime::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    /// Events on the add-ons: a change of availability.
    pub(crate) events: Events,
    /// ManagedClusters with their conditions (the feed's cache).
    pub(crate) clusters: Store<ManagedCluster>,
    /// ClusterManagementAddOns.
    pub(crate) cmas: Store<ClusterManagementAddOn>,
    /// Add-on works (the feed's cache).
    pub(crate) works: flotilla_kube::feed::Namespaces<ManifestWork>,
    pub(crate) plugins: Arc<Plugins>,
    /// The add-ons' one writer: what a reconcile reads them through and submits changes to.
    pub(crate) writer: crate::AddonWriter,
    pub(crate) options: Options,
}

/// The host's prober for a plugin's health mode.
pub(crate) fn prober(mode: &HealthMode) -> Prober {
    match mode {
        HealthMode::Lease => Prober::Lease,
        HealthMode::Work => Prober::Work,
        HealthMode::DeploymentAvailability => Prober::DeploymentAvailability,
        HealthMode::WorkloadAvailability => Prober::WorkloadAvailability,
        HealthMode::Customized(fields) => {
            Prober::Fields(fields.iter().map(|f| identifier(&f.resource)).collect())
        }
        HealthMode::None => Prober::None,
    }
}

fn identifier(resource: &types::ResourceIdentifier) -> ResourceIdentifier {
    ResourceIdentifier {
        group: resource.group.clone(),
        resource: resource.resource.clone(),
        name: resource.name.clone(),
        namespace: resource.namespace.clone(),
    }
}

/// The feedback rules a `customized` prober asks of the work agent (OCM `ProbeFields`).
pub(crate) fn probe_configs(mode: &HealthMode) -> Vec<ManifestConfigOption> {
    let HealthMode::Customized(fields) = mode else {
        return Vec::new();
    };
    fields
        .iter()
        .map(|field| ManifestConfigOption {
            resource_identifier: identifier(&field.resource),
            feedback_rules: field
                .rules
                .iter()
                .map(|rule| match rule {
                    types::FeedbackRule::WellKnownStatus => FeedbackRule {
                        type_: FeedBackType::WellKnownStatus,
                        json_paths: Vec::new(),
                    },
                    types::FeedbackRule::JsonPaths(paths) => FeedbackRule {
                        type_: FeedBackType::JSONPaths,
                        json_paths: paths
                            .iter()
                            .map(|p| JsonPath {
                                name: p.name.clone(),
                                version: String::new(),
                                path: p.path.clone(),
                            })
                            .collect(),
                    },
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}

/// Which feedback the deploy works carry for a health mode; `configs` are
/// [`probe_configs`] of the same mode.
pub(crate) fn probe_feedback<'a>(
    mode: &HealthMode,
    configs: &'a [ManifestConfigOption],
) -> ProbeFeedback<'a> {
    match mode {
        HealthMode::Customized(_) => ProbeFeedback::Fields(configs),
        HealthMode::DeploymentAvailability => ProbeFeedback::DeploymentAvailability,
        HealthMode::WorkloadAvailability => ProbeFeedback::WorkloadAvailability,
        HealthMode::Lease | HealthMode::Work | HealthMode::None => ProbeFeedback::None,
    }
}

/// What of an add-on the health check reads or owns: its spec and metadata, its install
/// namespace and released configs, whether `ManifestApplied` exists yet, and its own health
/// check and `Available`.
pub(crate) fn health_inputs(addon: &ManagedClusterAddOn) -> Option<u64> {
    let status = addon.status.as_ref();
    crate::hash_of(&(
        addon.metadata.generation,
        addon.metadata.deletion_timestamp.is_some(),
        &addon.metadata.annotations,
        // A template add-on's plugin follows the template released in configReferences.
        status.map(|s| (&s.namespace, &s.health_check, &s.config_references)),
        crate::conditions_of(addon, &[mca::CONDITION_MANIFEST_APPLIED]).count(),
        crate::conditions_of(addon, &[mca::CONDITION_AVAILABLE]).collect::<Vec<_>>(),
    ))
}

/// What the health check reads of a work: its status (conditions, and the agent's feedback
/// per manifest) and labels; the assessment reads of its spec only what the status reflects.
fn health_work_inputs(work: &ManifestWork) -> Option<u64> {
    crate::hash_of(&(
        &work.metadata.labels,
        work.metadata.deletion_timestamp.is_some(),
        &work.status,
    ))
}

/// Subscribes the controller to the feeds; the returned future runs it until dropped.
pub(crate) fn run(
    feeds: &mut crate::feeds::Feeds<'_>,
    client: Client,
    plugins: Arc<Plugins>,
    writer: crate::AddonWriter,
    events: Events,
    options: Options,
) -> impl Future<Output = ()> + use<> {
    let (addons, addon_changes) = feeds.addons().subscribe(health_inputs);
    // The clusters, CMAs and works a reconcile reads come from the feeds, not a GET or LIST.
    let (clusters, cluster_changes) = feeds.clusters().subscribe(crate::feeds::cluster_with_conditions);
    let (cmas, cma_changes) = feeds.cmas().subscribe(crate::feeds::cma_annotations);
    let (_, work_changes) = feeds.works().subscribe(health_work_inputs);
    let (_, plugin_changes) = feeds.plugins().subscribe_all();
    let controller =
        Controller::for_stream(addon_changes, addons).with_config(crate::per_addon_config(&options));
    let (by_plugin, by_cluster, by_cma) = (controller.store(), feeds.addons_by_cluster(), controller.store());
    let controller = controller
        .watches_stream(work_changes, |work| {
            let addon = work.labels().get(ADDON_NAME_LABEL)?;
            Some(ObjectRef::new(addon).within(&work.namespace()?))
        })
        .watches_stream(plugin_changes, move |plugin| {
            crate::addons_named(&by_plugin, &crate::plugin::addon_name(&plugin))
        })
        .watches_stream(cluster_changes, move |cluster| {
            crate::addons_of_cluster(&by_cluster, &cluster.name_any())
        })
        .watches_stream(cma_changes, move |cma| {
            crate::addons_named(&by_cma, &cma.name_any())
        });
    let context = Arc::new(Context {
        client,
        events,
        clusters,
        cmas,
        works: feeds.works_by_cluster(),
        plugins,
        writer,
        options,
    });
    flotilla_kube::controller::run("addon-health", controller, reconcile::reconcile, context)
}
