//! The accept controller (OCM's managed cluster controller): turns the admin's
//! `spec.hubAcceptsClient` into a cluster namespace, the cluster's RBAC and its lease, and
//! takes write access away again when acceptance is withdrawn.
//!
//! ```text
//!  ManagedCluster ─────────────────────────────┐
//!  ClusterRole / ClusterRoleBinding / RoleBinding├─▶ reconcile(cluster) ─▶ see reconcile.rs
//!    labelled open-cluster-management.io/       │    (RBAC events map to the cluster named
//!    cluster-name=<c> (someone changed ours)  ──┘     by the label, so drift is repaired)
//! ```

mod reconcile;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use flotilla_api::cluster::{consts::CLUSTER_NAME_LABEL, v1::ManagedCluster};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{reflector::ObjectRef, watcher},
};

use super::{Context, HubOptions, feeds::Feeds};

pub(super) use reconcile::{namespace_owner, remove_role_bindings};

/// Runs the accept controller until dropped.
pub(super) fn run(
    feeds: &mut Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let labelled = watcher::Config::default().labels(CLUSTER_NAME_LABEL);
    let controller = feeds
        .cluster_controller()
        .watches(
            Api::<ClusterRole>::all(client.clone()),
            labelled.clone(),
            cluster_of,
        )
        .watches(
            Api::<ClusterRoleBinding>::all(client.clone()),
            labelled.clone(),
            cluster_of,
        )
        .watches(Api::<RoleBinding>::all(client.clone()), labelled, cluster_of);
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("accept", controller, reconcile::reconcile, context)
}

/// The cluster an RBAC object belongs to, from its cluster-name label (the hub-wide roles
/// carry an empty value and belong to none).
pub(super) fn cluster_of<K: Resource>(object: K) -> Option<ObjectRef<ManagedCluster>> {
    object
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .filter(|cluster| !cluster.is_empty())
        .map(|cluster| ObjectRef::new(cluster))
}
