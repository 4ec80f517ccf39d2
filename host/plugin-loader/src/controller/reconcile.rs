//! One reconcile of an `AddOnPlugin`, in the usual shape: return early when deleting (unload,
//! drop the finalizer), make sure of the finalizer, then
//!
//! 1. claim the add-on name (or report the conflict);
//! 2. skip the fetch when the serving revision already has the pinned digest and limits, or was
//!    fetched for this generation within the resync period and its source has not changed;
//! 3. fetch → load beside the serving revision → swap (all inside [`flotilla_wasm::PluginSlot::install`],
//!    which never replaces the serving revision with a bad one);
//! 4. compute the status from the outcome, the serving revision and its runtime faults
//!    ([`super::status`], pure);
//! 5. patch status once if it changed; requeue (backoff on failure, resync on success).

use std::sync::Arc;

use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::status::{Outcome, apply_faults, desired_status};
use super::{Context, FINALIZER, ReconcileError};
use crate::{Digest, Limits};

/// Reconciles one `AddOnPlugin`. See the module docs for the steps.
pub async fn reconcile(plugin: Arc<AddOnPlugin>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let api: Api<AddOnPlugin> = Api::all(ctx.client.clone());
    let name = plugin.name_any();
    let addon = plugin.addon_name();

    if plugin.metadata.deletion_timestamp.is_some() {
        unload(&ctx, &name);
        flotilla_kube::finalizer::remove(&api, &plugin, &[FINALIZER]).await?;
        return Ok(Action::await_change());
    }
    if flotilla_kube::finalizer::add(&api, &plugin, FINALIZER)
        .await?
        .is_some()
    {
        // The write changes the object; the watch brings it back with the finalizer.
        return Ok(Action::await_change());
    }

    let outcome = match claim(&ctx, &name, &addon) {
        Err(owner) => Outcome::Conflict { owner },
        Ok(()) => attempt(&plugin, &ctx, &addon).await,
    };
    let serving = match &outcome {
        Outcome::Conflict { .. } => None,
        _ => ctx.registry.get(&addon),
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut status = desired_status(&plugin, &outcome, serving.as_deref(), now);
    apply_faults(
        &mut status,
        serving.as_deref().map(crate::Plugin::faults).as_ref(),
        ctx.registry.runtime().fault_policy().window.as_secs(),
        plugin.metadata.generation,
        now,
    );
    flotilla_kube::status::patch_if_changed(&api, &plugin, plugin.status.as_ref(), &status).await?;

    let action = if outcome.failed() {
        let n = {
            let mut state = ctx.state();
            let n = state.failures.entry(name.clone()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        let delay = ctx.backoff(n);
        tracing::info!(plugin = %name, %addon, failures = n, ?delay, reason = outcome.reason(),
            "AddOnPlugin not applied; retrying");
        Action::requeue(delay)
    } else {
        ctx.state().failures.remove(&name);
        Action::requeue(ctx.config.resync)
    };
    Ok(action)
}

/// Records that `plugin` drives `addon`, unless another plugin already does (returned as `Err`).
/// A plugin whose `addOnName` changed releases its old add-on and unloads it.
fn claim(ctx: &Context, plugin: &str, addon: &str) -> Result<(), String> {
    let mut state = ctx.state();
    if let Some(owner) = state.owners.get(addon)
        && owner != plugin
    {
        return Err(owner.clone());
    }
    let previous: Vec<String> = state
        .owners
        .iter()
        .filter(|(a, p)| p.as_str() == plugin && a.as_str() != addon)
        .map(|(a, _)| a.clone())
        .collect();
    for old in previous {
        state.owners.remove(&old);
        ctx.registry.remove(&old);
        tracing::info!(plugin, addon = %old, "AddOnPlugin now drives another add-on; old one unloaded");
    }
    state.owners.insert(addon.to_owned(), plugin.to_owned());
    ctx.registry.claim(addon, plugin);
    Ok(())
}

/// Forgets `plugin` and unloads the add-on it drove.
fn unload(ctx: &Context, plugin: &str) {
    let mut state = ctx.state();
    state.failures.remove(plugin);
    state.fetched.remove(plugin);
    state.stale.remove(plugin);
    let addons: Vec<String> = state
        .owners
        .iter()
        .filter(|(_, p)| p.as_str() == plugin)
        .map(|(a, _)| a.clone())
        .collect();
    for addon in addons {
        state.owners.remove(&addon);
        if ctx.registry.remove(&addon).is_some() {
            tracing::info!(plugin, %addon, "AddOnPlugin deleted; plugin unloaded");
        }
    }
}

/// The spec's limits as runtime limits (negative values, which the CRD forbids, count as unset).
pub(crate) fn limits_of(plugin: &AddOnPlugin) -> Limits {
    let l = &plugin.spec.limits;
    Limits::from_spec(
        u64::try_from(l.timeout_millis).ok(),
        u64::try_from(l.memory_mib).ok(),
        u64::try_from(l.max_output_bytes).ok(),
    )
}

/// Fetch, load and swap; never touches the serving revision on failure.
async fn attempt(plugin: &AddOnPlugin, ctx: &Context, addon: &str) -> Outcome {
    let expected = match plugin
        .spec
        .digest
        .as_deref()
        .map(str::parse::<Digest>)
        .transpose()
    {
        Ok(d) => d,
        Err(e) => return Outcome::FetchFailed(e.into()),
    };
    // Before the serving revision may stand: a spec that now names a Secret elsewhere is
    // refused even if the bytes are unchanged.
    if let Err(refusal) = flotilla_core::plugin_sources::check(&plugin.spec, &ctx.config.secrets_namespace) {
        tracing::warn!(plugin = %plugin.name_any(), addon, %refusal, "refusing the plugin's sources");
        return Outcome::FetchFailed(refusal.into());
    }
    let limits = limits_of(plugin);
    let slot = ctx.registry.slot(addon);
    let name = plugin.name_any();
    // Unchanged spec, source not changed since, fetched within the resync period: the serving
    // revision stands. (Status writes, fault reports included, wake this reconcile too; they
    // must not re-pull the component.)
    if let Some(current) = slot.current()
        && *current.limits() == limits
        && ctx.fetched_recently(&name, plugin.metadata.generation)
    {
        return Outcome::Serving(current);
    }
    // A required signature is checked on every attempt (it may have been added to the spec, or
    // the key changed), so only unsigned pinned plugins skip the fetch.
    if plugin.spec.verification.is_none()
        && let (Some(expected), Some(current)) = (expected, slot.current())
        && current.digest() == expected
        && *current.limits() == limits
    {
        return Outcome::Serving(current);
    }
    let fetched = match ctx
        .fetcher
        .fetch(&plugin.spec.source, plugin.spec.verification.as_ref(), expected)
        .await
    {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(plugin = %plugin.name_any(), addon, error = %e, "cannot fetch plugin");
            return Outcome::FetchFailed(e);
        }
    };
    let digest = fetched.component.digest();
    tracing::debug!(plugin = %plugin.name_any(), addon, origin = %fetched.origin, %digest, "plugin fetched");
    match slot
        .install(ctx.registry.runtime(), fetched.component, limits)
        .await
    {
        Ok(p) => {
            ctx.record_fetch(&name, plugin.metadata.generation);
            Outcome::Serving(p)
        }
        Err(error) => Outcome::Refused { digest, error },
    }
}
