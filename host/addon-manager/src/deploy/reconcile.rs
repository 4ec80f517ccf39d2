//! One reconcile of a ManagedClusterAddOn, in OCM's shape: read from the caches and return
//! early when there is nothing to do yet (caches filling, own writes not seen, cluster not
//! accepted, add-on not ours, no plugin serving it), then run the steps, each in its own file,
//! and submit the status once if it changed:
//!
//! ```text
//!  configs  the configs the rollout released to the add-on, still at their released hash
//!  render   the plugin's output, with a plugin revision granted to the add-on; skipped when
//!           nothing it depends on changed since the last apply
//!  apply    the works built purely (flotilla_core::addon::works), only the changed applied
//!  hooks    the pre-delete finalizer and, while the add-on is deleted, the hook work
//!  status   ManifestApplied, Progressing, HookManifestCompleted ─▶ the add-on writer, once
//! ```
//!
//! A step that stops (missing config, unsupported config type, revision not granted, plugin
//! error, trap or timeout, output that is not a Kubernetes object) leaves the existing works
//! as they are and says why in a condition; the later steps do not run. Each work records the
//! plugin revision that rendered it, and once `Progressing` completes the add-on records the
//! revision it applied.

use std::ops::ControlFlow;
use std::sync::Arc;

use flotilla_api::addon::consts::ADDON_PRE_DELETE_FINALIZER;
use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_core::addon::install::is_managed_by_addon_manager;
use flotilla_core::addon::works::deploy_work_index;
use flotilla_wasm::Plugin;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::render::Rendering;
use super::status::{Report, configs_released};
use super::{Context, Deployment, apply, configs, hooks, render, status, works};
use crate::error::Result;
use crate::plugins::Served;

/// Renders, applies and reports one ManagedClusterAddOn.
pub(crate) async fn reconcile(addon: Arc<ManagedClusterAddOn>, ctx: Arc<Context>) -> Result<Action> {
    // As it is about to be: the rollout's release not written yet included.
    let addon = ctx.writer.view(addon);
    let heard = ctx.writer.heard_on_return(crate::Writer::Deploy, &addon);
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    let deleting = addon.meta().deletion_timestamp.is_some();
    let hooked = addon.finalizers().iter().any(|f| f == ADDON_PRE_DELETE_FINALIZER);
    if deleting && !hooked {
        // The works carry the add-on as controller owner; garbage collection removes them.
        works::forget(&ctx, &addon);
        return Ok(Action::await_change());
    }
    let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), &namespace);
    if !caches_show_all(&ctx, &namespace, &name) {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    let cluster = ctx.clusters.get(&ObjectRef::new(&namespace));
    let Some(cluster) = cluster.filter(|c| c.spec.hub_accepts_client) else {
        if deleting {
            // No agent will run the hooks on a cluster that left the hub.
            tracing::warn!(addon = %name, cluster = %namespace, "cluster not accepted; pre-delete hooks skipped");
            hooks::skip(&api, &addon).await?;
        }
        return Ok(Action::await_change());
    };
    if !deleting {
        let cma = ctx.cmas.get(&ObjectRef::new(&name));
        if !cma.is_some_and(|c| is_managed_by_addon_manager(c.metadata.annotations.as_ref())) {
            return Ok(Action::await_change());
        }
    }
    let plugin = match serving_plugin(&ctx, &api, &addon).await? {
        ControlFlow::Continue(plugin) => plugin,
        ControlFlow::Break(action) => return Ok(action),
    };

    let before = addon.status.clone().unwrap_or_default();
    let mut report = Report::new(
        &addon,
        status::with_supported_configs(&before, &plugin),
        Timestamp::now(),
    );
    let outcome = render_and_apply(&ctx, &addon, &cluster, &plugin, &mut report).await;
    let finalizers = match &outcome {
        Ok(Some(rendering)) => hooks::run(&ctx, &addon, rendering, &mut report).await?,
        _ => None,
    };
    if finalizers.is_some() {
        // The finalizer write changes the add-on, so the next reconcile patches the status
        // (or the add-on is gone once its last finalizer is).
        hooks::write_finalizers(&api, &addon, finalizers).await?;
        outcome?;
        return Ok(Action::requeue(ctx.options.resync));
    }
    status::submit(&ctx, &api, &addon, &before, report).await?;
    outcome?;
    if deleting {
        // Waiting for the hook: its work's status wakes this reconcile, the retry bounds it.
        return Ok(Action::requeue(ctx.options.retry));
    }
    if !configs_released(&before) {
        if !ctx
            .writer
            .has_heard(crate::Writer::Rollout, &ObjectRef::from_obj(addon.as_ref()))
        {
            // Nothing said yet: a new add-on's first write waits for what a release brings
            // (the rollout's word brings this reconcile back).
            heard.not_yet();
        }
        // Waiting for the rollout: its status write wakes this reconcile, the retry bounds it
        // (a check that costs no request).
        return Ok(Action::requeue(ctx.options.retry));
    }
    Ok(Action::requeue(ctx.options.resync))
}

/// Whether the caches show everything the add-on `namespace/name` is deployed from, this
/// controller's own last writes of its works included.
fn caches_show_all(ctx: &Context, namespace: &str, name: &str) -> bool {
    // The caches fill before the first answer is trusted: a cluster or CMA missing from a
    // cache still listing would otherwise look deleted.
    if !crate::caches_ready(&ctx.clusters, &ctx.cmas)
        || !flotilla_kube::controller::cache_ready(ctx.works.store())
    {
        return false;
    }
    // The works come from the cache: until it shows this controller's last writes of them,
    // the add-on waits (the work watch brings it back; the requeue bounds the wait).
    !ctx.unseen.pending(
        |w| crate::version_in(ctx.works.store(), w),
        |w| w.namespace.as_deref() == Some(namespace) && deploy_work_index(name, &w.name).is_some(),
    )
}

/// The plugin serving the add-on, or what this reconcile ends with when none does.
async fn serving_plugin(
    ctx: &Context,
    api: &Api<ManagedClusterAddOn>,
    addon: &ManagedClusterAddOn,
) -> Result<ControlFlow<Action, Arc<Plugin>>> {
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    let deleting = addon.meta().deletion_timestamp.is_some();
    Ok(match ctx.plugins.for_addon(&ctx.client, addon).await? {
        Served::By(plugin) => ControlFlow::Continue(plugin),
        Served::Pending(_) | Served::Unavailable(_)
            if deleting && !hooks::plugin_registered(&ctx.client, &name).await? =>
        {
            // Nothing serves the add-on any more, so nothing can render the hooks.
            tracing::warn!(addon = %name, cluster = %namespace, "no plugin; pre-delete hooks skipped");
            hooks::skip(api, addon).await?;
            ControlFlow::Break(Action::await_change())
        }
        // The AddOnPlugin watch (or the rollout releasing a template) brings it back.
        Served::Pending(_) => ControlFlow::Break(Action::requeue(ctx.options.retry)),
        Served::Unavailable(message) => {
            // Say why and keep the works as they are; the retry picks up a template created later.
            status::submit_not_rendered(ctx, api, addon, &message).await?;
            ControlFlow::Break(Action::requeue(ctx.options.retry))
        }
    })
}

/// The steps between reading and the status submission, each setting its conditions in
/// `report`. Returns what is known of the plugin's output when the add-on's works are as it
/// renders them; `None` when a step stopped (the report says why) and the works stay as they
/// are.
async fn render_and_apply(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    cluster: &ManagedCluster,
    plugin: &Plugin,
    report: &mut Report<'_>,
) -> Result<Option<Rendering>> {
    let Some(released) = configs::released(ctx, addon, report).await? else {
        return Ok(None);
    };
    let existing = works::current(ctx, addon);
    if !render::granted(ctx, addon, plugin, &existing, report) {
        return Ok(None);
    }
    let Some(inputs) = render::inputs(addon, cluster, plugin, &released, report) else {
        return Ok(None);
    };
    let last = works::last_deployed(ctx, addon);
    if let Some(rendering) = render::as_last_deployed(addon, &inputs, last.as_ref(), &existing, report) {
        return Ok(Some(rendering));
    }
    let Some(manifests) = render::manifests(ctx, addon, plugin, &inputs, report).await else {
        return Ok(None);
    };
    let Some(plan) = apply::plan(addon, plugin, &manifests, &existing, report) else {
        return Ok(None);
    };
    let left = apply::apply(ctx, addon, &plan, existing, last.as_ref(), report).await?;
    let rendering = Rendering::of(manifests);
    works::remember(
        ctx,
        addon,
        Deployment {
            inputs: inputs.key,
            has_hooks: rendering.has_hooks,
            works: left,
        },
    );
    Ok(Some(rendering))
}
