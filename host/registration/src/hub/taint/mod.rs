//! The taint controller (OCM's taint controller): keeps the `unreachable` and `unavailable`
//! taints of every ManagedCluster in step with its `ManagedClusterConditionAvailable`, so
//! placements stop selecting clusters the hub cannot see or that report themselves down.
//!
//! ```text
//!  ManagedCluster ─▶ reconcile ─▶ desired taints (flotilla_core::registration::hub::taints)
//!                              ─▶ JSON patch of spec.taints guarded by resourceVersion
//! ```
//!
//! The taints are a function of the object alone, so every change arrives as an event; the
//! resync only repairs missed ones.

mod reconcile;

use std::sync::Arc;

use kube::{Client, runtime::Controller};

use super::{Context, HubOptions, feeds::Feeds};

/// Runs the taint controller until dropped. `client` is the hub's identity, which the
/// hub-only `timeAdded` admission rule exempts.
pub(super) fn run(
    feeds: &mut Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let (clusters, cluster_changes) = feeds.clusters.subscribe_all();
    let controller = Controller::for_stream(cluster_changes, clusters);
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("taint", controller, reconcile::reconcile, context)
}
