//! The rollout controller: per ClusterManagementAddOn, decides which ManagedClusterAddOns get
//! their desired configs now (`status.configReferences` and `Configured`), following each
//! install placement's rollout strategy through the shared rollout engine, and reports the
//! progress in the CMA's `status.installProgressions` and `defaultconfigReferences`. The deploy
//! controller renders an add-on only with the configs released here, so a config change (and
//! a new add-on under a Progressive strategy) reaches the clusters batch by batch.
//!
//! A new plugin revision is released the same way: an add-on put in the batch also gets the
//! serving revision in its `flotilla.dev/released-plugin-revision` annotation, and the deploy
//! controller re-renders only add-ons released the revision the plugin serves (see
//! `flotilla_core::addon::revision`); the others keep their last works.
//!
//! ```text
//!  ClusterManagementAddOn ─────────────────────────────┐
//!  ManagedClusterAddOn (same name) ────────────────────┤
//!  PlacementDecision, Placement (install strategy) ────┼─▶ reconcile(CMA)
//!  AddOnDeploymentConfig (CMAs supporting the type) ───┤     requeued at the nearest
//!  AddOnTemplate (CMAs supporting the type) ───────────┤     progressDeadline / minSuccessTime
//!  AddOnPlugin (a new revision serves the add-on) ─────┘
//! ```

mod plan;
mod read;
mod reconcile;
mod release;
mod status;

use std::sync::Arc;

use crate::plugins::Plugins;
use flotilla_api::addon::consts::managed_cluster_addon as mca;
use flotilla_api::addon::v1alpha1::{AddOnDeploymentConfig, ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_kube::events::Events;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

use crate::Options;
use crate::configs::ADC_RESOURCE;
use crate::plugins::TEMPLATE_RESOURCE;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    /// Events on the ClusterManagementAddOns: a placement's rollout progressing or completed.
    pub(crate) events: Events,
    /// Every ManagedClusterAddOn (managed fields dropped): a batch is planned from this cache,
    /// not a list of every add-on per reconcile.
    pub(crate) addons: Store<ManagedClusterAddOn>,
    /// The serving plugin revisions (what the deploy controller renders with).
    pub(crate) plugins: Arc<Plugins>,
    /// The add-ons' one writer: what a reconcile reads them through and submits changes to.
    pub(crate) writer: crate::AddonWriter,
    pub(crate) options: Options,
}

/// What the rollout reads of an add-on: its spec and annotations (released and applied
/// revisions), and of its status the config references and the `Configured` and
/// `Progressing` conditions; the other controllers' status writes change none of it.
pub(crate) fn rollout_inputs(addon: &ManagedClusterAddOn) -> Option<u64> {
    let status = addon.status.as_ref();
    crate::hash_of(&(
        &addon.metadata.annotations,
        addon.metadata.deletion_timestamp.is_some(),
        &addon.spec,
        status.map(|s| &s.config_references),
        crate::conditions_of(addon, &[mca::CONDITION_CONFIGURED, mca::CONDITION_PROGRESSING])
            .collect::<Vec<_>>(),
    ))
}

/// Whether `cma`'s install strategy names placement `namespace/name`.
fn names_placement(cma: &ClusterManagementAddOn, namespace: &str, name: &str) -> bool {
    cma.spec
        .install_strategy
        .placements
        .iter()
        .any(|p| p.placement.namespace == namespace && p.placement.name == name)
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
    let (addons, addon_changes) = feeds.addons().subscribe(rollout_inputs);
    let (cmas, cma_changes) = feeds.cmas().subscribe_all();
    let (_, decision_changes) = feeds.decisions().subscribe_all();
    let (_, placement_changes) = feeds.placements().subscribe_all();
    let (_, plugin_changes) = feeds.plugins().subscribe_all();
    let (_, template_changes) = feeds
        .templates()
        .subscribe(|template| flotilla_kube::feed::hash_of(&template.spec));
    let controller = Controller::for_stream(cma_changes, cmas);
    let (by_decision, by_placement, by_config, by_template) = (
        controller.store(),
        controller.store(),
        controller.store(),
        controller.store(),
    );
    let controller = controller
        .watches_stream(addon_changes, |mca| {
            Some(ObjectRef::<ClusterManagementAddOn>::new(&mca.name_any()))
        })
        .watches_stream(decision_changes, move |decision| {
            let namespace = decision.namespace().unwrap_or_default();
            match decision.labels().get(PLACEMENT_LABEL) {
                Some(placement) => crate::select(&by_decision, |c| names_placement(c, &namespace, placement)),
                None => Vec::new(),
            }
        })
        .watches_stream(placement_changes, move |p| {
            let (namespace, name) = (p.namespace().unwrap_or_default(), p.name_any());
            crate::select(&by_placement, |c| names_placement(c, &namespace, &name))
        })
        .watches(
            Api::<AddOnDeploymentConfig>::all(client.clone()),
            watcher::Config::default(),
            move |_| {
                crate::select(&by_config, |c| {
                    c.spec
                        .supported_configs
                        .iter()
                        .any(|s| s.group_resource.resource == ADC_RESOURCE)
                })
            },
        )
        // The plugin's status changes once a new revision serves: roll it out.
        .watches_stream(plugin_changes, |plugin| {
            Some(ObjectRef::<ClusterManagementAddOn>::new(
                &crate::plugin::addon_name(&plugin),
            ))
        })
        // A template's new spec hash is released like any config's: its add-ons re-render.
        .watches_stream(template_changes, move |_| {
            crate::select(&by_template, |c| {
                c.spec
                    .supported_configs
                    .iter()
                    .any(|s| s.group_resource.resource == TEMPLATE_RESOURCE)
            })
        });
    let context = Arc::new(Context {
        client,
        events,
        addons,
        plugins,
        writer,
        options,
    });
    flotilla_kube::controller::run("addon-rollout", controller, reconcile::reconcile, context)
}
