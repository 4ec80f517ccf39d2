//! Last step: the pre-delete hooks, in OCM's order. No hook in the output drops the add-on's
//! pre-delete finalizer; a hook adds it; while the add-on is deleted, the hook work
//! (`addon-<name>-pre-delete`) is applied and, once its hooks report completion,
//! `HookManifestCompleted` turns True and the finalizer goes, letting the add-on (and, by
//! garbage collection, its works) go. Where no hook can ever run (the cluster left the hub, or
//! no plugin serves the add-on any more), the finalizer is dropped so deletion is not stuck.

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_api::work::v1::ManifestWork;
use flotilla_core::addon::status::{
    HookStep, hook_manifest_completed, hook_step, with_pre_delete_finalizer, without_pre_delete_finalizer,
};
use flotilla_core::addon::works::{hook_work_completed, pre_delete_work};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::Context;
use super::render::Rendering;
use super::status::Report;
use super::works::{self, stamp_spec_hash, unchanged};
use crate::error::{self, Result};
use crate::feeds::slim_work;

/// The hook step for the `rendering` of the add-on: returns the new finalizers when they
/// change (the caller writes them); `HookManifestCompleted` goes into the report.
pub(super) async fn run(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    rendering: &Rendering,
    report: &mut Report<'_>,
) -> Result<Option<Vec<String>>> {
    let finalizers = addon.finalizers();
    let deleting = addon.meta().deletion_timestamp.is_some();
    match hook_step(rendering.has_hooks, finalizers, deleting) {
        HookStep::RemoveFinalizer => Ok(without_pre_delete_finalizer(finalizers)),
        HookStep::AddFinalizer => Ok(with_pre_delete_finalizer(finalizers)),
        HookStep::Wait => Ok(None),
        HookStep::RunHooks => run_hooks(ctx, addon, rendering, report).await,
    }
}

/// Applies the hook work of the add-on being deleted (unless the hub already has it as
/// rendered) and reads whether its hooks completed; returns the finalizers without the
/// pre-delete one once they did (or when the output has no hook work after all).
async fn run_hooks(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    rendering: &Rendering,
    report: &mut Report<'_>,
) -> Result<Option<Vec<String>>> {
    let finalizers = addon.finalizers();
    let identity = works::identity(addon);
    let Some(mut work) = pre_delete_work(&identity, &rendering.manifests) else {
        return Ok(without_pre_delete_finalizer(finalizers));
    };
    stamp_spec_hash(&mut work);
    let (namespace, work_name) = (identity.namespace, work.name_any());
    let api: Api<ManifestWork> = Api::namespaced(ctx.client.clone(), &namespace);
    let current = api
        .get_opt(&work_name)
        .await
        .map_err(error::read(format!("ManifestWork {namespace}/{work_name}")))?;
    // Compared as the cache keeps works; read whole, for the hooks' feedback.
    let as_cached = |current: &ManifestWork| {
        let mut slim = current.clone();
        slim_work(&mut slim);
        slim
    };
    let applied = match current.filter(|c| unchanged(&as_cached(c), &work, None)) {
        Some(current) => current,
        None => api
            .patch(
                &work_name,
                &PatchParams::apply(crate::FIELD_MANAGER).force(),
                &Patch::Apply(&work),
            )
            .await
            .map_err(error::write(format!("ManifestWork {namespace}/{work_name}")))?,
    };
    let completed = hook_work_completed(&applied);
    report.set(hook_manifest_completed(&work_name, completed));
    if completed {
        tracing::info!(addon = %identity.name, cluster = %namespace, "pre-delete hooks completed");
        return Ok(without_pre_delete_finalizer(finalizers));
    }
    Ok(None)
}

/// Whether an AddOnPlugin drives add-on `addon` (loaded here or not).
pub(super) async fn plugin_registered(client: &kube::Client, addon: &str) -> Result<bool> {
    let plugins = Api::<AddOnPlugin>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(error::read("AddOnPlugins"))?;
    Ok(plugins
        .items
        .iter()
        .any(|p| crate::plugin::addon_name(p) == addon))
}

/// Drops the add-on's pre-delete finalizer without running its hooks: nothing could run them.
pub(super) async fn skip(api: &Api<ManagedClusterAddOn>, addon: &ManagedClusterAddOn) -> Result<()> {
    write_finalizers(api, addon, without_pre_delete_finalizer(addon.finalizers())).await
}

/// Replaces the add-on's finalizers with `finalizers` (None: nothing to write).
pub(super) async fn write_finalizers(
    api: &Api<ManagedClusterAddOn>,
    addon: &ManagedClusterAddOn,
    finalizers: Option<Vec<String>>,
) -> Result<()> {
    if let Some(finalizers) = finalizers {
        flotilla_kube::finalizer::replace(api, addon, finalizers).await?;
    }
    Ok(())
}
