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
//! event that reconciles at once. The leases are read from this controller's watch of them;
//! only a lease the cache shows expired on a cluster not yet Unknown is read from the
//! apiserver before the cluster is marked (see `reconcile`).

mod reconcile;

use std::sync::{Arc, Mutex};

use flotilla_api::addon::consts::managed_cluster_addon::CONDITION_AVAILABLE as ADDON_AVAILABLE;
use flotilla_api::{addon::v1alpha1::ManagedClusterAddOn, cluster::v1::ManagedCluster};
use flotilla_core::{conditions, registration::hub::lease};
use flotilla_kube::feed::{Namespaces, hash_of};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        WatchStreamExt as _,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};

use super::{Context, HubOptions, feeds::Feeds};
use crate::names;

/// What the lease controller reads besides the cluster.
pub(super) struct Leases {
    context: Context,
    /// Every `managed-cluster-lease`, as [`lease::slim`] leaves it.
    leases: Store<Lease>,
    /// The add-ons of each cluster.
    addons: Namespaces<ManagedClusterAddOn>,
    /// Since when the controller has read its apiserver without a break.
    sight: Mutex<lease::Sight>,
}

/// What of a cluster the lease controller reads.
fn cluster_inputs(cluster: &ManagedCluster) -> Option<u64> {
    hash_of(&(
        cluster.metadata.deletion_timestamp.is_some(),
        cluster.spec.lease_duration_seconds,
        cluster.status.as_ref().map(|s| &s.conditions),
    ))
}

/// What of an add-on the lease controller reads: its Available condition.
fn addon_inputs(addon: &ManagedClusterAddOn) -> Option<u64> {
    let conditions = addon.status.as_ref().map_or(&[][..], |s| &s.conditions);
    hash_of(&conditions::find(conditions, ADDON_AVAILABLE))
}

/// Runs the lease controller until dropped.
pub(super) fn run(
    feeds: &mut Feeds<'_>,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let config = watcher::Config::default().fields(&format!("metadata.name={}", names::CLUSTER_LEASE));
    let (leases, writer) = reflector::store();
    let lease_changes = watcher(Api::<Lease>::all(client.clone()), config)
        .default_backoff()
        .modify(lease::slim)
        .reflect(writer)
        .touched_objects();
    let addons = feeds.addons().namespaces();
    let (_, addon_changes) = feeds.addons().subscribe(addon_inputs);
    let controller = feeds
        .cluster_controller(cluster_inputs)
        .watches_stream(lease_changes, cluster_of_namespace)
        .watches_stream(addon_changes, cluster_of_namespace::<ManagedClusterAddOn>);
    let context = Arc::new(Leases {
        context: Context::new(client, options),
        leases,
        addons,
        sight: Mutex::new(lease::Sight::new(k8s_openapi::jiff::Timestamp::now())),
    });
    flotilla_kube::controller::run("lease", controller, reconcile::reconcile, context)
}

/// The cluster whose namespace holds `object`.
fn cluster_of_namespace<K: Resource>(object: K) -> Option<ObjectRef<ManagedCluster>> {
    object.namespace().map(|namespace| ObjectRef::new(&namespace))
}
