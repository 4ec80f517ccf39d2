//! One reconcile of one ManagedClusterSet, and the upkeep of the hub's own sets:
//!
//! ```text
//!  deleting? ─▶ leave it
//!  `default`/`global` with a changed selector and no autoupdate: "false" ─▶ put it back
//!  members = clusters (local store) matching the selector
//!  ClusterSetEmpty: True NoClusterMatched | False ClustersSelected "<n> ManagedClusters selected"
//! ```

use std::sync::Arc;

use flotilla_api::cluster::{
    consts::{DEFAULT_CLUSTER_SET, GLOBAL_CLUSTER_SET},
    v1beta2::{ManagedClusterSet, ManagedClusterSetSpec},
};
use flotilla_core::{conditions, registration::hub::clusterset};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::ObjectMeta, jiff::Timestamp};
use kube::{Api, Client, ResourceExt, api::PostParams, runtime::controller::Action};

use super::Context;
use crate::hub::{
    error::{Error, Result},
    write,
};

/// Reconciles one ManagedClusterSet (see the module docs).
pub(super) async fn reconcile(set: Arc<ManagedClusterSet>, context: Arc<Context>) -> Result<Action> {
    if set.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let api: Api<ManagedClusterSet> = Api::all(context.client.clone());
    let name = set.name_any();
    let mut set = (*set).clone();
    if let Some(selector) =
        clusterset::selector_to_restore(&name, set.annotations(), &set.spec.cluster_selector)
    {
        tracing::info!(set = %name, "restoring the selector of a hub cluster set");
        set = write::replace_spec_field(&api, &set, "clusterSelector", &selector).await?;
    }

    if context
        .clusters_ready
        .clone()
        .wait_for(|ready| *ready)
        .await
        .is_err()
    {
        // The cluster watch is gone; only happens while shutting down.
        return Ok(Action::await_change());
    }
    let clusters = context.clusters.state();
    let count = match clusterset::count_members(
        &name,
        &set.spec.cluster_selector,
        clusters.iter().map(|c| c.labels()),
    ) {
        Ok(count) => count,
        Err(error) => {
            tracing::warn!(set = %name, %error, "cluster set has an invalid selector");
            return Ok(Action::requeue(context.options.resync));
        }
    };

    let current = set
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut desired = current.clone();
    if conditions::set(&mut desired, clusterset::empty_condition(count), Timestamp::now()) {
        write::patch_conditions(&api, &set, &current, &desired).await?;
    }
    Ok(Action::requeue(context.options.resync))
}

/// The hub's own sets as they are first created.
pub(super) fn hub_sets() -> Vec<ManagedClusterSet> {
    [
        (DEFAULT_CLUSTER_SET, clusterset::default_set_selector()),
        (GLOBAL_CLUSTER_SET, clusterset::global_set_selector()),
    ]
    .into_iter()
    .map(|(name, selector)| ManagedClusterSet {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: ManagedClusterSetSpec {
            cluster_selector: selector,
            managed_namespaces: Vec::new(),
        },
        status: None,
    })
    .collect()
}

/// Creates `default` and `global` if missing (their selectors are kept by [`reconcile`]).
pub(super) async fn ensure_hub_sets(client: &Client) -> Result<()> {
    let api: Api<ManagedClusterSet> = Api::all(client.clone());
    let params = PostParams {
        field_manager: Some(flotilla_kube::FIELD_MANAGER.to_owned()),
        ..Default::default()
    };
    for set in hub_sets() {
        let name = set.name_any();
        if write::get_opt(&api, &name).await?.is_some() {
            continue;
        }
        match api.create(&params, &set).await {
            Ok(_) => tracing::info!(set = %name, "created hub cluster set"),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(source) => {
                return Err(Error::Create {
                    kind: "ManagedClusterSet",
                    name,
                    source,
                });
            }
        }
    }
    Ok(())
}
