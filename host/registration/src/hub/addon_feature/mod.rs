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
use flotilla_kube::feed::{Namespaces, hash_of};
use kube::{Client, ResourceExt, runtime::reflector::ObjectRef};

use super::{Context, HubOptions, feeds::Feeds};

/// What one reconcile needs: the hub's context, and each cluster's add-ons from the shared
/// feed (a LIST per reconcile was one per add-on status write).
pub(super) struct Features {
    context: Context,
    addons: Namespaces<ManagedClusterAddOn>,
}

/// What the feature labels read of an add-on: whether it is being deleted, and its
/// conditions (its name is its key).
fn feature_inputs(addon: &ManagedClusterAddOn) -> Option<u64> {
    hash_of(&(
        addon.metadata.deletion_timestamp.is_some(),
        addon.status.as_ref().map(|s| &s.conditions),
    ))
}

/// What of a cluster the controller reads: its labels and conditions.
fn cluster_inputs(cluster: &ManagedCluster) -> Option<u64> {
    hash_of(&(
        cluster.metadata.deletion_timestamp.is_some(),
        &cluster.metadata.labels,
        cluster.status.as_ref().map(|s| &s.conditions),
    ))
}

/// Runs the controller until dropped.
pub(super) fn run(
    feeds: &mut Feeds<'_>,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let addons = feeds.addons().namespaces();
    let (_, addon_changes) = feeds.addons().subscribe(feature_inputs);
    let controller = feeds
        .cluster_controller(cluster_inputs)
        .watches_stream(addon_changes, |addon: ManagedClusterAddOn| {
            Some(ObjectRef::<ManagedCluster>::new(&addon.namespace()?))
        });
    let features = Arc::new(Features {
        context: Context::new(client, options),
        addons,
    });
    flotilla_kube::controller::run("addon-feature", controller, reconcile::reconcile, features)
}
