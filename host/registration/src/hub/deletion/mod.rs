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

use flotilla_api::cluster::v1::ManagedCluster;
use kube::{Api, Client, runtime::watcher};

use super::{Context, HubOptions};

/// Runs the deletion controller until dropped.
pub(super) async fn run(client: Client, options: HubOptions) {
    let controller = flotilla_kube::controller::slimmed(
        Api::<ManagedCluster>::all(client.clone()),
        watcher::Config::default(),
        flotilla_core::registration::hub::cached::for_registration,
    );
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("deletion", controller, reconcile::reconcile, context).await;
}
