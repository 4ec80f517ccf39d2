//! The add-on feature controller (OCM's add-on feature discovery): keeps the cluster labels
//! `feature.open-cluster-management.io/addon-<name>` = `available` / `unhealthy` /
//! `unreachable` in step with each ManagedClusterAddOn's `Available` condition, so placements
//! can select clusters by the health of their add-ons.
//!
//! ```text
//!  ManagedCluster ──────────────────────┐
//!  ManagedClusterAddOn (cluster ns) ────┴─▶ reconcile(cluster) ─▶ merge patch of the labels
//!                                            (flotilla_core::addon::health::feature_label_changes)
//! ```
//!
//! Every input is watched, so the resync only repairs missed events.

mod reconcile;

use std::sync::Arc;

use flotilla_api::{addon::v1alpha1::ManagedClusterAddOn, cluster::v1::ManagedCluster};
use kube::{Client, ResourceExt, runtime::reflector::ObjectRef};

use super::{Context, HubOptions, feeds::Feeds};

/// Runs the controller until dropped.
pub(super) fn run(
    feeds: &mut Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let (_, addon_changes) = feeds.addons.subscribe_all();
    let controller = feeds
        .cluster_controller()
        .watches_stream(addon_changes, |addon: ManagedClusterAddOn| {
            Some(ObjectRef::<ManagedCluster>::new(&addon.namespace()?))
        });
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("addon-feature", controller, reconcile::reconcile, context)
}
