//! One reconcile of one ManagedCluster by the accept controller:
//!
//! ```text
//!  deleting? ─yes─▶ leave it to the deletion controller
//!  no clusterset label? ─▶ label it `default` (DefaultClusterSet)
//!  acceptance(hubAcceptsClient, HubAcceptedManagedCluster):
//!    Accept: name a valid namespace name? ─no─▶ False Error (no retry storm: wait for resync)
//!            name reserved (kube-*, work, …)? ─yes─▶ False Error + Warning Event, nothing written
//!            namespace <c> exists without the hub's label? ─yes─▶ the same
//!            finalizer api-resource-cleanup, namespace <c>, ClusterRole/Binding, RoleBindings,
//!            Lease managed-cluster-lease (created once; the agent renews it)
//!            ⇒ True HubClusterAdminAccepted, or False Error with what failed
//!    Revoke: ClusterRole read-only and certificates binding deleted (not for a reserved
//!            name), RoleBindings deleted (only in the hub's own namespace)
//!            ⇒ False HubClusterAdminDenied
//!    Ignore: nothing
//! ```
//!
//! Admission refuses reserved names, but may be bypassed or installed late, so the controller
//! checks again: it never writes a hub-wide role, nor grants anything in a namespace it did not
//! create for the cluster.

use std::{collections::BTreeMap, sync::Arc};

use flotilla_api::cluster::{
    consts::{
        API_RESOURCE_CLEANUP_FINALIZER, CLUSTER_NAME_LABEL, CLUSTER_SET_LABEL, DEFAULT_CLUSTER_SET,
        managed_cluster::{CONDITION_HUB_ACCEPTED, REASON_HUB_CLUSTER_ADMIN_ACCEPTED},
    },
    v1::ManagedCluster,
};
use flotilla_core::conditions;
use flotilla_core::registration::hub::{
    acceptance::{self, Acceptance, ClusterNamespace},
    clusterset, lease,
};
use k8s_openapi::{
    api::{
        coordination::v1::{Lease, LeaseSpec},
        core::v1::Namespace,
        rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, Client, ResourceExt, api::PostParams, runtime::controller::Action};

use super::AcceptContext;
use crate::hub::Context;
use crate::{
    hub::{
        error::{Error, Result},
        rbac, write,
    },
    names,
};

/// Reconciles one ManagedCluster (see the module docs).
pub(super) async fn reconcile(
    cluster: Arc<ManagedCluster>,
    controller: Arc<AcceptContext>,
) -> Result<Action> {
    let context = &controller.hub;
    if cluster.metadata.deletion_timestamp.is_some() {
        controller.applied.forget(&cluster.name_any());
        return Ok(Action::await_change());
    }
    let api: Api<ManagedCluster> = Api::all(context.client.clone());
    let mut cluster = (*cluster).clone();
    if clusterset::needs_default_set_label(cluster.labels()) {
        cluster = write::add_label(&api, &cluster, CLUSTER_SET_LABEL, DEFAULT_CLUSTER_SET).await?;
    }
    let current = current_conditions(&cluster);
    match acceptance::acceptance(cluster.spec.hub_accepts_client, &current) {
        Acceptance::Accept => accept(&api, cluster, current, &controller).await,
        Acceptance::Revoke => {
            controller.applied.forget(&cluster.name_any());
            revoke(&api, &cluster, current, context).await
        }
        Acceptance::Ignore => Ok(Action::requeue(context.options.resync)),
    }
}

fn current_conditions(cluster: &ManagedCluster) -> Vec<Condition> {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

async fn accept(
    api: &Api<ManagedCluster>,
    cluster: ManagedCluster,
    current: Vec<Condition>,
    controller: &AcceptContext,
) -> Result<Action> {
    let context = &controller.hub;
    let name = cluster.name_any();
    if let Err(message) = acceptance::validate_namespace_name(&name) {
        tracing::warn!(cluster = %name, %message, "cannot accept cluster");
        write::set_condition(api, &cluster, &current, acceptance::error_condition(message)).await?;
        // Nothing changes until the object does; the resync is only a safety net.
        return Ok(Action::requeue(context.options.resync));
    }
    if let Err(message) = names::validate_cluster_name(&name) {
        return refuse(api, &cluster, &current, context, REASON_RESERVED_NAME, message).await;
    }
    let client = &context.client;
    let uid = cluster.uid().unwrap_or_default();
    let fresh = controller.applied.fresh(&name, &uid, context.options.resync / 2);
    if !fresh && let Err(failure) = claim_namespace(client, &name).await {
        return match failure {
            Claim::Foreign => {
                let message = acceptance::foreign_namespace_message(&name);
                refuse(
                    api,
                    &cluster,
                    &current,
                    context,
                    REASON_FOREIGN_NAMESPACE,
                    message,
                )
                .await
            }
            Claim::Failed(e) => {
                write::set_condition(
                    api,
                    &cluster,
                    &current,
                    acceptance::error_condition(e.to_string()),
                )
                .await?;
                Err(e)
            }
        };
    }
    let cluster = write::add_finalizer(api, &cluster, API_RESOURCE_CLEANUP_FINALIZER).await?;
    // Fresh: everything was applied for this cluster object moments ago and no drift was seen
    // since. Remembered before the condition is written, so a conflict on that write does
    // not cost the next pass everything again (and only a pass that applied refreshes it).
    let failure = if fresh {
        None
    } else {
        let failure = apply_everything(client, &cluster).await;
        if failure.is_none() {
            controller.applied.remember(&name, &uid);
        }
        failure
    };
    let condition = match &failure {
        None => acceptance::accepted_condition(),
        Some(e) => acceptance::error_condition(e.to_string()),
    };
    let newly_accepted = failure.is_none()
        && !current
            .iter()
            .any(|c| c.type_ == CONDITION_HUB_ACCEPTED && c.status == conditions::TRUE);
    write::set_condition(api, &cluster, &current, condition).await?;
    if newly_accepted {
        context
            .events
            .normal(
                &cluster,
                REASON_HUB_CLUSTER_ADMIN_ACCEPTED,
                "Accept",
                format!("cluster {name} accepted: namespace, RBAC and lease are in place"),
            )
            .await;
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(Action::requeue(context.options.resync)),
    }
}

/// Applies the cluster's RBAC (cluster-wide and in its namespace) and its lease; `None` when
/// all of it is in place, else what failed.
async fn apply_everything(client: &Client, cluster: &ManagedCluster) -> Option<Error> {
    let name = cluster.name_any();
    let mut errors = Vec::new();
    let cluster_scoped = async {
        flotilla_kube::apply::apply(
            &Api::<ClusterRole>::all(client.clone()),
            &rbac::cluster_role(&name, true),
        )
        .await?;
        let bindings = Api::<ClusterRoleBinding>::all(client.clone());
        flotilla_kube::apply::apply(&bindings, &rbac::cluster_role_binding(&name)).await?;
        flotilla_kube::apply::apply(&bindings, &rbac::certificates_role_binding(&name)).await?;
        Ok::<_, Error>(())
    };
    if let Err(e) = cluster_scoped.await {
        errors.push(e);
    }
    if let Err(e) = namespaced(client, cluster).await {
        errors.push(e);
    }
    Error::several(errors)
}

/// Event reason when a cluster's name is reserved for the hub's own objects.
const REASON_RESERVED_NAME: &str = "ClusterNameReserved";
/// Event reason when a cluster's namespace was made by someone else.
const REASON_FOREIGN_NAMESPACE: &str = "ClusterNamespaceNotOwned";

/// Reports why the hub will not accept the cluster (HubAcceptedManagedCluster False Error, a
/// log line, and a Warning Event when the reason is new) and writes nothing else.
async fn refuse(
    api: &Api<ManagedCluster>,
    cluster: &ManagedCluster,
    current: &[Condition],
    context: &Context,
    reason: &str,
    message: String,
) -> Result<Action> {
    let name = cluster.name_any();
    tracing::warn!(cluster = %name, rule = reason, %message, "refusing to accept cluster");
    let already = conditions::find(current, CONDITION_HUB_ACCEPTED).is_some_and(|c| c.message == message);
    write::set_condition(
        api,
        cluster,
        current,
        acceptance::error_condition(message.clone()),
    )
    .await?;
    if !already {
        context.events.warning(cluster, reason, "Accept", message).await;
    }
    // Nothing changes until the object (or the namespace) does; the resync re-checks.
    Ok(Action::requeue(context.options.resync))
}

/// Why the hub could not make the cluster namespace its own.
enum Claim {
    /// It exists without the hub's label: someone else's, never adopted.
    Foreign,
    /// Reading or creating it failed.
    Failed(Error),
}

/// Ensures the cluster namespace is the hub's: creates it (labelled) when absent, re-applies
/// it when it carries the hub's label, and refuses any other.
async fn claim_namespace(client: &Client, cluster: &str) -> std::result::Result<(), Claim> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespace_owner(client, cluster).await.map_err(Claim::Failed)? {
        ClusterNamespace::Foreign => Err(Claim::Foreign),
        ClusterNamespace::Ours => flotilla_kube::apply::apply(&namespaces, &namespace(cluster))
            .await
            .map(drop)
            .map_err(|e| Claim::Failed(e.into())),
        ClusterNamespace::Absent => {
            let params = PostParams {
                field_manager: Some(flotilla_kube::FIELD_MANAGER.to_owned()),
                ..Default::default()
            };
            match namespaces.create(&params, &namespace(cluster)).await {
                Ok(_) => Ok(()),
                // Made by someone else since it was read: judge it again.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    match namespace_owner(client, cluster).await.map_err(Claim::Failed)? {
                        ClusterNamespace::Ours => Ok(()),
                        _ => Err(Claim::Foreign),
                    }
                }
                Err(source) => Err(Claim::Failed(Error::Create {
                    kind: "Namespace",
                    name: cluster.to_owned(),
                    source,
                })),
            }
        }
    }
}

/// Whose the namespace named after `cluster` is (see [`acceptance::cluster_namespace`]).
pub(in crate::hub) async fn namespace_owner(client: &Client, cluster: &str) -> Result<ClusterNamespace> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let existing = write::get_opt(&namespaces, cluster).await?;
    Ok(acceptance::cluster_namespace(
        cluster,
        existing.as_ref().map(|ns| ns.metadata.labels.as_ref()),
    ))
}

/// The RoleBindings and the lease in the cluster namespace (which exists by now).
async fn namespaced(client: &Client, cluster: &ManagedCluster) -> Result<()> {
    let name = cluster.name_any();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &name);
    flotilla_kube::apply::apply(&bindings, &rbac::registration_role_binding(&name)).await?;
    flotilla_kube::apply::apply(&bindings, &rbac::work_role_binding(&name)).await?;

    let leases: Api<Lease> = Api::namespaced(client.clone(), &name);
    if write::get_opt(&leases, names::CLUSTER_LEASE).await?.is_none() {
        let params = PostParams {
            field_manager: Some(flotilla_kube::FIELD_MANAGER.to_owned()),
            ..Default::default()
        };
        let desired = cluster_lease(&name, cluster.spec.lease_duration_seconds, Timestamp::now());
        match leases.create(&params, &desired).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(source) => {
                return Err(Error::Create {
                    kind: "Lease",
                    name: format!("{name}/{}", names::CLUSTER_LEASE),
                    source,
                });
            }
        }
    }
    Ok(())
}

async fn revoke(
    api: &Api<ManagedCluster>,
    cluster: &ManagedCluster,
    current: Vec<Condition>,
    context: &Context,
) -> Result<Action> {
    let name = cluster.name_any();
    let client = &context.client;
    tracing::info!(cluster = %name, "hub admin denied the cluster; revoking its write access");
    // A reserved name's ClusterRole would be a hub-wide role, and a foreign namespace's
    // RoleBindings are not the hub's: neither is ever written for the cluster.
    if names::validate_cluster_name(&name).is_ok() {
        flotilla_kube::apply::apply(
            &Api::<ClusterRole>::all(client.clone()),
            &rbac::cluster_role(&name, false),
        )
        .await?;
        let bindings = Api::<ClusterRoleBinding>::all(client.clone());
        flotilla_kube::apply::apply(&bindings, &rbac::cluster_role_binding(&name)).await?;
        write::delete_if_present(&bindings, &names::certificates_role_binding(&name)).await?;
        if acceptance::validate_namespace_name(&name).is_ok()
            && namespace_owner(client, &name).await? == ClusterNamespace::Ours
        {
            remove_role_bindings(client, &name).await?;
        }
    }
    write::set_condition(api, cluster, &current, acceptance::denied_condition()).await?;
    Ok(Action::requeue(context.options.resync))
}

/// Deletes the registration and work RoleBindings of a cluster. The work binding's
/// `manifest-work-cleanup` finalizer is taken off first: a binding waiting on its finalizer
/// still grants access, and a denied agent must lose it now.
pub(in crate::hub) async fn remove_role_bindings(client: &Client, cluster: &str) -> Result<()> {
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), cluster);
    write::delete_if_present(&bindings, &names::registration_role_binding(cluster)).await?;
    let work = names::work_role_binding(cluster);
    if let Some(binding) = write::get_opt(&bindings, &work).await? {
        flotilla_kube::finalizer::remove(&bindings, &binding, &[names::MANIFEST_WORK_CLEANUP_FINALIZER])
            .await?;
        write::delete_if_present(&bindings, &work).await?;
    }
    Ok(())
}

/// The cluster namespace: named after the cluster, labelled with it.
pub(super) fn namespace(cluster: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(cluster.to_owned()),
            labels: Some(BTreeMap::from([(
                CLUSTER_NAME_LABEL.to_owned(),
                cluster.to_owned(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The cluster's lease as the hub first creates it: held by `managed-cluster-lease`, renewed
/// `now`, with the cluster's lease period; from then on only the agent bumps `renewTime`.
pub(super) fn cluster_lease(cluster: &str, lease_duration_seconds: i32, now: Timestamp) -> Lease {
    let seconds = lease::lease_duration(lease_duration_seconds).as_secs();
    Lease {
        metadata: ObjectMeta {
            name: Some(names::CLUSTER_LEASE.to_owned()),
            namespace: Some(cluster.to_owned()),
            labels: Some(BTreeMap::from([(
                CLUSTER_NAME_LABEL.to_owned(),
                cluster.to_owned(),
            )])),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(names::CLUSTER_LEASE.to_owned()),
            lease_duration_seconds: Some(i32::try_from(seconds).unwrap_or(i32::MAX)),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}
