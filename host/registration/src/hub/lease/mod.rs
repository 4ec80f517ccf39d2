//! The lease controller (OCM's cluster lease controller and the cluster half of its add-on
//! health check): a cluster whose agent stopped renewing `managed-cluster-lease` becomes
//! Available Unknown, and so do its add-ons.
//!
//! ```text
//!  ManagedCluster ───────────────────────────┐
//!  Lease managed-cluster-lease (ns = cluster) ├─▶ reconcile(cluster) ─▶ Available Unknown
//!  ManagedClusterAddOn (ns = cluster) ───────┘     requeue at the expiry   MCA Available Unknown
//! ```
//!
//! A fresh lease is looked at again exactly when it would expire, not polled; a renewal is an
//! event that reconciles at once.

mod reconcile;

use std::sync::Arc;

use flotilla_api::{addon::v1alpha1::ManagedClusterAddOn, cluster::v1::ManagedCluster};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{reflector::ObjectRef, watcher},
};

use super::{Context, HubOptions, feeds::Feeds};
use crate::names;

/// Runs the lease controller until dropped.
pub(super) fn run(
    feeds: &mut Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let leases = watcher::Config::default().fields(&format!("metadata.name={}", names::CLUSTER_LEASE));
    let (_, addon_changes) = feeds.addons.subscribe_all();
    let controller = feeds
        .cluster_controller()
        .watches(Api::<Lease>::all(client.clone()), leases, cluster_of_namespace)
        .watches_stream(addon_changes, cluster_of_namespace::<ManagedClusterAddOn>);
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("lease", controller, reconcile::reconcile, context)
}

/// The cluster whose namespace holds `object`.
fn cluster_of_namespace<K: Resource>(object: K) -> Option<ObjectRef<ManagedCluster>> {
    object.namespace().map(|namespace| ObjectRef::new(&namespace))
}
