//! One reconcile of one ManagedCluster's add-on feature labels: return early while the cluster
//! is being deleted; list its add-ons; compute the label changes purely; merge-patch them,
//! guarded by the resourceVersion, only when there are any.

use std::{collections::BTreeMap, sync::Arc};

use flotilla_api::{addon::v1alpha1::ManagedClusterAddOn, cluster::v1::ManagedCluster};
use flotilla_core::addon::health::{AddonHealth, feature_label_changes};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
    runtime::controller::Action,
};
use serde_json::json;

use crate::hub::{
    Context,
    error::{Error, Result},
};

/// Brings one cluster's feature labels in step with its add-ons.
pub(super) async fn reconcile(cluster: Arc<ManagedCluster>, context: Arc<Context>) -> Result<Action> {
    let requeue = Action::requeue(context.options.resync);
    if cluster.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = cluster.name_any();
    let addons = match Api::<ManagedClusterAddOn>::namespaced(context.client.clone(), &name)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(source) => {
            return Err(Error::List {
                kind: "ManagedClusterAddOn",
                scope: name,
                source,
            });
        }
    };
    let names: Vec<String> = addons.iter().map(ResourceExt::name_any).collect();
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
