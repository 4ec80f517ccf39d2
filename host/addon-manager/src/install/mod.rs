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
use kube::runtime::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    /// The metadata of every ManagedCluster: a new add-on copies its cluster's annotations.
    pub(crate) clusters: Store<ManagedCluster>,
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

/// Subscribes the controller to the feeds; the returned future runs it until dropped.
pub(crate) fn run(
    feeds: &mut crate::feeds::Feeds<'_>,
    client: Client,
    options: Options,
) -> impl Future<Output = ()> + use<> {
    // Only whether an add-on exists, and its owners, count here: metadata, and only its
    // changes, not the new resourceVersion of every status write.
    let (addons, addon_changes) = feeds.addons().subscribe(install_inputs);
    let (cmas, cma_changes) = feeds.cmas().subscribe_all();
    let (_, decision_changes) = feeds.decisions().subscribe_all();
    let (_, placement_changes) = feeds.placements().subscribe_all();
    // A cluster alone changes no install plan: its cache is read, its changes are not watched.
    let clusters = feeds.clusters().store();
    let controller = Controller::for_stream(cma_changes, cmas);
    let by_decision = controller.store();
    let by_placement = controller.store();
    let controller = controller
        .watches_stream(addon_changes, |mca| {
            Some(ObjectRef::<ClusterManagementAddOn>::new(&mca.name_any()))
        })
        .watches_stream(decision_changes, move |decision| {
            match decision.labels().get(PLACEMENT_LABEL) {
                Some(placement) => {
                    referring(&by_decision, &decision.namespace().unwrap_or_default(), placement)
                }
                None => Vec::new(),
            }
        })
        .watches_stream(placement_changes, move |p| {
            referring(&by_placement, &p.namespace().unwrap_or_default(), &p.name_any())
        });
    let context = Arc::new(Context {
        client,
        clusters,
        addons,
        options,
    });
    flotilla_kube::controller::run("addon-install", controller, reconcile::reconcile, context)
}
