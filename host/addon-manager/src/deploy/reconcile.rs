//! One reconcile of a ManagedClusterAddOn: read the cluster, CMA, plugin, configs and works;
//! return early when the cluster is not accepted, the add-on is not ours, or the rollout has
//! not released configs to it yet; read the released configs (a config whose spec hash moved on
//! since its release waits: the works stay as they are until the rollout releases the new
//! hash here) and render through the plugin; build the works purely (`flotilla_core::addon::works`); apply
//! only the works that changed; set the conditions from the pure rules
//! (`flotilla_core::addon::status`) and patch status once if it changed.
//!
//! Any failure before the works are built (missing config, unsupported config type, plugin
//! error, trap or timeout, output that is not a Kubernetes object) leaves the existing works as
//! they are and says why in a condition.
//!
//! The plugin revision rolls out like a config (`flotilla_core::addon::revision`): an add-on
//! that has works is rendered only with a revision granted to it (released by the rollout
//! controller, or the one it already applied); otherwise its works stay untouched and only its
//! status follows them. Each work records the revision that rendered it, and once `Progressing`
//! completes the add-on records the revision it applied.

use std::sync::Arc;

use flotilla_api::addon::consts::{
    ADDON_NAME_LABEL, ADDON_PRE_DELETE_FINALIZER, managed_cluster_addon as mca,
};
use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnStatus};
use flotilla_api::addon::v1beta1::{AddOnConfig, ConfigGroupResource, ConfigReference};
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_api::work::consts::CONFIG_SPEC_HASH_ANNOTATION;
use flotilla_api::work::v1::ManifestWork;
use flotilla_core::addon::configs::{
    config_reference_from_v1alpha1, config_reference_to_v1alpha1, first_unsupported, missing_configs_message,
};
use flotilla_core::addon::install::is_managed_by_addon_manager;
use flotilla_core::addon::revision::{
    APPLIED_REVISION_ANNOTATION, AddonRevisions, WORK_REVISION_ANNOTATION, applied_revision, may_render,
};
use flotilla_core::addon::status::{
    HookStep, ProgressingInput, hook_manifest_completed, hook_step, manifests_not_rendered, mark_applied,
    nothing_to_apply, progressing, set_manifest_applied, with_pre_delete_finalizer,
    without_pre_delete_finalizer, work_not_applied, works_not_built,
};
use flotilla_core::addon::works::{
    AddonIdentity, AgentManifest, WORK_SPEC_HASH_ANNOTATION, deploy_work_index, deploy_works,
    hook_work_completed, manifest_configs, pre_delete_hook, pre_delete_work, with_crd_defaults,
    work_spec_hash,
};
use flotilla_core::conditions::{self, NewCondition};
use flotilla_kube::events::{self, ConditionEvent};
use flotilla_wasm::inputs;
use flotilla_wasm::types::ResolvedConfig;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;

use super::{Context, Deployment, LeftWork};
use crate::configs::observed;
use crate::error::{self, Result};
use crate::feeds::{OBSERVED_SPEC_HASH, slim_work};
use crate::plugins::Served;

/// The add-on conditions whose changes the deploy reports as Events on the add-on, with OCM's
/// reasons: `ManifestApplied` (`AddonManifestApplied`, `ManifestWorkApplyFailed`, ...) and
/// `Progressing` (`Progressing`, `Completed`, `Failed`, ...).
const DEPLOY_EVENTS: &[ConditionEvent] = &[
    ConditionEvent {
        type_: mca::CONDITION_MANIFEST_APPLIED,
        action: "Deploy",
        warning: events::when_false,
    },
    ConditionEvent {
        type_: mca::CONDITION_PROGRESSING,
        action: "Deploy",
        warning: progress_failed,
    },
];

/// `Progressing` is a Warning only when the rollout to the add-on failed.
fn progress_failed(condition: &Condition) -> bool {
    condition.reason == mca::REASON_FAILED
}

/// Fills in `work` the CRD's defaults and records the hash of its spec, for [`unchanged`].
fn stamp_spec_hash(work: &mut ManifestWork) {
    with_crd_defaults(&mut work.spec);
    if let Some(hash) = work_spec_hash(&work.spec) {
        work.annotations_mut()
            .insert(WORK_SPEC_HASH_ANNOTATION.to_owned(), hash);
    }
}

/// Whether `existing` (as the work cache keeps it, [`slim_work`]) already is `desired`
/// (stamped by [`stamp_spec_hash`]) as far as the add-on manager owns it: the same spec hash
/// applied, and the spec read back still the one applied, or the one the apiserver answered
/// to this process's last write of it, `answered` (another manager's fields, which a forced
/// apply leaves, are then no change). A hand edit on the hub changes the spec and is reverted.
fn unchanged(existing: &ManifestWork, desired: &ManifestWork, answered: Option<&str>) -> bool {
    let annotation =
        |w: &ManifestWork, key: &str| w.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    let observed = annotation(existing, OBSERVED_SPEC_HASH);
    observed.is_some()
        && (observed == annotation(desired, WORK_SPEC_HASH_ANNOTATION) || observed.as_deref() == answered)
        && [
            CONFIG_SPEC_HASH_ANNOTATION,
            WORK_REVISION_ANNOTATION,
            WORK_SPEC_HASH_ANNOTATION,
        ]
        .iter()
        .all(|key| annotation(existing, key) == annotation(desired, key))
        && existing.labels().get(ADDON_NAME_LABEL) == desired.labels().get(ADDON_NAME_LABEL)
        && desired
            .owner_references()
            .iter()
            .all(|o| existing.owner_references().iter().any(|e| e.uid == o.uid))
}

/// What of a deploy work (as the cache keeps it) the deploy compares with how it left the work:
/// all but its status, finalizers and resourceVersion.
fn work_fingerprint(work: &ManifestWork) -> Option<u64> {
    crate::hash_of(&(
        &work.metadata.name,
        &work.metadata.labels,
        &work.metadata.annotations,
        &work.metadata.owner_references,
        work.metadata.deletion_timestamp.is_some(),
        &work.spec,
    ))
}

/// How `last` left work `name`.
fn left_work<'a>(last: &'a Deployment, name: &str) -> Option<&'a LeftWork> {
    last.works
        .iter()
        .find(|(work, _)| work == name)
        .map(|(_, left)| left)
}

/// Whether `works`, an add-on's deploy works now, are the ones `last` left, each as it left it.
fn as_left(last: &Deployment, works: &[ManifestWork]) -> bool {
    works.len() == last.works.len()
        && works.iter().all(|w| {
            left_work(last, &w.name_any()).is_some_and(|left| Some(left.fingerprint) == work_fingerprint(w))
        })
}

/// Renders, applies and reports one ManagedClusterAddOn.
pub(crate) async fn reconcile(addon: Arc<ManagedClusterAddOn>, ctx: Arc<Context>) -> Result<Action> {
    // As it is about to be: the rollout's release not written yet included.
    let addon = ctx.writer.view(addon);
    let heard = ctx.writer.heard_on_return(crate::Writer::Deploy, &addon);
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    let requeue = Action::requeue(ctx.options.resync);
    let deleting = addon.meta().deletion_timestamp.is_some();
    let hooked = addon.finalizers().iter().any(|f| f == ADDON_PRE_DELETE_FINALIZER);
    if deleting && !hooked {
        // The works carry the add-on as controller owner; garbage collection removes them.
        if let Ok(mut deployed) = ctx.deployed.lock() {
            deployed.remove(&format!("{namespace}/{name}"));
        }
        return Ok(Action::await_change());
    }
    let client = &ctx.client;
    let api: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), &namespace);
    // The caches fill before the first answer is trusted: a cluster or CMA missing from a
    // cache still listing would otherwise look deleted.
    if !crate::caches_ready(&ctx.clusters, &ctx.cmas)
        || !flotilla_kube::controller::cache_ready(ctx.works.store())
    {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    // The works come from the cache: until it shows this controller's last writes of them,
    // the add-on waits (the work watch brings it back; the requeue bounds the wait).
    if ctx.unseen.pending(
        |w| crate::version_in(ctx.works.store(), w),
        |w| w.namespace.as_deref() == Some(namespace.as_str()) && deploy_work_index(&name, &w.name).is_some(),
    ) {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    let cluster = ctx.clusters.get(&ObjectRef::new(&namespace));
    let Some(cluster) = cluster.filter(|c| c.spec.hub_accepts_client) else {
        if deleting {
            // No agent will run the hooks on a cluster that left the hub.
            tracing::warn!(addon = %name, cluster = %namespace, "cluster not accepted; pre-delete hooks skipped");
            write_finalizers(&api, &addon, without_pre_delete_finalizer(addon.finalizers())).await?;
        }
        return Ok(Action::await_change());
    };
    if !deleting {
        let cma = ctx.cmas.get(&ObjectRef::new(&name));
        if !cma.is_some_and(|c| is_managed_by_addon_manager(c.metadata.annotations.as_ref())) {
            return Ok(Action::await_change());
        }
    }
    let plugin = match ctx.plugins.for_addon(client, &addon).await? {
        Served::By(plugin) => plugin,
        Served::Pending(_) | Served::Unavailable(_)
            if deleting && !plugin_registered(client, &name).await? =>
        {
            // Nothing serves the add-on any more, so nothing can render the hooks.
            tracing::warn!(addon = %name, cluster = %namespace, "no plugin; pre-delete hooks skipped");
            write_finalizers(&api, &addon, without_pre_delete_finalizer(addon.finalizers())).await?;
            return Ok(Action::await_change());
        }
        Served::Pending(_) => {
            // The AddOnPlugin watch (or the rollout releasing a template) brings it back.
            return Ok(Action::requeue(ctx.options.retry));
        }
        Served::Unavailable(message) => {
            // Say why and keep the works as they are; the retry picks up a template created later.
            let before = addon.status.clone().unwrap_or_default();
            let mut status = before.clone();
            set(&mut status, manifests_not_rendered(&message), Timestamp::now());
            ctx.writer
                .submit(crate::Writer::Deploy, &api, &addon, &status, &[])?;
            ctx.events
                .conditions(
                    addon.as_ref(),
                    &before.conditions,
                    &status.conditions,
                    DEPLOY_EVENTS,
                )
                .await;
            return Ok(Action::requeue(ctx.options.retry));
        }
    };

    let status = addon.status.clone().unwrap_or_default();
    let mut desired_status = ManagedClusterAddOnStatus {
        supported_configs: plugin
            .options()
            .supported_configs
            .iter()
            .map(|c| ConfigGroupResource {
                group: c.group.clone(),
                resource: c.resource.clone(),
            })
            .collect(),
        ..status.clone()
    };
    let now = Timestamp::now();
    let mut applied = None;
    let outcome = render_and_apply(
        &ctx,
        &addon,
        &cluster,
        &plugin,
        &mut desired_status,
        &mut applied,
        now,
    )
    .await;
    let finalizers = match &outcome {
        Ok(Some(rendering)) => hooks(&ctx, &addon, rendering, &mut desired_status, now).await?,
        _ => None,
    };
    if finalizers.is_some() {
        // The finalizer write changes the add-on, so the next reconcile patches the status
        // (or the add-on is gone once its last finalizer is).
        write_finalizers(&api, &addon, finalizers).await?;
        outcome?;
        return Ok(requeue);
    }
    // Until the rollout releases configs, supportedConfigs alone is not written: it goes out
    // with the first status the add-on needs anyway, one write (and conflict) less per new add-on.
    let only_supported_configs = ManagedClusterAddOnStatus {
        supported_configs: status.supported_configs.clone(),
        ..desired_status.clone()
    } == status;
    let write_status = configs_released(&desired_status) || !only_supported_configs;
    let applied_revision: Vec<(&str, &str)> = applied
        .as_deref()
        .map(|revision| (APPLIED_REVISION_ANNOTATION, revision))
        .into_iter()
        .collect();
    if write_status || !applied_revision.is_empty() {
        let submitted = if write_status { &desired_status } else { &status };
        ctx.writer
            .submit(crate::Writer::Deploy, &api, &addon, submitted, &applied_revision)?;
    }
    if write_status {
        ctx.events
            .conditions(
                addon.as_ref(),
                &status.conditions,
                &desired_status.conditions,
                DEPLOY_EVENTS,
            )
            .await;
    }
    outcome?;
    if deleting {
        // Waiting for the hook: its work's status wakes this reconcile, the retry bounds it.
        return Ok(Action::requeue(ctx.options.retry));
    }
    if !configs_released(&status) {
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
    Ok(requeue)
}

/// Whether an AddOnPlugin drives add-on `addon` (loaded here or not).
async fn plugin_registered(client: &kube::Client, addon: &str) -> Result<bool> {
    let plugins = Api::<AddOnPlugin>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(error::read("AddOnPlugins"))?;
    Ok(plugins
        .items
        .iter()
        .any(|p| crate::plugin::addon_name(p) == addon))
}

/// Replaces the add-on's finalizers with `finalizers` (None: nothing to write).
async fn write_finalizers(
    api: &Api<ManagedClusterAddOn>,
    addon: &ManagedClusterAddOn,
    finalizers: Option<Vec<String>>,
) -> Result<()> {
    if let Some(finalizers) = finalizers {
        flotilla_kube::finalizer::replace(api, addon, finalizers).await?;
    }
    Ok(())
}

/// The pre-delete hook step (OCM's order): no hook in the output drops the finalizer; a hook
/// adds it; while the add-on is deleted, the hook work is applied and, once its hooks report
/// completion, `HookManifestCompleted` turns True and the finalizer goes. Returns the new
/// finalizers when they change.
async fn hooks(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    rendering: &Rendering,
    status: &mut ManagedClusterAddOnStatus,
    now: Timestamp,
) -> Result<Option<Vec<String>>> {
    let finalizers = addon.finalizers();
    let deleting = addon.meta().deletion_timestamp.is_some();
    match hook_step(rendering.has_hooks, finalizers, deleting) {
        HookStep::RemoveFinalizer => Ok(without_pre_delete_finalizer(finalizers)),
        HookStep::AddFinalizer => Ok(with_pre_delete_finalizer(finalizers)),
        HookStep::Wait => Ok(None),
        HookStep::RunHooks => {
            let namespace = addon.namespace().unwrap_or_default();
            let identity = AddonIdentity {
                name: addon.name_any(),
                namespace: namespace.clone(),
                uid: addon.uid().unwrap_or_default(),
            };
            let Some(mut work) = pre_delete_work(&identity, &rendering.manifests) else {
                return Ok(without_pre_delete_finalizer(finalizers));
            };
            stamp_spec_hash(&mut work);
            let work_name = work.name_any();
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
            set(status, hook_manifest_completed(&work_name, completed), now);
            if completed {
                tracing::info!(addon = %identity.name, cluster = %namespace, "pre-delete hooks completed");
                return Ok(without_pre_delete_finalizer(finalizers));
            }
            Ok(None)
        }
    }
}

/// Whether the rollout has released configs to the add-on of `status` (`Configured` True, or
/// config references it wrote).
fn configs_released(status: &ManagedClusterAddOnStatus) -> bool {
    conditions::find(&status.conditions, mca::CONDITION_CONFIGURED)
        .is_some_and(|c| c.status == conditions::TRUE || !status.config_references.is_empty())
}

/// Sets `condition` in `status`.
fn set(status: &mut ManagedClusterAddOnStatus, condition: NewCondition<'_>, now: Timestamp) {
    conditions::set(&mut status.conditions, condition, now);
}

/// What a reconcile knows of the plugin's output after [`render_and_apply`].
pub(crate) struct Rendering {
    /// Whether the output has pre-delete hooks.
    has_hooks: bool,
    /// The validated output; empty when the add-on was not rendered again because nothing it
    /// depends on changed (never so for an add-on being deleted, whose hooks need it).
    manifests: Vec<AgentManifest>,
}

/// Everything between reading and the status patch; conditions go into `status`, and the
/// plugin revision the works applied (once `Progressing` completed) into `applied`. Returns
/// what is known of the plugin's output when the add-on's works are as it renders them.
async fn render_and_apply(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    cluster: &ManagedCluster,
    plugin: &flotilla_wasm::Plugin,
    status: &mut ManagedClusterAddOnStatus,
    applied: &mut Option<String>,
    now: Timestamp,
) -> Result<Option<Rendering>> {
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    let client = &ctx.client;
    let works_api: Api<ManifestWork> = Api::namespaced(client.clone(), &namespace);
    // The add-on's deploy works, from the cache (which holds every write of this controller).
    let current_works = || -> Vec<ManifestWork> {
        ctx.works
            .objects(&namespace)
            .iter()
            .filter(|w| deploy_work_index(&name, &w.name_any()).is_some())
            .map(|w| ManifestWork::clone(w))
            .collect()
    };
    let revisions = AddonRevisions::from_annotations(addon.metadata.annotations.as_ref());
    // Returns the plugin revision the works applied, once completed.
    let progress = |status: &mut ManagedClusterAddOnStatus,
                    works: &[ManifestWork],
                    references: &mut Vec<ConfigReference>,
                    unsupported| {
        let outcome = progressing(ProgressingInput {
            addon_name: &name,
            unsupported,
            conditions: &status.conditions,
            hosted: false,
            works,
            config_references: references,
            plugin_revision: revisions.released,
        });
        if outcome.completed {
            mark_applied(references);
        }
        set(status, outcome.condition, now);
        outcome
            .completed
            .then(|| applied_revision(works).map(str::to_owned))
            .flatten()
    };

    // Configs: unsupported types are refused before anything is looked up.
    let supported = status.supported_configs.clone();
    if let Some(gr) = first_unsupported(&addon.spec.configs, &supported) {
        let mut references: Vec<ConfigReference> = status
            .config_references
            .iter()
            .map(config_reference_from_v1alpha1)
            .collect();
        let works = current_works();
        *applied = progress(status, &works, &mut references, Some(gr));
        return Ok(None);
    }
    // Configs: only those the rollout released to this cluster (status.configReferences), and
    // only while each object still has the released spec hash; a config that moved on waits
    // for the rollout to release it here.
    if !configs_released(status) {
        return Ok(None);
    }
    let mut references: Vec<ConfigReference> = status
        .config_references
        .iter()
        .map(config_reference_from_v1alpha1)
        .collect();
    // Each released object with the resource its reference names it by (the apiserver's).
    let mut objects: Vec<(Value, String)> = Vec::new();
    let mut missing: Vec<AddOnConfig> = Vec::new();
    let mut moved_on = false;
    for reference in &references {
        let Some(desired) = reference.desired_config.as_ref() else {
            continue;
        };
        match ctx
            .configs
            .get(
                client,
                &reference.group_resource,
                &desired.referent,
                &desired.spec_hash,
            )
            .await?
        {
            None => missing.push(AddOnConfig {
                group_resource: reference.group_resource.clone(),
                referent: desired.referent.clone(),
            }),
            Some(object) => {
                moved_on |= observed(&object).is_none_or(|o| o.spec_hash != desired.spec_hash);
                objects.push((object, reference.group_resource.resource.clone()));
            }
        }
    }
    if !missing.is_empty() {
        set(
            status,
            manifests_not_rendered(&missing_configs_message(&missing)),
            now,
        );
        return Ok(None);
    }
    // Being deleted, the add-on leaves the rollout: its hooks render with the configs as they are.
    if moved_on && addon.meta().deletion_timestamp.is_none() {
        let works = current_works();
        *applied = progress(status, &works, &mut references, None);
        status.config_references = references.iter().map(config_reference_to_v1alpha1).collect();
        return Ok(None);
    }
    // A plugin revision not granted to this add-on yet waits for the rollout too: its works
    // stay as the last granted revision rendered them, and its status follows them. Only
    // AddOnPlugin revisions roll out so; a built-in template instance changes with its
    // AddOnTemplate, which the rollout releases as a config.
    let existing = current_works();
    let serving = plugin.digest().to_string();
    let gated = ctx.plugins.loaded(&name).is_some();
    if gated
        && !may_render(revisions, &serving, !existing.is_empty())
        && addon.meta().deletion_timestamp.is_none()
    {
        set_manifest_applied(&mut status.conditions, &existing, now);
        *applied = progress(status, &existing, &mut references, None);
        status.config_references = references.iter().map(config_reference_to_v1alpha1).collect();
        return Ok(None);
    }

    // Render.
    let mut plugin_configs: Vec<ResolvedConfig> = Vec::new();
    for (object, resource) in &objects {
        match inputs::resolved_config(object, Some(resource)) {
            Ok(config) => plugin_configs.push(config),
            Err(e) => {
                set(status, manifests_not_rendered(&e.to_string()), now);
                return Ok(None);
            }
        }
    }
    let cluster_input = inputs::cluster(cluster);
    let default_ns = plugin.options().default_install_namespace.as_deref();
    let addon_input = inputs::addon(addon, &plugin_configs, default_ns);
    // The same inputs to the same plugin revision give the same output: the plugin is called
    // only when something it sees changed, not for every status write that wakes this reconcile.
    let key = crate::fingerprint(&[
        &addon.uid().unwrap_or_default(),
        &plugin.digest(),
        &cluster_input,
        &addon_input,
        &plugin_configs,
    ]);
    let id = format!("{namespace}/{name}");
    let last = ctx.deployed.lock().ok().and_then(|d| d.get(&id).cloned());
    if let Some(last) = &last
        && last.inputs == key
        && addon.meta().deletion_timestamp.is_none()
        && as_left(last, &existing)
    {
        // Nothing the output depends on changed and the works are as the last apply left
        // them: the plugin is not called, nothing is applied, the status follows the works.
        if existing.is_empty() {
            set(status, nothing_to_apply(), now);
        } else {
            set_manifest_applied(&mut status.conditions, &existing, now);
        }
        *applied = progress(status, &existing, &mut references, None);
        status.config_references = references.iter().map(config_reference_to_v1alpha1).collect();
        return Ok(Some(Rendering {
            has_hooks: last.has_hooks,
            manifests: Vec::new(),
        }));
    }
    // The semaphore is never closed, so acquiring only waits for a free slot.
    let permit = ctx.renders.acquire().await.ok();
    let rendered = plugin
        .manifests(&cluster_input, &addon_input, &plugin_configs)
        .await;
    drop(permit);
    let manifests = match rendered {
        Ok(manifests) => manifests,
        Err(e) => {
            tracing::warn!(addon = %name, cluster = %namespace, error = %e, "plugin manifests() failed; last good works kept");
            set(status, manifests_not_rendered(&e.to_string()), now);
            return Ok(None);
        }
    };

    // Build and apply.
    let identity = AddonIdentity {
        name: name.clone(),
        namespace: namespace.clone(),
        uid: addon.uid().unwrap_or_default(),
    };
    // The work agent reports the status feedback the add-on's health prober reads.
    let health = &plugin.options().health;
    let probes = crate::health::probe_configs(health);
    let configs = manifest_configs(crate::health::probe_feedback(health, &probes), &manifests, &[]);
    let mut plan = match deploy_works(&identity, &manifests, &existing, &configs, &references) {
        Ok(plan) => plan,
        Err(e) => {
            set(status, works_not_built(&e.to_string()), now);
            return Ok(None);
        }
    };
    for work in &mut plan.apply {
        work.annotations_mut()
            .insert(WORK_REVISION_ANNOTATION.to_owned(), serving.clone());
        stamp_spec_hash(work);
    }
    let nothing = plan.apply.is_empty() && plan.delete.is_empty() && existing.is_empty();
    // The works as they are after the writes: the apiserver's answers replace the listed ones.
    let mut works = existing;
    let answered = |work: &str| left_work(last.as_ref()?, work)?.answered.clone();
    let mut answers: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for work in &plan.apply {
        let work_name = work.name_any();
        let before = answered(&work_name);
        if works
            .iter()
            .any(|e| e.name_any() == work_name && unchanged(e, work, before.as_deref()))
        {
            answers.extend(before.map(|hash| (work_name, hash)));
            continue;
        }
        let params = PatchParams::apply(crate::FIELD_MANAGER).force();
        let written = match works_api.patch(&work_name, &params, &Patch::Apply(work)).await {
            Ok(mut written) => {
                slim_work(&mut written);
                let observed = written.annotations().get(OBSERVED_SPEC_HASH);
                if observed != work.annotations().get(WORK_SPEC_HASH_ANNOTATION) {
                    answers.extend(observed.map(|hash| (work_name.clone(), hash.clone())));
                }
                let before = works.iter().find(|w| w.name_any() == work_name);
                let stale = vec![before.and_then(|w| w.resource_version())];
                ctx.unseen.record(ObjectRef::from_obj(&written), stale);
                written
            }
            Err(e) => {
                set(status, work_not_applied(&e.to_string()), now);
                return Err(error::write(format!("ManifestWork {namespace}/{work_name}"))(e));
            }
        };
        works.retain(|w| w.name_any() != work_name);
        works.push(written);
        tracing::info!(addon = %name, cluster = %namespace, work = %work_name, "deploy work applied");
    }
    for work_name in &plan.delete {
        match works_api.delete(work_name, &DeleteParams::default()).await {
            Ok(_) => {
                if let Some(gone) = works.iter().find(|w| &w.name_any() == work_name) {
                    ctx.unseen
                        .record(ObjectRef::from_obj(gone), vec![gone.resource_version()]);
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(error::write(format!("ManifestWork {namespace}/{work_name}"))(e)),
        }
        works.retain(|w| &w.name_any() != work_name);
    }
    works.sort_by_key(|w| w.name_any());
    let left = works
        .iter()
        .filter_map(|w| {
            let name = w.name_any();
            let fingerprint = work_fingerprint(w)?;
            let answered = answers.remove(&name);
            Some((
                name,
                LeftWork {
                    fingerprint,
                    answered,
                },
            ))
        })
        .collect();
    if let Ok(mut deployed) = ctx.deployed.lock() {
        let has_hooks = manifests.iter().any(|m| pre_delete_hook(m).is_some());
        deployed.insert(
            id,
            Deployment {
                inputs: key,
                has_hooks,
                works: left,
            },
        );
    }

    // Report.
    if nothing {
        set(status, nothing_to_apply(), now);
    } else {
        set_manifest_applied(&mut status.conditions, &works, now);
    }
    *applied = progress(status, &works, &mut references, None);
    status.config_references = references.iter().map(config_reference_to_v1alpha1).collect();
    Ok(Some(Rendering {
        has_hooks: manifests.iter().any(|m| pre_delete_hook(m).is_some()),
        manifests,
    }))
}
