//! One reconcile of one ManagedCluster by the deletion controller:
//!
//! ```text
//!  alive:    accepted and no resource-cleanup finalizer? ─▶ add it
//!  deleting: none of our finalizers? ─▶ nothing to do
//!            ManagedClusterAddOns left? ─▶ delete the lowest cleanup-priority batch,
//!                                          Deleting False ResourceRemaining, look again soon
//!            ManifestWorks left?        ─▶ the same
//!            agent gone for the grace, or flotilla.dev/force-cleanup=true?
//!                       ─▶ also take the agent's finalizers off what is being deleted,
//!                          Warning Event CleanupForced naming each object and why
//!            else waiting longer than cleanup_stalled_after on a live agent?
//!                       ─▶ the condition and a Warning Event CleanupStalled say so and
//!                          name the annotation
//!            clean ─▶ Deleting True NoResource ─▶ ClusterRole/Binding, RoleBindings deleted
//!                     (never a hub-wide role, never in a namespace the hub did not make)
//!                  ─▶ resource-cleanup and api-resource-cleanup removed
//!            a failure ─▶ Deleting False DeletingError, retry with backoff
//! ```

use std::{fmt::Debug, sync::Arc};

use flotilla_api::{
    addon::v1alpha1::ManagedClusterAddOn,
    cluster::{
        consts::{API_RESOURCE_CLEANUP_FINALIZER, RESOURCE_CLEANUP_FINALIZER},
        v1::ManagedCluster,
    },
    work::v1::ManifestWork,
};
use flotilla_core::{
    conditions::NewCondition,
    registration::hub::{
        acceptance::{self, ClusterNamespace},
        cleanup::{self, Forced, Remaining},
    },
};
use flotilla_kube::events::Events;
use k8s_openapi::{
    api::rbac::v1::{ClusterRole, ClusterRoleBinding},
    apimachinery::pkg::apis::meta::v1::Condition,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ListParams, ObjectList},
    runtime::controller::Action,
};
use serde::de::DeserializeOwned;

use crate::hub::Context;
use crate::{
    hub::{
        accept::{namespace_owner, remove_role_bindings},
        error::{Error, Result},
        write,
    },
    names,
};

/// Where the clean-up of a namespace stands.
enum Progress {
    /// Objects remain; the condition says which and how many. Also how many objects a forced
    /// clean-up took the agent's finalizers off this time.
    Remaining(NewCondition<'static>, usize),
    /// The namespace holds no add-ons or works.
    Clean,
}

/// Reconciles one ManagedCluster (see the module docs).
pub(in crate::hub) async fn reconcile(cluster: Arc<ManagedCluster>, context: Arc<Context>) -> Result<Action> {
    let api: Api<ManagedCluster> = Api::all(context.client.clone());
    let current: Vec<Condition> = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    if cluster.metadata.deletion_timestamp.is_none() {
        if acceptance::is_accepted(cluster.spec.hub_accepts_client, &current) {
            write::add_finalizer(&api, cluster.as_ref(), RESOURCE_CLEANUP_FINALIZER).await?;
        }
        return Ok(Action::requeue(context.options.resync));
    }
    let ours = [RESOURCE_CLEANUP_FINALIZER, API_RESOURCE_CLEANUP_FINALIZER];
    if !ours
        .iter()
        .any(|f| flotilla_kube::finalizer::has(cluster.as_ref(), f))
    {
        return Ok(Action::await_change());
    }
    let name = cluster.name_any();
    let forced = cleanup::force_cleanup(
        cluster.metadata.annotations.as_ref(),
        &current,
        k8s_openapi::jiff::Timestamp::now(),
        context.options.force_cleanup_after,
    );

    let progress = match clean_namespace(&context.client, &name, forced.as_ref(), &context.events).await {
        Ok(progress) => progress,
        Err(error) => return Err(report_failure(&api, &cluster, &current, error).await),
    };
    let condition = match progress {
        Progress::Remaining(mut condition, released) => {
            let stalled = cluster
                .metadata
                .deletion_timestamp
                .as_ref()
                .filter(|_| forced.is_none())
                .and_then(|since| {
                    cleanup::stalled(
                        since.0,
                        k8s_openapi::jiff::Timestamp::now(),
                        context.options.cleanup_stalled_after,
                    )
                });
            if let Some(why) = stalled {
                tracing::warn!(cluster = %name, %why, "cluster clean-up stalled");
                condition.message = format!("{}; {why}", condition.message);
                context
                    .events
                    .warning(cluster.as_ref(), "CleanupStalled", "Delete", why)
                    .await;
            }
            if let (Some(forced), true) = (&forced, released > 0) {
                // Each released object has its own Event; the cluster's names the reason.
                let why = forced.describe();
                tracing::warn!(cluster = %name, released, %why, "forced clean-up");
                let note = format!(
                    "stopped waiting for the agent's finalizers because {why}; the objects released are named in Events in namespace {name}"
                );
                context
                    .events
                    .warning(cluster.as_ref(), "CleanupForced", "Delete", note)
                    .await;
            }
            write::set_condition(&api, &cluster, &current, condition).await?;
            return Ok(Action::requeue(context.options.cleanup_requeue));
        }
        Progress::Clean => cleanup::no_resource_condition(),
    };
    write::set_condition(&api, &cluster, &current, condition).await?;

    if let Err(error) = remove_rbac(&context.client, &name).await {
        return Err(report_failure(&api, &cluster, &current, error).await);
    }
    // The status write moved the resourceVersion the finalizer patch is guarded by.
    let Some(cluster) = write::get_opt(&api, &name).await? else {
        return Ok(Action::await_change());
    };
    flotilla_kube::finalizer::remove(&api, &cluster, &ours).await?;
    tracing::info!(cluster = %name, "cluster cleaned up; finalizers removed");
    Ok(Action::await_change())
}

/// Records `error` as Deleting False DeletingError (best effort) and hands it back.
async fn report_failure(
    api: &Api<ManagedCluster>,
    cluster: &ManagedCluster,
    current: &[Condition],
    error: Error,
) -> Error {
    let condition = cleanup::error_condition(error.to_string());
    if let Err(status_error) = write::set_condition(api, cluster, current, condition).await {
        tracing::debug!(%status_error, "cannot record the clean-up failure");
    }
    error
}

/// Deletes the next batch of add-ons, or once none is left, of works.
async fn clean_namespace(
    client: &Client,
    cluster: &str,
    forced: Option<&Forced>,
    events: &Events,
) -> Result<Progress> {
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), cluster);
    if let Some((condition, released)) = clean_kind(&addons, "managedclusteraddons", forced, events).await? {
        return Ok(Progress::Remaining(condition, released));
    }
    let works: Api<ManifestWork> = Api::namespaced(client.clone(), cluster);
    if let Some((condition, released)) = clean_kind(&works, "manifestworks", forced, events).await? {
        return Ok(Progress::Remaining(condition, released));
    }
    Ok(Progress::Clean)
}

/// Deletes the lowest-priority batch of `K` still present (objects already being deleted are
/// left to their finalizers, or when `forced`, relieved of the agent's, each with a Warning
/// Event). Returns the Deleting condition when anything remains, with how many were relieved.
async fn clean_kind<K>(
    api: &Api<K>,
    resource: &str,
    forced: Option<&Forced>,
    events: &Events,
) -> Result<Option<(NewCondition<'static>, usize)>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let list: ObjectList<K> = match api.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
        Err(source) => {
            return Err(Error::List {
                kind: write::kind::<K>(),
                scope: api.resource_url().to_owned(),
                source,
            });
        }
    };
    if list.items.is_empty() {
        return Ok(None);
    }
    let remaining: Vec<Remaining<'_>> = list
        .items
        .iter()
        .map(|item| Remaining {
            name: item.meta().name.as_deref().unwrap_or_default(),
            annotations: item.meta().annotations.as_ref(),
            deleting: item.meta().deletion_timestamp.is_some(),
            has_finalizers: item.meta().finalizers.as_ref().is_some_and(|f| !f.is_empty()),
        })
        .collect();
    let condition = cleanup::remaining_condition(resource, &remaining);
    let batch = cleanup::next_batch(&remaining);
    for item in remaining
        .iter()
        .filter(|r| batch.contains(&r.name) && !r.deleting)
    {
        tracing::info!(resource, name = item.name, "deleting for cluster clean-up");
        write::delete_if_present(api, item.name).await?;
    }
    let mut released = 0;
    if let Some(forced) = forced {
        for item in list
            .items
            .iter()
            .filter(|i| i.meta().deletion_timestamp.is_some())
        {
            let held = cleanup::agent_finalizers(item.meta().finalizers.as_deref().unwrap_or_default());
            if held.is_empty() {
                continue;
            }
            flotilla_kube::finalizer::remove(api, item, &held).await?;
            let note = format!(
                "took the agent's finalizers off {resource}/{} because {}; what the agent applied for it stays on the managed cluster",
                item.meta().name.as_deref().unwrap_or_default(),
                forced.describe()
            );
            events.warning(item, "CleanupForced", "Delete", note).await;
            released += 1;
        }
    }
    Ok(Some((condition, released)))
}

/// Deletes the cluster's ClusterRole, ClusterRoleBindings and RoleBindings. A reserved name's
/// ClusterRole would be a hub-wide role, and RoleBindings in a namespace the hub did not make
/// for the cluster are not its own: neither is deleted (the hub never made them). The
/// namespace itself is never deleted.
async fn remove_rbac(client: &Client, cluster: &str) -> Result<()> {
    if let Err(message) = names::validate_cluster_name(cluster) {
        tracing::info!(cluster, %message, "reserved cluster name: no RBAC of its own to delete");
        return Ok(());
    }
    let role = names::cluster_role(cluster);
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    write::delete_if_present(&bindings, &names::certificates_role_binding(cluster)).await?;
    write::delete_if_present(&bindings, &role).await?;
    write::delete_if_present(&Api::<ClusterRole>::all(client.clone()), &role).await?;
    if acceptance::validate_namespace_name(cluster).is_ok()
        && namespace_owner(client, cluster).await? == ClusterNamespace::Ours
    {
        remove_role_bindings(client, cluster).await?;
    }
    Ok(())
}
