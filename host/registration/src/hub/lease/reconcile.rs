//! One reconcile of one ManagedCluster by the lease controller:
//!
//! ```text
//!  never accepted (no HubAcceptedManagedCluster)? ─▶ nothing to judge
//!  lease missing ─▶ deleting? Unknown now : wait (the accept controller creates it)
//!  lease fresh   ─▶ look again at renewTime + 5 × leaseDurationSeconds (or that long after
//!                    the hub last began to see its apiserver, if later: lease::Sight)
//!  lease expired ─▶ Available Unknown ManagedClusterLeaseUpdateStopped (unless already Unknown)
//!  lease written ─▶ ClockSynced: renewTime (agent's clock) vs. the write's time (hub's clock)
//!  cluster Unknown ─▶ each ManagedClusterAddOn not Unknown: Available Unknown, cluster's reason
//! ```

use std::{sync::Arc, time::Duration};

use flotilla_api::{
    addon::v1alpha1::ManagedClusterAddOn,
    cluster::{
        consts::managed_cluster::{CONDITION_AVAILABLE, CONDITION_HUB_ACCEPTED},
        v1::ManagedCluster,
    },
};
use flotilla_core::{
    conditions::{self, UNKNOWN},
    registration::hub::{
        acceptance,
        lease::{self, LeaseState},
    },
};
use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp,
};
use kube::{Api, Client, ResourceExt, api::ListParams, runtime::controller::Action};

use crate::hub::Context;
use crate::{
    hub::{
        error::{Error, Result},
        write,
    },
    names,
};

/// Slack added to the expiry requeue so the next look is past the expiry moment.
const EXPIRY_SLACK: Duration = Duration::from_millis(200);

/// Reconciles one ManagedCluster (see the module docs).
pub(super) async fn reconcile(cluster: Arc<ManagedCluster>, context: Arc<Context>) -> Result<Action> {
    let current: Vec<Condition> = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let name = cluster.name_any();
    if conditions::find(&current, CONDITION_HUB_ACCEPTED).is_none()
        || acceptance::validate_namespace_name(&name).is_err()
    {
        return Ok(Action::await_change());
    }
    let duration_seconds = cluster.spec.lease_duration_seconds;
    let grace = lease::grace_period(duration_seconds);
    let leases: Api<Lease> = Api::namespaced(context.client.clone(), &name);
    let started = Timestamp::now();
    let read = write::get_opt(&leases, names::CLUSTER_LEASE).await;
    // Judged as of the read's answer, which may have waited out an outage.
    let now = Timestamp::now();
    let mut clock = None;
    let sighted = {
        let mut sight = context
            .sight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if read.is_ok() {
            sight.read(started, now)
        } else {
            sight.lost();
            now
        }
    };
    let (expired, action) = match read? {
        None if cluster.metadata.deletion_timestamp.is_some() => (true, Action::requeue(grace)),
        None => return Ok(Action::requeue(context.options.resync.min(grace))),
        Some(found) => {
            let renewed = found
                .spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0);
            // When the apiserver received the latest write of the lease, by the hub's clock.
            let written_at = found
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .filter_map(|f| f.time.as_ref().map(|t| t.0))
                .max();
            if let (Some(renewed), Some(written_at)) = (renewed, written_at) {
                clock = Some(lease::clock_synced_condition(
                    renewed,
                    written_at,
                    duration_seconds,
                ));
            }
            match lease::lease_state(renewed, duration_seconds, sighted, now) {
                LeaseState::Fresh { expires_at } => (
                    false,
                    Action::requeue(lease::until(expires_at, now) + EXPIRY_SLACK),
                ),
                LeaseState::Expired => (true, Action::requeue(grace)),
            }
        }
    };

    let mut desired = current.clone();
    let mut lost = None;
    if expired && let Some(condition) = lease::expired_cluster_condition(&current) {
        tracing::info!(cluster = %name, "cluster lease expired; Available is now Unknown");
        lost = Some((condition.reason.to_owned(), condition.message.clone()));
        conditions::set(&mut desired, condition, now);
    }
    if let Some(condition) = clock {
        conditions::set(&mut desired, condition, now);
    }
    if desired != current {
        let api: Api<ManagedCluster> = Api::all(context.client.clone());
        write::patch_conditions(&api, &cluster, &current, &desired).await?;
        if let Some((reason, message)) = lost {
            context
                .events
                .warning(cluster.as_ref(), &reason, "MarkUnknown", message)
                .await;
        }
    }

    let available = conditions::find(&desired, CONDITION_AVAILABLE);
    if available.is_some_and(|c| c.status == UNKNOWN) {
        mark_addons_unknown(&context.client, &name, available, now).await?;
    }
    Ok(action)
}

/// Sets `Available` Unknown, with the cluster's reason and message, on every add-on of the
/// cluster that is not Unknown yet.
async fn mark_addons_unknown(
    client: &Client,
    cluster: &str,
    cluster_available: Option<&Condition>,
    now: Timestamp,
) -> Result<()> {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), cluster);
    let addons = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(source) => {
            return Err(Error::List {
                kind: "ManagedClusterAddOn",
                scope: cluster.to_owned(),
                source,
            });
        }
    };
    let mut errors = Vec::new();
    for addon in addons {
        let current = addon
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let Some(condition) = lease::addon_condition(cluster_available, &current) else {
            continue;
        };
        let mut desired = current.clone();
        conditions::set(&mut desired, condition, now);
        if let Err(e) = write::patch_conditions(&api, &addon, &current, &desired).await {
            errors.push(e);
        }
    }
    Error::several(errors).map_or(Ok(()), Err)
}
