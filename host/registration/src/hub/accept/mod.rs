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

mod applied;
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
use futures::{Stream, StreamExt as _};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        WatchStreamExt as _,
        reflector::ObjectRef,
        watcher::{self, Event, watcher},
    },
};
use serde::de::DeserializeOwned;

use super::{Context, HubOptions, feeds::Feeds, rbac};
use applied::Applied;

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
    feeds: &mut Feeds<'_>,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let applied = Arc::new(Applied::default());
    let controller = feeds
        .cluster_controller(inputs)
        .watches_stream(
            drift(
                Api::<ClusterRole>::all(client.clone()),
                role_drifted,
                Arc::clone(&applied),
            ),
            cluster_of,
        )
        .watches_stream(
            drift(
                Api::<ClusterRoleBinding>::all(client.clone()),
                cluster_binding_drifted,
                Arc::clone(&applied),
            ),
            cluster_of,
        )
        .watches_stream(
            drift(
                Api::<RoleBinding>::all(client.clone()),
                binding_drifted,
                Arc::clone(&applied),
            ),
            cluster_of,
        );
    let context = Arc::new(AcceptContext {
        hub: Context::new(client, options),
        applied,
    });
    flotilla_kube::controller::run("accept", controller, reconcile::reconcile, context)
}

/// What an accept reconcile needs: the hub controllers' context and the clusters applied for.
pub(super) struct AcceptContext {
    hub: Context,
    applied: Arc<Applied>,
}

/// The cluster RBAC objects (labelled with their cluster) that someone deleted, or changed from
/// what the accept controller writes: the controller's own applies come back as events too,
/// and each woke a reconcile that applied everything again. Each one seen makes `applied`
/// forget its cluster, so that the reconcile it wakes applies everything again.
fn drift<K>(
    api: Api<K>,
    drifted: fn(&K, &str) -> bool,
    applied: Arc<Applied>,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, watcher::Config::default().labels(CLUSTER_NAME_LABEL))
        .default_backoff()
        .filter_map(move |event| {
            let wake = match event {
                Ok(Event::Delete(object)) => Some(Ok(object)),
                Ok(Event::Apply(object) | Event::InitApply(object)) => object
                    .labels()
                    .get(CLUSTER_NAME_LABEL)
                    .is_some_and(|cluster| drifted(&object, cluster))
                    .then_some(Ok(object)),
                Ok(Event::Init | Event::InitDone) => None,
                Err(e) => Some(Err(e)),
            };
            if let Some(Ok(object)) = &wake
                && let Some(cluster) = object.labels().get(CLUSTER_NAME_LABEL)
            {
                applied.forget(cluster);
            }
            std::future::ready(wake)
        })
}

/// Whether a cluster's ClusterRole grants other rules than either one the controller writes
/// (accepted or denied: which one is the cluster's own change, which wakes it anyway).
fn role_drifted(role: &ClusterRole, cluster: &str) -> bool {
    [true, false]
        .into_iter()
        .map(|accepted| rbac::cluster_role(cluster, accepted))
        .all(|desired| desired.metadata.name != role.metadata.name || desired.rules != role.rules)
}

/// What of a binding the controller writes: name, roleRef, subjects and finalizers.
type Grant<'a> = (&'a ObjectMeta, &'a RoleRef, &'a Option<Vec<Subject>>);

/// Whether `found` differs from each of `desired`: in name, roleRef or subjects, or by missing
/// a finalizer (the work binding's).
fn grant_drifted(found: Grant<'_>, desired: &[Grant<'_>]) -> bool {
    let (meta, role_ref, subjects) = found;
    desired.iter().all(|(want, want_ref, want_subjects)| {
        want.name != meta.name
            || *want_ref != role_ref
            || *want_subjects != subjects
            || want
                .finalizers
                .iter()
                .flatten()
                .any(|f| !meta.finalizers.iter().flatten().any(|g| g == f))
    })
}

/// Whether a cluster's ClusterRoleBinding differs from the one of that name it gets.
fn cluster_binding_drifted(binding: &ClusterRoleBinding, cluster: &str) -> bool {
    let desired = [
        rbac::cluster_role_binding(cluster),
        rbac::certificates_role_binding(cluster),
    ];
    let grants: Vec<Grant<'_>> = desired
        .iter()
        .map(|b| (&b.metadata, &b.role_ref, &b.subjects))
        .collect();
    grant_drifted((&binding.metadata, &binding.role_ref, &binding.subjects), &grants)
}

/// Whether a cluster's RoleBinding differs from the one of that name it gets.
fn binding_drifted(binding: &RoleBinding, cluster: &str) -> bool {
    let desired = [
        rbac::registration_role_binding(cluster),
        rbac::work_role_binding(cluster),
    ];
    let grants: Vec<Grant<'_>> = desired
        .iter()
        .map(|b| (&b.metadata, &b.role_ref, &b.subjects))
        .collect();
    grant_drifted((&binding.metadata, &binding.role_ref, &binding.subjects), &grants)
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
