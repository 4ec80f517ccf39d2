//! One reconcile of one ManagedCluster by the lease controller:
//!
//! ```text
//!  never accepted (no HubAcceptedManagedCluster)? ─▶ nothing to judge
//!  caches still listing ─▶ look again shortly
//!  cached lease fresh, or expired on a cluster already Unknown ─▶ judged from the cache
//!  otherwise ─▶ read the lease from the apiserver and judge that (lease::Sight learns from it)
//!  lease missing ─▶ deleting? Unknown now : wait (the accept controller creates it)
//!  lease fresh   ─▶ look again at renewTime + 5 × leaseDurationSeconds (or that long after
//!                    the hub last began to see its apiserver, if later: lease::Sight)
//!  lease expired ─▶ Available Unknown ManagedClusterLeaseUpdateStopped (unless already Unknown)
//!  lease written ─▶ ClockSynced: renewTime (agent's clock) vs. the write's time (hub's clock)
//!  cluster Unknown ─▶ each ManagedClusterAddOn not Unknown: Available Unknown, cluster's reason
//! ```
//!
//! A cluster is only ever marked Unknown from a lease just read: a cache that fell behind
//! (its watch cut off while the apiserver came back) must not make every cluster Unknown, and
//! only a read tells the hub that it sees its apiserver again.

use std::{sync::Arc, time::Duration};

use flotilla_api::cluster::{
    consts::managed_cluster::{CONDITION_AVAILABLE, CONDITION_HUB_ACCEPTED},
    v1::ManagedCluster,
};
use flotilla_core::{
    conditions::{self, NewCondition, UNKNOWN},
    registration::hub::{
        acceptance,
        lease::{self, LeaseState},
    },
};
use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp,
};
use kube::{
    Api, ResourceExt,
    runtime::{controller::Action, reflector::ObjectRef},
};

use super::Leases;
use crate::{
    hub::{CACHE_WAIT, error::Result, write},
    names,
};

/// Slack added to the expiry requeue so the next look is past the expiry moment.
const EXPIRY_SLACK: Duration = Duration::from_millis(200);

/// What one lease says about its cluster.
struct Judgement {
    expired: bool,
    clock: Option<NewCondition<'static>>,
    action: Action,
}

/// Judges `found` (the cluster's lease, if any) by a hub that has seen its apiserver since
/// `sighted`; `None` when there is no lease to judge yet.
fn judge(
    cluster: &ManagedCluster,
    found: Option<&Lease>,
    sighted: Timestamp,
    now: Timestamp,
) -> Option<Judgement> {
    let duration_seconds = cluster.spec.lease_duration_seconds;
    let grace = lease::grace_period(duration_seconds);
    let Some(found) = found else {
        return cluster.metadata.deletion_timestamp.is_some().then(|| Judgement {
            expired: true,
            clock: None,
            action: Action::requeue(grace),
        });
    };
    let renewed = lease::renewed(found);
    let clock = renewed
        .zip(lease::written_at(found))
        .map(|(renewed, written_at)| lease::clock_synced_condition(renewed, written_at, duration_seconds));
    let (expired, action) = match lease::lease_state(renewed, duration_seconds, sighted, now) {
        LeaseState::Fresh { expires_at } => (
            false,
            Action::requeue(lease::until(expires_at, now) + EXPIRY_SLACK),
        ),
        LeaseState::Expired => (true, Action::requeue(grace)),
    };
    Some(Judgement {
        expired,
        clock,
        action,
    })
}

/// Reconciles one ManagedCluster (see the module docs).
pub(super) async fn reconcile(cluster: Arc<ManagedCluster>, leases: Arc<Leases>) -> Result<Action> {
    let context = &leases.context;
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
    if !flotilla_kube::controller::cache_ready(&leases.leases)
        || !flotilla_kube::controller::cache_ready(leases.addons.store())
    {
        return Ok(Action::requeue(CACHE_WAIT));
    }
    let sight = || {
        leases
            .sight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let now = Timestamp::now();
    let cached = leases
        .leases
        .get(&ObjectRef::new(names::CLUSTER_LEASE).within(&name));
    let from_cache = judge(&cluster, cached.as_deref(), sight().since(), now)
        .filter(|j| !j.expired || lease::expired_cluster_condition(&current).is_none());
    let (judgement, now) = match from_cache {
        Some(judgement) => (judgement, now),
        None => {
            let api: Api<Lease> = Api::namespaced(context.client.clone(), &name);
            let started = Timestamp::now();
            let read = write::get_opt(&api, names::CLUSTER_LEASE).await;
            // Judged as of the read's answer, which may have waited out an outage.
            let now = Timestamp::now();
            let sighted = match &read {
                Ok(_) => sight().read(started, now),
                Err(_) => {
                    sight().lost();
                    now
                }
            };
            match judge(&cluster, read?.as_ref(), sighted, now) {
                Some(judgement) => (judgement, now),
                None => {
                    let grace = lease::grace_period(cluster.spec.lease_duration_seconds);
                    return Ok(Action::requeue(context.options.resync.min(grace)));
                }
            }
        }
    };

    let mut desired = current.clone();
    let mut lost = None;
    if judgement.expired
        && let Some(condition) = lease::expired_cluster_condition(&current)
    {
        tracing::info!(cluster = %name, "cluster lease expired; Available is now Unknown");
        lost = Some((condition.reason.to_owned(), condition.message.clone()));
        conditions::set(&mut desired, condition, now);
    }
    if let Some(condition) = judgement.clock {
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
        mark_addons_unknown(&leases, &name, available, now).await?;
    }
    Ok(judgement.action)
}

/// Sets `Available` Unknown, with the cluster's reason and message, on every add-on of the
/// cluster that is not Unknown yet (as cached: a write from an old copy fails on its
/// resourceVersion and is retried).
async fn mark_addons_unknown(
    leases: &Leases,
    cluster: &str,
    cluster_available: Option<&Condition>,
    now: Timestamp,
) -> Result<()> {
    let api: Api<flotilla_api::addon::v1alpha1::ManagedClusterAddOn> =
        Api::namespaced(leases.context.client.clone(), cluster);
    let mut errors = Vec::new();
    for addon in leases.addons.objects(cluster) {
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
        if let Err(e) = write::patch_conditions(&api, addon.as_ref(), &current, &desired).await {
            errors.push(e);
        }
    }
    crate::hub::error::Error::several(errors).map_or(Ok(()), Err)
}
