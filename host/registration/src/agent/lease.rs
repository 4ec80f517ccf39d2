//! Renewing the cluster lease `managed-cluster-lease` in the cluster namespace on the hub
//! while the hub accepts the cluster: get it, set `spec.renewTime` to now, update it (the
//! agent's role allows `update`, not `patch`). The hub creates the lease on acceptance and
//! judges the cluster by how fresh `renewTime` is.
//!
//! Like OCM's lease updater, a change of acceptance or lease duration restarts the cycle,
//! which renews at once and then every `leaseDurationSeconds` stretched by up to 25 %.

use std::{convert::Infallible, sync::Arc};

use flotilla_core::registration::agent::lease::jittered;
use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
};
use kube::{Api, api::PostParams};
use tokio::sync::watch;

use super::{
    Context, Names,
    error::{Error, Result},
    identity::HubIdentity,
    progress::Step,
    status::ClusterView,
};
use crate::names::CLUSTER_LEASE;

/// Renews the lease forever while accepted.
pub(crate) async fn run(
    ctx: &Context,
    names: &Names,
    identity: watch::Receiver<Arc<HubIdentity>>,
    mut view: watch::Receiver<ClusterView>,
) -> Infallible {
    loop {
        let current = *view.borrow_and_update();
        if !current.accepted {
            if view.changed().await.is_err() {
                // The status loop is gone; the agent is ending this session.
                return std::future::pending().await;
            }
            continue;
        }
        let client = identity.borrow().client.clone();
        match renew(&client, names).await {
            Ok(()) => {
                ctx.options.status.succeeded(Step::Lease);
                ctx.options.status.update(|s| s.lease_renewals += 1);
            }
            Err(error) => {
                tracing::warn!(error = %error, "cluster lease");
                ctx.options.status.failed(Step::Lease, error.to_string());
            }
        }
        let period = jittered(current.lease_duration, fastrand::f64());
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            changed = view.changed() => {
                if changed.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}

/// Bumps `renewTime` of the cluster lease to now.
async fn renew(hub: &kube::Client, names: &Names) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(hub.clone(), &names.cluster);
    let mut lease = api.get(CLUSTER_LEASE).await.map_err(|source| Error::GetLease {
        namespace: names.cluster.clone(),
        name: CLUSTER_LEASE.to_owned(),
        source,
    })?;
    lease.spec.get_or_insert_with(Default::default).renew_time = Some(MicroTime(Timestamp::now()));
    api.replace(CLUSTER_LEASE, &PostParams::default(), &lease)
        .await
        .map_err(|source| Error::RenewLease {
            namespace: names.cluster.clone(),
            name: CLUSTER_LEASE.to_owned(),
            source,
        })?;
    Ok(())
}
