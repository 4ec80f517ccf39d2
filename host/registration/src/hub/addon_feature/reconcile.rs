//! One reconcile of one ManagedCluster's add-on feature labels: return early while the cluster
//! is being deleted; read its add-ons from the feed; compute the label changes purely; merge-patch them,
//! guarded by the resourceVersion, only when there are any.

use std::{collections::BTreeMap, sync::Arc};

use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_core::addon::health::{AddonHealth, feature_label_changes};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::controller::Action,
};
use serde_json::json;

use super::Features;
use crate::hub::{
    CACHE_WAIT,
    error::{Error, Result},
};

/// Brings one cluster's feature labels in step with its add-ons.
pub(super) async fn reconcile(cluster: Arc<ManagedCluster>, features: Arc<Features>) -> Result<Action> {
    let context = &features.context;
    let requeue = Action::requeue(context.options.resync);
    if cluster.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    // Until the feed has listed, no add-ons would read as every label to remove.
    if !flotilla_kube::controller::cache_ready(features.addons.store()) {
        return Ok(Action::requeue(CACHE_WAIT));
    }
    let name = cluster.name_any();
    let addons = features.addons.objects(&name);
    let names: Vec<String> = addons.iter().map(|a| a.name_any()).collect();
    let health: Vec<AddonHealth<'_>> = addons
        .iter()
        .zip(&names)
        .map(|(addon, name)| AddonHealth {
            name,
            deleting: addon.metadata.deletion_timestamp.is_some(),
            conditions: addon
                .status
                .as_ref()
                .map(|s| s.conditions.as_slice())
                .unwrap_or_default(),
        })
        .collect();
    let conditions = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let changes = feature_label_changes(cluster.labels(), conditions, &health);
    if changes.is_empty() {
        return Ok(requeue);
    }
    let labels: BTreeMap<&String, &Option<String>> = changes.iter().collect();
    let patch = json!({ "metadata": {
        "resourceVersion": cluster.resource_version(),
        "labels": labels,
    }});
    Api::<ManagedCluster>::all(context.client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Patch {
            what: "add-on feature labels",
            kind: "ManagedCluster",
            name: name.clone(),
            source,
        })?;
    tracing::info!(cluster = %name, ?changes, "add-on feature labels updated");
    Ok(requeue)
}
