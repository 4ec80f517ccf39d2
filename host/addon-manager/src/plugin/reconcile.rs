//! One reconcile of an AddOnPlugin: read the plugin's ClusterManagementAddOn, return early when
//! the plugin is not Ready here or the CMA belongs to another manager, else server-side apply
//! the fields the add-on manager owns (only when they differ, so a steady hub writes nothing).

use std::sync::Arc;

use flotilla_api::addon::consts::{LIFECYCLE_ADDON_MANAGER, LIFECYCLE_ANNOTATION, LIFECYCLE_SELF};
use flotilla_api::addon::v1alpha1::ClusterManagementAddOn;
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_core::conditions::{self, TRUE};
use flotilla_wasm::types::AddonOptions;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::{Context, addon_name};
use crate::error::{self, Result};

/// The `supportedConfigs` of a CMA for a plugin's `describe` answer.
fn supported_configs(options: &AddonOptions) -> Value {
    Value::Array(
        options
            .supported_configs
            .iter()
            .map(|c| {
                let mut entry = json!({"group": c.group, "resource": c.resource});
                if let Some(default) = &c.default_config {
                    entry["defaultConfig"] = json!({"namespace": default.namespace, "name": default.name});
                }
                entry
            })
            .collect(),
    )
}

/// The fields of the CMA the add-on manager owns, as a server-side apply body.
fn desired_cma(addon: &str, plugin: &AddOnPlugin, options: &AddonOptions) -> Value {
    let owner = plugin.controller_owner_ref(&()).map(|mut o| {
        // An owner, not the controller: the AddOnPlugin's deletion removes the CMA (and
        // through it every add-on) by garbage collection.
        o.controller = None;
        o.block_owner_deletion = None;
        o
    });
    json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ClusterManagementAddOn",
        "metadata": {
            "name": addon,
            "annotations": {LIFECYCLE_ANNOTATION: LIFECYCLE_ADDON_MANAGER},
            "ownerReferences": owner.into_iter().collect::<Vec<_>>(),
        },
        "spec": {
            "addOnMeta": {"displayName": addon, "description": format!("{addon} (driven by AddOnPlugin {})", plugin.name_any())},
            "supportedConfigs": supported_configs(options),
        },
    })
}

/// Whether `current` already carries everything in `desired` (so applying would change nothing).
fn carries(current: &ClusterManagementAddOn, desired: &Value) -> bool {
    let Ok(current) = serde_json::to_value(current) else {
        return false;
    };
    let annotation = current.pointer(&format!(
        "/metadata/annotations/{}",
        LIFECYCLE_ANNOTATION.replace('/', "~1")
    ));
    annotation == Some(&json!(LIFECYCLE_ADDON_MANAGER))
        && current.pointer("/spec/addOnMeta") == desired.pointer("/spec/addOnMeta")
        && current.pointer("/spec/supportedConfigs").unwrap_or(&json!([]))
            == &desired["spec"]["supportedConfigs"]
        && desired["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|o| {
                current["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|owners| owners.iter().any(|c| c["uid"] == o["uid"]))
            })
}

/// Ensures the ClusterManagementAddOn of a Ready AddOnPlugin.
pub(crate) async fn reconcile(plugin: Arc<AddOnPlugin>, ctx: Arc<Context>) -> Result<Action> {
    let requeue = Action::requeue(ctx.options.resync);
    if plugin.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ready = plugin
        .status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, "Ready"))
        .is_some_and(|c| c.status == TRUE);
    let addon = addon_name(&plugin);
    // Ready on the API server but not loaded in this process yet: look again soon.
    let Some(loaded) = ctx.plugins.loaded(&addon).filter(|_| ready) else {
        return Ok(if ready {
            Action::requeue(ctx.options.retry)
        } else {
            Action::await_change()
        });
    };
    let api: Api<ClusterManagementAddOn> = Api::all(ctx.client.clone());
    let current = api
        .get_opt(&addon)
        .await
        .map_err(error::read(format!("ClusterManagementAddOn {addon}")))?;
    if let Some(current) = &current
        && current
            .annotations()
            .get(LIFECYCLE_ANNOTATION)
            .map(String::as_str)
            == Some(LIFECYCLE_SELF)
    {
        tracing::debug!(%addon, "ClusterManagementAddOn manages itself; left alone");
        return Ok(requeue);
    }
    let desired = desired_cma(&addon, &plugin, loaded.options());
    if current.as_ref().is_some_and(|c| carries(c, &desired)) {
        return Ok(requeue);
    }
    api.patch(
        &addon,
        &PatchParams::apply(crate::FIELD_MANAGER).force(),
        &Patch::Apply(&desired),
    )
    .await
    .map_err(error::write(format!("ClusterManagementAddOn {addon}")))?;
    tracing::info!(%addon, "ClusterManagementAddOn ensured");
    Ok(requeue)
}
