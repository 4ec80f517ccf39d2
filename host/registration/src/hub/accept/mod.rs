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

use flotilla_api::cluster::{
    consts::{CLUSTER_NAME_LABEL, CLUSTER_SET_LABEL, managed_cluster::CONDITION_HUB_ACCEPTED},
    v1::ManagedCluster,
};
use flotilla_core::conditions;
use flotilla_kube::feed::hash_of;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{reflector::ObjectRef, watcher},
};

use super::{Context, HubOptions, feeds::Feeds};

pub(super) use reconcile::{namespace_owner, remove_role_bindings};

/// What of a cluster the accept controller reads; the RBAC it writes is watched for drift.
fn inputs(cluster: &ManagedCluster) -> Option<u64> {
    let conditions = cluster.status.as_ref().and_then(|s| s.conditions.as_deref());
    hash_of(&(
        cluster.metadata.deletion_timestamp.is_some(),
        &cluster.metadata.finalizers,
        cluster.labels().get(CLUSTER_SET_LABEL),
        cluster.spec.hub_accepts_client,
        conditions::find(conditions.unwrap_or_default(), CONDITION_HUB_ACCEPTED),
    ))
}

/// Runs the accept controller until dropped.
pub(super) fn run(
    feeds: &mut Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let labelled = watcher::Config::default().labels(CLUSTER_NAME_LABEL);
    let controller = feeds
        .cluster_controller(inputs)
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
