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

use kube::{
    Client, ResourceExt,
    runtime::{Controller, reflector::ObjectRef},
};

use super::{Context, HubOptions, feeds::Feeds};

/// Runs the binding controller until dropped.
pub(super) fn run(
    feeds: &mut Feeds<'_>,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let (bindings, binding_changes) = feeds.bindings().subscribe_all();
    let (_, set_changes) = feeds.sets().subscribe_all();
    let by_set = bindings.clone();
    let controller =
        Controller::for_stream(binding_changes, bindings).watches_stream(set_changes, move |set| {
            let name = set.name_any();
            by_set
                .state()
                .into_iter()
                .filter(|b| b.spec.cluster_set == name)
                .map(|b| ObjectRef::from_obj(b.as_ref()))
                .collect::<Vec<_>>()
        });
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("clustersetbinding", controller, reconcile::reconcile, context)
}
