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

use flotilla_api::cluster::v1::ManagedCluster;
use kube::{Api, Client, runtime::watcher};

use super::{Context, HubOptions};

/// Runs the taint controller until dropped. `client` is the hub's identity, which the
/// hub-only `timeAdded` admission rule exempts.
pub(super) async fn run(client: Client, options: HubOptions) {
    let controller = flotilla_kube::controller::slimmed(
        Api::<ManagedCluster>::all(client.clone()),
        watcher::Config::default(),
        flotilla_core::registration::hub::cached::for_registration,
    );
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("taint", controller, reconcile::reconcile, context).await;
}
