//! The install controller: a ClusterManagementAddOn with install strategy `Placements` has a
//! ManagedClusterAddOn on every cluster of the union of its placements' decisions, with the CMA
//! as controller owner, removed when the cluster leaves the decisions. `Manual` creates nothing.
//!
//! ```text
//!  ClusterManagementAddOn ────────────────────┐
//!  ManagedClusterAddOn (same name) ───────────┤
//!  PlacementDecision (placement label) ───────┼─▶ reconcile(CMA)
//!  Placement ─────────────────────────────────┘     (CMAs whose install strategy names it)
//! ```

mod reconcile;

use std::sync::Arc;

use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    /// The metadata of every ManagedCluster: a new add-on copies its cluster's annotations.
    pub(crate) clusters: Store<PartialObjectMeta<ManagedCluster>>,
    /// Every ManagedClusterAddOn (the shared cache): which clusters have the add-on, and its owners.
    pub(crate) addons: Store<ManagedClusterAddOn>,
    pub(crate) options: Options,
}

/// What the install plan reads of an add-on: its owners and whether it is being deleted.
pub(crate) fn install_inputs(addon: &ManagedClusterAddOn) -> Option<u64> {
    crate::hash_of(&(
        &addon.metadata.owner_references,
        addon.metadata.deletion_timestamp.is_some(),
    ))
}

/// The CMAs whose install strategy names placement `namespace/name`.
fn referring(
    store: &Store<ClusterManagementAddOn>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<ClusterManagementAddOn>> {
    store
        .state()
        .iter()
        .filter(|cma| {
            cma.spec
                .install_strategy
                .placements
                .iter()
                .any(|p| p.placement.namespace == namespace && p.placement.name == name)
        })
        .map(|cma| ObjectRef::from_obj(cma.as_ref()))
        .collect()
}

/// Runs the controller until dropped.
pub(crate) async fn run(client: Client, (addons, addon_changes): crate::AddonView, options: Options) {
    let controller = Controller::new(
        Api::<ClusterManagementAddOn>::all(client.clone()),
        watcher::Config::default(),
    );
    let by_decision = controller.store();
    let by_placement = controller.store();
    let (clusters, cluster_writer) = reflector::store();
    let cluster_stream = reflector(
        cluster_writer,
        watcher(
            Api::<PartialObjectMeta<ManagedCluster>>::all(client.clone()),
            watcher::Config::default(),
        )
        .modify(|c| c.managed_fields_mut().clear()),
    )
    .touched_objects();
    let controller = controller
        // Drives the cluster cache; a cluster alone changes no install plan.
        .watches_stream(cluster_stream, |_| None::<ObjectRef<ClusterManagementAddOn>>)
        // Only whether an add-on exists, and its owners, count here: metadata, and only its
        // changes, not the new resourceVersion of every status write.
        .watches_stream(addon_changes, |mca| {
            Some(ObjectRef::<ClusterManagementAddOn>::new(&mca.name_any()))
        })
        .watches(
            Api::<PlacementDecision>::all(client.clone()),
            watcher::Config::default().labels(PLACEMENT_LABEL),
            move |decision| match decision.labels().get(PLACEMENT_LABEL) {
                Some(placement) => {
                    referring(&by_decision, &decision.namespace().unwrap_or_default(), placement)
                }
                None => Vec::new(),
            },
        )
        .watches(
            Api::<Placement>::all(client.clone()),
            watcher::Config::default(),
            move |p| referring(&by_placement, &p.namespace().unwrap_or_default(), &p.name_any()),
        );
    let context = Arc::new(Context {
        client,
        clusters,
        addons,
        options,
    });
    flotilla_kube::controller::run("addon-install", controller, reconcile::reconcile, context).await;
}
