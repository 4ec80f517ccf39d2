//! Second step: the plugin's `manifests()` output for the add-on. The plugin revision rolls out
//! like a config (`flotilla_core::addon::revision`): an add-on that has works renders only
//! with a revision granted to it, so a new revision reaches the clusters batch by batch.
//! Rendering is skipped when nothing the output depends on changed and the works are as the
//! last apply left them: most reconciles are woken by status writes, and a plugin call costs
//! a sandboxed instance. A plugin fault keeps the last good works and says why in a condition.

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::work::v1::ManifestWork;
use flotilla_core::addon::revision::{AddonRevisions, may_render};
use flotilla_core::addon::status::manifests_not_rendered;
use flotilla_core::addon::works::{AgentManifest, pre_delete_hook};
use flotilla_wasm::types::{Addon, Cluster, ResolvedConfig};
use flotilla_wasm::{Plugin, inputs};
use kube::{Resource, ResourceExt};

use super::configs::Released;
use super::status::Report;
use super::{Context, Deployment, works};

/// What a reconcile knows of the plugin's output after rendering.
pub(super) struct Rendering {
    /// Whether the output has pre-delete hooks.
    pub(super) has_hooks: bool,
    /// The validated output; empty when the add-on was not rendered again because nothing it
    /// depends on changed (never so for an add-on being deleted, whose hooks need it).
    pub(super) manifests: Vec<AgentManifest>,
}

impl Rendering {
    /// What is known of `manifests`, the plugin's output.
    pub(super) fn of(manifests: Vec<AgentManifest>) -> Self {
        Rendering {
            has_hooks: manifests.iter().any(|m| pre_delete_hook(m).is_some()),
            manifests,
        }
    }
}

/// Whether the add-on may render with `plugin`, the revision serving it. A revision not
/// granted to it yet waits for the rollout: its works (`existing`) stay as the last granted
/// revision rendered them, and its status follows them. Only AddOnPlugin revisions roll out
/// so; a built-in template instance changes with its AddOnTemplate, which the rollout
/// releases as a config. Being deleted, the add-on leaves the rollout.
pub(super) fn granted(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    plugin: &Plugin,
    existing: &[ManifestWork],
    report: &mut Report<'_>,
) -> bool {
    let revisions = AddonRevisions::from_annotations(addon.metadata.annotations.as_ref());
    let gated = ctx.plugins.loaded(&addon.name_any()).is_some();
    if gated
        && !may_render(revisions, &plugin.digest().to_string(), !existing.is_empty())
        && addon.meta().deletion_timestamp.is_none()
    {
        report.follow_applied(existing, false);
        return false;
    }
    true
}

/// What the plugin is called with.
pub(super) struct Inputs {
    cluster: Cluster,
    addon: Addon,
    configs: Vec<ResolvedConfig>,
    /// The fingerprint of all of it and the plugin revision: the same inputs to the same
    /// revision give the same output ([`Deployment::inputs`]).
    pub(super) key: u64,
}

/// The plugin's inputs for the add-on on `cluster` with the `released` configs, or `None`
/// when a config cannot be given to the plugin (the report says why).
pub(super) fn inputs(
    addon: &ManagedClusterAddOn,
    cluster: &ManagedCluster,
    plugin: &Plugin,
    released: &[Released],
    report: &mut Report<'_>,
) -> Option<Inputs> {
    let mut configs: Vec<ResolvedConfig> = Vec::new();
    for (object, resource) in released {
        match inputs::resolved_config(object, Some(resource)) {
            Ok(config) => configs.push(config),
            Err(e) => {
                report.set(manifests_not_rendered(&e.to_string()));
                return None;
            }
        }
    }
    let cluster = inputs::cluster(cluster);
    let default_ns = plugin.options().default_install_namespace.as_deref();
    let addon_input = inputs::addon(addon, &configs, default_ns);
    let key = crate::fingerprint(&[
        &addon.uid().unwrap_or_default(),
        &plugin.digest(),
        &cluster,
        &addon_input,
        &configs,
    ]);
    Some(Inputs {
        cluster,
        addon: addon_input,
        configs,
        key,
    })
}

/// What is known of the output when `last` rendered the same `inputs` and the works
/// (`existing`) are as its apply left them: the plugin is not called, nothing is applied, and
/// the status follows the works. `None` when the add-on renders again (always so while it is
/// deleted: its hooks need the output).
pub(super) fn as_last_deployed(
    addon: &ManagedClusterAddOn,
    inputs: &Inputs,
    last: Option<&Deployment>,
    existing: &[ManifestWork],
    report: &mut Report<'_>,
) -> Option<Rendering> {
    let last = last.filter(|last| {
        last.inputs == inputs.key
            && addon.meta().deletion_timestamp.is_none()
            && works::as_left(last, existing)
    })?;
    report.follow_applied(existing, existing.is_empty());
    Some(Rendering {
        has_hooks: last.has_hooks,
        manifests: Vec::new(),
    })
}

/// Calls the plugin's `manifests()`, as many at once as [`crate::Options::max_concurrent_renders`]
/// allows; `None` when it fails (the report says why).
pub(super) async fn manifests(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    plugin: &Plugin,
    inputs: &Inputs,
    report: &mut Report<'_>,
) -> Option<Vec<AgentManifest>> {
    // The semaphore is never closed, so acquiring only waits for a free slot.
    let permit = ctx.renders.acquire().await.ok();
    let rendered = plugin
        .manifests(&inputs.cluster, &inputs.addon, &inputs.configs)
        .await;
    drop(permit);
    match rendered {
        Ok(manifests) => Some(manifests),
        Err(e) => {
            let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
            tracing::warn!(addon = %name, cluster = %namespace, error = %e, "plugin manifests() failed; last good works kept");
            report.set(manifests_not_rendered(&e.to_string()));
            None
        }
    }
}
