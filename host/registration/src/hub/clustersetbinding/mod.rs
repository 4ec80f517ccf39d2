//! The cluster set binding controller (OCM's managed cluster set binding controller): a
//! binding is `Bound` while the set it names exists.
//!
//! ```text
//!  ManagedClusterSetBinding ─────────────────────────┐
//!  ManagedClusterSet (created / deleted) ─▶ bindings ─┴─▶ reconcile(binding) ─▶ Bound
//!    naming it (from the controller's own store)
//! ```

mod reconcile;

use std::sync::Arc;

use flotilla_api::cluster::v1beta2::{ManagedClusterSet, ManagedClusterSetBinding};
use kube::{
    Api, Client, ResourceExt,
    runtime::{Controller, reflector::ObjectRef, watcher},
};

use super::{Context, HubOptions};

/// Runs the binding controller until dropped.
pub(super) async fn run(client: Client, options: HubOptions) {
    let controller = Controller::new(
        Api::<ManagedClusterSetBinding>::all(client.clone()),
        watcher::Config::default(),
    );
    let bindings = controller.store();
    let controller = controller.watches(
        Api::<ManagedClusterSet>::all(client.clone()),
        watcher::Config::default(),
        move |set| {
            let name = set.name_any();
            bindings
                .state()
                .into_iter()
                .filter(|b| b.spec.cluster_set == name)
                .map(|b| ObjectRef::from_obj(b.as_ref()))
                .collect::<Vec<_>>()
        },
    );
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("clustersetbinding", controller, reconcile::reconcile, context).await;
}
