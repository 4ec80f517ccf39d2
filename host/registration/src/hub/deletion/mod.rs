//! The deletion controller (OCM's GC controller with the ResourceCleanup feature): an accepted
//! cluster carries the finalizer `cluster.open-cluster-management.io/resource-cleanup`; when it
//! is deleted, the hub empties its namespace of add-ons and works, in order, before removing
//! the cluster's RBAC and letting it go. The namespace itself is kept, as in OCM.
//!
//! ```text
//!  ManagedCluster ─▶ reconcile ─▶ alive & accepted: add resource-cleanup
//!                              ─▶ deleting: MCAs ─▶ ManifestWorks (by cleanup-priority)
//!                                           ─▶ RBAC ─▶ finalizers off ─▶ gone
//! ```

mod reconcile;

use std::sync::Arc;

use kube::{Client, runtime::Controller};

use super::{Context, HubOptions, feeds::Feeds};

/// Runs the deletion controller until dropped.
pub(super) fn run(
    feeds: &mut Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let (clusters, cluster_changes) = feeds.clusters.subscribe_all();
    let controller = Controller::for_stream(cluster_changes, clusters);
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("deletion", controller, reconcile::reconcile, context)
}
