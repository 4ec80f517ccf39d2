//! One reconcile of one ManagedClusterSetBinding:
//!
//! ```text
//!  deleting? ─▶ leave it
//!  set spec.clusterSet exists? ─▶ Bound True ClusterSetBound | False ClusterSetNotFound
//! ```

use std::sync::Arc;

use flotilla_api::cluster::v1beta2::{ManagedClusterSet, ManagedClusterSetBinding};
use flotilla_core::{conditions, registration::hub::clusterset};
use k8s_openapi::jiff::Timestamp;
use kube::{Api, ResourceExt, runtime::controller::Action};

use crate::hub::Context;
use crate::hub::{error::Result, write};

/// Reconciles one binding (see the module docs).
pub(super) async fn reconcile(
    binding: Arc<ManagedClusterSetBinding>,
    context: Arc<Context>,
) -> Result<Action> {
    if binding.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let sets: Api<ManagedClusterSet> = Api::all(context.client.clone());
    let exists = !binding.spec.cluster_set.is_empty()
        && write::get_opt(&sets, &binding.spec.cluster_set).await?.is_some();
    let current = binding
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut desired = current.clone();
    if conditions::set(
        &mut desired,
        clusterset::bound_condition(exists),
        Timestamp::now(),
    ) {
        let namespace = binding.namespace().unwrap_or_default();
        let api: Api<ManagedClusterSetBinding> = Api::namespaced(context.client.clone(), &namespace);
        write::patch_conditions(&api, binding.as_ref(), &current, &desired).await?;
    }
    Ok(Action::requeue(context.options.resync))
}
