//! One reconcile of one ManagedCluster by the taint controller:
//!
//! ```text
//!  deleting? ─▶ leave it
//!  desired = taints(current taints, Available status, now)
//!  changed?  ─▶ spec.taints := desired (JSON patch guarded by resourceVersion)
//! ```

use std::sync::Arc;

use flotilla_api::cluster::{consts::managed_cluster::CONDITION_AVAILABLE, v1::ManagedCluster};
use flotilla_core::{conditions, registration::hub::taints};
use k8s_openapi::jiff::Timestamp;
use kube::{Api, ResourceExt, runtime::controller::Action};

use crate::hub::Context;
use crate::hub::{error::Result, write};

/// Reconciles one ManagedCluster (see the module docs).
pub(in crate::hub) async fn reconcile(cluster: Arc<ManagedCluster>, context: Arc<Context>) -> Result<Action> {
    if cluster.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let available = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| conditions::find(c, CONDITION_AVAILABLE))
        .map(|c| c.status.as_str());
    if let Some(desired) = taints::desired_taints(&cluster.spec.taints, available, Timestamp::now()) {
        tracing::info!(
            cluster = %cluster.name_any(),
            available = available.unwrap_or("missing"),
            taints = ?desired.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(),
            "updating taints"
        );
        let api: Api<ManagedCluster> = Api::all(context.client.clone());
        write::replace_spec_field(&api, cluster.as_ref(), "taints", &desired).await?;
    }
    Ok(Action::requeue(context.options.resync))
}
